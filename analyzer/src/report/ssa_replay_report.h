/*
 * ssa_replay_report.h — `stepscope replay`'s output (metrics/replay.h) as text and JSON
 * (replay_report.c), into the analyzer's one writer: per step the measured step time, the
 * plain replay's, its error, and with edits the prediction and its change; the predicted
 * critical path's composition; the summary of the plain replay's fidelity.
 */
#ifndef SSA_REPLAY_REPORT_H
#define SSA_REPLAY_REPORT_H

#include "replay.h"
#include "ssa_io.h"

typedef struct ssa_replay_report {
  const char *run_path;
  const ssa_replay *plain;  /* the replay without edits */
  const ssa_replay *edited; /* with the edits, or NULL when there are none */
  char *const *edits;       /* their text */
  size_t nedits;
} ssa_replay_report;

void ssa_replay_report_text(const void *r, ssa_out *o);
void ssa_replay_report_json(const void *r, ssa_out *o);

#endif
