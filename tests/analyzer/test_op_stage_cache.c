/*
 * test_op_stage_cache.c — the lane arrays a loader thread keeps between small rank files
 * (op_stage_cache.c) stay within their bound, and are kept when they are small.
 *
 *   - a small file's stage given back (four lanes of a thousand ops) is what the next small
 *     file's stage takes: the same arrays, emptied;
 *   - a stage of many lanes, each just within the bound of one kept lane (1 MiB: a small file
 *     on disk can hold that many ops compressed), is not all kept: the thread keeps at most
 *     SSA_OP_STAGE_CACHE_MAX bytes, its lane array and the kept lanes' ops together, so that
 *     one odd file does not pin tens of MiB in every loader thread until it exits.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ssa_op_stage.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* A small file's stage (no reservation) whose lanes 0..nlanes-1 hold arrays of `ops` ops each,
 * `n` of them used; given back to the thread as the loader does when the file is done. */
static void stage_and_give(uint32_t nlanes, size_t ops, size_t n, ssa_op **arrays) {
  ssa_op_stage st;
  ssa_op_stage_begin(&st, 0);
  if (ssa_op_stage_reserve_lane(&st, nlanes - 1)) abort();
  for (uint32_t i = 0; i < nlanes; i++) {
    ssa_lane_ops *l = &st.lanes[i];
    free(l->ops); /* a kept array of an earlier stage: replaced by one of the size wanted */
    l->ops = calloc(ops, sizeof *l->ops);
    if (!l->ops) abort();
    l->cap = ops;
    l->n = n;
    if (arrays) arrays[i] = l->ops;
  }
  ssa_op_stage_free(&st);
}

/* Bytes of the lane arrays the thread hands to its next small file's stage (given back after). */
static size_t kept_bytes(ssa_op_stage *st) {
  ssa_op_stage_begin(st, 0);
  size_t bytes = st->nlanes * sizeof *st->lanes;
  for (uint32_t i = 0; i < st->nlanes; i++) {
    bytes += st->lanes[i].cap * sizeof *st->lanes[i].ops;
    CHECK(st->lanes[i].n == 0, "lane %u kept with %zu ops in it", i, st->lanes[i].n);
  }
  return bytes;
}

int main(void) {
  ssa_op *arrays[4];
  stage_and_give(4, 1000, 700, arrays);
  ssa_op_stage st;
  kept_bytes(&st);
  CHECK(st.nlanes >= 4, "a small stage's %u lanes were not kept", st.nlanes);
  for (uint32_t i = 0; i < 4 && i < st.nlanes; i++)
    CHECK(st.lanes[i].ops == arrays[i] && st.lanes[i].cap == 1000,
          "lane %u: the next small file does not get its kept array", i);
  ssa_op_stage_free(&st);

  const size_t lane_max = ((size_t)1 << 20) / sizeof(ssa_op); /* one kept lane's bound */
  stage_and_give(64, lane_max, lane_max, NULL);
  size_t bytes = kept_bytes(&st);
  CHECK(bytes <= SSA_OP_STAGE_CACHE_MAX,
        "64 lanes of 1 MiB given back: the thread keeps %zu bytes (bound %zu)", bytes,
        (size_t)SSA_OP_STAGE_CACHE_MAX);
  ssa_op_stage_free(&st);

  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("op stage cache: small stages kept, at most %zu bytes a thread\n",
         (size_t)SSA_OP_STAGE_CACHE_MAX);
  return 0;
}
