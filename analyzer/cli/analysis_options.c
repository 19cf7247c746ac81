/*
 * analysis_options.c — parsing of the options shared by the commands that
 * analyse runs (see analysis_options.h). Values are checked strictly: the
 * whole string must be a number, counts must be positive; a classification
 * rule must be a valid POSIX extended regex (compiled when given).
 *
 * The classification rules are kept in one process-wide set (a command
 * analyses with one set of rules; `diff` applies it to both runs), which
 * lives until the process exits.
 */
#include "analysis_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ssa_comm_rules rules; /* --comm-kernel, --compute-kernel, then the environment */
static int env_read;         /* the environment is read once (until cli_reset_analysis_options) */

int cli_parse_steps(const char *s, int64_t *first, int64_t *last) {
  const char *colon = strchr(s, ':');
  char *end;
  *first = INT64_MIN;
  *last = INT64_MAX;
  if (!colon) {
    long long v = strtoll(s, &end, 10);
    if (end == s || *end) return -1;
    *first = *last = v;
    return 0;
  }
  if (colon != s) {
    long long v = strtoll(s, &end, 10);
    if (end != colon) return -1;
    *first = v;
  }
  if (colon[1]) {
    long long v = strtoll(colon + 1, &end, 10);
    if (*end || end == colon + 1) return -1;
    *last = v;
  }
  return *first <= *last ? 0 : -1;
}

int cli_apply_analysis_option(const char *command, const char *name, const char *value,
                              ssa_options *opt) {
  char *end;
  if (!strcmp(name, "--steps")) {
    if (cli_parse_steps(value, &opt->step_first, &opt->step_last)) {
      fprintf(stderr, "stepscope %s: bad --steps '%s' (want A:B)\n", command, value);
      return -1;
    }
    opt->has_step_filter = 1;
    return 1;
  }
  if (!strcmp(name, "--step-range")) {
    opt->step_range_name = value;
    return 1;
  }
  if (!strcmp(name, "--launch-gap-us")) {
    double us = strtod(value, &end);
    if (*end || end == value || !(us > 0) || us > 1e9) {
      fprintf(stderr, "stepscope %s: bad --launch-gap-us '%s' (want microseconds > 0)\n", command,
              value);
      return -1;
    }
    opt->launch_gap_ns = (int64_t)(us * 1000.0);
    return 1;
  }
  if (!strcmp(name, "--comm-kernel") || !strcmp(name, "--compute-kernel")) {
    char why[256];
    int comm = !strcmp(name, "--comm-kernel");
    if (ssa_comm_rules_add(&rules, value, comm, "command line", why, sizeof why)) {
      fprintf(stderr, "stepscope %s: bad %s '%s': %s\n", command, name, value, why);
      return -1;
    }
    opt->comm_rules = &rules;
    return 1;
  }
  if (!strcmp(name, "--threads")) {
    long n = strtol(value, &end, 10);
    if (*end || end == value || n <= 0 || n > 4096) {
      fprintf(stderr, "stepscope %s: bad --threads '%s' (want 1..4096)\n", command, value);
      return -1;
    }
    opt->threads = (int)n;
    return 1;
  }
  return 0;
}

int cli_apply_rank_option(const char *command, const char *value, ssa_options *opt) {
  char *end;
  long r = strtol(value, &end, 10);
  if (*end || end == value || r < 0 || r > 0x7fffffffL) {
    fprintf(stderr, "stepscope %s: bad --rank '%s' (want a rank number >= 0)\n", command, value);
    return -1;
  }
  opt->rank = (int)r;
  return 0;
}

int cli_finish_analysis_options(const char *command, ssa_options *opt) {
  static const char *const env[2] = {SSA_COMM_ENV, SSA_COMPUTE_ENV};
  for (int k = 0; k < 2 && !env_read; k++) {
    const char *list = getenv(env[k]);
    if (!list) continue;
    char *bad = NULL, why[256];
    if (ssa_comm_rules_add_list(&rules, list, k == 0, env[k], &bad, why, sizeof why)) {
      fprintf(stderr, "stepscope %s: bad pattern '%s' in %s: %s\n", command, bad ? bad : "", env[k],
              why);
      free(bad);
      return -1;
    }
  }
  env_read = 1;
  opt->comm_rules = rules.n ? &rules : NULL;
  return 0;
}

const ssa_comm_rules *cli_comm_rules(void) {
  return &rules;
}

void cli_reset_analysis_options(void) {
  ssa_comm_rules_free(&rules);
  memset(&rules, 0, sizeof rules);
  env_read = 0;
}
