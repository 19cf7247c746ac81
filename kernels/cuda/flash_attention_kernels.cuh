/*
 * flash_attention_kernels.cuh — the device code of flash_attention.cu (see there for what
 * the fused causal attention computes and how): tile sizes, shared-memory layout, the bf16
 * WMMA forward and backward kernels, the dO . O row kernel and the final dq add, as
 * templates on the head size and on the activation storage type ACT (float or
 * __nv_bfloat16: qkv, out, dout, dqkv; lse, the output copy and Dv stay fp32).
 *
 * Why a separate header: like attention_block_kernels.cuh, the kernels use only the part
 * of CUDA's device API that tests/gpu/cuda_emu.h emulates (thread/block indices,
 * __syncthreads, __syncwarp, __shfl_xor_sync, atomicAdd on float, bf16 conversions,
 * nvcuda::wmma 16x16x16 bf16 fragments, dynamic shared memory `fa_smem`, kcuda_warp_sum,
 * kcuda_ld/kcuda_st), so tests/gpu/test_attention_block_emu.cpp (argument `fused`) runs
 * exactly this code on a CPU. The includer provides the API first: flash_attention.cu
 * includes <mma.h> and kcuda_internal.cuh; the emulation its own.
 */
#ifndef STEPSCOPE_FLASH_ATTENTION_KERNELS_CUH
#define STEPSCOPE_FLASH_ATTENTION_KERNELS_CUH

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

/* An activation as a bf16 tensor-core operand: fp32 rounds (nearest even), bf16 is taken
 * as it is. */
__device__ __forceinline__ __nv_bfloat16 fa_bf16(const float *p, size_t i)
{
    return __float2bfloat16_rn(p[i]);
}
__device__ __forceinline__ __nv_bfloat16 fa_bf16(const __nv_bfloat16 *p, size_t i) { return p[i]; }

/* rows [r0, r0+64) of one of q (part 0), k (1), v (2) of head h into a bf16 tile; rows
 * at or past T are zero */
template <int HS, class ACT>
__device__ __forceinline__ void fa_load_qkv_tile(__nv_bfloat16 *tile, const ACT *qkv, int b,
                                                 int h, int part, int r0, int T, int C)
{
    for (int idx = threadIdx.x; idx < FA_BR * HS; idx += FA_THREADS) {
        int r = idx / HS, d = idx % HS, t = r0 + r;
        tile[r * fa_dims<HS>::LDH + d] =
            t < T ? fa_bf16(qkv, ((size_t)b * T + t) * 3 * C + (size_t)part * C + (size_t)h * HS + d)
                  : __float2bfloat16_rn(0.0f);
    }
}

/* A minimum of 2 blocks per SM in the launch bounds: with the block size alone, ptxas (CUDA
 * 13) capped the hs-64 fp32-storage instance at 64 registers and spilled 4 bytes. */
template <int HS, class ACT>
__global__ void __launch_bounds__(FA_THREADS, 2)
    flash_forward_kernel(ACT *out, float *lse, float *ocopy, const ACT *qkv, int T, int NH,
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
            kcuda_st(out, ((size_t)b * T + t) * C + (size_t)h * HS + d, o);
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
template <class ACT>
__global__ void flash_backward_dot_kernel(float *Dv, const ACT *dout, const float *ocopy,
                                          int rows, int T, int NH, int hs)
{
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    int t = row % T, bh = row / T, b = bh / NH, h = bh % NH;
    const ACT *g = dout + ((size_t)b * T + t) * NH * hs + (size_t)h * hs;
    const float *o = ocopy + (size_t)row * hs;
    float s = 0.0f;
    for (int d = lane; d < hs; d += 32)
        s += kcuda_ld(g, d) * o[d];
    s = kcuda_warp_sum(s);
    if (lane == 0)
        Dv[row] = s;
}

/* rows [r0, r0+64) of dout's head h into a bf16 tile (zero past T) */
template <int HS, class ACT>
__device__ __forceinline__ void fa_load_dout_tile(__nv_bfloat16 *tile, const ACT *dout, int b,
                                                  int h, int r0, int T, int C)
{
    for (int idx = threadIdx.x; idx < FA_BR * HS; idx += FA_THREADS) {
        int r = idx / HS, d = idx % HS, t = r0 + r;
        tile[r * fa_dims<HS>::LDH + d] =
            t < T ? fa_bf16(dout, ((size_t)b * T + t) * C + (size_t)h * HS + d)
                  : __float2bfloat16_rn(0.0f);
    }
}

/* dq: fp32 rows of dq_stride (the q columns of an fp32 dqkv, stride 3C, or zeroed scratch
 * [B*T, C] that fa_add_rows_kernel adds into a bf16 dqkv); it receives atomicAdds. dqkv's
 * k|v columns: read-add-store (each key row of a head belongs to one thread block). */
template <int HS, class ACT>
__global__ void __launch_bounds__(FA_THREADS)
    flash_backward_kernel(float *dq, int dq_stride, ACT *dqkv, const ACT *dout, const ACT *qkv,
                          const float *lse, const float *Dv, int T, int NH, float scale)
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
                atomicAdd(&dq[((size_t)b * T + t) * dq_stride + (size_t)h * HS + d],
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
            kcuda_st(dqkv, at + C, kcuda_ld(dqkv, at + C) + scale * Sw[rr * D::WF + d]);
            kcuda_st(dqkv, at + 2 * (size_t)C,
                     kcuda_ld(dqkv, at + 2 * (size_t)C) + dPw[rr * D::WF + d]);
        }
    }
}

/* dst[r*dst_stride + c] += src[r*width + c] for r < rows, c < width: adds the fp32 dq
 * accumulation into a bf16 dqkv, rounding once (grid-stride). */
template <class ACT>
__global__ void fa_add_rows_kernel(ACT *dst, int dst_stride, const float *src, size_t rows,
                                   int width)
{
    size_t total = rows * (size_t)width;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / (size_t)width, at = r * (size_t)dst_stride + i % (size_t)width;
        kcuda_st(dst, at, kcuda_ld(dst, at) + src[i]);
    }
}

#endif /* STEPSCOPE_FLASH_ATTENTION_KERNELS_CUH */
