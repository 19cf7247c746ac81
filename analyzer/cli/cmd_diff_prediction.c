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

#include "cli_print.h"
#include "cmd_diff_prediction.h"
#include "ssa_diff.h"
#include "ssa_report.h"
#include "ssa_import.h"
#include "cli_load.h"
#include "cli_output.h"

static int prediction_json(const void *d, ssa_out *o) {
  ssa_prediction_diff_json(d, o);
  return o->error;
}

int cli_diff_which_is_prediction(const char *a, const char *b) {
  if (ssa_prediction_sniff(b)) return 1;
  if (ssa_prediction_sniff(a)) return 0;
  return -1;
}

int cli_diff_prediction(const char *run_path, const char *prediction_path, const ssa_options *opt,
                        const char *json_path, int quiet, const char *two_run_option) {
  if (two_run_option) {
    cli_print(stderr,
              "stepscope diff: %s compares two runs; against a prediction only --json, "
              "--quiet and the analysis options apply\n",
              two_run_option);
    return 2;
  }
  char err[512];
  ssa_prediction p;
  if (ssa_prediction_load(prediction_path, &p, err, sizeof err)) {
    cli_print(stderr, "stepscope diff: %s is not a readable plan prediction: %s\n", prediction_path,
              err);
    return 2;
  }
  ssa_out_protect_input(prediction_path);
  cli_loaded l;
  int rc = cli_open_run("diff", run_path, opt, CLI_SAY_LOSSES | CLI_SAY_RUN_NAME, &l);
  if (rc) goto out;
  ssa_pred_diff d;
  if (ssa_prediction_diff(&l.run, &l.an, run_path, &p, prediction_path, &d, err, sizeof err)) {
    cli_print(stderr, "stepscope diff: %s\n", err);
    rc = 1;
    goto out;
  }
  int json_to_stdout = json_path && !strcmp(json_path, "-");
  if (json_path && cli_write_output("diff", json_path, prediction_json, &d)) rc = 1;
  if (!quiet && !json_to_stdout)
    ssa_prediction_diff_text(&d, stdout);
  else /* the warnings are never silent */
    for (int i = 0; i < d.nwarnings; i++)
      cli_print(stderr, "stepscope diff: warning: %s\n", d.warnings[i]);
out:
  cli_loaded_free(&l);
  ssa_prediction_free(&p);
  return rc;
}
