/*
 * memory_timeline.c — memory over time of a PyTorch trace (ssa_ops.h, issue 33 §3): the
 * "[memory]" events of profile_memory=True (kept by the importer as ssa_rank.allocs when
 * asked) per rank and device: the allocated bytes' peak and when, the peak of each analysed
 * step (the bytes allocated when it began count: memory held across steps is in every step),
 * the reserved peak (CUDA's caching allocator), and what was live at the peak: the
 * allocations made up to it and not freed before it, the largest first, each with the CPU op
 * that made it (the innermost cpu_op around the event on its thread); and the device's events
 * in time order, for the series of `ops --memory --series`.
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_ops.h"

typedef struct sort_ctx {
  const ssa_alloc *a;
} sort_ctx;

/* device, time, file order */
static int cmp_time(const void *pa, const void *pb, void *ctx) {
  const ssa_alloc *v = ((const sort_ctx *)ctx)->a;
  uint32_t ia = *(const uint32_t *)pa, ib = *(const uint32_t *)pb;
  const ssa_alloc *a = &v[ia], *b = &v[ib];
  if (a->device_type != b->device_type) return a->device_type < b->device_type ? -1 : 1;
  if (a->device_id != b->device_id) return a->device_id < b->device_id ? -1 : 1;
  if (a->time != b->time) return a->time < b->time ? -1 : 1;
  return ia < ib ? -1 : 1;
}

/* address, then position in time order (the uint32 pairs: {position, event}) */
static int cmp_addr(const void *pa, const void *pb, void *ctx) {
  const ssa_alloc *v = ((const sort_ctx *)ctx)->a;
  const uint32_t *a = pa, *b = pb;
  if (v[a[1]].addr != v[b[1]].addr) return v[a[1]].addr < v[b[1]].addr ? -1 : 1;
  return a[0] < b[0] ? -1 : a[0] > b[0];
}

static int cmp_live(const void *pa, const void *pb) {
  const ssa_mem_live *a = pa, *b = pb;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  return (a->time > b->time) - (a->time < b->time);
}

/* The allocations live at the peak: events [0, upto] of `ev` (one device, time order). */
static int live_at(const ssa_rank *r, const ssa_range_index *ops, const uint32_t *ev, size_t upto,
                   ssa_mem_device *d) {
  uint32_t(*pairs)[2] = malloc((upto + 1) * sizeof *pairs);
  ssa_mem_live *live = malloc((upto + 1) * sizeof *live);
  if (!pairs || !live) {
    free(pairs);
    free(live);
    return -1;
  }
  for (size_t i = 0; i <= upto; i++) {
    pairs[i][0] = (uint32_t)i;
    pairs[i][1] = ev[i];
  }
  sort_ctx sc = {r->allocs};
  qsort_r(pairs, upto + 1, sizeof *pairs, cmp_addr, &sc);
  size_t n = 0;
  for (size_t i = 0; i <= upto;) {
    size_t j = i;
    uint32_t held = UINT32_MAX; /* the last allocation at this address not freed since */
    for (; j <= upto && r->allocs[pairs[j][1]].addr == r->allocs[pairs[i][1]].addr; j++) {
      const ssa_alloc *a = &r->allocs[pairs[j][1]];
      held = a->bytes > 0 ? pairs[j][1] : a->bytes < 0 ? UINT32_MAX : held;
    }
    if (held != UINT32_MAX) {
      const ssa_alloc *a = &r->allocs[held];
      uint32_t op = ssa_range_index_around(r, ops, a->lane, a->time);
      live[n++] =
          (ssa_mem_live){.bytes = a->bytes,
                         .time = a->time,
                         .op = op == SSA_NONE ? "" : ssa_rank_str(r, r->ranges[ops->idx[op]].name)};
      d->live_bytes += a->bytes;
    }
    i = j;
  }
  d->live_count = n;
  qsort(live, n, sizeof *live, cmp_live);
  d->ntop = n < SSA_MEM_TOP ? n : SSA_MEM_TOP;
  memcpy(d->top, live, d->ntop * sizeof *live);
  free(pairs);
  free(live);
  return 0;
}

/* One device's events (ev[0..n), time order) of rank result rr into d. */
static int device_timeline(const ssa_rank_result *rr, const ssa_range_index *ops,
                           const uint32_t *ev, size_t n, ssa_mem_device *d) {
  const ssa_rank *r = rr->rank;
  size_t peak = 0;
  for (size_t i = 0; i < n; i++) {
    const ssa_alloc *a = &r->allocs[ev[i]];
    if (a->allocated > r->allocs[ev[peak]].allocated) peak = i;
    if (a->reserved > d->peak_reserved) d->peak_reserved = a->reserved;
  }
  d->events = n;
  if (!(d->series = malloc(n * sizeof *d->series))) return -1;
  memcpy(d->series, ev, n * sizeof *ev);
  d->peak_allocated = r->allocs[ev[peak]].allocated;
  d->peak_time = r->allocs[ev[peak]].time;
  d->nsteps = rr->nsteps;
  if (rr->nsteps && !(d->step_peak = calloc(rr->nsteps, sizeof *d->step_peak))) return -1;
  if (rr->nsteps && !(d->step_number = calloc(rr->nsteps, sizeof *d->step_number))) return -1;
  size_t i = 0;
  int64_t held = 0; /* allocated after the last event before the step */
  for (size_t s = 0; s < rr->nsteps; s++) {
    const ssa_step *st = &rr->steps[s];
    for (; i < n && r->allocs[ev[i]].time < st->start; i++)
      held = r->allocs[ev[i]].allocated;
    int64_t p = held;
    for (size_t j = i; j < n && r->allocs[ev[j]].time < st->end; j++)
      if (r->allocs[ev[j]].allocated > p) p = r->allocs[ev[j]].allocated;
    d->step_peak[s] = p;
    d->step_number[s] = st->number;
  }
  return live_at(r, ops, ev, peak, d);
}

static int rank_memory(const ssa_rank_result *rr, ssa_mem_table *mt) {
  const ssa_rank *r = rr->rank;
  if (!r->nallocs) return 0;
  uint32_t *ev = malloc(r->nallocs * sizeof *ev);
  ssa_range_index ops;
  if (!ev || ssa_range_index_build(r, "cpu_op", &ops)) {
    free(ev);
    ssa_range_index_free(&ops);
    return -1;
  }
  for (size_t i = 0; i < r->nallocs; i++)
    ev[i] = (uint32_t)i;
  sort_ctx sc = {r->allocs};
  qsort_r(ev, r->nallocs, sizeof *ev, cmp_time, &sc);
  int rc = 0;
  for (size_t i = 0; i < r->nallocs && !rc;) {
    size_t j = i;
    const ssa_alloc *a = &r->allocs[ev[i]];
    while (j < r->nallocs && r->allocs[ev[j]].device_type == a->device_type &&
           r->allocs[ev[j]].device_id == a->device_id)
      j++;
    ssa_mem_device *v = realloc(mt->devices, (mt->n + 1) * sizeof *v);
    if (!v) {
      rc = -1;
      break;
    }
    mt->devices = v;
    ssa_mem_device *d = &mt->devices[mt->n++];
    memset(d, 0, sizeof *d);
    d->rank = r->rank;
    d->rank_ptr = r;
    d->device_type = a->device_type;
    d->device_id = a->device_id;
    rc = device_timeline(rr, &ops, ev + i, j - i, d);
    i = j;
  }
  free(ev);
  ssa_range_index_free(&ops);
  return rc;
}

int ssa_mem_table_build(const ssa_analysis *an, ssa_mem_table *mt) {
  memset(mt, 0, sizeof *mt);
  for (size_t ri = 0; ri < an->nranks; ri++)
    if ((an->opt.rank < 0 || an->ranks[ri].rank->rank == an->opt.rank) &&
        rank_memory(&an->ranks[ri], mt)) {
      ssa_mem_table_free(mt);
      return STEPSCOPE_E_NOMEM;
    }
  return 0;
}

void ssa_mem_table_free(ssa_mem_table *mt) {
  for (size_t i = 0; i < mt->n; i++) {
    free(mt->devices[i].step_peak);
    free(mt->devices[i].step_number);
    free(mt->devices[i].series);
  }
  free(mt->devices);
  memset(mt, 0, sizeof *mt);
}
