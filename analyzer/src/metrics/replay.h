/*
 * replay.h — `stepscope replay`: each step re-simulated over the dependency graph of the
 * critical path (critical_path.h, cp_graph.c) with the trace's op durations, and "what if"
 * edits applied to it (docs/replay.md). Two sub-concerns, each its own file:
 *
 *   replay_edits.c  the EDIT grammar: parsing, checking, and which nodes an edit selects;
 *   replay.c        the simulation (every node's start and end, in dependency order) and
 *                   each step's predicted time and predicted critical path.
 */
#ifndef SSA_REPLAY_H
#define SSA_REPLAY_H

#include <regex.h>

#include "critical_path.h"

/* What an edit does to the nodes it selects. */
enum {
  SSA_REPLAY_SCALE,   /* durations x factor (drop: x 0) */
  SSA_REPLAY_GAPS,    /* host gaps x factor */
  SSA_REPLAY_DELAY,   /* the trainer's declared --debug-delay of the rank set to factor ms */
  SSA_REPLAY_OVERLAP, /* nothing waits for the selected communication (wait and sync edges) */
  SSA_REPLAY_ACTION_N
};

/* One --what-if EDIT: a selector (every given part must match) and an action. */
typedef struct ssa_replay_edit {
  int has_name;
  regex_t name; /* POSIX extended regex on the op's or call's name */
  int has_range;
  regex_t range; /* ... on the name of a traced range around the node's launch (range=) */
  int kind;      /* SSA_CP_COMPUTE, _COMM, _COPY, _HOST; -1 any */
  int coll_op;   /* stepscope_coll_op of the op's collective; -1 any */
  int has_group;
  uint64_t group; /* the collective's communicator id */
  int rank;       /* trace rank number; -1 any */
  int stage;      /* pipeline stage (the trainer's pp_rank); -1 any */
  int action;     /* SSA_REPLAY_* */
  double factor;
} ssa_replay_edit;

/* The grammar, for --help and errors. */
extern const char ssa_replay_edit_grammar[];

/* Parses one EDIT into *e. 0, or -1 with the reason in msg[n] (then nothing to free). */
int ssa_replay_edit_parse(const char *text, ssa_replay_edit *e, char *msg, size_t n);
void ssa_replay_edit_free(ssa_replay_edit *e);

/* The time a rank's ranges matching an edit's range= cover, per host thread: merged
 * intervals sorted by (lane, start), each lane's found by lane_first, so that one binary search
 * tells whether a time lies inside some matching range (nested and repeated ranges of the name
 * are one interval). */
typedef struct ssa_replay_span {
  int64_t start, end;
  uint16_t lane;
} ssa_replay_span;

typedef struct ssa_replay_spans {
  ssa_replay_span *v;
  size_t n;
  uint32_t *lane_first; /* per lane of the rank (and one past the last): its first span */
  uint32_t nlanes;
} ssa_replay_spans;

/* The spans of rank r's ranges whose name matches e's range= (none without one). 0 or -1
 * (memory). */
int ssa_replay_spans_build(const ssa_replay_edit *e, const ssa_rank *r, ssa_replay_spans *out);
void ssa_replay_spans_free(ssa_replay_spans *s);

/* Whether the edit's selector takes op `index` (is_api 0) or call `index` (is_api 1) of
 * rank `r`; `in_range` the edit's spans on that rank (ssa_replay_spans_build). A node's
 * place for range= is its launch call (the host thread and time it was issued from), or
 * itself when it has none (a host call; a host timeline's op). */
int ssa_replay_edit_selects(const ssa_replay_edit *e, const ssa_rank *r, int is_api, size_t index,
                            const ssa_replay_spans *in_range);

/* One step, replayed. */
typedef struct ssa_replay_step {
  int64_t step;
  int in_medians;
  int64_t measured;  /* the run's step time (ssa_run_step.time) */
  int64_t predicted; /* the replay's: the longest span of the step's windows */
  uint32_t end_rank_idx;
  int64_t path_kind[SSA_CP_KIND_N]; /* the replayed critical path; idle: device gaps */
  int64_t path_host_gaps;           /* part of path_kind[SSA_CP_HOST]: host gaps */
} ssa_replay_step;

typedef struct ssa_replay {
  ssa_replay_step *steps; /* one per run step, same order */
  size_t nsteps;
  size_t steady; /* steps in the medians */
  int64_t median_measured, median_predicted;
  double median_error, worst_error; /* |predicted - measured| / measured, steady steps */
  int64_t median_path_kind[SSA_CP_KIND_N];
  uint64_t nodes, cycles; /* nodes simulated; dependency cycles cut (ties in time) */
  uint64_t delay_gaps;    /* host gaps a delay edit changed */
  int64_t device_waits;   /* device gaps longer than the launch-gap threshold, kept (all steps) */
  /* per edit, over every rank: the ops and host calls it selected (a delay edit: none) */
  uint64_t *selected_ops, *selected_calls;
  size_t nedits;
  /* ssa_replay_run_ops only (NULL otherwise): per rank index, every op's simulated start
   * and end, aligned as the critical path's graph (trace time + the rank's clock offset) */
  int64_t **op_start, **op_end;
  size_t nranks;
} ssa_replay;

/* Replays every step of the analysed run `a` with the edits (none: the plain replay).
 * 0, STEPSCOPE_E_NOMEM, or STEPSCOPE_E_ARGUMENT with msg when an edit cannot apply (a delay
 * edit on a run that declares no delay). */
int ssa_replay_run(const ssa_analysis *a, const ssa_replay_edit *edits, size_t nedits,
                   ssa_replay *out, char *msg, size_t n);
/* The same, keeping every op's simulated start and end (op_start, op_end): the exports'
 * replay track (export --replay). */
int ssa_replay_run_ops(const ssa_analysis *a, const ssa_replay_edit *edits, size_t nedits,
                       ssa_replay *out, char *msg, size_t n);
void ssa_replay_free(ssa_replay *r);

#endif
