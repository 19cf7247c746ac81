/*
 * gen_random.c — builds random but realistic scenarios from a few knobs
 * (gen_scenario): per rank a host thread that launches ops one after another
 * (sometimes stalling, so the device waits for the CPU), device lanes that
 * run them in order after their launch (sometimes after a dependency gap,
 * sometimes nested or overlapping), collectives in the middle of each step
 * whose members start at different times on each rank and all end at one
 * instant, pipeline send/recv pairs, copies, sync records, step ranges
 * around each step's launches, and clocks seconds apart with anchor errors.
 * Everything is a multiple of GEN_Q. A splitmix64 generator keeps it
 * reproducible from the seed.
 */
#include <string.h>

#include "stepscope.h"
#include "stepscope_gen.h"

#define Q GEN_Q

static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int64_t rnd(uint64_t *s, int64_t lo, int64_t hi) { /* inclusive */
  return lo + (int64_t)(next_u64(s) % (uint64_t)(hi - lo + 1));
}

void gen_scenario_default(gen_scenario *s) {
  memset(s, 0, sizeof *s);
  s->seed = 1;
  s->nranks = 2;
  s->nlanes = 2;
  s->nsteps = 3;
  s->ops_per_step = 8;
  s->comm = 1;
  s->compute = 1;
}

typedef struct rank_state {
  int64_t host;                /* host-thread cursor */
  int64_t lane[GEN_MAX_LANES]; /* lane cursors */
  int64_t step_first_launch;
  int64_t prev_step_end;
  int active;
} rank_state;

static const char *const compute_names[] = {"gemm_fwd", "gemm_bwd", "layernorm_fwd",
                                            "softmax",  "gelu_bwd", "adamw_step"};

/* Host launch: advances the host cursor, returns launch [s, e). */
static void launch(uint64_t *rs, rank_state *st, int64_t *ls, int64_t *le) {
  int64_t stall = rnd(rs, 0, 9) == 0 ? rnd(rs, 20, 60) * Q : rnd(rs, 1, 4) * Q;
  *ls = st->host + stall;
  *le = *ls + rnd(rs, 1, 3) * Q;
  st->host = *le;
  if (st->step_first_launch == INT64_MIN) st->step_first_launch = *ls;
}

static int add_device_op(gen_run *g, uint64_t *rs, rank_state *st, int r, int lane, int cls,
                         const char *name, int overlap) {
  gen_op o;
  memset(&o, 0, sizeof o);
  o.rank = r;
  o.lane = lane;
  o.cls = cls;
  o.name = name;
  o.has_launch = 1;
  launch(rs, st, &o.launch_s, &o.launch_e);
  int64_t gap;
  switch (rnd(rs, 0, 3)) {
  case 0: gap = 0; break;
  case 1: gap = rnd(rs, 1, 9) * Q; break;
  default: gap = rnd(rs, 10, 80) * Q; break;
  }
  int64_t ready = o.launch_e + rnd(rs, 0, 3) * Q;
  int64_t free_at = st->lane[lane] + gap;
  o.s = ready > free_at ? ready : free_at;
  o.e = o.s + rnd(rs, 5, 60) * Q;
  o.bytes = cls == GEN_MEMCPY || cls == GEN_MEMSET ? (uint64_t)rnd(rs, 1, 64) << 20 : 0;
  st->lane[lane] = overlap && rnd(rs, 0, 5) == 0 ? o.s + (o.e - o.s) / 2 / Q * Q + Q : o.e;
  return gen_add_op(g, &o);
}

/* ---- a pipeline schedule (sc->pipeline_schedule) ----
 * The ranks are the p stages of one pipeline running m = 4 micro-batches in
 * 1F1B (or AFAB) order, each rank with a compute lane, a send lane and a
 * recv lane. Per item the host opens a "forward"/"backward" range and
 * launches a recv of its input (after the previous stage's item: its send
 * and this recv end together, a transfer after both started), one to three
 * compute ops (sometimes after a host stall: host gaps) and, unless it is
 * the last hop, the send of its output. Items run as soon as their input
 * exists (a stage's items are placed in dependency order); one stage is
 * slower than the others; each step ends with an all-reduce over all stages
 * (the drain reaches it) and an optimizer op. */
typedef struct pp_send {
  int64_t ls, le, start; /* launch and start of the send, -1: none yet */
} pp_send;

static int build_pipeline(gen_run *g, const gen_scenario *sc, uint64_t *rs) {
  int p = sc->nranks < 2 ? 2 : sc->nranks > 4 ? 4 : sc->nranks, m = 4;
  gen_init(g, p);
  g->pp = p;
  g->microbatches = m;
  rank_state st[4];
  int slow = (int)rnd(rs, 0, p - 1);
  uint64_t pair_seq[2][4] = {{0}};
  uint64_t world_seq = 0;
  for (int r = 0; r < p; r++) {
    gen_rank *gr = &g->ranks[r];
    gr->nlanes = 3;
    gr->lane_name[0] = "compute";
    gr->lane_name[1] = "pp send";
    gr->lane_name[2] = "pp recv";
    gr->cpu_backend = sc->cpu_backend == 1 || (sc->cpu_backend == 2 && r % 2 == 0);
    gr->clock_offset = 1000000000ll + rnd(rs, 0, 999);
    gr->stage = r;
    memset(&st[r], 0, sizeof st[r]);
    st[r].host = 1000 * Q + rnd(rs, 0, 20) * Q;
    for (int l = 0; l < 3; l++)
      st[r].lane[l] = st[r].host;
  }
  for (int step = 0; step < sc->nsteps; step++) {
    /* each stage's items: pass 0/1, micro-batch */
    int items[4][8][2], nit[4], next[4];
    for (int s = 0; s < p; s++) {
      int k = 0;
      if (sc->pipeline_schedule == 2) {
        for (int i = 0; i < m; i++)
          items[s][k][0] = 0, items[s][k++][1] = i;
        for (int i = 0; i < m; i++)
          items[s][k][0] = 1, items[s][k++][1] = i;
      } else {
        int warm = p - s - 1 < m ? p - s - 1 : m, f = 0, b = 0;
        for (; f < warm; f++)
          items[s][k][0] = 0, items[s][k++][1] = f;
        while (f < m) {
          items[s][k][0] = 0, items[s][k++][1] = f++;
          items[s][k][0] = 1, items[s][k++][1] = b++;
        }
        while (b < m)
          items[s][k][0] = 1, items[s][k++][1] = b++;
      }
      nit[s] = k;
      next[s] = 0;
    }
    pp_send sends[2][4][4]; /* [pass][from stage][mb] */
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 4; b++)
        for (int c = 0; c < 4; c++)
          sends[a][b][c].start = -1;
    int64_t step_start[4];
    for (int r = 0; r < p; r++)
      step_start[r] = st[r].host;
    for (int progress = 1; progress;) {
      progress = 0;
      for (int s = 0; s < p; s++) {
        while (next[s] < nit[s]) {
          int pass = items[s][next[s]][0], mb = items[s][next[s]][1];
          int from = pass == 0 ? s - 1 : s + 1; /* the stage whose output this item takes */
          int has_in = from >= 0 && from < p;
          if (has_in && sends[pass][from][mb].start < 0) break; /* input not produced yet */
          rank_state *R = &st[s];
          int64_t range_s = R->host;
          R->host += rnd(rs, 1, 3) * Q;
          int64_t ready = INT64_MIN;
          if (has_in) { /* the recv, and the pair's end */
            gen_op o;
            memset(&o, 0, sizeof o);
            o.rank = s;
            o.lane = 2;
            o.cls = GEN_COMM;
            o.name = g->ranks[s].cpu_backend ? "recv" : "ncclDevKernel_SendRecv";
            o.has_launch = 1;
            launch(rs, R, &o.launch_s, &o.launch_e);
            o.s = o.launch_e + rnd(rs, 0, 2) * Q;
            if (o.s < R->lane[2]) o.s = R->lane[2];
            pp_send *sd = &sends[pass][from][mb];
            int64_t both = o.s > sd->start ? o.s : sd->start;
            o.e = both + rnd(rs, 2, 6) * Q;
            R->lane[2] = o.e;
            ready = o.e;
            int ri = gen_add_op(g, &o);
            gen_op so = o;
            so.rank = from;
            so.lane = 1;
            so.name = g->ranks[from].cpu_backend ? "send" : "ncclDevKernel_SendRecv";
            so.launch_s = sd->ls;
            so.launch_e = sd->le;
            so.s = sd->start;
            int si = gen_add_op(g, &so);
            if (ri < 0 || si < 0) return -1;
            gen_coll c;
            memset(&c, 0, sizeof c);
            int dir = pass; /* one communicator per direction and pair */
            int lo = s < from ? s : from;
            c.comm_id = 0x7000 + (uint64_t)(dir * 16 + lo);
            c.seq = pair_seq[dir][lo]++;
            c.op = pass == 0 ? STEPSCOPE_COLL_SEND : STEPSCOPE_COLL_RECV;
            c.bytes = 1u << 20;
            c.comm_size = (uint32_t)p;
            c.flags = STEPSCOPE_COLL_F_P2P | STEPSCOPE_COLL_F_PIPELINE;
            c.group = "pp";
            c.record = 1;
            c.nmembers = 2;
            c.member_rank[0] = from;
            c.member_op[0] = si;
            c.member_comm_rank[0] = (uint32_t)from;
            c.member_rank[1] = s;
            c.member_op[1] = ri;
            c.member_comm_rank[1] = (uint32_t)s;
            if (gen_add_coll(g, &c) < 0) return -1;
          }
          int nops = (int)rnd(rs, 1, 3);
          int64_t done = R->lane[0];
          for (int k = 0; k < nops; k++) {
            gen_op o;
            memset(&o, 0, sizeof o);
            o.rank = s;
            o.lane = 0;
            o.cls = GEN_COMPUTE;
            o.name = pass ? "gemm_bwd" : "gemm_fwd";
            o.has_launch = 1;
            launch(rs, R, &o.launch_s, &o.launch_e);
            o.s = o.launch_e + rnd(rs, 0, 2) * Q;
            if (o.s < R->lane[0]) o.s = R->lane[0];
            if (k == 0 && ready > o.s) o.s = ready;
            o.e = o.s + (rnd(rs, 5, 30) + (s == slow ? 12 : 0)) * Q;
            R->lane[0] = done = o.e;
            if (gen_add_op(g, &o) < 0) return -1;
          }
          int to = pass == 0 ? s + 1 : s - 1;
          if (to >= 0 && to < p) { /* the send's launch; its op is written with the recv */
            pp_send *sd = &sends[pass][s][mb];
            launch(rs, R, &sd->ls, &sd->le);
            sd->start = sd->le > done ? sd->le : done;
            sd->start += rnd(rs, 0, 2) * Q;
          }
          if (gen_add_range(g, s, pass ? "backward" : "forward", mb, range_s, R->host + Q))
            return -1;
          R->host += 2 * Q;
          next[s]++;
          progress = 1;
        }
      }
    }
    /* the end-of-step all-reduce over all stages (members end together), then the optimizer */
    gen_coll c;
    memset(&c, 0, sizeof c);
    c.comm_id = 0xC0FFEE0000000002ull;
    c.seq = world_seq++;
    c.op = STEPSCOPE_COLL_ALLREDUCE;
    c.bytes = 16;
    c.comm_size = (uint32_t)p;
    c.group = "world";
    c.record = 1;
    int64_t start[4], ls[4], le[4], latest = INT64_MIN;
    for (int r = 0; r < p; r++) {
      launch(rs, &st[r], &ls[r], &le[r]);
      start[r] = le[r] > st[r].lane[0] ? le[r] : st[r].lane[0];
      if (start[r] > latest) latest = start[r];
    }
    int64_t end = latest + rnd(rs, 2, 6) * Q;
    for (int r = 0; r < p; r++) {
      gen_op o;
      memset(&o, 0, sizeof o);
      o.rank = r;
      o.lane = 0;
      o.cls = GEN_COMM;
      o.name = g->ranks[r].cpu_backend ? "allreduce" : "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
      o.has_launch = 1;
      o.launch_s = ls[r];
      o.launch_e = le[r];
      o.s = start[r];
      o.e = end;
      int idx = gen_add_op(g, &o);
      if (idx < 0) return -1;
      c.member_rank[c.nmembers] = r;
      c.member_comm_rank[c.nmembers] = (uint32_t)r;
      c.member_op[c.nmembers++] = idx;
      st[r].lane[0] = end;
      gen_op opt;
      memset(&opt, 0, sizeof opt);
      opt.rank = r;
      opt.lane = 0;
      opt.cls = GEN_COMPUTE;
      opt.name = "adamw_step";
      opt.has_launch = 1;
      launch(rs, &st[r], &opt.launch_s, &opt.launch_e);
      opt.s = opt.launch_e > end ? opt.launch_e : end;
      opt.s += Q;
      opt.e = opt.s + rnd(rs, 3, 8) * Q;
      st[r].lane[0] = opt.e;
      if (gen_add_op(g, &opt) < 0) return -1;
    }
    if (gen_add_coll(g, &c) < 0) return -1;
    for (int r = 0; r < p; r++) {
      int64_t e = st[r].host + rnd(rs, 1, 3) * Q;
      if (gen_add_step(g, r, step, step_start[r], e)) return -1;
      /* the host waits for the step's end (it reads the loss) */
      int64_t dev_done = st[r].lane[0] > st[r].lane[1] ? st[r].lane[0] : st[r].lane[1];
      st[r].host = (e > dev_done ? e : dev_done) + rnd(rs, 1, 10) * Q;
      for (int l = 0; l < 3; l++)
        if (st[r].lane[l] < st[r].host) st[r].lane[l] = st[r].host;
    }
  }
  return 0;
}

int gen_build(gen_run *g, const gen_scenario *sc) {
  uint64_t seed = sc->seed * 0x2545F4914F6CDD1Dull + 7;
  if (sc->pipeline_schedule) return build_pipeline(g, sc, &seed);
  uint64_t *rs = &seed;
  int n = sc->nranks;
  gen_init(g, n);
  int nl = sc->nlanes < 1 ? 1 : sc->nlanes > GEN_MAX_LANES ? GEN_MAX_LANES : sc->nlanes;
  int comm_lane = sc->comm && nl > 1 ? nl - 1 : 0;
  rank_state st[GEN_MAX_RANKS];
  int active = sc->empty_rank ? n - 1 : n;
  for (int r = 0; r < n; r++) {
    gen_rank *gr = &g->ranks[r];
    gr->nlanes = nl;
    for (int l = 0; l < nl; l++)
      gr->lane_name[l] = l == comm_lane && sc->comm && nl > 1 ? "comm" : "compute";
    gr->cpu_backend = sc->cpu_backend == 1 || (sc->cpu_backend == 2 && r % 2 == 0);
    gr->clock_offset =
        1000000000ll + (sc->clock_spread ? rnd(rs, 0, sc->clock_spread) : 0) + rnd(rs, 0, 999);
    gr->anchor_error = sc->comm && sc->anchor_error && r < active
                           ? rnd(rs, -sc->anchor_error, sc->anchor_error)
                           : 0;
    gr->stage = sc->pipeline ? (r < n / 2 ? 0 : 1) : -1;
    memset(&st[r], 0, sizeof st[r]);
    st[r].host = 1000 * Q + rnd(rs, 0, 50) * Q;
    for (int l = 0; l < nl; l++)
      st[r].lane[l] = st[r].host;
    st[r].active = r < active;
    st[r].prev_step_end = INT64_MIN;
  }
  if (sc->pipeline) {
    g->pp = 2;
    g->microbatches = 4;
  }
  if (sc->flops) {
    g->with_flops = 1;
    g->model_flops = 3.0e10; /* MFU of a few per cent on the generated steps (a few ms) */
    g->hardware_flops = 4.0e10;
    g->peak_flops = 989e12;
  }
  uint64_t world_comm = 0xC0FFEE0000000001ull, seq = 0;
  int nc_lanes = comm_lane ? nl - 1 : nl;
  for (int step = 0; step < sc->nsteps; step++) {
    for (int r = 0; r < n; r++)
      st[r].step_first_launch = INT64_MIN;
    for (int half = 0; half < 2; half++) {
      /* compute (and copies) for this half of the step */
      for (int r = 0; r < active; r++) {
        int nops = sc->ops_per_step / 2;
        for (int k = 0; k < nops && (sc->compute || sc->copies); k++) {
          int lane = (int)rnd(rs, 0, nc_lanes - 1);
          int cls = GEN_COMPUTE;
          if (sc->copies && (!sc->compute || rnd(rs, 0, 3) == 0))
            cls = rnd(rs, 0, 1) ? GEN_MEMCPY : GEN_MEMSET;
          const char *name = cls == GEN_COMPUTE  ? compute_names[rnd(rs, 0, 5)]
                             : cls == GEN_MEMCPY ? "memcpy"
                                                 : "memset";
          if (add_device_op(g, rs, &st[r], r, lane, cls, name, sc->overlap_same_lane) < 0)
            return -1;
        }
        if (sc->syncs && rnd(rs, 0, 1)) {
          int lane = (int)rnd(rs, 0, nl - 1);
          int64_t s = st[r].lane[lane] + rnd(rs, 0, 20) * Q;
          if (gen_add_sync(g, r, lane, s, s + rnd(rs, 5, 40) * Q)) return -1;
        }
      }
      if (half == 1 || !sc->comm) continue;
      /* a collective over the active ranks (maybe minus one) in mid-step */
      int drop = sc->missing_member && step % 2 == 1 && active > 2 ? active - 1 : -1;
      gen_coll c;
      memset(&c, 0, sizeof c);
      c.comm_id = world_comm;
      c.seq = seq++;
      c.op = sc->alltoall ? STEPSCOPE_COLL_ALLTOALL : STEPSCOPE_COLL_ALLREDUCE;
      c.bytes = (uint64_t)rnd(rs, 1, 32) << 20;
      c.comm_size = (uint32_t)active;
      c.group = "world";
      c.record = 1;
      int64_t start[GEN_MAX_RANKS], latest = INT64_MIN;
      int64_t ls[GEN_MAX_RANKS], le[GEN_MAX_RANKS];
      for (int r = 0; r < active; r++) {
        if (r == drop) continue;
        launch(rs, &st[r], &ls[r], &le[r]);
        int64_t ready = le[r] + rnd(rs, 0, 3) * Q;
        int64_t free_at = st[r].lane[comm_lane] + rnd(rs, 0, 5) * Q;
        start[r] = ready > free_at ? ready : free_at;
        if (start[r] > latest) latest = start[r];
      }
      int64_t end = latest + rnd(rs, 10, 50) * Q;
      for (int r = 0; r < active; r++) {
        if (r == drop) continue;
        gen_op o;
        memset(&o, 0, sizeof o);
        o.rank = r;
        o.lane = comm_lane;
        o.cls = GEN_COMM;
        o.name = g->ranks[r].cpu_backend ? "allreduce" : "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
        if (sc->alltoall) /* uneven splits: each member sends its own amount */
          o.name = g->ranks[r].cpu_backend ? "alltoallv" : "ncclDevKernel_SendRecv";
        o.has_launch = 1;
        o.launch_s = ls[r];
        o.launch_e = le[r];
        o.s = start[r];
        o.e = end;
        int idx = gen_add_op(g, &o);
        if (idx < 0) return -1;
        if (sc->alltoall) c.member_bytes[c.nmembers] = (uint64_t)rnd(rs, 1, 32) << 16;
        c.member_rank[c.nmembers] = r;
        c.member_comm_rank[c.nmembers] = (uint32_t)r;
        c.member_op[c.nmembers++] = idx;
        st[r].lane[comm_lane] = end;
      }
      if (gen_add_coll(g, &c) < 0) return -1;
      /* a comm kernel known by its name only, on GPU ranks */
      if (sc->name_only_nccl) {
        for (int r = 0; r < active; r++) {
          if (g->ranks[r].cpu_backend) continue;
          int idx = add_device_op(g, rs, &st[r], r, comm_lane, GEN_COMM,
                                  "ncclKernel_AllGather_RING_LL", 0);
          if (idx < 0) return -1;
          gen_coll nc;
          memset(&nc, 0, sizeof nc);
          nc.record = 0;
          nc.nmembers = 1;
          nc.member_op[0] = idx;
          nc.member_rank[0] = r;
          if (gen_add_coll(g, &nc) < 0) return -1;
        }
      }
      /* pipeline send/recv: stage 0 rank i -> stage 1 rank i + n/2 */
      if (sc->pipeline) {
        for (int i = 0; i < n / 2; i++) {
          int a = i, b = i + n / 2;
          if (!st[a].active || !st[b].active) continue;
          gen_coll p;
          memset(&p, 0, sizeof p);
          p.comm_id = 0x5000 + (uint64_t)i;
          p.seq = (uint64_t)step;
          p.op = STEPSCOPE_COLL_SEND;
          p.bytes = 1u << 20;
          p.comm_size = (uint32_t)n; /* a pair of a bigger pp communicator: complete with two */
          p.flags = STEPSCOPE_COLL_F_P2P | STEPSCOPE_COLL_F_PIPELINE;
          p.group = "pp";
          p.record = 1;
          int64_t s2[2], l2s[2], l2e[2];
          int who[2] = {a, b};
          for (int k = 0; k < 2; k++) {
            launch(rs, &st[who[k]], &l2s[k], &l2e[k]);
            int64_t ready = l2e[k] + rnd(rs, 0, 3) * Q;
            int64_t free_at = st[who[k]].lane[comm_lane] + rnd(rs, 0, 5) * Q;
            s2[k] = ready > free_at ? ready : free_at;
          }
          int64_t e2 = (s2[0] > s2[1] ? s2[0] : s2[1]) + rnd(rs, 5, 20) * Q;
          for (int k = 0; k < 2; k++) {
            gen_op o;
            memset(&o, 0, sizeof o);
            o.rank = who[k];
            o.lane = comm_lane;
            o.cls = GEN_COMM;
            o.name =
                g->ranks[who[k]].cpu_backend ? (k ? "recv" : "send") : "ncclDevKernel_SendRecv";
            o.has_launch = 1;
            o.launch_s = l2s[k];
            o.launch_e = l2e[k];
            o.s = s2[k];
            o.e = e2;
            int idx = gen_add_op(g, &o);
            if (idx < 0) return -1;
            p.member_rank[k] = who[k];
            p.member_comm_rank[k] = (uint32_t)k;
            p.member_op[k] = idx;
            st[who[k]].lane[comm_lane] = e2;
          }
          p.nmembers = 2;
          if (gen_add_coll(g, &p) < 0) return -1;
        }
      }
    }
    /* step ranges around this step's launches */
    for (int r = 0; r < active; r++) {
      if (st[r].step_first_launch == INT64_MIN) continue;
      int64_t s = st[r].step_first_launch - rnd(rs, 0, 5) * Q;
      if (sc->overlap_steps)
        s -= rnd(rs, 5, 120) * Q; /* into the previous step's launches */
      else if (s < st[r].prev_step_end)
        s = st[r].prev_step_end;
      int64_t e = st[r].host + rnd(rs, 1, 5) * Q;
      st[r].prev_step_end = e;
      if (gen_add_step(g, r, step, s, e)) return -1;
      st[r].host = e + rnd(rs, 0, 20) * Q;
    }
  }
  if (sc->overlap_steps >= 2) { /* a step range around all the others, per rank */
    size_t before = g->nsteps;
    for (int r = 0; r < n; r++) {
      int64_t s = INT64_MAX, e = INT64_MIN;
      for (size_t i = 0; i < before; i++) {
        if (g->steps[i].rank != r) continue;
        if (g->steps[i].s < s) s = g->steps[i].s;
        if (g->steps[i].e > e) e = g->steps[i].e;
      }
      if (s < e && gen_add_step(g, r, sc->nsteps, s - Q, e)) return -1;
    }
  }
  return 0;
}
