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
  return cause_of(g, r, a, b, lane);
}

/* Pipeline waits (docs/metrics.md "Pipeline bubble"): per op, the true time
 * until which a non-pipeline collective's member waits for a member on
 * another pipeline stage (INT64_MIN: none). Set by gen_expect_compute. */
static int64_t *wait_end_of_op;

static int stage_of(const gen_run *g, int r) {
  if (g->pp <= 1) return -1; /* the generator's pipelines all set pp */
  return g->ranks[r].stage >= 0 ? g->ranks[r].stage : 0;
}

static int pipeline_waits(const gen_run *g) {
  wait_end_of_op = malloc((g->nops + 1) * sizeof *wait_end_of_op);
  if (!wait_end_of_op) return -1;
  for (size_t i = 0; i < g->nops; i++) wait_end_of_op[i] = INT64_MIN;
  for (size_t c = 0; c < g->ncolls; c++) {
    const gen_coll *gc = &g->colls[c];
    if (!gc->record || (gc->flags & STEPSCOPE_COLL_F_PIPELINE)) continue;
    for (int m = 0; m < gc->nmembers; m++) {
      const gen_op *o = &g->ops[gc->member_op[m]];
      int sm = stage_of(g, o->rank);
      if (sm < 0 || !g->ranks[o->rank].present) continue;
      int64_t latest = INT64_MIN;
      for (int k = 0; k < gc->nmembers; k++) {
        const gen_op *p = &g->ops[gc->member_op[k]];
        int sk = stage_of(g, p->rank);
        if (g->ranks[p->rank].present && sk >= 0 && sk != sm && p->s > latest) latest = p->s;
      }
      if (latest > o->s) wait_end_of_op[gc->member_op[m]] = latest;
    }
  }
  return 0;
}

static void measure(const gen_run *g, int r, gen_window *w) {
  w->span = w->end - w->start;
  for (int64_t t = w->start; t < w->end; t += GEN_Q) {
    int comp = 0, comm = 0, mem = 0, np = 0;
    for (size_t i = 0; i < g->nops; i++) {
      const gen_op *o = &g->ops[i];
      if (o->rank != r || !(o->s <= t && o->e >= t + GEN_Q)) continue;
      if (o->cls == GEN_COMPUTE) comp = 1;
      else if (o->cls == GEN_COMM) {
        comm = 1;
        if (!o->pipeline && t >= wait_end_of_op[i]) np = 1;
      }
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

static void delays(const gen_run *g, int r, int64_t s0, int64_t s1, int all, gen_window *w) {
  int64_t *v = malloc((g->nops + 1) * sizeof *v);
  size_t n = 0;
  for (size_t i = 0; v && i < g->nops; i++) {
    const gen_op *o = &g->ops[i];
    if (o->rank != r || !o->has_launch) continue;
    int in = 0;
    if (all) {
      for (size_t k = 0; k < g->nsteps; k++)
        if (g->steps[k].rank == r && o->launch_s >= g->steps[k].s && o->launch_s < g->steps[k].e) in = 1;
    } else {
      in = o->launch_s >= s0 && o->launch_s < s1;
    }
    if (in) v[n++] = o->s - o->launch_e;
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

  if (pipeline_waits(g)) return -1;
  int ref = -1;
  for (int r = 0; r < g->nranks; r++) {
    if (!g->ranks[r].present) continue;
    if (ref < 0) ref = r;
    x->offset_rel[r] = g->ranks[ref].clock_offset - g->ranks[r].clock_offset;
    gen_rank_expect *re = &x->ranks[x->nranks++];
    re->rank = r;
    /* steps, by number */
    for (size_t i = 0; i < g->nsteps; i++) {
      const gen_step *st = &g->steps[i];
      if (st->rank != r) continue;
      gen_window *w = &re->steps[re->nsteps++];
      w->step = st->number;
      w->start = INT64_MAX;
      w->end = INT64_MIN;
      for (size_t k = 0; k < g->nops; k++) {
        const gen_op *o = &g->ops[k];
        if (o->rank != r || !o->has_launch || o->launch_s < st->s || o->launch_s >= st->e) continue;
        if (o->s < w->start) w->start = o->s;
        if (o->e > w->end) w->end = o->e;
        w->projected = 1;
      }
      if (!w->projected) {
        w->start = st->s;
        w->end = st->e;
      }
      measure(g, r, w);
      delays(g, r, st->s, st->e, 0, w);
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
      delays(g, r, 0, 0, 1, tw);
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
    /* complete: every member (two for p2p); only complete instances count
     * per rank; stragglers: not pipeline transfers, and without the part of
     * a wait until the last member of another stage arrived */
    uint32_t expected = (gc->flags & STEPSCOPE_COLL_F_P2P) && gc->comm_size > 2 ? 2 : gc->comm_size;
    int complete = (uint32_t)gc->nmembers >= expected;
    int straggling = complete && !(gc->flags & STEPSCOPE_COLL_F_PIPELINE);
    int64_t caused = 0;
    for (int m = 0; m < gc->nmembers; m++) {
      const gen_op *o = &g->ops[gc->member_op[m]];
      int64_t wait = o->e - o->s - transfer;
      e->total_wait += wait;
      if (wait > e->max_wait) e->max_wait = wait;
      int64_t sched = 0, we = wait_end_of_op[gc->member_op[m]];
      if (we != INT64_MIN) sched = we - o->s < wait ? we - o->s : wait;
      if (!complete) continue;
      for (int k = 0; k < x->nranks; k++)
        if (x->ranks[k].rank == o->rank) {
          x->ranks[k].coll_wait += wait;
          x->ranks[k].coll_count++;
          if (o->rank == last_rank && straggling) x->ranks[k].coll_last++;
        }
      if (o->rank != last_rank) {
        int64_t late = last - o->s < wait ? last - o->s : wait;
        if (late > sched) caused += late - sched;
      }
    }
    for (int k = 0; k < x->nranks && straggling; k++)
      if (x->ranks[k].rank == last_rank) x->ranks[k].coll_caused += caused;
    if (!complete) x->colls_incomplete++;
  }
  /* step time and MFU */
  int64_t times[256];
  size_t nt = 0;
  for (int64_t num = -1000; num < 1000 && nt < 256; num++) {
    int64_t tmax = -1;
    for (int k = 0; k < x->nranks; k++)
      for (size_t s = 0; s < x->ranks[k].nsteps; s++)
        if (x->ranks[k].steps[s].step == num && x->ranks[k].steps[s].span > tmax) tmax = x->ranks[k].steps[s].span;
    if (tmax >= 0) times[nt++] = tmax;
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
  free(wait_end_of_op);
  wait_end_of_op = NULL;
  free(x->colls);
  x->colls = NULL;
}
