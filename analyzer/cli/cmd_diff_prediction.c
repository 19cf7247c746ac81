/*
 * cmd_diff_prediction.c — `stepscope diff RUN PREDICTION.json`: the part of `stepscope diff`
 * that sets a measured run against what `stepscope plan --json` predicted for it
 * (analyzer/src/diff/diff_prediction.c does the work; docs/diff.md, "Run against a prediction").
 * cmd_diff.c hands over here when one of its two arguments is a plan's JSON by content.
 *
 * Exit codes: 0 ok, 1 the run could not be loaded or analysed or has none of the predicted
 * layouts, 2 usage (an option that only compares two runs) or a prediction that cannot be
 * read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_diff_prediction.h"
#include "ssa_diff.h"
#include "ssa_report.h"
#include "ssa_import.h"
#include "cli_env.h"

int cli_diff_which_is_prediction(const char *a, const char *b) {
  if (ssa_prediction_sniff(b)) return 1;
  if (ssa_prediction_sniff(a)) return 0;
  return -1;
}

int cli_diff_prediction(const char *run_path, const char *prediction_path, const ssa_options *opt,
                        const char *json_path, int quiet, const char *two_run_option) {
  if (two_run_option) {
    fprintf(stderr,
            "stepscope diff: %s compares two runs; against a prediction only --json, "
            "--quiet and the analysis options apply\n",
            two_run_option);
    return 2;
  }
  char err[512];
  ssa_prediction p;
  if (ssa_prediction_load(prediction_path, &p, err, sizeof err)) {
    fprintf(stderr, "stepscope diff: %s is not a readable plan prediction: %s\n", prediction_path,
            err);
    return 2;
  }
  ssa_out_protect_input(prediction_path);
  ssa_load_options lo = {opt->threads, isatty(2)};
  stepscope_error e;
  memset(&e, 0, sizeof e);
  ssa_run run;
  ssa_analysis an;
  memset(&an, 0, sizeof an);
  int have_an = 0, rc = 1;
  cli_env env;
  cli_env_read(&env);
  if (ssa_run_load_import(&run, run_path, &lo, opt->comm_rules, &env.import, &e)) {
    fprintf(stderr, "stepscope diff: %s\n", e.message);
    goto out;
  }
  ssa_run_print_losses(&run, stderr, "stepscope diff: ");
  have_an = 1;
  if (ssa_analyze(&run, opt, &an, &e)) {
    fprintf(stderr, "stepscope diff: %s: %s\n", run_path, e.message);
    goto out;
  }
  for (size_t i = 0; i < run.nwarnings; i++)
    fprintf(stderr, "stepscope diff: %s: warning: %s\n", run_path, run.warnings[i]);
  ssa_pred_diff d;
  if (ssa_prediction_diff(&run, &an, run_path, &p, prediction_path, &d, err, sizeof err)) {
    fprintf(stderr, "stepscope diff: %s\n", err);
    goto out;
  }
  rc = 0;
  int json_to_stdout = json_path && !strcmp(json_path, "-");
  if (json_path) {
    ssa_out o;
    if (ssa_out_open(&o, json_path)) {
      fprintf(stderr, "stepscope diff: %s\n", o.why);
      rc = 1;
    } else {
      ssa_prediction_diff_json(&d, &o);
      if (ssa_out_close(&o)) {
        fprintf(stderr, "stepscope diff: %s\n", o.why);
        rc = 1;
      }
    }
  }
  if (!quiet && !json_to_stdout)
    ssa_prediction_diff_text(&d, stdout);
  else /* the warnings are never silent */
    for (int i = 0; i < d.nwarnings; i++)
      fprintf(stderr, "stepscope diff: warning: %s\n", d.warnings[i]);
out:
  if (have_an) ssa_analysis_free(&an);
  ssa_run_free(&run);
  ssa_prediction_free(&p);
  return rc;
}
