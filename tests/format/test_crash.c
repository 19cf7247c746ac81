/*
 * test_crash.c — a child process appends records as fast as it can with a
 * 100 ms flush interval and is killed with SIGKILL. The file it leaves must
 * open, read without error up to its last complete frame (a warning at most)
 * and hold a gap-free prefix of what was written. Done several times, killing
 * at different moments.
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "test_util.h"

static void child(const char *path) {
  stepscope_header h = test_header(1);
  stepscope_writer_options opt = {.flush_interval_ms = 100, .background_flush = 1};
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, &opt, &err);
  if (!w) _exit(3);
  uint32_t name = stepscope_intern(w, "busy kernel");
  for (uint64_t i = 0;; i++) {
    stepscope_record rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_KERNEL;
    rec.u.kernel.start_ns = i * 10;
    rec.u.kernel.end_ns = i * 10 + 5;
    rec.u.kernel.correlation_id = i;
    rec.u.kernel.name = name;
    stepscope_write(w, &rec);
    if (i % 4096 == 0) {
      struct timespec ts = {0, 200000}; /* 0.2 ms: keep the rate realistic */
      nanosleep(&ts, NULL);
    }
  }
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
    uint64_t expect = 0, gaps = 0;
    while ((rc = stepscope_reader_next(r, &rec, &err)) == 1) {
      if (rec.kind != STEPSCOPE_REC_KERNEL) continue;
      if (rec.u.kernel.correlation_id != expect) gaps++;
      expect = rec.u.kernel.correlation_id + 1;
    }
    CHECK_MSG(rc == 0, "round %d: %s", round, err.message);
    CHECK(gaps == 0);
    CHECK_MSG(expect > 0, "round %d: nothing flushed before the kill", round);
    fprintf(stderr, "round %d: %llu records survived the kill, %zu warning(s)\n", round,
            (unsigned long long)expect, stepscope_reader_warning_count(r));
    stepscope_reader_close(r);
  }
  unlink(path);
  if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
  return test_failures ? 1 : 0;
}
