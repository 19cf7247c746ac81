/*
 * cast.cu — fp32 <-> bf16 conversions (round to nearest even, NaN preserved), used
 * for the bf16 operand copies of the GEMMs and available to the device layer.
 */
#include "kcuda_internal.cuh"

__global__ void f32_to_bf16_kernel(__nv_bfloat16 *dst, const float *src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void bf16_to_f32_kernel(float *dst, const __nv_bfloat16 *src, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = __bfloat162float(src[i]);
}

int kcuda_cast_f32_to_bf16(kcuda_ctx *k, void *dst, const float *src, size_t n) {
  if (n == 0) return 0;
  f32_to_bf16_kernel<<<kcuda_grid_for(k, n, 256), 256, 0, k->stream>>>((__nv_bfloat16 *)dst, src,
                                                                       n);
  return kcuda_check_launch(k, "cast fp32 -> bf16");
}

int kcuda_cast_bf16_to_f32(kcuda_ctx *k, float *dst, const void *src, size_t n) {
  if (n == 0) return 0;
  bf16_to_f32_kernel<<<kcuda_grid_for(k, n, 256), 256, 0, k->stream>>>(
      dst, (const __nv_bfloat16 *)src, n);
  return kcuda_check_launch(k, "cast bf16 -> fp32");
}
