/*
 * kineto_source.h — the loader source for PyTorch profiler (Kineto) traces:
 * Chrome-trace JSON files, plain or gzip-compressed, one per rank
 * (docs/kineto-import.md describes the mapping).
 *
 * The file is streamed through json_stream (bounded memory, whatever its
 * size) and every event becomes records of the stepscope.h model fed to the
 * rank through ssa_rank_add_record, so the analysis, the export, the diff
 * and the viewer treat a directory of Kineto files like one of our traces.
 */
#ifndef KINETO_SOURCE_H
#define KINETO_SOURCE_H

#include <stddef.h>

#include "ssa_import.h"
#include "ssa_model.h"

/* Which files are Kineto traces is decided by run_discovery.c (by content). */

/* Fills `r` from one Kineto file (plain or gzip). Errors name the file and
 * the byte offset in the uncompressed JSON. `opt` (NULL: the defaults) holds
 * the importer's switches (ssa_import.h), which change how the file is read,
 * never the result; ssa_kineto_source_load takes the defaults. */
int ssa_kineto_source_load_opts(const char *path, const ssa_import_options *opt, ssa_rank *r,
                                stepscope_error *err);
int ssa_kineto_source_load(const char *path, ssa_rank *r, stepscope_error *err);

/* The same, a gzip file decompressed whole (libdeflate, gzip_whole.h) only
 * when it holds at most `whole_max` bytes of JSON, else streamed with zlib
 * on the calling thread (never through a pipe). Tests pass 0 to check that
 * both paths give the same rank. */
int ssa_kineto_source_load_whole_max(const char *path, size_t whole_max, ssa_rank *r,
                                     stepscope_error *err);

/* How a gzip file is read (ssa_gzip_mode, ssa_import.h): AUTO as
 * ssa_kineto_source_load does (a pipe when the build has ISA-L, else whole
 * when moderate, else streamed); WHOLE (libdeflate in one piece,
 * gzip_whole.h; streamed when it declines); PIPE (zlib on a second thread,
 * inflate_pipe.h; whole or streamed when the thread cannot be had); STREAM
 * (zlib on the calling thread). Plain files are read the same way whatever
 * the mode. ssa_kineto_source_load_opts takes the mode from its options
 * (the `stepscope` command fills it from STEPSCOPE_KINETO_GZIP), AUTO by
 * default; here it is given, the other switches are the defaults. */
int ssa_kineto_source_load_gzip(const char *path, ssa_gzip_mode mode, ssa_rank *r,
                                stepscope_error *err);

/* The same from bytes in memory (tests and the fuzz target), tokenized
 * whole in place on a copy (the path of a gzip file inflated whole); `name`
 * is used in messages and for the rank-from-file-name fallback. */
int ssa_kineto_load_memory(const void *data, size_t size, const char *name, ssa_rank *r,
                           stepscope_error *err);
/* The same with the importer's switches (NULL: the defaults); the fuzz
 * target imports each input again with every event read token by token. */
int ssa_kineto_load_memory_opts(const void *data, size_t size, const char *name,
                                const ssa_import_options *opt, ssa_rank *r, stepscope_error *err);

/* The same, the bytes handed to the tokenizer at most `chunk` (>= 1) per
 * read, so that tokens cross input-buffer refills at every position (tests
 * and the fuzz target check that the result does not depend on it). */
int ssa_kineto_load_memory_chunked(const void *data, size_t size, size_t chunk, const char *name,
                                   ssa_rank *r, stepscope_error *err);

#endif
