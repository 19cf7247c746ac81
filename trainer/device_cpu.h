/*
 * device_cpu.h — the CPU backend's task interface, for code that adds
 * operations to CPU streams (the shared-memory communicator, comm_shm*.c, and the
 * backend's own model operations, device_cpu_ops.c).
 *
 * How it works: an operation is a `cpu_task`, a closure (a run function plus
 * its arguments copied into the task) with the facts the trace needs (name,
 * category, flops, bytes, the collective it belongs to). `cpu_stream_enqueue`
 * copies the task into the stream's queue and writes the HOST_ENQUEUE API
 * record on the calling thread; the stream's worker thread runs it, writes its
 * HOST_OP record (same correlation id) and calls `done` with the start and end
 * times, so that a communicator can write its COLLECTIVE record.
 */
#ifndef STEPSCOPE_TRAINER_DEVICE_CPU_H
#define STEPSCOPE_TRAINER_DEVICE_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

typedef struct cpu_task cpu_task;

/* An activation argument of a compute task (p[index]): rows of `width` elements,
 * `stride` elements apart. With bf16 activations the task runs on fp32 copies of these
 * (device_cpu_ops.c); `written` ones are rounded back into the bf16 buffer afterwards.
 * `bf16_always`: stored in bf16 whatever the activation type (a bf16 weight), so staged
 * with fp32 activations too. */
typedef struct cpu_act_arg {
  int index;
  int written;
  int bf16_always;
  size_t rows, width, stride;
} cpu_act_arg;

#define CPU_TASK_MAX_ACTS 6

struct cpu_task {
  /* Runs the operation; returns 0, or -1 after writing a message into err. */
  int (*run)(cpu_task *t, char *err, size_t errlen);
  /* Optional: called after run succeeded, with the trace times, on the worker. */
  void (*done)(cpu_task *t, uint64_t start_ns, uint64_t end_ns);
  const char *name;  /* static string: the op name in the trace */
  uint32_t category; /* stepscope_category */
  uint64_t flops, bytes;
  uint64_t comm_id, seq;    /* when the task executes a collective */
  uint64_t correlation;     /* filled by cpu_stream_enqueue */
  uint64_t stream_trace_id; /* filled by cpu_stream_enqueue */
  void *ctx;                /* the owner's object (communicator...) */
  void *p[8];
  int64_t i[10];
  double f[8];
  cpu_act_arg acts[CPU_TASK_MAX_ACTS]; /* compute tasks: the activation arguments */
  int nacts;
  int (*staged_run)(cpu_task *t, char *err, size_t errlen); /* run when staged in fp32 */
  /* Optional (compute tasks): writes the operation's inputs into buf, in the form PyTorch's
   * profiler records them ({"Input Dims":[...],"Input type":[...],"Concrete Inputs":[...]},
   * `act_type` the activations' element type name), for the trace's host op record; called
   * after run succeeded, when tracing (docs/ops.md "The trainer's ops"). */
  void (*inputs)(const cpu_task *t, const char *act_type, char *buf, size_t cap);
  cpu_task *next; /* queue link, owned by the stream */
};

/* Enqueues a copy of *t on s. Returns 0, or -1 when out of memory (the stream
 * then carries the error). */
int cpu_stream_enqueue(dev_stream *s, const cpu_task *t);

/* The activation type of the device a stream belongs to (device_cpu_ops.c stages bf16
 * activations through fp32 when it is DEV_BF16). */
dev_dtype cpu_stream_activation_dtype(const dev_stream *s);
/* Puts the model operations (device_cpu_ops.c: encoder ... adamw) into the CPU backend's
 * table; device_cpu.c fills in the device-level ones. */
void dev_cpu_fill_model_ops(dev_ops *o);

/* Whether a device (any of its streams) has failed or was aborted. */
int cpu_device_failed(const dev_device *d);

#endif /* STEPSCOPE_TRAINER_DEVICE_CPU_H */
