/*
 * ssa_import.h — the analyzer's import floor (analyzer/src/import): from files to the run
 * model (model/ssa_model.h). Declared here: run discovery (run_discovery.c: what a
 * directory holds), our own trace's source (trace_source.c) and the parallel loader
 * (run_load.c). The Kineto importer lives below, in import/kineto (its entry points in
 * kineto_source.h).
 *
 * Run discovery — what a run directory holds: the one place that decides
 * which files are ranks and which are stepscope's own outputs.
 *
 * Every command that takes RUN (analyze, diff, export, view, info, dump,
 * plan --from) calls ssa_run_discover, so they all accept the same names and
 * tell files apart the same way:
 *
 *   stepscope rank trace   rank-*.trace.zst (by name; the reader validates),
 *                          or another *.trace.zst that holds zstd data
 *   Kineto trace (a rank)  a *.json / *.json.gz whose content says PyTorch
 *                          profiler (top-level schemaVersion, deviceProperties,
 *                          distributedInfo, traceName or baseTimeNanoseconds, or
 *                          events of Kineto categories such as kernel, cpu_op,
 *                          cuda_runtime), whatever its name — trace.json.gz
 *                          included; also, without such marks, a file named
 *                          like a rank file: rank-*, rank_*, worker*,
 *                          *.pt.trace.json[.gz] (tensorboard_trace_handler)
 *   stepscope export       the Chrome JSON `stepscope export` writes, told by
 *                          its marker "metadata":{"stepscope":{"exporter":
 *                          "stepscope export ..."} (at the end of the file)
 *   stepscope report       the JSON of `stepscope analyze --json` (its
 *                          "generator":"stepscope analyze ..." at the start)
 *   by name, last         a file without any of these marks named
 *                          trace.json[.gz] / report.json is taken as the
 *                          export / report (so that `view` can say it is cut
 *                          or empty and regenerate it); one named like a
 *                          rank file, or given explicitly, as Kineto
 *   skipped                anything else with one of those extensions, with
 *                          the reason (not JSON, a Chrome trace of unknown
 *                          origin, a cut export, another stepscope output...)
 *
 * Files are told apart by content, never by name alone: only the first 64 KiB
 * (decompressed) are read, except when a file has no Kineto mark, where the
 * export marker is looked for at its end (a gzip file is then decompressed
 * to its end, unless it begins with the exporter's own first bytes, and at most
 * to its decompression limit: past it, the file is judged by name). Non-regular files (FIFOs...)
 * are never opened: those named like rank files are listed as ranks so that the loader names them
 * in its error, the others are skipped.
 */
#ifndef SSA_IMPORT_H
#define SSA_IMPORT_H

#include <stddef.h>
#include <sys/stat.h>

#include "ssa_model.h"
#include "stepscope.h"

typedef enum ssa_file_kind {
  SSA_FILE_SKIPPED = 0, /* not read by stepscope; `why` says what it is */
  SSA_FILE_TRACE,       /* a stepscope rank trace (.trace.zst) */
  SSA_FILE_KINETO,      /* a PyTorch profiler (Kineto) trace: one rank */
  SSA_FILE_EXPORT,      /* a Chrome-trace export written by `stepscope export` */
  SSA_FILE_REPORT       /* a JSON report written by `stepscope analyze --json` */
} ssa_file_kind;

typedef struct ssa_found_file {
  char *path;       /* directory/name, or the path as given for a single file */
  const char *name; /* the base name, inside path */
  ssa_file_kind kind;
  int gzip;      /* the content is gzip-compressed */
  char why[200]; /* how the kind was told, in words (for info and view) */
  int stat_ok;   /* the classification's stat of the file succeeded: `st` is it */
  struct stat st;
} ssa_found_file;

typedef struct ssa_run_files {
  char *dir;             /* the run directory (a single file's directory) */
  int single;            /* the path named one file, not a directory */
  ssa_found_file *files; /* sorted by name; only candidate names are listed */
  size_t nfiles;
  size_t nranks; /* files of kind TRACE or KINETO */
} ssa_run_files;

/* Lists and classifies what `path` holds: a directory's files whose names end
 * in .trace.zst, .json or .json.gz (other files are not listed), or the one
 * file `path` names (any name: classified by content; a file that is neither
 * JSON nor gzip is taken as a stepscope trace, for the reader to judge).
 * Returns 0, or an error (no such path, unreadable directory, no memory) with
 * a message in err. A directory without rank files is not an error here:
 * nranks is 0 and ssa_run_files_why_none says why. */
int ssa_run_discover(const char *path, const stepscope_inflate_limits *inflate, ssa_run_files *out,
                     stepscope_error *err);

void ssa_run_files_free(ssa_run_files *files);

/* Classifies one file (the rules above); `explicit_file`: the user named this
 * file, so a Chrome trace without Kineto marks is still taken as Kineto.
 * Sets *gzip; writes the reason into why. `inflate` (NULL: the defaults)
 * bounds a gzip file inflated to its end: past it the file is judged by its
 * name alone. */
ssa_file_kind ssa_classify_file(const char *path, int explicit_file,
                                const stepscope_inflate_limits *inflate, int *gzip, char *why,
                                size_t whylen);

/* 1 when a file of this kind is a rank (TRACE or KINETO). */
int ssa_file_kind_is_rank(ssa_file_kind kind);

/* "stepscope trace", "Kineto trace", "stepscope export", "stepscope report", "skipped". */
const char *ssa_file_kind_name(ssa_file_kind kind);

/* The first file of a kind, preferring the given name when present (e.g.
 * "trace.json" among several exports); NULL when there is none. */
const ssa_found_file *ssa_run_files_find(const ssa_run_files *files, ssa_file_kind kind,
                                         const char *preferred_name);

/* One sentence for a directory without rank files: what it holds instead
 * (an export and report without traces, skipped files and why, nothing). */
void ssa_run_files_why_none(const ssa_run_files *files, char *buf, size_t len);

/* ---- loading (trace_source.c, run_load.c) ---- */

/* How a gzip file is read (kineto_source.h says what each way is). */
typedef enum ssa_gzip_mode {
  SSA_GZIP_AUTO,
  SSA_GZIP_WHOLE,
  SSA_GZIP_PIPE,
  SSA_GZIP_STREAM
} ssa_gzip_mode;

/* Whether one Kineto document is tokenized on two threads (kineto_split.h):
 * AUTO by its size and the cores, ON for any size and core count, OFF never. */
typedef enum ssa_split_mode { SSA_SPLIT_AUTO, SSA_SPLIT_ON, SSA_SPLIT_OFF } ssa_split_mode;

/* Switches of the Kineto importer, for tests and measurements: the result
 * never depends on them, only the speed and what is said on stderr. All
 * zero (or a NULL pointer) is the default. The library never reads the
 * environment; the `stepscope` command fills this from the variables named
 * here (analyzer/cli/cli_env.c) and passes it to ssa_run_load_import. */
typedef struct ssa_import_options {
  int fast_off;         /* every event read token by token (STEPSCOPE_KINETO_FAST=off) */
  int fast_trace;       /* how many events each import read which way, on stderr
                           (STEPSCOPE_KINETO_FAST_TRACE set) */
  ssa_gzip_mode gzip;   /* STEPSCOPE_KINETO_GZIP=auto|whole|pipe|stream */
  ssa_split_mode split; /* STEPSCOPE_KINETO_SPLIT=on|off */
  double split_at;      /* the split point as a fraction of the text, used when in (0, 1);
                           else the measured default (STEPSCOPE_KINETO_SPLIT_AT) */
  int split_trace;      /* what each split did, on stderr (STEPSCOPE_KINETO_SPLIT_TRACE set) */
  int thread_names;     /* Kineto "thread_name" metadata events label the host threads' lanes
                           (`stepscope export`; docs/kineto-import.md) */
  int op_inputs;        /* Kineto CPU ops keep their input args ("Input Dims", "Input type",
                           "Input Strides", "Concrete Inputs") as their range's args, compact
                           JSON (`stepscope ops`) */
  int op_modules;       /* Kineto python_function events of modules ("nn.Module: Linear_0", the
                           profiler's with_modules) become ranges of domain "python_function"
                           (`stepscope ops --by module`) */
  int op_memory;        /* Kineto "[memory]" events (profile_memory=True) are kept as the rank's
                           allocations (ssa_rank.allocs; `stepscope ops --memory`); the file is
                           read on one thread then (no split) */
  /* Not a switch: how far a compressed input (a trace's zstd frames, a gzip Kineto trace,
   * an export found by discovery) may inflate before it is refused as a decompression bomb
   * (stepscope.h; all zero: the defaults, which real traces never reach). The command
   * takes it from STEPSCOPE_INFLATE_RATIO and STEPSCOPE_INFLATE_MAX. */
  stepscope_inflate_limits inflate;
} ssa_import_options;

typedef struct ssa_load_options {
  int threads;     /* 0: number of online CPUs */
  int progress;    /* print progress on stderr */
  int drop_events; /* the bounded mode: each rank's events are dropped once it is finished
                      (ssa_rank_drop_events), so at most `threads` ranks' events are held */
  /* NULL, or called on each finished rank before its events are dropped, from the loading
   * thread (ranks in parallel): the rank is file `file` of `nfiles` (ssa_rank.file_index
   * keeps it); the bounded mode takes the rank's summary here. 0 or a status (the rank
   * fails then). */
  int (*each_rank)(void *ctx, ssa_rank *r, size_t file, size_t nfiles);
  void *each_rank_ctx;
  /* a partial analysis (`analyze --partial`, docs/scale.md "Partials"): part_count > 1 loads
   * only part part_index of the run's rank files (in discovery order, cut into part_count
   * contiguous blocks: ssa_part_first_file); ssa_rank.file_index stays the index within the
   * part. `unassembled`: the ranks are left in file order, neither sorted nor aligned (the
   * merge assembles the whole run). */
  int part_index, part_count;
  int unassembled;
} ssa_load_options;

/* The first rank file of part `part` of `count` over `nfiles` files (part == count: nfiles). */
size_t ssa_part_first_file(size_t nfiles, int part, int count);

/* A loader source: fills a rank from one file of a kind that
 * run_discovery.c recognised. Our trace reader is one; importers add
 * themselves to ssa_sources (run_load.c). `opt` is never NULL. */
typedef struct ssa_source {
  const char *name;
  int (*load)(const char *path, const ssa_import_options *opt, ssa_rank *r, stepscope_error *err);
} ssa_source;

/* Our trace reader as a source; of `opt` (NULL: the defaults) it uses the inflate limits. */
int ssa_trace_source_load(const char *path, const ssa_import_options *opt, ssa_rank *r,
                          stepscope_error *err);

/* Loads every rank file of a run directory (or a single file) in parallel,
 * finishes each rank and aligns clocks. Bad files become warnings and
 * failed ranks; an error is returned only when nothing can be loaded. */
int ssa_run_load(ssa_run *run, const char *path, const ssa_load_options *opt, stepscope_error *err);
/* The same, classifying ops with the user's rules (comm_rules.h; NULL: the
 * built-in rules only). The rules must outlive the run. */
int ssa_run_load_with_rules(ssa_run *run, const char *path, const ssa_load_options *opt,
                            const ssa_comm_rules *rules, stepscope_error *err);
/* The same with the importers' switches (`import`, NULL: the defaults; a
 * separate argument, not a field of ssa_load_options, whose callers fill it
 * by position). */
int ssa_run_load_import(ssa_run *run, const char *path, const ssa_load_options *opt,
                        const ssa_comm_rules *rules, const ssa_import_options *import,
                        stepscope_error *err);

/* Reads a loaded rank's file again (the bounded mode, docs/scale.md): `out` gets the rank
 * with its events, finished, with the shell's clock offset (run_load.c). 0 or a status, with
 * the reason in err. */
int ssa_rank_reload(const ssa_rank *shell, const ssa_import_options *import, ssa_rank *out,
                    stepscope_error *err);

#endif
