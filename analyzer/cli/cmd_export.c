/*
 * cmd_export.c — `stepscope export RUN -o FILE [--format json|perfetto]
 * [--rank R] [--steps A:B] [--step-range NAME] [--comm-kernel RE]
 * [--compute-kernel RE]`: writes the Chrome-trace JSON of SPEC §5
 * (docs/metrics.md for the derived tracks), gzip-compressed when the name
 * ends in .gz, or a native Perfetto protobuf trace when the name ends in
 * .pftrace (or --format perfetto). Streams: the document is never held in
 * memory. Exit codes: 0 ok, 1 failure, 2 usage error.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ssa_metrics.h"
#include "option_table.h"
#include "ssa_report.h"
#include "ssa_import.h"
#include "cli_env.h"
#include "ssa_export.h"

typedef struct export_args {
  ssa_options opt;
  const char *run_path, *out_path, *format;
} export_args;

static int opt_format(const cli_option *o, const char *v, void *cmd) {
  if (strcmp(v, "json") && strcmp(v, "perfetto")) {
    fprintf(stderr, "stepscope export: --format must be json or perfetto, not %s\n", v);
    return 2;
  }
  ((export_args *)cmd)->format = v;
  return 0;
}

static int opt_rank(const cli_option *o, const char *v, void *cmd) {
  return cli_apply_rank_option("export", v, &((export_args *)cmd)->opt) ? 2 : 0;
}

static int argument(void *cmd, const char *a) {
  export_args *x = cmd;
  if (x->run_path) {
    fprintf(stderr, "stepscope export: unexpected argument %s\n", a);
    return 2;
  }
  x->run_path = a;
  return 0;
}

static void usage(FILE *f);

#define A(f) offsetof(export_args, f)
static const cli_option export_options[] = {
    {CLI_TEXT, NULL, NULL, NULL, "usage: stepscope export RUN -o FILE [options]\n", 0, NULL, 0, 0,
     NULL},
    {CLI_STRING, "--output", "-o", "FILE", "trace.json, trace.json.gz (gzip), or trace.pftrace",
     A(out_path), NULL, 0, 0, NULL},
    {CLI_CALL, "--format", NULL, "F",
     "json or perfetto (default: perfetto for *.pftrace,\njson otherwise)", 0, opt_format, 0, 0,
     NULL},
    {CLI_CALL, "--rank", NULL, "R", "only rank R", 0, opt_rank, 0, 0, NULL},
    {CLI_ANALYSIS, NULL, NULL, NULL, NULL, A(opt), NULL, 0, 0, NULL},
    {CLI_TEXT, NULL, NULL, NULL,
     "Open either file at https://ui.perfetto.dev; the bundled viewer (`stepscope\n"
     "view`) reads the JSON. A .pftrace is 5-6x smaller than the JSON (Perfetto\n"
     "gives up on JSON near 1-2 GB): use it for large runs.\n",
     0, NULL, 0, 0, NULL},
};

static const cli_table export_table = {"export",
                                       export_options,
                                       sizeof export_options / sizeof export_options[0],
                                       22,
                                       CLI_ARGS_DASH_ALONE | CLI_VALUE_FIRST,
                                       usage,
                                       argument,
                                       NULL};

static void usage(FILE *f) {
  cli_print_options(f, &export_table);
}

int cmd_export(int argc, char **argv) {
  export_args x;
  memset(&x, 0, sizeof x);
  ssa_options_default(&x.opt);
  int parsed = cli_parse(&export_table, argc, argv, &x, NULL);
  if (parsed != CLI_PARSED) return parsed;
  ssa_options opt = x.opt;
  const char *run_path = x.run_path, *out_path = x.out_path, *format = x.format;
  if (!run_path || !out_path) {
    usage(stderr);
    return 2;
  }
  size_t on = strlen(out_path);
  int perfetto =
      format ? !strcmp(format, "perfetto") : on >= 8 && !strcmp(out_path + on - 8, ".pftrace");
  int tty = isatty(2);
  if (cli_finish_analysis_options("export", &opt)) return 2;
  ssa_load_options lo = {opt.threads, tty};
  ssa_run run;
  stepscope_error err;
  memset(&err, 0, sizeof err);
  cli_env env;
  cli_env_read(&env);
  if (ssa_run_load_import(&run, run_path, &lo, opt.comm_rules, &env.import, &err)) {
    fprintf(stderr, "stepscope export: %s\n", err.message);
    ssa_run_free(&run);
    return 1;
  }
  /* what was lost to damage comes first, never in silence */
  ssa_run_print_losses(&run, stderr, "stepscope export: ");
  for (size_t i = 0; i < run.nwarnings; i++) { /* skipped ranks, missing ranks */
    char safe[1024];
    fprintf(stderr, "stepscope export: warning: %s\n",
            ssa_text_safe(run.warnings[i], safe, sizeof safe));
  }
  ssa_analysis an;
  if (ssa_analyze(&run, &opt, &an, &err)) {
    fprintf(stderr, "stepscope export: %s\n", err.message);
    ssa_analysis_free(&an);
    ssa_run_free(&run);
    return opt.rank >= 0 && !ssa_run_has_rank(&run, opt.rank) ? 2 : 1;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (tty) fprintf(stderr, "writing %s ...\n", out_path);
  ssa_export_stats st;
  memset(&st, 0, sizeof st);
  int rc = perfetto ? ssa_export_perfetto_opts(&an, out_path, &env.perfetto, &st, &err)
                    : ssa_export_chrome(&an, out_path, &st, &err);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (rc)
    fprintf(stderr, "stepscope export: %s\n", err.message);
  else if (tty) {
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (perfetto)
      fprintf(stderr, "wrote %llu slices in %llu packets, %.1f MB of protobuf in %.2f s\n",
              (unsigned long long)st.slices, (unsigned long long)st.events, (double)st.bytes / 1e6,
              s);
    else
      fprintf(stderr, "wrote %llu events, %.1f MB of JSON in %.2f s\n",
              (unsigned long long)st.events, (double)st.bytes / 1e6, s);
  }
  ssa_analysis_free(&an);
  ssa_run_free(&run);
  return rc ? 1 : 0;
}
