/*
 * cli_env.c — see cli_env.h: the one place the `stepscope` command reads the
 * environment variables that switch how the library works (for tests and
 * measurements; the results never depend on them), with the meaning they
 * had when the library read them itself:
 *
 *   STEPSCOPE_KINETO_FAST=off         every Kineto event read token by token
 *   STEPSCOPE_KINETO_FAST_TRACE (set) how many events each import read which way
 *   STEPSCOPE_KINETO_GZIP=whole|pipe|stream (else auto)
 *   STEPSCOPE_KINETO_SPLIT=on|off     (else automatic)
 *   STEPSCOPE_KINETO_SPLIT_AT=F       the split point, taken when 0 < F < 1
 *   STEPSCOPE_KINETO_SPLIT_TRACE (set) what each split did
 *   STEPSCOPE_PFTRACE_INTERN_LIMIT=N  taken when N >= 32
 *   STEPSCOPE_SAY_READS (set)         the bounded mode and merge say on stderr how many rank
 *                                     files they read again, and for what
 *
 * and, unlike those switches, the two limits on decompression (stepscope.h,
 * "Decompression limits"), which decide whether a compressed input inflating
 * past them is read at all:
 *
 *   STEPSCOPE_INFLATE_RATIO=N         inflated bytes per compressed byte (default 100;
 *                                     0: no ratio limit)
 *   STEPSCOPE_INFLATE_MAX=BYTES       the ceiling in all, bytes or with K, M, G or T
 *                                     (binary; default 32G; 0: no ceiling)
 *
 * A value that is not a number is ignored with a warning on stderr.
 */
#include "cli_env.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The limit the variable `name` gives (0: not set or not a number, the default;
 * STEPSCOPE_INFLATE_UNLIMITED for "0"); with `units`, a K/M/G/T suffix multiplies. */
static uint64_t inflate_limit_from_env(const char *name, int units) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  int shift = 0;
  if (units && *end && !end[1]) {
    const char *at = strchr("KMGT", toupper((unsigned char)*end));
    if (at) {
      shift = 10 * (int)(at - "KMGT" + 1);
      end++;
    }
  }
  if (errno || end == v || *end || *v == '-' || (shift && n > (UINT64_MAX >> shift))) {
    fprintf(stderr, "stepscope: warning: %s=%.40s is not %s; the default is used\n", name, v,
            units ? "a byte count (digits, optionally followed by K, M, G or T)" : "a number");
    return 0;
  }
  return n == 0 ? STEPSCOPE_INFLATE_UNLIMITED : (uint64_t)n << shift;
}

void cli_env_read(cli_env *e) {
  memset(e, 0, sizeof *e);
  ssa_import_options *o = &e->import;
  const char *v = getenv("STEPSCOPE_KINETO_FAST");
  o->fast_off = v && !strcmp(v, "off");
  o->fast_trace = getenv("STEPSCOPE_KINETO_FAST_TRACE") != NULL;
  v = getenv("STEPSCOPE_KINETO_GZIP");
  o->gzip = !v                     ? SSA_GZIP_AUTO
            : !strcmp(v, "whole")  ? SSA_GZIP_WHOLE
            : !strcmp(v, "pipe")   ? SSA_GZIP_PIPE
            : !strcmp(v, "stream") ? SSA_GZIP_STREAM
                                   : SSA_GZIP_AUTO;
  v = getenv("STEPSCOPE_KINETO_SPLIT");
  o->split = v && !strcmp(v, "on")    ? SSA_SPLIT_ON
             : v && !strcmp(v, "off") ? SSA_SPLIT_OFF
                                      : SSA_SPLIT_AUTO;
  v = getenv("STEPSCOPE_KINETO_SPLIT_AT");
  o->split_at = v ? atof(v) : 0.0;
  o->split_trace = getenv("STEPSCOPE_KINETO_SPLIT_TRACE") != NULL;
  v = getenv("STEPSCOPE_PFTRACE_INTERN_LIMIT");
  e->perfetto.intern_limit = v ? atoi(v) : 0;
  e->say_reads = getenv("STEPSCOPE_SAY_READS") != NULL;
  o->inflate.ratio = inflate_limit_from_env("STEPSCOPE_INFLATE_RATIO", 0);
  o->inflate.max_bytes = inflate_limit_from_env("STEPSCOPE_INFLATE_MAX", 1);
}
