/*
 * main.c — the `stepscope` command: a thin dispatcher over its subcommands.
 *
 * Each subcommand lives in its own file, cmd_<name>.c, and exports
 * `int cmd_<name>(int argc, char **argv)` with argv[0] the subcommand name.
 * The library does the work; these files parse options and print.
 *
 * Subcommands are declared weak so that a build without one of them (for
 * example a build without CUDA has no `record`) still links and says so.
 *
 * Exit codes: 0 success, 1 failure of the operation, 2 usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli_print.h"
#include "stepscope.h"

#define DECLARE_COMMAND(name) int cmd_##name(int argc, char **argv) __attribute__((weak))
DECLARE_COMMAND(info);
DECLARE_COMMAND(dump);
DECLARE_COMMAND(analyze);
DECLARE_COMMAND(merge);
DECLARE_COMMAND(export);
DECLARE_COMMAND(diff);
DECLARE_COMMAND(view);
DECLARE_COMMAND(record);
DECLARE_COMMAND(plan);
DECLARE_COMMAND(ops);
DECLARE_COMMAND(replay);

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} command;

static void usage(FILE *out, const command *cmds, size_t n) {
  fprintf(out, "usage: stepscope <command> [options]\n"
               "\n"
               "Where does a distributed training step's time go, and did tuning help?\n"
               "\n"
               "commands:\n");
  for (size_t i = 0; i < n; i++)
    fprintf(out, "  %-9s %s%s\n", cmds[i].name, cmds[i].summary,
            cmds[i].run ? "" : " (not part of this build)");
  fprintf(out, "\n"
               "RUN is a run directory or one trace file of it: stepscope's rank-*.trace.zst,\n"
               "or PyTorch profiler (Kineto) traces, *.json or *.json.gz of any name whose\n"
               "content is Kineto's.\n"
               "`stepscope <command> --help` describes each command.\n");
}

int main(int argc, char **argv) {
  const command cmds[] = {
      {"info", cmd_info, "header, ranks, record counts, time span of a run or file"},
      {"dump", cmd_dump, "every record of a trace file as one JSON line"},
      {"analyze", cmd_analyze, "the report: overlap, exposed comm, bubbles, idle, stragglers"},
      {"merge", cmd_merge, "the report of a run from the partial analyses of its parts"},
      {"export", cmd_export, "the timeline as Chrome-trace JSON or a Perfetto protobuf trace"},
      {"diff", cmd_diff, "compare two runs"},
      {"view", cmd_view, "serve the offline viewer for a run on 127.0.0.1"},
      {"record", cmd_record, "trace any CUDA program (PyTorch included) by injection"},
      {"plan", cmd_plan, "memory and step time of every parallel layout, before booking GPUs"},
      {"ops", cmd_ops, "PyTorch ops by shape: FLOPs, TFLOP/s, GB/s, roofline (Kineto traces)"},
      {"replay", cmd_replay, "re-simulate each step over its dependency graph; what-if edits"},
  };
  const size_t n = sizeof cmds / sizeof cmds[0];
  if (argc < 2) {
    usage(stderr, cmds, n);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout, cmds, n);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("stepscope %s (trace format %d.%d)\n", STEPSCOPE_VERSION_STRING, STEPSCOPE_FORMAT_MAJOR,
           STEPSCOPE_FORMAT_MINOR);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    if (strcmp(argv[1], cmds[i].name) != 0) continue;
    if (!cmds[i].run) {
      cli_print(stderr, "stepscope: '%s' is not part of this build\n", cmds[i].name);
      return 1;
    }
    int rc = cmds[i].run(argc - 1, argv + 1);
    /* text output that could not be written (a full disk, /dev/full) is a
     * failure: exit 1, never 0 with a cut report */
    if (fflush(stdout) != 0 || ferror(stdout)) {
      cli_print(stderr, "stepscope %s: write error on the standard output: %s\n", cmds[i].name,
                strerror(errno));
      if (rc == 0) rc = 1;
    }
    return rc;
  }
  cli_print(stderr, "stepscope: unknown command '%s' (see stepscope --help)\n", argv[1]);
  return 2;
}
