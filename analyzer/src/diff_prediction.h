/*
 * diff_prediction.h — `stepscope diff RUN PREDICTION.json`: a real run set against what
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
#ifndef SSA_DIFF_PREDICTION_H
#define SSA_DIFF_PREDICTION_H

#include <stdio.h>

#include "memory_model.h"
#include "ssa_analysis.h"
#include "ssa_out.h"

/* One layout of a plan's JSON ("layouts"[i]). */
typedef struct ssa_pred_layout {
  mm_layout layout;                 /* dp..virtual_stages, zero, recompute, sp (model fields 0) */
  char name[160];
  double mem_parameters, mem_gradients, mem_optimizer, mem_activations, mem_other,
      mem_runtime_baseline, mem_total;
  int memory_stage, fits;
  double step_time_s, tokens_per_s, mfu, bubble_theory;
  double compute_s, bubble_s, tp_s, cp_s, pp_s, grad_sync_s, host_s;
  double wait_s;                    /* descheduled waits (0 when the plan has none) */
  double ep_s;                      /* expert-parallel all-to-alls (0 when the plan has none) */
  char binding[32];
} ssa_pred_layout;

/* A plan's JSON, read (numbers absent from the file are NaN, counts 0). */
typedef struct ssa_prediction {
  int layers, hidden, heads, vocab, ffn, seq, max_seq, gpus, gpus_per_node, global_batch;
  char device[64];
  double peak_flops, runtime_baseline_bytes;
  int calibrated;                   /* "calibration" was an object (plan --from RUN) */
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
  const char *name;                 /* "step_time_s", ... */
  const char *what;                 /* its words for the text report */
  double predicted, measured;       /* NaN where unknown */
  double rel_error;                 /* (predicted - measured) / |measured|; NaN if unknown
                                       or measured is 0 */
  int is_bytes;                     /* print as MiB */
} ssa_pred_metric;

enum {
  SSA_PM_STEP_TIME, SSA_PM_COMPUTE, SSA_PM_EXPOSED_COMM, SSA_PM_BUBBLE, SSA_PM_BUBBLE_FRACTION,
  SSA_PM_DEVICE_MEMORY, SSA_PM_PROCESS_MEMORY, SSA_PM_MFU, SSA_PM_TOKENS_PER_S, SSA_PM_N
};

#define SSA_PRED_MAX_WARNINGS 16

typedef struct ssa_pred_diff {
  char run_path[512], prediction_path[512];
  char run_layout[160];             /* the run's layout, in the planner's words */
  const ssa_pred_layout *predicted; /* the layout compared (points into the prediction) */
  size_t layout_index, nlayouts;
  int layout_matches;               /* the run's model, batch and layout are the predicted ones */
  int calibrated;
  char calibration_source[256];
  ssa_pred_metric m[SSA_PM_N];
  char warnings[SSA_PRED_MAX_WARNINGS][256];
  int nwarnings;
} ssa_pred_diff;

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

#endif /* SSA_DIFF_PREDICTION_H */
