/*
 * test_attention_block_emu.cpp — the device code of ring attention's CUDA block kernels
 * (kernels/cuda/attention_block_kernels.cuh), run on the CPU through a CUDA emulation
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
 * The tile kernels run under two schedules (the lowest warp runs ahead of the others, and
 * the highest), so that a missing __syncthreads between warps changes the result; the
 * fp32 kernels (no block barriers) run round-robin.
 *
 * Usage: test_gpu_attention_block_emu tiles|fp32
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

/* ---- the emulation's globals and scheduler ------------------------------------------ */

emu_dim3 threadIdx, blockIdx, gridDim, blockDim;
emu_block *emu_current;
alignas(128) unsigned char ab_smem[256 * 1024];

float atomicAdd(float *p, float v)
{
    float old = *p;
    *p = old + v;
    return old;
}

#define EMU_STACK (256u << 10)

static ucontext_t emu_main;
static ucontext_t *emu_ctx;
static const std::function<void()> *emu_body;
static unsigned emu_running; /* index of the thread running now */
static std::vector<char> emu_done;
static unsigned long emu_progress; /* barriers passed and threads finished, for the scheduler */
/* 0: round-robin over the threads; 1: the lowest warp that can run goes on until it
 * blocks, then the next; 2: likewise from the highest warp. 1 and 2 let one warp run
 * far ahead of the others, so a missing __syncthreads shows up as a wrong result. */
static int emu_schedule;

static void emu_yield() { swapcontext(&emu_ctx[emu_running], &emu_main); }

void emu_barrier_wait(emu_barrier *b)
{
    unsigned gen = b->generation;
    if (++b->arrived == b->count) {
        b->arrived = 0;
        b->generation++;
        return;
    }
    while (b->generation == gen)
        emu_yield();
    emu_progress++;
}

static void emu_thread_main()
{
    (*emu_body)();
    emu_done[emu_running] = 1; /* then uc_link returns to the scheduler */
    emu_progress++;
}

int emu_launch(emu_dim3 grid, emu_dim3 block, const std::function<void()> &body)
{
    unsigned n = block.x, warps = n / 32;
    if (n == 0 || n % 32 != 0 || warps > 32 || block.y != 1 || block.z != 1)
        return -1;
    gridDim = grid;
    blockDim = block;
    emu_body = &body;
    static std::vector<ucontext_t> ctx;
    static std::vector<char> stacks;
    ctx.resize(n);
    stacks.resize((size_t)n * EMU_STACK);
    emu_ctx = ctx.data();
    emu_done.assign(n, 0);
    static emu_block state;
    emu_current = &state;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                state.all = {n, 0, 0};
                for (unsigned w = 0; w < warps; w++)
                    state.warp[w] = {32, 0, 0};
                for (unsigned t = 0; t < n; t++) {
                    getcontext(&ctx[t]);
                    ctx[t].uc_stack.ss_sp = &stacks[(size_t)t * EMU_STACK];
                    ctx[t].uc_stack.ss_size = EMU_STACK;
                    ctx[t].uc_link = &emu_main;
                    makecontext(&ctx[t], emu_thread_main, 0);
                    emu_done[t] = 0;
                }
                blockIdx = {x, y, z};
                for (unsigned left = n; left > 0;) {
                    left = 0;
                    for (unsigned i = 0; i < warps; i++) {
                        unsigned w = emu_schedule == 2 ? warps - 1 - i : i;
                        unsigned long before = emu_progress;
                        for (unsigned t = w * 32; t < w * 32 + 32; t++) {
                            if (emu_done[t])
                                continue;
                            emu_running = t;
                            threadIdx = {t, 0, 0};
                            swapcontext(&emu_main, &ctx[t]);
                        }
                        if (emu_schedule != 0 && emu_progress != before)
                            break; /* this warp moved: let it (or a higher one) go on */
                    }
                    for (unsigned t = 0; t < n; t++)
                        left += !emu_done[t];
                }
            }
    return 0;
}

/* ---- the kernels under test ----------------------------------------------------------- */

#include "attention_block_kernels.cuh"

/* The host side of attention_block.cu, restated: grids and the two paths. */
static void launch_forward(int tiles, float *out, float *lse, const float *q, int qs,
                           const float *kv, int ks, int B, int Tq, int Tk, int C, int NH,
                           int causal)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    if (tiles) {
        emu_dim3 grid = {(unsigned)((Tq + AB_BR - 1) / AB_BR), (unsigned)(B * NH), 1};
        emu_launch(grid, {AB_THREADS, 1, 1}, [&] {
            switch (hs) {
            case 16: ab_forward_kernel<16>(out, lse, q, qs, kv, ks, Tq, Tk, NH, causal, scale); break;
            case 32: ab_forward_kernel<32>(out, lse, q, qs, kv, ks, Tq, Tk, NH, causal, scale); break;
            case 64: ab_forward_kernel<64>(out, lse, q, qs, kv, ks, Tq, Tk, NH, causal, scale); break;
            default: ab_forward_kernel<128>(out, lse, q, qs, kv, ks, Tq, Tk, NH, causal, scale);
            }
        });
        return;
    }
    size_t rows = (size_t)B * NH * Tq, per = AB_F32_THREADS / 32;
    emu_dim3 grid = {(unsigned)((rows + per - 1) / per), 1, 1};
    emu_launch(grid, {AB_F32_THREADS, 1, 1}, [&] {
        if (hs <= 32)
            ab_forward_f32_kernel<1>(out, lse, q, qs, kv, ks, B, Tq, Tk, NH, hs, causal, scale);
        else if (hs <= 64)
            ab_forward_f32_kernel<2>(out, lse, q, qs, kv, ks, B, Tq, Tk, NH, hs, causal, scale);
        else if (hs <= 128)
            ab_forward_f32_kernel<4>(out, lse, q, qs, kv, ks, B, Tq, Tk, NH, hs, causal, scale);
        else
            ab_forward_f32_kernel<8>(out, lse, q, qs, kv, ks, B, Tq, Tk, NH, hs, causal, scale);
    });
}

static void launch_backward(int tiles, float *dq, int dqs, float *dkv, int dkvs,
                            const float *dout, const float *out, const float *lse,
                            const float *q, int qs, const float *kv, int ks, int B, int Tq,
                            int Tk, int C, int NH, int causal)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    if (tiles) {
        int rows = B * NH * Tq;
        std::vector<float> Dv((size_t)rows);
        float *dv = Dv.data();
        emu_launch({(unsigned)((rows + 7) / 8), 1, 1}, {256, 1, 1},
                   [&] { ab_dot_kernel(dv, dout, out, rows, Tq, NH, hs); });
        emu_dim3 grid = {(unsigned)((Tk + AB_BC - 1) / AB_BC), (unsigned)(B * NH), 1};
        emu_launch(grid, {AB_THREADS, 1, 1}, [&] {
#define AB_EMU_BWD(HS)                                                                             \
    ab_backward_kernel<HS>(dq, dqs, dkv, dkvs, dout, lse, dv, q, qs, kv, ks, Tq, Tk, NH, causal,  \
                           scale)
            switch (hs) {
            case 16: AB_EMU_BWD(16); break;
            case 32: AB_EMU_BWD(32); break;
            case 64: AB_EMU_BWD(64); break;
            default: AB_EMU_BWD(128);
            }
#undef AB_EMU_BWD
        });
        return;
    }
    size_t rows = (size_t)B * NH * Tq, per = AB_F32_THREADS / 32;
    emu_dim3 grid = {(unsigned)((rows + per - 1) / per), 1, 1};
    emu_launch(grid, {AB_F32_THREADS, 1, 1}, [&] {
#define AB_EMU_BWD32(U)                                                                            \
    ab_backward_f32_kernel<U>(dq, dqs, dkv, dkvs, dout, out, lse, q, qs, kv, ks, B, Tq, Tk, NH,   \
                              hs, causal, scale)
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
}

/* ---- the comparison ------------------------------------------------------------------- */

static int failures;
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

static void expect_close(const char *what, const std::vector<float> &got,
                         const std::vector<float> &ref, const std::vector<float> *base,
                         double tol)
{
    double maxref = 0, maxdiff = 0;
    size_t worst = 0;
    bool nonfinite = false;
    for (size_t i = 0; i < ref.size(); i++) {
        double b = base ? (*base)[i] : 0.0, g = got[i] - b, r = ref[i] - b;
        if (!isfinite(got[i]))
            nonfinite = true;
        if (fabs(r) > maxref)
            maxref = fabs(r);
        if (fabs(g - r) > maxdiff) {
            maxdiff = fabs(g - r);
            worst = i;
        }
    }
    double err = maxdiff / (maxref > 1e-6 ? maxref : 1e-6);
    bool ok = !nonfinite && err <= tol;
    printf("%s %-62s err %.3e (tol %.0e)%s\n", ok ? "ok  " : "FAIL", what, err, tol,
           nonfinite ? " non-finite values" : "");
    if (!ok) {
        printf("     worst at %zu: emulated %.8g reference %.8g\n", worst, got[worst], ref[worst]);
        failures++;
    }
}

struct key_block {
    int Tk, causal, in_qkv;
    std::vector<float> kv, dkv0, dkv_ref, dkv_emu;
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

static void test_blocks(int tiles, int B, int Tq, int C, int NH, int full, int extra_tk)
{
    const double tol_f = tiles ? 2e-2 : 1e-4, tol_b = tiles ? 3e-2 : 1e-4;
    const int C3 = 3 * C, C2 = 2 * C;
    const size_t nq = (size_t)B * Tq, nl = (size_t)B * NH * Tq;
    std::vector<key_block> blk;
    for (int i = 0; i < full; i++)
        blk.push_back({Tq, 0, 0, {}, {}, {}, {}});
    blk.push_back({Tq, 1, 1, {}, {}, {}, {}});
    if (extra_tk > 0)
        blk.push_back({extra_tk, 0, 0, {}, {}, {}, {}});
    const int nb = (int)blk.size();
    std::vector<float> qkv = random_vec(nq * C3, 1.0f);
    int maxTk = Tq;
    for (auto &k : blk) {
        size_t n = (size_t)B * k.Tk * C2;
        if (!k.in_qkv)
            k.kv = random_vec(n, 1.0f);
        k.dkv0 = random_vec(n, 0.5f);
        k.dkv_ref = k.dkv0;
        k.dkv_emu = k.dkv0;
        maxTk = k.Tk > maxTk ? k.Tk : maxTk;
    }
    std::vector<float> scratch((size_t)maxTk);
    std::vector<float> out_ref(nq * C, 0.0f), lse_ref(nl, -INFINITY);
    std::vector<float> out_emu(nq * C, 0.0f), lse_emu(nl, -INFINITY);
    int order[8];
    scrambled(order, nb, B + Tq);
    for (int oi = 0; oi < nb; oi++) {
        key_block &k = blk[order[oi]];
        const float *kv = k.in_qkv ? qkv.data() + C : k.kv.data();
        int ks = k.in_qkv ? C3 : C2;
        cpu_attention_block_forward(out_ref.data(), lse_ref.data(), qkv.data(), C3, kv, ks, B, Tq,
                                    k.Tk, C, NH, k.causal, scratch.data());
        launch_forward(tiles, out_emu.data(), lse_emu.data(), qkv.data(), C3, kv, ks, B, Tq, k.Tk,
                       C, NH, k.causal);
    }
    char name[160];
    const char *path = tiles ? "tiles" : "fp32 ";
    snprintf(name, sizeof name, "%s fwd out B=%d Tq=%d C=%d NH=%d blocks=%d", path, B, Tq, C, NH,
             nb);
    expect_close(name, out_emu, out_ref, NULL, tol_f);
    snprintf(name, sizeof name, "%s fwd lse B=%d Tq=%d C=%d NH=%d", path, B, Tq, C, NH);
    expect_close(name, lse_emu, lse_ref, NULL, tol_f);

    std::vector<float> dout = random_vec(nq * C, 1.0f), dqkv0 = random_vec(nq * C3, 0.5f);
    std::vector<float> dqkv_ref = dqkv0, dqkv_emu = dqkv0;
    scrambled(order, nb, B * 5 + Tq + 1);
    for (int oi = 0; oi < nb; oi++) {
        key_block &k = blk[order[oi]];
        const float *kv = k.in_qkv ? qkv.data() + C : k.kv.data();
        int ks = k.in_qkv ? C3 : C2;
        cpu_attention_block_backward(dqkv_ref.data(), C3, k.dkv_ref.data(), C2, dout.data(),
                                     out_ref.data(), lse_ref.data(), qkv.data(), C3, kv, ks, B,
                                     Tq, k.Tk, C, NH, k.causal, scratch.data());
        launch_backward(tiles, dqkv_emu.data(), C3, k.dkv_emu.data(), C2, dout.data(),
                        out_ref.data(), lse_ref.data(), qkv.data(), C3, kv, ks, B, Tq, k.Tk, C,
                        NH, k.causal);
    }
    snprintf(name, sizeof name, "%s bwd dq (accumulates) B=%d Tq=%d", path, B, Tq);
    expect_close(name, dqkv_emu, dqkv_ref, &dqkv0, tol_b);
    bool untouched = true;
    for (size_t r = 0; r < nq; r++)
        for (int c = C; c < C3; c++)
            untouched &= dqkv_emu[r * C3 + c] == dqkv0[r * C3 + c];
    if (!untouched) {
        printf("FAIL %s: the k|v columns of dqkv were written\n", name);
        failures++;
    }
    for (int i = 0; i < nb; i++) {
        snprintf(name, sizeof name, "%s bwd dkv block %d (Tk=%d%s, accumulates)", path, i,
                 blk[i].Tk, blk[i].causal ? ", causal" : "");
        expect_close(name, blk[i].dkv_emu, blk[i].dkv_ref, &blk[i].dkv0, tol_b);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "tiles") && strcmp(argv[1], "fp32"))) {
        fprintf(stderr, "usage: %s tiles|fp32\n", argv[0]);
        return 2;
    }
    int tiles = !strcmp(argv[1], "tiles");
    for (int sched = tiles ? 1 : 0; sched <= (tiles ? 2 : 0); sched++) {
        emu_schedule = sched;
        printf("-- %s kernels, schedule %s\n", tiles ? "tile" : "fp32",
               sched == 0 ? "round-robin" : sched == 1 ? "lowest warp first" : "highest warp first");
        /*             B  Tq    C  NH full extra_tk */
        test_blocks(tiles, 2, 40, 32, 2, 1, 0);   /* hs 16, a partial tile */
        test_blocks(tiles, 1, 67, 128, 2, 1, 21); /* hs 64, two query tiles, Tk 21 */
        test_blocks(tiles, 1, 20, 64, 2, 2, 70);  /* hs 32, Tk 70: two key tiles */
        test_blocks(tiles, 1, 9, 128, 1, 1, 0);   /* hs 128 */
        test_blocks(tiles, 1, 1, 32, 2, 1, 3);    /* one query row */
        if (!tiles)
            test_blocks(tiles, 2, 7, 400, 2, 1, 5); /* hs 200: 7 channels per lane */
    }
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
