/*
 * ssa_metrics.h — the analyzer's metrics floor (analyzer/src/metrics): the metrics of SPEC §4
 * computed from a loaded run, and the result structures that the text report, the JSON report and
 * the Chrome export read. docs/metrics.md defines every number exactly.
 *
 * Flow: ssa_analyze() finds each rank's steps (steps.c), measures every
 * window in one streaming pass over the rank's ops (breakdown.c with
 * coverage.c, in parallel across ranks), then does the cross-rank work: collectives matched by
 * (comm_id, seq) with skew, transfer, waits, bandwidths and stragglers (collectives.c), the kernel
 * table (kernel_table.c), MFU/HFU and memory (run_metadata.c).
 *
 * All times inside results are in the rank's trace clock unless named
 * *_rel (relative to the run origin, aligned). Reports convert with
 * ssa_rel_time().
 */
#ifndef SSA_METRICS_H
#define SSA_METRICS_H

#include "ssa_model.h"

#define SSA_DEFAULT_LAUNCH_GAP_NS 10000 /* gaps shorter than 10 us are launch gaps */
#define SSA_CPU_BOUND_FRACTION    0.10 /* host_wait + data_loading >= 10 % of the step: CPU-bound */

/* The median of n sorted values, everywhere (analyze, diff): the lower middle one,
 * v[SSA_MEDIAN_INDEX(n)], so that it is always a measured value; for an even count that is
 * the smaller of the two middle values (docs/metrics.md "Medians"). n > 0. */
#define SSA_MEDIAN_INDEX(n) (((n)-1) / 2)

/* How a bounded analysis (`analyze --low-memory`, docs/scale.md) gets a rank's events for
 * one per-rank pass: `load` reads the rank's file again into run->ranks[i] (its events back,
 * its shell and clock offset as before), `drop` frees them again (ssa_rank_drop_events). The
 * caller owns the run and the reading (import/: ssa_run_rank_events). */
typedef struct ssa_rank_events {
  int (*load)(void *ctx, size_t rank_index, int purpose); /* 0 or a status; purpose: SSA_READ_* */
  void (*drop)(void *ctx, size_t rank_index);
  void *ctx;
} ssa_rank_events;

/* Why a bounded analysis reads a rank's events (ssa_analysis.reading_for, handed to
 * ssa_rank_events.load: a merge names it when the rank file is gone, and counts the reads). */
enum {
  SSA_READ_METRICS,       /* the per-rank metrics (breakdown.c) and pipeline items */
  SSA_READ_STEP_NUMBERS,  /* the message of a --steps that keeps nothing */
  SSA_READ_TRANSFERS,     /* a pipeline rank's bubble transfers and waits on late sends */
  SSA_READ_OP_GROUPS,     /* MFU from the ops' FLOPs: a rank's op groups */
  SSA_READ_LATE_UPSTREAM, /* the late upstream's rounds: a sending rank's answers */
  SSA_READ_CULPRITS,      /* the culprit walk's rounds: a rank's phase answers */
  SSA_READ_CRITICAL_PATH, /* the critical path's rounds: a rank's walk */
  SSA_READ_STEP_RANGE,    /* whether a rank has the --step-range's ranges (its names do) */
  SSA_READ_N
};
extern const char *const ssa_read_purpose_names[SSA_READ_N];

struct ssa_rank_local;

typedef struct ssa_options {
  int has_step_filter;
  int64_t step_first, step_last;      /* inclusive */
  int rank;                           /* -1: every rank; otherwise report only this rank */
  const char *step_range_name;        /* a user-given range name for steps, or NULL */
  int64_t launch_gap_ns;              /* 0: SSA_DEFAULT_LAUNCH_GAP_NS */
  int top_n;                          /* 0: 20 */
  int threads;                        /* 0: cores */
  const ssa_comm_rules *comm_rules;   /* the user's classification rules (comm_rules.h), or NULL;
                                         applied when the run is loaded (ssa_load_options) */
  const unsigned char *export_ranks;  /* the exports only: NULL every rank (or `rank`), else
                                         per rank index, nonzero = exported (export --ranks) */
  const ssa_rank_events *rank_events; /* NULL: the run's ranks hold their events; else the
                                         bounded mode: ranks hold only their shells and each
                                         per-rank pass (the critical path's rounds too) reads
                                         its rank through this: the same report */
  struct ssa_rank_summary *summaries; /* NULL, or per rank index its summary made when it was loaded
                                  (the bounded mode: one read less); ssa_analyze takes them
                                  (and sets their clock offsets), leaving them zeroed */
  struct ssa_rank_local *rank_locals; /* NULL, or per rank index the results of its metrics
                                         pass made where it was loaded (a merge of partials:
                                         ssa_rank_local_make); a rank whose `made` is set is
                                         not read for that pass; ssa_analyze takes them */
  /* the exports only: NULL, or a replay whose ops they add as tracks (export --replay) */
  const struct ssa_export_replay *export_replay;
  int path_sums_only; /* 1: the critical path keeps its sums, top ops and segment counts (what
                         the reports print) but not its segments, which only the exports'
                         track draws (critical_path.h): ~32 bytes less a piece of the path,
                         about an event's worth at one rank */
} ssa_options;

void ssa_options_default(ssa_options *o);
/* The launch gap the analysis uses: o->launch_gap_ns, or SSA_DEFAULT_LAUNCH_GAP_NS when unset. */
int64_t ssa_options_launch_gap_ns(const ssa_options *o);

/* Idle causes (per stream or per device). data_loading is the part of
 * host_wait during which the host was in a data loader range. */
enum {
  SSA_IDLE_HOST_WAIT,
  SSA_IDLE_LAUNCH_GAP,
  SSA_IDLE_SYNC_WAIT,
  SSA_IDLE_OTHER,
  SSA_IDLE_DATA_LOADING,
  SSA_IDLE_N
};

/* Whether a host range is data loading: its name contains "DataLoader"
 * (PyTorch's `enumerate(DataLoader)#...__next__`). */
int ssa_is_data_loader_range(const char *name);
extern const char *const ssa_idle_cause_names[SSA_IDLE_N];

/* One step found on a rank. */
typedef struct ssa_step {
  int64_t number;
  int64_t range_start, range_end; /* the host range */
  int64_t start, end;             /* the window (steps.c: windows never overlap) */
  int64_t dev_start, dev_end;     /* first start, last end of its ops (if projected) */
  int projected;                  /* 1 if it launched work */
  int cut;           /* its range ends after every other event: cut by the trace's end */
  uint64_t launched; /* ops that belong to it (launched inside its range) */
} ssa_step;

/* Launch delay distribution: kernel start - launch call end. */
typedef struct ssa_delay_stats {
  uint64_t count;
  int64_t min, p50, p90, p99, max;
  double mean;
} ssa_delay_stats;

/* Count, mean, min, max and nearest-rank percentiles of v[0, n) (breakdown.c;
 * v may be reordered). */
void ssa_delay_stats_of(int64_t *v, size_t n, ssa_delay_stats *s);

/* Causes of a pipeline rank's bubble (bubble_causes.c); they sum to the bubble. */
enum {
  SSA_BUBBLE_SCHEDULE,
  SSA_BUBBLE_IMBALANCE,
  SSA_BUBBLE_TRANSFER,
  SSA_BUBBLE_LATE,
  SSA_BUBBLE_HOST,
  SSA_BUBBLE_UNATTRIBUTED,
  SSA_BUBBLE_N
};
extern const char *const ssa_bubble_cause_names[SSA_BUBBLE_N];

/* The metrics of one window W on one rank. */
typedef struct ssa_window {
  int64_t step;       /* step number; -1 for the totals window */
  int64_t start, end; /* W in trace clock */
  int projected;
  int64_t device_latency; /* first start to last end of the step's ops; -1 none */
  int cut;                /* the step was cut by the trace's end */
  int stub;               /* the rank's last step, with no device work in it while an earlier
                             step has some (a final ProfilerStep of host time only) */
  int64_t span, busy, idle, compute, comm, overlap, exposed_comm, exposed_mem;
  int64_t bubble;                      /* no compute and no non-pipeline comm */
  int64_t pipeline_comm_only;          /* part of bubble covered by pipeline send/recv */
  int64_t idle_cause[SSA_IDLE_N];      /* device level; sums to idle */
  int has_bubble_causes;               /* pipeline rank: bubble_cause filled */
  int64_t bubble_cause[SSA_BUBBLE_N];  /* sums to bubble */
  int imbalance_stage;                 /* the slowest stage of the step(s), -1 unknown */
  int late_from_rank, late_from_phase; /* whom the stage waited for most (late_upstream.c):
                                          rank and SSA_PHASE_*; -1 none */
  int64_t late_from_ns;                /* the waiting on its late sends charged to them */
  int64_t schedule_idle,
      schedule_idle_balanced; /* simulated idle (measured / balanced op times), -1 */
  ssa_delay_stats launch;
  int cpu_bound;
} ssa_window;

typedef struct ssa_lane_idle {
  uint32_t lane; /* index into the rank's lanes */
  int64_t busy;
  int64_t idle_cause[SSA_IDLE_N]; /* sums to span - busy of the totals window */
} ssa_lane_idle;

#define SSA_COVER_PENDING 32 /* deferred set-3 starts held at once (more: not deferred) */

/* Streaming coverage of up to 4 activity sets over [t0, t1) (coverage.c):
 * feed ops in non-decreasing start order; bucket[mask] accumulates the time
 * covered by exactly the sets in mask (bit i = set i). Query points (sorted)
 * receive a copy of the buckets when the sweep passes them, so that any
 * window between two points is a difference of two copies. */
typedef struct ssa_cover {
  int64_t t0, t1, pos; /* time before pos is accounted */
  int64_t end[4];      /* end of each set's open union interval (INT64_MIN: none) */
  int nsets;           /* sets in use (ssa_cover_add takes set < nsets) */
  int64_t bucket[16];
  const int64_t *points; /* sorted query points */
  size_t npoints, next_point;
  int64_t (*at)[16]; /* at[k] = buckets over [t0, points[k]) */
  void (*emit)(void *ctx, int64_t s, int64_t e, unsigned mask); /* each piece, or NULL */
  void *ctx;
  /* pipeline waits (pipeline_waits.c): per collective index of the rank, the
   * time until which its executing op waits for another stage (INT64_MIN:
   * none), or NULL. Such an op joins set 3 only from that time on; such
   * later starts (of any set) wait here, sorted, until the sweep reaches them. */
  const int64_t *wait_end;
  int64_t pend_s[SSA_COVER_PENDING], pend_e[SSA_COVER_PENDING];
  int pend_set[SSA_COVER_PENDING];
  int npend;
} ssa_cover;

void ssa_cover_init(ssa_cover *c, int nsets, int64_t t0, int64_t t1);
void ssa_cover_points(ssa_cover *c, const int64_t *points, size_t n, int64_t (*at)[16]);
/* Accounts time up to t (clipped to t1). */
void ssa_cover_advance(ssa_cover *c, int64_t t);
/* Accounts up to t1 and records the remaining points. */
void ssa_cover_finish(ssa_cover *c);

/* Adds [s, e) to set `set`; calls must come in non-decreasing s. */
static inline void ssa_cover_add(ssa_cover *c, int set, int64_t s, int64_t e) {
  if (s > c->pos) ssa_cover_advance(c, s);
  if (e > c->end[set]) c->end[set] = e;
}

/* Whether a communication op is pipeline send/recv (SPEC §4 bubble). */
int ssa_op_is_pipeline_comm(const ssa_rank *r, const ssa_op *o, int pipeline);

/* Feeds the deferred set-3 intervals that start at or before t. */
void ssa_cover_flush_pending(ssa_cover *c, int64_t t);
/* Holds [s, e) of `set` until the sweep reaches s (s > the current op's start). */
void ssa_cover_defer(ssa_cover *c, int set, int64_t s, int64_t e);

/* The four sets of the metrics: 0 compute, 1 comm, 2 copies/memsets,
 * 3 non-pipeline comm (a collective's op from the end of its wait for
 * another pipeline stage on). Zero-length ops are not activity. */
static inline void ssa_cover_op(ssa_cover *c, const ssa_rank *r, const ssa_op *o, int pipeline) {
  if (o->end <= o->start) return;
  if (c->npend && c->pend_s[0] <= o->start) ssa_cover_flush_pending(c, o->start);
  int set = o->cls == SSA_CLS_COMPUTE ? 0 : o->cls == SSA_CLS_COMM ? 1 : 2;
  ssa_cover_add(c, set, o->start, o->end);
  if (set == 1 && o->end > c->end[3] && !ssa_op_is_pipeline_comm(r, o, pipeline)) {
    int64_t we = c->wait_end && o->coll != SSA_NONE ? c->wait_end[o->coll] : INT64_MIN;
    if (we <= o->start)
      c->end[3] = o->end;
    else if (we < o->end)
      ssa_cover_defer(c, 3, we, o->end);
  }
}

/* Feeds every op of a rank (sorted by start) and finishes. */
void ssa_cover_rank(ssa_cover *c, const ssa_rank *r, int pipeline);

/* Kernel statistics of one rank; name: id in the rank's summary names (ssa_rank_summary). */
typedef struct ssa_rank_kstat {
  uint32_t name, comm;
  uint64_t count;
  int64_t total, min, max;
} ssa_rank_kstat;

/* A collective record of a rank reduced to what the cross-rank pass reads (rank_summary.c):
 * the instance it belongs to, what it moved and when its executing op ran. */
typedef struct ssa_coll_rec {
  uint64_t comm_id, seq, bytes;
  int64_t start, end; /* its executing op's times when linked, else the record's (trace clock) */
  uint32_t op, flags, comm_rank, comm_size;
  uint32_t name; /* communicator name: id in the summary's names, 0 none */
} ssa_coll_rec;
/* The summary's own flag of a record, beside STEPSCOPE_COLL_F_* and SSA_COLL_F_*: no op
 * executed it (start and end are the record's), so it is no node of the critical path. */
#define SSA_COLL_REC_F_NO_OP 0x40000000u

/* A pipeline rank's "forward", "backward" or "backward_weight" host range of a selected step with
 * its measured time (bubble_causes.c): what the schedule simulation reads of the rank. */
typedef struct ssa_pipeline_item {
  int64_t start, end; /* host range */
  int pass;           /* 0 forward, 1 backward, 2 weight backward (zero bubble) */
  int mb, chunk;
  size_t step; /* index into the rank's selected steps */
  int64_t dur; /* compute union + own host gaps */
} ssa_pipeline_item;

/* What the cross-rank pass reads of a rank instead of its events (rank_summary.c; docs/scale.md):
 * made from the loaded rank before the per-rank metrics (the kernel names and pipeline items by
 * the per-rank pass), it outlives the rank's events. The collective matching, the pipeline waits,
 * the kernel table and the bubble's schedule simulation read only this of a rank. */
typedef struct ssa_rank_summary {
  int rank;            /* the rank number */
  int64_t offset_ns;   /* the clock alignment's offset (aligned = trace time + offset_ns) */
  int pipeline_stage;  /* ssa_rank_pipeline_stage: -1 not in a pipeline */
  ssa_coll_rec *colls; /* one per collective record, in the rank's order (same indices) */
  size_t ncolls;
  ssa_strtab names; /* communicator and kernel names (ssa_rank_kstat.name) */
  int layout[3];    /* dp_rank, cp_rank, tp_rank (0 unknown): the pipeline it belongs to */
  ssa_meta_layout meta_layout; /* the trainer's layout metadata (the culprit walk's chase) */
  ssa_pipeline_item *items; /* pipeline ranks with a stage: items in trace order (per-rank pass) */
  size_t nitems;
} ssa_rank_summary;

/* Reduces a loaded, aligned rank to its summary. 0 or STEPSCOPE_E_NOMEM (nothing to free then). */
int ssa_rank_summarize(const ssa_rank *r, ssa_rank_summary *s);
void ssa_rank_summary_free(ssa_rank_summary *s);

/* A rank's op instances of one (op name, inputs), what the op table adds up across ranks
 * (op_perf.c: ssa_rank_op_groups); name and inputs: ids in the rank's summary names. */
typedef struct ssa_op_group {
  uint32_t name, inputs;
  uint64_t count, kernels;
  int64_t time_ns;
} ssa_op_group;

/* A rank's op instances grouped (ssa_rank_op_groups), with the op table's counts of the rank. */
typedef struct ssa_rank_ops {
  int made;
  ssa_op_group *groups; /* by (name, inputs) */
  size_t ngroups;
  int host_time;               /* ssa_op_table.host_time of this rank */
  int64_t unattributed_ns;     /* ssa_op_table.unattributed_ns of this rank */
  uint64_t ops_without_inputs; /* ssa_op_table.ops_without_inputs of this rank */
} ssa_rank_ops;

/* Phases a late rank's time is split into (culprits.c). */
enum {
  SSA_PHASE_FORWARD,
  SSA_PHASE_BACKWARD,
  SSA_PHASE_OPTIMIZER,
  SSA_PHASE_HOST,
  SSA_PHASE_COPY,
  SSA_PHASE_COLLECTIVE,
  SSA_PHASE_OTHER,
  SSA_PHASE_N
};
extern const char *const ssa_phase_names[SSA_PHASE_N];

/* The answer to a question of the culprit walk (ssa_phase_request: kind SSA_PHASE_SPAN, a span
 * [t0, t1) of the rank's clock, or SSA_PHASE_BETWEEN_STEPS, t0 and t1 window indices), made
 * before the walk asks it (ssa_rank_span_answers). */
typedef struct ssa_span_answer {
  int kind;
  int64_t t0, t1;
  int64_t time[SSA_PHASE_N];
} ssa_span_answer;
/* A rank's answers sorted by (kind, t0, t1), unique, packed (span_answers.c): n answers in
 * nbytes bytes. */
typedef struct ssa_packed_answers {
  unsigned char *bytes;
  size_t nbytes, n;
} ssa_packed_answers;
/* The answers' order: by (kind, t0, t1) (qsort, bsearch). */
int ssa_span_answer_cmp(const void *pa, const void *pb);
/* Packs v[n] (sorted, unique); 0 or STEPSCOPE_E_NOMEM. */
int ssa_span_answers_pack(const ssa_span_answer *v, size_t n, ssa_packed_answers *out);
/* The answers of p in *out (malloc'd, p->n of them): 0, STEPSCOPE_E_NOMEM, or
 * STEPSCOPE_E_FORMAT when the bytes are not n sorted, unique answers. */
int ssa_span_answers_unpack(const ssa_packed_answers *p, ssa_span_answer **out);
void ssa_packed_answers_free(ssa_packed_answers *p);

typedef struct ssa_rank_result {
  const ssa_rank *rank;
  ssa_rank_summary summary; /* what the cross-rank pass reads of the rank */
  size_t rank_index;
  ssa_step *steps; /* selected steps, by number */
  size_t nsteps;
  ssa_window totals;
  ssa_window *windows;  /* one per selected step */
  ssa_lane_idle *lanes; /* device lanes (GPU and CPU streams) */
  size_t nlanes;
  ssa_rank_kstat *kstats; /* kernels starting in the totals window */
  size_t nkstats;
  int pipeline;           /* this rank is in a pipeline (pp > 1) */
  int stage_of_waits;     /* ssa_rank_pipeline_stage (-1: not in a pipeline) */
  int64_t *coll_transfer; /* pipeline ranks: per collective record, its complete
                             instance's transfer time (-1 none); else NULL */
  int64_t *coll_wait_end; /* per collective record: end of its wait for another
                             stage, trace clock (INT64_MIN none); NULL if none */
  int stage;              /* pp_rank, -1 if unknown */
  double bubble_theory;   /* NaN if unknown */
  /* collectives, per rank */
  uint64_t coll_count;
  int64_t coll_wait;               /* sum of this rank's waits */
  int64_t coll_caused;             /* waits of others when this rank arrived last */
  uint64_t coll_last;              /* instances where it arrived last */
  int64_t coll_schedule_wait;      /* part of coll_wait the pipeline schedule implies */
  ssa_rank_ops ops;                /* the op table's part of the rank (when it is wanted) */
  ssa_packed_answers span_answers; /* none, or the culprit walk's questions answered where the
                                      rank was loaded (a merge) */
  int error;
} ssa_rank_result;
/* Frees what a rank's result holds (its summary, steps, windows, lanes, ...), zeroes it. */
void ssa_rank_result_free(ssa_rank_result *rr);

typedef struct ssa_kernel_row {
  uint32_t name; /* id in the analysis string table (ssa_name) */
  uint64_t count;
  int64_t total, min, max;
  int comm; /* communication kernel */
} ssa_kernel_row;

typedef struct ssa_coll_instance {
  uint64_t comm_id, seq;
  uint32_t op, comm_size, present, flags;
  uint32_t group; /* communicator name: id in ssa_name */
  uint64_t bytes;
  int64_t first_start_rel, last_start_rel, end_rel;
  int64_t skew, transfer, max_wait, total_wait;
  int last_rank;         /* the rank that arrived last */
  double algbw, busbw;   /* GB/s (bytes per ns) */
  int complete;          /* every member present (2 for p2p) */
  int64_t schedule_wait; /* waits the pipeline schedule implies */
  int64_t caused_wait;   /* waits charged to last_rank as a straggler */
} ssa_coll_instance;

/* A late arrival that made others wait beyond the schedule (collectives.c),
 * with the arrivals of up to SSA_LATE_PEERS other members. */
#define SSA_LATE_PEERS 16
typedef struct ssa_late {
  uint32_t rank_idx, npeers;
  uint64_t comm_id; /* the communicator: its instances' windows tile the late rank's time */
  int64_t arrival_rel, caused;
  int64_t since_rel; /* when it left the communicator's previous instance
                        (INT64_MIN: not known) */
  uint32_t peer_idx[SSA_LATE_PEERS];
  int64_t peer_arrival_rel[SSA_LATE_PEERS], peer_since_rel[SSA_LATE_PEERS];
  int64_t peer_caused[SSA_LATE_PEERS]; /* each peer's wait for it, beyond the schedule */
} ssa_late;

/* A rank's phase ranges (phase_ranges.c): its forward / backward / optimizer ranges by start,
 * `backward_weight` counted as backward when asked (late_upstream.c; culprits.c does not). */
typedef struct ssa_phase_range {
  int64_t start, end; /* start first: ssa_count_at_most searches them */
  int phase;
} ssa_phase_range;
typedef struct ssa_phase_ranges {
  ssa_phase_range *v;
  size_t n;
} ssa_phase_ranges;
/* How a `backward_weight` range is read: no phase (apart), or backward. */
enum { SSA_BACKWARD_WEIGHT_APART, SSA_BACKWARD_WEIGHT_AS_BACKWARD };
/* 0 or STEPSCOPE_E_NOMEM; free with ssa_phase_ranges_free. */
int ssa_phase_ranges_build(const ssa_rank *r, int backward_weight, ssa_phase_ranges *p);
/* The phase of the range holding host time t (the latest-starting one), -1 when none. */
int ssa_phase_at(const ssa_phase_ranges *p, int64_t t);
void ssa_phase_ranges_free(ssa_phase_ranges *p);

/* Per straggler rank and phase: the waits it caused, in how many steps. */
typedef struct ssa_culprit {
  int rank, phase;
  int64_t caused; /* waits of others it caused */
  int64_t excess; /* sum over steps of its phase time minus the peers' median */
  uint64_t steps, instances;
  uint64_t via_victim; /* steps charged through a victim: a rank of its pipeline it held up */
  int beyond_noise;    /* its rank passed the noise test (culprit_verdict.c) */
} ssa_culprit;

/* One late (rank, step) walked back and charged to (rank_idx, phase) (culprits.c ->
 * culprit_verdict.c): effect = the longest any one peer waited for it in the step. */
typedef struct ssa_culprit_effect {
  uint32_t rank_idx;
  int phase, via_victim;
  int64_t step; /* step number; -1 outside the selected steps */
  int64_t effect, caused, excess;
  uint64_t instances;
} ssa_culprit_effect;

/* The judgment on the culprit rows (culprit_verdict.c; docs/metrics.md "Culprits beyond
 * noise"): a rank is a culprit when it made its peers wait longer than the threshold in more
 * than half of the judged steps. */
enum {
  SSA_CULPRIT_NO_LATE,      /* no late arrival beyond the schedule at all */
  SSA_CULPRIT_FOUND,        /* at least one rank beyond noise; `rank` is the top one */
  SSA_CULPRIT_WITHIN_NOISE, /* late arrivals, none beyond noise; `rank`: the largest candidate */
  SSA_CULPRIT_UNDECIDED     /* fewer than 3 judged steps: the noise cannot be measured */
};
enum { SSA_CULPRIT_ALSO = 3 }; /* other ranks beyond noise the verdict names */
/* Another rank beyond noise; tied: as many steps late as the culprit and a median effect within
 * the threshold of its, so the two cannot be told apart. */
typedef struct ssa_culprit_also {
  int rank, tied;
  uint64_t steps_late;
  int64_t effect_median, caused;
} ssa_culprit_also;
typedef struct ssa_culprit_verdict {
  int status;
  uint64_t steps;        /* judged steps (uncut selected steps, unless all are cut) */
  uint64_t steps_needed; /* a culprit is late beyond the threshold in at least this many */
  int64_t noise_ns;      /* the step time's robust spread: 1.4826 x median absolute deviation */
  int64_t threshold_ns;  /* max(3 x noise, 10 % of the median step time) */
  /* the top candidate (the culprit when FOUND); rank -1: none */
  int rank, phase;       /* phase: its row with the most steps */
  uint64_t steps_late;   /* judged steps whose effect exceeded the threshold */
  int64_t effect_median; /* median effect over the judged steps (0 where it was not late) */
  int64_t effect_max;
  int64_t caused;       /* its waits caused, all phases */
  int64_t phase_excess; /* `phase` row's excess, steps and victim steps */
  uint64_t phase_steps, phase_via_victim;
  /* FOUND: the other ranks beyond noise, how many (nalso) and the first SSA_CULPRIT_ALSO of
   * them in the candidates' order */
  size_t nalso;
  ssa_culprit_also also[SSA_CULPRIT_ALSO];
} ssa_culprit_verdict;

typedef struct ssa_coll_summary {
  uint32_t op;
  uint32_t group; /* id in ssa_name */
  uint64_t bytes;
  uint64_t count;
  int64_t transfer_total, transfer_min, transfer_max, skew_total, skew_max, wait_total;
  double algbw, busbw; /* sum bytes / sum transfer, and its bus value */
} ssa_coll_summary;

typedef struct ssa_run_step {
  int64_t step;
  int64_t start_rel, end_rel; /* across ranks, aligned */
  int64_t time;               /* max over ranks of span (the iteration period) */
  int64_t device_latency;     /* max over ranks of device latency; -1 none */
  int cut;                    /* cut by the trace's end on some rank */
  int stub;                   /* a stub on every rank: a last step with no device work */
  int in_medians;             /* counted in the run's medians (analyze's and diff's): neither
                                 cut nor a stub, unless every step is (docs/metrics.md) */
  double mfu, hfu;            /* NaN if unknown */
} ssa_run_step;

/* Expert load of a step (moe_load.c): the worst (MoE layer, EP group) of the step. */
typedef struct ssa_moe_step {
  int64_t step;
  int64_t tokens;                      /* assignments routed, all layers and EP groups */
  double expert_imbalance;             /* max over (layer, group) of max/mean tokens per expert */
  double rank_imbalance;               /* max over (layer, group) of max/mean tokens per EP rank */
  int layer, edp_rank, busiest_expert; /* where the expert imbalance peaked */
  int busiest_ep_rank;                 /* the EP rank (in its group) of the worst rank imbalance */
  int64_t busiest_expert_tokens;
  double mean_expert_tokens;
  int busiest_rank;    /* the global rank of busiest_ep_rank (-1 unknown) */
  int64_t a2a_wait;    /* waits in the step's `ep` all-to-alls, all members */
  int a2a_caused_rank; /* the rank whose late arrivals caused the most of them */
  int64_t a2a_caused;  /* ... how much (beyond the schedule), -1 rank: none */
} ssa_moe_step;

/* MFU from the FLOPs of a PyTorch trace's ops (op_perf.c, docs/ops.md): for runs without the
 * trainer's FLOPs metadata whose Kineto CPU ops carry their input shapes. */
/* One op row of the roofline the report carries (the op table's, op_perf.c). */
typedef struct ssa_op_point {
  const char *op;   /* in its rank's strings */
  char shapes[160]; /* as ssa_op_row.shape */
  int dtype;        /* ssa_peak_dtype */
  int64_t time_ns;
  double flops, bytes;
} ssa_op_point;

#define SSA_OP_POINTS 48 /* the longest rows with a model */

typedef struct ssa_op_flops_mfu {
  int known;          /* the ops had FLOPs (with a model and shapes) */
  double flops;       /* of the analysed steps' ops, all ranks counted */
  double mfu;         /* flops / (steps_time x ranks x peak); NaN without a peak */
  double peak;        /* FLOP/s per device of `dtype` (device_peaks.c), 0 unknown */
  int dtype;          /* ssa_peak_dtype carrying most of the FLOPs */
  int64_t steps_time; /* the steps' time summed (the run's steps) */
  int ranks;
  double peaks[5], bandwidth; /* the device's ceilings per ssa_peak_dtype, bytes/s; 0 unknown */
  ssa_op_point points[SSA_OP_POINTS]; /* the roofline's points (the viewer draws them) */
  size_t npoints;
} ssa_op_flops_mfu;

struct ssa_critical_path;

typedef struct ssa_analysis {
  const ssa_run *run;
  ssa_options opt;
  ssa_rank_result *ranks;
  size_t nranks;
  ssa_strtab names;        /* kernel and group names across ranks */
  ssa_kernel_row *kernels; /* by total time, descending */
  size_t nkernels;
  int64_t kernel_time_total;
  ssa_coll_instance *colls;
  size_t ncolls;
  ssa_coll_member *kept_members; /* the pipeline waits' sorted members, for the matching */
  size_t nkept_members;
  ssa_coll_summary *coll_summaries;
  size_t ncoll_summaries;
  uint64_t colls_incomplete; /* instances with missing members: left out of statistics */
  uint64_t colls_inferred;   /* instances matched by order on an NCCL stream (no metadata) */
  uint64_t colls_refused;    /* ... on streams whose ranks disagree: left out of statistics */
  ssa_late *lates;           /* late arrivals beyond the schedule (collectives.c) */
  size_t nlates;
  ssa_culprit *culprits; /* beyond noise first, then by caused wait (culprit_verdict.c) */
  size_t nculprits;
  ssa_culprit_verdict culprit_verdict;
  uint64_t culprit_steps_total; /* (rank, step) pairs walked back */
  ssa_run_step *steps;
  size_t nsteps;
  int64_t step_time_median;      /* -1 if no steps */
  int64_t device_latency_median; /* median over steps with launched work; -1 none */
  /* MFU / HFU (NaN when the metadata is absent) */
  double model_flops_per_step, hardware_flops_per_step, peak_flops_per_device, tokens_per_step;
  int flops_world;
  double mfu, hfu;
  ssa_op_flops_mfu op_mfu; /* when the metadata has no FLOPs (op_perf.c) */
  /* memory (bytes; -1 when absent) */
  double mem_predicted_total, mem_predicted_parameters, mem_predicted_gradients,
      mem_predicted_optimizer, mem_predicted_activations, mem_measured_peak;
  /* schedule */
  char schedule_name[64];
  int schedule_stages, schedule_microbatches, schedule_virtual;
  double bubble_theory;
  int64_t launch_gap_ns;
  /* mixture of experts (moe_load.c; nmoe_steps 0 when the run has no moe.load marks) */
  ssa_moe_step *moe_steps;
  size_t nmoe_steps;
  int moe_experts, moe_ep;
  int64_t *moe_expert_tokens;      /* [moe_experts] over the selected steps, layers, groups */
  int64_t *moe_step_expert_tokens; /* [nmoe_steps][moe_experts]: each step's, all layers, groups */
  double moe_expert_imbalance_mean, moe_rank_imbalance_mean;
  struct ssa_critical_path *critical_path; /* each step's critical path (critical_path.h) */
  char **warnings;
  size_t nwarnings, warnings_cap;
  int64_t step_lo, step_hi; /* the run's step numbers, for the message of an empty --steps */
  int reading_for;          /* SSA_READ_*: the phase whose per-rank passes read ranks now */
} ssa_analysis;

int ssa_analyze(const ssa_run *run, const ssa_options *opt, ssa_analysis *out,
                stepscope_error *err);
/* An analysis of run's ranks with nothing computed (opt NULL: the defaults), as ssa_analyze
 * begins. 0 or STEPSCOPE_E_NOMEM; free with ssa_analysis_free either way. */
int ssa_analysis_begin(ssa_analysis *a, const ssa_run *run, const ssa_options *opt);
void ssa_analysis_free(ssa_analysis *a);
/* Whether a rank of that number was loaded (a --rank that is not is a usage
 * error; other analysis errors are not). */
int ssa_run_has_rank(const ssa_run *run, int rank);
/* Runs `pass` on rank i with its events: at hand in the normal mode, read for the pass and
 * dropped after it in the bounded mode (ssa_options.rank_events). 0 or a status. */
int ssa_with_rank_events(ssa_analysis *a, size_t i,
                         int (*pass)(ssa_analysis *a, size_t i, void *arg), void *arg);
int ssa_analysis_warn(ssa_analysis *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A name of the analysis string table (kernel and communicator names). */
static inline const char *ssa_name(const ssa_analysis *a, uint32_t id) {
  return ssa_strtab_get(&a->names, id);
}

/* A rank time converted to the run's aligned, origin-relative time. */
static inline int64_t ssa_rel_time(const ssa_run *run, const ssa_rank *r, int64_t t) {
  return t + r->offset_ns - run->origin;
}

/* ---- building blocks (exposed for tests) ---- */

/* Finds the steps of a rank (all of them, unfiltered), sorted by number,
 * with their windows (a partition of the timeline) and device latencies. */
int ssa_find_steps(const ssa_rank *r, const char *user_range_name, ssa_step **out, size_t *n);
/* The id of `name` in rank r's string table (kept when its events are dropped), 0: none. */
uint32_t ssa_rank_string_id(const ssa_rank *r, const char *name);
/* Whether rank r holds a range named `name` (what --step-range names): its events loaded. */
int ssa_rank_has_range(const ssa_rank *r, const char *name);

/* Which steps' host ranges contain a time (steps.c): an op belongs to every
 * step whose range [range_start, range_end) contains its launch call's
 * start, so overlapping or nested step ranges are all credited. Built over
 * an array of steps (not owned); O(log n + matches) per query. */
typedef struct ssa_step_index {
  const ssa_step *steps;
  size_t n;
  uint32_t *order; /* step indices by range_start */
  int64_t *starts; /* range_start in that order */
  int64_t *tree;   /* max range_end over subtrees (heap layout) */
  size_t leaves;   /* tree leaves (power of two) */
  int disjoint;    /* no two ranges overlap: one candidate per query */
  size_t hint[4];  /* recent answers' positions: queries come in near time
                      order per stream, streams interleaved */
  unsigned next_hint;
  /* disjoint ranges: the last answer looked up holds for every t in
   * [fast_lo, fast_hi) (inside its range, or in the gap after it): the step,
   * or SSA_NONE. Empty at first. One compare pair answers the next query of
   * the same step: a call per op, and the hints cost a chain of dependent
   * loads and a mispredicted branch per slot tried. */
  int64_t fast_lo, fast_hi;
  uint32_t fast_step;
} ssa_step_index;

int ssa_step_index_build(ssa_step_index *ix, const ssa_step *steps, size_t n);
void ssa_step_index_free(ssa_step_index *ix);
/* Writes the indices of the steps containing t into out (up to cap) and
 * returns how many contain it (which may exceed cap). */
size_t ssa_step_index_stab(ssa_step_index *ix, int64_t t, uint32_t *out, size_t cap);

/* The same, answered inline when the ranges are disjoint and t falls in the
 * previous query's slot (the common case: launches come in time order). */
static inline size_t ssa_step_index_stab_fast(ssa_step_index *ix, int64_t t, uint32_t *out,
                                              size_t cap) {
  if (ix->disjoint) {
    if (t >= ix->fast_lo && t < ix->fast_hi) {
      if (ix->fast_step == SSA_NONE) return 0;
      if (cap) out[0] = ix->fast_step;
      return 1;
    }
    for (int k = 0; k < 4; k++) {
      size_t h = ix->hint[k];
      if (h > 0 && h <= ix->n && ix->starts[h - 1] <= t && (h == ix->n || ix->starts[h] > t)) {
        if (t >= ix->steps[ix->order[h - 1]].range_end) return 0;
        if (cap) out[0] = ix->order[h - 1];
        return 1;
      }
    }
  }
  return ssa_step_index_stab(ix, t, out, cap);
}

/* The step an op launched at t belongs to: among the ranges containing t,
 * the one that started last (ties: the higher position in the index's
 * order). SSA_NONE if none. */
uint32_t ssa_step_index_owner(ssa_step_index *ix, int64_t t);
/* The latest start among members of one collective on a pipeline stage (stage >= 0), its
 * stage, and the latest on any other stage (pipeline_waits.c): one pass answers "the latest
 * start of a member on a stage other than S" for every S (ssa_latest_on_other_stage;
 * INT64_MIN: none) instead of comparing every member with every other. */
typedef struct ssa_stage_latest {
  int64_t start, start_other_stage;
  int stage;
} ssa_stage_latest;
ssa_stage_latest ssa_latest_by_stage(const int *stage, const int64_t *start, size_t n);
int64_t ssa_latest_on_other_stage(const ssa_stage_latest *b, int stage);
/* Pipeline waits inside collectives (pipeline_waits.c): fills every
 * rank's stage_of_waits and coll_wait_end; runs before the per-rank metrics. */
int ssa_rank_pipeline_stage(const ssa_rank *r);
int ssa_find_pipeline_waits(ssa_analysis *a);

/* Per-rank metrics (breakdown.c). */
/* The query points of a rank's windows (coverage.c): the ends of its totals window and of
 * every step window, sorted and unique, in a new array of *n; NULL when out of memory. */
int64_t *ssa_window_points(const ssa_rank_result *rr, size_t *n);
/* The coverage pass of an analysed rank over its totals window again, every
 * constant-coverage piece handed to emit (coverage.c; the exports' derived
 * tracks). Nothing when the window is empty. */
void ssa_cover_replay(const ssa_rank_result *rr,
                      void (*emit)(void *ctx, int64_t s, int64_t e, unsigned mask), void *ctx);
int ssa_analyze_rank(ssa_analysis *a, ssa_rank_result *rr);
/* Whether --steps keeps step `number`; the totals window's bounds of rank r's selected steps
 * (none: its ops' span, 0 without ops), as ssa_analyze_rank sets them. */
int ssa_step_selected(const ssa_options *o, int64_t number);
void ssa_totals_bounds(const ssa_rank *r, const ssa_step *steps, size_t nsteps, int64_t *start,
                       int64_t *end);
/* The device-level idle gaps of an analysed rank inside its totals window,
 * in time order, each with its cause (SSA_IDLE_*; the classification of the
 * idle breakdown), for the exports' idle overlay (breakdown.c). 0 or
 * STEPSCOPE_E_NOMEM. */
int ssa_device_idle_gaps(const ssa_analysis *a, const ssa_rank_result *rr,
                         void (*emit)(void *ctx, int64_t s, int64_t e, uint32_t cause), void *ctx);

/* Cross-rank parts. */
int ssa_match_collectives(ssa_analysis *a);
/* Bubble causes (bubble_causes.c), in three parts: the per-rank pass fills a pipeline rank's
 * items (a rank with a stage) into its summary; after the matching, a second per-rank pass measures
 * each pipeline window's transfer and host parts from the rank's ops (ssa_rank_bubble_transfers);
 * ssa_bubble_causes then splits the rest of every pipeline rank's bubble by simulating the
 * schedule on the summaries' items. 0 or STEPSCOPE_E_NOMEM. */
int ssa_rank_pipeline_items(const ssa_analysis *a, ssa_rank_result *rr);
int ssa_rank_bubble_transfers(ssa_rank_result *rr);
int ssa_bubble_causes(ssa_analysis *a);
/* The late upstream's sources (late_upstream.c): names, per pipeline rank and window, the rank
 * and phase its waits on late sends of matched pipeline transfers come from. In parts; the
 * cross-rank ones read the summaries only. ssa_upstream_begin, after the matching (the windows'
 * sources cleared; the transfers' partners; *out NULL when the run has no pipeline rank);
 * ssa_upstream_rank_waits, per pipeline rank from its events (its receives that waited on a
 * late send; ssa_analyze does it in the bubble transfers' pass); then, after
 * ssa_bubble_causes, ssa_late_upstream_sources: each rank waited on answers once over its
 * partners' wait spans (the chains followed there by clipping), then rounds of
 * ssa_upstream_round (the next round's questions, what no such span holds; *asked 0: none
 * left) each followed by ssa_upstream_rank_answers on the ranks asked something
 * (ssa_upstream_rank_asked; from their events, through ssa_with_rank_events on a pool of
 * threads), then ssa_upstream_name_sources (the windows' sources from the answers). 0 or
 * STEPSCOPE_E_NOMEM. */
typedef struct ssa_upstream ssa_upstream;
int ssa_upstream_begin(ssa_analysis *a, ssa_upstream **out);
int ssa_upstream_rank_waits(ssa_upstream *u, size_t rank_idx);
int ssa_late_upstream_sources(ssa_upstream *u);
int ssa_upstream_round(ssa_upstream *u, size_t *asked);
int ssa_upstream_rank_asked(const ssa_upstream *u, size_t rank_idx);
int ssa_upstream_rank_answers(ssa_upstream *u, size_t rank_idx);
int ssa_upstream_name_sources(ssa_upstream *u);
void ssa_upstream_free(ssa_upstream *u);
/* Sets every window's late upstream to none (-1); whether the run has a pipeline rank. */
int ssa_late_upstream_clear(ssa_analysis *a);
/* Walks each late arrival back to the phase that made it late (culprits.c): rounds of
 * ssa_culprit_walk, each followed by ssa_rank_phase_answers on every rank (pool of threads),
 * until a walk had every answer. */
int ssa_find_culprits(ssa_analysis *a);
/* What the walk asks of a rank's events: its device time by phase (SSA_PHASE_*) over [t0, t1)
 * of its trace clock (SSA_PHASE_SPAN), or between its step windows t0 and t1 (indices; from
 * the previous step's last backward op to this step's first forward op: SSA_PHASE_BETWEEN_STEPS;
 * zeros when there is no such gap). */
enum { SSA_PHASE_SPAN, SSA_PHASE_BETWEEN_STEPS };
typedef struct ssa_phase_request {
  uint32_t rank_idx;
  int kind;
  int64_t t0, t1;
  int answered;
  int64_t time[SSA_PHASE_N];
} ssa_phase_request;
typedef struct ssa_phase_requests {
  ssa_phase_request *v; /* by (rank_idx, kind, t0, t1), unique */
  size_t n, cap;
  size_t *first;              /* [nranks + 1]: rank i's questions are v[first[i], first[i + 1]) */
  ssa_phase_request *pending; /* the current walk's questions not in v */
  size_t npending, pending_cap;
} ssa_phase_requests;
/* One walk over the late arrivals, reading no event: with every answer in q it fills the
 * culprit rows and verdict (*unanswered 0); else it adds its questions to q and says how many.
 * 0 or STEPSCOPE_E_NOMEM. */
int ssa_culprit_walk(ssa_analysis *a, ssa_phase_requests *q, size_t *unanswered);
/* The questions the culprit walk could ask of rank rr (its events loaded, its windows made)
 * when it arrives late or is a late rank's peer, answered and packed: per collective record,
 * the span from its end of the communicator's previous instance (else from the start of its
 * step window) to its arrival; per pair of consecutive step windows, the time between them (a
 * pipeline stage's). Not the chase's spans (another stage's over the late rank's window, in
 * its clock). 0 or STEPSCOPE_E_NOMEM. */
int ssa_rank_span_answers(const ssa_rank_result *rr, ssa_packed_answers *out);
/* Answers the rank's unanswered questions in q from its events (per-rank pass). */
int ssa_rank_phase_answers(const ssa_analysis *a, size_t rank_idx, ssa_phase_requests *q);
void ssa_phase_requests_free(ssa_phase_requests *q);
/* Judges the culprit rows against the run's step-to-step noise and orders them
 * (culprit_verdict.c); takes the (rank, step) effects the walk-back measured. */
int ssa_judge_culprits(ssa_analysis *a, ssa_culprit_effect *effects, size_t n);
/* The culprit rows' order (culprit_order.c): the verdict's rank first, then ranks beyond noise,
 * then by caused wait; within a rank, by steps, then caused wait. Not transitive: the order is
 * that of an insertion sort of rows in their given order (the _by_insertion reference,
 * quadratic), reached by ssa_order_culprit_rows in O(n sqrt n). 0 or STEPSCOPE_E_NOMEM. */
int ssa_culprit_row_before(const ssa_culprit *x, const ssa_culprit *y, int top_rank);
void ssa_order_culprit_rows_by_insertion(ssa_culprit *rows, size_t n, int top_rank);
int ssa_order_culprit_rows(ssa_culprit *rows, size_t n, int top_rank);
int ssa_build_kernel_table(ssa_analysis *a);
int ssa_read_run_metadata(ssa_analysis *a);
/* The model FLOPs per step of the run's trainer metadata, NaN when it has none (then
 * ssa_analyze computes MFU from the ops' FLOPs); reads only the ranks' metadata. */
double ssa_metadata_model_flops(const ssa_analysis *a);
/* Expert load imbalance per step from the trainer's moe.load marks (moe_load.c). */
int ssa_moe_load(ssa_analysis *a);

/* The collective records of every rank's summary as members of their instances, sorted by
 * ssa_cmp_coll_member (rank_summary.c; *out NULL when there are none). 0 or STEPSCOPE_E_NOMEM. */
int ssa_summary_coll_members(const ssa_analysis *a, ssa_coll_member **out, size_t *n);
/* The same, or a->kept_members, taken (the caller frees them either way). */
int ssa_take_coll_members(ssa_analysis *a, ssa_coll_member **out, size_t *n);

/* A summary's trace time converted to the run's aligned, origin-relative time. */
static inline int64_t ssa_summary_rel_time(const ssa_analysis *a, const ssa_rank_summary *s,
                                           int64_t t) {
  return t + s->offset_ns - a->run->origin;
}

/* busbw factor of SPEC §4 for an op on n ranks. */
double ssa_busbw_factor(uint32_t op, uint32_t n);

#endif
