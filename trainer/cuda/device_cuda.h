/*
 * device_cuda.h — the CUDA backend of the device API (device.h), and what the
 * NCCL communicator and the trainer need from it.
 *
 * How it fits: the device begins with a dev_device_header whose table
 * (dev_cuda_ops) carries every operation, device-level ones included, so the
 * generic dev_* functions (device.c) work unchanged; dev_open("cuda") calls
 * dev_cuda_open. The functions below are what the NCCL communicator, the tests
 * and the trainer's CUDA-specific reporting (peak FLOPs, measured memory) use.
 *
 * Precision: "bf16" (default: bf16 tensor-core GEMMs on fp32 master weights,
 * fp32 optimizer state), "tf32" or "fp32" (see kernels/cuda/cuda_kernels.h).
 */
#ifndef STEPSCOPE_TRAINER_DEVICE_CUDA_H
#define STEPSCOPE_TRAINER_DEVICE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens CUDA device `ordinal` (-1: LOCAL_RANK modulo the device count, or 0).
 * precision NULL: $STEPSCOPE_PRECISION, else bf16. NULL with a message on failure,
 * e.g. when there is no GPU or no driver. */
dev_device *dev_cuda_open(int ordinal, const char *precision, char *err, size_t errlen);

/* The backend's table (to recognise a CUDA device: dev_get_ops(d) == dev_cuda_ops()). */
const dev_ops *dev_cuda_ops(void);
int dev_is_cuda(const dev_device *d);

dev_device *dev_cuda_stream_device(dev_stream *s);

/* The device's measured peak memory. Alone on its GPU: the largest (total - free) the
 * driver reported at synchronizations, minus what was in use when the device opened.
 * GPU shared by several ranks (LOCAL_WORLD_SIZE > GPUs): the device API's own peak,
 * since the driver's figure counts the other ranks' memory. *source (if not NULL)
 * names which, for the run metadata. */
size_t dev_cuda_measured_peak(const dev_device *d, const char **source);
/* The device ordinal, and the stream's cudaStream_t (as void * to keep CUDA headers
 * out of this header). */
int dev_cuda_ordinal(const dev_device *d);
void *dev_cuda_stream_handle(dev_stream *s);
/* The stream's id in the trace (CUPTI's key for it while the GPU tracer records, else the
 * CUDA stream id): what records of work on this stream carry as their `stream`. */
uint64_t dev_cuda_stream_trace_id(dev_stream *s);
/* Someone other than the device's operations (the NCCL communicator) is about to write
 * device memory starting at p: the device's bf16 weight copies may become stale. */
void dev_cuda_note_write(dev_device *d, const void *p);
/* Records the first error on the device (sticky), as a failed operation would. */
void dev_cuda_fail(dev_device *d, const char *msg);
/* A check that stream_synchronize calls about every 100 ms while it waits (the NCCL
 * communicator's watchdog: asynchronous errors, timeouts). A non-zero return ends the
 * wait with the message it wrote (the device becomes failed). Up to 8 checks. */
typedef int (*dev_cuda_wait_check)(void *arg, char *msg, size_t msglen);
int dev_cuda_add_wait_check(dev_device *d, dev_cuda_wait_check check, void *arg);
void dev_cuda_remove_wait_check(dev_device *d, void *arg);

/* Dense bf16 peak FLOP/s of a GPU from its name (see peak_flops.c); 0 if unknown. */
double dev_cuda_peak_flops_bf16(const char *device_name);
/* The table row that matched ("" if none), for messages. */
const char *dev_cuda_peak_table_match(const char *device_name);

#ifdef __cplusplus
}
#endif

#endif /* STEPSCOPE_TRAINER_DEVICE_CUDA_H */
