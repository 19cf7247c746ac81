/*
 * test_cross_rank.c — the cross-rank steps made sub-quadratic for thousands of ranks, against
 * the quadratic forms they replaced, on random inputs:
 *   - pipeline waits (pipeline_waits.c): the latest start of a member on another stage, from
 *     ssa_latest_by_stage, equals the brute-force maximum over every other member;
 *   - the culprit rows' order (culprit_order.c): the blocked insertion equals the plain
 *     insertion sort row for row, with keys drawn from small ranges so that ties and the
 *     order's intransitive cases (a rank's rows by steps, other ranks' by caused wait) are
 *     common, and with rank numbers out of order (the fallback).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

static int failures;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static int64_t below(int64_t n) {
  return (int64_t)(next_random() % (uint64_t)n);
}

static void check_pipeline_waits(void) {
  enum { MAX_MEMBERS = 300 };
  int stage[MAX_MEMBERS];
  int64_t start[MAX_MEMBERS];
  for (int trial = 0; trial < 20000; trial++) {
    size_t n = (size_t)below(trial % 10 == 0 ? MAX_MEMBERS : 12);
    int nstages = 1 + (int)below(5);
    int64_t range = 1 + below(trial % 3 ? 10 : 1000000);
    for (size_t i = 0; i < n; i++) {
      stage[i] = (int)below(nstages + 1) - 1; /* -1: not a pipeline rank */
      start[i] = below(range) - range / 2;
    }
    ssa_stage_latest b = ssa_latest_by_stage(stage, start, n);
    for (int s = -1; s <= nstages; s++) {
      int64_t want = INT64_MIN;
      for (size_t y = 0; y < n; y++)
        if (stage[y] >= 0 && stage[y] != s && start[y] > want) want = start[y];
      int64_t got = ssa_latest_on_other_stage(&b, s);
      if (got != want && failures++ < 10)
        fprintf(stderr, "FAIL pipeline waits: trial %d stage %d: got %lld want %lld\n", trial, s,
                (long long)got, (long long)want);
    }
  }
}

static void random_rows(ssa_culprit *rows, size_t n, int sorted_ranks) {
  int rank = 0;
  for (size_t i = 0; i < n; i++) {
    if (sorted_ranks)
      rank += below(3) == 0; /* runs of rows per rank */
    else
      rank = (int)below(1 + (int64_t)n / 3);
    rows[i] = (ssa_culprit){.rank = rank,
                            .phase = (int)below(SSA_PHASE_N),
                            .caused = below(6),
                            .excess = (int64_t)i, /* identifies the row */
                            .steps = (uint64_t)below(4),
                            .beyond_noise = below(4) == 0};
  }
}

static void check_culprit_order(void) {
  for (int trial = 0; trial < 3000; trial++) {
    size_t n = (size_t)below(trial % 50 == 0 ? 5000 : 200);
    ssa_culprit *a = malloc((n ? n : 1) * sizeof *a), *b = malloc((n ? n : 1) * sizeof *b);
    if (!a || !b) {
      fprintf(stderr, "FAIL out of memory\n");
      failures++;
      return;
    }
    random_rows(a, n, trial % 7 != 0);
    memcpy(b, a, n * sizeof *a);
    int top = n ? a[below((int64_t)n)].rank : 0;
    if (trial % 5 == 0) top = -1;
    ssa_order_culprit_rows_by_insertion(a, n, top);
    if (ssa_order_culprit_rows(b, n, top)) {
      fprintf(stderr, "FAIL out of memory\n");
      failures++;
    }
    for (size_t i = 0; i < n; i++)
      if (a[i].excess != b[i].excess) {
        if (failures++ < 10)
          fprintf(stderr,
                  "FAIL culprit order: trial %d (n %zu): position %zu holds row %lld, "
                  "insertion sort has row %lld\n",
                  trial, n, i, (long long)b[i].excess, (long long)a[i].excess);
        break;
      }
    free(a);
    free(b);
  }
}

int main(void) {
  check_pipeline_waits();
  check_culprit_order();
  if (failures) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("cross-rank steps: equal to the quadratic forms on random inputs\n");
  return 0;
}
