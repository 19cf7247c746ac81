/*
 * cli_print.h — how the commands print a message that carries text they did
 * not write themselves (an argument, a path, a name or a reason from a trace):
 * like fprintf, with every string argument (%s) printed terminal-safe by the
 * analyzer's one escaper (sc_text_echo, ssa_io.h: C0 and C1 controls, DEL and
 * bytes that are not UTF-8 as \xNN; a backslash stays as it is, so that a
 * regex echoed in a message reads as it was typed). The format itself is
 * ours and is printed as it is, newlines included, so an argument can neither
 * drive the terminal (set its title, clear it, move the cursor) nor fake a line
 * of output. Every message of analyzer/cli on stderr goes through here.
 */
#ifndef CLI_PRINT_H
#define CLI_PRINT_H

#include <stdarg.h>
#include <stdio.h>

void cli_print(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_vprint(FILE *f, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#endif
