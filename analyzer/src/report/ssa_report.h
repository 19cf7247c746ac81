/*
 * ssa_report.h — the analyzer's report floor (analyzer/src/report): the outputs of
 * `stepscope analyze`, the readable text report (report_text.c) and the versioned JSON
 * report (report_json.c, docs/report-schema.md), and the ranks x steps heatmap the viewer draws for
 * runs too large for a timeline (report_heatmap.c).
 */
#ifndef SSA_REPORT_H
#define SSA_REPORT_H

#include <stdio.h>

#include "ssa_io.h"
#include "ssa_metrics.h"

#define SSA_REPORT_SCHEMA_VERSION 1

int ssa_report_json(const ssa_analysis *a, ssa_out *o);
int ssa_report_text(const ssa_analysis *a, FILE *f);
/* The critical path's JSON section and text lines (report_critical_path.c). */
void ssa_report_json_critical_path(const ssa_analysis *a, ssa_out *o);
void ssa_report_text_critical_path(const ssa_analysis *a, FILE *f);
/* `,"stragglers":[..],"culprits":[..],"culprit_candidates":[..],"culprit_verdict":{..}`: who
 * made the others wait (report_culprits.c), in the report's collectives section and the heatmap. */
void ssa_report_json_culprits(const ssa_analysis *a, ssa_out *o);
/* The heatmap file of `stepscope analyze --heatmap FILE` (report_heatmap.c,
 * docs/report-schema.md): per rank and step the numbers the viewer's ranks x steps heatmap
 * colours, and who made the others wait; small next to the report (no events, no instances). */
int ssa_report_heatmap(const ssa_analysis *a, ssa_out *o);

#endif
