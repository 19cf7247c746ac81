/*
 * test_crash.c — a child process appends records from several threads as
 * fast as it can with a 100 ms flush interval and is killed with SIGKILL.
 * The file it leaves must open, read without error up to its last complete
 * frame (a warning at most) and hold, of each thread, a gap-free prefix of
 * what it wrote (a thread's newer records never without its older ones).
 * Done several times, killing at different moments.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "test_util.h"

#define THREADS 3

static stepscope_writer *g_w;
static uint32_t g_name;

/* Thread t's records: correlation ids 0, 1, 2, ... on stream t. */
static void *appender(void *arg) {
  uint64_t t = (uint64_t)(uintptr_t)arg;
  for (uint64_t i = 0;; i++) {
    stepscope_record rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_KERNEL;
    rec.u.kernel.start_ns = i * 10;
    rec.u.kernel.end_ns = i * 10 + 5;
    rec.u.kernel.correlation_id = i;
    rec.u.kernel.stream = t;
    rec.u.kernel.name = g_name;
    stepscope_write(g_w, &rec);
    if (i % 4096 == 0) {
      struct timespec ts = {0, 200000}; /* 0.2 ms: keep the rate realistic */
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

static void child(const char *path) {
  stepscope_header h = test_header(1);
  stepscope_writer_options opt = {.flush_interval_ms = 100, .background_flush = 1};
  stepscope_error err;
  g_w = stepscope_writer_open(path, &h, &opt, &err);
  if (!g_w) _exit(3);
  g_name = stepscope_intern(g_w, "busy kernel");
  pthread_t tids[THREADS];
  for (int t = 1; t < THREADS; t++)
    if (pthread_create(&tids[t], NULL, appender, (void *)(uintptr_t)t) != 0) _exit(4);
  appender((void *)(uintptr_t)0);
}

int main(void) {
  char path[512];
  test_tmp_path(path, sizeof path, "crash");
  for (int round = 0; round < 4; round++) {
    pid_t pid = fork();
    if (pid == 0) child(path);
    struct timespec ts = {0, 300000000 + round * 170000000L};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    stepscope_error err;
    /* The child's records are one kernel at constant time steps: zstd packs them 2000 to
     * 5000 times (real traces: 2-3), past the reader's default decompression limit once
     * more than 64 MiB of them were written (stepscope.h); the limits are not what this
     * test is about. */
    stepscope_reader_options ropt = {{STEPSCOPE_INFLATE_UNLIMITED, STEPSCOPE_INFLATE_UNLIMITED}};
    stepscope_reader *r = stepscope_reader_open_opts(path, &ropt, &err);
    CHECK_MSG(r != NULL, "round %d: %s", round, err.message);
    if (!r) continue;
    CHECK(stepscope_reader_header(r)->rank == 1);
    stepscope_record rec;
    int rc;
    uint64_t expect[THREADS] = {0}, gaps = 0, other = 0, kept = 0;
    while ((rc = stepscope_reader_next(r, &rec, &err)) == 1) {
      if (rec.kind != STEPSCOPE_REC_KERNEL) continue;
      uint64_t t = rec.u.kernel.stream;
      if (t >= THREADS) {
        other++;
        continue;
      }
      if (rec.u.kernel.correlation_id != expect[t]) gaps++;
      expect[t] = rec.u.kernel.correlation_id + 1;
      kept++;
    }
    CHECK_MSG(rc == 0, "round %d: %s", round, err.message);
    CHECK_MSG(gaps == 0 && other == 0, "round %d: %llu gap(s) in a thread's records, %llu stray",
              round, (unsigned long long)gaps, (unsigned long long)other);
    for (int t = 0; t < THREADS; t++)
      CHECK_MSG(expect[t] > 0, "round %d: nothing of thread %d flushed before the kill", round, t);
    fprintf(stderr, "round %d: %llu records survived the kill, %zu warning(s)\n", round,
            (unsigned long long)kept, stepscope_reader_warning_count(r));
    stepscope_reader_close(r);
  }
  unlink(path);
  if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
  return test_failures ? 1 : 0;
}
