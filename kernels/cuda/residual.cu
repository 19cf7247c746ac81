/*
 * residual.cu — the residual add, forward (out = a + b) and backward (da += dout,
 * db += dout), element-wise in fp32 with activations stored in the context's type (host
 * side; the kernels are in act_kernels.cuh). The fused residual + LayerNorm lives in
 * layernorm.cu.
 */
#include "kcuda_internal.cuh"

#include "act_kernels.cuh"

template <class T> static unsigned residual_grid(const kcuda_ctx *k, size_t n) {
  size_t w = (size_t)act_width<T>::value;
  return kcuda_grid_for(k, (n + w - 1) / w, 256);
}

template <class T>
static int residual_forward(kcuda_ctx *k, T *out, const T *a, const T *b, size_t n) {
  residual_forward_kernel<T><<<residual_grid<T>(k, n), 256, 0, k->stream>>>(out, a, b, n);
  return kcuda_check_launch(k, "residual_forward");
}

template <class T>
static int residual_backward(kcuda_ctx *k, T *da, T *db, const T *dout, size_t n) {
  residual_backward_kernel<T><<<residual_grid<T>(k, n), 256, 0, k->stream>>>(da, db, dout, n);
  return kcuda_check_launch(k, "residual_backward");
}

int kcuda_residual_forward(kcuda_ctx *k, void *out, const void *a, const void *b, size_t N) {
  if (N == 0) return 0;
  int rc;
  KCUDA_WITH_ACT(k, rc = residual_forward<ACT>(k, (ACT *)out, (const ACT *)a, (const ACT *)b, N));
  return rc;
}

int kcuda_residual_backward(kcuda_ctx *k, void *da, void *db, const void *dout, size_t N) {
  if (N == 0) return 0;
  int rc;
  KCUDA_WITH_ACT(k, rc = residual_backward<ACT>(k, (ACT *)da, (ACT *)db, (const ACT *)dout, N));
  return rc;
}
