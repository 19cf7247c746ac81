/*
 * json_valid.c — checks that a text is exactly one JSON value (RFC 8259
 * grammar), so that JSON taken from a trace (the header's configuration)
 * can be embedded raw in the report only when it cannot break the document.
 *
 * A recursive-descent recogniser over the bytes: objects, arrays, strings
 * (escapes checked, raw control characters rejected), numbers, true, false,
 * null, with surrounding whitespace. Nesting deeper than 256 is rejected
 * rather than risking the stack. Bytes >= 0x80 inside strings are accepted
 * here: the writer replaces invalid UTF-8 with U+FFFD (ssa_out_utf8).
 */
#include <string.h>

#include "ssa_io.h"

#define MAX_DEPTH 256

static const char *ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  return p;
}

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

static int is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static const char *value(const char *p, int depth);

static const char *string(const char *p) {
  if (*p != '"') return NULL;
  for (p++;; p++) {
    unsigned char c = (unsigned char)*p;
    if (c == '"') return p + 1;
    if (c < 0x20) return NULL; /* includes the terminating NUL */
    if (c == '\\') {
      p++;
      if (*p == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!is_hex(p[i])) return NULL;
        p += 4;
      } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
        return NULL;
      }
    }
  }
}

static const char *number(const char *p) {
  if (*p == '-') p++;
  if (*p == '0')
    p++;
  else if (is_digit(*p))
    while (is_digit(*p))
      p++;
  else
    return NULL;
  if (*p == '.') {
    p++;
    if (!is_digit(*p)) return NULL;
    while (is_digit(*p))
      p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!is_digit(*p)) return NULL;
    while (is_digit(*p))
      p++;
  }
  return p;
}

static const char *literal(const char *p, const char *word) {
  while (*word)
    if (*p++ != *word++) return NULL;
  return p;
}

static const char *value(const char *p, int depth) {
  if (depth > MAX_DEPTH) return NULL;
  p = ws(p);
  switch (*p) {
  case '{':
    p = ws(p + 1);
    if (*p == '}') return p + 1;
    for (;;) {
      p = string(ws(p));
      if (!p) return NULL;
      p = ws(p);
      if (*p != ':') return NULL;
      p = value(p + 1, depth + 1);
      if (!p) return NULL;
      p = ws(p);
      if (*p == '}') return p + 1;
      if (*p != ',') return NULL;
      p++;
    }
  case '[':
    p = ws(p + 1);
    if (*p == ']') return p + 1;
    for (;;) {
      p = value(p, depth + 1);
      if (!p) return NULL;
      p = ws(p);
      if (*p == ']') return p + 1;
      if (*p != ',') return NULL;
      p++;
    }
  case '"': return string(p);
  case 't': return literal(p, "true");
  case 'f': return literal(p, "false");
  case 'n': return literal(p, "null");
  default: return number(p);
  }
}

int ssa_json_valid(const char *s) {
  if (!s) return 0;
  const char *end = value(s, 0);
  return end && *ws(end) == 0;
}
