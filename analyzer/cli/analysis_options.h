/*
 * analysis_options.h — the command-line options that choose *how* a run is
 * analysed (`--steps`, `--step-range`, `--launch-gap-us`, `--threads`,
 * `--comm-kernel`, `--compute-kernel`), parsed in one place for every
 * command that analyses runs (`analyze`, `diff`, `export`; `view` passes the
 * classification rules on to the commands it runs), so that they accept the
 * same spellings and reject bad values with the same messages.
 */
#ifndef STEPSCOPE_CLI_ANALYSIS_OPTIONS_H
#define STEPSCOPE_CLI_ANALYSIS_OPTIONS_H

#include <stdint.h>

#include "ssa_metrics.h"

/* The --help lines of the classification options (also `view`'s). */
#define CLI_CLASSIFY_OPTIONS_HELP                                                                  \
  "  --comm-kernel RE    ops whose name matches the POSIX extended regex RE are\n"                 \
  "                      communication (repeatable; overrides NCCL metadata and the\n"             \
  "                      built-in families; env STEPSCOPE_COMM_KERNELS='RE1;RE2')\n"               \
  "  --compute-kernel RE ops whose name matches RE are compute, whatever else says\n"              \
  "                      (repeatable; wins over --comm-kernel; env\n"                              \
  "                      STEPSCOPE_COMPUTE_KERNELS). See docs/kineto-import.md\n"                  \
  "                      \"Communication families\" for the built-in table.\n"

/* The --help lines of the options below, for the commands' usage texts. */
#define CLI_ANALYSIS_OPTIONS_HELP                                                                  \
  "  --steps A:B         only steps A..B (inclusive; A: or :B open-ended)\n"                       \
  "  --step-range NAME   take steps from ranges named NAME (default: 'step' ranges\n"              \
  "                      of domain stepscope, else ProfilerStep#N)\n"                              \
  "  --launch-gap-us N   idle gaps shorter than N us are launch gaps (default 10)\n"               \
  "  --threads N         loader/analysis threads (default: all cores)\n" CLI_CLASSIFY_OPTIONS_HELP

/* Parses "A:B", "A:", ":B" or "A" into an inclusive step range (open ends are
 * INT64_MIN / INT64_MAX). 0 on success, -1 if malformed or A > B. */
int cli_parse_steps(const char *s, int64_t *first, int64_t *last);

/* Applies option `name` with value `value` to `opt`. Returns 1 if it was one
 * of the options above and is valid, 0 if `name` is not one of them, and -1 if
 * the value is bad (a message naming `command` is printed on stderr). */
int cli_apply_analysis_option(const char *command, const char *name, const char *value,
                              ssa_options *opt);

/* After the command line: adds the rules of the environment variables
 * STEPSCOPE_COMM_KERNELS and STEPSCOPE_COMPUTE_KERNELS (';'-separated
 * regexes) and points opt->comm_rules at the rules (NULL when there are
 * none). 0, or -1 with a message naming `command` and the bad pattern. The
 * rules live until the process exits. */
int cli_finish_analysis_options(const char *command, ssa_options *opt);

/* The rules given so far (command line and, after cli_finish_analysis_options,
 * environment), for commands that pass them on (`view`). */
const ssa_comm_rules *cli_comm_rules(void);

/* Forgets the rules given so far and that the environment was read, so that
 * the next command line starts afresh: for the library (analyzer/api), where
 * one process parses the options of many calls. */
void cli_reset_analysis_options(void);

/* Parses a `--rank R` value into opt->rank: 0, or -1 with a message. */
int cli_apply_rank_option(const char *command, const char *value, ssa_options *opt);

#endif /* STEPSCOPE_CLI_ANALYSIS_OPTIONS_H */
