/*
 * ssa_model.h — the analyzer's in-memory model of a run, and the builder that
 * fills it.
 *
 * A run is a set of ranks. Each rank holds compact arrays (no linked lists,
 * string ids instead of strings) of:
 *   - lanes: GPU streams, CPU-backend streams and host threads;
 *   - ops: work executed on a device lane (kernel, memcpy, memset, host op),
 *     48 bytes each, classified compute / comm / memcpy / memset;
 *   - apis: launch calls and host enqueues on host threads (32 bytes each);
 *   - ranges, collectives, syncs, counters, clock anchors and metadata.
 *
 * The model is source-agnostic: a *source* (our trace reader in
 * trace_source.c, later a Kineto importer) creates a rank with
 * ssa_rank_init, interns its strings with ssa_rank_intern and feeds records in
 * the record model of stepscope.h through ssa_rank_add_record, whose string
 * ids must be ids returned by ssa_rank_intern (the trace source writes its
 * bulk records straight into the arrays instead, staging ops per lane:
 * ssa_op_stage.h). ssa_rank_finish then sorts the
 * ops, joins them to their launch calls by correlation id, links collectives
 * to the ops that executed them and classifies every op (evidence first:
 * collective records and host-op categories, then NCCL kernel names).
 *
 * Times stay in the rank's own trace clock (int64 ns); clock alignment
 * (clock_align.c) computes one offset per rank that maps them onto the run's
 * common time base.
 */
#ifndef SSA_MODEL_H
#define SSA_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "comm_rules.h"
#include "ssa_io.h"
#include "stepscope.h"
#include "trace_metadata.h"

#define SSA_NONE       UINT32_MAX
#define SSA_LANE_CACHE 32 /* recent (kind, id) -> lane lookups, direct-mapped */

typedef struct ssa_strtab {
  char *bytes; /* NUL-terminated strings back to back */
  size_t bytes_len, bytes_cap;
  uint32_t *offsets; /* offsets[id] into bytes; id 0 is "" */
  uint32_t count, cap;
  uint32_t *slots; /* open-addressing hash of ids, 0 = empty */
  uint32_t nslots;
} ssa_strtab;

typedef enum ssa_lane_kind {
  SSA_LANE_GPU = STEPSCOPE_STREAM_GPU,
  SSA_LANE_CPU = STEPSCOPE_STREAM_CPU,
  SSA_LANE_HOST = STEPSCOPE_STREAM_HOST_THREAD
} ssa_lane_kind;

typedef struct ssa_lane {
  uint64_t id;   /* stream id or OS thread id */
  uint32_t name; /* string id, 0 if unnamed */
  uint32_t device;
  uint8_t kind;     /* ssa_lane_kind */
  uint8_t declared; /* named by a STREAM record */
  uint8_t by_name;  /* its id is no number to show, the name says what it is (a Kineto thread
                       id that was a string: its hash; a GPU annotation lane: the importer's) */
} ssa_lane;

typedef enum ssa_op_kind {
  SSA_OP_KERNEL = 1,
  SSA_OP_MEMCPY = 2,
  SSA_OP_MEMSET = 3,
  SSA_OP_HOST = 4
} ssa_op_kind;

/* Activity classes of SPEC §4. */
typedef enum ssa_class {
  SSA_CLS_COMPUTE = 1,
  SSA_CLS_COMM = 2,
  SSA_CLS_MEMCPY = 3,
  SSA_CLS_MEMSET = 4
} ssa_class;

typedef struct ssa_op {
  int64_t start, end;
  uint64_t corr;   /* correlation id, 0 if none */
  uint64_t bytes;  /* memcpy/memset/host-op bytes, 0 otherwise */
  uint32_t name;   /* string id (kernel or host-op name), 0 for copies */
  uint32_t launch; /* index into apis, SSA_NONE if not joined */
  uint32_t coll;   /* index into colls, SSA_NONE if none */
  uint16_t lane;
  uint8_t kind; /* ssa_op_kind */
  uint8_t cls;  /* ssa_class */
} ssa_op;

/* A new op, not joined to its launch call yet; an end before the start is
 * taken as the start. `coll`: SSA_NONE, or (staged ops, ssa_op_stage.h) a
 * pending oplink index. */
static inline ssa_op ssa_op_make(int64_t s, int64_t e, uint64_t corr, uint64_t bytes, uint32_t name,
                                 uint32_t coll, uint32_t lane, uint8_t kind, uint8_t cls) {
  return (ssa_op){.start = s,
                  .end = e < s ? s : e,
                  .corr = corr,
                  .bytes = bytes,
                  .name = name,
                  .launch = SSA_NONE,
                  .coll = coll,
                  .lane = (uint16_t)lane,
                  .kind = kind,
                  .cls = cls};
}

typedef struct ssa_api {
  int64_t start, end;
  uint64_t corr;
  uint32_t name;
  uint16_t lane; /* host-thread lane */
  uint8_t api_kind;
  uint8_t pad;
} ssa_api;

typedef struct ssa_range {
  int64_t start, end;
  uint64_t payload;
  uint32_t name, domain, args;
  uint16_t lane;
  uint8_t payload_kind;
  uint8_t pad;
} ssa_range;

/* An importer's flag of a collective record, beside the trace format's STEPSCOPE_COLL_F_*: a
 * host point-to-point call whose range spans until its work was waited for, not until its
 * transfer ended (gloo's `gloo:send`; kineto_p2p.c), so its duration says nothing of the
 * transfer (collectives.c). */
#define SSA_COLL_F_SPANS_WAIT 0x80000000u

typedef struct ssa_coll {
  int64_t start, end; /* record times */
  uint64_t comm_id, seq, bytes, count, corr, stream;
  uint32_t op, datatype, comm_rank, comm_size, name, flags;
  int32_t peer;
  uint32_t op_index; /* the op that executed it, SSA_NONE if none */
} ssa_coll;

/* A wait. A trace that names what was awaited (Kineto's cuda_sync events) fills `on_corr`:
 * the wait is for the ops of stream `on_stream` (0: of every device lane) launched before
 * correlation on_corr (the cudaEventRecord's, or the synchronising call's own), and `corr`
 * is the waiting call's correlation (a stream's wait gates that stream's first op launched
 * after it). Our tracer's records name no awaited work (on_corr 0): they are matched by
 * time. */
typedef struct ssa_sync {
  int64_t start, end;
  uint64_t corr;      /* the waiting call's correlation id, 0 if none */
  uint64_t on_corr;   /* awaited: on_stream's ops launched before this correlation; 0 unknown */
  uint64_t on_stream; /* the awaited stream's id, 0: every device lane */
  uint32_t lane;      /* waiting device lane, SSA_NONE for host-side waits */
  uint32_t sync_kind;
} ssa_sync;

typedef struct ssa_counter {
  int64_t time;
  double value;
  uint32_t name, device;
} ssa_counter;

/* A host op that executed collective (comm_id, seq); resolved in finish. */
typedef struct ssa_oplink {
  uint64_t comm_id, seq;
  uint32_t op;
} ssa_oplink;

typedef struct ssa_meta {
  char *key, *value;
} ssa_meta;

/* An allocation or a free of a memory profile (Kineto "[memory]" events, a stepscope trace's
 * MEMORY records; kept only when asked: ssa_import_options.op_memory), in file order. */
typedef struct ssa_alloc {
  int64_t time;
  int64_t bytes;     /* > 0 allocated, < 0 freed */
  int64_t allocated; /* the device's total allocated after it */
  int64_t reserved;  /* ... and reserved (the caching allocator's), 0 on the CPU, -1 not known */
  uint64_t addr;
  int16_t device_type; /* Kineto's: 0 CPU, 1 CUDA ... */
  int16_t device_id;   /* -1 for the CPU */
  uint16_t lane;       /* its host thread (UINT16_MAX: not known, as in MEMORY records) */
} ssa_alloc;

/* A MARK the analysis reads (now only the trainer's per-step expert load, `moe.load`). */
typedef struct ssa_mark {
  int64_t time;
  uint32_t args; /* string id of its JSON args */
} ssa_mark;

/* The trainer's metadata (model/trace_metadata.h), decoded once when the rank is finished
 * (trainer_meta.c) from the last value of each key: metrics, diff and plan read these fields,
 * never the JSON text. `present`: the key was declared; a number is NaN when the object does
 * not carry it (or carries something that is not a number). */
#define SSA_META_FIELD(field, path, lo, hi) double field;
typedef struct ssa_meta_layout {
  int present;
  TM_LAYOUT_NUMBERS(SSA_META_FIELD)
} ssa_meta_layout;
typedef struct ssa_meta_schedule {
  int present;
  int has_name;
  char name[64];
  TM_SCHEDULE_NUMBERS(SSA_META_FIELD)
} ssa_meta_schedule;
typedef struct ssa_meta_flops {
  int present;
  TM_FLOPS_NUMBERS(SSA_META_FIELD)
} ssa_meta_flops;
typedef struct ssa_meta_memory {
  int present;
  TM_MEMORY_NUMBERS(SSA_META_FIELD)
} ssa_meta_memory;
typedef struct ssa_meta_machine {
  int present;
  TM_MACHINE_NUMBERS(SSA_META_FIELD)
} ssa_meta_machine;
#undef SSA_META_FIELD
typedef struct ssa_trainer_meta {
  ssa_meta_layout layout;
  ssa_meta_schedule schedule;
  ssa_meta_flops flops;
  ssa_meta_memory memory;
  ssa_meta_machine machine; /* written by the tracer, not the trainer */
} ssa_trainer_meta;

/* A decoded number, or `otherwise` when the trace did not carry it. */
static inline double ssa_meta_or(double v, double otherwise) {
  return v == v ? v : otherwise;
}

typedef struct ssa_rank {
  /* identity (from the source's header) */
  int rank, world_size, local_rank;
  int64_t pid;
  uint32_t clock_domain;
  int64_t header_start;
  char *path, *hostname, *device_name, *producer, *config_json;

  ssa_strtab strings;

  ssa_lane *lanes;
  uint32_t nlanes, lanes_cap;
  uint32_t *lane_slots;
  uint32_t lane_nslots; /* hash (kind,id) -> lane+1 */
  uint64_t lane_cache_id[SSA_LANE_CACHE];
  uint32_t lane_cache[SSA_LANE_CACHE]; /* lane + 1 */

  ssa_op *ops;
  size_t nops, ops_cap;
  ssa_api *apis;
  size_t napis, apis_cap;
  ssa_range *ranges;
  size_t nranges, ranges_cap;
  ssa_coll *colls;
  size_t ncolls, colls_cap;
  ssa_sync *syncs;
  size_t nsyncs, syncs_cap;
  ssa_counter *counters;
  size_t ncounters, counters_cap;
  stepscope_clock_anchor *anchors;
  size_t nanchors, anchors_cap;
  ssa_meta *meta;
  size_t nmeta, meta_cap;
  ssa_mark *moe_marks;
  size_t nmoe_marks, moe_marks_cap; /* `moe.load` marks (moe_load.c) */
  ssa_oplink *oplinks;
  size_t noplinks, oplinks_cap; /* freed by finish */
  ssa_alloc *allocs;
  size_t nallocs, allocs_cap; /* memory events (op_memory imports only) */
  /* host ops that carry their inputs (the trainer's compute operations: args in the form of
   * PyTorch's record_shapes), as ranges on their CPU stream's lane (domain 0), in file
   * order: the ops of `stepscope ops` (op_perf.c) */
  ssa_range *op_ranges;
  size_t nop_ranges, op_ranges_cap;

  uint64_t marks, memory_events, overheads, unknown_records;
  uint64_t dropped[8];        /* by stepscope_drop_source */
  uint64_t memory_peak_bytes; /* max in_use_bytes of MEMORY records */
  uint64_t records;           /* records fed */
  uint64_t damaged_regions;   /* damaged parts of the file skipped (their records lost) */
  uint64_t damaged_bytes, file_bytes;

  char **warnings;
  size_t nwarnings, warnings_cap;

  /* set before the source fills the rank (the loader does): the user's
   * classification rules (comm_rules.h), NULL for none; not owned */
  const ssa_comm_rules *comm_rules;

  /* filled by ssa_rank_finish */
  int finished;
  ssa_trainer_meta tmeta;    /* the trainer's metadata, decoded (trainer_meta.c) */
  uint64_t joined_ops;       /* ops joined to a launch call */
  uint64_t comm_by_evidence; /* ops linked to a collective record by correlation id */
  uint64_t comm_by_name;     /* ops that are communication by a built-in family */
  ssa_comm_tally tally;      /* what each rule classified (comm_rules.h) */

  /* filled by clock alignment */
  int64_t offset_ns; /* aligned = trace time + offset_ns (before origin) */

  int has_trace_stop; /* the source knows where the profiling session ended */
  int64_t trace_stop; /* ... there (Kineto: the end of the `Trace` span) */
  int host_timeline;  /* no device activity: its ops are the host's timeline
                         (Kineto import, kineto_host.c) */
  int close_state;    /* stepscope_close_state of its file (0: unknown) */
  int close_signal;   /* the signal, for STEPSCOPE_CLOSE_SIGNAL */

  int failed; /* the source could not load it at all */
  char error[512];

  /* set by ssa_rank_drop_events (rank_drop.c): its events are gone, its shell and the input
   * of clock alignment are kept (`align_input`, owned), and the latest trace time of its timed
   * data (ssa_rank_last_time; has_last_time 0: not known; a shell read from a partial has it,
   * docs/partial-format.md version 3) */
  int events_dropped;
  struct ssa_rank_align *align_input;
  int has_last_time;
  int64_t last_time;
  /* set by the loader (import/run_load.c): which of its sources read the file, so that a
   * bounded analysis can read it again (ssa_rank_reload), and the file's place in the
   * loader's list (what ssa_load_options.each_rank was told) */
  int source_index;
  size_t file_index;
} ssa_rank;

/* ---- strings ---- */
void ssa_strtab_init(ssa_strtab *t);
void ssa_strtab_free(ssa_strtab *t);
/* Interns `len` bytes; returns an id >= 1, or 0 on allocation failure. */
uint32_t ssa_strtab_intern(ssa_strtab *t, const char *s, size_t len);
/* The string of an id; "" for 0 or an unknown id. */
const char *ssa_strtab_get(const ssa_strtab *t, uint32_t id);

/* ---- rank builder ---- */
int ssa_rank_init(ssa_rank *r); /* 0 or STEPSCOPE_E_NOMEM */
void ssa_rank_free(ssa_rank *r);
uint32_t ssa_rank_intern(ssa_rank *r, const char *s);
const char *ssa_rank_str(const ssa_rank *r, uint32_t id);
/* Copies the header's identity and strings. */
int ssa_rank_set_header(ssa_rank *r, const stepscope_header *h);
/* Adds one record (string ids already in r->strings). STRING and HEADER
 * records are ignored; METADATA is copied. Returns 0 or a negative status. */
int ssa_rank_add_record(ssa_rank *r, const stepscope_record *rec);
/* Adds one allocation or free of a memory profile (rank_allocs.c): the alloc, and the
 * device's allocated (and reserved) bytes as COUNTERs. 0 or STEPSCOPE_E_NOMEM. */
int ssa_rank_add_alloc(ssa_rank *r, const ssa_alloc *a);
/* Keeps a host op's inputs (args: a string id of the rank) as an op range on its lane
 * (ssa_rank.op_ranges). 0 or STEPSCOPE_E_NOMEM. */
int ssa_rank_keep_op_inputs(ssa_rank *r, int64_t start, int64_t end, uint32_t name, uint32_t args,
                            uint32_t lane);
/* Records a warning (printf-style). Returns 0 or STEPSCOPE_E_NOMEM. */
int ssa_rank_warn(ssa_rank *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sorts, joins by correlation, links collectives, classifies. */
int ssa_rank_finish(ssa_rank *r);
/* Clamps every time to +-(2^62 - 1) ns with a warning (time_bounds.c), so
 * that differences of times never overflow; called by ssa_rank_finish. */
int ssa_rank_bound_times(ssa_rank *r);
/* Lane index for (kind, id), created on demand; SSA_NONE on failure. */
uint32_t ssa_rank_lane(ssa_rank *r, uint8_t kind, uint64_t id);
/* Metadata value for a key (the last one set), or NULL. */
const char *ssa_rank_meta(const ssa_rank *r, const char *key);
/* Decodes the trainer's metadata into r->tmeta (trainer_meta.c); ssa_rank_finish calls it. */
void ssa_rank_decode_trainer_meta(ssa_rank *r);
/* Theoretical bubble fraction of a pipeline schedule (trainer_meta.c); NaN if unknown. */
double ssa_bubble_theory(const char *name, int stages, int microbatches, int virtual_stages);

/* Whether a kernel name is one of NCCL's (ncclKernel_*, ncclDevKernel_*,
 * ncclSymkDevKernel_*), and whether it is a send/recv kernel. */
int ssa_is_nccl_kernel_name(const char *name);
int ssa_is_nccl_p2p_kernel_name(const char *name);
/* Whether a host range is PyTorch's point-to-point call or gloo's / NCCL's host range of
 * one (c10d::send, c10d::recv_, gloo:send, gloo:recv, nccl:send, nccl:recv): 1 a send,
 * 2 a receive, 0 neither. */
int ssa_host_p2p_call(const char *name);

/* ---- the run ---- */
typedef struct ssa_run {
  char *dir;
  ssa_rank *ranks; /* sorted by rank number */
  size_t nranks;
  int64_t origin; /* aligned time of the run's first event */
  char **warnings;
  size_t nwarnings, warnings_cap;
  /* alignment (clock_align.c) */
  int reference_rank;
  int64_t *anchor_offset;   /* per rank index: offset from clock anchors */
  int64_t *refine_offset;   /* per rank index: correction from collective ends */
  uint32_t *refine_samples; /* matched collectives used for the correction */
  int refined;
} ssa_run;

/* Builds a run from ranks filled by the caller (tests, generators): takes
 * ownership of `ranks`, finishes them and aligns clocks (run.c). */
int ssa_run_from_ranks(ssa_run *run, ssa_rank *ranks, size_t nranks, stepscope_error *err);
void ssa_run_free(ssa_run *run);
/* Completes a run whose ranks are finished (run.c): sorts them by rank number, reports
 * duplicate and missing ranks, aligns clocks and reports unclosed traces. The loader
 * (import/) and ssa_run_from_ranks end with it. */
int ssa_run_assemble(ssa_run *run, stepscope_error *err);
/* Prints one line per rank whose file had damaged parts skipped (records
 * lost), each starting with `prefix` (run_losses.c); returns the count. */
size_t ssa_run_print_losses(const ssa_run *run, FILE *f, const char *prefix);
int ssa_run_warn(ssa_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Run warnings for ranks whose trace was not closed by its writer (crash or
 * kill) or was closed on a signal (trace_closed.c); after alignment. */
void ssa_run_note_unclosed(ssa_run *run);
/* The latest trace time (its clock offset not added) of a rank's timed data, from its events:
 * ops, API calls, ranges, collective records, syncs, counters; INT64_MIN if none. */
int64_t ssa_rank_last_time(const ssa_rank *r);

/* What clock alignment reads of a finished rank (clock_align.c), made from it by
 * ssa_rank_align_input: small (24 B per collective record), so that a loader can keep it
 * once the rank's events are gone. */
typedef struct ssa_align_end {
  uint64_t comm_id, seq;
  int64_t end; /* the executing op's end when linked, else the record's (trace clock) */
} ssa_align_end;
typedef struct ssa_rank_align {
  int rank;
  int has_offset;        /* anchors, or a REALTIME trace clock */
  int64_t anchor_offset; /* the median over its anchors of (realtime - trace); 0 REALTIME */
  int any_event;
  int64_t first_event; /* its earliest event; the header's start when it has none */
  ssa_align_end *ends; /* its collective records but p2p ones (which do not end together) */
  size_t nends;
} ssa_rank_align;

/* 0 or STEPSCOPE_E_NOMEM (nothing to free then). */
int ssa_rank_align_input(const ssa_rank *r, ssa_rank_align *out);
void ssa_rank_align_free(ssa_rank_align *a);
/* Clock alignment (clock_align.c): fills offsets, origin and warnings from the ranks' inputs
 * (in[i] of run->ranks[i]; reads nothing else of a rank but its offset_ns, which it sets). */
int ssa_run_align_inputs(ssa_run *run, const ssa_rank_align *in);
/* The same from the run's finished ranks (a rank whose events were dropped gives its kept
 * input). */
int ssa_run_align(ssa_run *run);

/* Frees a finished rank's events (rank_drop.c) — ops, API calls, ranges, collective
 * records, syncs, counters, anchors, memory events, op inputs — once its own passes are
 * done, keeping its shell: identity, metadata (decoded too), lanes, strings, `moe.load`
 * marks, warnings, counts of records, and `nops` and `nanchors` (the report prints them; `ops` and
 * `anchors` are NULL).
 * The input of clock alignment is taken first and kept (align_input). 0 or
 * STEPSCOPE_E_NOMEM (the rank unchanged then). */
int ssa_rank_drop_events(ssa_rank *r);

/* A collective record of one of a run's ranks as a member of its instance
 * (coll_members.c): the members of one instance (same comm_id and seq) on
 * every rank sort next to each other. */
typedef struct ssa_coll_member {
  uint64_t comm_id, seq;
  uint32_t rank_idx; /* index in run->ranks, and in an analysis' ranks */
  uint32_t coll_idx; /* index in that rank's colls */
} ssa_coll_member;

/* qsort order of members: comm_id, seq, rank, record (a total order). */
int ssa_cmp_coll_member(const void *a, const void *b);
/* Sorts n members into ssa_cmp_coll_member order (coll_member_sort.c): in
 * linear time when they were built rank by rank, record by record (as every
 * builder here does), by qsort otherwise. Cannot fail. */
void ssa_sort_coll_members(ssa_coll_member *m, size_t n);
/* Every collective record of the run's ranks as a member, in a new array
 * sorted by ssa_cmp_coll_member (*out NULL when there are none). 0 or
 * STEPSCOPE_E_NOMEM. */
int ssa_run_coll_members(const ssa_run *run, ssa_coll_member **out, size_t *n);

/* The order of a finished rank's ops: by start, longer first, lane, then
 * the record's bytes (a total order). */
int ssa_cmp_ops(const void *a, const void *b);

#endif
