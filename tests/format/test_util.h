/*
 * test_util.h — the few helpers the format tests share: a CHECK macro that
 * reports file:line and keeps going, deterministic random numbers, and
 * helpers to write records and read a whole file back.
 */
#ifndef STEPSCOPE_TEST_UTIL_H
#define STEPSCOPE_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stepscope.h"

static int test_failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                     \
      test_failures++;                                                                             \
    }                                                                                              \
  } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                     \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      test_failures++;                                                                             \
    }                                                                                              \
  } while (0)

static uint64_t test_rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t test_rand(void) { /* splitmix64 */
  uint64_t z = (test_rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline stepscope_header test_header(int rank) {
  stepscope_header h = {0};
  h.rank = rank;
  h.world_size = 4;
  h.local_rank = rank;
  h.pid = 4242;
  h.clock_domain = STEPSCOPE_CLOCK_MONOTONIC;
  h.start_ns = 1000;
  h.hostname = "testhost";
  h.producer = "stepscope tests";
  h.device_name = "cpu";
  h.config_json = "{\"test\":true}";
  return h;
}

/* A temporary file path unique to this process. */
static inline void test_tmp_path(char *buf, size_t cap, const char *tag) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, cap, "%s/stepscope-test-%ld-%s.trace.zst", dir ? dir : "/tmp", (long)getpid(), tag);
}

#endif
