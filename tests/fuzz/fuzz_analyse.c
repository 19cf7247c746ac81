/*
 * fuzz_analyse.c — the full analysis and every output, run by the fuzz
 * targets on whatever they parsed (fuzz_analyse.h).
 */
#include "fuzz_analyse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"
#include "ssa_report.h"
#include "ssa_export.h"

static void analyse_once(const ssa_run *run, const ssa_options *opt) {
  ssa_analysis a;
  stepscope_error err;
  memset(&err, 0, sizeof err);
  if (ssa_analyze(run, opt, &a, &err) != 0) {
    if (!err.message[0]) abort(); /* every failure must say why */
    ssa_analysis_free(&a);
    return;
  }
  ssa_out o;
  FILE *devnull = fopen("/dev/null", "w");
  if (devnull && ssa_out_open_file(&o, devnull) == 0) {
    ssa_report_json(&a, &o);
    ssa_out_close(&o);
  }
  if (devnull) {
    ssa_report_text(&a, devnull);
    fclose(devnull);
  }
  ssa_export_stats st;
  ssa_export_chrome(&a, "/dev/null", &st, &err);
  ssa_analysis_free(&a);
}

void fuzz_analyse_ranks(ssa_rank *ranks, size_t nranks) {
  ssa_run run;
  memset(&run, 0, sizeof run);
  stepscope_error err;
  memset(&err, 0, sizeof err);
  if (ssa_run_from_ranks(&run, ranks, nranks, &err) != 0) {
    if (!err.message[0]) abort();
    if (!run.ranks) { /* failed before taking the ranks */
      for (size_t i = 0; i < nranks; i++)
        ssa_rank_free(&ranks[i]);
      free(ranks);
    }
    ssa_run_free(&run);
    return;
  }
  ssa_options opt;
  ssa_options_default(&opt);
  opt.threads = 1;
  analyse_once(&run, &opt);
  opt.rank = run.nranks ? run.ranks[0].rank : 0;
  opt.has_step_filter = 1;
  opt.step_first = 1;
  opt.step_last = 2;
  opt.top_n = 3;
  analyse_once(&run, &opt);
  ssa_run_free(&run);
}
