/*
 * export_replay.h — `stepscope export RUN -o FILE --replay [--what-if EDIT ...]`
 * (export_replay.c): the run replayed (metrics/replay.h, docs/replay.md), with the edits when
 * given, and its ops at their simulated times added to the export as a process per rank named
 * "replay" or "replay: EDIT, EDIT" (ssa_export_replay), beside the measured ones.
 */
#ifndef EXPORT_REPLAY_H
#define EXPORT_REPLAY_H

#include "replay.h"
#include "ssa_export.h"

#define EXPORT_REPLAY_MAX_EDITS 32

typedef struct export_replay_args {
  int on; /* --replay, or a --what-if */
  const char *text[EXPORT_REPLAY_MAX_EDITS];
  ssa_replay_edit edits[EXPORT_REPLAY_MAX_EDITS];
  size_t nedits;
  ssa_replay replay;
  ssa_export_replay view;
  char label[1024];
} export_replay_args;

/* A --what-if EDIT: parsed and kept (implies --replay). 0, or 2 with the message printed. */
int export_replay_add_edit(export_replay_args *x, const char *edit);
/* Runs the replay on the analysed run and points a->opt.export_replay at it (nothing
 * without --replay). 0, 1 (memory) or 2 (an edit that cannot apply), the message printed. */
int export_replay_prepare(export_replay_args *x, ssa_analysis *a);
void export_replay_free(export_replay_args *x);

#endif
