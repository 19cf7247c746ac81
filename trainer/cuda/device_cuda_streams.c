/*
 * device_cuda_streams.c — the CUDA backend's streams, events and copies (device_cuda.c has
 * the overview): non-blocking streams with their kernel contexts, events without timing,
 * stream_synchronize by polling (so the wait checks, the NCCL watchdog, run while it waits),
 * and the copies between host and device through the ring of pinned staging slots.
 *
 * Why a file of its own: this is how work is ordered and waited for, apart from the device's
 * set-up and memory (device_cuda.c) and from the model operations (device_cuda_ops.c).
 */
#include "device_cuda_internal.h"
#ifdef STEPSCOPE_TRAINER_GPU_TRACE
#include "stepscope_gpu.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stepscope.h"

static int cuda_ok(dev_device *d, cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 1;
  char msg[512];
  snprintf(msg, sizeof msg, "%s: %s (GPU %d, %s)", what, cudaGetErrorString(e), d->ordinal,
           d->name);
  dev_cuda_fail(d, msg);
  return 0;
}

/* ---- streams and events ------------------------------------------------------------ */

dev_stream *cuda_stream_create(dev_device *d, const char *name) {
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

void cuda_stream_destroy(dev_stream *s) {
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

int cuda_stream_synchronize(dev_stream *s) {
  dev_device *d = s->d;
  if (poll_until_done(d, query_stream, (void *)s->s, "stream synchronize") != 0) return -1;
  sample_driver_memory(d);
  if (d->hook) d->hook(d->hook_arg);
  return atomic_load(&d->failed) ? -1 : 0;
}

dev_event *cuda_event_create(dev_device *d) {
  dev_event *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->d = d;
  if (!cuda_ok(d, cudaEventCreateWithFlags(&e->e, cudaEventDisableTiming), "cudaEventCreate")) {
    free(e);
    return NULL;
  }
  return e;
}

void cuda_event_destroy(dev_event *e) {
  if (!e) return;
  cudaEventDestroy(e->e);
  free(e);
}

void cuda_event_record(dev_event *e, dev_stream *s) {
  cuda_ok(s->d, cudaEventRecord(e->e, s->s), "cudaEventRecord");
}

void cuda_stream_wait_event(dev_stream *s, dev_event *e) {
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

static int copy_async(dev_stream *s, void *dst, const void *src, size_t bytes,
                      enum cudaMemcpyKind kind, const char *what) {
  return cuda_ok(s->d, cudaMemcpyAsync(dst, src, bytes, kind, s->s), what);
}

/* The slot's copy is enqueued: the slot is busy until the stream passes this point. */
static void staging_enqueued(dev_stream *s, staging_slot *slot) {
  cuda_ok(s->d, cudaEventRecord(slot->copied, s->s), "cudaEventRecord (staging)");
  slot->used = 1;
}

void cuda_copy_to_device(dev_stream *s, void *dst, const void *src, size_t bytes) {
  SKIP_IF_FAILED(s);
  wrote(s, dst);
  staging_slot *slot = bytes <= STAGING_SLOT_BYTES ? take_staging_slot(s->d) : NULL;
  if (slot) {
    memcpy(slot->host, src, bytes);
    if (copy_async(s, dst, slot->host, bytes, cudaMemcpyHostToDevice,
                   "cudaMemcpyAsync (to device)"))
      staging_enqueued(s, slot);
  } else { /* pageable: the driver stages it and returns once src may be reused */
    copy_async(s, dst, src, bytes, cudaMemcpyHostToDevice, "cudaMemcpyAsync (to device)");
  }
}

/* Runs on a driver thread once the device-to-host copy into the slot is done. */
static void CUDART_CB deliver_to_host(void *arg) {
  staging_slot *slot = arg;
  memcpy(slot->user_dst, slot->host, slot->bytes);
}

void cuda_copy_to_host(dev_stream *s, void *dst, const void *src, size_t bytes) {
  SKIP_IF_FAILED(s);
  /* Small copies (losses, norms) complete asynchronously like every other operation:
   * into a pinned slot, then a host function moves the bytes to dst. The host thus
   * never blocks inside the driver, and stream_synchronize's watchdog keeps running
   * while a collective before the copy hangs. */
  staging_slot *slot = bytes <= STAGING_SLOT_BYTES ? take_staging_slot(s->d) : NULL;
  if (slot) {
    slot->user_dst = dst;
    slot->bytes = bytes;
    if (copy_async(s, slot->host, src, bytes, cudaMemcpyDeviceToHost,
                   "cudaMemcpyAsync (to host)") &&
        cuda_ok(s->d, cudaLaunchHostFunc(s->s, deliver_to_host, slot), "cudaLaunchHostFunc"))
      staging_enqueued(s, slot);
  } else { /* pageable destination: the driver returns once the copy has completed */
    copy_async(s, dst, src, bytes, cudaMemcpyDeviceToHost, "cudaMemcpyAsync (to host)");
  }
}

void cuda_copy(dev_stream *s, void *dst, const void *src, size_t bytes) {
  SKIP_IF_FAILED(s);
  wrote(s, dst);
  if (dst == src || bytes == 0) return;
  cuda_ok(s->d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->s),
          "cudaMemcpyAsync (device to device)");
}

void cuda_zero(dev_stream *s, void *dst, size_t bytes) {
  SKIP_IF_FAILED(s);
  wrote(s, dst);
  cuda_ok(s->d, cudaMemsetAsync(dst, 0, bytes, s->s), "cudaMemsetAsync");
}

/* rows x width bytes between pitched device buffers (ring attention packs the k|v columns
 * of qkv with it, and unpacks the returning dk|dv) */
void cuda_copy_2d(dev_stream *s, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                  size_t width_bytes, size_t rows) {
  SKIP_IF_FAILED(s);
  wrote(s, dst);
  if (rows == 0 || width_bytes == 0) return;
  cuda_ok(s->d,
          cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width_bytes, rows,
                            cudaMemcpyDeviceToDevice, s->s),
          "cudaMemcpy2DAsync (device to device)");
}
