/*
 * cli_load.c — see cli_load.h: loading and analysing one run for the
 * commands and the C API, so that what they load, the errors they give and
 * the exit statuses they choose are the same everywhere.
 */
#include "cli_load.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_env.h"
#include "cli_print.h"
#include "partial.h"

/* The bounded mode's summaries, made by the loading threads, by file index; and for a partial
 * (`local_opt` set) each rank's local results (ssa_rank_local_make) under those options, a
 * pipeline rank's from its inputs in `cross` (a second map round: its entry by the part's file
 * index, NULL none; a rank that does not match its entry is counted in `mismatched`). */
typedef struct load_summaries {
  pthread_mutex_t lock;
  ssa_rank_summary *by_file;
  ssa_rank_local *locals_by_file;
  size_t nfiles;
  const ssa_options *local_opt;
  const ssa_cross_rank_in **cross;
  size_t ncross, mismatched;
} load_summaries;

/* Rank r's local results with its cross-rank inputs `in` (NULL: none), which must be its. */
static int make_local(load_summaries *x, const ssa_rank *r, const ssa_cross_rank_in *in,
                      ssa_rank_summary *s, ssa_rank_local *out) {
  ssa_rank_cross cross = {0};
  int fits = in && in->rank == r->rank && in->ncolls == s->ncolls && s->pipeline_stage >= 0;
  if (in && !fits) {
    pthread_mutex_lock(&x->lock);
    x->mismatched++;
    pthread_mutex_unlock(&x->lock);
  }
  int rc = fits ? ssa_cross_densify(in, &cross) : 0;
  if (rc == 0) rc = ssa_rank_local_make(r, x->local_opt, s, fits ? &cross : NULL, out);
  ssa_rank_cross_free(&cross);
  return rc;
}

/* ssa_load_options.each_rank of the bounded mode: the rank's summary, before its events go. */
static int summarize_loaded(void *ctx, ssa_rank *r, size_t file, size_t nfiles) {
  load_summaries *x = ctx;
  pthread_mutex_lock(&x->lock);
  if (!x->by_file && (x->by_file = calloc(nfiles ? nfiles : 1, sizeof *x->by_file)))
    x->nfiles = nfiles;
  if (x->local_opt && !x->locals_by_file)
    x->locals_by_file = calloc(nfiles ? nfiles : 1, sizeof *x->locals_by_file);
  pthread_mutex_unlock(&x->lock);
  if (!x->by_file || (x->local_opt && !x->locals_by_file)) return STEPSCOPE_E_NOMEM;
  int rc = ssa_rank_summarize(r, &x->by_file[file]); /* its own slot: no lock */
  if (rc == 0 && x->local_opt)
    rc = make_local(x, r, file < x->ncross ? x->cross[file] : NULL, &x->by_file[file],
                    &x->locals_by_file[file]);
  return rc;
}

int cli_summaries_by_rank(const ssa_run *run, ssa_rank_summary *by_file,
                          ssa_rank_local *locals_by_file, size_t nfiles,
                          ssa_rank_summary **summaries, ssa_rank_local **locals) {
  size_t n = run ? run->nranks : 0;
  ssa_rank_summary *v = run ? calloc(n ? n : 1, sizeof *v) : NULL;
  ssa_rank_local *lv = run && locals_by_file ? calloc(n ? n : 1, sizeof *lv) : NULL;
  int nomem = run && (!v || (locals_by_file && !lv));
  for (size_t i = 0; !nomem && by_file && i < n; i++) {
    size_t f = run->ranks[i].file_index;
    v[i] = by_file[f];
    memset(&by_file[f], 0, sizeof by_file[f]);
    if (!lv) continue;
    lv[i] = locals_by_file[f];
    memset(&locals_by_file[f], 0, sizeof locals_by_file[f]);
  }
  for (size_t f = 0; f < nfiles; f++) { /* files not in the run: duplicates, a failed load */
    if (by_file) ssa_rank_summary_free(&by_file[f]);
    if (locals_by_file) ssa_rank_local_free(&locals_by_file[f]);
  }
  free(by_file);
  free(locals_by_file);
  if (nomem) {
    free(v);
    free(lv);
    v = NULL;
    lv = NULL;
  }
  *summaries = v;
  *locals = lv;
  return nomem;
}

/* The loading threads' summaries and local results moved into new arrays by rank index
 * (cli_summaries_by_rank: *summaries NULL without memory; run NULL: none, what is left freed). */
static void by_rank(load_summaries *x, const ssa_run *run, ssa_rank_summary **summaries,
                    ssa_rank_local **locals) {
  ssa_rank_summary *v;
  ssa_rank_local *lv;
  cli_summaries_by_rank(run, x->by_file, x->locals_by_file, x->nfiles, &v, &lv);
  x->by_file = NULL;
  x->locals_by_file = NULL;
  if (summaries)
    *summaries = v;
  else
    free(v);
  if (locals)
    *locals = lv;
  else
    free(lv);
}

/* The entries of cross (a second map round's inputs) by the file index within part
 * part[0] of part[1] (*ncross of them; *by_file NULL when none). 0, or 1 without memory. */
static int cross_by_part_file(const ssa_cross_part *cross, const int part[2],
                              const ssa_cross_rank_in ***by_file, size_t *ncross) {
  *by_file = NULL;
  *ncross = 0;
  if (!cross || !part) return 0;
  size_t first = ssa_part_first_file((size_t)cross->nfiles, part[0], part[1]),
         end = ssa_part_first_file((size_t)cross->nfiles, part[0] + 1, part[1]);
  if (!(*by_file = calloc(end > first ? end - first : 1, sizeof **by_file))) return 1;
  *ncross = end - first;
  for (size_t i = 0; i < cross->nranks; i++) {
    uint64_t f = cross->ranks[i].file_index;
    if (f >= first && f < end) (*by_file)[f - first] = &cross->ranks[i];
  }
  return 0;
}

/* cli_load_run, with Kineto CPU ops' input args kept when `say` has CLI_OP_INPUTS, module
 * events when it has CLI_OP_MODULES (`stepscope analyze`, `stepscope ops`), memory events when
 * it has CLI_OP_MEMORY and thread names when it has CLI_THREAD_NAMES (`stepscope export`). */
static int load_part(const char *command, const char *path, const ssa_options *opt, int progress,
                     unsigned say, const int part[2], const ssa_cross_part *cross,
                     const char *cross_path, ssa_run *run, ssa_import_options *import,
                     ssa_rank_summary **summaries, ssa_rank_local **locals, char *msg, size_t cap) {
  load_summaries made = {.lock = PTHREAD_MUTEX_INITIALIZER, .local_opt = locals ? opt : NULL};
  if (cross_by_part_file(cross, part, &made.cross, &made.ncross)) {
    snprintf(msg, cap, "stepscope %s: out of memory", command);
    return 1;
  }
  int bounded = (say & CLI_LOW_MEMORY) && summaries;
  ssa_load_options lo = {.threads = opt->threads,
                         .progress = progress,
                         .drop_events = bounded,
                         .each_rank = bounded ? summarize_loaded : NULL,
                         .each_rank_ctx = &made,
                         .part_index = part ? part[0] : 0,
                         .part_count = part ? part[1] : 0,
                         .unassembled = part != NULL};
  stepscope_error err;
  memset(&err, 0, sizeof err);
  cli_env env; /* the importer's switches, read from the environment here only */
  cli_env_read(&env);
  env.import.op_inputs = (say & CLI_OP_INPUTS) != 0;
  env.import.op_modules = (say & CLI_OP_MODULES) != 0;
  env.import.op_memory = (say & CLI_OP_MEMORY) != 0;
  env.import.thread_names = (say & CLI_THREAD_NAMES) != 0;
  if (import) *import = env.import; /* the bounded mode reads the ranks again with it */
  int rc = ssa_run_load_import(run, path, &lo, opt->comm_rules, &env.import, &err);
  if (rc)
    snprintf(msg, cap, "stepscope %s: %s", command, err.message);
  else if (made.mismatched) {
    snprintf(msg, cap,
             "stepscope %s: %s does not match %zu of the part's rank files (their rank or "
             "collective records differ): made from another run's partials, or the rank files "
             "changed since; make the partials and then the cross files (merge --cross-out) "
             "again",
             command, cross_path ? cross_path : "the cross file", made.mismatched);
    rc = 1;
  } else if (bounded) {
    by_rank(&made, run, summaries, locals);
    if (!*summaries) {
      snprintf(msg, cap, "stepscope %s: out of memory", command);
      rc = 1;
    }
  }
  by_rank(&made, NULL, NULL, NULL); /* what is left (a failed load) */
  free(made.cross);
  return rc ? 1 : 0;
}

static int load_run(const char *command, const char *path, const ssa_options *opt, int progress,
                    unsigned say, ssa_run *run, ssa_import_options *import,
                    ssa_rank_summary **summaries, char *msg, size_t cap) {
  return load_part(command, path, opt, progress, say, NULL, NULL, NULL, run, import, summaries,
                   NULL, msg, cap);
}

int cli_load_part(const char *command, const char *path, const ssa_options *opt, int part_index,
                  int part_count, const ssa_cross_part *cross, const char *cross_path,
                  cli_loaded *l, char *msg, size_t cap) {
  const int part[2] = {part_index, part_count};
  memset(l, 0, sizeof *l);
  l->have_run = 1;
  return load_part(command, path, opt, 0, CLI_OP_INPUTS | CLI_LOW_MEMORY, part, cross, cross_path,
                   &l->run, &l->import, &l->summaries, &l->locals, msg, cap);
}

int cli_load_run(const char *command, const char *path, const ssa_options *opt, int progress,
                 ssa_run *run, char *msg, size_t cap) {
  return load_run(command, path, opt, progress, 0u, run, NULL, NULL, msg, cap);
}

int cli_load_run_with_inputs(const char *command, const char *path, const ssa_options *opt,
                             unsigned more, ssa_run *run, char *msg, size_t cap) {
  return load_run(command, path, opt, 0, CLI_OP_INPUTS | (more & (CLI_OP_MODULES | CLI_OP_MEMORY)),
                  run, NULL, NULL, msg, cap);
}

int cli_analyse_run(const char *command, const char *name, const ssa_options *opt,
                    const ssa_run *run, ssa_analysis *an, char *msg, size_t cap) {
  stepscope_error err;
  memset(&err, 0, sizeof err);
  if (!ssa_analyze(run, opt, an, &err)) return 0;
  if (name)
    snprintf(msg, cap, "stepscope %s: %s: %s", command, name, err.message);
  else
    snprintf(msg, cap, "stepscope %s: %s", command, err.message);
  return opt->rank >= 0 && !ssa_run_has_rank(run, opt->rank) ? 2 : 1;
}

/* msg into out[cap], or printed on stderr when out is NULL. */
static void say_error(const char *msg, char *out, size_t cap) {
  if (out)
    snprintf(out, cap, "%s", msg);
  else
    cli_print(stderr, "%s\n", msg);
}

/* cli_open_run, with its error in msg_out[cap] instead of on stderr when msg_out is set. */
static int open_run(const char *command, const char *path, const ssa_options *opt, unsigned say,
                    cli_loaded *l, char *msg_out, size_t cap) {
  char msg[1024];
  memset(l, 0, sizeof *l);
  l->have_run = 1;
  /* the bounded mode makes each rank's local results at load, as a partial's map step does:
   * a rank outside any pipeline is then not read again for its metrics or culprit answers */
  int rc = load_part(command, path, opt, !msg_out && isatty(2), say, NULL, NULL, NULL, &l->run,
                     &l->import, &l->summaries, say & CLI_LOW_MEMORY ? &l->locals : NULL, msg,
                     sizeof msg);
  if (rc) {
    say_error(msg, msg_out, cap);
    return rc;
  }
  if (say & CLI_SAY_LOSSES) { /* what was lost to damage comes first, never in silence */
    char prefix[64];
    snprintf(prefix, sizeof prefix, "stepscope %s: ", command);
    ssa_run_print_losses(&l->run, stderr, prefix);
    for (size_t i = 0; i < l->run.nwarnings; i++) /* skipped ranks, missing ranks */
      cli_print(stderr, "stepscope %s: %s%swarning: %s\n", command,
                say & CLI_SAY_RUN_NAME ? path : "", say & CLI_SAY_RUN_NAME ? ": " : "",
                l->run.warnings[i]);
  }
  return cli_analyse_loaded(command, path, opt, say, l, msg_out, cap);
}

int cli_open_run(const char *command, const char *path, const ssa_options *opt, unsigned say,
                 cli_loaded *l) {
  return open_run(command, path, opt, say, l, NULL, 0);
}

int cli_open_run_quiet(const char *command, const char *path, const ssa_options *opt, unsigned say,
                       cli_loaded *l, char *msg, size_t cap) {
  return open_run(command, path, opt, say, l, msg, cap);
}

int cli_analyse_loaded(const char *command, const char *path, const ssa_options *opt, unsigned say,
                       cli_loaded *l, char *msg_out, size_t cap) {
  char msg[1024];
  ssa_options bounded = *opt;
  if (say & CLI_LOW_MEMORY) {
    l->have_reread = 1;
    if (ssa_run_rereader_init(&l->reread, &l->run, &l->import)) {
      snprintf(msg, sizeof msg, "stepscope %s: out of memory", command);
      say_error(msg, msg_out, cap);
      return 1;
    }
    l->reread.read_paths = l->read_paths;
    bounded.rank_events = &l->reread.events;
    bounded.summaries = l->summaries;
    bounded.rank_locals = l->locals;
  }
  l->have_an = 1;
  int rc = cli_analyse_run(command, say & CLI_SAY_RUN_NAME ? path : NULL, &bounded, &l->run, &l->an,
                           msg, sizeof msg);
  if (rc && l->have_reread && l->reread.failed) /* what reading a rank again met, not a status */
    snprintf(msg, sizeof msg, "stepscope %s: %s", command, l->reread.error);
  cli_env env;
  cli_env_read(&env);
  if (l->have_reread && env.say_reads) {
    char reads[400];
    ssa_run_rereader_say_reads(&l->reread, reads, sizeof reads);
    cli_print(stderr, "stepscope %s: %s\n", command, reads);
  }
  if (rc) say_error(msg, msg_out, cap);
  return rc;
}

void cli_loaded_free(cli_loaded *l) {
  if (l->have_an) ssa_analysis_free(&l->an);
  if (l->have_reread) ssa_run_rereader_free(&l->reread);
  for (size_t i = 0; l->summaries && i < l->run.nranks; i++)
    ssa_rank_summary_free(&l->summaries[i]); /* those the analysis did not take */
  free(l->summaries);
  l->summaries = NULL;
  for (size_t i = 0; l->locals && i < l->run.nranks; i++)
    ssa_rank_local_free(&l->locals[i]); /* those the analysis did not take */
  free(l->locals);
  l->locals = NULL;
  for (size_t i = 0; i < l->nread_paths; i++)
    free(l->read_paths[i]);
  free(l->read_paths);
  l->read_paths = NULL;
  l->nread_paths = 0;
  if (l->have_run) ssa_run_free(&l->run);
  l->have_an = l->have_run = l->have_reread = 0;
}
