/*
 * cmd_diff.c — `stepscope diff RUN_A RUN_B [--json FILE] [--markdown FILE]
 * [--fail-on SPEC] [--steps A:B] [--steps-b A:B] [--step-range NAME]
 * [--launch-gap-us N] [--threads N] [--comm-kernel RE] [--compute-kernel RE]
 * [--repeat-a RUN]... [--repeat-b RUN]... [--quiet]`: loads and
 * analyses both runs with the same options (each run is any run directory
 * or file `stepscope analyze` accepts, Kineto JSON included), compares them
 * (analyzer/src/diff/diff_runs.c) and prints the text report. --repeat-a/-b add
 * more runs of the same configuration to a side: their steps are pooled and
 * the runs' spread is part of the noise test. --json writes the
 * document of docs/diff.md, --markdown a short summary for a CI comment;
 * --fail-on is the regression gate (analyzer/src/diff/diff_gate.c). Exit codes:
 * 0 ok, 1 a run could not be loaded or analysed, 2 usage error, 3 a
 * --fail-on threshold was crossed by a real change.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "option_table.h"
#include "cmd_diff_prediction.h"
#include "ssa_diff.h"
#include "ssa_report.h"
#include "ssa_import.h"

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: stepscope diff RUN_A RUN_B [options]\n"
      "       stepscope diff RUN PREDICTION.json [--json FILE] [--quiet]   (a run against\n"
      "       `stepscope plan --json`: step time, bubble, memory, MFU, tokens/s; docs/plan.md)\n"
      "Compares two runs (before/after tuning): step time, overlap, exposed comm,\n"
      "bubble, idle, MFU with a noise verdict, per rank and per step, kernels and\n"
      "collectives, and findings in plain words. Runs are run directories or files\n"
      "(rank-*.trace.zst, or PyTorch profiler rank-*.json[.gz]).\n"
      "  --json FILE         also write the JSON diff (docs/diff.md); '-' = stdout\n"
      "  --fail-on SPEC      regression gate: exit 3 when a metric moved past its threshold in\n"
      "                      the bad direction and the noise test calls the change real, e.g.\n"
      "                      \"step_time:+3%%,exposed_comm:+10%%,mfu:-2%%,bubble:+2pt\" (units: %% "
      "of\n"
      "                      run A, pt for ratios, ns/us/ms/s for times)\n"
      "  --markdown FILE     write a short Markdown summary for a CI comment (verdicts, gate,\n"
      "                      top causes, the command to reproduce); '-' = "
      "stdout\n" CLI_ANALYSIS_OPTIONS_HELP
      "  --steps-b A:B       a different step range for run B (--steps applies to both)\n"
      "  --repeat-a RUN      another run of A's configuration (repeatable, up to 15): steps are\n"
      "                      pooled, and a change must exceed how far A's runs lie apart\n"
      "  --repeat-b RUN      the same for B. With one run per side, verdicts assume separate runs\n"
      "                      of one configuration differ no more than their steps do\n"
      "  --quiet             no text report\n"
      "Verdicts: better/WORSE only when the change passes the noise test (docs/diff.md):\n"
      "noise, same, or unknown (too few steps) otherwise. Exit: 0 ok, 1 a run could not be\n"
      "loaded, 2 usage, 3 a --fail-on threshold crossed.\n");
}

/* Appends arg to buf, quoted for a POSIX shell when it needs it. */
static void append_quoted(char *buf, size_t cap, const char *arg) {
  size_t len = strlen(buf);
  int plain = *arg != 0;
  for (const char *p = arg; *p; p++)
    if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=@%+,-", *p))
      plain = 0;
  if (len + 1 < cap) buf[len++] = ' ';
  if (!plain && len + 1 < cap) buf[len++] = '\'';
  for (const char *p = arg; *p && len + 5 < cap; p++) {
    if (*p == '\'' && !plain) {
      memcpy(buf + len, "'\\''", 4);
      len += 4;
    } else {
      buf[len++] = *p;
    }
  }
  if (!plain && len + 1 < cap) buf[len++] = '\'';
  buf[len < cap ? len : cap - 1] = 0;
}

typedef struct loaded {
  ssa_run run;
  ssa_analysis an;
  int have_run, have_an;
} loaded;

static int load_and_analyse(const char *path, const ssa_options *opt, loaded *l) {
  memset(l, 0, sizeof *l);
  ssa_load_options lo = {opt->threads, isatty(2)};
  stepscope_error err;
  memset(&err, 0, sizeof err);
  l->have_run = 1;
  if (ssa_run_load_with_rules(&l->run, path, &lo, opt->comm_rules, &err)) {
    fprintf(stderr, "stepscope diff: %s\n", err.message);
    return 1;
  }
  ssa_run_print_losses(&l->run, stderr, "stepscope diff: "); /* damage first, never silent */
  l->have_an = 1;
  if (ssa_analyze(&l->run, opt, &l->an, &err)) {
    fprintf(stderr, "stepscope diff: %s: %s\n", path, err.message);
    return 1;
  }
  for (size_t i = 0; i < l->run.nwarnings; i++)
    fprintf(stderr, "stepscope diff: %s: warning: %s\n", path, l->run.warnings[i]);
  return 0;
}

static void unload(loaded *l) {
  if (l->have_an) ssa_analysis_free(&l->an);
  if (l->have_run) ssa_run_free(&l->run);
}

int cmd_diff(int argc, char **argv) {
  ssa_options opt;
  ssa_options_default(&opt);
  ssa_options opt_b;
  int has_b_steps = 0;
  int64_t b_first = 0, b_last = 0;
  const char *paths[2] = {NULL, NULL};
  const char *json_path = NULL, *markdown_path = NULL;
  const char *repeats[2][SSA_DIFF_MAX_RUNS]; /* [side][i]: repeats[s][0] is the side's run */
  size_t nrep[2] = {1, 1};
  ssa_gate gate;
  int has_gate = 0;
  int quiet = 0;
  char command[2048] = "stepscope diff";
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
        fprintf(stderr, "stepscope diff: %s needs a value\n", a);
        return 2;
      }
      i++;
      int applied = cli_apply_analysis_option("diff", a, v, &opt);
      if (applied < 0) return 2;
      if (strcmp(a, "--json") && strcmp(a, "--markdown") && strcmp(a, "--threads")) {
        append_quoted(command, sizeof command,
                      a); /* the reproduce line keeps what decides the result */
        append_quoted(command, sizeof command, v);
      }
      if (applied) continue;
      if (!strcmp(a, "--json")) {
        json_path = v;
      } else if (!strcmp(a, "--markdown")) {
        markdown_path = v;
      } else if (!strcmp(a, "--fail-on")) {
        char err[256];
        if (ssa_gate_parse(v, &gate, err, sizeof err)) {
          fprintf(stderr, "stepscope diff: %s\n", err);
          return 2;
        }
        has_gate = 1;
      } else if (!strcmp(a, "--steps-b")) {
        if (ssa_parse_steps(v, &b_first, &b_last)) {
          fprintf(stderr, "stepscope diff: bad --steps-b '%s' (want A:B)\n", v);
          return 2;
        }
        has_b_steps = 1;
      } else if (!strcmp(a, "--repeat-a") || !strcmp(a, "--repeat-b")) {
        int side = a[9] == 'b';
        if (nrep[side] >= SSA_DIFF_MAX_RUNS) {
          fprintf(stderr, "stepscope diff: at most %d runs per side (%s)\n", SSA_DIFF_MAX_RUNS, a);
          return 2;
        }
        repeats[side][nrep[side]++] = v;
      } else {
        fprintf(stderr, "stepscope diff: unknown option %s\n", a);
        usage(stderr);
        return 2;
      }
    } else if (!paths[0]) {
      paths[0] = a;
      append_quoted(command, sizeof command, a);
    } else if (!paths[1]) {
      paths[1] = a;
      append_quoted(command, sizeof command, a);
    } else {
      fprintf(stderr, "stepscope diff: unexpected argument %s\n", a);
      return 2;
    }
  }
  if (!paths[1]) {
    usage(stderr);
    return 2;
  }
  if (cli_finish_analysis_options("diff", &opt)) return 2;
  int prediction = cli_diff_which_is_prediction(paths[0], paths[1]); /* RUN PREDICTION.json */
  if (prediction >= 0)
    return cli_diff_prediction(paths[1 - prediction], paths[prediction], &opt, json_path, quiet,
                               has_gate        ? "--fail-on"
                               : markdown_path ? "--markdown"
                               : has_b_steps   ? "--steps-b"
                               : nrep[0] > 1   ? "--repeat-a"
                               : nrep[1] > 1   ? "--repeat-b"
                                               : NULL);
  opt_b = opt;
  if (has_b_steps) {
    opt_b.has_step_filter = 1;
    opt_b.step_first = b_first;
    opt_b.step_last = b_last;
  }
  repeats[0][0] = paths[0];
  repeats[1][0] = paths[1];
  loaded *l = calloc(2 * SSA_DIFF_MAX_RUNS, sizeof *l); /* side s, run i: l[s * MAX + i] */
  if (!l) {
    fprintf(stderr, "stepscope diff: out of memory\n");
    return 1;
  }
  const ssa_analysis *an[2][SSA_DIFF_MAX_RUNS];
  int rc = 0;
  for (int side = 0; side < 2 && !rc; side++) {
    for (size_t i = 0; i < nrep[side] && !rc; i++) {
      loaded *x = &l[side * SSA_DIFF_MAX_RUNS + i];
      rc = load_and_analyse(repeats[side][i], side ? &opt_b : &opt, x);
      an[side][i] = &x->an;
      char msg[1024];
      if (!rc && i > 0 &&
          !ssa_diff_repeat_fits(an[side][0], an[side][i], side, repeats[side][0], repeats[side][i],
                                msg, sizeof msg)) {
        fprintf(stderr, "%s\n", msg);
        rc = 2;
      }
    }
  }
  ssa_diff d;
  memset(&d, 0, sizeof d);
  if (!rc && ssa_diff_runs_repeated(an[0], nrep[0], an[1], nrep[1], paths[0], paths[1], &d)) {
    fprintf(stderr, "stepscope diff: out of memory while comparing\n");
    rc = 1;
  }
  if (!rc && json_path) {
    ssa_out o;
    if (ssa_out_open(&o, json_path)) {
      fprintf(stderr, "stepscope diff: %s\n", o.why);
      rc = 1;
    } else {
      ssa_diff_report_json(&d, &o);
      if (ssa_out_close(&o)) {
        fprintf(stderr, "stepscope diff: %s\n", o.why);
        rc = 1;
      }
    }
  }
  ssa_gate_outcome outcome[SSA_DM_N];
  size_t failed = !rc && has_gate ? ssa_gate_check(&d, &gate, outcome) : 0;
  if (!rc && markdown_path) {
    ssa_out o;
    if (ssa_out_open(&o, markdown_path)) {
      fprintf(stderr, "stepscope diff: cannot write %s\n", markdown_path);
      rc = 1;
    } else {
      ssa_diff_report_markdown(&d, has_gate ? &gate : NULL, outcome, command, &o);
      if (ssa_out_close(&o)) {
        fprintf(stderr, "stepscope diff: write error on %s\n", markdown_path);
        rc = 1;
      }
    }
  }
  int to_stdout =
      (json_path && !strcmp(json_path, "-")) || (markdown_path && !strcmp(markdown_path, "-"));
  if (!rc && !quiet && !to_stdout) ssa_diff_report_text(&d, stdout);
  if (!rc && has_gate) {
    /* the gate's outcome goes to stderr, so that it is seen whatever stdout holds */
    for (size_t i = 0; i < gate.n; i++) {
      const ssa_gate_rule *r = &gate.rules[i];
      char t[32];
      ssa_gate_rule_text(r, t, sizeof t);
      const ssa_diff_metric *m = &d.m[r->metric];
      fprintf(stderr, "stepscope diff: gate %s %s: %s (%s)\n", ssa_diff_metric_names[r->metric], t,
              ssa_gate_status_names[outcome[i].status],
              m->comparable ? ssa_diff_verdict_word(m, r->metric) : "-");
    }
    if (failed) {
      fprintf(stderr, "stepscope diff: %zu of %zu thresholds crossed\n", failed, gate.n);
      rc = 3;
    }
  }
  ssa_diff_free(&d);
  for (size_t i = 0; i < 2 * SSA_DIFF_MAX_RUNS; i++)
    unload(&l[i]);
  free(l);
  return rc;
}
