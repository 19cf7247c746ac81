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
 * bubble, (P - 1) of M + P - 1 slots per pass.
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
#define KERNEL_NS    (20 * Q) /* a compute kernel's base duration */
#define JITTER_Q     10       /* up to this many Q more */
#define TRANSFER_NS  (30 * Q)
#define P2P_NS       (15 * Q)
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
  int64_t fixed = (s->tp > 1 ? 3 : 0) + (s->pp > 1 ? 6 : 0);
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
    if (r == (int)((int64_t)(k + 1) * s->nranks / (s->stragglers + 1))) return 1;
  return 0;
}

typedef struct rank_writer {
  const gen_scale *s;
  stepscope_writer *w;
  int r, tp_idx, stage, dp_idx;
  uint64_t off, corr, thread, events;
  uint32_t s_kernel[4], s_launch, s_ar, s_send, s_world, s_dp, s_tp, s_pp, s_step, s_dom;
  int rc;
} rank_writer;

static void emit(rank_writer *rw, const stepscope_record *rec) {
  if (stepscope_write(rw->w, rec)) rw->rc = -1;
  rw->events++;
}

/* A kernel on `stream` at true [t0, t1) with its launch call just before; returns its
 * correlation id. */
static uint64_t kernel(rank_writer *rw, uint64_t stream, uint32_t name, int64_t t0, int64_t t1) {
  uint64_t corr = ++rw->corr;
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_API;
  rec.u.api.start_ns = (uint64_t)(t0 - 2 * Q) + rw->off;
  rec.u.api.end_ns = (uint64_t)(t0 - Q) + rw->off;
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
             "{\"name\":\"afab\",\"stages\":%d,\"microbatches\":%d,\"virtual_stages\":1}", s->pp,
             s->microbatches);
    rec.u.metadata = (stepscope_metadata){"schedule", json};
    emit(rw, &rec);
  }
}

/* One working slot of the rank: compute, TP all-reduce, pipeline send or receive. */
static void slot(rank_writer *rw, int64_t step, int slot_no, int64_t t, int forward, int mb) {
  const gen_scale *s = rw->s;
  int64_t extra =
      gen_scale_is_straggler(s, rw->r) ? s->straggle_ns / s->kernels_per_slot / Q * Q : 0;
  int64_t cur = t + 4 * Q;
  for (int k = 0; k < s->kernels_per_slot; k++) {
    uint64_t h = hash4(s->seed, (uint64_t)rw->r, (uint64_t)step, (uint64_t)slot_no * 65536 + k);
    int64_t d = KERNEL_NS + (int64_t)(h % (JITTER_Q + 1)) * Q + extra;
    kernel(rw, LANE_COMPUTE, rw->s_kernel[(k + !forward * 2) % 4], cur, cur + d);
    cur += d;
  }
  int64_t bound = t + 4 * Q + (int64_t)s->kernels_per_slot * (KERNEL_NS + JITTER_Q * Q) +
                  (s->stragglers ? s->straggle_ns : 0);
  uint64_t seq = (uint64_t)step * 1024 + (uint64_t)(forward ? 0 : 512) + (uint64_t)mb;
  if (s->tp > 1) { /* TP group: same stage and dp index */
    uint64_t comm = 0x7100000000000000ull | (uint64_t)(rw->r / s->tp);
    collective(rw, LANE_COMM, rw->s_ar, comm, seq, STEPSCOPE_COLL_ALLREDUCE, 0,
               (uint32_t)rw->tp_idx, (uint32_t)s->tp, rw->s_tp, cur, bound + TRANSFER_NS);
    bound += TRANSFER_NS;
  }
  if (s->pp > 1) { /* forward: to stage + 1 (none from the last); backward: to stage - 1 */
    int to = forward ? rw->stage + 1 : rw->stage - 1;
    if (to >= 0 && to < s->pp) {
      int lo = to < rw->stage ? to : rw->stage;
      uint64_t pair = (uint64_t)(rw->dp_idx * s->pp + lo) * (uint64_t)s->tp + (uint64_t)rw->tp_idx;
      uint64_t comm = (forward ? 0x7200000000000000ull : 0x7300000000000000ull) | pair;
      collective(rw, LANE_SEND, rw->s_send, comm, seq, STEPSCOPE_COLL_SEND,
                 STEPSCOPE_COLL_F_P2P | STEPSCOPE_COLL_F_PIPELINE, (uint32_t)rw->stage,
                 (uint32_t)s->pp, rw->s_pp, bound + Q, bound + Q + P2P_NS);
    }
  }
}

/* The receiving side of the sends into this rank's slot: the member on the next stage
 * (forward) or the previous one (backward), at the same bound as the sender's. */
static void receive(rank_writer *rw, int64_t step, int64_t t_sender, int forward, int mb) {
  const gen_scale *s = rw->s;
  int from = forward ? rw->stage - 1 : rw->stage + 1;
  if (from < 0 || from >= s->pp) return;
  int64_t bound = t_sender + 4 * Q + (int64_t)s->kernels_per_slot * (KERNEL_NS + JITTER_Q * Q) +
                  (s->stragglers ? s->straggle_ns : 0) + (s->tp > 1 ? TRANSFER_NS : 0);
  uint64_t seq = (uint64_t)step * 1024 + (uint64_t)(forward ? 0 : 512) + (uint64_t)mb;
  int lo = from < rw->stage ? from : rw->stage;
  uint64_t pair = (uint64_t)(rw->dp_idx * s->pp + lo) * (uint64_t)s->tp + (uint64_t)rw->tp_idx;
  uint64_t comm = (forward ? 0x7200000000000000ull : 0x7300000000000000ull) | pair;
  collective(rw, LANE_RECV, rw->s_send, comm, seq, STEPSCOPE_COLL_SEND,
             STEPSCOPE_COLL_F_P2P | STEPSCOPE_COLL_F_PIPELINE, (uint32_t)rw->stage, (uint32_t)s->pp,
             rw->s_pp, bound + Q, bound + Q + P2P_NS);
}

static void step(rank_writer *rw, int64_t n) {
  const gen_scale *s = rw->s;
  int64_t t0 = (int64_t)1000000 + n * s->step_ns; /* true time */
  int M = s->microbatches, P = s->pp, p = rw->stage;
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_RANGE;
  rec.u.range.start_ns = (uint64_t)t0 + rw->off;
  rec.u.range.end_ns = (uint64_t)(t0 + s->step_ns) + rw->off;
  rec.u.range.thread = rw->thread;
  rec.u.range.name = rw->s_step;
  rec.u.range.domain = rw->s_dom;
  rec.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64;
  rec.u.range.payload = (uint64_t)n;
  emit(rw, &rec);
  int nslots = 2 * (M + P - 1);
  for (int sl = 0; sl < nslots; sl++) {
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

static int write_rank(const gen_scale *s, const char *dir, int r, uint64_t *events, char *errbuf,
                      size_t errlen) {
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
  header_records(&rw);
  for (int64_t n = 0; n < s->nsteps; n++)
    step(&rw, n);
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
  char err[4200];
} scale_job;

static void *write_ranks(void *arg) {
  scale_job *j = arg;
  for (int r = j->first; r < j->s->nranks && j->rc == 0; r += j->stride)
    j->rc = write_rank(j->s, j->dir, r, &j->events, j->err, sizeof j->err);
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
    jobs[t] = (scale_job){s, dir, t, nt, 0, 0, ""};
    if (t > 0 && pthread_create(&th[t], NULL, write_ranks, &jobs[t])) {
      jobs[t].rc = -1;
      snprintf(jobs[t].err, sizeof jobs[t].err, "could not start a thread");
    }
  }
  write_ranks(&jobs[0]);
  int rc = 0;
  *events = 0;
  for (int t = 0; t < nt; t++) {
    *events += jobs[t].events;
    if (t > 0 && strcmp(jobs[t].err, "could not start a thread")) pthread_join(th[t], NULL);
    if (jobs[t].rc && rc == 0) {
      rc = -1;
      snprintf(errbuf, errlen, "%s", jobs[t].err);
    }
  }
  return rc;
}
