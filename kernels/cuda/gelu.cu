/*
 * gelu.cu — GELU (tanh approximation), forward and backward, element-wise (host side; the
 * kernels are in act_kernels.cuh, templated on the activation storage type).
 *
 *     gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *     gelu'(x) = 0.5 (1 + tanh u) + 0.5 x sech^2(u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 * Computed in fp32; backward accumulates into dinp (read, add in fp32, store rounded).
 * kernels/cpu/gelu.c is the specification.
 */
#include "kcuda_internal.cuh"

#include "act_kernels.cuh"

template <class T> static unsigned gelu_grid(const kcuda_ctx *k, size_t n) {
  size_t w = (size_t)act_width<T>::value;
  return kcuda_grid_for(k, (n + w - 1) / w, 256);
}

template <class T> static int gelu_forward(kcuda_ctx *k, T *out, const T *inp, size_t n) {
  gelu_forward_kernel<T><<<gelu_grid<T>(k, n), 256, 0, k->stream>>>(out, inp, n);
  return kcuda_check_launch(k, "gelu_forward");
}

template <class T>
static int gelu_backward(kcuda_ctx *k, T *dinp, const T *inp, const T *dout, size_t n) {
  gelu_backward_kernel<T><<<gelu_grid<T>(k, n), 256, 0, k->stream>>>(dinp, inp, dout, n);
  return kcuda_check_launch(k, "gelu_backward");
}

int kcuda_gelu_forward(kcuda_ctx *k, void *out, const void *inp, size_t N) {
  if (N == 0) return 0;
  int rc;
  KCUDA_WITH_ACT(k, rc = gelu_forward<ACT>(k, (ACT *)out, (const ACT *)inp, N));
  return rc;
}

int kcuda_gelu_backward(kcuda_ctx *k, void *dinp, const void *inp, const void *dout, size_t N) {
  if (N == 0) return 0;
  int rc;
  KCUDA_WITH_ACT(k,
                 rc = gelu_backward<ACT>(k, (ACT *)dinp, (const ACT *)inp, (const ACT *)dout, N));
  return rc;
}
