/*
 * test_full_disk.c — the linked tracer when writing the trace fails (a full
 * disk, simulated with RLIMIT_FSIZE: writes past 64 KiB fail with EFBIG).
 *
 * A child process traces many records with a 20 ms flush interval, so the
 * background thread hits the limit while the program runs; it then goes on
 * (prints "went on"), stops the trace and exits 0. Its stderr must hold
 * exactly one warning saying that writing the trace failed and why, said
 * when it happened (before "went on"), and nothing at stop: not the old
 * "closing the trace failed:" followed by uninitialised bytes.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "test_util.h"

static void child(const char *dir) {
  signal(SIGXFSZ, SIG_IGN); /* a write past the limit then fails with EFBIG */
  struct rlimit lim = {64 << 10, 64 << 10};
  if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(3);
  static stepscope_writer_options wopt = {.flush_interval_ms = 20, .background_flush = 1};
  stepscope_start_options opt = {.run_dir = dir,
                                 .rank = 0,
                                 .world_size = 1,
                                 .local_rank = 0,
                                 .producer = "test_full_disk",
                                 .writer = &wopt};
  stepscope_error err;
  if (stepscope_start(&opt, &err) != 0) _exit(4);
  for (int i = 0; i < 10; i++)
    stepscope_mark_now("before", NULL);
  stepscope_writer_flush(stepscope_current(), NULL); /* a first frame that fits */
  char name[64];
  for (int i = 0; i < 200000; i++) { /* incompressible enough to pass 64 KiB */
    snprintf(name, sizeof name, "kernel %llu", (unsigned long long)test_rand());
    stepscope_mark_now(i % 8 == 0 ? name : "m", NULL);
    if (i % 2000 == 0) {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
  }
  struct timespec ts = {0, 100000000}; /* the background thread writes meanwhile */
  nanosleep(&ts, NULL);
  fprintf(stderr, "went on\n");
  stepscope_stop();
  _exit(0);
}

int main(void) {
  char dir[512], log[600], path[600];
  snprintf(dir, sizeof dir, "%s/stepscope-fulldisk-%ld",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
  snprintf(log, sizeof log, "%s.stderr", dir);
  snprintf(path, sizeof path, "%s/rank-00000.trace.zst", dir);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(2);
    dup2(fd, 2);
    child(dir);
  }
  int status;
  waitpid(pid, &status, 0);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
  char text[8192] = "";
  FILE *f = fopen(log, "r");
  CHECK(f != NULL);
  if (f) {
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
  }
  fprintf(stderr, "child's stderr:\n%s", text);
  const char *warn = strstr(text, "stepscope: writing the trace ");
  CHECK_MSG(warn != NULL, "no warning when writing failed");
  CHECK(warn && strstr(warn, "failed: File too large"));
  CHECK(warn && !strstr(warn + 1, "stepscope: writing the trace ")); /* once */
  const char *went_on = strstr(text, "went on");
  CHECK_MSG(went_on && warn && warn < went_on, "the warning must come when writing fails");
  CHECK_MSG(!strstr(text, "closing the trace failed"), "said again (or garbage) at close");
  /* the file holds what was written before: it reads, up to its last whole frame,
   * and it was not closed (the END record could not be written) */
  stepscope_error err;
  stepscope_reader *r = stepscope_reader_open(path, &err);
  CHECK_MSG(r != NULL, "%s", err.message);
  if (r) {
    stepscope_record rec;
    uint64_t n = 0;
    while (stepscope_reader_next(r, &rec, &err) == 1)
      n += rec.kind == STEPSCOPE_REC_MARK;
    CHECK_MSG(n >= 10, "%llu marks", (unsigned long long)n);
    CHECK(stepscope_reader_close_state(r, NULL) == STEPSCOPE_CLOSE_MISSING);
    stepscope_reader_close(r);
  }
  unlink(path);
  unlink(log);
  rmdir(dir);
  if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
  return test_failures ? 1 : 0;
}
