/*
 * test_close_marker.c — a trace tells whether its writer closed it, and the
 * linked tracer closes it when a terminating signal arrives.
 *
 *   - a closed file ends with an END record: close state CLEAN;
 *   - a file of format 1.0 (before END records) reads as UNKNOWN, not as
 *     "not closed";
 *   - a process killed with SIGKILL leaves a file whose state is MISSING;
 *   - SIGTERM (and SIGINT, SIGHUP) to a process tracing in linked mode with
 *     a 10-minute flush interval: every record emitted before the signal is
 *     in the file, which ends with END(reason signal, the signal), and the
 *     process still dies of that signal;
 *   - a program with its own SIGTERM handler: the trace is flushed (not
 *     closed) before that handler runs, and the program goes on.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <zstd.h>

#include "record_codec.h"
#include "test_util.h"
#include "varint.h"

#define MARKS 1000

/* Reads a whole file; counts marks and END records (which the reader
 * consumes: there must be none); returns the close state. */
static int read_all(const char *path, int *marks, int *ends, int *sig) {
  stepscope_error err;
  *marks = *ends = 0;
  stepscope_reader *r = stepscope_reader_open(path, &err);
  CHECK_MSG(r != NULL, "%s", err.message);
  if (!r) return -1;
  stepscope_record rec;
  int rc;
  while ((rc = stepscope_reader_next(r, &rec, &err)) == 1) {
    if (rec.kind == STEPSCOPE_REC_MARK) ++*marks;
    if (rec.kind == STEPSCOPE_REC_END) ++*ends;
  }
  CHECK_MSG(rc == 0, "%s", err.message);
  int state = stepscope_reader_close_state(r, sig);
  stepscope_reader_close(r);
  return state;
}

static void test_closed_writer(void) {
  char path[512];
  test_tmp_path(path, sizeof path, "closed");
  stepscope_header h = test_header(0);
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, NULL, &err);
  CHECK_MSG(w != NULL, "%s", err.message);
  if (!w) return;
  stepscope_record rec = {.kind = STEPSCOPE_REC_MARK};
  rec.u.mark.time_ns = 5;
  CHECK(stepscope_write(w, &rec) == 0);
  stepscope_record end = {.kind = STEPSCOPE_REC_END}; /* the writer's own: refused */
  end.u.end.reason = STEPSCOPE_END_CLOSED;
  CHECK(stepscope_write(w, &end) != 0);
  CHECK(stepscope_writer_close(w, &err) == 0);
  int marks, ends, sig;
  CHECK(read_all(path, &marks, &ends, &sig) == STEPSCOPE_CLOSE_CLEAN);
  CHECK(marks == 1 && ends == 0 && sig == 0);
  unlink(path);
}

/* A format 1.0 file, made by hand: a header frame and a frame of one mark. */
static void test_old_format(void) {
  char path[512];
  test_tmp_path(path, sizeof path, "old");
  stepscope_header h = test_header(0);
  h.format_major = 1;
  h.format_minor = 0;
  uint8_t hb[4096], raw[256], cb[8192];
  size_t hl = (size_t)(codec_encode_header(hb, &h) - hb);
  codec_state st = {0, 0};
  uint8_t *p = codec_encode_block(&st, raw, 1);
  stepscope_record rec = {.kind = STEPSCOPE_REC_MARK};
  rec.u.mark.time_ns = 77;
  p = codec_encode(&st, p, &rec);
  FILE *f = fopen(path, "wb");
  fwrite(cb, 1, ZSTD_compress(cb, sizeof cb, hb, hl, 3), f);
  fwrite(cb, 1, ZSTD_compress(cb, sizeof cb, raw, (size_t)(p - raw), 3), f);
  fclose(f);
  int marks, ends, sig;
  CHECK(read_all(path, &marks, &ends, &sig) == STEPSCOPE_CLOSE_UNKNOWN);
  CHECK(marks == 1 && ends == 0);
  unlink(path);
}

static void start_linked(const char *dir, unsigned flush_ms) {
  static stepscope_writer_options wopt;
  wopt = (stepscope_writer_options){.flush_interval_ms = flush_ms, .background_flush = 1};
  stepscope_start_options opt = {.run_dir = dir,
                                 .rank = 0,
                                 .world_size = 1,
                                 .local_rank = 0,
                                 .producer = "test_close_marker",
                                 .writer = &wopt};
  stepscope_error err;
  if (stepscope_start(&opt, &err) != 0) {
    fprintf(stderr, "child: %s\n", err.message);
    _exit(3);
  }
}

static void test_sigkill(const char *dir) {
  pid_t pid = fork();
  if (pid == 0) {
    start_linked(dir, 600000);
    for (int i = 0; i < MARKS; i++)
      stepscope_mark_now("m", NULL);
    stepscope_writer_flush(stepscope_current(), NULL);
    raise(SIGKILL);
    _exit(4);
  }
  int status;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  char path[600];
  snprintf(path, sizeof path, "%s/rank-00000.trace.zst", dir);
  int marks, ends, sig;
  CHECK(read_all(path, &marks, &ends, &sig) == STEPSCOPE_CLOSE_MISSING);
  CHECK_MSG(marks == MARKS && ends == 0, "%d marks, %d ends", marks, ends);
}

static void test_terminating_signal(const char *dir, int signo) {
  int ready[2];
  CHECK(pipe(ready) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    signal(signo, SIG_DFL);    /* a background shell may have left SIGINT ignored */
    start_linked(dir, 600000); /* nothing is flushed by time: only the signal can */
    for (int i = 0; i < MARKS; i++)
      stepscope_mark_now("m", NULL);
    char c = 1;
    (void)!write(ready[1], &c, 1);
    for (;;)
      pause();
  }
  close(ready[1]);
  char c;
  CHECK(read(ready[0], &c, 1) == 1);
  close(ready[0]);
  kill(pid, signo);
  int status;
  waitpid(pid, &status, 0);
  CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == signo, "signal %d: status 0x%x", signo,
            status);
  char path[600];
  snprintf(path, sizeof path, "%s/rank-00000.trace.zst", dir);
  int marks, ends, sig;
  CHECK(read_all(path, &marks, &ends, &sig) == STEPSCOPE_CLOSE_SIGNAL);
  CHECK_MSG(marks == MARKS && ends == 0 && sig == signo, "%d marks, %d ends, signal %d", marks,
            ends, sig);
}

/* The program's own handler: set by the child before the trace starts. */
static volatile sig_atomic_t g_got_term;
static void own_handler(int sig) {
  g_got_term = sig;
}

static void test_chained_handler(const char *dir) {
  int ready[2];
  CHECK(pipe(ready) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = own_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    start_linked(dir, 600000);
    for (int i = 0; i < MARKS; i++)
      stepscope_mark_now("m", NULL);
    char c = 1;
    (void)!write(ready[1], &c, 1);
    while (!g_got_term)
      pause();
    /* the handler ran after the flush: the file already holds every mark */
    char path[600];
    snprintf(path, sizeof path, "%s/rank-00000.trace.zst", dir);
    int marks, ends, sig;
    int state = read_all(path, &marks, &ends, &sig);
    if (marks != MARKS || ends != 0 || state != STEPSCOPE_CLOSE_MISSING) {
      fprintf(stderr, "child: before stop: %d marks, %d ends, state %d\n", marks, ends, state);
      _exit(5);
    }
    stepscope_mark_now("after", NULL); /* the program goes on, and so does its trace */
    stepscope_stop();
    state = read_all(path, &marks, &ends, &sig);
    if (marks != MARKS + 1 || ends != 0 || state != STEPSCOPE_CLOSE_CLEAN) {
      fprintf(stderr, "child: after stop: %d marks, %d ends, state %d\n", marks, ends, state);
      _exit(6);
    }
    _exit(test_failures ? 7 : 0);
  }
  close(ready[1]);
  char c;
  CHECK(read(ready[0], &c, 1) == 1);
  close(ready[0]);
  kill(pid, SIGTERM);
  int status;
  waitpid(pid, &status, 0);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
}

int main(void) {
  test_closed_writer();
  test_old_format();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/stepscope-close-%ld", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
           (long)getpid());
  test_sigkill(dir);
  test_terminating_signal(dir, SIGTERM);
  test_terminating_signal(dir, SIGINT);
  test_terminating_signal(dir, SIGHUP);
  test_chained_handler(dir);
  char path[600];
  snprintf(path, sizeof path, "%s/rank-00000.trace.zst", dir);
  unlink(path);
  rmdir(dir);
  if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
  return test_failures ? 1 : 0;
}
