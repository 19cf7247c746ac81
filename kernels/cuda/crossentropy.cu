/*
 * crossentropy.cu — fused softmax + cross-entropy over the vocabulary, forward and
 * backward (host side; the kernels are in act_kernels.cuh, templated on the activation
 * storage type). kernels/cpu/crossentropy.c is the specification.
 *
 * Types: logits, probs and dlogits are activations (the context's type); losses and
 * dlosses are fp32; everything is computed in fp32.
 * Forward: one block per row of logits [N,Vp]; only the first V columns are real.
 * Pass 1 finds the row maximum, pass 2 sums exp(z - max), pass 3 writes
 * p = exp(z - max) / sum (rounded once) and zeroes the padded columns.
 * loss = log(sum) + max - z[target] (from the log-sum-exp, finite even when
 * p[target] underflows).
 * Backward: one block per row, dlogits[i,v] += (p[i,v] - [v == target_i]) * dlosses[i]
 * over the real columns (read, add in fp32, store rounded); padded columns are not
 * touched.
 */
#include "kcuda_internal.cuh"

#include "act_kernels.cuh"

#define CE_BLOCK          512
#define CE_BACKWARD_BLOCK 256

template <class T>
static int ce_forward(kcuda_ctx *k, float *losses, T *probs, const T *logits, const int *targets,
                      int N, int V, int Vp) {
  crossentropy_forward_kernel<T>
      <<<N, CE_BLOCK, 0, k->stream>>>(losses, probs, logits, targets, V, Vp);
  return kcuda_check_launch(k, "crossentropy_forward");
}

template <class T>
static int ce_backward(kcuda_ctx *k, T *dlogits, const float *dlosses, const T *probs,
                       const int *targets, int N, int V, int Vp) {
  crossentropy_backward_kernel<T>
      <<<N, CE_BACKWARD_BLOCK, 0, k->stream>>>(dlogits, dlosses, probs, targets, V, Vp);
  return kcuda_check_launch(k, "crossentropy_backward");
}

int kcuda_crossentropy_forward(kcuda_ctx *k, float *losses, void *probs, const void *logits,
                               const int *targets, int N, int V, int Vp) {
  if (N <= 0) return 0;
  int rc;
  KCUDA_WITH_ACT(
      k, rc = ce_forward<ACT>(k, losses, (ACT *)probs, (const ACT *)logits, targets, N, V, Vp));
  return rc;
}

int kcuda_crossentropy_backward(kcuda_ctx *k, void *dlogits, const float *dlosses,
                                const void *probs, const int *targets, int N, int V, int Vp) {
  if (N <= 0) return 0;
  int rc;
  KCUDA_WITH_ACT(
      k, rc = ce_backward<ACT>(k, (ACT *)dlogits, dlosses, (const ACT *)probs, targets, N, V, Vp));
  return rc;
}
