/*
 * bubble_causes.c — where each pipeline stage's bubble comes from
 * (docs/metrics.md "Bubble causes"). For every pipeline rank and window the
 * measured bubble is split into causes that sum to it exactly:
 *
 *   host_gaps      idle time the device spent waiting for its own host
 *                  (idle causes host_wait and launch_gap: idle is part of
 *                  the bubble);
 *   p2p_transfer   bubble time covered by the transfer part of a pipeline
 *                  send/recv: the last `transfer` ns of its op, transfer =
 *                  the complete instance's shortest member duration;
 *   the rest, W = bubble - host_gaps - p2p_transfer (time spent waiting for
 *   other stages), split by a simulation of the step's schedule:
 *   schedule       min(W, idle of the stage when the schedule's dependency
 *                  graph runs with balanced op times: every forward (and
 *                  every backward) taking the median stage's time, the lower
 *                  median over stages of each stage's mean measured forward
 *                  (backward) time in the step): fill and drain;
 *   imbalance      min(W - schedule, max(0, idle with the measured op times -
 *                  idle with balanced ones)): waiting because some stage's
 *                  work is slower (imbalance_stage names the slowest stage);
 *   late_upstream  the rest: waiting beyond what the schedule and the
 *                  measured op times imply (a neighbour's host gaps,
 *                  transfers, lateness);
 *   unattributed   W when the schedule could not be simulated (no forward /
 *                  backward ranges, a stage's trace missing).
 *
 * Items and their times: a stage's items are its host ranges "forward",
 * "backward" and (zero-bubble schedules) "backward_weight" (args microbatch,
 * chunk) whose start lies in the step's host range, in trace order; an
 * item's time is the union of its compute ops (ops whose launch call starts
 * inside the range; a host op without one, of a Kineto trace's host
 * timeline, by its own start) plus the host gaps just before them (device
 * gaps ended by one of its ops that the device spent waiting for the host:
 * launch began at or after the gap's start, or the gap is shorter than the
 * launch-gap threshold; not for host ops without a launch). The simulation
 * is an ASAP run of each stage's items in their order, where a forward of
 * virtual stage v = chunk x p + stage waits for the same micro-batch's
 * forward on v - 1, a backward for the backward on v + 1, and a weight
 * backward for nothing but its stage; a stage's simulated idle is the
 * makespan minus its items' time. Pipelines are the ranks sharing
 * (dp_rank, cp_rank, tp_rank) in `layout`, one rank per pp_rank.
 * The totals window gets host_gaps, p2p_transfer and W from its own
 * measurement and the sums of its steps' schedule and imbalance parts,
 * clamped the same way.
 * The parts that read a rank's events run per rank: its items in the
 * per-rank pass (ssa_rank_pipeline_items, kept in the rank's summary), its
 * transfers once the matching is done (ssa_rank_bubble_transfers); the
 * simulation across a pipeline's stages (ssa_bubble_causes) reads only the
 * summaries' items and the windows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

const char *const ssa_bubble_cause_names[SSA_BUBBLE_N] = {
    "schedule", "imbalance", "p2p_transfer", "late_upstream", "host_gaps", "unattributed"};

typedef ssa_pipeline_item item;

/* The item whose host range contains t (items sorted by start, disjoint). */
static long item_at(const item *it, size_t n, int64_t t) {
  size_t k = ssa_count_at_most(it, n, sizeof *it, t); /* items starting by t */
  return k > 0 && it[k - 1].end > t ? (long)k - 1 : -1;
}

int ssa_rank_pipeline_items(const ssa_analysis *a, ssa_rank_result *rr) {
  const ssa_rank *r = rr->rank;
  ssa_rank_summary *ri = &rr->summary;
  size_t n = 0;
  for (size_t i = 0; i < r->nranges; i++) {
    const char *nm = ssa_rank_str(r, r->ranges[i].name);
    n += !strcmp(nm, "forward") || !strcmp(nm, "backward") || !strcmp(nm, "backward_weight");
  }
  ri->items = malloc((n ? n : 1) * sizeof *ri->items);
  int64_t *cov_end = malloc((n ? n : 1) * sizeof *cov_end); /* each item's compute union's end */
  if (!ri->items || !cov_end) {
    free(cov_end);
    return STEPSCOPE_E_NOMEM;
  }
  size_t cursor = 0;
  for (size_t i = 0; i < r->nranges; i++) {
    const ssa_range *g = &r->ranges[i];
    const char *nm = ssa_rank_str(r, g->name);
    int pass = !strcmp(nm, "forward")           ? 0
               : !strcmp(nm, "backward")        ? 1
               : !strcmp(nm, "backward_weight") ? 2
                                                : -1;
    if (pass < 0) continue;
    /* the step whose host range holds the item: usually the last one found, or the next */
    size_t s = cursor;
    if (!(s < rr->nsteps && rr->steps[s].range_start <= g->start &&
          g->start < rr->steps[s].range_end)) {
      s = 0;
      while (s < rr->nsteps &&
             !(rr->steps[s].range_start <= g->start && g->start < rr->steps[s].range_end))
        s++;
      if (s == rr->nsteps) continue;
      cursor = s;
    }
    double mb = -1, chunk = 0;
    const char *args = ssa_rank_str(r, g->args);
    if (!ssa_json_number(args, "microbatch", &mb) || mb < 0 || mb > 1e6) continue;
    ssa_json_number(args, "chunk", &chunk);
    if (chunk < 0 || chunk > 1e3) continue;
    cov_end[ri->nitems] = INT64_MIN;
    ri->items[ri->nitems++] = (item){.start = g->start,
                                     .end = g->end,
                                     .pass = pass,
                                     .mb = (int)mb,
                                     .chunk = (int)chunk,
                                     .step = s};
  }
  /* item times: one pass over the ops */
  int64_t dev_end = INT64_MIN;
  for (size_t i = 0; i < r->nops; i++) {
    const ssa_op *o = &r->ops[i];
    if (o->end <= o->start) continue;
    /* a host op without a launch call (a Kineto trace's host timeline, kineto_host.c) runs on
     * the host thread itself: its own start places it; the gaps before it are not launches */
    int on_host = o->launch == SSA_NONE && o->kind == SSA_OP_HOST;
    long k = o->launch != SSA_NONE ? item_at(ri->items, ri->nitems, r->apis[o->launch].start)
             : on_host             ? item_at(ri->items, ri->nitems, o->start)
                                   : -1;
    if (k >= 0) {
      item *it = &ri->items[k];
      if (!on_host && o->start > dev_end && dev_end != INT64_MIN &&
          (o->start - dev_end < a->launch_gap_ns || r->apis[o->launch].start >= dev_end))
        it->dur += o->start - dev_end; /* the device waited for this item's host work */
      if (o->cls == SSA_CLS_COMPUTE && o->end > cov_end[k]) {
        it->dur += o->end - (o->start > cov_end[k] ? o->start : cov_end[k]);
        cov_end[k] = o->end;
      }
    }
    if (o->end > dev_end) dev_end = o->end;
  }
  free(cov_end);
  return 0;
}

/* One pipeline's items of one step: stage s's items are st[s][0, nst[s]). */
typedef struct sim_in {
  int p, V, M;
  const item **st;
  size_t *nst;
} sim_in;

/* ASAP run of the schedule; idle[s] = makespan - own time. `balanced`: every
 * forward takes bal[0], every backward bal[1], every weight backward bal[2]
 * (it depends on no other stage: it follows its own backward on the same
 * stage, which comes first in the stage's order). Returns 0, or -1 when the
 * items are inconsistent (a dependency never runs). */
static int simulate(const sim_in *in, int balanced, const int64_t *bal, int64_t *idle,
                    int64_t *ends /* [p][2][V][M] */, size_t *ptr, int64_t *free_at,
                    int64_t *busy) {
  int p = in->p, V = in->V, M = in->M;
  size_t cells = (size_t)p * 2 * (size_t)V * (size_t)M;
  for (size_t i = 0; i < cells; i++)
    ends[i] = INT64_MIN;
  for (int s = 0; s < p; s++)
    ptr[s] = 0, free_at[s] = 0, busy[s] = 0;
#define END(s, pass, c, mb)                                                                        \
  ends[((((size_t)(s)*2 + (pass)) * (size_t)V + (size_t)(c)) * (size_t)M) + (size_t)(mb)]
  for (int progress = 1; progress;) {
    progress = 0;
    for (int s = 0; s < p; s++) {
      while (ptr[s] < in->nst[s]) {
        const item *it = &in->st[s][ptr[s]];
        if (it->chunk >= V || it->mb >= M) return -1;
        int v = it->chunk * p + s, dv = it->pass == 0 ? v - 1 : v + 1;
        int64_t dep = 0;
        if (it->pass < 2 && dv >= 0 && dv < p * V) {
          int ds = dv % p, dc = dv / p;
          dep = END(ds, it->pass, dc, it->mb);
          if (dep == INT64_MIN) break; /* not run yet */
        }
        int64_t d = balanced ? bal[it->pass] : it->dur;
        int64_t start = free_at[s] > dep ? free_at[s] : dep;
        if (it->pass < 2) END(s, it->pass, it->chunk, it->mb) = start + d;
        free_at[s] = start + d;
        busy[s] += d;
        ptr[s]++;
        progress = 1;
      }
    }
  }
#undef END
  int64_t makespan = 0;
  for (int s = 0; s < p; s++) {
    if (ptr[s] < in->nst[s]) return -1;
    if (free_at[s] > makespan) makespan = free_at[s];
  }
  for (int s = 0; s < p; s++)
    idle[s] = makespan - busy[s];
  return 0;
}

/* The second sweep: per window, the bubble (must equal the first pass') and
 * the part of it covered by pipeline transfers. Sets: 0 compute, 1
 * non-pipeline comm (after any wait for another stage), 2 pipeline
 * transfer, 3 unused. */
int ssa_rank_bubble_transfers(ssa_rank_result *rr) {
  const ssa_rank *r = rr->rank;
  size_t np = 0;
  int64_t *points = ssa_window_points(rr, &np);
  if (!points) return STEPSCOPE_E_NOMEM;
  int64_t(*at)[16] = malloc(np * sizeof *at);
  if (!at) {
    free(points);
    return STEPSCOPE_E_NOMEM;
  }
  ssa_cover c;
  ssa_cover_init(&c, 4, rr->totals.start, rr->totals.end);
  ssa_cover_points(&c, points, np, at);
  for (size_t i = 0; i < r->nops; i++) {
    const ssa_op *o = &r->ops[i];
    if (o->end <= o->start) continue;
    if (c.npend && c.pend_s[0] <= o->start) ssa_cover_flush_pending(&c, o->start);
    if (o->cls == SSA_CLS_COMPUTE) {
      ssa_cover_add(&c, 0, o->start, o->end);
    } else if (o->cls == SSA_CLS_COMM) {
      ssa_cover_advance(&c, o->start);
      if (ssa_op_is_pipeline_comm(r, o, rr->pipeline)) {
        int64_t tr = o->coll != SSA_NONE && rr->coll_transfer ? rr->coll_transfer[o->coll] : -1;
        if (tr > 0) {
          int64_t ts = o->end - tr > o->start ? o->end - tr : o->start;
          if (ts == o->start)
            ssa_cover_add(&c, 2, ts, o->end);
          else
            ssa_cover_defer(&c, 2, ts, o->end);
        }
      } else {
        int64_t we =
            rr->coll_wait_end && o->coll != SSA_NONE ? rr->coll_wait_end[o->coll] : INT64_MIN;
        if (we <= o->start)
          ssa_cover_add(&c, 1, o->start, o->end);
        else if (we < o->end)
          ssa_cover_defer(&c, 1, we, o->end);
      }
    }
  }
  ssa_cover_finish(&c);
  for (size_t k = 0; k <= rr->nsteps; k++) {
    ssa_window *w = k < rr->nsteps ? &rr->windows[k] : &rr->totals;
    int64_t bubble = 0, transfer = 0;
    if (w->span > 0) {
      size_t is = ssa_count_below(points, np, sizeof *points, w->start),
             ie = ssa_count_below(points, np, sizeof *points, w->end);
      for (unsigned m = 0; m < 16; m++) {
        int64_t b = at[ie][m] - at[is][m];
        if (!(m & 3)) bubble += b;
        if (!(m & 3) && (m & 4)) transfer += b;
      }
    }
    int64_t host = w->idle_cause[SSA_IDLE_HOST_WAIT] + w->idle_cause[SSA_IDLE_LAUNCH_GAP];
    memset(w->bubble_cause, 0, sizeof w->bubble_cause);
    w->bubble_cause[SSA_BUBBLE_TRANSFER] = transfer;
    w->bubble_cause[SSA_BUBBLE_HOST] = host;
    /* the same bubble as the first pass (same sets): what is left is waiting */
    w->bubble_cause[SSA_BUBBLE_UNATTRIBUTED] = w->bubble - transfer - host;
    w->has_bubble_causes = bubble == w->bubble && w->bubble - transfer - host >= 0;
    w->imbalance_stage = -1;
    w->schedule_idle = w->schedule_idle_balanced = -1;
  }
  free(points);
  free(at);
  return 0;
}

/* Moves a window's waiting (the unattributed part) into schedule, imbalance
 * and late_upstream. */
static void split_waiting(ssa_window *w, int64_t sched, int64_t imb) {
  int64_t W = w->bubble_cause[SSA_BUBBLE_UNATTRIBUTED];
  if (sched < 0) sched = 0;
  if (imb < 0) imb = 0;
  if (sched > W) sched = W;
  if (imb > W - sched) imb = W - sched;
  w->bubble_cause[SSA_BUBBLE_SCHEDULE] = sched;
  w->bubble_cause[SSA_BUBBLE_IMBALANCE] = imb;
  w->bubble_cause[SSA_BUBBLE_LATE] = W - sched - imb;
  w->bubble_cause[SSA_BUBBLE_UNATTRIBUTED] = 0;
}

/* The pipeline of rank i: the ranks not yet `done` with its (dp, cp, tp) layout, one per stage
 * 0 .. p-1, into by_stage (marked done). 1, or 0 when they are not exactly one per stage. */
static int pipeline_of(const ssa_analysis *a, size_t i, int p, unsigned char *done, size_t *members,
                       size_t by_stage[64]) {
  size_t n = a->nranks, nm = 0;
  for (size_t j = i; j < n; j++)
    if (!done[j] && a->ranks[j].pipeline && a->ranks[j].stage >= 0 &&
        !memcmp(a->ranks[j].summary.layout, a->ranks[i].summary.layout,
                sizeof a->ranks[i].summary.layout)) {
      members[nm++] = j;
      done[j] = 1;
    }
  if (p > 64 || (int)nm != p) return 0;
  for (int s = 0; s < p; s++)
    by_stage[s] = n;
  for (size_t k = 0; k < nm; k++) {
    int s = a->ranks[members[k]].stage;
    if (s >= p || by_stage[s] != n) return 0;
    by_stage[s] = members[k];
  }
  for (int s = 0; s < p; s++)
    if (by_stage[s] == n) return 0;
  return 1;
}

/* Each stage's window of step `number` (widx) and its items of that step (st, nst: contiguous,
 * items are in time order). 1, or 0 when a stage lacks the step or its items. */
static int step_items(const ssa_analysis *a, const size_t *by_stage, int p, int64_t number,
                      long *widx, const item **st, size_t *nst) {
  for (int s = 0; s < p; s++) {
    const ssa_rank_result *rs = &a->ranks[by_stage[s]];
    widx[s] = -1;
    for (size_t k = 0; k < rs->nsteps; k++)
      if (rs->windows[k].step == number) widx[s] = (long)k;
    if (widx[s] < 0) return 0;
    const ssa_rank_summary *R = &rs->summary;
    size_t b = 0;
    while (b < R->nitems && R->items[b].step != (size_t)widx[s])
      b++;
    size_t e = b;
    while (e < R->nitems && R->items[e].step == (size_t)widx[s])
      e++;
    st[s] = R->items + b;
    nst[s] = e - b;
    if (nst[s] == 0) return 0;
  }
  return 1;
}

/* Balanced op times: every stage as fast as the median stage (the lower median of the
 * stages' mean forward, backward and weight backward times). */
static void balanced_times(int p, const item *const *st, const size_t *nst, int64_t bal[3]) {
  int64_t means[3][64];
  size_t nmeans[3] = {0, 0, 0};
  for (int s = 0; s < p; s++) {
    int64_t sum[3] = {0, 0, 0}, cnt[3] = {0, 0, 0};
    for (size_t k = 0; k < nst[s]; k++)
      sum[st[s][k].pass] += st[s][k].dur, cnt[st[s][k].pass]++;
    for (int q = 0; q < 3; q++)
      if (cnt[q]) means[q][nmeans[q]++] = sum[q] / cnt[q];
  }
  for (int q = 0; q < 3; q++) {
    qsort(means[q], nmeans[q], sizeof means[q][0], ssa_cmp_i64);
    bal[q] = nmeans[q] ? means[q][(nmeans[q] - 1) / 2] : 0;
  }
}

/* What the causes of one pipeline add up over its steps, per rank (n of them). */
typedef struct cause_sums {
  int64_t *sched, *imb;
  int *any_sim;   /* a step of the rank was simulated */
  int *slow_vote; /* per stage: the steps in which it was the slowest */
} cause_sums;

/* Simulates every step of the pipeline by_stage[0 .. p-1] and splits each stage's waiting in
 * it (split_waiting), adding to sums. 0, or -1 out of memory. */
static int simulate_pipeline(ssa_analysis *a, const size_t *by_stage, int p, cause_sums *sums) {
  const ssa_rank_result *r0 = &a->ranks[by_stage[0]];
  size_t ends_cap = 0;
  int64_t *ends = NULL;
  const item **st = calloc((size_t)p, sizeof *st);
  size_t *nst = calloc((size_t)p, sizeof *nst), *ptr = calloc((size_t)p, sizeof *ptr);
  long *widx = calloc((size_t)p, sizeof *widx);
  int64_t *idle = calloc((size_t)p, sizeof *idle), *idle_bal = calloc((size_t)p, sizeof *idle_bal),
          *free_at = calloc((size_t)p, sizeof *free_at), *busy = calloc((size_t)p, sizeof *busy);
  int fail = !st || !nst || !ptr || !widx || !idle || !idle_bal || !free_at || !busy;
  /* per step number of stage 0 */
  for (size_t s0 = 0; s0 < r0->nsteps && !fail; s0++) {
    if (!step_items(a, by_stage, p, r0->windows[s0].step, widx, st, nst)) continue;
    /* micro-batches and chunks from the items themselves (metadata is not trusted with sizes) */
    int M = 0, V = 0;
    for (int s = 0; s < p; s++)
      for (size_t k = 0; k < nst[s]; k++) {
        if (st[s][k].mb + 1 > M) M = st[s][k].mb + 1;
        if (st[s][k].chunk + 1 > V) V = st[s][k].chunk + 1;
      }
    size_t cells = (size_t)p * 2 * (size_t)V * (size_t)M;
    if (cells > ((size_t)1 << 22)) continue; /* implausible items: not simulated */
    if (cells > ends_cap) {
      int64_t *e2 = realloc(ends, cells * sizeof *ends);
      if (!e2) {
        fail = 1;
        break;
      }
      ends = e2;
      ends_cap = cells;
    }
    int64_t bal[3];
    balanced_times(p, st, nst, bal);
    sim_in in = {p, V, M, st, nst};
    if (simulate(&in, 0, bal, idle, ends, ptr, free_at, busy) != 0) continue;
    int slow = 0;
    for (int s = 1; s < p; s++)
      if (busy[s] > busy[slow]) slow = s;
    if (simulate(&in, 1, bal, idle_bal, ends, ptr, free_at, busy) != 0) continue;
    for (int s = 0; s < p; s++) {
      ssa_rank_result *rs = &a->ranks[by_stage[s]];
      ssa_window *w = &rs->windows[widx[s]];
      if (!w->has_bubble_causes) continue;
      w->schedule_idle = idle[s];
      w->schedule_idle_balanced = idle_bal[s];
      split_waiting(w, idle_bal[s], idle[s] - idle_bal[s]);
      w->imbalance_stage = w->bubble_cause[SSA_BUBBLE_IMBALANCE] > 0 ? slow : -1;
      sums->sched[by_stage[s]] += w->bubble_cause[SSA_BUBBLE_SCHEDULE];
      sums->imb[by_stage[s]] += w->bubble_cause[SSA_BUBBLE_IMBALANCE];
      sums->any_sim[by_stage[s]] = 1;
    }
    sums->slow_vote[slow]++;
  }
  free(ends);
  free(st);
  free(nst);
  free(ptr);
  free(widx);
  free(idle);
  free(idle_bal);
  free(free_at);
  free(busy);
  return fail ? -1 : 0;
}

int ssa_bubble_causes(ssa_analysis *a) {
  int rc = STEPSCOPE_E_NOMEM;
  size_t n = a->nranks;
  unsigned char *done = calloc(n ? n : 1, 1);
  size_t *members = malloc((n ? n : 1) * sizeof *members);
  cause_sums sums = {calloc(n ? n : 1, sizeof(int64_t)), calloc(n ? n : 1, sizeof(int64_t)),
                     calloc(n ? n : 1, sizeof(int)), NULL};
  /* pipelines: ranks with the same (dp, cp, tp) rank, one per stage; the schedule's stage
   * count from the metadata */
  int p = a->schedule_stages;
  int simulated = p > 1 && p <= 64; /* the simulation's arrays hold 64 stages */
  sums.slow_vote = calloc(simulated ? (size_t)p : 1, sizeof(int));
  if (!done || !members || !sums.sched || !sums.imb || !sums.any_sim || !sums.slow_vote) goto out;
  for (size_t i = 0; i < n && simulated; i++) {
    if (done[i] || !a->ranks[i].pipeline || a->ranks[i].stage < 0) continue;
    size_t by_stage[64];
    if (!pipeline_of(a, i, p, done, members, by_stage)) continue;
    if (simulate_pipeline(a, by_stage, p, &sums) != 0) goto out;
  }
  /* totals: the steps' schedule and imbalance parts, clamped to the totals' waiting */
  int slowest = -1;
  for (int s = 0; simulated && s < p; s++)
    if (sums.slow_vote[s] > 0 && (slowest < 0 || sums.slow_vote[s] > sums.slow_vote[slowest]))
      slowest = s;
  for (size_t i = 0; i < n; i++) {
    ssa_window *tw = &a->ranks[i].totals;
    if (!a->ranks[i].pipeline || !tw->has_bubble_causes || !sums.any_sim[i]) continue;
    split_waiting(tw, sums.sched[i], sums.imb[i]);
    tw->imbalance_stage = tw->bubble_cause[SSA_BUBBLE_IMBALANCE] > 0 ? slowest : -1;
  }
  rc = 0;
out:
  free(done);
  free(members);
  free(sums.sched);
  free(sums.imb);
  free(sums.any_sim);
  free(sums.slow_vote);
  return rc;
}
