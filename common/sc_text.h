/*
 * sc_text.h — terminal-safe text (text_escape.c): what stepscope prints that it
 * did not write itself (names from a trace, arguments a user typed) cannot move
 * the cursor, set the terminal's title or fake lines of the output. Control
 * characters (C0, DEL, C1) and bytes that are not UTF-8 become \xNN; \n \r \t
 * and \\ are escaped; valid UTF-8 is kept.
 */
#ifndef SC_TEXT_H
#define SC_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Writes s escaped into buf (n bytes, cut at a character boundary); returns buf. */
const char *sc_text_safe(const char *s, char *buf, size_t n);
/* The same with a backslash kept as it is: for a message that echoes what the user
 * typed (a regex stays readable), where no trace text could pose as an escape. */
const char *sc_text_echo(const char *s, char *buf, size_t n);
/* sc_text_safe of any length, written to f. */
void sc_fputs_safe(const char *s, FILE *f);

#endif
