/*
 * critical_path.h — the dependency graph of a run's steps and the critical path walked over
 * it (docs/metrics.md "Critical path"). Three sub-concerns of the metrics floor, each its own
 * file:
 *
 *   cp_graph.c       the graph: every op and every host call of every rank is a node with a
 *                    start and an end (aligned run time, so nodes of different ranks compare);
 *                    its predecessors are computed on demand from per-rank indices built once
 *                    (linear memory: a few words per event), each a typed edge with the time
 *                    it releases the node; the collective edges from the ranks' collective
 *                    records. A replay can walk the same nodes and edges.
 *   cp_walk.c        a rank's answer in the walk's rounds: the walk over its own nodes until
 *                    the window's start or a collective edge to another rank;
 *   critical_path.c  the rounds (which rank each step's walk stands on), the pieces made
 *                    into segments, their composition by kind, cause and rank, the top ops
 *                    and the run's summary over steady steps.
 */
#ifndef SSA_CRITICAL_PATH_H
#define SSA_CRITICAL_PATH_H

#include "ssa_metrics.h"

/* ---- the graph ---- */

enum { SSA_CPN_OP, SSA_CPN_API }; /* a rank's op, or a rank's host call (launch, enqueue) */
typedef struct ssa_cp_node {
  uint32_t rank_idx, index; /* index into the rank's ops or apis */
  uint32_t type; /* SSA_CPN_*; a whole word (the struct's padding anyway): a node is passed by
                    value in two registers, and a byte stored then read back as the word
                    stalled the walk at every node */
} ssa_cp_node;

/* Edge types, in tie-break order: at equal release times the first wins. */
enum {
  SSA_CPE_LANE,       /* the previous node of the same stream or host thread */
  SSA_CPE_LAUNCH,     /* the host call that launched (enqueued) an op */
  SSA_CPE_WAIT,       /* a stream waited (event wait) for an op of another stream */
  SSA_CPE_SYNC,       /* a host call waited (synchronize) for a device op */
  SSA_CPE_COLLECTIVE, /* a collective or p2p member waited for the last member's arrival */
  SSA_CPE_N
};
extern const char *const ssa_cpe_names[SSA_CPE_N];

typedef struct ssa_cp_edge {
  ssa_cp_node from; /* a collective edge's: the late member's rank, index SSA_NONE (its op is
                       that rank's record `coll`, whose events the edge's rank need not have) */
  int64_t release;  /* aligned time from which the dependency no longer holds the node */
  uint8_t type;     /* SSA_CPE_* */
  uint32_t coll;    /* a collective edge: the late member's record on its rank; else SSA_NONE */
} ssa_cp_edge;
#define SSA_CP_MAX_PREDS 5

struct ssa_cp_rank;
typedef struct ssa_cp_graph {
  const ssa_run *run;
  int64_t wait_slack_ns; /* inferred event waits (cp_graph.c): set by the caller, 0: none */
  size_t nranks;
  struct ssa_cp_rank *ranks;
} ssa_cp_graph;

/* The last other arrival at a collective record: the member's rank and record, its aligned
 * arrival (its op's start); rank SSA_NONE: none. */
typedef struct ssa_cp_late {
  uint32_t rank_idx, coll;
  int64_t at;
} ssa_cp_late;

/* Builds every rank's indices (cp_graph.c) and the collective edges, ranks in parallel on
 * `threads` (0: cores): O(events) memory, O(events) time plus the radix sorts by end.
 * `members`: the run's collective members (ssa_run_coll_members). 0 or STEPSCOPE_E_NOMEM. */
int ssa_cp_graph_build(ssa_cp_graph *g, const ssa_run *run, const ssa_coll_member *members,
                       size_t nmembers, int threads);
/* The same in parts, for a walk that reads one rank at a time (the critical path's rounds):
 * an empty graph of the run's ranks; the collective edges from the members (sorted by
 * ssa_cmp_coll_member) with each member's aligned arrival (INT64_MIN: its record has no op)
 * and each rank's count of records (ssa_cp_graph_collectives, kept until ssa_cp_graph_free);
 * a rank's indices from its events, once (ssa_cp_rank_index), freed again with
 * ssa_cp_rank_index_free. Each 0 or STEPSCOPE_E_NOMEM. */
int ssa_cp_graph_init(ssa_cp_graph *g, const ssa_run *run);
int ssa_cp_graph_collectives(ssa_cp_graph *g, const ssa_coll_member *m, const int64_t *arrival,
                             size_t n, const size_t *ncolls);
int ssa_cp_rank_index(ssa_cp_graph *g, uint32_t rank_idx);
void ssa_cp_rank_index_free(ssa_cp_graph *g, uint32_t rank_idx);
void ssa_cp_graph_free(ssa_cp_graph *g);
/* A node's aligned start and end (trace time + the rank's offset). */
int64_t ssa_cp_node_start(const ssa_cp_graph *g, ssa_cp_node n);
int64_t ssa_cp_node_end(const ssa_cp_graph *g, ssa_cp_node n);
/* A node's predecessors, in SSA_CPE_* order; returns how many (<= SSA_CP_MAX_PREDS). */
size_t ssa_cp_preds(const ssa_cp_graph *g, ssa_cp_node n, ssa_cp_edge *out);
/* The node of a rank that ends last at or before aligned time t: the latest end, then an op
 * before a host call, then the longer one. 0 found, -1 none. */
int ssa_cp_last_before(const ssa_cp_graph *g, uint32_t rank_idx, int64_t t, ssa_cp_node *out);
/* A dense number of a node over the rank's ops then apis, for marks. */
size_t ssa_cp_node_slot(const ssa_cp_graph *g, ssa_cp_node n);
size_t ssa_cp_rank_slots(const ssa_cp_graph *g, uint32_t rank_idx);

/* ---- the path ---- */

/* What the path's time is. Idle is path time where no node runs: the gap between a node's
 * release and its start. */
enum { SSA_CP_COMPUTE, SSA_CP_COMM, SSA_CP_COPY, SSA_CP_HOST, SSA_CP_IDLE, SSA_CP_KIND_N };
extern const char *const ssa_cp_kind_names[SSA_CP_KIND_N];
/* Why the path idles (docs/metrics.md): the device waited for a launch, for an event of
 * another stream or a synchronisation, on its own stream with work already launched, or for
 * nothing the trace shows. */
enum {
  SSA_CP_IDLE_LAUNCH,
  SSA_CP_IDLE_SYNC,
  SSA_CP_IDLE_STREAM,
  SSA_CP_IDLE_UNEXPLAINED,
  SSA_CP_IDLE_N
};
extern const char *const ssa_cp_idle_names[SSA_CP_IDLE_N];

/* One piece of a step's path: a node's time, or a gap. */
typedef struct ssa_cp_segment {
  int64_t start_rel, end_rel; /* aligned, relative to the run's origin */
  /* (its step is the ssa_cp_step whose segs holds it: 32 bytes a piece, and a one-rank path
   * has about a piece per event) */
  uint32_t rank_idx;
  uint32_t name;  /* id in the analysis' names: the op's or call's name, 0 for idle */
  uint8_t kind;   /* SSA_CP_* */
  uint8_t cause;  /* idle: SSA_CP_IDLE_*; host: 1 for untraced host time between calls */
  uint8_t edge;   /* the edge the walk took back from it (SSA_CPE_*), SSA_CPE_N: none */
  uint8_t is_api; /* a host call */
} ssa_cp_segment;

/* Path time of one op name on one rank. */
typedef struct ssa_cp_top {
  uint32_t name, rank_idx;
  uint8_t kind;
  int64_t time;
  uint64_t count; /* segments */
} ssa_cp_top;
#define SSA_CP_TOP_STEP 5
#define SSA_CP_TOP_RUN  10

typedef struct ssa_cp_step {
  int64_t step;
  int64_t step_time; /* the run's step time (ssa_run_step.time) */
  int64_t length;    /* sum of the segments: equal to step_time unless the walk failed */
  int64_t start_rel, end_rel;
  uint32_t end_rank_idx; /* the rank whose window is the step time: the walk starts there */
  int in_medians;
  int64_t kind[SSA_CP_KIND_N];
  int64_t idle_cause[SSA_CP_IDLE_N];
  int64_t host_untraced; /* part of kind[SSA_CP_HOST] between traced host calls */
  int64_t *by_rank;      /* [nranks] path time on each rank */
  ssa_cp_segment *segs;  /* its segments, latest first; NULL when the path keeps only its sums
                            (ssa_options.path_sums_only) */
  size_t nseg;           /* its segments (kept or not) */
  ssa_cp_top top[SSA_CP_TOP_STEP];
  size_t ntop;
  uint64_t clipped; /* dependencies released after the time the walk reached (clock skew) */
} ssa_cp_step;

typedef struct ssa_critical_path {
  ssa_cp_step *steps; /* one per run step (ssa_analysis.steps), same order */
  size_t nsteps, nranks;
  size_t nsegs;         /* every step's segments */
  int64_t *by_rank_all; /* storage of the steps' by_rank */
  /* over the steps counted in the medians */
  size_t steady;
  size_t median_step; /* index in steps of the steady step of median length (the lower middle
                         one; ties: the earlier step) */
  int64_t median_length, median_step_time;
  int64_t median_kind[SSA_CP_KIND_N], median_idle_cause[SSA_CP_IDLE_N];
  int64_t total_length, total_kind[SSA_CP_KIND_N], total_idle_cause[SSA_CP_IDLE_N];
  int64_t total_host_untraced;
  int64_t *total_by_rank; /* [nranks] */
  ssa_cp_top top[SSA_CP_TOP_RUN];
  size_t ntop;
  uint64_t mismatched_steps; /* steps whose length differs from the step time */
  int sums_only;             /* no step keeps its segments (ssa_options.path_sums_only) */
} ssa_critical_path;

/* ---- the walk in rounds of questions (docs/scale.md) ----
 *
 * A step's path is a chain of rank-local stretches joined at collective edges, the only
 * edges between ranks. critical_path.c keeps where each step's walk stands and asks that
 * rank to walk on (a question); cp_walk.c answers from the rank's events: the pieces up to
 * where a collective edge to another rank wins (the jump) or the walk ends. Every step's
 * question to one rank is answered in one pass over its events (one read in the bounded
 * mode). */

/* Where a piece's name is: none (idle), a constant of the analysis, or an id in the answering
 * rank's summary names (the answer runs beside other ranks' and cannot intern into the
 * analysis' names; critical_path.c does, in the order of the pieces). */
enum {
  SSA_CP_NAME_NONE,
  SSA_CP_NAME_MEMCPY,
  SSA_CP_NAME_MEMSET,
  SSA_CP_NAME_UNTRACED,
  SSA_CP_NAME_SUMMARY
};
/* A piece of a step's path as an answer gives it: a segment whose name is where name_from
 * says; an empty one too (its name is interned all the same). As big as a segment: the
 * assembly turns a step's pieces into its segments in place. */
typedef struct ssa_cp_piece {
  int64_t start_rel, end_rel;
  uint32_t rank_idx, name;
  uint8_t kind, cause, edge, is_api;
  uint8_t name_from; /* SSA_CP_NAME_* */
} ssa_cp_piece;

/* A step's path time on one rank by where the name is, name, kind and cause, over the pieces
 * of one visit (an answer): what the step's sums and top ops are made of, so that the path
 * need not be kept a piece at a time. Made in the order the visit first met each (name, kind,
 * cause), empty pieces too: the assembly interns the names in that order, the order of the
 * pieces. */
typedef struct ssa_cp_tally {
  int64_t time;   /* the non-empty pieces' time */
  uint32_t name;  /* as the pieces' (name_from) */
  uint32_t count; /* the non-empty pieces (segments) */
  uint32_t rank_idx;
  uint8_t name_from, kind, cause;
} ssa_cp_tally;

/* A node a step's walk entered on a rank, and the collective record it is the op of
 * (SSA_NONE: none), so that a collective edge to it is known to be taken. */
typedef struct ssa_cp_visited {
  uint32_t index, coll;
  uint8_t type; /* SSA_CPN_* */
} ssa_cp_visited;

/* A visit of a step's walk to a rank: the nodes it entered there. */
typedef struct ssa_cp_visit {
  uint32_t rank_idx;
  size_t node_first, nnodes;
} ssa_cp_visit;

/* A step's walk so far: its tallies in walk order, its pieces too when `keep_pieces` (the
 * exports' segments); while it goes on, its visits with their entered nodes and the (rank <<
 * 32 | record) of the entered nodes that are a record's op, sorted (what a collective edge
 * from another rank may point at). One rank at a time writes it (a step has one question per
 * round). */
typedef struct ssa_cp_step_walk {
  int keep_pieces;
  ssa_cp_piece *pieces;
  size_t npieces, pieces_cap;
  ssa_cp_tally *tallies;
  size_t ntallies, tallies_cap;
  ssa_cp_visit *visits;
  size_t nvisits, visits_cap;
  ssa_cp_visited *nodes;
  size_t nnodes, nodes_cap;
  int64_t *colls;
  size_t ncolls, colls_cap;
} ssa_cp_step_walk;

/* A question to a rank: walk step `step` back from time t (aligned) to lo: from the node
 * that ends last by t (the step's start, coll SSA_NONE: t is its window's end) or from the
 * op of collective record `coll`, entered at t. The answer goes into the step's walk (its
 * pieces, and a visit with its entered nodes; when the walk ends on this rank, the visits,
 * nodes and records are freed: nothing asks again), the dependencies clipped, and the jump
 * (rank SSA_NONE: the walk ended on this rank). */
typedef struct ssa_cp_question {
  uint32_t step, rank_idx, coll;
  int64_t t, lo;
  ssa_cp_step_walk *walk;
  uint64_t clipped;
  ssa_cp_late jump;
} ssa_cp_question;

/* Where an answering rank's names go: its summary names, with their ids by the rank's string
 * id (0: not yet; nstrings of them), so that a name met again costs no hash; and, per (name,
 * kind, cause) of a piece, its tally in the current visit (1 + index into the step walk's
 * tallies, 0: none yet; `tally_slots` of them, grown with the summary names, zero between
 * answers): a direct index, as a name met again is the common case. */
typedef struct ssa_cp_names {
  ssa_strtab *summary;
  uint32_t *by_string;
  size_t nstrings;
  uint32_t *tally_of;
  size_t tally_slots;
} ssa_cp_names;

/* Which nodes of a rank the walk answering now entered: a node is entered when its slot's
 * stamp is `now`, which each answer moves on (back to 1 after 255, the stamps zeroed then), so
 * that an answer begins with no node entered without clearing the marks of the one before: a
 * byte per node slot of the rank (ssa_cp_rank_slots), zero at first, and now 0. */
typedef struct ssa_cp_marks {
  uint8_t *stamp;
  uint8_t now;
} ssa_cp_marks;

/* Answers question q about rank q->rank_idx (cp_walk.c) from its indices (ssa_cp_rank_index)
 * and events: the pieces tallied (kept too when the walk keeps them); names go into `names`,
 * the rank's marks are `marks`. 0 or STEPSCOPE_E_NOMEM. */
int ssa_cp_answer(const ssa_cp_graph *g, ssa_cp_names *names, ssa_cp_marks *marks,
                  ssa_cp_question *q);

/* Walks every run step's critical path (critical_path.c) into a->critical_path. Needs the
 * steps (ssa_read_run_metadata). 0 or STEPSCOPE_E_NOMEM. */
int ssa_find_critical_paths(ssa_analysis *a);
void ssa_critical_path_free(ssa_critical_path *cp);
/* The exports' track (critical_path.c): a rank's pieces of every step's path in time order,
 * each cut to start where the one before ended (the windows of consecutive steps, each on its
 * own end rank, may overlap a little). 0, STEPSCOPE_E_NOMEM, or STEPSCOPE_E_STATE when the path
 * kept only its sums (ssa_options.path_sums_only). */
int ssa_cp_track(const ssa_critical_path *cp, uint32_t rank_idx,
                 void (*emit)(void *ctx, const ssa_cp_segment *s, int64_t step, int64_t start_rel,
                              int64_t end_rel),
                 void *ctx);
/* A piece's name on the track: the node's name, or "idle (cause)" (in buf). */
const char *ssa_cp_segment_label(const ssa_analysis *a, const ssa_cp_segment *s, char *buf,
                                 size_t n);

#endif
