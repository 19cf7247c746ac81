/*
 * ssa_op_report.h — the op table of `stepscope ops` (metrics/ssa_ops.h) as text, JSON and
 * CSV (op_report.c), each into the analyzer's one writer (ssa_out: the command's atomic
 * output file or the standard output). The writers take their report (ssa_op_report,
 * ssa_module_report, ssa_mem_report) as `const void *`, so that one table of them serves the
 * command's outputs (cmd_ops.c).
 */
#ifndef SSA_OP_REPORT_H
#define SSA_OP_REPORT_H

#include "ssa_io.h"
#include "ssa_ops.h"

/* What the writers print besides the table. */
typedef struct ssa_op_report {
  const char *run_path;
  const ssa_op_table *table;
  const ssa_ceilings *ceilings; /* all zero when the device is unknown and none were given */
  size_t top;                   /* text: rows shown (0: all) */
} ssa_op_report;

void ssa_op_report_text(const void *r, ssa_out *o);
void ssa_op_report_json(const void *r, ssa_out *o);
void ssa_op_report_csv(const void *r, ssa_out *o);

/* The module table (`stepscope ops --by module`): a tree in words, JSON, CSV. */
typedef struct ssa_module_report {
  const char *run_path;
  const ssa_module_table *table;
} ssa_module_report;

void ssa_module_report_text(const void *r, ssa_out *o);
void ssa_module_report_json(const void *r, ssa_out *o);
void ssa_module_report_csv(const void *r, ssa_out *o);

/* The memory timeline (`stepscope ops --memory`): in words and JSON; with `series` (--series)
 * the JSON has each device's allocated and reserved bytes after each of its events. */
typedef struct ssa_mem_report {
  const char *run_path;
  const ssa_run *run;
  const ssa_mem_table *table;
  int series;
} ssa_mem_report;

void ssa_mem_report_text(const void *r, ssa_out *o);
void ssa_mem_report_json(const void *r, ssa_out *o);

#endif
