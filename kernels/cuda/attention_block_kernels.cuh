/*
 * attention_block_kernels.cuh — the device code of attention_block.cu (see there for what
 * the kernels compute and how): tile sizes, shared-memory layout, the bf16 WMMA tile
 * kernels and the fp32 warp-per-row kernels, as templates and __global__ functions.
 *
 * Activations (q, kv, out, dout, dq, dkv) are of the storage type ACT (float or
 * __nv_bfloat16, a template parameter): loaded with kcuda_ld (or straight into the bf16
 * tiles), computed in fp32, stored rounded with kcuda_st; lse and the statistics are fp32.
 * Accumulations that several thread blocks make into one element (dq of the tiles, dk/dv
 * of the fp32 kernels) use fp32 atomicAdd, so their kernels take an fp32 destination:
 * the activation itself when ACT is float, else fp32 scratch that ab_add_rows_kernel adds
 * into the bf16 activation at the end (one rounding per call, none per atomic).
 *
 * Why a separate header: the kernels use only a small part of CUDA's device API
 * (threadIdx/blockIdx/gridDim/blockDim, __syncthreads, __syncwarp, __shfl_sync,
 * __shfl_xor_sync, atomicAdd on float, __float2bfloat16_rn, nvcuda::wmma 16x16x16 bf16
 * fragments, dynamic shared memory, kcuda_warp_sum/kcuda_warp_max, kcuda_ld/kcuda_st), so a
 * CPU emulation of that API (tests/gpu/cuda_emu.h) can run exactly this code on a machine
 * without a GPU (tests/gpu/test_attention_block_emu.cpp). The includer provides the API first:
 * attention_block.cu includes <mma.h> and kcuda_internal.cuh; the emulation its own.
 */
#ifndef STEPSCOPE_ATTENTION_BLOCK_KERNELS_CUH
#define STEPSCOPE_ATTENTION_BLOCK_KERNELS_CUH

using namespace nvcuda;

#define AB_BR 64          /* queries per tile */
#define AB_BC 64          /* keys per tile */
#define AB_THREADS 128    /* 4 warps x 16 rows */
#define AB_F32_MAX_HS 256 /* the fp32 path keeps up to 8 channels per lane */
#define AB_F32_THREADS 256
/* Launch bounds: with only a block size, ptxas (CUDA 13) capped some of these kernels at
 * 48-64 registers and spilled; a minimum of 2 resident blocks per SM lets it use up to
 * 255 (tiles) / 128 (fp32 path) registers, and `ptxas -v` then reports no spills. */

template <int HS> struct ab_dims {
    static constexpr int LDH = HS + 8;                       /* bf16 row stride: Q K V dO */
    static constexpr int LDP = AB_BC + 8;                    /* bf16 row stride: P dS */
    static constexpr int WF = (HS > AB_BC ? HS : AB_BC) + 4; /* fp32 row stride: scratch */
    static constexpr int LDO = HS + 4;                       /* fp32 row stride: O */
    /* every region is a multiple of 128 bytes, so each starts 128-byte aligned */
    static constexpr size_t TILE = (size_t)AB_BR * LDH * 2;
    static constexpr size_t PTILE = (size_t)AB_BR * LDP * 2;
    static constexpr size_t FWD_WARP =
        (size_t)16 * WF * 4 + (size_t)16 * LDP * 2 + (size_t)16 * LDO * 4 + 256;
    static constexpr size_t FWD_SMEM = 3 * TILE + 4 * FWD_WARP;
    static constexpr size_t BWD_WARP = 2 * (size_t)16 * WF * 4;
    static constexpr size_t BWD_SMEM = 4 * TILE + 2 * PTILE + 2 * AB_BR * 4 + 4 * BWD_WARP;
};

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> ab_acc;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> ab_a_row;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major> ab_a_col;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> ab_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> ab_b_col;

/* An activation as a bf16 tensor-core operand: fp32 rounds (nearest even), bf16 is taken
 * as it is. */
__device__ __forceinline__ __nv_bfloat16 ab_bf16(const float *p, size_t i)
{
    return __float2bfloat16_rn(p[i]);
}
__device__ __forceinline__ __nv_bfloat16 ab_bf16(const __nv_bfloat16 *p, size_t i) { return p[i]; }

/* Rows [r0, r0+64) of a strided activation matrix (row r at base + r*stride, HS channels)
 * into a bf16 tile; rows at or past nrows are zero. */
template <int HS, class ACT>
__device__ __forceinline__ void ab_load_tile(__nv_bfloat16 *tile, const ACT *base,
                                             size_t stride, int r0, int nrows)
{
    for (int idx = threadIdx.x; idx < AB_BR * HS; idx += AB_THREADS) {
        int r = idx / HS, d = idx % HS, t = r0 + r;
        tile[r * ab_dims<HS>::LDH + d] =
            t < nrows ? ab_bf16(base, (size_t)t * stride + d) : __float2bfloat16_rn(0.0f);
    }
}

/* dst[r*dst_stride + c] += src[r*width + c] for r < rows, c < width: adds an fp32
 * accumulation (scratch) into an activation, rounding once (grid-stride). */
template <class ACT>
__global__ void ab_add_rows_kernel(ACT *dst, int dst_stride, const float *src, size_t rows,
                                   int width)
{
    size_t total = rows * (size_t)width;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / (size_t)width, at = r * (size_t)dst_stride + i % (size_t)width;
        kcuda_st(dst, at, kcuda_ld(dst, at) + src[i]);
    }
}

/* ---- tensor-core path: forward ------------------------------------------------------------ */

template <int HS, class ACT>
__global__ void __launch_bounds__(AB_THREADS, 2)
    ab_forward_kernel(ACT *out, float *lse, const ACT *q, int q_stride, const ACT *kv,
                      int kv_stride, int Tq, int Tk, int NH, int causal, float scale)
{
    typedef ab_dims<HS> D;
    extern __shared__ __align__(128) unsigned char ab_smem[];
    /* causal: the last query tiles see the most keys, start them first */
    const int qt = causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const int q0 = qt * AB_BR, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)ab_smem;
    __nv_bfloat16 *Ks = (__nv_bfloat16 *)(ab_smem + D::TILE);
    __nv_bfloat16 *Vs = (__nv_bfloat16 *)(ab_smem + 2 * D::TILE);
    unsigned char *mine = ab_smem + 3 * D::TILE + (size_t)warp * D::FWD_WARP;
    float *Sw = (float *)mine;                                            /* [16][WF] */
    __nv_bfloat16 *Pw = (__nv_bfloat16 *)(mine + (size_t)16 * D::WF * 4); /* [16][LDP] */
    float *Ow = (float *)(mine + (size_t)16 * D::WF * 4 + (size_t)16 * D::LDP * 2); /* [16][LDO] */
    float *mrow = Ow + 16 * D::LDO, *lrow = mrow + 16, *arow = lrow + 16, *trow = arow + 16;

    const ACT *qb = q + (size_t)b * Tq * q_stride + (size_t)h * HS;
    const ACT *kb = kv + (size_t)b * Tk * kv_stride + (size_t)h * HS;
    ab_load_tile<HS>(Qs, qb, (size_t)q_stride, q0, Tq);
    for (int e = lane; e < 16 * HS; e += 32)
        Ow[(e / HS) * D::LDO + e % HS] = 0.0f;
    if (lane < 16) {
        mrow[lane] = -INFINITY;
        lrow[lane] = 0.0f;
    }
    const int r = lane >> 1, c0 = (lane & 1) * (AB_BC / 2);
    const int i = q0 + warp * 16 + r; /* this lane's query row */
    int nk = (Tk + AB_BC - 1) / AB_BC;
    if (causal) {
        int last = (q0 + AB_BR - 1) / AB_BC + 1; /* key tiles that hold some j <= q0 + 63 */
        nk = nk < last ? nk : last;
    }
    for (int kt = 0; kt < nk; kt++) {
        const int k0 = kt * AB_BC;
        __syncthreads(); /* the previous K, V are consumed (and Q is loaded) */
        ab_load_tile<HS>(Ks, kb, (size_t)kv_stride, k0, Tk);
        ab_load_tile<HS>(Vs, kb + C, (size_t)kv_stride, k0, Tk);
        __syncthreads();
        /* S[16 x 64] = Q_w K^T */
        for (int n = 0; n < AB_BC / 16; n++) {
            ab_acc acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < HS; kk += 16) {
                ab_a_row a;
                ab_b_col bk;
                wmma::load_matrix_sync(a, Qs + warp * 16 * D::LDH + kk, D::LDH);
                wmma::load_matrix_sync(bk, Ks + n * 16 * D::LDH + kk, D::LDH);
                wmma::mma_sync(acc, a, bk, acc);
            }
            wmma::store_matrix_sync(Sw + n * 16, acc, D::WF, wmma::mem_row_major);
        }
        __syncwarp();
        /* online softmax: two lanes per row, 32 columns each */
        float mx = -INFINITY;
        for (int c = 0; c < AB_BC / 2; c++) {
            int j = k0 + c0 + c;
            int visible = j < Tk && (!causal || j <= i);
            float s = visible ? Sw[r * D::WF + c0 + c] * scale : -INFINITY;
            Sw[r * D::WF + c0 + c] = s;
            mx = fmaxf(mx, s);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float m_old = mrow[r];
        float m_new = fmaxf(m_old, mx);
        /* a row with no visible key yet keeps m = -inf, l = 0, O = 0 (no NaN from -inf - -inf) */
        float m_use = m_new == -INFINITY ? 0.0f : m_new;
        float sum = 0.0f;
        for (int c = 0; c < AB_BC / 2; c++) {
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
        /* PV[16 x HS] into the scratch (S is consumed), then O = alpha O + PV */
        for (int n = 0; n < HS / 16; n++) {
            ab_acc acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < AB_BC; kk += 16) {
                ab_a_row a;
                ab_b_row bv;
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
            kcuda_st(out, at, kcuda_ld(out, at) * arow[rr] + Ow[rr * D::LDO + d] * trow[rr]);
        }
    }
}

/* ---- tensor-core path: backward ----------------------------------------------------------- */

/* Dv[bh*Tq + t] = dout . out over head h's channels of row (b, t): one warp per row. */
template <class ACT>
__global__ void ab_dot_kernel(float *Dv, const ACT *dout, const ACT *out, int rows, int Tq,
                              int NH, int hs)
{
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    int t = row % Tq, bh = row / Tq, b = bh / NH, h = bh % NH;
    size_t at = ((size_t)b * Tq + t) * NH * hs + (size_t)h * hs;
    float s = 0.0f;
    for (int d = lane; d < hs; d += 32)
        s += kcuda_ld(dout, at + d) * kcuda_ld(out, at + d);
    s = kcuda_warp_sum(s);
    if (lane == 0)
        Dv[row] = s;
}

/* dq: fp32 (the activation itself, or scratch that is added into a bf16 one afterwards),
 * rows dq_stride apart; it receives atomicAdds. dkv: the activation (plain read-add-store:
 * each key row of a head belongs to one thread block). */
template <int HS, class ACT>
__global__ void __launch_bounds__(AB_THREADS)
    ab_backward_kernel(float *dq, int dq_stride, ACT *dkv, int dkv_stride, const ACT *dout,
                       const float *lse, const float *Dv, const ACT *q, int q_stride,
                       const ACT *kv, int kv_stride, int Tq, int Tk, int NH, int causal,
                       float scale)
{
    typedef ab_dims<HS> D;
    extern __shared__ __align__(128) unsigned char ab_smem[];
    const int kt = blockIdx.x;
    const int nq = (Tq + AB_BR - 1) / AB_BR;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const int k0 = kt * AB_BC, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __nv_bfloat16 *Ks = (__nv_bfloat16 *)ab_smem;
    __nv_bfloat16 *Vs = (__nv_bfloat16 *)(ab_smem + D::TILE);
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)(ab_smem + 2 * D::TILE);
    __nv_bfloat16 *dOs = (__nv_bfloat16 *)(ab_smem + 3 * D::TILE);
    __nv_bfloat16 *Ps = (__nv_bfloat16 *)(ab_smem + 4 * D::TILE);
    __nv_bfloat16 *dSs = (__nv_bfloat16 *)(ab_smem + 4 * D::TILE + D::PTILE);
    float *lse_s = (float *)(ab_smem + 4 * D::TILE + 2 * D::PTILE);
    float *D_s = lse_s + AB_BR;
    unsigned char *mine =
        ab_smem + 4 * D::TILE + 2 * D::PTILE + 2 * AB_BR * 4 + (size_t)warp * D::BWD_WARP;
    float *Sw = (float *)mine;    /* [16][WF] */
    float *dPw = Sw + 16 * D::WF; /* [16][WF] */

    const ACT *qb = q + (size_t)b * Tq * q_stride + (size_t)h * HS;
    const ACT *gb = dout + (size_t)b * Tq * C + (size_t)h * HS;
    const ACT *kb = kv + (size_t)b * Tk * kv_stride + (size_t)h * HS;
    ab_load_tile<HS>(Ks, kb, (size_t)kv_stride, k0, Tk);
    ab_load_tile<HS>(Vs, kb + C, (size_t)kv_stride, k0, Tk);
    ab_acc dK[HS / 16], dV[HS / 16];
    for (int n = 0; n < HS / 16; n++) {
        wmma::fill_fragment(dK[n], 0.0f);
        wmma::fill_fragment(dV[n], 0.0f);
    }
    const int r = lane >> 1, c0 = (lane & 1) * (AB_BC / 2), r0 = warp * 16;
    /* causal: query tiles wholly before this key tile see none of its keys */
    for (int qt = causal ? k0 / AB_BR : 0; qt < nq; qt++) {
        const int q0 = qt * AB_BR;
        __syncthreads(); /* the previous tile's Q, dO, P, dS are consumed (K, V loaded) */
        ab_load_tile<HS>(Qs, qb, (size_t)q_stride, q0, Tq);
        ab_load_tile<HS>(dOs, gb, (size_t)C, q0, Tq);
        for (int rr = threadIdx.x; rr < AB_BR; rr += AB_THREADS) {
            int t = q0 + rr;
            lse_s[rr] = t < Tq ? lse[(size_t)bh * Tq + t] : 0.0f;
            D_s[rr] = t < Tq ? Dv[(size_t)bh * Tq + t] : 0.0f;
        }
        __syncthreads();
        /* S = Q_w K^T and dP = dO_w V^T, [16 x 64] each */
        for (int n = 0; n < AB_BC / 16; n++) {
            ab_acc s_acc, dp_acc;
            wmma::fill_fragment(s_acc, 0.0f);
            wmma::fill_fragment(dp_acc, 0.0f);
            for (int kk = 0; kk < HS; kk += 16) {
                ab_a_row a;
                ab_b_col bm;
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
            for (int c = 0; c < AB_BC / 2; c++) {
                int j = k0 + c0 + c;
                int visible = t < Tq && j < Tk && (!causal || j <= t);
                float p = visible ? expf(Sw[r * D::WF + c0 + c] * scale - l) : 0.0f;
                float ds = p * (dPw[r * D::WF + c0 + c] - dv);
                Ps[(r0 + r) * D::LDP + c0 + c] = __float2bfloat16_rn(p);
                dSs[(r0 + r) * D::LDP + c0 + c] = __float2bfloat16_rn(ds);
            }
        }
        __syncthreads(); /* the whole tile's P and dS */
        /* dV_w += P^T dO, dK_w += dS^T Q over the tile's 64 queries (warp w: keys 16w..) */
        for (int kk = 0; kk < AB_BR; kk += 16) {
            ab_a_col pt, dst;
            wmma::load_matrix_sync(pt, Ps + kk * D::LDP + r0, D::LDP);
            wmma::load_matrix_sync(dst, dSs + kk * D::LDP + r0, D::LDP);
            for (int n = 0; n < HS / 16; n++) {
                ab_b_row bm;
                wmma::load_matrix_sync(bm, dOs + kk * D::LDH + n * 16, D::LDH);
                wmma::mma_sync(dV[n], pt, bm, dV[n]);
                wmma::load_matrix_sync(bm, Qs + kk * D::LDH + n * 16, D::LDH);
                wmma::mma_sync(dK[n], dst, bm, dK[n]);
            }
        }
        /* dQ rows of warp w: dS[16 x 64] K[64 x HS], added into dq (atomics: other key
         * tiles add into the same rows) */
        for (int n = 0; n < HS / 16; n++) {
            ab_acc acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < AB_BC; kk += 16) {
                ab_a_row a;
                ab_b_row bm;
                wmma::load_matrix_sync(a, dSs + r0 * D::LDP + kk, D::LDP);
                wmma::load_matrix_sync(bm, Ks + kk * D::LDH + n * 16, D::LDH);
                wmma::mma_sync(acc, a, bm, acc);
            }
            wmma::store_matrix_sync(Sw + n * 16, acc, D::WF, wmma::mem_row_major);
        }
        __syncwarp();
        for (int e = lane; e < 16 * HS; e += 32) {
            int rr = e / HS, d = e % HS, t = q0 + r0 + rr;
            if (t < Tq)
                atomicAdd(&dq[((size_t)b * Tq + t) * dq_stride + (size_t)h * HS + d],
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
        if (j < Tk) {
            size_t at = ((size_t)b * Tk + j) * dkv_stride + (size_t)h * HS + d;
            kcuda_st(dkv, at, kcuda_ld(dkv, at) + scale * Sw[rr * D::WF + d]);
            kcuda_st(dkv, at + C, kcuda_ld(dkv, at + C) + dPw[rr * D::WF + d]);
        }
    }
}

/* ---- fp32 path: one warp per query row ------------------------------------------------------ */

/* U channels per lane (hs <= 32 U): lane L holds channels L, L+32, ... */
template <int U, class ACT>
__global__ void __launch_bounds__(AB_F32_THREADS, 2)
    ab_forward_f32_kernel(ACT *out, float *lse, const ACT *q, int q_stride, const ACT *kv,
                          int kv_stride, int B, int Tq, int Tk, int NH, int hs, int causal,
                          float scale)
{
    const size_t row = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= (size_t)B * NH * Tq)
        return;
    const int t = (int)(row % Tq);
    const size_t bh = row / Tq;
    const int b = (int)(bh / NH), h = (int)(bh % NH), C = NH * hs;
    const ACT *qr = q + ((size_t)b * Tq + t) * q_stride + (size_t)h * hs;
    const ACT *kb = kv + (size_t)b * Tk * kv_stride + (size_t)h * hs;
    const int n = causal ? (t + 1 < Tk ? t + 1 : Tk) : Tk; /* visible keys 0 .. n-1 */
    if (n <= 0)
        return; /* nothing to merge (the reference skips the row) */
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
                if (d < hs)
                    acc[u] += pc * kcuda_ld(vr, d);
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
        if (d < hs)
            kcuda_st(o, d, kcuda_ld(o, d) * keep + acc[u] * take);
    }
    __syncwarp(); /* every lane has read the old lse */
    if (lane == 0)
        *lp = merged;
}

/* dq: the activation (each row's head belongs to one warp: read-add-store). dkv: fp32,
 * rows dkv_stride apart (the activation itself, or scratch added into a bf16 one
 * afterwards); it receives atomicAdds. */
template <int U, class ACT>
__global__ void __launch_bounds__(AB_F32_THREADS, 2)
    ab_backward_f32_kernel(ACT *dq, int dq_stride, float *dkv, int dkv_stride, const ACT *dout,
                           const ACT *out, const float *lse, const ACT *q, int q_stride,
                           const ACT *kv, int kv_stride, int B, int Tq, int Tk, int NH, int hs,
                           int causal, float scale)
{
    const size_t row = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= (size_t)B * NH * Tq)
        return;
    const int t = (int)(row % Tq);
    const size_t bh = row / Tq;
    const int b = (int)(bh / NH), h = (int)(bh % NH), C = NH * hs;
    const ACT *qr = q + ((size_t)b * Tq + t) * q_stride + (size_t)h * hs;
    const ACT *gr = dout + ((size_t)b * Tq + t) * C + (size_t)h * hs;
    const ACT *orow = out + ((size_t)b * Tq + t) * C + (size_t)h * hs;
    const ACT *kb = kv + (size_t)b * Tk * kv_stride + (size_t)h * hs;
    float *dkb = dkv + (size_t)b * Tk * dkv_stride + (size_t)h * hs;
    const int n = causal ? (t + 1 < Tk ? t + 1 : Tk) : Tk;
    if (n <= 0)
        return;
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
        if (d < hs)
            kcuda_st(dqr, d, kcuda_ld(dqr, d) + dqa[u]);
    }
}

#endif /* STEPSCOPE_ATTENTION_BLOCK_KERNELS_CUH */
