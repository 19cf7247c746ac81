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
 */
#include "cli_env.h"

#include <stdlib.h>
#include <string.h>

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
}
