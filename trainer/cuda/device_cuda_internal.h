/*
 * device_cuda_internal.h — internal to the CUDA backend of the device API (device_cuda.c,
 * device_cuda_streams.c, device_cuda_ops.c) and to nothing else: the device, stream and event
 * objects, the two small helpers every operation uses (the sticky-error skip and the
 * weight-write note), and the functions one of the three files defines for the others (the
 * operations table in device_cuda_ops.c names them all). device_cuda.h is the public side.
 */
#ifndef STEPSCOPE_TRAINER_DEVICE_CUDA_INTERNAL_H
#define STEPSCOPE_TRAINER_DEVICE_CUDA_INTERNAL_H

#include "device_cuda.h"

#include <cuda_runtime.h>
#include <stdatomic.h>

#include "cuda_kernels.h"
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

static inline kcuda_act_dtype kcuda_act_of(dev_dtype t) {
  return t == DEV_BF16 ? KCUDA_ACT_BF16 : KCUDA_ACT_F32;
}

/* Skip work once the device failed (the CPU backend's sticky error). */
#define SKIP_IF_FAILED(s)                                                                          \
  do {                                                                                             \
    if (atomic_load(&(s)->d->failed)) return;                                                      \
  } while (0)

/* An operation is about to write device memory starting at p (weight_watch.h). */
static inline void wrote(dev_stream *s, const void *p) {
  weight_watch_note_write(&s->d->watch, p);
}

/* device_cuda.c: the device, its memory and its lifecycle */
void dev_cuda_close(dev_device *d);
const char *dev_cuda_name(const dev_device *d);
const char *dev_cuda_last_error(const dev_device *d);
void dev_cuda_trace_started(dev_device *d);
void dev_cuda_set_progress_hook(dev_device *d, void (*hook)(void *), void *arg);
size_t dev_cuda_bytes_in_use(const dev_device *d);
size_t dev_cuda_bytes_peak(const dev_device *d);
void dev_cuda_abort(dev_device *d, const char *why);
int dev_cuda_set_activation_dtype(dev_device *d, dev_dtype t, char *err, size_t errlen);
dev_dtype dev_cuda_activation_dtype(const dev_device *d);
dev_dtype dev_cuda_auto_activation_dtype(const dev_device *d);
double dev_cuda_peak_flops(const dev_device *d);
void sample_driver_memory(dev_device *d);
void *cuda_alloc(dev_device *d, size_t bytes);
void cuda_free(dev_device *d, void *p);

/* device_cuda_streams.c: streams, events and copies */
dev_stream *cuda_stream_create(dev_device *d, const char *name);
void cuda_stream_destroy(dev_stream *s);
int cuda_stream_synchronize(dev_stream *s);
dev_event *cuda_event_create(dev_device *d);
void cuda_event_destroy(dev_event *e);
void cuda_event_record(dev_event *e, dev_stream *s);
void cuda_stream_wait_event(dev_stream *s, dev_event *e);
void cuda_copy_to_device(dev_stream *s, void *dst, const void *src, size_t bytes);
void cuda_copy_to_host(dev_stream *s, void *dst, const void *src, size_t bytes);
void cuda_copy(dev_stream *s, void *dst, const void *src, size_t bytes);
void cuda_zero(dev_stream *s, void *dst, size_t bytes);
void cuda_copy_2d(dev_stream *s, void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                  size_t width_bytes, size_t rows);

#endif /* STEPSCOPE_TRAINER_DEVICE_CUDA_INTERNAL_H */
