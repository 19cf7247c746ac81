/*
 * add.cu — dst += src over fp32 buffers: the trainer's ZeRO-2/3 adds each reduce-
 * scattered gradient piece into its fp32 gradient shard with it (the residual add
 * works on activations, whose storage may be bf16).
 */
#include "kcuda_internal.cuh"

__global__ void add_f32_kernel(float *dst, const float *src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] += src[i];
}

int kcuda_add_f32(kcuda_ctx *k, float *dst, const float *src, size_t n) {
  if (n == 0) return 0;
  add_f32_kernel<<<kcuda_grid_for(k, n, 256), 256, 0, k->stream>>>(dst, src, n);
  return kcuda_check_launch(k, "add fp32");
}
