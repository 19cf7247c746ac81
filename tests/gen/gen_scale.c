/*
 * gen_scale.c — generated runs of thousands of ranks, fast (`stepscope-gen OUT --scale`):
 * a TP x PP x DP layout with a GPipe-style (all-forward, all-backward) pipeline, clock
 * offsets, per-kernel jitter and straggler ranks, written rank by rank on a few threads
 * without ever holding the run in memory.
 *
 * The random scenarios (gen_random.c) build the whole run and compute every metric by brute
 * force, which is what makes them exact and also what limits them to 64 ranks. Here each
 * rank's records follow from closed forms of (seed, rank, step, slot, kernel), so a rank is
 * written alone and the time is linear in events. The truths that hold by construction, and
 * that the summary states: every step lasts `step_ns`; the collectives' members all end at one
 * instant (the slot's bound: the slowest possible arrival plus the transfer), so only the
 * stragglers' groups wait longer than the jitter; the pipeline's stages idle in the schedule's
 * bubble, (P - 1) of M + P - 1 slots per pass. With `--waits` (gen_scale_waits.c) the stages'
 * forwards and backwards follow the schedule's dependencies instead of the lockstep slots
 * below, so receives wait on late sends; the rest of the step is the same.
 *
 * A step on rank r (tp index r % T, stage (r / T) % P, dp index r / (T P)), true time:
 *   2 (M + P - 1) slots of slot_ns; the stage works in slots p + m (forward, micro-batch m)
 *   and M + P - 1 + (P - 1 - p) + m (backward);
 *   a working slot: K compute kernels on lane 0 (each base + jitter, plus the straggler's
 *   extra), then a TP all-reduce on lane 1 (T > 1) ending at the slot's bound, then a
 *   pipeline send to the next stage (forward) or the previous one (backward) ending at the
 *   slot's end; every kernel has its launch call on the host thread just before it;
 *   after the last slot: a DP gradient all-reduce (DP > 1) and a world loss all-reduce
 *   (members arrive when their stage is done: the pipeline's drain).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "stepscope.h"
#include "stepscope_gen.h"

#define Q            GEN_Q
#define KERNEL_NS    GEN_SCALE_KERNEL_NS
#define JITTER_Q     GEN_SCALE_JITTER_Q
#define TRANSFER_NS  GEN_SCALE_TRANSFER_NS
#define P2P_NS       GEN_SCALE_P2P_NS
#define RT_BASE      1700000000000000000ll
#define LANE_COMPUTE 7u
#define LANE_COMM    8u
#define LANE_SEND    9u
#define LANE_RECV    10u

void gen_scale_default(gen_scale *s) {
  memset(s, 0, sizeof *s);
  s->seed = 1;
  s->nranks = 64;
  s->events_per_rank = 2000;
  s->nsteps = 10;
  s->stragglers = 2;
  s->clock_spread = 2000000000; /* 2 s */
  s->straggle_ns = 200 * Q;
  s->threads = 2;
}

static uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t hash4(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  return mix(seed ^ mix(a ^ mix(b ^ mix(c))));
}

int gen_scale_layout(gen_scale *s) {
  if (s->nranks < 1 || s->nsteps < 1 || s->events_per_rank < 1) return -1;
  if (s->tp < 1) s->tp = s->nranks % 8 == 0 ? 8 : 1;
  if (s->pp < 1) s->pp = s->nranks % (s->tp * 4) == 0 ? 4 : 1;
  if (s->nranks % (s->tp * s->pp)) return -1;
  if (s->microbatches < 1) s->microbatches = s->pp > 1 ? 2 * s->pp : 1;
  s->dp = s->nranks / (s->tp * s->pp);
  /* events per working slot: K kernels and K launches, the TP all-reduce (kernel, launch,
   * record), the send and the receive (kernel, launch, record each) */
  int64_t slots = 2 * (int64_t)s->microbatches * s->nsteps;
  int64_t per_slot = s->events_per_rank / (slots ? slots : 1);
  int64_t fixed = (s->tp > 1 ? 3 : 0) + (s->pp > 1 ? 6 : 0) + (s->waits ? 1 : 0);
  s->kernels_per_slot = (int)((per_slot - fixed) / 2);
  if (s->kernels_per_slot < 1) s->kernels_per_slot = 1;
  if (s->stragglers > s->nranks) s->stragglers = s->nranks;
  int64_t kmax = KERNEL_NS + JITTER_Q * Q;
  s->slot_ns = 4 * Q + (int64_t)s->kernels_per_slot * kmax + (s->stragglers ? s->straggle_ns : 0) +
               (s->tp > 1 ? TRANSFER_NS : 0) + (s->pp > 1 ? P2P_NS : 0) + 4 * Q;
  int64_t nslots = 2 * ((int64_t)s->microbatches + s->pp - 1);
  s->step_ns = nslots * s->slot_ns + 2 * (TRANSFER_NS + 10 * Q) + 20 * Q;
  return 0;
}

int gen_scale_is_straggler(const gen_scale *s, int r) {
  /* spread over the run: ranks (k + 1) * N / (S + 1), k < S */
  for (int k = 0; k < s->stragglers; k++)
    if (r == (int)((int64_t)(k + 1) * s->nranks / (s->stragglers + 1))) return k + 1;
  return 0;
}

typedef struct rank_writer {
  const gen_scale *s;
  stepscope_writer *w;
  int r, tp_idx, stage, dp_idx;
  uint64_t off, corr, thread, events;
  uint32_t s_kernel[4], s_launch, s_ar, s_send, s_world, s_dp, s_tp, s_pp, s_step, s_dom, s_forward,
      s_backward;
  int rc;
} rank_writer;

static void emit(rank_writer *rw, const stepscope_record *rec) {
  if (stepscope_write(rw->w, rec)) rw->rc = -1;
  rw->events++;
}

/* A kernel on `stream` at true [t0, t1) with its launch call just before (or --launch-lead-us
 * before); returns its correlation id. */
static uint64_t kernel(rank_writer *rw, uint64_t stream, uint32_t name, int64_t t0, int64_t t1) {
  uint64_t corr = ++rw->corr;
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_API;
  int64_t lead = rw->s->launch_lead > Q ? rw->s->launch_lead : Q;
  rec.u.api.start_ns = (uint64_t)(t0 - lead - Q) + rw->off;
  rec.u.api.end_ns = (uint64_t)(t0 - lead) + rw->off;
  rec.u.api.correlation_id = corr;
  rec.u.api.thread = rw->thread;
  rec.u.api.name = rw->s_launch;
  rec.u.api.api_kind = STEPSCOPE_API_RUNTIME;
  emit(rw, &rec);
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_KERNEL;
  rec.u.kernel.start_ns = (uint64_t)t0 + rw->off;
  rec.u.kernel.end_ns = (uint64_t)t1 + rw->off;
  rec.u.kernel.correlation_id = corr;
  rec.u.kernel.stream = stream;
  rec.u.kernel.name = name;
  rec.u.kernel.device = (uint32_t)(rw->r % 8);
  emit(rw, &rec);
  return corr;
}

/* A collective's member: its kernel on the comm lane at [t0, t1) and its record. */
static void collective(rank_writer *rw, uint64_t stream, uint32_t kname, uint64_t comm_id,
                       uint64_t seq, uint32_t op, uint32_t flags, uint32_t comm_rank,
                       uint32_t comm_size, uint32_t group, int64_t t0, int64_t t1) {
  uint64_t corr = kernel(rw, stream, kname, t0, t1);
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_COLLECTIVE;
  stepscope_collective *x = &rec.u.collective;
  x->start_ns = (uint64_t)t0 + rw->off;
  x->end_ns = (uint64_t)t1 + rw->off;
  x->comm_id = comm_id;
  x->seq = seq;
  x->bytes = 1u << 22;
  x->count = x->bytes / 4;
  x->datatype = STEPSCOPE_DT_FLOAT32;
  x->stream = stream;
  x->correlation_id = corr;
  x->op = op;
  x->peer = -1;
  x->comm_rank = comm_rank;
  x->comm_size = comm_size;
  x->flags = flags | STEPSCOPE_COLL_F_GPU_TIMED;
  x->name = group;
  emit(rw, &rec);
}

static void header_records(rank_writer *rw) {
  stepscope_record rec;
  for (int k = 0; k < 2; k++) { /* clock anchors at true 0 and 1 s */
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_CLOCK_ANCHOR;
    uint64_t t = (uint64_t)k * 1000000000ull;
    rec.u.clock_anchor.trace_ns = t + rw->off;
    rec.u.clock_anchor.monotonic_ns = t + rw->off;
    rec.u.clock_anchor.realtime_ns = (uint64_t)RT_BASE + t;
    emit(rw, &rec);
  }
  const char *names[4] = {"compute", "nccl", "p2p send", "p2p recv"};
  for (int l = 0; l < 4; l++) {
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_STREAM;
    rec.u.stream.stream = LANE_COMPUTE + (uint64_t)l;
    rec.u.stream.stream_kind = STEPSCOPE_STREAM_GPU;
    rec.u.stream.device = (uint32_t)(rw->r % 8);
    rec.u.stream.name = stepscope_intern(rw->w, names[l]);
    emit(rw, &rec);
  }
}

static void metadata(rank_writer *rw) {
  const gen_scale *s = rw->s;
  char json[512];
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_METADATA;
  snprintf(json, sizeof json,
           "{\"world\":%d,\"dp\":%d,\"tp\":%d,\"pp\":%d,\"cp\":1,\"rank\":%d,\"pp_rank\":%d,"
           "\"tp_rank\":%d,\"dp_rank\":%d}",
           s->nranks, s->dp, s->tp, s->pp, rw->r, rw->stage, rw->tp_idx, rw->dp_idx);
  rec.u.metadata = (stepscope_metadata){"layout", json};
  emit(rw, &rec);
  if (s->pp > 1) {
    snprintf(json, sizeof json,
             "{\"name\":\"%s\",\"stages\":%d,\"microbatches\":%d,\"virtual_stages\":1}",
             s->waits && s->one_f_one_b ? "1f1b" : "afab", s->pp, s->microbatches);
    rec.u.metadata = (stepscope_metadata){"schedule", json};
    emit(rw, &rec);
  }
}

int64_t gen_scale_kernel_ns(const gen_scale *s, int r, int64_t step, int slot_no, int k) {
  int which = gen_scale_is_straggler(s, r);
  int64_t late = which && s->straggle_uneven ? s->straggle_ns * which / s->stragglers
                 : which                     ? s->straggle_ns
                                             : 0;
  int64_t extra = late / s->kernels_per_slot / Q * Q;
  uint64_t h = hash4(s->seed, (uint64_t)r, (uint64_t)step, (uint64_t)slot_no * 65536 + k);
  return KERNEL_NS + (int64_t)(h % (JITTER_Q + 1)) * Q + extra;
}

/* A pipeline transfer's member on this rank, with the neighbour stage `peer`: the forward
 * (activations) or backward (gradients) pair's communicator, numbered by micro-batch. */
static void transfer(rank_writer *rw, uint64_t lane, uint32_t op, int64_t step, int forward, int mb,
                     int peer, int64_t t0, int64_t t1) {
  const gen_scale *s = rw->s;
  uint64_t seq = (uint64_t)step * 1024 + (uint64_t)(forward ? 0 : 512) + (uint64_t)mb;
  int lo = peer < rw->stage ? peer : rw->stage;
  uint64_t pair = (uint64_t)(rw->dp_idx * s->pp + lo) * (uint64_t)s->tp + (uint64_t)rw->tp_idx;
  uint64_t comm = (forward ? 0x7200000000000000ull : 0x7300000000000000ull) | pair;
  collective(rw, lane, rw->s_send, comm, seq, op, STEPSCOPE_COLL_F_P2P | STEPSCOPE_COLL_F_PIPELINE,
             (uint32_t)rw->stage, (uint32_t)s->pp, rw->s_pp, t0, t1);
}

/* A forward or backward of micro-batch mb starting at t: K compute kernels from t + 4 Q, the TP
 * all-reduce (T > 1) until tp_end, the send to the next stage (forward) or the previous one
 * (backward) over [send_t0, send_t1) (none when send_t0 is INT64_MIN). Returns where the
 * rank's compute ended. */
static int64_t work(rank_writer *rw, int64_t step, int slot_no, int64_t t, int forward, int mb,
                    int64_t tp_end, int64_t send_t0, int64_t send_t1) {
  const gen_scale *s = rw->s;
  int64_t cur = t + 4 * Q;
  for (int k = 0; k < s->kernels_per_slot; k++) {
    int64_t d = gen_scale_kernel_ns(s, rw->r, step, slot_no, k);
    kernel(rw, LANE_COMPUTE, rw->s_kernel[(k + !forward * 2) % 4], cur, cur + d);
    cur += d;
  }
  uint64_t seq = (uint64_t)step * 1024 + (uint64_t)(forward ? 0 : 512) + (uint64_t)mb;
  if (s->tp > 1) { /* TP group: same stage and dp index */
    uint64_t comm = 0x7100000000000000ull | (uint64_t)(rw->r / s->tp);
    collective(rw, LANE_COMM, rw->s_ar, comm, seq, STEPSCOPE_COLL_ALLREDUCE, 0,
               (uint32_t)rw->tp_idx, (uint32_t)s->tp, rw->s_tp, cur, tp_end);
  }
  if (send_t0 != INT64_MIN)
    transfer(rw, LANE_SEND, STEPSCOPE_COLL_SEND, step, forward, mb,
             forward ? rw->stage + 1 : rw->stage - 1, send_t0, send_t1);
  return cur;
}

/* The latest a lockstep slot's compute can end (every rank's kernels at their longest). */
static int64_t slot_bound(const gen_scale *s, int64_t t) {
  return t + 4 * Q + (int64_t)s->kernels_per_slot * (KERNEL_NS + JITTER_Q * Q) +
         (s->stragglers ? s->straggle_ns : 0);
}

/* One working lockstep slot of the rank: compute, TP all-reduce ending at the slot's bound,
 * pipeline send ending at the slot's end (none from the last stage forward, the first one
 * backward). */
static void slot(rank_writer *rw, int64_t step, int slot_no, int64_t t, int forward, int mb) {
  const gen_scale *s = rw->s;
  int64_t bound = slot_bound(s, t), tp_end = bound + TRANSFER_NS;
  if (s->tp > 1) bound += TRANSFER_NS;
  int to = forward ? rw->stage + 1 : rw->stage - 1;
  int sends = s->pp > 1 && to >= 0 && to < s->pp;
  work(rw, step, slot_no, t, forward, mb, tp_end, sends ? bound + Q : INT64_MIN,
       bound + Q + P2P_NS);
}

/* The receiving side of the sends into this rank's lockstep slot: the member on the next stage
 * (forward) or the previous one (backward), at the same times as the sender's (the op of a
 * send: nothing waits). */
static void receive(rank_writer *rw, int64_t step, int64_t t_sender, int forward, int mb) {
  const gen_scale *s = rw->s;
  int from = forward ? rw->stage - 1 : rw->stage + 1;
  if (from < 0 || from >= s->pp) return;
  int64_t bound = slot_bound(s, t_sender) + (s->tp > 1 ? TRANSFER_NS : 0);
  transfer(rw, LANE_RECV, STEPSCOPE_COLL_SEND, step, forward, mb, from, bound + Q,
           bound + Q + P2P_NS);
}

/* A forward or backward with waits (gen_scale_waits.c): its input's receive, posted when the
 * stage was ready for it and ending when the sender's transfer did; its host range (`forward`
 * or `backward`, the micro-batch in its args, for the bubble's causes); its work. */
static void item(rank_writer *rw, int64_t step, const gen_scale_item *it) {
  const gen_scale *s = rw->s;
  if (it->recv_post != INT64_MIN)
    transfer(rw, LANE_RECV, STEPSCOPE_COLL_RECV, step, it->forward, it->mb,
             it->forward ? rw->stage - 1 : rw->stage + 1, it->recv_post, it->recv_end);
  int slot_no = it->forward ? it->mb : s->microbatches + it->mb;
  int64_t compute_end = it->start + 4 * Q;
  for (int k = 0; k < s->kernels_per_slot; k++)
    compute_end += gen_scale_kernel_ns(s, rw->r, step, slot_no, k);
  char args[64];
  snprintf(args, sizeof args, "{\"microbatch\":%d,\"stage\":%d}", it->mb, rw->stage);
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_RANGE;
  rec.u.range.start_ns = (uint64_t)(it->start - rw->s->launch_lead) + rw->off;
  rec.u.range.end_ns = (uint64_t)(compute_end - rw->s->launch_lead) + rw->off;
  rec.u.range.thread = rw->thread;
  rec.u.range.name = it->forward ? rw->s_forward : rw->s_backward;
  rec.u.range.domain = rw->s_dom;
  rec.u.range.args = stepscope_intern(rw->w, args);
  emit(rw, &rec);
  work(rw, step, slot_no, it->start, it->forward, it->mb, it->end, it->send_start, it->send_end);
}

/* Step n of the rank: its step range, its stage's forwards and backwards (lockstep slots, or
 * the pipeline's timelines `pipe` with waits), the world's loss all-reduce and the DP gradient
 * all-reduce. */
static void step(rank_writer *rw, int64_t n, const gen_scale_pipe *pipe) {
  const gen_scale *s = rw->s;
  int64_t t0 = (int64_t)1000000 + n * s->step_ns; /* true time */
  int M = s->microbatches, P = s->pp, p = rw->stage;
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_RANGE;
  rec.u.range.start_ns = (uint64_t)(t0 - s->launch_lead) + rw->off;
  rec.u.range.end_ns = (uint64_t)(t0 + s->step_ns - s->launch_lead) + rw->off;
  rec.u.range.thread = rw->thread;
  rec.u.range.name = rw->s_step;
  rec.u.range.domain = rw->s_dom;
  rec.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64;
  rec.u.range.payload = (uint64_t)n;
  emit(rw, &rec);
  int nslots = 2 * (M + P - 1);
  for (int sl = 0; sl < nslots && !pipe; sl++) {
    int64_t t = t0 + (int64_t)sl * s->slot_ns;
    int forward = sl < M + P - 1;
    int m = forward ? sl - p : sl - (M + P - 1) - (P - 1 - p);
    /* the receive posted for this slot's input: sent by the neighbour in the slot before */
    int mr = forward ? sl - 1 - (p - 1) : sl - 1 - (M + P - 1) - (P - 1 - (p + 1));
    if (P > 1 && sl > 0 && mr >= 0 && mr < M && (forward ? sl - 1 < M + P - 1 : 1))
      receive(rw, n, t - s->slot_ns, forward, mr);
    if (m >= 0 && m < M) slot(rw, n, sl, t, forward, m);
  }
  int64_t done = t0 + (int64_t)nslots * s->slot_ns;
  /* the stage's own work ends after its last backward slot (stage 0 last) */
  int64_t arrive = t0 + (int64_t)(M + P - 1 + (P - 1 - p) + M) * s->slot_ns + 2 * Q;
  if (pipe) {
    const gen_scale_item *its = gen_scale_pipe_items(s, pipe, n, p);
    for (int k = 0; k < 2 * M; k++)
      item(rw, n, &its[k]);
    arrive = pipe->stage_done[n * P + p] + 2 * Q;
  }
  /* the world's loss all-reduce first: its members arrive as their stage ends (the drain) */
  int64_t end = done + TRANSFER_NS;
  collective(rw, LANE_COMM, rw->s_ar, 0x7500000000000000ull, (uint64_t)n, STEPSCOPE_COLL_ALLREDUCE,
             0, (uint32_t)rw->r, (uint32_t)s->nranks, rw->s_world, arrive, end);
  if (s->dp > 1) {
    uint64_t comm = 0x7400000000000000ull | (uint64_t)(p * s->tp + rw->tp_idx);
    collective(rw, LANE_COMM, rw->s_ar, comm, (uint64_t)n, STEPSCOPE_COLL_ALLREDUCE, 0,
               (uint32_t)rw->dp_idx, (uint32_t)s->dp, rw->s_dp, end + Q,
               end + 11 * Q + TRANSFER_NS);
  }
}

static int write_rank(const gen_scale *s, const char *dir, int r, const gen_scale_pipe *pipe,
                      uint64_t *events, char *errbuf, size_t errlen) {
  char path[4096], host[64];
  snprintf(path, sizeof path, "%s/rank-%05d.trace.zst", dir, r);
  snprintf(host, sizeof host, "gen-host-%d", r / 8);
  rank_writer rw;
  memset(&rw, 0, sizeof rw);
  rw.s = s;
  rw.r = r;
  rw.tp_idx = r % s->tp;
  rw.stage = (r / s->tp) % s->pp;
  rw.dp_idx = r / (s->tp * s->pp);
  rw.off = s->clock_spread > 0
               ? (hash4(s->seed, 77, (uint64_t)r, 0) % (uint64_t)s->clock_spread) / Q * Q
               : 0;
  rw.thread = 100 + (uint64_t)r;
  stepscope_header h;
  memset(&h, 0, sizeof h);
  h.rank = r;
  h.world_size = s->nranks;
  h.local_rank = r % 8;
  h.pid = 1000 + r;
  h.clock_domain = STEPSCOPE_CLOCK_MONOTONIC;
  h.start_ns = rw.off;
  h.hostname = host;
  h.producer = "stepscope-gen --scale";
  h.device_name = "Generated GPU";
  h.config_json = "{\"generator\":true}";
  stepscope_error err;
  rw.w = stepscope_writer_open(path, &h, NULL, &err);
  if (!rw.w) {
    snprintf(errbuf, errlen, "%s", err.message);
    return -1;
  }
  const char *kn[4] = {"gemm_fwd", "gelu_fwd", "gemm_bwd", "gelu_bwd"};
  for (int k = 0; k < 4; k++)
    rw.s_kernel[k] = stepscope_intern(rw.w, kn[k]);
  rw.s_launch = stepscope_intern(rw.w, "cudaLaunchKernel");
  rw.s_ar = stepscope_intern(rw.w, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  rw.s_send = stepscope_intern(rw.w, "ncclDevKernel_SendRecv");
  rw.s_world = stepscope_intern(rw.w, "world");
  rw.s_dp = stepscope_intern(rw.w, "dp");
  rw.s_tp = stepscope_intern(rw.w, "tp");
  rw.s_pp = stepscope_intern(rw.w, "pp");
  rw.s_step = stepscope_intern(rw.w, "step");
  rw.s_dom = stepscope_intern(rw.w, "stepscope");
  if (pipe) {
    rw.s_forward = stepscope_intern(rw.w, "forward");
    rw.s_backward = stepscope_intern(rw.w, "backward");
  }
  header_records(&rw);
  for (int64_t n = 0; n < s->nsteps; n++)
    step(&rw, n, pipe);
  metadata(&rw);
  if (stepscope_writer_close(rw.w, &err) != 0) {
    snprintf(errbuf, errlen, "%s", err.message);
    return -1;
  }
  if (rw.rc) snprintf(errbuf, errlen, "%s: a record could not be written", path);
  *events += rw.events;
  return rw.rc;
}

typedef struct scale_job {
  const gen_scale *s;
  const char *dir;
  int first, stride, rc;
  uint64_t events;
  int64_t receives, waited;
  char err[4200];
} scale_job;

/* Lockstep: every stride-th rank. With waits: every stride-th pipeline, its timelines computed
 * once, then its tp x pp ranks (rank = tp index + tp (stage + pp dp index)). */
static void *write_ranks(void *arg) {
  scale_job *j = arg;
  const gen_scale *s = j->s;
  if (!s->waits) {
    for (int r = j->first; r < s->nranks && j->rc == 0; r += j->stride)
      j->rc = write_rank(s, j->dir, r, NULL, &j->events, j->err, sizeof j->err);
    return NULL;
  }
  int width = s->tp * s->pp;
  for (int g = j->first; g < s->dp && j->rc == 0; g += j->stride) {
    gen_scale_pipe pipe;
    if (gen_scale_pipe_make(s, g, &pipe)) {
      snprintf(j->err, sizeof j->err, "pipeline %d: out of memory, or a timeline past its step", g);
      j->rc = -1;
      break;
    }
    j->receives += pipe.receives;
    j->waited += pipe.waited;
    for (int r = g * width; r < (g + 1) * width && j->rc == 0; r++)
      j->rc = write_rank(s, j->dir, r, &pipe, &j->events, j->err, sizeof j->err);
    gen_scale_pipe_free(&pipe);
  }
  return NULL;
}

int gen_scale_write(gen_scale *s, const char *dir, uint64_t *events, char *errbuf, size_t errlen) {
  if (gen_scale_layout(s)) {
    snprintf(errbuf, errlen, "ranks must be a multiple of tp x pp (%d x %d)", s->tp, s->pp);
    return -1;
  }
  mkdir(dir, 0755);
  int nt = s->threads < 1 ? 1 : s->threads > 64 ? 64 : s->threads;
  scale_job jobs[64];
  pthread_t th[64];
  for (int t = 0; t < nt; t++) {
    jobs[t] = (scale_job){s, dir, t, nt, 0, 0, 0, 0, ""};
    if (t > 0 && pthread_create(&th[t], NULL, write_ranks, &jobs[t])) {
      jobs[t].rc = -1;
      snprintf(jobs[t].err, sizeof jobs[t].err, "could not start a thread");
    }
  }
  write_ranks(&jobs[0]);
  int rc = 0;
  *events = 0;
  s->receives = s->waited = 0;
  for (int t = 0; t < nt; t++) {
    /* the thread's counts once it is done (read before the join they could be short) */
    if (t > 0 && strcmp(jobs[t].err, "could not start a thread")) pthread_join(th[t], NULL);
    *events += jobs[t].events;
    s->receives += jobs[t].receives;
    s->waited += jobs[t].waited;
    if (jobs[t].rc && rc == 0) {
      rc = -1;
      snprintf(errbuf, errlen, "%s", jobs[t].err);
    }
  }
  return rc;
}
