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

#include "option_table.h"
#include "ssa_metrics.h"

/* The default limit of `export` (2 GiB: Perfetto's UI gives up on JSON near 1-2 GB, Chromium
 * cannot hold a string of more than about 512 MiB). */
#define CLI_EXPORT_MAX_BYTES (2ull << 30)

/* What --ranks and --max-size say, in the struct of a command that makes an export (`export`,
 * and `view`, which passes them on to the `export` it runs). */
typedef struct cli_export_limits {
  const char *command;  /* who says a value is bad ("export", "view"): set before parsing */
  const char *ranks;    /* --ranks LIST|auto, checked; NULL: every rank */
  const char *max_size; /* --max-size as given, checked; NULL: not given */
  uint64_t max_bytes;   /* its value; the command sets its default before parsing */
} cli_export_limits;

/* The rows of --ranks and --max-size (one declaration, help text and check for both commands)
 * into the cli_export_limits at offset `field` of the command's struct. */
#define CLI_EXPORT_LIMIT_ROWS(field) CLI_RANKS_ROW(field), CLI_MAX_SIZE_ROW(field)
#define CLI_RANKS_ROW(field)                                                                       \
  {                                                                                                \
    .kind = CLI_CALL, .name = "--ranks", .metavar = "LIST",                                        \
    .help = "only these ranks in the timeline: 0-7,12; or auto: the ones\n"                        \
            "the analysis points at (culprit, stragglers, slowest, fastest,\n"                     \
            "rank 0)",                                                                             \
    .offset = (field), .fn = cli_ranks_option                                                      \
  }
#define CLI_MAX_SIZE_ROW(field)                                                                    \
  {                                                                                                \
    .kind = CLI_CALL, .name = "--max-size", .metavar = "SIZE",                                     \
    .help = "no timeline (export) estimated over SIZE: refused (default 2G;\n"                     \
            "0: no limit)",                                                                        \
    .offset = (field), .fn = cli_max_size_option                                                   \
  }

/* CLI_EXPORT_LIMIT_ROWS' functions: the value checked (the message printed: 2) and kept. */
int cli_ranks_option(const cli_option *o, const char *v, void *cmd);
int cli_max_size_option(const cli_option *o, const char *v, void *cmd);

/* Parses "--max-size" values: bytes with an optional K, M, G or T (powers of 1024); 0 = no
 * limit. 0, or -1 when not a size. */
int cli_parse_size(const char *v, uint64_t *bytes);

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
/* The refusal cli_check_output_size prints (without its newline), into buf[len]: `what` of
 * nranks ranks holding `events` events is about `estimate` bytes, over `limit`. */
void cli_output_size_refusal(char *buf, size_t len, const char *command, const char *what,
                             size_t nranks, uint64_t events, uint64_t estimate, uint64_t limit,
                             const char *spec);

#endif
