/*
 * flash_attention.cu — fused causal attention (flash-attention style), forward and
 * backward, on bf16 tensor cores (WMMA 16x16x16, fp32 accumulation), with no T x T
 * buffer. The CUDA device selects it with STEPSCOPE_CUDA_ATTENTION=fused; the
 * default stays the batched-GEMM path of attention.cu until a GPU run shows which is
 * faster (docs/cuda-backend.md). kernels/cpu/attention.c is the specification of
 * what is computed; the saved tensors differ (below).
 *
 * Shapes: qkv [B,T,3,NH,hs] as in attention.c, hs in {32, 64, 128}. Tiles of 64
 * queries x 64 keys; a block of 4 warps, each warp owning 16 rows of a tile.
 *
 * Forward, block = (query tile, b*NH+h), heaviest (last) query tiles first:
 *   Q tile -> shared (bf16). For each key tile up to the diagonal: K, V -> shared
 *   (bf16); S = Q K^T (WMMA, fp32) into the warp's scratch; the causal mask and the
 *   online softmax per row (2 lanes per row): m' = max(m, rowmax(s)),
 *   P = exp(s - m') (bf16), l = l exp(m - m') + rowsum(P), O = O exp(m - m') + P V
 *   (O kept in shared fp32, since a WMMA accumulator's element-to-row mapping is
 *   unspecified and cannot be rescaled per row in registers). Finally out = O / l and
 *   the row's log-sum-exp lse = m + log l.
 * Saved for backward (the device API passes `att` [B,NH,T,T] from forward to
 * backward): att[0 .. B*NH*T) holds lse, and att[B*NH*T ..) a copy of O in
 * [B,NH,T,hs] layout (needs T >= hs + 1 floats per row: kcuda_attention_fused_supported
 * says so; otherwise the device uses the GEMM path). preatt is not used.
 *
 * Backward (FlashAttention-2), block = (key tile, b*NH+h):
 *   Dv_i = dO_i . O_i (a small kernel, one warp per row);
 *   K, V tile -> shared; for each query tile from the diagonal down: Q, dO -> shared;
 *   S = Q K^T, dP = dO V^T (WMMA); P = exp(scale S - lse) under the causal mask,
 *   dS = P (dP - Dv) (bf16, shared); dV += P^T dO and dK += dS^T Q accumulate in
 *   WMMA registers (each warp owns 16 keys); dQ_tile = dS K goes to dqkv with
 *   atomicAdd (several key tiles add into one query row: the order, and so the last
 *   bits, vary between runs). At the end dK (times the softmax scale) and dV are added
 *   into dqkv (each key row belongs to one block: plain adds).
 *   Like every backward, dqkv accumulates; dpreatt and datt are not used.
 * Numerics: Q, K, V, dO, P and dS are rounded to bf16 for the tensor cores; sums,
 * softmax statistics and outputs are fp32. Tolerances are in tests/gpu.
 */
#include <math.h>
#include <mma.h>

#include "kcuda_internal.cuh"

using namespace nvcuda;

#define FA_BR 64      /* queries per tile */
#define FA_BC 64      /* keys per tile */
#define FA_THREADS 128 /* 4 warps x 16 rows */

template <int HS> struct fa_dims {
    static constexpr int LDH = HS + 8;                         /* bf16 row stride: Q K V dO */
    static constexpr int LDP = FA_BC + 8;                      /* bf16 row stride: P dS */
    static constexpr int WF = (HS > FA_BC ? HS : FA_BC) + 4;   /* fp32 row stride: scratch */
    static constexpr int LDO = HS + 4;                         /* fp32 row stride: O */
    /* every region is a multiple of 128 bytes, so each starts 128-byte aligned */
    static constexpr size_t TILE = (size_t)FA_BR * LDH * 2;
    static constexpr size_t PTILE = (size_t)FA_BR * LDP * 2;
    static constexpr size_t FWD_WARP = (size_t)16 * WF * 4 + (size_t)16 * LDP * 2 +
                                       (size_t)16 * LDO * 4 + 256;
    static constexpr size_t FWD_SMEM = 3 * TILE + 4 * FWD_WARP;
    static constexpr size_t BWD_WARP = 2 * (size_t)16 * WF * 4;
    static constexpr size_t BWD_SMEM = 4 * TILE + 2 * PTILE + 2 * FA_BR * 4 + 4 * BWD_WARP;
};

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> fa_acc;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa_a_row;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major> fa_a_col;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fa_b_col;

/* rows [r0, r0+64) of one of q (part 0), k (1), v (2) of head h into a bf16 tile; rows
 * at or past T are zero */
template <int HS>
__device__ __forceinline__ void fa_load_qkv_tile(__nv_bfloat16 *tile, const float *qkv, int b,
                                                 int h, int part, int r0, int T, int C)
{
    for (int idx = threadIdx.x; idx < FA_BR * HS; idx += FA_THREADS) {
        int r = idx / HS, d = idx % HS, t = r0 + r;
        float v = t < T ? qkv[((size_t)b * T + t) * 3 * C + (size_t)part * C + (size_t)h * HS + d]
                        : 0.0f;
        tile[r * fa_dims<HS>::LDH + d] = __float2bfloat16_rn(v);
    }
}

template <int HS>
__global__ void __launch_bounds__(FA_THREADS)
    flash_forward_kernel(float *out, float *lse, float *ocopy, const float *qkv, int T, int NH,
                         float scale)
{
    typedef fa_dims<HS> D;
    extern __shared__ __align__(128) unsigned char fa_smem[];
    const int qt = gridDim.x - 1 - blockIdx.x; /* the longest rows first */
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const int q0 = qt * FA_BR, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)fa_smem;
    __nv_bfloat16 *Ks = (__nv_bfloat16 *)(fa_smem + D::TILE);
    __nv_bfloat16 *Vs = (__nv_bfloat16 *)(fa_smem + 2 * D::TILE);
    unsigned char *mine = fa_smem + 3 * D::TILE + (size_t)warp * D::FWD_WARP;
    float *Sw = (float *)mine;                                          /* [16][WF] */
    __nv_bfloat16 *Pw = (__nv_bfloat16 *)(mine + (size_t)16 * D::WF * 4); /* [16][LDP] */
    float *Ow = (float *)(mine + (size_t)16 * D::WF * 4 + (size_t)16 * D::LDP * 2); /* [16][LDO] */
    float *mrow = Ow + 16 * D::LDO, *lrow = mrow + 16, *arow = lrow + 16;

    fa_load_qkv_tile<HS>(Qs, qkv, b, h, 0, q0, T, C);
    for (int e = lane; e < 16 * HS; e += 32)
        Ow[(e / HS) * D::LDO + e % HS] = 0.0f;
    if (lane < 16) {
        mrow[lane] = -INFINITY;
        lrow[lane] = 0.0f;
    }
    const int r = lane >> 1, c0 = (lane & 1) * (FA_BC / 2);
    const int i = q0 + warp * 16 + r; /* this lane's query row */
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * FA_BC;
        __syncthreads(); /* the previous K, V are consumed (and Q is loaded) */
        fa_load_qkv_tile<HS>(Ks, qkv, b, h, 1, k0, T, C);
        fa_load_qkv_tile<HS>(Vs, qkv, b, h, 2, k0, T, C);
        __syncthreads();
        /* S[16 x 64] = Q_w K^T */
        for (int n = 0; n < FA_BC / 16; n++) {
            fa_acc acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < HS; kk += 16) {
                fa_a_row a;
                fa_b_col bk;
                wmma::load_matrix_sync(a, Qs + warp * 16 * D::LDH + kk, D::LDH);
                wmma::load_matrix_sync(bk, Ks + n * 16 * D::LDH + kk, D::LDH);
                wmma::mma_sync(acc, a, bk, acc);
            }
            wmma::store_matrix_sync(Sw + n * 16, acc, D::WF, wmma::mem_row_major);
        }
        __syncwarp();
        /* online softmax: two lanes per row, 32 columns each */
        float mx = -INFINITY;
        for (int c = 0; c < FA_BC / 2; c++) {
            int j = k0 + c0 + c;
            float s = j <= i ? Sw[r * D::WF + c0 + c] * scale : -INFINITY;
            Sw[r * D::WF + c0 + c] = s;
            mx = fmaxf(mx, s);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float m_old = mrow[r];
        float m_new = fmaxf(m_old, mx); /* finite: key k0 <= every row of this tile */
        float sum = 0.0f;
        for (int c = 0; c < FA_BC / 2; c++) {
            float p = expf(Sw[r * D::WF + c0 + c] - m_new);
            Pw[r * D::LDP + c0 + c] = __float2bfloat16_rn(p);
            sum += p;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        float alpha = expf(m_old - m_new); /* 0 on the first tile (m_old = -inf) */
        __syncwarp();                      /* both lanes of the row have read mrow */
        if ((lane & 1) == 0) {
            mrow[r] = m_new;
            lrow[r] = lrow[r] * alpha + sum;
            arow[r] = alpha;
        }
        __syncwarp();
        /* PV[16 x HS] into the scratch (S is consumed), then O = alpha O + PV */
        for (int n = 0; n < HS / 16; n++) {
            fa_acc acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < FA_BC; kk += 16) {
                fa_a_row a;
                fa_b_row bv;
                wmma::load_matrix_sync(a, Pw + kk, D::LDP);
                wmma::load_matrix_sync(bv, Vs + kk * D::LDH + n * 16, D::LDH);
                wmma::mma_sync(acc, a, bv, acc);
            }
            wmma::store_matrix_sync(Sw + n * 16, acc, D::WF, wmma::mem_row_major);
        }
        __syncwarp();
        for (int e = lane; e < 16 * HS; e += 32) {
            int rr = e / HS, d = e % HS;
            Ow[rr * D::LDO + d] = Ow[rr * D::LDO + d] * arow[rr] + Sw[rr * D::WF + d];
        }
        __syncwarp();
    }
    for (int e = lane; e < 16 * HS; e += 32) {
        int rr = e / HS, d = e % HS, t = q0 + warp * 16 + rr;
        if (t < T) {
            float o = Ow[rr * D::LDO + d] / lrow[rr];
            out[((size_t)b * T + t) * C + (size_t)h * HS + d] = o;
            ocopy[((size_t)bh * T + t) * HS + d] = o;
        }
    }
    if (lane < 16) {
        int t = q0 + warp * 16 + lane;
        if (t < T)
            lse[(size_t)bh * T + t] = mrow[lane] + logf(lrow[lane]);
    }
}

/* Dv[bh, t] = sum_d dout[b, t, h*hs + d] * O[bh, t, d]: one warp per row. */
__global__ void flash_backward_dot_kernel(float *Dv, const float *dout, const float *ocopy,
                                          int rows, int T, int NH, int hs)
{
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    int t = row % T, bh = row / T, b = bh / NH, h = bh % NH;
    const float *g = dout + ((size_t)b * T + t) * NH * hs + (size_t)h * hs;
    const float *o = ocopy + (size_t)row * hs;
    float s = 0.0f;
    for (int d = lane; d < hs; d += 32)
        s += g[d] * o[d];
    s = kcuda_warp_sum(s);
    if (lane == 0)
        Dv[row] = s;
}

/* rows [r0, r0+64) of dout's head h into a bf16 tile (zero past T) */
template <int HS>
__device__ __forceinline__ void fa_load_dout_tile(__nv_bfloat16 *tile, const float *dout, int b,
                                                  int h, int r0, int T, int C)
{
    for (int idx = threadIdx.x; idx < FA_BR * HS; idx += FA_THREADS) {
        int r = idx / HS, d = idx % HS, t = r0 + r;
        float v = t < T ? dout[((size_t)b * T + t) * C + (size_t)h * HS + d] : 0.0f;
        tile[r * fa_dims<HS>::LDH + d] = __float2bfloat16_rn(v);
    }
}

template <int HS>
__global__ void __launch_bounds__(FA_THREADS)
    flash_backward_kernel(float *dqkv, const float *dout, const float *qkv, const float *lse,
                          const float *Dv, int T, int NH, float scale)
{
    typedef fa_dims<HS> D;
    extern __shared__ __align__(128) unsigned char fa_smem[];
    const int kt = blockIdx.x; /* key tile 0 sees every query tile: the longest first */
    const int nq = (T + FA_BR - 1) / FA_BR;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const int k0 = kt * FA_BC, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t C3 = (size_t)3 * C;
    __nv_bfloat16 *Ks = (__nv_bfloat16 *)fa_smem;
    __nv_bfloat16 *Vs = (__nv_bfloat16 *)(fa_smem + D::TILE);
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)(fa_smem + 2 * D::TILE);
    __nv_bfloat16 *dOs = (__nv_bfloat16 *)(fa_smem + 3 * D::TILE);
    __nv_bfloat16 *Ps = (__nv_bfloat16 *)(fa_smem + 4 * D::TILE);
    __nv_bfloat16 *dSs = (__nv_bfloat16 *)(fa_smem + 4 * D::TILE + D::PTILE);
    float *lse_s = (float *)(fa_smem + 4 * D::TILE + 2 * D::PTILE);
    float *D_s = lse_s + FA_BR;
    unsigned char *mine = fa_smem + 4 * D::TILE + 2 * D::PTILE + 2 * FA_BR * 4 +
                          (size_t)warp * D::BWD_WARP;
    float *Sw = (float *)mine;            /* [16][WF] */
    float *dPw = Sw + 16 * D::WF;         /* [16][WF] */

    fa_load_qkv_tile<HS>(Ks, qkv, b, h, 1, k0, T, C);
    fa_load_qkv_tile<HS>(Vs, qkv, b, h, 2, k0, T, C);
    fa_acc dK[HS / 16], dV[HS / 16];
    for (int n = 0; n < HS / 16; n++) {
        wmma::fill_fragment(dK[n], 0.0f);
        wmma::fill_fragment(dV[n], 0.0f);
    }
    const int r = lane >> 1, c0 = (lane & 1) * (FA_BC / 2), r0 = warp * 16;
    for (int qt = kt; qt < nq; qt++) {
        const int q0 = qt * FA_BR;
        __syncthreads(); /* the previous tile's Q, dO, P, dS are consumed */
        fa_load_qkv_tile<HS>(Qs, qkv, b, h, 0, q0, T, C);
        fa_load_dout_tile<HS>(dOs, dout, b, h, q0, T, C);
        for (int rr = threadIdx.x; rr < FA_BR; rr += FA_THREADS) {
            int t = q0 + rr;
            lse_s[rr] = t < T ? lse[(size_t)bh * T + t] : 0.0f;
            D_s[rr] = t < T ? Dv[(size_t)bh * T + t] : 0.0f;
        }
        __syncthreads();
        /* S = Q_w K^T and dP = dO_w V^T, [16 x 64] each */
        for (int n = 0; n < FA_BC / 16; n++) {
            fa_acc s_acc, dp_acc;
            wmma::fill_fragment(s_acc, 0.0f);
            wmma::fill_fragment(dp_acc, 0.0f);
            for (int kk = 0; kk < HS; kk += 16) {
                fa_a_row a;
                fa_b_col bm;
                wmma::load_matrix_sync(a, Qs + r0 * D::LDH + kk, D::LDH);
                wmma::load_matrix_sync(bm, Ks + n * 16 * D::LDH + kk, D::LDH);
                wmma::mma_sync(s_acc, a, bm, s_acc);
                wmma::load_matrix_sync(a, dOs + r0 * D::LDH + kk, D::LDH);
                wmma::load_matrix_sync(bm, Vs + n * 16 * D::LDH + kk, D::LDH);
                wmma::mma_sync(dp_acc, a, bm, dp_acc);
            }
            wmma::store_matrix_sync(Sw + n * 16, s_acc, D::WF, wmma::mem_row_major);
            wmma::store_matrix_sync(dPw + n * 16, dp_acc, D::WF, wmma::mem_row_major);
        }
        __syncwarp();
        {
            const int t = q0 + r0 + r;
            const float l = lse_s[r0 + r], dv = D_s[r0 + r];
            for (int c = 0; c < FA_BC / 2; c++) {
                int j = k0 + c0 + c;
                float p = (t < T && j <= t) ? expf(Sw[r * D::WF + c0 + c] * scale - l) : 0.0f;
                float ds = p * (dPw[r * D::WF + c0 + c] - dv);
                Ps[(r0 + r) * D::LDP + c0 + c] = __float2bfloat16_rn(p);
                dSs[(r0 + r) * D::LDP + c0 + c] = __float2bfloat16_rn(ds);
            }
        }
        __syncthreads(); /* the whole tile's P and dS */
        /* dV_w += P^T dO, dK_w += dS^T Q over the tile's 64 queries (warp w: keys 16w..) */
        for (int kk = 0; kk < FA_BR; kk += 16) {
            fa_a_col pt, dst;
            wmma::load_matrix_sync(pt, Ps + kk * D::LDP + r0, D::LDP);
            wmma::load_matrix_sync(dst, dSs + kk * D::LDP + r0, D::LDP);
            for (int n = 0; n < HS / 16; n++) {
                fa_b_row bm;
                wmma::load_matrix_sync(bm, dOs + kk * D::LDH + n * 16, D::LDH);
                wmma::mma_sync(dV[n], pt, bm, dV[n]);
                wmma::load_matrix_sync(bm, Qs + kk * D::LDH + n * 16, D::LDH);
                wmma::mma_sync(dK[n], dst, bm, dK[n]);
            }
        }
        /* dQ rows of warp w: dS[16 x 64] K[64 x HS], added into dqkv (atomics: other key
         * tiles add into the same rows) */
        for (int n = 0; n < HS / 16; n++) {
            fa_acc acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < FA_BC; kk += 16) {
                fa_a_row a;
                fa_b_row bm;
                wmma::load_matrix_sync(a, dSs + r0 * D::LDP + kk, D::LDP);
                wmma::load_matrix_sync(bm, Ks + kk * D::LDH + n * 16, D::LDH);
                wmma::mma_sync(acc, a, bm, acc);
            }
            wmma::store_matrix_sync(Sw + n * 16, acc, D::WF, wmma::mem_row_major);
        }
        __syncwarp();
        for (int e = lane; e < 16 * HS; e += 32) {
            int rr = e / HS, d = e % HS, t = q0 + r0 + rr;
            if (t < T)
                atomicAdd(&dqkv[((size_t)b * T + t) * C3 + (size_t)h * HS + d],
                          scale * Sw[rr * D::WF + d]);
        }
    }
    __syncwarp();
    for (int n = 0; n < HS / 16; n++) {
        wmma::store_matrix_sync(Sw + n * 16, dK[n], D::WF, wmma::mem_row_major);
        wmma::store_matrix_sync(dPw + n * 16, dV[n], D::WF, wmma::mem_row_major);
    }
    __syncwarp();
    for (int e = lane; e < 16 * HS; e += 32) {
        int rr = e / HS, d = e % HS, j = k0 + r0 + rr;
        if (j < T) {
            size_t at = ((size_t)b * T + j) * C3 + (size_t)h * HS + d;
            dqkv[at + C] += scale * Sw[rr * D::WF + d];
            dqkv[at + 2 * (size_t)C] += dPw[rr * D::WF + d];
        }
    }
}

int kcuda_attention_fused_supported(int B, int T, int C, int NH)
{
    if (B <= 0 || T <= 0 || NH <= 0 || C % NH != 0 || B * NH > 65535)
        return 0;
    int hs = C / NH;
    return (hs == 32 || hs == 64 || hs == 128) && T >= hs + 1;
}

template <int HS>
static int fused_forward(kcuda_ctx *k, float *out, float *att, const float *qkv, int B, int T,
                         int NH)
{
    typedef fa_dims<HS> D;
    cudaError_t e = cudaFuncSetAttribute(flash_forward_kernel<HS>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)D::FWD_SMEM);
    if (e != cudaSuccess)
        return kcuda_fail(k, "fused attention forward: %zu bytes of shared memory: %s",
                          D::FWD_SMEM, cudaGetErrorString(e));
    size_t rows = (size_t)B * NH * T;
    dim3 grid((T + FA_BR - 1) / FA_BR, B * NH);
    flash_forward_kernel<HS><<<grid, FA_THREADS, D::FWD_SMEM, k->stream>>>(
        out, att, att + rows, qkv, T, NH, 1.0f / sqrtf((float)HS));
    return kcuda_check_launch(k, "fused attention forward");
}

template <int HS>
static int fused_backward(kcuda_ctx *k, float *dqkv, const float *dout, const float *qkv,
                          const float *att, int B, int T, int NH)
{
    typedef fa_dims<HS> D;
    int rows = B * NH * T;
    float *Dv = (float *)kcuda_scratch(k, KCUDA_SCRATCH_ATTN, (size_t)rows * sizeof(float));
    if (!Dv)
        return -1;
    flash_backward_dot_kernel<<<(rows + 7) / 8, 256, 0, k->stream>>>(Dv, dout, att + rows, rows,
                                                                      T, NH, HS);
    if (kcuda_check_launch(k, "fused attention backward (dO . O)") != 0)
        return -1;
    cudaError_t e = cudaFuncSetAttribute(flash_backward_kernel<HS>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)D::BWD_SMEM);
    if (e != cudaSuccess)
        return kcuda_fail(k, "fused attention backward: %zu bytes of shared memory: %s",
                          D::BWD_SMEM, cudaGetErrorString(e));
    dim3 grid((T + FA_BC - 1) / FA_BC, B * NH);
    flash_backward_kernel<HS><<<grid, FA_THREADS, D::BWD_SMEM, k->stream>>>(
        dqkv, dout, qkv, att, Dv, T, NH, 1.0f / sqrtf((float)HS));
    return kcuda_check_launch(k, "fused attention backward");
}

int kcuda_attention_forward_fused(kcuda_ctx *k, float *out, float *att, const float *qkv, int B,
                                  int T, int C, int NH)
{
    if (!kcuda_attention_fused_supported(B, T, C, NH))
        return kcuda_fail(k, "fused attention: unsupported shape B=%d T=%d C=%d NH=%d (head size "
                             "32, 64 or 128 and T > head size)", B, T, C, NH);
    switch (C / NH) {
    case 32: return fused_forward<32>(k, out, att, qkv, B, T, NH);
    case 64: return fused_forward<64>(k, out, att, qkv, B, T, NH);
    default: return fused_forward<128>(k, out, att, qkv, B, T, NH);
    }
}

int kcuda_attention_backward_fused(kcuda_ctx *k, float *dqkv, const float *dout, const float *qkv,
                                   const float *att, int B, int T, int C, int NH)
{
    if (!kcuda_attention_fused_supported(B, T, C, NH))
        return kcuda_fail(k, "fused attention: unsupported shape B=%d T=%d C=%d NH=%d", B, T, C,
                          NH);
    switch (C / NH) {
    case 32: return fused_backward<32>(k, dqkv, dout, qkv, att, B, T, NH);
    case 64: return fused_backward<64>(k, dqkv, dout, qkv, att, B, T, NH);
    default: return fused_backward<128>(k, dqkv, dout, qkv, att, B, T, NH);
    }
}
