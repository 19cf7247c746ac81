/*
 * moe_expert_matmul.c — the experts' grouped GEMM (reference): expert e multiplies its rows
 * [offsets[e], offsets[e+1]) of the expert-grouped buffer (moe_dispatch.c) by its own weight
 * matrix, through the ordinary matmul kernel (matmul.c), one expert after the other. An
 * expert with no rows does nothing (its gradients get nothing added).
 *
 * weight [E,OC,C] (expert e's [OC,C] matrix at e*OC*C), bias [E,OC] or NULL; rows of inp are
 * C wide, rows of out OC wide.
 */
#include "cpu_kernels.h"

void cpu_moe_expert_matmul_forward(float *out, const float *inp, const float *weight,
                                   const float *bias, const int *offsets, int E, int C, int OC) {
  for (int e = 0; e < E; e++) {
    int rows = offsets[e + 1] - offsets[e];
    if (rows <= 0) continue;
    cpu_matmul_forward(out + (size_t)offsets[e] * OC, inp + (size_t)offsets[e] * C,
                       weight + (size_t)e * OC * C, bias ? bias + (size_t)e * OC : NULL, rows, C,
                       OC);
  }
}

void cpu_moe_expert_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                    const float *inp, const float *weight, const int *offsets,
                                    int E, int C, int OC) {
  for (int e = 0; e < E; e++) {
    int rows = offsets[e + 1] - offsets[e];
    if (rows <= 0) continue;
    cpu_matmul_backward(dinp ? dinp + (size_t)offsets[e] * C : NULL,
                        dweight ? dweight + (size_t)e * OC * C : NULL,
                        dbias ? dbias + (size_t)e * OC : NULL, dout + (size_t)offsets[e] * OC,
                        inp + (size_t)offsets[e] * C, weight + (size_t)e * OC * C, rows, C, OC);
  }
}
