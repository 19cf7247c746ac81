/*
 * rank_reload.h — the bounded analysis's way to a rank's events (rank_reload.c): reads a
 * rank's file again for one per-rank pass and drops its events after it.
 */
#ifndef SSA_RANK_RELOAD_H
#define SSA_RANK_RELOAD_H

#include <stdatomic.h>

#include "ssa_import.h"
#include "ssa_metrics.h"

/* The bounded analysis's way to a rank's events (rank_reload.c): ssa_options.rank_events
 * over a loaded run whose ranks' events were dropped; `load` puts a reread rank in the run
 * in place of its shell, `drop` puts the shell back. The run and `import` must outlive it. */
typedef struct ssa_run_rereader {
  ssa_run *run;
  const ssa_import_options *import;
  ssa_rank *shells; /* per rank index: the shell while its events are loaded */
  ssa_rank_events events;
  char *const *read_paths; /* NULL, or per file index the path to read (a merge of partials) */
  atomic_int failed;       /* a rank could not be read again (or its file changed): ... */
  char error[600];         /* ... the first such failure's words (its file, what happened) */
  atomic_ulong reads[SSA_READ_N]; /* ranks read again, by purpose (SSA_READ_*) */
} ssa_run_rereader;
/* "N rank files read again: K for <purpose>, ..." (the purposes with reads) into out[cap]. */
void ssa_run_rereader_say_reads(const ssa_run_rereader *x, char *out, size_t cap);
int ssa_run_rereader_init(ssa_run_rereader *x, ssa_run *run, const ssa_import_options *import);
void ssa_run_rereader_free(ssa_run_rereader *x);

#endif
