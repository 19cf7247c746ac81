/*
 * test_moe_kernels_emu.cpp — the device code of the mixture-of-experts kernels
 * (kernels/cuda/moe_kernels.cuh: router forward/backward, assignment counts, the aux loss,
 * the three-kernel dispatch plan, permute/unpermute forward/backward, the grouped expert
 * GEMM forward, dinp, dweight and dbias, as fp32 SIMT tiles and on bf16 tensor cores
 * through WMMA), run on the CPU through the CUDA emulation of
 * tests/gpu/cuda_emu.h, for fp32 and bf16 activation storage, against the CPU reference
 * (kernels/cpu/moe_*.c). No GPU needed; the launch sequences of moe.cu are restated here
 * a line each (the real ones run on a GPU in gpu.moe).
 *
 * What must be exact (bitwise, both storage types): the routing (experts, gates, probs; the
 * logits are quantized so that ties happen and the lower-index rule is exercised), the
 * counts, the router backward, the plan (counts, offsets, row_token, row_of, dropped, for
 * dropless and three capacities including 0, over several plan chunks with a partial last
 * one), permute forward and backward, unpermute forward and its dyp, the dbias of the
 * grouped GEMM. These kernels run the CPU's arithmetic in the CPU's order, and the inputs
 * for bf16 are rounded to bf16 first with the reference run on the rounded values, so any
 * difference is a bug. With tolerances: the aux loss (1e-12 relative: a double tree instead
 * of a sequential sum), dgate (1e-6: the same), the GEMMs (fp32 storage 1e-5 relative to the
 * largest value; bf16-stored outputs 1e-2, one rounding; fp32 dweight 1e-5; the tensor-core
 * kernel against the reference on bf16-rounded operands, the same tolerances).
 * Rows of the expert-grouped buffers past R must be left as they were (sentinels), an
 * expert with no rows must get nothing, and tiles crossing no expert boundary is checked
 * by expert row counts around and above the 64-row tile (0, 1, 5, 64, 70, 130). Every case
 * runs under the emulation's three schedules, so a missing __syncthreads shows.
 *
 * Usage: test_moe_kernels_emu   (exit 0 passed, 1 failed)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>
#include <vector>

#include "cuda_emu.h"

extern "C" {
#include "cpu_kernels.h"
}

/* ---- what the kernels need besides the emulation (cuda_emu.h, cuda_emu.cpp) ----------- */
/* host multiplications round once, like the intrinsics (no FMA contraction on x86-64
 * without -mfma) */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
/* blocks run one at a time, so a static is the block's shared memory */
#define MOE_SHARED static
#include "moe_kernels.cuh"

/* ---- buffers, rounding, comparison ------------------------------------------------------ */

static int failures;
static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;

static float frand() /* uniform in [-1, 1) */
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

template <class T> static T to_act(float f);
template <> float to_act<float>(float f) { return f; }
template <> __nv_bfloat16 to_act<__nv_bfloat16>(float f) { return __float2bfloat16_rn(f); }

template <class T> static std::vector<float> stored(const std::vector<float> &v)
{
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); i++) {
        T t = to_act<T>(v[i]);
        r[i] = kcuda_ld(&t, 0);
    }
    return r;
}

template <class T> struct act_buf {
    std::vector<T> v;
    explicit act_buf(const std::vector<float> &f) : v(f.size())
    {
        for (size_t i = 0; i < f.size(); i++)
            v[i] = to_act<T>(f[i]);
    }
    T *p() { return v.data(); }
    std::vector<float> get() const
    {
        std::vector<float> r(v.size());
        for (size_t i = 0; i < v.size(); i++)
            r[i] = kcuda_ld(v.data(), i);
        return r;
    }
};

template <class T> static const char *tname() { return std::is_same<T, float>::value ? "fp32" : "bf16"; }
template <class T> static double tol_act() { return std::is_same<T, float>::value ? 1e-5 : 1e-2; }

static const char *sched_name() { return emu_schedule == 0 ? "rr" : emu_schedule == 1 ? "low" : "high"; }

/* bitwise equality of floats (or ints) */
template <class V>
static void expect_same(const char *what, const std::vector<V> &got, const std::vector<V> &ref)
{
    size_t bad = got.size() == ref.size() ? ref.size() : 0;
    for (size_t i = 0; i < ref.size() && i < got.size() && bad == ref.size(); i++)
        if (memcmp(&got[i], &ref[i], sizeof(V)) != 0)
            bad = i;
    bool ok = got.size() == ref.size() && bad == ref.size();
    printf("%s %-4s %-70s exact\n", ok ? "ok  " : "FAIL", sched_name(), what);
    if (!ok) {
        if (got.size() != ref.size())
            printf("     size %zu, reference %zu\n", got.size(), ref.size());
        else
            printf("     first difference at %zu: emulated %.9g reference %.9g\n", bad,
                   (double)got[bad], (double)ref[bad]);
        failures++;
    }
}

static void expect_close(const char *what, const std::vector<float> &got,
                         const std::vector<float> &ref, double tol)
{
    double maxref = 0, maxdiff = 0;
    size_t worst = 0;
    bool bad = got.size() != ref.size();
    for (size_t i = 0; i < ref.size() && i < got.size(); i++) {
        if (!isfinite(got[i]))
            bad = true;
        maxref = fmax(maxref, fabs(ref[i]));
        double d = fabs((double)got[i] - ref[i]);
        if (d > maxdiff) {
            maxdiff = d;
            worst = i;
        }
    }
    double err = maxdiff / (maxref > 1e-6 ? maxref : 1e-6);
    bool ok = !bad && err <= tol;
    printf("%s %-4s %-70s err %.3e (tol %.0e)\n", ok ? "ok  " : "FAIL", sched_name(), what, err,
           tol);
    if (!ok) {
        if (worst < got.size())
            printf("     worst at %zu: emulated %.9g reference %.9g\n", worst, got[worst], ref[worst]);
        failures++;
    }
}

static void expect_true(const char *what, bool ok)
{
    printf("%s %-4s %s\n", ok ? "ok  " : "FAIL", sched_name(), what);
    failures += !ok;
}

static emu_dim3 d1(unsigned x) { return {x, 1, 1}; }

/* ---- the launch sequences of moe.cu, a line each ---------------------------------------- */

static void emu_counts(int *counts, const int *expert, int NK, int E)
{
    emu_launch(d1(3), d1(64), [&] { moe_count_kernel(counts, expert, NK, E); });
}

static void emu_plan(int *counts, int *offsets, int *row_token, int *row_of, int *dropped,
                     const int *expert, int N, int E, int K, int capacity)
{
    int NK = N * K, nchunks = (NK + MOE_PLAN_CHUNK - 1) / MOE_PLAN_CHUNK;
    std::vector<int> hist((size_t)(nchunks > 0 ? nchunks : 1) * E, 0), rank((size_t)NK + 1);
    /* two blocks for four or more chunks: the grid-stride loop runs */
    emu_launch(d1(2), d1(MOE_PLAN_CHUNK),
               [&] { moe_plan_rank_kernel(rank.data(), hist.data(), expert, NK, E); });
    emu_launch(d1(1), d1(MOE_THREADS), [&] {
        moe_plan_scan_kernel(hist.data(), counts, offsets, dropped, nchunks, E, capacity);
    });
    emu_launch(d1(2), d1(256), [&] {
        moe_plan_assign_kernel(row_of, row_token, rank.data(), hist.data(), offsets, expert, NK, E,
                               K, capacity);
    });
}

/* ---- cases ------------------------------------------------------------------------------ */

/* routing, aux loss, router backward, plan, permutations; returns nothing, counts failures */
template <class T> static void test_routing(int N, int E, int K, int renorm)
{
    char name[160];
    size_t NE = (size_t)N * E, NK = (size_t)N * K;
    /* quantized logits: many exact ties */
    std::vector<float> logits(NE);
    for (auto &z : logits)
        z = roundf(frand() * 4.0f) * 0.5f;
    logits = stored<T>(logits);
    std::vector<int> ex_ref(NK), ex_emu(NK, -7);
    std::vector<float> gate_ref(NK), probs_ref(NE), gate_emu(NK), probs_emu(NE);
    cpu_moe_router_forward(ex_ref.data(), gate_ref.data(), probs_ref.data(), logits.data(), N, E,
                           K, renorm);
    act_buf<T> dlog(logits);
    emu_launch(d1(2), d1(128), [&] {
        moe_router_forward_kernel<T>(ex_emu.data(), gate_emu.data(), probs_emu.data(), dlog.p(), N,
                                     E, K, renorm);
    });
    snprintf(name, sizeof name, "%s router_forward N=%d E=%d K=%d renorm=%d: experts", tname<T>(),
             N, E, K, renorm);
    expect_same(name, ex_emu, ex_ref);
    snprintf(name, sizeof name, "%s router_forward gates", tname<T>());
    expect_same(name, gate_emu, gate_ref);
    snprintf(name, sizeof name, "%s router_forward probs", tname<T>());
    expect_same(name, probs_emu, probs_ref);

    /* counts and the aux loss */
    std::vector<int> counts_ref(E), counts_emu(E, -1);
    double aux_ref = cpu_moe_aux_loss(probs_ref.data(), ex_ref.data(), N, E, K, counts_ref.data());
    std::vector<double> P(E);
    double acc = 0.25; /* accumulates */
    emu_counts(counts_emu.data(), ex_ref.data(), (int)NK, E);
    emu_launch(d1(3), d1(64), [&] { moe_prob_sum_kernel(P.data(), probs_ref.data(), N, E); });
    emu_launch(d1(1), d1(32), [&] {
        moe_aux_loss_kernel(&acc, P.data(), counts_emu.data(), N, E, K);
    });
    snprintf(name, sizeof name, "%s assignment counts", tname<T>());
    expect_same(name, counts_emu, counts_ref);
    {
        double err = fabs((acc - 0.25) - aux_ref) / fabs(aux_ref);
        snprintf(name, sizeof name, "%s aux loss accumulates (%.9f, rel. err %.1e, tol 1e-12)",
                 tname<T>(), aux_ref, err);
        expect_true(name, err <= 1e-12);
    }

    /* router backward, from a non-zero start */
    std::vector<float> dgate = random_vec(NK, 1.0f);
    std::vector<float> dl0 = stored<T>(random_vec(NE, 0.5f)), dl_ref = dl0;
    std::vector<int> cnt(E);
    cpu_moe_router_backward(dl_ref.data(), dgate.data(), probs_ref.data(), ex_ref.data(), N, E, K,
                            renorm, 0.3f, cnt.data());
    act_buf<T> dl_emu(dl0);
    std::vector<int> cnt_emu(E, -1);
    emu_counts(cnt_emu.data(), ex_ref.data(), (int)NK, E);
    emu_launch(d1(2), d1(128), [&] {
        moe_router_backward_kernel<T>(dl_emu.p(), dgate.data(), probs_ref.data(), ex_ref.data(),
                                      cnt_emu.data(), N, E, K, renorm, 0.3f);
    });
    snprintf(name, sizeof name, "%s router_backward dlogits (accumulates)", tname<T>());
    expect_same(name, dl_emu.get(), stored<T>(dl_ref));

    /* the plan, dropless and with capacities, and the permutations on each */
    const int C = 37;
    int caps[4] = {-1, 0, (int)(NK / E / 2), (int)NK};
    for (int cap : caps) {
        std::vector<int> c_ref(E), o_ref(E + 1), rt_ref(NK, -5), ro_ref(NK);
        std::vector<int> c_emu(E, -1), o_emu(E + 1, -1), rt_emu(NK, -5), ro_emu(NK, -9);
        int dropped_ref = cpu_moe_dispatch_plan(c_ref.data(), o_ref.data(), rt_ref.data(),
                                                ro_ref.data(), ex_ref.data(), N, E, K, cap);
        int dropped_emu = 3; /* accumulates */
        emu_plan(c_emu.data(), o_emu.data(), rt_emu.data(), ro_emu.data(), &dropped_emu,
                 ex_ref.data(), N, E, K, cap);
        snprintf(name, sizeof name, "%s plan capacity %d: counts, offsets, row_token, row_of",
                 tname<T>(), cap);
        bool same = c_emu == c_ref && o_emu == o_ref && rt_emu == rt_ref && ro_emu == ro_ref;
        expect_true(name, same);
        if (!same) {
            expect_same("  counts", c_emu, c_ref);
            expect_same("  offsets", o_emu, o_ref);
            expect_same("  row_token", rt_emu, rt_ref);
            expect_same("  row_of", ro_emu, ro_ref);
        }
        snprintf(name, sizeof name, "%s plan capacity %d: dropped %d accumulated", tname<T>(), cap,
                 dropped_ref);
        expect_true(name, dropped_emu == 3 + dropped_ref);
        int R = o_ref[E];

        /* permute forward; rows past R keep their sentinel */
        std::vector<float> x = stored<T>(random_vec((size_t)N * C, 1.0f));
        std::vector<float> sentinel(NK * C, 7.0f), xp_ref = sentinel;
        cpu_moe_permute_forward(xp_ref.data(), x.data(), rt_ref.data(), R, C);
        act_buf<T> dx(x), dxp(sentinel);
        emu_launch(d1(5), d1(64), [&] {
            moe_permute_forward_kernel<T>(dxp.p(), dx.p(), rt_ref.data(), o_ref.data(), (int)NK, E, C);
        });
        snprintf(name, sizeof name, "%s permute_forward capacity %d (R=%d, rows past R untouched)",
                 tname<T>(), cap, R);
        expect_same(name, dxp.get(), stored<T>(xp_ref));

        /* permute backward: scatter-add in row order, into a non-zero start */
        std::vector<float> g = stored<T>(random_vec(NK * C, 1.0f));
        std::vector<float> gx0 = stored<T>(random_vec((size_t)N * C, 1.0f)), gx_ref = gx0;
        cpu_moe_permute_backward(gx_ref.data(), g.data(), rt_ref.data(), R, C);
        act_buf<T> dg(g), dgx(gx0);
        emu_launch(d1(4), d1(64), [&] {
            moe_permute_backward_kernel<T>(dgx.p(), dg.p(), rt_ref.data(), o_ref.data(), N, E, C);
        });
        snprintf(name, sizeof name, "%s permute_backward capacity %d (accumulates)", tname<T>(), cap);
        expect_same(name, dgx.get(), stored<T>(gx_ref));

        /* unpermute forward (overwrites) and backward */
        std::vector<float> yp = stored<T>(random_vec(NK * C, 1.0f));
        std::vector<float> out_ref((size_t)N * C);
        cpu_moe_unpermute_forward(out_ref.data(), yp.data(), gate_ref.data(), ro_ref.data(), N, K, C);
        act_buf<T> dyp(yp), dout(std::vector<float>((size_t)N * C, 3.0f));
        emu_launch(d1(4), d1(64), [&] {
            moe_unpermute_forward_kernel<T>(dout.p(), dyp.p(), gate_ref.data(), ro_ref.data(), N, K, C);
        });
        snprintf(name, sizeof name, "%s unpermute_forward capacity %d (overwrites)", tname<T>(), cap);
        expect_same(name, dout.get(), stored<T>(out_ref));

        std::vector<float> go = stored<T>(random_vec((size_t)N * C, 1.0f));
        std::vector<float> gy0 = stored<T>(random_vec(NK * C, 1.0f)), gy_ref = gy0;
        std::vector<float> gg0 = random_vec(NK, 1.0f), gg_ref = gg0, gg_emu = gg0;
        cpu_moe_unpermute_backward(gy_ref.data(), gg_ref.data(), go.data(), yp.data(),
                                   gate_ref.data(), ro_ref.data(), N, K, C);
        act_buf<T> dgo(go), dgy(gy0);
        emu_launch(d1(4), d1(64), [&] {
            moe_unpermute_backward_kernel<T>(dgy.p(), gg_emu.data(), dgo.p(), dyp.p(),
                                             gate_ref.data(), ro_ref.data(), N, K, C);
        });
        snprintf(name, sizeof name, "%s unpermute_backward capacity %d dyp (accumulates)", tname<T>(), cap);
        expect_same(name, dgy.get(), stored<T>(gy_ref));
        snprintf(name, sizeof name, "%s unpermute_backward capacity %d dgate (fp32, accumulates)",
                 tname<T>(), cap);
        expect_close(name, gg_emu, gg_ref, 1e-6);
    }
}

/* the grouped GEMM on hand-made expert row counts around the 64-row tile */
template <class T> static void test_expert_matmul(int C, int OC)
{
    char name[160];
    const int E = 7, rows[E] = {70, 0, 130, 5, 64, 1, 0};
    std::vector<int> offsets(E + 1, 0);
    for (int e = 0; e < E; e++)
        offsets[e + 1] = offsets[e] + rows[e];
    const int R = offsets[E], Rmax = R + 23; /* a dropped tail: rows past R */
    std::vector<float> inp = stored<T>(random_vec((size_t)Rmax * C, 1.0f));
    std::vector<float> w = random_vec((size_t)E * OC * C, 0.5f), b = random_vec((size_t)E * OC, 0.5f);
    unsigned tiles = (unsigned)((Rmax + MOE_TM - 1) / MOE_TM + E);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const float *bias = with_bias ? b.data() : NULL;
        std::vector<float> ref((size_t)Rmax * OC, 5.0f);
        cpu_moe_expert_matmul_forward(ref.data(), inp.data(), w.data(), bias, offsets.data(), E, C, OC);
        act_buf<T> din(inp), dout(std::vector<float>((size_t)Rmax * OC, 5.0f));
        emu_launch({(unsigned)((OC + MOE_TN - 1) / MOE_TN), tiles, 1}, d1(MOE_THREADS), [&] {
            moe_grouped_gemm_rows_kernel<T>(dout.p(), din.p(), w.data(), bias, offsets.data(), E, C,
                                            OC, 0, 0);
        });
        snprintf(name, sizeof name, "%s expert_matmul_forward C=%d OC=%d bias=%d (R=%d of %d)",
                 tname<T>(), C, OC, with_bias, R, Rmax);
        std::vector<float> got = dout.get();
        expect_close(name, got, stored<T>(ref), tol_act<T>());
        bool tail = true;
        for (size_t i = (size_t)R * OC; i < got.size(); i++)
            tail &= got[i] == 5.0f;
        snprintf(name, sizeof name, "%s expert_matmul_forward leaves rows past R alone", tname<T>());
        expect_true(name, tail);
    }

    /* backward: dinp, dweight, dbias accumulate into non-zero starts */
    std::vector<float> g = stored<T>(random_vec((size_t)Rmax * OC, 1.0f));
    std::vector<float> gi0 = stored<T>(random_vec((size_t)Rmax * C, 1.0f)), gi_ref = gi0;
    std::vector<float> gw0 = random_vec((size_t)E * OC * C, 1.0f), gw_ref = gw0, gw_emu = gw0;
    std::vector<float> gb0 = random_vec((size_t)E * OC, 1.0f), gb_ref = gb0, gb_emu = gb0;
    cpu_moe_expert_matmul_backward(gi_ref.data(), gw_ref.data(), gb_ref.data(), g.data(), inp.data(),
                                   w.data(), offsets.data(), E, C, OC);
    act_buf<T> dg(g), din(inp), dgi(gi0);
    emu_launch({(unsigned)((C + MOE_TN - 1) / MOE_TN), tiles, 1}, d1(MOE_THREADS), [&] {
        moe_grouped_gemm_rows_kernel<T>(dgi.p(), dg.p(), w.data(), NULL, offsets.data(), E, OC, C, 1, 1);
    });
    emu_launch({(unsigned)((C + MOE_TN - 1) / MOE_TN), (unsigned)((OC + MOE_TM - 1) / MOE_TM),
                (unsigned)E},
               d1(MOE_THREADS), [&] {
                   moe_grouped_dweight_kernel<T>(gw_emu.data(), dg.p(), din.p(), offsets.data(), C, OC);
               });
    emu_launch(d1(2), d1(256), [&] {
        moe_grouped_dbias_kernel<T>(gb_emu.data(), dg.p(), offsets.data(), E, OC);
    });
    std::vector<float> gi = dgi.get();
    snprintf(name, sizeof name, "%s expert_matmul_backward dinp (accumulates)", tname<T>());
    expect_close(name, gi, stored<T>(gi_ref), tol_act<T>());
    bool tail = true;
    for (size_t i = (size_t)R * C; i < gi.size(); i++)
        tail &= gi[i] == gi0[i];
    snprintf(name, sizeof name, "%s expert_matmul_backward leaves dinp rows past R alone", tname<T>());
    expect_true(name, tail);
    snprintf(name, sizeof name, "%s expert_matmul_backward dweight (fp32, accumulates)", tname<T>());
    expect_close(name, gw_emu, gw_ref, 1e-5);
    bool empty_untouched = true;
    for (int e = 0; e < E; e++)
        if (rows[e] == 0)
            for (size_t i = 0; i < (size_t)OC * C; i++)
                empty_untouched &= gw_emu[(size_t)e * OC * C + i] == gw0[(size_t)e * OC * C + i];
    snprintf(name, sizeof name, "%s expert_matmul_backward: experts with no rows get nothing", tname<T>());
    expect_true(name, empty_untouched);
    snprintf(name, sizeof name, "%s expert_matmul_backward dbias (fp32, rows in order)", tname<T>());
    expect_same(name, gb_emu, gb_ref);
}

/* the same on bf16 tensor cores (WMMA): the reference runs on the bf16-rounded operands
 * (weights and, for fp32 storage, activations: what the kernel feeds the tensor cores), so
 * what remains is fp32 accumulation in another order */
template <class T> static void test_expert_matmul_tc(int C, int OC)
{
    char name[160];
    const int E = 7, rows[E] = {70, 0, 130, 5, 64, 1, 0};
    std::vector<int> offsets(E + 1, 0);
    for (int e = 0; e < E; e++)
        offsets[e + 1] = offsets[e] + rows[e];
    const int R = offsets[E], Rmax = R + 23;
    std::vector<float> inp = stored<T>(random_vec((size_t)Rmax * C, 1.0f)), inp16 = stored<__nv_bfloat16>(inp);
    std::vector<float> w = random_vec((size_t)E * OC * C, 0.5f), w16 = stored<__nv_bfloat16>(w);
    std::vector<float> b = random_vec((size_t)E * OC, 0.5f);
    unsigned tiles = (unsigned)((Rmax + MOE_TM - 1) / MOE_TM + E);
    std::vector<float> ref((size_t)Rmax * OC, 5.0f);
    cpu_moe_expert_matmul_forward(ref.data(), inp16.data(), w16.data(), b.data(), offsets.data(), E, C, OC);
    act_buf<T> din(inp), dout(std::vector<float>((size_t)Rmax * OC, 5.0f));
    emu_launch({(unsigned)((OC + 63) / 64), tiles, 1}, d1(MOE_TC_THREADS), [&] {
        moe_grouped_gemm_tc_kernel<T, MOE_TC_FWD>(dout.p(), din.p(), (const T *)NULL, w.data(),
                                                  b.data(), offsets.data(), E, C, OC, 0);
    });
    std::vector<float> got = dout.get();
    snprintf(name, sizeof name, "%s expert_matmul_forward tensor cores C=%d OC=%d (R=%d of %d)",
             tname<T>(), C, OC, R, Rmax);
    expect_close(name, got, stored<T>(ref), tol_act<T>());
    bool tail = true;
    for (size_t i = (size_t)R * OC; i < got.size(); i++)
        tail &= got[i] == 5.0f;
    snprintf(name, sizeof name, "%s expert_matmul_forward tensor cores: rows past R alone", tname<T>());
    expect_true(name, tail);

    std::vector<float> g = stored<T>(random_vec((size_t)Rmax * OC, 1.0f)), g16 = stored<__nv_bfloat16>(g);
    std::vector<float> gi0 = stored<T>(random_vec((size_t)Rmax * C, 1.0f)), gi_ref = gi0;
    std::vector<float> gw0 = random_vec((size_t)E * OC * C, 1.0f), gw_ref = gw0, gw_emu = gw0;
    cpu_moe_expert_matmul_backward(gi_ref.data(), gw_ref.data(), NULL, g16.data(), inp16.data(),
                                   w16.data(), offsets.data(), E, C, OC);
    act_buf<T> dg(g), dgi(gi0);
    emu_launch({(unsigned)((C + 63) / 64), tiles, 1}, d1(MOE_TC_THREADS), [&] {
        moe_grouped_gemm_tc_kernel<T, MOE_TC_DINP>(dgi.p(), dg.p(), (const T *)NULL, w.data(), NULL,
                                                   offsets.data(), E, OC, C, 0);
    });
    emu_launch({(unsigned)((C + 63) / 64), (unsigned)((OC + 63) / 64), (unsigned)E},
               d1(MOE_TC_THREADS), [&] {
                   moe_grouped_gemm_tc_kernel<T, MOE_TC_DW>(gw_emu.data(), dg.p(), din.p(), NULL,
                                                            NULL, offsets.data(), E, 0, C, OC);
               });
    std::vector<float> gi = dgi.get();
    snprintf(name, sizeof name, "%s expert_matmul_backward tensor cores dinp (accumulates)", tname<T>());
    expect_close(name, gi, stored<T>(gi_ref), tol_act<T>());
    tail = true;
    for (size_t i = (size_t)R * C; i < gi.size(); i++)
        tail &= gi[i] == gi0[i];
    snprintf(name, sizeof name, "%s expert_matmul_backward tensor cores: dinp rows past R alone", tname<T>());
    expect_true(name, tail);
    snprintf(name, sizeof name, "%s expert_matmul_backward tensor cores dweight (fp32, accumulates)",
             tname<T>());
    expect_close(name, gw_emu, gw_ref, 1e-5);
    bool empty_untouched = true;
    for (int e = 0; e < E; e++)
        if (rows[e] == 0)
            for (size_t i = 0; i < (size_t)OC * C; i++)
                empty_untouched &= gw_emu[(size_t)e * OC * C + i] == gw0[(size_t)e * OC * C + i];
    snprintf(name, sizeof name, "%s tensor cores: experts with no rows get nothing", tname<T>());
    expect_true(name, empty_untouched);
}

int main(void)
{
    for (emu_schedule = 0; emu_schedule < 3; emu_schedule++) {
        /* N K = 300 x 3 = 900 assignments: four plan chunks, the last one partial */
        test_routing<float>(300, 7, 3, 1);
        test_routing<__nv_bfloat16>(300, 7, 3, 1);
        test_routing<float>(150, 5, 2, 0);
        test_routing<__nv_bfloat16>(150, 5, 2, 0);
        test_routing<float>(40, 9, 1, 1); /* top-1 */
        test_expert_matmul<float>(40, 72);
        test_expert_matmul<__nv_bfloat16>(40, 72);
        test_expert_matmul<float>(19, 130);
        test_expert_matmul_tc<float>(40, 72);
        test_expert_matmul_tc<__nv_bfloat16>(40, 72);
        test_expert_matmul_tc<__nv_bfloat16>(19, 130);
    }
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
