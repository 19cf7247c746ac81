/*
 * json_skim.c — sc_json_skim.h: the skimmer the analyzer's metadata lookups and the
 * trainer's checkpoint manifest reader share (each used to carry its own copy).
 */
#include <string.h>

#include "sc_json_skim.h"

const char *sc_json_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  return p;
}

const char *sc_json_skip_string(const char *p) {
  p++;
  while (*p && *p != '"') {
    if (*p == '\\' && p[1]) p++;
    p++;
  }
  return *p == '"' ? p + 1 : NULL;
}

static const char *skip_value(const char *p, int depth) {
  p = sc_json_ws(p);
  if (depth > 64) return NULL;
  if (*p == '"') return sc_json_skip_string(p);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = sc_json_ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        if (*p != '"') return NULL;
        p = sc_json_skip_string(p);
        if (!p) return NULL;
        p = sc_json_ws(p);
        if (*p != ':') return NULL;
        p++;
      }
      p = skip_value(p, depth + 1);
      if (!p) return NULL;
      p = sc_json_ws(p);
      if (*p == ',') {
        p = sc_json_ws(p + 1);
        continue;
      }
      if (*p == close) return p + 1;
      return NULL;
    }
  }
  const char *s = p;
  while (*p && !strchr(",}] \t\r\n", *p))
    p++;
  return p > s ? p : NULL;
}

const char *sc_json_skip_value(const char *p) {
  return skip_value(p, 0);
}

const char *sc_json_member(const char *p, const char *key, size_t n) {
  p = sc_json_ws(p);
  if (*p != '{') return NULL;
  p = sc_json_ws(p + 1);
  while (*p == '"') {
    const char *k = p + 1;
    const char *after = sc_json_skip_string(p);
    if (!after) return NULL;
    size_t klen = (size_t)(after - 1 - k);
    p = sc_json_ws(after);
    if (*p != ':') return NULL;
    p = sc_json_ws(p + 1);
    if (klen == n && strncmp(k, key, n) == 0) return p;
    p = skip_value(p, 0);
    if (!p) return NULL;
    p = sc_json_ws(p);
    if (*p == ',') p = sc_json_ws(p + 1);
  }
  return NULL;
}

const char *sc_json_find(const char *json, const char *path) {
  const char *p = json;
  while (p && *path) {
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    p = sc_json_member(p, path, n);
    path += n + (dot ? 1 : 0);
  }
  return p;
}
