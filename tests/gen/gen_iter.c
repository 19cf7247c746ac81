/*
 * gen_iter.c — deterministic training-loop scenarios for the step-window
 * tests: per rank, a host thread that runs iterations (a ProfilerStep-like
 * range per iteration, ranges back to back) and a device that runs what
 * each iteration launched. The knobs are what decides a step's time in real
 * training: data loading on the host (the device idles), how many steps the
 * host may run ahead of the device (a sync on the work of step k - h), CUDA
 * graph replays (one launch, many kernels), a per-step all-reduce, and a
 * trace that ends in the middle of the last step. Every time is a multiple
 * of GEN_Q, so gen_expect computes the exact truth.
 */
#include <string.h>

#include "stepscope.h"
#include "stepscope_gen.h"

#define Q GEN_Q

void gen_iter_default(gen_iter *it) {
  memset(it, 0, sizeof *it);
  it->nranks = 1;
  it->nsteps = 6;
  it->kernels = 6;
  it->kernel_ns = 40 * Q;
  it->python_ns = 5 * Q;
}

int gen_iter_build(gen_run *g, gen_iter *it) {
  int n = it->nranks < 1 ? 1 : it->nranks > GEN_MAX_RANKS ? GEN_MAX_RANKS : it->nranks;
  int steps = it->nsteps < 1 ? 1 : it->nsteps > 60 ? 60 : it->nsteps;
  int kernels = it->kernels < 1 ? 1 : it->kernels;
  gen_init(g, n);
  it->device_work_ns = (int64_t)kernels * it->kernel_ns;
  int64_t end_step[64]; /* device end of each step's work (lane 0) */
  int64_t comm_start[GEN_MAX_RANKS], comm_launch[GEN_MAX_RANKS][2];
  int comm_op[64][GEN_MAX_RANKS];
  int64_t host[GEN_MAX_RANKS], lane0[GEN_MAX_RANKS], lane1[GEN_MAX_RANKS], lane2[GEN_MAX_RANKS];
  for (int r = 0; r < n; r++) {
    gen_rank *gr = &g->ranks[r];
    gr->nlanes = it->prefetch ? 3 : it->comm ? 2 : 1;
    gr->lane_name[0] = "compute";
    gr->lane_name[1] = "comm";
    gr->lane_name[2] = "copy";
    gr->clock_offset = 1000000000ll + 7000ll * r;
    host[r] = 1000 * Q + (int64_t)r * 3 * Q;
    lane0[r] = lane1[r] = lane2[r] = 0;
  }
  int64_t step_end[GEN_MAX_RANKS][64];
  int graph_id = 1;
  uint64_t seq = 0;
  for (int k = 0; k < steps; k++) {
    int64_t range_start[GEN_MAX_RANKS];
    for (int r = 0; r < n; r++) {
      range_start[r] = host[r];
      if (it->load_ns && gen_add_load(g, r, host[r], host[r] + it->load_ns)) return -1;
      host[r] += it->load_ns; /* data loading: nothing launched */
      if (it->prefetch) {     /* the batch's host-to-device copy, on its own stream */
        gen_op c;
        memset(&c, 0, sizeof c);
        c.rank = r;
        c.lane = 2;
        c.cls = GEN_MEMCPY;
        c.name = "memcpy";
        c.bytes = 1u << 20;
        c.has_launch = 1;
        c.launch_s = host[r] + Q;
        c.launch_e = host[r] + 2 * Q;
        host[r] = c.launch_e;
        c.s = c.launch_e + Q > lane2[r] ? c.launch_e + Q : lane2[r];
        c.e = c.s + 10 * Q;
        lane2[r] = c.e;
        if (gen_add_op(g, &c) < 0) return -1;
      }
      int64_t first_end = 0;
      for (int i = 0; i < kernels; i++) {
        gen_op o;
        memset(&o, 0, sizeof o);
        o.rank = r;
        o.lane = 0;
        o.cls = GEN_COMPUTE;
        o.name = i % 2 ? "gemm_bwd" : "gemm_fwd";
        o.has_launch = 1;
        o.coll = -1;
        if (it->graphs) {
          o.graph = graph_id;
          o.launch_s = host[r] + Q;
          o.launch_e = host[r] + 3 * Q;
        } else {
          o.launch_s = host[r] + Q;
          o.launch_e = host[r] + 3 * Q;
          host[r] = o.launch_e;
        }
        int64_t ready = o.launch_e + Q;
        o.s = ready > lane0[r] ? ready : lane0[r];
        o.e = o.s + it->kernel_ns;
        lane0[r] = o.e;
        if (gen_add_op(g, &o) < 0) return -1;
        if (i == kernels / 2 - 1 || (kernels == 1 && i == 0)) first_end = o.e;
        if (it->comm && (i == kernels / 2 - 1 || kernels == 1)) {
          /* the all-reduce is launched after this kernel */
          int64_t ls = (it->graphs ? o.launch_e : host[r]) + Q;
          comm_launch[r][0] = ls;
          comm_launch[r][1] = ls + 2 * Q;
          if (!it->graphs) host[r] = ls + 2 * Q;
          int64_t ready2 = first_end > comm_launch[r][1] + Q ? first_end : comm_launch[r][1] + Q;
          comm_start[r] = ready2 > lane1[r] ? ready2 : lane1[r];
        }
      }
      if (it->graphs) {
        host[r] += 3 * Q;
        graph_id++;
      }
      end_step[k] = lane0[r];
      (void)end_step;
    }
    if (it->comm) {
      /* members start at their own times and all end together */
      int64_t latest = 0;
      for (int r = 0; r < n; r++)
        if (comm_start[r] > latest) latest = comm_start[r];
      int64_t end = latest + 30 * Q;
      gen_coll c;
      memset(&c, 0, sizeof c);
      c.comm_id = 0xD0D0000000000001ull;
      c.seq = seq++;
      c.op = STEPSCOPE_COLL_ALLREDUCE;
      c.bytes = 8u << 20;
      c.comm_size = (uint32_t)n;
      c.group = "world";
      c.record = 1;
      for (int r = 0; r < n; r++) {
        gen_op o;
        memset(&o, 0, sizeof o);
        o.rank = r;
        o.lane = 1;
        o.cls = GEN_COMM;
        o.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
        o.has_launch = 1;
        o.launch_s = comm_launch[r][0];
        o.launch_e = comm_launch[r][1];
        o.s = comm_start[r];
        o.e = end;
        lane1[r] = end;
        int idx = gen_add_op(g, &o);
        if (idx < 0) return -1;
        comm_op[k][r] = idx;
        c.member_rank[c.nmembers] = r;
        c.member_comm_rank[c.nmembers] = (uint32_t)r;
        c.member_op[c.nmembers++] = idx;
      }
      if (gen_add_coll(g, &c) < 0) return -1;
    }
    (void)comm_op;
    for (int r = 0; r < n; r++) {
      int64_t done = lane0[r] > lane1[r] ? lane0[r] : lane1[r]; /* this step's device work */
      step_end[r][k] = done;
      host[r] += it->python_ns;
      /* the sync: wait for the work of step k - h */
      int back = k - it->host_ahead;
      if (back >= 0 && step_end[r][back] > host[r]) host[r] = step_end[r][back];
      if (gen_add_step(g, r, k, range_start[r], host[r])) return -1;
    }
  }
  if (it->cut_last) {
    /* the trace stops in the middle of the last step's device work: the
     * kernels that would end after that instant are not in it, and the
     * last range ends there */
    for (int r = 0; r < n; r++) {
      gen_step *last = NULL;
      for (size_t i = 0; i < g->nsteps; i++)
        if (g->steps[i].rank == r && g->steps[i].number == steps - 1) last = &g->steps[i];
      int64_t first = INT64_MAX, lastend = INT64_MIN;
      for (size_t i = 0; i < g->nops; i++) {
        const gen_op *o = &g->ops[i];
        if (o->rank != r || o->launch_s < last->s || o->launch_s >= last->e) continue;
        if (o->s < first) first = o->s;
        if (o->e > lastend) lastend = o->e;
      }
      int64_t stop = first + (lastend - first) / 2 / Q * Q;
      size_t keep = 0;
      for (size_t i = 0; i < g->nops; i++) {
        gen_op *o = &g->ops[i];
        if (o->rank == r && o->launch_s >= last->s && o->e > stop && o->coll < 0) continue;
        if (o->coll >= 0) /* the collective names its members by index */
          for (int m = 0; m < g->colls[o->coll].nmembers; m++)
            if (g->colls[o->coll].member_op[m] == (int)i)
              g->colls[o->coll].member_op[m] = (int)keep;
        g->ops[keep++] = *o;
      }
      g->nops = keep;
      if (stop > last->s) last->e = stop;
    }
  }
  return 0;
}
