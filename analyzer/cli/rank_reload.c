/*
 * rank_reload.c — the bounded analysis's way to a rank's events (docs/scale.md): the
 * loader dropped every rank's events once it was finished (ssa_load_options.drop_events);
 * for each per-rank pass of the analysis, `load` reads the rank's file again
 * (ssa_rank_reload) and puts the full rank in the run in place of its shell, and `drop`
 * frees it and puts the shell back, exactly as it was. Different passes of a pool touch
 * different rank indices, so no lock is needed.
 */
#include <stdlib.h>
#include <string.h>

#include "rank_reload.h"

static int load_events(void *ctx, size_t i) {
  ssa_run_rereader *x = ctx;
  ssa_rank *r = &x->run->ranks[i];
  ssa_rank full, shell = *r;
  if (x->read_paths) shell.path = x->read_paths[r->file_index]; /* a merge: read it there */
  stepscope_error err;
  int rc = ssa_rank_reload(&shell, x->import, &full, &err);
  if (rc) {
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
