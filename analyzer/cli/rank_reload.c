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
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rank_reload.h"

/* Keeps the words of the run's first failure to read a rank again (passes run in parallel). */
static void keep_error(ssa_run_rereader *x, const char *message) {
  if (!atomic_exchange(&x->failed, 1)) snprintf(x->error, sizeof x->error, "%s", message);
}

static int load_events(void *ctx, size_t i, int purpose) {
  ssa_run_rereader *x = ctx;
  ssa_rank *r = &x->run->ranks[i];
  ssa_rank full, shell = *r;
  if (x->read_paths) shell.path = x->read_paths[r->file_index]; /* a merge: read it there */
  const char *why = purpose >= 0 && purpose < SSA_READ_N ? ssa_read_purpose_names[purpose] : "?";
  if (x->read_paths && access(shell.path, R_OK) != 0) { /* a merge of partials */
    char message[sizeof x->error];
    snprintf(message, sizeof message,
             "rank file %s (rank %d) cannot be read (%s): the merge needs its events for %s "
             "(docs/scale.md \"What the merge still reads\"); put it where its partial found it",
             shell.path, r->rank, strerror(errno), why);
    keep_error(x, message);
    return STEPSCOPE_E_IO;
  }
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
  if (purpose >= 0 && purpose < SSA_READ_N) /* counted once read: a failed read is no read */
    atomic_fetch_add(&x->reads[purpose], 1);
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

void ssa_run_rereader_say_reads(const ssa_run_rereader *x, char *out, size_t cap) {
  unsigned long total = 0;
  for (int p = 0; p < SSA_READ_N; p++)
    total += atomic_load(&x->reads[p]);
  int len = snprintf(out, cap, "%lu rank file%s read again", total, total == 1 ? "" : "s");
  const char *sep = ": ";
  for (int p = 0; p < SSA_READ_N && len >= 0 && (size_t)len < cap; p++) {
    unsigned long n = atomic_load(&x->reads[p]);
    if (!n) continue;
    len +=
        snprintf(out + len, cap - (size_t)len, "%s%lu for %s", sep, n, ssa_read_purpose_names[p]);
    sep = ", ";
  }
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
