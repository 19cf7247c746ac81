/*
 * kill_victim.c — the process run_kill_trials.py kills: it traces a steady
 * stream of records in linked mode (as the trainer does) and publishes how
 * many it has appended, so that the records a kill lost can be counted
 * exactly.
 *
 * usage: kill_victim RUN_DIR COUNTER_FILE [RATE_PER_S]
 *
 * Every record is a MARK whose payload is its sequence number (0, 1, 2...)
 * and whose time is CLOCK_MONOTONIC when it was appended. After each append
 * the sequence number + 1 is stored in COUNTER_FILE (a shared mapping, 8
 * bytes): a SIGKILL leaves there how many records the program had handed to
 * the tracer. Records are appended in bursts of 100 at RATE_PER_S on average
 * (default 200,000/s). The writer's options are the defaults (flush every
 * 200 ms, background thread); STEPSCOPE_BENCH_FLUSH_MS overrides the flush
 * interval.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "stepscope.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: kill_victim RUN_DIR COUNTER_FILE [RATE_PER_S]\n");
    return 2;
  }
  double rate = argc > 3 ? atof(argv[3]) : 200000.0;
  int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 8) != 0) {
    perror(argv[2]);
    return 1;
  }
  volatile uint64_t *published = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (published == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  stepscope_writer_options wopt = {.background_flush = 1};
  const char *flush = getenv("STEPSCOPE_BENCH_FLUSH_MS");
  if (flush) wopt.flush_interval_ms = (unsigned)atoi(flush);
  stepscope_start_options opt = {.run_dir = argv[1],
                                 .rank = 0,
                                 .world_size = 1,
                                 .local_rank = 0,
                                 .producer = "kill_victim",
                                 .writer = &wopt};
  stepscope_error err;
  if (stepscope_start(&opt, &err) != 0) {
    fprintf(stderr, "kill_victim: %s\n", err.message);
    return 1;
  }
  stepscope_writer *w = stepscope_current();
  uint32_t name = stepscope_intern(w, "tick");
  printf("ready\n");
  fflush(stdout);
  uint64_t seq = 0;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    for (int i = 0; i < 100; i++, seq++) {
      stepscope_record rec = {.kind = STEPSCOPE_REC_MARK};
      rec.u.mark.time_ns = stepscope_now_ns();
      rec.u.mark.name = name;
      rec.u.mark.payload_kind = STEPSCOPE_PAYLOAD_UINT64;
      rec.u.mark.payload = seq;
      stepscope_write(w, &rec);
      *published = seq + 1;
    }
    /* pace: sleep until the time the next burst is due */
    double due = (double)seq / rate;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double elapsed = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
    if (due > elapsed) {
      double s = due - elapsed;
      struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
      nanosleep(&ts, NULL);
    }
  }
}
