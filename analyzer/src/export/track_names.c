/*
 * track_names.c — the names of a rank's process and lane tracks in the
 * exports (ssa_track_names.h).
 */
#include <stdio.h>

#include "ssa_track_names.h"

/* The device of the rank's first GPU lane; -1 when it has none. */
static int gpu_device(const ssa_rank *r) {
  for (uint32_t i = 0; i < r->nlanes; i++)
    if (r->lanes[i].kind == SSA_LANE_GPU) return (int)r->lanes[i].device;
  return -1;
}

/* "rank R (host, GPU d)", or "rank R (GPU d)" when the trace names no host. */
void ssa_rank_track_label(const ssa_rank *r, char *buf, size_t n) {
  const char *host = r->hostname ? r->hostname : "";
  int dev = gpu_device(r);
  if (dev >= 0)
    snprintf(buf, n, "rank %d (%s%sGPU %d)", r->rank, host, *host ? ", " : "", dev);
  else
    snprintf(buf, n, "rank %d (%s%scpu)", r->rank, host, *host ? ", " : "");
}

void ssa_lane_label(const ssa_rank *r, const ssa_lane *l, char *buf, size_t n) {
  const char *name = ssa_rank_str(r, l->name);
  if (l->by_name) { /* a string thread id or an importer's lane: its name, never a 64-bit id */
    snprintf(buf, n, "%s", name);
    return;
  }
  if (l->kind == SSA_LANE_HOST) { /* thread ids print signed */
    snprintf(buf, n, name[0] ? "thread %lld (%s)" : "thread %lld", (long long)l->id, name);
    return;
  }
  const char *kind = l->kind == SSA_LANE_CPU ? "cpu stream" : "stream";
  if (name[0])
    snprintf(buf, n, "%s %llu (%s)", kind, (unsigned long long)l->id, name);
  else
    snprintf(buf, n, "%s %llu", kind, (unsigned long long)l->id);
}
