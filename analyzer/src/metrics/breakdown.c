/*
 * breakdown.c — the per-rank metrics of SPEC §4: temporal breakdown with
 * closed accounting, overlap, exposed communication and copies, idle
 * breakdown per device and per stream, pipeline bubble, launch delays and the
 * per-rank kernel statistics. One pass over the rank's ops (sorted by start)
 * builds four interval sets — U(COMP), U(COMM), U(MEM) and U(non-pipeline
 * COMM, less the waits for other pipeline stages found by pipeline_waits.c)
 * — and the device and stream idle gaps with their causes; each window
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
 *   sync_wait   else, a SYNC record on that op's stream overlaps (a, b) (not one naming
 *               its work: Kineto's carry the host call's times), or
 *               an op on another stream of the rank ended in [b - T, b]
 *               (a cross-stream dependency released it);
 *   other       otherwise, and for the gap after the last op.
 * When several ops start at b the first cause in the order host_wait,
 * sync_wait, other that applies to any of them wins. The gap before the first
 * op is open (a = -inf). Zero-length ops are not activity. The parts of a
 * host_wait gap during which a data loader range was open on the host
 * (ssa_is_data_loader_range) are data_loading instead.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

const char *const ssa_idle_cause_names[SSA_IDLE_N] = {"host_wait", "launch_gap", "sync_wait",
                                                      "other", "data_loading"};

int ssa_is_data_loader_range(const char *name) {
  return strstr(name, "DataLoader") != NULL;
}

typedef struct rank_ctx {
  ssa_analysis *a;
  ssa_rank_result *rr;
  const ssa_rank *r;
  int64_t T;
  int64_t *sync_prefix_end; /* running max of sync ends, in (lane, start) order */
  uint32_t *by_end;         /* op indices sorted by end (built on demand) */
  int by_end_failed;
  int64_t (*dl)[2]; /* data loader ranges: merged, in time order */
  size_t ndl;
} rank_ctx;

static int sync_overlaps(rank_ctx *c, uint32_t lane, int64_t a, int64_t b) {
  const ssa_rank *r = c->r;
  if (r->nsyncs == 0) return 0;
  /* first sync of the lane with start >= b */
  size_t lo = 0, hi = r->nsyncs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const ssa_sync *s = &r->syncs[mid];
    if (s->lane < lane || (s->lane == lane && s->start < b))
      lo = mid + 1;
    else
      hi = mid;
  }
  /* scan back over the lane's syncs that start before b */
  for (size_t i = lo; i-- > 0;) {
    const ssa_sync *s = &r->syncs[i];
    if (s->lane != lane) break;
    if (c->sync_prefix_end[i] <= a) break; /* none earlier ends after a */
    /* a wait that names its work (Kineto's Stream Wait Event) carries the host call's
     * times, not the stream's wait: the critical path joins it by correlation instead */
    if (s->on_corr) continue;
    if (s->end > a && s->start < b) return 1;
  }
  return 0;
}

static int other_lane_ended(rank_ctx *c, uint32_t lane, int64_t lo_t, int64_t hi_t) {
  const ssa_rank *r = c->r;
  if (!c->by_end && !c->by_end_failed) {
    c->by_end = malloc(r->nops * sizeof *c->by_end);
    /* sorted by ssa_sort_by_start (the key is the first field): the radix
     * sort instead of qsort_r's comparator calls (22 thousand ops of HTA's
     * df_index_resolver trace: ~1 ms of qsort_r) */
    ssa_key_index *ei = malloc(r->nops * sizeof *ei);
    if (!c->by_end || !ei) {
      free(c->by_end);
      free(ei);
      c->by_end = NULL;
      c->by_end_failed = 1;
      return 0;
    }
    for (size_t i = 0; i < r->nops; i++)
      ei[i] = (ssa_key_index){r->ops[i].end, i};
    ssa_sort_by_start(ei, r->nops, sizeof *ei, ssa_cmp_key_index);
    for (size_t i = 0; i < r->nops; i++)
      c->by_end[i] = (uint32_t)ei[i].index;
    free(ei);
  }
  if (!c->by_end) return 0;
  size_t lo = 0, hi = r->nops;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->ops[c->by_end[mid]].end < lo_t)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo; i < r->nops; i++) {
    const ssa_op *o = &r->ops[c->by_end[i]];
    if (o->end > hi_t) break;
    if (o->lane != lane && o->end > o->start) return 1;
  }
  return 0;
}

/* a - b, saturated to the int64 range (trace times may lie anywhere in it). */
static int64_t sat_sub(int64_t a, int64_t b) {
  int64_t d;
  if (__builtin_sub_overflow(a, b, &d)) return b < 0 ? INT64_MAX : INT64_MIN;
  return d;
}

/* Cause of gap [a, b) ending at the ops starting at b from index `first`;
 * lane = SSA_NONE for the device level. */
static uint32_t classify(rank_ctx *c, int64_t a, int64_t b, size_t first, uint32_t lane) {
  if (a != INT64_MIN && sat_sub(b, a) < c->T) return SSA_IDLE_LAUNCH_GAP;
  const ssa_rank *r = c->r;
  uint32_t best = SSA_IDLE_OTHER;
  for (size_t j = first; j < r->nops && r->ops[j].start == b; j++) {
    const ssa_op *o = &r->ops[j];
    if (o->end <= o->start) continue;
    if (lane != SSA_NONE && o->lane != lane) continue;
    if (o->launch != SSA_NONE && r->apis[o->launch].start >= a) return SSA_IDLE_HOST_WAIT;
    if (best != SSA_IDLE_SYNC_WAIT &&
        (sync_overlaps(c, o->lane, a, b) || other_lane_ended(c, o->lane, sat_sub(b, c->T), b)))
      best = SSA_IDLE_SYNC_WAIT;
  }
  return best;
}

static int64_t clip_len(int64_t a, int64_t b, int64_t t0, int64_t t1) {
  if (a < t0) a = t0;
  if (b > t1) b = t1;
  return b > a ? b - a : 0;
}

/* Idle time by cause, accumulated while device gaps stream by in time order
 * (they are disjoint), and copied at each query point as it is passed:
 * at[k][cause] = idle time of that cause in [t0, points[k]). */
typedef struct gap_acc {
  int64_t t0, t1;
  int64_t acc[SSA_IDLE_N];
  const int64_t *points;
  size_t npoints, next;
  int64_t (*at)[SSA_IDLE_N];
} gap_acc;

static void gap_add(gap_acc *g, int64_t a, int64_t b, uint32_t cause) {
  int64_t ca = a < g->t0 ? g->t0 : a, cb = b > g->t1 ? g->t1 : b;
  while (g->next < g->npoints && g->points[g->next] <= b) {
    int64_t p = g->points[g->next];
    memcpy(g->at[g->next], g->acc, sizeof g->acc);
    if (p > ca && cb > ca) g->at[g->next][cause] += (p < cb ? p : cb) - ca;
    g->next++;
  }
  if (cb > ca) g->acc[cause] += cb - ca;
}

static int cmp_interval(const void *pa, const void *pb) {
  const int64_t *a = pa, *b = pb;
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : (a[1] < b[1] ? -1 : a[1] > b[1]);
}

/* The rank's data loader ranges, merged into disjoint intervals. */
/* Whether range i is a data loader range with a duration, by its name's
 * entry in `loader` (data_loader_names). */
static int data_loader_range(const ssa_rank *r, size_t i, const uint8_t *loader) {
  const ssa_range *g = &r->ranges[i];
  return g->end > g->start && loader[g->name < r->strings.count ? g->name : 0];
}

/* Which names are data loader names: tested once per distinct name (the
 * ranges of a Kineto trace are its CPU ops, tens of thousands over a few
 * thousand names), so that the ranges are not visited at all when none is
 * (HTA's negative_queue trace, 26 thousand ranges: ~0.1 -> ~0.02 ms), and
 * once when some is (trace_diff control, 41 thousand ranges, one DataLoader
 * name: 0.17 -> ~0.08 ms, one pass instead of two). NULL when none is, or
 * on no memory (*failed). */
static uint8_t *data_loader_names(const ssa_rank *r, int *failed) {
  uint32_t count = r->strings.count ? r->strings.count : 1;
  uint8_t *loader = NULL;
  *failed = 0;
  for (uint32_t id = 0; id < count; id++) {
    if (!ssa_is_data_loader_range(ssa_rank_str(r, id))) continue;
    if (!loader && !(loader = calloc(count, 1))) {
      *failed = 1;
      return NULL;
    }
    loader[id] = 1;
  }
  return loader;
}

static int collect_data_loading(rank_ctx *c) {
  const ssa_rank *r = c->r;
  int failed;
  uint8_t *loader = data_loader_names(r, &failed);
  if (failed) return STEPSCOPE_E_NOMEM;
  if (!loader) return 0;
  size_t cap = 0;
  for (size_t i = 0; i < r->nranges; i++) {
    const ssa_range *g = &r->ranges[i];
    if (!data_loader_range(r, i, loader)) continue;
    if (ssa_grow((void **)&c->dl, &cap, c->ndl + 1, sizeof *c->dl)) {
      free(loader);
      return STEPSCOPE_E_NOMEM;
    }
    c->dl[c->ndl][0] = g->start;
    c->dl[c->ndl++][1] = g->end;
  }
  free(loader);
  if (c->ndl == 0) return 0;
  qsort(c->dl, c->ndl, sizeof *c->dl, cmp_interval);
  size_t m = 0;
  for (size_t i = 0; i < c->ndl; i++) {
    if (m && c->dl[i][0] <= c->dl[m - 1][1]) {
      if (c->dl[i][1] > c->dl[m - 1][1]) c->dl[m - 1][1] = c->dl[i][1];
    } else {
      c->dl[m][0] = c->dl[i][0];
      c->dl[m++][1] = c->dl[i][1];
    }
  }
  c->ndl = m;
  return 0;
}

/* Calls emit on the pieces of gap [a, b) of cause `cause` in time order:
 * a host_wait gap is cut where data loader ranges were open (those pieces
 * are data_loading). */
typedef void (*idle_piece_fn)(void *ctx, int64_t a, int64_t b, uint32_t cause);

static void split_idle(const rank_ctx *c, int64_t a, int64_t b, uint32_t cause, idle_piece_fn emit,
                       void *ctx) {
  if (cause != SSA_IDLE_HOST_WAIT || c->ndl == 0) {
    emit(ctx, a, b, cause);
    return;
  }
  /* first interval ending after a */
  size_t lo = 0, hi = c->ndl;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->dl[mid][1] <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  int64_t pos = a;
  for (size_t i = lo; i < c->ndl && c->dl[i][0] < b; i++) {
    int64_t s = c->dl[i][0] > pos ? c->dl[i][0] : pos, e = c->dl[i][1] < b ? c->dl[i][1] : b;
    if (s > pos) emit(ctx, pos, s, SSA_IDLE_HOST_WAIT);
    if (e > s) emit(ctx, s, e, SSA_IDLE_DATA_LOADING);
    pos = e;
  }
  if (b > pos) emit(ctx, pos, b, SSA_IDLE_HOST_WAIT);
}

static void emit_device_gap(void *ctx, int64_t a, int64_t b, uint32_t cause) {
  gap_add(ctx, a, b, cause);
}

typedef struct lane_gap_ctx {
  ssa_lane_idle *li;
  int64_t t0, t1;
} lane_gap_ctx;

static int64_t clip_len(int64_t a, int64_t b, int64_t t0, int64_t t1);

static void emit_lane_gap(void *ctx, int64_t a, int64_t b, uint32_t cause) {
  lane_gap_ctx *l = ctx;
  l->li->idle_cause[cause] += clip_len(a, b, l->t0, l->t1);
}

/* A window's metrics from the coverage and idle copies at its two ends. */
static void measure_window(ssa_window *w, const int64_t *points, size_t np, int64_t (*cov_at)[16],
                           int64_t (*idle_at)[SSA_IDLE_N]) {
  int64_t bucket[16] = {0};
  memset(w->idle_cause, 0, sizeof w->idle_cause);
  w->span = w->end > w->start ? w->end - w->start : 0;
  if (w->span > 0) {
    size_t is = ssa_count_below(points, np, sizeof *points, w->start),
           ie = ssa_count_below(points, np, sizeof *points, w->end);
    for (unsigned m = 0; m < 16; m++)
      bucket[m] = cov_at[ie][m] - cov_at[is][m];
    for (int k = 0; k < SSA_IDLE_N; k++)
      w->idle_cause[k] = idle_at[ie][k] - idle_at[is][k];
  }
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
  w->cpu_bound = w->span > 0 && (double)(w->idle_cause[SSA_IDLE_HOST_WAIT] +
                                         w->idle_cause[SSA_IDLE_DATA_LOADING]) >=
                                    SSA_CPU_BOUND_FRACTION * (double)w->span;
}

static void read_pipeline_info(rank_ctx *c) {
  ssa_rank_result *rr = c->rr;
  const ssa_rank *r = c->r;
  const ssa_meta_layout *layout = &r->tmeta.layout;
  const ssa_meta_schedule *sched = &r->tmeta.schedule;
  double pp = ssa_meta_or(layout->pp, 1), stage = ssa_meta_or(layout->pp_rank, -1);
  rr->bubble_theory = NAN;
  if (sched->present) {
    double stages = ssa_meta_or(sched->stages, 0);
    if (!isnan(sched->stages) && !isnan(sched->microbatches))
      rr->bubble_theory =
          ssa_bubble_theory(sched->has_name ? sched->name : "", (int)sched->stages,
                            (int)sched->microbatches, (int)ssa_meta_or(sched->virtual_stages, 1));
    if (isnan(rr->bubble_theory)) rr->bubble_theory = sched->bubble_theory;
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

/* Launch delays (kernel start - launch call end) by selected step: every op
 * counts in the step it belongs to (steps.c ssa_step_index_owner, over all
 * steps so that membership does not depend on the selection), when that
 * step is selected, and in the totals. Counted during the op pass, then
 * written into one array grouped by step, so memory is 8 bytes per op and
 * each step's statistics come from its own slice. */
typedef struct delay_plan {
  ssa_step_index ix; /* over all steps */
  uint32_t *sel;     /* all-step index -> selected index, SSA_NONE */
  uint32_t *hit;     /* scratch: the selected step of a launch */
  size_t *count;     /* per selected step */
  size_t pairs, ops_in_any;
  /* delays gathered by the main pass, step by step: step s's segment is
   * v[first[s], first[s] + steps[s].launched), filled up to cursor[s].
   * Unused (v NULL) when the segments could not be sized; `overflow` set
   * when a step got more delays than projection counted. */
  int64_t *v;
  size_t *first, *cursor;
  int overflow;
} delay_plan;

static int64_t launch_delay(const ssa_rank *r, const ssa_op *o) {
  return o->start - r->apis[o->launch].end;
}

/* The selected step an op launched at t belongs to, written to hit[0]:
 * 1, or 0 when it belongs to none or to one not selected. */
static size_t selected_owner(delay_plan *dp, int64_t t, uint32_t *hit) {
  uint32_t k = ssa_step_index_owner(&dp->ix, t);
  if (k == SSA_NONE || dp->sel[k] == SSA_NONE) return 0;
  if (hit) hit[0] = dp->sel[k];
  return 1;
}

static int compute_delays(const ssa_rank *r, ssa_rank_result *rr, delay_plan *dp, size_t nall) {
  ssa_window *tw = &rr->totals;
  if (rr->nsteps == 0) {
    /* no step at all: every launched op in the window; a filter that kept
     * none: nothing */
    if (nall != 0 || dp->ops_in_any == 0) return 0;
    int64_t *v = malloc(dp->ops_in_any * sizeof *v);
    if (!v) return STEPSCOPE_E_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < r->nops; i++) {
      const ssa_op *o = &r->ops[i];
      if (o->launch != SSA_NONE && o->start >= tw->start && o->start < tw->end)
        v[n++] = launch_delay(r, o);
    }
    ssa_delay_stats_of(v, n, &tw->launch);
    free(v);
    return 0;
  }
  size_t total = dp->pairs > dp->ops_in_any ? dp->pairs : dp->ops_in_any;
  int gathered = dp->v != NULL && !dp->overflow;
  for (size_t s = 0; gathered && s < rr->nsteps; s++)
    gathered = dp->cursor[s] - dp->first[s] == dp->count[s] &&
               (s + 1 == rr->nsteps || dp->cursor[s] == dp->first[s + 1]);
  int64_t *v = gathered ? dp->v : malloc((total ? total : 1) * sizeof *v);
  size_t *cursor = malloc((rr->nsteps + 1) * sizeof *cursor);
  if (!v || !cursor) {
    if (v != dp->v) free(v);
    free(cursor);
    return STEPSCOPE_E_NOMEM;
  }
  if (gathered) {
    /* the main pass filled every segment in op order already */
    memcpy(cursor, dp->cursor, rr->nsteps * sizeof *cursor);
  } else {
    size_t off = 0;
    for (size_t s = 0; s < rr->nsteps; s++) {
      cursor[s] = off;
      off += dp->count[s];
    }
    for (size_t i = 0; i < r->nops && dp->pairs; i++) {
      const ssa_op *o = &r->ops[i];
      if (o->launch == SSA_NONE) continue;
      size_t m = selected_owner(dp, r->apis[o->launch].start, dp->hit);
      for (size_t j = 0; j < m; j++)
        v[cursor[dp->hit[j]]++] = launch_delay(r, o);
    }
  }
  for (size_t s = 0; s < rr->nsteps; s++)
    ssa_delay_stats_of(v + cursor[s] - dp->count[s], dp->count[s], &rr->windows[s].launch);
  if (dp->pairs != dp->ops_in_any) {
    /* overlapping steps: the totals count each op once */
    size_t n = 0;
    for (size_t i = 0; i < r->nops; i++) {
      const ssa_op *o = &r->ops[i];
      if (o->launch != SSA_NONE && selected_owner(dp, r->apis[o->launch].start, NULL))
        v[n++] = launch_delay(r, o);
    }
  }
  ssa_delay_stats_of(v, dp->ops_in_any, &tw->launch);
  if (v != dp->v) free(v);
  free(cursor);
  return 0;
}

/* c->sync_prefix_end[i]: the latest end among the rank's syncs 0..i of the same lane (the
 * syncs are sorted by lane, then start), so that the scan back from a gap stops at the first
 * sync before which none ends inside it. Used by the breakdown and by the exports' idle gaps.
 * 0, or -1 out of memory. */
static int build_sync_prefix(rank_ctx *c) {
  const ssa_rank *r = c->r;
  if (!r->nsyncs) return 0;
  c->sync_prefix_end = malloc(r->nsyncs * sizeof *c->sync_prefix_end);
  if (!c->sync_prefix_end) return -1;
  for (size_t i = 0; i < r->nsyncs; i++) {
    int64_t e = r->syncs[i].end;
    if (i > 0 && r->syncs[i - 1].lane == r->syncs[i].lane && c->sync_prefix_end[i - 1] > e)
      e = c->sync_prefix_end[i - 1];
    c->sync_prefix_end[i] = e;
  }
  return 0;
}

int ssa_step_selected(const ssa_options *o, int64_t number) {
  return !o->has_step_filter || (number >= o->step_first && number <= o->step_last);
}

void ssa_totals_bounds(const ssa_rank *r, const ssa_step *steps, size_t nsteps, int64_t *start,
                       int64_t *end) {
  *start = *end = 0;
  if (nsteps) {
    *start = INT64_MAX;
    *end = INT64_MIN;
    for (size_t i = 0; i < nsteps; i++) {
      if (steps[i].start < *start) *start = steps[i].start;
      if (steps[i].end > *end) *end = steps[i].end;
    }
  } else if (r->nops) {
    *start = r->ops[0].start;
    *end = r->ops[0].end;
    for (size_t i = 1; i < r->nops; i++)
      if (r->ops[i].end > *end) *end = r->ops[i].end;
  }
}

/* The selected steps of all[0 .. nall) (by number, as all) into rr->steps, a window each, and
 * the totals window around them. 0, or -1 out of memory. */
static int select_windows(ssa_analysis *a, ssa_rank_result *rr, const ssa_step *all, size_t nall) {
  const ssa_rank *r = rr->rank;
  rr->steps = malloc((nall ? nall : 1) * sizeof *rr->steps);
  if (!rr->steps) return -1;
  for (size_t i = 0; i < nall; i++) {
    if (ssa_step_selected(&a->opt, all[i].number)) rr->steps[rr->nsteps++] = all[i];
  }
  rr->windows = calloc(rr->nsteps ? rr->nsteps : 1, sizeof *rr->windows);
  if (!rr->windows) return -1;
  ssa_window *tw = &rr->totals;
  memset(tw, 0, sizeof *tw);
  tw->step = -1;
  tw->device_latency = -1;
  tw->projected = rr->nsteps > 0;
  ssa_totals_bounds(r, rr->steps, rr->nsteps, &tw->start, &tw->end);
  if (nall == 0 && r->nops)
    ssa_analysis_warn(a, "rank %d: no step ranges found; the whole trace is one window", r->rank);
  for (size_t i = 0; i < rr->nsteps; i++) {
    ssa_window *w = &rr->windows[i];
    w->step = rr->steps[i].number;
    w->start = rr->steps[i].start;
    w->end = rr->steps[i].end;
    w->projected = rr->steps[i].projected;
    w->device_latency = w->projected ? rr->steps[i].dev_end - rr->steps[i].dev_start : -1;
    w->cut = rr->steps[i].cut;
  }
  return 0;
}

/* The launch delays' plan for the selected steps: the index over all steps (the same order as
 * rr->steps: by number), which of them are selected, and per-step segments for the delays,
 * sized by the launch counts of the projection (the same ranges, so the same counts;
 * compute_delays checks that and gathers them again if not; v stays NULL when they could not
 * be allocated). 0, or -1 out of memory. */
static int delay_plan_init(delay_plan *dp, const ssa_rank_result *rr, const ssa_step *all,
                           size_t nall) {
  if (ssa_step_index_build(&dp->ix, all, nall)) return -1;
  dp->sel = malloc(nall * sizeof *dp->sel);
  if (!dp->sel) return -1;
  for (size_t i = 0, j = 0; i < nall; i++)
    dp->sel[i] = j < rr->nsteps && all[i].number == rr->steps[j].number &&
                         all[i].range_start == rr->steps[j].range_start
                     ? (uint32_t)j++
                     : SSA_NONE;
  dp->hit = malloc(rr->nsteps * sizeof *dp->hit);
  dp->count = calloc(rr->nsteps, sizeof *dp->count);
  if (!dp->hit || !dp->count) return -1;
  size_t total = 0;
  for (size_t s = 0; s < rr->nsteps; s++)
    total += rr->steps[s].launched;
  dp->first = malloc(rr->nsteps * sizeof *dp->first);
  dp->cursor = malloc(rr->nsteps * sizeof *dp->cursor);
  dp->v = malloc((total ? total : 1) * sizeof *dp->v);
  if (!dp->first || !dp->cursor || !dp->v) {
    free(dp->v);
    dp->v = NULL;
    return 0;
  }
  size_t off = 0;
  for (size_t s = 0; s < rr->nsteps; s++) {
    dp->first[s] = dp->cursor[s] = off;
    off += rr->steps[s].launched;
  }
  return 0;
}

/* The rank's kernel statistics (ks, by the rank's string id) into rr->kstats, named in its
 * summary's string table. 0, or -1 out of memory. */
static int hand_kstats(const ssa_rank *r, ssa_rank_result *rr, const kstat *ks) {
  size_t nk = 0;
  for (uint32_t id = 0; id < r->strings.count; id++)
    nk += ks[id].count > 0;
  rr->kstats = malloc((nk ? nk : 1) * sizeof *rr->kstats);
  if (!rr->kstats) return -1;
  for (uint32_t id = 0; id < r->strings.count; id++) {
    if (!ks[id].count) continue;
    const char *name = ssa_rank_str(r, id);
    size_t len = strlen(name);
    ssa_rank_kstat *k = &rr->kstats[rr->nkstats++];
    k->name = ssa_strtab_intern(&rr->summary.names, name, len);
    if (len && k->name == 0) return -1;
    k->comm = (uint32_t)ks[id].comm;
    k->count = ks[id].count;
    k->total = ks[id].total;
    k->min = ks[id].min;
    k->max = ks[id].max;
  }
  return 0;
}

/* Each device lane's idle after its last op (lane_prev: its end) and its busy time in [t0, t1). */
static void finish_lanes(ssa_rank_result *rr, const int64_t *lane_prev, int64_t t0, int64_t t1) {
  for (size_t s = 0; s < rr->nlanes; s++) {
    ssa_lane_idle *li = &rr->lanes[s];
    li->idle_cause[SSA_IDLE_OTHER] += clip_len(lane_prev[li->lane], INT64_MAX, t0, t1);
    int64_t idle = 0;
    for (int k = 0; k < SSA_IDLE_N; k++)
      idle += li->idle_cause[k];
    li->busy = (t1 > t0 ? t1 - t0 : 0) - idle;
  }
}

int ssa_analyze_rank(ssa_analysis *a, ssa_rank_result *rr) {
  const ssa_rank *r = rr->rank;
  rank_ctx c = {a, rr, r, a->launch_gap_ns, NULL, NULL, 0, NULL, 0};
  int rc = STEPSCOPE_E_NOMEM;
  uint32_t *lane_slot = NULL;
  int64_t *lane_prev = NULL;
  ssa_step *all = NULL;
  size_t nall = 0;
  int64_t *points = NULL;
  int64_t(*cov_at)[16] = NULL;
  int64_t(*idle_at)[SSA_IDLE_N] = NULL;
  kstat *ks = NULL;
  delay_plan dp;
  memset(&dp, 0, sizeof dp);

  read_pipeline_info(&c);
  if (collect_data_loading(&c)) goto out;
  if (ssa_find_steps(r, a->opt.step_range_name, &all, &nall)) goto out;
  if (select_windows(a, rr, all, nall)) goto out;
  ssa_window *tw = &rr->totals;

  if (build_sync_prefix(&c)) goto out;
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
  ks = calloc(r->strings.count ? r->strings.count : 1, sizeof *ks);
  if (!ks) goto out;

  /* query points: every window's ends, sorted and unique */
  size_t np = 0;
  points = ssa_window_points(rr, &np);
  if (!points) goto out;
  cov_at = malloc(np * sizeof *cov_at);
  idle_at = malloc(np * sizeof *idle_at);
  if (!cov_at || !idle_at) goto out;

  /* launch delays: the selected steps' index */
  if (rr->nsteps && delay_plan_init(&dp, rr, all, nall)) goto out;

  /* the one pass over ops (sorted by start): kernel statistics, launch
   * membership, coverage, device and stream gaps with their causes */
  int64_t dev_end = INT64_MIN;
  int64_t t0 = tw->start, t1 = tw->end;
  ssa_cover cov;
  ssa_cover_init(&cov, 4, t0, t1);
  cov.wait_end = rr->coll_wait_end; /* drain waits inside collectives are bubble */
  ssa_cover_points(&cov, points, np, cov_at);
  gap_acc ga = {t0, t1 > t0 ? t1 : t0, {0}, points, np, 0, idle_at};
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
      if (rr->nsteps) {
        size_t m = selected_owner(&dp, r->apis[o->launch].start, dp.hit);
        for (size_t j = 0; j < m; j++)
          dp.count[dp.hit[j]]++;
        if (dp.v) {
          int64_t d = launch_delay(r, o);
          for (size_t j = 0; j < m; j++) {
            uint32_t s = dp.hit[j];
            if (dp.cursor[s] < dp.first[s] + rr->steps[s].launched)
              dp.v[dp.cursor[s]++] = d;
            else
              dp.overflow = 1;
          }
        }
        dp.pairs += m;
        dp.ops_in_any += m > 0;
      } else if (nall == 0 && o->start >= t0 && o->start < t1) {
        dp.ops_in_any++;
      }
    }
    if (o->end <= o->start) continue; /* zero-length: not activity */
    ssa_cover_op(&cov, r, o, rr->pipeline);
    if (o->start > dev_end)
      split_idle(&c, dev_end, o->start, classify(&c, dev_end, o->start, i, SSA_NONE),
                 emit_device_gap, &ga);
    if (o->end > dev_end) dev_end = o->end;
    uint32_t slot = lane_slot[o->lane];
    if (slot != SSA_NONE && o->start > lane_prev[o->lane]) {
      int64_t a0 = lane_prev[o->lane];
      uint32_t cause = a0 != INT64_MIN && sat_sub(o->start, a0) < c.T
                           ? SSA_IDLE_LAUNCH_GAP
                           : classify(&c, a0, o->start, i, o->lane);
      lane_gap_ctx lg = {&rr->lanes[slot], t0, t1};
      split_idle(&c, a0, o->start, cause, emit_lane_gap, &lg);
    }
    if (o->end > lane_prev[o->lane]) lane_prev[o->lane] = o->end;
  }
  gap_add(&ga, dev_end, INT64_MAX, SSA_IDLE_OTHER);
  ssa_cover_finish(&cov);
  finish_lanes(rr, lane_prev, t0, t1);

  /* windows */
  measure_window(tw, points, np, cov_at, idle_at);
  for (size_t i = 0; i < rr->nsteps; i++)
    measure_window(&rr->windows[i], points, np, cov_at, idle_at);
  if ((rc = compute_delays(r, rr, &dp, nall)) != 0) goto out;

  /* hand the kernel stats to the cross-rank table, named in the rank's summary */
  rc = STEPSCOPE_E_NOMEM;
  if (hand_kstats(r, rr, ks)) goto out;
  rr->error = 0;
  rc = 0;
out:
  free(ks);
  free(points);
  free(cov_at);
  free(idle_at);
  ssa_step_index_free(&dp.ix);
  free(dp.sel);
  free(dp.hit);
  free(dp.count);
  free(dp.v);
  free(dp.first);
  free(dp.cursor);
  free(lane_slot);
  free(lane_prev);
  free(all);
  free(c.sync_prefix_end);
  free(c.by_end);
  free(c.dl);
  if (rc) rr->error = rc;
  return rc;
}

/* ---- the device's idle gaps with their causes, for the exports ---- */

typedef struct idle_clip {
  int64_t t0, t1;
  void (*emit)(void *ctx, int64_t a, int64_t b, uint32_t cause);
  void *ctx;
} idle_clip;

static void emit_clipped(void *ctx, int64_t a, int64_t b, uint32_t cause) {
  idle_clip *k = ctx;
  if (a < k->t0) a = k->t0;
  if (b > k->t1) b = k->t1;
  if (b > a) k->emit(k->ctx, a, b, cause);
}

int ssa_device_idle_gaps(const ssa_analysis *a, const ssa_rank_result *rr,
                         void (*emit)(void *ctx, int64_t s, int64_t e, uint32_t cause), void *ctx) {
  const ssa_rank *r = rr->rank;
  /* classify() reads only the rank, the threshold and the sync/loader tables */
  rank_ctx c = {
      (ssa_analysis *)a, (ssa_rank_result *)rr, r, a->launch_gap_ns, NULL, NULL, 0, NULL, 0};
  int rc = STEPSCOPE_E_NOMEM;
  if (collect_data_loading(&c)) goto out;
  if (build_sync_prefix(&c)) goto out;
  idle_clip k = {rr->totals.start, rr->totals.end, emit, ctx};
  int64_t dev_end = INT64_MIN;
  for (size_t i = 0; i < r->nops && dev_end < k.t1; i++) {
    const ssa_op *o = &r->ops[i];
    if (o->end <= o->start) continue;
    if (o->start > dev_end && o->start > k.t0)
      split_idle(&c, dev_end, o->start, classify(&c, dev_end, o->start, i, SSA_NONE), emit_clipped,
                 &k);
    if (o->end > dev_end) dev_end = o->end;
  }
  if (dev_end < k.t1) emit_clipped(&k, dev_end == INT64_MIN ? k.t0 : dev_end, k.t1, SSA_IDLE_OTHER);
  rc = 0;
out:
  free(c.sync_prefix_end);
  free(c.by_end);
  free(c.dl);
  return rc;
}
