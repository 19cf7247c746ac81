/*
 * reduce.cu — fill, scale, and the sums the trainer accumulates into device
 * doubles without a host round trip (the step's loss, the squared gradient norm).
 *
 * The sums are deterministic: pass 1 runs a fixed grid (independent of timing),
 * each block summing a fixed set of elements in double and writing one partial;
 * pass 2, a single block, adds the partials in index order and adds the result to
 * *acc. The same input gives the same bits on every run and every rank.
 */
#include "kcuda_internal.cuh"

#define RED_BLOCK 256
#define RED_GRID  512

__global__ void fill_kernel(float *x, float value, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    x[i] = value;
}

__global__ void scale_kernel(float *x, float factor, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    x[i] *= factor;
}

template <int SQUARES>
__global__ void partial_sum_kernel(double *partials, const float *x, size_t n) {
  __shared__ double shared[32];
  double s = 0.0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    double v = x[i];
    s += SQUARES ? v * v : v;
  }
  s = kcuda_block_sum_d(s, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void final_sum_kernel(double *acc, const double *partials, int n) {
  __shared__ double shared[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    s += partials[i];
  s = kcuda_block_sum_d(s, shared);
  if (threadIdx.x == 0) *acc += s;
}

int kcuda_fill(kcuda_ctx *k, float *x, float value, size_t n) {
  if (n == 0) return 0;
  fill_kernel<<<kcuda_grid_for(k, n, 256), 256, 0, k->stream>>>(x, value, n);
  return kcuda_check_launch(k, "fill");
}

int kcuda_scale(kcuda_ctx *k, float *x, float factor, size_t n) {
  if (n == 0) return 0;
  scale_kernel<<<kcuda_grid_for(k, n, 256), 256, 0, k->stream>>>(x, factor, n);
  return kcuda_check_launch(k, "scale");
}

static int sum_into(kcuda_ctx *k, double *acc, const float *x, size_t n, int squares) {
  if (n == 0) return 0;
  double *partials = (double *)kcuda_scratch(k, KCUDA_SCRATCH_REDUCE, RED_GRID * sizeof(double));
  if (!partials) return -1;
  if (squares)
    partial_sum_kernel<1><<<RED_GRID, RED_BLOCK, 0, k->stream>>>(partials, x, n);
  else
    partial_sum_kernel<0><<<RED_GRID, RED_BLOCK, 0, k->stream>>>(partials, x, n);
  if (kcuda_check_launch(k, squares ? "sum_squares (partials)" : "sum (partials)") != 0) return -1;
  final_sum_kernel<<<1, RED_BLOCK, 0, k->stream>>>(acc, partials, RED_GRID);
  return kcuda_check_launch(k, squares ? "sum_squares (final)" : "sum (final)");
}

int kcuda_sum_accumulate(kcuda_ctx *k, double *acc, const float *x, size_t n) {
  return sum_into(k, acc, x, n, 0);
}

int kcuda_sum_squares_accumulate(kcuda_ctx *k, double *acc, const float *x, size_t n) {
  return sum_into(k, acc, x, n, 1);
}
