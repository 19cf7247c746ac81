/*
 * cli_partial.h — partial analyses (cli_partial.c; docs/scale.md "Partials"): writing one
 * part of a run, and merging every part of it into the bounded analysis of the whole run.
 */
#ifndef CLI_PARTIAL_H
#define CLI_PARTIAL_H

#include "cli_load.h"

/* `analyze RUN --part K/N --partial OUT [--cross FILE]`: part part_index of part_count of
 * the run at `path` written to out_path; with cross_path (NULL: none), the second map round:
 * its pipeline ranks' results made from the inputs of `merge --cross-out`. 0, or 1 with "stepscope
 * COMMAND: why" in msg[cap]. Nothing printed. */
int cli_write_partial(const char *command, const char *path, const ssa_options *opt, int part_index,
                      int part_count, const char *cross_path, const char *out_path, char *msg,
                      size_t cap);

/* `merge PARTIALS...`: reads the n partials (every part of one run, each once; else an error
 * that names the missing, repeated or foreign part), assembles the run and analyses it as
 * `analyze --low-memory` does (the rank files are read again for the per-rank passes). 0, or
 * the exit status with the error in msg[cap]. Nothing printed. Free l with cli_loaded_free
 * either way. */
int cli_open_partials(const char *command, char *const *paths, size_t n, const ssa_options *opt,
                      cli_loaded *l, char *msg, size_t cap);

/* `merge PARTIALS... --cross-out DIR`: reads and assembles the partials as cli_open_partials
 * does, runs the cross-rank steps that need no rank's events (ssa_cross_inputs) and writes
 * DIR/cross-K-of-N.ssx for every part K (DIR made when missing): the inputs of its pipeline
 * ranks for the second map round. No report, no rank file read. 0, or 1 with the error in
 * msg[cap]. */
int cli_write_cross(const char *command, char *const *paths, size_t n, const ssa_options *opt,
                    const char *dir, char *msg, size_t cap);

#endif
