/*
 * kineto_check.h — what the Kineto import's C tests share: CHECK and
 * CHECK_EQ report file:line (CHECK_EQ with both values) and keep going,
 * counting into `failures`, which each test's main returns on; and
 * load_trace(), a trace file loaded (with classification rules or none) and
 * analysed, as the CLI does.
 */
#ifndef STEPSCOPE_KINETO_CHECK_H
#define STEPSCOPE_KINETO_CHECK_H

#include <stdio.h>
#include <string.h>

#include "ssa_metrics.h"
#include "ssa_import.h"

static int failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

#define CHECK_EQ(a, b)                                                                             \
  do {                                                                                             \
    long long va_ = (long long)(a), vb_ = (long long)(b);                                          \
    if (va_ != vb_) {                                                                              \
      fprintf(stderr, "%s:%d: %s = %lld, expected %lld\n", __FILE__, __LINE__, #a, va_, vb_);      \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* A trace loaded and analysed; `ok` when both worked. */
typedef struct loaded {
  ssa_run run;
  ssa_analysis an;
  int ok;
} loaded;

/* Loads DIR/NAME (one thread) with `rules` (NULL: the built-in classification) and
 * analyses it; a failure is counted and reported. 0 or -1. */
static inline int load_trace(const char *dir, const char *name, const ssa_comm_rules *rules,
                             loaded *l) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  memset(l, 0, sizeof *l);
  stepscope_error err;
  memset(&err, 0, sizeof err);
  ssa_load_options lo = {.threads = 1, .progress = 0};
  if (ssa_run_load_with_rules(&l->run, path, &lo, rules, &err)) {
    fprintf(stderr, "%s: load failed: %s\n", name, err.message);
    failures++;
    ssa_run_free(&l->run);
    return -1;
  }
  if (ssa_analyze(&l->run, NULL, &l->an, &err)) {
    fprintf(stderr, "%s: analysis failed: %s\n", name, err.message);
    failures++;
    ssa_analysis_free(&l->an);
    ssa_run_free(&l->run);
    return -1;
  }
  l->ok = 1;
  return 0;
}

static inline void unload(loaded *l) {
  if (!l->ok) return;
  ssa_analysis_free(&l->an);
  ssa_run_free(&l->run);
}

#endif /* STEPSCOPE_KINETO_CHECK_H */
