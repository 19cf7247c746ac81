/*
 * json_lookup.c — just enough JSON to read run metadata values ("flops",
 * "schedule", "layout", "memory"): find a number or a string by a dotted
 * path of object keys. It scans the text without building a tree, never reads
 * past the terminating NUL and gives up (returns 0) on anything malformed.
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_io.h"

static const char *ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  return p;
}

/* Skips a string starting at '"'; returns the char after the closing quote. */
static const char *skip_string(const char *p) {
  p++;
  while (*p && *p != '"') {
    if (*p == '\\' && p[1]) p++;
    p++;
  }
  return *p == '"' ? p + 1 : NULL;
}

static const char *skip_value(const char *p, int depth) {
  p = ws(p);
  if (depth > 64) return NULL;
  if (*p == '"') return skip_string(p);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        if (*p != '"') return NULL;
        p = skip_string(p);
        if (!p) return NULL;
        p = ws(p);
        if (*p != ':') return NULL;
        p++;
      }
      p = skip_value(p, depth + 1);
      if (!p) return NULL;
      p = ws(p);
      if (*p == ',') {
        p = ws(p + 1);
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

/* Finds the value of `key` (length n) in the object at p; returns its start. */
static const char *find_key(const char *p, const char *key, size_t n) {
  p = ws(p);
  if (*p != '{') return NULL;
  p = ws(p + 1);
  while (*p == '"') {
    const char *k = p + 1;
    const char *after = skip_string(p);
    if (!after) return NULL;
    size_t klen = (size_t)(after - 1 - k);
    p = ws(after);
    if (*p != ':') return NULL;
    p = ws(p + 1);
    if (klen == n && strncmp(k, key, n) == 0) return p;
    p = skip_value(p, 0);
    if (!p) return NULL;
    p = ws(p);
    if (*p == ',') p = ws(p + 1);
  }
  return NULL;
}

static const char *find_path(const char *json, const char *path) {
  const char *p = json;
  while (p && *path) {
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    p = find_key(p, path, n);
    path += n + (dot ? 1 : 0);
  }
  return p;
}

int ssa_json_number(const char *json, const char *path, double *out) {
  if (!json) return 0;
  const char *p = find_path(json, path);
  if (!p) return 0;
  char *end;
  double v = strtod(p, &end);
  if (end == p) return 0;
  *out = v;
  return 1;
}

int ssa_json_string(const char *json, const char *path, char *buf, size_t size) {
  if (!json || size == 0) return 0;
  const char *p = find_path(json, path);
  if (!p || *p != '"') return 0;
  const char *e = skip_string(p);
  if (!e) return 0;
  size_t n = (size_t)(e - p - 2);
  if (n >= size) n = size - 1;
  memcpy(buf, p + 1, n);
  buf[n] = 0;
  return 1;
}

int ssa_json_bool(const char *json, const char *path, int *out) {
  if (!json) return 0;
  const char *p = find_path(json, path);
  if (!p) return 0;
  if (!strncmp(p, "true", 4))
    *out = 1;
  else if (!strncmp(p, "false", 5))
    *out = 0;
  else
    return 0;
  return 1;
}
