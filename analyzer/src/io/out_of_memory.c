/*
 * out_of_memory.c — the one message every command gives when memory runs out: what could not
 * be allocated, how big the run is, and what to do (fewer ranks, or more memory). The whole
 * run is held in memory (about 40-50 bytes per event), so the size says whether the run can
 * fit at all.
 */
#include <stdio.h>

#include "ssa_io.h"

static const char *fmt_bytes(char *buf, size_t n, uint64_t b) {
  if (b >= 1ull << 30)
    snprintf(buf, n, "%.1f GiB", (double)b / (double)(1ull << 30));
  else if (b >= 1ull << 20)
    snprintf(buf, n, "%.1f MiB", (double)b / (double)(1ull << 20));
  else
    snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
  return buf;
}

void ssa_out_of_memory_message(char *buf, size_t n, const char *what, size_t nranks,
                               uint64_t events, uint64_t file_bytes) {
  char size[96] = "", b1[32];
  if (events)
    snprintf(size, sizeof size, ", %llu events", (unsigned long long)events);
  else if (file_bytes)
    snprintf(size, sizeof size, ", %s of trace files", fmt_bytes(b1, sizeof b1, file_bytes));
  snprintf(buf, n,
           "out of memory %s (the run: %zu rank%s%s; the analysis holds the whole run in memory, "
           "about 50 bytes per event): analyse fewer ranks (a directory holding the rank files "
           "of a subset) or give it more memory",
           what, nranks, nranks == 1 ? "" : "s", size);
}
