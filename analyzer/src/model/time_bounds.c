/*
 * time_bounds.c — keeps every time of a rank inside ±SSA_TIME_LIMIT so that
 * the analysis can subtract any two of them (gaps, spans, skews, offsets)
 * without overflowing int64. Real traces are nowhere near: the tracer's
 * clock and CUPTI count nanoseconds since boot or since 1970, about 2^60.6
 * in 2026, while the limit, 2^62 - 1 ns, lies in the year 2116. A file that
 * holds such times is damaged or crafted; its times are clamped to the
 * limit and the rank says how many records it changed.
 */
#include <stdint.h>

#include "ssa_model.h"

#define SSA_TIME_LIMIT (((int64_t)1 << 62) - 1)

static int clamp(int64_t *t) {
  if (*t > SSA_TIME_LIMIT) {
    *t = SSA_TIME_LIMIT;
    return 1;
  }
  if (*t < -SSA_TIME_LIMIT) {
    *t = -SSA_TIME_LIMIT;
    return 1;
  }
  return 0;
}

static int clamp_u(uint64_t *t) {
  if (*t > (uint64_t)SSA_TIME_LIMIT) {
    *t = (uint64_t)SSA_TIME_LIMIT;
    return 1;
  }
  return 0;
}

int ssa_rank_bound_times(ssa_rank *r) {
  uint64_t n = 0;
  for (size_t i = 0; i < r->nops; i++)
    n += (clamp(&r->ops[i].start) | clamp(&r->ops[i].end)) != 0;
  for (size_t i = 0; i < r->napis; i++)
    n += (clamp(&r->apis[i].start) | clamp(&r->apis[i].end)) != 0;
  for (size_t i = 0; i < r->nranges; i++)
    n += (clamp(&r->ranges[i].start) | clamp(&r->ranges[i].end)) != 0;
  for (size_t i = 0; i < r->ncolls; i++)
    n += (clamp(&r->colls[i].start) | clamp(&r->colls[i].end)) != 0;
  for (size_t i = 0; i < r->nsyncs; i++)
    n += (clamp(&r->syncs[i].start) | clamp(&r->syncs[i].end)) != 0;
  for (size_t i = 0; i < r->ncounters; i++)
    n += clamp(&r->counters[i].time);
  for (size_t i = 0; i < r->nanchors; i++)
    n += (clamp_u(&r->anchors[i].trace_ns) | clamp_u(&r->anchors[i].realtime_ns) |
          clamp_u(&r->anchors[i].monotonic_ns) | clamp_u(&r->anchors[i].uncertainty_ns)) != 0;
  n += clamp(&r->header_start);
  if (n)
    return ssa_rank_warn(r,
                         "rank %d: %llu records have times beyond +-2^62 ns (year 2116); "
                         "they were clamped (damaged or crafted file?)",
                         r->rank, (unsigned long long)n);
  return 0;
}
