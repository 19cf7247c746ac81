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
  int64_t host;                      /* host-thread cursor */
  int64_t lane[GEN_MAX_LANES];       /* lane cursors */
  int64_t step_first_launch;
  int64_t prev_step_end;
  int active;
} rank_state;

static const char *const compute_names[] = {"gemm_fwd", "gemm_bwd", "layernorm_fwd", "softmax",
                                            "gelu_bwd", "adamw_step"};

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

int gen_build(gen_run *g, const gen_scenario *sc) {
  uint64_t seed = sc->seed * 0x2545F4914F6CDD1Dull + 7;
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
    for (int l = 0; l < nl; l++) gr->lane_name[l] = l == comm_lane && sc->comm && nl > 1 ? "comm" : "compute";
    gr->cpu_backend = sc->cpu_backend == 1 || (sc->cpu_backend == 2 && r % 2 == 0);
    gr->clock_offset = 1000000000ll + (sc->clock_spread ? rnd(rs, 0, sc->clock_spread) : 0) + rnd(rs, 0, 999);
    gr->anchor_error = sc->comm && sc->anchor_error && r < active ? rnd(rs, -sc->anchor_error, sc->anchor_error) : 0;
    gr->stage = sc->pipeline ? (r < n / 2 ? 0 : 1) : -1;
    memset(&st[r], 0, sizeof st[r]);
    st[r].host = 1000 * Q + rnd(rs, 0, 50) * Q;
    for (int l = 0; l < nl; l++) st[r].lane[l] = st[r].host;
    st[r].active = r < active;
    st[r].prev_step_end = INT64_MIN;
  }
  if (sc->pipeline) {
    g->pp = 2;
    g->microbatches = 4;
  }
  if (sc->flops) {
    g->with_flops = 1;
    g->model_flops = 3.0e12;
    g->hardware_flops = 4.0e12;
    g->peak_flops = 989e12;
  }
  uint64_t world_comm = 0xC0FFEE0000000001ull, seq = 0;
  int nc_lanes = comm_lane ? nl - 1 : nl;
  for (int step = 0; step < sc->nsteps; step++) {
    for (int r = 0; r < n; r++) st[r].step_first_launch = INT64_MIN;
    for (int half = 0; half < 2; half++) {
      /* compute (and copies) for this half of the step */
      for (int r = 0; r < active; r++) {
        int nops = sc->ops_per_step / 2;
        for (int k = 0; k < nops && (sc->compute || sc->copies); k++) {
          int lane = (int)rnd(rs, 0, nc_lanes - 1);
          int cls = GEN_COMPUTE;
          if (sc->copies && (!sc->compute || rnd(rs, 0, 3) == 0)) cls = rnd(rs, 0, 1) ? GEN_MEMCPY : GEN_MEMSET;
          const char *name = cls == GEN_COMPUTE ? compute_names[rnd(rs, 0, 5)] : cls == GEN_MEMCPY ? "memcpy" : "memset";
          if (add_device_op(g, rs, &st[r], r, lane, cls, name, sc->overlap_same_lane) < 0) return -1;
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
      c.op = STEPSCOPE_COLL_ALLREDUCE;
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
        st[r].lane[comm_lane] = end;
      }
      if (gen_add_coll(g, &c) < 0) return -1;
      /* a comm kernel known by its name only, on GPU ranks */
      if (sc->name_only_nccl) {
        for (int r = 0; r < active; r++) {
          if (g->ranks[r].cpu_backend) continue;
          int idx = add_device_op(g, rs, &st[r], r, comm_lane, GEN_COMM, "ncclKernel_AllGather_RING_LL", 0);
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
            o.name = g->ranks[who[k]].cpu_backend ? (k ? "recv" : "send") : "ncclDevKernel_SendRecv";
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
      if (sc->overlap_steps) s -= rnd(rs, 5, 120) * Q; /* into the previous step's launches */
      else if (s < st[r].prev_step_end) s = st[r].prev_step_end;
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
