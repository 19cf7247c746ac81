/*
 * device.c — the backend-independent part of the device API (device.h).
 *
 * How it works: dev_open picks a backend by name and calls its constructor;
 * every other dev_* function finds the backend's operation table in the
 * dev_device_header that starts each backend's device object and calls
 * through it. Adding the CUDA backend means adding device_cuda.c (its
 * operation table and dev_cuda_open) and one case here.
 */
#include "device.h"

#include <stdio.h>
#include <string.h>

#ifdef STEPSCOPE_TRAINER_HAVE_CUDA
#include "device_cuda.h"
#endif

const dev_ops *dev_backend_ops(const char *backend) {
  if (!strcmp(backend, "cpu")) return dev_cpu_ops();
#ifdef STEPSCOPE_TRAINER_HAVE_CUDA
  if (!strcmp(backend, "cuda")) return dev_cuda_ops();
#endif
  return NULL;
}

int dev_ops_support_cp(const dev_ops *ops, const char **missing) {
  const char *none = NULL;
  if (!ops->copy_2d)
    none = "copy_2d";
  else if (!ops->attention_block_forward)
    none = "attention_block_forward";
  else if (!ops->attention_block_backward)
    none = "attention_block_backward";
  if (missing) *missing = none;
  return none == NULL;
}

static const dev_ops *ops_of(const dev_device *d) {
  return ((const dev_device_header *)d)->ops;
}

dev_device *dev_open(const char *backend, char *err, size_t errlen) {
  if (!strcmp(backend, "cpu")) return dev_cpu_open(err, errlen);
#ifdef STEPSCOPE_TRAINER_HAVE_CUDA
  if (!strcmp(backend, "cuda")) return dev_cuda_open(-1, NULL, err, errlen);
  if (!strcmp(backend, "auto")) {
    char ignored[256];
    dev_device *d = dev_cuda_open(-1, NULL, ignored, sizeof ignored);
    return d ? d : dev_cpu_open(err, errlen); /* no GPU or driver: the CPU backend */
  }
#else
  if (!strcmp(backend, "auto")) return dev_cpu_open(err, errlen);
  if (!strcmp(backend, "cuda")) {
    snprintf(err, errlen, "--backend cuda: the CUDA backend is not built into this binary");
    return NULL;
  }
#endif
  snprintf(err, errlen, "--backend %s: unknown backend (cpu, cuda or auto)", backend);
  return NULL;
}

void dev_close(dev_device *d) {
  if (d) ops_of(d)->close(d);
}

const dev_ops *dev_get_ops(const dev_device *d) {
  return ops_of(d);
}
const char *dev_name(const dev_device *d) {
  return ops_of(d)->name(d);
}
const char *dev_last_error(const dev_device *d) {
  return ops_of(d)->last_error(d);
}
void dev_trace_started(dev_device *d) {
  ops_of(d)->trace_started(d);
}
void dev_set_progress_hook(dev_device *d, void (*hook)(void *arg), void *arg) {
  ops_of(d)->set_progress_hook(d, hook, arg);
}
size_t dev_bytes_in_use(const dev_device *d) {
  return ops_of(d)->bytes_in_use(d);
}
size_t dev_bytes_peak(const dev_device *d) {
  return ops_of(d)->bytes_peak(d);
}
void dev_abort(dev_device *d, const char *why) {
  ops_of(d)->abort(d, why);
}

dev_dtype dev_auto_activation_dtype(const dev_device *d) {
  return ops_of(d)->auto_activation_dtype ? ops_of(d)->auto_activation_dtype(d) : DEV_F32;
}

double dev_peak_flops(const dev_device *d) {
  return ops_of(d)->peak_flops ? ops_of(d)->peak_flops(d) : 0;
}

size_t dev_measured_peak(const dev_device *d, const char **source) {
  if (ops_of(d)->measured_peak) return ops_of(d)->measured_peak(d, source);
  if (source) *source = "device-allocations";
  return dev_bytes_peak(d);
}

int dev_attention_fused(const dev_device *d, int B, int T, int C, int NH) {
  return ops_of(d)->attention_fused ? ops_of(d)->attention_fused(d, B, T, C, NH) : 0;
}

dev_dtype dev_activation_dtype(const dev_device *d) {
  return ops_of(d)->activation_dtype(d);
}

int dev_set_activation_dtype(dev_device *d, dev_dtype t, char *err, size_t errlen) {
  return ops_of(d)->set_activation_dtype(d, t, err, errlen);
}
