/*
 * stepscope_api.h — the stable C API of libstepscope_analyzer.so, the shared
 * library that bindings (the Python package in python/, through ctypes) load.
 * It is also the manual: every function is documented here.
 *
 * The API is deliberately small and string-shaped so that it stays stable
 * while the analyzer grows:
 *   - analysis options are passed as the command line's own spellings
 *     ("--steps", "1:8", "--step-range", "train_step", ...), parsed by the
 *     same code as `stepscope analyze` and `stepscope diff`
 *     (analyzer/src/metrics/analysis_options.c), so a new analysis option works
 *     here with no change to this API;
 *   - reports come back as the JSON documents of `stepscope analyze --json`
 *     (docs/report-schema.md) and `stepscope diff --json` (docs/diff.md);
 *   - every op of a run comes back as one columnar binary table (layout
 *     below), so that a binding builds arrays from it without parsing.
 *
 * Errors are values: every function returns 0 on success, 1 when the run
 * could not be loaded or analysed and 2 for a usage error (a bad option), as
 * the `stepscope` command's exit codes; *err_out then holds the message
 * (free it with ss_api_free). Nothing in the library exits or aborts.
 *
 * Threads: calls may run concurrently; each parses its options into its own
 * state, and the option parser returns its messages instead of printing them.
 */
#ifndef STEPSCOPE_API_H
#define STEPSCOPE_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SS_API_VERSION 1

/* The API version (SS_API_VERSION), for bindings to check what they load. */
int ss_api_version(void);

/* Frees a string or table returned by this API. NULL is ignored. */
void ss_api_free(void *p);

/* Loads and analyses a run (a run directory or one trace file, as
 * `stepscope analyze` takes) with options argv[0..argc) — the analysis
 * options of `stepscope analyze --help` (--steps, --step-range,
 * --launch-gap-us, --threads, and any added there later) plus --rank R,
 * --top N and the flag --low-memory (the bounded mode, docs/scale.md: the
 * report leaves out, and names, what needs every rank's events at once) — and
 * returns in *json_out the JSON report, byte for byte what
 * `stepscope analyze RUN OPTIONS --json -` prints. */
int ss_api_analyze(const char *run, int argc, const char *const *argv, char **json_out,
                   char **err_out);

/* A partial analysis (docs/scale.md "Partials"): part part_index of part_count of the run's
 * rank files (0 <= part_index < part_count), written to out_path, as `stepscope analyze RUN
 * --part K/N --partial OUT OPTIONS` does (the analysis options; the merge must be given the
 * same classification rules). 0 or the exit status with *err_out. */
int ss_api_analyze_partial(const char *run, int part_index, int part_count, const char *out_path,
                           int argc, const char *const *argv, char **err_out);

/* A run with pipelines, in two map rounds (docs/scale.md "A second map round"):
 * ss_api_merge_cross writes, from the partials of all its parts, dir/cross-K-of-N.ssx for each
 * part K (`stepscope merge OPTIONS --cross-out DIR PARTIALS`: the cross-rank inputs of its
 * pipeline ranks; no rank file read); ss_api_analyze_partial_cross is ss_api_analyze_partial
 * with that part's cross file (`... --cross FILE`; NULL or "": none), whose partial carries
 * the pipeline ranks' results, so that ss_api_merge of the round-2 partials need not read
 * their rank files. 0 or the exit status with *err_out. */
int ss_api_merge_cross(int npaths, const char *const *paths, const char *dir, int argc,
                       const char *const *argv, char **err_out);
int ss_api_analyze_partial_cross(const char *run, int part_index, int part_count,
                                 const char *cross_path, const char *out_path, int argc,
                                 const char *const *argv, char **err_out);

/* The report of a run from the partials of all its parts, paths[0..npaths), in any order:
 * in *json_out, byte for byte what `stepscope merge OPTIONS --json - PARTIALS` prints, which
 * is `stepscope analyze RUN --low-memory OPTIONS --json -`'s (options as ss_api_analyze). */
int ss_api_merge(int npaths, const char *const *paths, int argc, const char *const *argv,
                 char **json_out, char **err_out);

/* Loads and analyses runs A and B with the same options (the analysis
 * options, plus --steps-b A:B for run B, and --repeat-a RUN / --repeat-b RUN,
 * repeatable, for more runs of either configuration) and returns in *json_out the diff,
 * byte for byte what `stepscope diff A B OPTIONS --json -` prints. */
int ss_api_diff(const char *run_a, const char *run_b, int argc, const char *const *argv,
                char **json_out, char **err_out);

/* Loads a run with its PyTorch ops' input shapes and returns in *json_out the op table of
 * `stepscope ops RUN OPTIONS --json -` (docs/ops.md): options as ss_api_analyze's (the
 * analysis options, --rank R; --top N is accepted and changes nothing), `peak` the value of
 * `--peak` (NULL: the device's datasheet ceilings). */
int ss_api_op_perf(const char *run, int argc, const char *const *argv, const char *peak,
                   char **json_out, char **err_out);

/* The module tree of `stepscope ops RUN OPTIONS --by module --json -` (the run loaded with its
 * ops' module events: the profiler's with_modules=True), options as ss_api_op_perf's. */
int ss_api_op_modules(const char *run, int argc, const char *const *argv, char **json_out,
                      char **err_out);

/* The memory timeline of `stepscope ops RUN OPTIONS --memory --json -` (the run loaded with
 * its memory events: profile_memory=True), options as ss_api_op_perf's; series non-zero:
 * of `... --memory --series --json -` (each device's bytes after each event). */
int ss_api_op_memory(const char *run, int argc, const char *const *argv, int series,
                     char **json_out, char **err_out);

/* Loads and analyses a run and returns in *json_out its replay, byte for byte what
 * `stepscope replay RUN OPTIONS --what-if EDITS[0] ... --json -` prints (docs/replay.md):
 * options the analysis options, edits[0..nedits) the --what-if EDITs (none: the plain replay
 * only). A bad edit is status 2 with the command's message. */
int ss_api_replay(const char *run, int argc, const char *const *argv, int nedits,
                  const char *const *edits, char **json_out, char **err_out);

/* The op table of ss_api_ops: version 1. */
#define SS_API_OPS_MAGIC "SSOPS\0v1" /* 8 bytes */

/* Columns of the op table, in the order of their offsets in the header. */
enum {
  SS_OPS_START_NS, /* int64: start, ns, aligned across ranks, relative to the run's origin */
  SS_OPS_END_NS,   /* int64: end, same clock */
  SS_OPS_STREAM,   /* int64: the stream id (GPU/CPU-backend stream) the op ran on */
  SS_OPS_BYTES,    /* int64: bytes of a copy, memset or host op; 0 otherwise */
  SS_OPS_COMM_ID,  /* uint64: communicator id of the collective it executed (0: none) */
  SS_OPS_COLL_SEQ, /* int64: sequence number of that collective in its communicator (-1: none) */
  SS_OPS_STEP,     /* int64: the step it belongs to (docs/metrics.md "Steps"; -1: none) */
  SS_OPS_RANK,     /* int32: rank number */
  SS_OPS_NAME,     /* int32: index into the string table (0 is "": copies have no name) */
  SS_OPS_KIND,     /* uint8: 1 kernel, 2 memcpy, 3 memset, 4 host op */
  SS_OPS_CATEGORY, /* uint8: 1 compute, 2 comm, 3 memcpy, 4 memset (SPEC §4) */
  SS_OPS_NCOLUMNS
};

/* Header of the op table. The table is one block: this header, then each
 * column at its offset (8-byte aligned, `nops` elements), then the string
 * table at strings_offset: `nstrings` NUL-terminated UTF-8-or-raw strings
 * back to back, string 0 being "". All integers are in host byte order. */
typedef struct ss_api_ops_header {
  char magic[8];         /* SS_API_OPS_MAGIC */
  uint64_t header_bytes; /* sizeof this header */
  uint64_t nops;
  uint64_t nstrings;
  uint64_t strings_offset, strings_bytes;
  uint64_t ncolumns; /* SS_OPS_NCOLUMNS */
  uint64_t column_offset[SS_OPS_NCOLUMNS];
} ss_api_ops_header;

/* Loads a run and returns every op of every loaded rank (kernels, copies,
 * memsets, host ops of CPU backends), ordered by rank then start, as the
 * table above in *table_out (*size_out bytes; free with ss_api_free).
 * Options: the analysis options (--step-range decides the steps, --steps
 * keeps only the ops of those steps, --threads the loader's threads) and
 * --rank R (only rank R's ops). */
int ss_api_ops(const char *run, int argc, const char *const *argv, void **table_out,
               size_t *size_out, char **err_out);

/* The same in three calls, for a binding that wants the table in memory it
 * owns (no copy): ss_api_ops_open loads the run with the same options and
 * returns a handle and the table's size in bytes; ss_api_ops_write writes
 * the table into buf (at least that size; any alignment suffices for the
 * header, and the columns are 8-byte aligned when buf is); ss_api_ops_close
 * frees the handle (NULL is ignored). A handle may be written more than once,
 * but not from two threads at a time. */
typedef struct ss_api_ops_handle ss_api_ops_handle;
int ss_api_ops_open(const char *run, int argc, const char *const *argv, ss_api_ops_handle **ops_out,
                    size_t *size_out, char **err_out);
int ss_api_ops_write(ss_api_ops_handle *ops, void *buf, size_t size, char **err_out);
void ss_api_ops_close(ss_api_ops_handle *ops);

#ifdef __cplusplus
}
#endif

#endif /* STEPSCOPE_API_H */
