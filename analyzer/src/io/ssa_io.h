/*
 * ssa_io.h — the analyzer's bottom floor (analyzer/src/io): bytes in and out, with no
 * knowledge of runs or metrics, and the generic helpers of the floors above. Declared here:
 * the output stream (out_writer.c), terminal-safe text (sc_text.h, common/text_escape.c), JSON
 * object members (json_fields.c), JSON validity (json_valid.c), dotted-path JSON lookups
 * (json_lookup.c), jobs on threads (parallel_for.c), array growth (grow.c), the start-time sort
 * (sort.c) and the shared qsort comparators and binary searches (sort_keys.c). The streaming JSON
 * tokenizer (json_stream.h, json_scan.h) and the two gzip readers (gzip_whole.h,
 * inflate_pipe.h) have headers of their own in this folder: only the importers use them.
 *
 * The output stream (ssa_out) is a hand-rolled buffered output stream for the reports and the
 * Chrome export: plain file, stdout ("-") or gzip (zlib) when the name ends
 * in ".gz". Numbers are formatted by hand (no printf on the hot path); the
 * first I/O error sticks and is returned by ssa_out_close.
 *
 * A file is written under a temporary name in its directory and renamed to
 * its name by ssa_out_close only when every write succeeded, so a full disk
 * or a crash never leaves a truncated output under the final name (and an
 * earlier good file stays). Outputs that are not regular files (/dev/null,
 * a pipe, /dev/stdout) are written directly. An output that is the same
 * file (same inode) as an input registered with ssa_out_protect_input is
 * refused: a command never writes over what it reads.
 */
#ifndef SSA_IO_H
#define SSA_IO_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sc_text.h" /* terminal-safe text (common/text_escape.c) */

typedef struct ssa_out {
  FILE *file;
  void *gz; /* gzFile */
  char *buf;
  size_t len, cap;
  int error;
  int owns_file;
  uint64_t bytes; /* uncompressed bytes written */
  char *tmp_path; /* written here, renamed to final_path on success */
  char *final_path;
  int flush_errno; /* errno of the first failed write */
  int temp_slot;   /* 1 + tmp_path's slot in temp_files.c (0: none): removed on SIGTERM/HUP/INT */
  char why[320];   /* why ssa_out_open or ssa_out_close failed */
  struct ssa_out_double_memo *doubles; /* ssa_out_double's recent texts (allocated on use) */
} ssa_out;

/* Registers a file this process reads (a trace, a report): ssa_out_open
 * refuses to write over it. Thread-safe; paths that do not exist are
 * ignored. */
void ssa_out_protect_input(const char *path);
/* The same for a file already stat'ed (its device and inode; no second stat). */
struct stat;
void ssa_out_protect_file(const struct stat *st);
/* 0 when writing `path` would not touch a registered input; otherwise
 * STEPSCOPE_E_ARGUMENT with a message in why[n]. */
int ssa_out_check_target(const char *path, char *why, size_t n);

/* Temporary files removed if the process is killed by SIGTERM, SIGHUP or SIGINT
 * before they are renamed (temp_files.c; where those signals have their default
 * action). ssa_temp_create is mkostemp(path_template, flags) that also records the
 * file: *slot is its slot, or -1 when the table is full (the file is then not removed). */
int ssa_temp_create(char *path_template, int flags, int *slot);
void ssa_temp_forget(int slot);

int ssa_out_open(ssa_out *o, const char *path); /* 0 or STEPSCOPE_E_IO/NOMEM */
int ssa_out_open_file(ssa_out *o, FILE *f);     /* does not close f */
/* Flushes and closes; on success renames the temporary file to its name,
 * on any error removes it (the final name is left untouched). 0 or the
 * first error (o->why says what). */
int ssa_out_close(ssa_out *o);
void ssa_out_flush(ssa_out *o);
void ssa_out_write(ssa_out *o, const char *s, size_t n);
void ssa_out_str(ssa_out *o, const char *s);
void ssa_out_printf(ssa_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ssa_out_i64(ssa_out *o, int64_t v);
void ssa_out_u64(ssa_out *o, uint64_t v);
/* v as 16 lowercase hex digits (printf's "%016llx"). */
void ssa_out_hex64(ssa_out *o, uint64_t v);
/* ns as microseconds with exactly three decimals ("12.345"). */
void ssa_out_us(ssa_out *o, int64_t ns);
/* a JSON number ("%.9g"), or null for NaN/inf; the texts of recent values are
 * remembered (a report repeats a few bandwidths millions of times) */
void ssa_out_double(ssa_out *o, double v);
/* a JSON string literal with escapes, always valid UTF-8 (invalid
 * sequences become U+FFFD); NULL writes "" */
void ssa_out_json_string(ssa_out *o, const char *s);
/* raw text, with invalid UTF-8 sequences replaced by U+FFFD */
void ssa_out_utf8(ssa_out *o, const char *s);
/* Whether s is exactly one JSON value (json_valid.c). */
int ssa_json_valid(const char *s);

static inline void ssa_out_char(ssa_out *o, char c) {
  if (o->len == o->cap) ssa_out_flush(o);
  o->buf[o->len++] = c;
}

/* ---- JSON object members (json_fields.c) ----
 * `,"name":` and the value: a member after an object's first (which its
 * caller writes with the opening brace). `name` is a literal key, written as
 * given. Durations and indexes that are negative when unknown are written
 * as null by the _or_null forms. */
void ssa_out_key(ssa_out *o, const char *name); /* `,"name":`, the value to follow */
void ssa_out_field_i64(ssa_out *o, const char *name, int64_t v);
void ssa_out_field_u64(ssa_out *o, const char *name, uint64_t v);
void ssa_out_field_double(ssa_out *o, const char *name, double v); /* null for NaN/inf */
void ssa_out_field_string(ssa_out *o, const char *name, const char *s);
void ssa_out_field_bool(ssa_out *o, const char *name, int v);
void ssa_out_i64_or_null(ssa_out *o, int64_t v);
void ssa_out_field_i64_or_null(ssa_out *o, const char *name, int64_t v);
/* A JSON array of n strings: ["a","b"]. */
void ssa_out_json_strings(ssa_out *o, char *const *s, size_t n);

/* ---- dotted-path JSON lookups (json_lookup.c) ----
 * Minimal JSON lookups for metadata: `path` is dotted ("predicted.total").
 * Return 1 when found. */
int ssa_json_number(const char *json, const char *path, double *out);
int ssa_json_string(const char *json, const char *path, char *buf, size_t size);
int ssa_json_bool(const char *json, const char *path, int *out); /* true / false */

/* ---- message lists and units (text_list.c, human_units.c) ---- */
/* Appends the message fmt/ap, cut to max_len - 1 bytes (at most 1023), to a growing list of
 * strings (*list, *n of *cap); 0 or STEPSCOPE_E_NOMEM. The warning and finding lists. */
int ssa_text_list_vadd(char ***list, size_t *n, size_t *cap, size_t max_len, const char *fmt,
                       va_list ap) __attribute__((format(printf, 5, 0)));
/* Frees such a list of n strings (list NULL: nothing). */
void ssa_text_list_free(char **list, size_t n);
/* A duration in ns as "12.345 ms" / "4.1 us" / "731 ns" / "1.500 s" into buf; returns buf. */
const char *ssa_fmt_time(char *buf, size_t n, double ns);
/* A size in bytes as "1.5 GiB" / "12.0 MiB" / "3.0 KiB" into buf; returns buf. */
const char *ssa_fmt_bytes(char *buf, size_t n, uint64_t bytes);

/* The message for an allocation that failed (out_of_memory.c): "out of memory WHAT (the run:
 * N ranks, E events or B of trace files ...): analyse fewer ranks ... or give it more memory";
 * events and file_bytes are left out when 0. */
void ssa_out_of_memory_message(char *buf, size_t n, const char *what, size_t nranks,
                               uint64_t events, uint64_t file_bytes);

/* ---- jobs on threads (parallel_for.c) ---- */
/* How many workers run n jobs: `threads` when positive, else one per online core; at most
 * n, at least 1. */
size_t ssa_workers(size_t n, int threads);
/* Runs job(ctx, i) for every i in [0, n) on `workers` threads, the calling thread one of
 * them (fewer when threads cannot be started); returns when all are done. Jobs run in any
 * order and at once: each must touch only its own part of ctx, or lock. */
void ssa_parallel_for(size_t n, size_t workers, void (*job)(void *ctx, size_t i), void *ctx);

/* ---- arrays (grow.c, sort.c, sort_keys.c) ---- */
/* qsort orders of int64_t, uint64_t and double values, ascending (sort_keys.c). */
int ssa_cmp_i64(const void *a, const void *b);
int ssa_cmp_u64(const void *a, const void *b);
int ssa_cmp_double(const void *a, const void *b);
/* An element's sort key (a time) and its index: an array of these sorted by
 * ssa_cmp_key_index (key, then index: a total order) is the elements' order
 * without moving them. The key is the first field, so ssa_sort_by_start
 * sorts these too. */
typedef struct ssa_key_index {
  int64_t key;
  uint64_t index;
} ssa_key_index;
int ssa_cmp_key_index(const void *a, const void *b);
/* Binary searches (sort_keys.c) of an array sorted by a leading int64 key: an
 * int64_t array, or elements that start with an int64 time (as
 * ssa_sort_by_start and ssa_key_index have it). How many elements have a
 * key below t (ssa_count_below) or at most t (ssa_count_at_most). */
size_t ssa_count_below(const void *base, size_t n, size_t size, int64_t t);
size_t ssa_count_at_most(const void *base, size_t n, size_t size, int64_t t);
/* Sorts in place (sort.c) an array whose elements start with an int64
 * start time, in the order of `cmp` (which must order by that start time
 * first). No extra memory; linear passes of a radix sort. */
void ssa_sort_by_start(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

/* Growth helper (grow.c): ensures capacity for `need` elements. 0 or -1. */
int ssa_grow(void **ptr, size_t *cap, size_t need, size_t elem);
/* Faults in, with one call (MADV_POPULATE_WRITE) instead of a page fault
 * per page, the pages of the elements after the first n of an array of
 * capacity `cap` that an appender is about to fill, and returns the index
 * up to which it did: callers call it again when n reaches that index.
 * Advisory: failure only costs speed. */
size_t ssa_prefault_ahead(void *base, size_t elem, size_t n, size_t cap);

#endif
