/*
 * steps.c — finds a rank's training steps and projects them onto the device.
 *
 * Step ranges, in order of preference:
 *   1. ranges named by the user (--step-range NAME): step number = payload if
 *      the range has an integer payload, else its index in time order;
 *   2. ranges named `step` in domain `stepscope` (the trainer's
 *      stepscope_step_begin): step number = payload;
 *   3. ranges named `ProfilerStep#N` (PyTorch): step number = N.
 *
 * Projection (docs/metrics.md "Steps"): an op belongs to step S when the
 * API call that launched it (joined by correlation id) *started* inside S's
 * host range [range_start, range_end). The step window is
 * [earliest start, latest end] of the ops that belong to it. A step that
 * launched nothing keeps its host range as its window (projected = 0).
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_analysis.h"

static int cmp_step_time(const void *pa, const void *pb) {
  const ssa_step *a = pa, *b = pb;
  if (a->range_start != b->range_start) return a->range_start < b->range_start ? -1 : 1;
  return 0;
}

static int cmp_step_number(const void *pa, const void *pb) {
  const ssa_step *a = pa, *b = pb;
  if (a->number != b->number) return a->number < b->number ? -1 : 1;
  return a->range_start < b->range_start ? -1 : a->range_start > b->range_start;
}

static int parse_profiler_step(const char *name, int64_t *n) {
  if (strncmp(name, "ProfilerStep#", 13) != 0) return 0;
  char *end;
  long long v = strtoll(name + 13, &end, 10);
  if (end == name + 13 || *end) return 0;
  *n = v;
  return 1;
}

int ssa_find_steps(const ssa_rank *r, const char *user_name, ssa_step **out, size_t *nout) {
  *out = NULL;
  *nout = 0;
  uint32_t id_step = 0, id_domain = 0, id_user = 0;
  /* look the names up without interning (the rank is read-only here) */
  for (uint32_t id = 1; id < r->strings.count; id++) {
    const char *s = ssa_strtab_get(&r->strings, id);
    if (!id_step && strcmp(s, "step") == 0) id_step = id;
    if (!id_domain && strcmp(s, "stepscope") == 0) id_domain = id;
    if (user_name && !id_user && strcmp(s, user_name) == 0) id_user = id;
  }
  int has_user = 0, has_step = 0, has_profiler = 0;
  for (size_t i = 0; i < r->nranges; i++) {
    const ssa_range *g = &r->ranges[i];
    int64_t num;
    if (id_user && g->name == id_user) has_user = 1;
    else if (id_step && g->name == id_step && g->domain == id_domain) has_step = 1;
    else if (!has_profiler && parse_profiler_step(ssa_rank_str(r, g->name), &num)) has_profiler = 1;
  }
  int mode = has_user ? 1 : has_step ? 2 : has_profiler ? 3 : 0; /* user, stepscope, PyTorch */
  if (!mode) return 0;
  ssa_step *v = NULL;
  size_t n = 0, cap = 0;
  for (size_t i = 0; i < r->nranges; i++) {
    const ssa_range *g = &r->ranges[i];
    int64_t number = 0;
    if (mode == 1) {
      if (g->name != id_user) continue;
      number = g->payload_kind == STEPSCOPE_PAYLOAD_UINT64 || g->payload_kind == STEPSCOPE_PAYLOAD_INT64
                   ? (int64_t)g->payload
                   : (int64_t)n;
    } else if (mode == 2) {
      if (g->name != id_step || g->domain != id_domain) continue;
      number = (int64_t)g->payload;
    } else if (!parse_profiler_step(ssa_rank_str(r, g->name), &number)) {
      continue;
    }
    if (ssa_grow((void **)&v, &cap, n + 1, sizeof *v)) {
      free(v);
      return STEPSCOPE_E_NOMEM;
    }
    ssa_step *s = &v[n++];
    memset(s, 0, sizeof *s);
    s->number = number;
    s->range_start = g->start;
    s->range_end = g->end;
    s->start = INT64_MAX;
    s->end = INT64_MIN;
  }
  /* project: ranges sorted by start, binary search each launch time */
  qsort(v, n, sizeof *v, cmp_step_time);
  for (size_t i = 0; i < r->nops; i++) {
    const ssa_op *o = &r->ops[i];
    if (o->launch == SSA_NONE) continue;
    int64_t t = r->apis[o->launch].start;
    size_t lo = 0, hi = n;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (v[mid].range_start <= t) lo = mid + 1;
      else hi = mid;
    }
    if (lo == 0) continue;
    ssa_step *s = &v[lo - 1];
    if (t >= s->range_end) continue;
    if (o->start < s->start) s->start = o->start;
    if (o->end > s->end) s->end = o->end;
    s->launched++;
  }
  for (size_t i = 0; i < n; i++) {
    if (v[i].launched) {
      v[i].projected = 1;
    } else {
      v[i].start = v[i].range_start;
      v[i].end = v[i].range_end;
    }
  }
  qsort(v, n, sizeof *v, cmp_step_number);
  *out = v;
  *nout = n;
  return 0;
}
