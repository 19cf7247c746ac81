/*
 * run.c — a run's life outside its files: warnings, freeing, and the assembly every run
 * ends with, loaded from a directory (import/run_load.c) or built from ranks the caller
 * filled (ssa_run_from_ranks: tests, generators). Assembly sorts the finished ranks by
 * rank number, keeps the first file of a duplicated rank number and reports ranks missing
 * from 0..world-1 (files from different runs, lost ranks), aligns clocks (clock_align.c)
 * and reports ranks whose trace was not closed (trace_closed.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_model.h"

int ssa_run_warn(ssa_run *run, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = ssa_text_list_vadd(&run->warnings, &run->nwarnings, &run->warnings_cap, 700, fmt, ap);
  va_end(ap);
  return rc;
}

void ssa_run_free(ssa_run *run) {
  for (size_t i = 0; i < run->nranks; i++)
    ssa_rank_free(&run->ranks[i]);
  free(run->ranks);
  ssa_text_list_free(run->warnings, run->nwarnings);
  free(run->anchor_offset);
  free(run->refine_offset);
  free(run->refine_samples);
  free(run->dir);
  memset(run, 0, sizeof *run);
}

static int cmp_rank(const void *a, const void *b) {
  const ssa_rank *x = a, *y = b;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static void set_err(stepscope_error *err, int code, const char *fmt, const char *arg) {
  if (!err) return;
  err->code = code;
  err->offset = 0;
  snprintf(err->message, sizeof err->message, fmt, arg);
}

static int check_rank_set(ssa_run *run) {
  /* duplicates: keep the first file of each rank number */
  size_t w = 0;
  for (size_t i = 0; i < run->nranks; i++) {
    if (w > 0 && run->ranks[w - 1].rank == run->ranks[i].rank) {
      ssa_run_warn(run, "%s: rank %d appears twice (files from different runs?); ignored",
                   run->ranks[i].path ? run->ranks[i].path : "?", run->ranks[i].rank);
      ssa_rank_free(&run->ranks[i]);
      continue;
    }
    if (w != i) run->ranks[w] = run->ranks[i];
    w++;
  }
  run->nranks = w;
  int world = 0;
  for (size_t i = 0; i < run->nranks; i++) {
    if (run->ranks[i].world_size > world) world = run->ranks[i].world_size;
    if (i > 0 && run->ranks[i].world_size != run->ranks[0].world_size)
      ssa_run_warn(run,
                   "rank %d says world size %d but rank %d says %d (files from different runs?)",
                   run->ranks[i].rank, run->ranks[i].world_size, run->ranks[0].rank,
                   run->ranks[0].world_size);
  }
  if (world > 0 && run->nranks < (size_t)world) {
    char list[300] = "";
    size_t j = 0, len = 0;
    /* counted from the ranks present and listed until the list is full: a
     * header may declare any world size (up to 2^31 - 1), so no loop over
     * the world */
    int missing = world, listed = 0;
    for (size_t i = 0; i < run->nranks; i++)
      if (run->ranks[i].rank >= 0 && run->ranks[i].rank < world) missing--;
    for (int r = 0; r < world && len < sizeof list - 16; r++) {
      while (j < run->nranks && run->ranks[j].rank < r)
        j++;
      if (j < run->nranks && run->ranks[j].rank == r) continue;
      listed++;
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", listed > 1 ? ", " : "", r);
    }
    if (listed == missing) len = 0; /* all listed: no ", ..." */
    if (missing)
      ssa_run_warn(run, "%d of %d ranks have no trace file (missing: %s%s)", missing, world, list,
                   len >= sizeof list - 16 ? ", ..." : "");
  }
  return 0;
}

int ssa_run_assemble(ssa_run *run, stepscope_error *err) {
  if (run->nranks > 1) /* ranks may be NULL without any (ssa_run_from_ranks) */
    qsort(run->ranks, run->nranks, sizeof *run->ranks, cmp_rank);
  check_rank_set(run);
  int rc = ssa_run_align(run);
  if (rc)
    set_err(err, rc, "%s while aligning clocks", stepscope_status_name(rc));
  else
    ssa_run_note_unclosed(run);
  return rc;
}

int ssa_run_from_ranks(ssa_run *run, ssa_rank *ranks, size_t nranks, stepscope_error *err) {
  for (size_t i = 0; i < nranks; i++) {
    int rc = ssa_rank_finish(&ranks[i]);
    if (rc) {
      set_err(err, rc, "%s while finishing the model", stepscope_status_name(rc));
      return rc;
    }
  }
  run->ranks = ranks;
  run->nranks = nranks;
  return ssa_run_assemble(run, err);
}
