/*
 * flash_attention_kernels.cuh — the device code of flash_attention.cu (see there for what
 * the fused causal attention computes and how): the bf16 WMMA forward and backward kernels,
 * the dO . O row kernel, as templates on the head size and on the activation storage type
 * ACT (float or __nv_bfloat16: qkv, out, dout, dqkv; lse, the output copy and Dv stay fp32).
 * The tile sizes, the shared-memory layout and the tile steps (loads, S = Q K^T, the
 * online softmax, P V, dP, dS, dV/dK/dQ products) are shared with ring attention's block
 * kernels in attention_tiles.cuh; this file holds what is particular to causal attention
 * over a whole [B,T,3C] qkv: the causal mask, the tile order, out = O / l with the saved
 * lse and output copy, and dqkv's layout.
 *
 * Why a separate header: like attention_block_kernels.cuh, the kernels use only the part
 * of CUDA's device API that tests/gpu/cuda_emu.h emulates (thread/block indices,
 * __syncthreads, __syncwarp, __shfl_xor_sync, atomicAdd on float, bf16 conversions,
 * nvcuda::wmma 16x16x16 bf16 fragments, dynamic shared memory `at_smem`, kcuda_warp_sum,
 * kcuda_ld/kcuda_st), so tests/gpu/test_attention_block_emu.cpp (argument `fused`) runs
 * exactly this code on a CPU. The includer provides the API first: flash_attention.cu
 * includes <mma.h> and kcuda_internal.cuh; the emulation its own.
 */
#ifndef STEPSCOPE_FLASH_ATTENTION_KERNELS_CUH
#define STEPSCOPE_FLASH_ATTENTION_KERNELS_CUH

#include "attention_tiles.cuh"

/* Offset of row t of head h in a [B, T, parts x C] activation, part p: qkv (parts 3; q 0,
 * k 1, v 2) or dout (parts 1, part 0). For at_load_tile. */
struct fa_row {
  int b, T, parts, part, C, h, HS;
  __device__ __forceinline__ size_t operator()(int t) const {
    return ((size_t)b * T + t) * parts * C + (size_t)part * C + (size_t)h * HS;
  }
};

/* A minimum of 2 blocks per SM in the launch bounds: with the block size alone, ptxas (CUDA
 * 13) capped the hs-64 fp32-storage instance at 64 registers and spilled 4 bytes. */
template <int HS, class ACT>
__global__ void __launch_bounds__(AT_THREADS, 2)
    flash_forward_kernel(ACT *out, float *lse, float *ocopy, const ACT *qkv, int T, int NH,
                         float scale) {
  typedef at_dims<HS> D;
  extern __shared__ __align__(128) unsigned char at_smem[];
  const int qt = gridDim.x - 1 - blockIdx.x; /* the longest rows first */
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
  const int q0 = qt * AT_BR, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const at_fwd_smem<HS> sm = at_fwd_layout<HS>(at_smem, warp);
  const fa_row q_row = {b, T, 3, 0, C, h, HS}, k_row = {b, T, 3, 1, C, h, HS},
               v_row = {b, T, 3, 2, C, h, HS};

  at_load_tile<HS>(sm.Qs, qkv, q_row, q0, T);
  at_fwd_start<HS>(sm.Ow, sm.mrow, sm.lrow, lane);
  const int r = lane >> 1, c0 = (lane & 1) * (AT_BC / 2);
  const int i = q0 + warp * 16 + r; /* this lane's query row */
  for (int kt = 0; kt <= qt; kt++) {
    const int k0 = kt * AT_BC;
    __syncthreads(); /* the previous K, V are consumed (and Q is loaded) */
    at_load_tile<HS>(sm.Ks, qkv, k_row, k0, T);
    at_load_tile<HS>(sm.Vs, qkv, v_row, k0, T);
    __syncthreads();
    at_scores<HS>(sm.Sw, sm.Qs + warp * 16 * D::LDH, sm.Ks);
    /* the causal mask, scaled scores, the row max: two lanes per row, 32 columns each */
    float mx = -INFINITY;
    for (int c = 0; c < AT_BC / 2; c++) {
      int j = k0 + c0 + c;
      float s = j <= i ? sm.Sw[r * D::WF + c0 + c] * scale : -INFINITY;
      sm.Sw[r * D::WF + c0 + c] = s;
      mx = fmaxf(mx, s);
    }
    /* key k0 <= every row of this tile: no row is empty */
    at_softmax_step<HS, false>(sm.Sw, sm.Pw, sm.mrow, sm.lrow, sm.arow, lane, mx);
    at_pv_update<HS>(sm.Ow, sm.Sw, sm.Pw, sm.Vs, sm.arow, lane);
  }
  for (int e = lane; e < 16 * HS; e += 32) {
    int rr = e / HS, d = e % HS, t = q0 + warp * 16 + rr;
    if (t < T) {
      float o = sm.Ow[rr * D::LDO + d] / sm.lrow[rr];
      kcuda_st(out, ((size_t)b * T + t) * C + (size_t)h * HS + d, o);
      ocopy[((size_t)bh * T + t) * HS + d] = o;
    }
  }
  if (lane < 16) {
    int t = q0 + warp * 16 + lane;
    if (t < T) lse[(size_t)bh * T + t] = sm.mrow[lane] + logf(sm.lrow[lane]);
  }
}

/* Dv[bh, t] = sum_d dout[b, t, h*hs + d] * O[bh, t, d]: one warp per row. */
template <class ACT>
__global__ void flash_backward_dot_kernel(float *Dv, const ACT *dout, const float *ocopy, int rows,
                                          int T, int NH, int hs) {
  int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  int t = row % T, bh = row / T, b = bh / NH, h = bh % NH;
  float s = at_row_dot(dout + ((size_t)b * T + t) * NH * hs + (size_t)h * hs,
                       ocopy + (size_t)row * hs, hs, lane);
  if (lane == 0) Dv[row] = s;
}

/* dq: fp32 rows of dq_stride (the q columns of an fp32 dqkv, stride 3C, or zeroed scratch
 * [B*T, C] that at_add_rows_kernel adds into a bf16 dqkv); it receives atomicAdds. dqkv's
 * k|v columns: read-add-store (each key row of a head belongs to one thread block). */
template <int HS, class ACT>
__global__ void __launch_bounds__(AT_THREADS)
    flash_backward_kernel(float *dq, int dq_stride, ACT *dqkv, const ACT *dout, const ACT *qkv,
                          const float *lse, const float *Dv, int T, int NH, float scale) {
  typedef at_dims<HS> D;
  extern __shared__ __align__(128) unsigned char at_smem[];
  const int kt = blockIdx.x; /* key tile 0 sees every query tile: the longest first */
  const int nq = (T + AT_BR - 1) / AT_BR;
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
  const int k0 = kt * AT_BC, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const size_t C3 = (size_t)3 * C;
  const at_bwd_smem<HS> sm = at_bwd_layout<HS>(at_smem, warp);
  const fa_row q_row = {b, T, 3, 0, C, h, HS}, k_row = {b, T, 3, 1, C, h, HS},
               v_row = {b, T, 3, 2, C, h, HS}, g_row = {b, T, 1, 0, C, h, HS};

  at_load_tile<HS>(sm.Ks, qkv, k_row, k0, T);
  at_load_tile<HS>(sm.Vs, qkv, v_row, k0, T);
  at_acc dK[HS / 16], dV[HS / 16];
  for (int n = 0; n < HS / 16; n++) {
    wmma::fill_fragment(dK[n], 0.0f);
    wmma::fill_fragment(dV[n], 0.0f);
  }
  const int r0 = warp * 16;
  for (int qt = kt; qt < nq; qt++) {
    const int q0 = qt * AT_BR;
    __syncthreads(); /* the previous tile's Q, dO, P, dS are consumed */
    at_load_tile<HS>(sm.Qs, qkv, q_row, q0, T);
    at_load_tile<HS>(sm.dOs, dout, g_row, q0, T);
    at_load_row_stats(sm.lse_s, sm.D_s, lse, Dv, (size_t)bh * T, q0, T);
    __syncthreads();
    at_scores_dp<HS>(sm.Sw, sm.dPw, sm.Qs + r0 * D::LDH, sm.dOs + r0 * D::LDH, sm.Ks, sm.Vs);
    at_p_ds<HS>(sm.Ps, sm.dSs, sm.Sw, sm.dPw, sm.lse_s, sm.D_s, lane, r0, q0, k0, scale,
                [=](int t, int j) { return t < T && j <= t; });
    __syncthreads(); /* the whole tile's P and dS */
    at_dv_dk<HS>(dV, dK, sm.Ps, sm.dSs, sm.dOs, sm.Qs, r0);
    at_dq_atomic<HS>(dq, (size_t)b * T, dq_stride, (size_t)h * HS, sm.Sw, sm.dSs + r0 * D::LDP,
                     sm.Ks, lane, q0 + r0, T, scale);
  }
  /* dk | dv: the k and v columns of dqkv */
  at_add_dk_dv<HS>(dqkv, (size_t)b * T, C3, (size_t)h * HS, (size_t)C, 2 * (size_t)C, sm.Sw, sm.dPw,
                   dK, dV, lane, k0 + r0, T, scale);
}

#endif /* STEPSCOPE_FLASH_ATTENTION_KERNELS_CUH */
