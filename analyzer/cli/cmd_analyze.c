/*
 * cmd_analyze.c — `stepscope analyze RUN [--json FILE] [--steps A:B]
 * [--rank R] [--step-range NAME] [--launch-gap-us N] [--top N]
 * [--threads N] [--comm-kernel RE] [--compute-kernel RE] [--low-memory]`: loads the run (all
 * ranks in parallel), computes the metrics of docs/metrics.md and prints the readable report;
 * --json also writes the versioned JSON report (docs/report-schema.md), --heatmap the small
 * per-rank, per-step file the viewer's ranks x steps heatmap draws (report_heatmap.c).
 * --low-memory bounds memory (docs/scale.md). A thin layer over libstepscope_analysis.
 * `--partial OUT [--part K/N]` writes a partial analysis of part K of N of the run's rank files
 * instead of a report, and `stepscope merge [options] PARTIAL...` reports on the partials of
 * every part, byte for byte as `analyze --low-memory` of the whole run (cli_partial.c;
 * docs/scale.md "Partials"); merge takes analyze's options.
 * Exit codes: 0 ok, 1 the run could not be analysed, 2 usage error.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_print.h"
#include "option_table.h"
#include "ssa_metrics.h"
#include "ssa_report.h"
#include "ssa_import.h"
#include "cli_load.h"
#include "cli_output.h"
#include "cli_partial.h"

typedef struct analyze_args {
  ssa_options opt;
  const char *run_path, *json_path, *heatmap_path, *partial_path;
  const char *cross_path, *cross_out; /* a pipeline run's second map round (docs/scale.md) */
  int quiet, low_memory;
  int part_index, part_count; /* --part K/N (0/0: not given) */
} analyze_args;

static int opt_part(const cli_option *o, const char *v, void *cmd) {
  analyze_args *x = cmd;
  char *end;
  long k = strtol(v, &end, 10), n = *end == '/' ? strtol(end + 1, &end, 10) : 0;
  if (*end || n < 1 || n > 1000000 || k < 0 || k >= n) {
    cli_print(stderr, "stepscope analyze: bad --part '%s' (want K/N, 0 <= K < N)\n", v);
    return 2;
  }
  x->part_index = (int)k;
  x->part_count = (int)n;
  return 0;
}

static int opt_rank(const cli_option *o, const char *v, void *cmd) {
  return cli_apply_rank_option("analyze", v, &((analyze_args *)cmd)->opt) ? 2 : 0;
}

static int opt_top(const cli_option *o, const char *v, void *cmd) {
  char *end;
  long n = strtol(v, &end, 10);
  if (*end || end == v || n <= 0 || n > 1000000) {
    cli_print(stderr, "stepscope analyze: bad --top '%s' (want 1..1000000)\n", v);
    return 2;
  }
  ((analyze_args *)cmd)->opt.top_n = (int)n;
  return 0;
}

#define A(f) offsetof(analyze_args, f)
static const cli_option analyze_options[] = {
    CLI_TEXT_ROW("  RUN                 a run directory or one trace file of it: stepscope's\n"
                 "                      rank-*.trace.zst, or PyTorch profiler (Kineto) traces,\n"
                 "                      *.json or *.json.gz whose content is Kineto's\n"),
    {CLI_STRING, "--json", NULL, "FILE",
     "also write the JSON report (docs/report-schema.md); '-' = stdout", A(json_path), NULL, 0, 0,
     NULL},
    {CLI_STRING, "--heatmap", NULL, "FILE",
     "also write the heatmap file: per rank and step the step time,\n"
     "exposed comm, idle and bubble, and the stragglers and culprits,\n"
     "for the viewer's ranks x steps heatmap (small: no events)",
     A(heatmap_path), NULL, 0, 0, NULL},
    {CLI_ANALYSIS, NULL, NULL, NULL, NULL, A(opt), NULL, 0, 0, NULL},
    {CLI_CALL, "--rank", NULL, "R",
     "report only rank R (all ranks are still loaded for\nclock alignment and collectives)", 0,
     opt_rank, 0, 0, NULL},
    {CLI_CALL, "--top", NULL, "N", "rows in the kernel and collective tables (default 20)", 0,
     opt_top, 0, 0, NULL},
    {CLI_FLAG, "--quiet", NULL, NULL, "no text report (with --json)", A(quiet), NULL, 0, 0, NULL},
    {CLI_FLAG, "--low-memory", NULL, NULL,
     "bounded memory (docs/scale.md): each rank's events are freed\n"
     "once it is loaded and read again for each per-rank pass (at\n"
     "most --threads ranks' events in memory; more CPU time). The\n"
     "same report, byte for byte",
     A(low_memory), NULL, 0, 0, NULL},
    {CLI_STRING, "--partial", NULL, "OUT",
     "analyze: no report, a partial analysis of the run (or of its\n"
     "--part K/N) in OUT; `stepscope merge` of every part's partial\n"
     "reports as analyze does, byte for byte (docs/scale.md)",
     A(partial_path), NULL, 0, 0, NULL},
    {CLI_CALL, "--part", NULL, "K/N", "with --partial: part K of N (0 <= K < N) of the rank files",
     0, opt_part, 0, 0, NULL},
    {CLI_STRING, "--cross", NULL, "FILE",
     "with --partial: the second map round of a run with pipelines,\n"
     "from the part's FILE of `merge --cross-out` (merge --help)",
     A(cross_path), NULL, 0, 0, NULL},
    {CLI_STRING, "--cross-out", NULL, "DIR", "merge: no report; DIR/cross-K-of-N.ssx of every part",
     A(cross_out), NULL, 0, 0, NULL},
    CLI_TEXT_ROW("Exit status: 0 done; 1 the run could not be read or analysed, or --json or\n"
                 "--heatmap could not be written; 2 usage error (a --rank the run does not\n"
                 "have included).\n"),
};

static const cli_table analyze_table = CLI_RUN_TABLE("analyze", analyze_options, A(run_path));

static const cli_table merge_table = {
    .command = "merge",
    .head = "usage: stepscope merge PARTIAL... [options]\n"
            "The report of a run from the partial analyses of all its parts (`analyze RUN\n"
            "--part K/N --partial OUT`, K = 0..N-1), in any order, byte for byte that of\n"
            "`analyze RUN` (and of --low-memory). The partials carry the metrics of ranks\n"
            "outside a pipeline (made with analyze's step and launch-gap options: other\n"
            "options read the ranks again); a rank file is read again only where the\n"
            "merge needs its events (pipeline ranks, the critical path's rounds:\n"
            "docs/scale.md \"What the merge still reads\"), and must then be where its\n"
            "partial found it (STEPSCOPE_SAY_READS=1 says on stderr how many were read\n"
            "again, and for what). --comm-kernel and --compute-kernel must be the map\n"
            "step's, in the same order (other rules are refused). Options may come before\n"
            "or after the partials (after \"--\" every word is a partial); --low-memory is\n"
            "implied, --partial, --part and --cross are analyze's.\n"
            "A run with pipelines can take a second map round: `merge PARTIALS...\n"
            "--cross-out DIR` writes the cross-rank inputs of each part's pipeline ranks\n"
            "(DIR/cross-K-of-N.ssx; no report, no rank file read), then every part again\n"
            "with `analyze RUN --part K/N --partial OUT --cross DIR/cross-K-of-N.ssx`; the\n"
            "merge of those partials reads no pipeline rank's file for its metrics or\n"
            "bubble transfers, and reads one whose inputs differ from its own (a stale\n"
            "or foreign cross file): the same report either way (docs/scale.md).\n",
    .options = analyze_options + 1, /* analyze's rows but the first, which says what RUN is */
    .n = sizeof analyze_options / sizeof analyze_options[0] - 1,
    .flags = CLI_ARGS_DOUBLE_DASH | CLI_STOP_AT_ARG,
};

static int report_json(const void *an, ssa_out *o) {
  return ssa_report_json(an, o);
}

static int report_heatmap(const void *an, ssa_out *o) {
  return ssa_report_heatmap(an, o);
}

/* The report of an analysed run as the options ask: the JSON and heatmap files, the text. */
static int write_reports(const char *command, const analyze_args *x, cli_loaded *l) {
  int rc = 0;
  if (x->json_path) rc = cli_write_output(command, x->json_path, report_json, &l->an);
  if (x->heatmap_path && rc == 0)
    rc = cli_write_output(command, x->heatmap_path, report_heatmap, &l->an);
  if (!x->quiet && !(x->json_path && !strcmp(x->json_path, "-"))) ssa_report_text(&l->an, stdout);
  return rc;
}

/* The command line of `table` (analyze or merge) into *x, and the options that do not go
 * together refused: CLI_PARSED, or the exit status (message printed). */
static int parse_command(const cli_table *table, int argc, char **argv, analyze_args *x,
                         int *next) {
  memset(x, 0, sizeof *x);
  int rc = cli_parse(table, argc, argv, x, next);
  const char *clash = NULL;
  if (rc == CLI_PARSED && table == &merge_table && (x->partial_path || x->part_count))
    clash = "--partial and --part are analyze's";
  else if (rc == CLI_PARSED && table == &merge_table && x->cross_path)
    clash = "--cross is analyze's (the second map round); merge writes --cross-out DIR";
  else if (rc == CLI_PARSED && table != &merge_table && x->cross_out)
    clash = "--cross-out is merge's";
  else if (rc == CLI_PARSED && x->cross_out && (x->json_path || x->heatmap_path))
    clash = "--cross-out writes no report: --json and --heatmap go to the final merge";
  else if (rc == CLI_PARSED && x->part_count && !x->partial_path)
    clash = "--part needs --partial OUT";
  else if (rc == CLI_PARSED && x->cross_path && !x->partial_path)
    clash = "--cross needs --partial OUT";
  else if (rc == CLI_PARSED && x->partial_path && (x->json_path || x->heatmap_path))
    clash = "--partial writes no report: --json and --heatmap are merge's";
  x->opt.path_sums_only = 1; /* the reports print the critical path's sums, not its segments */
  if (!clash) return rc;
  cli_print(stderr, "stepscope %s: %s\n", table->command, clash);
  return 2;
}

int cmd_analyze(int argc, char **argv) {
  analyze_args x;
  int rc = parse_command(&analyze_table, argc, argv, &x, NULL);
  if (rc != CLI_PARSED) return rc;
  if (x.partial_path) {
    char msg[1400];
    rc = cli_write_partial("analyze", x.run_path, &x.opt, x.part_index,
                           x.part_count ? x.part_count : 1, x.cross_path, x.partial_path, msg,
                           sizeof msg);
    if (rc) cli_print(stderr, "%s\n", msg);
    return rc;
  }
  cli_loaded l; /* the report says what was lost and warned: nothing more on stderr */
  unsigned say = CLI_OP_INPUTS | (x.low_memory ? CLI_LOW_MEMORY : 0u);
  if ((rc = cli_open_run("analyze", x.run_path, &x.opt, say, &l)) == 0)
    rc = write_reports("analyze", &x, &l);
  cli_loaded_free(&l);
  return rc;
}

int cmd_merge(int argc, char **argv) {
  analyze_args x;
  cli_options_first(&merge_table, argc, argv); /* merge PARTIALS... --json FILE works too */
  int next = argc, rc = parse_command(&merge_table, argc, argv, &x, &next);
  if (rc != CLI_PARSED) return rc;
  if (next >= argc) {
    cli_usage(stderr, &merge_table);
    return 2;
  }
  cli_loaded l;
  char msg[1400];
  if (x.cross_out) {
    char **parts = argv + next;
    if ((rc = cli_write_cross("merge", parts, (size_t)(argc - next), &x.opt, x.cross_out, msg,
                              sizeof msg)) != 0)
      cli_print(stderr, "%s\n", msg);
    return rc;
  }
  if ((rc = cli_open_partials("merge", argv + next, (size_t)(argc - next), &x.opt, &l, msg,
                              sizeof msg)) == 0)
    rc = write_reports("merge", &x, &l);
  else
    cli_print(stderr, "%s\n", msg);
  cli_loaded_free(&l);
  return rc;
}
