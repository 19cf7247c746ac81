/*
 * diff_gate.h — the regression gate of `stepscope diff --fail-on SPEC`
 * (docs/diff.md "Regression gate"): thresholds per headline metric, parsed
 * strictly, and checked against a diff. A threshold is crossed when the
 * metric moved past it in its bad direction AND the noise test
 * (diff_verdict.c) calls the change real. Also the short Markdown summary
 * for a CI comment (diff_markdown.c).
 *
 * SPEC: comma-separated METRIC:[SIGN]NUMBER UNIT, e.g.
 * "step_time:+3%,exposed_comm:+10%,mfu:-2%,bubble:+2pt". METRIC is a
 * headline metric name (overlap and bubble also name overlap_ratio and
 * bubble_ratio); UNIT is % (relative to run A), pt (points of a ratio:
 * overlap, bubble, mfu) or a time (ns, us, ms, s: time metrics only); the
 * sign, when given, must be the metric's bad direction (+ for step_time, -
 * for mfu and overlap).
 */
#ifndef DIFF_GATE_H
#define DIFF_GATE_H

#include "diff_runs.h"

enum { SSA_GATE_PERCENT, SSA_GATE_POINTS, SSA_GATE_TIME };

typedef struct ssa_gate_rule {
  int metric;             /* SSA_DM_* */
  int unit;               /* SSA_GATE_* */
  double threshold;       /* in the unit: percent, points, or ns */
  char text[48];          /* the token as given, for messages */
} ssa_gate_rule;

typedef struct ssa_gate {
  ssa_gate_rule rules[SSA_DM_N];
  size_t n;
} ssa_gate;

/* 0, or -1 with a message naming the offending token in err. */
int ssa_gate_parse(const char *spec, ssa_gate *g, char *err, size_t errlen);

enum {
  SSA_GATE_PASS,          /* real change within the threshold, or in the good direction, or none */
  SSA_GATE_FAIL,          /* past the threshold in the bad direction, and real */
  SSA_GATE_NOISE,         /* the noise test does not call the change real */
  SSA_GATE_UNKNOWN,       /* too few steps to tell */
  SSA_GATE_UNMEASURED     /* the metric is unknown in a run (no comm, no pipeline, no FLOPs) */
};
extern const char *const ssa_gate_status_names[];

typedef struct ssa_gate_outcome {
  int status;             /* SSA_GATE_* */
  double moved;           /* the change in the rule's unit, signed so that > 0 is the bad direction; NaN unknown */
} ssa_gate_outcome;

/* Checks every rule; out has g->n entries. Returns how many failed. */
size_t ssa_gate_check(const ssa_diff *d, const ssa_gate *g, ssa_gate_outcome *out);

/* "+3%", "+2.0pt", "+1.5ms": a rule's threshold as written back. */
void ssa_gate_rule_text(const ssa_gate_rule *r, char *buf, size_t n);

/* The Markdown summary (docs/diff.md): verdicts, gate outcomes (g may be
 * NULL), the top causes, and `command` (the command line to reproduce). */
int ssa_diff_report_markdown(const ssa_diff *d, const ssa_gate *g, const ssa_gate_outcome *out,
                             const char *command, ssa_out *o);

#endif
