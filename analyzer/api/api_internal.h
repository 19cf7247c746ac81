/*
 * api_internal.h — what the files of the C API (analyzer/api: stepscope_api.c, api_partial.c)
 * share and do not export: the options of a call, errors into *err_out, a report into a
 * string. Only ss_api_* is exported (stepscope_api.map).
 */
#ifndef SS_API_INTERNAL_H
#define SS_API_INTERNAL_H

#include "cli_output.h"
#include "ssa_diff.h"
#include "ssa_metrics.h"

#define API_EXPORT   __attribute__((visibility("default")))
#define API_INTERNAL __attribute__((visibility("hidden")))

typedef struct api_options {
  ssa_options opt;
  int has_b_steps;
  int64_t b_first, b_last;
  const char *repeats[2][SSA_DIFF_MAX_RUNS]; /* diff: [side][i], [side][0] set by the caller */
  size_t nrep[2];
  double run_noise;     /* diff: --run-noise as a fraction, NaN when not given */
  int low_memory;       /* analyze: --low-memory given (a flag: it takes no value) */
  ssa_comm_rules rules; /* this call's --comm-kernel/--compute-kernel and environment rules;
                           opt.comm_rules points here (free with api_options_free) */
} api_options;

void api_options_free(api_options *ao);

/* What a call takes besides the analysis options. */
enum {
  ALLOW_RANK = 1,
  ALLOW_TOP = 2,
  ALLOW_STEPS_B = 4,
  ALLOW_REPEATS = 8,
  ALLOW_RUN_NOISE = 16,
  ALLOW_LOW_MEMORY = 32 /* the flag --low-memory (analyze): the bounded mode, docs/scale.md */
};

/* *err_out := the message (malloc'ed); returns code. */
int api_fail(char **err_out, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* argv[0..argc) of `command` into *ao (the analysis options and those `allow` adds). 0 or
 * the exit status with *err_out. Free ao with api_options_free when 0. */
int api_parse_options(const char *command, int argc, const char *const *argv, unsigned allow,
                      api_options *ao, char **err_out);
/* How every call that returns JSON begins: *json_out and *err_out cleared, the options
 * parsed. 0 or the exit status. */
int api_begin_json_call(const char *command, const char *what, char **json_out, char **err_out,
                        int argc, const char *const *argv, unsigned allow, api_options *ao);
/* The JSON report of an analysis (cli_write_fn). */
int api_write_report(const void *an, ssa_out *o);
/* What `w` writes of `what`, in *json_out. 0 or the exit status with *err_out. */
int api_json_to_memory(const char *command, cli_write_fn w, const void *what, char **json_out,
                       char **err_out);

#endif
