/*
 * gen_expect.c — the expected value of every SPEC §4 metric for a generated
 * run, computed from the scenario description alone, by brute force: each
 * window is cut into GEN_Q-wide cells (every generated time is a multiple
 * of GEN_Q) and each cell is classified by scanning all ops of its rank; idle
 * causes are found per idle cell by searching the rank's ops around it;
 * collectives by construction. Deliberately simple and slow (O(cells x the
 * rank's ops)), and sharing nothing with the analyzer's sweep-based code; but
 * linear in ranks: every search of a rank's ops, steps, syncs and loads goes
 * through lists of that rank's items (in index order, so the loops visit what a
 * scan of all items would, in the same order), and a collective's members are
 * matched to their ranks and stages in one pass (before, scans of every rank's
 * items made 64 ranks x 4 steps x 200 ops take over 15 minutes).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "stepscope.h"
#include "stepscope_gen.h"

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* The indexes of one kind of item (ops, steps, syncs, loads) by rank, ascending: rank r's are
 * item[start[r]] .. item[start[r + 1] - 1]. */
typedef struct rank_index {
  size_t *start, *item;
} rank_index;

/* Each rank's ops, steps, syncs and loads (set by gen_expect_compute): the loops below visit
 * exactly the items of their rank that a scan of all items would, in the same order. */
static rank_index rank_ops, rank_steps, rank_syncs, rank_loads;

/* Indexes n items of `stride` bytes from base, whose int rank lies `rank_at` bytes in. */
static int index_by_rank(rank_index *ix, int nranks, const void *base, size_t n, size_t stride,
                         size_t rank_at) {
  ix->start = calloc((size_t)nranks + 2, sizeof *ix->start);
  ix->item = malloc((n + 1) * sizeof *ix->item);
  if (!ix->start || !ix->item) return -1;
  const char *b = base;
#define RANK_OF(i) (*(const int *)(b + (i)*stride + rank_at))
  for (size_t i = 0; i < n; i++)
    ix->start[RANK_OF(i) + 2]++;
  for (int r = 0; r < nranks; r++)
    ix->start[r + 2] += ix->start[r + 1];
  for (size_t i = 0; i < n; i++)
    ix->item[ix->start[RANK_OF(i) + 1]++] = i;
#undef RANK_OF
  return 0;
}

static int index_ranks(const gen_run *g) {
  return index_by_rank(&rank_ops, g->nranks, g->ops, g->nops, sizeof *g->ops,
                       offsetof(gen_op, rank)) ||
                 index_by_rank(&rank_steps, g->nranks, g->steps, g->nsteps, sizeof *g->steps,
                               offsetof(gen_step, rank)) ||
                 index_by_rank(&rank_syncs, g->nranks, g->syncs, g->nsyncs, sizeof *g->syncs,
                               offsetof(gen_sync, rank)) ||
                 index_by_rank(&rank_loads, g->nranks, g->loads, g->nloads, sizeof *g->loads,
                               offsetof(gen_load, rank))
             ? -1
             : 0;
}

static void free_index(rank_index *ix) {
  free(ix->start);
  free(ix->item);
  ix->start = ix->item = NULL;
}

/* for (each index i of rank r's items in ix, ascending) */
#define EACH_OF_RANK(ix, r, i)                                                                     \
  for (size_t k_##i = (ix).start[r], i;                                                            \
       k_##i < (ix).start[(r) + 1] && ((i = (ix).item[k_##i]), 1); k_##i++)

/* The current rank's ops by blocks of BLOCK_NS of true time (set per rank by cover_index):
 * block k lists, ascending, the ops that overlap [t0 + k BLOCK_NS, t0 + (k + 1) BLOCK_NS). An op
 * that covers a cell overlaps the cell's block, so a cell's ops are searched among its block's
 * only: the search is still a scan of candidates with the same test, over fewer of them. */
#define BLOCK_NS (64 * GEN_Q)
/* The gap [a, b) of the last idle cell cell_cause saw (t) on the current rank, and its cause. */
typedef struct gap_memo {
  int valid, lane;
  int64_t t, a, b;
  int cause;
} gap_memo;
static struct {
  int64_t t0;
  size_t nblocks;
  rank_index ops; /* "ranks" are blocks here */
  int has_empty;  /* the rank has an op of no length (which may end inside an idle run) */
  gap_memo last_gap;
} cover;

static int cover_index(const gen_run *g, int r) {
  free_index(&cover.ops);
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  cover.has_empty = 0;
  cover.last_gap.valid = 0; /* a new rank (or run) */
  EACH_OF_RANK(rank_ops, r, i) {
    cover.has_empty |= g->ops[i].e <= g->ops[i].s;
    if (g->ops[i].e <= g->ops[i].s) continue; /* covers no cell */
    if (g->ops[i].s < lo) lo = g->ops[i].s;
    if (g->ops[i].e > hi) hi = g->ops[i].e;
  }
  cover.t0 = lo;
  cover.nblocks = lo < hi ? (size_t)((hi - lo + BLOCK_NS - 1) / BLOCK_NS) : 0;
  cover.ops.start = calloc(cover.nblocks + 2, sizeof *cover.ops.start);
  if (!cover.ops.start) return -1;
  size_t n = 0;
  for (int pass = 0; pass < 2; pass++) { /* count, then fill */
    EACH_OF_RANK(rank_ops, r, i) {
      const gen_op *o = &g->ops[i];
      if (o->e <= o->s) continue;
      size_t a = (size_t)((o->s - lo) / BLOCK_NS), b = (size_t)((o->e - 1 - lo) / BLOCK_NS);
      for (size_t k = a; k <= b; k++)
        if (pass == 0)
          cover.ops.start[k + 2]++, n++;
        else
          cover.ops.item[cover.ops.start[k + 1]++] = i;
    }
    if (pass == 0) {
      for (size_t k = 0; k < cover.nblocks; k++)
        cover.ops.start[k + 2] += cover.ops.start[k + 1];
      cover.ops.item = malloc((n + 1) * sizeof *cover.ops.item);
      if (!cover.ops.item) return -1;
    }
  }
  return 0;
}

/* The block of the cell [t, t + Q) in cover (cover.nblocks: none, no op covers it). */
static size_t block_of(int64_t t) {
  if (!cover.nblocks || t < cover.t0) return cover.nblocks;
  int64_t k = (t - cover.t0) / BLOCK_NS;
  return k < (int64_t)cover.nblocks ? (size_t)k : cover.nblocks;
}

/* Idle cause of the gap [a, b) closed by ops starting at b (lane -1: any). */
static int cause_of(const gen_run *g, int r, int64_t a, int64_t b, int lane) {
  if (a != INT64_MIN && b - a < GEN_LAUNCH_GAP_NS) return GEN_IDLE_LAUNCH_GAP;
  int best = GEN_IDLE_OTHER;
  EACH_OF_RANK(rank_ops, r, i) {
    const gen_op *o = &g->ops[i];
    if (o->rank != r || o->s != b || (lane >= 0 && o->lane != lane)) continue;
    if (o->has_launch && o->launch_s >= a) return GEN_IDLE_HOST_WAIT;
    EACH_OF_RANK(rank_syncs, r, k) {
      const gen_sync *y = &g->syncs[k];
      if (y->rank == r && y->lane == o->lane && y->s < b && y->e > a) best = GEN_IDLE_SYNC_WAIT;
    }
    EACH_OF_RANK(rank_ops, r, q) {
      const gen_op *p = &g->ops[q];
      if (p->rank == r && p->lane != o->lane && p->e >= b - GEN_LAUNCH_GAP_NS && p->e <= b)
        best = GEN_IDLE_SYNC_WAIT;
    }
  }
  return best;
}

/* Cause of an idle cell [t, t+Q) on rank r (lane -1 = device). The gap [a, b) around it is
 * found by a scan of the rank's ops, once per run of idle cells: when the cell before this one
 * was idle too (the last call's), the gap is the same as long as it reaches past this cell
 * (times are on the grid: an op ending at t, at the earliest, would have covered that cell,
 * unless it has no length). */
static int cell_cause(const gen_run *g, int r, int64_t t, int lane) {
  gap_memo *last = &cover.last_gap;
  if (!(last->valid && last->lane == lane && last->t == t - GEN_Q && last->b >= t + GEN_Q &&
        !cover.has_empty)) {
    int64_t a = INT64_MIN, b = INT64_MAX;
    EACH_OF_RANK(rank_ops, r, i) {
      const gen_op *o = &g->ops[i];
      if (o->rank != r || (lane >= 0 && o->lane != lane)) continue;
      if (o->e <= t && o->e > a) a = o->e;
      if (o->s >= t + GEN_Q && o->s < b) b = o->s;
    }
    *last =
        (gap_memo){1, lane, t, a, b, b == INT64_MAX ? GEN_IDLE_OTHER : cause_of(g, r, a, b, lane)};
  }
  last->t = t;
  if (last->b == INT64_MAX) return GEN_IDLE_OTHER;
  int cause = last->cause;
  /* waiting for the host while it loads data: data_loading */
  EACH_OF_RANK(rank_loads, r, i) {
    if (cause == GEN_IDLE_HOST_WAIT && g->loads[i].rank == r && g->loads[i].s <= t &&
        g->loads[i].e >= t + GEN_Q)
      cause = GEN_IDLE_DATA_LOADING;
  }
  return cause;
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
  for (size_t i = 0; i < g->nops; i++)
    wait_end_of_op[i] = INT64_MIN;
  for (size_t c = 0; c < g->ncolls; c++) {
    const gen_coll *gc = &g->colls[c];
    if (!gc->record || (gc->flags & STEPSCOPE_COLL_F_PIPELINE)) continue;
    /* the latest start of a present member on a stage (first), and the latest on any
     * other stage than that one (second): a member's latest on another stage is one of
     * them, in one pass instead of one per member */
    int64_t first = INT64_MIN, second = INT64_MIN;
    int first_stage = -1;
    for (int k = 0; k < gc->nmembers; k++) {
      const gen_op *p = &g->ops[gc->member_op[k]];
      int sk = stage_of(g, p->rank);
      if (!g->ranks[p->rank].present || sk < 0) continue;
      if (p->s > first) {
        if (sk != first_stage) second = first;
        first = p->s;
        first_stage = sk;
      } else if (sk != first_stage && p->s > second) {
        second = p->s;
      }
    }
    for (int m = 0; m < gc->nmembers; m++) {
      const gen_op *o = &g->ops[gc->member_op[m]];
      int sm = stage_of(g, o->rank);
      if (sm < 0 || !g->ranks[o->rank].present) continue;
      int64_t latest = sm != first_stage ? first : second;
      if (latest > o->s) wait_end_of_op[gc->member_op[m]] = latest;
    }
  }
  return 0;
}

/* Per op: the transfer of its complete pipeline instance (its last `transfer`
 * ns are transfer, the rest waiting), 0 for others. Set by gen_expect_compute. */
static int64_t *transfer_of_op;

static void transfers(const gen_run *g) {
  for (size_t c = 0; c < g->ncolls; c++) {
    const gen_coll *gc = &g->colls[c];
    if (!gc->record || !(gc->flags & STEPSCOPE_COLL_F_PIPELINE)) continue;
    uint32_t expected = (gc->flags & STEPSCOPE_COLL_F_P2P) && gc->comm_size > 2 ? 2 : gc->comm_size;
    int present = 0;
    int64_t tr = INT64_MAX;
    for (int m = 0; m < gc->nmembers; m++) {
      const gen_op *o = &g->ops[gc->member_op[m]];
      if (!g->ranks[o->rank].present) continue;
      present++;
      if (o->e - o->s < tr) tr = o->e - o->s;
    }
    if ((uint32_t)present < expected) continue;
    for (int m = 0; m < gc->nmembers; m++)
      transfer_of_op[gc->member_op[m]] = tr;
  }
}

static void measure(const gen_run *g, int r, gen_window *w) {
  w->span = w->end - w->start;
  w->imbalance_stage = -1;
  for (int64_t t = w->start; t < w->end; t += GEN_Q) {
    int comp = 0, comm = 0, mem = 0, np = 0, xfer = 0;
    EACH_OF_RANK(cover.ops, block_of(t), i) {
      const gen_op *o = &g->ops[i];
      if (o->rank != r || !(o->s <= t && o->e >= t + GEN_Q)) continue;
      if (o->cls == GEN_COMPUTE)
        comp = 1;
      else if (o->cls == GEN_COMM) {
        comm = 1;
        if (!o->pipeline && t >= wait_end_of_op[i]) np = 1;
        if (o->pipeline && t >= o->e - transfer_of_op[i]) xfer = 1;
      } else
        mem = 1;
    }
    if (!comp && !np && xfer) w->bubble_cause[2] += GEN_Q;
    if (comp) w->compute += GEN_Q;
    if (comm) w->comm += GEN_Q;
    if (comp && comm) w->overlap += GEN_Q;
    if (comp || comm || mem) w->busy += GEN_Q;
    if (mem && !comp && !comm) w->exposed_mem += GEN_Q;
    if (!comp && !np) w->bubble += GEN_Q;
    if (!comp && !comm && !mem) {
      int cause = cell_cause(g, r, t, -1);
      w->idle_cause[cause] += GEN_Q;
      if (cause == GEN_IDLE_HOST_WAIT || cause == GEN_IDLE_LAUNCH_GAP) w->bubble_cause[4] += GEN_Q;
    }
  }
  /* what is left of the bubble is waiting: unattributed until a schedule splits it */
  w->bubble_cause[5] = w->bubble - w->bubble_cause[2] - w->bubble_cause[4];
  w->idle = w->span - w->busy;
  w->exposed_comm = w->comm - w->overlap;
}

/* The step (index into g->steps) an op belongs to: of the ranges of its
 * rank that contain its launch's start, the one that started last (ties:
 * the higher step number); -1 if none or no launch. */
static long owner_of(const gen_run *g, const gen_op *o) {
  long best = -1;
  if (!o->has_launch) return -1;
  EACH_OF_RANK(rank_steps, o->rank, k) {
    const gen_step *st = &g->steps[k];
    if (st->rank != o->rank || o->launch_s < st->s || o->launch_s >= st->e) continue;
    if (best < 0 || st->s > g->steps[best].s ||
        (st->s == g->steps[best].s && st->number > g->steps[best].number))
      best = (long)k;
  }
  return best;
}

/* Launch delays of the ops of step `step` (index into g->steps), or of every
 * op that belongs to some step (step < 0). */
static void delays(const gen_run *g, int r, long step, gen_window *w) {
  int64_t *v = malloc((g->nops + 1) * sizeof *v);
  size_t n = 0;
  EACH_OF_RANK(rank_ops, r, i) {
    const gen_op *o = &g->ops[i];
    if (!v || o->rank != r || !o->has_launch) continue;
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
  if (op == STEPSCOPE_COLL_ALLGATHER || op == STEPSCOPE_COLL_REDUCESCATTER ||
      op == STEPSCOPE_COLL_ALLTOALL)
    return (double)(n - 1) / n;
  return 1.0;
}

/* ---- bubble causes: the schedule simulated from the forward/backward ranges ---- */

/* An op's time toward its item: the device gap just before it when the op is the
 * first (longest, then lowest lane) to start at that instant and the gap was a host
 * gap (launch at or after the gap's start, or shorter than the launch-gap threshold). */
static int64_t host_gap_before(const gen_run *g, size_t i) {
  const gen_op *o = &g->ops[i];
  int64_t a = INT64_MIN;
  EACH_OF_RANK(rank_ops, o->rank, k) {
    const gen_op *q = &g->ops[k];
    if (q->rank != o->rank || q->e <= q->s) continue;
    if (q->s == o->s && k != i && (q->e > o->e || (q->e == o->e && q->lane < o->lane))) return 0;
    if (q->s < o->s && q->e > a) a = q->e;
  }
  if (a == INT64_MIN || a >= o->s) return 0;
  return o->s - a < GEN_LAUNCH_GAP_NS || o->launch_s >= a ? o->s - a : 0;
}

/* Item time: cells covered by its compute ops, plus its ops' host gaps. */
static int64_t item_time(const gen_run *g, const gen_range *it) {
  int64_t lo = INT64_MAX, hi = INT64_MIN, t = 0;
  EACH_OF_RANK(rank_ops, it->rank, i) {
    const gen_op *o = &g->ops[i];
    if (o->rank != it->rank || !o->has_launch || o->launch_s < it->s || o->launch_s >= it->e)
      continue;
    t += host_gap_before(g, i);
    if (o->cls == GEN_COMPUTE) {
      if (o->s < lo) lo = o->s;
      if (o->e > hi) hi = o->e;
    }
  }
  for (int64_t c = lo; c < hi; c += GEN_Q)
    EACH_OF_RANK(rank_ops, it->rank, i) {
      const gen_op *o = &g->ops[i];
      if (o->rank == it->rank && o->cls == GEN_COMPUTE && o->has_launch && o->launch_s >= it->s &&
          o->launch_s < it->e && o->s <= c && o->e >= c + GEN_Q) {
        t += GEN_Q;
        break;
      }
    }
  return t;
}

/* Idle per stage when every stage runs its items (in their order) as soon as the
 * input exists; dur NULL: every forward takes bf, every backward bb. */
static int sim(int p, const gen_range *const *items, const int *n, const int64_t *const *dur,
               int64_t bf, int64_t bb, int64_t *idle, int64_t *busy) {
  int64_t endf[4][8], endb[4][8], at[4] = {0};
  int done[4] = {0};
  for (int s = 0; s < p; s++)
    for (int k = 0; k < 8; k++)
      endf[s][k] = endb[s][k] = -1;
  for (int s = 0; s < p; s++)
    busy[s] = 0;
  int left = 0;
  for (int s = 0; s < p; s++)
    left += n[s];
  while (left > 0) {
    int moved = 0;
    for (int s = 0; s < p; s++) {
      if (done[s] == n[s]) continue;
      const gen_range *it = &items[s][done[s]];
      int bwd = it->name[0] == 'b';
      int64_t dep = 0;
      if (!bwd && s > 0) dep = endf[s - 1][it->mb];
      if (bwd && s < p - 1) dep = endb[s + 1][it->mb];
      if (dep < 0) continue;
      int64_t d = dur ? dur[s][done[s]] : bwd ? bb : bf;
      int64_t st = at[s] > dep ? at[s] : dep;
      at[s] = st + d;
      busy[s] += d;
      if (bwd)
        endb[s][it->mb] = at[s];
      else
        endf[s][it->mb] = at[s];
      done[s]++;
      left--;
      moved = 1;
    }
    if (!moved) return -1;
  }
  int64_t span = 0;
  for (int s = 0; s < p; s++)
    if (at[s] > span) span = at[s];
  for (int s = 0; s < p; s++)
    idle[s] = span - busy[s];
  return 0;
}

static void split(gen_window *w, int64_t sched, int64_t imb) {
  int64_t W = w->bubble_cause[5];
  if (sched < 0) sched = 0;
  if (imb < 0) imb = 0;
  if (sched > W) sched = W;
  if (imb > W - sched) imb = W - sched;
  w->bubble_cause[0] = sched;
  w->bubble_cause[1] = imb;
  w->bubble_cause[3] = W - sched - imb;
  w->bubble_cause[5] = 0;
}

/* The generator's pipelines: ranks 0 .. pp-1 are its stages (one pipeline). */
static void schedule_causes(const gen_run *g, gen_expect *x) {
  int p = g->pp;
  if (p < 2 || p > 4 || x->nranks != p) return;
  int64_t sum_sched[4] = {0}, sum_imb[4] = {0};
  int votes[4] = {0}, any = 0;
  for (size_t si = 0; si < x->ranks[0].nsteps; si++) {
    int64_t number = x->ranks[0].steps[si].step;
    gen_range *items[4];
    const gen_range *citems[4];
    int64_t *dur[4];
    const int64_t *cdur[4];
    int n[4] = {0}, ok = 1;
    gen_window *ws[4];
    for (int s = 0; s < p; s++) {
      items[s] = calloc(g->nranges + 1, sizeof *items[s]);
      dur[s] = calloc(g->nranges + 1, sizeof *dur[s]);
      ws[s] = NULL;
      for (size_t k = 0; k < x->ranks[s].nsteps; k++)
        if (x->ranks[s].steps[k].step == number) ws[s] = &x->ranks[s].steps[k];
      const gen_step *hs = NULL;
      for (size_t k = 0; k < g->nsteps; k++)
        if (g->steps[k].rank == s && g->steps[k].number == number) hs = &g->steps[k];
      if (!items[s] || !dur[s] || !ws[s] || !hs || g->ranks[s].stage != s) {
        ok = 0;
        continue;
      }
      for (size_t k = 0; k < g->nranges; k++)
        if (g->ranges[k].rank == s && g->ranges[k].s >= hs->s && g->ranges[k].s < hs->e)
          items[s][n[s]++] = g->ranges[k];
      for (int a = 1; a < n[s]; a++) /* by start */
        for (int b = a; b > 0 && items[s][b - 1].s > items[s][b].s; b--) {
          gen_range t = items[s][b];
          items[s][b] = items[s][b - 1];
          items[s][b - 1] = t;
        }
      for (int k = 0; k < n[s]; k++)
        dur[s][k] = item_time(g, &items[s][k]);
      if (n[s] == 0) ok = 0;
      citems[s] = items[s];
      cdur[s] = dur[s];
    }
    int64_t idle[4], idle_bal[4], busy[4], busy_bal[4];
    if (ok && sim(p, citems, n, cdur, 0, 0, idle, busy) == 0) {
      int slow = 0;
      for (int s = 1; s < p; s++)
        if (busy[s] > busy[slow]) slow = s;
      int64_t mf[4], mb[4];
      int nf = 0, nb = 0;
      for (int s = 0; s < p; s++) {
        int64_t f = 0, b = 0, cf = 0, cb = 0;
        for (int k = 0; k < n[s]; k++) {
          if (items[s][k].name[0] == 'b')
            b += dur[s][k], cb++;
          else
            f += dur[s][k], cf++;
        }
        if (cf) mf[nf++] = f / cf;
        if (cb) mb[nb++] = b / cb;
      }
      qsort(mf, (size_t)nf, sizeof *mf, cmp_i64);
      qsort(mb, (size_t)nb, sizeof *mb, cmp_i64);
      if (sim(p, citems, n, NULL, nf ? mf[(nf - 1) / 2] : 0, nb ? mb[(nb - 1) / 2] : 0, idle_bal,
              busy_bal) == 0) {
        for (int s = 0; s < p; s++) {
          split(ws[s], idle_bal[s], idle[s] - idle_bal[s]);
          ws[s]->imbalance_stage = ws[s]->bubble_cause[1] > 0 ? slow : -1;
          sum_sched[s] += ws[s]->bubble_cause[0];
          sum_imb[s] += ws[s]->bubble_cause[1];
        }
        votes[slow]++;
        any = 1;
      }
    }
    for (int s = 0; s < p; s++) {
      free(items[s]);
      free(dur[s]);
    }
  }
  if (!any) return;
  int slowest = -1;
  for (int s = 0; s < p; s++)
    if (votes[s] > 0 && (slowest < 0 || votes[s] > votes[slowest])) slowest = s;
  for (int s = 0; s < p; s++) {
    split(&x->ranks[s].totals, sum_sched[s], sum_imb[s]);
    x->ranks[s].totals.imbalance_stage = x->ranks[s].totals.bubble_cause[1] > 0 ? slowest : -1;
  }
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

  x->ranks = calloc((size_t)g->nranks + 1, sizeof *x->ranks);
  x->offset_rel = calloc((size_t)g->nranks + 1, sizeof *x->offset_rel);
  if (!x->ranks || !x->offset_rel || pipeline_waits(g) || index_ranks(g)) return -1;
  transfer_of_op = calloc(g->nops + 1, sizeof *transfer_of_op);
  if (!transfer_of_op) return -1;
  transfers(g);
  int ref = -1;
  for (int r = 0; r < g->nranks; r++) {
    if (!g->ranks[r].present) continue;
    if (ref < 0) ref = r;
    x->offset_rel[r] = g->ranks[ref].clock_offset - g->ranks[r].clock_offset;
    if (cover_index(g, r)) return -1;
    gen_rank_expect *re = &x->ranks[x->nranks++];
    re->rank = r;
    /* steps in iteration order (range start, then number): their ops, their
     * anchors and windows (docs/metrics.md "Steps") */
    long order[64];
    size_t ns = 0;
    EACH_OF_RANK(rank_steps, r, i) {
      if (ns < 64 && g->steps[i].rank == r) order[ns++] = (long)i;
    }
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
      EACH_OF_RANK(rank_ops, r, k) {
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
        EACH_OF_RANK(cover.ops, block_of(t), i) {
          const gen_op *o = &g->ops[i];
          covered |= o->rank == r && o->lane == l && o->s <= t && o->e >= t + GEN_Q;
        }
        if (covered)
          re->lane_busy[l] += GEN_Q;
        else
          re->lane_idle[l][cell_cause(g, r, t, l)] += GEN_Q;
      }
    }
  }
  schedule_causes(g, x);
  /* collectives */
  x->colls = calloc(g->ncolls + 1, sizeof *x->colls);
  gen_rank_expect **of_rank = calloc((size_t)g->nranks + 1, sizeof *of_rank); /* present ranks */
  if (!x->colls || !of_rank) {
    free(of_rank);
    return -1;
  }
  for (int k = 0; k < x->nranks; k++)
    of_rank[x->ranks[k].rank] = &x->ranks[k];
  for (size_t c = 0; c < g->ncolls; c++) {
    const gen_coll *gc = &g->colls[c];
    if (!gc->record || gc->nmembers == 0) continue;
    int keep = 0;
    for (int m = 0; m < gc->nmembers; m++) {
      const gen_op *o = &g->ops[gc->member_op[m]];
      const gen_rank_expect *re = of_rank[o->rank];
      if (re && o->s >= re->totals.start && o->s < re->totals.end) keep = 1;
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
      if (o->s > last || (o->s == last && o->rank < last_rank)) {
        last = o->s;
        last_rank = o->rank;
      }
      if (o->e - o->s < transfer) transfer = o->e - o->s;
    }
    e->first_start = first - x->origin;
    e->skew = last - first;
    e->transfer = transfer;
    e->last_rank = last_rank;
    uint64_t bytes = gc->bytes; /* an all-to-all: the most any member sent */
    if (gc->op == STEPSCOPE_COLL_ALLTOALL) {
      bytes = 0;
      for (int m = 0; m < gc->nmembers; m++) {
        uint64_t mb = gc->member_bytes[m] ? gc->member_bytes[m] : gc->bytes;
        if (mb > bytes) bytes = mb;
      }
    }
    e->algbw = (double)bytes / (double)transfer;
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
      gen_rank_expect *re = of_rank[o->rank];
      if (re) {
        re->coll_wait += wait;
        re->coll_count++;
        if (o->rank == last_rank && straggling) re->coll_last++;
      }
      if (o->rank != last_rank) {
        int64_t late = last - o->s < wait ? last - o->s : wait;
        if (late > sched) caused += late - sched;
      }
    }
    if (straggling && last_rank >= 0 && of_rank[last_rank])
      of_rank[last_rank]->coll_caused += caused;
    if (!complete) x->colls_incomplete++;
  }
  free(of_rank);
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
          if (x->ranks[k].steps[s].device_latency > lmax)
            lmax = x->ranks[k].steps[s].device_latency;
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
  free(wait_end_of_op);
  wait_end_of_op = NULL;
  free(transfer_of_op);
  transfer_of_op = NULL;
  free_index(&rank_ops);
  free_index(&rank_steps);
  free_index(&rank_syncs);
  free_index(&rank_loads);
  free_index(&cover.ops);
  free(x->colls);
  x->colls = NULL;
  free(x->ranks);
  x->ranks = NULL;
  free(x->offset_rel);
  x->offset_rel = NULL;
}
