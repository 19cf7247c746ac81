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
 * Files: this one holds the device (open, close, errors, activation type), its memory and
 * its measurements; device_cuda_streams.c the streams, events, synchronization and copies;
 * device_cuda_ops.c the model operations and the operations table; device_cuda_internal.h
 * the objects they share.
 * Tracing: kernels, copies and NCCL are seen by the GPU tracer (CUPTI, NVTX, the
 * NCCL profiler plugin); the device only names its streams in the trace.
 */
#include "device_cuda_internal.h"
#ifdef STEPSCOPE_TRAINER_GPU_TRACE
#include "stepscope_gpu.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepscope.h"

/* ---- errors ---------------------------------------------------------------------- */

void dev_cuda_fail(dev_device *d, const char *msg) {
  if (atomic_exchange(&d->failed, 1) == 0) snprintf(d->error, sizeof d->error, "%s", msg);
}

void dev_cuda_abort(dev_device *d, const char *why) {
  dev_cuda_fail(d, why);
}

/* bf16 activations need bf16 GEMMs (the kernels multiply the stored bf16 operands as they
 * are); every stream's kernel context follows the device's type. */
int dev_cuda_set_activation_dtype(dev_device *d, dev_dtype t, char *err, size_t errlen) {
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

dev_dtype dev_cuda_activation_dtype(const dev_device *d) {
  return d->act;
}

/* --activations auto: bf16 when the GEMMs run in bf16 anyway (bf16 precision), else fp32. */
dev_dtype dev_cuda_auto_activation_dtype(const dev_device *d) {
  return d->precision == KCUDA_BF16 ? DEV_BF16 : DEV_F32;
}

void dev_cuda_note_write(dev_device *d, const void *p) {
  weight_watch_note_write(&d->watch, p);
}

/* ---- memory ---------------------------------------------------------------------- */

void sample_driver_memory(dev_device *d) {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return;
  size_t used = total_b - free_b;
  size_t mine = used > d->baseline_used ? used - d->baseline_used : 0;
  if (mine > d->measured_peak) d->measured_peak = mine;
}

void *cuda_alloc(dev_device *d, size_t bytes) {
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

void cuda_free(dev_device *d, void *p) {
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

size_t dev_cuda_bytes_in_use(const dev_device *d) {
  size_t total = d->in_use;
  for (int i = 0; i < d->nstreams; i++)
    if (d->streams[i]) total += kcuda_ctx_bytes(d->streams[i]->k);
  return total;
}

size_t dev_cuda_bytes_peak(const dev_device *d) {
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
double dev_cuda_peak_flops(const dev_device *d) {
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
  d->header.ops = dev_cuda_ops();
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

void dev_cuda_close(dev_device *d) {
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
void dev_cuda_trace_started(dev_device *d) {
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

void dev_cuda_set_progress_hook(dev_device *d, void (*hook)(void *), void *arg) {
  d->hook = hook;
  d->hook_arg = arg;
}
