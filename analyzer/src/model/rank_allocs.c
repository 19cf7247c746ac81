/*
 * rank_allocs.c — one allocation or free of a memory profile into a rank (ssa_model.h): kept
 * as an ssa_alloc (memory_timeline.c reads them) and as the device's allocated bytes (and a
 * caching allocator's reserved bytes) after it, COUNTERs "memory allocated (cuda:0)" that the
 * exports draw as memory tracks. Shared by the Kineto importer ("[memory]" events) and the
 * stepscope trace source (MEMORY records), each only when asked (ssa_import_options.op_memory).
 */
#include <stdio.h>
#include <string.h>

#include "ssa_model.h"

int ssa_rank_add_alloc(ssa_rank *r, const ssa_alloc *a) {
  if (ssa_grow((void **)&r->allocs, &r->allocs_cap, r->nallocs + 1, sizeof *r->allocs))
    return STEPSCOPE_E_NOMEM;
  r->allocs[r->nallocs++] = *a;
  char dev[32], name[64];
  if (a->device_type == 0)
    snprintf(dev, sizeof dev, "cpu");
  else
    snprintf(dev, sizeof dev, "%s:%lld", a->device_type == 1 ? "cuda" : "device",
             (long long)a->device_id);
  for (int reserved = 0; reserved < 2; reserved++) {
    if (reserved && (a->device_type == 0 || a->reserved < 0)) break; /* none, or not known */
    snprintf(name, sizeof name, "memory %s (%s)", reserved ? "reserved" : "allocated", dev);
    stepscope_record rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_COUNTER;
    rec.u.counter.time_ns = (uint64_t)a->time;
    rec.u.counter.name = ssa_rank_intern(r, name);
    rec.u.counter.device = a->device_id < 0 ? 0 : (uint32_t)a->device_id;
    rec.u.counter.value = (double)(reserved ? a->reserved : a->allocated);
    if (!rec.u.counter.name) return STEPSCOPE_E_NOMEM;
    int rc = ssa_rank_add_record(r, &rec);
    if (rc) return rc;
  }
  return 0;
}
