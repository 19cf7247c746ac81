/*
 * export_ranks.h — the ranks an export or a view page holds, and the size limit they are held
 * to (export_ranks.c): `--ranks 0-7,12` or `--ranks auto` (the ranks the analysis points at:
 * the culprit, the stragglers, the slowest and fastest, rank 0), and `--max-size SIZE` (default
 * CLI_EXPORT_MAX_BYTES) above which the command refuses before writing and says what to do.
 */
#ifndef EXPORT_RANKS_H
#define EXPORT_RANKS_H

#include <stddef.h>
#include <stdint.h>

#include "ssa_metrics.h"

/* The default limit of `export` (2 GiB: Perfetto's UI gives up on JSON near 1-2 GB, Chromium
 * cannot hold a string of more than about 512 MiB). */
#define CLI_EXPORT_MAX_BYTES (2ull << 30)

/* Parses "--max-size" values: bytes with an optional K, M, G or T (powers of 1024); 0 = no
 * limit. 0, or -1 when not a size. */
int cli_parse_size(const char *v, uint64_t *bytes);

/* A --max-size option's value into *bytes: 0, or 2 with the message printed. */
int cli_max_size_option(const char *command, const char *v, uint64_t *bytes);

/* Checks a --ranks value ("auto", or rank numbers and ranges "0-7,12"): 0, or 2 with the
 * message printed. */
int cli_check_ranks_spec(const char *command, const char *spec);

/* Chooses the exported ranks of an analysed run: *sel (a->nranks bytes, freed by the caller)
 * for `spec`, NULL spec: every rank. `auto`: the culprit verdict's rank, the ranks of the
 * culprit rows and the top stragglers (4 each), the 2 slowest and 2 fastest by compute time,
 * and rank 0. 0, 1 (no memory) or 2 (a rank the run does not have), message printed. */
int cli_choose_ranks(const char *command, const char *spec, const ssa_analysis *a,
                     unsigned char **sel);

/* Whether an output of `estimate` bytes (of `what`, e.g. "JSON") fits `limit` (0: none): 0, or
 * 1 with the refusal printed: the size, the ranks and events, and what to do instead. */
int cli_check_output_size(const char *command, const char *what, uint64_t estimate, uint64_t limit,
                          const ssa_analysis *a, const char *spec);

#endif
