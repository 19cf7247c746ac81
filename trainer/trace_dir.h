/*
 * trace_dir.h — the check that --trace does not write over an earlier run.
 */
#ifndef STEPSCOPE_TRAINER_TRACE_DIR_H
#define STEPSCOPE_TRAINER_TRACE_DIR_H

#include <stddef.h>

/* 0 when `dir` holds no rank-*.trace.zst this run could mix with; else -1
 * with a message. rank < 0: the whole job checks at once (before forking
 * ranks); rank >= 0: one rank under an outside launcher (its own file, and
 * for rank 0 the files of ranks >= world). With `force`, nothing is refused,
 * rank files >= world (an earlier, larger run's) are removed and (rank < 1)
 * so are the earlier run's derived outputs (sc_run_outputs.h); `note` then
 * says what was removed ("" when nothing was). */
int trace_dir_check(const char *dir, int world, int rank, int force, char *note, size_t note_len,
                    char *err, size_t n);

/* Makes `dir` (and its parents) unless it exists, and checks that traces can be written
 * into it: 0, or -1 with a message (a file of that name, a read-only or missing parent,
 * no permission). Run before training, so that --trace never silently traces nothing. */
int trace_dir_prepare(const char *dir, char *err, size_t n);

#endif
