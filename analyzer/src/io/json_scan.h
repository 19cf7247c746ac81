/*
 * json_scan.h — the byte scanners of the JSON tokenizer, shared by
 * json_stream.c (the token-by-token reader) and kineto_fast.c (the Kineto
 * event reader's fast path, which parses whole event objects over the same
 * buffer): where a string body needs attention, where blanks end.
 *
 * They work on [p, e) in place and never read at or past e. Their shapes
 * (a byte loop first, then 16 bytes at a time) were measured on real traces:
 * see the header of json_stream.c.
 */
#ifndef JSON_SCAN_H
#define JSON_SCAN_H

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static inline int is_special(unsigned c) {
  return c == '"' || c == '\\' || c < 0x20 || c >= 0x80;
}

/* The first byte in [p, e) that a string body must look at: '"', '\\', a
 * control character or a non-ASCII byte; e when there is none. */
static inline unsigned char *scan_special(unsigned char *p, unsigned char *e) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (e - p >= 16) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    /* signed compare: bytes >= 0x80 are negative, so one test finds both
     * control characters and non-ASCII bytes */
    __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                             _mm_cmplt_epi8(x, space));
    unsigned mask = (unsigned)_mm_movemask_epi8(m);
    if (mask) return p + __builtin_ctz(mask);
    p += 16;
  }
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  while (e - p >= 8) {
    uint64_t x;
    memcpy(&x, p, 8);
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    /* exact for the lowest flagged byte: borrows only run upwards */
    uint64_t t = (((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x) | x) & highs;
    if (t) return p + (__builtin_ctzll(t) >> 3);
    p += 8;
  }
#endif
  while (p < e && !is_special(*p))
    p++;
  return p;
}

/* scan_special for an object key. Keys are short and come in a repeating
 * order (ph, cat, name, pid, ...): a byte loop, whose exits the branch
 * predictor learns, beats the latency of the 16-byte scan on them (the
 * tokenizer is a chain of dependent scans); longer keys go on 16 at a time.
 * Measured: the import of 4 real traces 1 to 4 % faster. Not in skip_run,
 * whose keys are mostly args keys ("Record function id"): 3-5 % slower
 * there on 2 of 4 traces. */
static inline unsigned char *scan_key(unsigned char *p, unsigned char *e) {
  unsigned char *lim = e - p > 24 ? p + 24 : e;
  while (p < lim && !is_special(*p))
    p++;
  return p == lim ? scan_special(p, e) : p;
}

static inline int is_space(unsigned c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* The first non-blank byte in [p, e), or e. Blanks come as one space
 * (", " and ": ") or as a newline and an indentation: the first is checked
 * at once, a newline and up to 7 spaces (Kineto's indentation is 2, 4 or 6)
 * with one word compare, a longer run 16 bytes at a time. */
static inline const unsigned char *skip_blank(const unsigned char *p, const unsigned char *e) {
  if (p >= e || *p > ' ') return p;
  if (*p == ' ' && e - p > 1 && p[1] > ' ') return p + 1;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (*p == '\n' && e - p > 9) { /* a newline and up to 7 spaces: one word compare */
    uint64_t w;
    memcpy(&w, p + 1, 8);
    w ^= 0x2020202020202020ull; /* zero where a space is */
    if (w) {
      const unsigned char *q = p + 1 + (__builtin_ctzll(w) >> 3);
      if (*q > ' ') return q;
    }
  }
#endif
#if defined(__SSE2__)
  const __m128i sp = _mm_set1_epi8(' '), nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'),
                tab = _mm_set1_epi8('\t');
  while (e - p >= 16) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, sp), _mm_cmpeq_epi8(x, nl)),
                             _mm_or_si128(_mm_cmpeq_epi8(x, cr), _mm_cmpeq_epi8(x, tab)));
    unsigned other = ~(unsigned)_mm_movemask_epi8(m) & 0xFFFFu;
    if (other) return p + __builtin_ctz(other);
    p += 16;
  }
#endif
  while (p < e && *p <= ' ' && is_space(*p))
    p++;
  return p;
}

static inline int scan_is_digit(unsigned c) {
  return c - '0' < 10u;
}

/* The end of a JSON number that starts at p, when it lies wholly before e
 * (its grammar checked); NULL when it may go on past e or is malformed (the
 * general reader then takes it, with its messages). */
static inline const unsigned char *number_end(const unsigned char *p, const unsigned char *e) {
  if (*p == '-' && ++p >= e) return NULL;
  if (*p == '0')
    p++;
  else if (scan_is_digit(*p))
    while (++p < e && scan_is_digit(*p)) {
    }
  else
    return NULL;
  if (p < e && *p == '.') {
    if (++p >= e || !scan_is_digit(*p)) return NULL;
    while (++p < e && scan_is_digit(*p)) {
    }
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    if (++p < e && (*p == '+' || *p == '-')) p++;
    if (p >= e || !scan_is_digit(*p)) return NULL;
    while (++p < e && scan_is_digit(*p)) {
    }
  }
  return p < e ? p : NULL;
}

#endif
