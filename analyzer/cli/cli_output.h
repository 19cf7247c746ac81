/*
 * cli_output.h — how a command writes an output file (a report, a diff, a
 * plan): always through the analyzer's one writer (ssa_io.h), so that every
 * output appears whole under its name or not at all (a temporary file
 * renamed into place), is never written over one of the command's inputs,
 * is gzip-compressed when its name ends in ".gz", and "-" is the standard
 * output. The messages of a failure are the writer's, printed one way.
 */
#ifndef CLI_OUTPUT_H
#define CLI_OUTPUT_H

#include "ssa_io.h"

/* Writes `what` into the stream (ssa_out's first error sticks; the return is ignored). */
typedef int (*cli_write_fn)(const void *what, ssa_out *o);

/* Writes the output file `path` of command `command` with `write(what)`. 0,
 * or 1 after "stepscope COMMAND: why" on stderr. */
int cli_write_output(const char *command, const char *path, cli_write_fn write, const void *what);

#endif
