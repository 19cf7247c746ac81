/*
 * trace_check.h — helpers for the GPU tracer tests: a CHECK macro that
 * reports file:line and keeps going (the test fails at the end), temporary
 * run directories, and loading every record of a trace file into memory
 * with its strings resolved.
 */
#ifndef STEPSCOPE_TESTS_GPU_TRACE_CHECK_H
#define STEPSCOPE_TESTS_GPU_TRACE_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepscope.h"

static int check_failures;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      check_failures++;                                                                            \
    }                                                                                              \
  } while (0)

typedef struct loaded_trace {
  stepscope_reader *reader;
  stepscope_record *records;
  size_t count;
} loaded_trace;

/* Reads every record of `path`; returns 0 or -1 (message printed). */
static inline int load_trace(const char *path, loaded_trace *t) {
  stepscope_error err;
  memset(t, 0, sizeof *t);
  t->reader = stepscope_reader_open(path, &err);
  if (!t->reader) {
    fprintf(stderr, "cannot open %s: %s\n", path, err.message);
    return -1;
  }
  size_t cap = 0;
  for (;;) {
    stepscope_record r;
    int rc = stepscope_reader_next(t->reader, &r, &err);
    if (rc == 0) break;
    if (rc < 0) {
      fprintf(stderr, "read error in %s: %s\n", path, err.message);
      return -1;
    }
    if (t->count == cap) {
      cap = cap ? cap * 2 : 256;
      stepscope_record *grown = realloc(t->records, cap * sizeof *grown);
      if (!grown) return -1;
      t->records = grown;
    }
    t->records[t->count++] = r;
  }
  return 0;
}

static inline const char *trace_string(const loaded_trace *t, uint32_t id) {
  const char *s = id ? stepscope_reader_string(t->reader, id) : NULL;
  return s ? s : "";
}

static inline size_t count_kind(const loaded_trace *t, uint32_t kind) {
  size_t n = 0;
  for (size_t i = 0; i < t->count; i++)
    n += t->records[i].kind == kind;
  return n;
}

static inline void free_trace(loaded_trace *t) {
  if (t->reader) stepscope_reader_close(t->reader);
  free(t->records);
  memset(t, 0, sizeof *t);
}

/* A fresh directory under $TMPDIR (or /tmp); returns its path (static buffer). */
static inline const char *make_temp_dir(const char *tag) {
  static char path[512];
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(path, sizeof path, "%s/stepscope-%s-XXXXXX", base, tag);
  if (!mkdtemp(path)) {
    perror("mkdtemp");
    exit(1);
  }
  return path;
}

#endif /* STEPSCOPE_TESTS_GPU_TRACE_CHECK_H */
