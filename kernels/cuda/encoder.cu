/*
 * encoder.cu — token + position embedding, forward and backward (host side; the kernels
 * are in act_kernels.cuh, templated on the activation storage type).
 *
 * Forward: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] (fp32 parameters, out in the
 * context's activation type, rounded once), coalesced along C, 16 bytes of out per thread
 * when C and the pointers allow it.
 * Backward: dwpe[t,:] += sum over b of dout[b,t,:] — one thread per (t,c) sums the
 * B rows in order (deterministic); dwte[tok,:] += dout[b,t,:] — tokens repeat, so
 * rows of dwte receive several contributions; they are added with atomicAdd (the
 * summation order, and so the last bits, can vary from run to run). dwte/dwpe are fp32.
 */
#include "kcuda_internal.cuh"

#include "act_kernels.cuh"

template <class T>
static int encoder_forward(kcuda_ctx *k, T *out, const int *tokens, const float *wte,
                           const float *wpe, int B, int T_, int C) {
  size_t n = (size_t)B * T_ * C, w = (size_t)act_width<T>::value;
  encoder_forward_kernel<T><<<kcuda_grid_for(k, (n + w - 1) / w, 256), 256, 0, k->stream>>>(
      out, tokens, wte, wpe, B, T_, C);
  return kcuda_check_launch(k, "encoder_forward");
}

template <class T>
static int encoder_backward(kcuda_ctx *k, float *dwte, float *dwpe, const T *dout,
                            const int *tokens, int B, int T_, int C) {
  size_t n = (size_t)B * T_ * C;
  encoder_backward_wpe_kernel<T>
      <<<kcuda_grid_for(k, (size_t)T_ * C, 256), 256, 0, k->stream>>>(dwpe, dout, B, T_, C);
  if (kcuda_check_launch(k, "encoder_backward (wpe)") != 0) return -1;
  encoder_backward_wte_kernel<T>
      <<<kcuda_grid_for(k, n, 256), 256, 0, k->stream>>>(dwte, dout, tokens, B, T_, C);
  return kcuda_check_launch(k, "encoder_backward (wte)");
}

int kcuda_encoder_forward(kcuda_ctx *k, void *out, const int *tokens, const float *wte,
                          const float *wpe, int B, int T, int C) {
  if ((size_t)B * T * C == 0) return 0;
  int rc;
  KCUDA_WITH_ACT(k, rc = encoder_forward<ACT>(k, (ACT *)out, tokens, wte, wpe, B, T, C));
  return rc;
}

int kcuda_encoder_backward(kcuda_ctx *k, float *dwte, float *dwpe, const void *dout,
                           const int *tokens, int B, int T, int C) {
  if ((size_t)B * T * C == 0) return 0;
  int rc;
  KCUDA_WITH_ACT(k, rc = encoder_backward<ACT>(k, dwte, dwpe, (const ACT *)dout, tokens, B, T, C));
  return rc;
}
