/*
 * analysis_options.c — parsing of the options shared by the commands that
 * analyse runs (see analysis_options.h). Values are checked strictly: the
 * whole string must be a number, counts must be positive.
 */
#include "analysis_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
      fprintf(stderr, "stepscope %s: bad --launch-gap-us '%s' (want microseconds > 0)\n",
              command, value);
      return -1;
    }
    opt->launch_gap_ns = (int64_t)(us * 1000.0);
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
