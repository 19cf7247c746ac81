/*
 * kineto_split.h — one large Kineto trace tokenized on two threads, for the
 * importer (its worker side at the end of kineto_split.c).
 *
 * Why: on a 2-core machine, importing one real trace left the second core
 * mostly idle: the tokenizer was the whole wall time (82 % of the samples),
 * the gzip pipe's inflate thread only 15-24 %. So the whole JSON text is
 * held in one buffer, and a second thread tokenizes the second half of the
 * `traceEvents` array while the calling thread tokenizes the first.
 *
 * How: the whole text goes into one buffer (an anonymous mapping), written
 * progressively: a gzip file by the inflate pipe's thread straight into it
 * (inflate_pipe.h, linear mode: its framing, checks and messages), a plain
 * file by a helper thread with pread. The calling thread tokenizes from the
 * start in place, following what is written (js_init_buffer_grow with
 * ssa_split_grow as its grow hook). The helper thread picks a split point
 * S as soon as the text gets there: the first '{' at or after a fraction
 * of the expected length that follows a newline and blanks (Kineto writes
 * one event per line, and a raw newline cannot be inside a JSON string) or,
 * in a text on one line, a '}' and a ',' (one object's end, the next's
 * start); what S is between is verified, not assumed. It then runs the importer's
 * work function on the text from S, following what is written too
 * (kineto_reader.c and kineto_split.c: the events read with the same code and stored, not
 * converted). Until S is known the calling thread sees no byte past the
 * fraction, afterwards none past S, so the two never touch the same bytes:
 * the helper copies the text from S into its own streaming buffer, the
 * caller writes NULs into the part before S only.
 *
 * The calling thread, arriving at S, either finds itself exactly inside the
 * events array after a ',' (the importer checks) and calls ssa_split_finish,
 * which waits for the helper (the importer then converts the stored events
 * and resumes after them); or it needs a byte at S in any other state, and
 * the grow hook itself cancels the helper, waits for it and makes the rest
 * of the text visible: the caller goes on sequentially, as if there had
 * been no split. Either way every byte is tokenized once by the caller or
 * by a helper whose result the caller checked, so the result and every
 * error are the sequential path's.
 *
 * The importer's options (ssa_import_options.split, which the `stepscope`
 * command fills from STEPSCOPE_KINETO_SPLIT=on|off) force the split on (any
 * size, any core count) or off; otherwise a document of at least SSA_SPLIT_MIN bytes is
 * split when there are two usable cores for each file being loaded at once
 * (ssa_split_wanted).
 */
#ifndef KINETO_SPLIT_H
#define KINETO_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "ssa_import.h"

typedef struct ssa_split ssa_split;

/* The work run on the helper thread: the events from the split point `at`
 * of the text in `doc` (whose first bytes, up to `at`, are written), read
 * in place (never written: the caller may read the same bytes after an
 * abandoned split) with ssa_split_follow as the tokenizer's grow hook
 * (ctx: sp), which follows the text as it is written. It checks
 * ssa_split_cancelled now and then. */
typedef void (*ssa_split_work)(void *arg, ssa_split *sp, const unsigned char *doc, size_t at);

/* A grow hook (js_init_buffer_grow) for the work: more of the text visible
 * as it is written; `visible` at its end (or once the split is cancelled),
 * -1 when it could not be read. */
long ssa_split_follow(void *ctx, size_t visible);

/* Documents smaller than this are not split by default. Measured (perf
 * stat -r 9, 2 cores, split off / on): 0.9-1.8 MB of text neither gains nor
 * loses (2.05 / 1.96, 3.95 / 4.15, 3.99 / 3.87 ms), 3.1 MB plain 7.1 / 5.1
 * ms, 4.8 MB gzip 7.75 / 6.2 ms, 10-17 MB gzip 8-20 % less. */
#define SSA_SPLIT_MIN ((size_t)2 << 20)

/* Whether a document of about `len` bytes of JSON should be split: `mode`
 * (ssa_import_options.split), its size, and two usable cores (sched_getaffinity) for each
 * file being loaded at once, by the loader's threads or by splits already
 * running. */
int ssa_split_wanted(uint64_t len, ssa_split_mode mode);
/* The loader (run_load.c) says how many threads load files at once; 1 when
 * it is done. Measured: 4 gzip traces of 54-63 MB of text loaded by 2
 * threads on 2 cores, each also split: 0.124-0.127 s against 0.110-0.115 s
 * without (perf stat -r 5), so no split then. */
void ssa_split_loaders(int n);

/* Starts the helper on the file open on `fd`: plain (`size` bytes) or, with
 * `gzip`, a gzip file whose trailer says `size` bytes of text. NULL when the
 * memory or the thread cannot be had (read the file another way). From
 * `opt` (not NULL): the split point's fraction (split_at) and whether
 * ssa_split_close reports (split_trace). */
ssa_split *ssa_split_open(int fd, int gzip, size_t size, const ssa_import_options *opt,
                          ssa_split_work work, void *arg);

/* The buffer the text is written into, and its capacity. */
unsigned char *ssa_split_doc(const ssa_split *sp);
size_t ssa_split_cap(const ssa_split *sp);

/* The grow hook for js_init_buffer_grow (ctx: the ssa_split). */
long ssa_split_grow(void *ctx, size_t visible);

/* The split point once the caller's tokenizer has been shown the bytes up
 * to it (its visible length is then S), else SIZE_MAX. Caller's thread. */
size_t ssa_split_point(const ssa_split *sp);

/* At the split point, in the expected state: waits for the helper; from
 * then on, everything is visible. Returns the visible length. */
size_t ssa_split_finish(ssa_split *sp);

/* Whether the caller gave up on the helper's work (helper's thread). */
int ssa_split_cancelled(const ssa_split *sp);

/* Stops and joins the helper, frees everything. -1 when the file could not
 * be read whole (message in msg: the pipe's or the read's), SSA_PIPE_OVER_LIMIT
 * when its gzip text went past the decompression limit, else 0. */
int ssa_split_close(ssa_split *sp, char *msg, size_t cap);

/* With the options' split_trace set, ssa_split_close says on stderr
 * what the split did: "used" (the helper's events were converted),
 * "abandoned" (the caller met the point in another state and read on
 * alone), "alone" (no point, or the helper failed), and when each stage
 * happened. */
/* The caller used the helper's events (for that message). */
void ssa_split_used(ssa_split *sp);

#endif
