/*
 * device_cuda.c — the CUDA backend of the device API (device.h).
 *
 * How it works:
 *   - Memory is cudaMalloc'd (zeroed before it is handed out); the device counts
 *     the bytes it handed out and their peak, and samples the driver's view
 *     (cudaMemGetInfo) at every synchronization for the measured peak.
 *   - A stream is a non-blocking CUDA stream with its own kernel context
 *     (kernels/cuda: cuBLASLt handle, workspace, scratch); streams whose name
 *     starts with "comm" get the highest priority. An event is a CUDA event
 *     without timing; event_record / stream_wait_event are cudaEventRecord /
 *     cudaStreamWaitEvent, so compute and communication streams overlap for real.
 *   - Model operations call the kernels of kernels/cuda on the stream's context.
 *     A failure (a launch error, a cuBLASLt status) makes the device failed with
 *     the first message, like the CPU backend's sticky stream errors: later
 *     operations are skipped and stream_synchronize returns -1.
 *   - Small copies between host and device (the micro-batch's tokens, the step's
 *     loss and norm) go through a ring of pinned slots, so they are asynchronous
 *     like on the CPU backend: the host runs ahead of the GPU, and a copy back to
 *     the host completes (a host function moves the bytes) in stream order. Large
 *     copies (initial weights) use pageable memory and the driver's own staging.
 *   - stream_synchronize polls the stream instead of blocking in the driver, so
 *     that registered wait checks (the NCCL watchdog) run while it waits.
 *   - Attention: batched GEMMs + softmax (attention.cu), or with
 *     STEPSCOPE_CUDA_ATTENTION=fused the flash-style kernels (flash_attention.cu) for
 *     the shapes they support; the device falls back to the GEMM path otherwise.
 *     Context parallelism's ring attention uses copy_2d (cudaMemcpy2DAsync) and the
 *     attention block kernels (attention_block.cu).
 *   - Mixture of experts: the router, dispatch plan, permutations and grouped expert GEMM
 *     of moe.cu, which read the routing-dependent sizes on the GPU (the host never waits
 *     for the router).
 *   - bf16 weight copies: every operation reports where it writes (wrote()), the
 *     NCCL communicator likewise (dev_cuda_note_write); a write into an allocation
 *     that holds GEMM weights bumps the weights version (weight_watch.h), and the
 *     kernels recast a weight's cached bf16 copy at its first use after that — in
 *     practice once per optimizer step instead of at every GEMM.
 * Tracing: kernels, copies and NCCL are seen by the GPU tracer (CUPTI, NVTX, the
 * NCCL profiler plugin); the device only names its streams in the trace.
 */
#include "device_cuda.h"
#ifdef STEPSCOPE_TRAINER_GPU_TRACE
#include "stepscope_gpu.h"
#endif

#include <cuda_runtime.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_nccl.h"
#include "cuda_kernels.h"
#include "stepscope.h"
#include "weight_watch.h"

#define CUDA_MAX_STREAMS   16
#define STAGING_SLOTS      16
#define STAGING_SLOT_BYTES (1u << 20)
#define MAX_WAIT_CHECKS    8

typedef struct allocation {
  void *p;
  size_t bytes;
} allocation;

typedef struct staging_slot {
  void *host;         /* pinned */
  cudaEvent_t copied; /* recorded after the last use of the slot on its stream */
  int used;
  void *user_dst; /* device-to-host: where the host function copies the bytes */
  size_t bytes;
} staging_slot;

struct dev_device {
  dev_device_header header; /* first: the generic dev_* functions find the table here */
  int ordinal;
  char name[256];
  kcuda_precision precision;
  dev_dtype act; /* activation storage; bf16 needs bf16 precision */
  atomic_int failed;
  char error[512];
  size_t in_use, peak;
  allocation *allocs;
  size_t nallocs, cap_allocs;
  size_t baseline_used, measured_peak;
  int shared_by; /* ranks of this machine per visible GPU (> 1: the GPU is shared) */
  dev_stream *streams[CUDA_MAX_STREAMS];
  int nstreams;
  staging_slot staging[STAGING_SLOTS];
  int next_staging;
  cudaStream_t alloc_stream; /* zeroes new allocations (waited for alone) */
  void (*hook)(void *);
  void *hook_arg;
  dev_cuda_wait_check checks[MAX_WAIT_CHECKS];
  void *check_args[MAX_WAIT_CHECKS];
  weight_watch watch;  /* when the kernels' bf16 weight copies go stale (weight_watch.h) */
  int fused_attention; /* STEPSCOPE_CUDA_ATTENTION=fused: flash_attention.cu where it fits */
};

struct dev_stream {
  dev_device *d;
  cudaStream_t s;
  kcuda_ctx *k;
  char name[64];
  uint64_t trace_id;
};

struct dev_event {
  dev_device *d;
  cudaEvent_t e;
};

static const dev_ops cuda_ops;
static void dev_cuda_close(dev_device *d);
static const char *dev_cuda_name(const dev_device *d);
static const char *dev_cuda_last_error(const dev_device *d);
static void dev_cuda_trace_started(dev_device *d);
static void dev_cuda_set_progress_hook(dev_device *d, void (*hook)(void *), void *arg);
static size_t dev_cuda_bytes_in_use(const dev_device *d);
static size_t dev_cuda_bytes_peak(const dev_device *d);
static void dev_cuda_abort(dev_device *d, const char *why);

/* ---- errors ---------------------------------------------------------------------- */

void dev_cuda_fail(dev_device *d, const char *msg) {
  if (atomic_exchange(&d->failed, 1) == 0) snprintf(d->error, sizeof d->error, "%s", msg);
}

static void dev_cuda_abort(dev_device *d, const char *why) {
  dev_cuda_fail(d, why);
}

static kcuda_act_dtype kcuda_act_of(dev_dtype t) {
  return t == DEV_BF16 ? KCUDA_ACT_BF16 : KCUDA_ACT_F32;
}

/* bf16 activations need bf16 GEMMs (the kernels multiply the stored bf16 operands as they
 * are); every stream's kernel context follows the device's type. */
static int dev_cuda_set_activation_dtype(dev_device *d, dev_dtype t, char *err, size_t errlen) {
  if (t != DEV_F32 && t != DEV_BF16) {
    snprintf(err, errlen, "unknown activation type %d", (int)t);
    return -1;
  }
  if (t == DEV_BF16 && d->precision != KCUDA_BF16) {
    snprintf(err, errlen,
             "bf16 activations need bf16 precision (STEPSCOPE_PRECISION is %s): use "
             "--activations fp32 or STEPSCOPE_PRECISION=bf16",
             kcuda_precision_name(d->precision));
    return -1;
  }
  for (int i = 0; i < d->nstreams; i++)
    if (d->streams[i] && kcuda_ctx_set_act_dtype(d->streams[i]->k, kcuda_act_of(t)) != 0) {
      snprintf(err, errlen, "%s", kcuda_error(d->streams[i]->k));
      return -1;
    }
  d->act = t;
  return 0;
}

static dev_dtype dev_cuda_activation_dtype(const dev_device *d) {
  return d->act;
}

/* --activations auto: bf16 when the GEMMs run in bf16 anyway (bf16 precision), else fp32. */
static dev_dtype dev_cuda_auto_activation_dtype(const dev_device *d) {
  return d->precision == KCUDA_BF16 ? DEV_BF16 : DEV_F32;
}

static int cuda_ok(dev_device *d, cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 1;
  char msg[512];
  snprintf(msg, sizeof msg, "%s: %s (GPU %d, %s)", what, cudaGetErrorString(e), d->ordinal,
           d->name);
  dev_cuda_fail(d, msg);
  return 0;
}

/* After a kernel-library call: a failure becomes the device's error. */
static void kernel_result(dev_stream *s, int rc, const char *op) {
  if (rc == 0) return;
  char msg[640];
  snprintf(msg, sizeof msg, "%s on stream %s: %s", op, s->name, kcuda_error(s->k));
  dev_cuda_fail(s->d, msg);
}

/* Skip work once the device failed (the CPU backend's sticky error). */
#define SKIP_IF_FAILED(s)                                                                          \
  do {                                                                                             \
    if (atomic_load(&(s)->d->failed)) return;                                                      \
  } while (0)

/* An operation is about to write device memory starting at p (weight_watch.h). */
static void wrote(dev_stream *s, const void *p) {
  weight_watch_note_write(&s->d->watch, p);
}

void dev_cuda_note_write(dev_device *d, const void *p) {
  weight_watch_note_write(&d->watch, p);
}

/* The weights version a GEMM on `weight` may cache under (0: no cache). */
static unsigned long long weights_version(dev_device *d, const float *weight) {
  if (d->precision != KCUDA_BF16) return 0;
  if (weight_watch_find(&d->watch, weight) >= 0) return d->watch.version;
  for (size_t i = 0; i < d->nallocs; i++) {
    uintptr_t lo = (uintptr_t)d->allocs[i].p, a = (uintptr_t)weight;
    if (a >= lo && a < lo + d->allocs[i].bytes)
      return weight_watch_version_for(&d->watch, weight, d->allocs[i].p, d->allocs[i].bytes);
  }
  return 0; /* not device-API memory: cast at every call */
}

/* ---- memory ---------------------------------------------------------------------- */

static void sample_driver_memory(dev_device *d) {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return;
  size_t used = total_b - free_b;
  size_t mine = used > d->baseline_used ? used - d->baseline_used : 0;
  if (mine > d->measured_peak) d->measured_peak = mine;
}

static void *cuda_alloc(dev_device *d, size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (d->nallocs == d->cap_allocs) {
    size_t cap = d->cap_allocs ? 2 * d->cap_allocs : 256;
    allocation *a = realloc(d->allocs, cap * sizeof *a);
    if (!a) return NULL;
    d->allocs = a;
    d->cap_allocs = cap;
  }
  void *p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError(); /* an allocation failure is reported by returning NULL */
    return NULL;
  }
  /* Zero it on the device's private stream and wait for that stream only: our
   * non-blocking streams would not wait for a memset on the legacy stream, and a
   * cudaDeviceSynchronize here would wait behind collectives in flight (an allocation
   * in the middle of a run, e.g. a checkpoint's agreement buffer, could then hang on a
   * peer that is itself waiting). */
  if (cudaMemsetAsync(p, 0, bytes, d->alloc_stream) != cudaSuccess ||
      cudaStreamSynchronize(d->alloc_stream) != cudaSuccess) {
    cudaGetLastError();
    cudaFree(p);
    return NULL;
  }
  d->allocs[d->nallocs].p = p;
  d->allocs[d->nallocs].bytes = bytes;
  d->nallocs++;
  d->in_use += bytes;
  if (d->in_use > d->peak) d->peak = d->in_use;
  sample_driver_memory(d);
  return p;
}

static void cuda_free(dev_device *d, void *p) {
  if (!p) return;
  weight_watch_forget(&d->watch, p);
  for (size_t i = 0; i < d->nallocs; i++)
    if (d->allocs[i].p == p) {
      d->in_use -= d->allocs[i].bytes;
      d->allocs[i] = d->allocs[--d->nallocs];
      break;
    }
  cudaFree(p);
}

static size_t dev_cuda_bytes_in_use(const dev_device *d) {
  size_t total = d->in_use;
  for (int i = 0; i < d->nstreams; i++)
    if (d->streams[i]) total += kcuda_ctx_bytes(d->streams[i]->k);
  return total;
}

static size_t dev_cuda_bytes_peak(const dev_device *d) {
  size_t scratch = dev_cuda_bytes_in_use(d) - d->in_use; /* scratch only grows */
  return d->peak + scratch;
}

/* The measured peak: the driver's used memory above what it was when the device
 * opened, when this process is alone on its GPU. When several ranks share the GPU the
 * driver's figure holds the others' memory too, so the device API's own peak (every
 * allocation and kernel scratch) is the measurement instead; *source says which. */
size_t dev_cuda_measured_peak(const dev_device *d, const char **source) {
  if (d->shared_by > 1) {
    if (source) *source = "device-allocations (GPU shared by several ranks)";
    return dev_cuda_bytes_peak(d);
  }
  if (source) *source = "driver-used-memory";
  return d->measured_peak;
}

/* dev_ops.peak_flops: the GPU's dense bf16 peak from the table (peak_flops.c), H100 SXM's
 * 989 TFLOP/s when the name is unknown. */
static double dev_cuda_peak_flops(const dev_device *d) {
  double p = dev_cuda_peak_flops_bf16(dev_cuda_name(d));
  return p > 0 ? p : 989e12;
}

/* How many ranks of this machine share one GPU: the launcher's local world size over
 * the GPUs visible (the built-in launcher and torchrun set LOCAL_WORLD_SIZE; mpirun and
 * Slurm name it otherwise). 1 when unknown. */
static int ranks_per_gpu(int gpus) {
  static const char *const names[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                      "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *v = getenv(names[i]);
    int n = v ? atoi(v) : 0;
    if (n > 0) return gpus > 0 ? (n + gpus - 1) / gpus : n;
  }
  return 1;
}

/* ---- streams and events ------------------------------------------------------------ */

static dev_stream *cuda_stream_create(dev_device *d, const char *name) {
  if (d->nstreams >= CUDA_MAX_STREAMS) return NULL;
  dev_stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->d = d;
  snprintf(s->name, sizeof s->name, "%s", name);
  /* Communication streams get the highest priority: their kernels (NCCL) are scheduled
   * as soon as they are ready instead of queueing behind compute, which is what makes
   * the bucket all-reduce overlap backward. */
  int least = 0, greatest = 0;
  int prio = 0;
  if (!strncmp(name, "comm", 4) &&
      cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess)
    prio = greatest;
  if (!cuda_ok(d, cudaStreamCreateWithPriority(&s->s, cudaStreamNonBlocking, prio),
               "cudaStreamCreate")) {
    free(s);
    return NULL;
  }
  char err[256];
  s->k = kcuda_ctx_create(s->s, d->precision, err, sizeof err);
  if (s->k && kcuda_ctx_set_act_dtype(s->k, kcuda_act_of(d->act)) != 0) {
    snprintf(err, sizeof err, "%s", kcuda_error(s->k));
    kcuda_ctx_destroy(s->k);
    s->k = NULL;
  }
  if (!s->k) {
    dev_cuda_fail(d, err);
    cudaStreamDestroy(s->s);
    free(s);
    return NULL;
  }
  unsigned long long id = 0;
  s->trace_id =
      cudaStreamGetId(s->s, &id) == cudaSuccess ? (uint64_t)id : (uint64_t)d->nstreams + 1;
#ifdef STEPSCOPE_TRAINER_GPU_TRACE
  unsigned long long key = stepscope_gpu_stream_id((void *)s->s); /* CUPTI's id, when recording */
  if (key) s->trace_id = key;
#endif
  d->streams[d->nstreams++] = s;
  if (stepscope_active())
    stepscope_stream_declare(s->trace_id, STEPSCOPE_STREAM_GPU, (uint32_t)d->ordinal, s->name);
  return s;
}

static void cuda_stream_destroy(dev_stream *s) {
  if (!s) return;
  cudaStreamSynchronize(s->s);
  kcuda_ctx_destroy(s->k);
  cudaStreamDestroy(s->s);
  dev_device *d = s->d;
  for (int i = 0; i < d->nstreams; i++)
    if (d->streams[i] == s) d->streams[i] = NULL;
  free(s);
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* Waits until query() stops answering cudaErrorNotReady, polling, and running the wait
 * checks (the NCCL watchdog) and the progress hook about every 100 ms. 0, or -1 with the
 * device failed. */
static int poll_until_done(dev_device *d, cudaError_t (*query)(void *), void *handle,
                           const char *what) {
  double next_check = mono_s() + 0.1;
  long backoff = 0;
  for (;;) {
    cudaError_t e = query(handle);
    if (e == cudaSuccess) return 0;
    if (e != cudaErrorNotReady) {
      cuda_ok(d, e, what);
      return -1;
    }
    if (atomic_load(&d->failed))
      return -1; /* a watchdog or a peer gave up: do not wait for a hung stream */
    double now = mono_s();
    if (now >= next_check) {
      next_check = now + 0.1;
      for (int i = 0; i < MAX_WAIT_CHECKS; i++) {
        char msg[512] = "";
        if (d->checks[i] && d->checks[i](d->check_args[i], msg, sizeof msg) != 0) {
          dev_cuda_fail(d, msg[0] ? msg : "a wait check failed");
          return -1;
        }
      }
      if (d->hook) d->hook(d->hook_arg);
    }
    /* short waits are common: poll fast first, then sleep up to 200 us per poll */
    if (backoff < 200) backoff += 10;
    sleep_us(backoff);
  }
}

static cudaError_t query_stream(void *h) {
  return cudaStreamQuery((cudaStream_t)h);
}
static cudaError_t query_event(void *h) {
  return cudaEventQuery((cudaEvent_t)h);
}

static int cuda_stream_synchronize(dev_stream *s) {
  dev_device *d = s->d;
  if (poll_until_done(d, query_stream, (void *)s->s, "stream synchronize") != 0) return -1;
  sample_driver_memory(d);
  if (d->hook) d->hook(d->hook_arg);
  return atomic_load(&d->failed) ? -1 : 0;
}

static dev_event *cuda_event_create(dev_device *d) {
  dev_event *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->d = d;
  if (!cuda_ok(d, cudaEventCreateWithFlags(&e->e, cudaEventDisableTiming), "cudaEventCreate")) {
    free(e);
    return NULL;
  }
  return e;
}

static void cuda_event_destroy(dev_event *e) {
  if (!e) return;
  cudaEventDestroy(e->e);
  free(e);
}

static void cuda_event_record(dev_event *e, dev_stream *s) {
  cuda_ok(s->d, cudaEventRecord(e->e, s->s), "cudaEventRecord");
}

static void cuda_stream_wait_event(dev_stream *s, dev_event *e) {
  cuda_ok(s->d, cudaStreamWaitEvent(s->s, e->e, 0), "cudaStreamWaitEvent");
}

int dev_cuda_add_wait_check(dev_device *d, dev_cuda_wait_check check, void *arg) {
  for (int i = 0; i < MAX_WAIT_CHECKS; i++)
    if (!d->checks[i]) {
      d->checks[i] = check;
      d->check_args[i] = arg;
      return 0;
    }
  return -1;
}

void dev_cuda_remove_wait_check(dev_device *d, void *arg) {
  for (int i = 0; i < MAX_WAIT_CHECKS; i++)
    if (d->check_args[i] == arg) {
      d->checks[i] = NULL;
      d->check_args[i] = NULL;
    }
}

/* ---- copies ------------------------------------------------------------------------ */

/* The next pinned staging slot, once its previous use has finished (it was enqueued
 * STAGING_SLOTS copies ago, so the wait is almost always free). NULL: use pageable. */
static staging_slot *take_staging_slot(dev_device *d) {
  staging_slot *slot = &d->staging[d->next_staging];
  d->next_staging = (d->next_staging + 1) % STAGING_SLOTS;
  if (!slot->host) {
    if (cudaMallocHost(&slot->host, STAGING_SLOT_BYTES) != cudaSuccess) {
      cudaGetLastError();
      slot->host = NULL;
      return NULL;
    }
    if (cudaEventCreateWithFlags(&slot->copied, cudaEventDisableTiming) != cudaSuccess) {
      cudaGetLastError();
      cudaFreeHost(slot->host);
      slot->host = NULL;
      return NULL;
    }
  } else if (slot->used &&
             poll_until_done(d, query_event, (void *)slot->copied, "staging wait") != 0) {
    return NULL;
  }
  return slot;
}

static void cuda_copy_to_device(dev_stream *s, void *dst, const void *src, size_t bytes) {
  SKIP_IF_FAILED(s);
  wrote(s, dst);
  dev_device *d = s->d;
  staging_slot *slot = bytes <= STAGING_SLOT_BYTES ? take_staging_slot(d) : NULL;
  if (!slot) {
    /* pageable: the driver stages it and returns once src may be reused */
    cuda_ok(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s->s),
            "cudaMemcpyAsync (to device)");
    return;
  }
  memcpy(slot->host, src, bytes);
  if (!cuda_ok(d, cudaMemcpyAsync(dst, slot->host, bytes, cudaMemcpyHostToDevice, s->s),
               "cudaMemcpyAsync (to device)"))
    return;
  cuda_ok(d, cudaEventRecord(slot->copied, s->s), "cudaEventRecord (staging)");
  slot->used = 1;
}

/* Runs on a driver thread once the device-to-host copy into the slot is done. */
static void CUDART_CB deliver_to_host(void *arg) {
  staging_slot *slot = arg;
  memcpy(slot->user_dst, slot->host, slot->bytes);
}

static void cuda_copy_to_host(dev_stream *s, void *dst, const void *src, size_t bytes) {
  SKIP_IF_FAILED(s);
  dev_device *d = s->d;
  /* Small copies (losses, norms) complete asynchronously like every other operation:
   * into a pinned slot, then a host function moves the bytes to dst. The host thus
   * never blocks inside the driver, and stream_synchronize's watchdog keeps running
   * while a collective before the copy hangs. */
  staging_slot *slot = bytes <= STAGING_SLOT_BYTES ? take_staging_slot(d) : NULL;
  if (!slot) {
    /* pageable destination: the driver returns once the copy has completed */
    cuda_ok(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s->s),
            "cudaMemcpyAsync (to host)");
    return;
  }
  slot->user_dst = dst;
  slot->bytes = bytes;
  if (!cuda_ok(d, cudaMemcpyAsync(slot->host, src, bytes, cudaMemcpyDeviceToHost, s->s),
               "cudaMemcpyAsync (to host)") ||
      !cuda_ok(d, cudaLaunchHostFunc(s->s, deliver_to_host, slot), "cudaLaunchHostFunc"))
    return;
  cuda_ok(d, cudaEventRecord(slot->copied, s->s), "cudaEventRecord (staging)");
  slot->used = 1;
}

static void cuda_copy(dev_stream *s, void *dst, const void *src, size_t bytes) {
  SKIP_IF_FAILED(s);
  wrote(s, dst);
  if (dst == src || bytes == 0) return;
  cuda_ok(s->d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->s),
          "cudaMemcpyAsync (device to device)");
}

static void cuda_zero(dev_stream *s, void *dst, size_t bytes) {
  SKIP_IF_FAILED(s);
  wrote(s, dst);
  cuda_ok(s->d, cudaMemsetAsync(dst, 0, bytes, s->s), "cudaMemsetAsync");
}

/* rows x width bytes between pitched device buffers (ring attention packs the k|v columns
 * of qkv with it, and unpacks the returning dk|dv) */
static void cuda_copy_2d(dev_stream *s, void *dst, size_t dst_pitch, const void *src,
                         size_t src_pitch, size_t width_bytes, size_t rows) {
  SKIP_IF_FAILED(s);
  wrote(s, dst);
  if (rows == 0 || width_bytes == 0) return;
  cuda_ok(s->d,
          cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width_bytes, rows,
                            cudaMemcpyDeviceToDevice, s->s),
          "cudaMemcpy2DAsync (device to device)");
}

/* ---- model operations: one call into kernels/cuda each ------------------------------ */

static void op_encoder_forward(dev_stream *s, dev_act *out, const int *tokens, const float *wte,
                               const float *wpe, int B, int T, int C) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  kernel_result(s, kcuda_encoder_forward(s->k, out, tokens, wte, wpe, B, T, C), "encoder_forward");
}

static void op_encoder_backward(dev_stream *s, float *dwte, float *dwpe, const dev_act *dout,
                                const int *tokens, int B, int T, int C) {
  SKIP_IF_FAILED(s);
  wrote(s, dwte);
  wrote(s, dwpe);
  kernel_result(s, kcuda_encoder_backward(s->k, dwte, dwpe, dout, tokens, B, T, C),
                "encoder_backward");
}

static void op_layernorm_forward(dev_stream *s, dev_act *out, float *mean, float *rstd,
                                 const dev_act *inp, const float *weight, const float *bias, int N,
                                 int C) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  wrote(s, mean);
  wrote(s, rstd);
  kernel_result(s, kcuda_layernorm_forward(s->k, out, mean, rstd, inp, weight, bias, N, C),
                "layernorm_forward");
}

static void op_layernorm_backward(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                  const dev_act *dout, const dev_act *inp, const float *weight,
                                  const float *mean, const float *rstd, int N, int C) {
  SKIP_IF_FAILED(s);
  wrote(s, dinp);
  wrote(s, dweight);
  wrote(s, dbias);
  kernel_result(
      s, kcuda_layernorm_backward(s->k, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C),
      "layernorm_backward");
}

static void op_matmul_forward(dev_stream *s, dev_act *out, const dev_act *inp, const float *weight,
                              const float *bias, int N, int C, int OC) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  kernel_result(
      s,
      kcuda_matmul_forward_w(s->k, out, inp, weight, bias, N, C, OC, weights_version(s->d, weight)),
      "matmul_forward");
}

static void op_matmul_backward(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                               const dev_act *dout, const dev_act *inp, const float *weight, int N,
                               int C, int OC) {
  SKIP_IF_FAILED(s);
  wrote(s, dinp);
  wrote(s, dweight);
  wrote(s, dbias);
  kernel_result(s,
                kcuda_matmul_backward_w(s->k, dinp, dweight, dbias, dout, inp, weight, N, C, OC,
                                        weights_version(s->d, weight)),
                "matmul_backward");
}

static void op_attention_forward(dev_stream *s, dev_act *out, float *preatt, float *att,
                                 const dev_act *qkv, int B, int T, int C, int NH) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  wrote(s, preatt);
  wrote(s, att);
  /* the choice is a function of the device and the shape only, so backward makes the
   * same one and finds in att what this forward saved */
  if (s->d->fused_attention && kcuda_attention_fused_supported(B, T, C, NH))
    kernel_result(s, kcuda_attention_forward_fused(s->k, out, att, qkv, B, T, C, NH),
                  "attention_forward (fused)");
  else
    kernel_result(s, kcuda_attention_forward(s->k, out, preatt, att, qkv, B, T, C, NH),
                  "attention_forward");
}

static void op_attention_backward(dev_stream *s, dev_act *dqkv, float *dpreatt, float *datt,
                                  const dev_act *dout, const dev_act *qkv, const float *att, int B,
                                  int T, int C, int NH) {
  SKIP_IF_FAILED(s);
  wrote(s, dqkv);
  wrote(s, dpreatt);
  wrote(s, datt);
  if (s->d->fused_attention && kcuda_attention_fused_supported(B, T, C, NH))
    kernel_result(s, kcuda_attention_backward_fused(s->k, dqkv, dout, qkv, att, B, T, C, NH),
                  "attention_backward (fused)");
  else
    kernel_result(s,
                  kcuda_attention_backward(s->k, dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH),
                  "attention_backward");
}

/* Ring attention's blocks (attention_block.cu): bf16 tensor-core tiles, or the fp32 kernels
 * in fp32 precision and for head sizes the tiles do not take. */
static void op_attention_block_forward(dev_stream *s, dev_act *out, float *lse, const dev_act *q,
                                       int q_stride, const dev_act *kv, int kv_stride, int B,
                                       int Tq, int Tk, int C, int NH, int causal) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  wrote(s, lse);
  kernel_result(s,
                kcuda_attention_block_forward(s->k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk,
                                              C, NH, causal),
                "attention_block_forward");
}

static void op_attention_block_backward(dev_stream *s, dev_act *dq, int dq_stride, dev_act *dkv,
                                        int dkv_stride, const dev_act *dout, const dev_act *out,
                                        const float *lse, const dev_act *q, int q_stride,
                                        const dev_act *kv, int kv_stride, int B, int Tq, int Tk,
                                        int C, int NH, int causal) {
  SKIP_IF_FAILED(s);
  wrote(s, dq);
  wrote(s, dkv);
  kernel_result(s,
                kcuda_attention_block_backward(s->k, dq, dq_stride, dkv, dkv_stride, dout, out, lse,
                                               q, q_stride, kv, kv_stride, B, Tq, Tk, C, NH,
                                               causal),
                "attention_block_backward");
}

/* Mixture of experts (moe.cu): routing, the plan and the permutations as the CPU computes
 * them; the routing-dependent row count is read by the kernels, never here. */
static void op_moe_router_forward(dev_stream *s, int *expert, float *gate, float *probs,
                                  const dev_act *logits, int N, int E, int K, int renorm) {
  SKIP_IF_FAILED(s);
  wrote(s, expert);
  wrote(s, gate);
  wrote(s, probs);
  kernel_result(s, kcuda_moe_router_forward(s->k, expert, gate, probs, logits, N, E, K, renorm),
                "moe_router_forward");
}

static void op_moe_router_backward(dev_stream *s, dev_act *dlogits, const float *dgate,
                                   const float *probs, const int *expert, int *counts, int N, int E,
                                   int K, int renorm, float aux_scale) {
  SKIP_IF_FAILED(s);
  wrote(s, dlogits);
  wrote(s, counts);
  kernel_result(s,
                kcuda_moe_router_backward(s->k, dlogits, dgate, probs, expert, counts, N, E, K,
                                          renorm, aux_scale),
                "moe_router_backward");
}

static void op_moe_aux_loss_accumulate(dev_stream *s, double *acc, const float *probs,
                                       const int *expert, int *counts, int N, int E, int K) {
  SKIP_IF_FAILED(s);
  wrote(s, acc);
  wrote(s, counts);
  kernel_result(s, kcuda_moe_aux_loss_accumulate(s->k, acc, probs, expert, counts, N, E, K),
                "moe_aux_loss");
}

static void op_moe_dispatch_plan(dev_stream *s, int *counts, int *offsets, int *row_token,
                                 int *row_of, int *dropped_acc, const int *expert, int N, int E,
                                 int K, int capacity) {
  SKIP_IF_FAILED(s);
  wrote(s, counts);
  wrote(s, offsets);
  wrote(s, row_token);
  wrote(s, row_of);
  if (dropped_acc) wrote(s, dropped_acc);
  kernel_result(s,
                kcuda_moe_dispatch_plan(s->k, counts, offsets, row_token, row_of, dropped_acc,
                                        expert, N, E, K, capacity),
                "moe_dispatch_plan");
}

static void op_moe_permute_forward(dev_stream *s, dev_act *xp, const dev_act *x,
                                   const int *row_token, const int *offsets, int N, int E, int K,
                                   int C) {
  SKIP_IF_FAILED(s);
  wrote(s, xp);
  kernel_result(s, kcuda_moe_permute_forward(s->k, xp, x, row_token, offsets, N, E, K, C),
                "moe_permute_forward");
}

static void op_moe_permute_backward(dev_stream *s, dev_act *dx, const dev_act *dxp,
                                    const int *row_token, const int *offsets, int N, int E, int K,
                                    int C) {
  SKIP_IF_FAILED(s);
  wrote(s, dx);
  kernel_result(s, kcuda_moe_permute_backward(s->k, dx, dxp, row_token, offsets, N, E, K, C),
                "moe_permute_backward");
}

static void op_moe_unpermute_forward(dev_stream *s, dev_act *out, const dev_act *yp,
                                     const float *gate, const int *row_of, int N, int K, int C) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  kernel_result(s, kcuda_moe_unpermute_forward(s->k, out, yp, gate, row_of, N, K, C),
                "moe_unpermute_forward");
}

static void op_moe_unpermute_backward(dev_stream *s, dev_act *dyp, float *dgate,
                                      const dev_act *dout, const dev_act *yp, const float *gate,
                                      const int *row_of, int N, int K, int C) {
  SKIP_IF_FAILED(s);
  wrote(s, dyp);
  wrote(s, dgate);
  kernel_result(s, kcuda_moe_unpermute_backward(s->k, dyp, dgate, dout, yp, gate, row_of, N, K, C),
                "moe_unpermute_backward");
}

/* The experts' grouped GEMM reads the fp32 weights directly (bf16 tensor cores round them as
 * they are staged, no cached bf16 copies; see moe_kernels.cuh for why it is not cuBLAS). */
static void op_moe_expert_matmul_forward(dev_stream *s, dev_act *out, const dev_act *inp,
                                         const float *weight, const float *bias, const int *offsets,
                                         int Rmax, int E, int C, int OC) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  kernel_result(
      s, kcuda_moe_expert_matmul_forward(s->k, out, inp, weight, bias, offsets, Rmax, E, C, OC),
      "moe_expert_matmul_forward");
}

static void op_moe_expert_matmul_backward(dev_stream *s, dev_act *dinp, float *dweight,
                                          float *dbias, const dev_act *dout, const dev_act *inp,
                                          const float *weight, const int *offsets, int Rmax, int E,
                                          int C, int OC) {
  SKIP_IF_FAILED(s);
  if (dinp) wrote(s, dinp);
  if (dweight) wrote(s, dweight);
  if (dbias) wrote(s, dbias);
  kernel_result(s,
                kcuda_moe_expert_matmul_backward(s->k, dinp, dweight, dbias, dout, inp, weight,
                                                 offsets, Rmax, E, C, OC),
                "moe_expert_matmul_backward");
}

static void op_gelu_forward(dev_stream *s, dev_act *out, const dev_act *inp, int N) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  kernel_result(s, kcuda_gelu_forward(s->k, out, inp, (size_t)N), "gelu_forward");
}

static void op_gelu_backward(dev_stream *s, dev_act *dinp, const dev_act *inp, const dev_act *dout,
                             int N) {
  SKIP_IF_FAILED(s);
  wrote(s, dinp);
  kernel_result(s, kcuda_gelu_backward(s->k, dinp, inp, dout, (size_t)N), "gelu_backward");
}

static void op_residual_forward(dev_stream *s, dev_act *out, const dev_act *a, const dev_act *b,
                                int N) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  kernel_result(s, kcuda_residual_forward(s->k, out, a, b, (size_t)N), "residual_forward");
}

static void op_residual_backward(dev_stream *s, dev_act *da, dev_act *db, const dev_act *dout,
                                 int N) {
  SKIP_IF_FAILED(s);
  wrote(s, da);
  wrote(s, db);
  kernel_result(s, kcuda_residual_backward(s->k, da, db, dout, (size_t)N), "residual_backward");
}

static void op_crossentropy_forward(dev_stream *s, float *losses, dev_act *probs,
                                    const dev_act *logits, const int *targets, int N, int V,
                                    int Vp) {
  SKIP_IF_FAILED(s);
  wrote(s, losses);
  wrote(s, probs);
  kernel_result(s, kcuda_crossentropy_forward(s->k, losses, probs, logits, targets, N, V, Vp),
                "crossentropy_forward");
}

static void op_crossentropy_backward(dev_stream *s, dev_act *dlogits, const float *dlosses,
                                     const dev_act *probs, const int *targets, int N, int V,
                                     int Vp) {
  SKIP_IF_FAILED(s);
  wrote(s, dlogits);
  kernel_result(s, kcuda_crossentropy_backward(s->k, dlogits, dlosses, probs, targets, N, V, Vp),
                "crossentropy_backward");
}

static void op_fill(dev_stream *s, float *x, float value, size_t n) {
  SKIP_IF_FAILED(s);
  wrote(s, x);
  kernel_result(s, kcuda_fill(s->k, x, value, n), "fill");
}

static void op_sum_accumulate(dev_stream *s, double *acc, const float *x, size_t n) {
  SKIP_IF_FAILED(s);
  wrote(s, acc);
  kernel_result(s, kcuda_sum_accumulate(s->k, acc, x, n), "sum");
}

static void op_sum_squares_accumulate(dev_stream *s, double *acc, const float *x, size_t n) {
  SKIP_IF_FAILED(s);
  wrote(s, acc);
  kernel_result(s, kcuda_sum_squares_accumulate(s->k, acc, x, n), "sum_squares");
}

static void op_scale(dev_stream *s, float *x, float factor, size_t n) {
  SKIP_IF_FAILED(s);
  wrote(s, x);
  kernel_result(s, kcuda_scale(s->k, x, factor, n), "scale");
}

static void op_add(dev_stream *s, float *dst, const float *src, size_t n) {
  SKIP_IF_FAILED(s);
  wrote(s, dst);
  kernel_result(s, kcuda_add_f32(s->k, dst, src, n), "add");
}

static void op_adamw(dev_stream *s, float *params, const float *grads, float *m, float *v, size_t n,
                     float lr, float beta1, float beta2, float eps, float weight_decay, int t) {
  SKIP_IF_FAILED(s);
  wrote(s, params);
  wrote(s, m);
  wrote(s, v);
  kernel_result(s,
                kcuda_adamw(s->k, params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, t),
                "adamw");
}

static const dev_ops cuda_ops = {
    .backend_name = "cuda",
    .close = dev_cuda_close,
    .name = dev_cuda_name,
    .last_error = dev_cuda_last_error,
    .trace_started = dev_cuda_trace_started,
    .set_progress_hook = dev_cuda_set_progress_hook,
    .bytes_in_use = dev_cuda_bytes_in_use,
    .bytes_peak = dev_cuda_bytes_peak,
    .abort = dev_cuda_abort,
    .set_activation_dtype = dev_cuda_set_activation_dtype,
    .activation_dtype = dev_cuda_activation_dtype,
    .auto_activation_dtype = dev_cuda_auto_activation_dtype,
    .peak_flops = dev_cuda_peak_flops,
    .measured_peak = dev_cuda_measured_peak,
    .comm = &comm_nccl_dev_ops,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .copy_to_device = cuda_copy_to_device,
    .copy_to_host = cuda_copy_to_host,
    .copy = cuda_copy,
    .zero = cuda_zero,
    .copy_2d = cuda_copy_2d,
    .encoder_forward = op_encoder_forward,
    .encoder_backward = op_encoder_backward,
    .layernorm_forward = op_layernorm_forward,
    .layernorm_backward = op_layernorm_backward,
    .matmul_forward = op_matmul_forward,
    .matmul_backward = op_matmul_backward,
    .attention_forward = op_attention_forward,
    .attention_backward = op_attention_backward,
    .attention_block_forward = op_attention_block_forward,
    .attention_block_backward = op_attention_block_backward,
    .moe_router_forward = op_moe_router_forward,
    .moe_router_backward = op_moe_router_backward,
    .moe_aux_loss_accumulate = op_moe_aux_loss_accumulate,
    .moe_dispatch_plan = op_moe_dispatch_plan,
    .moe_permute_forward = op_moe_permute_forward,
    .moe_permute_backward = op_moe_permute_backward,
    .moe_unpermute_forward = op_moe_unpermute_forward,
    .moe_unpermute_backward = op_moe_unpermute_backward,
    .moe_expert_matmul_forward = op_moe_expert_matmul_forward,
    .moe_expert_matmul_backward = op_moe_expert_matmul_backward,
    .gelu_forward = op_gelu_forward,
    .gelu_backward = op_gelu_backward,
    .residual_forward = op_residual_forward,
    .residual_backward = op_residual_backward,
    .crossentropy_forward = op_crossentropy_forward,
    .crossentropy_backward = op_crossentropy_backward,
    .fill = op_fill,
    .sum_accumulate = op_sum_accumulate,
    .sum_squares_accumulate = op_sum_squares_accumulate,
    .scale = op_scale,
    .add = op_add,
    .adamw = op_adamw,
};

const dev_ops *dev_cuda_ops(void) {
  return &cuda_ops;
}

int dev_is_cuda(const dev_device *d) {
  return d && ((const dev_device_header *)d)->ops == &cuda_ops;
}

/* ---- lifecycle ------------------------------------------------------------------------ */

dev_device *dev_cuda_open(int ordinal, const char *precision, char *err, size_t errlen) {
  kcuda_precision prec = KCUDA_BF16;
  if (!precision || !precision[0]) precision = getenv("STEPSCOPE_PRECISION");
  if (precision && precision[0] && kcuda_precision_parse(precision, &prec) != 0) {
    snprintf(err, errlen, "precision '%s': expected bf16, tf32 or fp32", precision);
    return NULL;
  }
  const char *attention = getenv("STEPSCOPE_CUDA_ATTENTION");
  int fused = 0;
  if (attention && attention[0]) {
    if (!strcmp(attention, "fused"))
      fused = 1;
    else if (strcmp(attention, "gemm") != 0) {
      snprintf(err, errlen, "STEPSCOPE_CUDA_ATTENTION=%s: expected gemm or fused", attention);
      return NULL;
    }
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    snprintf(err, errlen, "--backend cuda: no usable GPU (%s)",
             e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    cudaGetLastError();
    return NULL;
  }
  if (ordinal < 0) {
    const char *lr = getenv("LOCAL_RANK");
    ordinal = lr ? atoi(lr) % count : 0;
    if (ordinal < 0) ordinal = 0;
  }
  if (ordinal >= count) {
    snprintf(err, errlen, "--backend cuda: GPU %d does not exist (%d visible)", ordinal, count);
    return NULL;
  }
  dev_device *d = calloc(1, sizeof *d);
  if (!d) {
    snprintf(err, errlen, "out of memory creating the cuda device");
    return NULL;
  }
  d->header.ops = &cuda_ops;
  d->ordinal = ordinal;
  d->shared_by = ranks_per_gpu(count);
  weight_watch_init(&d->watch);
  d->fused_attention = fused;
  d->precision = prec;
  struct cudaDeviceProp prop;
  if ((e = cudaSetDevice(ordinal)) != cudaSuccess ||
      (e = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess ||
      (e = cudaFree(NULL)) != cudaSuccess) { /* creates the context now */
    snprintf(err, errlen, "--backend cuda: GPU %d: %s", ordinal, cudaGetErrorString(e));
    free(d);
    return NULL;
  }
  snprintf(d->name, sizeof d->name, "%s", prop.name);
  if ((e = cudaStreamCreateWithFlags(&d->alloc_stream, cudaStreamNonBlocking)) != cudaSuccess) {
    snprintf(err, errlen, "--backend cuda: GPU %d: cudaStreamCreate: %s", ordinal,
             cudaGetErrorString(e));
    free(d);
    return NULL;
  }
  /* The kernels' scratch comes from the default memory pool (cudaMallocAsync). Keep what
   * it frees instead of returning it to the driver at every synchronization. */
  cudaMemPool_t pool;
  if (cudaDeviceGetDefaultMemPool(&pool, ordinal) == cudaSuccess) {
    uint64_t keep = UINT64_MAX;
    if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess)
      cudaGetLastError(); /* only an optimization */
  } else {
    cudaGetLastError();
  }
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) d->baseline_used = total_b - free_b;
  return d;
}

static void dev_cuda_close(dev_device *d) {
  if (!d) return;
  for (int i = 0; i < d->nstreams; i++)
    if (d->streams[i]) cuda_stream_destroy(d->streams[i]);
  for (int i = 0; i < STAGING_SLOTS; i++)
    if (d->staging[i].host) {
      cudaEventDestroy(d->staging[i].copied);
      cudaFreeHost(d->staging[i].host);
    }
  for (size_t i = 0; i < d->nallocs; i++)
    cudaFree(d->allocs[i].p);
  if (d->alloc_stream) cudaStreamDestroy(d->alloc_stream);
  free(d->allocs);
  free(d);
}

const char *dev_cuda_name(const dev_device *d) {
  return d->name;
}
const char *dev_cuda_last_error(const dev_device *d) {
  return d->error;
}
int dev_cuda_ordinal(const dev_device *d) {
  return d->ordinal;
}
void *dev_cuda_stream_handle(dev_stream *s) {
  return (void *)s->s;
}
uint64_t dev_cuda_stream_trace_id(dev_stream *s) {
  return s->trace_id;
}
dev_device *dev_cuda_stream_device(dev_stream *s) {
  return s->d;
}

/* Names the device's streams in the running trace, under the ids CUPTI's records
 * of those streams carry (the GPU tracer must be recording: train.c starts it first).
 * The trainer calls this when its trace starts and again just before it stops: the
 * analyzer keeps a stream's last declaration, and CUPTI's converter declares each
 * stream it meets as "stream N" while the trace runs. */
static void dev_cuda_trace_started(dev_device *d) {
  for (int i = 0; i < d->nstreams; i++) {
    dev_stream *s = d->streams[i];
    if (!s) continue;
#ifdef STEPSCOPE_TRAINER_GPU_TRACE
    unsigned long long key = stepscope_gpu_stream_id((void *)s->s);
    if (key) s->trace_id = key;
#endif
    stepscope_stream_declare(s->trace_id, STEPSCOPE_STREAM_GPU, (uint32_t)d->ordinal, s->name);
  }
}

static void dev_cuda_set_progress_hook(dev_device *d, void (*hook)(void *), void *arg) {
  d->hook = hook;
  d->hook_arg = arg;
}
