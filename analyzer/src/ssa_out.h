/*
 * ssa_out.h — a hand-rolled buffered output stream for the reports and the
 * Chrome export: plain file, stdout ("-") or gzip (zlib) when the name ends
 * in ".gz". Numbers are formatted by hand (no printf on the hot path); the
 * first I/O error sticks and is returned by ssa_out_close.
 */
#ifndef SSA_OUT_H
#define SSA_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ssa_out {
  FILE *file;
  void *gz;              /* gzFile */
  char *buf;
  size_t len, cap;
  int error;
  int owns_file;
  uint64_t bytes;        /* uncompressed bytes written */
} ssa_out;

int ssa_out_open(ssa_out *o, const char *path);      /* 0 or STEPSCOPE_E_IO/NOMEM */
int ssa_out_open_file(ssa_out *o, FILE *f);          /* does not close f */
int ssa_out_close(ssa_out *o);                       /* flushes; 0 or the first error */
void ssa_out_flush(ssa_out *o);
void ssa_out_write(ssa_out *o, const char *s, size_t n);
void ssa_out_str(ssa_out *o, const char *s);
void ssa_out_printf(ssa_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ssa_out_i64(ssa_out *o, int64_t v);
void ssa_out_u64(ssa_out *o, uint64_t v);
/* ns as microseconds with exactly three decimals ("12.345"). */
void ssa_out_us(ssa_out *o, int64_t ns);
/* a JSON number, or null for NaN/inf */
void ssa_out_double(ssa_out *o, double v);
/* a JSON string literal with escapes, always valid UTF-8 (invalid
 * sequences become U+FFFD); NULL writes "" */
void ssa_out_json_string(ssa_out *o, const char *s);
/* raw text, with invalid UTF-8 sequences replaced by U+FFFD */
void ssa_out_utf8(ssa_out *o, const char *s);
/* Whether s is exactly one JSON value (json_valid.c). */
int ssa_json_valid(const char *s);

static inline void ssa_out_char(ssa_out *o, char c) {
  if (o->len == o->cap) ssa_out_flush(o);
  o->buf[o->len++] = c;
}

#endif
