/*
 * sort.c — in-place sorting of the model's big arrays (ops, API calls,
 * ranges) whose first field is an int64 start time.
 *
 * An MSD radix sort ("American flag sort"): the start times are mapped to
 * unsigned keys, bytes that are equal in every key are skipped, and each
 * pass counts one key byte, computes the 256 bucket boundaries and moves
 * every element into its bucket by cycles of swaps, then sorts each bucket
 * by the next byte. Buckets under 32 elements are finished by insertion sort
 * with the full comparator, and runs of equal start times by qsort, so the
 * result is exactly the comparator's order. It needs no extra memory (the
 * glibc qsort it replaces allocated a copy of the whole array, which set the
 * loader's peak memory) and does a few linear passes instead of n log n
 * comparator calls.
 *
 * Input that is a few sorted runs one after the other (a Kineto trace
 * writes each host thread's events in time order, thread after thread: the
 * API calls and CPU ops of HTA's df_index_resolver trace are two runs each)
 * is merged instead, run pair by run pair, through a buffer the size of the
 * smaller run: 59 thousand ranges in two runs 1.41 -> 0.15 ms (best of 30,
 * this machine; 9 runs, radix-sorted, 1.7 ms). Each merge touches only
 * where its two runs overlap (binary searches trim the rest): the API calls
 * of HTA's trace_diff control trace are 146 runs that overlap by a few
 * elements (three host threads, timestamps a microsecond apart). Up to
 * MAX_RUNS runs, or more where neighbouring runs overlap little
 * (worth_merging; those 146: 0.55 -> 0.25 ms), and a buffer of at most
 * MERGE_BUF_MAX bytes; else the radix sort.
 *
 * Elements equal under the comparator keep an unspecified order; callers
 * pass total comparators (breaking the last ties by memcmp) so the result
 * does not depend on the algorithm.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_io.h"

#define SMALL         32
#define MAX_ELEM      128
#define MAX_RUNS      64
#define MERGE_BUF_MAX ((size_t)64 << 20)

static inline uint64_t key_of(const unsigned char *p) {
  int64_t v;
  memcpy(&v, p, sizeof v);
  return (uint64_t)v ^ (UINT64_C(1) << 63);
}

static inline void swap_n(unsigned char *a, unsigned char *b, size_t size) {
  unsigned char tmp[MAX_ELEM];
  memcpy(tmp, a, size);
  memcpy(a, b, size);
  memcpy(b, tmp, size);
}

/* The model's record sizes get constant-size copies the compiler inlines. */
static inline void swap_elems(unsigned char *a, unsigned char *b, size_t size) {
  switch (size) {
  case 32: swap_n(a, b, 32); break;
  case 40: swap_n(a, b, 40); break;
  case 48: swap_n(a, b, 48); break;
  default: swap_n(a, b, size); break;
  }
}

static void insertion_sort(unsigned char *base, size_t n, size_t size,
                           int (*cmp)(const void *, const void *)) {
  unsigned char tmp[MAX_ELEM];
  for (size_t i = 1; i < n; i++) {
    unsigned char *p = base + i * size;
    if (cmp(p - size, p) <= 0) continue;
    memcpy(tmp, p, size);
    size_t j = i;
    while (j > 0 && cmp(base + (j - 1) * size, tmp) > 0)
      j--;
    memmove(base + (j + 1) * size, base + j * size, (i - j) * size);
    memcpy(base + j * size, tmp, size);
  }
}

/* The digit below bits [shift, shift + 8); -1 once bit 0 is done. */
static inline int next_shift(int shift) {
  return shift == 0 ? -1 : shift < 8 ? 0 : shift - 8;
}

static void flag_sort(unsigned char *base, size_t n, size_t size, int shift,
                      int (*cmp)(const void *, const void *)) {
  for (;;) {
    if (n < SMALL) {
      insertion_sort(base, n, size, cmp);
      return;
    }
    if (shift < 0) { /* equal start times: the comparator's tie-breaks */
      qsort(base, n, size, cmp);
      return;
    }
    size_t count[256] = {0};
    for (size_t i = 0; i < n; i++)
      count[(key_of(base + i * size) >> shift) & 255]++;
    int one = -1;
    for (int b = 0; b < 256; b++)
      if (count[b] == n) one = b;
    if (one >= 0) { /* this byte is the same everywhere */
      shift = next_shift(shift);
      continue;
    }
    size_t next[256], end[256], at = 0;
    for (int b = 0; b < 256; b++) {
      next[b] = at;
      at += count[b];
      end[b] = at;
    }
    for (int b = 0; b < 256; b++) {
      while (next[b] < end[b]) {
        unsigned char *p = base + next[b] * size;
        unsigned d = (unsigned)(key_of(p) >> shift) & 255;
        if (d == (unsigned)b) {
          next[b]++;
        } else {
          swap_elems(p, base + next[d] * size, size);
          next[d]++;
        }
      }
    }
    size_t from = 0;
    for (int b = 0; b < 256; b++) {
      if (count[b] > 1) flag_sort(base + from * size, count[b], size, next_shift(shift), cmp);
      from += count[b];
    }
    return;
  }
}

/* Whether the element at a comes after the one at b: the start times
 * decide most pairs without a call. */
static inline int after(const unsigned char *a, const unsigned char *b,
                        int (*cmp)(const void *, const void *)) {
  uint64_t x = key_of(a), y = key_of(b);
  return x > y || (x == y && cmp(a, b) > 0);
}

/* Where the sorted runs [lo, mid) and [mid, hi) overlap, as [*from, *to):
 * the first run's elements that come before the second's first stay where
 * they are, and so do the second's that come after the first's last (runs
 * written by interleaved threads overlap by a few). Empty (from == to) when
 * the runs are in order already. */
static void overlap(const unsigned char *p, size_t lo, size_t mid, size_t hi, size_t size,
                    int (*cmp)(const void *, const void *), size_t *from, size_t *to) {
  if (!after(p + (mid - 1) * size, p + mid * size, cmp)) {
    *from = *to = mid;
    return;
  }
  size_t l = lo, r = mid;
  while (l < r) {
    size_t m = l + (r - l) / 2;
    if (after(p + m * size, p + mid * size, cmp))
      r = m;
    else
      l = m + 1;
  }
  *from = l;
  l = mid, r = hi;
  while (l < r) {
    size_t m = l + (r - l) / 2;
    if (after(p + (mid - 1) * size, p + m * size, cmp))
      l = m + 1;
    else
      r = m;
  }
  *to = l;
}

/* Merges the sorted runs [lo, mid) and [mid, hi) (element indexes) in
 * place, the smaller side of their overlap copied to buf first. */
static void merge_runs(unsigned char *p, size_t lo, size_t mid, size_t hi, size_t size,
                       unsigned char *buf, int (*cmp)(const void *, const void *)) {
  overlap(p, lo, mid, hi, size, cmp, &lo, &hi);
  if (lo == hi) return; /* already in order */
  size_t na = mid - lo, nb = hi - mid;
  if (na <= nb) { /* forward: the output never overtakes the second run's reader */
    memcpy(buf, p + lo * size, na * size);
    size_t i = 0, j = mid, k = lo;
    while (i < na && j < hi) {
      if (after(buf + i * size, p + j * size, cmp))
        memcpy(p + k++ * size, p + j++ * size, size);
      else
        memcpy(p + k++ * size, buf + i++ * size, size);
    }
    memcpy(p + k * size, buf + i * size, (na - i) * size);
  } else { /* backward, from the ends */
    memcpy(buf, p + mid * size, nb * size);
    size_t i = mid, j = nb, k = hi; /* one past the next element to take from each */
    while (i > lo && j > 0) {
      if (after(p + (i - 1) * size, buf + (j - 1) * size, cmp))
        memcpy(p + --k * size, p + --i * size, size);
      else
        memcpy(p + --k * size, buf + --j * size, size);
    }
    memcpy(p + lo * size, buf, j * size);
  }
}

/* Whether merging `nruns` runs (starts in start[0..nruns], start[nruns] ==
 * n) is cheaper than the radix sort: up to MAX_RUNS runs, always; more,
 * when neighbouring runs overlap little, judged by the first round of
 * merges touching at most n / MANY_RUNS_OVERLAP elements in all. Runs that
 * each span the whole time range (many threads' events written thread
 * after thread) overlap wholly and merging them costs n log(runs): 1.5-2.6
 * times the radix sort for 200-1000 such runs of 40 thousand elements;
 * threads interleaved in time (the API calls of HTA's trace_diff and
 * negative_queue traces: 146 and 113 runs) overlap by a few elements per
 * pair and merge ~10 times faster than the radix sort. */
#define MANY_RUNS_OVERLAP 8

static int worth_merging(const unsigned char *p, const size_t *start, size_t nruns, size_t size,
                         int (*cmp)(const void *, const void *)) {
  if (nruns <= MAX_RUNS) return 1;
  size_t n = start[nruns], touched = 0;
  for (size_t r = 0; r + 1 < nruns; r += 2) {
    size_t from, to;
    overlap(p, start[r], start[r + 1], start[r + 2], size, cmp, &from, &to);
    touched += to - from;
    if (touched > n / MANY_RUNS_OVERLAP) return 0;
  }
  return 1;
}

/* When the array is a few sorted runs (the first break at `first`), or
 * many that overlap little (worth_merging), sorts it by merging them and
 * returns 1; else 0. Counting gives up past n / MIN_RUN_LENGTH runs
 * (random input has runs of ~2). */
#define MIN_RUN_LENGTH 16

static int merge_runs_if_cheap(unsigned char *p, size_t n, size_t size, size_t first,
                               int (*cmp)(const void *, const void *)) {
  size_t max_runs = n / MIN_RUN_LENGTH > MAX_RUNS ? n / MIN_RUN_LENGTH : MAX_RUNS;
  size_t *start = malloc((max_runs + 1) * sizeof *start), nruns = 1, largest_half = 0;
  unsigned char *buf = NULL;
  int merged = 0;
  if (!start) return 0;
  start[0] = 0;
  start[nruns++] = first;
  for (size_t i = first + 1; i < n; i++)
    if (after(p + (i - 1) * size, p + i * size, cmp)) {
      if (nruns == max_runs) goto out;
      start[nruns++] = i;
    }
  start[nruns] = n;
  if (!worth_merging(p, start, nruns, size, cmp)) goto out;
  /* the buffer: the smaller side of the widest merge, at most half */
  largest_half = n / 2 + 1;
  if (largest_half > MERGE_BUF_MAX / size) goto out;
  buf = malloc(largest_half * size);
  if (!buf) goto out;
  merged = 1;
  while (nruns > 1) { /* run pairs merged until one run is left */
    size_t out = 0;
    for (size_t r = 0; r + 1 < nruns; r += 2) {
      merge_runs(p, start[r], start[r + 1], start[r + 2], size, buf, cmp);
      start[out++] = start[r];
    }
    if (nruns % 2) start[out++] = start[nruns - 1];
    start[out] = n;
    nruns = out;
  }
out:
  free(buf);
  free(start);
  return merged;
}

void ssa_sort_by_start(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  unsigned char *p = base;
  if (n < 2) return;
  size_t i = 1;
  while (i < n && !after(p + (i - 1) * size, p + i * size, cmp))
    i++;
  if (i == n)
    return; /* already in order: the common case for one host thread
             * and for ops merged from their lanes (op_stage.c) */
  if (size <= MAX_ELEM && merge_runs_if_cheap(p, n, size, i, cmp)) return;
  if (size > MAX_ELEM) {
    qsort(base, n, size, cmp);
    return;
  }
  uint64_t lo = key_of(p), hi = lo;
  for (size_t k = 1; k < n; k++) {
    uint64_t v = key_of(p + k * size);
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  uint64_t diff = lo ^ hi;
  int shift = -1;
  if (diff) {
    /* digits aligned on the highest differing bit, so the first pass
     * already spreads the keys over up to 256 buckets */
    int bit = 63 - __builtin_clzll(diff);
    shift = bit >= 7 ? bit - 7 : 0;
  }
  flag_sort(p, n, size, shift, cmp);
}
