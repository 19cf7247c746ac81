/*
 * writer_internal.h — writer hooks used by the linked tracer (linked.c) and
 * not part of the public API.
 */
#ifndef STEPSCOPE_WRITER_INTERNAL_H
#define STEPSCOPE_WRITER_INTERNAL_H

#include "stepscope.h"

/* Calls fn(arg) from the writer's background thread about every
 * `interval_ms` (used to write periodic clock anchors). Set before any
 * other thread uses the writer. */
void writer_set_tick(stepscope_writer *w, void (*fn)(void *), void *arg, unsigned interval_ms);

#endif
