/*
 * writer_internal.h — writer hooks used by the linked tracer (linked.c) and
 * not part of the public API.
 */
#ifndef STEPSCOPE_WRITER_INTERNAL_H
#define STEPSCOPE_WRITER_INTERNAL_H

#include "stepscope.h"

/* Calls fn(arg) from the writer's background thread about every
 * `interval_ms` (used to write periodic clock anchors). Call it once, before
 * other threads use the writer (the background thread may already run). */
void writer_set_tick(stepscope_writer *w, void (*fn)(void *), void *arg, unsigned interval_ms);

/* Closes the trace file like stepscope_writer_close but keeps the writer's
 * shell (its locks and thread buffers, without their data) alive, so that
 * other threads still holding `w` may go on calling stepscope_write,
 * stepscope_intern and stepscope_writer_flush concurrently: an append that
 * was in flight when the writer closed is in the file; later ones are no-ops
 * (STEPSCOPE_E_STATE, not counted as dropped). The shell is never freed
 * (a few hundred bytes per writer plus a few dozen per thread that used it). */
int writer_retire(stepscope_writer *w, stepscope_error *err);

/* writer_retire with the END record's reason (stepscope_end_reason) and,
 * for STEPSCOPE_END_SIGNAL, the signal that is stopping the program. */
int writer_retire_reason(stepscope_writer *w, uint32_t reason, int sig, stepscope_error *err);

/* stepscope_writer_flush for a signal handler's flush (on another thread):
 * a thread buffer whose owner does not let go within 100 ms (it may be the
 * thread the signal interrupted) is left for the next frame. */
int writer_flush_on_signal(stepscope_writer *w);

/* Whether a write to the file failed (the writer has warned once already). */
int writer_io_failed(stepscope_writer *w);

#endif
