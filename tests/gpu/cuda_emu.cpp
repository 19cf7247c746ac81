/*
 * cuda_emu.cpp — the runtime of the CPU emulation of CUDA (cuda_emu.h): the thread and
 * block indices, the block's barriers, atomicAdd, and the scheduler that runs every CUDA
 * thread of a block as a coroutine. Linked into each emulation test
 * (test_act_kernels_emu.cpp, test_attention_block_emu.cpp).
 *
 * How the scheduler works: the blocks of a grid run one after another. Inside a block,
 * each thread is a ucontext coroutine with its own stack; a thread runs until it waits at
 * a barrier (emu_barrier_wait yields back here) or finishes. emu_schedule picks the order:
 * 0 round-robin over the threads; 1 the lowest warp that can run goes on until it blocks,
 * then the next; 2 likewise from the highest warp. 1 and 2 let one warp run far ahead of
 * the others, so a missing __syncthreads shows up as a wrong result.
 */
#include <ucontext.h>

#include <vector>

#include "cuda_emu.h"

emu_dim3 threadIdx, blockIdx, gridDim, blockDim;
emu_block *emu_current;
int emu_schedule;

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
static unsigned emu_running;       /* index of the thread running now */
static std::vector<char> emu_done;
static unsigned long emu_progress; /* barriers passed and threads finished, for the scheduler */

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
                            break; /* this warp moved: let it (or the next in order) go on */
                    }
                    for (unsigned t = 0; t < n; t++)
                        left += !emu_done[t];
                }
            }
    return 0;
}
