/*
 * act_kernels.cuh — the device code of the kernels whose activations may be stored in fp32
 * or bf16 (encoder.cu, layernorm.cu, gelu.cu, residual.cu, crossentropy.cu and the bias
 * gradient / bias add of matmul.cu), as templates on the activation storage type T (float
 * or __nv_bfloat16). See each .cu file for what its kernels compute; the specification is
 * kernels/cpu (cpu_kernels.h).
 *
 * Numerics: every kernel loads activations, computes in fp32 and rounds once when it
 * stores (kcuda_ld / kcuda_st: round to nearest even for bf16). Backward kernels that
 * accumulate into an activation gradient read it, add in fp32 and store rounded.
 * Parameters, their gradients, LayerNorm mean/rstd and losses are fp32.
 *
 * Vector access: where a whole row (or array) and every pointer it touches are 16-byte
 * aligned, a thread moves 16 bytes of activations at a time (act_vec: 4 floats or 8 bf16,
 * one 128-bit load/store); otherwise the same kernel takes its scalar path (W = 1), and
 * flat arrays finish their last n % W elements one at a time. The choice is per call and
 * uniform across the grid.
 *
 * Why a separate header: these kernels use only threadIdx/blockIdx/gridDim/blockDim,
 * __syncthreads, __syncwarp, __shfl_xor_sync on floats, atomicAdd on floats, dynamic and
 * static shared memory, kcuda_ld/kcuda_st, kcuda_warp_sum and kcuda_block_sum/max,
 * so the CPU emulation of CUDA in tests/gpu/cuda_emu.h runs exactly this code
 * (tests/gpu/test_act_kernels_emu.cpp). The includer provides that API first: the .cu
 * files include kcuda_internal.cuh; the emulation test its own. Static shared arrays are
 * declared with ACT_SHARED (`__shared__` here; the emulation, which runs one block at a
 * time, makes them `static`); the dynamic one (act_ln_acc) is a global there.
 */
#ifndef STEPSCOPE_ACT_KERNELS_CUH
#define STEPSCOPE_ACT_KERNELS_CUH

#ifndef ACT_SHARED
#define ACT_SHARED __shared__
#endif
/* Called with every vector access's address and required alignment: nothing on the GPU
 * (a misaligned vector access faults there); the emulation counts misaligned ones. */
#ifndef ACT_VEC_CHECK
#define ACT_VEC_CHECK(ptr, align)
#endif

#define ACT_GELU_SCALE 0.7978845608028654f
#define ACT_GELU_CUBIC 0.044715f
#define ACT_LN_EPS     1e-5f
#define ACT_LN_WARPS   8 /* LayerNorm: warps (rows in flight) per block */

/* W consecutive elements of type T, moved as one access of up to 16 bytes (two for 8
 * floats, as when fp32 parameters are read beside 8 bf16 activations). */
template <class T, int W> struct alignas(sizeof(T) * W > 16 ? 16 : sizeof(T) * W) act_vec {
  T v[W];
};

/* Elements of T in 16 bytes: the vector width of the activation kernels. */
template <class T> struct act_width { static constexpr int value = (int)(16 / sizeof(T)); };

__device__ __forceinline__ bool act_aligned16() {
  return true;
}
/* True when every pointer is 16-byte aligned. */
template <class P, class... Rest>
__device__ __forceinline__ bool act_aligned16(const P *p, const Rest *...rest) {
  return ((uintptr_t)p & 15u) == 0 && act_aligned16(rest...);
}

/* f[0..W) = p[i..i+W) in fp32; p + i must be aligned to the vector. */
template <class T, int W>
__device__ __forceinline__ void act_load(float (&f)[W], const T *p, size_t i) {
  ACT_VEC_CHECK(p + i, alignof(act_vec<T, W>));
  act_vec<T, W> v = *reinterpret_cast<const act_vec<T, W> *>(p + i);
  for (int e = 0; e < W; e++)
    f[e] = kcuda_ld(v.v, (size_t)e);
}

/* p[i..i+W) = f[0..W) rounded to T. */
template <class T, int W>
__device__ __forceinline__ void act_store(T *p, size_t i, const float (&f)[W]) {
  ACT_VEC_CHECK(p + i, alignof(act_vec<T, W>));
  act_vec<T, W> v;
  for (int e = 0; e < W; e++)
    kcuda_st(v.v, (size_t)e, f[e]);
  *reinterpret_cast<act_vec<T, W> *>(p + i) = v;
}

#define ACT_TID    (blockIdx.x * (size_t)blockDim.x + threadIdx.x)
#define ACT_STRIDE ((size_t)gridDim.x * blockDim.x)

/* ---- encoder ------------------------------------------------------------------------------ */

template <class T, int W>
__device__ __forceinline__ void encoder_forward_w(T *out, const int *tokens, const float *wte,
                                                  const float *wpe, int T_, int C, size_t chunks) {
  for (size_t j = ACT_TID; j < chunks; j += ACT_STRIDE) {
    size_t i = j * W, bt = i / C;
    int c = (int)(i % C), t = (int)(bt % T_);
    float a[W], b[W], y[W];
    act_load<float, W>(a, wte, (size_t)tokens[bt] * C + c);
    act_load<float, W>(b, wpe, (size_t)t * C + c);
    for (int e = 0; e < W; e++)
      y[e] = a[e] + b[e];
    act_store<T, W>(out, i, y);
  }
}

/* out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; W elements of one row per thread when C is a
 * multiple of W and every pointer is aligned. */
template <class T>
__global__ void encoder_forward_kernel(T *out, const int *tokens, const float *wte,
                                       const float *wpe, int B, int T_, int C) {
  constexpr int W = act_width<T>::value;
  size_t total = (size_t)B * T_ * C;
  if (C % W == 0 && act_aligned16(out, wte, wpe))
    encoder_forward_w<T, W>(out, tokens, wte, wpe, T_, C, total / W);
  else
    encoder_forward_w<T, 1>(out, tokens, wte, wpe, T_, C, total);
}

/* dwpe[t,c] += sum over b of dout[b,t,c], in b order (deterministic). */
template <class T>
__global__ void encoder_backward_wpe_kernel(float *dwpe, const T *dout, int B, int T_, int C) {
  size_t total = (size_t)T_ * C;
  for (size_t i = ACT_TID; i < total; i += ACT_STRIDE) {
    float s = 0.0f;
    for (int b = 0; b < B; b++)
      s += kcuda_ld(dout, (size_t)b * T_ * C + i);
    dwpe[i] += s;
  }
}

/* dwte[tokens[b,t],c] += dout[b,t,c] (tokens repeat: atomics). */
template <class T>
__global__ void encoder_backward_wte_kernel(float *dwte, const T *dout, const int *tokens, int B,
                                            int T_, int C) {
  size_t total = (size_t)B * T_ * C;
  for (size_t i = ACT_TID; i < total; i += ACT_STRIDE) {
    size_t bt = i / C;
    int c = (int)(i % C);
    atomicAdd(&dwte[(size_t)tokens[bt] * C + c], kcuda_ld(dout, i));
  }
}

/* ---- GELU (tanh approximation) ------------------------------------------------------------ */

__device__ __forceinline__ float act_gelu(float x) {
  float u = ACT_GELU_SCALE * (x + ACT_GELU_CUBIC * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

__device__ __forceinline__ float act_gelu_grad(float x) {
  float u = ACT_GELU_SCALE * (x + ACT_GELU_CUBIC * x * x * x);
  float th = tanhf(u);
  float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) +
         0.5f * x * sech2 * ACT_GELU_SCALE * (1.0f + 3.0f * ACT_GELU_CUBIC * x * x);
}

template <class T> __global__ void gelu_forward_kernel(T *out, const T *inp, size_t n) {
  constexpr int W = act_width<T>::value;
  size_t nv = act_aligned16(out, inp) ? n / W : 0;
  for (size_t j = ACT_TID; j < nv; j += ACT_STRIDE) {
    float x[W], y[W];
    act_load<T, W>(x, inp, j * W);
    for (int e = 0; e < W; e++)
      y[e] = act_gelu(x[e]);
    act_store<T, W>(out, j * W, y);
  }
  for (size_t i = nv * W + ACT_TID; i < n; i += ACT_STRIDE)
    kcuda_st(out, i, act_gelu(kcuda_ld(inp, i)));
}

/* dinp += gelu'(inp) dout */
template <class T>
__global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, size_t n) {
  constexpr int W = act_width<T>::value;
  size_t nv = act_aligned16(dinp, inp, dout) ? n / W : 0;
  for (size_t j = ACT_TID; j < nv; j += ACT_STRIDE) {
    float x[W], g[W], d[W];
    act_load<T, W>(x, inp, j * W);
    act_load<T, W>(g, dout, j * W);
    act_load<T, W>(d, dinp, j * W);
    for (int e = 0; e < W; e++)
      d[e] += act_gelu_grad(x[e]) * g[e];
    act_store<T, W>(dinp, j * W, d);
  }
  for (size_t i = nv * W + ACT_TID; i < n; i += ACT_STRIDE)
    kcuda_st(dinp, i, kcuda_ld(dinp, i) + act_gelu_grad(kcuda_ld(inp, i)) * kcuda_ld(dout, i));
}

/* ---- residual ------------------------------------------------------------------------------ */

template <class T>
__global__ void residual_forward_kernel(T *out, const T *a, const T *b, size_t n) {
  constexpr int W = act_width<T>::value;
  size_t nv = act_aligned16(out, a, b) ? n / W : 0;
  for (size_t j = ACT_TID; j < nv; j += ACT_STRIDE) {
    float x[W], y[W];
    act_load<T, W>(x, a, j * W);
    act_load<T, W>(y, b, j * W);
    for (int e = 0; e < W; e++)
      x[e] += y[e];
    act_store<T, W>(out, j * W, x);
  }
  for (size_t i = nv * W + ACT_TID; i < n; i += ACT_STRIDE)
    kcuda_st(out, i, kcuda_ld(a, i) + kcuda_ld(b, i));
}

/* da += dout; db += dout */
template <class T> __global__ void residual_backward_kernel(T *da, T *db, const T *dout, size_t n) {
  constexpr int W = act_width<T>::value;
  size_t nv = act_aligned16(da, db, dout) ? n / W : 0;
  for (size_t j = ACT_TID; j < nv; j += ACT_STRIDE) {
    float g[W], x[W], y[W];
    act_load<T, W>(g, dout, j * W);
    act_load<T, W>(x, da, j * W);
    act_load<T, W>(y, db, j * W);
    for (int e = 0; e < W; e++) {
      x[e] += g[e];
      y[e] += g[e];
    }
    act_store<T, W>(da, j * W, x);
    act_store<T, W>(db, j * W, y);
  }
  for (size_t i = nv * W + ACT_TID; i < n; i += ACT_STRIDE) {
    float g = kcuda_ld(dout, i);
    kcuda_st(da, i, kcuda_ld(da, i) + g);
    kcuda_st(db, i, kcuda_ld(db, i) + g);
  }
}

/* ---- LayerNorm (one warp per row) ---------------------------------------------------------- */

/* Normalizes row x (C values) into y; lane 0 saves mean and rstd. Lane l handles the W-wide
 * chunks l, l+32, ... (C is a multiple of W). */
template <class T, int W>
__device__ __forceinline__ void ln_row(T *y, float *mean, float *rstd, const T *x, const float *w,
                                       const float *b, int row, int C, int lane) {
  float s = 0.0f;
  for (int c = lane * W; c < C; c += 32 * W) {
    float v[W];
    act_load<T, W>(v, x, (size_t)c);
    for (int e = 0; e < W; e++)
      s += v[e];
  }
  float m = kcuda_warp_sum(s) / C;
  float var = 0.0f;
  for (int c = lane * W; c < C; c += 32 * W) {
    float v[W];
    act_load<T, W>(v, x, (size_t)c);
    for (int e = 0; e < W; e++) {
      float d = v[e] - m;
      var += d * d;
    }
  }
  float r = rsqrtf(kcuda_warp_sum(var) / C + ACT_LN_EPS);
  for (int c = lane * W; c < C; c += 32 * W) {
    float v[W], wv[W], bv[W];
    act_load<T, W>(v, x, (size_t)c);
    act_load<float, W>(wv, w, (size_t)c);
    act_load<float, W>(bv, b, (size_t)c);
    for (int e = 0; e < W; e++)
      v[e] = (v[e] - m) * r * wv[e] + bv[e];
    act_store<T, W>(y, (size_t)c, v);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

/* res = a + b (stored, rounded), then the LayerNorm of the stored res. */
template <class T, int W>
__device__ __forceinline__ void ln_residual_row(T *res, T *y, float *mean, float *rstd, const T *a,
                                                const T *bb, const float *w, const float *b,
                                                int row, int C, int lane) {
  for (int c = lane * W; c < C; c += 32 * W) {
    float x[W], z[W];
    act_load<T, W>(x, a, (size_t)c);
    act_load<T, W>(z, bb, (size_t)c);
    for (int e = 0; e < W; e++)
      x[e] += z[e];
    act_store<T, W>(res, (size_t)c, x);
  }
  __syncwarp();
  ln_row<T, W>(y, mean, rstd, res, w, b, row, C, lane);
}

template <class T>
__global__ void layernorm_forward_kernel(T *out, float *mean, float *rstd, const T *inp,
                                         const float *weight, const float *bias, int N, int C) {
  constexpr int W = act_width<T>::value;
  const bool vec = C % W == 0 && act_aligned16(out, inp, weight, bias);
  int lane = threadIdx.x & 31;
  for (int row = blockIdx.x * ACT_LN_WARPS + (threadIdx.x >> 5); row < N;
       row += gridDim.x * ACT_LN_WARPS) {
    size_t off = (size_t)row * C;
    if (vec)
      ln_row<T, W>(out + off, mean, rstd, inp + off, weight, bias, row, C, lane);
    else
      ln_row<T, 1>(out + off, mean, rstd, inp + off, weight, bias, row, C, lane);
  }
}

template <class T>
__global__ void residual_layernorm_forward_kernel(T *res, T *out, float *mean, float *rstd,
                                                  const T *a, const T *bb, const float *weight,
                                                  const float *bias, int N, int C) {
  constexpr int W = act_width<T>::value;
  const bool vec = C % W == 0 && act_aligned16(res, out, a, bb, weight, bias);
  int lane = threadIdx.x & 31;
  for (int row = blockIdx.x * ACT_LN_WARPS + (threadIdx.x >> 5); row < N;
       row += gridDim.x * ACT_LN_WARPS) {
    size_t off = (size_t)row * C;
    if (vec)
      ln_residual_row<T, W>(res + off, out + off, mean, rstd, a + off, bb + off, weight, bias, row,
                            C, lane);
    else
      ln_residual_row<T, 1>(res + off, out + off, mean, rstd, a + off, bb + off, weight, bias, row,
                            C, lane);
  }
}

/* One row of the backward: dx += r (g - mean(g) - xhat mean(g xhat)), g = dy w; the
 * parameter-gradient partials go to the block's shared accumulators acc[0..2C). */
template <class T, int W>
__device__ __forceinline__ void ln_backward_row(T *dx, float *acc, const T *dy, const T *x,
                                                const float *weight, float m, float r, int C,
                                                int lane) {
  float gs = 0.0f, gxs = 0.0f;
  for (int c = lane * W; c < C; c += 32 * W) {
    float xv[W], dv[W], wv[W];
    act_load<T, W>(xv, x, (size_t)c);
    act_load<T, W>(dv, dy, (size_t)c);
    act_load<float, W>(wv, weight, (size_t)c);
    for (int e = 0; e < W; e++) {
      float xhat = (xv[e] - m) * r, g = dv[e] * wv[e];
      gs += g;
      gxs += g * xhat;
    }
  }
  float gmean = kcuda_warp_sum(gs) / C, gxmean = kcuda_warp_sum(gxs) / C;
  for (int c = lane * W; c < C; c += 32 * W) {
    float xv[W], dv[W], wv[W], out[W];
    act_load<T, W>(xv, x, (size_t)c);
    act_load<T, W>(dv, dy, (size_t)c);
    act_load<float, W>(wv, weight, (size_t)c);
    act_load<T, W>(out, dx, (size_t)c);
    for (int e = 0; e < W; e++) {
      float xhat = (xv[e] - m) * r, g = dv[e] * wv[e];
      out[e] += r * (g - gmean - xhat * gxmean);
      atomicAdd(&acc[c + e], xhat * dv[e]);
      atomicAdd(&acc[C + c + e], dv[e]);
    }
    act_store<T, W>(dx, (size_t)c, out);
  }
}

template <class T>
__global__ void layernorm_backward_kernel(T *dinp, float *dweight, float *dbias, const T *dout,
                                          const T *inp, const float *weight, const float *mean,
                                          const float *rstd, int N, int C) {
  extern __shared__ float act_ln_acc[]; /* [2C]: dweight partials, then dbias partials */
  constexpr int W = act_width<T>::value;
  const bool vec = C % W == 0 && act_aligned16(dinp, dout, inp, weight);
  for (int c = threadIdx.x; c < 2 * C; c += blockDim.x)
    act_ln_acc[c] = 0.0f;
  __syncthreads();
  int lane = threadIdx.x & 31;
  for (int row = blockIdx.x * ACT_LN_WARPS + (threadIdx.x >> 5); row < N;
       row += gridDim.x * ACT_LN_WARPS) {
    size_t off = (size_t)row * C;
    if (vec)
      ln_backward_row<T, W>(dinp + off, act_ln_acc, dout + off, inp + off, weight, mean[row],
                            rstd[row], C, lane);
    else
      ln_backward_row<T, 1>(dinp + off, act_ln_acc, dout + off, inp + off, weight, mean[row],
                            rstd[row], C, lane);
  }
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    atomicAdd(&dweight[c], act_ln_acc[c]);
    atomicAdd(&dbias[c], act_ln_acc[C + c]);
  }
}

/* ---- softmax + cross-entropy (one block per row) -------------------------------------------- */

/* Pass 1: row maximum over the V real columns; pass 2: sum of exp(z - max); pass 3: the
 * probabilities, each computed and rounded once (exp recomputed rather than stored
 * unnormalized, which would round bf16 twice), padded columns 0.
 * loss = log(sum) + max - z[target]. */
template <class T>
__global__ void crossentropy_forward_kernel(float *losses, T *probs, const T *logits,
                                            const int *targets, int V, int Vp) {
  ACT_SHARED float shared[32];
  constexpr int W = act_width<T>::value;
  const int row = blockIdx.x;
  const T *z = logits + (size_t)row * Vp;
  T *p = probs + (size_t)row * Vp;
  const bool vec = Vp % W == 0 && act_aligned16(logits, probs);
  const int nv = vec ? V / W : 0;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < nv; j += blockDim.x) {
    float zv[W];
    act_load<T, W>(zv, z, (size_t)j * W);
    for (int e = 0; e < W; e++)
      m = fmaxf(m, zv[e]);
  }
  for (int v = nv * W + threadIdx.x; v < V; v += blockDim.x)
    m = fmaxf(m, kcuda_ld(z, (size_t)v));
  m = kcuda_block_max(m, shared);
  float s = 0.0f;
  for (int j = threadIdx.x; j < nv; j += blockDim.x) {
    float zv[W];
    act_load<T, W>(zv, z, (size_t)j * W);
    for (int e = 0; e < W; e++)
      s += expf(zv[e] - m);
  }
  for (int v = nv * W + threadIdx.x; v < V; v += blockDim.x)
    s += expf(kcuda_ld(z, (size_t)v) - m);
  s = kcuda_block_sum(s, shared);
  const float inv = 1.0f / s;
  const int pv = vec ? Vp / W : 0;
  for (int j = threadIdx.x; j < pv; j += blockDim.x) {
    float zv[W];
    act_load<T, W>(zv, z, (size_t)j * W);
    for (int e = 0; e < W; e++)
      zv[e] = j * W + e < V ? expf(zv[e] - m) * inv : 0.0f;
    act_store<T, W>(p, (size_t)j * W, zv);
  }
  for (int v = pv * W + threadIdx.x; v < Vp; v += blockDim.x)
    kcuda_st(p, (size_t)v, v < V ? expf(kcuda_ld(z, (size_t)v) - m) * inv : 0.0f);
  if (threadIdx.x == 0) losses[row] = logf(s) + m - kcuda_ld(z, (size_t)targets[row]);
}

/* dlogits[row, v] += (p - [v == target]) dlosses[row] over the V real columns (padded
 * columns untouched); one block per row. */
template <class T>
__global__ void crossentropy_backward_kernel(T *dlogits, const float *dlosses, const T *probs,
                                             const int *targets, int V, int Vp) {
  constexpr int W = act_width<T>::value;
  const int row = blockIdx.x, target = targets[row];
  const float dl = dlosses[row];
  T *d = dlogits + (size_t)row * Vp;
  const T *p = probs + (size_t)row * Vp;
  const int nv = Vp % W == 0 && act_aligned16(dlogits, probs) ? V / W : 0;
  for (int j = threadIdx.x; j < nv; j += blockDim.x) {
    float pv[W], dv[W];
    act_load<T, W>(pv, p, (size_t)j * W);
    act_load<T, W>(dv, d, (size_t)j * W);
    for (int e = 0; e < W; e++)
      dv[e] += (pv[e] - (j * W + e == target ? 1.0f : 0.0f)) * dl;
    act_store<T, W>(d, (size_t)j * W, dv);
  }
  for (int v = nv * W + threadIdx.x; v < V; v += blockDim.x)
    kcuda_st(d, (size_t)v,
             kcuda_ld(d, (size_t)v) + (kcuda_ld(p, (size_t)v) - (v == target ? 1.0f : 0.0f)) * dl);
}

/* ---- matmul: bias gradient and bias add ------------------------------------------------------ */

#define ACT_DBIAS_THREADS 256 /* 32 columns x 8 row lanes */

/* partial[chunk, col] = sum of dout[r, col] over the chunk's rows; block (column group of
 * 32, row chunk), thread (col lane = tid % 32, row lane = tid / 32); the 8 row lanes meet in
 * shared memory in a fixed order (deterministic). */
template <class T>
__global__ void dbias_partial_kernel(float *partial, const T *dout, int N, int OC,
                                     int rows_per_chunk) {
  ACT_SHARED float part[8][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int col = blockIdx.x * 32 + tx;
  const int r0 = blockIdx.y * rows_per_chunk;
  const int r1 = N < r0 + rows_per_chunk ? N : r0 + rows_per_chunk;
  float s = 0.0f;
  if (col < OC)
    for (int r = r0 + ty; r < r1; r += 8)
      s += kcuda_ld(dout, (size_t)r * OC + col);
  part[ty][tx] = s;
  __syncthreads();
  if (ty == 0 && col < OC) {
    float t = 0.0f;
    for (int i = 0; i < 8; i++)
      t += part[i][tx];
    partial[(size_t)blockIdx.y * OC + col] = t;
  }
}

/* dbias[col] += the chunks' partials, in chunk order. (A template only so that every file
 * including this header may define it: launch as dbias_final_kernel<>.) */
template <int Unused = 0>
__global__ void dbias_final_kernel(float *dbias, const float *partial, int chunks, int OC) {
  for (size_t col = ACT_TID; col < (size_t)OC; col += ACT_STRIDE) {
    float t = 0.0f;
    for (int c = 0; c < chunks; c++)
      t += partial[(size_t)c * OC + col];
    dbias[col] += t;
  }
}

/* out[r, c] += bias[c] (fp32 bias; used when cuBLASLt has no BIAS epilogue for the types). */
template <class T> __global__ void bias_add_kernel(T *out, const float *bias, int N, int OC) {
  size_t total = (size_t)N * OC;
  for (size_t i = ACT_TID; i < total; i += ACT_STRIDE)
    kcuda_st(out, i, kcuda_ld(out, i) + bias[i % OC]);
}

#endif /* STEPSCOPE_ACT_KERNELS_CUH */
