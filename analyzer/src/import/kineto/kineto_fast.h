/*
 * kineto_fast.h — the fast path of the Kineto event reader: one event object
 * parsed whole, straight over the tokenizer's buffer, for the common case.
 * See kineto_fast.c.
 */
#ifndef KINETO_FAST_H
#define KINETO_FAST_H

#include <stdint.h>

#include "kineto_event.h"
#include "skip_template.h"

/* Reads the event object that starts at p (its '{') and lies wholly before
 * e into *ev, exactly as kineto_reader.c's read_event would (the same
 * fields, names cut alike, names cut counted in *truncated_names), and
 * returns the byte after its '}'. Returns NULL, with nothing counted, for
 * anything it does not take: an escape or a non-ASCII byte in a string, a
 * number or value of an unusual form, deep nesting, an event that reaches
 * e, any JSON error. The caller then reads the same event token by token,
 * which has every case and every message; *ev may have been written.
 * `templates` (may be NULL): the reader's own skip templates
 * (skip_template.h), tried for the rest of an event that is skipped. */
const unsigned char *ssa_kineto_fast_event(kevent *ev, const unsigned char *p,
                                           const unsigned char *e, uint64_t *truncated_names,
                                           ssa_skip_templates *templates);

#endif
