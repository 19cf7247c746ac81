/*
 * run_losses.c — the line every command prints first when a rank's file
 * was damaged and the reader skipped parts of it: which rank, how many
 * regions, how many bytes of the file. The reader's own warnings (with
 * offsets) follow in the warnings of each output; this line makes sure the
 * loss is the first thing a user sees, not the last.
 */
#include <stdio.h>

#include "ssa_model.h"

size_t ssa_run_print_losses(const ssa_run *run, FILE *f, const char *prefix) {
  size_t n = 0;
  for (size_t i = 0; i < run->nranks; i++) {
    const ssa_rank *r = &run->ranks[i];
    if (!r->damaged_regions) continue;
    n++;
    fprintf(f,
            "%sDATA LOST: rank %d: %llu damaged part%s of its trace skipped (%llu of %llu bytes, "
            "%.1f %%); their records are missing from what follows\n",
            prefix, r->rank, (unsigned long long)r->damaged_regions,
            r->damaged_regions == 1 ? "" : "s", (unsigned long long)r->damaged_bytes,
            (unsigned long long)r->file_bytes,
            r->file_bytes ? 100.0 * (double)r->damaged_bytes / (double)r->file_bytes : 0.0);
  }
  return n;
}
