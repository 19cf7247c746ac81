/*
 * export_replay.c — see export_replay.h: export's --replay and --what-if, kept apart from the
 * rest of export's options; the replay itself is metrics/replay.c's, the tracks the writers'
 * (replay_slices.c).
 */
#include <stdio.h>
#include <string.h>

#include "cli_print.h"
#include "export_replay.h"

int export_replay_add_edit(export_replay_args *x, const char *edit) {
  char msg[256];
  if (x->nedits == EXPORT_REPLAY_MAX_EDITS) {
    cli_print(stderr, "stepscope export: at most %d --what-if edits\n", EXPORT_REPLAY_MAX_EDITS);
    return 2;
  }
  if (ssa_replay_edit_parse(edit, &x->edits[x->nedits], msg, sizeof msg)) {
    cli_print(stderr, "stepscope export: --what-if '%s': %s\n", edit, msg);
    return 2;
  }
  x->text[x->nedits++] = edit;
  x->on = 1;
  return 0;
}

int export_replay_prepare(export_replay_args *x, ssa_analysis *a) {
  if (!x->on) return 0;
  char msg[256] = "";
  int rc = ssa_replay_run_ops(a, x->edits, x->nedits, &x->replay, msg, sizeof msg);
  if (rc == STEPSCOPE_E_ARGUMENT) {
    cli_print(stderr, "stepscope export: --what-if: %s\n", msg);
    return 2;
  }
  if (rc) {
    cli_print(stderr, "stepscope export: out of memory replaying the run\n");
    return 1;
  }
  size_t len = (size_t)snprintf(x->label, sizeof x->label, "replay");
  for (size_t i = 0; i < x->nedits && len < sizeof x->label; i++)
    len += (size_t)snprintf(x->label + len, sizeof x->label - len, "%s%s", i ? ", " : ": ",
                            x->text[i]);
  x->view = (ssa_export_replay){x->label, &x->replay};
  a->opt.export_replay = &x->view;
  return 0;
}

void export_replay_free(export_replay_args *x) {
  for (size_t i = 0; i < x->nedits; i++)
    ssa_replay_edit_free(&x->edits[i]);
  ssa_replay_free(&x->replay);
  x->nedits = 0;
}
