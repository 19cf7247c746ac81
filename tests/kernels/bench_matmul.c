/*
 * bench_matmul.c — opt-in benchmark of the CPU matmul kernels (not a test; build the
 * target bench_kernels_matmul and run it by hand). For a few GPT shapes it times
 * cpu_matmul_forward and cpu_matmul_backward and a naive triple loop, and prints
 * GFLOP/s (2*N*C*OC flops forward, 4*N*C*OC backward for dinp + dweight).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_kernels.h"
#include "kernel_check.h"

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void naive_forward(float *out, const float *inp, const float *weight, int N, int C, int OC) {
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      float s = 0.0f;
      for (int c = 0; c < C; c++)
        s += inp[(size_t)n * C + c] * weight[(size_t)o * C + c];
      out[(size_t)n * OC + o] = s;
    }
}

int main(void) {
  const int shapes[][3] = {{256, 64, 192},   {256, 64, 256},   {256, 256, 64},
                           {512, 768, 2304}, {512, 768, 3072}, {512, 3072, 768}};
  check_rng rng;
  check_rng_seed(&rng, 1);
  printf("%-18s %12s %12s %12s\n", "N x C x OC", "fwd GF/s", "bwd GF/s", "naive GF/s");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
    float *inp = check_floats((size_t)N * C), *w = check_floats((size_t)OC * C),
          *b = check_floats(OC);
    float *out = check_floats((size_t)N * OC), *dinp = check_floats((size_t)N * C),
          *dw = check_floats((size_t)OC * C);
    check_fill_uniform(inp, (size_t)N * C, &rng, -1, 1);
    check_fill_uniform(w, (size_t)OC * C, &rng, -1, 1);
    double flops = 2.0 * N * C * OC;
    int reps = (int)(2e9 / flops) + 1;
    double t0 = now_seconds();
    for (int r = 0; r < reps; r++)
      cpu_matmul_forward(out, inp, w, b, N, C, OC);
    double fwd = flops * reps / (now_seconds() - t0) / 1e9;
    t0 = now_seconds();
    for (int r = 0; r < reps; r++)
      cpu_matmul_backward(dinp, dw, b, out, inp, w, N, C, OC);
    double bwd = 2 * flops * reps / (now_seconds() - t0) / 1e9;
    int naive_reps = reps / 4 + 1;
    t0 = now_seconds();
    for (int r = 0; r < naive_reps; r++)
      naive_forward(out, inp, w, N, C, OC);
    double naive = flops * naive_reps / (now_seconds() - t0) / 1e9;
    printf("%5d x %4d x %4d %12.2f %12.2f %12.2f\n", N, C, OC, fwd, bwd, naive);
    free(inp), free(w), free(b), free(out), free(dinp), free(dw);
  }
  return 0;
}
