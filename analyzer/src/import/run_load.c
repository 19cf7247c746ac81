/*
 * run_load.c — loads a run: every rank file of a directory, in parallel.
 *
 * run_discovery.c decides which files of the directory are ranks and of
 * which kind; each kind has its source (ssa_sources: our
 * `rank-*.trace.zst` reader, the Kineto importer). One
 * job per file goes to a pool of threads sized to the cores (or --threads;
 * ssa_parallel_for, io/parallel_for.c); each fills a rank with the file's
 * source and finishes it (sort, join, classify), so the heavy work is
 * parallel across ranks. Files that fail
 * become run warnings; duplicate rank numbers and ranks missing from
 * 0..world-1 (files from different runs, lost ranks) are reported, clocks are
 * aligned and unclosed traces reported by ssa_run_assemble (model/run.c).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kineto_source.h"
#include "kineto_split.h"
#include "ssa_import.h"
#include "ssa_model.h"
#include "ssa_io.h"
#include "sc_try.h"

static const ssa_source ssa_sources[] = {
    {"stepscope trace", ssa_trace_source_load},
    {"kineto json", ssa_kineto_source_load_opts},
};
#define NSOURCES (sizeof ssa_sources / sizeof ssa_sources[0])

typedef struct file_task {
  char *path;
  const ssa_source *source;
  ssa_rank *rank; /* its slot of the run's ranks, filled in place (no copy per rank) */
  int rc;
  stepscope_error err;
} file_task;

typedef struct pool {
  file_task *tasks;
  size_t ntasks;
  atomic_size_t done;
  int progress;
  const ssa_comm_rules *comm_rules; /* the user's classification rules, or NULL */
  const ssa_import_options *import; /* the importers' switches (never NULL) */
  int drop_events;                  /* ssa_load_options.drop_events */
  int (*each_rank)(void *ctx, ssa_rank *r, size_t file, size_t nfiles); /* ... .each_rank */
  void *each_rank_ctx;
  pthread_mutex_t print_lock;
} pool;

/* Reads one rank file with its source and finishes the rank: 0, or a status with the reason
 * in err. */
static int read_rank(const char *path, int source, const ssa_import_options *import,
                     const ssa_comm_rules *rules, ssa_rank *r, stepscope_error *err) {
  memset(err, 0, sizeof *err);
  int rc = ssa_rank_init(r);
  r->comm_rules = rules;
  r->source_index = source;
  if (rc == 0) rc = ssa_sources[source].load(path, import, r, err);
  if (rc == 0) rc = ssa_rank_finish(r);
  if (rc && !err->message[0])
    snprintf(err->message, sizeof err->message, "%s: %s", path, stepscope_status_name(rc));
  return rc;
}

int ssa_rank_reload(const ssa_rank *shell, const ssa_import_options *import, ssa_rank *out,
                    stepscope_error *err) {
  static const ssa_import_options import_defaults;
  if (shell->source_index < 0 || (size_t)shell->source_index >= NSOURCES || !shell->path)
    return STEPSCOPE_E_ARGUMENT;
  int rc = read_rank(shell->path, shell->source_index, import ? import : &import_defaults,
                     shell->comm_rules, out, err);
  out->offset_ns = shell->offset_ns;
  return rc;
}

/* One file (a job of ssa_parallel_for): its rank read and finished, or why not; in the
 * bounded mode, its events dropped then. */
static void load_file(void *ctx, size_t i) {
  pool *p = ctx;
  file_task *t = &p->tasks[i];
  t->rc = read_rank(t->path, (int)(t->source - ssa_sources), p->import, p->comm_rules, t->rank,
                    &t->err);
  t->rank->file_index = i;
  if (t->rc == 0 && p->each_rank) t->rc = p->each_rank(p->each_rank_ctx, t->rank, i, p->ntasks);
  if (t->rc == 0 && p->drop_events) t->rc = ssa_rank_drop_events(t->rank);
  size_t d = atomic_fetch_add(&p->done, 1) + 1;
  if (p->progress) {
    pthread_mutex_lock(&p->print_lock);
    fprintf(stderr, "\rloading rank files: %zu/%zu", d, p->ntasks);
    if (d == p->ntasks) fputc('\n', stderr);
    pthread_mutex_unlock(&p->print_lock);
  }
}

/* A rank file's stat by the discovery (ok 0: it failed), so that it is not stat'ed again to be
 * protected from being written over. */
typedef struct file_stat {
  int ok;
  struct stat st;
} file_stat;

/* Lists the rank files of `path` (a directory or one file) as run_discovery.c
 * decides them, each with the source that reads it. A single file that is a
 * stepscope export or report is an error that says so. */
static int list_files(const char *path, const stepscope_inflate_limits *inflate, char ***out,
                      const ssa_source ***sources, file_stat **stats, size_t *n,
                      stepscope_error *err) {
  ssa_run_files found;
  *out = NULL;
  *sources = NULL;
  *stats = NULL;
  *n = 0;
  SC_TRY(ssa_run_discover(path, inflate, &found, err));
  if (found.single && !ssa_file_kind_is_rank(found.files[0].kind)) {
    if (err) {
      err->code = STEPSCOPE_E_ARGUMENT;
      err->offset = 0;
      snprintf(err->message, sizeof err->message,
               "%s is a %s (%s), not a trace: give the run directory or its rank files", path,
               ssa_file_kind_name(found.files[0].kind), found.files[0].why);
    }
    ssa_run_files_free(&found);
    return STEPSCOPE_E_ARGUMENT;
  }
  if (found.nranks == 0) {
    if (err) {
      err->code = STEPSCOPE_E_ARGUMENT;
      err->offset = 0;
      size_t l = (size_t)snprintf(err->message, sizeof err->message, "%s: ", path);
      if (l < sizeof err->message)
        ssa_run_files_why_none(&found, err->message + l, sizeof err->message - l);
    }
    ssa_run_files_free(&found);
    return STEPSCOPE_E_ARGUMENT;
  }
  char **v = calloc(found.nranks, sizeof *v);
  const ssa_source **s = calloc(found.nranks, sizeof *s);
  file_stat *fs = calloc(found.nranks, sizeof *fs);
  if (!v || !s || !fs) {
    free(v);
    free(s);
    free(fs);
    ssa_run_files_free(&found);
    return STEPSCOPE_E_NOMEM;
  }
  size_t cnt = 0;
  for (size_t i = 0; i < found.nfiles; i++) {
    ssa_found_file *f = &found.files[i];
    if (!ssa_file_kind_is_rank(f->kind)) continue;
    s[cnt] = f->kind == SSA_FILE_KINETO ? &ssa_sources[1] : &ssa_sources[0];
    fs[cnt] = (file_stat){f->stat_ok, f->st};
    v[cnt++] = f->path;
    f->path = NULL; /* now owned by the list */
  }
  ssa_run_files_free(&found);
  *out = v;
  *sources = s;
  *stats = fs;
  *n = cnt;
  return 0;
}

/* err := the out-of-memory message for `what`, with the run's size: its rank files and their
 * bytes on disk. */
static void out_of_memory(stepscope_error *err, const char *what, const pool *p) {
  if (!err) return;
  uint64_t bytes = 0;
  for (size_t i = 0; i < p->ntasks; i++) {
    struct stat st;
    if (p->tasks[i].path && stat(p->tasks[i].path, &st) == 0) bytes += (uint64_t)st.st_size;
  }
  err->code = STEPSCOPE_E_NOMEM;
  err->offset = 0;
  ssa_out_of_memory_message(err->message, sizeof err->message, what, p->ntasks, 0, bytes);
}

int ssa_run_load(ssa_run *run, const char *path, const ssa_load_options *opt,
                 stepscope_error *err) {
  return ssa_run_load_with_rules(run, path, opt, NULL, err);
}

int ssa_run_load_with_rules(ssa_run *run, const char *path, const ssa_load_options *opt,
                            const ssa_comm_rules *rules, stepscope_error *err) {
  return ssa_run_load_import(run, path, opt, rules, NULL, err);
}

static int load_import(ssa_run *run, const char *path, const ssa_load_options *opt,
                       const ssa_comm_rules *rules, const ssa_import_options *import,
                       stepscope_error *err) {
  memset(run, 0, sizeof *run);
  run->dir = strdup(path);
  if (!run->dir) return STEPSCOPE_E_NOMEM;
  char **files;
  const ssa_source **sources;
  file_stat *stats;
  size_t nfiles;
  int rc =
      list_files(path, import ? &import->inflate : NULL, &files, &sources, &stats, &nfiles, err);
  if (rc) return rc;
  if (opt && opt->part_count > 1) { /* a partial: only this part's block of files */
    if ((size_t)opt->part_count > nfiles) {
      for (size_t i = 0; i < nfiles; i++)
        free(files[i]);
      free(files);
      free(sources);
      free(stats);
      if (err) {
        err->code = STEPSCOPE_E_ARGUMENT;
        snprintf(err->message, sizeof err->message,
                 "%s: %d parts of %zu rank files: a part holds no rank file (at most one part "
                 "per file)",
                 path, opt->part_count, nfiles);
      }
      return STEPSCOPE_E_ARGUMENT;
    }
    size_t lo = ssa_part_first_file(nfiles, opt->part_index, opt->part_count),
           hi = ssa_part_first_file(nfiles, opt->part_index + 1, opt->part_count);
    for (size_t i = 0; i < nfiles; i++)
      if (i < lo || i >= hi) free(files[i]);
    memmove(files, files + lo, (hi - lo) * sizeof *files);
    memmove(sources, sources + lo, (hi - lo) * sizeof *sources);
    memmove(stats, stats + lo, (hi - lo) * sizeof *stats);
    nfiles = hi - lo;
  }
  for (size_t i = 0; i < nfiles; i++) /* never written over */
    if (stats[i].ok)
      ssa_out_protect_file(&stats[i].st);
    else
      ssa_out_protect_input(files[i]);
  free(stats);
  pool p;
  memset(&p, 0, sizeof p);
  p.tasks = calloc(nfiles, sizeof *p.tasks);
  /* each file's rank is read straight into its slot; the slots of files that fail are closed
   * up afterwards */
  run->ranks = calloc(nfiles, sizeof *run->ranks);
  if (!p.tasks || !run->ranks) {
    for (size_t i = 0; i < nfiles; i++)
      free(files[i]);
    free(files);
    free(sources);
    free(p.tasks);
    return STEPSCOPE_E_NOMEM;
  }
  p.ntasks = nfiles;
  for (size_t i = 0; i < nfiles; i++) {
    p.tasks[i].path = files[i];
    p.tasks[i].source = sources[i];
    p.tasks[i].rank = &run->ranks[i];
  }
  free(files);
  free(sources);
  atomic_init(&p.done, 0);
  p.progress = opt && opt->progress;
  p.drop_events = opt && opt->drop_events;
  p.each_rank = opt ? opt->each_rank : NULL;
  p.each_rank_ctx = opt ? opt->each_rank_ctx : NULL;
  p.comm_rules = rules;
  static const ssa_import_options import_defaults;
  p.import = import ? import : &import_defaults;
  pthread_mutex_init(&p.print_lock, NULL);
  size_t workers = ssa_workers(nfiles, opt ? opt->threads : 0);
  ssa_split_loaders((int)workers); /* one file on two threads only where cores are left */
  ssa_parallel_for(nfiles, workers, load_file, &p);
  ssa_split_loaders(1);
  pthread_mutex_destroy(&p.print_lock);

  /* a rank that ran out of memory is no damaged file to skip: the report would silently lack
   * it (and the next rank would likely run out too) */
  for (size_t i = 0; i < nfiles && rc == 0; i++)
    if (p.tasks[i].rc == STEPSCOPE_E_NOMEM) {
      rc = STEPSCOPE_E_NOMEM;
      char what[4200];
      snprintf(what, sizeof what, "loading rank file %s", p.tasks[i].path);
      out_of_memory(err, what, &p);
    }
  for (size_t i = 0; i < nfiles; i++) {
    file_task *t = &p.tasks[i];
    if (rc == 0 && t->rc == 0) {
      t->rank->path = t->path;
      t->path = NULL;
      if (t->rank != &run->ranks[run->nranks]) run->ranks[run->nranks] = *t->rank;
      run->nranks++;
    } else {
      if (rc == 0) ssa_run_warn(run, "%s (rank skipped)", t->err.message);
      ssa_rank_free(t->rank);
    }
    free(t->path);
  }
  if (rc == 0 && run->nranks == 0 && err) {
    /* nothing loaded: say why for each file, as many as the message holds */
    err->code = STEPSCOPE_E_FORMAT;
    err->offset = 0;
    size_t len =
        (size_t)snprintf(err->message, sizeof err->message, "%s: no rank file could be read", path);
    size_t shown = 0;
    for (size_t i = 0; i < nfiles && len < sizeof err->message; i++) {
      const char *why = p.tasks[i].err.message[0] ? p.tasks[i].err.message : "unreadable";
      size_t need =
          2 + strlen(why) + (i + 1 < nfiles ? 80 + strlen(path) : 0); /* room for "and more" */
      if (shown && len + need >= sizeof err->message) {
        snprintf(err->message + len, sizeof err->message - len,
                 "; and %zu more (`stepscope info %s` names each)", nfiles - i, path);
        break;
      }
      len += (size_t)snprintf(err->message + len, sizeof err->message - len, "%s %s",
                              shown ? ";" : ":", why);
      shown++;
    }
    free(p.tasks);
    return STEPSCOPE_E_FORMAT;
  }
  if (rc == STEPSCOPE_E_NOMEM && err && !err->message[0])
    out_of_memory(err, "for the run's ranks", &p);
  free(p.tasks);
  if (rc) return rc;
  if (run->nranks == 0) {
    if (err) { /* say why, with the first file's reason */
      err->code = STEPSCOPE_E_FORMAT;
      snprintf(err->message, sizeof err->message, "%s: no rank file could be read (%s)", path,
               run->nwarnings ? run->warnings[0] : "?");
    }
    return STEPSCOPE_E_FORMAT;
  }
  return opt && opt->unassembled ? 0 : ssa_run_assemble(run, err);
}

size_t ssa_part_first_file(size_t nfiles, int part, int count) {
  if (part <= 0) return 0;
  if (part >= count) return nfiles;
  return (size_t)((unsigned long long)nfiles * (unsigned)part / (unsigned)count);
}

int ssa_run_load_import(ssa_run *run, const char *path, const ssa_load_options *opt,
                        const ssa_comm_rules *rules, const ssa_import_options *import,
                        stepscope_error *err) {
  if (err) memset(err, 0, sizeof *err);
  int rc = load_import(run, path, opt, rules, import, err);
  if (rc == STEPSCOPE_E_NOMEM && err && !err->message[0]) { /* never an empty message */
    err->code = rc;
    ssa_out_of_memory_message(err->message, sizeof err->message, "loading the run", run->nranks, 0,
                              0);
  }
  return rc;
}
