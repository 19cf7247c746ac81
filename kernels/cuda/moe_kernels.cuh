/*
 * moe_kernels.cuh — the device code of the mixture-of-experts kernels (moe.cu): the router
 * (softmax over E experts, deterministic top K, gates), its backward, the load-balancing
 * loss, the dispatch plan, the permutation of token rows into the expert-grouped buffer and
 * the gate-weighted un-permutation back, and the experts' grouped GEMM, forward and
 * backward. Templates on the activation storage type T (float or __nv_bfloat16) where an
 * activation is read or written. The specification is kernels/cpu/moe_router.c,
 * moe_dispatch.c and moe_expert_matmul.c (cpu_kernels.h): same layouts, same "forward
 * overwrites, backward accumulates" rule.
 *
 * Nothing here reads the routing on the host: the number of rows R of the expert-grouped
 * buffers is offsets[E], read by the kernels; grids are sized for the dropless bound
 * Rmax = N K and blocks past R return (trainer/device.h asks for that: the host enqueues
 * ahead of the GPU and never waits for the router).
 *
 * Determinism and exactness. Routing, the plan and the permutations are integer work or
 * copies and come out identical to the CPU reference, in the same order:
 *   - router: one thread per token runs the CPU's loop (softmax with the max subtracted,
 *     sum in double, top K by decreasing probability, ties to the lower index). On the
 *     emulation (host expf) the probabilities are bitwise the CPU's; on a GPU expf may
 *     differ in the last bit, so a near tie could in principle route differently there.
 *   - plan: a stable counting sort without atomics. Assignments are cut into chunks of
 *     MOE_PLAN_CHUNK; (1) each chunk ranks its assignments within their expert (shared
 *     memory, O(chunk) per thread) and writes its per-expert histogram, (2) one block scans
 *     the histograms over chunks per expert (exclusive: the chunk's base) and makes counts,
 *     offsets and the dropped count, (3) every assignment gets row offsets[e] + base + rank
 *     (or -1 past the capacity). This is the CPU's sequential order exactly.
 *   - permute backward: the CPU adds the rows of a token in row order. The device API gives
 *     row_token (not row_of), so each token finds its row in every expert's segment by
 *     binary search (row_token is increasing within a segment, as moe_dispatch_plan makes
 *     it, and a token has at most one row per expert: its K experts are distinct) and adds
 *     them in expert order = row order, in fp32, one rounding at the store.
 *   - products that the CPU rounds before adding are written __fmul_rn / __dmul_rn so the
 *     CUDA compiler does not contract them into FMAs (which round once): the un-permutation
 *     is then meant to match the CPU bitwise on a GPU too (gpu.moe checks it; the router
 *     backward is checked there within 1e-6).
 *   - the reductions that run in parallel (the aux loss's mean probabilities, dgate's dot
 *     products, the expert GEMMs) use a fixed order (shared-memory trees, fixed tiles): the
 *     same bits every run, within rounding of the CPU's order.
 *
 * Grouped GEMM, and why not cuBLAS. cuBLAS 13.1 has cublasGemmGroupedBatchedEx (and
 * cublas[SD]gemmGroupedBatched), but its problem sizes (m_array, n_array, k_array) are host
 * arrays: using it would need the per-expert row counts on the host, i.e. a device-to-host
 * copy and a stream synchronization in the middle of every MoE layer, which device.h rules
 * out (and which would stall the host's run-ahead). cuBLASLt 13.1 has no grouped matmul
 * with device-side shapes (only strided or pointer-array batches of one shape), and a
 * fixed-shape batch cannot express dweight's per-expert reduction length without E times
 * the work. So the expert GEMMs are kernels here that read offsets on the device: row
 * tiles of 64 rows never cross an expert boundary (tile j -> expert e and its first row,
 * found from offsets; grids sized for ceil(Rmax/64) + E tiles, unused ones return); dweight
 * runs one block per (expert, OC tile, C tile) over that expert's rows; dbias one thread per
 * (expert, output), rows in order (the CPU's order: bitwise equal in fp32). Two variants:
 *   - fp32 SIMT tiles (fp32 and TF32 contexts): 64 x 64 outputs per block of 256 threads
 *     (4 x 4 each), 16-deep fp32 shared-memory slabs, fp32 math throughout;
 *   - bf16 tensor cores (KCUDA_BF16 contexts, like the dense GEMMs there): WMMA 16x16x16
 *     fragments, 64 x 64 per block of 4 warps, 32-deep bf16 slabs, weights rounded to bf16
 *     as they are staged, fp32 accumulation (moe_grouped_gemm_tc_kernel below).
 * Neither is tuned (no double buffering, no async copies, no swizzling): cuBLAS-class speed
 * is not claimed; measure before trusting it in a profile.
 *
 * Why a separate header: the kernels use only threadIdx/blockIdx/gridDim/blockDim,
 * __syncthreads, static shared arrays (MOE_SHARED), expf, __fmul_rn/__dmul_rn, nvcuda::wmma
 * bf16 fragments, __float2bfloat16_rn and kcuda_ld/kcuda_st, so the CPU emulation of CUDA
 * (tests/gpu/cuda_emu.h) runs exactly this code (tests/gpu/test_moe_kernels_emu.cpp). The
 * includer provides that API first (moe.cu: <mma.h> and kcuda_internal.cuh).
 */
#ifndef STEPSCOPE_MOE_KERNELS_CUH
#define STEPSCOPE_MOE_KERNELS_CUH

#ifndef MOE_SHARED
#define MOE_SHARED __shared__
#endif

#define MOE_MAX_EXPERTS 1024 /* shared-memory tables of the plan scan and permute backward */
#define MOE_PLAN_CHUNK  256  /* assignments per block of the plan kernels (= blockDim.x) */
#define MOE_THREADS     256  /* block size of the row kernels and the GEMM tiles */
#define MOE_TM          64   /* GEMM tile: rows */
#define MOE_TN          64   /* GEMM tile: output columns */
#define MOE_TK          16   /* GEMM tile: reduction depth per shared-memory slab */

/* ---- router --------------------------------------------------------------------------- */

/* One thread per token: cpu_moe_router_forward's loop. */
template <class T>
__global__ void moe_router_forward_kernel(int *expert, float *gate, float *probs, const T *logits,
                                          int N, int E, int K, int renorm) {
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < N; t += gridDim.x * blockDim.x) {
    const T *z = logits + (size_t)t * E;
    float *p = probs + (size_t)t * E;
    float mx = kcuda_ld(z, 0);
    for (int i = 1; i < E; i++) {
      float v = kcuda_ld(z, (size_t)i);
      if (v > mx) mx = v;
    }
    double sum = 0;
    for (int i = 0; i < E; i++) {
      p[i] = expf(kcuda_ld(z, (size_t)i) - mx);
      sum += p[i];
    }
    for (int i = 0; i < E; i++)
      p[i] = (float)(p[i] / sum);
    int *ex = expert + (size_t)t * K;
    float *g = gate + (size_t)t * K;
    double s = 0;
    for (int k = 0; k < K; k++) {
      int best = -1;
      for (int i = 0; i < E; i++) {
        int taken = 0;
        for (int m = 0; m < k; m++)
          taken |= ex[m] == i;
        if (!taken && (best < 0 || p[i] > p[best])) /* ties: the lower index */
          best = i;
      }
      ex[k] = best;
      g[k] = p[best];
      s += p[best];
    }
    if (renorm)
      for (int k = 0; k < K; k++)
        g[k] = (float)(g[k] / s);
  }
}

/* part[0] = the sum of every thread's v, by a fixed-order shared-memory tree over part[]
 * (blockDim.x entries, a power of two); the block calls it uniformly. */
template <class V> __device__ __forceinline__ void moe_tree_sum(V *part, V v) {
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = (int)blockDim.x / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
}

/* counts[e] = assignments to expert e; one block per expert (grid-stride), a fixed-order
 * shared-memory tree. blockDim.x: a power of two <= MOE_THREADS (as in every tree below). */
__global__ void moe_count_kernel(int *counts, const int *expert, int NK, int E) {
  MOE_SHARED int part[MOE_THREADS];
  for (int e = blockIdx.x; e < E; e += gridDim.x) {
    int c = 0;
    for (int a = threadIdx.x; a < NK; a += blockDim.x)
      c += expert[a] == e;
    moe_tree_sum(part, c);
    if (threadIdx.x == 0) counts[e] = part[0];
    __syncthreads();
  }
}

/* One thread per token: cpu_moe_router_backward's loop, from counts (moe_count_kernel). */
template <class T>
__global__ void moe_router_backward_kernel(T *dlogits, const float *dgate, const float *probs,
                                           const int *expert, const int *counts, int N, int E,
                                           int K, int renorm, float aux_scale) {
  double aux_per = (double)aux_scale * E / ((double)N * K * N); /* times counts[i] */
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < N; t += gridDim.x * blockDim.x) {
    const float *p = probs + (size_t)t * E;
    const int *ex = expert + (size_t)t * K;
    const float *dg = dgate + (size_t)t * K;
    T *dz = dlogits + (size_t)t * E;
    double S = 0, sg = 0;
    for (int k = 0; k < K; k++) {
      S += p[ex[k]];
      sg += __dmul_rn((double)dg[k], (double)p[ex[k]]);
    }
    double dot = 0;
    for (int i = 0; i < E; i++)
      dot += __dmul_rn((double)p[i], __dmul_rn(aux_per, (double)counts[i]));
    for (int k = 0; k < K; k++) {
      double extra = renorm ? dg[k] / S - sg / (S * S) : dg[k];
      dot += __dmul_rn((double)p[ex[k]], extra);
    }
    for (int i = 0; i < E; i++) {
      double dp = __dmul_rn(aux_per, (double)counts[i]);
      for (int k = 0; k < K; k++)
        if (ex[k] == i) dp += renorm ? dg[k] / S - sg / (S * S) : dg[k];
      kcuda_st(dz, (size_t)i, kcuda_ld(dz, (size_t)i) + (float)(p[i] * (dp - dot)));
    }
  }
}

/* P[e] = sum_t probs[t,e] in double; one block per expert, fixed-order tree. */
__global__ void moe_prob_sum_kernel(double *P, const float *probs, int N, int E) {
  MOE_SHARED double part[MOE_THREADS];
  for (int e = blockIdx.x; e < E; e += gridDim.x) {
    double s = 0;
    for (int t = threadIdx.x; t < N; t += blockDim.x)
      s += probs[(size_t)t * E + e];
    moe_tree_sum(part, s);
    if (threadIdx.x == 0) P[e] = part[0];
    __syncthreads();
  }
}

/* *acc += E sum_i f_i P_i / N (one thread; cpu_moe_aux_loss's final loop). */
__global__ void moe_aux_loss_kernel(double *acc, const double *P, const int *counts, int N, int E,
                                    int K) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double aux = 0;
  for (int i = 0; i < E; i++)
    aux += __dmul_rn((double)counts[i] / ((double)N * K), P[i] / N);
  *acc += E * aux;
}

/* ---- dispatch plan -------------------------------------------------------------------- */

/* Step 1, one block per chunk of MOE_PLAN_CHUNK assignments: rank[a] = earlier assignments
 * of the chunk to the same expert; hist[chunk, e] (zeroed before) = the chunk's count of e,
 * written by e's last assignment in the chunk. */
__global__ void moe_plan_rank_kernel(int *rank, int *hist, const int *expert, int NK, int E) {
  MOE_SHARED int ex[MOE_PLAN_CHUNK];
  int nchunks = (NK + MOE_PLAN_CHUNK - 1) / MOE_PLAN_CHUNK;
  for (int c = blockIdx.x; c < nchunks; c += gridDim.x) {
    int a = c * MOE_PLAN_CHUNK + (int)threadIdx.x;
    ex[threadIdx.x] = a < NK ? expert[a] : -1;
    __syncthreads();
    if (a < NK) {
      int e = ex[threadIdx.x], r = 0, last = 1;
      for (int j = 0; j < MOE_PLAN_CHUNK; j++) {
        if (ex[j] != e) continue;
        if (j < (int)threadIdx.x)
          r++;
        else if (j > (int)threadIdx.x)
          last = 0;
      }
      rank[a] = r;
      if (last) hist[(size_t)c * E + e] = r + 1;
    }
    __syncthreads();
  }
}

/* Step 2, one block: hist[c, e] becomes the exclusive prefix over chunks (the chunk's base
 * rank within e); counts (kept rows), offsets and *dropped_acc (if not NULL) as the CPU's. */
__global__ void moe_plan_scan_kernel(int *hist, int *counts, int *offsets, int *dropped_acc,
                                     int nchunks, int E, int capacity) {
  MOE_SHARED int total[MOE_MAX_EXPERTS];
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int run = 0;
    for (int c = 0; c < nchunks; c++) {
      int h = hist[(size_t)c * E + e];
      hist[(size_t)c * E + e] = run;
      run += h;
    }
    total[e] = run;
    counts[e] = capacity >= 0 && run > capacity ? capacity : run;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int dropped = 0, off = 0;
    offsets[0] = 0;
    for (int e = 0; e < E; e++) {
      int kept = capacity >= 0 && total[e] > capacity ? capacity : total[e];
      dropped += total[e] - kept;
      off += kept;
      offsets[e + 1] = off;
    }
    if (dropped_acc) *dropped_acc += dropped;
  }
}

/* Step 3, one thread per assignment: its row, or -1 past the capacity. */
__global__ void moe_plan_assign_kernel(int *row_of, int *row_token, const int *rank,
                                       const int *base, const int *offsets, const int *expert,
                                       int NK, int E, int K, int capacity) {
  for (int a = blockIdx.x * blockDim.x + threadIdx.x; a < NK; a += gridDim.x * blockDim.x) {
    int e = expert[a];
    int r = base[(size_t)(a / MOE_PLAN_CHUNK) * E + e] + rank[a];
    if (capacity >= 0 && r >= capacity) {
      row_of[a] = -1;
      continue;
    }
    int row = offsets[e] + r;
    row_of[a] = row;
    row_token[row] = a / K;
  }
}

/* ---- permute / unpermute ------------------------------------------------------------------ */

/* xp[r,:] = x[row_token[r],:] for r < offsets[E]; one block per row (grid-stride). */
template <class T>
__global__ void moe_permute_forward_kernel(T *xp, const T *x, const int *row_token,
                                           const int *offsets, int Rmax, int E, int C) {
  int R = offsets[E];
  for (int r = blockIdx.x; r < R && r < Rmax; r += gridDim.x) {
    const T *src = x + (size_t)row_token[r] * C;
    T *dst = xp + (size_t)r * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
      dst[c] = src[c];
  }
}

/* dx[t,:] += dxp of token t's rows, in row order; one block per token (grid-stride). */
template <class T>
__global__ void moe_permute_backward_kernel(T *dx, const T *dxp, const int *row_token,
                                            const int *offsets, int N, int E, int C) {
  MOE_SHARED int found[MOE_MAX_EXPERTS];
  MOE_SHARED int rows[MOE_MAX_EXPERTS];
  MOE_SHARED int nrows;
  for (int t = blockIdx.x; t < N; t += gridDim.x) {
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
      int lo = offsets[e], hi = offsets[e + 1]; /* first row with row_token >= t */
      while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (row_token[mid] < t)
          lo = mid + 1;
        else
          hi = mid;
      }
      found[e] = lo < offsets[e + 1] && row_token[lo] == t ? lo : -1;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int n = 0;
      for (int e = 0; e < E; e++)
        if (found[e] >= 0) rows[n++] = found[e];
      nrows = n;
    }
    __syncthreads();
    T *d = dx + (size_t)t * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      float v = kcuda_ld(d, (size_t)c);
      for (int i = 0; i < nrows; i++)
        v += kcuda_ld(dxp, (size_t)rows[i] * C + c);
      kcuda_st(d, (size_t)c, v);
    }
    __syncthreads();
  }
}

/* out[t,:] = sum_k gate[t,k] yp[row_of[t,k],:] (overwrites); one block per token. */
template <class T>
__global__ void moe_unpermute_forward_kernel(T *out, const T *yp, const float *gate,
                                             const int *row_of, int N, int K, int C) {
  for (int t = blockIdx.x; t < N; t += gridDim.x) {
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      float o = 0.0f;
      for (int k = 0; k < K; k++) {
        int r = row_of[(size_t)t * K + k];
        if (r < 0) continue;
        o += __fmul_rn(gate[(size_t)t * K + k], kcuda_ld(yp, (size_t)r * C + c));
      }
      kcuda_st(out, (size_t)t * C + c, o);
    }
  }
}

/* dyp[row,:] += gate dout[t,:]; dgate[t,k] += <dout[t,:], yp[row,:]> (double, fixed-order
 * tree); one block per token. */
template <class T>
__global__ void moe_unpermute_backward_kernel(T *dyp, float *dgate, const T *dout, const T *yp,
                                              const float *gate, const int *row_of, int N, int K,
                                              int C) {
  MOE_SHARED double part[MOE_THREADS];
  for (int t = blockIdx.x; t < N; t += gridDim.x) {
    const T *d = dout + (size_t)t * C;
    for (int k = 0; k < K; k++) {
      int r = row_of[(size_t)t * K + k];
      if (r < 0) continue; /* uniform over the block */
      float g = gate[(size_t)t * K + k];
      double dot = 0;
      for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float dv = kcuda_ld(d, (size_t)c);
        size_t i = (size_t)r * C + c;
        kcuda_st(dyp, i, kcuda_ld(dyp, i) + __fmul_rn(g, dv));
        dot += __dmul_rn((double)dv, (double)kcuda_ld(yp, i));
      }
      moe_tree_sum(part, dot);
      if (threadIdx.x == 0) dgate[(size_t)t * K + k] += (float)part[0];
      __syncthreads();
    }
  }
}

/* ---- the experts' grouped GEMM -------------------------------------------------------------- */

/* Row tile j of the expert-aligned tiling: its expert and rows [*row0, *row1), or *e = -1
 * when j is past the last tile. Every thread calls it; thread 0 scans, the block shares. */
__device__ __forceinline__ void moe_tile_rows(const int *offsets, int E, int j, int *e_out,
                                              int *row0, int *row1) {
  MOE_SHARED int sh[3];
  if (threadIdx.x == 0) {
    sh[0] = -1;
    int acc = 0;
    for (int e = 0; e < E; e++) {
      int rows = offsets[e + 1] - offsets[e];
      int tiles = (rows + MOE_TM - 1) / MOE_TM;
      if (j < acc + tiles) {
        sh[0] = e;
        sh[1] = offsets[e] + (j - acc) * MOE_TM;
        sh[2] = sh[1] + MOE_TM < offsets[e + 1] ? sh[1] + MOE_TM : offsets[e + 1];
        break;
      }
      acc += tiles;
    }
  }
  __syncthreads();
  *e_out = sh[0];
  *row0 = sh[1];
  *row1 = sh[2];
  __syncthreads();
}

/* One shared-memory slab of a 64 x 64 fp32 tile: thread (tx, ty) of the 16 x 16 adds the
 * outer products of its 4 rows of As (ty + 16 i) and 4 columns of Bs (tx + 16 j) over the
 * slab's MOE_TK depth into acc. */
__device__ __forceinline__ void moe_slab_product(float acc[4][4], const float (*As)[MOE_TM],
                                                 const float (*Bs)[MOE_TN], int tx, int ty) {
  for (int kk = 0; kk < MOE_TK; kk++) {
    float a[4], b[4];
    for (int i = 0; i < 4; i++) {
      a[i] = As[kk][ty + 16 * i];
      b[i] = Bs[kk][tx + 16 * i];
    }
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++)
        acc[i][j] += a[i] * b[j];
  }
}

/* Row-tiled GEMM for the forward and dinp: for the rows [row0, row1) of one expert,
 *   Y[r, n] (+)= sum_k A[r, k] B_e(k, n) (+ bias_e[n])
 * A is T, row-major [*, Kd]; B_e is expert e's fp32 weight [OC, C] at e*OC*C, read as
 *   forward (b_rowmajor_kn = 0): B_e(k, n) = W_e[n * Kd + k]  (Kd = C, Nout = OC)
 *   dinp    (b_rowmajor_kn = 1): B_e(k, n) = W_e[k * Nout + n] (Kd = OC, Nout = C)
 * accumulate: add into Y (read, add in fp32, store rounded) instead of overwriting.
 * grid: x = ceil(Nout / MOE_TN), y = row tiles (ceil(Rmax / MOE_TM) + E); 256 threads. */
template <class T>
__global__ void moe_grouped_gemm_rows_kernel(T *Y, const T *A, const float *W, const float *bias,
                                             const int *offsets, int E, int Kd, int Nout,
                                             int b_rowmajor_kn, int accumulate) {
  MOE_SHARED float As[MOE_TK][MOE_TM];
  MOE_SHARED float Bs[MOE_TK][MOE_TN];
  int e, row0, row1;
  moe_tile_rows(offsets, E, (int)blockIdx.y, &e, &row0, &row1);
  if (e < 0) return; /* uniform over the block */
  const float *We = W + (size_t)e * Kd * Nout;
  int n0 = (int)blockIdx.x * MOE_TN;
  int tx = (int)threadIdx.x % 16, ty = (int)threadIdx.x / 16;
  float acc[4][4] = {{0}};
  for (int k0 = 0; k0 < Kd; k0 += MOE_TK) {
    for (int i = threadIdx.x; i < MOE_TK * MOE_TM; i += blockDim.x) {
      int m = i / MOE_TK, kk = i % MOE_TK; /* consecutive threads: consecutive k */
      int r = row0 + m, k = k0 + kk;
      As[kk][m] = r < row1 && k < Kd ? kcuda_ld(A, (size_t)r * Kd + k) : 0.0f;
    }
    for (int i = threadIdx.x; i < MOE_TK * MOE_TN; i += blockDim.x) {
      int n, kk;
      if (b_rowmajor_kn) { /* consecutive threads: consecutive n */
        n = i % MOE_TN;
        kk = i / MOE_TN;
      } else { /* consecutive threads: consecutive k */
        n = i / MOE_TK;
        kk = i % MOE_TK;
      }
      int nn = n0 + n, k = k0 + kk;
      float v = 0.0f;
      if (nn < Nout && k < Kd)
        v = b_rowmajor_kn ? We[(size_t)k * Nout + nn] : We[(size_t)nn * Kd + k];
      Bs[kk][n] = v;
    }
    __syncthreads();
    moe_slab_product(acc, As, Bs, tx, ty);
    __syncthreads();
  }
  for (int i = 0; i < 4; i++) {
    int r = row0 + ty + 16 * i;
    if (r >= row1) continue;
    for (int j = 0; j < 4; j++) {
      int n = n0 + tx + 16 * j;
      if (n >= Nout) continue;
      size_t at = (size_t)r * Nout + n;
      float v = acc[i][j];
      if (bias) v += bias[(size_t)e * Nout + n];
      if (accumulate) v += kcuda_ld(Y, at);
      kcuda_st(Y, at, v);
    }
  }
}

/* dweight_e[o, c] += sum over expert e's rows r of dout[r, o] inp[r, c].
 * grid: x = ceil(C / MOE_TN), y = ceil(OC / MOE_TM), z = E; 256 threads. */
template <class T>
__global__ void moe_grouped_dweight_kernel(float *dweight, const T *dout, const T *inp,
                                           const int *offsets, int C, int OC) {
  MOE_SHARED float As[MOE_TK][MOE_TM]; /* dout rows x output features */
  MOE_SHARED float Bs[MOE_TK][MOE_TN]; /* inp rows x input features */
  int e = (int)blockIdx.z;
  int r0 = offsets[e], r1 = offsets[e + 1];
  if (r1 <= r0) return; /* an expert with no rows gets nothing added */
  int o0 = (int)blockIdx.y * MOE_TM, c0 = (int)blockIdx.x * MOE_TN;
  int tx = (int)threadIdx.x % 16, ty = (int)threadIdx.x / 16;
  float acc[4][4] = {{0}};
  for (int k0 = r0; k0 < r1; k0 += MOE_TK) {
    for (int i = threadIdx.x; i < MOE_TK * MOE_TM; i += blockDim.x) {
      int m = i % MOE_TM, kk = i / MOE_TM; /* consecutive threads: consecutive o */
      int r = k0 + kk, o = o0 + m;
      As[kk][m] = r < r1 && o < OC ? kcuda_ld(dout, (size_t)r * OC + o) : 0.0f;
    }
    for (int i = threadIdx.x; i < MOE_TK * MOE_TN; i += blockDim.x) {
      int n = i % MOE_TN, kk = i / MOE_TN;
      int r = k0 + kk, c = c0 + n;
      Bs[kk][n] = r < r1 && c < C ? kcuda_ld(inp, (size_t)r * C + c) : 0.0f;
    }
    __syncthreads();
    moe_slab_product(acc, As, Bs, tx, ty);
    __syncthreads();
  }
  float *dW = dweight + (size_t)e * OC * C;
  for (int i = 0; i < 4; i++) {
    int o = o0 + ty + 16 * i;
    if (o >= OC) continue;
    for (int j = 0; j < 4; j++) {
      int c = c0 + tx + 16 * j;
      if (c < C) dW[(size_t)o * C + c] += acc[i][j];
    }
  }
}

/* dbias[e, o] += sum over expert e's rows of dout[r, o], rows in order (the CPU's order);
 * one thread per (e, o). */
template <class T>
__global__ void moe_grouped_dbias_kernel(float *dbias, const T *dout, const int *offsets, int E,
                                         int OC) {
  size_t n = (size_t)E * OC;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    int e = (int)(i / (size_t)OC), o = (int)(i % (size_t)OC);
    float s = dbias[i];
    for (int r = offsets[e]; r < offsets[e + 1]; r++)
      s += kcuda_ld(dout, (size_t)r * OC + o);
    dbias[i] = s;
  }
}

/* ---- the grouped GEMM on bf16 tensor cores (bf16 precision contexts) ---------------------
 * The same three products as above with bf16 operands (activations as stored or rounded,
 * fp32 weights rounded to bf16 as they are loaded: what the dense GEMMs of a KCUDA_BF16
 * context do) and fp32 accumulation, through WMMA 16x16x16 fragments. A block of 128
 * threads (4 warps, 2 x 2, each 32 x 32 outputs = 2 x 2 fragments) computes a 64 x 64 tile
 * over 32-deep slabs staged in shared memory: A as [m][k] (row_major), B as [n][k]
 * (col_major), so every mode loads into the same layout and runs the same fragment loop;
 * the accumulators go through shared memory (Cs) to the bounds-checked, bias-adding,
 * accumulating stores. Row ldm 40 bf16 (80 bytes) and 68 floats keep every fragment
 * pointer 32-byte aligned as load/store_matrix_sync require.
 *   MOE_TC_FWD:  Y[r, n] = sum_k A[r, k] W_e[n, k] (+ bias)   rows: expert-aligned tiles
 *   MOE_TC_DINP: Y[r, n] += sum_k A[r, k] W_e[k, n]           (A = dout, Y = dinp)
 *   MOE_TC_DW:   dW_e[m, n] += sum_r dout[r, m] inp[r, n]      (grid z = expert) */
#define MOE_TC_FWD     0
#define MOE_TC_DINP    1
#define MOE_TC_DW      2
#define MOE_TC_THREADS 128
#define MOE_TC_K       32
#define MOE_TC_LD      40 /* bf16 row stride of the staged operands */
#define MOE_TC_LDC     68 /* float row stride of the staged accumulators */

template <class T, int MODE>
__global__ void moe_grouped_gemm_tc_kernel(void *Yv, const T *A, const T *Bact, const float *W,
                                           const float *bias, const int *offsets, int E, int Kd,
                                           int Nout, int Mtot) {
  MOE_SHARED __align__(32) __nv_bfloat16 As[64 * MOE_TC_LD];
  MOE_SHARED __align__(32) __nv_bfloat16 Bs[64 * MOE_TC_LD];
  MOE_SHARED __align__(32) float Cs[64 * MOE_TC_LDC];
  int e, m0, m1, k_begin, k_end;
  if (MODE == MOE_TC_DW) { /* m: output features of dout, k: the expert's rows */
    e = (int)blockIdx.z;
    k_begin = offsets[e];
    k_end = offsets[e + 1];
    if (k_end <= k_begin) return; /* an expert with no rows gets nothing added */
    m0 = (int)blockIdx.y * 64;
    m1 = m0 + 64 < Mtot ? m0 + 64 : Mtot;
  } else { /* m: rows of one expert's tile, k: the reduction over Kd */
    moe_tile_rows(offsets, E, (int)blockIdx.y, &e, &m0, &m1);
    if (e < 0) return;
    k_begin = 0;
    k_end = Kd;
  }
  int n0 = (int)blockIdx.x * 64;
  const float *We = W ? W + (size_t)e * Kd * Nout : (const float *)0;
  int warp = (int)threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      nvcuda::wmma::fill_fragment(acc[i][j], 0.0f);
  for (int k0 = k_begin; k0 < k_end; k0 += MOE_TC_K) {
    for (int i = threadIdx.x; i < 64 * MOE_TC_K; i += blockDim.x) {
      int m, kk;
      float v = 0.0f;
      if (MODE == MOE_TC_DW) { /* dout[r, m]: consecutive threads, consecutive m */
        m = i % 64;
        kk = i / 64;
        int r = k0 + kk, mm = m0 + m;
        if (r < k_end && mm < m1) v = kcuda_ld(A, (size_t)r * Mtot + mm);
      } else { /* A[r, k]: consecutive threads, consecutive k */
        m = i / MOE_TC_K;
        kk = i % MOE_TC_K;
        int r = m0 + m, k = k0 + kk;
        if (r < m1 && k < k_end) v = kcuda_ld(A, (size_t)r * Kd + k);
      }
      As[m * MOE_TC_LD + kk] = __float2bfloat16_rn(v);
    }
    for (int i = threadIdx.x; i < 64 * MOE_TC_K; i += blockDim.x) {
      int n, kk;
      float v = 0.0f;
      if (MODE == MOE_TC_FWD) { /* W_e[n, k]: consecutive k */
        n = i / MOE_TC_K;
        kk = i % MOE_TC_K;
        int nn = n0 + n, k = k0 + kk;
        if (nn < Nout && k < k_end) v = We[(size_t)nn * Kd + k];
      } else { /* W_e[k, n] or inp[r, n]: consecutive n */
        n = i % 64;
        kk = i / 64;
        int nn = n0 + n, k = k0 + kk;
        if (nn < Nout && k < k_end)
          v = MODE == MOE_TC_DINP ? We[(size_t)k * Nout + nn]
                                  : kcuda_ld(Bact, (size_t)k * Nout + nn);
      }
      Bs[n * MOE_TC_LD + kk] = __float2bfloat16_rn(v);
    }
    __syncthreads();
    for (int kk = 0; kk < MOE_TC_K; kk += 16) {
      nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                             nvcuda::wmma::row_major>
          a[2];
      nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16,
                             nvcuda::wmma::col_major>
          b[2];
      for (int i = 0; i < 2; i++)
        nvcuda::wmma::load_matrix_sync(a[i], As + (wm * 32 + i * 16) * MOE_TC_LD + kk, MOE_TC_LD);
      for (int j = 0; j < 2; j++)
        nvcuda::wmma::load_matrix_sync(b[j], Bs + (wn * 32 + j * 16) * MOE_TC_LD + kk, MOE_TC_LD);
      for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
          nvcuda::wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      nvcuda::wmma::store_matrix_sync(Cs + (wm * 32 + i * 16) * MOE_TC_LDC + wn * 32 + j * 16,
                                      acc[i][j], MOE_TC_LDC, nvcuda::wmma::mem_row_major);
  __syncthreads();
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
    int m = i / 64, n = i % 64, mm = m0 + m, nn = n0 + n;
    if (mm >= m1 || nn >= Nout) continue;
    float v = Cs[m * MOE_TC_LDC + n];
    if (MODE == MOE_TC_DW) {
      float *dW = (float *)Yv + (size_t)e * Mtot * Nout;
      dW[(size_t)mm * Nout + nn] += v;
    } else {
      T *Y = (T *)Yv;
      size_t at = (size_t)mm * Nout + nn;
      if (MODE == MOE_TC_FWD && bias) v += bias[(size_t)e * Nout + nn];
      if (MODE == MOE_TC_DINP) v += kcuda_ld(Y, at);
      kcuda_st(Y, at, v);
    }
  }
}

#endif /* STEPSCOPE_MOE_KERNELS_CUH */
