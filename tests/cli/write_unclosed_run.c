/*
 * write_unclosed_run.c — writes a 3-rank run for the "trace was not closed"
 * warnings: rank 0 is closed normally and its records run to t = 2.00 s;
 * rank 1 writes records up to t = 1.02 s, flushes them and its process ends
 * without closing the writer (as a crash or SIGKILL leaves it); rank 2 is
 * closed as the linked tracer closes it on SIGTERM (END reason "signal").
 *
 * usage: write_unclosed_run DIR
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stepscope.h"
#include "writer_internal.h"

static stepscope_writer *open_rank(const char *dir, int rank) {
  char path[4096];
  snprintf(path, sizeof path, "%s/rank-%05d.trace.zst", dir, rank);
  stepscope_header h = {.rank = rank,
                        .world_size = 3,
                        .local_rank = rank,
                        .pid = 100 + rank,
                        .clock_domain = STEPSCOPE_CLOCK_MONOTONIC,
                        .start_ns = 1000,
                        .hostname = "node-a",
                        .producer = "write_unclosed_run",
                        .device_name = "cpu"};
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, NULL, &err);
  if (!w) fprintf(stderr, "%s\n", err.message);
  return w;
}

/* Kernels every 10 ms from 10 ms to last_ns, and two steps. */
static void write_records(stepscope_writer *w, uint64_t last_ns) {
  uint32_t gemm = stepscope_intern(w, "gemm");
  uint32_t step = stepscope_intern(w, "step"), domain = stepscope_intern(w, "stepscope");
  stepscope_record r;
  for (int s = 0; s < 2; s++) {
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_RANGE;
    r.u.range.start_ns = 10000000 + (uint64_t)s * (last_ns / 2);
    r.u.range.end_ns = (uint64_t)(s + 1) * (last_ns / 2);
    r.u.range.thread = 1;
    r.u.range.name = step;
    r.u.range.domain = domain;
    r.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64;
    r.u.range.payload = (uint64_t)s;
    stepscope_write(w, &r);
  }
  for (uint64_t t = 10000000; t + 5000000 <= last_ns; t += 10000000) {
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_KERNEL;
    r.u.kernel.start_ns = t;
    r.u.kernel.end_ns = t + 5000000;
    r.u.kernel.stream = 7;
    r.u.kernel.name = gemm;
    stepscope_write(w, &r);
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: write_unclosed_run DIR\n");
    return 2;
  }
  const char *dir = argv[1];
  mkdir(dir, 0755);
  stepscope_error err;
  stepscope_writer *w0 = open_rank(dir, 0);
  if (!w0) return 1;
  write_records(w0, 2000000000);
  if (stepscope_writer_close(w0, &err) != 0) return 1;

  pid_t pid = fork(); /* rank 1: a process that ends with its trace open */
  if (pid == 0) {
    stepscope_writer *w1 = open_rank(dir, 1);
    if (!w1) _exit(1);
    write_records(w1, 1020000000);
    _exit(stepscope_writer_flush(w1, &err) == 0 ? 0 : 1);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;

  stepscope_writer *w2 = open_rank(dir, 2);
  if (!w2) return 1;
  write_records(w2, 1990000000);
  if (writer_retire_reason(w2, STEPSCOPE_END_SIGNAL, SIGTERM, &err) != 0) return 1;
  /* retire keeps the writer's shell (for late appenders); free it (no
   * background thread here, so the second retire inside close is a no-op) */
  stepscope_writer_close(w2, NULL);
  return 0;
}
