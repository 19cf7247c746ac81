/*
 * delay_stats.c — the launch-delay distribution of a window (ssa_delay_stats_of): count,
 * mean, min, max and nearest-rank percentiles p50/p90/p99, found by selection in place
 * (O(n), no sort and no copy): a radix select over the values' range for large inputs, a
 * quickselect otherwise. breakdown.c collects the delays; this file only ranks them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

static void swap_i64(int64_t *v, size_t i, size_t j) {
  int64_t t = v[i];
  v[i] = v[j];
  v[j] = t;
}

/* Puts the k-th smallest of v[lo, hi) at v[k], nothing larger before it and
 * nothing smaller after it (quickselect, median of three; a subrange that
 * resists partitioning is sorted instead, so the worst case is n log n). */
static void select_kth(int64_t *v, size_t lo, size_t hi, size_t k) {
  int rounds = 0;
  while (hi - lo > 16) {
    if (++rounds > 64) {
      qsort(v + lo, hi - lo, sizeof *v, ssa_cmp_i64);
      return;
    }
    size_t mid = lo + (hi - lo) / 2;
    if (v[mid] < v[lo]) swap_i64(v, mid, lo);
    if (v[hi - 1] < v[lo]) swap_i64(v, hi - 1, lo);
    if (v[hi - 1] < v[mid]) swap_i64(v, hi - 1, mid);
    int64_t pivot = v[mid];
    /* Hoare partition: [lo, j] <= pivot <= [j + 1, hi) with lo <= j < hi - 1 */
    size_t i = lo, j = hi - 1;
    for (;;) {
      while (v[i] < pivot)
        i++;
      while (v[j] > pivot)
        j--;
      if (i >= j) break;
      swap_i64(v, i, j);
      i++;
      j--;
    }
    if (k <= j)
      hi = j + 1;
    else
      lo = j + 1;
  }
  for (size_t i = lo + 1; i < hi; i++) {
    int64_t x = v[i];
    size_t j = i;
    while (j > lo && v[j - 1] > x) {
      v[j] = v[j - 1];
      j--;
    }
    v[j] = x;
  }
}

/* The k-th smallest of v for three ranks k at once, for big arrays: one
 * pass counts the values in 2^16 buckets of (v - min) >> shift, the buckets
 * holding the three ranks are found from the counts, a second pass copies
 * those buckets' values out, and quickselect finishes inside them. Two
 * read-only passes instead of quickselect's several passes of swaps over
 * the whole array; v is left unchanged. Returns 0 (nothing found: the
 * caller selects in place) when memory is short or the three buckets hold
 * too much of the array to be worth copying. */
#define RADIX_SELECT_MIN 65536
#define RADIX_BITS       11

static int radix_select3(const int64_t *v, size_t n, int64_t mn, int64_t mx, const size_t k[3],
                         int64_t out[3]) {
  if (n > UINT32_MAX) return 0;
  uint64_t range = (uint64_t)mx - (uint64_t)mn;
  int shift = 0;
  while (shift < 64 && (range >> shift) >= ((uint64_t)1 << RADIX_BITS))
    shift++;
  size_t nb = (size_t)(range >> shift) + 1;
  uint32_t *count = calloc(nb, sizeof *count);
  if (!count) return 0;
  for (size_t i = 0; i < n; i++)
    count[((uint64_t)v[i] - (uint64_t)mn) >> shift]++;
  /* the bucket of each rank (k[] ascending) and how many values lie below it */
  size_t bucket[3], below[3], at = 0, b = 0;
  for (int j = 0; j < 3; j++) {
    while (at + count[b] <= k[j])
      at += count[b++];
    bucket[j] = b;
    below[j] = at;
  }
  /* the distinct buckets, their place in w and their sizes */
  size_t ids[3], first[3], len[3], fill[3], take = 0;
  int nd = 0;
  for (int j = 0; j < 3; j++)
    if (nd == 0 || ids[nd - 1] != bucket[j]) {
      ids[nd] = bucket[j];
      first[nd] = fill[nd] = take;
      len[nd] = count[bucket[j]];
      take += len[nd++];
    }
  free(count);
  if (take > n / 4) return 0;
  int64_t *w = malloc((take ? take : 1) * sizeof *w);
  if (!w) return 0;
  for (size_t i = 0; i < n; i++) {
    size_t bi = (size_t)(((uint64_t)v[i] - (uint64_t)mn) >> shift);
    if (bi == ids[0])
      w[fill[0]++] = v[i];
    else if (nd > 1 && bi == ids[1])
      w[fill[1]++] = v[i];
    else if (nd > 2 && bi == ids[2])
      w[fill[2]++] = v[i];
  }
  for (int j = 0; j < 3; j++) {
    int d = 0;
    while (ids[d] != bucket[j])
      d++;
    size_t kk = first[d] + (k[j] - below[j]);
    select_kth(w, first[d], first[d] + len[d], kk);
    out[j] = w[kk];
  }
  free(w);
  return 1;
}

/* Nearest-rank percentiles (the ceil(p n / 100)-th smallest), found by
 * selection in place: O(n), no sort and no copy. */
void ssa_delay_stats_of(int64_t *v, size_t n, ssa_delay_stats *s) {
  memset(s, 0, sizeof *s);
  s->count = n;
  if (n == 0) return;
  int64_t sum = 0, mn = v[0], mx = v[0];
  for (size_t i = 0; i < n; i++) {
    sum += v[i];
    if (v[i] < mn) mn = v[i];
    if (v[i] > mx) mx = v[i];
  }
  s->mean = (double)sum / (double)n;
  s->min = mn;
  s->max = mx;
  size_t k50 = (n * 50 + 99) / 100 - 1, k90 = (n * 90 + 99) / 100 - 1,
         k99 = (n * 99 + 99) / 100 - 1;
  size_t ks[3] = {k50, k90, k99};
  int64_t out[3];
  if (n >= RADIX_SELECT_MIN && radix_select3(v, n, mn, mx, ks, out)) {
    s->p50 = out[0];
    s->p90 = out[1];
    s->p99 = out[2];
    return;
  }
  select_kth(v, 0, n, k50);
  s->p50 = v[k50];
  select_kth(v, k50, n, k90);
  s->p90 = v[k90];
  select_kth(v, k90, n, k99);
  s->p99 = v[k99];
}
