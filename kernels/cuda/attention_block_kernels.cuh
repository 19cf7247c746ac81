/*
 * attention_block_kernels.cuh — the device code of attention_block.cu (see there for what
 * the kernels compute and how): the bf16 WMMA tile kernels and the fp32 warp-per-row
 * kernels, as templates and __global__ functions. The tile kernels' sizes, shared-memory
 * layout and tile steps (loads, S = Q K^T, the online softmax, P V, dP, dS, dV/dK/dQ
 * products) are the fused causal attention's, shared in attention_tiles.cuh; this file holds
 * what is particular to a ring's blocks: strided q/kv/dq/dkv, Tk != Tq, the optional causal
 * mask (rows that see no key), and the log-sum-exp merge into the running (out, lse).
 *
 * Activations (q, kv, out, dout, dq, dkv) are of the storage type ACT (float or
 * __nv_bfloat16, a template parameter): loaded with kcuda_ld (or straight into the bf16
 * tiles), computed in fp32, stored rounded with kcuda_st; lse and the statistics are fp32.
 * Accumulations that several thread blocks make into one element (dq of the tiles, dk/dv
 * of the fp32 kernels) use fp32 atomicAdd, so their kernels take an fp32 destination:
 * the activation itself when ACT is float, else fp32 scratch that at_add_rows_kernel adds
 * into the bf16 activation at the end (one rounding per call, none per atomic).
 *
 * Why a separate header: the kernels use only a small part of CUDA's device API
 * (threadIdx/blockIdx/gridDim/blockDim, __syncthreads, __syncwarp, __shfl_sync,
 * __shfl_xor_sync, atomicAdd on float, __float2bfloat16_rn, nvcuda::wmma 16x16x16 bf16
 * fragments, dynamic shared memory `at_smem`, kcuda_warp_sum/kcuda_warp_max, kcuda_ld/
 * kcuda_st), so a CPU emulation of that API (tests/gpu/cuda_emu.h) can run exactly this code
 * on a machine without a GPU (tests/gpu/test_attention_block_emu.cpp). The includer provides
 * the API first: attention_block.cu includes <mma.h> and kcuda_internal.cuh; the emulation
 * its own.
 */
#ifndef STEPSCOPE_ATTENTION_BLOCK_KERNELS_CUH
#define STEPSCOPE_ATTENTION_BLOCK_KERNELS_CUH

#include "attention_tiles.cuh"

#define AB_F32_MAX_HS  256 /* the fp32 path keeps up to 8 channels per lane */
#define AB_F32_THREADS 256
/* Launch bounds: with only a block size, ptxas (CUDA 13) capped some of these kernels at
 * 48-64 registers and spilled; a minimum of 2 resident blocks per SM lets it use up to
 * 255 (tiles) / 128 (fp32 path) registers, and `ptxas -v` then reports no spills. */

/* ---- tensor-core path: forward ------------------------------------------------------------ */

template <int HS, class ACT>
__global__ void __launch_bounds__(AT_THREADS, 2)
    ab_forward_kernel(ACT *out, float *lse, const ACT *q, int q_stride, const ACT *kv,
                      int kv_stride, int Tq, int Tk, int NH, int causal, float scale) {
  typedef at_dims<HS> D;
  extern __shared__ __align__(128) unsigned char at_smem[];
  /* causal: the last query tiles see the most keys, start them first */
  const int qt = causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
  const int q0 = qt * AT_BR, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const at_fwd_smem<HS> sm = at_fwd_layout<HS>(at_smem, warp);
  float *mrow = sm.mrow, *lrow = sm.lrow, *arow = sm.arow, *trow = sm.trow;

  const ACT *qb = q + (size_t)b * Tq * q_stride + (size_t)h * HS;
  const ACT *kb = kv + (size_t)b * Tk * kv_stride + (size_t)h * HS;
  at_load_tile<HS>(sm.Qs, qb, at_strided{(size_t)q_stride}, q0, Tq);
  at_fwd_start<HS>(sm.Ow, mrow, lrow, lane);
  const int r = lane >> 1, c0 = (lane & 1) * (AT_BC / 2);
  const int i = q0 + warp * 16 + r; /* this lane's query row */
  int nk = (Tk + AT_BC - 1) / AT_BC;
  if (causal) {
    int last = (q0 + AT_BR - 1) / AT_BC + 1; /* key tiles that hold some j <= q0 + 63 */
    nk = nk < last ? nk : last;
  }
  for (int kt = 0; kt < nk; kt++) {
    const int k0 = kt * AT_BC;
    __syncthreads(); /* the previous K, V are consumed (and Q is loaded) */
    at_load_tile<HS>(sm.Ks, kb, at_strided{(size_t)kv_stride}, k0, Tk);
    at_load_tile<HS>(sm.Vs, kb + C, at_strided{(size_t)kv_stride}, k0, Tk);
    __syncthreads();
    at_scores<HS>(sm.Sw, sm.Qs + warp * 16 * D::LDH, sm.Ks);
    /* the mask (keys past Tk, and j > i when causal), scaled scores, the row max: two
     * lanes per row, 32 columns each */
    float mx = -INFINITY;
    for (int c = 0; c < AT_BC / 2; c++) {
      int j = k0 + c0 + c;
      int visible = j < Tk && (!causal || j <= i);
      float s = visible ? sm.Sw[r * D::WF + c0 + c] * scale : -INFINITY;
      sm.Sw[r * D::WF + c0 + c] = s;
      mx = fmaxf(mx, s);
    }
    /* a row may have seen no key yet */
    at_softmax_step<HS, true>(sm.Sw, sm.Pw, mrow, lrow, arow, lane, mx);
    at_pv_update<HS>(sm.Ow, sm.Sw, sm.Pw, sm.Vs, arow, lane);
  }
  /* merge the block's result into (out, lse): per row keep = e^(old - new), take =
   * e^(blk - new) / l; a row that saw no key keeps its values (keep 1, take 0) */
  if (lane < 16) {
    int t = q0 + warp * 16 + lane;
    float keep = 1.0f, take = 0.0f;
    if (t < Tq && lrow[lane] > 0.0f) {
      size_t at = (size_t)bh * Tq + t;
      float blk = mrow[lane] + logf(lrow[lane]);
      float old = lse[at];
      float M = fmaxf(old, blk);
      float merged = M + logf(expf(old - M) + expf(blk - M));
      keep = expf(old - merged);
      take = expf(blk - merged) / lrow[lane];
      lse[at] = merged;
    }
    arow[lane] = keep;
    trow[lane] = take;
  }
  __syncwarp();
  for (int e = lane; e < 16 * HS; e += 32) {
    int rr = e / HS, d = e % HS, t = q0 + warp * 16 + rr;
    if (t < Tq) {
      size_t at = ((size_t)b * Tq + t) * C + (size_t)h * HS + d;
      kcuda_st(out, at, kcuda_ld(out, at) * arow[rr] + sm.Ow[rr * D::LDO + d] * trow[rr]);
    }
  }
}

/* ---- tensor-core path: backward ----------------------------------------------------------- */

/* Dv[bh*Tq + t] = dout . out over head h's channels of row (b, t): one warp per row. */
template <class ACT>
__global__ void ab_dot_kernel(float *Dv, const ACT *dout, const ACT *out, int rows, int Tq, int NH,
                              int hs) {
  int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  int t = row % Tq, bh = row / Tq, b = bh / NH, h = bh % NH;
  size_t at = ((size_t)b * Tq + t) * NH * hs + (size_t)h * hs;
  float s = at_row_dot(dout + at, out + at, hs, lane);
  if (lane == 0) Dv[row] = s;
}

/* dq: fp32 (the activation itself, or scratch that is added into a bf16 one afterwards),
 * rows dq_stride apart; it receives atomicAdds. dkv: the activation (plain read-add-store:
 * each key row of a head belongs to one thread block). */
template <int HS, class ACT>
__global__ void __launch_bounds__(AT_THREADS)
    ab_backward_kernel(float *dq, int dq_stride, ACT *dkv, int dkv_stride, const ACT *dout,
                       const float *lse, const float *Dv, const ACT *q, int q_stride, const ACT *kv,
                       int kv_stride, int Tq, int Tk, int NH, int causal, float scale) {
  typedef at_dims<HS> D;
  extern __shared__ __align__(128) unsigned char at_smem[];
  const int kt = blockIdx.x;
  const int nq = (Tq + AT_BR - 1) / AT_BR;
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
  const int k0 = kt * AT_BC, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const at_bwd_smem<HS> sm = at_bwd_layout<HS>(at_smem, warp);

  const ACT *qb = q + (size_t)b * Tq * q_stride + (size_t)h * HS;
  const ACT *gb = dout + (size_t)b * Tq * C + (size_t)h * HS;
  const ACT *kb = kv + (size_t)b * Tk * kv_stride + (size_t)h * HS;
  at_load_tile<HS>(sm.Ks, kb, at_strided{(size_t)kv_stride}, k0, Tk);
  at_load_tile<HS>(sm.Vs, kb + C, at_strided{(size_t)kv_stride}, k0, Tk);
  at_acc dK[HS / 16], dV[HS / 16];
  for (int n = 0; n < HS / 16; n++) {
    wmma::fill_fragment(dK[n], 0.0f);
    wmma::fill_fragment(dV[n], 0.0f);
  }
  const int r0 = warp * 16;
  /* causal: query tiles wholly before this key tile see none of its keys */
  for (int qt = causal ? k0 / AT_BR : 0; qt < nq; qt++) {
    const int q0 = qt * AT_BR;
    __syncthreads(); /* the previous tile's Q, dO, P, dS are consumed (K, V loaded) */
    at_load_tile<HS>(sm.Qs, qb, at_strided{(size_t)q_stride}, q0, Tq);
    at_load_tile<HS>(sm.dOs, gb, at_strided{(size_t)C}, q0, Tq);
    at_load_row_stats(sm.lse_s, sm.D_s, lse, Dv, (size_t)bh * Tq, q0, Tq);
    __syncthreads();
    at_scores_dp<HS>(sm.Sw, sm.dPw, sm.Qs + r0 * D::LDH, sm.dOs + r0 * D::LDH, sm.Ks, sm.Vs);
    at_p_ds<HS>(sm.Ps, sm.dSs, sm.Sw, sm.dPw, sm.lse_s, sm.D_s, lane, r0, q0, k0, scale,
                [=](int t, int j) { return t < Tq && j < Tk && (!causal || j <= t); });
    __syncthreads(); /* the whole tile's P and dS */
    at_dv_dk<HS>(dV, dK, sm.Ps, sm.dSs, sm.dOs, sm.Qs, r0);
    at_dq_atomic<HS>(dq, (size_t)b * Tq, dq_stride, (size_t)h * HS, sm.Sw, sm.dSs + r0 * D::LDP,
                     sm.Ks, lane, q0 + r0, Tq, scale);
  }
  at_add_dk_dv<HS>(dkv, (size_t)b * Tk, (size_t)dkv_stride, (size_t)h * HS, 0, (size_t)C, sm.Sw,
                   sm.dPw, dK, dV, lane, k0 + r0, Tk, scale);
}

/* ---- fp32 path: one warp per query row ------------------------------------------------------ */

/* The query row of B*NH*Tq that this warp handles, as bh = b*NH + h and t, and the
 * thread's lane; 0 for a warp past the last row. */
__device__ __forceinline__ int ab_warp_row(int B, int NH, int Tq, size_t *bh, int *t, int *lane) {
  const size_t row = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  *lane = threadIdx.x & 31;
  if (row >= (size_t)B * NH * Tq) return 0;
  *t = (int)(row % Tq);
  *bh = row / Tq;
  return 1;
}

/* U channels per lane (hs <= 32 U): lane L holds channels L, L+32, ... */
template <int U, class ACT>
__global__ void __launch_bounds__(AB_F32_THREADS, 2)
    ab_forward_f32_kernel(ACT *out, float *lse, const ACT *q, int q_stride, const ACT *kv,
                          int kv_stride, int B, int Tq, int Tk, int NH, int hs, int causal,
                          float scale) {
  size_t bh;
  int t, lane;
  if (!ab_warp_row(B, NH, Tq, &bh, &t, &lane)) return;
  const int b = (int)(bh / NH), h = (int)(bh % NH), C = NH * hs;
  const ACT *qr = q + ((size_t)b * Tq + t) * q_stride + (size_t)h * hs;
  const ACT *kb = kv + (size_t)b * Tk * kv_stride + (size_t)h * hs;
  const int n = causal ? (t + 1 < Tk ? t + 1 : Tk) : Tk; /* visible keys 0 .. n-1 */
  if (n <= 0) return; /* nothing to merge (the reference skips the row) */
  float acc[U];
#pragma unroll
  for (int u = 0; u < U; u++)
    acc[u] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int j0 = 0; j0 < n; j0 += 32) {
    const int j = j0 + lane;
    float s = -INFINITY;
    if (j < n) {
      const ACT *kr = kb + (size_t)j * kv_stride;
      float dot = 0.0f;
      for (int d = 0; d < hs; d++)
        dot += kcuda_ld(qr, d) * kcuda_ld(kr, d);
      s = dot * scale;
    }
    const float m_new = fmaxf(m, kcuda_warp_max(s)); /* finite: key j0 is visible */
    const float p = j < n ? expf(s - m_new) : 0.0f;
    const float alpha = expf(m - m_new); /* 0 on the first chunk */
    l = l * alpha + kcuda_warp_sum(p);
#pragma unroll
    for (int u = 0; u < U; u++)
      acc[u] *= alpha;
    const int cnt = n - j0 < 32 ? n - j0 : 32;
    for (int c = 0; c < cnt; c++) {
      const float pc = __shfl_sync(0xffffffffu, p, c);
      const ACT *vr = kb + (size_t)(j0 + c) * kv_stride + C;
#pragma unroll
      for (int u = 0; u < U; u++) {
        int d = lane + 32 * u;
        if (d < hs) acc[u] += pc * kcuda_ld(vr, d);
      }
    }
    m = m_new;
  }
  float *lp = lse + bh * Tq + t;
  const float old = *lp;
  const float blk = m + logf(l);
  const float M = fmaxf(old, blk);
  const float merged = M + logf(expf(old - M) + expf(blk - M));
  const float keep = expf(old - merged), take = expf(blk - merged) / l;
  ACT *o = out + ((size_t)b * Tq + t) * C + (size_t)h * hs;
#pragma unroll
  for (int u = 0; u < U; u++) {
    int d = lane + 32 * u;
    if (d < hs) kcuda_st(o, d, kcuda_ld(o, d) * keep + acc[u] * take);
  }
  __syncwarp(); /* every lane has read the old lse */
  if (lane == 0) *lp = merged;
}

/* dq: the activation (each row's head belongs to one warp: read-add-store). dkv: fp32,
 * rows dkv_stride apart (the activation itself, or scratch added into a bf16 one
 * afterwards); it receives atomicAdds. */
template <int U, class ACT>
__global__ void __launch_bounds__(AB_F32_THREADS, 2)
    ab_backward_f32_kernel(ACT *dq, int dq_stride, float *dkv, int dkv_stride, const ACT *dout,
                           const ACT *out, const float *lse, const ACT *q, int q_stride,
                           const ACT *kv, int kv_stride, int B, int Tq, int Tk, int NH, int hs,
                           int causal, float scale) {
  size_t bh;
  int t, lane;
  if (!ab_warp_row(B, NH, Tq, &bh, &t, &lane)) return;
  const int b = (int)(bh / NH), h = (int)(bh % NH), C = NH * hs;
  const ACT *qr = q + ((size_t)b * Tq + t) * q_stride + (size_t)h * hs;
  const ACT *gr = dout + ((size_t)b * Tq + t) * C + (size_t)h * hs;
  const ACT *orow = out + ((size_t)b * Tq + t) * C + (size_t)h * hs;
  const ACT *kb = kv + (size_t)b * Tk * kv_stride + (size_t)h * hs;
  float *dkb = dkv + (size_t)b * Tk * dkv_stride + (size_t)h * hs;
  const int n = causal ? (t + 1 < Tk ? t + 1 : Tk) : Tk;
  if (n <= 0) return;
  float qv[U], gv[U], dqa[U], Dp = 0.0f;
#pragma unroll
  for (int u = 0; u < U; u++) {
    int d = lane + 32 * u;
    qv[u] = d < hs ? kcuda_ld(qr, d) : 0.0f;
    gv[u] = d < hs ? kcuda_ld(gr, d) : 0.0f;
    Dp += d < hs ? gv[u] * kcuda_ld(orow, d) : 0.0f;
    dqa[u] = 0.0f;
  }
  Dp = kcuda_warp_sum(Dp);
  const float L = lse[bh * Tq + t];
  for (int j0 = 0; j0 < n; j0 += 32) {
    const int j = j0 + lane;
    float p = 0.0f, ds = 0.0f;
    if (j < n) {
      const ACT *kr = kb + (size_t)j * kv_stride, *vr = kr + C;
      float dot = 0.0f, dp = 0.0f;
      for (int d = 0; d < hs; d++) {
        dot += kcuda_ld(qr, d) * kcuda_ld(kr, d);
        dp += kcuda_ld(gr, d) * kcuda_ld(vr, d);
      }
      p = expf(dot * scale - L);
      ds = p * (dp - Dp) * scale;
    }
    const int cnt = n - j0 < 32 ? n - j0 : 32;
    for (int c = 0; c < cnt; c++) {
      const float dsc = __shfl_sync(0xffffffffu, ds, c);
      const float pc = __shfl_sync(0xffffffffu, p, c);
      const ACT *kr = kb + (size_t)(j0 + c) * kv_stride;
      float *dkr = dkb + (size_t)(j0 + c) * dkv_stride;
#pragma unroll
      for (int u = 0; u < U; u++) {
        int d = lane + 32 * u;
        if (d < hs) {
          dqa[u] += dsc * kcuda_ld(kr, d);
          atomicAdd(&dkr[d], dsc * qv[u]);
          atomicAdd(&dkr[C + d], pc * gv[u]);
        }
      }
    }
  }
  ACT *dqr = dq + ((size_t)b * Tq + t) * dq_stride + (size_t)h * hs;
#pragma unroll
  for (int u = 0; u < U; u++) {
    int d = lane + 32 * u;
    if (d < hs) kcuda_st(dqr, d, kcuda_ld(dqr, d) + dqa[u]);
  }
}

#endif /* STEPSCOPE_ATTENTION_BLOCK_KERNELS_CUH */
