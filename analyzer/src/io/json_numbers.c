/*
 * json_numbers.c — the number conversions of the JSON tokenizer (json_stream.h): a JS_NUMBER
 * token's validated text into a uint64, an int64, or a decimal scaled by a power of ten and
 * rounded exactly from its digits (no binary floating point: a Kineto timestamp in µs with a
 * fraction becomes exact ns); for the current token, from the digits json_stream.c accumulated
 * while it read a plain number, without reading the text again.
 */
#include <stdint.h>
#include <string.h>

#include "json_stream.h"

static int is_digit(int c) {
  return c >= '0' && c <= '9';
}

/* The common case, for speed: [-]digits[.digits] without an exponent whose
 * scaled integer part has at most 19 digits (so no overflow is possible).
 * 1 when it applied, 0 to use the general path. */
static int scaled_magnitude_plain(const char *t, int shift, int *neg, uint64_t *mag, int *exact) {
  if (shift < 0 || shift > 19) return 0;
  *neg = 0;
  if (*t == '-') {
    *neg = 1;
    t++;
  }
  const char *s = t;
  uint64_t v = 0;
  while (is_digit(*t))
    v = v * 10 + (uint64_t)(*t++ - '0');
  if (t == s || (t - s) + shift > 19) return 0; /* < 10^19 < 2^64 */
  int frac_digits = 0, round_up = 0;
  *exact = 1;
  if (*t == '.') {
    t++;
    for (; is_digit(*t); t++, frac_digits++) {
      if (frac_digits < shift)
        v = v * 10 + (uint64_t)(*t - '0');
      else {
        if (frac_digits == shift) round_up = *t >= '5';
        if (*t != '0') *exact = 0;
      }
    }
  }
  if (*t) return 0; /* an exponent: the general path */
  for (int i = frac_digits; i < shift; i++)
    v *= 10;
  *mag = v + (uint64_t)round_up;
  return 1;
}

/* Parses the JSON number text into sign, digit string bounds and the number
 * of digits before the decimal point after applying the exponent and
 * `shift`. Then builds the rounded integer magnitude. */
static int scaled_magnitude(const char *t, int shift, int *neg, uint64_t *mag, int *exact) {
  if (scaled_magnitude_plain(t, shift, neg, mag, exact)) return 1;
  *neg = 0;
  if (*t == '-') {
    *neg = 1;
    t++;
  }
  const char *int_s = t;
  while (is_digit(*t))
    t++;
  size_t int_n = (size_t)(t - int_s);
  const char *frac_s = t, *frac_e = t;
  if (*t == '.') {
    frac_s = ++t;
    while (is_digit(*t))
      t++;
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
#define DIGIT(i) ((i) < int_n ? int_s[i] - '0' : frac_s[(i)-int_n] - '0')
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

int js_tok_u64(const js_stream *js, uint64_t *out) {
  if (js->num_plain && js->num_frac == 0) {
    if (js->num_neg && js->num_mant) return 0;
    *out = js->num_mant;
    return 1;
  }
  return js_number_u64(js->tok, out);
}

int js_tok_scaled(const js_stream *js, int shift, int64_t *out) {
  if (js->num_plain && shift >= js->num_frac && shift - js->num_frac <= 19) {
    uint64_t m = js->num_mant;
    for (int i = js->num_frac; i < shift; i++) {
      if (m > UINT64_MAX / 10) return js_number_scaled(js->tok, shift, out);
      m *= 10;
    }
    if (m > (uint64_t)INT64_MAX) return js_number_scaled(js->tok, shift, out);
    *out = js->num_neg ? -(int64_t)m : (int64_t)m;
    return 1;
  }
  return js_number_scaled(js->tok, shift, out);
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
