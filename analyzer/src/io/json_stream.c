/*
 * json_stream.c — see json_stream.h: the tokenizer (its number conversions are
 * json_numbers.c).
 *
 * How it works: one input buffer (256 KiB) is refilled from the read
 * callback, so memory stays constant whatever the document size; only the
 * current token is kept. The grammar state is one of a few "what may come
 * next" states plus a bit stack of open containers.
 *
 * Speed comes from working on the buffer in place rather than byte by byte
 * through a function call:
 *  - string bodies are scanned 16 bytes at a time (SSE2; 8 with plain 64-bit
 *    words elsewhere) for the only bytes that need attention: the closing
 *    quote, a backslash, a control character or a non-ASCII byte;
 *  - a string without escapes that lies wholly in the buffer is handed out in
 *    place: its closing quote is overwritten with NUL and `tok` points into
 *    the buffer (no copy). Escapes, invalid UTF-8 and strings that cross the
 *    end of the buffer are assembled in the token buffer instead;
 *  - numbers are validated with a pointer loop over the buffer; a number
 *    that reaches the end of the buffer takes the byte-wise path;
 *  - js_skip() runs the same scanners without storing anything.
 * Lookahead that must not be cut by a refill (a \uXXXX\uXXXX surrogate pair,
 * a UTF-8 sequence) first makes enough bytes contiguous: the unread tail is
 * moved to the front of the buffer and the rest is refilled (ensure()).
 *
 * The tokenizer is a chain of dependent steps (where a token ends says where
 * the next begins), so latency counts more than instructions: object keys,
 * short and in a repeating order, are scanned byte by byte (scan_key). Tried
 * on 4-5 real traces (import from memory, min of 20 runs, alternating) and
 * left out, as no faster or slower: skipping whole values by recursive
 * descent instead of skip_run's state loop (-1 to +3 %); skipping unwanted
 * args members inside skip_run through a key filter (+1 to +6 %); reading a
 * member's scalar value in the js_next_member call (0 to +5 %); digit runs
 * 16 at a time (SSE2) in number_end (+2 to +6 %); a byte loop before the
 * 16-byte scan for value strings (-2 to +3 %) or for blank runs (+10 to
 * +21 %: skip_blank is inlined everywhere and any growth of it costs); -O3
 * instead of -O2 (-2.5 to +0.6 %). Kept since (json_scan.h, 2026-11-28): a
 * newline and up to 7 spaces skipped with one 8-byte compare before the
 * 16-byte scan (HTA's mtia and df_index_resolver traces, one thread, whole
 * import: -5.6 % and -3.5 %); digit runs 8 at a time (SWAR) to find a
 * number's end or value were tried again and left out (+2 %).
 */
#include "json_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json_scan.h"
#include "sc_json.h"

#define JS_IN_CAP (256u << 10)

enum {
  S_VALUE,          /* a value must come (top level, after ':' or ',' in an array) */
  S_VALUE_OR_CLOSE, /* after '[' */
  S_KEY_OR_CLOSE,   /* after '{' */
  S_KEY,            /* after ',' in an object */
  S_COLON,          /* after a key */
  S_COMMA_OR_CLOSE, /* after a value inside a container */
  S_END             /* after the top-level value */
};

int js_init(js_stream *js, js_read_fn read, void *ctx) {
  memset(js, 0, sizeof *js);
  js->read = read;
  js->ctx = ctx;
  js->in_cap = JS_IN_CAP;
  js->in = malloc(js->in_cap);
  js->buf_cap = 256;
  js->buf = malloc(js->buf_cap);
  if (!js->in || !js->buf) {
    js_free(js);
    return -1;
  }
  js->buf[0] = 0;
  js->tok = js->buf;
  js->state = S_VALUE;
  return 0;
}

static long no_more_input(void *ctx, void *buf, size_t n) {
  (void)ctx;
  (void)buf;
  (void)n;
  return 0;
}

int js_init_buffer(js_stream *js, void *doc, size_t len) {
  memset(js, 0, sizeof *js);
  js->read = no_more_input;
  js->in = doc;
  js->in_len = js->in_cap = len;
  js->in_eof = 1; /* ensure() never moves or refills the caller's bytes */
  js->in_borrowed = 1;
  js->buf_cap = 256;
  js->buf = malloc(js->buf_cap);
  if (!js->buf) return -1;
  js->buf[0] = 0;
  js->tok = js->buf;
  js->state = S_VALUE;
  return 0;
}

void js_free(js_stream *js) {
  if (!js->in_borrowed) free(js->in);
  free(js->buf);
  js->in = NULL;
  js->buf = NULL;
  js->tok = NULL;
}

static js_kind fail(js_stream *js, uint64_t offset, const char *fmt, const char *arg) {
  if (!js->failed) {
    js->failed = 1;
    js->error_offset = offset;
    snprintf(js->error, sizeof js->error, fmt, arg);
  }
  return JS_ERROR;
}

static uint64_t here(const js_stream *js) {
  return js->in_base + js->in_pos;
}

/* ---- input ---- */

/* Makes at least `n` (far less than the buffer) unread bytes contiguous from
 * in_pos, unless the input ends first: the unread tail moves to the front of
 * the buffer and the rest of the buffer is refilled. Returns the number of
 * unread bytes then available. */
static size_t ensure_grow(js_stream *js, size_t n);

static size_t ensure(js_stream *js, size_t n) {
  if (js->grow) return ensure_grow(js, n);
  while (js->in_len - js->in_pos < n && !js->in_eof) {
    size_t rem = js->in_len - js->in_pos;
    if (js->in_pos) {
      memmove(js->in, js->in + js->in_pos, rem);
      js->in_base += js->in_pos;
      js->in_len = rem;
      js->in_pos = 0;
    }
    long got = js->read(js->ctx, js->in + js->in_len, js->in_cap - js->in_len);
    if (got <= 0) {
      js->in_eof = 1;
      if (got < 0) js->read_error = 1;
      break;
    }
    js->in_len += (size_t)got;
  }
  return js->in_len - js->in_pos;
}

/* The next byte without consuming it; -1 at end, -2 on a read error. */
static inline int peek(js_stream *js) {
  if (js->in_pos < js->in_len) return js->in[js->in_pos];
  if (ensure(js, 1)) return js->in[js->in_pos];
  return js->read_error ? -2 : -1;
}

/* ---- the token buffer ---- */

/* Appends n bytes to the token being assembled in buf (len so far).
 * 0, -1 when the token would exceed JS_MAX_TOKEN, -2 out of memory. */
static int buf_append(js_stream *js, const void *src, size_t n) {
  if (js->len + n + 1 > js->buf_cap) {
    if (js->len + n + 1 > JS_MAX_TOKEN) return -1;
    size_t cap = js->buf_cap;
    while (cap < js->len + n + 1)
      cap *= 2;
    if (cap > JS_MAX_TOKEN) cap = JS_MAX_TOKEN;
    char *t = realloc(js->buf, cap);
    if (!t) return -2;
    js->buf = t;
    js->buf_cap = cap;
  }
  memcpy(js->buf + js->len, src, n);
  js->len += n;
  return 0;
}

static js_kind tok_fail(js_stream *js, int rc) {
  return fail(js, js->tok_offset,
              rc == -1 ? "token longer than %s" : "out of memory for a token (%s)", "4 MiB");
}

static int put_utf8(js_stream *js, uint32_t cp) {
  char b[4];
  int n;
  if (cp < 0x80) {
    b[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xC0 | cp >> 6);
    b[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xE0 | cp >> 12);
    b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    b[0] = (char)(0xF0 | cp >> 18);
    b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  return buf_append(js, b, (size_t)n);
}

/* Counts an invalid sequence and, when storing, writes U+FFFD. */
static int replacement(js_stream *js, uint64_t offset, int store) {
  if (js->bad_utf8++ == 0) js->first_bad_utf8_offset = offset;
  return store ? put_utf8(js, 0xFFFD) : 0;
}

/* ---- strings ---- */

static int hex4(const unsigned char *p, uint32_t *out) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned c = p[i];
    int d = c >= '0' && c <= '9'   ? (int)c - '0'
            : c >= 'a' && c <= 'f' ? (int)c - 'a' + 10
            : c >= 'A' && c <= 'F' ? (int)c - 'A' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v << 4 | (uint32_t)d;
  }
  *out = v;
  return 0;
}

/* One escape at in_pos (the backslash), `avail` bytes readable there (at
 * least 12 unless the input ends). Consumes it; 0 or a buf_append code, or 1
 * after a grammar error (already recorded). */
static int read_escape(js_stream *js, size_t avail, uint64_t at, int store) {
  const unsigned char *p = js->in + js->in_pos;
  if (avail < 2) {
    fail(js, at, "unterminated escape%s", "");
    return 1;
  }
  char out;
  switch (p[1]) {
  case '"':
  case '\\':
  case '/': out = (char)p[1]; break;
  case 'b': out = '\b'; break;
  case 'f': out = '\f'; break;
  case 'n': out = '\n'; break;
  case 'r': out = '\r'; break;
  case 't': out = '\t'; break;
  case 'u': {
    uint32_t cp, lo;
    if (avail < 6 || hex4(p + 2, &cp)) {
      fail(js, at, "bad \\u escape%s", "");
      return 1;
    }
    js->in_pos += 6;
    if (cp >= 0xD800 && cp < 0xDC00) {
      /* a high surrogate must be followed by \u low surrogate */
      if (avail >= 8 && p[6] == '\\' && p[7] == 'u') {
        if (avail < 12 || hex4(p + 8, &lo)) {
          fail(js, at, "bad \\u escape%s", "");
          return 1;
        }
        js->in_pos += 6;
        if (lo >= 0xDC00 && lo < 0xE000)
          return store ? put_utf8(js, 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)) : 0;
        int rc = replacement(js, at, store);
        if (rc) return rc;
        if (lo >= 0xD800 && lo < 0xE000) return replacement(js, at, store);
        return store ? put_utf8(js, lo) : 0;
      }
      return replacement(js, at, store);
    }
    if ((cp >= 0xDC00 && cp < 0xE000) || cp == 0) /* keep strings NUL-free */
      return replacement(js, at, store);
    return store ? put_utf8(js, cp) : 0;
  }
  default: fail(js, at, "bad escape in a string%s", ""); return 1;
  }
  js->in_pos += 2;
  return store ? buf_append(js, &out, 1) : 0;
}

/* Reads a string after its opening quote. With `store`, its decoded text
 * becomes the token (in place when possible); without, it is only checked. */
static js_kind read_string(js_stream *js, js_kind kind, int store) {
  size_t start = js->in_pos; /* the pending run: bytes not yet copied to buf */
  int assembled = 0;         /* the token is being built in buf */
  js->len = 0;
  for (;;) {
    unsigned char *e = js->in + js->in_len;
    unsigned char *p = scan_special(js->in + js->in_pos, e);
    size_t pos = (size_t)(p - js->in);
    int rc;
    if (p == e) {
      /* the string goes on past the buffer: keep what we have, refill */
      if (store) {
        if ((rc = buf_append(js, js->in + start, pos - start))) return tok_fail(js, rc);
        assembled = 1;
      }
      js->in_pos = pos;
      uint64_t at = here(js);
      if (!ensure(js, 1))
        return fail(js, at, "unterminated string (%s)",
                    js->read_error ? "read error" : "end of input");
      start = js->in_pos;
      continue;
    }
    unsigned c = *p;
    if (c == '"') {
      if (store) {
        if (!assembled && !js->in_readonly) {
          *p = 0; /* hand the string out in place */
          js->tok = (char *)(js->in + start);
          js->len = pos - start;
        } else {
          if ((rc = buf_append(js, js->in + start, pos - start))) return tok_fail(js, rc);
          js->buf[js->len] = 0;
          js->tok = js->buf;
        }
      }
      js->in_pos = pos + 1;
      return kind;
    }
    uint64_t at = js->in_base + pos;
    if (c < 0x20) return fail(js, at, "control character in a string%s", "");
    if (c >= 0x80 && e - p >= 4) {
      size_t bad, n = sc_utf8_sequence(p, 4, &bad);
      if (n) { /* valid: part of the run */
        js->in_pos = pos + n;
        continue;
      }
    }
    /* an escape, invalid UTF-8 or a sequence cut by the end of the buffer */
    if (store) {
      if ((rc = buf_append(js, js->in + start, pos - start))) return tok_fail(js, rc);
      assembled = 1;
    }
    js->in_pos = pos;
    size_t avail = ensure(js, c == '\\' ? 12 : 4); /* may move the buffer */
    if (c == '\\') {
      rc = read_escape(js, avail, at, store);
      if (rc == 1) return JS_ERROR;
    } else {
      size_t bad, n = sc_utf8_sequence(js->in + js->in_pos, avail, &bad);
      if (n) {
        rc = store ? buf_append(js, js->in + js->in_pos, n) : 0;
        js->in_pos += n;
      } else { /* one U+FFFD for the maximal subpart (Unicode table 3-7) */
        rc = replacement(js, at, store);
        js->in_pos += bad;
      }
    }
    if (rc) return tok_fail(js, rc);
    start = js->in_pos;
  }
}

/* The common case inline: no escape and no non-ASCII byte before the
 * closing quote, all in the buffer; anything else takes read_string (from
 * the start again: nothing has been consumed). */
static inline js_kind read_string_quick(js_stream *js, js_kind kind, int store) {
  if (store && js->in_readonly) return read_string(js, kind, store); /* copied, not in place */
  unsigned char *s = js->in + js->in_pos, *e = js->in + js->in_len;
  unsigned char *p = kind == JS_KEY ? scan_key(s, e) : scan_special(s, e);
  if (p < e && *p == '"') {
    if (store) {
      *p = 0;
      js->tok = (char *)s;
      js->len = (size_t)(p - s);
    }
    js->in_pos = (size_t)(p + 1 - js->in);
    return kind;
  }
  return read_string(js, kind, store);
}

/* ---- numbers, literals ---- */

static int is_digit(int c) {
  return c >= '0' && c <= '9';
}

/* The byte-wise number reader, for a number that reaches the end of the
 * buffer (it may go on in the next read). */
static js_kind read_number_slow(js_stream *js, int store) {
  js->len = 0;
  js->num_plain = 0;
  int c = peek(js);
  int rc = 0;
#define TAKE()                                                                                     \
  do {                                                                                             \
    char ch = (char)c;                                                                             \
    if (store && (rc = buf_append(js, &ch, 1))) return tok_fail(js, rc);                           \
    js->in_pos++;                                                                                  \
    c = peek(js);                                                                                  \
  } while (0)
  if (c == '-') TAKE();
  if (c == '0') {
    TAKE();
  } else if (is_digit(c)) {
    while (is_digit(c))
      TAKE();
  } else {
    return fail(js, js->tok_offset, "bad number%s", "");
  }
  if (c == '.') {
    TAKE();
    if (!is_digit(c)) return fail(js, js->tok_offset, "bad number: digits must follow '.'%s", "");
    while (is_digit(c))
      TAKE();
  }
  if (c == 'e' || c == 'E') {
    TAKE();
    if (c == '+' || c == '-') TAKE();
    if (!is_digit(c)) return fail(js, js->tok_offset, "bad number: digits must follow 'e'%s", "");
    while (is_digit(c))
      TAKE();
  }
#undef TAKE
  if (store) {
    js->buf[js->len] = 0;
    js->tok = js->buf;
  }
  return JS_NUMBER;
}

/* Whether the 8 bytes at p are all ASCII digits; if so their value. Eight
 * digits at once with a few multiplies (the bytes as one little-endian
 * word: the first digit is the lowest byte). */
static inline int eight_digits(const unsigned char *p, uint64_t *value) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t x;
  memcpy(&x, p, 8);
  const uint64_t high = 0xF0F0F0F0F0F0F0F0ull;
  if (((x & high) | (((x + 0x0606060606060606ull) & high) >> 4)) != 0x3333333333333333ull) return 0;
  x -= 0x3030303030303030ull;
  x = x * 10 + (x >> 8);                        /* pairs: d0*10+d1 in every other byte */
  const uint64_t pairs = 0x000000FF000000FFull; /* then 4-digit groups, then all 8 */
  *value =
      ((x & pairs) * (100 + (1000000ull << 32)) + ((x >> 16) & pairs) * (1 + (10000ull << 32))) >>
      32;
  return 1;
#else
  (void)p;
  (void)value;
  return 0;
#endif
}

static js_kind read_number(js_stream *js, int store) {
  const unsigned char *s = js->in + js->in_pos, *e = js->in + js->in_len, *p = s;
  /* every test of *p is preceded by p < e; reaching e means "maybe more".
   * On the way, the digits are accumulated for js_tok_u64/js_tok_scaled. */
  uint64_t mant = 0;
  const unsigned char *digits, *frac = NULL;
  js->num_plain = 0;
  if (p < e && *p == '-') p++;
  if (p >= e) return read_number_slow(js, store);
  digits = p;
  if (*p == '0') {
    p++;
  } else if (is_digit(*p)) {
    uint64_t eight; /* mant may wrap past 19 digits: then it is not used */
    while (e - p >= 8 && eight_digits(p, &eight)) {
      mant = mant * 100000000u + eight;
      p += 8;
    }
    while (p < e && is_digit(*p))
      mant = mant * 10 + (uint64_t)(*p++ - '0');
  } else {
    return fail(js, js->tok_offset, "bad number%s", "");
  }
  if (p < e && *p == '.') {
    p++;
    if (p < e && !is_digit(*p))
      return fail(js, js->tok_offset, "bad number: digits must follow '.'%s", "");
    frac = p;
    while (p < e && is_digit(*p))
      mant = mant * 10 + (uint64_t)(*p++ - '0');
  }
  int has_exp = p < e && (*p == 'e' || *p == 'E');
  /* at most 19 digits (leading zero included): mant is exact */
  if (!has_exp && p - digits - (frac != NULL) <= 19) {
    js->num_plain = 1;
    js->num_neg = *s == '-';
    js->num_mant = mant;
    js->num_frac = frac ? (int)(p - frac) : 0;
  }
  if (has_exp) {
    p++;
    if (p < e && (*p == '+' || *p == '-')) p++;
    if (p < e && !is_digit(*p))
      return fail(js, js->tok_offset, "bad number: digits must follow 'e'%s", "");
    while (p < e && is_digit(*p))
      p++;
  }
  if (p >= e) return read_number_slow(js, store);
  size_t n = (size_t)(p - s);
  if (store && js->in_readonly) { /* copied into the token buffer */
    js->len = 0;
    int rc = buf_append(js, js->in + js->in_pos, n);
    if (rc) return tok_fail(js, rc);
    js->buf[n] = 0;
    js->tok = js->buf;
  } else if (store) {
    /* hand the number out in place: its delimiter becomes the NUL until
     * the next token */
    js->saved = *p;
    js->saved_at = js->in_pos + n + 1;
    js->in[js->in_pos + n] = 0;
    js->tok = (char *)(js->in + js->in_pos);
    js->len = n;
  }
  js->in_pos += n;
  return JS_NUMBER;
}

static js_kind read_literal(js_stream *js, const char *word, js_kind kind) {
  for (const char *w = word; *w; w++) {
    if (peek(js) != (unsigned char)*w)
      return fail(js, js->tok_offset, "unexpected character (expected %s)", word);
    js->in_pos++;
  }
  return kind;
}

/* ---- grammar ---- */

static void push(js_stream *js, int is_object) {
  if (is_object)
    js->stack[js->depth / 8] |= (uint8_t)(1u << (js->depth % 8));
  else
    js->stack[js->depth / 8] &= (uint8_t) ~(1u << (js->depth % 8));
  js->depth++;
}

static int top_is_object(const js_stream *js) {
  int d = js->depth - 1;
  return (js->stack[d / 8] >> (d % 8)) & 1;
}

/* State after a complete value. */
static void after_value(js_stream *js) {
  js->state = js->depth == 0 ? S_END : S_COMMA_OR_CLOSE;
}

/* The next non-blank byte, not consumed; -1 at end, -2 on a read error. */
static inline int next_byte(js_stream *js) {
  for (;;) {
    const unsigned char *p = js->in + js->in_pos, *e = js->in + js->in_len;
    p = skip_blank(p, e);
    js->in_pos = (size_t)(p - js->in);
    if (p < e) return *p;
    if (!ensure(js, 1)) return js->read_error ? -2 : -1;
  }
}

/* Puts back the byte that a number handed out in place had replaced with
 * its terminating NUL. */
static inline void restore_delimiter(js_stream *js) {
  if (js->saved_at) {
    js->in[js->saved_at - 1] = js->saved;
    js->saved_at = 0;
  }
}

static js_kind end_of_input(js_stream *js, int c) {
  js->tok_offset = here(js);
  if (c == -2) return fail(js, js->tok_offset, "read error%s", "");
  if (js->state == S_END) {
    js->done = 1;
    return JS_EOF;
  }
  return fail(js, js->tok_offset, "unexpected end of input (%s)",
              js->depth ? "unclosed object or array" : "no value");
}

/* A value starting with byte c (not consumed). */
static js_kind read_value(js_stream *js, int c, int store) {
  if (c == '{' || c == '[') {
    if (js->depth >= JS_MAX_DEPTH)
      return fail(js, js->tok_offset, "nesting deeper than %s levels", "512");
    js->in_pos++;
    push(js, c == '{');
    js->state = c == '{' ? S_KEY_OR_CLOSE : S_VALUE_OR_CLOSE;
    return c == '{' ? JS_BEGIN_OBJECT : JS_BEGIN_ARRAY;
  }
  js_kind k;
  if (c == '"') {
    js->in_pos++;
    k = read_string_quick(js, JS_STRING, store);
  } else if (c == '-' || is_digit(c)) {
    k = read_number(js, store);
  } else if (c == 't') {
    k = read_literal(js, "true", JS_TRUE);
  } else if (c == 'f') {
    k = read_literal(js, "false", JS_FALSE);
  } else if (c == 'n') {
    k = read_literal(js, "null", JS_NULL);
  } else {
    char what[8];
    snprintf(what, sizeof what, c >= 0x20 && c < 0x7f ? "'%c'" : "0x%02x", c);
    return fail(js, js->tok_offset, "unexpected %s where a value was expected", what);
  }
  if (k != JS_ERROR) after_value(js);
  return k;
}

/* The tokenizer; `store` says whether string and number text is wanted.
 * Separators (',' and ':') are consumed on the way to the next token. */
static js_kind next_token(js_stream *js, int store) {
  restore_delimiter(js);
  if (js->failed) return JS_ERROR;
  js->len = 0;
  js->buf[0] = 0;
  js->tok = js->buf;
  int c = next_byte(js);
  if (js->state == S_VALUE && c >= 0) { /* after js_next_member: the common case */
    js->tok_offset = here(js);
    return read_value(js, c, store);
  }
  for (;;) {
    if (c < 0) return end_of_input(js, c);
    js->tok_offset = here(js);
    switch (js->state) {
    case S_COLON:
      if (c != ':') return fail(js, js->tok_offset, "expected ':' after an object key%s", "");
      js->in_pos++;
      js->state = S_VALUE;
      c = next_byte(js);
      continue;
    case S_COMMA_OR_CLOSE: {
      int obj = top_is_object(js);
      if (c == ',') {
        js->in_pos++;
        js->state = obj ? S_KEY : S_VALUE;
        c = next_byte(js);
        continue;
      }
      if (c == (obj ? '}' : ']')) {
        js->in_pos++;
        js->depth--;
        after_value(js);
        return obj ? JS_END_OBJECT : JS_END_ARRAY;
      }
      return fail(js, js->tok_offset, "expected ',' or '%s'", obj ? "}" : "]");
    }
    case S_KEY_OR_CLOSE:
    case S_KEY:
      if (c == '"') {
        js->in_pos++;
        js_kind k = read_string_quick(js, JS_KEY, store);
        if (k == JS_KEY) js->state = S_COLON;
        return k;
      }
      if (c == '}' && js->state == S_KEY_OR_CLOSE) {
        js->in_pos++;
        js->depth--;
        after_value(js);
        return JS_END_OBJECT;
      }
      return fail(js, js->tok_offset, "expected an object key (a string)%s", "");
    case S_VALUE_OR_CLOSE:
      if (c == ']') {
        js->in_pos++;
        js->depth--;
        after_value(js);
        return JS_END_ARRAY;
      }
      return read_value(js, c, store);
    case S_VALUE: return read_value(js, c, store);
    case S_END:
    default: return fail(js, js->tok_offset, "data after the end of the document%s", "");
    }
  }
}

js_kind js_next(js_stream *js) {
  return next_token(js, 1);
}

js_kind js_next_member(js_stream *js) {
  restore_delimiter(js);
  if (js->failed) return JS_ERROR;
  int first = js->state == S_KEY_OR_CLOSE;
  if ((!first && js->state != S_COMMA_OR_CLOSE) || !js->depth || !top_is_object(js))
    return next_token(js, 1); /* not between members: the general path */
  int c = next_byte(js);
  if (c == ',' && !first) {
    js->in_pos++;
    js->state = S_KEY;
    c = next_byte(js);
  }
  if (c != '"' || (first == 0 && js->state != S_KEY)) /* '}', errors, end of input */
    return next_token(js, 1);
  js->tok_offset = here(js);
  js->in_pos++;
  js_kind k = read_string_quick(js, JS_KEY, 1);
  if (k != JS_KEY) return k;
  js->state = S_COLON;
  /* the ':' and the blanks after it, when they are in the buffer (a refill
   * would move the key handed out in place: leave them to the next call) */
  const unsigned char *p = js->in + js->in_pos, *e = js->in + js->in_len;
  p = skip_blank(p, e);
  if (p < e && *p == ':') {
    p++;
    p = skip_blank(p, e);
    js->in_pos = (size_t)(p - js->in);
    js->state = S_VALUE;
  }
  return JS_KEY;
}

/* Skipping without the per-token overhead of next_token: the grammar of
 * next_token, checked the same way, but over the buffer with the state in
 * locals. It consumes tokens that are plain (strings without escapes or
 * non-ASCII bytes, numbers and literals that end inside the buffer,
 * structure) and stops before anything else: an escape, a non-ASCII byte,
 * the end of the buffer, an error. The state is then exactly what
 * next_token would have left, so next_token takes that one token (with its
 * checks, UTF-8 counting and messages) and skipping goes on here. Returns 1
 * when the value being skipped is complete: a container closed with the
 * depth back to `target`, or a scalar read at depth `target`. */
static int skip_run(js_stream *js, int target) {
  restore_delimiter(js);
  if (js->failed) return 0;
  const unsigned char *p = js->in + js->in_pos, *e = js->in + js->in_len, *q;
  int state = js->state, depth = js->depth, closed = 0;
  for (;;) {
    p = skip_blank(p, e);
    if (p >= e) break;
    unsigned c = *p;
    switch (state) {
    case S_COLON:
      if (c != ':') goto stop;
      p++;
      state = S_VALUE;
      continue;
    case S_COMMA_OR_CLOSE: {
      int obj = (js->stack[(depth - 1) / 8] >> ((depth - 1) % 8)) & 1;
      if (c == ',') {
        p++;
        state = obj ? S_KEY : S_VALUE;
        continue;
      }
      if (c != (obj ? '}' : ']')) goto stop;
      goto close;
    }
    case S_KEY_OR_CLOSE:
    case S_KEY:
      if (c == '"') {
        q = scan_special((unsigned char *)p + 1, (unsigned char *)e); /* args keys: long */
        if (q >= e || *q != '"') goto stop;
        p = q + 1;
        state = S_COLON;
        continue;
      }
      if (c == '}' && state == S_KEY_OR_CLOSE) goto close;
      goto stop;
    case S_VALUE_OR_CLOSE:
      if (c == ']') goto close;
      /* fall through */
    case S_VALUE:
      if (c == '{' || c == '[') {
        if (depth >= JS_MAX_DEPTH) goto stop;
        if (c == '{')
          js->stack[depth / 8] |= (uint8_t)(1u << (depth % 8));
        else
          js->stack[depth / 8] &= (uint8_t) ~(1u << (depth % 8));
        depth++;
        p++;
        state = c == '{' ? S_KEY_OR_CLOSE : S_VALUE_OR_CLOSE;
        continue;
      }
      if (c == '"') {
        q = scan_special((unsigned char *)p + 1, (unsigned char *)e);
        if (q >= e || *q != '"') goto stop;
        p = q + 1;
      } else if (c == '-' || is_digit((int)c)) {
        if (!(q = number_end(p, e))) goto stop;
        p = q;
      } else if (c == 't' && e - p > 4 && !memcmp(p, "true", 4)) {
        p += 4;
      } else if (c == 'f' && e - p > 5 && !memcmp(p, "false", 5)) {
        p += 5;
      } else if (c == 'n' && e - p > 4 && !memcmp(p, "null", 4)) {
        p += 4;
      } else {
        goto stop;
      }
      state = depth == 0 ? S_END : S_COMMA_OR_CLOSE;
      if (depth == target) { /* js_skip of a scalar */
        closed = 1;
        goto stop;
      }
      continue;
    default: goto stop;
    }
  close:
    p++;
    depth--;
    state = depth == 0 ? S_END : S_COMMA_OR_CLOSE;
    if (depth == target) {
      closed = 1;
      break;
    }
  }
stop:
  js->in_pos = (size_t)(p - js->in);
  js->state = state;
  js->depth = depth;
  return closed;
}

/* Skips tokens until a value completes at depth `target`: the container open
 * at depth target + 1 closes, or (js_skip) a scalar is read at that depth. */
static int skip_to(js_stream *js, int target) {
  for (;;) {
    if (skip_run(js, target)) return 0;
    js_kind k = next_token(js, 0);
    if (k == JS_ERROR || k == JS_EOF) {
      if (k == JS_EOF) fail(js, here(js), "unexpected end of input%s", "");
      return -1;
    }
    if (js->depth == target && k != JS_KEY && k != JS_BEGIN_OBJECT && k != JS_BEGIN_ARRAY) return 0;
  }
}

int js_skip_rest(js_stream *js, js_kind first) {
  if (first == JS_ERROR) return -1;
  if (first != JS_BEGIN_OBJECT && first != JS_BEGIN_ARRAY) return 0;
  return skip_to(js, js->depth - 1);
}

int js_skip(js_stream *js) {
  restore_delimiter(js);
  /* where a value must come (after js_next_member): skipped in one run */
  if (js->state == S_VALUE && !js->failed) return skip_to(js, js->depth);
  return js_skip_rest(js, next_token(js, 0));
}

int js_skip_object_rest(js_stream *js) {
  restore_delimiter(js);
  if (js->failed) return -1;
  if (!js->depth || !top_is_object(js) ||
      (js->state != S_KEY_OR_CLOSE && js->state != S_COMMA_OR_CLOSE))
    return fail(js, here(js), "js_skip_object_rest outside an object%s", ""), -1;
  return skip_to(js, js->depth - 1);
}

/* ---- one document on two threads ---- */

/* ensure() for js_init_buffer_grow: more of the same buffer made visible,
 * nothing moved. */
static size_t ensure_grow(js_stream *js, size_t n) {
  while (js->in_len - js->in_pos < n && !js->in_eof) {
    long v = js->grow(js->ctx, js->in_len);
    if (v < 0 || (size_t)v <= js->in_len) {
      js->in_eof = 1;
      if (v < 0) js->read_error = 1;
      break;
    }
    js->in_len = (size_t)v < js->in_cap ? (size_t)v : js->in_cap;
  }
  return js->in_len - js->in_pos;
}

int js_init_buffer_grow(js_stream *js, void *doc, size_t cap, size_t visible,
                        long (*grow)(void *ctx, size_t visible), void *ctx) {
  if (js_init_buffer(js, doc, cap)) return -1;
  js->in_len = visible < cap ? visible : cap;
  js->in_eof = 0;
  js->grow = grow;
  js->ctx = ctx;
  return 0;
}

void js_set_readonly(js_stream *js) {
  js->in_readonly = 1;
}

void js_enter_array_in_place(js_stream *js, size_t at, int depth) {
  js_enter_array(js, 0, depth);
  js->in_pos = at;
  if (js->in_len < at) js->in_len = at;
}

void js_enter_array(js_stream *js, uint64_t base, int depth) {
  js->in_base = base;
  js->depth = 0;
  for (int d = 0; d < depth && d < JS_MAX_DEPTH; d++)
    push(js, d + 1 < depth);
  js->state = S_VALUE;
}

int js_array_peek(js_stream *js, const unsigned char **p, const unsigned char **e) {
  restore_delimiter(js);
  if (js->failed || !js->depth || top_is_object(js)) return 0;
  if (js->state != S_VALUE && js->state != S_VALUE_OR_CLOSE && js->state != S_COMMA_OR_CLOSE)
    return 0;
  int c = next_byte(js);
  if (c == ',' && js->state == S_COMMA_OR_CLOSE) { /* as next_token takes it */
    js->in_pos++;
    js->state = S_VALUE;
    c = next_byte(js);
  }
  if (c < 0 || js->state == S_COMMA_OR_CLOSE) return 0;
  *p = js->in + js->in_pos;
  *e = js->in + js->in_len;
  return 1;
}

void js_array_took(js_stream *js, const unsigned char *end) {
  js->in_pos = (size_t)(end - js->in);
  js->state = S_COMMA_OR_CLOSE;
}

int js_at_array_gap(const js_stream *js) {
  if (js->failed || js->state != S_COMMA_OR_CLOSE || !js->depth || top_is_object(js)) return 0;
  const unsigned char *p = js->in + js->in_pos, *e = js->in + js->in_len;
  p = skip_blank(p, e);
  if (p >= e || *p != ',') return 0;
  return skip_blank(p + 1, e) == e;
}

void js_resume_at(js_stream *js, uint64_t at, size_t visible) {
  restore_delimiter(js);
  js->in_pos = (size_t)(at - js->in_base);
  if (visible > js->in_cap) visible = js->in_cap;
  if (visible > js->in_len) js->in_len = visible;
  if (js->in_pos > js->in_len) js->in_len = js->in_pos;
  js->in_eof = 0;
}
