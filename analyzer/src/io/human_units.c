/*
 * human_units.c — numbers as the text reports print them: a duration in the largest unit
 * that keeps it above one ("12.345 ms", "4.1 us", "731 ns"), one rule for `analyze`,
 * `diff` and its markdown; a size in bytes the same way ("1.5 GiB", "12.0 MiB").
 */
#include <math.h>
#include <stdio.h>

#include "ssa_io.h"

const char *ssa_fmt_time(char *buf, size_t n, double ns) {
  double a = fabs(ns);
  if (a >= 1e9)
    snprintf(buf, n, "%.3f s", ns / 1e9);
  else if (a >= 1e6)
    snprintf(buf, n, "%.3f ms", ns / 1e6);
  else if (a >= 1e3)
    snprintf(buf, n, "%.1f us", ns / 1e3);
  else
    snprintf(buf, n, "%.0f ns", ns);
  return buf;
}

const char *ssa_fmt_bytes(char *buf, size_t n, uint64_t b) {
  if (b >= 1ull << 30)
    snprintf(buf, n, "%.1f GiB", (double)b / (double)(1ull << 30));
  else if (b >= 1ull << 20)
    snprintf(buf, n, "%.1f MiB", (double)b / (double)(1ull << 20));
  else
    snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
  return buf;
}
