/*
 * inflate_limit.c — how much a compressed input may inflate to, and the error when it
 * inflates past that (stepscope.h, "Decompression limits"): one rule and one message for
 * the trace reader and for the analyzer's gzip readers.
 */
#include <inttypes.h>
#include <stdio.h>

#include "error.h"
#include "stepscope.h"

static uint64_t ratio_of(const stepscope_inflate_limits *l) {
  return l && l->ratio ? l->ratio : STEPSCOPE_INFLATE_RATIO_DEFAULT;
}

static uint64_t ceiling_of(const stepscope_inflate_limits *l) {
  return l && l->max_bytes ? l->max_bytes : STEPSCOPE_INFLATE_MAX_DEFAULT;
}

/* ratio x compressed, at least the floor (saturating). */
static uint64_t by_ratio(uint64_t ratio, uint64_t compressed) {
  uint64_t n =
      ratio == STEPSCOPE_INFLATE_UNLIMITED || (compressed && ratio > UINT64_MAX / compressed)
          ? UINT64_MAX
          : ratio * compressed;
  return n < STEPSCOPE_INFLATE_FLOOR ? STEPSCOPE_INFLATE_FLOOR : n;
}

uint64_t stepscope_inflate_limit(const stepscope_inflate_limits *limits, uint64_t compressed) {
  uint64_t r = by_ratio(ratio_of(limits), compressed), c = ceiling_of(limits);
  return r < c ? r : c;
}

/* "12.0 MiB" */
static const char *human(char *buf, size_t n, uint64_t bytes) {
  static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, n, "%" PRIu64 " bytes", bytes);
  else
    snprintf(buf, n, "%.1f %s", v, unit[u]);
  return buf;
}

void stepscope_inflate_limit_error(stepscope_error *err, const char *path,
                                   const stepscope_inflate_limits *limits, uint64_t compressed) {
  uint64_t ratio = ratio_of(limits), ceiling = ceiling_of(limits);
  char lim[32], size[32];
  human(size, sizeof size, compressed);
  if (by_ratio(ratio, compressed) <= ceiling) {
    human(lim, sizeof lim, by_ratio(ratio, compressed));
    error_set(err, STEPSCOPE_E_LIMIT, 0,
              "%s: decompresses to more than %s, the limit for %s of compressed data (%" PRIu64
              " times its size, at least %u MiB): a decompression bomb? If it is a real trace, "
              "raise the ratio with STEPSCOPE_INFLATE_RATIO=N (0: no limit)",
              path, lim, size, ratio, (unsigned)(STEPSCOPE_INFLATE_FLOOR >> 20));
  } else {
    human(lim, sizeof lim, ceiling);
    error_set(err, STEPSCOPE_E_LIMIT, 0,
              "%s: decompresses to more than %s from %s (the ceiling for any compressed "
              "input): a decompression bomb? If it is a real trace, raise the ceiling with "
              "STEPSCOPE_INFLATE_MAX=BYTES, K, M, G or T (0: no limit)",
              path, lim, size);
  }
}
