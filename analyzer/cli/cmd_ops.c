/*
 * cmd_ops.c — `stepscope ops RUN [--json FILE] [--csv FILE] [--peak SPEC] [--top N]
 * [--rank R] [--steps A:B] ...`: the run's PyTorch ops grouped by op and input shapes, with
 * their time, FLOPs, bytes, achieved TFLOP/s and GB/s, arithmetic intensity and roofline
 * position against the device's ceilings (metrics/ssa_ops.h; docs/ops.md gives every
 * formula). The Kineto traces are read with their CPU ops' input args (record_shapes).
 * Exit codes: 0 ok, 1 failure, 2 usage error.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_load.h"
#include "cli_output.h"
#include "cli_print.h"
#include "option_table.h"
#include "ssa_op_report.h"
#include "ssa_ops.h"

typedef struct ops_args {
  ssa_options opt;
  const char *run_path, *json_path, *csv_path, *peak, *top;
  int by_module, memory, series;
} ops_args;

static int opt_by(const cli_option *o, const char *v, void *cmd) {
  if (strcmp(v, "op") && strcmp(v, "module")) {
    cli_print(stderr, "stepscope ops: --by must be op or module, not %s\n", v);
    return 2;
  }
  ((ops_args *)cmd)->by_module = !strcmp(v, "module");
  return 0;
}

static int opt_rank(const cli_option *o, const char *v, void *cmd) {
  return cli_apply_rank_option("ops", v, &((ops_args *)cmd)->opt) ? 2 : 0;
}

#define A(f) offsetof(ops_args, f)
static const cli_option ops_options[] = {
    {CLI_STRING, "--json", NULL, "FILE", "also write the table as JSON; '-' = stdout", A(json_path),
     NULL, 0, 0, NULL},
    {CLI_STRING, "--csv", NULL, "FILE", "also write the table as CSV; '-' = stdout", A(csv_path),
     NULL, 0, 0, NULL},
    {CLI_STRING, "--peak", NULL, "SPEC",
     "measured ceilings instead of the datasheet's, e.g. bf16=780T,fp32=60T,bw=4.3T\n"
     "(fp32|tf32|bf16|fp16|fp8 FLOP/s, bw bytes/s; G/T/P suffixes), or\n"
     "device=h100|h100-pcie|h200|gh200|a100|mi300x|b200 for a trace that does not\n"
     "name its device",
     A(peak), NULL, 0, 0, NULL},
    {CLI_STRING, "--top", NULL, "N", "rows in the text table (default 30; 0: all)", A(top), NULL, 0,
     0, NULL},
    {CLI_CALL, "--by", NULL, "WHAT",
     "op (default): by op name and input shapes; module: by the nn.Module around\n"
     "the ops (a tree; the profiler's with_modules=True)",
     0, opt_by, 0, 0, NULL},
    {CLI_FLAG, "--memory", NULL, NULL,
     "memory over time instead (profile_memory=True, or a stepscope trace's MEMORY\n"
     "records): the allocated peak per device and step, and what was live at the peak,\n"
     "with the ops that allocated it",
     A(memory), NULL, 0, 0, NULL},
    {CLI_FLAG, "--series", NULL, NULL,
     "with --memory: the --json also holds each device's allocated and reserved\n"
     "bytes after each of its events (series: time_ns, allocated_bytes, reserved_bytes)",
     A(series), NULL, 0, 0, NULL},
    {CLI_CALL, "--rank", NULL, "R", "only rank R", 0, opt_rank, 0, 0, NULL},
    {CLI_ANALYSIS, NULL, NULL, NULL, NULL, A(opt), NULL, 0, 0, NULL},
    CLI_TEXT_ROW("Each device kernel counts for the deepest CPU op with a model around its launch\n"
                 "(aten::linear -> aten::addmm: aten::addmm); on a CPU-only trace each such op's\n"
                 "own time counts. Shapes need the profiler's record_shapes=True.\n"
                 "Exit status: 0 done; 1 the run could not be read or an output not written;\n"
                 "2 usage error.\n"),
};

static const cli_table ops_table = CLI_RUN_TABLE("ops", ops_options, A(run_path));

/* What the command writes: one of its three tables in one of three forms. */
enum { TABLE_OPS, TABLE_MODULES, TABLE_MEMORY };
enum { FORM_TEXT, FORM_JSON, FORM_CSV };

typedef struct ops_view {
  int table, form;
  const void *report; /* ssa_op_report, ssa_module_report or ssa_mem_report */
} ops_view;

static int write_view(const void *w, ssa_out *o) {
  const ops_view *v = w;
  static void (*const writers[3][3])(const void *, ssa_out *) = {
      [TABLE_OPS] = {ssa_op_report_text, ssa_op_report_json, ssa_op_report_csv},
      [TABLE_MODULES] = {ssa_module_report_text, ssa_module_report_json, ssa_module_report_csv},
      [TABLE_MEMORY] = {ssa_mem_report_text, ssa_mem_report_json, NULL},
  };
  writers[v->table][v->form](v->report, o);
  return 0;
}

/* The report of `table` into --json, --csv (through the one output writer) and, unless one of
 * them is the standard output, as text on it. 0 or the exit status. */
static int emit(const ops_args *x, int table, const void *report) {
  if (table == TABLE_MEMORY && x->csv_path) {
    cli_print(stderr, "stepscope ops: --memory writes no CSV (use --json)\n");
    return 2;
  }
  ops_view json = {table, FORM_JSON, report}, csv = {table, FORM_CSV, report};
  int rc = 0;
  if (x->json_path) rc = cli_write_output("ops", x->json_path, write_view, &json);
  if (rc == 0 && x->csv_path) rc = cli_write_output("ops", x->csv_path, write_view, &csv);
  int to_stdout =
      (x->json_path && !strcmp(x->json_path, "-")) || (x->csv_path && !strcmp(x->csv_path, "-"));
  ssa_out o;
  if (rc == 0 && !to_stdout && ssa_out_open_file(&o, stdout) == 0) {
    write_view(&(ops_view){table, FORM_TEXT, report}, &o);
    ssa_out_close(&o);
  }
  return rc;
}

/* `--memory` and `--by module`: the memory timeline or the module tree of the loaded run. */
static int other_table(const ops_args *x, cli_loaded *l) {
  ssa_mem_table mem;
  ssa_module_table mods;
  if (x->memory ? ssa_mem_table_build(&l->an, &mem) : ssa_module_table_build(&l->an, &mods)) {
    cli_print(stderr, "stepscope ops: out of memory\n");
    return 1;
  }
  int rc;
  if (x->memory) {
    ssa_mem_report rep = {x->run_path, &l->run, &mem, x->series};
    rc = emit(x, TABLE_MEMORY, &rep);
    ssa_mem_table_free(&mem);
  } else {
    ssa_module_report rep = {x->run_path, &mods};
    rc = emit(x, TABLE_MODULES, &rep);
    ssa_module_table_free(&mods);
  }
  return rc;
}

int cmd_ops(int argc, char **argv) {
  ops_args x;
  memset(&x, 0, sizeof x);
  int rc = cli_parse(&ops_table, argc, argv, &x, NULL);
  if (rc != CLI_PARSED) return rc;
  if (x.series && !x.memory) {
    cli_print(stderr, "stepscope ops: --series goes with --memory\n");
    return 2;
  }
  size_t top = 30;
  if (x.top) {
    char *end;
    long v = strtol(x.top, &end, 10);
    if (*end || end == x.top || v < 0) {
      cli_print(stderr, "stepscope ops: --top must be a count (0: all), not %s\n", x.top);
      return 2;
    }
    top = (size_t)v;
  }
  cli_loaded l;
  unsigned load = CLI_SAY_LOSSES | CLI_OP_INPUTS | (x.by_module ? CLI_OP_MODULES : 0u) |
                  (x.memory ? CLI_OP_MEMORY : 0u);
  if ((rc = cli_open_run("ops", x.run_path, &x.opt, load, &l)) != 0) {
    cli_loaded_free(&l);
    return rc;
  }
  if (x.memory || x.by_module) {
    rc = other_table(&x, &l);
    cli_loaded_free(&l);
    return rc;
  }
  ssa_op_table t;
  if (ssa_op_table_build(&l.an, &t)) {
    cli_print(stderr, "stepscope ops: out of memory\n");
    cli_loaded_free(&l);
    return 1;
  }
  ssa_ceilings c;
  ssa_ceilings_of_device(t.device_name, &c);
  char msg[256];
  if (x.peak && ssa_ceilings_parse(x.peak, &c, msg, sizeof msg)) {
    cli_print(stderr, "stepscope ops: %s\n", msg);
    rc = 2;
  }
  ssa_op_report rep = {x.run_path, &t, &c, top};
  if (rc == 0) rc = emit(&x, TABLE_OPS, &rep);
  ssa_op_table_free(&t);
  cli_loaded_free(&l);
  return rc;
}
