/*
 * analysis_options.h — the options that choose *how* a run is analysed
 * (`--steps`, `--step-range`, `--launch-gap-us`, `--threads`,
 * `--comm-kernel`, `--compute-kernel`, and `--rank` for the commands that
 * take it), parsed in one place for every caller that analyses runs: the
 * `stepscope` commands (analyze, diff, export; view passes the
 * classification rules on) and the C API (analyzer/api), so that they accept
 * the same spellings and reject bad values with the same messages.
 *
 * A file of its own, in the metrics floor, because these options fill
 * ssa_options (ssa_metrics.h) and nothing above it: the command prints
 * what these functions return, the C API hands it back as a value. Nothing
 * here prints. Each option is one row of a table (name, metavariable, help
 * text, the function that applies it), which the commands' --help texts
 * are generated from, so the help cannot drift from what is parsed.
 */
#ifndef SSA_ANALYSIS_OPTIONS_H
#define SSA_ANALYSIS_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "ssa_metrics.h"

/* One analysis option, for help texts: "--steps", "A:B", its help (lines
 * separated by '\n'); `classify` is set for the classification rules
 * (--comm-kernel, --compute-kernel), the options `view` passes on;
 * `repeatable` for those that may be given more than once (each adds a rule;
 * a command line that gives any other twice is refused). */
typedef struct ssa_analysis_option_doc {
  const char *name;
  const char *metavar;
  const char *help;
  int classify;
  int repeatable;
} ssa_analysis_option_doc;

/* The analysis options (without --rank), in the order the help lists them.
 * The help column of their text is SSA_ANALYSIS_HELP_COLUMN. */
extern const ssa_analysis_option_doc ssa_analysis_option_docs[];
extern const size_t ssa_analysis_option_count;
#define SSA_ANALYSIS_HELP_COLUMN 22

/* Parses "A:B", "A:", ":B" or "A" into an inclusive step range (open ends are
 * INT64_MIN / INT64_MAX). Step numbers are decimal, 0 to INT64_MAX. 0 on
 * success, -1 if malformed, negative, out of range or A > B. */
int ssa_parse_steps(const char *s, int64_t *first, int64_t *last);

/* Applies option `name` with value `value` to `opt`; a classification rule is
 * added to `rules` (the caller's, freed with ssa_comm_rules_free) and
 * opt->comm_rules pointed at them. Returns 1 if `name` is one of the options
 * above and the value is valid, 0 if `name` is not one of them, and -1 if the
 * value is bad, with a message naming `command` in msg ("stepscope analyze:
 * bad --steps 'x' (want A:B)", no newline). */
int ssa_apply_analysis_option(const char *command, const char *name, const char *value,
                              ssa_options *opt, ssa_comm_rules *rules, char *msg, size_t msg_n);

/* Parses a `--rank R` value into opt->rank: 0, or -1 with a message in msg. */
int ssa_apply_rank_option(const char *command, const char *value, ssa_options *opt, char *msg,
                          size_t msg_n);

/* After the command line (once per command line): adds the rules of the
 * environment variables STEPSCOPE_COMM_KERNELS and STEPSCOPE_COMPUTE_KERNELS
 * (';'-separated regexes) to `rules` and points opt->comm_rules at them (NULL
 * when there are none). 0, or -1 with a message naming `command` and the bad
 * pattern in msg. */
int ssa_finish_analysis_options(const char *command, ssa_options *opt, ssa_comm_rules *rules,
                                char *msg, size_t msg_n);

#endif /* SSA_ANALYSIS_OPTIONS_H */
