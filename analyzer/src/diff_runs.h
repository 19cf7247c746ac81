/*
 * diff_runs.h — the comparison of two analysed runs (`stepscope diff`),
 * built only from the analyzer's results (ssa_analysis.h): nothing is
 * re-measured, so a number in the diff is the number `stepscope analyze`
 * prints for that run. docs/diff.md defines every field and the JSON schema.
 *
 * Metrics are compared through per-step series: for each analysed step, the
 * value over the ranks (mean of the ranks' windows for times, sum-ratio for
 * ratios, the run's step time for step time). A run's value is the median of
 * its series, its spread the interquartile range (max - min when it has
 * fewer than 4 steps). A change |B - A| not larger than the larger of the two
 * spreads is noise. A run without steps contributes its totals window as a
 * single value (spread 0).
 */
#ifndef DIFF_RUNS_H
#define DIFF_RUNS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ssa_analysis.h"
#include "ssa_out.h"

#define SSA_DIFF_SCHEMA_VERSION 1

/* Headline metrics, in this order. */
enum {
  SSA_DM_STEP_TIME,       /* ns: the run's step time (slowest rank) */
  SSA_DM_COMPUTE,         /* ns per step, mean over ranks */
  SSA_DM_COMM,            /* ns per step */
  SSA_DM_EXPOSED_COMM,    /* ns per step */
  SSA_DM_OVERLAP_RATIO,   /* overlap / comm, summed over ranks */
  SSA_DM_EXPOSED_MEM,     /* ns per step */
  SSA_DM_IDLE,            /* ns per step */
  SSA_DM_BUBBLE_RATIO,    /* bubble / span over pipeline ranks; unknown without pipeline */
  SSA_DM_MFU,             /* model FLOPs utilisation; unknown without FLOPs metadata */
  SSA_DM_N
};
extern const char *const ssa_diff_metric_names[SSA_DM_N];
/* 1 when the metric is a time in ns, 0 for a ratio */
extern const int ssa_diff_metric_is_time[SSA_DM_N];
/* +1 when larger is better, -1 when smaller is better */
extern const int ssa_diff_metric_better[SSA_DM_N];

typedef struct ssa_diff_stat {
  int known;              /* 0: the run has no value (no comm, no pipeline, no FLOPs) */
  double median, p25, p75, min, max, spread;
  size_t n;               /* values (steps) */
} ssa_diff_stat;

typedef struct ssa_diff_metric {
  ssa_diff_stat a, b;
  double abs_change;      /* b - a (medians) */
  double rel_change;      /* (b - a) / |a|, NaN when a is 0 or unknown */
  int noise;              /* |b - a| <= max(spread a, spread b) */
  int comparable;         /* both known */
} ssa_diff_metric;

typedef struct ssa_diff_rank {
  int rank;
  int in_a, in_b;
  ssa_diff_metric m[SSA_DM_N];   /* step time here = the rank's own step span */
  int64_t coll_wait_a, coll_wait_b;  /* total collective wait in the analysed window */
} ssa_diff_rank;

typedef struct ssa_diff_step {
  size_t index;           /* position in each run's step list (steps are matched by order) */
  int64_t step_a, step_b; /* step numbers, -1 when the run has fewer steps */
  int64_t time_a, time_b; /* step times, -1 when absent */
} ssa_diff_step;

typedef struct ssa_diff_kernel {
  const char *name;       /* points into one of the analyses' string tables */
  int comm;
  int in_a, in_b;
  double count_a, count_b;        /* per step */
  double time_a, time_b;          /* ns per step */
  double mean_a, mean_b;          /* ns per launch, NaN when absent */
} ssa_diff_kernel;

typedef struct ssa_diff_coll {
  uint32_t op;
  const char *group;
  uint64_t bytes;
  int in_a, in_b;
  double count_a, count_b;        /* instances per step */
  double transfer_a, transfer_b;  /* mean transfer ns */
  double busbw_a, busbw_b;        /* GB/s, NaN when absent */
  double wait_a, wait_b;          /* total wait of all ranks, ns per step */
} ssa_diff_coll;

typedef struct ssa_diff {
  const ssa_analysis *a, *b;
  const char *path_a, *path_b;
  int same_layout;        /* same rank set (and world); per-rank comparison done */
  char layout_note[256];  /* why not, when not */
  int world_a, world_b;
  ssa_diff_metric m[SSA_DM_N];
  ssa_diff_rank *ranks; size_t nranks;
  ssa_diff_step *steps; size_t nsteps;
  ssa_diff_kernel *kernels; size_t nkernels;   /* sorted by |time change|, descending */
  ssa_diff_coll *colls; size_t ncolls;         /* sorted by |wait + transfer change| */
  char **findings; size_t nfindings, findings_cap;
} ssa_diff;

/* Compares two analyses (which must outlive the diff). 0 or a negative
 * stepscope status (allocation failure). */
int ssa_diff_runs(const ssa_analysis *a, const ssa_analysis *b, const char *path_a,
                  const char *path_b, ssa_diff *out);
void ssa_diff_free(ssa_diff *d);

/* Statistics of n values (sorted in place). */
void ssa_diff_stats(double *v, size_t n, ssa_diff_stat *out);

/* The readable report and the JSON document (docs/diff.md). */
int ssa_diff_report_text(const ssa_diff *d, FILE *f);
int ssa_diff_report_json(const ssa_diff *d, ssa_out *o);

#endif
