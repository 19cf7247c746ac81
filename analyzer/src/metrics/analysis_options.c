/*
 * analysis_options.c — parsing of the options shared by everything that
 * analyses runs (see analysis_options.h). One table row per option: its
 * name, metavariable and help text, and the function that checks and
 * applies its value. Values are checked strictly: the whole string must be
 * a number, counts must be positive; a classification rule must be a valid
 * POSIX extended regex (compiled when given). Messages are returned, never
 * printed: the command prints them, the C API hands them back.
 */
#include "analysis_options.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int say(char *msg, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *msg, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (msg && n) vsnprintf(msg, n, fmt, ap);
  va_end(ap);
  return -1;
}

/* One step number: decimal digits only (no sign, no space), at most INT64_MAX; the text
 * after it in *end. 0, or -1. */
static int parse_step(const char *s, const char **end, int64_t *out) {
  if (!isdigit((unsigned char)*s)) return -1;
  char *e;
  errno = 0;
  long long v = strtoll(s, &e, 10);
  if (errno == ERANGE) return -1;
  *out = v;
  *end = e;
  return 0;
}

int ssa_parse_steps(const char *s, int64_t *first, int64_t *last) {
  const char *colon = strchr(s, ':'), *end;
  *first = INT64_MIN;
  *last = INT64_MAX;
  if (!colon) {
    if (parse_step(s, &end, first) || *end) return -1;
    *last = *first;
    return 0;
  }
  if (colon != s && (parse_step(s, &end, first) || end != colon)) return -1;
  if (colon[1] && (parse_step(colon + 1, &end, last) || *end)) return -1;
  return *first <= *last ? 0 : -1;
}

/* What an option's function is given: the command (for messages), the
 * option's name and value, where it goes, and where a message goes. */
typedef struct apply_args {
  const char *command, *name, *value;
  ssa_options *opt;
  ssa_comm_rules *rules;
  char *msg;
  size_t msg_n;
} apply_args;

static int apply_steps(const apply_args *a) {
  if (ssa_parse_steps(a->value, &a->opt->step_first, &a->opt->step_last))
    return say(a->msg, a->msg_n, "stepscope %s: bad --steps '%s' (want A:B)", a->command, a->value);
  a->opt->has_step_filter = 1;
  return 0;
}

static int apply_step_range(const apply_args *a) {
  a->opt->step_range_name = a->value;
  return 0;
}

static int apply_launch_gap(const apply_args *a) {
  char *end;
  double us = strtod(a->value, &end);
  if (*end || end == a->value || !(us > 0) || us > 1e9)
    return say(a->msg, a->msg_n, "stepscope %s: bad --launch-gap-us '%s' (want microseconds > 0)",
               a->command, a->value);
  a->opt->launch_gap_ns = (int64_t)(us * 1000.0);
  return 0;
}

static int apply_threads(const apply_args *a) {
  char *end;
  long n = strtol(a->value, &end, 10);
  if (*end || end == a->value || n <= 0 || n > 4096)
    return say(a->msg, a->msg_n, "stepscope %s: bad --threads '%s' (want 1..4096)", a->command,
               a->value);
  a->opt->threads = (int)n;
  return 0;
}

static int apply_rule(const apply_args *a) {
  char why[256];
  int comm = !strcmp(a->name, "--comm-kernel");
  if (ssa_comm_rules_add(a->rules, a->value, comm, "command line", why, sizeof why))
    return say(a->msg, a->msg_n, "stepscope %s: bad %s '%s': %s", a->command, a->name, a->value,
               why);
  a->opt->comm_rules = a->rules;
  return 0;
}

const ssa_analysis_option_doc ssa_analysis_option_docs[] = {
    {"--steps", "A:B", "only steps A..B (inclusive; A: or :B open-ended)", 0, 0},
    {"--step-range", "NAME",
     "take steps from ranges named NAME (default: 'step' ranges\n"
     "of domain stepscope, else ProfilerStep#N)",
     0, 0},
    {"--launch-gap-us", "N", "idle gaps shorter than N us are launch gaps (default 10)", 0, 0},
    {"--threads", "N", "loader/analysis threads (default: all cores)", 0, 0},
    {"--comm-kernel", "RE",
     "ops whose name matches the POSIX extended regex RE are\n"
     "communication (repeatable; overrides NCCL metadata and the\n"
     "built-in families; env STEPSCOPE_COMM_KERNELS='RE1;RE2')",
     1, 1},
    {"--compute-kernel", "RE",
     "ops whose name matches RE are compute, whatever else says\n"
     "(repeatable; wins over --comm-kernel; env\n"
     "STEPSCOPE_COMPUTE_KERNELS). See docs/kineto-import.md\n"
     "\"Communication families\" for the built-in table.",
     1, 1},
};
const size_t ssa_analysis_option_count =
    sizeof ssa_analysis_option_docs / sizeof ssa_analysis_option_docs[0];

/* The function of each row of ssa_analysis_option_docs, in the same order. */
static int (*const apply_fns[])(const apply_args *) = {
    apply_steps, apply_step_range, apply_launch_gap, apply_threads, apply_rule, apply_rule,
};
_Static_assert(sizeof apply_fns / sizeof apply_fns[0] ==
                   sizeof ssa_analysis_option_docs / sizeof ssa_analysis_option_docs[0],
               "one function per analysis option");

int ssa_apply_analysis_option(const char *command, const char *name, const char *value,
                              ssa_options *opt, ssa_comm_rules *rules, char *msg, size_t msg_n) {
  apply_args a = {command, name, value, opt, rules, msg, msg_n};
  for (size_t i = 0; i < ssa_analysis_option_count; i++)
    if (!strcmp(name, ssa_analysis_option_docs[i].name)) return apply_fns[i](&a) ? -1 : 1;
  return 0;
}

int ssa_apply_rank_option(const char *command, const char *value, ssa_options *opt, char *msg,
                          size_t msg_n) {
  char *end;
  long r = strtol(value, &end, 10);
  if (*end || end == value || r < 0 || r > 0x7fffffffL)
    return say(msg, msg_n, "stepscope %s: bad --rank '%s' (want a rank number >= 0)", command,
               value);
  opt->rank = (int)r;
  return 0;
}

int ssa_finish_analysis_options(const char *command, ssa_options *opt, ssa_comm_rules *rules,
                                char *msg, size_t msg_n) {
  static const char *const env[2] = {SSA_COMM_ENV, SSA_COMPUTE_ENV};
  for (int k = 0; k < 2; k++) {
    const char *list = getenv(env[k]);
    if (!list) continue;
    char *bad = NULL, why[256];
    if (ssa_comm_rules_add_list(rules, list, k == 0, env[k], &bad, why, sizeof why)) {
      say(msg, msg_n, "stepscope %s: bad pattern '%s' in %s: %s", command, bad ? bad : "", env[k],
          why);
      free(bad);
      return -1;
    }
  }
  opt->comm_rules = rules->n ? rules : NULL;
  return 0;
}
