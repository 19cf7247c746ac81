/*
 * ssa_report.h — the outputs of `stepscope analyze` and `stepscope export`:
 * the readable text report, the versioned JSON report (docs/report-schema.md)
 * and the streamed Chrome-trace export (SPEC §5).
 */
#ifndef SSA_REPORT_H
#define SSA_REPORT_H

#include <stdio.h>

#include "ssa_analysis.h"
#include "ssa_out.h"

#define SSA_REPORT_SCHEMA_VERSION 1

int ssa_report_json(const ssa_analysis *a, ssa_out *o);
int ssa_report_text(const ssa_analysis *a, FILE *f);

typedef struct ssa_export_stats {
  uint64_t events;                  /* JSON: events; Perfetto: packets */
  uint64_t bytes;
  uint64_t slices, flows;           /* Perfetto only */
} ssa_export_stats;

/* Writes the Chrome-trace JSON of an analysed run to `path` (".gz": gzip).
 * Only ranks selected by the analysis options are written. */
int ssa_export_chrome(const ssa_analysis *a, const char *path, ssa_export_stats *stats,
                      stepscope_error *err);

/* Writes the same run as a Perfetto protobuf trace (perfetto_export.c):
 * TrackEvent slices, flows, counters and the derived overlays. */
int ssa_export_perfetto(const ssa_analysis *a, const char *path, ssa_export_stats *stats,
                        stepscope_error *err);

#endif
