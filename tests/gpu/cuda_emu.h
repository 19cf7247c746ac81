/*
 * cuda_emu.h — a small CPU emulation of the part of CUDA's device API that the attention
 * block kernels use (kernels/cuda/attention_block_kernels.cuh), so that exactly that
 * kernel source runs, and is checked against the CPU reference, on a machine with no GPU.
 *
 * How it works: emu_launch(grid, block, body) runs the thread blocks one after another;
 * each CUDA thread of a block is a coroutine (ucontext) on one OS thread, scheduled
 * round-robin: a thread runs until it waits at a barrier, then the next one runs, with
 * threadIdx/blockIdx set for whichever runs. __syncthreads is a barrier over the block's
 * threads, __syncwarp a barrier over the warp's 32 threads; shuffles go through a
 * per-warp exchange array between two warp barriers. WMMA fragments hold the whole 16x16 tile in
 * every lane (the hardware spreads it over the lanes in an unspecified way, which correct code
 * cannot observe); load/mma/store are warp-collective like the real *_sync operations (a warp
 * barrier first), each lane computing the same product in fp32 from bf16 inputs. bf16 is
 * round-to-nearest-even on the float's bits, like __float2bfloat16_rn. atomicAdd is a
 * plain add (one OS thread). Dynamic shared memory is a global array that the test defines
 * under the kernels' name for it (`at_smem` for the attention tiles; blocks run one at a
 * time). Lanes run one after another between barriers, so a read that lacks the barrier
 * after another lane's write sees the old value and the result goes wrong (for
 * the orders this schedule produces: an emulation, not a race detector).
 *
 * The runtime (indices, barriers, the scheduler) is cuda_emu.cpp, linked into each test.
 *
 * What it cannot check: the CUDA compiler, the real fragment layouts, shared-memory
 * limits and bank conflicts, timing. Plain C++17, no CUDA headers.
 */
#ifndef STEPSCOPE_TESTS_CUDA_EMU_H
#define STEPSCOPE_TESTS_CUDA_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <type_traits>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__
#define __align__(n)
#define __launch_bounds__(...)

struct emu_dim3 {
  unsigned x, y, z;
};

extern emu_dim3 threadIdx, blockIdx; /* of the thread running now */
extern emu_dim3 gridDim, blockDim;

struct emu_barrier {
  unsigned count, arrived, generation;
};
/* the running block's shared state */
struct emu_block {
  emu_barrier all;
  emu_barrier warp[32];
  float exchange[32][32]; /* [warp][lane] for shuffles */
};
extern emu_block *emu_current;

/* Waits until `count` threads have arrived (yielding to the others meanwhile). */
void emu_barrier_wait(emu_barrier *b);

static inline void __syncthreads() {
  emu_barrier_wait(&emu_current->all);
}
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)mask;
  emu_barrier_wait(&emu_current->warp[threadIdx.x / 32]);
}
static inline float emu_exchange(float v, int src_lane) {
  int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  emu_current->exchange[w][lane] = v;
  __syncwarp();
  float r = emu_current->exchange[w][src_lane & 31];
  __syncwarp();
  return r;
}
static inline float __shfl_xor_sync(unsigned mask, float v, int o) {
  (void)mask;
  return emu_exchange(v, (int)(threadIdx.x % 32) ^ o);
}
static inline float __shfl_sync(unsigned mask, float v, int src) {
  (void)mask;
  return emu_exchange(v, src);
}
float atomicAdd(float *p, float v);

static inline float kcuda_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
static inline float kcuda_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* bf16 as its 16 bits */
struct __nv_bfloat16 {
  uint16_t bits;
};
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  __nv_bfloat16 b;
  if ((u & 0x7fffffffu) > 0x7f800000u) { /* NaN stays NaN */
    b.bits = (uint16_t)((u >> 16) | 0x40);
    return b;
  }
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
  b.bits = (uint16_t)(u >> 16);
  return b;
}
static inline float emu_bf16_to_float(__nv_bfloat16 b) {
  uint32_t u = (uint32_t)b.bits << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

namespace nvcuda {
namespace wmma {
struct accumulator {};
struct matrix_a {};
struct matrix_b {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
  float x[16][16];
};

template <class Use, class T, class L>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, float v) {
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++)
      f.x[i][j] = v;
}

/* element (r, c) of the 16x16 operand as the fragment's use and layout read it */
template <class Use, class L>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, L> &f, const __nv_bfloat16 *p,
                             unsigned ld) {
  __syncwarp();
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 16; c++) {
      /* matrix_a: (row i, col k); matrix_b: (row k, col j); row_major: p[r*ld + c] */
      size_t at = std::is_same<L, row_major>::value ? (size_t)r * ld + c : (size_t)c * ld + r;
      f.x[r][c] = emu_bf16_to_float(p[at]);
    }
}

template <class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c) {
  __syncwarp();
  float t[16][16];
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) {
      float s = c.x[i][j];
      for (int k = 0; k < 16; k++)
        s += a.x[i][k] * b.x[k][j];
      t[i][j] = s;
    }
  memcpy(d.x, t, sizeof t);
}

inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ld, layout_t layout) {
  __syncwarp();
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++)
      p[layout == mem_row_major ? (size_t)i * ld + j : (size_t)j * ld + i] = f.x[i][j];
}
} // namespace wmma
} // namespace nvcuda

/* Runs body() as every thread of every block of the grid; returns 0, or -1 for a block
 * shape it cannot run (not a multiple of 32 threads, or more than 1024) or no memory. */
int emu_launch(emu_dim3 grid, emu_dim3 block, const std::function<void()> &body);
/* The order in which emu_launch runs a block's threads (cuda_emu.cpp): 0 round-robin,
 * 1 lowest warp first until it blocks, 2 highest warp first. */
extern int emu_schedule;

/* What kcuda_internal.cuh gives the kernels for activations of either storage type. */
static inline float kcuda_ld(const float *p, size_t i) {
  return p[i];
}
static inline float kcuda_ld(const __nv_bfloat16 *p, size_t i) {
  return emu_bf16_to_float(p[i]);
}
static inline void kcuda_st(float *p, size_t i, float v) {
  p[i] = v;
}
static inline void kcuda_st(__nv_bfloat16 *p, size_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

#endif /* STEPSCOPE_TESTS_CUDA_EMU_H */
