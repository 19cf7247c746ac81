/*
 * cmd_dump.c — `stepscope dump FILE`: every record of one trace file as one
 * JSON line (the header first), for scripts and for eyes. Streams: memory
 * stays bounded whatever the file size. Warnings and errors go to stderr;
 * exit 1 when the file could not be read to its end.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_env.h"
#include "cli_print.h"
#include "option_table.h"
#include "ssa_import.h"
#include "stepscope.h"

typedef struct dump_args {
  const char *path, *only;
} dump_args;

/* --kind NAME: "header" or a record kind's name (stepscope_record_kind_name). */
static int opt_kind(const cli_option *o, const char *v, void *cmd) {
  int known = !strcmp(v, "header");
  for (uint32_t k = 0; k < STEPSCOPE_REC_KIND_MAX && !known; k++)
    known = stepscope_record_kind_name(k) && !strcmp(v, stepscope_record_kind_name(k));
  if (known) {
    ((dump_args *)cmd)->only = v;
    return 0;
  }
  cli_print(stderr, "stepscope dump: unknown --kind '%s'; the kinds are header", v);
  for (uint32_t k = 0; k < STEPSCOPE_REC_KIND_MAX; k++)
    if (stepscope_record_kind_name(k) && k != STEPSCOPE_REC_HEADER)
      cli_print(stderr, ", %s", stepscope_record_kind_name(k));
  fputc('\n', stderr);
  return 2;
}

static const cli_option dump_options[] = {
    {CLI_CALL, "--kind", NULL, "NAME",
     "only records of this kind (kernel, collective, host_op, ...)", 0, opt_kind, 0, 0, NULL},
};

/* "--kind" without a value is an unknown option, as it has always been. */
static const cli_table dump_table = {
    .command = "dump",
    .head = "usage: stepscope dump FILE [--kind NAME]\n"
            "\n"
            "Prints every record of a trace file as one JSON object per line, the header\n"
            "first. String ids are resolved to their text; times are integer nanoseconds of\n"
            "the file's trace clock. Field names are those of docs/trace-format.md.\n"
            "\n",
    CLI_ROWS(dump_options),
    .column = 16,
    .flags = CLI_UNKNOWN_QUOTED | CLI_MISSING_IS_UNKNOWN,
    .args = offsetof(dump_args, path),
    .nargs = 1,
    .too_many = "one FILE only"};

int cmd_dump(int argc, char **argv) {
  dump_args x = {NULL, NULL};
  int parsed = cli_parse(&dump_table, argc, argv, &x, NULL);
  if (parsed != CLI_PARSED) return parsed;
  const char *path = x.path, *only = x.only;
  cli_env env; /* the decompression limits */
  cli_env_read(&env);
  int gz = 0;
  char why[200];
  ssa_file_kind kind = ssa_classify_file(path, 1, &env.import.inflate, &gz, why, sizeof why);
  if (kind != SSA_FILE_TRACE) { /* run_discovery.c: the same judgement as every command */
    cli_print(stderr,
              "stepscope dump: %s is a %s (%s); dump reads stepscope rank traces "
              "(.trace.zst)%s\n",
              path, ssa_file_kind_name(kind), why,
              kind == SSA_FILE_KINETO ? ": `stepscope info` and `stepscope export` read it" : "");
    return 1;
  }
  stepscope_error err = {0};
  stepscope_reader_options ropt = {env.import.inflate};
  stepscope_reader *r = stepscope_reader_open_opts(path, &ropt, &err);
  if (!r) {
    cli_print(stderr, "stepscope dump: %s\n", err.message);
    return 1;
  }
  size_t cap = 1 << 16;
  char *buf = malloc(cap);
  if (!buf) {
    stepscope_reader_close(r);
    cli_print(stderr, "stepscope dump: out of memory\n");
    return 1;
  }
  if (!only || !strcmp(only, "header")) {
    size_t need = stepscope_header_to_json(stepscope_reader_header(r), buf, cap);
    if (need >= cap) {
      char *nb = realloc(buf, need + 1);
      if (nb) {
        buf = nb;
        cap = need + 1;
        stepscope_header_to_json(stepscope_reader_header(r), buf, cap);
      }
    }
    puts(buf);
  }
  stepscope_record rec;
  int rc;
  size_t warned = 0; /* reader warnings (damage skipped) are said when they happen */
  while ((rc = stepscope_reader_next(r, &rec, &err)) == 1) {
    for (; warned < stepscope_reader_warning_count(r); warned++) {
      fflush(stdout);
      cli_print(stderr, "stepscope dump: warning: %s\n", stepscope_reader_warning(r, warned));
    }
    if (rec.kind == STEPSCOPE_REC_HEADER) continue;
    if (only && strcmp(only, stepscope_record_kind_name(rec.kind))) continue;
    size_t need = stepscope_record_to_json(&rec, r, buf, cap);
    if (need >= cap) {
      char *nb = realloc(buf, need + 1);
      if (!nb) {
        cli_print(stderr, "stepscope dump: out of memory\n");
        rc = -1;
        break;
      }
      buf = nb;
      cap = need + 1;
      stepscope_record_to_json(&rec, r, buf, cap);
    }
    if (fputs(buf, stdout) == EOF || fputc('\n', stdout) == EOF) break; /* e.g. closed pipe */
  }
  for (; warned < stepscope_reader_warning_count(r); warned++)
    cli_print(stderr, "stepscope dump: warning: %s\n", stepscope_reader_warning(r, warned));
  if (rc < 0 && err.code) cli_print(stderr, "stepscope dump: %s\n", err.message);
  free(buf);
  stepscope_reader_close(r);
  return rc < 0 ? 1 : 0;
}
