/*
 * attention_tiles.cuh — the tile code that the fused causal attention
 * (flash_attention_kernels.cuh) and ring attention's tensor-core block kernels
 * (attention_block_kernels.cuh) share: tile sizes and the shared-memory layout, bf16 tile
 * loads of activations, and the warp-level steps of a FlashAttention-2 forward and backward
 * over one 64-query x 64-key tile, as small __device__ __forceinline__ functions.
 *
 * How it is used: a block of 4 warps works on a 64 x 64 tile, each warp owning 16 rows
 * (forward: 16 queries; backward: 16 keys of the block's key tile, and 16 queries of the
 * current query tile for the row-wise steps). The kernels keep what differs between the two
 * families — which tiles a block visits, where rows live in global memory (at_load_tile takes
 * a row-offset functor, the other functions a row base and stride), which keys a query sees
 * (the forward's masking loop is in the kernels; at_p_ds takes a predicate visible(t, j)),
 * and how results leave the block (out = O/l and lse for the fused forward, a log-sum-exp
 * merge into (out, lse) for the ring's blocks). Everything else is here, once: every step
 * does the same floating-point operations in the same order as when each kernel spelled it
 * out, so results are bit for bit what they were.
 *
 * Generated code: the index expressions are the ones the kernels had, and the split keeps
 * the compiler's loop decisions (a masking loop inside a shared function got unswitched on
 * the ring's `causal` flag and unrolled differently; at_p_ds pins the unroll factor both
 * kernels had), so `ptxas -v` reports the registers, stack and spills of before for every
 * instance (docs/cuda-backend.md, "Attention"). Check that again after changing this file.
 *
 * Numerics: Q, K, V, dO, P and dS are bf16 tensor-core operands (WMMA 16x16x16, fp32
 * accumulation); scores, softmax statistics, O and the gradients' accumulators are fp32.
 * Functions that write a warp's fp32 scratch end with __syncwarp, so every lane of the warp
 * may read what the fragment stores wrote.
 *
 * Like its includers, it uses only the part of CUDA's device API that tests/gpu/cuda_emu.h
 * emulates, so the CPU emulation runs exactly this code. The includer provides that API
 * first (<mma.h>, <cuda_bf16.h> and kcuda_internal.cuh on the GPU; cuda_emu.h in the tests).
 */
#ifndef STEPSCOPE_ATTENTION_TILES_CUH
#define STEPSCOPE_ATTENTION_TILES_CUH

using namespace nvcuda;

#define AT_BR      64  /* queries per tile */
#define AT_BC      64  /* keys per tile */
#define AT_THREADS 128 /* 4 warps x 16 rows */

/* Row strides (elements) and region sizes (bytes) of the shared-memory layout. */
template <int HS> struct at_dims {
  static constexpr int LDH = HS + 8;                       /* bf16 row stride: Q K V dO */
  static constexpr int LDP = AT_BC + 8;                    /* bf16 row stride: P dS */
  static constexpr int WF = (HS > AT_BC ? HS : AT_BC) + 4; /* fp32 row stride: scratch */
  static constexpr int LDO = HS + 4;                       /* fp32 row stride: O */
  /* every region is a multiple of 128 bytes, so each starts 128-byte aligned */
  static constexpr size_t TILE = (size_t)AT_BR * LDH * 2;
  static constexpr size_t PTILE = (size_t)AT_BR * LDP * 2;
  static constexpr size_t FWD_WARP =
      (size_t)16 * WF * 4 + (size_t)16 * LDP * 2 + (size_t)16 * LDO * 4 + 256;
  static constexpr size_t FWD_SMEM = 3 * TILE + 4 * FWD_WARP;
  static constexpr size_t BWD_WARP = 2 * (size_t)16 * WF * 4;
  static constexpr size_t BWD_SMEM = 4 * TILE + 2 * PTILE + 2 * AT_BR * 4 + 4 * BWD_WARP;
};

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> at_acc;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> at_a_row;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major> at_a_col;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> at_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> at_b_col;

/* An activation as a bf16 tensor-core operand: fp32 rounds (nearest even), bf16 is taken
 * as it is. */
__device__ __forceinline__ __nv_bfloat16 at_bf16(const float *p, size_t i) {
  return __float2bfloat16_rn(p[i]);
}
__device__ __forceinline__ __nv_bfloat16 at_bf16(const __nv_bfloat16 *p, size_t i) {
  return p[i];
}

/* Rows [r0, r0+64) of an activation matrix into a bf16 tile (row stride LDH): row t's HS
 * channels start at base[row(t)]; rows at or past nrows are zero. The whole block. */
template <int HS, class ACT, class ROW>
__device__ __forceinline__ void at_load_tile(__nv_bfloat16 *tile, const ACT *base, ROW row, int r0,
                                             int nrows) {
  for (int idx = threadIdx.x; idx < AT_BR * HS; idx += AT_THREADS) {
    int r = idx / HS, d = idx % HS, t = r0 + r;
    tile[r * at_dims<HS>::LDH + d] =
        t < nrows ? at_bf16(base, row(t) + d) : __float2bfloat16_rn(0.0f);
  }
}

/* Row t at t*stride (for at_load_tile with a base pointer at row 0's channel 0). */
struct at_strided {
  size_t stride;
  __device__ __forceinline__ size_t operator()(int t) const { return (size_t)t * stride; }
};

/* ---- forward ------------------------------------------------------------------------------ */

/* The forward's shared memory: the block's Q, K, V tiles, then per warp its fp32 scratch
 * S [16][WF], P [16][LDP] (bf16), O [16][LDO] (fp32) and the per-row statistics m, l, the
 * rescale factor of the last step (arow) and one more row of 16 floats (trow) for the
 * includer's epilogue. */
template <int HS> struct at_fwd_smem {
  __nv_bfloat16 *Qs, *Ks, *Vs, *Pw;
  float *Sw, *Ow, *mrow, *lrow, *arow, *trow;
};

template <int HS>
__device__ __forceinline__ at_fwd_smem<HS> at_fwd_layout(unsigned char *smem, int warp) {
  typedef at_dims<HS> D;
  at_fwd_smem<HS> s;
  s.Qs = (__nv_bfloat16 *)smem;
  s.Ks = (__nv_bfloat16 *)(smem + D::TILE);
  s.Vs = (__nv_bfloat16 *)(smem + 2 * D::TILE);
  unsigned char *mine = smem + 3 * D::TILE + (size_t)warp * D::FWD_WARP;
  s.Sw = (float *)mine;
  s.Pw = (__nv_bfloat16 *)(mine + (size_t)16 * D::WF * 4);
  s.Ow = (float *)(mine + (size_t)16 * D::WF * 4 + (size_t)16 * D::LDP * 2);
  s.mrow = s.Ow + 16 * D::LDO;
  s.lrow = s.mrow + 16;
  s.arow = s.lrow + 16;
  s.trow = s.arow + 16;
  return s;
}

/* The warp's running state before the first key tile: O = 0, m = -inf, l = 0. */
template <int HS>
__device__ __forceinline__ void at_fwd_start(float *Ow, float *mrow, float *lrow, int lane) {
  for (int e = lane; e < 16 * HS; e += 32)
    Ow[(e / HS) * at_dims<HS>::LDO + e % HS] = 0.0f;
  if (lane < 16) {
    mrow[lane] = -INFINITY;
    lrow[lane] = 0.0f;
  }
}

/* S[16 x 64] = Q_w K^T into the warp's scratch Sw (Qw: the warp's 16 rows of Q). */
template <int HS>
__device__ __forceinline__ void at_scores(float *Sw, const __nv_bfloat16 *Qw,
                                          const __nv_bfloat16 *Ks) {
  typedef at_dims<HS> D;
  for (int n = 0; n < AT_BC / 16; n++) {
    at_acc acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < HS; kk += 16) {
      at_a_row a;
      at_b_col bk;
      wmma::load_matrix_sync(a, Qw + kk, D::LDH);
      wmma::load_matrix_sync(bk, Ks + n * 16 * D::LDH + kk, D::LDH);
      wmma::mma_sync(acc, a, bk, acc);
    }
    wmma::store_matrix_sync(Sw + n * 16, acc, D::WF, wmma::mem_row_major);
  }
  __syncwarp();
}

/* The online-softmax step over one key tile, two lanes per row (lane: row lane/2, columns
 * c0 .. c0+31 with c0 = 32 (lane & 1)), after the kernel has masked and scaled the row's
 * scores in Sw (masked: -inf) and taken the max of its 32 (mx): m' = max(m, rowmax),
 * P = exp(s - m') as bf16 into Pw, l = l e^(m - m') + rowsum P, arow = e^(m - m').
 * EMPTY_ROWS: a row may have seen no visible key yet (m' = -inf); it then keeps m = -inf,
 * l = 0 and O = 0 (exponents taken against 0 instead of -inf: no NaN). Without it, every
 * row must see a key of the first tile. (The masking loop stays in the kernels: it is what
 * differs between them, and the compiler unrolls it differently for each mask.) */
template <int HS, bool EMPTY_ROWS>
__device__ __forceinline__ void at_softmax_step(const float *Sw, __nv_bfloat16 *Pw, float *mrow,
                                                float *lrow, float *arow, int lane, float mx) {
  typedef at_dims<HS> D;
  const int r = lane >> 1, c0 = (lane & 1) * (AT_BC / 2);
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  float m_old = mrow[r];
  float m_new = fmaxf(m_old, mx);
  float m_use = EMPTY_ROWS && m_new == -INFINITY ? 0.0f : m_new;
  float sum = 0.0f;
  for (int c = 0; c < AT_BC / 2; c++) {
    float p = expf(Sw[r * D::WF + c0 + c] - m_use);
    Pw[r * D::LDP + c0 + c] = __float2bfloat16_rn(p);
    sum += p;
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  float alpha = expf(m_old - m_use); /* 0 while m_old = -inf */
  __syncwarp();                      /* both lanes of the row have read mrow */
  if ((lane & 1) == 0) {
    mrow[r] = m_new;
    lrow[r] = lrow[r] * alpha + sum;
    arow[r] = alpha;
  }
  __syncwarp();
}

/* X_w[16 x 64] Y[64 x HS] into the warp's scratch Sw: X_w the warp's 16 rows of a bf16
 * [.][LDP] tile (P or dS), Y a bf16 [64][LDH] tile (V or K). P V in the forward, dS K
 * (dQ) in the backward. */
template <int HS>
__device__ __forceinline__ void at_rows_times_tile(float *Sw, const __nv_bfloat16 *Xw,
                                                   const __nv_bfloat16 *Ys) {
  typedef at_dims<HS> D;
  for (int n = 0; n < HS / 16; n++) {
    at_acc acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < AT_BC; kk += 16) {
      at_a_row a;
      at_b_row b;
      wmma::load_matrix_sync(a, Xw + kk, D::LDP);
      wmma::load_matrix_sync(b, Ys + kk * D::LDH + n * 16, D::LDH);
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(Sw + n * 16, acc, D::WF, wmma::mem_row_major);
  }
  __syncwarp();
}

/* PV[16 x HS] = P_w V into the scratch Sw (S is consumed), then O = arow O + PV. */
template <int HS>
__device__ __forceinline__ void at_pv_update(float *Ow, float *Sw, const __nv_bfloat16 *Pw,
                                             const __nv_bfloat16 *Vs, const float *arow, int lane) {
  typedef at_dims<HS> D;
  at_rows_times_tile<HS>(Sw, Pw, Vs);
  for (int e = lane; e < 16 * HS; e += 32) {
    int rr = e / HS, d = e % HS;
    Ow[rr * D::LDO + d] = Ow[rr * D::LDO + d] * arow[rr] + Sw[rr * D::WF + d];
  }
  __syncwarp();
}

/* ---- backward ----------------------------------------------------------------------------- */

/* The backward's shared memory: the block's K, V tiles, the current query tile's Q, dO,
 * P and dS (bf16), its rows' lse and Dv, then per warp two fp32 scratch tiles [16][WF]
 * (S and dP; at the end dK and dV). */
template <int HS> struct at_bwd_smem {
  __nv_bfloat16 *Ks, *Vs, *Qs, *dOs, *Ps, *dSs;
  float *lse_s, *D_s, *Sw, *dPw;
};

template <int HS>
__device__ __forceinline__ at_bwd_smem<HS> at_bwd_layout(unsigned char *smem, int warp) {
  typedef at_dims<HS> D;
  at_bwd_smem<HS> s;
  s.Ks = (__nv_bfloat16 *)smem;
  s.Vs = (__nv_bfloat16 *)(smem + D::TILE);
  s.Qs = (__nv_bfloat16 *)(smem + 2 * D::TILE);
  s.dOs = (__nv_bfloat16 *)(smem + 3 * D::TILE);
  s.Ps = (__nv_bfloat16 *)(smem + 4 * D::TILE);
  s.dSs = (__nv_bfloat16 *)(smem + 4 * D::TILE + D::PTILE);
  s.lse_s = (float *)(smem + 4 * D::TILE + 2 * D::PTILE);
  s.D_s = s.lse_s + AT_BR;
  s.Sw = (float *)(smem + 4 * D::TILE + 2 * D::PTILE + 2 * AT_BR * 4 + (size_t)warp * D::BWD_WARP);
  s.dPw = s.Sw + 16 * D::WF;
  return s;
}

/* lse and Dv of the query tile's rows q0 .. q0+63 (row t at lse[row0 + t], Dv[row0 + t])
 * into shared memory; rows at or past nrows get 0. The whole block. */
__device__ __forceinline__ void at_load_row_stats(float *lse_s, float *D_s, const float *lse,
                                                  const float *Dv, size_t row0, int q0, int nrows) {
  for (int rr = threadIdx.x; rr < AT_BR; rr += AT_THREADS) {
    int t = q0 + rr;
    lse_s[rr] = t < nrows ? lse[row0 + t] : 0.0f;
    D_s[rr] = t < nrows ? Dv[row0 + t] : 0.0f;
  }
}

/* S = Q_w K^T and dP = dO_w V^T, [16 x 64] each, into the warp's scratch Sw and dPw. */
template <int HS>
__device__ __forceinline__ void at_scores_dp(float *Sw, float *dPw, const __nv_bfloat16 *Qw,
                                             const __nv_bfloat16 *dOw, const __nv_bfloat16 *Ks,
                                             const __nv_bfloat16 *Vs) {
  typedef at_dims<HS> D;
  for (int n = 0; n < AT_BC / 16; n++) {
    at_acc s_acc, dp_acc;
    wmma::fill_fragment(s_acc, 0.0f);
    wmma::fill_fragment(dp_acc, 0.0f);
    for (int kk = 0; kk < HS; kk += 16) {
      at_a_row a;
      at_b_col bm;
      wmma::load_matrix_sync(a, Qw + kk, D::LDH);
      wmma::load_matrix_sync(bm, Ks + n * 16 * D::LDH + kk, D::LDH);
      wmma::mma_sync(s_acc, a, bm, s_acc);
      wmma::load_matrix_sync(a, dOw + kk, D::LDH);
      wmma::load_matrix_sync(bm, Vs + n * 16 * D::LDH + kk, D::LDH);
      wmma::mma_sync(dp_acc, a, bm, dp_acc);
    }
    wmma::store_matrix_sync(Sw + n * 16, s_acc, D::WF, wmma::mem_row_major);
    wmma::store_matrix_sync(dPw + n * 16, dp_acc, D::WF, wmma::mem_row_major);
  }
  __syncwarp();
}

/* P = exp(scale S - lse) where visible(t, j) (else 0) and dS = P (dP - Dv) for the warp's
 * 16 query rows (tile rows r0 .. r0+15, query t = q0 + tile row; keys k0 ..), two lanes
 * per row, rounded to bf16 into the tile's Ps and dSs. */
template <int HS, class VISIBLE>
__device__ __forceinline__ void at_p_ds(__nv_bfloat16 *Ps, __nv_bfloat16 *dSs, const float *Sw,
                                        const float *dPw, const float *lse_s, const float *D_s,
                                        int lane, int r0, int q0, int k0, float scale,
                                        VISIBLE visible) {
  typedef at_dims<HS> D;
  const int r = lane >> 1, c0 = (lane & 1) * (AT_BC / 2);
  const int t = q0 + r0 + r;
  const float l = lse_s[r0 + r], dv = D_s[r0 + r];
  /* 4: the factor the compiler chose when each kernel had this loop; unpinned, it unrolled
   * the fused backward's fully (more registers, a 4-byte spill at hs 128) */
#pragma unroll 4
  for (int c = 0; c < AT_BC / 2; c++) {
    int j = k0 + c0 + c;
    float p = visible(t, j) ? expf(Sw[r * D::WF + c0 + c] * scale - l) : 0.0f;
    float ds = p * (dPw[r * D::WF + c0 + c] - dv);
    Ps[(r0 + r) * D::LDP + c0 + c] = __float2bfloat16_rn(p);
    dSs[(r0 + r) * D::LDP + c0 + c] = __float2bfloat16_rn(ds);
  }
}

/* dV_w += P^T dO and dK_w += dS^T Q over the tile's 64 queries (warp w: keys r0 ..
 * r0+15 of the key tile), in WMMA registers. Needs the whole tile's P and dS. */
template <int HS>
__device__ __forceinline__ void
at_dv_dk(at_acc (&dV)[HS / 16], at_acc (&dK)[HS / 16], const __nv_bfloat16 *Ps,
         const __nv_bfloat16 *dSs, const __nv_bfloat16 *dOs, const __nv_bfloat16 *Qs, int r0) {
  typedef at_dims<HS> D;
  for (int kk = 0; kk < AT_BR; kk += 16) {
    at_a_col pt, dst;
    wmma::load_matrix_sync(pt, Ps + kk * D::LDP + r0, D::LDP);
    wmma::load_matrix_sync(dst, dSs + kk * D::LDP + r0, D::LDP);
    for (int n = 0; n < HS / 16; n++) {
      at_b_row bm;
      wmma::load_matrix_sync(bm, dOs + kk * D::LDH + n * 16, D::LDH);
      wmma::mma_sync(dV[n], pt, bm, dV[n]);
      wmma::load_matrix_sync(bm, Qs + kk * D::LDH + n * 16, D::LDH);
      wmma::mma_sync(dK[n], dst, bm, dK[n]);
    }
  }
}

/* dQ of the warp's 16 query rows, dS_w[16 x 64] K[64 x HS], into the scratch Sw, then
 * added with atomicAdd (other key tiles add into the same rows) into dq, scaled: query t's
 * channel d at dq[(row0 + t) * dq_stride + col0 + d]; rows at or past nrows are skipped. */
template <int HS>
__device__ __forceinline__ void at_dq_atomic(float *dq, size_t row0, int dq_stride, size_t col0,
                                             float *Sw, const __nv_bfloat16 *dSw,
                                             const __nv_bfloat16 *Ks, int lane, int t0, int nrows,
                                             float scale) {
  typedef at_dims<HS> D;
  at_rows_times_tile<HS>(Sw, dSw, Ks);
  for (int e = lane; e < 16 * HS; e += 32) {
    int rr = e / HS, d = e % HS, t = t0 + rr;
    if (t < nrows) atomicAdd(&dq[(row0 + t) * dq_stride + col0 + d], scale * Sw[rr * D::WF + d]);
  }
}

/* At the end: the warp's dK (times scale) and dV added into an activation — key j's
 * channel d of dk at dkv[at + k_off], of dv at dkv[at + v_off], at = (row0 + j) * stride +
 * col0 + d (read, add in fp32, store rounded; each key row of a head belongs to one thread
 * block). Rows at or past nrows are skipped. */
template <int HS, class ACT>
__device__ __forceinline__ void
at_add_dk_dv(ACT *dkv, size_t row0, size_t stride, size_t col0, size_t k_off, size_t v_off,
             float *Sw, float *dPw, const at_acc (&dK)[HS / 16], const at_acc (&dV)[HS / 16],
             int lane, int j0, int nrows, float scale) {
  typedef at_dims<HS> D;
  __syncwarp();
  for (int n = 0; n < HS / 16; n++) {
    wmma::store_matrix_sync(Sw + n * 16, dK[n], D::WF, wmma::mem_row_major);
    wmma::store_matrix_sync(dPw + n * 16, dV[n], D::WF, wmma::mem_row_major);
  }
  __syncwarp();
  for (int e = lane; e < 16 * HS; e += 32) {
    int rr = e / HS, d = e % HS, j = j0 + rr;
    if (j < nrows) {
      size_t at = (row0 + j) * stride + col0 + d;
      kcuda_st(dkv, at + k_off, kcuda_ld(dkv, at + k_off) + scale * Sw[rr * D::WF + d]);
      kcuda_st(dkv, at + v_off, kcuda_ld(dkv, at + v_off) + dPw[rr * D::WF + d]);
    }
  }
}

/* ---- small kernels both families launch --------------------------------------------------- */

/* The sum over a row's hs channels of g[d] o[d] (activations or fp32), on every lane of
 * the warp (lane d, d+32, ... then a warp sum). */
template <class G, class O>
__device__ __forceinline__ float at_row_dot(const G *g, const O *o, int hs, int lane) {
  float s = 0.0f;
  for (int d = lane; d < hs; d += 32)
    s += kcuda_ld(g, d) * kcuda_ld(o, d);
  return kcuda_warp_sum(s);
}

/* dst[r*dst_stride + c] += src[r*width + c] for r < rows, c < width: adds an fp32
 * accumulation (atomics' scratch) into an activation, rounding once (grid-stride). */
template <class ACT>
__global__ void at_add_rows_kernel(ACT *dst, int dst_stride, const float *src, size_t rows,
                                   int width) {
  size_t total = rows * (size_t)width;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
       i += (size_t)gridDim.x * blockDim.x) {
    size_t r = i / (size_t)width, at = r * (size_t)dst_stride + i % (size_t)width;
    kcuda_st(dst, at, kcuda_ld(dst, at) + src[i]);
  }
}

#endif /* STEPSCOPE_ATTENTION_TILES_CUH */
