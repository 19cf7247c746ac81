/*
 * out_of_memory.c — the one message every command gives when memory runs out: what could not
 * be allocated, how big the run is, and what to do (fewer ranks, or more memory). The whole
 * run is held in memory (about 40-50 bytes per event), so the size says whether the run can
 * fit at all.
 */
#include <stdio.h>

#include "ssa_io.h"

void ssa_out_of_memory_message(char *buf, size_t n, const char *what, size_t nranks,
                               uint64_t events, uint64_t file_bytes) {
  char size[96] = "", b1[32];
  if (events)
    snprintf(size, sizeof size, ", %llu events", (unsigned long long)events);
  else if (file_bytes)
    snprintf(size, sizeof size, ", %s of trace files", ssa_fmt_bytes(b1, sizeof b1, file_bytes));
  snprintf(buf, n,
           "out of memory %s (the run: %zu rank%s%s; the analysis holds the whole run in memory, "
           "about 50 bytes per event): analyse fewer ranks (a directory holding the rank files "
           "of a subset) or give it more memory",
           what, nranks, nranks == 1 ? "" : "s", size);
}
