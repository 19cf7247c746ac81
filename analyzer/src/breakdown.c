/*
 * breakdown.c — the per-rank metrics of SPEC §4: temporal breakdown with
 * closed accounting, overlap, exposed communication and copies, idle
 * breakdown per device and per stream, pipeline bubble, launch delays and the
 * per-rank kernel statistics. One pass over the rank's ops (sorted by start)
 * builds four interval sets — U(COMP), U(COMM), U(MEM) and U(non-pipeline
 * COMM) — and the device and stream idle gaps with their causes; each window
 * (a step, or the envelope of the selected steps) is then measured with one
 * sweep of the four sets (intervals.c), so every number is an exact integer
 * sum and compute + exposed_comm + exposed_mem + idle = span by
 * construction.
 *
 * Idle causes of a gap [a, b) that ends when op(s) start at b
 * (docs/metrics.md "Idle breakdown"), with T the launch-gap threshold:
 *   launch_gap  b - a < T;
 *   host_wait   else, the launch call of an op starting at b began at or
 *               after a (the device waited for the CPU);
 *   sync_wait   else, a SYNC record on that op's stream overlaps (a, b), or
 *               an op on another stream of the rank ended in [b - T, b]
 *               (a cross-stream dependency released it);
 *   other       otherwise, and for the gap after the last op.
 * When several ops start at b the first cause in the order host_wait,
 * sync_wait, other that applies to any of them wins. The gap before the first
 * op is open (a = -inf). Zero-length ops are not activity.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_analysis.h"

const char *const ssa_idle_cause_names[SSA_IDLE_N] = {"host_wait", "launch_gap", "sync_wait",
                                                      "other"};

typedef struct rank_ctx {
  ssa_analysis *a;
  ssa_rank_result *rr;
  const ssa_rank *r;
  int64_t T;
  int64_t *sync_prefix_end;     /* running max of sync ends, in (lane, start) order */
  uint32_t *by_end;             /* op indices sorted by end (built on demand) */
  int by_end_failed;
} rank_ctx;

static int cmp_by_end(const void *pa, const void *pb, void *arg) {
  const ssa_op *ops = arg;
  const ssa_op *a = &ops[*(const uint32_t *)pa], *b = &ops[*(const uint32_t *)pb];
  return a->end < b->end ? -1 : a->end > b->end;
}

static int sync_overlaps(rank_ctx *c, uint32_t lane, int64_t a, int64_t b) {
  const ssa_rank *r = c->r;
  if (r->nsyncs == 0) return 0;
  /* first sync of the lane with start >= b */
  size_t lo = 0, hi = r->nsyncs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const ssa_sync *s = &r->syncs[mid];
    if (s->lane < lane || (s->lane == lane && s->start < b)) lo = mid + 1;
    else hi = mid;
  }
  /* scan back over the lane's syncs that start before b */
  for (size_t i = lo; i-- > 0;) {
    const ssa_sync *s = &r->syncs[i];
    if (s->lane != lane) break;
    if (c->sync_prefix_end[i] <= a) break; /* none earlier ends after a */
    if (s->end > a && s->start < b) return 1;
  }
  return 0;
}

static int other_lane_ended(rank_ctx *c, uint32_t lane, int64_t lo_t, int64_t hi_t) {
  const ssa_rank *r = c->r;
  if (!c->by_end && !c->by_end_failed) {
    c->by_end = malloc(r->nops * sizeof *c->by_end);
    if (!c->by_end) {
      c->by_end_failed = 1;
      return 0;
    }
    for (size_t i = 0; i < r->nops; i++) c->by_end[i] = (uint32_t)i;
    qsort_r(c->by_end, r->nops, sizeof *c->by_end, cmp_by_end, (void *)r->ops);
  }
  if (!c->by_end) return 0;
  size_t lo = 0, hi = r->nops;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->ops[c->by_end[mid]].end < lo_t) lo = mid + 1;
    else hi = mid;
  }
  for (size_t i = lo; i < r->nops; i++) {
    const ssa_op *o = &r->ops[c->by_end[i]];
    if (o->end > hi_t) break;
    if (o->lane != lane && o->end > o->start) return 1;
  }
  return 0;
}

/* Cause of gap [a, b) ending at the ops starting at b from index `first`;
 * lane = SSA_NONE for the device level. */
static uint32_t classify(rank_ctx *c, int64_t a, int64_t b, size_t first, uint32_t lane) {
  if (a != INT64_MIN && b - a < c->T) return SSA_IDLE_LAUNCH_GAP;
  const ssa_rank *r = c->r;
  uint32_t best = SSA_IDLE_OTHER;
  for (size_t j = first; j < r->nops && r->ops[j].start == b; j++) {
    const ssa_op *o = &r->ops[j];
    if (o->end <= o->start) continue;
    if (lane != SSA_NONE && o->lane != lane) continue;
    if (o->launch != SSA_NONE && r->apis[o->launch].start >= a) return SSA_IDLE_HOST_WAIT;
    if (best != SSA_IDLE_SYNC_WAIT &&
        (sync_overlaps(c, o->lane, a, b) || other_lane_ended(c, o->lane, b - c->T, b)))
      best = SSA_IDLE_SYNC_WAIT;
  }
  return best;
}

static int is_pipeline_comm(const ssa_rank *r, const ssa_op *o, int pipeline) {
  if (o->coll != SSA_NONE) return (r->colls[o->coll].flags & STEPSCOPE_COLL_F_PIPELINE) != 0;
  return pipeline && o->kind == SSA_OP_KERNEL && ssa_is_nccl_p2p_kernel_name(ssa_rank_str(r, o->name));
}

static int64_t clip_len(int64_t a, int64_t b, int64_t t0, int64_t t1) {
  if (a < t0) a = t0;
  if (b > t1) b = t1;
  return b > a ? b - a : 0;
}

static int cmp_i64(const void *pa, const void *pb) {
  int64_t x = *(const int64_t *)pa, y = *(const int64_t *)pb;
  return x < y ? -1 : x > y;
}

static void delay_stats(int64_t *v, size_t n, ssa_delay_stats *s) {
  memset(s, 0, sizeof *s);
  s->count = n;
  if (n == 0) return;
  qsort(v, n, sizeof *v, cmp_i64);
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += (double)v[i];
  s->mean = sum / (double)n;
  s->min = v[0];
  s->max = v[n - 1];
  /* nearest rank: the ceil(p n / 100)-th smallest */
  s->p50 = v[(n * 50 + 99) / 100 - 1];
  s->p90 = v[(n * 90 + 99) / 100 - 1];
  s->p99 = v[(n * 99 + 99) / 100 - 1];
}

typedef struct delay_buf {
  int64_t *v;
  size_t n, cap;
} delay_buf;

static int push_delay(delay_buf *b, int64_t d) {
  if (ssa_grow((void **)&b->v, &b->cap, b->n + 1, sizeof *b->v)) return -1;
  b->v[b->n++] = d;
  return 0;
}

static void measure_window(rank_ctx *c, ssa_window *w) {
  ssa_rank_result *rr = c->rr;
  const ssa_interval_list *lists[4] = {&rr->comp, &rr->comm, &rr->mem, &rr->nonpipe_comm};
  int64_t bucket[16] = {0};
  w->span = w->end > w->start ? w->end - w->start : 0;
  if (w->span > 0) ssa_sweep(lists, 4, w->start, w->end, bucket, NULL, NULL);
  w->compute = w->comm = w->overlap = w->busy = w->exposed_mem = w->bubble = 0;
  w->pipeline_comm_only = 0;
  for (unsigned m = 0; m < 16; m++) {
    if (m & 1) w->compute += bucket[m];
    if (m & 2) w->comm += bucket[m];
    if ((m & 3) == 3) w->overlap += bucket[m];
    if (m & 7) w->busy += bucket[m];
    if ((m & 4) && !(m & 3)) w->exposed_mem += bucket[m];
    if (!(m & 9)) w->bubble += bucket[m];
    if (!(m & 9) && (m & 2)) w->pipeline_comm_only += bucket[m];
  }
  w->exposed_comm = w->comm - w->overlap;
  w->idle = w->span - w->busy;
  memset(w->idle_cause, 0, sizeof w->idle_cause);
  /* device gaps overlapping the window */
  size_t lo = 0, hi = rr->ngaps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (rr->gaps[mid].b <= w->start) lo = mid + 1;
    else hi = mid;
  }
  for (size_t i = lo; i < rr->ngaps && rr->gaps[i].a < w->end; i++)
    w->idle_cause[rr->gaps[i].cause] += clip_len(rr->gaps[i].a, rr->gaps[i].b, w->start, w->end);
  w->cpu_bound = w->span > 0 &&
                 (double)w->idle_cause[SSA_IDLE_HOST_WAIT] >= SSA_CPU_BOUND_FRACTION * (double)w->span;
}

static void read_pipeline_info(rank_ctx *c) {
  ssa_rank_result *rr = c->rr;
  const ssa_rank *r = c->r;
  double pp = 1, stage = -1, stages = 0, m = 0, v = 1;
  const char *layout = ssa_rank_meta(r, "layout");
  ssa_json_number(layout, "pp", &pp);
  ssa_json_number(layout, "pp_rank", &stage);
  const char *sched = ssa_rank_meta(r, "schedule");
  char name[64] = "";
  rr->bubble_theory = NAN;
  if (sched) {
    ssa_json_string(sched, "name", name, sizeof name);
    if (ssa_json_number(sched, "stages", &stages) && ssa_json_number(sched, "microbatches", &m)) {
      ssa_json_number(sched, "virtual_stages", &v);
      rr->bubble_theory = ssa_bubble_theory(name, (int)stages, (int)m, (int)v);
    }
    if (isnan(rr->bubble_theory)) {
      double bt;
      if (ssa_json_number(sched, "bubble_theory", &bt)) rr->bubble_theory = bt;
    }
    if (stages > pp) pp = stages;
  }
  rr->stage = (int)stage;
  rr->pipeline = pp > 1;
  for (size_t i = 0; i < r->ncolls && !rr->pipeline; i++)
    if (r->colls[i].flags & STEPSCOPE_COLL_F_PIPELINE) rr->pipeline = 1;
  if (!rr->pipeline && isnan(rr->bubble_theory)) rr->bubble_theory = 0;
}

typedef struct kstat {
  uint64_t count;
  int64_t total, min, max;
  int comm;
} kstat;

int ssa_analyze_rank(ssa_analysis *a, ssa_rank_result *rr) {
  const ssa_rank *r = rr->rank;
  rank_ctx c = {a, rr, r, a->launch_gap_ns, NULL, NULL, 0};
  int rc = STEPSCOPE_E_NOMEM;
  uint32_t *lane_slot = NULL;
  int64_t *lane_prev = NULL;
  delay_buf *delays = NULL;
  size_t *steps_by_time = NULL;
  ssa_step *all = NULL;
  size_t nall = 0;

  read_pipeline_info(&c);
  if (ssa_find_steps(r, a->opt.step_range_name, &all, &nall)) goto out;
  /* select steps */
  rr->steps = malloc((nall ? nall : 1) * sizeof *rr->steps);
  if (!rr->steps) goto out;
  for (size_t i = 0; i < nall; i++) {
    if (a->opt.has_step_filter && (all[i].number < a->opt.step_first || all[i].number > a->opt.step_last))
      continue;
    rr->steps[rr->nsteps++] = all[i];
  }
  rr->windows = calloc(rr->nsteps ? rr->nsteps : 1, sizeof *rr->windows);
  if (!rr->windows) goto out;
  /* totals window */
  ssa_window *tw = &rr->totals;
  memset(tw, 0, sizeof *tw);
  tw->step = -1;
  if (rr->nsteps) {
    tw->start = INT64_MAX;
    tw->end = INT64_MIN;
    tw->projected = 1;
    for (size_t i = 0; i < rr->nsteps; i++) {
      if (rr->steps[i].start < tw->start) tw->start = rr->steps[i].start;
      if (rr->steps[i].end > tw->end) tw->end = rr->steps[i].end;
    }
  } else if (r->nops) {
    tw->start = r->ops[0].start;
    tw->end = r->ops[0].end;
    for (size_t i = 1; i < r->nops; i++)
      if (r->ops[i].end > tw->end) tw->end = r->ops[i].end;
  } else if (nall == 0) {
    tw->start = tw->end = 0;
  }
  if (nall == 0 && r->nops)
    ssa_analysis_warn(a, "rank %d: no step ranges found; the whole trace is one window", r->rank);

  /* sync prefix maxima */
  if (r->nsyncs) {
    c.sync_prefix_end = malloc(r->nsyncs * sizeof *c.sync_prefix_end);
    if (!c.sync_prefix_end) goto out;
    for (size_t i = 0; i < r->nsyncs; i++) {
      int64_t e = r->syncs[i].end;
      if (i > 0 && r->syncs[i - 1].lane == r->syncs[i].lane && c.sync_prefix_end[i - 1] > e)
        e = c.sync_prefix_end[i - 1];
      c.sync_prefix_end[i] = e;
    }
  }
  /* device lanes */
  lane_slot = malloc((r->nlanes ? r->nlanes : 1) * sizeof *lane_slot);
  lane_prev = malloc((r->nlanes ? r->nlanes : 1) * sizeof *lane_prev);
  rr->lanes = calloc(r->nlanes ? r->nlanes : 1, sizeof *rr->lanes);
  if (!lane_slot || !lane_prev || !rr->lanes) goto out;
  for (uint32_t l = 0; l < r->nlanes; l++) {
    lane_prev[l] = INT64_MIN;
    lane_slot[l] = SSA_NONE;
    if (r->lanes[l].kind == SSA_LANE_HOST) continue;
    lane_slot[l] = (uint32_t)rr->nlanes;
    rr->lanes[rr->nlanes++].lane = l;
  }
  /* launch delay buffers: one per selected step, plus the totals */
  delays = calloc(rr->nsteps + 1, sizeof *delays);
  steps_by_time = malloc((rr->nsteps ? rr->nsteps : 1) * sizeof *steps_by_time);
  if (!delays || !steps_by_time) goto out;
  for (size_t i = 0; i < rr->nsteps; i++) steps_by_time[i] = i;
  for (size_t i = 1; i < rr->nsteps; i++) { /* insertion sort by range start */
    size_t k = steps_by_time[i], j = i;
    while (j > 0 && rr->steps[steps_by_time[j - 1]].range_start > rr->steps[k].range_start) {
      steps_by_time[j] = steps_by_time[j - 1];
      j--;
    }
    steps_by_time[j] = k;
  }
  kstat *ks = calloc(r->strings.count ? r->strings.count : 1, sizeof *ks);
  if (!ks) goto out;

  /* the sweep over ops */
  int64_t dev_end = INT64_MIN;
  int64_t t0 = tw->start, t1 = tw->end;
  size_t gcap = 0;
  for (size_t i = 0; i < r->nops; i++) {
    const ssa_op *o = &r->ops[i];
    if (o->kind == SSA_OP_KERNEL || o->kind == SSA_OP_HOST) {
      if (o->start >= t0 && o->start < t1 && o->name < r->strings.count) {
        kstat *k = &ks[o->name];
        int64_t d = o->end - o->start;
        if (k->count == 0 || d < k->min) k->min = d;
        if (k->count == 0 || d > k->max) k->max = d;
        k->count++;
        k->total += d;
        if (o->cls == SSA_CLS_COMM) k->comm = 1;
      }
    }
    if (o->launch != SSA_NONE) {
      int64_t lt = r->apis[o->launch].start;
      int64_t d = o->start - r->apis[o->launch].end;
      if (rr->nsteps) {
        size_t lo = 0, hi = rr->nsteps;
        while (lo < hi) {
          size_t mid = lo + (hi - lo) / 2;
          if (rr->steps[steps_by_time[mid]].range_start <= lt) lo = mid + 1;
          else hi = mid;
        }
        if (lo > 0 && lt < rr->steps[steps_by_time[lo - 1]].range_end) {
          if (push_delay(&delays[steps_by_time[lo - 1]], d) || push_delay(&delays[rr->nsteps], d))
            goto out_ks;
        }
      } else if (nall == 0 && o->start >= t0 && o->start < t1) {
        if (push_delay(&delays[0], d)) goto out_ks;
      }
    }
    if (o->end <= o->start) continue; /* zero-length: not activity */
    ssa_interval_list *cls = o->cls == SSA_CLS_COMPUTE ? &rr->comp
                             : o->cls == SSA_CLS_COMM  ? &rr->comm
                                                       : &rr->mem;
    if (ssa_interval_list_add(cls, o->start, o->end)) goto out_ks;
    if (o->cls == SSA_CLS_COMM && !is_pipeline_comm(r, o, rr->pipeline) &&
        ssa_interval_list_add(&rr->nonpipe_comm, o->start, o->end))
      goto out_ks;
    if (o->start > dev_end) {
      if (ssa_grow((void **)&rr->gaps, &gcap, rr->ngaps + 1, sizeof *rr->gaps)) goto out_ks;
      rr->gaps[rr->ngaps].a = dev_end;
      rr->gaps[rr->ngaps].b = o->start;
      rr->gaps[rr->ngaps].cause = classify(&c, dev_end, o->start, i, SSA_NONE);
      rr->ngaps++;
    }
    if (o->end > dev_end) dev_end = o->end;
    uint32_t slot = lane_slot[o->lane];
    if (slot != SSA_NONE && o->start > lane_prev[o->lane]) {
      int64_t a0 = lane_prev[o->lane];
      uint32_t cause = classify(&c, a0, o->start, i, o->lane);
      rr->lanes[slot].idle_cause[cause] += clip_len(a0, o->start, t0, t1);
    }
    if (o->end > lane_prev[o->lane]) lane_prev[o->lane] = o->end;
  }
  if (ssa_grow((void **)&rr->gaps, &gcap, rr->ngaps + 1, sizeof *rr->gaps)) goto out_ks;
  rr->gaps[rr->ngaps++] = (ssa_gap){dev_end, INT64_MAX, SSA_IDLE_OTHER};
  for (size_t s = 0; s < rr->nlanes; s++) {
    ssa_lane_idle *li = &rr->lanes[s];
    li->idle_cause[SSA_IDLE_OTHER] += clip_len(lane_prev[li->lane], INT64_MAX, t0, t1);
    int64_t idle = 0;
    for (int k = 0; k < SSA_IDLE_N; k++) idle += li->idle_cause[k];
    li->busy = (t1 > t0 ? t1 - t0 : 0) - idle;
  }

  /* windows */
  measure_window(&c, tw);
  delay_stats(delays[rr->nsteps].v, delays[rr->nsteps].n, &tw->launch);
  if (nall == 0) delay_stats(delays[0].v, delays[0].n, &tw->launch);
  for (size_t i = 0; i < rr->nsteps; i++) {
    ssa_window *w = &rr->windows[i];
    w->step = rr->steps[i].number;
    w->start = rr->steps[i].start;
    w->end = rr->steps[i].end;
    w->projected = rr->steps[i].projected;
    measure_window(&c, w);
    delay_stats(delays[i].v, delays[i].n, &w->launch);
  }
  /* hand the kernel stats to the cross-rank table */
  rr->error = 0;
  rc = 0;
  {
    size_t nk = 0;
    for (uint32_t id = 0; id < r->strings.count; id++) nk += ks[id].count > 0;
    rr->kstats = malloc((nk ? nk : 1) * sizeof *rr->kstats);
    if (!rr->kstats) {
      rc = STEPSCOPE_E_NOMEM;
      goto out_ks;
    }
    for (uint32_t id = 0; id < r->strings.count; id++) {
      if (!ks[id].count) continue;
      ssa_rank_kstat *k = &rr->kstats[rr->nkstats++];
      k->name = id;
      k->comm = (uint32_t)ks[id].comm;
      k->count = ks[id].count;
      k->total = ks[id].total;
      k->min = ks[id].min;
      k->max = ks[id].max;
    }
  }
out_ks:
  free(ks);
out:
  if (delays)
    for (size_t i = 0; i <= rr->nsteps; i++) free(delays[i].v);
  free(delays);
  free(steps_by_time);
  free(lane_slot);
  free(lane_prev);
  free(all);
  free(c.sync_prefix_end);
  free(c.by_end);
  if (rc) rr->error = rc;
  return rc;
}
