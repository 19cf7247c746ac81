/*
 * test_lanes.c — the greedy interval lanes of ssa_lanes.h (slice_lanes.c)
 * against brute force: random slices (sorted by start, longer first) are
 * placed, and then (1) on every lane the slices nest or follow each other,
 * (2) each slice went to the first lane where it fit, judged from the slices
 * placed before it, (3) closes come in non-decreasing time, each exactly
 * once per slice and on the slice's lane, and (4) the merged walk over a
 * rank's ranges, calls and ops yields every slice once, in start order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_lanes.h"

#define N 400

typedef struct sl {
  int64_t s, e;
  int lane;
} sl;

static int cmp_sl(const void *pa, const void *pb) {
  const sl *a = pa, *b = pb;
  if (a->s != b->s) return a->s < b->s ? -1 : 1;
  return a->e > b->e ? -1 : a->e < b->e;
}

typedef struct closes {
  int64_t last;
  int count[64];
  int out_of_order;
} closes;

static void on_close(void *ctx, uint32_t sub, int64_t end) {
  closes *c = ctx;
  if (end < c->last) c->out_of_order = 1;
  c->last = end;
  if (sub < 64) c->count[sub]++;
}

/* whether [s, e) fits on lane k given the slices placed before index i */
static int fits(const sl *v, int i, int k) {
  int64_t s = v[i].s, e = v[i].e;
  int64_t innermost_end = INT64_MAX;
  int open = 0;
  for (int j = 0; j < i; j++) {
    if (v[j].lane != k || v[j].e <= s) continue; /* closed by s */
    open = 1;
    if (v[j].e < innermost_end) innermost_end = v[j].e;
  }
  return !open || e <= innermost_end;
}

static int check_round(unsigned seed) {
  srand(seed);
  sl v[N];
  for (int i = 0; i < N; i++) {
    v[i].s = rand() % 1000;
    v[i].e = v[i].s + (rand() % 4 == 0 ? 0 : rand() % 200);
  }
  qsort(v, N, sizeof *v, cmp_sl);
  ssa_lanes l;
  ssa_lanes_init(&l);
  closes c;
  memset(&c, 0, sizeof c);
  c.last = INT64_MIN;
  l.on_close = on_close;
  l.ctx = &c;
  int placed[64] = {0};
  for (int i = 0; i < N; i++) {
    int k = ssa_lanes_place(&l, v[i].s, v[i].e);
    if (k < 0 || k >= 64) {
      fprintf(stderr, "seed %u: lane %d\n", seed, k);
      return 1;
    }
    v[i].lane = k;
    placed[k]++;
    for (int j = 0; j < k; j++)
      if (fits(v, i, j)) {
        fprintf(stderr, "seed %u: slice %d went to lane %d but fits lane %d\n", seed, i, k, j);
        return 1;
      }
    if (!fits(v, i, k)) {
      fprintf(stderr, "seed %u: slice %d does not fit its lane %d\n", seed, i, k);
      return 1;
    }
  }
  ssa_lanes_finish(&l);
  if (c.out_of_order) {
    fprintf(stderr, "seed %u: closes out of time order\n", seed);
    return 1;
  }
  for (int k = 0; k < 64; k++)
    if (c.count[k] != placed[k]) {
      fprintf(stderr, "seed %u: lane %d: %d placed, %d closed\n", seed, k, placed[k], c.count[k]);
      return 1;
    }
  /* nesting on every lane: sorted slices of a lane form a proper stack */
  for (uint32_t k = 0; k < l.nsub; k++) {
    int64_t stack[N];
    int depth = 0;
    for (int i = 0; i < N; i++) {
      if (v[i].lane != (int)k) continue;
      while (depth && stack[depth - 1] <= v[i].s)
        depth--;
      if (depth && v[i].e > stack[depth - 1]) {
        fprintf(stderr, "seed %u: lane %u: slice %d overlaps without nesting\n", seed, k, i);
        return 1;
      }
      stack[depth++] = v[i].e;
    }
  }
  int lanes = (int)l.nsub;
  ssa_lanes_free(&l);
  return lanes < 2 ? 2 : 0; /* 2: this round needed no extra lane */
}

static int check_walk(void) {
  ssa_rank r;
  memset(&r, 0, sizeof r);
  ssa_range ranges[3] = {
      {0, 100, 0, 0, 0, 0, 0, 0, 0}, {10, 20, 0, 0, 0, 0, 0, 0, 0}, {50, 60, 0, 0, 0, 0, 0, 0, 0}};
  ssa_api apis[2] = {{10, 30, 1, 0, 0, 0, 0}, {55, 56, 2, 0, 0, 0, 0}};
  ssa_op ops[2];
  memset(ops, 0, sizeof ops);
  ops[0].start = 5, ops[0].end = 7;
  ops[1].start = 50, ops[1].end = 70;
  r.ranges = ranges, r.nranges = 3;
  r.apis = apis, r.napis = 2;
  r.ops = ops, r.nops = 2;
  ssa_slice_iter it;
  ssa_slice s;
  ssa_slice_iter_init(&it, &r);
  /* expected: range 0, op 0, api 0 (10-30 longer than range 10-20), range 1,
   * op 1 (50-70 longer than range 50-60), range 2, api 1 */
  const int want_kind[7] = {SSA_SLICE_RANGE, SSA_SLICE_OP,    SSA_SLICE_API, SSA_SLICE_RANGE,
                            SSA_SLICE_OP,    SSA_SLICE_RANGE, SSA_SLICE_API};
  const size_t want_index[7] = {0, 0, 0, 1, 1, 2, 1};
  int n = 0;
  while (ssa_slice_next(&it, &s)) {
    if (n >= 7 || (int)s.kind != want_kind[n] || s.index != want_index[n]) {
      fprintf(stderr, "walk: slice %d is kind %d index %zu\n", n, (int)s.kind, s.index);
      return 1;
    }
    n++;
  }
  return n == 7 ? 0 : 1;
}

int main(void) {
  int extra = 0;
  for (unsigned seed = 1; seed <= 200; seed++) {
    int rc = check_round(seed);
    if (rc == 1) return 1;
    extra += rc == 0;
  }
  if (extra < 100) {
    fprintf(stderr, "only %d of 200 rounds needed extra lanes: the test is too weak\n", extra);
    return 1;
  }
  if (check_walk()) return 1;
  printf("ok: 200 random rounds (%d with extra lanes), merged walk in order\n", extra);
  return 0;
}
