/*
 * ssa_export.h — the analyzer's export floor (analyzer/src/export): an analysed run as a
 * trace for Perfetto and the viewer, the streamed Chrome-trace JSON (chrome_export.c, SPEC
 * §5) and the native Perfetto protobuf trace (perfetto_export.c). Both lay slices out on
 * lanes the same way (slice_lanes.c, ssa_lanes.h), name processes and tracks the same way
 * (track_names.c, ssa_track_names.h) and tag expert parallelism's phases the same way
 * (expert_tags.c, ssa_expert_tags.h); pb_encode.h is the protobuf encoder.
 */
#ifndef SSA_EXPORT_H
#define SSA_EXPORT_H

#include "ssa_io.h"
#include "ssa_metrics.h"

typedef struct ssa_export_stats {
  uint64_t events; /* JSON: events; Perfetto: packets */
  uint64_t bytes;
  uint64_t slices, flows; /* Perfetto only */
} ssa_export_stats;

/* The ranks an export writes (export_selection.c): those of --rank and of the options'
 * export_ranks (every rank without either). */
int ssa_export_selects(const ssa_analysis *a, size_t rank_idx);
/* The events of the selected ranks (ops, API calls, collectives, ranges; the ops once more
 * with a replay, ssa_export_replay) and the expected
 * size of their export, uncompressed, at the bytes per event below (measured; an estimate). */
#define SSA_EXPORT_JSON_BYTES_PER_EVENT    300u
#define SSA_EXPORT_PFTRACE_BYTES_PER_EVENT 60u
uint64_t ssa_export_events(const ssa_analysis *a);
uint64_t ssa_export_estimate_bytes(const ssa_analysis *a, int perfetto);

/* `export --replay [EDIT...]` (ssa_options.export_replay): the replayed ops (their simulated
 * start and end, metrics/replay.h) as one more process per written rank, named "LABEL (rank
 * R)", with a track per lane of the rank (replay_slices.c). */
typedef struct ssa_export_replay {
  const char *label;               /* "replay" or "replay: EDIT, EDIT" */
  const struct ssa_replay *replay; /* run with ssa_replay_run_ops */
} ssa_export_replay;

/* The replayed ops of rank index i: op index, and start and end in the rank's trace time, as
 * its ops' (ssa_rel_time converts), sorted by lane, start, longer first. */
typedef struct ssa_replay_slice {
  int64_t start, end;
  uint32_t op;
} ssa_replay_slice;

/* The slices of rank index i (*n 0 without a replay); 0 or -1 (memory). */
int ssa_replay_slices(const ssa_analysis *a, size_t i, ssa_replay_slice **out, size_t *n);
/* The replay process of the rank: its pid (past every rank's) and name. */
int ssa_replay_pid(const ssa_analysis *a, const ssa_rank *r);
void ssa_replay_process_label(const ssa_analysis *a, const ssa_rank *r, char *buf, size_t n);
/* An op's slice name: its name, or memcpy, memset, op for a nameless one. */
const char *ssa_op_slice_name(const ssa_rank *r, const ssa_op *o);

/* Writes the Chrome-trace JSON of an analysed run to `path` (".gz": gzip).
 * Only ranks selected by ssa_export_selects are written. */
int ssa_export_chrome(const ssa_analysis *a, const char *path, ssa_export_stats *stats,
                      stepscope_error *err);

/* Writes the same run as a Perfetto protobuf trace (perfetto_export.c):
 * TrackEvent slices, flows, counters and the derived overlays. */
int ssa_export_perfetto(const ssa_analysis *a, const char *path, ssa_export_stats *stats,
                        stepscope_error *err);

/* Switches of the Perfetto export, for tests (the trace means the same
 * either way). All zero (or NULL) is the default; the library never reads
 * the environment: the `stepscope` command fills this from
 * STEPSCOPE_PFTRACE_INTERN_LIMIT (analyzer/cli/cli_env.c). */
typedef struct ssa_perfetto_options {
  int intern_limit; /* interned strings per sequence before a reset; taken when >= 32, else
                       16384 (perfetto_export.c) */
} ssa_perfetto_options;

int ssa_export_perfetto_opts(const ssa_analysis *a, const char *path,
                             const ssa_perfetto_options *opt, ssa_export_stats *stats,
                             stepscope_error *err);

#endif
