/*
 * cli_load.h — one run, loaded and analysed the way every command does it
 * (`analyze`, `export`, `diff`, `diff RUN PREDICTION.json`, and the C API of
 * analyzer/api): every rank in parallel on the --threads given, the
 * importer's switches from the environment (cli_env.c), the command line's
 * classification rules; then the analysis with the command's options. The
 * messages name the command ("stepscope export: ...") and, where a command
 * holds several runs (`diff`), the run.
 */
#ifndef CLI_LOAD_H
#define CLI_LOAD_H

#include <stddef.h>

#include "rank_reload.h"
#include "rank_local.h"
#include "ssa_import.h"
#include "ssa_metrics.h"

/* A run and its analysis; the flags say what cli_loaded_free frees. */
typedef struct cli_loaded {
  ssa_run run;
  ssa_analysis an;
  int have_run, have_an;
  /* the bounded mode (CLI_LOW_MEMORY): what the analysis reads the ranks again with */
  ssa_import_options import;
  ssa_run_rereader reread;
  ssa_rank_summary *summaries; /* per rank index, made at load; the analysis takes them */
  ssa_rank_local *locals;      /* NULL, or per rank index its metrics made at load (a partial's
                                  map step, or a merge: ssa_options.rank_locals) */

  int have_reread;
  /* a merge of partials (cli_partial.c): per file index of the run, where its rank file is
   * read again (absolute); NULL: the ranks' own paths */
  char **read_paths;
  size_t nread_paths;
} cli_loaded;

/* Loads the run at `path` into *run (freed with ssa_run_free either way);
 * `progress` puts the loader's progress on stderr. 0, or 1 with "stepscope
 * COMMAND: why" in msg[cap]. Nothing is printed. */
int cli_load_run(const char *command, const char *path, const ssa_options *opt, int progress,
                 ssa_run *run, char *msg, size_t cap);

/* The same with the Kineto CPU ops' input args kept (`stepscope ops`, ss_api_op_perf), and
 * what `more` adds of CLI_OP_MODULES and CLI_OP_MEMORY (ss_api_op_modules, ss_api_op_memory);
 * no progress. */
int cli_load_run_with_inputs(const char *command, const char *path, const ssa_options *opt,
                             unsigned more, ssa_run *run, char *msg, size_t cap);
/* Analyses the loaded run into *an (freed with ssa_analysis_free either way).
 * 0, or the exit status with the message in msg[cap]: 2 when --rank names a
 * rank the run lacks, else 1. `name` (NULL or the run's path) comes before
 * the reason when the command has more than one run. Nothing is printed. */
int cli_analyse_run(const char *command, const char *name, const ssa_options *opt,
                    const ssa_run *run, ssa_analysis *an, char *msg, size_t cap);

/* What cli_open_run says on stderr besides its errors. */
enum {
  CLI_SAY_LOSSES = 1u,    /* the DATA LOST lines and the loader's warnings, before the analysis
                             (for commands whose output does not carry them: export, diff) */
  CLI_SAY_RUN_NAME = 2u,  /* messages name the run (diff: there are two) */
  CLI_OP_INPUTS = 4u,     /* not a message: Kineto CPU ops keep their input args (`ops`) */
  CLI_OP_MODULES = 8u,    /* not a message: Kineto module events are kept (`ops --by module`) */
  CLI_OP_MEMORY = 16u,    /* not a message: Kineto memory events are kept (`ops --memory`) */
  CLI_THREAD_NAMES = 32u, /* not a message: Kineto thread_name events label lanes (`export`) */
  CLI_LOW_MEMORY = 64u,   /* not a message: the bounded mode (`analyze --low-memory`,
                             docs/scale.md): each rank's events are dropped once it is loaded
                             and read again for each per-rank pass of the analysis */
};

/* The commands' way: cli_load_run (with progress on a terminal), what the
 * `say` flags ask for, cli_analyse_run; every message printed on stderr,
 * terminal-safe (cli_print.h). 0, or the exit status. Free l with cli_loaded_free either way. */
int cli_open_run(const char *command, const char *path, const ssa_options *opt, unsigned say,
                 cli_loaded *l);

/* cli_open_run for a library caller (the C API): the error in msg[cap], nothing on stderr, no
 * progress. Free l with cli_loaded_free whatever it returns. */
int cli_open_run_quiet(const char *command, const char *path, const ssa_options *opt, unsigned say,
                       cli_loaded *l, char *msg, size_t cap);

/* cli_open_run's second half: the analysis of l->run as `say` asks (with CLI_LOW_MEMORY, in
 * bounded memory from l->summaries, reading the ranks again, from l->read_paths when set).
 * 0 or the exit status, the error in msg[cap] (msg NULL: printed on stderr). */
int cli_analyse_loaded(const char *command, const char *path, const ssa_options *opt, unsigned say,
                       cli_loaded *l, char *msg, size_t cap);

/* The bounded mode's load of part `part_index` of `part_count` of the run at `path` (a
 * partial, cli_partial.c): the part's ranks as shells in file order (not assembled: no
 * alignment), with their summaries by rank index and the importer's switches, as `analyze
 * --low-memory` loads them, and their local results; with `cross` (NULL: none; a second map
 * round) the pipeline ranks' results too, from their inputs in it (by the run's file index;
 * cross_path names it in the message when a rank does not match its entry).
 * 0, or 1 with "stepscope COMMAND: why" in msg[cap]. Free with cli_loaded_free. */
struct ssa_cross_part;
int cli_load_part(const char *command, const char *path, const ssa_options *opt, int part_index,
                  int part_count, const struct ssa_cross_part *cross, const char *cross_path,
                  cli_loaded *l, char *msg, size_t cap);

/* Moves the summaries by_file[nfiles] and local results locals_by_file[nfiles] (NULL: none)
 * of run's ranks into new arrays by rank index (*summaries, *locals: NULL when none, both NULL
 * without memory; run NULL: none), by each rank's file index, then frees the rest (files not
 * in the run: duplicates its assembly dropped, a failed load) and both per-file arrays. 0, or
 * 1 without memory. */
int cli_summaries_by_rank(const ssa_run *run, ssa_rank_summary *by_file,
                          ssa_rank_local *locals_by_file, size_t nfiles,
                          ssa_rank_summary **summaries, ssa_rank_local **locals);

void cli_loaded_free(cli_loaded *l);

#endif
