/*
 * rank_reload.c — the bounded analysis's way to a rank's events (docs/scale.md): the
 * loader dropped every rank's events once it was finished (ssa_load_options.drop_events);
 * for each per-rank pass of the analysis, `load` reads the rank's file again
 * (ssa_rank_reload) and puts the full rank in the run in place of its shell, and `drop`
 * frees it and puts the shell back, exactly as it was. Different passes of a pool touch
 * different rank indices, so no lock is needed (but for the first failure's words, kept once).
 * A file read again must be the one the loader read: one whose records or ops are not the
 * shell's counts (rewritten, or still growing, since the load) is refused, not analysed
 * against the other ranks' view of the old one.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank_reload.h"

/* Keeps the words of the run's first failure to read a rank again (passes run in parallel). */
static void keep_error(ssa_run_rereader *x, const char *message) {
  if (!atomic_exchange(&x->failed, 1)) snprintf(x->error, sizeof x->error, "%s", message);
}

static int load_events(void *ctx, size_t i) {
  ssa_run_rereader *x = ctx;
  ssa_rank *r = &x->run->ranks[i];
  ssa_rank full, shell = *r;
  if (x->read_paths) shell.path = x->read_paths[r->file_index]; /* a merge: read it there */
  stepscope_error err;
  memset(&err, 0, sizeof err);
  int rc = ssa_rank_reload(&shell, x->import, &full, &err);
  if (rc == 0 && (full.records != shell.records || full.nops != shell.nops)) {
    snprintf(err.message, sizeof err.message,
             "%s changed since it was loaded (%" PRIu64 " records and %zu ops then, %" PRIu64
             " and %zu now): the bounded analysis reads each rank file again; analyse the run "
             "again once its files no longer change",
             shell.path, shell.records, shell.nops, full.records, full.nops);
    rc = STEPSCOPE_E_FORMAT;
  }
  if (rc) {
    keep_error(x, err.message[0] ? err.message : stepscope_status_name(rc));
    ssa_rank_free(&full);
    return rc;
  }
  x->shells[i] = *r;
  full.path = r->path; /* borrowed from the shell */
  *r = full;
  return 0;
}

static void drop_events(void *ctx, size_t i) {
  ssa_run_rereader *x = ctx;
  ssa_rank *r = &x->run->ranks[i];
  if (!x->shells[i].events_dropped) return; /* its load failed: the shell is in place */
  r->path = NULL;                           /* the shell's */
  ssa_rank_free(r);
  *r = x->shells[i];
  memset(&x->shells[i], 0, sizeof x->shells[i]);
}

int ssa_run_rereader_init(ssa_run_rereader *x, ssa_run *run, const ssa_import_options *import) {
  memset(x, 0, sizeof *x);
  x->run = run;
  x->import = import;
  x->shells = calloc(run->nranks ? run->nranks : 1, sizeof *x->shells);
  if (!x->shells) return STEPSCOPE_E_NOMEM;
  x->events = (ssa_rank_events){load_events, drop_events, x};
  return 0;
}

void ssa_run_rereader_free(ssa_run_rereader *x) {
  free(x->shells);
  memset(x, 0, sizeof *x);
}
