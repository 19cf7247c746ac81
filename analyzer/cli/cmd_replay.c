/*
 * cmd_replay.c — `stepscope replay RUN [--what-if EDIT ...] [--json FILE]`: every step
 * re-simulated over the run's dependency graph with the trace's durations (the plain replay,
 * whose error against the measured step times says how far to trust it), then with the
 * edits (metrics/replay.h; docs/replay.md). Exit codes: 0 ok, 1 failure, 2 usage error (a
 * bad EDIT included).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_load.h"
#include "cli_output.h"
#include "cli_print.h"
#include "option_table.h"
#include "ssa_replay_report.h"

#define MAX_EDITS 32

typedef struct replay_args {
  ssa_options opt;
  const char *run_path, *json_path;
  char *edit_text[MAX_EDITS];
  ssa_replay_edit edits[MAX_EDITS];
  size_t nedits;
  int quiet;
} replay_args;

static int opt_what_if(const cli_option *o, const char *v, void *cmd) {
  (void)o;
  replay_args *x = cmd;
  if (x->nedits == MAX_EDITS) {
    cli_print(stderr, "stepscope replay: at most %d --what-if edits\n", MAX_EDITS);
    return 2;
  }
  char msg[256];
  if (ssa_replay_edit_parse(v, &x->edits[x->nedits], msg, sizeof msg)) {
    cli_print(stderr, "stepscope replay: --what-if '%s': %s\n", v, msg);
    return 2;
  }
  x->edit_text[x->nedits++] = (char *)v;
  return 0;
}

#define A(f) offsetof(replay_args, f)
static const cli_option replay_options[] = {
    {CLI_REPEAT, "--what-if", NULL, "EDIT",
     "replay again with EDIT (repeatable; all of them at once), e.g.\n"
     "'rank=2:no-delay', 'kind=comm:scale=0.5', 'name=gemm:scale=0.8',\n"
     "'range=^recompute$:drop' (recomputation off),\n"
     "'coll=all_reduce:overlap', 'stage=1,kind=compute:scale=1.5'",
     0, opt_what_if, 0, 0, NULL},
    {CLI_STRING, "--json", NULL, "FILE", "also write the replay as JSON; '-' = stdout",
     A(json_path), NULL, 0, 0, NULL},
    {CLI_FLAG, "--quiet", NULL, NULL, "no text (with --json)", A(quiet), NULL, 0, 0, NULL},
    {CLI_ANALYSIS, NULL, NULL, NULL, NULL, A(opt), NULL, 0, 0, NULL},
    CLI_TEXT_ROW(ssa_replay_edit_grammar),
    CLI_TEXT_ROW("Each step is re-simulated over its dependency graph (the critical path's):\n"
                 "a node starts when its predecessors are done, plus the host gap the trace\n"
                 "shows on a host thread; on a device, gaps up to --launch-gap-us are the\n"
                 "lane's median latency and longer ones kept (waits the trace does not show);\n"
                 "collectives end when their last member arrives plus their transfer time.\n"
                 "The plain replay's error against the measured step times is printed first.\n"
                 "Exit status: 0 done; 1 the run could not be read or --json not written;\n"
                 "2 usage error (a bad EDIT, or a delay edit on a rank without a delay).\n"),
};

static const cli_table replay_table = CLI_RUN_TABLE("replay", replay_options, A(run_path));

static int write_json(const void *rep, ssa_out *o) {
  ssa_replay_report_json(rep, o);
  return 0;
}

static int replay_or_say(const ssa_analysis *an, const replay_args *x, size_t nedits,
                         ssa_replay *out) {
  char msg[256] = "";
  int rc = ssa_replay_run(an, x->edits, nedits, out, msg, sizeof msg);
  if (rc == STEPSCOPE_E_ARGUMENT) {
    cli_print(stderr, "stepscope replay: %s\n", msg);
    return 2;
  }
  if (rc) cli_print(stderr, "stepscope replay: out of memory\n");
  return rc ? 1 : 0;
}

int cmd_replay(int argc, char **argv) {
  replay_args x;
  memset(&x, 0, sizeof x);
  int rc = cli_parse(&replay_table, argc, argv, &x, NULL);
  if (rc == CLI_PARSED) {
    cli_loaded l;
    ssa_replay plain = {0}, edited = {0};
    rc = cli_open_run("replay", x.run_path, &x.opt, CLI_SAY_LOSSES, &l);
    if (rc == 0) rc = replay_or_say(&l.an, &x, 0, &plain);
    if (rc == 0 && x.nedits) rc = replay_or_say(&l.an, &x, x.nedits, &edited);
    if (rc == 0) {
      ssa_replay_report rep = {x.run_path, &plain, x.nedits ? &edited : NULL, x.edit_text,
                               x.nedits};
      if (x.json_path) rc = cli_write_output("replay", x.json_path, write_json, &rep);
      ssa_out o;
      if (!x.quiet && !(x.json_path && !strcmp(x.json_path, "-")) &&
          ssa_out_open_file(&o, stdout) == 0) {
        ssa_replay_report_text(&rep, &o);
        ssa_out_close(&o);
      }
    }
    ssa_replay_free(&plain);
    ssa_replay_free(&edited);
    cli_loaded_free(&l);
  }
  for (size_t i = 0; i < x.nedits; i++)
    ssa_replay_edit_free(&x.edits[i]);
  return rc;
}
