/*
 * kcuda_internal.cuh — what the kernel files share: the context's layout, error
 * reporting, scratch buffers, launch sizes and warp/block reductions.
 *
 * How it works: each .cu file includes this header and reports failures through
 * kcuda_fail() (first message wins until the next success is irrelevant: every
 * failure overwrites, the device layer keeps the first). Scratch buffers are
 * identified by slot so that two buffers a function needs at once never alias;
 * they only grow, with cudaFreeAsync/cudaMallocAsync on the context's stream.
 */
#ifndef STEPSCOPE_KCUDA_INTERNAL_CUH
#define STEPSCOPE_KCUDA_INTERNAL_CUH

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>

#include "cuda_kernels.h"

enum kcuda_scratch_slot {
  KCUDA_SCRATCH_CAST_A = 0, /* bf16 copy of a GEMM's A operand */
  KCUDA_SCRATCH_CAST_B,     /* bf16 copy of a GEMM's B operand */
  KCUDA_SCRATCH_CAST_W,     /* bf16 copy of a weight the cache could not keep */
  KCUDA_SCRATCH_DBIAS,      /* per-row-chunk partial column sums of the bias gradient */
  KCUDA_SCRATCH_ATTN,       /* attention: permuted q, k, v, y and their gradients */
  KCUDA_SCRATCH_REDUCE,     /* partial sums of the deterministic reductions */
  KCUDA_SCRATCH_WORKSPACE,  /* cuBLASLt's workspace (only streams that run GEMMs get one) */
  KCUDA_SCRATCH_MOE,        /* mixture of experts: the dispatch plan's ranks and histograms,
                               the aux loss's per-expert sums and counts */
  KCUDA_SCRATCH_COUNT
};

#define KCUDA_ALGO_CACHE      128
#define KCUDA_ALGO_KEY        14
#define KCUDA_WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt's recommendation for Hopper */
#define KCUDA_WEIGHT_CACHE    512 /* bf16 weight copies kept per context (4 per layer + head) */

typedef struct kcuda_algo_entry {
  int valid;
  int key[KCUDA_ALGO_KEY];
  cublasLtMatmulAlgo_t algo;
} kcuda_algo_entry;

/* A bf16 copy of an fp32 weight (src, n floats), cast under weights version `version`. */
typedef struct kcuda_weight_entry {
  const float *src;
  size_t n;
  void *bf16;
  unsigned long long version;
} kcuda_weight_entry;

struct kcuda_ctx {
  cudaStream_t stream;
  kcuda_precision precision;
  kcuda_act_dtype act; /* activation storage type (kcuda_ctx_set_act_dtype) */
  cublasLtHandle_t lt;
  void *scratch[KCUDA_SCRATCH_COUNT];
  size_t scratch_bytes[KCUDA_SCRATCH_COUNT];
  kcuda_algo_entry algos[KCUDA_ALGO_CACHE];
  kcuda_weight_entry weights[KCUDA_WEIGHT_CACHE];
  int nweights;
  size_t weight_bytes;
  unsigned long long weight_casts; /* how many times a weight was (re)cast: for tests */
  int sm_count;
  char error[512];
};

/* Writes the context's error message; returns -1 so callers can `return kcuda_fail(...)`. */
static inline int kcuda_fail(kcuda_ctx *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(k->error, sizeof k->error, fmt, ap);
  va_end(ap);
  return -1;
}

/* Checks the launch that just happened. */
static inline int kcuda_check_launch(kcuda_ctx *k, const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return kcuda_fail(k, "%s: kernel launch failed: %s", what, cudaGetErrorString(e));
  return 0;
}

/* Lets `kernel` launch with `bytes` of dynamic shared memory (more than the 48 KiB default
 * needs this); 0, or -1 after kcuda_fail naming `what`. */
template <class Kernel>
static inline int kcuda_allow_shared(kcuda_ctx *k, Kernel *kernel, size_t bytes, const char *what) {
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (e != cudaSuccess)
    return kcuda_fail(k, "%s: %zu bytes of shared memory: %s", what, bytes, cudaGetErrorString(e));
  return 0;
}

/* A scratch buffer of at least `bytes` in `slot` (NULL after kcuda_fail). */
void *kcuda_scratch(kcuda_ctx *k, int slot, size_t bytes);

/* matmul.cu: the row-major batched GEMM of kcuda_gemm with the operand and output types
 * given. A and B are both of type `ab_type`: CUDA_R_32F (cast to bf16 scratch copies in a
 * KCUDA_BF16 context, used as they are otherwise) or CUDA_R_16BF (used as they are; KCUDA_BF16
 * contexts only). C (read when beta != 0, then written) is CUDA_R_32F or CUDA_R_16BF (bf16:
 * KCUDA_BF16 contexts only; fp32 accumulation, rounded once). For kernels whose GEMM operands
 * are bf16 activations (e.g. attention with bf16 activation storage). */
int kcuda_gemm_ex(kcuda_ctx *k, int transA, int transB, int M, int N, int K, float alpha,
                  const void *A, const void *B, cudaDataType_t ab_type, float beta, void *C,
                  cudaDataType_t c_type, int batch, long long strideA, long long strideB,
                  long long strideC);

/* Launch sizes for element-wise kernels over n elements (grid-stride loops). */
static inline unsigned kcuda_grid_for(const kcuda_ctx *k, size_t n, unsigned block) {
  size_t blocks = (n + block - 1) / block;
  size_t cap = (size_t)(k->sm_count > 0 ? k->sm_count : 132) * 16;
  if (blocks > cap) blocks = cap;
  return blocks ? (unsigned)blocks : 1u;
}

/* Activation loads and stores for kernels templated on the storage type (float or
 * __nv_bfloat16): compute in fp32, round once on store (nearest even). */
__device__ __forceinline__ float kcuda_ld(const float *p, size_t i) {
  return p[i];
}
__device__ __forceinline__ float kcuda_ld(const __nv_bfloat16 *p, size_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void kcuda_st(float *p, size_t i, float v) {
  p[i] = v;
}
__device__ __forceinline__ void kcuda_st(__nv_bfloat16 *p, size_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

/* Runs `body` (a lambda-free statement using the type name ACT) with ACT = float or
 * __nv_bfloat16 according to the context's activation type. */
#define KCUDA_WITH_ACT(k, body)                                                                    \
  do {                                                                                             \
    if ((k)->act == KCUDA_ACT_BF16) {                                                              \
      typedef __nv_bfloat16 ACT;                                                                   \
      body;                                                                                        \
    } else {                                                                                       \
      typedef float ACT;                                                                           \
      body;                                                                                        \
    }                                                                                              \
  } while (0)

/* Warp and block reductions by an associative operation (a functor below), in a fixed
 * butterfly order. */
struct kcuda_add {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct kcuda_fmax {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class T, class Op> __device__ __forceinline__ T kcuda_warp_reduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* Over a block of up to 1024 threads; every thread gets the result. `shared` holds 32
 * values; the block must call it uniformly. `identity`: what the lanes past the last warp
 * contribute. */
template <class T, class Op>
__device__ __forceinline__ T kcuda_block_reduce(T v, T *shared, T identity, Op op) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = kcuda_warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T r = lane < nwarps ? shared[lane] : identity;
  return kcuda_warp_reduce(r, op);
}

__device__ __forceinline__ float kcuda_warp_sum(float v) {
  return kcuda_warp_reduce(v, kcuda_add());
}
__device__ __forceinline__ double kcuda_warp_sum_d(double v) {
  return kcuda_warp_reduce(v, kcuda_add());
}
__device__ __forceinline__ float kcuda_warp_max(float v) {
  return kcuda_warp_reduce(v, kcuda_fmax());
}
__device__ __forceinline__ float kcuda_block_sum(float v, float *shared) {
  return kcuda_block_reduce(v, shared, 0.0f, kcuda_add());
}
__device__ __forceinline__ float kcuda_block_max(float v, float *shared) {
  return kcuda_block_reduce(v, shared, -INFINITY, kcuda_fmax());
}
__device__ __forceinline__ double kcuda_block_sum_d(double v, double *shared) {
  return kcuda_block_reduce(v, shared, 0.0, kcuda_add());
}

#endif /* STEPSCOPE_KCUDA_INTERNAL_CUH */
