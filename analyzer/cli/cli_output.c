/*
 * cli_output.c — see cli_output.h: one output file, opened, written and
 * closed through ssa_out, with the writer's reason printed on a failure.
 */
#include "cli_output.h"

#include "cli_print.h"

#include <stdio.h>

int cli_write_output(const char *command, const char *path, cli_write_fn write, const void *what) {
  ssa_out o;
  if (ssa_out_open(&o, path)) {
    cli_print(stderr, "stepscope %s: %s\n", command, o.why);
    return 1;
  }
  write(what, &o);
  if (ssa_out_close(&o)) {
    cli_print(stderr, "stepscope %s: %s\n", command, o.why);
    return 1;
  }
  return 0;
}
