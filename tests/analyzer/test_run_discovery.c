/*
 * test_run_discovery.c — run_discovery.c tells the files of a run apart by
 * content, as every command relies on it.
 *
 * Files written here, each with the kind it must get:
 *   - Kineto traces under names that say nothing (trace.json.gz, trace.json,
 *     foo.json): by their top-level keys, or by their events' categories when
 *     the keys come after the events;
 *   - a stepscope-export-shaped file with the exporter marker, plain and
 *     gzip, the gzip one padded so that the marker straddles the boundary
 *     between two reads of the inflated stream;
 *   - the same without the marker (cut): skipped, also under a rank-like
 *     name, but the export when named trace.json or given by the user (so
 *     that view can say it is cut);
 *   - a trace whose event name holds the marker's text (escaped quotes): not
 *     an export;
 *   - a report (generator "stepscope analyze"), a diff (kind "stepscope.diff"),
 *     non-JSON, empty files;
 *   - FIFOs: never opened (the test would hang), a rank-like one listed as a
 *     rank for the loader to refuse, another one skipped.
 * Then ssa_run_discover on the directory: sorted listing, only candidate
 * names, the rank count; and on single files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "ssa_import.h"

static int failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                              \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static char dir[256];

static void path_of(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", dir, name);
}

static void write_plain(const char *name, const char *text) {
  char p[512];
  path_of(p, sizeof p, name);
  FILE *f = fopen(p, "wb");
  if (!f) {
    perror(p);
    exit(1);
  }
  fputs(text, f);
  fclose(f);
}

static void write_gz(const char *name, const char *a, const char *b, const char *c) {
  char p[512];
  path_of(p, sizeof p, name);
  gzFile g = gzopen(p, "wb");
  if (!g) {
    perror(p);
    exit(1);
  }
  gzputs(g, a);
  if (b) gzputs(g, b);
  if (c) gzputs(g, c);
  gzclose(g);
}

static ssa_file_kind kind_of(const char *name, int explicit_file) {
  char p[512], why[200];
  int gz;
  path_of(p, sizeof p, name);
  ssa_file_kind k = ssa_classify_file(p, explicit_file, NULL, &gz, why, sizeof why);
  printf("%-26s %-17s %s\n", name, ssa_file_kind_name(k), why);
  return k;
}

#define KINETO_HEAD                                                                                \
  "{\"schemaVersion\":1,\"deviceProperties\":[],\"distributedInfo\":{\"rank\":0},\"traceEvents\":" \
  "["
#define KINETO_EVENT                                                                               \
  "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":1,\"dur\":2}"
#define EXPORT_HEAD                                                                                \
  "{\"traceEvents\":[\n{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{"     \
  "\"name\":\"rank 0 (h, cpu)\"}}"
#define EXPORT_TAIL                                                                                \
  "\n],\"displayTimeUnit\":\"ns\",\"metadata\":{\"stepscope\":{\"exporter\":\"stepscope export "   \
  "0.1.0\",\"origin_ns\":5,\"ranks\":[]}}}"
#define OTHER_HEAD                                                                                 \
  "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"name\":\"k\",\"ts\":1,\"dur\":1}"
#define EXPORT_CUT "\n],\"displayTimeUnit\":\"ns\""

int main(void) {
  snprintf(dir, sizeof dir, "%s/stepscope-discovery-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }

  /* Kineto under names that say nothing */
  write_gz("trace.json.gz", KINETO_HEAD, KINETO_EVENT, "]}");
  write_plain("trace.json", KINETO_HEAD KINETO_EVENT "]}");
  /* no top-level key in the first bytes (re-serialised files put them after
   * the events): told by the events' category */
  write_plain("foo.json", "{\"traceEvents\":[" KINETO_EVENT "]}");
  CHECK(kind_of("trace.json.gz", 0) == SSA_FILE_KINETO);
  CHECK(kind_of("trace.json", 0) == SSA_FILE_KINETO);
  CHECK(kind_of("foo.json", 0) == SSA_FILE_KINETO);

  /* exports: the marker at the end decides, not the name */
  write_plain("my-export.json", EXPORT_HEAD EXPORT_TAIL);
  CHECK(kind_of("my-export.json", 0) == SSA_FILE_EXPORT);
  CHECK(kind_of("my-export.json", 1) == SSA_FILE_EXPORT);
  /* gzip, the marker's key cut by the 256 KiB read boundary of the inflated stream
   * (a head other than today's exporter's, so that the stream is searched) */
  size_t boundary = 256u << 10, head_len = strlen(OTHER_HEAD);
  size_t marker_at = strlen("\n],\"displayTimeUnit\":\"ns\",\"metadata\":{\"stepscope\":{");
  size_t pad = boundary - head_len - marker_at - 4; /* "exporter" starts 4 bytes before it */
  char *padding = malloc(pad + 1);
  memset(padding, ' ', pad);
  padding[pad] = '\0';
  write_gz("exported.json.gz", OTHER_HEAD, padding, EXPORT_TAIL);
  CHECK(kind_of("exported.json.gz", 0) == SSA_FILE_EXPORT);
  write_gz("nomarker.json.gz", OTHER_HEAD, padding, EXPORT_CUT "}");
  CHECK(kind_of("nomarker.json.gz", 0) == SSA_FILE_SKIPPED);
  free(padding);
  /* gzip with today's exporter's first bytes: an export without reading its end */
  write_gz("fast.json.gz", EXPORT_HEAD, EXPORT_TAIL, NULL);
  CHECK(kind_of("fast.json.gz", 0) == SSA_FILE_EXPORT);

  /* no marker: a cut export */
  write_plain("cut.json", EXPORT_HEAD EXPORT_CUT);
  CHECK(kind_of("cut.json", 0) == SSA_FILE_SKIPPED);
  char cutdir[300];
  snprintf(cutdir, sizeof cutdir, "%s/cut", dir);
  mkdir(cutdir, 0700);
  write_plain("cut/trace.json", EXPORT_HEAD EXPORT_CUT); /* view checks it and says it is cut */
  CHECK(kind_of("cut/trace.json", 0) == SSA_FILE_EXPORT);
  write_plain("rank-3.json", EXPORT_HEAD EXPORT_CUT); /* no rank, whatever its name */
  CHECK(kind_of("rank-3.json", 0) == SSA_FILE_SKIPPED);
  CHECK(kind_of("cut.json", 1) == SSA_FILE_EXPORT); /* named by the user: "a cut export" */

  /* the marker's text inside a string is escaped: not a marker */
  write_plain("rank_9.json", "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"x "
                             "\\\"exporter\\\":\\\"stepscope export\\\"\",\"ts\":1,\"dur\":1}]}");
  CHECK(kind_of("rank_9.json", 0) == SSA_FILE_KINETO);
  write_plain("odd.json", "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"x "
                          "\\\"exporter\\\":\\\"stepscope export\\\"\",\"ts\":1,\"dur\":1}]}");
  CHECK(kind_of("odd.json", 0) == SSA_FILE_SKIPPED);

  /* stepscope's other outputs, and files that are no trace */
  write_plain("report.json",
              "{\"schema_version\":1,\"generator\":\"stepscope analyze 0.1.0\",\"run\":{}}");
  write_plain("r2.json",
              "{\n \"schema_version\": 1,\n \"generator\": \"stepscope analyze 0.1.0\"}");
  write_plain("diff.json", "{\"schema_version\":1,\"kind\":\"stepscope.diff\",\"a\":{}}");
  write_plain("notes.json", "\"just a string\"");
  write_plain("empty.json", "");
  write_plain("worker0.json", "{\"traceEvents\":[]}");
  write_plain("host_1.1700000000.pt.trace.json", "{\"traceEvents\":[]}");
  write_plain("report.txt", "text");
  write_plain("renamed.trace.zst", "\x28\xb5\x2f\xfd rest of a zstd frame");
  write_plain("notes.trace.zst", "plain text");
  CHECK(kind_of("renamed.trace.zst", 0) == SSA_FILE_TRACE);
  CHECK(kind_of("notes.trace.zst", 0) == SSA_FILE_SKIPPED);
  CHECK(kind_of("report.json", 0) == SSA_FILE_REPORT);
  CHECK(kind_of("r2.json", 0) == SSA_FILE_REPORT);
  CHECK(kind_of("diff.json", 0) == SSA_FILE_SKIPPED);
  CHECK(kind_of("notes.json", 0) == SSA_FILE_SKIPPED);
  CHECK(kind_of("empty.json", 0) == SSA_FILE_SKIPPED);
  CHECK(kind_of("worker0.json", 0) == SSA_FILE_KINETO);
  CHECK(kind_of("host_1.1700000000.pt.trace.json", 0) == SSA_FILE_KINETO);

  /* FIFOs are never opened */
  char p[512];
  path_of(p, sizeof p, "rank-1.json");
  CHECK(mkfifo(p, 0600) == 0);
  path_of(p, sizeof p, "pipe.json");
  CHECK(mkfifo(p, 0600) == 0);
  CHECK(kind_of("rank-1.json", 0) == SSA_FILE_KINETO);
  CHECK(kind_of("pipe.json", 0) == SSA_FILE_SKIPPED);

  /* the directory */
  ssa_run_files files;
  stepscope_error err;
  memset(&err, 0, sizeof err);
  CHECK(ssa_run_discover(dir, NULL, &files, &err) == 0);
  size_t ranks = 0;
  for (size_t i = 0; i < files.nfiles; i++) {
    ranks += ssa_file_kind_is_rank(files.files[i].kind);
    CHECK(strcmp(files.files[i].name, "report.txt") != 0);
    if (i) CHECK(strcmp(files.files[i - 1].name, files.files[i].name) < 0);
  }
  /* trace.json.gz trace.json foo.json rank_9.json worker0.json
   * host_1...pt.trace.json rank-1.json (FIFO) renamed.trace.zst */
  CHECK(files.nranks == 8 && ranks == 8);
  CHECK(!files.single);
  const ssa_found_file *e = ssa_run_files_find(&files, SSA_FILE_EXPORT, "trace.json");
  CHECK(e && strcmp(e->name, "exported.json.gz") == 0); /* trace.json here is Kineto's */
  const ssa_found_file *r = ssa_run_files_find(&files, SSA_FILE_REPORT, "report.json");
  CHECK(r && strcmp(r->name, "report.json") == 0);
  ssa_run_files_free(&files);

  /* one file */
  path_of(p, sizeof p, "trace.json.gz");
  CHECK(ssa_run_discover(p, NULL, &files, &err) == 0);
  CHECK(files.single && files.nfiles == 1 && files.nranks == 1 && strcmp(files.dir, dir) == 0);
  ssa_run_files_free(&files);
  path_of(p, sizeof p, "no-such-file");
  CHECK(ssa_run_discover(p, NULL, &files, &err) != 0 && strstr(err.message, "no such file"));

  /* an empty directory: no ranks, and a sentence that says so */
  char why[400];
  CHECK(ssa_run_discover(cutdir, NULL, &files, &err) == 0);
  CHECK(files.nranks == 0);
  ssa_run_files_why_none(&files, why, sizeof why);
  CHECK(strstr(why, "no rank files") && strstr(why, "trace.json"));
  printf("why none: %s\n", why);
  ssa_run_files_free(&files);

  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  if (failures)
    fprintf(stderr, "%d failure(s)\n", failures);
  else
    printf("ok\n");
  return failures ? 1 : 0;
}
