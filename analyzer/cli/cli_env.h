/*
 * cli_env.h — the library's switches for tests and measurements, and its
 * decompression limits, read from the environment in this one place
 * (cli_env.c). The analysis library never
 * reads the environment: each command passes these on (the importer's to
 * ssa_run_load_import or ssa_kineto_source_load_opts, the Perfetto export's
 * to ssa_export_perfetto_opts). The C API (analyzer/api) reads them through this same
 * function, so that a binding in the user's process behaves as the command does.
 */
#ifndef CLI_ENV_H
#define CLI_ENV_H

#include "ssa_export.h"
#include "ssa_import.h"

typedef struct cli_env {
  ssa_import_options import;     /* STEPSCOPE_KINETO_FAST, _FAST_TRACE, _GZIP, _SPLIT,
                                    _SPLIT_AT, _SPLIT_TRACE; STEPSCOPE_INFLATE_RATIO and
                                    _MAX (import.inflate, for every compressed input) */
  ssa_perfetto_options perfetto; /* STEPSCOPE_PFTRACE_INTERN_LIMIT */
  int say_reads;                 /* STEPSCOPE_SAY_READS: the rank files read again, on stderr */
} cli_env;

/* Fills *e from the environment; unset variables give the defaults. */
void cli_env_read(cli_env *e);

#endif
