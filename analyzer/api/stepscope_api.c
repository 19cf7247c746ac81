/*
 * stepscope_api.c — the stable C API of libstepscope_analyzer.so
 * (stepscope_api.h): a thin layer over the analyzer library, like the
 * `stepscope` command, that returns what the command would print instead of
 * printing it.
 *
 * Options are parsed by the library's parser (analyzer/src/metrics/
 * analysis_options.c, the one `stepscope` uses), which returns its messages
 * instead of printing them; each call keeps its own classification rules.
 * JSON reports are written by the same writers as the command
 * (report_json.c, diff_report.c) into a memory stream (open_memstream).
 * The op table is built here: every rank's ops with their names re-interned
 * into one string table for the run, and their step found as steps.c
 * defines membership (the step range containing the launch call's start).
 */
#include "stepscope_api.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis_options.h"
#include "ssa_diff.h"
#include "ssa_metrics.h"
#include "ssa_op_report.h"
#include "ssa_replay_report.h"
#include "ssa_report.h"
#include "ssa_import.h"
#include "cli_load.h"
#include "cli_output.h"
#include "api_internal.h"

/* ---- errors ---- */

static char *dup_message(const char *s) {
  size_t n = strlen(s);
  char *p = malloc(n + 1);
  if (p) memcpy(p, s, n + 1);
  return p;
}

API_INTERNAL int api_fail(char **err_out, int code, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (err_out) *err_out = dup_message(buf);
  return code;
}

/* ---- options ---- */

API_INTERNAL void api_options_free(api_options *ao) {
  ssa_comm_rules_free(&ao->rules);
  memset(&ao->rules, 0, sizeof ao->rules);
  ao->opt.comm_rules = NULL;
}

/* Whether `a` is an option of this call (the analysis options and those `allow` adds). */
static int known_option(const char *a, unsigned allow) {
  for (size_t i = 0; i < ssa_analysis_option_count; i++)
    if (!strcmp(a, ssa_analysis_option_docs[i].name)) return 1;
  return ((allow & ALLOW_RANK) && !strcmp(a, "--rank")) ||
         ((allow & ALLOW_TOP) && !strcmp(a, "--top")) ||
         ((allow & ALLOW_STEPS_B) && !strcmp(a, "--steps-b")) ||
         ((allow & ALLOW_REPEATS) && (!strcmp(a, "--repeat-a") || !strcmp(a, "--repeat-b"))) ||
         ((allow & ALLOW_LOW_MEMORY) && !strcmp(a, "--low-memory"));
}

/* Parses argv like the command's loop does: 0, or 2 with the message in why.
 * `command` names the command in messages ("analyze", "diff", "ops"). */
static int parse_argv(const char *command, int argc, const char *const *argv, unsigned allow,
                      api_options *ao, char *why, size_t why_n) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!a || a[0] != '-' || a[1] != '-') {
      snprintf(why, why_n, "stepscope %s: unexpected argument %s", command, a ? a : "(null)");
      return 2;
    }
    if ((allow & ALLOW_LOW_MEMORY) && !strcmp(a, "--low-memory")) { /* a flag */
      ao->low_memory = 1;
      continue;
    }
    if (!v) { /* an unknown option last on the line is unknown, not short of a value */
      snprintf(why, why_n,
               known_option(a, allow) ? "stepscope %s: %s needs a value"
                                      : "stepscope %s: unknown option %s",
               command, a);
      return 2;
    }
    i++;
    int applied = ssa_apply_analysis_option(command, a, v, &ao->opt, &ao->rules, why, why_n);
    if (applied < 0) return 2;
    if (applied) continue;
    char *end;
    if ((allow & ALLOW_RANK) && !strcmp(a, "--rank")) {
      if (ssa_apply_rank_option(command, v, &ao->opt, why, why_n)) return 2;
    } else if ((allow & ALLOW_TOP) && !strcmp(a, "--top")) {
      long n = strtol(v, &end, 10);
      if (*end || end == v || n <= 0 || n > 1000000) {
        snprintf(why, why_n, "stepscope %s: bad --top '%s' (want 1..1000000)", command, v);
        return 2;
      }
      ao->opt.top_n = (int)n;
    } else if ((allow & ALLOW_STEPS_B) && !strcmp(a, "--steps-b")) {
      if (ssa_parse_steps(v, &ao->b_first, &ao->b_last)) {
        snprintf(why, why_n, "stepscope %s: bad --steps-b '%s' (want A:B)", command, v);
        return 2;
      }
      ao->has_b_steps = 1;
    } else if ((allow & ALLOW_REPEATS) && (!strcmp(a, "--repeat-a") || !strcmp(a, "--repeat-b"))) {
      int side = a[9] == 'b';
      if (ao->nrep[side] + 1 >= SSA_DIFF_MAX_RUNS) {
        snprintf(why, why_n, "stepscope %s: at most %d runs per side (%s)", command,
                 SSA_DIFF_MAX_RUNS, a);
        return 2;
      }
      ao->repeats[side][1 + ao->nrep[side]++] = v;
    } else if ((allow & ALLOW_RUN_NOISE) && !strcmp(a, "--run-noise")) {
      char err[160];
      if (ssa_diff_parse_run_noise(v, &ao->run_noise, err, sizeof err)) {
        snprintf(why, why_n, "stepscope %s: %s", command, err);
        return 2;
      }
    } else {
      snprintf(why, why_n, "stepscope %s: unknown option %s", command, a);
      return 2;
    }
  }
  return 0;
}

API_INTERNAL int api_parse_options(const char *command, int argc, const char *const *argv,
                                   unsigned allow, api_options *ao, char **err_out) {
  memset(ao, 0, sizeof *ao);
  ao->run_noise = NAN;
  ssa_options_default(&ao->opt);
  if (argc < 0 || (argc > 0 && !argv))
    return api_fail(err_out, 2, "stepscope %s: bad argument list", command);
  char why[1024] = "";
  int rc = parse_argv(command, argc, argv, allow, ao, why, sizeof why);
  /* then the environment's rules, as the command does after its command line */
  if (!rc && ssa_finish_analysis_options(command, &ao->opt, &ao->rules, why, sizeof why)) rc = 2;
  if (rc && err_out) *err_out = dup_message(why[0] ? why : "bad option");
  if (rc) api_options_free(ao);
  return rc;
}

/* ---- loading and analysing ---- */

/* The command's loading and analysis (cli_load.c), with its message handed back. */
static int load_run(const char *command, const char *path, const ssa_options *opt, ssa_run *run,
                    char **err_out) {
  memset(run, 0, sizeof *run);
  if (!path || !*path) return api_fail(err_out, 2, "stepscope %s: no run given", command);
  char msg[1024];
  int rc = cli_load_run(command, path, opt, 0, run, msg, sizeof msg);
  if (!rc) return 0;
  ssa_run_free(run);
  memset(run, 0, sizeof *run);
  return api_fail(err_out, rc, "%s", msg);
}

static int analyse_run(const char *command, const char *path, const ssa_run *run,
                       const ssa_options *opt, ssa_analysis *an, char **err_out) {
  char msg[1024];
  int rc = cli_analyse_run(command, path, opt, run, an, msg, sizeof msg);
  if (!rc) return 0;
  ssa_analysis_free(an);
  return api_fail(err_out, rc, "%s", msg);
}

/* ---- JSON into memory ---- */

API_INTERNAL int api_write_report(const void *an, ssa_out *o) {
  return ssa_report_json(an, o);
}
/* One of the `ops` writers of ssa_op_report.h and its report, as one argument of
 * json_to_memory. */
typedef struct ops_json {
  void (*write)(const void *report, ssa_out *o);
  const void *report;
} ops_json;
static int write_ops_json(const void *j, ssa_out *o) {
  const ops_json *x = j;
  x->write(x->report, o); /* its errors stick in o */
  return 0;
}
static int write_replay(const void *r, ssa_out *o) {
  ssa_replay_report_json(r, o);
  return 0;
}
static int write_diff(const void *d, ssa_out *o) {
  return ssa_diff_report_json(d, o);
}

API_INTERNAL int api_json_to_memory(const char *command, cli_write_fn w, const void *what,
                                    char **json_out, char **err_out) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) return api_fail(err_out, 1, "stepscope %s: out of memory", command);
  ssa_out o;
  int rc = ssa_out_open_file(&o, mem);
  if (!rc) {
    w(what, &o);
    rc = ssa_out_close(&o);
  }
  if (fclose(mem) || rc) {
    free(text);
    return api_fail(err_out, 1, "stepscope %s: could not write the JSON in memory", command);
  }
  /* `--json -` ends the document with a newline: kept, for byte equality */
  *json_out = text;
  return 0;
}

/* ---- the API ---- */

API_EXPORT int ss_api_version(void) {
  return SS_API_VERSION;
}

API_EXPORT void ss_api_free(void *p) {
  free(p);
}

/* How a call that hands back JSON begins: no error yet, a place for the JSON (the `what` of
 * the message when there is none), the options parsed into *ao. 0, or the status. */
API_INTERNAL int api_begin_json_call(const char *command, const char *what, char **json_out,
                                     char **err_out, int argc, const char *const *argv,
                                     unsigned allow, api_options *ao) {
  if (err_out) *err_out = NULL;
  if (!json_out) return api_fail(err_out, 2, "stepscope %s: no place for the %s", command, what);
  *json_out = NULL;
  return api_parse_options(command, argc, argv, allow, ao, err_out);
}

API_EXPORT int ss_api_analyze(const char *run_path, int argc, const char *const *argv,
                              char **json_out, char **err_out) {
  api_options ao;
  int rc = api_begin_json_call("analyze", "report", json_out, err_out, argc, argv,
                               ALLOW_RANK | ALLOW_TOP | ALLOW_LOW_MEMORY, &ao);
  if (rc) return rc;
  /* loaded and analysed as the command does: the PyTorch ops' shapes kept (MFU from op
   * FLOPs), in bounded memory with --low-memory */
  cli_loaded l;
  char msg[1024];
  unsigned say = CLI_OP_INPUTS | (ao.low_memory ? CLI_LOW_MEMORY : 0u);
  if (!run_path || !*run_path) {
    rc = api_fail(err_out, 2, "stepscope analyze: no run given");
  } else {
    int failed = cli_open_run_quiet("analyze", run_path, &ao.opt, say, &l, msg, sizeof msg);
    rc = failed ? api_fail(err_out, failed, "%s", msg)
                : api_json_to_memory("analyze", api_write_report, &l.an, json_out, err_out);
    cli_loaded_free(&l);
  }
  api_options_free(&ao);
  return rc;
}

/* How every `ops` call begins: the options parsed, the run loaded with its ops' input args
 * and what `more` adds (cli_load_run_with_inputs) and analysed. 0, or the status with
 * everything freed; else free with end_ops_call. */
static int begin_ops_call(const char *run_path, int argc, const char *const *argv, unsigned more,
                          char **json_out, char **err_out, api_options *ao, ssa_run *run,
                          ssa_analysis *an) {
  int rc = api_begin_json_call("ops", "op table", json_out, err_out, argc, argv,
                               ALLOW_RANK | ALLOW_TOP, ao);
  if (rc) return rc;
  memset(run, 0, sizeof *run);
  char msg[1024];
  if (!run_path || !*run_path)
    rc = api_fail(err_out, 2, "stepscope ops: no run given");
  else if (cli_load_run_with_inputs("ops", run_path, &ao->opt, more, run, msg, sizeof msg))
    rc = api_fail(err_out, 1, "%s", msg);
  if (!rc) rc = analyse_run("ops", NULL, run, &ao->opt, an, err_out);
  if (rc) {
    ssa_run_free(run);
    api_options_free(ao);
  }
  return rc;
}

static void end_ops_call(api_options *ao, ssa_run *run, ssa_analysis *an) {
  ssa_analysis_free(an);
  ssa_run_free(run);
  api_options_free(ao);
}

API_EXPORT int ss_api_op_perf(const char *run_path, int argc, const char *const *argv,
                              const char *peak, char **json_out, char **err_out) {
  api_options ao;
  ssa_run run;
  ssa_analysis an;
  int rc = begin_ops_call(run_path, argc, argv, 0u, json_out, err_out, &ao, &run, &an);
  if (rc) return rc;
  ssa_op_table t;
  ssa_ceilings c;
  char msg[1024];
  if (ssa_op_table_build(&an, &t)) {
    rc = api_fail(err_out, 1, "stepscope ops: out of memory");
  } else {
    ssa_ceilings_of_device(t.device_name, &c);
    if (peak && ssa_ceilings_parse(peak, &c, msg, sizeof msg)) {
      rc = api_fail(err_out, 2, "stepscope ops: %s", msg);
    } else {
      ssa_op_report rep = {run_path, &t, &c, 0};
      rc = api_json_to_memory("ops", write_ops_json, &(ops_json){ssa_op_report_json, &rep},
                              json_out, err_out);
    }
    ssa_op_table_free(&t);
  }
  end_ops_call(&ao, &run, &an);
  return rc;
}

/* The module tree (memory 0) or the memory timeline (1; series: with --series) of `ops --by
 * module` / `ops --memory`. */
static int other_ops_table(const char *run_path, int argc, const char *const *argv, int memory,
                           int series, char **json_out, char **err_out) {
  api_options ao;
  ssa_run run;
  ssa_analysis an;
  int rc = begin_ops_call(run_path, argc, argv, memory ? CLI_OP_MEMORY : CLI_OP_MODULES, json_out,
                          err_out, &ao, &run, &an);
  if (rc) return rc;
  ssa_module_table mods;
  ssa_mem_table mem;
  if (memory ? ssa_mem_table_build(&an, &mem) : ssa_module_table_build(&an, &mods)) {
    rc = api_fail(err_out, 1, "stepscope ops: out of memory");
  } else if (memory) {
    ssa_mem_report rep = {run_path, &run, &mem, series};
    rc = api_json_to_memory("ops", write_ops_json, &(ops_json){ssa_mem_report_json, &rep}, json_out,
                            err_out);
    ssa_mem_table_free(&mem);
  } else {
    ssa_module_report rep = {run_path, &mods};
    rc = api_json_to_memory("ops", write_ops_json, &(ops_json){ssa_module_report_json, &rep},
                            json_out, err_out);
    ssa_module_table_free(&mods);
  }
  end_ops_call(&ao, &run, &an);
  return rc;
}

API_EXPORT int ss_api_op_modules(const char *run_path, int argc, const char *const *argv,
                                 char **json_out, char **err_out) {
  return other_ops_table(run_path, argc, argv, 0, 0, json_out, err_out);
}

API_EXPORT int ss_api_op_memory(const char *run_path, int argc, const char *const *argv, int series,
                                char **json_out, char **err_out) {
  return other_ops_table(run_path, argc, argv, 1, series != 0, json_out, err_out);
}

/* The plain replay and, with edits, the edited one of an analysed run, as JSON. */
static int replay_json(const char *run_path, const ssa_analysis *an, ssa_replay_edit *ed,
                       size_t nedits, const char *const *edits, char **json_out, char **err_out) {
  ssa_replay plain, edited;
  char msg[256] = "";
  memset(&edited, 0, sizeof edited);
  int rc = ssa_replay_run(an, ed, 0, &plain, msg, sizeof msg);
  if (!rc && nedits) rc = ssa_replay_run(an, ed, nedits, &edited, msg, sizeof msg);
  if (rc == STEPSCOPE_E_ARGUMENT)
    rc = api_fail(err_out, 2, "stepscope replay: %s", msg);
  else if (rc)
    rc = api_fail(err_out, 1, "stepscope replay: out of memory");
  else {
    ssa_replay_report rep = {run_path, &plain, nedits ? &edited : NULL, (char *const *)edits,
                             nedits};
    rc = api_json_to_memory("replay", write_replay, &rep, json_out, err_out);
  }
  ssa_replay_free(&plain);
  ssa_replay_free(&edited);
  return rc;
}

API_EXPORT int ss_api_replay(const char *run_path, int argc, const char *const *argv, int nedits,
                             const char *const *edits, char **json_out, char **err_out) {
  api_options ao;
  int rc = api_begin_json_call("replay", "replay", json_out, err_out, argc, argv, 0, &ao);
  if (rc) return rc;
  if (nedits < 0 || (nedits > 0 && !edits)) {
    api_options_free(&ao);
    return api_fail(err_out, 2, "stepscope replay: bad list of edits");
  }
  ssa_replay_edit *ed = calloc((size_t)nedits + 1, sizeof *ed);
  if (!ed) rc = api_fail(err_out, 1, "stepscope replay: out of memory");
  int parsed = 0;
  for (char msg[256]; !rc && parsed < nedits; parsed++)
    if (!edits[parsed] || ssa_replay_edit_parse(edits[parsed], &ed[parsed], msg, sizeof msg)) {
      rc = api_fail(err_out, 2, "stepscope replay: --what-if '%s': %s",
                    edits[parsed] ? edits[parsed] : "(null)", edits[parsed] ? msg : "no edit");
      break;
    }
  ssa_run run;
  if (!rc && !(rc = load_run("replay", run_path, &ao.opt, &run, err_out))) {
    ssa_analysis an;
    if (!(rc = analyse_run("replay", NULL, &run, &ao.opt, &an, err_out))) {
      rc = replay_json(run_path, &an, ed, (size_t)nedits, edits, json_out, err_out);
      ssa_analysis_free(&an);
    }
    ssa_run_free(&run);
  }
  for (int i = 0; ed && i < parsed; i++)
    ssa_replay_edit_free(&ed[i]);
  free(ed);
  api_options_free(&ao);
  return rc;
}

API_EXPORT int ss_api_diff(const char *run_a, const char *run_b, int argc, const char *const *argv,
                           char **json_out, char **err_out) {
  api_options ao;
  int rc = api_begin_json_call("diff", "diff", json_out, err_out, argc, argv,
                               ALLOW_STEPS_B | ALLOW_REPEATS | ALLOW_RUN_NOISE, &ao);
  if (rc) return rc;
  ssa_options opt_b = ao.opt;
  if (ao.has_b_steps) {
    opt_b.has_step_filter = 1;
    opt_b.step_first = ao.b_first;
    opt_b.step_last = ao.b_last;
  }
  ao.repeats[0][0] = run_a;
  ao.repeats[1][0] = run_b;
  size_t nrun[2] = {1 + ao.nrep[0], 1 + ao.nrep[1]};
  ssa_run *runs = calloc(2 * SSA_DIFF_MAX_RUNS, sizeof *runs);
  ssa_analysis *an = calloc(2 * SSA_DIFF_MAX_RUNS, sizeof *an);
  const ssa_analysis *side_an[2][SSA_DIFF_MAX_RUNS];
  int have_run[2 * SSA_DIFF_MAX_RUNS] = {0}, have_an[2 * SSA_DIFF_MAX_RUNS] = {0};
  if (!runs || !an) rc = api_fail(err_out, 1, "stepscope diff: out of memory");
  for (int side = 0; side < 2 && !rc; side++) {
    const ssa_options *o = side ? &opt_b : &ao.opt;
    for (size_t i = 0; i < nrun[side] && !rc; i++) {
      size_t x = (size_t)side * SSA_DIFF_MAX_RUNS + i;
      const char *path = ao.repeats[side][i];
      if (!(rc = load_run("diff", path, o, &runs[x], err_out))) have_run[x] = 1;
      if (!rc && !(rc = analyse_run("diff", path, &runs[x], o, &an[x], err_out))) have_an[x] = 1;
      side_an[side][i] = &an[x];
      char msg[1024];
      if (!rc && i > 0 &&
          !ssa_diff_repeat_fits(side_an[side][0], side_an[side][i], side, ao.repeats[side][0], path,
                                msg, sizeof msg))
        rc = api_fail(err_out, 2, "%s", msg);
    }
  }
  if (!rc) {
    ssa_diff d;
    memset(&d, 0, sizeof d);
    if (ssa_diff_runs_repeated(side_an[0], nrun[0], side_an[1], nrun[1], run_a, run_b, ao.run_noise,
                               0, &d))
      rc = api_fail(err_out, 1, "stepscope diff: out of memory while comparing");
    else
      rc = api_json_to_memory("diff", write_diff, &d, json_out, err_out);
    ssa_diff_free(&d);
  }
  for (size_t x = 0; x < 2 * SSA_DIFF_MAX_RUNS; x++) {
    if (have_an[x]) ssa_analysis_free(&an[x]);
    if (have_run[x]) ssa_run_free(&runs[x]);
  }
  free(runs);
  free(an);
  api_options_free(&ao);
  return rc;
}

/* ---- the op table ----
 *
 * ss_api_ops_open loads the run and, for every selected rank in parallel
 * (a worker per core, ranks taken in turn), finds the step of each op and
 * which names its ops use; then, serially, gives each rank its slice of the
 * table and interns the used names into the run's string table. The table
 * is then written, again a rank per worker, into memory the caller owns
 * (ss_api_ops_write), so that a binding can hand it to its arrays without
 * a copy. */

struct ss_api_ops_handle {
  ssa_run run;
  api_options ao;
  int have_run;
  int64_t **steps;  /* per rank: the step of every op (-1 none); NULL: rank not selected */
  uint8_t **used;   /* per rank: which of its string ids name a selected op */
  uint32_t **remap; /* per rank: its string id -> the run's string id */
  size_t *first;    /* per rank: its first row in the table */
  size_t nops;
  ssa_strtab names;
  ss_api_ops_header h;
  size_t size;
  /* the write in progress */
  char *out;
  int error;
  _Atomic size_t next;
};

static const size_t column_size[SS_OPS_NCOLUMNS] = {8, 8, 8, 8, 8, 8, 8, 4, 4, 1, 1};

static size_t align8(size_t n) {
  return (n + 7) & ~(size_t)7;
}

static int rank_selected(const api_options *ao, const ssa_rank *r) {
  return !r->failed && (ao->opt.rank < 0 || r->rank == ao->opt.rank);
}

static int op_selected(const api_options *ao, int64_t step) {
  return !ao->opt.has_step_filter ||
         (step >= 0 && step >= ao->opt.step_first && step <= ao->opt.step_last);
}

/* The step of every op of a rank (-1: none), as steps.c assigns them: the
 * step range that contains the start of the op's launch call. */
static int rank_op_steps(const ssa_rank *r, const char *range_name, int64_t *step_of) {
  ssa_step *steps = NULL;
  size_t nsteps = 0;
  for (size_t i = 0; i < r->nops; i++)
    step_of[i] = -1;
  if (ssa_find_steps(r, range_name, &steps, &nsteps)) return -1;
  if (!nsteps) return 0;
  ssa_step_index ix;
  if (ssa_step_index_build(&ix, steps, nsteps)) {
    free(steps);
    return -1;
  }
  for (size_t i = 0; i < r->nops; i++) {
    const ssa_op *o = &r->ops[i];
    if (o->launch == SSA_NONE) continue;
    uint32_t k = ssa_step_index_owner(&ix, r->apis[o->launch].start);
    if (k != SSA_NONE) step_of[i] = steps[k].number;
  }
  ssa_step_index_free(&ix);
  free(steps);
  return 0;
}

/* Runs `worker` on up to opt.threads threads (0: one per core, at most one
 * per rank, this thread included); the workers take ranks in turn through
 * t->next until none is left. */
static void for_each_rank(struct ss_api_ops_handle *t, void *(*worker)(void *)) {
  atomic_store(&t->next, 0);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  size_t nth = t->ao.opt.threads > 0 ? (size_t)t->ao.opt.threads : (size_t)(cores > 0 ? cores : 1);
  if (nth > t->run.nranks) nth = t->run.nranks;
  pthread_t th[64];
  if (nth > 64) nth = 64;
  size_t started = 0;
  for (; nth > 1 && started < nth - 1; started++)
    if (pthread_create(&th[started], NULL, worker, t) != 0) break;
  worker(t);
  for (size_t i = 0; i < started; i++)
    pthread_join(th[i], NULL);
}

/* Worker of ss_api_ops_open: steps and used names of each rank. */
static void *scan_worker(void *arg) {
  struct ss_api_ops_handle *t = arg;
  for (;;) {
    size_t k = atomic_fetch_add(&t->next, 1);
    if (k >= t->run.nranks) return NULL;
    const ssa_rank *r = &t->run.ranks[k];
    if (!t->steps[k]) continue;
    if (!(t->used[k] = calloc(r->strings.count ? r->strings.count : 1, 1)) ||
        rank_op_steps(r, t->ao.opt.step_range_name, t->steps[k])) {
      t->error = 1;
      continue;
    }
    size_t n = 0;
    for (size_t i = 0; i < r->nops; i++) {
      if (!op_selected(&t->ao, t->steps[k][i])) continue;
      n++;
      if (r->ops[i].name < r->strings.count) t->used[k][r->ops[i].name] = 1;
    }
    t->first[k] = n; /* the count, until open turns counts into offsets */
  }
}

/* Worker of ss_api_ops_write: each rank's rows. */
static void *fill_worker(void *arg) {
  struct ss_api_ops_handle *t = arg;
  const ss_api_ops_header *h = &t->h;
  char *b = t->out;
  int64_t *start = (int64_t *)(b + h->column_offset[SS_OPS_START_NS]);
  int64_t *end = (int64_t *)(b + h->column_offset[SS_OPS_END_NS]);
  int64_t *stream = (int64_t *)(b + h->column_offset[SS_OPS_STREAM]);
  int64_t *bytes = (int64_t *)(b + h->column_offset[SS_OPS_BYTES]);
  uint64_t *comm_id = (uint64_t *)(b + h->column_offset[SS_OPS_COMM_ID]);
  int64_t *seq = (int64_t *)(b + h->column_offset[SS_OPS_COLL_SEQ]);
  int64_t *step = (int64_t *)(b + h->column_offset[SS_OPS_STEP]);
  int32_t *rank = (int32_t *)(b + h->column_offset[SS_OPS_RANK]);
  int32_t *name = (int32_t *)(b + h->column_offset[SS_OPS_NAME]);
  uint8_t *kind = (uint8_t *)(b + h->column_offset[SS_OPS_KIND]);
  uint8_t *cat = (uint8_t *)(b + h->column_offset[SS_OPS_CATEGORY]);
  for (;;) {
    size_t k = atomic_fetch_add(&t->next, 1);
    if (k >= t->run.nranks) return NULL;
    const ssa_rank *r = &t->run.ranks[k];
    if (!t->steps[k]) continue;
    const int64_t *step_of = t->steps[k];
    const uint32_t *remap = t->remap[k];
    int64_t shift = r->offset_ns - t->run.origin; /* ssa_rel_time */
    size_t j = t->first[k];
    for (size_t i = 0; i < r->nops; i++) {
      if (!op_selected(&t->ao, step_of[i])) continue;
      const ssa_op *o = &r->ops[i];
      start[j] = o->start + shift;
      end[j] = o->end + shift;
      stream[j] = (int64_t)r->lanes[o->lane].id;
      bytes[j] = (int64_t)o->bytes;
      if (o->coll != SSA_NONE) {
        comm_id[j] = r->colls[o->coll].comm_id;
        seq[j] = (int64_t)r->colls[o->coll].seq;
      } else {
        comm_id[j] = 0;
        seq[j] = -1;
      }
      step[j] = step_of[i];
      rank[j] = r->rank;
      name[j] = o->name < r->strings.count ? (int32_t)remap[o->name] : 0;
      kind[j] = o->kind;
      cat[j] = o->cls;
      j++;
    }
  }
}

API_EXPORT void ss_api_ops_close(ss_api_ops_handle *t) {
  if (!t) return;
  for (size_t k = 0; k < t->run.nranks; k++) {
    if (t->steps) free(t->steps[k]);
    if (t->used) free(t->used[k]);
    if (t->remap) free(t->remap[k]);
  }
  free(t->steps);
  free(t->used);
  free(t->remap);
  free(t->first);
  ssa_strtab_free(&t->names);
  if (t->have_run) ssa_run_free(&t->run);
  api_options_free(&t->ao);
  free(t);
}

API_EXPORT int ss_api_ops_open(const char *run_path, int argc, const char *const *argv,
                               ss_api_ops_handle **ops_out, size_t *size_out, char **err_out) {
  if (err_out) *err_out = NULL;
  if (!ops_out || !size_out) return api_fail(err_out, 2, "stepscope ops: no place for the table");
  *ops_out = NULL;
  *size_out = 0;
  struct ss_api_ops_handle *t = calloc(1, sizeof *t);
  if (!t) return api_fail(err_out, 1, "stepscope ops: out of memory");
  ssa_strtab_init(&t->names);
  int rc = api_parse_options("ops", argc, argv, ALLOW_RANK, &t->ao, err_out);
  if (!rc && !(rc = load_run("ops", run_path, &t->ao.opt, &t->run, err_out))) t->have_run = 1;
  if (rc) {
    ss_api_ops_close(t);
    return rc;
  }
  size_t n = t->run.nranks ? t->run.nranks : 1;
  t->steps = calloc(n, sizeof *t->steps);
  t->used = calloc(n, sizeof *t->used);
  t->remap = calloc(n, sizeof *t->remap);
  t->first = calloc(n, sizeof *t->first);
  if (!t->steps || !t->used || !t->remap || !t->first) goto nomem;
  int any_rank = 0;
  for (size_t k = 0; k < t->run.nranks; k++) {
    const ssa_rank *r = &t->run.ranks[k];
    if (!rank_selected(&t->ao, r)) continue;
    any_rank = 1;
    if (!(t->steps[k] = malloc((r->nops ? r->nops : 1) * sizeof **t->steps))) goto nomem;
  }
  if (!any_rank) {
    rc = api_fail(err_out, 2, "stepscope ops: rank %d is not in the run", t->ao.opt.rank);
    ss_api_ops_close(t);
    return rc;
  }
  for_each_rank(t, scan_worker);
  if (t->error) goto nomem;
  /* counts to offsets; the used names into the run's table */
  ssa_strtab_intern(&t->names, "", 0); /* reserves id 0 = "" */
  if (t->names.count == 0) goto nomem;
  for (size_t k = 0; k < t->run.nranks; k++) {
    if (!t->steps[k]) continue;
    const ssa_rank *r = &t->run.ranks[k];
    size_t count = t->first[k];
    t->first[k] = t->nops;
    t->nops += count;
    if (!(t->remap[k] = calloc(r->strings.count ? r->strings.count : 1, sizeof **t->remap)))
      goto nomem;
    for (uint32_t id = 1; id < r->strings.count; id++) {
      if (!t->used[k][id]) continue;
      const char *s = ssa_rank_str(r, id);
      uint32_t rid = ssa_strtab_intern(&t->names, s, strlen(s));
      if (!rid && *s) goto nomem;
      t->remap[k][id] = rid;
    }
    free(t->used[k]);
    t->used[k] = NULL;
  }
  /* the layout: header, columns (8-byte aligned), strings */
  ss_api_ops_header *h = &t->h;
  memcpy(h->magic, SS_API_OPS_MAGIC, 8);
  h->header_bytes = sizeof *h;
  h->nops = t->nops;
  h->ncolumns = SS_OPS_NCOLUMNS;
  size_t at = align8(sizeof *h);
  for (int c = 0; c < SS_OPS_NCOLUMNS; c++) {
    h->column_offset[c] = at;
    at = align8(at + column_size[c] * t->nops);
  }
  h->nstrings = t->names.count;
  h->strings_offset = at;
  h->strings_bytes = t->names.bytes_len;
  t->size = at + t->names.bytes_len;
  *ops_out = t;
  *size_out = t->size;
  return 0;
nomem:
  ss_api_ops_close(t);
  return api_fail(err_out, 1, "stepscope ops: out of memory");
}

API_EXPORT int ss_api_ops_write(ss_api_ops_handle *t, void *buf, size_t size, char **err_out) {
  if (err_out) *err_out = NULL;
  if (!t || !buf) return api_fail(err_out, 2, "stepscope ops: no table or no buffer");
  if (size < t->size)
    return api_fail(err_out, 2, "stepscope ops: the buffer holds %zu bytes, the table needs %zu",
                    size, t->size);
  t->out = buf;
  for_each_rank(t, fill_worker);
  t->out = NULL;
  memcpy(buf, &t->h, sizeof t->h);
  /* the padding after the header and the columns, so no byte is left undefined */
  char *b = buf;
  size_t at = sizeof t->h;
  for (int c = 0; c < SS_OPS_NCOLUMNS; c++) {
    memset(b + at, 0, t->h.column_offset[c] - at);
    at = t->h.column_offset[c] + column_size[c] * t->nops;
  }
  memset(b + at, 0, t->h.strings_offset - at);
  if (t->names.bytes_len) memcpy(b + t->h.strings_offset, t->names.bytes, t->names.bytes_len);
  return 0;
}

API_EXPORT int ss_api_ops(const char *run_path, int argc, const char *const *argv, void **table_out,
                          size_t *size_out, char **err_out) {
  if (err_out) *err_out = NULL;
  if (!table_out || !size_out) return api_fail(err_out, 2, "stepscope ops: no place for the table");
  *table_out = NULL;
  *size_out = 0;
  ss_api_ops_handle *t;
  size_t size;
  int rc = ss_api_ops_open(run_path, argc, argv, &t, &size, err_out);
  if (rc) return rc;
  void *buf = malloc(size ? size : 1);
  if (!buf) {
    ss_api_ops_close(t);
    return api_fail(err_out, 1, "stepscope ops: out of memory");
  }
  rc = ss_api_ops_write(t, buf, size, err_out);
  ss_api_ops_close(t);
  if (rc) {
    free(buf);
    return rc;
  }
  *table_out = buf;
  *size_out = size;
  return 0;
}
