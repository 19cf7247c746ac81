/*
 * cmd_analyze.c — `stepscope analyze RUN [--json FILE] [--steps A:B]
 * [--rank R] [--step-range NAME] [--launch-gap-us N] [--top N]
 * [--threads N] [--comm-kernel RE] [--compute-kernel RE]`: loads the run (all ranks in parallel),
 * computes the metrics of docs/metrics.md and prints the readable report; --json also writes the
 * versioned JSON report (docs/report-schema.md). A thin layer over libstepscope_analysis. Exit
 * codes: 0 ok, 1 the run could not be analysed, 2 usage error.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "option_table.h"
#include "ssa_metrics.h"
#include "ssa_report.h"
#include "ssa_import.h"
#include "cli_env.h"

typedef struct analyze_args {
  ssa_options opt;
  const char *run_path, *json_path;
  int quiet;
} analyze_args;

static int opt_rank(const cli_option *o, const char *v, void *cmd) {
  return cli_apply_rank_option("analyze", v, &((analyze_args *)cmd)->opt) ? 2 : 0;
}

static int opt_top(const cli_option *o, const char *v, void *cmd) {
  char *end;
  long n = strtol(v, &end, 10);
  if (*end || end == v || n <= 0 || n > 1000000) {
    fprintf(stderr, "stepscope analyze: bad --top '%s' (want 1..1000000)\n", v);
    return 2;
  }
  ((analyze_args *)cmd)->opt.top_n = (int)n;
  return 0;
}

static int argument(void *cmd, const char *a) {
  analyze_args *x = cmd;
  if (x->run_path) {
    fprintf(stderr, "stepscope analyze: unexpected argument %s\n", a);
    return 2;
  }
  x->run_path = a;
  return 0;
}

static void usage(FILE *f);

#define A(f) offsetof(analyze_args, f)
static const cli_option analyze_options[] = {
    {CLI_TEXT, NULL, NULL, NULL,
     "usage: stepscope analyze RUN [options]\n"
     "  RUN                 run directory (rank-*.trace.zst) or one trace file\n",
     0, NULL, 0, 0, NULL},
    {CLI_STRING, "--json", NULL, "FILE",
     "also write the JSON report (docs/report-schema.md); '-' = stdout", A(json_path), NULL, 0, 0,
     NULL},
    {CLI_ANALYSIS, NULL, NULL, NULL, NULL, A(opt), NULL, 0, 0, NULL},
    {CLI_CALL, "--rank", NULL, "R",
     "report only rank R (all ranks are still loaded for\nclock alignment and collectives)", 0,
     opt_rank, 0, 0, NULL},
    {CLI_CALL, "--top", NULL, "N", "rows in the kernel and collective tables (default 20)", 0,
     opt_top, 0, 0, NULL},
    {CLI_FLAG, "--quiet", NULL, NULL, "no text report (with --json)", A(quiet), NULL, 0, 0, NULL},
};

static const cli_table analyze_table = {"analyze",
                                        analyze_options,
                                        sizeof analyze_options / sizeof analyze_options[0],
                                        22,
                                        CLI_ARGS_DOUBLE_DASH | CLI_VALUE_FIRST,
                                        usage,
                                        argument,
                                        NULL};

static void usage(FILE *f) {
  cli_print_options(f, &analyze_table);
}

int cmd_analyze(int argc, char **argv) {
  analyze_args x;
  memset(&x, 0, sizeof x);
  ssa_options_default(&x.opt);
  int parsed = cli_parse(&analyze_table, argc, argv, &x, NULL);
  if (parsed != CLI_PARSED) return parsed;
  ssa_options opt = x.opt;
  const char *run_path = x.run_path, *json_path = x.json_path;
  int quiet = x.quiet;
  if (!run_path) {
    usage(stderr);
    return 2;
  }
  if (cli_finish_analysis_options("analyze", &opt)) return 2;
  ssa_load_options lo = {opt.threads, isatty(2)};
  ssa_run run;
  stepscope_error err;
  memset(&err, 0, sizeof err);
  cli_env env;
  cli_env_read(&env);
  if (ssa_run_load_import(&run, run_path, &lo, opt.comm_rules, &env.import, &err)) {
    fprintf(stderr, "stepscope analyze: %s\n", err.message);
    ssa_run_free(&run);
    return 1;
  }
  ssa_analysis an;
  if (ssa_analyze(&run, &opt, &an, &err)) {
    fprintf(stderr, "stepscope analyze: %s\n", err.message);
    ssa_analysis_free(&an);
    ssa_run_free(&run);
    return opt.rank >= 0 && !ssa_run_has_rank(&run, opt.rank) ? 2 : 1;
  }
  int rc = 0;
  if (json_path) {
    ssa_out o;
    if (ssa_out_open(&o, json_path)) {
      fprintf(stderr, "stepscope analyze: %s\n", o.why);
      rc = 1;
    } else {
      ssa_report_json(&an, &o);
      if (ssa_out_close(&o)) {
        fprintf(stderr, "stepscope analyze: %s\n", o.why);
        rc = 1;
      }
    }
  }
  if (!quiet && !(json_path && !strcmp(json_path, "-"))) ssa_report_text(&an, stdout);
  ssa_analysis_free(&an);
  ssa_run_free(&run);
  return rc;
}
