/*
 * test_threads.c — many threads append at once while the background thread
 * closes frames on time: every record arrives exactly once and whole
 * (no torn record: each carries its own checksum-like fields), and each
 * thread's records in the order it appended them. The 1 ms flush interval
 * makes the background thread steal the threads' buffers a few hundred times
 * while they fill and queue others: before the frame queue kept each
 * thread's order (2026-11-30), two runs in five read some thread's
 * records out of order here, and a crash could keep a thread's newer
 * records without its older ones (format.crash's gap).
 */
#include <pthread.h>

#include "test_util.h"

#define THREADS    8
#define PER_THREAD 400000

static stepscope_writer *g_w;
static uint32_t g_names[THREADS];

static void *producer(void *arg) {
  uint64_t t = (uint64_t)(uintptr_t)arg;
  for (uint64_t i = 0; i < PER_THREAD; i++) {
    stepscope_record rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_KERNEL;
    rec.u.kernel.start_ns = i * 1000 + t;
    rec.u.kernel.end_ns = rec.u.kernel.start_ns + 500;
    rec.u.kernel.correlation_id = t << 32 | i;
    rec.u.kernel.stream = t;
    rec.u.kernel.name = g_names[t];
    rec.u.kernel.grid[0] = (uint32_t)(i * 7 + t); /* derived from (t, i): detects tearing */
    rec.u.kernel.graph_id = ~(t << 32 | i);
    if (i % 1000 == 0) { /* strings interned while others append */
      char s[64];
      snprintf(s, sizeof s, "late string %llu/%llu", (unsigned long long)t, (unsigned long long)i);
      rec.u.kernel.name = stepscope_intern(g_w, s);
    }
    CHECK(stepscope_write(g_w, &rec) == 0);
  }
  return NULL;
}

int main(void) {
  char path[512];
  test_tmp_path(path, sizeof path, "threads");
  stepscope_header h = test_header(0);
  stepscope_writer_options opt = {
      .frame_bytes = 1 << 20, .flush_interval_ms = 1, .background_flush = 1};
  stepscope_error err;
  g_w = stepscope_writer_open(path, &h, &opt, &err);
  CHECK_MSG(g_w != NULL, "%s", err.message);
  if (!g_w) return 1;
  for (int t = 0; t < THREADS; t++) {
    char s[32];
    snprintf(s, sizeof s, "kernel of thread %d", t);
    g_names[t] = stepscope_intern(g_w, s);
  }
  pthread_t tids[THREADS];
  for (int t = 0; t < THREADS; t++)
    pthread_create(&tids[t], NULL, producer, (void *)(uintptr_t)t);
  for (int t = 0; t < THREADS; t++)
    pthread_join(tids[t], NULL);
  CHECK(stepscope_writer_records(g_w) == (uint64_t)THREADS * PER_THREAD);
  CHECK(stepscope_writer_dropped(g_w) == 0);
  CHECK_MSG(stepscope_writer_close(g_w, &err) == 0, "%s", err.message);

  static uint8_t seen[THREADS][PER_THREAD];
  stepscope_reader *r = stepscope_reader_open(path, &err);
  CHECK_MSG(r != NULL, "%s", err.message);
  if (!r) return 1;
  stepscope_record rec;
  int rc;
  uint64_t n = 0, bad = 0, dup = 0, out_of_order = 0;
  int64_t last[THREADS];
  for (int t = 0; t < THREADS; t++)
    last[t] = -1;
  while ((rc = stepscope_reader_next(r, &rec, &err)) == 1) {
    if (rec.kind != STEPSCOPE_REC_KERNEL) continue;
    uint64_t t = rec.u.kernel.stream, i = rec.u.kernel.correlation_id & 0xffffffffu;
    if (t >= THREADS || i >= PER_THREAD || rec.u.kernel.correlation_id >> 32 != t ||
        rec.u.kernel.start_ns != i * 1000 + t ||
        rec.u.kernel.end_ns != rec.u.kernel.start_ns + 500 ||
        rec.u.kernel.grid[0] != (uint32_t)(i * 7 + t) || rec.u.kernel.graph_id != ~(t << 32 | i)) {
      bad++;
      continue;
    }
    const char *name = stepscope_reader_string(r, rec.u.kernel.name);
    if (!name) bad++;
    if (seen[t][i]++) dup++;
    if ((int64_t)i <= last[t]) out_of_order++;
    last[t] = (int64_t)i;
    n++;
  }
  CHECK_MSG(rc == 0, "%s", err.message);
  CHECK_MSG(n == (uint64_t)THREADS * PER_THREAD, "read %llu records", (unsigned long long)n);
  CHECK(bad == 0 && dup == 0);
  CHECK_MSG(out_of_order == 0, "%llu record(s) read before an earlier one of their thread",
            (unsigned long long)out_of_order);
  stepscope_reader_close(r);
  unlink(path);
  if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
  return test_failures ? 1 : 0;
}
