/*
 * weight_watch.h — when the CUDA device's bf16 weight copies become stale.
 *
 * What it is for: in bf16 mode the kernels keep a bf16 copy of every GEMM weight
 * (kernels/cuda/matmul.cu, keyed by the fp32 weight's address) instead of casting it
 * at every call. A copy is valid until the fp32 weight is written: by AdamW, a copy
 * into the parameters (initialization, checkpoint restore), a fill or scale, or a
 * collective that writes the parameters (the ZeRO-1 all-gather). This header decides,
 * on the host, which writes invalidate the copies; it is plain C so that a CPU test
 * (tests/gpu/test_cpu_side.c) checks it.
 *
 * How it works: the device watches the whole allocations that hold weights (an
 * allocation joins the watch the first time a pointer into it is used as a GEMM
 * weight). Every operation that writes device memory reports the start of what it
 * writes; since an operation never writes across two allocations, a write starting
 * inside a watched allocation is the only kind that can touch a weight, and it bumps
 * the version. The kernels recast a weight whose copy was made under an older version
 * at its next use, on the GEMM's stream. Version 0 is never used (it means "no cache"
 * to the kernels), so the version starts at 1. A watch with no room left (more than
 * WEIGHT_WATCH_MAX weight allocations) reports 0 for the pointers it cannot watch,
 * which turns caching off for them: correct, only slower.
 */
#ifndef STEPSCOPE_TRAINER_WEIGHT_WATCH_H
#define STEPSCOPE_TRAINER_WEIGHT_WATCH_H

#include <stddef.h>
#include <stdint.h>

#define WEIGHT_WATCH_MAX 8

typedef struct weight_watch {
  uintptr_t lo[WEIGHT_WATCH_MAX], hi[WEIGHT_WATCH_MAX]; /* watched allocations [lo, hi) */
  int n;
  unsigned long long version; /* >= 1 */
} weight_watch;

static inline void weight_watch_init(weight_watch *w) {
  w->n = 0;
  w->version = 1;
}

/* Index of the watched allocation holding p, or -1. */
static inline int weight_watch_find(const weight_watch *w, const void *p) {
  uintptr_t a = (uintptr_t)p;
  for (int i = 0; i < w->n; i++)
    if (a >= w->lo[i] && a < w->hi[i]) return i;
  return -1;
}

/* The version under which a GEMM may use its cached copy of `weight`, watching the
 * allocation [base, base+bytes) that holds it first if needed; 0 (do not cache) when the
 * allocation is unknown (base NULL) or the watch is full. */
static inline unsigned long long weight_watch_version_for(weight_watch *w, const void *weight,
                                                          const void *base, size_t bytes) {
  if (weight_watch_find(w, weight) >= 0) return w->version;
  if (!base || w->n == WEIGHT_WATCH_MAX) return 0;
  w->lo[w->n] = (uintptr_t)base;
  w->hi[w->n] = (uintptr_t)base + bytes;
  w->n++;
  return w->version;
}

/* An operation is about to write memory starting at p. */
static inline void weight_watch_note_write(weight_watch *w, const void *p) {
  if (p && weight_watch_find(w, p) >= 0) w->version++;
}

/* The allocation [base, base+bytes) is being freed: forget it (a later allocation at the
 * same address is new memory; the version moves so no copy of the old one is reused). */
static inline void weight_watch_forget(weight_watch *w, const void *base) {
  for (int i = 0; i < w->n; i++)
    if (w->lo[i] == (uintptr_t)base) {
      w->lo[i] = w->lo[w->n - 1];
      w->hi[i] = w->hi[w->n - 1];
      w->n--;
      w->version++;
      return;
    }
}

#endif /* STEPSCOPE_TRAINER_WEIGHT_WATCH_H */
