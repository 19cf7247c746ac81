/*
 * context.cu — the kernel context: stream, cuBLASLt handle, precision, and the
 * grow-only scratch buffers, the cuBLASLt workspace among them (allocated at the
 * first GEMM, so communication streams never pay for one; see cuda_kernels.h).
 */
#include <stdlib.h>
#include <string.h>

#include "kcuda_internal.cuh"

int kcuda_precision_parse(const char *name, kcuda_precision *out) {
  if (!strcmp(name, "fp32"))
    *out = KCUDA_FP32;
  else if (!strcmp(name, "tf32"))
    *out = KCUDA_TF32;
  else if (!strcmp(name, "bf16"))
    *out = KCUDA_BF16;
  else
    return -1;
  return 0;
}

const char *kcuda_precision_name(kcuda_precision p) {
  return p == KCUDA_BF16 ? "bf16" : p == KCUDA_TF32 ? "tf32" : "fp32";
}

kcuda_ctx *kcuda_ctx_create(cudaStream_t stream, kcuda_precision precision, char *err,
                            size_t errlen) {
  kcuda_ctx *k = (kcuda_ctx *)calloc(1, sizeof *k);
  if (!k) {
    snprintf(err, errlen, "out of host memory creating a kernel context");
    return NULL;
  }
  k->stream = stream;
  k->precision = precision;
  int dev = 0;
  cudaError_t ce = cudaGetDevice(&dev);
  if (ce == cudaSuccess)
    ce = cudaDeviceGetAttribute(&k->sm_count, cudaDevAttrMultiProcessorCount, dev);
  if (ce != cudaSuccess) {
    snprintf(err, errlen, "cudaDeviceGetAttribute: %s", cudaGetErrorString(ce));
    free(k);
    return NULL;
  }
  cublasStatus_t st = cublasLtCreate(&k->lt);
  if (st != CUBLAS_STATUS_SUCCESS) {
    snprintf(err, errlen, "cublasLtCreate: %s", cublasGetStatusString(st));
    free(k);
    return NULL;
  }
  return k;
}

void kcuda_ctx_destroy(kcuda_ctx *k) {
  if (!k) return;
  for (int i = 0; i < KCUDA_SCRATCH_COUNT; i++)
    if (k->scratch[i]) cudaFreeAsync(k->scratch[i], k->stream);
  for (int i = 0; i < k->nweights; i++)
    cudaFreeAsync(k->weights[i].bf16, k->stream);
  cudaStreamSynchronize(k->stream);
  cublasLtDestroy(k->lt);
  free(k);
}

cudaStream_t kcuda_stream(const kcuda_ctx *k) {
  return k->stream;
}
kcuda_precision kcuda_ctx_precision(const kcuda_ctx *k) {
  return k->precision;
}
kcuda_act_dtype kcuda_ctx_act_dtype(const kcuda_ctx *k) {
  return k->act;
}

int kcuda_ctx_set_act_dtype(kcuda_ctx *k, kcuda_act_dtype t) {
  if (t != KCUDA_ACT_F32 && t != KCUDA_ACT_BF16)
    return kcuda_fail(k, "unknown activation type %d", (int)t);
  if (t == KCUDA_ACT_BF16 && k->precision != KCUDA_BF16)
    return kcuda_fail(k, "bf16 activations need bf16 precision (this context is %s)",
                      kcuda_precision_name(k->precision));
  k->act = t;
  return 0;
}
const char *kcuda_error(const kcuda_ctx *k) {
  return k->error;
}

size_t kcuda_ctx_bytes(const kcuda_ctx *k) {
  size_t total = 0;
  for (int i = 0; i < KCUDA_SCRATCH_COUNT; i++)
    total += k->scratch_bytes[i];
  return total + k->weight_bytes;
}

void *kcuda_scratch(kcuda_ctx *k, int slot, size_t bytes) {
  if (bytes <= k->scratch_bytes[slot]) return k->scratch[slot];
  /* grow by at least 25 % so that slowly growing requests do not reallocate each time */
  size_t want = bytes + bytes / 4;
  if (k->scratch[slot]) {
    cudaFreeAsync(k->scratch[slot], k->stream);
    k->scratch[slot] = NULL;
    k->scratch_bytes[slot] = 0;
  }
  cudaError_t e = cudaMallocAsync(&k->scratch[slot], want, k->stream);
  if (e != cudaSuccess) {
    k->scratch[slot] = NULL;
    kcuda_fail(k, "cudaMallocAsync of %zu bytes of kernel scratch: %s", want,
               cudaGetErrorString(e));
    return NULL;
  }
  k->scratch_bytes[slot] = want;
  return k->scratch[slot];
}
