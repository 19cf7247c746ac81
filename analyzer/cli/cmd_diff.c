/*
 * cmd_diff.c — `stepscope diff RUN_A RUN_B [--json FILE] [--markdown FILE]
 * [--fail-on SPEC] [--steps A:B] [--steps-b A:B] [--step-range NAME]
 * [--launch-gap-us N] [--threads N] [--comm-kernel RE] [--compute-kernel RE]
 * [--repeat-a RUN]... [--repeat-b RUN]... [--run-noise PCT] [--undecided pass|fail]
 * [--quiet]`: loads and
 * analyses both runs with the same options (each run is any run directory
 * or file `stepscope analyze` accepts, Kineto JSON included), compares them
 * (analyzer/src/diff/diff_runs.c) and prints the text report. --repeat-a/-b add
 * more runs of the same configuration to a side: their steps are pooled and
 * the runs' spread is part of the noise test; --run-noise gives the between-run floor
 * (with one run per side a default applies). --json writes the
 * document of docs/diff.md, --markdown a short summary for a CI comment;
 * --fail-on is the regression gate (analyzer/src/diff/diff_gate.c). Exit codes:
 * 0 ok (the gate passed), 1 a run could not be loaded or analysed, 2 usage error, 3 a
 * --fail-on threshold was crossed by a real change, 4 undecided: a threshold was exceeded
 * by a change the noise test cannot call real (`--undecided pass|fail` maps it to 0 or 3).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_print.h"
#include "option_table.h"
#include "cmd_diff_prediction.h"
#include "ssa_diff.h"
#include "ssa_report.h"
#include "ssa_import.h"
#include "cli_load.h"
#include "cli_output.h"

/* The exit codes of the gate (docs/diff.md "Regression gate"). */
enum { EXIT_GATE_FAIL = 3, EXIT_GATE_UNDECIDED = 4 };

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

/* What the command line says. */
typedef struct diff_args {
  ssa_options opt;
  int has_b_steps;
  int64_t b_first, b_last;
  const char *paths[2];
  const char *json_path, *markdown_path;
  const char *repeats[2][SSA_DIFF_MAX_RUNS]; /* [side][i]: repeats[s][0] is the side's run */
  size_t nrep[2];
  ssa_gate gate;
  int has_gate, quiet;
  int undecided_as;   /* --undecided: SSA_GATE_PASS, SSA_GATE_FAIL; SSA_GATE_UNDECIDED unset */
  double run_noise;   /* --run-noise as a fraction; NaN when not given */
  char command[2048]; /* the reproduce line of --markdown */
} diff_args;

static int opt_fail_on(const cli_option *o, const char *v, void *cmd) {
  diff_args *x = cmd;
  char err[256];
  if (ssa_gate_parse(v, &x->gate, err, sizeof err)) {
    cli_print(stderr, "stepscope diff: %s\n", err);
    return 2;
  }
  x->has_gate = 1;
  return 0;
}

static int opt_undecided(const cli_option *o, const char *v, void *cmd) {
  diff_args *x = cmd;
  char err[128];
  if (ssa_gate_parse_undecided(v, &x->undecided_as, err, sizeof err)) {
    cli_print(stderr, "stepscope diff: %s\n", err);
    return 2;
  }
  return 0;
}

static int opt_run_noise(const cli_option *o, const char *v, void *cmd) {
  diff_args *x = cmd;
  char err[160];
  if (ssa_diff_parse_run_noise(v, &x->run_noise, err, sizeof err)) {
    cli_print(stderr, "stepscope diff: %s\n", err);
    return 2;
  }
  return 0;
}

static int opt_steps_b(const cli_option *o, const char *v, void *cmd) {
  diff_args *x = cmd;
  if (ssa_parse_steps(v, &x->b_first, &x->b_last)) {
    cli_print(stderr, "stepscope diff: bad --steps-b '%s' (want A:B)\n", v);
    return 2;
  }
  x->has_b_steps = 1;
  return 0;
}

static int opt_repeat(const cli_option *o, const char *v, void *cmd) {
  diff_args *x = cmd;
  int side = o->name[9] == 'b';
  if (x->nrep[side] >= SSA_DIFF_MAX_RUNS) {
    cli_print(stderr, "stepscope diff: at most %d runs per side (%s)\n", SSA_DIFF_MAX_RUNS,
              o->name);
    return 2;
  }
  x->repeats[side][x->nrep[side]++] = v;
  return 0;
}

/* The reproduce line keeps the runs and what decides the result. */
static void seen(void *cmd, const char *name, const char *value) {
  diff_args *x = cmd;
  if (name &&
      (!strcmp(name, "--json") || !strcmp(name, "--markdown") || !strcmp(name, "--threads")))
    return;
  if (name) append_quoted(x->command, sizeof x->command, name);
  append_quoted(x->command, sizeof x->command, value);
}

#define A(f) offsetof(diff_args, f)
static const cli_option diff_options[] = {
    {CLI_STRING, "--json", NULL, "FILE", "also write the JSON diff (docs/diff.md); '-' = stdout",
     A(json_path), NULL, 0, 0, NULL},
    {CLI_CALL, "--fail-on", NULL, "SPEC",
     "regression gate: exit 3 when a metric moved past its threshold in\n"
     "the bad direction and the noise test calls the change real, 4\n"
     "(undecided) when it moved past but the change is within noise, e.g.\n"
     "\"step_time:+3%,exposed_comm:+10%,mfu:-2%,bubble:+2pt\" (units: % of\n"
     "run A, pt for ratios, ns/us/ms/s for times)",
     0, opt_fail_on, 0, 0, NULL},
    {CLI_CALL, "--undecided", NULL, "pass|fail",
     "what an undecided gate counts as: exit 0 or 3 instead of 4", 0, opt_undecided, 0, 0, NULL},
    {CLI_STRING, "--markdown", NULL, "FILE",
     "write a short Markdown summary for a CI comment (verdicts, gate,\n"
     "what changed the step time, the command to reproduce); '-' = stdout",
     A(markdown_path), NULL, 0, 0, NULL},
    {CLI_ANALYSIS, NULL, NULL, NULL, NULL, A(opt), NULL, 0, 0, NULL},
    {CLI_CALL, "--steps-b", NULL, "A:B",
     "a different step range for run B (--steps applies to both)", 0, opt_steps_b, 0, 0, NULL},
    {CLI_REPEAT, "--repeat-a", NULL, "RUN",
     "another run of A's configuration (repeatable, up to 15): steps are\n"
     "pooled, and a t-test over the runs' medians asks whether the sides'\n"
     "runs lie apart by more than one side's runs do",
     0, opt_repeat, 0, 0, NULL},
    {CLI_REPEAT, "--repeat-b", NULL, "RUN",
     "the same for B (three runs per side measure run-to-run noise)", 0, opt_repeat, 0, 0, NULL},
    {CLI_CALL, "--run-noise", NULL, "PCT",
     "between-run noise floor: a change must exceed PCT % of A's step time\n"
     "(PCT points for ratios); default 30 with one run per side, where\n"
     "nothing measures it; 0 = none. With repeats it applies as well",
     0, opt_run_noise, 0, 0, NULL},
    {CLI_FLAG, "--quiet", NULL, NULL, "no text report", A(quiet), NULL, 0, 0, NULL},
};

static const cli_table diff_table = {
    .command = "diff",
    .head =
        "usage: stepscope diff RUN_A RUN_B [options]\n"
        "       stepscope diff RUN PREDICTION.json [--json FILE] [--quiet]   (a run against\n"
        "       `stepscope plan --json`: step time, bubble, memory, MFU, tokens/s; docs/plan.md)\n"
        "Compares two runs (before/after tuning): step time, overlap, exposed comm,\n"
        "bubble, idle, MFU with a noise verdict, what changed the step time (parts\n"
        "that add up), per rank and per step, kernels and collectives, and findings\n"
        "in plain words. Runs are run directories or files\n"
        "(rank-*.trace.zst, or PyTorch profiler rank-*.json[.gz]).\n",
    CLI_ROWS(diff_options),
    .flags = CLI_ARGS_DOUBLE_DASH,
    .args = A(paths),
    .nargs = 2,
    .seen = seen,
    .tail = "Verdicts: better/WORSE only when the change passes the noise test (docs/diff.md):\n"
            "noise, same, or unknown (too few steps) otherwise. Exit: 0 ok, 1 a run could not be\n"
            "loaded, 2 usage, 3 a --fail-on threshold crossed, 4 the gate is undecided.\n"};

/* Loads and analyses every run of both sides into l (side s, run i: l[s * MAX + i]), an[s][i]
 * pointing at their analyses. 0, or the exit status (said why). */
static int load_sides(diff_args *x, cli_loaded *l, const ssa_analysis *an[2][SSA_DIFF_MAX_RUNS]) {
  ssa_options opt_b = x->opt;
  if (x->has_b_steps) {
    opt_b.has_step_filter = 1;
    opt_b.step_first = x->b_first;
    opt_b.step_last = x->b_last;
  }
  int rc = 0;
  for (int side = 0; side < 2 && !rc; side++) {
    for (size_t i = 0; i < x->nrep[side] && !rc; i++) {
      cli_loaded *r = &l[side * SSA_DIFF_MAX_RUNS + i];
      rc = cli_open_run("diff", x->repeats[side][i], side ? &opt_b : &x->opt,
                        CLI_SAY_LOSSES | CLI_SAY_RUN_NAME, r);
      an[side][i] = &r->an;
      char msg[1024];
      if (!rc && i > 0 &&
          !ssa_diff_repeat_fits(an[side][0], an[side][i], side, x->repeats[side][0],
                                x->repeats[side][i], msg, sizeof msg)) {
        cli_print(stderr, "%s\n", msg);
        rc = 2;
      }
    }
  }
  return rc;
}

static int diff_json(const void *d, ssa_out *o) {
  return ssa_diff_report_json(d, o);
}

/* What --markdown writes: the diff, the gate and its outcome, the reproduce line. */
typedef struct markdown_of {
  const ssa_diff *d;
  const ssa_gate *gate;
  const ssa_gate_outcome *outcome;
  const ssa_gate_result *result;
  const char *command;
} markdown_of;

static int diff_markdown(const void *what, ssa_out *o) {
  const markdown_of *m = what;
  return ssa_diff_report_markdown(m->d, m->gate, m->outcome, m->result, m->command, o);
}

/* --json and --markdown of the diff d: 0, or 1 (said why). */
static int write_reports(const diff_args *x, const ssa_diff *d, const ssa_gate_outcome *outcome,
                         const ssa_gate_result *gate) {
  if (x->json_path && cli_write_output("diff", x->json_path, diff_json, d)) return 1;
  markdown_of m = {d, x->has_gate ? &x->gate : NULL, outcome, gate, x->command};
  if (x->markdown_path && cli_write_output("diff", x->markdown_path, diff_markdown, &m)) return 1;
  return 0;
}

/* The gate's outcome, on stderr so that it is seen whatever stdout holds: 0 (pass), 3 (a
 * threshold crossed) or 4 (undecided), an undecided gate mapped by --undecided. */
static int report_gate(const diff_args *x, const ssa_diff *d, const ssa_gate_outcome *outcome,
                       const ssa_gate_result *res) {
  for (size_t i = 0; i < x->gate.n; i++) {
    const ssa_gate_rule *r = &x->gate.rules[i];
    char t[32];
    ssa_gate_rule_text(r, t, sizeof t);
    const ssa_diff_metric *m = &d->m[r->metric];
    cli_print(stderr, "stepscope diff: gate %s %s: %s (%s)\n", ssa_diff_metric_names[r->metric], t,
              ssa_gate_status_names[outcome[i].status],
              m->comparable ? ssa_diff_verdict_word(m, r->metric) : "-");
  }
  if (res->failed)
    cli_print(stderr, "stepscope diff: %zu of %zu thresholds crossed\n", res->failed, res->n);
  if (res->outcome == SSA_GATE_UNDECIDED)
    cli_print(stderr,
              "stepscope diff: undecided: %zu of %zu thresholds exceeded by a change the noise "
              "test cannot call real%s\n",
              res->undecided, res->n,
              res->counts_as == SSA_GATE_PASS   ? " (counted as pass: --undecided pass)"
              : res->counts_as == SSA_GATE_FAIL ? " (counted as fail: --undecided fail)"
                                                : "");
  return res->counts_as == SSA_GATE_FAIL        ? EXIT_GATE_FAIL
         : res->counts_as == SSA_GATE_UNDECIDED ? EXIT_GATE_UNDECIDED
                                                : 0;
}

/* Compares the loaded sides and reports: 0, or the exit status. */
static int compare(diff_args *x, const ssa_analysis *an[2][SSA_DIFF_MAX_RUNS]) {
  ssa_diff d;
  memset(&d, 0, sizeof d);
  if (ssa_diff_runs_repeated(an[0], x->nrep[0], an[1], x->nrep[1], x->paths[0], x->paths[1],
                             x->run_noise, x->has_gate ? ssa_gate_metrics(&x->gate) : 0, &d)) {
    cli_print(stderr, "stepscope diff: out of memory while comparing\n");
    ssa_diff_free(&d);
    return 1;
  }
  ssa_gate_outcome outcome[SSA_DM_N];
  ssa_gate_result gate = {0};
  if (x->has_gate) {
    x->gate.undecided_as = x->undecided_as;
    gate = ssa_gate_check(&d, &x->gate, outcome); /* reads d only */
  }
  int rc = write_reports(x, &d, outcome, &gate);
  int to_stdout = (x->json_path && !strcmp(x->json_path, "-")) ||
                  (x->markdown_path && !strcmp(x->markdown_path, "-"));
  if (!rc && !x->quiet && !to_stdout) ssa_diff_report_text(&d, stdout);
  if (!rc && x->has_gate) rc = report_gate(x, &d, outcome, &gate);
  ssa_diff_free(&d);
  return rc;
}

int cmd_diff(int argc, char **argv) {
  diff_args *x = calloc(1, sizeof *x);
  if (!x) {
    cli_print(stderr, "stepscope diff: out of memory\n");
    return 1;
  }
  x->nrep[0] = x->nrep[1] = 1;
  x->undecided_as = SSA_GATE_UNDECIDED;
  x->run_noise = NAN;
  snprintf(x->command, sizeof x->command, "stepscope diff");
  int rc = cli_parse(&diff_table, argc, argv, x, NULL);
  if (rc == CLI_PARSED && x->undecided_as != SSA_GATE_UNDECIDED && !x->has_gate) {
    cli_print(stderr, "stepscope diff: --undecided applies to the gate: give --fail-on too\n");
    rc = 2;
  }
  if (rc != CLI_PARSED) {
    free(x);
    return rc;
  }
  int prediction = cli_diff_which_is_prediction(x->paths[0], x->paths[1]); /* RUN PREDICTION.json */
  if (prediction >= 0) {
    rc = cli_diff_prediction(x->paths[1 - prediction], x->paths[prediction], &x->opt, x->json_path,
                             x->quiet,
                             x->has_gate            ? "--fail-on"
                             : x->markdown_path     ? "--markdown"
                             : x->has_b_steps       ? "--steps-b"
                             : x->nrep[0] > 1       ? "--repeat-a"
                             : x->nrep[1] > 1       ? "--repeat-b"
                             : !isnan(x->run_noise) ? "--run-noise"
                                                    : NULL);
    free(x);
    return rc;
  }
  x->repeats[0][0] = x->paths[0];
  x->repeats[1][0] = x->paths[1];
  cli_loaded *l = calloc(2 * SSA_DIFF_MAX_RUNS, sizeof *l); /* side s, run i: l[s * MAX + i] */
  if (!l) {
    cli_print(stderr, "stepscope diff: out of memory\n");
    free(x);
    return 1;
  }
  const ssa_analysis *an[2][SSA_DIFF_MAX_RUNS];
  rc = load_sides(x, l, an);
  if (!rc) rc = compare(x, an);
  for (size_t i = 0; i < 2 * SSA_DIFF_MAX_RUNS; i++)
    cli_loaded_free(&l[i]);
  free(l);
  free(x);
  return rc;
}
