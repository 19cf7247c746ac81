/*
 * json_stream.c — see json_stream.h. A byte-at-a-time state machine over a
 * refillable input buffer (256 KiB), so memory stays constant whatever the
 * document size; only the current token is kept. The grammar state is one of
 * a few "what may come next" states plus a bit stack of open containers.
 */
#include "json_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JS_IN_CAP (256u << 10)

enum {
  S_VALUE,            /* a value must come (top level, after ':' or ',' in an array) */
  S_VALUE_OR_CLOSE,   /* after '[' */
  S_KEY_OR_CLOSE,     /* after '{' */
  S_KEY,              /* after ',' in an object */
  S_COLON,            /* after a key */
  S_COMMA_OR_CLOSE,   /* after a value inside a container */
  S_END               /* after the top-level value */
};

int js_init(js_stream *js, js_read_fn read, void *ctx) {
  memset(js, 0, sizeof *js);
  js->read = read;
  js->ctx = ctx;
  js->in_cap = JS_IN_CAP;
  js->in = malloc(js->in_cap);
  js->tok_cap = 256;
  js->tok = malloc(js->tok_cap);
  if (!js->in || !js->tok) {
    js_free(js);
    return -1;
  }
  js->tok[0] = 0;
  js->state = S_VALUE;
  return 0;
}

void js_free(js_stream *js) {
  free(js->in);
  free(js->tok);
  js->in = NULL;
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

static uint64_t here(const js_stream *js) { return js->in_base + js->in_pos; }

/* The next byte without consuming it; -1 at end, -2 on a read error. */
static int peek(js_stream *js) {
  if (js->in_pos < js->in_len) return js->in[js->in_pos];
  if (js->in_eof) return -1;
  js->in_base += js->in_len;
  js->in_len = js->in_pos = 0;
  long n = js->read(js->ctx, js->in, js->in_cap);
  if (n < 0) {
    js->in_eof = 1;
    return -2;
  }
  if (n == 0) {
    js->in_eof = 1;
    return -1;
  }
  js->in_len = (size_t)n;
  return js->in[0];
}

static int tok_put(js_stream *js, char c) {
  if (js->len + 2 > js->tok_cap) {
    if (js->tok_cap >= JS_MAX_TOKEN) return -1;
    size_t cap = js->tok_cap * 2;
    char *t = realloc(js->tok, cap);
    if (!t) return -2;
    js->tok = t;
    js->tok_cap = cap;
  }
  js->tok[js->len++] = c;
  return 0;
}

static js_kind tok_fail(js_stream *js, int rc) {
  return fail(js, js->tok_offset,
              rc == -1 ? "token longer than %s" : "out of memory for a token (%s)", "4 MiB");
}

static int put_utf8(js_stream *js, uint32_t cp) {
  char b[4];
  int n;
  if (cp < 0x80) { b[0] = (char)cp; n = 1; }
  else if (cp < 0x800) { b[0] = (char)(0xC0 | cp >> 6); b[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
  else if (cp < 0x10000) {
    b[0] = (char)(0xE0 | cp >> 12); b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
  } else {
    b[0] = (char)(0xF0 | cp >> 18); b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); b[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
  }
  for (int i = 0; i < n; i++) {
    int rc = tok_put(js, b[i]);
    if (rc) return rc;
  }
  return 0;
}

static int replacement(js_stream *js, uint64_t offset) {
  if (js->bad_utf8++ == 0) js->first_bad_utf8_offset = offset;
  return put_utf8(js, 0xFFFD);
}

static int hex4(js_stream *js, uint32_t *out) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int c = peek(js);
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    js->in_pos++;
    v = v << 4 | (uint32_t)d;
  }
  *out = v;
  return 0;
}

/* Reads a string after its opening quote into tok. */
static js_kind read_string(js_stream *js, js_kind kind) {
  js->len = 0;
  for (;;) {
    uint64_t at = here(js);
    int c = peek(js);
    if (c < 0) return fail(js, at, "unterminated string (%s)", c == -2 ? "read error" : "end of input");
    js->in_pos++;
    int rc = 0;
    if (c == '"') break;
    if (c < 0x20) return fail(js, at, "control character in a string%s", "");
    if (c == '\\') {
      int e = peek(js);
      if (e < 0) return fail(js, at, "unterminated escape%s", "");
      js->in_pos++;
      switch (e) {
      case '"': case '\\': case '/': rc = tok_put(js, (char)e); break;
      case 'b': rc = tok_put(js, '\b'); break;
      case 'f': rc = tok_put(js, '\f'); break;
      case 'n': rc = tok_put(js, '\n'); break;
      case 'r': rc = tok_put(js, '\r'); break;
      case 't': rc = tok_put(js, '\t'); break;
      case 'u': {
        uint32_t cp;
        if (hex4(js, &cp)) return fail(js, at, "bad \\u escape%s", "");
        if (cp >= 0xD800 && cp < 0xDC00) {
          /* a high surrogate must be followed by \u low surrogate */
          uint32_t lo;
          if (peek(js) == '\\' && js->in_pos + 1 < js->in_len && js->in[js->in_pos + 1] == 'u') {
            js->in_pos += 2;
            if (hex4(js, &lo)) return fail(js, at, "bad \\u escape%s", "");
            if (lo >= 0xDC00 && lo < 0xE000) {
              rc = put_utf8(js, 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00));
            } else {
              rc = replacement(js, at);
              if (!rc) rc = lo >= 0xD800 && lo < 0xE000 ? replacement(js, at) : put_utf8(js, lo);
            }
          } else {
            rc = replacement(js, at);
          }
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          rc = replacement(js, at);
        } else if (cp == 0) {
          rc = replacement(js, at); /* keep strings NUL-free */
        } else {
          rc = put_utf8(js, cp);
        }
        break;
      }
      default: return fail(js, at, "bad escape in a string%s", "");
      }
    } else if (c < 0x80) {
      rc = tok_put(js, (char)c);
    } else {
      /* UTF-8: validate per Unicode table 3-7; replace bad sequences */
      int need = 0;
      int lo = 0x80, hi = 0xBF;
      if (c >= 0xC2 && c <= 0xDF) need = 1;
      else if (c == 0xE0) { need = 2; lo = 0xA0; }
      else if (c >= 0xE1 && c <= 0xEC) need = 2;
      else if (c == 0xED) { need = 2; hi = 0x9F; }
      else if (c >= 0xEE && c <= 0xEF) need = 2;
      else if (c == 0xF0) { need = 3; lo = 0x90; }
      else if (c >= 0xF1 && c <= 0xF3) need = 3;
      else if (c == 0xF4) { need = 3; hi = 0x8F; }
      if (need == 0) {
        rc = replacement(js, at);
      } else {
        unsigned char seq[4] = {(unsigned char)c};
        int got = 1, ok = 1;
        for (; got <= need; got++) {
          int d = peek(js);
          int l = got == 1 ? lo : 0x80, h = got == 1 ? hi : 0xBF;
          if (d < l || d > h) { ok = 0; break; }
          seq[got] = (unsigned char)d;
          js->in_pos++;
        }
        if (!ok) {
          rc = replacement(js, at);
        } else {
          for (int i = 0; i <= need && !rc; i++) rc = tok_put(js, (char)seq[i]);
        }
      }
    }
    if (rc) return tok_fail(js, rc);
  }
  js->tok[js->len] = 0;
  return kind;
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

static js_kind read_number(js_stream *js) {
  js->len = 0;
  int c = peek(js);
  int rc = 0;
#define TAKE()                                  \
  do {                                          \
    if ((rc = tok_put(js, (char)c))) return tok_fail(js, rc); \
    js->in_pos++;                               \
    c = peek(js);                               \
  } while (0)
  if (c == '-') TAKE();
  if (c == '0') {
    TAKE();
  } else if (is_digit(c)) {
    while (is_digit(c)) TAKE();
  } else {
    return fail(js, js->tok_offset, "bad number%s", "");
  }
  if (c == '.') {
    TAKE();
    if (!is_digit(c)) return fail(js, js->tok_offset, "bad number: digits must follow '.'%s", "");
    while (is_digit(c)) TAKE();
  }
  if (c == 'e' || c == 'E') {
    TAKE();
    if (c == '+' || c == '-') TAKE();
    if (!is_digit(c)) return fail(js, js->tok_offset, "bad number: digits must follow 'e'%s", "");
    while (is_digit(c)) TAKE();
  }
#undef TAKE
  js->tok[js->len] = 0;
  return JS_NUMBER;
}

static js_kind read_literal(js_stream *js, const char *word, js_kind kind) {
  for (const char *w = word; *w; w++) {
    if (peek(js) != (unsigned char)*w) return fail(js, js->tok_offset, "unexpected character (expected %s)", word);
    js->in_pos++;
  }
  return kind;
}

static void push(js_stream *js, int is_object) {
  if (is_object) js->stack[js->depth / 8] |= (uint8_t)(1u << (js->depth % 8));
  else js->stack[js->depth / 8] &= (uint8_t)~(1u << (js->depth % 8));
  js->depth++;
}

static int top_is_object(const js_stream *js) {
  int d = js->depth - 1;
  return (js->stack[d / 8] >> (d % 8)) & 1;
}

/* State after a complete value. */
static void after_value(js_stream *js) { js->state = js->depth == 0 ? S_END : S_COMMA_OR_CLOSE; }

js_kind js_next(js_stream *js) {
  if (js->failed) return JS_ERROR;
  for (;;) {
    int c = peek(js);
    while (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      js->in_pos++;
      c = peek(js);
    }
    js->tok_offset = here(js);
    js->len = 0;
    js->tok[0] = 0;
    if (c == -2) return fail(js, js->tok_offset, "read error%s", "");
    if (c == -1) {
      if (js->state == S_END) {
        js->done = 1;
        return JS_EOF;
      }
      return fail(js, js->tok_offset, "unexpected end of input (%s)",
                  js->depth ? "unclosed object or array" : "no value");
    }
    switch (js->state) {
    case S_END:
      return fail(js, js->tok_offset, "data after the end of the document%s", "");
    case S_COLON:
      if (c != ':') return fail(js, js->tok_offset, "expected ':' after an object key%s", "");
      js->in_pos++;
      js->state = S_VALUE;
      continue;
    case S_COMMA_OR_CLOSE:
      if (c == ',') {
        js->in_pos++;
        js->state = top_is_object(js) ? S_KEY : S_VALUE;
        continue;
      }
      if (c == (top_is_object(js) ? '}' : ']')) {
        js->in_pos++;
        int obj = top_is_object(js);
        js->depth--;
        after_value(js);
        return obj ? JS_END_OBJECT : JS_END_ARRAY;
      }
      return fail(js, js->tok_offset, "expected ',' or '%s'", top_is_object(js) ? "}" : "]");
    case S_KEY_OR_CLOSE:
    case S_KEY:
      if (c == '}' && js->state == S_KEY_OR_CLOSE) {
        js->in_pos++;
        js->depth--;
        after_value(js);
        return JS_END_OBJECT;
      }
      if (c != '"') return fail(js, js->tok_offset, "expected an object key (a string)%s", "");
      js->in_pos++;
      {
        js_kind k = read_string(js, JS_KEY);
        if (k == JS_KEY) js->state = S_COLON;
        return k;
      }
    case S_VALUE_OR_CLOSE:
      if (c == ']') {
        js->in_pos++;
        js->depth--;
        after_value(js);
        return JS_END_ARRAY;
      }
      /* fall through */
    case S_VALUE:
    default:
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
        k = read_string(js, JS_STRING);
      } else if (c == '-' || is_digit(c)) {
        k = read_number(js);
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
  }
}

int js_skip_rest(js_stream *js, js_kind first) {
  if (first == JS_ERROR) return -1;
  if (first != JS_BEGIN_OBJECT && first != JS_BEGIN_ARRAY) return 0;
  int target = js->depth - 1;
  for (;;) {
    js_kind k = js_next(js);
    if (k == JS_ERROR || k == JS_EOF) {
      if (k == JS_EOF) fail(js, here(js), "unexpected end of input%s", "");
      return -1;
    }
    if ((k == JS_END_OBJECT || k == JS_END_ARRAY) && js->depth == target) return 0;
  }
}

int js_skip(js_stream *js) { return js_skip_rest(js, js_next(js)); }

/* ---- numbers ---- */

/* Parses the JSON number text into sign, digit string bounds and the number
 * of digits before the decimal point after applying the exponent and
 * `shift`. Then builds the rounded integer magnitude. */
static int scaled_magnitude(const char *t, int shift, int *neg, uint64_t *mag, int *exact) {
  *neg = 0;
  if (*t == '-') { *neg = 1; t++; }
  const char *int_s = t;
  while (is_digit(*t)) t++;
  size_t int_n = (size_t)(t - int_s);
  const char *frac_s = t, *frac_e = t;
  if (*t == '.') {
    frac_s = ++t;
    while (is_digit(*t)) t++;
    frac_e = t;
  }
  long long exp = 0;
  if (*t == 'e' || *t == 'E') {
    t++;
    int eneg = 0;
    if (*t == '+' || *t == '-') eneg = *t++ == '-';
    while (is_digit(*t)) {
      if (exp < 1000000) exp = exp * 10 + (*t - '0');
      t++;
    }
    if (eneg) exp = -exp;
  }
  if (*t || int_n == 0) return 0;
  size_t frac_n = (size_t)(frac_e - frac_s);
  size_t total = int_n + frac_n;
  /* digit i of the mantissa (0-based over int then frac) */
#define DIGIT(i) ((i) < int_n ? int_s[i] - '0' : frac_s[(i) - int_n] - '0')
  long long point = (long long)int_n + exp + shift; /* digits before the point */
  uint64_t v = 0;
  *exact = 1;
  long long i;
  for (i = 0; i < point; i++) {
    int d = (size_t)i < total ? DIGIT((size_t)i) : 0;
    if (v > (UINT64_MAX - (uint64_t)d) / 10) return 0;
    v = v * 10 + (uint64_t)d;
  }
  /* rounding: the first dropped digit */
  long long first = point < 0 ? 0 : point;
  int round_up = 0;
  if (point >= 0 && (size_t)first < total) round_up = DIGIT((size_t)first) >= 5;
  for (size_t j = (size_t)first; j < total; j++)
    if (DIGIT(j)) *exact = 0;
#undef DIGIT
  if (round_up) {
    if (v == UINT64_MAX) return 0;
    v++;
  }
  *mag = v;
  return 1;
}

int js_number_scaled(const char *text, int shift, int64_t *out) {
  int neg, exact;
  uint64_t m;
  if (!scaled_magnitude(text, shift, &neg, &m, &exact)) return 0;
  if (neg) {
    if (m > (uint64_t)INT64_MAX + 1) return 0;
    *out = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
  } else {
    if (m > (uint64_t)INT64_MAX) return 0;
    *out = (int64_t)m;
  }
  return 1;
}

int js_number_u64(const char *text, uint64_t *out) {
  int neg, exact;
  uint64_t m;
  if (!scaled_magnitude(text, 0, &neg, &m, &exact) || !exact) return 0;
  if (neg && m != 0) return 0;
  *out = m;
  return 1;
}

int js_number_i64(const char *text, int64_t *out) {
  int neg, exact;
  uint64_t m;
  if (!scaled_magnitude(text, 0, &neg, &m, &exact) || !exact) return 0;
  return js_number_scaled(text, 0, out);
}
