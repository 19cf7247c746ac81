/*
 * cmd_export.c — `stepscope export RUN -o FILE [--format json|perfetto]
 * [--rank R] [--ranks LIST|auto] [--max-size SIZE] [--steps A:B] [--step-range NAME]
 * [--comm-kernel RE] [--compute-kernel RE]`: writes the Chrome-trace JSON of SPEC §5
 * (docs/metrics.md for the derived tracks) when the name ends in .json, or a
 * native Perfetto protobuf trace when it ends in .pftrace, either
 * gzip-compressed when .gz follows; --format chooses for any other name (and
 * is refused when it contradicts the name). Streams: the document is never
 * held in memory. Its size is estimated first: over --max-size (default 2 GiB) it is refused,
 * with the way to a smaller one (--ranks, export_ranks.c). Exit codes: 0 ok, 1 failure,
 * 2 usage error.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_print.h"
#include "ssa_metrics.h"
#include "option_table.h"
#include "ssa_report.h"
#include "ssa_import.h"
#include "cli_env.h"
#include "cli_load.h"
#include "ssa_export.h"
#include "export_ranks.h"
#include "export_replay.h"
#include "sc_clock.h"

typedef struct export_args {
  ssa_options opt;
  const char *run_path, *out_path, *format;
  cli_export_limits limits; /* --ranks, --max-size */
  int memory;
  export_replay_args replay;
} export_args;

static int opt_format(const cli_option *o, const char *v, void *cmd) {
  if (strcmp(v, "json") && strcmp(v, "perfetto")) {
    cli_print(stderr, "stepscope export: --format must be json or perfetto, not %s\n", v);
    return 2;
  }
  ((export_args *)cmd)->format = v;
  return 0;
}

static int opt_what_if(const cli_option *o, const char *v, void *cmd) {
  return export_replay_add_edit(&((export_args *)cmd)->replay, v);
}

static int opt_rank(const cli_option *o, const char *v, void *cmd) {
  return cli_apply_rank_option("export", v, &((export_args *)cmd)->opt) ? 2 : 0;
}

/* Whether `path` ends in `suffix`, or in `suffix` and ".gz". */
static int named(const char *path, const char *suffix) {
  size_t n = strlen(path), k = strlen(suffix);
  if (n > 3 && !strcmp(path + n - 3, ".gz")) n -= 3;
  return n >= k && !strncmp(path + n - k, suffix, k);
}

/* What to write to `path`: 1 a Perfetto trace, 0 Chrome-trace JSON; the name's .pftrace or
 * .json decides, --format any other name's (JSON without it). -1 when --format contradicts
 * the name (said why). */
static int perfetto_output(const char *path, const char *format) {
  int by_name = named(path, ".pftrace") ? 1 : named(path, ".json") ? 0 : -1;
  int by_format = !format ? -1 : !strcmp(format, "perfetto");
  if (by_name >= 0 && by_format >= 0 && by_name != by_format) {
    cli_print(stderr,
              "stepscope export: --format %s does not match the name %s (%s); change one of "
              "them\n",
              format, path, by_name ? ".pftrace is Perfetto's protobuf" : ".json is JSON");
    return -1;
  }
  return by_name >= 0 ? by_name : by_format > 0;
}

#define A(f) offsetof(export_args, f)
static const cli_option export_options[] = {
    {CLI_STRING, "--output", "-o", "FILE",
     "trace.json[.gz], or trace.pftrace[.gz] (Perfetto protobuf)", A(out_path), NULL, 0, 0, NULL},
    {CLI_CALL, "--format", NULL, "F", "json or perfetto, for a FILE named neither", 0, opt_format,
     0, 0, NULL},
    {CLI_CALL, "--rank", NULL, "R", "only rank R", 0, opt_rank, 0, 0, NULL},
    {CLI_FLAG, "--memory", NULL, NULL,
     "PyTorch traces: memory over time as counter tracks (profile_memory=True:\n"
     "allocated and reserved bytes per device)",
     A(memory), NULL, 0, 0, NULL},
    CLI_EXPORT_LIMIT_ROWS(A(limits)),
    {CLI_FLAG, "--replay", NULL, NULL,
     "add the replayed run (stepscope replay): a process per rank \"replay (rank R)\"\n"
     "with its ops at their simulated times, beside the measured ones",
     A(replay.on), NULL, 0, 0, NULL},
    {CLI_REPEAT, "--what-if", NULL, "EDIT",
     "replay with EDIT (repeatable; implies --replay; the grammar: stepscope\n"
     "replay --help); the process is named \"replay: EDIT, ... (rank R)\"",
     0, opt_what_if, 0, 0, NULL},
    {CLI_ANALYSIS, NULL, NULL, NULL, NULL, A(opt), NULL, 0, 0, NULL},
};

static const cli_table export_table = {
    .command = "export",
    .head = "usage: stepscope export RUN -o FILE [options]\n",
    CLI_ROWS(export_options),
    .flags = CLI_ARGS_DASH_ALONE,
    .args = A(run_path),
    .nargs = 1,
    .tail = "Open either file at https://ui.perfetto.dev; the bundled viewer (`stepscope\n"
            "view`) reads the JSON. A .pftrace is 5-6x smaller than the JSON (Perfetto\n"
            "gives up on JSON near 1-2 GB): use it for large runs.\n"};

/* One line on a terminal after the export: what was written, how fast. */
static void say_written(int perfetto, const ssa_export_stats *st, double seconds) {
  if (perfetto)
    cli_print(stderr, "wrote %llu slices in %llu packets, %.1f MB of protobuf in %.2f s\n",
              (unsigned long long)st->slices, (unsigned long long)st->events,
              (double)st->bytes / 1e6, seconds);
  else
    cli_print(stderr, "wrote %llu events, %.1f MB of JSON in %.2f s\n",
              (unsigned long long)st->events, (double)st->bytes / 1e6, seconds);
}

int cmd_export(int argc, char **argv) {
  export_args x;
  memset(&x, 0, sizeof x);
  x.limits = (cli_export_limits){.command = "export", .max_bytes = CLI_EXPORT_MAX_BYTES};
  int rc = cli_parse(&export_table, argc, argv, &x, NULL);
  if (rc == CLI_PARSED && !x.out_path) {
    cli_print(stderr, "stepscope export: -o FILE is required\n");
    cli_usage(stderr, &export_table);
    rc = 2;
  }
  int perfetto = rc == CLI_PARSED ? perfetto_output(x.out_path, x.format) : -1;
  if (perfetto < 0) {
    export_replay_free(&x.replay);
    return rc == CLI_PARSED ? 2 : rc;
  }
  int tty = isatty(2);
  cli_loaded l;
  /* the Kineto ops' input args and the threads' names go into the slices and the lanes */
  unsigned load =
      CLI_SAY_LOSSES | CLI_OP_INPUTS | CLI_THREAD_NAMES | (x.memory ? CLI_OP_MEMORY : 0u);
  if ((rc = cli_open_run("export", x.run_path, &x.opt, load, &l)) != 0) {
    export_replay_free(&x.replay);
    cli_loaded_free(&l);
    return rc;
  }
  unsigned char *sel = NULL; /* --ranks, then the size it makes */
  rc = export_replay_prepare(&x.replay, &l.an);
  if (rc == 0) rc = cli_choose_ranks("export", x.limits.ranks, &l.an, &sel);
  l.an.opt.export_ranks = sel;
  if (rc == 0 && cli_check_output_size("export", perfetto ? "Perfetto trace" : "JSON",
                                       ssa_export_estimate_bytes(&l.an, perfetto),
                                       x.limits.max_bytes, &l.an, x.limits.ranks))
    rc = 1;
  if (rc) {
    free(sel);
    export_replay_free(&x.replay);
    cli_loaded_free(&l);
    return rc;
  }
  double t0 = sc_monotonic_s();
  if (tty) cli_print(stderr, "writing %s ...\n", x.out_path);
  ssa_export_stats st;
  memset(&st, 0, sizeof st);
  stepscope_error err;
  memset(&err, 0, sizeof err);
  cli_env env;
  cli_env_read(&env);
  rc = perfetto ? ssa_export_perfetto_opts(&l.an, x.out_path, &env.perfetto, &st, &err)
                : ssa_export_chrome(&l.an, x.out_path, &st, &err);
  double took_s = sc_monotonic_s() - t0;
  if (rc)
    cli_print(stderr, "stepscope export: %s\n", err.message);
  else if (tty)
    say_written(perfetto, &st, took_s);
  export_replay_free(&x.replay);
  cli_loaded_free(&l);
  free(sel);
  return rc ? 1 : 0;
}
