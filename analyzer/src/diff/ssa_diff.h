/*
 * ssa_diff.h — the analyzer's diff floor (analyzer/src/diff): `stepscope diff`. Three parts,
 * each introduced below by the prose of the header it used to be: two runs (or repeated
 * runs per side) compared with a noise test (diff_runs.c, diff_verdict.c, diff_report.c),
 * the CI gate and its markdown comment (diff_gate.c, diff_markdown.c), and a run against
 * what `stepscope plan` predicted for it (diff_prediction.c, prediction_read.c).
 */
#ifndef SSA_DIFF_H
#define SSA_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "memory_model.h"
#include "ssa_io.h"
#include "ssa_metrics.h"

/* ---- runs compared ----
 * The comparison of two analysed runs (`stepscope diff`),
 * built only from the analyzer's results (ssa_metrics.h): nothing is
 * re-measured, so a number in the diff is the number `stepscope analyze`
 * prints for that run. docs/diff.md defines every field and the JSON schema.
 *
 * Metrics are compared through per-step series: for each analysed step, the
 * value over the ranks (mean of the ranks' windows for times, sum-ratio for
 * ratios, the run's step time for step time) over the steps analyze's medians count. A
 * run's value is the median of its series (SSA_MEDIAN_INDEX: analyze's), its spread the
 * interquartile range (max - min when it has
 * fewer than 4 steps). Whether a change is real is the noise test of
 * diff_verdict.c (rank test over steps, spread, within-run drift, minimum
 * effect, comparable load); too few steps give "unknown". A run without
 * steps contributes its totals window as a single value (so: unknown).
 *
 * Repeated runs: each side may hold several runs of its configuration (the
 * same command measured again: `--repeat-a`, `--repeat-b`). Their steps are
 * pooled for the medians, spreads and the rank test, and the runs' own
 * medians measure how much separate runs of one configuration differ: the
 * noise test then also asks that the two sides' runs be further apart than
 * the runs of either side are from each other (docs/diff.md, test 3).
 * Kernels, collectives, steps and the kernel-stretch load sign come from
 * the first run of each side.
 *
 * The between-run noise floor: with one run per side nothing in the traces
 * measures how far runs of one configuration lie apart, so a change must
 * also exceed a floor given as a percentage (`--run-noise PCT`, default
 * SSA_DIFF_RUN_NOISE_DEFAULT): of A's step time for times, of A's MFU, in
 * points for the overlap and bubble ratios (docs/diff.md, test 8). With
 * repeated runs the floor is measured (test 3), and a given one applies too.
 */

#define SSA_DIFF_SCHEMA_VERSION 1

/* Headline metrics, in this order. */
enum {
  SSA_DM_STEP_TIME,     /* ns: the run's step time (slowest rank) */
  SSA_DM_COMPUTE,       /* ns per step, mean over ranks */
  SSA_DM_COMM,          /* ns per step */
  SSA_DM_EXPOSED_COMM,  /* ns per step */
  SSA_DM_OVERLAP_RATIO, /* overlap / comm, summed over ranks */
  SSA_DM_EXPOSED_MEM,   /* ns per step */
  SSA_DM_IDLE,          /* ns per step */
  SSA_DM_BUBBLE_RATIO,  /* bubble / span over pipeline ranks; unknown without pipeline */
  SSA_DM_MFU,           /* model FLOPs utilisation; unknown without FLOPs metadata */
  SSA_DM_N
};
extern const char *const ssa_diff_metric_names[SSA_DM_N];
/* 1 when the metric is a time in ns, 0 for a ratio */
extern const int ssa_diff_metric_is_time[SSA_DM_N];
/* +1 when larger is better, -1 when smaller is better */
extern const int ssa_diff_metric_better[SSA_DM_N];

/* The noise test's constants (docs/diff.md "Noise test"). */
#define SSA_DIFF_ALPHA                0.05 /* Mann-Whitney U, two-sided */
#define SSA_DIFF_MIN_STEPS            3    /* fewer values on a side: unknown */
#define SSA_DIFF_EXACT_MAX            24 /* exact U distribution up to nA + nB values (cost ~N^3 per test) */
#define SSA_DIFF_MIN_EFFECT_REL       0.01 /* times: 1 % of A's step time; MFU: 1 % of A */
#define SSA_DIFF_MIN_EFFECT_PT        0.01 /* overlap and bubble ratios: 1 point */
#define SSA_DIFF_LOAD_PT              0.05 /* queued-idle shares 5 points apart: load differs */
#define SSA_DIFF_LOAD_STRETCH         1.3 /* kernels stretched 1.3x more in one run: load differs */
#define SSA_DIFF_STRETCH_MIN_LAUNCHES 8   /* kernels with fewer launches do not count for stretch */
#define SSA_DIFF_LOAD_MACHINE         0.5 /* load averages this many threads per CPU apart: differs */
#define SSA_DIFF_MAX_RUNS             16   /* runs per side (a run and its repeats) */
#define SSA_DIFF_RUN_NOISE_DEFAULT    0.30 /* one run per side: the between-run floor (docs) */
#define SSA_DIFF_RUN_NOISE_MAX        10.0 /* --run-noise at most 1000 % */
#define SSA_DIFF_MAX_CONFIG_DIFFS     16   /* configuration members listed (diff_config.c) */

/* A configuration member that differs between the runs: its JSON value text in each. */
typedef struct ssa_diff_config_diff {
  char key[48];
  char a[64], b[64]; /* "(absent)" when a run lacks it; cut to fit */
} ssa_diff_config_diff;

/* Where the between-run noise floor comes from (ssa_diff.run_noise_source). */
enum {
  SSA_DIFF_FLOOR_MEASURED, /* repeated runs on a side: their spread (test 3) */
  SSA_DIFF_FLOOR_GIVEN,    /* --run-noise PCT (with repeats: as well as the measured one) */
  SSA_DIFF_FLOOR_DEFAULT   /* one run per side, nothing given: SSA_DIFF_RUN_NOISE_DEFAULT */
};

/* Verdicts. */
enum { SSA_DV_UNKNOWN, SSA_DV_SAME, SSA_DV_NOISE, SSA_DV_REAL };
/* Why a change is not called real (the first test that failed). */
enum {
  SSA_DN_NONE,
  SSA_DN_TOO_FEW,
  SSA_DN_LOAD,
  SSA_DN_BETWEEN_RUNS,
  SSA_DN_RANK_TEST,
  SSA_DN_SPREAD,
  SSA_DN_DRIFT,
  SSA_DN_MIN_EFFECT,
  SSA_DN_RUN_NOISE,
  SSA_DN_N
};
extern const char *const ssa_diff_noise_reason_names[SSA_DN_N];

typedef struct ssa_diff_stat {
  int known; /* 0: the run has no value (no comm, no pipeline, no FLOPs) */
  double median, p25, p75, min, max, spread;
  double drift;                         /* |median of the second half - median of the first half|
                                           (the largest of the runs' own, with repeated runs) */
  size_t n;                             /* values (steps, of all the side's runs) */
  size_t runs;                          /* runs with at least one value */
  double run_median[SSA_DIFF_MAX_RUNS]; /* each run's own median, in the order given */
  double between;                       /* max - min of run_median; NaN with fewer than 2 runs */
} ssa_diff_stat;

typedef struct ssa_diff_metric {
  ssa_diff_stat a, b;
  double abs_change;  /* b - a (medians) */
  double rel_change;  /* (b - a) / |a|, NaN when a is 0 or unknown */
  int verdict;        /* SSA_DV_* */
  int noise_reason;   /* SSA_DN_*: why not real (SSA_DN_TOO_FEW with unknown) */
  double p_value;     /* Mann-Whitney two-sided; NaN when not computed */
  double min_effect;  /* smallest change that counts, in the metric's unit; NaN when not computed */
  double run_gap;     /* distance between the nearest runs of A and B (negative when their
                         medians interleave); NaN unless a side has repeated runs */
  double run_p_value; /* the between-run t-test's p (student_t.c): one-sided when
                         run_one_sided, else two-sided; NaN unless a side has repeated runs */
  int run_one_sided;  /* the test asked only "worse?" (SSA_DIFF_GATE_METRIC, the change worse) */
  double run_p_adjusted; /* run_p_value adjusted for the metrics judged together
                            (diff_runs.c: Bonferroni or Holm), held to SSA_DIFF_ALPHA;
                            NaN when not tested */
  double run_floor;      /* the between-run noise floor in the metric's unit; NaN when none */
  int noise;             /* verdict is same or noise */
  int comparable;        /* both known */
} ssa_diff_metric;

typedef struct ssa_diff_rank {
  int rank;
  int in_a, in_b;
  ssa_diff_metric m[SSA_DM_N];      /* step time here = the rank's own step span */
  int64_t coll_wait_a, coll_wait_b; /* total collective wait in the analysed window */
} ssa_diff_rank;

typedef struct ssa_diff_step {
  size_t index;           /* position in each run's step list (steps are matched by order) */
  int64_t step_a, step_b; /* step numbers, -1 when the run has fewer steps */
  int64_t time_a, time_b; /* step times, -1 when absent */
} ssa_diff_step;

typedef struct ssa_diff_kernel {
  const char *name; /* points into one of the analyses' string tables */
  int comm;
  int in_a, in_b;
  double count_a, count_b;         /* per step */
  double time_a, time_b;           /* ns per step */
  double mean_a, mean_b;           /* ns per launch, NaN when absent */
  uint64_t launches_a, launches_b; /* launches in the analysed window, all ranks */
  double min_a, min_b;             /* shortest launch (ns), NaN when absent */
} ssa_diff_kernel;

typedef struct ssa_diff_coll {
  uint32_t op;
  const char *group;
  uint64_t bytes;
  int in_a, in_b;
  double count_a, count_b;       /* instances per step */
  double transfer_a, transfer_b; /* mean transfer ns */
  double busbw_a, busbw_b;       /* GB/s, NaN when absent */
  double wait_a, wait_b;         /* total wait of all ranks, ns per step */
} ssa_diff_coll;

/* The parts of a step (diff_causes.c): compute, exposed communication, exposed copies, then
 * idle by cause (SSA_IDLE_* order). */
enum { SSA_DPART_COMPUTE, SSA_DPART_EXPOSED_COMM, SSA_DPART_EXPOSED_COPY, SSA_DPART_IDLE };
#define SSA_DPART_N (SSA_DPART_IDLE + SSA_IDLE_N)

/* What changed the step time: per side, the mean over its judged steps of the parts of the
 * rank that set each step; the parts sum to the mean step time, their changes to its change. */
typedef struct ssa_diff_decomp {
  int known;               /* both sides have steps */
  size_t steps_a, steps_b; /* steps averaged (all runs of the side) */
  double mean_a, mean_b;   /* mean step time, ns */
  double part_a[SSA_DPART_N], part_b[SSA_DPART_N];
  int order[SSA_DPART_N];    /* parts by |change|, descending */
  int pipeline;              /* a side has pipeline ranks: bubble_* given */
  double bubble_a, bubble_b; /* mean pipeline bubble of those ranks (across the parts) */
} ssa_diff_decomp;

typedef struct ssa_diff {
  const ssa_analysis *a, *b; /* the first run of each side */
  const char *path_a, *path_b;
  const ssa_analysis *runs_a[SSA_DIFF_MAX_RUNS], *runs_b[SSA_DIFF_MAX_RUNS]; /* [0] = a, b */
  size_t nruns_a, nruns_b;
  double run_noise;      /* the floor's fraction (0.30 = 30 %); NaN when none (measured only) */
  int run_noise_source;  /* SSA_DIFF_FLOOR_* */
  int same_layout;       /* same rank set (and world); per-rank comparison done */
  char layout_note[256]; /* why not, when not */
  /* load: median share of a step during which the devices sat idle although
   * work was already launched (idle cause `other`), mean over ranks, and its
   * upper quartile over steps; NaN without steps. Medians or upper quartiles
   * SSA_DIFF_LOAD_PT apart: verdicts are withheld. */
  double queued_idle_a, queued_idle_b, queued_idle_a_p75, queued_idle_b_p75;
  /* load, second sign: median over the compute kernels launched equally often
   * in both runs of (mean/min duration in B) / (mean/min in A). Preemption
   * stretches some launches of a kernel (mean up, min not); a kernel that
   * really got slower moves both. NaN with fewer than 3 such kernels. */
  double kernel_stretch;
  size_t stretch_kernels;
  /* load, third sign (diff_machine_load.c): the machine's 1-minute load average from the
   * traces' `machine` metadata, median over each side's runs, and the CPUs; NaN unknown.
   * More than SSA_DIFF_LOAD_MACHINE per CPU apart: machine_differs. */
  double machine_load_a, machine_load_b, machine_cpus;
  int machine_differs;
  int load_differs; /* any of the three signs */
  int world_a, world_b;
  /* configuration and FLOPs convention (diff_config.c) */
  int config_known; /* both runs carry a configuration (the trainer's) */
  ssa_diff_config_diff config_diffs[SSA_DIFF_MAX_CONFIG_DIFFS];
  size_t nconfig_diffs;
  double flops_a, flops_b; /* model FLOPs per step; NaN when a run has none */
  int flops_differ;        /* they differ */
  int mfu_incomparable;    /* ... with the same configuration: MFU not compared */
  ssa_diff_metric m[SSA_DM_N];
  ssa_diff_rank *ranks;
  size_t nranks;
  ssa_diff_step *steps;
  size_t nsteps;
  ssa_diff_kernel *kernels;
  size_t nkernels; /* sorted by |time change|, descending */
  ssa_diff_coll *colls;
  size_t ncolls; /* sorted by |wait + transfer change| */
  ssa_diff_decomp decomp;
  char **findings;
  size_t nfindings, findings_cap;
} ssa_diff;

/* Compares two analyses (which must outlive the diff) with the default between-run floor.
 * 0 or a negative stepscope status (allocation failure). */
int ssa_diff_runs(const ssa_analysis *a, const ssa_analysis *b, const char *path_a,
                  const char *path_b, ssa_diff *out);
/* The same with repeated runs: na runs of A's configuration (a[0] first)
 * and nb of B's, 1..SSA_DIFF_MAX_RUNS each. run_noise: the between-run floor given
 * (--run-noise, a fraction: 0.05 = 5 %; 0 = none), or NaN when not given (then the
 * default with one run per side, the measured spread alone with repeats). declared: the
 * metrics named in advance (the gate's, a bit per SSA_DM_*; 0: none), which the
 * between-run test judges as their own family (docs/diff.md "Noise test", test 3). */
int ssa_diff_runs_repeated(const ssa_analysis *const *a, size_t na, const ssa_analysis *const *b,
                           size_t nb, const char *path_a, const char *path_b, double run_noise,
                           unsigned declared, ssa_diff *out);
/* Adjusts the between-run test's p-values of d's metrics for the metrics judged together
 * (declared: as ssa_diff_runs_repeated's) into run_p_adjusted, and turns a verdict whose
 * adjusted p is not below SSA_DIFF_ALPHA into noise (between_runs). diff_verdict.c. */
void ssa_diff_between_runs_family(ssa_diff *d, unsigned declared);
/* Appends the findings (plain sentences) of a finished comparison to d->findings: 0 or
 * STEPSCOPE_E_NOMEM. diff_findings.c. */
int ssa_diff_build_findings(ssa_diff *d);
/* --run-noise PCT: a plain decimal percentage 0..1000 into *fraction; 0, or -1 with a
 * message in err. */
int ssa_diff_parse_run_noise(const char *pct, double *fraction, char *err, size_t errlen);
/* One line saying which between-run floor the diff used and where it comes from. */
void ssa_diff_floor_text(const ssa_diff *d, char *buf, size_t n);
void ssa_diff_free(ssa_diff *d);
/* What changed the step time (diff_causes.c): fills d->decomp; 0 or STEPSCOPE_E_NOMEM. */
int ssa_diff_decompose(ssa_diff *d);
const char *ssa_diff_part_name(int part); /* "compute", "idle: data loading", ... */
const char *ssa_diff_part_key(int part);  /* "compute", "idle.data_loading", ... (JSON) */
/* The decomposition as the text section, the JSON member `step_time_parts` (with its leading
 * comma) and the Markdown list (diff_causes_report.c). */
void ssa_diff_decomp_text(const ssa_diff *d, FILE *f);
void ssa_diff_decomp_json(const ssa_diff *d, ssa_out *o);
void ssa_diff_decomp_markdown(const ssa_diff *d, ssa_out *o);
/* Rank lookups the diff's files share (diff_layout.c): the result of a rank number (NULL if
 * absent), whether a rank is selected (--rank), and the run's world size. */
const ssa_rank_result *ssa_diff_find_rank(const ssa_analysis *a, int rank);
int ssa_diff_selected(const ssa_analysis *a, const ssa_rank_result *rr);
int ssa_diff_world(const ssa_analysis *a);
/* 1 when two analyses have the same rank set, world size and layout
 * metadata (so they compare rank by rank); else 0 with the reason in note (diff_layout.c). */
int ssa_diff_same_layout(const ssa_analysis *a, const ssa_analysis *b, char *note, size_t cap);
/* For `diff --repeat-a/-b` (the CLI and the C API): 1 when the repeat
 * `rep` (run `rep_path`) of side `side` (0: A, 1: B) has the layout of the
 * side's first run `first` (`first_path`); else 0 with the whole message in
 * msg ("stepscope diff: --repeat-a RUN is not a run of ...'s configuration: ..."). */
int ssa_diff_repeat_fits(const ssa_analysis *first, const ssa_analysis *rep, int side,
                         const char *first_path, const char *rep_path, char *msg, size_t cap);

/* Compares the runs' configurations and FLOPs per step (diff_config.c): fills the config
 * fields of d and, when the FLOPs count changed under the same configuration, makes MFU not
 * comparable. Runs after the metrics are compared. */
void ssa_diff_configs(ssa_diff *d);
/* "the configurations differ: hidden 64 -> 72, layers 2 -> 3" */
void ssa_diff_config_text(const ssa_diff *d, char *buf, size_t n);

/* Fills the machine-load fields of d from its runs (diff_machine_load.c). */
void ssa_diff_machine_load(ssa_diff *d);

/* Statistics of n values (sorted in place; drift is left 0). */
void ssa_diff_stats(double *v, size_t n, ssa_diff_stat *out);

/* ---- the noise test (diff_verdict.c) ---- */
/* Two-sided p-value of the Mann-Whitney U test; NaN on allocation failure. */
double ssa_diff_mann_whitney(const double *a, size_t na, const double *b, size_t nb);
/* The smallest p-value the test can reach with these sample sizes (no ties). */
double ssa_diff_min_p(size_t na, size_t nb);
/* |median of the second half - median of the first half| of a series in time order. */
double ssa_diff_drift(const double *v, size_t n);
/* ---- the between-run test (student_t.c) ---- */
/* Two-sided tail probability of Student's t distribution with df degrees of freedom. */
double ssa_student_t_p(double t, double df);
/* Two-sided p-value of Student's two-sample t-test (pooled variance) of the
 * run medians a[na] against b[nb] (their logarithms when all are positive); NaN when
 * na + nb < 3, a side is empty or has more than SSA_DIFF_MAX_RUNS. *direction (when not
 * NULL): +1 when B's mean lies above A's, -1 below, 0 equal or not tested. */
double ssa_diff_runs_t_test(const double *a, size_t na, const double *b, size_t nb, int *direction);
/* Fills m from metric k's per-step series of both runs (time order; not
 * modified). step_a: run A's median step time (for the minimum effect and the floor).
 * run_noise: the between-run floor as a fraction (NaN or 0: none). 0 or STEPSCOPE_E_NOMEM. */
int ssa_diff_compare_series(const double *va, size_t na, const double *vb, size_t nb, int k,
                            double step_a, int load_differs, double run_noise, ssa_diff_metric *m);
/* Flags of ssa_diff_compare_runs. */
enum {
  SSA_DIFF_LOAD_DIFFERS = 1u, /* the load differs between the runs: withhold the verdict */
  SSA_DIFF_GATE_METRIC = 2u   /* a gate threshold names the metric: the between-run test asks
                                 one-sided whether it got worse (docs/diff.md, test 3) */
};
/* The same for sides of repeated runs: va is the concatenation of the runs'
 * series (each in time order), seg_a[i] the number of values of run i
 * (ka runs, at most SSA_DIFF_MAX_RUNS); likewise for B. flags: SSA_DIFF_* above. */
int ssa_diff_compare_runs(const double *va, const size_t *seg_a, size_t ka, const double *vb,
                          const size_t *seg_b, size_t kb, int k, double step_a, unsigned flags,
                          double run_noise, ssa_diff_metric *m);
/* "better", "WORSE", "noise", "same", "unknown" ("" when not comparable). */
const char *ssa_diff_verdict_word(const ssa_diff_metric *m, int k);

/* The readable report and the JSON document (docs/diff.md). */
int ssa_diff_report_text(const ssa_diff *d, FILE *f);
int ssa_diff_report_json(const ssa_diff *d, ssa_out *o);

/* The kernels and collectives named as causes (the findings and the Markdown summary,
 * diff_runs.c): a row whose time per step (a collective's waits plus transfers) changed by at
 * least 1 % of run A's median step time. The rows are sorted by that change, largest first,
 * so the first row that did not move ends the list. */
int ssa_diff_kernel_moved(const ssa_diff *d, const ssa_diff_kernel *k);
int ssa_diff_coll_moved(const ssa_diff *d, const ssa_diff_coll *c);
/* A collective row in words: its op ("?" when unknown), group ("?" when unnamed), and each
 * side's wait of all ranks and mean transfer per step as times (ssa_fmt_time). */
typedef struct ssa_diff_coll_text {
  const char *op, *group;
  char wait_a[48], wait_b[48], transfer_a[48], transfer_b[48];
} ssa_diff_coll_text;
void ssa_diff_coll_describe(const ssa_diff_coll *c, ssa_diff_coll_text *t);

/* ---- the CI gate ----
 * The regression gate of `stepscope diff --fail-on SPEC`
 * (docs/diff.md "Regression gate"): thresholds per headline metric, parsed
 * strictly, and checked against a diff. Three outcomes: a threshold is
 * crossed (fail) when the metric moved past it in its bad direction AND the
 * noise test (diff_verdict.c) calls the change real; it is undecided when
 * the metric moved past it but the noise test cannot call the change real
 * (noise, too few steps, the load differs); otherwise it passes. Also the
 * short Markdown summary for a CI comment (diff_markdown.c).
 *
 * SPEC: comma-separated METRIC:[SIGN]NUMBER UNIT, e.g.
 * "step_time:+3%,exposed_comm:+10%,mfu:-2%,bubble:+2pt". METRIC is a
 * headline metric name (overlap and bubble also name overlap_ratio and
 * bubble_ratio); UNIT is % (relative to run A), pt (points of a ratio:
 * overlap, bubble, mfu) or a time (ns, us, ms, s: time metrics only); the
 * sign, when given, must be the metric's bad direction (+ for step_time, -
 * for mfu and overlap).
 */

enum { SSA_GATE_PERCENT, SSA_GATE_POINTS, SSA_GATE_TIME };

typedef struct ssa_gate_rule {
  int metric;       /* SSA_DM_* */
  int unit;         /* SSA_GATE_* */
  double threshold; /* in the unit: percent, points, or ns */
  char text[48];    /* the token as given, for messages */
} ssa_gate_rule;

/* A threshold's outcome, and the gate's. */
enum {
  SSA_GATE_PASS,      /* within the threshold, or in the good direction */
  SSA_GATE_FAIL,      /* past the threshold in the bad direction, and real */
  SSA_GATE_UNDECIDED, /* past the threshold in the bad direction, but not called real */
  SSA_GATE_UNMEASURED /* the metric is unknown in a run (no comm, no pipeline, no FLOPs) */
};
extern const char *const ssa_gate_status_names[];

typedef struct ssa_gate {
  ssa_gate_rule rules[SSA_DM_N];
  size_t n;
  int undecided_as; /* what an undecided gate counts as: SSA_GATE_UNDECIDED (its own
                       outcome, the default), SSA_GATE_PASS or SSA_GATE_FAIL (--undecided) */
} ssa_gate;

/* 0, or -1 with a message naming the offending token in err. */
int ssa_gate_parse(const char *spec, ssa_gate *g, char *err, size_t errlen);
/* --undecided WORD: "pass" or "fail" into g->undecided_as; 0, or -1 with a message. */
int ssa_gate_parse_undecided(const char *word, int *undecided_as, char *err, size_t errlen);

typedef struct ssa_gate_outcome {
  int status;   /* SSA_GATE_* */
  double moved; /* the change in the rule's unit, signed so that > 0 is the bad direction; NaN
                   unknown */
} ssa_gate_outcome;

/* The gate as a whole: how many thresholds failed and how many are undecided, the outcome
 * (fail when one failed, else undecided when one is, else pass) and what it counts as
 * (the outcome, with an undecided one mapped by g->undecided_as). */
typedef struct ssa_gate_result {
  size_t failed, undecided, n;
  int outcome, counts_as; /* SSA_GATE_PASS, SSA_GATE_FAIL or SSA_GATE_UNDECIDED */
} ssa_gate_result;

/* Checks every rule; out has g->n entries. */
ssa_gate_result ssa_gate_check(const ssa_diff *d, const ssa_gate *g, ssa_gate_outcome *out);
/* The metrics the gate names, a bit per SSA_DM_* (ssa_diff_runs_repeated's `declared`). */
unsigned ssa_gate_metrics(const ssa_gate *g);

/* "+3%", "+2.0pt", "+1.5ms": a rule's threshold as written back. */
void ssa_gate_rule_text(const ssa_gate_rule *r, char *buf, size_t n);

/* The Markdown summary (docs/diff.md): verdicts, gate outcomes (g may be
 * NULL; then out and result are not read), the top causes, and `command` (the command line to
 * reproduce). */
int ssa_diff_report_markdown(const ssa_diff *d, const ssa_gate *g, const ssa_gate_outcome *out,
                             const ssa_gate_result *result, const char *command, ssa_out *o);

/* ---- a run against a prediction ----
 * `stepscope diff RUN PREDICTION.json`: a real run set against what
 * `stepscope plan --json` predicted for it (docs/plan.md, docs/diff.md).
 *
 * Two halves:
 *   - prediction_read.c reads the planner's JSON (schema_version 1: one layout from a single
 *     layout or --what-if, or every layout of an enumeration) and tells it apart from a run
 *     by its content (ssa_prediction_sniff);
 *   - diff_prediction.c picks the run's layout out of it, measures the same quantities on
 *     the analysed run (step time, pipeline bubble, compute, exposed communication, device
 *     memory and peak RSS, MFU, tokens/s) and reports predicted vs measured with the
 *     relative error (predicted - measured) / measured, as text and as JSON.
 */

/* One layout of a plan's JSON ("layouts"[i]). */
typedef struct ssa_pred_layout {
  mm_layout layout; /* dp..virtual_stages, zero, recompute, sp (model fields 0) */
  char name[160];
  double mem_parameters, mem_gradients, mem_optimizer, mem_activations, mem_other,
      mem_runtime_baseline, mem_total;
  int memory_stage, fits;
  double step_time_s, tokens_per_s, mfu, bubble_theory;
  double compute_s, bubble_s, tp_s, cp_s, pp_s, grad_sync_s, host_s;
  double wait_s; /* descheduled waits (0 when the plan has none) */
  double ep_s;   /* expert-parallel all-to-alls (0 when the plan has none) */
  char binding[32];
} ssa_pred_layout;

/* A plan's JSON, read (numbers absent from the file are NaN, counts 0). */
typedef struct ssa_prediction {
  int layers, hidden, heads, vocab, ffn, seq, max_seq, gpus, gpus_per_node, global_batch;
  char device[64];
  double peak_flops, runtime_baseline_bytes;
  int calibrated; /* "calibration" was an object (plan --from RUN) */
  char calibration_source[256];
  double calibration_measured_step_s;
  ssa_pred_layout *layouts;
  size_t nlayouts;
} ssa_prediction;

/* Whether the file at `path` is a plan's JSON rather than a run: a regular file holding a
 * JSON object whose "kind" is "stepscope.plan", or whose first keys are only the planner's
 * (schema_version, kind, job, device, calibration, assumed, layouts) with at least one of
 * them other than schema_version. A Kineto trace ("traceEvents", "schemaVersion", ...), an
 * analyze or diff report ("generator", "kind": another) or a directory is not. Reads only
 * as far as it must. */
int ssa_prediction_sniff(const char *path);

/* Reads a plan's JSON. 0, or -1 with the reason in err (malformed JSON, a schema_version
 * other than 1, no layouts, a layout without its fields). */
int ssa_prediction_load(const char *path, ssa_prediction *p, char *err, size_t errlen);
void ssa_prediction_free(ssa_prediction *p);

/* One compared quantity. */
typedef struct ssa_pred_metric {
  const char *name;           /* "step_time_s", ... */
  const char *what;           /* its words for the text report */
  double predicted, measured; /* NaN where unknown */
  double rel_error;           /* (predicted - measured) / |measured|; NaN if unknown
                                 or measured is 0 */
  int is_bytes;               /* print as MiB */
} ssa_pred_metric;

enum {
  SSA_PM_STEP_TIME,
  SSA_PM_COMPUTE,
  SSA_PM_EXPOSED_COMM,
  SSA_PM_BUBBLE,
  SSA_PM_BUBBLE_FRACTION,
  SSA_PM_DEVICE_MEMORY,
  SSA_PM_PROCESS_MEMORY,
  SSA_PM_MFU,
  SSA_PM_TOKENS_PER_S,
  SSA_PM_N
};

#define SSA_PRED_MAX_WARNINGS 16

typedef struct ssa_pred_diff {
  char run_path[512], prediction_path[512];
  char run_layout[160];             /* the run's layout, in the planner's words */
  const ssa_pred_layout *predicted; /* the layout compared (points into the prediction) */
  size_t layout_index, nlayouts;
  int layout_matches; /* the run's model, batch and layout are the predicted ones */
  int calibrated;
  char calibration_source[256];
  ssa_pred_metric m[SSA_PM_N];
  /* the step time's verdict: is the prediction inside the run's own noise? The 95 % interval
   * of the run's median step time (median_interval.c) over `noise_steps` steps; noise_ok 0:
   * too few steps to bound it (undecided) */
  int noise_ok;
  size_t noise_steps;
  double noise_lo_s, noise_hi_s, noise_confidence;
  char warnings[SSA_PRED_MAX_WARNINGS][256];
  int nwarnings;
} ssa_pred_diff;

/* A distribution-free interval for the median of v[0..n) (sorted in place; median_interval.c):
 * [*lo, *hi] = the order statistics that cover it with probability at least `confidence`
 * (*achieved: exactly how much). -1 when n is too small for that confidence (n < 6 at 95 %). */
int ssa_median_interval(double *v, size_t n, double confidence, double *lo, double *hi,
                        double *achieved);

/* Compares the analysed run `an` (of `run`) with prediction p: takes the prediction's layout
 * equal to the run's (its configuration in the trace header), or the only one there is
 * (with a warning naming what differs). Returns 0, or -1 with the reason in err when the
 * run has no trainer configuration and the prediction several layouts, or when none of
 * several layouts is the run's. */
int ssa_prediction_diff(const ssa_run *run, const ssa_analysis *an, const char *run_path,
                        const ssa_prediction *p, const char *prediction_path, ssa_pred_diff *d,
                        char *err, size_t errlen);

/* Text report and JSON document (docs/diff.md, "Run against a prediction"). */
void ssa_prediction_diff_text(const ssa_pred_diff *d, FILE *f);
void ssa_prediction_diff_json(const ssa_pred_diff *d, ssa_out *o);

#endif
