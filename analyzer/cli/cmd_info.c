/*
 * cmd_info.c — `stepscope info RUN|FILE [--json]`: what is in a run, at a
 * glance. Header of every rank, counts per record kind, time span, dropped
 * records, warnings and errors. Exit 0 when every file read cleanly (warnings
 * allowed), 1 when a file could not be read, 2 on a usage error.
 */
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_env.h"
#include "cli_print.h"
#include "option_table.h"
#include "ssa_import.h"
#include "ssa_io.h"
#include "stepscope.h"
#include "trace_summary.h"
#include "sc_json.h"

typedef struct info_args {
  const char *target;
  int json;
} info_args;

static const cli_option info_options[] = {
    {CLI_FLAG, "--json", NULL, NULL, "print one JSON object instead of text",
     offsetof(info_args, json), NULL, 0, 0, NULL},
};

static const cli_table info_table = {
    .command = "info",
    .head = "usage: stepscope info RUN|FILE [--json]\n"
            "\n"
            "Prints the header of every rank (host, device, versions, producer), the number of\n"
            "records of each kind, the time span, dropped records (tracer losses), warnings\n"
            "(e.g. a truncated last frame) and errors.\n"
            "\n"
            "  RUN      a run directory holding rank-*.trace.zst files, or PyTorch profiler\n"
            "           traces (*.json[.gz]: rank-*, rank_*, worker*, *.pt.trace.json from\n"
            "           tensorboard_trace_handler, or any name when the content is Kineto's;\n"
            "           counts are given in stepscope's record kinds). Other files that\n"
            "           stepscope knows (its export, its report) are listed, not read.\n"
            "  FILE     one trace file (.trace.zst, or .json / .json.gz from PyTorch)\n",
    CLI_ROWS(info_options),
    .column = 11,
    .flags = CLI_UNKNOWN_QUOTED,
    .args = offsetof(info_args, target),
    .nargs = 1,
    .too_many = "one RUN or FILE only",
    .tail = "\n"
            "Exit status: 0 all files read, 1 a file could not be read, 2 usage error.\n"};

static void json_string(FILE *f, const char *s) {
  sc_json_string_file(f, s, 0);
}

/* Whether file i was closed by its writer, as a warning (0: nothing to
 * say). "Ends N s before the run's last record" compares trace clocks, so
 * only with files of the same host and clock domain. */
static int close_note(const trace_summary *s, size_t n, size_t i, char *buf, size_t cap) {
  const trace_summary *t = &s[i];
  if (!t->ok) return 0;
  if (t->close_state == STEPSCOPE_CLOSE_SIGNAL) {
    int sig = t->close_signal;
    snprintf(buf, cap, "rank %d was stopped by %s (signal %d); its trace was flushed and closed",
             t->header.rank,
             sig == SIGTERM  ? "SIGTERM"
             : sig == SIGINT ? "SIGINT"
             : sig == SIGHUP ? "SIGHUP"
                             : "a signal",
             sig);
    return 1;
  }
  if (t->close_state != STEPSCOPE_CLOSE_MISSING) return 0;
  uint64_t run_last = 0;
  int comparable = 0;
  for (size_t j = 0; j < n; j++)
    if (s[j].ok && s[j].first_ns <= s[j].last_ns &&
        s[j].header.clock_domain == t->header.clock_domain &&
        !strcmp(s[j].header.hostname, t->header.hostname)) {
      if (s[j].last_ns > run_last) run_last = s[j].last_ns;
      comparable++;
    }
  if (t->first_ns <= t->last_ns && comparable > 1)
    snprintf(buf, cap,
             "rank %d's trace was not closed (crash or kill?); it ends %.2f s before the run's "
             "last record",
             t->header.rank, (double)(run_last - t->last_ns) / 1e9);
  else
    snprintf(buf, cap, "rank %d's trace was not closed (crash or kill?)", t->header.rank);
  return 1;
}

static const char *close_state_name(int state) {
  switch (state) {
  case STEPSCOPE_CLOSE_CLEAN: return "closed";
  case STEPSCOPE_CLOSE_SIGNAL: return "closed_on_signal";
  case STEPSCOPE_CLOSE_MISSING: return "not_closed";
  default: return "unknown";
  }
}

static void print_json(const char *target, const trace_summary *s, size_t n,
                       const ssa_run_files *found) {
  printf("{\"path\":");
  json_string(stdout, target);
  printf(",\"files\":%zu,\"other_files\":[", n);
  int other = 0;
  for (size_t i = 0; i < found->nfiles; i++) {
    const ssa_found_file *f = &found->files[i];
    if (ssa_file_kind_is_rank(f->kind)) continue;
    printf("%s{\"file\":", other++ ? "," : "");
    json_string(stdout, f->path);
    printf(",\"kind\":");
    json_string(stdout, ssa_file_kind_name(f->kind));
    printf(",\"why\":");
    json_string(stdout, f->why);
    printf("}");
  }
  printf("],\"ranks\":[");
  uint64_t totals[STEPSCOPE_REC_KIND_MAX] = {0}, dropped = 0, records = 0;
  for (size_t i = 0; i < n; i++) {
    const trace_summary *t = &s[i];
    printf("%s{\"file\":", i ? "," : "");
    json_string(stdout, t->path);
    printf(",\"duplicate_of\":");
    if (t->duplicate_of)
      json_string(stdout, t->duplicate_of);
    else
      printf("null");
    printf(",\"damaged_regions\":%" PRIu64 ",\"damaged_bytes\":%" PRIu64, t->damaged_regions,
           t->damaged_bytes);
    if (t->ok) {
      char hbuf[65536];
      size_t len = stepscope_header_to_json(&t->header, hbuf, sizeof hbuf);
      printf(",\"rank\":%d,\"header\":%s", t->header.rank, len < sizeof hbuf ? hbuf : "null");
      printf(",\"records\":%" PRIu64 ",\"counts\":{", t->records);
      int first = 1;
      for (uint32_t k = 0; k < STEPSCOPE_REC_KIND_MAX; k++) {
        const char *name = stepscope_record_kind_name(k);
        if (!name || k == STEPSCOPE_REC_HEADER || k == STEPSCOPE_REC_BLOCK) continue;
        printf("%s\"%s\":%" PRIu64, first ? "" : ",", name, t->counts[k]);
        first = 0;
        if (!t->duplicate_of) totals[k] += t->counts[k];
      }
      printf("},\"unknown_records\":%" PRIu64, t->unknown);
      if (t->first_ns <= t->last_ns)
        printf(",\"first_ns\":%" PRIu64 ",\"last_ns\":%" PRIu64 ",\"span_ns\":%" PRIu64,
               t->first_ns, t->last_ns, t->last_ns - t->first_ns);
      printf(",\"dropped\":%" PRIu64 ",\"file_bytes\":%" PRIu64, t->dropped, t->file_bytes);
      printf(",\"closed\":\"%s\"", close_state_name(t->close_state));
      printf(",\"metadata_keys\":[");
      for (size_t m = 0; m < t->nmetadata; m++) {
        if (m) printf(",");
        json_string(stdout, t->metadata_keys[m]);
      }
      printf("]");
      if (!t->duplicate_of) {
        dropped += t->dropped;
        records += t->records;
      }
    }
    printf(",\"warnings\":[");
    for (size_t w = 0; w < t->nwarnings; w++) {
      if (w) printf(",");
      json_string(stdout, t->warnings[w]);
    }
    char note[300];
    if (close_note(s, n, i, note, sizeof note)) {
      if (t->nwarnings) printf(",");
      json_string(stdout, note);
    }
    printf("],\"error\":");
    if (t->error.code)
      json_string(stdout, t->error.message);
    else
      printf("null");
    printf("}");
  }
  printf("],\"totals\":{\"records\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"counts\":{", records,
         dropped);
  int first = 1;
  for (uint32_t k = 0; k < STEPSCOPE_REC_KIND_MAX; k++) {
    const char *name = stepscope_record_kind_name(k);
    if (!name || k == STEPSCOPE_REC_HEADER || k == STEPSCOPE_REC_BLOCK) continue;
    printf("%s\"%s\":%" PRIu64, first ? "" : ",", name, totals[k]);
    first = 0;
  }
  printf("}}}\n");
}

static void print_text(const char *target, const trace_summary *s, size_t n,
                       const ssa_run_files *found) {
  uint64_t totals[STEPSCOPE_REC_KIND_MAX] = {0}, dropped = 0, records = 0, bytes = 0;
  int world = -1, world_mismatch = 0;
  size_t readable = 0;
  for (size_t i = 0; i < n; i++) {
    if (!s[i].ok || s[i].duplicate_of) continue;
    readable++;
    if (world < 0)
      world = s[i].header.world_size;
    else if (world != s[i].header.world_size)
      world_mismatch = 1;
    for (uint32_t k = 0; k < STEPSCOPE_REC_KIND_MAX; k++)
      totals[k] += s[i].counts[k];
    dropped += s[i].dropped;
    records += s[i].records;
    bytes += s[i].file_bytes;
  }
  char safe[1024], safe2[1024];
  printf("%s: %zu trace file%s", sc_text_safe(target, safe, sizeof safe), n, n == 1 ? "" : "s");
  if (world > 0) printf(", world size %d%s", world, world_mismatch ? " (ranks disagree!)" : "");
  if (world == 0) /* the header carries no world size (a Kineto trace without distributedInfo) */
    printf(", world size unknown%s", world_mismatch ? " (ranks disagree!)" : "");
  printf(", %" PRIu64 " records, %.2f MiB", records, (double)bytes / (1 << 20));
  if (readable && bytes)
    printf(" (%.2f bytes/record)", records ? (double)bytes / (double)records : 0.0);
  printf("\n");
  for (size_t i = 0; i < n; i++) /* lost records first: nobody reads the end */
    if (s[i].damaged_regions)
      printf("DATA LOST: %s: %" PRIu64 " damaged part%s skipped (%" PRIu64 " of %" PRIu64
             " bytes); their records are not counted below\n",
             sc_text_safe(s[i].path, safe, sizeof safe), s[i].damaged_regions,
             s[i].damaged_regions == 1 ? "" : "s", s[i].damaged_bytes, s[i].file_bytes);
  for (size_t i = 0; i < found->nfiles; i++) { /* what else the directory holds, and why not read */
    const ssa_found_file *f = &found->files[i];
    if (ssa_file_kind_is_rank(f->kind)) continue;
    printf("not a rank: %s: %s (%s)\n", sc_text_safe(f->name, safe, sizeof safe),
           ssa_file_kind_name(f->kind), sc_text_safe(f->why, safe2, sizeof safe2));
  }
  if (world > 0 && (size_t)world != readable && n > 1)
    printf("note: world size is %d but %zu rank files were readable\n", world, readable);
  if (readable) {
    const trace_summary *f = NULL;
    for (size_t i = 0; i < n && !f; i++)
      if (s[i].ok) f = &s[i];
    if (f->header.format_major)
      printf("producer: %s; format %u.%u\n", sc_text_safe(f->header.producer, safe, sizeof safe),
             f->header.format_major, f->header.format_minor);
    else
      printf("producer: %s\n", sc_text_safe(f->header.producer, safe, sizeof safe));
    if (f->header.config_json[0]) {
      size_t len = strlen(f->header.config_json);
      printf("config: %s%s\n", sc_text_safe(f->header.config_json, safe, 301),
             len > 300 ? "..." : "");
    }
    if (f->header.cuda_version[0] || f->header.nccl_version[0]) {
      char safe3[128], safe4[128];
      printf("versions: driver %s, CUDA %s, NCCL %s, CUPTI %s\n",
             sc_text_safe(f->header.driver_version, safe, 128),
             sc_text_safe(f->header.cuda_version, safe2, 128),
             sc_text_safe(f->header.nccl_version, safe3, sizeof safe3),
             sc_text_safe(f->header.cupti_version, safe4, sizeof safe4));
    }
  }
  printf("\n%-5s %-16s %-24s %8s %10s %10s %8s %s\n", "rank", "host", "device", "pid", "records",
         "span_s", "dropped", "file");
  for (size_t i = 0; i < n; i++) {
    const trace_summary *t = &s[i];
    if (!t->ok) {
      printf("%-5s %-16s %-24s %8s %10s %10s %8s %s\n", "?", "-", "-", "-", "-", "-", "-",
             sc_text_safe(t->path, safe, sizeof safe));
      continue;
    }
    if (t->duplicate_of) continue; /* warned about below, not listed twice */
    double span = t->first_ns <= t->last_ns ? (double)(t->last_ns - t->first_ns) / 1e9 : 0.0;
    printf("%-5d %-16s %-24s %8" PRId64 " %10" PRIu64 " %10.3f %8" PRIu64 " %s\n", t->header.rank,
           sc_text_safe(t->header.hostname, safe, 17),
           sc_text_safe(t->header.device_name, safe2, 25), t->header.pid, t->records, span,
           t->dropped, sc_text_safe(t->path, safe2 + 32, sizeof safe2 - 32));
  }
  printf("\nrecords by kind (all ranks):\n");
  for (uint32_t k = 0; k < STEPSCOPE_REC_KIND_MAX; k++) {
    const char *name = stepscope_record_kind_name(k);
    if (!name || !totals[k]) continue;
    printf("  %-13s %12" PRIu64 "\n", name, totals[k]);
  }
  if (readable) {
    const trace_summary *f = NULL;
    for (size_t i = 0; i < n && !f; i++)
      if (s[i].ok) f = &s[i];
    if (f->nmetadata) {
      printf("metadata:");
      for (size_t m = 0; m < f->nmetadata; m++)
        printf(" %s", sc_text_safe(f->metadata_keys[m], safe, sizeof safe));
      printf("\n");
    }
  }
  printf("dropped records: %" PRIu64 "%s\n", dropped,
         dropped ? " (the tracer lost records: metrics may be incomplete)" : "");
  int problems = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i].duplicate_of) {
      if (!problems++) printf("\n");
      printf("warning: %s: rank %d again (also in %s): files from different runs? this one is "
             "not counted (analyze ignores it too)\n",
             sc_text_safe(s[i].path, safe, sizeof safe), s[i].header.rank,
             sc_text_safe(s[i].duplicate_of, safe2, sizeof safe2));
    }
    for (size_t w = 0; w < s[i].nwarnings; w++) {
      if (!problems++) printf("\n");
      printf("warning: %s\n", sc_text_safe(s[i].warnings[w], safe, sizeof safe));
    }
    char note[300];
    if (close_note(s, n, i, note, sizeof note)) {
      if (!problems++) printf("\n");
      printf("warning: %s\n", note);
    }
    if (s[i].unknown) {
      if (!problems++) printf("\n");
      printf("warning: %s: %" PRIu64 " records of kinds unknown to this version were skipped\n",
             sc_text_safe(s[i].path, safe, sizeof safe), s[i].unknown);
    }
    if (s[i].error.code) {
      if (!problems++) printf("\n");
      printf("error: %s\n", sc_text_safe(s[i].error.message, safe, sizeof safe));
    }
  }
}

int cmd_info(int argc, char **argv) {
  info_args x = {NULL, 0};
  int parsed = cli_parse(&info_table, argc, argv, &x, NULL);
  if (parsed != CLI_PARSED) return parsed;
  const char *target = x.target;
  cli_env env; /* the Kineto switches and the decompression limits */
  cli_env_read(&env);
  ssa_run_files found;
  stepscope_error err = {0};
  if (ssa_run_discover(target, &env.import.inflate, &found, &err) != 0) {
    cli_print(stderr, "stepscope info: %s\n", err.message);
    return 1;
  }
  if (found.single && !ssa_file_kind_is_rank(found.files[0].kind)) {
    cli_print(stderr, "stepscope info: %s is a %s (%s), not a trace\n", target,
              ssa_file_kind_name(found.files[0].kind), found.files[0].why);
    ssa_run_files_free(&found);
    return 1;
  }
  if (found.nranks == 0) {
    char why[900];
    ssa_run_files_why_none(&found, why, sizeof why);
    cli_print(stderr, "stepscope info: %s: %s\n", target, why);
    ssa_run_files_free(&found);
    return 1;
  }
  size_t n = found.nranks;
  const char **paths = calloc(n, sizeof *paths);
  unsigned char *kineto = calloc(n, 1);
  trace_summary *s = calloc(n, sizeof *s);
  if (!paths || !kineto || !s) {
    cli_print(stderr, "stepscope info: out of memory\n");
    free(paths);
    free(kineto);
    free(s);
    ssa_run_files_free(&found);
    return 1;
  }
  for (size_t i = 0, k = 0; i < found.nfiles; i++) {
    if (!ssa_file_kind_is_rank(found.files[i].kind)) continue;
    kineto[k] = found.files[i].kind == SSA_FILE_KINETO;
    paths[k++] = found.files[i].path;
  }
  trace_summary_scan(paths, kineto, n, 0, &env.import, s);
  for (size_t i = 0; i < n; i++) /* the same rank in two files: the first one counts */
    for (size_t j = 0; j < i && s[i].ok && !s[i].duplicate_of; j++)
      if (s[j].ok && !s[j].duplicate_of && s[j].header.rank == s[i].header.rank)
        s[i].duplicate_of = s[j].path;
  if (x.json)
    print_json(target, s, n, &found);
  else
    print_text(target, s, n, &found);
  int failed = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i].error.code) failed = 1;
    trace_summary_free(&s[i]);
  }
  free(s);
  free(paths);
  free(kineto);
  ssa_run_files_free(&found);
  return failed;
}
