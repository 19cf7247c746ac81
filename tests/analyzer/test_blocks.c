/*
 * test_blocks.c — the analyzer's building blocks against brute force:
 *
 *   - ssa_sort_by_start (sort.c, in-place radix sort, or a merge of a few
 *     sorted runs) on random op and API arrays — narrow and wide time
 *     ranges, many equal start times, negative times, already sorted and
 *     reversed input, 2 to 1000 sorted runs with equal starts across them,
 *     40 to 3200 runs overlapping by a few elements —
 *     must give exactly the order of qsort with the same total comparator;
 *   - ssa_delay_stats_of (breakdown.c) on small and big arrays of spread,
 *     equal, clustered, wide-range and negative values must give the
 *     percentiles of the sorted array;
 *   - ssa_step_index_stab (steps.c) on random step ranges — disjoint,
 *     overlapping, nested, empty — must report exactly the ranges that
 *     contain each query time, through both the plain and the inline entry
 *     points and with queries in and out of time order, and
 *     ssa_step_index_owner the one of them that started last.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      if (failures < 20) {                                                                         \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                       \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
      }                                                                                            \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static uint64_t rng = 0x12345678;

static int cmp_i64_test(const void *pa, const void *pb) {
  int64_t x = *(const int64_t *)pa, y = *(const int64_t *)pb;
  return x < y ? -1 : x > y;
}
static uint64_t next_u64(void) {
  uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int cmp_ops_total(const void *pa, const void *pb) {
  const ssa_op *a = pa, *b = pb;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->end != b->end) return a->end > b->end ? -1 : 1;
  if (a->lane != b->lane) return a->lane < b->lane ? -1 : 1;
  return memcmp(a, b, sizeof *a);
}

static int cmp_apis_total(const void *pa, const void *pb) {
  const ssa_api *a = pa, *b = pb;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->end != b->end) return a->end > b->end ? -1 : 1;
  return memcmp(a, b, sizeof *a);
}

static void sort_case(size_t n, int64_t base, uint64_t range, int shape) {
  ssa_op *a = calloc(n ? n : 1, sizeof *a), *b = calloc(n ? n : 1, sizeof *b);
  ssa_api *x = calloc(n ? n : 1, sizeof *x), *y = calloc(n ? n : 1, sizeof *y);
  if (!a || !b || !x || !y) {
    failures++;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    int64_t s = base + (int64_t)(range ? next_u64() % range : 0);
    if (shape == 1) s = base + (int64_t)i * 3;       /* sorted */
    if (shape == 2) s = base + (int64_t)(n - i) * 3; /* reversed */
    if (shape >=
        200000) { /* shape - 200000 sorted runs one after the other, each spanning it all */
      size_t runs = (size_t)shape - 200000, len = (n + runs - 1) / runs;
      s = base + (int64_t)(i % len) * 3 + (int64_t)(i / len % 2);
    } else if (shape >= 100000) { /* shape - 100000 runs, each overlapping the next by 2 elements */
      size_t len = n / (size_t)(shape - 100000), run = i / len, at = i % len;
      s = base + (int64_t)(run * len + at) * 3 - (int64_t)(2 * 3 * (run > 0 && at < 2));
    } else if (shape >= 100) { /* 40 runs, each overlapping the next by shape - 99 elements */
      size_t len = n / 40, run = i / len, at = i % len;
      s = base + (int64_t)(run * len + at) * 3 -
          (int64_t)((shape - 99) * 3 * (run > 0 && at < (size_t)(shape - 99)));
    } else if (shape >= 3) { /* shape - 1 sorted runs one after the other (the merge) */
      size_t runs = (size_t)shape - 1, len = (n + runs - 1) / runs;
      s = base + (int64_t)(i % len) * 3 +
          (int64_t)(i / len % 2); /* runs overlap, some starts equal */
    }
    a[i].start = s;
    a[i].end = s + (int64_t)(next_u64() % 4);
    a[i].corr = next_u64() % 3;
    a[i].name = (uint32_t)(next_u64() % 3);
    a[i].launch = SSA_NONE;
    a[i].coll = SSA_NONE;
    a[i].lane = (uint16_t)(next_u64() % 3);
    a[i].kind = 1;
    a[i].cls = 1;
    x[i].start = s;
    x[i].end = s + (int64_t)(next_u64() % 3);
    x[i].corr = next_u64() % 5;
    x[i].lane = (uint16_t)(next_u64() % 2);
  }
  memcpy(b, a, n * sizeof *a);
  memcpy(y, x, n * sizeof *x);
  ssa_sort_by_start(a, n, sizeof *a, cmp_ops_total);
  qsort(b, n, sizeof *b, cmp_ops_total);
  CHECK(n == 0 || memcmp(a, b, n * sizeof *a) == 0, "ops: n %zu range %llu shape %d", n,
        (unsigned long long)range, shape);
  ssa_sort_by_start(x, n, sizeof *x, cmp_apis_total);
  qsort(y, n, sizeof *y, cmp_apis_total);
  CHECK(n == 0 || memcmp(x, y, n * sizeof *x) == 0, "apis: n %zu range %llu shape %d", n,
        (unsigned long long)range, shape);
out:
  free(a);
  free(b);
  free(x);
  free(y);
}

static void sort_cases(void) {
  size_t sizes[] = {0, 1, 2, 31, 32, 33, 500, 5000};
  uint64_t ranges[] = {0, 1, 7, 300, 1u << 20, 1ull << 40, UINT64_MAX / 4};
  int64_t bases[] = {0, -5000000000ll, 1700000000000000000ll};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (size_t j = 0; j < sizeof ranges / sizeof *ranges; j++)
      for (size_t k = 0; k < sizeof bases / sizeof *bases; k++) {
        if (bases[k] > 0 && ranges[j] > (1ull << 60)) continue; /* keep clear of overflow */
        sort_case(sizes[i], bases[k], ranges[j], 0);
      }
  sort_case(200000, 0, 1ull << 40, 0);      /* several radix levels */
  sort_case(200000, -5000000000ll, 300, 0); /* long runs of equal start times */
  for (int shape = 1; shape <= 2; shape++)
    sort_case(100000, -7, 0, shape);
  /* 2 to 9, 40, 64 and 65, 200 and 1000 sorted runs, each spanning the
   * whole range: merged (up to 64) or radix-sorted */
  int runs[] = {3, 4, 5, 6, 7, 8, 9, 10, 41, 65, 66, 200000 + 200, 200000 + 1000};
  for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
    sort_case(100000, -7, 0, runs[i]);
    sort_case(33, 5, 0, runs[i]);
    sort_case(1000, 1700000000000000000ll, 0, runs[i]);
  }
  /* runs that overlap by a few elements only (interleaved threads) */
  for (int shape = 100; shape <= 102; shape++)
    sort_case(50000, 1000, 0, shape);
  /* more than 64 such runs (merged while they overlap little), and as many
   * as the merge counts before it gives up (fewer than 16 elements each) */
  int many[] = {65, 146, 1000, 3124, 3200};
  for (size_t i = 0; i < sizeof many / sizeof *many; i++)
    sort_case(50000, -3, 0, 100000 + many[i]);
}

static void stab_case(size_t nsteps, int mode, size_t nqueries) {
  ssa_step *s = calloc(nsteps ? nsteps : 1, sizeof *s);
  uint32_t *out = malloc((nsteps ? nsteps : 1) * sizeof *out);
  char *want = malloc(nsteps ? nsteps : 1), *got = malloc(nsteps ? nsteps : 1);
  if (!s || !out || !want || !got) {
    failures++;
    goto out;
  }
  int64_t t = 0;
  for (size_t i = 0; i < nsteps; i++) {
    s[i].number = (int64_t)i;
    if (mode == 0) { /* disjoint, in random order of creation */
      t += (int64_t)(next_u64() % 5);
      s[i].range_start = t;
      t += (int64_t)(next_u64() % 20);
      s[i].range_end = t;
    } else { /* overlapping, nested, empty */
      s[i].range_start = (int64_t)(next_u64() % 1000);
      s[i].range_end = s[i].range_start + (int64_t)(next_u64() % (mode == 2 ? 1000 : 30));
    }
  }
  if (mode == 0) /* shuffle: the index must not rely on the array's order */
    for (size_t i = nsteps; i > 1; i--) {
      size_t j = next_u64() % i;
      ssa_step tmp = s[i - 1];
      s[i - 1] = s[j];
      s[j] = tmp;
    }
  ssa_step_index ix;
  if (ssa_step_index_build(&ix, s, nsteps)) {
    failures++;
    goto out;
  }
  int64_t hi = mode == 0 ? t + 10 : 2100;
  for (size_t q = 0; q < nqueries; q++) {
    int64_t at = q % 2 ? (int64_t)(next_u64() % (uint64_t)(hi + 20)) - 10
                       : (int64_t)(q * (uint64_t)hi / nqueries);
    size_t expect = 0;
    for (size_t i = 0; i < nsteps; i++) {
      want[i] = s[i].range_start <= at && at < s[i].range_end;
      expect += (size_t)want[i];
    }
    /* the owner: the containing range that started last (ties: the later
     * one in the array) */
    uint32_t owner = SSA_NONE;
    for (size_t i = 0; i < nsteps; i++)
      if (want[i] && (owner == SSA_NONE || s[i].range_start >= s[owner].range_start))
        owner = (uint32_t)i;
    CHECK(ssa_step_index_owner(&ix, at) == owner, "mode %d t %lld: owner %u, expected %u", mode,
          (long long)at, ssa_step_index_owner(&ix, at), owner);
    for (int way = 0; way < 2; way++) {
      size_t m = way ? ssa_step_index_stab_fast(&ix, at, out, nsteps)
                     : ssa_step_index_stab(&ix, at, out, nsteps);
      CHECK(m == expect, "mode %d t %lld: %zu steps, expected %zu", mode, (long long)at, m, expect);
      memset(got, 0, nsteps ? nsteps : 1);
      for (size_t k = 0; k < m && k < nsteps; k++) {
        CHECK(!got[out[k]], "mode %d: step reported twice", mode);
        got[out[k]] = 1;
      }
      CHECK(nsteps == 0 || memcmp(got, want, nsteps) == 0, "mode %d t %lld: wrong steps", mode,
            (long long)at);
      CHECK(ssa_step_index_stab(&ix, at, NULL, 0) == expect, "mode %d: count without output", mode);
    }
  }
  CHECK(mode != 0 || nsteps == 0 || ix.disjoint, "disjoint ranges not recognised");
  ssa_step_index_free(&ix);
out:
  free(s);
  free(out);
  free(want);
  free(got);
}

/* ssa_delay_stats_of against sorting: small arrays (quickselect) and big
 * ones (radix selection, or its fallback when the values bunch up). */
static void delay_stats_case(size_t n, int shape) {
  int64_t *v = malloc((n ? n : 1) * sizeof *v), *sorted = malloc((n ? n : 1) * sizeof *v);
  for (size_t i = 0; i < n; i++) {
    uint64_t x = next_u64();
    switch (shape) {
    case 0: v[i] = (int64_t)(x % 5000000); break; /* spread */
    case 1: v[i] = 42; break;                     /* all equal */
    case 2:
      v[i] = (x % 100 == 0) ? (int64_t)(x >> 24) : (int64_t)(x % 1000);
      break; /* outliers */
    /* wide ranges (the sum of the values must still fit in an int64) */
    case 3: v[i] = (int64_t)(x >> 24) - ((int64_t)1 << 39); break;
    case 4: v[i] = -(int64_t)(x % 3000) - (x % 7 == 0 ? (int64_t)1 << 40 : 0); break;
    default: v[i] = (int64_t)(i % 3); break; /* few values */
    }
  }
  memcpy(sorted, v, n * sizeof *v);
  qsort(sorted, n, sizeof *sorted, cmp_i64_test);
  ssa_delay_stats st;
  ssa_delay_stats_of(v, n, &st);
  CHECK(st.count == n, "count");
  if (n) {
    size_t k50 = (n * 50 + 99) / 100 - 1, k90 = (n * 90 + 99) / 100 - 1,
           k99 = (n * 99 + 99) / 100 - 1;
    CHECK(st.min == sorted[0] && st.max == sorted[n - 1], "min/max n=%zu shape %d", n, shape);
    CHECK(st.p50 == sorted[k50], "p50 n=%zu shape %d", n, shape);
    CHECK(st.p90 == sorted[k90], "p90 n=%zu shape %d", n, shape);
    CHECK(st.p99 == sorted[k99], "p99 n=%zu shape %d", n, shape);
  }
  free(v);
  free(sorted);
}

int main(void) {
  size_t sizes[] = {0, 1, 2, 100, 65535, 65536, 200001};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (int shape = 0; shape < 6; shape++)
      delay_stats_case(sizes[i], shape);
  sort_cases();
  size_t counts[] = {0, 1, 2, 3, 17, 64, 300};
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
    for (int mode = 0; mode < 3; mode++)
      stab_case(counts[i], mode, 3000);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
