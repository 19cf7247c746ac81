/*
 * json_escape.c — the JSON string literal escaper of sc_json.h and its UTF-8 check. Hand
 * written because no library of Debian's is small enough to put in a tracer that runs inside
 * the traced program; the rules are in sc_json.h.
 */
#include <stdio.h>
#include <string.h>

#include "sc_json.h"

size_t sc_utf8_sequence(const unsigned char *p, size_t avail, size_t *bad) {
  unsigned char c = p[0];
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */
  if (c >= 0xC2 && c <= 0xDF)
    need = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    *bad = 1;
    return 0;
  }
  if (avail < 2 || p[1] < lo || p[1] > hi) {
    *bad = 1;
    return 0;
  }
  for (size_t i = 2; i < need; i++) {
    if (i >= avail || p[i] < 0x80 || p[i] > 0xBF) {
      *bad = i;
      return 0;
    }
  }
  return need;
}

void sc_json_string(const char *s, size_t len, unsigned flags, sc_put_fn put, void *ctx) {
  static const char hex[] = "0123456789abcdef";
  const int html = (flags & SC_JSON_HTML_SAFE) != 0;
  put(ctx, "\"", 1);
  if (!s) len = 0, s = ""; /* NULL writes "" (no arithmetic on a null pointer) */
  const unsigned char *p = (const unsigned char *)s, *end = p + len, *run = p;
  while (p < end) {
    unsigned char ch = *p;
    if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\' &&
        !(html && (ch == '<' || ch == '>' || ch == '&'))) {
      p++;
      continue;
    }
    if (ch >= 0x80) { /* UTF-8: copied when well-formed (but C1 controls), else U+FFFD */
      size_t bad, n = sc_utf8_sequence(p, (size_t)(end - p), &bad);
      if (n == 2 && ch == 0xC2 && p[1] < 0xA0) { /* U+0080..U+009F: a C1 control */
        if (p > run) put(ctx, (const char *)run, (size_t)(p - run));
        char esc[6] = {'\\', 'u', '0', '0', hex[p[1] >> 4], hex[p[1] & 15]};
        put(ctx, esc, 6);
        p += 2;
        run = p;
        continue;
      }
      if (n) {
        p += n;
        continue;
      }
      if (p > run) put(ctx, (const char *)run, (size_t)(p - run));
      put(ctx, "\xEF\xBF\xBD", 3);
      p += bad;
      run = p;
      continue;
    }
    if (p > run) put(ctx, (const char *)run, (size_t)(p - run));
    p++;
    run = p;
    switch (ch) {
    case '"': put(ctx, "\\\"", 2); break;
    case '\\': put(ctx, "\\\\", 2); break;
    case '\n': put(ctx, "\\n", 2); break;
    case '\t': put(ctx, "\\t", 2); break;
    case '\r': put(ctx, "\\r", 2); break;
    default: {
      char esc[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
      put(ctx, esc, 6);
    }
    }
  }
  if (p > run) put(ctx, (const char *)run, (size_t)(p - run));
  put(ctx, "\"", 1);
}

static void put_file(void *ctx, const char *bytes, size_t n) {
  fwrite(bytes, 1, n, (FILE *)ctx);
}

void sc_json_string_file(FILE *f, const char *s, unsigned flags) {
  sc_json_string(s, s ? strlen(s) : 0, flags, put_file, f);
}

typedef struct buf_sink {
  char *buf;
  size_t cap, *at;
} buf_sink;

static void put_buf(void *ctx, const char *bytes, size_t n) {
  buf_sink *b = ctx;
  if (*b->at < b->cap) {
    size_t room = b->cap - 1 - *b->at; /* keep one byte for the NUL */
    size_t k = n < room ? n : room;
    memcpy(b->buf + *b->at, bytes, k);
    b->buf[*b->at + k] = '\0';
  }
  *b->at += n;
}

void sc_json_string_buf(char *buf, size_t cap, size_t *at, const char *s, unsigned flags) {
  buf_sink b = {buf, cap, at};
  sc_json_string(s, s ? strlen(s) : 0, flags, put_buf, &b);
}
