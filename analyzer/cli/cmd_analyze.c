/*
 * cmd_analyze.c — `stepscope analyze RUN [--json FILE] [--steps A:B]
 * [--rank R] [--step-range NAME] [--launch-gap-us N] [--top N]
 * [--threads N] [--comm-kernel RE] [--compute-kernel RE]`: loads the run (all ranks in parallel),
 * computes the metrics of docs/metrics.md and prints the readable report; --json also writes the
 * versioned JSON report (docs/report-schema.md). A thin layer over libstepscope_analysis. Exit
 * codes: 0 ok, 1 the run could not be analysed, 2 usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "option_table.h"
#include "ssa_metrics.h"
#include "ssa_report.h"
#include "ssa_import.h"

static void usage(FILE *f) {
  fprintf(f, "usage: stepscope analyze RUN [options]\n"
             "  RUN                 run directory (rank-*.trace.zst) or one trace file\n"
             "  --json FILE         also write the JSON report (docs/report-schema.md); '-' = "
             "stdout\n" CLI_ANALYSIS_OPTIONS_HELP
             "  --rank R            report only rank R (all ranks are still loaded for\n"
             "                      clock alignment and collectives)\n"
             "  --top N             rows in the kernel and collective tables (default 20)\n"
             "  --quiet             no text report (with --json)\n");
}

int cmd_analyze(int argc, char **argv) {
  ssa_options opt;
  ssa_options_default(&opt);
  const char *run_path = NULL, *json_path = NULL;
  int quiet = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--quiet")) {
      quiet = 1;
    } else if (a[0] == '-' && a[1] == '-') {
      if (!v) {
        fprintf(stderr, "stepscope analyze: %s needs a value\n", a);
        return 2;
      }
      i++;
      char *end;
      int applied = cli_apply_analysis_option("analyze", a, v, &opt);
      if (applied < 0) return 2;
      if (applied) continue;
      if (!strcmp(a, "--json")) {
        json_path = v;
      } else if (!strcmp(a, "--rank")) {
        if (cli_apply_rank_option("analyze", v, &opt)) return 2;
      } else if (!strcmp(a, "--top")) {
        long n = strtol(v, &end, 10);
        if (*end || end == v || n <= 0 || n > 1000000) {
          fprintf(stderr, "stepscope analyze: bad --top '%s' (want 1..1000000)\n", v);
          return 2;
        }
        opt.top_n = (int)n;
      } else {
        fprintf(stderr, "stepscope analyze: unknown option %s\n", a);
        usage(stderr);
        return 2;
      }
    } else if (!run_path) {
      run_path = a;
    } else {
      fprintf(stderr, "stepscope analyze: unexpected argument %s\n", a);
      return 2;
    }
  }
  if (!run_path) {
    usage(stderr);
    return 2;
  }
  if (cli_finish_analysis_options("analyze", &opt)) return 2;
  ssa_load_options lo = {opt.threads, isatty(2)};
  ssa_run run;
  stepscope_error err;
  memset(&err, 0, sizeof err);
  if (ssa_run_load_with_rules(&run, run_path, &lo, opt.comm_rules, &err)) {
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
