/*
 * test_attention_block_emu.cpp — the device code of ring attention's CUDA block kernels
 * (kernels/cuda/attention_block_kernels.cuh, with the tile steps it shares with the fused
 * attention in attention_tiles.cuh), run on the CPU through a CUDA emulation
 * (cuda_emu.h), against the CPU reference (kernels/cpu/attention_block.c). Runs on every
 * machine with the CUDA parts built (no GPU needed): the index math, masks, online
 * softmax, log-sum-exp merge, accumulation and barriers of exactly the kernel source
 * that runs on the GPU. The host wrappers of attention_block.cu (grid sizes, shared-memory
 * attributes) are restated here in a few lines and checked on a GPU by gpu.attention_block.
 *
 * Cases as in test_attention_block.c, smaller (every CUDA thread is a coroutine): a
 * query block in a fused [B,Tq,3C] qkv (stride 3C) attends to a diagonal causal block (its
 * own k|v columns, stride 3C), full blocks (packed [B,Tk,2C]) and a full block with Tk !=
 * Tq, merged from (0, -inf) in a scrambled order; the backward from the reference's final
 * out/lse accumulates into non-zero dq (stride 3C) and dkv, in another order; increments
 * are compared. Error: max |emu - ref| / max |ref|. Tolerances: tile kernels (bf16
 * operands) 2e-2 forward, 3e-2 backward; fp32 kernels 1e-4.
 *
 * Every case runs for both activation storage types (the kernels' ACT): fp32, and bf16,
 * whose inputs (q, k, v, dout, the backward's out and the start values of dq/dkv) are the
 * reference's inputs rounded to bf16, so the reference computes exactly on what the
 * kernels read. bf16 storage rounds out at every merge and dq/dkv at every backward call
 * (read, add in fp32, store rounded); a rounding changes a value x by at most 2^-8 |x|,
 * so each element's difference is first reduced by 2^-8 x the sum of the magnitudes
 * stored into it along the reference's chain of calls, and the remainder is held to the
 * same tolerances (the raw error, without that allowance, is printed beside it). Bugs of
 * the bf16 code (a missing accumulation, a wrong stride) move values by whole increments,
 * far beyond the allowance.
 *
 * The tile kernels run under two schedules (the lowest warp runs ahead of the others, and
 * the highest), so that a missing __syncthreads between warps changes the result; the
 * fp32 kernels (no block barriers) run round-robin.
 *
 * `fused`: the fused causal attention of flash_attention.cu (flash_attention_kernels.cuh)
 * the same way, against kernels/cpu/attention.c: forward out, and dqkv's increment from
 * the att (lse + output copy) that the emulated forward saved, both storage types, both
 * schedules, head sizes 32/64/128 with partial tiles; tolerances of the GPU test, 2e-2
 * forward, 3e-2 dqkv.
 *
 * Usage: test_gpu_attention_block_emu tiles|fp32|fused
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucontext.h>

#include <vector>

#include "cuda_emu.h"

extern "C" {
#include "cpu_kernels.h"
}

/* ---- dynamic shared memory of the kernels under test (blocks run one at a time) -------- */

alignas(128) unsigned char at_smem[256 * 1024]; /* `extern __shared__ at_smem[]` of every kernel */

/* ---- the kernels under test ----------------------------------------------------------- */

#include "attention_block_kernels.cuh"
#include "flash_attention_kernels.cuh"

typedef __nv_bfloat16 bf16;

/* The host side of attention_block.cu, restated: grids, the two paths, and the fp32
 * accumulators (zeroed scratch + at_add_rows_kernel) that bf16 storage uses for the
 * atomics. */
template <class ACT>
static void launch_forward(int tiles, ACT *out, float *lse, const ACT *q, int qs, const ACT *kv,
                           int ks, int B, int Tq, int Tk, int C, int NH, int causal)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    if (tiles) {
        emu_dim3 grid = {(unsigned)((Tq + AT_BR - 1) / AT_BR), (unsigned)(B * NH), 1};
        emu_launch(grid, {AT_THREADS, 1, 1}, [&] {
#define AB_EMU_FWD(HS) ab_forward_kernel<HS, ACT>(out, lse, q, qs, kv, ks, Tq, Tk, NH, causal, scale)
            switch (hs) {
            case 16: AB_EMU_FWD(16); break;
            case 32: AB_EMU_FWD(32); break;
            case 64: AB_EMU_FWD(64); break;
            default: AB_EMU_FWD(128);
            }
#undef AB_EMU_FWD
        });
        return;
    }
    size_t rows = (size_t)B * NH * Tq, per = AB_F32_THREADS / 32;
    emu_dim3 grid = {(unsigned)((rows + per - 1) / per), 1, 1};
    emu_launch(grid, {AB_F32_THREADS, 1, 1}, [&] {
#define AB_EMU_FWD32(U)                                                                            \
    ab_forward_f32_kernel<U, ACT>(out, lse, q, qs, kv, ks, B, Tq, Tk, NH, hs, causal, scale)
        if (hs <= 32)
            AB_EMU_FWD32(1);
        else if (hs <= 64)
            AB_EMU_FWD32(2);
        else if (hs <= 128)
            AB_EMU_FWD32(4);
        else
            AB_EMU_FWD32(8);
#undef AB_EMU_FWD32
    });
}

/* dst (rows x width, rows dst_stride apart) += src (fp32, packed), as attention_block.cu */
template <class ACT>
static void launch_add_rows(ACT *dst, int dst_stride, const float *src, size_t rows, int width)
{
    size_t n = rows * (size_t)width, blocks = (n + 255) / 256;
    if (blocks > 64)
        blocks = 64; /* a grid-stride loop, like the capped grid of kcuda_grid_for */
    emu_launch({(unsigned)blocks, 1, 1}, {256, 1, 1},
               [&] { at_add_rows_kernel<ACT>(dst, dst_stride, src, rows, width); });
}

template <class ACT>
static void launch_backward(int tiles, ACT *dq, int dqs, ACT *dkv, int dkvs, const ACT *dout,
                            const ACT *out, const float *lse, const ACT *q, int qs, const ACT *kv,
                            int ks, int B, int Tq, int Tk, int C, int NH, int causal)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    const bool f32 = sizeof(ACT) == sizeof(float);
    if (tiles) {
        int rows = B * NH * Tq;
        std::vector<float> Dv((size_t)rows), dq_acc(f32 ? 0 : (size_t)B * Tq * C, 0.0f);
        float *dv = Dv.data();
        float *dqa = f32 ? (float *)(void *)dq : dq_acc.data();
        int dqa_stride = f32 ? dqs : C;
        emu_launch({(unsigned)((rows + 7) / 8), 1, 1}, {256, 1, 1},
                   [&] { ab_dot_kernel<ACT>(dv, dout, out, rows, Tq, NH, hs); });
        emu_dim3 grid = {(unsigned)((Tk + AT_BC - 1) / AT_BC), (unsigned)(B * NH), 1};
        emu_launch(grid, {AT_THREADS, 1, 1}, [&] {
#define AB_EMU_BWD(HS)                                                                             \
    ab_backward_kernel<HS, ACT>(dqa, dqa_stride, dkv, dkvs, dout, lse, dv, q, qs, kv, ks, Tq, Tk, \
                                NH, causal, scale)
            switch (hs) {
            case 16: AB_EMU_BWD(16); break;
            case 32: AB_EMU_BWD(32); break;
            case 64: AB_EMU_BWD(64); break;
            default: AB_EMU_BWD(128);
            }
#undef AB_EMU_BWD
        });
        if (!f32)
            launch_add_rows(dq, dqs, dq_acc.data(), (size_t)B * Tq, C);
        return;
    }
    size_t rows = (size_t)B * NH * Tq, per = AB_F32_THREADS / 32;
    std::vector<float> dkv_acc(f32 ? 0 : (size_t)B * Tk * 2 * C, 0.0f);
    float *dka = f32 ? (float *)(void *)dkv : dkv_acc.data();
    int dka_stride = f32 ? dkvs : 2 * C;
    emu_dim3 grid = {(unsigned)((rows + per - 1) / per), 1, 1};
    emu_launch(grid, {AB_F32_THREADS, 1, 1}, [&] {
#define AB_EMU_BWD32(U)                                                                            \
    ab_backward_f32_kernel<U, ACT>(dq, dqs, dka, dka_stride, dout, out, lse, q, qs, kv, ks, B, Tq, \
                                   Tk, NH, hs, causal, scale)
        if (hs <= 32)
            AB_EMU_BWD32(1);
        else if (hs <= 64)
            AB_EMU_BWD32(2);
        else if (hs <= 128)
            AB_EMU_BWD32(4);
        else
            AB_EMU_BWD32(8);
#undef AB_EMU_BWD32
    });
    if (!f32)
        launch_add_rows(dkv, dkvs, dkv_acc.data(), (size_t)B * Tk, 2 * C);
}

/* ---- storage types ------------------------------------------------------------------- */

static float act_to_float(float x) { return x; }
static float act_to_float(bf16 x) { return emu_bf16_to_float(x); }
template <class ACT> static ACT act_from_float(float x);
template <> float act_from_float<float>(float x) { return x; }
template <> bf16 act_from_float<bf16>(float x) { return __float2bfloat16_rn(x); }

template <class ACT> static std::vector<ACT> to_act(const std::vector<float> &v)
{
    std::vector<ACT> r(v.size());
    for (size_t i = 0; i < v.size(); i++)
        r[i] = act_from_float<ACT>(v[i]);
    return r;
}
template <class ACT> static std::vector<float> to_float(const std::vector<ACT> &v)
{
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); i++)
        r[i] = act_to_float(v[i]);
    return r;
}
/* the values the storage type can hold: rounded for bf16, unchanged for fp32 */
template <class ACT> static void round_to_act(std::vector<float> &v)
{
    for (auto &x : v)
        x = act_to_float(act_from_float<ACT>(x));
}

/* ---- the comparison ------------------------------------------------------------------- */

static int failures;
static double worst_err[2][2][2]; /* [tiles][bf16][backward]: the largest error seen */
static double worst_raw[2];       /* [backward]: the largest bf16 error before the allowance */
static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;

static float frand()
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static std::vector<float> random_vec(size_t n, float scale)
{
    std::vector<float> v(n);
    for (auto &x : v)
        x = frand() * scale;
    return v;
}

/* Normalized max error of (got - base) against (ref - base) (base NULL: plain values);
 * prints, counts a failure, returns the error. `stored` (bf16 storage): got was
 * accumulated onto the base by read-add-store roundings, and stored[i] is the sum of
 * |value| over those stores (taken from the reference's chain of calls); each element's
 * difference is first reduced by what the roundings alone can cause, 2^-8 x stored[i]
 * (bf16's unit roundoff is 2^-8), so that the measure sees the kernel's error, not the
 * storage's. The error without that allowance is printed too ("raw"). */
static double expect_close(const char *what, const std::vector<float> &got,
                           const std::vector<float> &ref, const std::vector<float> *base,
                           double tol, const std::vector<double> *stored = NULL)
{
    double maxref = 0, maxdiff = 0, maxraw = 0;
    size_t worst = 0;
    bool nonfinite = false;
    for (size_t i = 0; i < ref.size(); i++) {
        double b = base ? (*base)[i] : 0.0, g = got[i] - b, r = ref[i] - b;
        double allowance = stored ? ldexp((*stored)[i], -8) : 0.0;
        if (!isfinite(got[i]))
            nonfinite = true;
        if (fabs(r) > maxref)
            maxref = fabs(r);
        maxraw = fabs(g - r) > maxraw ? fabs(g - r) : maxraw;
        double d = fabs(g - r) - allowance;
        if (d > maxdiff) {
            maxdiff = d;
            worst = i;
        }
    }
    double norm = maxref > 1e-6 ? maxref : 1e-6, err = maxdiff / norm;
    bool ok = !nonfinite && err <= tol;
    char raw[48] = "";
    if (stored) {
        snprintf(raw, sizeof raw, " (raw %.3e)", maxraw / norm);
        worst_raw[base != NULL] = fmax(worst_raw[base != NULL], maxraw / norm);
    }
    printf("%s %-62s err %.3e%s (tol %.0e)%s\n", ok ? "ok  " : "FAIL", what, err, raw, tol,
           nonfinite ? " non-finite values" : "");
    if (!ok) {
        printf("     worst at %zu: emulated %.8g reference %.8g\n", worst, got[worst], ref[worst]);
        failures++;
    }
    return nonfinite ? INFINITY : err;
}

struct key_block {
    int Tk, causal, in_qkv;
    std::vector<float> kv, dkv0, dkv_ref;
};

static void scrambled(int *order, int nb, int salt)
{
    for (int i = 0; i < nb; i++)
        order[i] = i;
    for (int i = nb - 1; i > 0; i--) {
        int j = (i * 7 + salt * 3 + 1) % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

template <class ACT>
static void test_blocks(int tiles, int B, int Tq, int C, int NH, int full, int extra_tk)
{
    const bool is_bf16 = sizeof(ACT) == 2;
    /* bf16 storage keeps the tolerances: expect_close allows for the storage's roundings */
    const double tol_f = tiles ? 2e-2 : 1e-4, tol_b = tiles ? 3e-2 : 1e-4;
    double *worst = worst_err[tiles][is_bf16];
    const int C3 = 3 * C, C2 = 2 * C;
    const size_t nq = (size_t)B * Tq, nl = (size_t)B * NH * Tq;
    std::vector<key_block> blk;
    for (int i = 0; i < full; i++)
        blk.push_back({Tq, 0, 0, {}, {}, {}});
    blk.push_back({Tq, 1, 1, {}, {}, {}});
    if (extra_tk > 0)
        blk.push_back({extra_tk, 0, 0, {}, {}, {}});
    const int nb = (int)blk.size();
    /* inputs: what the storage type holds, so both sides compute on the same values */
    std::vector<float> qkv = random_vec(nq * C3, 1.0f);
    round_to_act<ACT>(qkv);
    int maxTk = Tq;
    for (auto &k : blk) {
        size_t n = (size_t)B * k.Tk * C2;
        if (!k.in_qkv) {
            k.kv = random_vec(n, 1.0f);
            round_to_act<ACT>(k.kv);
        }
        k.dkv0 = random_vec(n, 0.5f);
        round_to_act<ACT>(k.dkv0);
        k.dkv_ref = k.dkv0;
        maxTk = k.Tk > maxTk ? k.Tk : maxTk;
    }
    std::vector<ACT> qkv_a = to_act<ACT>(qkv);
    std::vector<std::vector<ACT>> kv_a(nb), dkv_a(nb);
    for (int i = 0; i < nb; i++) {
        kv_a[i] = to_act<ACT>(blk[i].kv);
        dkv_a[i] = to_act<ACT>(blk[i].dkv0);
    }
    std::vector<float> scratch((size_t)maxTk);
    std::vector<float> out_ref(nq * C, 0.0f), lse_ref(nl, -INFINITY), lse_emu(nl, -INFINITY);
    std::vector<ACT> out_emu = to_act<ACT>(out_ref);
    std::vector<double> out_stored(nq * C, 0.0); /* bf16 storage rounds out at every merge */
    int order[8];
    scrambled(order, nb, B + Tq);
    for (int oi = 0; oi < nb; oi++) {
        key_block &k = blk[order[oi]];
        const float *kv = k.in_qkv ? qkv.data() + C : k.kv.data();
        const ACT *kv_e = k.in_qkv ? qkv_a.data() + C : kv_a[order[oi]].data();
        int ks = k.in_qkv ? C3 : C2;
        cpu_attention_block_forward(out_ref.data(), lse_ref.data(), qkv.data(), C3, kv, ks, B, Tq,
                                    k.Tk, C, NH, k.causal, scratch.data());
        for (size_t i = 0; i < out_stored.size(); i++)
            out_stored[i] += fabs(out_ref[i]);
        launch_forward<ACT>(tiles, out_emu.data(), lse_emu.data(), qkv_a.data(), C3, kv_e, ks, B,
                            Tq, k.Tk, C, NH, k.causal);
    }
    char name[160];
    const char *path = tiles ? "tiles" : "fp32 ";
    const char *st = is_bf16 ? "bf16" : "f32 ";
    double e;
    snprintf(name, sizeof name, "%s %s fwd out B=%d Tq=%d C=%d NH=%d blocks=%d", path, st, B, Tq,
             C, NH, nb);
    e = expect_close(name, to_float(out_emu), out_ref, NULL, tol_f, is_bf16 ? &out_stored : NULL);
    worst[0] = e > worst[0] ? e : worst[0];
    snprintf(name, sizeof name, "%s %s fwd lse B=%d Tq=%d C=%d NH=%d", path, st, B, Tq, C, NH);
    e = expect_close(name, lse_emu, lse_ref, NULL, tol_f);
    worst[0] = e > worst[0] ? e : worst[0];

    /* backward from the reference's final out (as stored) and lse */
    std::vector<float> out_fin = out_ref;
    round_to_act<ACT>(out_fin);
    std::vector<ACT> out_a = to_act<ACT>(out_fin);
    std::vector<float> dout = random_vec(nq * C, 1.0f), dqkv0 = random_vec(nq * C3, 0.5f);
    round_to_act<ACT>(dout);
    round_to_act<ACT>(dqkv0);
    std::vector<ACT> dout_a = to_act<ACT>(dout), dqkv_a = to_act<ACT>(dqkv0);
    std::vector<float> dqkv_ref = dqkv0;
    /* bf16 storage rounds dq at every block call and each dkv once: the sums of the
     * magnitudes stored, for expect_close's allowance */
    std::vector<double> dq_stored(nq * C3, 0.0);
    std::vector<std::vector<double>> dkv_stored(nb);
    scrambled(order, nb, B * 5 + Tq + 1);
    for (int oi = 0; oi < nb; oi++) {
        key_block &k = blk[order[oi]];
        const float *kv = k.in_qkv ? qkv.data() + C : k.kv.data();
        const ACT *kv_e = k.in_qkv ? qkv_a.data() + C : kv_a[order[oi]].data();
        int ks = k.in_qkv ? C3 : C2;
        cpu_attention_block_backward(dqkv_ref.data(), C3, k.dkv_ref.data(), C2, dout.data(),
                                     out_fin.data(), lse_ref.data(), qkv.data(), C3, kv, ks, B,
                                     Tq, k.Tk, C, NH, k.causal, scratch.data());
        for (size_t i = 0; i < dq_stored.size(); i++)
            dq_stored[i] += fabs(dqkv_ref[i]);
        dkv_stored[order[oi]].resize(k.dkv_ref.size());
        for (size_t i = 0; i < k.dkv_ref.size(); i++)
            dkv_stored[order[oi]][i] = fabs(k.dkv_ref[i]);
        launch_backward<ACT>(tiles, dqkv_a.data(), C3, dkv_a[order[oi]].data(), C2, dout_a.data(),
                             out_a.data(), lse_ref.data(), qkv_a.data(), C3, kv_e, ks, B, Tq,
                             k.Tk, C, NH, k.causal);
    }
    snprintf(name, sizeof name, "%s %s bwd dq (accumulates) B=%d Tq=%d", path, st, B, Tq);
    std::vector<float> dqkv_emu = to_float(dqkv_a);
    e = expect_close(name, dqkv_emu, dqkv_ref, &dqkv0, tol_b, is_bf16 ? &dq_stored : NULL);
    worst[1] = e > worst[1] ? e : worst[1];
    bool untouched = true;
    for (size_t r = 0; r < nq; r++)
        for (int c = C; c < C3; c++)
            untouched &= dqkv_emu[r * C3 + c] == dqkv0[r * C3 + c];
    if (!untouched) {
        printf("FAIL %s: the k|v columns of dqkv were written\n", name);
        failures++;
    }
    for (int i = 0; i < nb; i++) {
        snprintf(name, sizeof name, "%s %s bwd dkv block %d (Tk=%d%s, accumulates)", path, st, i,
                 blk[i].Tk, blk[i].causal ? ", causal" : "");
        e = expect_close(name, to_float(dkv_a[i]), blk[i].dkv_ref, &blk[i].dkv0, tol_b,
                         is_bf16 ? &dkv_stored[i] : NULL);
        worst[1] = e > worst[1] ? e : worst[1];
    }
}

/* ---- the fused causal attention (flash_attention_kernels.cuh) ------------------------- */

/* The host side of flash_attention.cu, restated: att = lse [B*NH*T] then the output copy;
 * the backward's Dv, and dq's fp32 accumulator (bf16 storage) added into dqkv at the end. */
template <class ACT>
static void launch_fused_forward(ACT *out, float *att, const ACT *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    size_t rows = (size_t)B * NH * T;
    emu_dim3 grid = {(unsigned)((T + AT_BR - 1) / AT_BR), (unsigned)(B * NH), 1};
    emu_launch(grid, {AT_THREADS, 1, 1}, [&] {
#define FA_EMU_FWD(HS) flash_forward_kernel<HS, ACT>(out, att, att + rows, qkv, T, NH, scale)
        switch (hs) {
        case 32: FA_EMU_FWD(32); break;
        case 64: FA_EMU_FWD(64); break;
        default: FA_EMU_FWD(128);
        }
#undef FA_EMU_FWD
    });
}

template <class ACT>
static void launch_fused_backward(ACT *dqkv, const ACT *dout, const ACT *qkv, const float *att,
                                  int B, int T, int C, int NH)
{
    int hs = C / NH, rows = B * NH * T;
    float scale = 1.0f / sqrtf((float)hs);
    const bool f32 = sizeof(ACT) == sizeof(float);
    std::vector<float> Dv((size_t)rows), dq_acc(f32 ? 0 : (size_t)B * T * C, 0.0f);
    float *dv = Dv.data();
    float *dqa = f32 ? (float *)(void *)dqkv : dq_acc.data();
    int dqa_stride = f32 ? 3 * C : C;
    emu_launch({(unsigned)((rows + 7) / 8), 1, 1}, {256, 1, 1},
               [&] { flash_backward_dot_kernel<ACT>(dv, dout, att + rows, rows, T, NH, hs); });
    emu_dim3 grid = {(unsigned)((T + AT_BC - 1) / AT_BC), (unsigned)(B * NH), 1};
    emu_launch(grid, {AT_THREADS, 1, 1}, [&] {
#define FA_EMU_BWD(HS)                                                                             \
    flash_backward_kernel<HS, ACT>(dqa, dqa_stride, dqkv, dout, qkv, att, dv, T, NH, scale)
        switch (hs) {
        case 32: FA_EMU_BWD(32); break;
        case 64: FA_EMU_BWD(64); break;
        default: FA_EMU_BWD(128);
        }
#undef FA_EMU_BWD
    });
    if (!f32) {
        size_t n = (size_t)B * T * C, blocks = (n + 255) / 256;
        emu_launch({(unsigned)(blocks > 64 ? 64 : blocks), 1, 1}, {256, 1, 1}, [&] {
            at_add_rows_kernel<ACT>(dqkv, 3 * C, dq_acc.data(), (size_t)B * T, C);
        });
    }
}

/* Forward out against cpu_attention_forward; dqkv's increment (from the att the emulated
 * forward saved) against cpu_attention_backward's, onto non-zero start values. Tolerances
 * of the GPU test (test_cuda_kernels.c): 2e-2 forward, 3e-2 dqkv; bf16 storage rounds out
 * and each dqkv element once (allowed for as in the block tests). */
template <class ACT> static void test_fused(int B, int T, int C, int NH)
{
    const bool is_bf16 = sizeof(ACT) == 2;
    const size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C;
    const size_t natt = (size_t)B * NH * T * T;
    std::vector<float> qkv = random_vec(nqkv, 2.0f); /* scores of a few units: peaked */
    round_to_act<ACT>(qkv);
    std::vector<float> out(nout), pre(natt), att(natt), dpre(natt), datt(natt);
    cpu_attention_forward(out.data(), pre.data(), att.data(), qkv.data(), B, T, C, NH);
    std::vector<ACT> qkv_a = to_act<ACT>(qkv), out_a(nout, act_from_float<ACT>(7.0f));
    std::vector<float> att_emu(natt, 0.0f);
    launch_fused_forward<ACT>(out_a.data(), att_emu.data(), qkv_a.data(), B, T, C, NH);
    std::vector<double> out_stored(nout);
    for (size_t i = 0; i < nout; i++)
        out_stored[i] = fabs(out[i]);
    char name[160];
    const char *st = is_bf16 ? "bf16" : "f32 ";
    double e;
    snprintf(name, sizeof name, "fused %s fwd out B=%d T=%d C=%d NH=%d", st, B, T, C, NH);
    e = expect_close(name, to_float(out_a), out, NULL, 2e-2, is_bf16 ? &out_stored : NULL);
    worst_err[1][is_bf16][0] = fmax(worst_err[1][is_bf16][0], e);

    std::vector<float> dout = random_vec(nout, 1.0f), dqkv0 = random_vec(nqkv, 0.5f);
    round_to_act<ACT>(dout);
    round_to_act<ACT>(dqkv0);
    std::vector<float> dqkv_ref = dqkv0;
    cpu_attention_backward(dqkv_ref.data(), dpre.data(), datt.data(), dout.data(), qkv.data(),
                           att.data(), B, T, C, NH);
    std::vector<ACT> dout_a = to_act<ACT>(dout), dqkv_a = to_act<ACT>(dqkv0);
    launch_fused_backward<ACT>(dqkv_a.data(), dout_a.data(), qkv_a.data(), att_emu.data(), B, T,
                               C, NH);
    std::vector<double> dqkv_stored(nqkv);
    for (size_t i = 0; i < nqkv; i++)
        dqkv_stored[i] = fabs(dqkv_ref[i]);
    snprintf(name, sizeof name, "fused %s bwd dqkv (accumulates) B=%d T=%d C=%d NH=%d", st, B, T,
             C, NH);
    e = expect_close(name, to_float(dqkv_a), dqkv_ref, &dqkv0, 3e-2,
                     is_bf16 ? &dqkv_stored : NULL);
    worst_err[1][is_bf16][1] = fmax(worst_err[1][is_bf16][1], e);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "tiles") && strcmp(argv[1], "fp32") &&
                      strcmp(argv[1], "fused"))) {
        fprintf(stderr, "usage: %s tiles|fp32|fused\n", argv[0]);
        return 2;
    }
    if (!strcmp(argv[1], "fused")) {
        for (int sched = 1; sched <= 2; sched++) {
            emu_schedule = sched;
            for (int bf = 0; bf < 2; bf++) {
                printf("-- fused causal attention, %s storage, schedule %s\n",
                       bf ? "bf16" : "fp32", sched == 1 ? "lowest warp first" : "highest warp first");
                void (*run)(int, int, int, int) = bf ? test_fused<bf16> : test_fused<float>;
                /*  B    T    C  NH */
                run(1, 67, 128, 2); /* hs 64, two query tiles, the last partial */
                run(2, 40, 64, 2);  /* hs 32, one partial tile */
                run(1, 129, 128, 1); /* hs 128, three tiles */
            }
        }
        for (int bf = 0; bf < 2; bf++)
            printf("largest error, %s storage: forward %.3e, backward %.3e\n",
                   bf ? "bf16" : "fp32", worst_err[1][bf][0], worst_err[1][bf][1]);
        printf("largest bf16 error before the rounding allowance: out %.3e, dqkv %.3e\n",
               worst_raw[0], worst_raw[1]);
        printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
        return failures ? 1 : 0;
    }
    int tiles = !strcmp(argv[1], "tiles");
    for (int sched = tiles ? 1 : 0; sched <= (tiles ? 2 : 0); sched++) {
        emu_schedule = sched;
        for (int bf = 0; bf < 2; bf++) {
            printf("-- %s kernels, %s storage, schedule %s\n", tiles ? "tile" : "fp32",
                   bf ? "bf16" : "fp32",
                   sched == 0 ? "round-robin" : sched == 1 ? "lowest warp first" : "highest warp first");
            void (*run)(int, int, int, int, int, int, int) =
                bf ? test_blocks<bf16> : test_blocks<float>;
            /*     B  Tq    C  NH full extra_tk */
            run(tiles, 2, 40, 32, 2, 1, 0);   /* hs 16, a partial tile */
            run(tiles, 1, 67, 128, 2, 1, 21); /* hs 64, two query tiles, Tk 21 */
            run(tiles, 1, 20, 64, 2, 2, 70);  /* hs 32, Tk 70: two key tiles */
            run(tiles, 1, 9, 128, 1, 1, 0);   /* hs 128 */
            run(tiles, 1, 1, 32, 2, 1, 3);    /* one query row */
            if (!tiles)
                run(tiles, 2, 7, 400, 2, 1, 5); /* hs 200: 7 channels per lane */
        }
    }
    for (int bf = 0; bf < 2; bf++)
        printf("largest error, %s storage: forward %.3e, backward %.3e\n", bf ? "bf16" : "fp32",
               worst_err[tiles][bf][0], worst_err[tiles][bf][1]);
    printf("largest bf16 error before the rounding allowance: out %.3e, dq/dkv %.3e\n",
           worst_raw[0], worst_raw[1]);
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
