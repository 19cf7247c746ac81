/*
 * test_act_kernels_emu.cpp — the device code of the activation kernels
 * (kernels/cuda/act_kernels.cuh: encoder, LayerNorm and the fused residual + LayerNorm,
 * GELU, residual, softmax + cross-entropy, the matmul bias gradient and bias add), run on
 * the CPU through the CUDA emulation of tests/gpu/cuda_emu.h, for both activation storage
 * types (float and __nv_bfloat16), against the CPU reference (kernels/cpu/cpu_kernels.h).
 * Runs on every machine with the CUDA parts built; no GPU needed. It checks exactly the
 * kernel source that runs on the GPU: index math, the vector (16-byte) and scalar paths and
 * the choice between them, tails, grid-stride loops, accumulation, bf16 rounding on store,
 * reductions and barriers. The host wrappers (grid sizes) are restated here in a line each
 * and checked on a GPU by gpu.kernels.
 *
 * How: inputs come from a fixed-seed generator. For bf16 storage the inputs are rounded
 * to bf16 first and the reference runs on the rounded values in fp32, so what is measured
 * is the kernel's own error (fp32 arithmetic in another order, and one rounding when it
 * stores). Gradients start from the same non-zero values on both sides (accumulation is
 * checked; for bf16 the start values are rounded too). Error: max |emu - ref| / max |ref|.
 * Tolerances: fp32 storage 1e-5; bf16-stored outputs 1e-2 (one rounding is at most 2^-8
 * = 3.9e-3 of the value); fp32 outputs computed from bf16 inputs (losses, mean/rstd,
 * parameter gradients) as for fp32 (1e-5; LayerNorm's dweight/dbias sum over rows: 1e-4).
 * Element-wise kernels run on 16-byte aligned buffers (vector path) and on buffers one
 * element off (scalar path), with lengths that leave a tail; row kernels on widths that
 * are and are not a multiple of the vector width (4 floats / 8 bf16). Kernels with block
 * barriers run under two schedules (round-robin, and the lowest warp running ahead of the
 * others) so that a missing __syncthreads changes the result.
 *
 * Alignment: every vector access reports its address (ACT_VEC_CHECK) and the test fails
 * if any is not aligned to its vector (on the GPU that access would fault), so the
 * choice between the vector and the scalar path is checked, not only the results.
 *
 * What it cannot check: the CUDA compiler, timing. Usage: test_act_kernels_emu
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucontext.h>

#include <type_traits>
#include <vector>

#include "cuda_emu.h"

extern "C" {
#include "cpu_kernels.h"
}

/* ---- what the kernels need besides the emulation (cuda_emu.h, cuda_emu.cpp) ----------- */

float act_ln_acc[2 * 4096]; /* LayerNorm backward's dynamic shared memory */

static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

/* kcuda_block_sum / kcuda_block_max as in kcuda_internal.cuh (which needs the CUDA headers) */
static inline float kcuda_block_sum(float v, float *shared)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    v = kcuda_warp_sum(v);
    __syncthreads();
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    float r = lane < nwarps ? shared[lane] : 0.0f;
    return kcuda_warp_sum(r);
}

static inline float kcuda_block_max(float v, float *shared)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
    v = kcuda_warp_max(v);
    __syncthreads();
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    float r = lane < nwarps ? shared[lane] : -INFINITY;
    return kcuda_warp_max(r);
}

/* blocks run one at a time, so a static is the block's shared memory */
#define ACT_SHARED static
/* every vector access must be aligned to its vector (a fault on the GPU): count those
 * that are not */
static unsigned long misaligned_vector_accesses;
#define ACT_VEC_CHECK(ptr, align) (misaligned_vector_accesses += ((uintptr_t)(ptr) % (align)) != 0)
#include "act_kernels.cuh"

/* ---- buffers, rounding, comparison ------------------------------------------------------ */

static int failures;
static unsigned long long rng_state = 0x2545F4914F6CDD1Dull;

static float frand() /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static std::vector<float> random_vec(size_t n, float scale, float shift = 0.0f)
{
    std::vector<float> v(n);
    for (auto &x : v)
        x = frand() * scale + shift;
    return v;
}

template <class T> static T to_act(float f);
template <> float to_act<float>(float f) { return f; }
template <> __nv_bfloat16 to_act<__nv_bfloat16>(float f) { return __float2bfloat16_rn(f); }

/* The values as storage type T holds them (fp32: unchanged; bf16: rounded). */
template <class T> static std::vector<float> stored(const std::vector<float> &v)
{
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); i++) {
        T t = to_act<T>(v[i]);
        r[i] = kcuda_ld(&t, 0);
    }
    return r;
}

/* Device-like storage of n values of T starting `off` elements past a 16-byte boundary. */
template <class T> struct act_buf {
    std::vector<unsigned char> raw;
    T *p;
    size_t n;
    act_buf(const std::vector<float> &v, size_t off = 0) : raw((v.size() + off) * sizeof(T) + 32), n(v.size())
    {
        uintptr_t base = ((uintptr_t)raw.data() + 15) & ~(uintptr_t)15;
        p = (T *)base + off;
        for (size_t i = 0; i < n; i++)
            p[i] = to_act<T>(v[i]);
    }
    std::vector<float> get() const
    {
        std::vector<float> r(n);
        for (size_t i = 0; i < n; i++)
            r[i] = kcuda_ld(p, i);
        return r;
    }
};

template <class T> static const char *tname() { return std::is_same<T, float>::value ? "fp32" : "bf16"; }
template <class T> static double tol_act() { return std::is_same<T, float>::value ? 1e-5 : 1e-2; }
#define TOL_F32 1e-5
#define TOL_PARAM_SUMS 1e-4

static void expect_close(const char *what, const std::vector<float> &got,
                         const std::vector<float> &ref, double tol)
{
    double maxref = 0, maxdiff = 0;
    size_t worst = 0;
    bool nonfinite = got.size() != ref.size();
    for (size_t i = 0; i < ref.size() && i < got.size(); i++) {
        if (!isfinite(got[i]))
            nonfinite = true;
        if (fabs(ref[i]) > maxref)
            maxref = fabs(ref[i]);
        double d = fabs((double)got[i] - ref[i]);
        if (d > maxdiff) {
            maxdiff = d;
            worst = i;
        }
    }
    double err = maxdiff / (maxref > 1e-6 ? maxref : 1e-6);
    bool ok = !nonfinite && err <= tol;
    printf("%s %-66s err %.3e (tol %.0e)%s\n", ok ? "ok  " : "FAIL", what, err, tol,
           nonfinite ? " non-finite values or wrong size" : "");
    if (!ok) {
        if (worst < got.size())
            printf("     worst at %zu: emulated %.8g reference %.8g\n", worst, got[worst], ref[worst]);
        failures++;
    }
}

static emu_dim3 d1(unsigned x) { return {x, 1, 1}; }

/* ---- cases ------------------------------------------------------------------------------ */

template <class T> static void test_encoder(int B, int Tn, int C)
{
    const int V = 11;
    std::vector<int> tokens((size_t)B * Tn);
    for (size_t i = 0; i < tokens.size(); i++)
        tokens[i] = (int)((i * 7 + 3) % V); /* repeats: dwte rows get several contributions */
    std::vector<float> wte = random_vec((size_t)V * C, 1), wpe = random_vec((size_t)Tn * C, 1);
    size_t n = (size_t)B * Tn * C;
    std::vector<float> ref(n);
    cpu_encoder_forward(ref.data(), tokens.data(), wte.data(), wpe.data(), B, Tn, C);
    act_buf<T> out(std::vector<float>(n, 0.0f));
    emu_launch(d1(3), d1(64), [&] {
        encoder_forward_kernel<T>(out.p, tokens.data(), wte.data(), wpe.data(), B, Tn, C);
    });
    char name[128];
    snprintf(name, sizeof name, "%s encoder_forward B=%d T=%d C=%d", tname<T>(), B, Tn, C);
    expect_close(name, out.get(), stored<T>(ref), tol_act<T>());

    std::vector<float> g = stored<T>(random_vec(n, 1));
    std::vector<float> gw = random_vec((size_t)V * C, 1), gp = random_vec((size_t)Tn * C, 1);
    std::vector<float> gw_emu = gw, gp_emu = gp;
    cpu_encoder_backward(gw.data(), gp.data(), g.data(), tokens.data(), B, Tn, C);
    act_buf<T> dg(g);
    emu_launch(d1(2), d1(64), [&] { encoder_backward_wpe_kernel<T>(gp_emu.data(), dg.p, B, Tn, C); });
    emu_launch(d1(3), d1(64), [&] {
        encoder_backward_wte_kernel<T>(gw_emu.data(), dg.p, tokens.data(), B, Tn, C);
    });
    snprintf(name, sizeof name, "%s encoder_backward dwte (fp32, accumulates) C=%d", tname<T>(), C);
    expect_close(name, gw_emu, gw, TOL_F32);
    snprintf(name, sizeof name, "%s encoder_backward dwpe (fp32, accumulates) C=%d", tname<T>(), C);
    expect_close(name, gp_emu, gp, TOL_F32);
}

template <class T> static void test_layernorm(int N, int C)
{
    size_t n = (size_t)N * C;
    std::vector<float> x = stored<T>(random_vec(n, 2, 0.5f)); /* a non-zero mean */
    std::vector<float> w = random_vec((size_t)C, 1), b = random_vec((size_t)C, 1);
    std::vector<float> y(n), mean((size_t)N), rstd((size_t)N);
    cpu_layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    act_buf<T> dx(x), dy(std::vector<float>(n, 0.0f));
    std::vector<float> m_emu((size_t)N), r_emu((size_t)N);
    emu_dim3 block = d1(ACT_LN_WARPS * 32);
    emu_launch(d1(2), block, [&] {
        layernorm_forward_kernel<T>(dy.p, m_emu.data(), r_emu.data(), dx.p, w.data(), b.data(), N, C);
    });
    char name[128];
    snprintf(name, sizeof name, "%s layernorm_forward out N=%d C=%d", tname<T>(), N, C);
    expect_close(name, dy.get(), y, tol_act<T>());
    snprintf(name, sizeof name, "%s layernorm_forward mean (fp32)", tname<T>());
    expect_close(name, m_emu, mean, TOL_F32);
    snprintf(name, sizeof name, "%s layernorm_forward rstd (fp32)", tname<T>());
    expect_close(name, r_emu, rstd, TOL_F32);

    /* fused residual + LayerNorm: the normalization reads the stored (rounded) sum */
    std::vector<float> a = stored<T>(random_vec(n, 1)), bb = stored<T>(random_vec(n, 1)), res(n);
    cpu_residual_forward(res.data(), a.data(), bb.data(), (int)n);
    res = stored<T>(res);
    std::vector<float> y2(n), mean2((size_t)N), rstd2((size_t)N);
    cpu_layernorm_forward(y2.data(), mean2.data(), rstd2.data(), res.data(), w.data(), b.data(), N, C);
    act_buf<T> da(a), dbb(bb), dres(std::vector<float>(n, 0.0f)), dy2(std::vector<float>(n, 0.0f));
    emu_launch(d1(2), block, [&] {
        residual_layernorm_forward_kernel<T>(dres.p, dy2.p, m_emu.data(), r_emu.data(), da.p, dbb.p,
                                             w.data(), b.data(), N, C);
    });
    snprintf(name, sizeof name, "%s residual_layernorm_forward residual", tname<T>());
    expect_close(name, dres.get(), res, tol_act<T>());
    snprintf(name, sizeof name, "%s residual_layernorm_forward out", tname<T>());
    expect_close(name, dy2.get(), y2, tol_act<T>());
    snprintf(name, sizeof name, "%s residual_layernorm_forward rstd", tname<T>());
    expect_close(name, r_emu, rstd2, TOL_F32);

    /* backward, from the reference's mean/rstd of x */
    std::vector<float> g = stored<T>(random_vec(n, 1)), gx = stored<T>(random_vec(n, 1));
    std::vector<float> gw = random_vec((size_t)C, 1), gb = random_vec((size_t)C, 1);
    act_buf<T> dg(g), dgx(gx);
    std::vector<float> gw_emu = gw, gb_emu = gb;
    cpu_layernorm_backward(gx.data(), gw.data(), gb.data(), g.data(), x.data(), w.data(),
                           mean.data(), rstd.data(), N, C);
    emu_launch(d1(2), block, [&] {
        layernorm_backward_kernel<T>(dgx.p, gw_emu.data(), gb_emu.data(), dg.p, dx.p, w.data(),
                                     mean.data(), rstd.data(), N, C);
    });
    snprintf(name, sizeof name, "%s layernorm_backward dinp (accumulates)", tname<T>());
    expect_close(name, dgx.get(), gx, tol_act<T>());
    snprintf(name, sizeof name, "%s layernorm_backward dweight (fp32)", tname<T>());
    expect_close(name, gw_emu, gw, TOL_PARAM_SUMS);
    snprintf(name, sizeof name, "%s layernorm_backward dbias (fp32)", tname<T>());
    expect_close(name, gb_emu, gb, TOL_PARAM_SUMS);
}

/* Element-wise kernels on n values, `off` elements past a 16-byte boundary. */
template <class T> static void test_elementwise(size_t n, size_t off)
{
    std::vector<float> x = stored<T>(random_vec(n, 3)), b = stored<T>(random_vec(n, 1));
    std::vector<float> y(n);
    act_buf<T> dx(x, off), db(b, off), dy(std::vector<float>(n, 0.0f), off);
    char name[128];
    cpu_gelu_forward(y.data(), x.data(), (int)n);
    emu_launch(d1(3), d1(64), [&] { gelu_forward_kernel<T>(dy.p, dx.p, n); });
    snprintf(name, sizeof name, "%s gelu_forward n=%zu offset %zu", tname<T>(), n, off);
    expect_close(name, dy.get(), y, tol_act<T>());

    std::vector<float> g = stored<T>(random_vec(n, 1)), gx = stored<T>(random_vec(n, 1));
    act_buf<T> dg(g, off), dgx(gx, off);
    cpu_gelu_backward(gx.data(), x.data(), g.data(), (int)n);
    emu_launch(d1(3), d1(64), [&] { gelu_backward_kernel<T>(dgx.p, dx.p, dg.p, n); });
    snprintf(name, sizeof name, "%s gelu_backward (accumulates) offset %zu", tname<T>(), off);
    expect_close(name, dgx.get(), gx, tol_act<T>());

    cpu_residual_forward(y.data(), x.data(), b.data(), (int)n);
    emu_launch(d1(3), d1(64), [&] { residual_forward_kernel<T>(dy.p, dx.p, db.p, n); });
    snprintf(name, sizeof name, "%s residual_forward offset %zu", tname<T>(), off);
    expect_close(name, dy.get(), y, tol_act<T>());

    std::vector<float> ra = x, rb = b;
    cpu_residual_backward(ra.data(), rb.data(), g.data(), (int)n);
    emu_launch(d1(3), d1(64), [&] { residual_backward_kernel<T>(dx.p, db.p, dg.p, n); });
    snprintf(name, sizeof name, "%s residual_backward da (accumulates) offset %zu", tname<T>(), off);
    expect_close(name, dx.get(), ra, tol_act<T>());
    snprintf(name, sizeof name, "%s residual_backward db (accumulates) offset %zu", tname<T>(), off);
    expect_close(name, db.get(), rb, tol_act<T>());
}

template <class T> static void test_crossentropy(int N, int V, int Vp, unsigned threads)
{
    size_t n = (size_t)N * Vp;
    std::vector<float> logits = stored<T>(random_vec(n, 4)), probs(n), losses((size_t)N);
    std::vector<int> targets((size_t)N);
    for (int i = 0; i < N; i++)
        targets[(size_t)i] = (i * 131 + 7) % V;
    cpu_softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), N,
                                     V, Vp);
    act_buf<T> dlog(logits), dprobs(random_vec(n, 1)); /* garbage in probs: all overwritten */
    std::vector<float> l_emu((size_t)N);
    emu_launch(d1((unsigned)N), d1(threads), [&] {
        crossentropy_forward_kernel<T>(l_emu.data(), dprobs.p, dlog.p, targets.data(), V, Vp);
    });
    char name[128];
    snprintf(name, sizeof name, "%s crossentropy_forward losses (fp32) N=%d V=%d Vp=%d", tname<T>(),
             N, V, Vp);
    expect_close(name, l_emu, losses, TOL_F32);
    snprintf(name, sizeof name, "%s crossentropy_forward probs (padded = 0)", tname<T>());
    expect_close(name, dprobs.get(), probs, tol_act<T>());

    std::vector<float> p = stored<T>(probs), dl = random_vec((size_t)N, 1);
    std::vector<float> dlogits = stored<T>(random_vec(n, 1));
    act_buf<T> dp(p), ddl(dlogits);
    cpu_softmax_crossentropy_backward(dlogits.data(), dl.data(), p.data(), targets.data(), N, V, Vp);
    emu_launch(d1((unsigned)N), d1(threads / 2), [&] {
        crossentropy_backward_kernel<T>(ddl.p, dl.data(), dp.p, targets.data(), V, Vp);
    });
    snprintf(name, sizeof name, "%s crossentropy_backward (accumulates, pad untouched)", tname<T>());
    expect_close(name, ddl.get(), dlogits, tol_act<T>());
}

template <class T> static void test_bias(int N, int OC, int rows_per_chunk)
{
    size_t n = (size_t)N * OC;
    std::vector<float> g = stored<T>(random_vec(n, 1)), db = random_vec((size_t)OC, 1);
    std::vector<float> db_ref = db, db_emu = db;
    cpu_matmul_backward(NULL, NULL, db_ref.data(), g.data(), NULL, NULL, N, 1, OC);
    int chunks = (N + rows_per_chunk - 1) / rows_per_chunk, groups = (OC + 31) / 32;
    std::vector<float> partial((size_t)chunks * OC, NAN);
    act_buf<T> dg(g);
    emu_launch({(unsigned)groups, (unsigned)chunks, 1}, d1(ACT_DBIAS_THREADS), [&] {
        dbias_partial_kernel<T>(partial.data(), dg.p, N, OC, rows_per_chunk);
    });
    emu_launch(d1(1), d1(32), [&] { dbias_final_kernel<>(db_emu.data(), partial.data(), chunks, OC); });
    char name[128];
    snprintf(name, sizeof name, "%s matmul dbias (fp32, accumulates) N=%d OC=%d chunks=%d",
             tname<T>(), N, OC, chunks);
    expect_close(name, db_emu, db_ref, TOL_F32);

    /* the fallback bias add: out[r, c] += bias[c] */
    std::vector<float> out = stored<T>(random_vec(n, 1)), bias = random_vec((size_t)OC, 1);
    act_buf<T> dout(out);
    for (size_t i = 0; i < n; i++)
        out[i] += bias[i % (size_t)OC];
    emu_launch(d1(2), d1(64), [&] { bias_add_kernel<T>(dout.p, bias.data(), N, OC); });
    snprintf(name, sizeof name, "%s matmul bias add N=%d OC=%d", tname<T>(), N, OC);
    expect_close(name, dout.get(), out, tol_act<T>());
}

/* bf16 storage rounds to nearest even, exactly once: a value halfway between two bf16
 * numbers goes to the even one, and the kernels' stores agree with the emulated cast. */
static void test_rounding()
{
    float halfway = 1.0f + 1.0f / 256.0f; /* between 1 and 1 + 2^-7: rounds to 1 (even) */
    float above = 1.0f + 3.0f / 256.0f;   /* between 1 + 2^-7 and 1 + 2^-6: rounds up */
    std::vector<float> x = {halfway, above, -halfway, 3.0f};
    act_buf<__nv_bfloat16> a(x), b(std::vector<float>(4, 0.0f)), out(std::vector<float>(4, 0.0f));
    emu_launch(d1(1), d1(32), [&] { residual_forward_kernel<__nv_bfloat16>(out.p, a.p, b.p, 4); });
    std::vector<float> got = out.get();
    bool ok = got[0] == 1.0f && got[1] == 1.0f + 4.0f / 256.0f && got[2] == -1.0f && got[3] == 3.0f;
    printf("%s bf16 stores round to nearest even (%.8g %.8g %.8g %.8g)\n", ok ? "ok  " : "FAIL",
           got[0], got[1], got[2], got[3]);
    failures += !ok;
}

template <class T> static void run_all()
{
    printf("-- %s activations, schedule %s\n", tname<T>(),
           emu_schedule == 0 ? "round-robin" : "lowest warp first");
    test_encoder<T>(2, 5, 40); /* vector path for both types */
    test_encoder<T>(2, 3, 36); /* fp32 vector, bf16 scalar (36 % 8 != 0) */
    test_encoder<T>(1, 4, 13); /* scalar */
    test_layernorm<T>(37, 64);  /* vector path, several rows per warp */
    test_layernorm<T>(9, 100);  /* fp32 vector (100 % 4 == 0), bf16 scalar */
    test_layernorm<T>(5, 13);   /* scalar; C < 32: idle lanes */
    test_layernorm<T>(3, 768);  /* GPT-2 width */
    test_elementwise<T>(1001, 0); /* vector path, a 1001 % W tail */
    test_elementwise<T>(1001, 1); /* one element off: scalar path */
    test_elementwise<T>(5, 0);    /* shorter than one grid-stride step */
    test_crossentropy<T>(5, 100, 104, 128); /* vector rows, padded */
    test_crossentropy<T>(3, 37, 37, 64);    /* scalar rows, no padding */
    test_crossentropy<T>(2, 1000, 1024, 512); /* the real block size */
    test_bias<T>(100, 77, 64); /* two row chunks, a partial column group */
    test_bias<T>(130, 64, 16); /* nine chunks */
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "usage: test_act_kernels_emu\n");
        return 2;
    }
    test_rounding();
    for (emu_schedule = 0; emu_schedule <= 1; emu_schedule++) {
        run_all<float>();
        run_all<__nv_bfloat16>();
    }
    bool aligned = misaligned_vector_accesses == 0;
    printf("%s every 16-byte vector access was aligned (%lu misaligned)\n", aligned ? "ok  " : "FAIL",
           misaligned_vector_accesses);
    failures += !aligned;
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
