/*
 * test_utf8.c — reports and exports are valid UTF-8 whatever bytes the trace
 * holds: invalid sequences in names become U+FFFD.
 *
 * 1. ssa_out_json_string and ssa_out_utf8 on hand-picked byte strings
 *    (overlong forms, surrogates, code points above U+10FFFF, truncated and
 *    stray continuation bytes, valid 2-4 byte characters, JSON escapes),
 *    compared byte for byte with the expected output: one U+FFFD per
 *    maximal subpart, as the Unicode standard recommends.
 * 2. A one-rank run written with libstepscope whose host name, stream name,
 *    kernel names, range names and arguments hold invalid UTF-8 is loaded,
 *    analysed and written as the JSON report and the Chrome export; both
 *    files must be valid UTF-8 (checked here by an independent decoder) and
 *    contain U+FFFD. Its header configuration is damaged (not JSON): the
 *    report keeps it as {"unparsed": "..."}; a configuration that is JSON
 *    with invalid UTF-8 inside stays an object, sanitized.
 * 3. ssa_json_valid on valid and invalid JSON texts.
 *
 * usage: test_utf8                 run both
 *        test_utf8 --write-run DIR only write the run (the CLI test then
 *                                  parses analyze/export output with Python)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ssa_metrics.h"
#include "ssa_io.h"
#include "ssa_report.h"
#include "stepscope.h"
#include "ssa_import.h"
#include "ssa_export.h"

static int failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                              \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
      } else
        buf = nb;
    }
  }
  fclose(f);
  if (len) *len = n;
  return buf;
}

/* Writes s through fn into a temp file and compares with want. */
static void expect_out(void (*fn)(ssa_out *, const char *), const char *s, const char *want,
                       size_t want_len, const char *label) {
  char path[] = "/tmp/ssa-utf8-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    failures++;
    return;
  }
  close(fd);
  ssa_out o;
  if (ssa_out_open(&o, path) != 0) {
    failures++;
    unlink(path);
    return;
  }
  fn(&o, s);
  CHECK(ssa_out_close(&o) == 0);
  size_t n = 0;
  char *got = read_all(path, &n);
  unlink(path);
  if (!got || n != want_len || memcmp(got, want, n) != 0) {
    fprintf(stderr, "FAIL %s: got %zu bytes:", label, n);
    for (size_t i = 0; got && i < n; i++)
      fprintf(stderr, " %02x", (unsigned char)got[i]);
    fprintf(stderr, "\n");
    failures++;
  }
  free(got);
}

#define R "\xEF\xBF\xBD"
#define JS(in, out)                                                                                \
  expect_out(ssa_out_json_string, in, "\"" out "\"", sizeof("\"" out "\"") - 1, #in)
#define RAW(in, out) expect_out(ssa_out_utf8, in, out, sizeof(out) - 1, "raw " #in)

static void unit_cases(void) {
  JS("plain ascii", "plain ascii");
  JS("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  JS("\xEF\xBF\xBD", "\xEF\xBF\xBD");         /* U+FFFD itself */
  JS("\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF"); /* U+10FFFF, the last code point */
  JS("\xFF", R);                              /* never valid */
  JS("a\xC3", "a" R);                         /* truncated at the end */
  JS("\xE2\x82x", R "x");                     /* truncated: one U+FFFD for 2 bytes */
  JS("\xF0\x9F\x98", R);                      /* truncated 4-byte: one U+FFFD */
  JS("\x80\xBF", R R);                        /* stray continuation bytes */
  JS("\xC0\xAF", R R);                        /* overlong '/' */
  JS("\xC1\xBF", R R);                        /* overlong */
  JS("\xE0\x80\x80", R R R);                  /* overlong NUL, 3 bytes */
  JS("\xED\xA0\x80", R R R);                  /* surrogate U+D800 */
  JS("\xED\x9F\xBF", "\xED\x9F\xBF");         /* U+D7FF, just below */
  JS("\xF4\x90\x80\x80", R R R R);            /* above U+10FFFF */
  JS("\xF5\x80", R R);                        /* invalid lead */
  JS("k\xC3(\xA9", "k" R "(" R);
  JS("q\"b\\n\x01\n", "q\\\"b\\\\n\\u0001\\n"); /* escapes still apply */
  RAW("{\"a\":\"\xFF\"}", "{\"a\":\"" R "\"}");
  RAW("ok \xC3\xA9", "ok \xC3\xA9");
  /* the header's configuration is embedded raw only when it is JSON */
  static const char *const valid[] = {"{}",
                                      " {\"a\": [1, -2.5e+3, true, false, null, \"x\\u00e9\\n\"]} ",
                                      "[]",
                                      "0",
                                      "\"s\"",
                                      "{\"k\":{\"k\":{}}}",
                                      "{\"m\":\"\xFF\"}"};
  static const char *const invalid[] = {"",          "{",   "{\"a\":}", "{\"a\" 1}",     "[1,]",
                                        "01",        "1.",  "-",        "{\"a\":1} x",   "\"\\x\"",
                                        "\"\\u12\"", "tru", "{a:1}",    "\"tab\there\"", "[1 2]",
                                        "{\"a\":1,}"};
  for (size_t i = 0; i < sizeof valid / sizeof *valid; i++)
    if (!ssa_json_valid(valid[i])) {
      fprintf(stderr, "FAIL valid JSON rejected: %s\n", valid[i]);
      failures++;
    }
  for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++)
    if (ssa_json_valid(invalid[i])) {
      fprintf(stderr, "FAIL invalid JSON accepted: %s\n", invalid[i]);
      failures++;
    }
  char deep[1200];
  memset(deep, '[', 600);
  memset(deep + 600, ']', 600);
  deep[1199] = 0; /* unbalanced and too deep: rejected without recursing 600 levels */
  CHECK(!ssa_json_valid(deep));
}

/* Independent UTF-8 check of a whole file (bytes only, no JSON parsing). */
static int valid_utf8(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    unsigned cp, len;
    if ((c & 0xE0) == 0xC0) {
      cp = c & 0x1F;
      len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      cp = c & 0x0F;
      len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      cp = c & 0x07;
      len = 4;
    } else
      return 0;
    if (i + len > n) return 0;
    for (unsigned k = 1; k < len; k++) {
      if ((p[i + k] & 0xC0) != 0x80) return 0;
      cp = cp << 6 | (p[i + k] & 0x3F);
    }
    unsigned min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += len;
  }
  return 1;
}

static int write_run(const char *dir) {
  mkdir(dir, 0755);
  char path[4200];
  snprintf(path, sizeof path, "%s/rank-00000.trace.zst", dir);
  stepscope_header h;
  memset(&h, 0, sizeof h);
  h.rank = 0;
  h.world_size = 1;
  h.clock_domain = STEPSCOPE_CLOCK_MONOTONIC;
  h.hostname = "host\xFF\xFE";
  h.device_name = "GPU \xC0\xAF";
  h.config_json = "{\"model\":\"gpt\xE2\x82\""; /* damaged: not JSON, bad UTF-8 */
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, NULL, &err);
  if (!w) {
    fprintf(stderr, "writer: %s\n", err.message);
    return -1;
  }
  uint32_t bad_kernel = stepscope_intern(w, "gemm\xED\xA0\x80kernel");
  uint32_t good_kernel = stepscope_intern(w, "gemm_\xC3\xA9");
  uint32_t stream_name = stepscope_intern(w, "compute\xF4\x90\x80\x80");
  uint32_t launch = stepscope_intern(w, "cudaLaunch\x80");
  uint32_t step = stepscope_intern(w, "step"), dom = stepscope_intern(w, "stepscope");
  uint32_t fwd = stepscope_intern(w, "forward\xE0\x80\x80");
  uint32_t args = stepscope_intern(w, "{\"layer\":\"\xFF\"}");
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_STREAM;
  r.u.stream.stream = 7;
  r.u.stream.stream_kind = STEPSCOPE_STREAM_GPU;
  r.u.stream.name = stream_name;
  stepscope_write(w, &r);
  uint64_t t = 1000000;
  for (uint64_t s = 0; s < 2; s++) {
    uint64_t s0 = t;
    for (uint64_t k = 0; k < 4; k++) {
      uint64_t corr = s * 4 + k + 1;
      memset(&r, 0, sizeof r);
      r.kind = STEPSCOPE_REC_API;
      r.u.api.start_ns = t;
      r.u.api.end_ns = t + 1000;
      r.u.api.correlation_id = corr;
      r.u.api.thread = 11;
      r.u.api.name = launch;
      stepscope_write(w, &r);
      memset(&r, 0, sizeof r);
      r.kind = STEPSCOPE_REC_KERNEL;
      r.u.kernel.start_ns = t + 2000;
      r.u.kernel.end_ns = t + 5000;
      r.u.kernel.correlation_id = corr;
      r.u.kernel.stream = 7;
      r.u.kernel.name = k % 2 ? bad_kernel : good_kernel;
      stepscope_write(w, &r);
      t += 6000;
    }
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_RANGE;
    r.u.range.start_ns = s0;
    r.u.range.end_ns = t;
    r.u.range.thread = 11;
    r.u.range.name = fwd;
    r.u.range.args = args;
    stepscope_write(w, &r);
    r.u.range.name = step;
    r.u.range.domain = dom;
    r.u.range.args = 0;
    r.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64;
    r.u.range.payload = s;
    stepscope_write(w, &r);
    t += 10000;
  }
  if (stepscope_writer_close(w, &err) != 0) {
    fprintf(stderr, "writer close: %s\n", err.message);
    return -1;
  }
  return 0;
}

static void check_file(const char *path, const char *what, const char *extra) {
  size_t n = 0;
  char *buf = read_all(path, &n);
  CHECK(buf != NULL && n > 0);
  if (!buf) return;
  if (!valid_utf8((const unsigned char *)buf, n)) {
    fprintf(stderr, "FAIL %s is not valid UTF-8\n", what);
    failures++;
  }
  /* the replaced names are there (memmem: the file is not NUL-terminated) */
  static const char *const want[] = {"gemm" R R R "kernel", "compute" R R R R, "host" R R,
                                     "gemm_\xC3\xA9"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (!memmem(buf, n, want[i], strlen(want[i]))) {
      fprintf(stderr, "FAIL %s lacks the sanitized name #%zu\n", what, i);
      failures++;
    }
  }
  if (extra && !memmem(buf, n, extra, strlen(extra))) {
    fprintf(stderr, "FAIL %s lacks %s\n", what, extra);
    failures++;
  }
  free(buf);
}

static void end_to_end(void) {
  char dir[] = "/tmp/ssa-utf8-run-XXXXXX";
  if (!mkdtemp(dir)) {
    failures++;
    return;
  }
  if (write_run(dir) != 0) {
    failures++;
    return;
  }
  ssa_run run;
  stepscope_error e;
  ssa_load_options lo = {.threads = 1, .progress = 0};
  if (ssa_run_load(&run, dir, &lo, &e) != 0) {
    fprintf(stderr, "FAIL load: %s\n", e.message);
    failures++;
    return;
  }
  ssa_analysis a;
  ssa_options opt;
  ssa_options_default(&opt);
  CHECK(ssa_analyze(&run, &opt, &a, &e) == 0);
  char report[4300], trace[4300];
  snprintf(report, sizeof report, "%s/report.json", dir);
  snprintf(trace, sizeof trace, "%s/trace.json", dir);
  ssa_out o;
  CHECK(ssa_out_open(&o, report) == 0);
  ssa_report_json(&a, &o);
  CHECK(ssa_out_close(&o) == 0);
  ssa_export_stats st;
  CHECK(ssa_export_chrome(&a, trace, &st, &e) == 0);
  check_file(report, "JSON report", "\"config\":{\"unparsed\":\"{\\\"model\\\":\\\"gpt" R);
  check_file(trace, "Chrome export", NULL);
  /* a configuration that is JSON but holds invalid UTF-8 stays an object */
  free(run.ranks[0].config_json);
  run.ranks[0].config_json = strdup("{\"model\":\"gpt\xE2\x82\"}");
  CHECK(run.ranks[0].config_json != NULL);
  CHECK(ssa_out_open(&o, report) == 0);
  ssa_report_json(&a, &o);
  CHECK(ssa_out_close(&o) == 0);
  check_file(report, "JSON report (JSON config)", "\"config\":{\"model\":\"gpt" R "\"}");
  ssa_analysis_free(&a);
  ssa_run_free(&run);
  unlink(report);
  unlink(trace);
  char p[4300];
  snprintf(p, sizeof p, "%s/rank-00000.trace.zst", dir);
  unlink(p);
  rmdir(dir);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--write-run")) return write_run(argv[2]) ? 1 : 0;
  unit_cases();
  end_to_end();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
