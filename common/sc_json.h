/*
 * sc_json.h — JSON text that stepscope writes, one implementation for every wing (tracer,
 * trainer, analyzer): the string literal escaper and the UTF-8 check it rests on.
 *
 * Every JSON string stepscope writes goes through sc_json_string, so every output agrees on
 * one form: `"` and `\` escaped, \n \t \r as short escapes, other control characters (C0,
 * DEL and the C1 controls U+0080..U+009F, which a terminal may obey when the JSON is printed
 * on it) as \u00xx (lowercase hex), bytes that are not well-formed UTF-8 replaced by U+FFFD
 * (a trace's host name or a kernel name is whatever the system handed us; the output must
 * still be JSON), and, in HTML-safe mode, `<`, `>` and `&` as \u003c, \u003e, \u0026 so
 * that the literal can sit inside a <script> element. Everything else is copied.
 *
 * The text goes out through a put callback in runs as long as possible (one call per run of
 * bytes that need no escape), so a buffered writer loses nothing to it; helpers for a FILE
 * and for a fixed buffer cover the other callers.
 */
#ifndef SC_JSON_H
#define SC_JSON_H

#include <stddef.h>
#include <stdio.h>

#define SC_JSON_HTML_SAFE 1u /* also escape < > & (a literal inside HTML) */

typedef void (*sc_put_fn)(void *ctx, const char *bytes, size_t n);

/* Length of the well-formed UTF-8 sequence at p (p[0] >= 0x80) within `avail` bytes, or 0
 * with *bad set to the number of bytes to replace by one U+FFFD (Unicode's "maximal
 * subpart" rule: a truncated sequence is one replacement, then scanning resumes). */
size_t sc_utf8_sequence(const unsigned char *p, size_t avail, size_t *bad);

/* The JSON string literal of the first `len` bytes of s, quotes included, through put. */
void sc_json_string(const char *s, size_t len, unsigned flags, sc_put_fn put, void *ctx);

/* The same for a NUL-terminated string (NULL writes ""), to a stdio stream. */
void sc_json_string_file(FILE *f, const char *s, unsigned flags);

/* The same into buf[0, cap) at *at: writes what fits (always NUL-terminated when cap > 0)
 * and advances *at by the whole literal's length, so that *at >= cap says it was cut. */
void sc_json_string_buf(char *buf, size_t cap, size_t *at, const char *s, unsigned flags);

#endif
