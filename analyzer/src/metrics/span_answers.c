/*
 * span_answers.c — the culprit walk's answers made where a rank was loaded (ssa_span_answer,
 * ssa_rank_span_answers), packed: a merge holds every rank's answers from the partials'
 * reading to the culprit rounds, and most of an answer is zero or small (a phase the span does
 * not touch, a span of a few milliseconds), so they are kept as bytes, not 72 B each
 * (docs/partial-format.md "Span answers"). Per answer, in (kind, t0, t1) order: the kind's
 * change from the previous answer, t0's change (from 0 when the kind changed), t1 - t0 (zigzag
 * varints), a byte with one bit per phase whose time is not zero, then those times (varints).
 * Unpacking checks every byte: the bytes also come from files.
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

static unsigned char *put_varint(unsigned char *p, uint64_t v) {
  for (; v >= 0x80; v >>= 7)
    *p++ = (unsigned char)(v | 0x80);
  *p++ = (unsigned char)v;
  return p;
}

static uint64_t zigzag(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v) {
  return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* a - b, wrapping (the bytes read back may hold any two times) */
static int64_t difference(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* One varint from *p (before end) into *v; 0 when the bytes end first or it runs too long. */
static int get_varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
  *v = 0;
  for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
    unsigned char b = *(*p)++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 1;
  }
  return 0;
}

int ssa_span_answers_pack(const ssa_span_answer *v, size_t n, ssa_packed_answers *out) {
  memset(out, 0, sizeof *out);
  if (n == 0) return 0;
  enum { MOST = 3 * 10 + 1 + SSA_PHASE_N * 10 }; /* one answer's bytes, at most */
  unsigned char *buf = malloc(n * MOST), *p = buf;
  if (!buf) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < n; i++) {
    int same_kind = i && v[i - 1].kind == v[i].kind;
    p = put_varint(p, zigzag(i ? (int64_t)v[i].kind - v[i - 1].kind : v[i].kind));
    p = put_varint(p, zigzag(difference(v[i].t0, same_kind ? v[i - 1].t0 : 0)));
    p = put_varint(p, zigzag(difference(v[i].t1, v[i].t0)));
    unsigned char *mask = p++;
    *mask = 0;
    for (int ph = 0; ph < SSA_PHASE_N; ph++)
      if (v[i].time[ph]) {
        *mask |= (unsigned char)(1u << ph);
        p = put_varint(p, zigzag(v[i].time[ph]));
      }
  }
  size_t used = (size_t)(p - buf);
  unsigned char *fit = realloc(buf, used); /* the merge holds them: no slack */
  out->bytes = fit ? fit : buf;
  out->nbytes = used;
  out->n = n;
  return 0;
}

int ssa_span_answer_cmp(const void *pa, const void *pb) {
  const ssa_span_answer *a = pa, *b = pb;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
  return a->t1 < b->t1 ? -1 : a->t1 > b->t1;
}

int ssa_span_answers_unpack(const ssa_packed_answers *p, ssa_span_answer **out) {
  *out = NULL;
  if (p->n == 0) return p->nbytes ? STEPSCOPE_E_FORMAT : 0;
  if (p->n > p->nbytes / 4) return STEPSCOPE_E_FORMAT; /* 4 bytes an answer, at least */
  ssa_span_answer *v = calloc(p->n, sizeof *v);
  if (!v) return STEPSCOPE_E_NOMEM;
  const unsigned char *at = p->bytes, *end = p->bytes + p->nbytes;
  int ok = 1;
  for (size_t i = 0; i < p->n && ok; i++) {
    uint64_t kind, t0, len, t;
    ok = get_varint(&at, end, &kind) && get_varint(&at, end, &t0) && get_varint(&at, end, &len) &&
         at < end;
    if (!ok) break;
    int64_t kind_change = unzigzag(kind); /* the kinds are 0 and 1 */
    ok = kind_change >= -1 && kind_change <= 1;
    v[i].kind = (i ? v[i - 1].kind : 0) + (int)kind_change;
    int same_kind = i && v[i - 1].kind == v[i].kind;
    v[i].t0 = (int64_t)((uint64_t)(same_kind ? v[i - 1].t0 : 0) + (uint64_t)unzigzag(t0));
    v[i].t1 = (int64_t)((uint64_t)v[i].t0 + (uint64_t)unzigzag(len));
    unsigned mask = *at++;
    for (int ph = 0; ph < SSA_PHASE_N && ok; ph++)
      if (mask & (1u << ph)) {
        ok = get_varint(&at, end, &t);
        v[i].time[ph] = unzigzag(t);
      }
    ok = ok && mask < (1u << SSA_PHASE_N) &&
         (v[i].kind == SSA_PHASE_SPAN || v[i].kind == SSA_PHASE_BETWEEN_STEPS) &&
         (i == 0 || ssa_span_answer_cmp(&v[i - 1], &v[i]) < 0); /* sorted and unique */
  }
  if (!ok || at != end) {
    free(v);
    return STEPSCOPE_E_FORMAT;
  }
  *out = v;
  return 0;
}

void ssa_packed_answers_free(ssa_packed_answers *p) {
  free(p->bytes);
  memset(p, 0, sizeof *p);
}
