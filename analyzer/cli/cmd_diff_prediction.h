/*
 * cmd_diff_prediction.h — the hook by which `stepscope diff` (cmd_diff.c) compares a run with
 * a plan's prediction instead of with another run (cmd_diff_prediction.c).
 */
#ifndef STEPSCOPE_CLI_DIFF_PREDICTION_H
#define STEPSCOPE_CLI_DIFF_PREDICTION_H

#include "ssa_metrics.h"

/* Which of the two arguments is a plan's JSON by its content: 1 (b), 0 (a), -1 neither. */
int cli_diff_which_is_prediction(const char *a, const char *b);

/* Loads and analyses the run with `opt`, reads the prediction, prints the comparison (text
 * unless quiet or --json -), writes --json. `two_run_option`: the first option given that
 * only makes sense between two runs (--fail-on, --markdown, --steps-b), or NULL. Returns the
 * exit code. */
int cli_diff_prediction(const char *run_path, const char *prediction_path, const ssa_options *opt,
                        const char *json_path, int quiet, const char *two_run_option);

#endif /* STEPSCOPE_CLI_DIFF_PREDICTION_H */
