/*
 * ssa_report.h — the analyzer's report floor (analyzer/src/report): the outputs of
 * `stepscope analyze`, the readable text report (report_text.c) and the versioned JSON
 * report (report_json.c, docs/report-schema.md).
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

#endif
