/*
 * device.h — the small device API the trainer is written against.
 *
 * What it is for: the model, the parallel schedules and the training loop are
 * written once, above this API; a backend (CPU now, CUDA later) supplies a table
 * of operations. A backend adds operations, never control flow.
 *
 * How it works: a device owns memory ("device pointers": on the CPU backend plain
 * host memory, on CUDA cudaMalloc'd memory — the model never dereferences them on
 * the host), streams and events, with GPU semantics:
 *   - every operation is *enqueued* on a stream and runs asynchronously, in order
 *     with the other operations of that stream;
 *   - an event recorded on a stream completes when everything enqueued before it
 *     has run; `stream_wait_event` makes a stream wait for an event of another
 *     stream (that is how compute and communication streams overlap);
 *   - `stream_synchronize` blocks the host until the stream is drained and returns
 *     the stream's sticky error (the first failing operation's message).
 * On the CPU backend a stream is a worker thread that executes a queue of
 * closures; an event is a completion counter. Communication operations (comm.h)
 * are enqueued on the same streams.
 *
 * The operations mirror kernels/cpu/cpu_kernels.h (row-major, backward functions
 * ACCUMULATE into gradients). Parameters, their gradients, optimizer state, LayerNorm
 * mean/rstd, losses and the attention matrices are fp32 (`float *`). Activations and
 * activation gradients are `dev_act *`: elements of the device's activation type
 * (dev_activation_dtype: fp32, or bf16 with the math in fp32 and one rounding per
 * store; backward operations that accumulate into a bf16 gradient read it, add in
 * fp32 and store rounded). dev_act is an incomplete type, so activations cannot be
 * indexed by mistake as floats: offsets go through dev_act_at().
 */
#ifndef STEPSCOPE_TRAINER_DEVICE_H
#define STEPSCOPE_TRAINER_DEVICE_H

#include <stddef.h>
#include <stdint.h>

typedef struct dev_device dev_device;
typedef struct dev_stream dev_stream;
typedef struct dev_event dev_event;

/* Element types of activation storage. */
typedef enum dev_dtype { DEV_F32 = 0, DEV_BF16 = 1 } dev_dtype;
/* Activation storage: elements of the device's activation type (never dereferenced). */
typedef struct dev_act dev_act;
/* bf16 weight storage (a GEMM's working copy of fp32 master weights; never dereferenced). */
typedef struct dev_bf16 dev_bf16;

static inline size_t dev_dtype_bytes(dev_dtype t) {
  return t == DEV_BF16 ? 2 : 4;
}
static inline const char *dev_dtype_name(dev_dtype t) {
  return t == DEV_BF16 ? "bf16" : "fp32";
}
/* The activation `elems` elements of type t past p. */
static inline dev_act *dev_act_at(const dev_act *p, dev_dtype t, size_t elems) {
  return (dev_act *)((char *)(uintptr_t)p + elems * dev_dtype_bytes(t));
}

struct comm_dev_ops; /* comm.h: a backend's own communicator library */

typedef struct dev_ops {
  const char *backend_name; /* "cpu", "cuda" */

  /* --- the device (reached through the dev_* functions below) --------------- */
  void (*close)(dev_device *d);
  const char *(*name)(const dev_device *d);
  const char *(*last_error)(const dev_device *d);
  void (*trace_started)(dev_device *d);
  void (*set_progress_hook)(dev_device *d, void (*hook)(void *arg), void *arg);
  size_t (*bytes_in_use)(const dev_device *d);
  size_t (*bytes_peak)(const dev_device *d);
  void (*abort)(dev_device *d, const char *why);
  /* The activation type (DEV_F32 until set). Set it once, before any activation is
   * allocated or any operation enqueued: 0, or -1 with a message when the backend (or
   * its precision) cannot store activations in that type. */
  int (*set_activation_dtype)(dev_device *d, dev_dtype t, char *err, size_t errlen);
  dev_dtype (*activation_dtype)(const dev_device *d);
  /* Optional (NULL: DEV_F32): the activation type --activations auto asks for, bf16 where
   * the device computes its GEMMs in bf16 anyway (CUDA in bf16 precision). */
  dev_dtype (*auto_activation_dtype)(const dev_device *d);
  /* Optional (NULL: the generic answer of dev_peak_flops / dev_measured_peak below). The
   * device's dense peak FLOP/s for MFU; its measured peak memory, *source (if not NULL)
   * naming what was measured for the run metadata. */
  double (*peak_flops)(const dev_device *d);
  size_t (*measured_peak)(const dev_device *d, const char **source);
  /* Optional (NULL: never): whether attention of this shape (B sequences of T, per TP rank:
   * C its width, NH its heads) runs fused flash-style kernels. Those save each row's
   * log-sum-exp and output in `att` (B x NH x T x (1 + C/NH) floats) instead of the T x T
   * probabilities, and use no preatt, dpreatt or datt: the model allocates no T x T buffer. */
  int (*attention_fused)(const dev_device *d, int B, int T, int C, int NH);
  /* Optional: the communicator library this backend's devices need (CUDA: NCCL; comm.h's
   * comm_dev_job_open opens it). NULL: the shared-memory communicator serves the device. */
  const struct comm_dev_ops *comm;

  /* --- memory ------------------------------------------------------------ */
  void *(*alloc)(dev_device *d, size_t bytes); /* zeroed; NULL on failure */
  void (*free)(dev_device *d, void *p);

  /* --- streams and events -------------------------------------------------- */
  dev_stream *(*stream_create)(dev_device *d, const char *name); /* NULL on failure */
  void (*stream_destroy)(dev_stream *s);                         /* drains first */
  int (*stream_synchronize)(dev_stream *s); /* 0, or -1 with dev_last_error() */
  dev_event *(*event_create)(dev_device *d);
  void (*event_destroy)(dev_event *e);
  void (*event_record)(dev_event *e, dev_stream *s);
  void (*stream_wait_event)(dev_stream *s, dev_event *e);

  /* --- copies ------------------------------------------------------------- */
  void (*copy_to_device)(dev_stream *s, void *dst, const void *host_src, size_t bytes);
  void (*copy_to_host)(dev_stream *s, void *host_dst, const void *src, size_t bytes);
  void (*copy)(dev_stream *s, void *dst, const void *src, size_t bytes);
  void (*zero)(dev_stream *s, void *dst, size_t bytes);
  /* rows x width_bytes from src (rows src_pitch bytes apart) to dst (dst_pitch apart),
   * like cudaMemcpy2DAsync: packs the k|v columns of qkv for ring attention. Optional
   * (NULL: context parallelism is unavailable on this backend). */
  void (*copy_2d)(dev_stream *s, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                  size_t width_bytes, size_t rows);

  /* --- model operations (see kernels/cpu/cpu_kernels.h for the math) -------- */
  void (*encoder_forward)(dev_stream *s, dev_act *out, const int *tokens, const float *wte,
                          const float *wpe, int B, int T, int C);
  void (*encoder_backward)(dev_stream *s, float *dwte, float *dwpe, const dev_act *dout,
                           const int *tokens, int B, int T, int C);
  void (*layernorm_forward)(dev_stream *s, dev_act *out, float *mean, float *rstd,
                            const dev_act *inp, const float *weight, const float *bias, int N,
                            int C);
  void (*layernorm_backward)(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                             const dev_act *dout, const dev_act *inp, const float *weight,
                             const float *mean, const float *rstd, int N, int C);
  void (*matmul_forward)(dev_stream *s, dev_act *out, const dev_act *inp, const float *weight,
                         const float *bias, int N, int C, int OC);
  void (*matmul_backward)(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                          const dev_act *dout, const dev_act *inp, const float *weight, int N,
                          int C, int OC);
  /* The same GEMMs reading a bf16 weight (a working copy: cast_bf16 of the fp32 master). The
   * math is the fp32 operation's on the weight's widened values (the CPU backend stages the
   * weight as it stages bf16 activations; CUDA in bf16 precision hands it to cuBLASLt as is).
   * dweight stays fp32. Optional (NULL: the backend has no bf16 weights). */
  void (*matmul_forward_bf16w)(dev_stream *s, dev_act *out, const dev_act *inp,
                               const dev_bf16 *weight, const float *bias, int N, int C, int OC);
  void (*matmul_backward_bf16w)(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                const dev_act *dout, const dev_act *inp, const dev_bf16 *weight,
                                int N, int C, int OC);
  /* dst[i] = bf16(src[i]) for n values, rounded to nearest even (optional with the above) */
  void (*cast_bf16)(dev_stream *s, dev_bf16 *dst, const float *src, size_t n);
  void (*attention_forward)(dev_stream *s, dev_act *out, float *preatt, float *att,
                            const dev_act *qkv, int B, int T, int C, int NH);
  void (*attention_backward)(dev_stream *s, dev_act *dqkv, float *dpreatt, float *datt,
                             const dev_act *dout, const dev_act *qkv, const float *att, int B,
                             int T, int C, int NH);
  /* Ring attention (context parallelism; cpu_attention_block_* in kernels/cpu/cpu_kernels.h
   * is the math and the layouts): one block of queries against one block of keys and
   * values, merged into the running out [B,Tq,C] / lse [B,NH,Tq] by log-sum-exp; the
   * backward takes the final out and lse and ACCUMULATES into dq and dkv. q rows are
   * q_stride elements apart, kv rows kv_stride apart with v at +C (the same for dq, dkv).
   * causal: a diagonal block (Tq == Tk, query t sees keys <= t). Optional: a backend
   * without them (NULL) cannot run --cp > 1, and the configuration is refused. */
  void (*attention_block_forward)(dev_stream *s, dev_act *out, float *lse, const dev_act *q,
                                  int q_stride, const dev_act *kv, int kv_stride, int B, int Tq,
                                  int Tk, int C, int NH, int causal);
  void (*attention_block_backward)(dev_stream *s, dev_act *dq, int dq_stride, dev_act *dkv,
                                   int dkv_stride, const dev_act *dout, const dev_act *out,
                                   const float *lse, const dev_act *q, int q_stride,
                                   const dev_act *kv, int kv_stride, int B, int Tq, int Tk, int C,
                                   int NH, int causal);
  /* Mixture of experts (cpu_moe_* in kernels/cpu/cpu_kernels.h is the math and the layouts).
   * Optional: a backend without them (NULL) cannot run experts. What depends on the
   * routing is read on the device when the operation runs, never on the host: the number
   * of rows R of the expert-grouped buffers is offsets[E] of the dispatch plan (offsets
   * [E+1]); those buffers are allocated for the dropless bound N x K rows (the staging
   * of bf16 activations covers that many; rows past R are left as they were). Integer
   * buffers (expert [N,K], counts [E], offsets, row_token [N K], row_of [N,K]) and the
   * router's probs [N,E] and gate [N,K] are device allocations in fp32 / int. */
  void (*moe_router_forward)(dev_stream *s, int *expert, float *gate, float *probs,
                             const dev_act *logits, int N, int E, int K, int renorm);
  /* counts: [E] scratch (the routing decisions per expert are recounted) */
  void (*moe_router_backward)(dev_stream *s, dev_act *dlogits, const float *dgate,
                              const float *probs, const int *expert, int *counts, int N, int E,
                              int K, int renorm, float aux_scale);
  /* *acc (a device double) += the load-balancing loss; counts: [E] scratch */
  void (*moe_aux_loss_accumulate)(dev_stream *s, double *acc, const float *probs, const int *expert,
                                  int *counts, int N, int E, int K);
  /* *dropped_acc (a device int) += the assignments dropped by the capacity (< 0: none) */
  void (*moe_dispatch_plan)(dev_stream *s, int *counts, int *offsets, int *row_token, int *row_of,
                            int *dropped_acc, const int *expert, int N, int E, int K, int capacity);
  void (*moe_permute_forward)(dev_stream *s, dev_act *xp, const dev_act *x, const int *row_token,
                              const int *offsets, int N, int E, int K, int C);
  void (*moe_permute_backward)(dev_stream *s, dev_act *dx, const dev_act *dxp, const int *row_token,
                               const int *offsets, int N, int E, int K, int C);
  void (*moe_unpermute_forward)(dev_stream *s, dev_act *out, const dev_act *yp, const float *gate,
                                const int *row_of, int N, int K, int C);
  void (*moe_unpermute_backward)(dev_stream *s, dev_act *dyp, float *dgate, const dev_act *dout,
                                 const dev_act *yp, const float *gate, const int *row_of, int N,
                                 int K, int C);
  /* the experts' grouped GEMM over Rmax = N x K rows at most: weight [E,OC,C], bias [E,OC] */
  void (*moe_expert_matmul_forward)(dev_stream *s, dev_act *out, const dev_act *inp,
                                    const float *weight, const float *bias, const int *offsets,
                                    int Rmax, int E, int C, int OC);
  void (*moe_expert_matmul_backward)(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                     const dev_act *dout, const dev_act *inp, const float *weight,
                                     const int *offsets, int Rmax, int E, int C, int OC);
  void (*gelu_forward)(dev_stream *s, dev_act *out, const dev_act *inp, int N);
  void (*gelu_backward)(dev_stream *s, dev_act *dinp, const dev_act *inp, const dev_act *dout,
                        int N);
  void (*residual_forward)(dev_stream *s, dev_act *out, const dev_act *a, const dev_act *b, int N);
  void (*residual_backward)(dev_stream *s, dev_act *da, dev_act *db, const dev_act *dout, int N);
  void (*crossentropy_forward)(dev_stream *s, float *losses, dev_act *probs, const dev_act *logits,
                               const int *targets, int N, int V, int Vp);
  void (*crossentropy_backward)(dev_stream *s, dev_act *dlogits, const float *dlosses,
                                const dev_act *probs, const int *targets, int N, int V, int Vp);
  /* fills n floats with one value */
  void (*fill)(dev_stream *s, float *x, float value, size_t n);
  /* *acc (a device double) += sum(losses[0..n)) — loss bookkeeping without a host sync */
  void (*sum_accumulate)(dev_stream *s, double *acc, const float *x, size_t n);
  /* *acc (a device double) += sum(x^2) — for the global gradient norm */
  void (*sum_squares_accumulate)(dev_stream *s, double *acc, const float *x, size_t n);
  void (*scale)(dev_stream *s, float *x, float factor, size_t n);
  /* dst[i] += src[i] for n floats (fp32 buffers such as ZeRO gradient shards) */
  void (*add)(dev_stream *s, float *dst, const float *src, size_t n);
  void (*adamw)(dev_stream *s, float *params, const float *grads, float *m, float *v, size_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay, int t);
} dev_ops;

/* Every backend's device object begins with this header, so that the generic
 * dev_* functions (device.c) can find its operations. */
typedef struct dev_device_header {
  const dev_ops *ops;
} dev_device_header;

/* The operation table of a backend by name ("cpu", "cuda"), without opening a
 * device (for configuration checks); NULL when that backend is not built in. */
const dev_ops *dev_backend_ops(const char *backend);
/* Whether a backend has the operations context parallelism (--cp > 1) needs;
 * when not, *missing names the first one that is NULL. */
int dev_ops_support_cp(const dev_ops *ops, const char **missing);

/* Creates a device of the named backend: "cpu", "cuda" (when built), or
 * "auto" (cuda when built and a GPU is present, else cpu). NULL with a message
 * in err on failure (e.g. "the CUDA backend is not built into this binary"). */
dev_device *dev_open(const char *backend, char *err, size_t errlen);
void dev_close(dev_device *d);
const dev_ops *dev_get_ops(const dev_device *d);
const char *dev_name(const dev_device *d);       /* "cpu" or the GPU's name */
const char *dev_last_error(const dev_device *d); /* first stream error, "" if none */
/* Called after a trace starts so that the device declares its streams. */
void dev_trace_started(dev_device *d);
/* A function called (on a worker thread) after each completed operation; the
 * trainer uses it for the launcher's heartbeat. */
void dev_set_progress_hook(dev_device *d, void (*hook)(void *arg), void *arg);
/* Bytes of device memory allocated now and at most. */
size_t dev_bytes_in_use(const dev_device *d);
size_t dev_bytes_peak(const dev_device *d);
/* Makes every blocked wait of this device fail (used when a peer rank aborts). */
void dev_abort(dev_device *d, const char *why);
/* The activation type --activations auto asks for (dev_ops.auto_activation_dtype; DEV_F32
 * when the backend does not say). */
dev_dtype dev_auto_activation_dtype(const dev_device *d);
/* The device's dense peak FLOP/s (dev_ops.peak_flops), 0 when the backend does not say. */
double dev_peak_flops(const dev_device *d);
/* The device's measured peak memory (dev_ops.measured_peak); without that operation, the
 * device API's own peak of live allocations (dev_bytes_peak), *source "device-allocations". */
size_t dev_measured_peak(const dev_device *d, const char **source);
/* Whether attention of this shape runs fused kernels without T x T buffers
 * (dev_ops.attention_fused; 0 without that operation). */
int dev_attention_fused(const dev_device *d, int B, int T, int C, int NH);
/* The device's activation type, and setting it (see dev_ops.set_activation_dtype). */
dev_dtype dev_activation_dtype(const dev_device *d);
int dev_set_activation_dtype(dev_device *d, dev_dtype t, char *err, size_t errlen);

/* The CPU backend's constructor (device_cpu.c). A CUDA backend adds
 * dev_cuda_open (device_cuda.c) and a case in dev_open (device.c). */
dev_device *dev_cpu_open(char *err, size_t errlen);
const dev_ops *dev_cpu_ops(void);

#endif /* STEPSCOPE_TRAINER_DEVICE_H */
