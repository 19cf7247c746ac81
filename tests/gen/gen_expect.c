/*
 * gen_expect.c — the expected value of every SPEC §4 metric for a generated
 * run, computed from the scenario description alone, by brute force: each
 * window is cut into GEN_Q-wide cells (every generated time is a multiple
 * of GEN_Q) and each cell is classified by scanning all ops; idle causes are
 * found per idle cell by searching the ops around it; collectives by
 * construction. Deliberately simple and slow (O(cells x ops)), and sharing
 * nothing with the analyzer's sweep-based code.
 */
#include <stdlib.h>
#include <string.h>

#include "stepscope.h"
#include "stepscope_gen.h"

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Idle cause of the gap [a, b) closed by ops starting at b (lane -1: any). */
static int cause_of(const gen_run *g, int r, int64_t a, int64_t b, int lane) {
  if (a != INT64_MIN && b - a < GEN_LAUNCH_GAP_NS) return GEN_IDLE_LAUNCH_GAP;
  int best = GEN_IDLE_OTHER;
  for (size_t i = 0; i < g->nops; i++) {
    const gen_op *o = &g->ops[i];
    if (o->rank != r || o->s != b || (lane >= 0 && o->lane != lane)) continue;
    if (o->has_launch && o->launch_s >= a) return GEN_IDLE_HOST_WAIT;
    for (size_t k = 0; k < g->nsyncs; k++) {
      const gen_sync *y = &g->syncs[k];
      if (y->rank == r && y->lane == o->lane && y->s < b && y->e > a) best = GEN_IDLE_SYNC_WAIT;
    }
    for (size_t k = 0; k < g->nops; k++) {
      const gen_op *p = &g->ops[k];
      if (p->rank == r && p->lane != o->lane && p->e >= b - GEN_LAUNCH_GAP_NS && p->e <= b)
        best = GEN_IDLE_SYNC_WAIT;
    }
  }
  return best;
}

/* Cause of an idle cell [t, t+Q) on rank r (lane -1 = device). */
static int cell_cause(const gen_run *g, int r, int64_t t, int lane) {
  int64_t a = INT64_MIN, b = INT64_MAX;
  for (size_t i = 0; i < g->nops; i++) {
    const gen_op *o = &g->ops[i];
    if (o->rank != r || (lane >= 0 && o->lane != lane)) continue;
    if (o->e <= t && o->e > a) a = o->e;
    if (o->s >= t + GEN_Q && o->s < b) b = o->s;
  }
  if (b == INT64_MAX) return GEN_IDLE_OTHER;
  int cause = cause_of(g, r, a, b, lane);
  /* waiting for the host while it loads data: data_loading */
  for (size_t i = 0; cause == GEN_IDLE_HOST_WAIT && i < g->nloads; i++)
    if (g->loads[i].rank == r && g->loads[i].s <= t && g->loads[i].e >= t + GEN_Q) cause = GEN_IDLE_DATA_LOADING;
  return cause;
}

static void measure(const gen_run *g, int r, gen_window *w) {
  w->span = w->end - w->start;
  for (int64_t t = w->start; t < w->end; t += GEN_Q) {
    int comp = 0, comm = 0, mem = 0, np = 0;
    for (size_t i = 0; i < g->nops; i++) {
      const gen_op *o = &g->ops[i];
      if (o->rank != r || !(o->s <= t && o->e >= t + GEN_Q)) continue;
      if (o->cls == GEN_COMPUTE) comp = 1;
      else if (o->cls == GEN_COMM) { comm = 1; if (!o->pipeline) np = 1; }
      else mem = 1;
    }
    if (comp) w->compute += GEN_Q;
    if (comm) w->comm += GEN_Q;
    if (comp && comm) w->overlap += GEN_Q;
    if (comp || comm || mem) w->busy += GEN_Q;
    if (mem && !comp && !comm) w->exposed_mem += GEN_Q;
    if (!comp && !np) w->bubble += GEN_Q;
    if (!comp && !comm && !mem) w->idle_cause[cell_cause(g, r, t, -1)] += GEN_Q;
  }
  w->idle = w->span - w->busy;
  w->exposed_comm = w->comm - w->overlap;
}

/* The step (index into g->steps) an op belongs to: of the ranges of its
 * rank that contain its launch's start, the one that started last (ties:
 * the higher step number); -1 if none or no launch. */
static long owner_of(const gen_run *g, const gen_op *o) {
  long best = -1;
  if (!o->has_launch) return -1;
  for (size_t k = 0; k < g->nsteps; k++) {
    const gen_step *st = &g->steps[k];
    if (st->rank != o->rank || o->launch_s < st->s || o->launch_s >= st->e) continue;
    if (best < 0 || st->s > g->steps[best].s || (st->s == g->steps[best].s && st->number > g->steps[best].number))
      best = (long)k;
  }
  return best;
}

/* Launch delays of the ops of step `step` (index into g->steps), or of every
 * op that belongs to some step (step < 0). */
static void delays(const gen_run *g, int r, long step, gen_window *w) {
  int64_t *v = malloc((g->nops + 1) * sizeof *v);
  size_t n = 0;
  for (size_t i = 0; v && i < g->nops; i++) {
    const gen_op *o = &g->ops[i];
    if (o->rank != r || !o->has_launch) continue;
    long k = owner_of(g, o);
    if (k >= 0 && (step < 0 || k == step)) v[n++] = o->s - o->launch_e;
  }
  w->launches = n;
  if (n) {
    qsort(v, n, sizeof *v, cmp_i64);
    w->delay_min = v[0];
    w->delay_max = v[n - 1];
    /* nearest rank: ceil(p n / 100) */
    size_t k50 = (n * 50 + 99) / 100, k90 = (n * 90 + 99) / 100, k99 = (n * 99 + 99) / 100;
    w->delay_p50 = v[k50 - 1];
    w->delay_p90 = v[k90 - 1];
    w->delay_p99 = v[k99 - 1];
  }
  free(v);
}

static double busbw_factor(uint32_t op, uint32_t n) {
  if (op == STEPSCOPE_COLL_ALLREDUCE) return 2.0 * (n - 1) / n;
  if (op == STEPSCOPE_COLL_ALLGATHER || op == STEPSCOPE_COLL_REDUCESCATTER) return (double)(n - 1) / n;
  return 1.0;
}

int gen_expect_compute(const gen_run *g, gen_expect *x) {
  memset(x, 0, sizeof *x);
  /* origin */
  x->origin = INT64_MAX;
  for (size_t i = 0; i < g->nops; i++) {
    const gen_op *o = &g->ops[i];
    if (!g->ranks[o->rank].present) continue;
    if (o->s < x->origin) x->origin = o->s;
    if (o->has_launch && o->launch_s < x->origin) x->origin = o->launch_s;
  }
  for (size_t i = 0; i < g->nsteps; i++)
    if (g->ranks[g->steps[i].rank].present && g->steps[i].s < x->origin) x->origin = g->steps[i].s;
  for (size_t i = 0; i < g->nsyncs; i++)
    if (g->ranks[g->syncs[i].rank].present && g->syncs[i].s < x->origin) x->origin = g->syncs[i].s;

  int ref = -1;
  for (int r = 0; r < g->nranks; r++) {
    if (!g->ranks[r].present) continue;
    if (ref < 0) ref = r;
    x->offset_rel[r] = g->ranks[ref].clock_offset - g->ranks[r].clock_offset;
    gen_rank_expect *re = &x->ranks[x->nranks++];
    re->rank = r;
    /* steps in iteration order (range start, then number): their ops, their
     * anchors and windows (docs/metrics.md "Steps") */
    long order[64];
    size_t ns = 0;
    for (size_t i = 0; i < g->nsteps && ns < 64; i++)
      if (g->steps[i].rank == r) order[ns++] = (long)i;
    for (size_t i = 1; i < ns; i++)
      for (size_t j = i; j > 0; j--) {
        const gen_step *p = &g->steps[order[j - 1]], *q = &g->steps[order[j]];
        if (p->s < q->s || (p->s == q->s && p->number <= q->number)) break;
        long t = order[j];
        order[j] = order[j - 1];
        order[j - 1] = t;
      }
    /* the trace format does not record where the profiling session
     * stopped, so no step range is known to be cut by the trace's end
     * (Kineto's `Trace` event tells; tests/kineto covers it) */
    int64_t trace_end = INT64_MIN;
    int64_t done = INT64_MIN;
    for (size_t i = 0; i < ns; i++) {
      const gen_step *st = &g->steps[order[i]];
      gen_window *w = &re->steps[re->nsteps++];
      w->step = st->number;
      int64_t first = INT64_MAX, last = INT64_MIN;
      for (size_t k = 0; k < g->nops; k++) {
        const gen_op *o = &g->ops[k];
        if (o->rank != r || owner_of(g, o) != order[i]) continue;
        if (o->s < first) first = o->s;
        if (o->e > last) last = o->e;
        w->projected = 1;
      }
      int64_t a = st->s > done ? st->s : done;
      w->start = a;
      w->device_latency = w->projected ? last - first : -1;
      if (w->projected && last > done) done = last;
      if (i > 0) re->steps[i - 1].end = a;
      w->cut = trace_end != INT64_MIN && st->e > trace_end;
      if (i + 1 == ns) {
        w->end = w->cut ? trace_end : st->e;
        if (w->projected && last > w->end) w->end = last;
        if (w->end < w->start) w->end = w->start;
      }
    }
    for (size_t i = 0; i < ns; i++) {
      measure(g, r, &re->steps[i]);
      delays(g, r, order[i], &re->steps[i]);
    }
    for (size_t i = 1; i < re->nsteps; i++) /* sort by number */
      for (size_t j = i; j > 0 && re->steps[j - 1].step > re->steps[j].step; j--) {
        gen_window t = re->steps[j];
        re->steps[j] = re->steps[j - 1];
        re->steps[j - 1] = t;
      }
    gen_window *tw = &re->totals;
    tw->step = -1;
    if (re->nsteps) {
      tw->start = INT64_MAX;
      tw->end = INT64_MIN;
      for (size_t i = 0; i < re->nsteps; i++) {
        if (re->steps[i].start < tw->start) tw->start = re->steps[i].start;
        if (re->steps[i].end > tw->end) tw->end = re->steps[i].end;
      }
      measure(g, r, tw);
      delays(g, r, -1, tw);
    }
    for (int l = 0; l < g->ranks[r].nlanes; l++) {
      for (int64_t t = tw->start; t < tw->end; t += GEN_Q) {
        int covered = 0;
        for (size_t i = 0; i < g->nops && !covered; i++) {
          const gen_op *o = &g->ops[i];
          covered = o->rank == r && o->lane == l && o->s <= t && o->e >= t + GEN_Q;
        }
        if (covered) re->lane_busy[l] += GEN_Q;
        else re->lane_idle[l][cell_cause(g, r, t, l)] += GEN_Q;
      }
    }
  }
  /* collectives */
  x->colls = calloc(g->ncolls + 1, sizeof *x->colls);
  if (!x->colls) return -1;
  for (size_t c = 0; c < g->ncolls; c++) {
    const gen_coll *gc = &g->colls[c];
    if (!gc->record || gc->nmembers == 0) continue;
    int keep = 0;
    for (int m = 0; m < gc->nmembers; m++) {
      const gen_op *o = &g->ops[gc->member_op[m]];
      for (int k = 0; k < x->nranks; k++)
        if (x->ranks[k].rank == o->rank && o->s >= x->ranks[k].totals.start && o->s < x->ranks[k].totals.end)
          keep = 1;
    }
    if (!keep) continue;
    gen_coll_expect *e = &x->colls[x->ncolls++];
    e->comm_id = gc->comm_id;
    e->seq = gc->seq;
    e->present = (uint32_t)gc->nmembers;
    e->comm_size = gc->comm_size;
    int64_t first = INT64_MAX, last = INT64_MIN, transfer = INT64_MAX;
    int last_rank = -1;
    for (int m = 0; m < gc->nmembers; m++) {
      const gen_op *o = &g->ops[gc->member_op[m]];
      if (o->s < first) first = o->s;
      if (o->s > last || (o->s == last && o->rank < last_rank)) { last = o->s; last_rank = o->rank; }
      if (o->e - o->s < transfer) transfer = o->e - o->s;
    }
    e->first_start = first - x->origin;
    e->skew = last - first;
    e->transfer = transfer;
    e->last_rank = last_rank;
    e->algbw = (double)gc->bytes / (double)transfer;
    e->busbw = e->algbw * busbw_factor(gc->op, gc->comm_size);
    int64_t caused = 0;
    for (int m = 0; m < gc->nmembers; m++) {
      const gen_op *o = &g->ops[gc->member_op[m]];
      int64_t wait = o->e - o->s - transfer;
      e->total_wait += wait;
      if (wait > e->max_wait) e->max_wait = wait;
      for (int k = 0; k < x->nranks; k++)
        if (x->ranks[k].rank == o->rank) {
          x->ranks[k].coll_wait += wait;
          x->ranks[k].coll_count++;
          if (o->rank == last_rank) x->ranks[k].coll_last++;
        }
      if (o->rank != last_rank) caused += wait;
    }
    for (int k = 0; k < x->nranks; k++)
      if (x->ranks[k].rank == last_rank) x->ranks[k].coll_caused += caused;
    if ((uint32_t)gc->nmembers < gc->comm_size) x->colls_incomplete++;
  }
  /* step time and MFU */
  int64_t times[256], lats[256];
  size_t nt = 0, nl = 0;
  /* by step number: the longest over ranks; steps cut by the trace's end
   * (on any rank) are left out unless every step is */
  int64_t tall[256], lall[256];
  int cut[256];
  size_t na = 0, ncut = 0;
  for (int64_t num = -1000; num < 1000 && na < 256; num++) {
    int64_t tmax = -1, lmax = -1;
    int c = 0;
    for (int k = 0; k < x->nranks; k++)
      for (size_t s = 0; s < x->ranks[k].nsteps; s++)
        if (x->ranks[k].steps[s].step == num) {
          if (x->ranks[k].steps[s].span > tmax) tmax = x->ranks[k].steps[s].span;
          if (x->ranks[k].steps[s].device_latency > lmax) lmax = x->ranks[k].steps[s].device_latency;
          c |= x->ranks[k].steps[s].cut;
        }
    if (tmax < 0) continue;
    tall[na] = tmax;
    lall[na] = lmax;
    cut[na++] = c;
    ncut += (size_t)c;
  }
  for (size_t i = 0; i < na; i++) {
    if (cut[i] && ncut < na) continue;
    times[nt++] = tall[i];
    if (lall[i] >= 0) lats[nl++] = lall[i];
  }
  x->device_latency_median = -1;
  if (nl) {
    qsort(lats, nl, sizeof *lats, cmp_i64);
    x->device_latency_median = lats[(nl - 1) / 2];
  }
  x->step_time_median = -1;
  x->mfu = x->hfu = -1;
  if (nt) {
    qsort(times, nt, sizeof *times, cmp_i64);
    x->step_time_median = times[(nt - 1) / 2];
    if (g->with_flops) {
      double sec = (double)x->step_time_median * 1e-9;
      x->mfu = g->model_flops / (sec * g->peak_flops * g->nranks);
      x->hfu = g->hardware_flops / (sec * g->peak_flops * g->nranks);
    }
  }
  return 0;
}

void gen_expect_free(gen_expect *x) {
  free(x->colls);
  x->colls = NULL;
}
