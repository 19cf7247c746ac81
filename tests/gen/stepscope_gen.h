/*
 * stepscope_gen.h — the ground-truth generator (tests and benchmarks only,
 * never on the user's path).
 *
 * A scenario is described in *true* time (integer ns, every time a multiple
 * of GEN_Q so that expectations can be computed on a grid): ranks with their
 * own clock offsets and clock-anchor errors, lanes (GPU streams or CPU
 * streams), ops (kernels, copies, memsets, host ops) with their launch calls,
 * collectives whose members all end at the same instant, step ranges, sync
 * records and run metadata. gen_write() writes it as a run directory in
 * stepscope's trace format through libstepscope's writer (each rank's trace
 * clock = true time + its offset). gen_expect() computes every SPEC §4
 * metric from the description alone — by brute force over GEN_Q cells and
 * by construction — sharing no code with the analyzer, so tests can demand
 * exact equality.
 */
#ifndef STEPSCOPE_GEN_H
#define STEPSCOPE_GEN_H

#include <stddef.h>
#include <stdint.h>

#define GEN_Q             1000 /* grid quantum (ns) */
#define GEN_MAX_LANES     8
#define GEN_MAX_RANKS     1024 /* the random scenarios' expectations are linear in ranks */
#define GEN_LAUNCH_GAP_NS 10000

enum { GEN_COMPUTE = 1, GEN_COMM = 2, GEN_MEMCPY = 3, GEN_MEMSET = 4 };
enum {
  GEN_IDLE_HOST_WAIT,
  GEN_IDLE_LAUNCH_GAP,
  GEN_IDLE_SYNC_WAIT,
  GEN_IDLE_OTHER,
  GEN_IDLE_DATA_LOADING,
  GEN_IDLE_N
};

typedef struct gen_op {
  int rank, lane;
  int64_t s, e;
  int cls; /* GEN_COMPUTE ... */
  int has_launch;
  int64_t launch_s, launch_e;
  int coll;         /* collective index, -1 */
  int pipeline;     /* pipeline p2p */
  const char *name; /* kernel / host-op name (static string) */
  uint64_t bytes;
  int graph; /* > 0: a CUDA-graph replay id; the ops of one replay share one
                launch call (same launch_s/launch_e), written once */
} gen_op;

typedef struct gen_coll {
  uint64_t comm_id, seq, bytes;
  uint32_t op, comm_size, flags;
  const char *group;
  int nmembers;
  int member_rank[GEN_MAX_RANKS];
  int member_op[GEN_MAX_RANKS];
  uint32_t member_comm_rank[GEN_MAX_RANKS];
  int record; /* 0: no COLLECTIVE record (NCCL kernel known by name only) */
  uint64_t member_bytes[GEN_MAX_RANKS]; /* all-to-all: what each member sent (0: bytes) */
} gen_coll;

typedef struct gen_step {
  int rank;
  int64_t number, s, e;
} gen_step;

typedef struct gen_sync {
  int rank, lane;
  int64_t s, e;
} gen_sync;

/* A data loader range on the rank's host thread (named like PyTorch's). */
typedef struct gen_load {
  int rank;
  int64_t s, e;
} gen_load;
/* A host range of a pipeline item: "forward" or "backward" with args
 * {"microbatch":mb} (analyzer: bubble causes and culprit phases). */
typedef struct gen_range {
  int rank;
  const char *name; /* static string */
  int mb;
  int64_t s, e;
} gen_range;

typedef struct gen_rank {
  int64_t clock_offset; /* trace clock = true + clock_offset (>= 0) */
  int64_t anchor_error; /* error of its REALTIME anchors */
  int cpu_backend;      /* host ops on CPU streams instead of GPU kernels */
  int nlanes;
  const char *lane_name[GEN_MAX_LANES];
  int stage;   /* pp_rank, -1 */
  int present; /* 0: no file is written for this rank */
} gen_rank;

typedef struct gen_run {
  int nranks;
  gen_rank ranks[GEN_MAX_RANKS];
  gen_op *ops;
  size_t nops, ops_cap;
  gen_coll *colls;
  size_t ncolls, colls_cap;
  gen_step *steps;
  size_t nsteps, steps_cap;
  gen_sync *syncs;
  size_t nsyncs, syncs_cap;
  gen_load *loads;
  size_t nloads, loads_cap;
  gen_range *ranges;
  size_t nranges, ranges_cap;
  /* metadata (optional) */
  int pp, microbatches; /* schedule when pp > 1 */
  double model_flops, hardware_flops, peak_flops;
  int with_flops;
  /* the tracer's `machine` metadata (model/trace_metadata.h): CPUs and 1-minute load averages */
  double machine_cpus, machine_load_start, machine_load_end;
  int with_machine;
  const char *config_json; /* the header's configuration (NULL: {"generator":true}) */
} gen_run;

void gen_init(gen_run *g, int nranks);
void gen_free(gen_run *g);
/* Adds an op; returns its index or -1 on allocation failure. */
int gen_add_op(gen_run *g, const gen_op *op);
/* Adds a collective over existing ops (one per member); all members' ends
 * must be equal. Marks the ops as communication. Returns its index or -1. */
int gen_add_coll(gen_run *g, const gen_coll *c);
int gen_add_step(gen_run *g, int rank, int64_t number, int64_t s, int64_t e);
int gen_add_sync(gen_run *g, int rank, int lane, int64_t s, int64_t e);
int gen_add_load(gen_run *g, int rank, int64_t s, int64_t e);
int gen_add_range(gen_run *g, int rank, const char *name, int mb, int64_t s, int64_t e);

/* Writes DIR/rank-%05d.trace.zst for every present rank. 0 or -1 (message
 * in errbuf). */
int gen_write(const gen_run *g, const char *dir, char *errbuf, size_t errlen);

/* ---- expectations ---- */
typedef struct gen_window {
  int64_t step;       /* -1 totals */
  int64_t start, end; /* true time */
  int projected;
  int64_t device_latency; /* first start to last end of its ops; -1 none */
  int cut;                /* its range ends after the rank's last op, launch or sync */
  int64_t span, busy, idle, compute, comm, overlap, exposed_comm, exposed_mem, bubble;
  int64_t idle_cause[GEN_IDLE_N];
  /* pipeline ranks: bubble causes in the analyzer's order (schedule, imbalance,
   * p2p_transfer, late_upstream, host_gaps, unattributed) and the slow stage */
  int64_t bubble_cause[6];
  int imbalance_stage;
  uint64_t launches;
  int64_t delay_min, delay_p50, delay_p90, delay_p99, delay_max;
} gen_window;

typedef struct gen_rank_expect {
  int rank;
  size_t nsteps;
  gen_window totals;
  gen_window steps[64];
  int64_t lane_idle[GEN_MAX_LANES][GEN_IDLE_N]; /* totals window */
  int64_t lane_busy[GEN_MAX_LANES];
  int64_t coll_wait, coll_caused;
  uint64_t coll_count, coll_last;
} gen_rank_expect;

typedef struct gen_coll_expect {
  uint64_t comm_id, seq;
  int64_t first_start, skew, transfer, total_wait, max_wait;
  int last_rank;
  uint32_t present, comm_size;
  double algbw, busbw;
} gen_coll_expect;

typedef struct gen_expect {
  int64_t origin;         /* true time of the run's first event */
  gen_rank_expect *ranks; /* one per present rank (allocated: 15 KB each) */
  int nranks;             /* present ranks, in rank order */
  gen_coll_expect *colls;
  size_t ncolls;
  uint64_t colls_incomplete;
  int64_t *offset_rel; /* per rank: expected alignment offset vs rank 0 */
  double mfu, hfu;
  int64_t step_time_median;
  int64_t device_latency_median;
} gen_expect;

int gen_expect_compute(const gen_run *g, gen_expect *x);
void gen_expect_free(gen_expect *x);

/* ---- scenarios ---- */
typedef struct gen_scenario {
  uint64_t seed;
  int nranks;
  int nlanes; /* device lanes per rank */
  int nsteps;
  int ops_per_step;      /* per rank */
  int comm;              /* collectives */
  int compute;           /* compute ops */
  int copies;            /* memcpy/memset ops */
  int overlap_same_lane; /* allow nested/overlapping ops on one lane */
  int64_t clock_spread;  /* max clock offset between ranks (ns) */
  int64_t anchor_error;  /* max anchor error (ns); needs comm to be corrected */
  int cpu_backend;       /* 1 all ranks, 2 mixed */
  int missing_member;    /* drop a rank from some collectives */
  int empty_rank;        /* last rank has no activity */
  int pipeline;          /* pp = 2 with pipeline send/recv */
  int name_only_nccl;    /* some comm kernels have no COLLECTIVE record */
  int syncs;
  int alltoall; /* the mid-step collectives are all-to-alls with uneven splits */
  int flops;
  int pipeline_schedule; /* 1: the ranks are the stages of a 1F1B pipeline (2: AFAB)
                            with forward/backward ranges, send/recv pairs and an
                            end-of-step all-reduce; other knobs but seed, nsteps and
                            cpu_backend are ignored */
  int overlap_steps;     /* 1: each step range reaches back into the previous one;
                            2: also one more step whose range spans all the others */
} gen_scenario;

void gen_scenario_default(gen_scenario *s);
/* Builds a random scenario. 0 or -1. */
int gen_build(gen_run *g, const gen_scenario *s);

/* ---- iteration scenarios (gen_iter.c): the host/device relation of a
 * training loop, deterministic, with contiguous step ranges as PyTorch's
 * ProfilerStep writes them ---- */
typedef struct gen_iter {
  int nranks, nsteps;
  int kernels;       /* compute kernels per step (lane 0, one after another) */
  int64_t kernel_ns; /* duration of each */
  int64_t load_ns;   /* host data loading at the start of each iteration */
  int64_t python_ns; /* host time after the launches, before the iteration ends */
  int host_ahead;    /* 0: the host waits for the step's device work before it ends
                        the iteration; h >= 1: it waits only for the work of the
                        step h iterations back (runs up to h steps ahead) */
  int graphs;        /* each step's kernels are one CUDA-graph replay */
  int comm;          /* an all-reduce per step (lane 1) after the first half */
  int prefetch;      /* each step first copies its batch to the device on its own
                        stream (lane 2): with the host ahead it runs steps early */
  int cut_last;      /* the trace ends in the middle of the last step's device work:
                        its later kernels are missing, its range ends there */
  /* filled by gen_iter_build: */
  int64_t device_work_ns; /* device time of one step's kernels (lane 0) */
} gen_iter;

void gen_iter_default(gen_iter *it);
int gen_iter_build(gen_run *g, gen_iter *it);

/* ---- runs of thousands of ranks (gen_scale.c): written rank by rank from closed forms,
 * linear in events, never held in memory ---- */
#define GEN_SCALE_KERNEL_NS   (20 * GEN_Q) /* a compute kernel's base duration */
#define GEN_SCALE_JITTER_Q    10           /* up to this many Q more */
#define GEN_SCALE_TRANSFER_NS (30 * GEN_Q) /* an all-reduce's transfer */
#define GEN_SCALE_P2P_NS      (15 * GEN_Q) /* a pipeline transfer */
typedef struct gen_scale {
  uint64_t seed;
  int nranks;
  int64_t events_per_rank; /* about; sets the kernels per slot */
  int nsteps;
  int tp, pp, microbatches; /* 0: chosen (tp 8 and pp 4 when the ranks divide) */
  int stragglers;           /* ranks whose compute is straggle_ns longer per slot */
  int64_t straggle_ns;
  int straggle_uneven;  /* straggler k of S (from 1) is straggle_ns x k / S longer instead */
  int64_t launch_lead;  /* the host runs this far ahead: each launch call ends this long
                           before its kernel starts, and the step and pass ranges are as early;
                           0: launches just before their kernels (1 quantum) */
  int64_t clock_spread; /* clock offsets up to this (ns) */
  int threads;          /* ranks written in parallel */
  /* waits (gen_scale_waits.c): each stage's timeline follows the schedule's dependencies, so
   * receives wait on late sends and stragglers delay their neighbours; 0: lockstep slots */
  int waits;
  int one_f_one_b; /* with waits: the 1F1B order instead of all-forward-all-backward */
  /* filled by gen_scale_layout: */
  int dp, kernels_per_slot;
  int64_t slot_ns, step_ns;
  /* filled by gen_scale_write with waits: pipeline receives, and those posted before their
   * send started (they waited) */
  int64_t receives, waited;
} gen_scale;

void gen_scale_default(gen_scale *s);
/* Completes the layout and the timing; -1 when the ranks are no multiple of tp x pp. */
int gen_scale_layout(gen_scale *s);
/* 0, or which straggler the rank is, from 1 */
int gen_scale_is_straggler(const gen_scale *s, int rank);
/* A compute kernel's true duration on rank r: the base, the jitter of (seed, r, step, slot, k)
 * and the straggler's extra. */
int64_t gen_scale_kernel_ns(const gen_scale *s, int r, int64_t step, int slot_no, int k);

/* One forward or backward of a stage with waits (gen_scale_waits.c), true times: the stage
 * starts it at `start` (kernels from start + 4 Q), its work (with the TP all-reduce) ends at
 * `end`; its input's receive, posted at recv_post, ends at recv_end, and its output's send
 * runs [send_start, send_end) (INT64_MIN where the stage has none). */
typedef struct gen_scale_item {
  int forward, mb;
  int64_t start, end, recv_post, recv_end, send_start, send_end;
} gen_scale_item;

/* The timelines of one pipeline (a dp index: pp stages of tp ranks) over every step: per
 * (step, stage) its 2 M items in the stage's order; stage_done: when the stage's last item
 * ended, per (step, stage). */
typedef struct gen_scale_pipe {
  gen_scale_item *items;
  int64_t *stage_done;
  int64_t receives, waited; /* its ranks' receives, and those posted before their send */
} gen_scale_pipe;

/* Computes pipeline dp_idx's timelines (ASAP on the schedule's dependencies); 0, or -1 (out of
 * memory, or a timeline past the step's length: a bug). */
int gen_scale_pipe_make(const gen_scale *s, int dp_idx, gen_scale_pipe *p);
const gen_scale_item *gen_scale_pipe_items(const gen_scale *s, const gen_scale_pipe *p,
                                           int64_t step, int stage);
void gen_scale_pipe_free(gen_scale_pipe *p);
/* Writes DIR/rank-%05d.trace.zst for every rank; *events: the records written. 0 or -1
 * (message in errbuf). */
int gen_scale_write(gen_scale *s, const char *dir, uint64_t *events, char *errbuf, size_t errlen);

#endif
