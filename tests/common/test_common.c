/*
 * test_common.c — common/: the one JSON string escaper (every form it writes, bytes that are
 * not UTF-8, the HTML-safe mode, a length that cuts a sequence, the fixed-buffer helper's
 * cut and count), the JSON skimmer, mkdir -p and write-all, array growth, the hash against
 * FNV-1a's published vectors, and which files of a run directory are stepscope's derived
 * outputs (removed by --force) and which are not (a user's file, a PyTorch trace, a prediction),
 * and the per-thread cache: each thread its own entry, freed at the thread's exit, the main
 * thread's kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sc_file.h"
#include "sc_grow.h"
#include "sc_hash.h"
#include "sc_json.h"
#include "sc_json_skim.h"
#include "sc_run_outputs.h"
#include "sc_thread_cache.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
    }                                                                                              \
  } while (0)

typedef struct sink {
  char buf[512];
  size_t len;
} sink;

static void put(void *ctx, const char *bytes, size_t n) {
  sink *s = ctx;
  if (s->len + n < sizeof s->buf) memcpy(s->buf + s->len, bytes, n);
  s->len += n;
  s->buf[s->len < sizeof s->buf ? s->len : sizeof s->buf - 1] = 0;
}

static void expect(const char *in, size_t len, unsigned flags, const char *want) {
  sink s = {.len = 0};
  sc_json_string(in, len, flags, put, &s);
  CHECK(strcmp(s.buf, want) == 0, "escape of %zu bytes: got [%s] want [%s]", len, s.buf, want);
}
#define EXPECT(in, flags, want) expect(in, sizeof in - 1, flags, want)

static void test_escaper(void) {
  EXPECT("plain", 0, "\"plain\"");
  EXPECT("", 0, "\"\"");
  EXPECT("q\"b\\", 0, "\"q\\\"b\\\\\"");
  EXPECT("a\nb\tc\rd", 0, "\"a\\nb\\tc\\rd\"");
  EXPECT("\x01\x1f\x7f", 0, "\"\\u0001\\u001f\\u007f\"");
  /* C1 controls (U+0080..U+009F: CSI, OSC, ... to a terminal) escaped; U+00A0 on is text */
  EXPECT("\xc2\x80\xc2\x9b"
         "2J\xc2\x9f\xc2\xa0",
         0,
         "\"\\u0080\\u009b"
         "2J\\u009f\xc2\xa0\"");
  EXPECT("\x1b[2J", 0, "\"\\u001b[2J\"");
  EXPECT("<a&b>", 0, "\"<a&b>\"");
  EXPECT("<a&b>", SC_JSON_HTML_SAFE, "\"\\u003ca\\u0026b\\u003e\"");
  EXPECT("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 0,
         "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  /* not UTF-8: each maximal bad subpart becomes one U+FFFD */
  EXPECT("node\xff\xfe-a", 0, "\"node\xef\xbf\xbd\xef\xbf\xbd-a\"");
  EXPECT("\xe2\x82-", 0, "\"\xef\xbf\xbd-\"");                           /* cut 3-byte sequence */
  EXPECT("\xc0\xaf", 0, "\"\xef\xbf\xbd\xef\xbf\xbd\"");                 /* overlong */
  EXPECT("\xed\xa0\x80", 0, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""); /* surrogate */
  EXPECT("\xf4\x90\x80\x80", 0,
         "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""); /* > U+10FFFF */
  /* a length that ends inside a sequence: never read past it */
  expect("ab\xe2\x82\xac", 4, 0, "\"ab\xef\xbf\xbd\"");
  expect("ab\xe2\x82\xac", 3, 0, "\"ab\xef\xbf\xbd\"");
  expect("a\0b", 3, 0, "\"a\\u0000b\""); /* a length, not a NUL, ends the text */
  sink s = {.len = 0};
  sc_json_string(NULL, 5, 0, put, &s);
  CHECK(strcmp(s.buf, "\"\"") == 0, "NULL: [%s]", s.buf);
}

static void test_buffer_helper(void) {
  char buf[8];
  size_t at = 0;
  sc_json_string_buf(buf, sizeof buf, &at, "a\"b", 0);
  CHECK(at == 6 && strcmp(buf, "\"a\\\"b\"") == 0, "fits: at %zu [%s]", at, buf);
  at = 0;
  sc_json_string_buf(buf, sizeof buf, &at, "abcdefghij", 0);
  CHECK(at == 12, "counts the whole literal: %zu", at);
  CHECK(strlen(buf) == 7 && memcmp(buf, "\"abcdef", 7) == 0, "cut and NUL-terminated: [%s]", buf);
  at = 3; /* appends at *at */
  memcpy(buf, "xyz", 4);
  sc_json_string_buf(buf, sizeof buf, &at, "q", 0);
  CHECK(at == 6 && strcmp(buf, "xyz\"q\"") == 0, "append: at %zu [%s]", at, buf);
  at = 20; /* already past the end: nothing written, still counted */
  sc_json_string_buf(buf, sizeof buf, &at, "q", 0);
  CHECK(at == 23 && strcmp(buf, "xyz\"q\"") == 0, "past the end: at %zu [%s]", at, buf);
}

static void test_files(void) {
  char dir[] = "/tmp/test_common_XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char path[256];
  snprintf(path, sizeof path, "%s/a/b/c", dir);
  CHECK(sc_mkdir_p(path, 0755) == 0, "mkdir -p %s: %s", path, strerror(errno));
  CHECK(sc_mkdir_p(path, 0755) == 0, "mkdir -p of an existing directory");
  char file[300];
  snprintf(file, sizeof file, "%s/a/f", dir);
  int fd = open(file, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  static char big[1 << 20];
  for (size_t i = 0; i < sizeof big; i++)
    big[i] = (char)(i * 7);
  CHECK(fd >= 0 && sc_write_all(fd, big, sizeof big) == 0, "write_all");
  close(fd);
  struct stat st;
  CHECK(stat(file, &st) == 0 && st.st_size == (off_t)sizeof big, "written size");
  errno = 0;
  CHECK(sc_mkdir_p(file, 0755) == -1 && errno == ENOTDIR, "mkdir -p over a file: ENOTDIR");
  snprintf(path, sizeof path, "%s/a/f/x", dir);
  CHECK(sc_mkdir_p(path, 0755) == -1, "mkdir -p below a file fails");
  CHECK(sc_write_all(-1, "x", 1) == -1 && errno == EBADF, "write_all to a bad descriptor");
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0, "cleanup");
}

static void test_skimmer(void) {
  const char *doc = " { \"a\" : 1, \"s\":\"x\\\"y\", \"o\":{\"b\":[1,{\"c\":2}],\"d\":-3.5e2},"
                    "\"e\":{} , \"last\":true}";
  const char *v = sc_json_find(doc, "a");
  CHECK(v && *v == '1', "a");
  v = sc_json_find(doc, "o.d");
  CHECK(v && strncmp(v, "-3.5e2", 6) == 0, "o.d: %s", v ? v : "NULL");
  v = sc_json_find(doc, "last");
  CHECK(v && strncmp(v, "true", 4) == 0, "last (after an escaped quote and an empty object)");
  CHECK(sc_json_find(doc, "o.b.c") == NULL, "a path through an array is not followed");
  CHECK(sc_json_find(doc, "missing") == NULL, "missing key");
  CHECK(sc_json_find(doc, "o.missing") == NULL, "missing nested key");
  v = sc_json_find(doc, "s");
  CHECK(v && sc_json_skip_string(v) && *sc_json_skip_string(v) == ',', "skip an escaped string");
  const char *arr = "[1, \"]\", {\"k\": [2]}] tail";
  const char *e = sc_json_skip_value(arr);
  CHECK(e && strcmp(e, " tail") == 0, "skip an array holding a bracket in a string");
  CHECK(sc_json_skip_value("{\"a\" 1}") == NULL, "member without a colon");
  CHECK(sc_json_skip_value("[1, 2") == NULL, "unterminated array");
  CHECK(sc_json_skip_string("\"abc") == NULL, "unterminated string");
  CHECK(sc_json_skip_string("\"ab\\") == NULL, "string ending in a backslash");
  char deep[300];
  memset(deep, '[', 100);
  memset(deep + 100, ']', 100);
  deep[200] = 0;
  CHECK(sc_json_skip_value(deep) == NULL, "nesting past 64 levels is refused");
  memset(deep, '[', 60);
  memset(deep + 60, ']', 60);
  deep[120] = 0;
  CHECK(sc_json_skip_value(deep) == deep + 120, "60 levels are walked");
  CHECK(sc_json_find("[1]", "a") == NULL && sc_json_find("", "a") == NULL, "not an object");
}

static void test_hash(void) {
  /* FNV-1a 64 test vectors (Fowler, Noll, Vo: the reference's test suite) */
  CHECK(sc_fnv1a(SC_FNV1A_INIT, "", 0) == 0xcbf29ce484222325ull, "fnv1a('')");
  CHECK(sc_fnv1a(SC_FNV1A_INIT, "a", 1) == 0xaf63dc4c8601ec8cull, "fnv1a('a')");
  CHECK(sc_fnv1a(SC_FNV1A_INIT, "foobar", 6) == 0x85944171f73967e8ull, "fnv1a('foobar')");
  CHECK(sc_fnv1a_str(SC_FNV1A_INIT, "foobar") == 0x85944171f73967e8ull, "fnv1a_str('foobar')");
  uint64_t h = sc_fnv1a(sc_fnv1a(SC_FNV1A_INIT, "foo", 3), "bar", 3);
  CHECK(h == 0x85944171f73967e8ull, "chained pieces hash as one");
}

/* Writes `n` bytes of `bytes` as dir/name. */
static void put_file(const char *dir, const char *name, const char *bytes, size_t n) {
  char path[300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  CHECK(fd >= 0 && sc_write_all(fd, bytes, n) == 0, "write %s", path);
  if (fd >= 0) close(fd);
}
#define PUT(dir, name, literal) put_file(dir, name, literal, sizeof literal - 1)

static void test_derived_outputs(void) {
  char dir[] = "/tmp/test_common_XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  /* stepscope's, as its writers begin them */
  PUT(dir, "trace.json", "{\"traceEvents\":[\n{\"ph\":\"M\",\"pid\":1}]}");
  PUT(dir, "report.json", "{\"schema_version\":1,\"generator\":\"stepscope analyze 0.1.0\"}");
  PUT(dir, "diff.json", "{\"schema_version\":2,\"kind\":\"stepscope.diff\",\"a\":{}}");
  PUT(dir, "trace.json.gz", "\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\x03zz");
  PUT(dir, "run.pftrace",
      "\x0a\x1d\xe2\x03\x1a\x08\x01\x58\x03\x1a\x14\x08\x01\x32\x10rank 0 (vm, cpu)");
  PUT(dir, "view.html",
      "<!DOCTYPE html>\n<!--\n  index.html \xe2\x80\x94 the stepscope viewer's page.");
  /* not stepscope's derived outputs */
  PUT(dir, "notes.json", "{\"mine\":1}");
  PUT(dir, "plan.json", "{\"schema_version\":1,\"kind\":\"stepscope.plan\",\"job\":{}}");
  PUT(dir, "kineto.json", "{\n  \"schemaVersion\": 1, \"traceEvents\": []}");
  /* Python's gzip (PyTorch's tensorboard_trace_handler): a time and OS 255 */
  PUT(dir, "worker0.pt.trace.json.gz", "\x1f\x8b\x08\x00\x12\x34\x56\x67\x02\xffzz");
  PUT(dir, "other.pftrace",
      "\x0a\x05\x12\x03"
      "abc");
  PUT(dir, "mine.html", "<!DOCTYPE html><p>mine</p>");
  PUT(dir, "trace.txt", "{\"traceEvents\":[\n{\"ph\":\"M\"}]}");
  char link[300];
  snprintf(link, sizeof link, "%s/link.json", dir);
  CHECK(symlink("trace.json", link) == 0, "symlink");
  char path[300];
  snprintf(path, sizeof path, "%s/report.json", dir);
  CHECK(sc_derived_output_kind(path) && !strcmp(sc_derived_output_kind(path), "report"),
        "report.json is a report");
  CHECK(sc_derived_output_kind(link) == NULL, "a link is never taken for one");
  char removed[256], failed[64];
  size_t n = sc_remove_derived_outputs(dir, removed, sizeof removed, failed, sizeof failed);
  CHECK(n == 6, "6 derived outputs removed, not %zu (%s)", n, removed);
  CHECK(failed[0] == '\0', "none failed: %s", failed);
  static const char *const gone[] = {"trace.json",    "report.json", "diff.json",
                                     "trace.json.gz", "run.pftrace", "view.html"};
  static const char *const kept[] = {
      "notes.json",    "plan.json", "kineto.json", "worker0.pt.trace.json.gz",
      "other.pftrace", "mine.html", "trace.txt",   "link.json"};
  struct stat st;
  for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, gone[i]);
    CHECK(lstat(path, &st) != 0, "%s removed", gone[i]);
    CHECK(strstr(removed, gone[i]) != NULL, "%s named in \"%s\"", gone[i], removed);
  }
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, kept[i]);
    CHECK(lstat(path, &st) == 0, "%s kept", kept[i]);
  }
  /* a list that does not fit is cut with "..." */
  PUT(dir, "report.json", "{\"schema_version\":1,\"generator\":\"stepscope analyze 0.1.0\"}");
  PUT(dir, "diff.json", "{\"schema_version\":2,\"kind\":\"stepscope.diff\",\"a\":{}}");
  char small[16];
  n = sc_remove_derived_outputs(dir, small, sizeof small, failed, sizeof failed);
  CHECK(n == 2 && strlen(small) < sizeof small && strstr(small, "...") != NULL,
        "cut list \"%s\" (%zu removed)", small, n);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0, "cleanup");
}

static void test_grow(void) {
  size_t cap = 0;
  int *a = sc_grow(NULL, &cap, 5, sizeof *a, 4);
  CHECK(a && cap == 8, "from empty: first 4 doubled to 8 for 5 (cap %zu)", cap);
  int *same = sc_grow(a, &cap, 8, sizeof *a, 4);
  CHECK(same == a && cap == 8, "enough room: the same array (cap %zu)", cap);
  for (int i = 0; i < 8; i++)
    a[i] = i;
  int *b = sc_grow(a, &cap, 33, sizeof *b, 4);
  CHECK(b && cap == 64 && b[7] == 7, "8 doubled to 64 for 33, contents kept (cap %zu)", cap);
  if (b) a = b;
  CHECK(sc_grow(a, &cap, (size_t)-1, sizeof *a, 4) == NULL && cap == 64,
        "an impossible size: NULL, capacity unchanged (cap %zu)", cap);
  free(a);
}

/* The per-thread cache: the user's thread-local pointer and destructor, as reader_cache.c's. */
typedef struct cached {
  int owner;
} cached;
static _Thread_local cached *thread_cached;
static int destroyed; /* entries freed at a thread's exit (under destroyed_lock) */
static pthread_mutex_t destroyed_lock = PTHREAD_MUTEX_INITIALIZER;

static void cached_destroy(void *p) {
  if (thread_cached == p) thread_cached = NULL;
  free(p);
  pthread_mutex_lock(&destroyed_lock);
  destroyed++;
  pthread_mutex_unlock(&destroyed_lock);
}

static sc_thread_cache test_cache = SC_THREAD_CACHE_INIT(cached_destroy);

/* An entry for the calling thread (made once), marked with `owner`; the entry. */
static cached *cached_entry(int owner) {
  if (!thread_cached) {
    thread_cached = sc_thread_cache_new(&test_cache, sizeof *thread_cached);
    if (thread_cached) thread_cached->owner = owner;
  }
  return thread_cached;
}

static void *cache_thread(void *arg) {
  int owner = (int)(intptr_t)arg;
  cached *first = cached_entry(owner), *again = cached_entry(-1);
  return (void *)(intptr_t)(first && first == again && first->owner == owner);
}

static void test_thread_cache(void) {
  cached *mine = cached_entry(0);
  CHECK(mine && mine->owner == 0 && cached_entry(9) == mine, "the main thread's entry, made once");
  pthread_t th[4];
  for (int k = 0; k < 4; k++)
    CHECK(pthread_create(&th[k], NULL, cache_thread, (void *)(intptr_t)(k + 1)) == 0, "start");
  for (int k = 0; k < 4; k++) {
    void *ok = NULL;
    pthread_join(th[k], &ok);
    CHECK(ok != NULL, "thread %d: its own entry, made once", k + 1);
  }
  pthread_mutex_lock(&destroyed_lock);
  int n = destroyed;
  pthread_mutex_unlock(&destroyed_lock);
  CHECK(n == 4, "%d entries freed at the threads' exits, want 4", n);
  CHECK(thread_cached == mine && mine->owner == 0, "the main thread's entry is kept");
  free(mine); /* the process would leave it to its exit */
  thread_cached = NULL;
}

int main(void) {
  test_escaper();
  test_buffer_helper();
  test_files();
  test_grow();
  test_skimmer();
  test_hash();
  test_derived_outputs();
  test_thread_cache();
  if (failures)
    fprintf(stderr, "%d failures\n", failures);
  else
    printf("common: all checks passed\n");
  return failures != 0;
}
