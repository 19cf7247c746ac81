/*
 * gpu_session.h — glue shared by the GPU sources of the tracer (CUPTI
 * activity, NVTX injection, NCCL profiler plugin): who starts the
 * process-wide trace in injected mode, the warn-once rule, and the few hooks
 * one source offers another.
 *
 * In injected mode (`stepscope record`), whichever entry point the process
 * reaches first — CUDA's InitializeInjection, NVTX's InitializeInjectionNvtx2
 * or NCCL's profiler init — calls sgpu_session_ensure(), which starts the
 * process-wide trace in $STEPSCOPE_RUN_DIR once and registers an exit
 * handler that flushes CUPTI and closes the file. In linked mode the program
 * has called stepscope_start() itself and sgpu_session_ensure() only reports
 * whether a trace is running.
 */
#ifndef STEPSCOPE_GPU_SESSION_H
#define STEPSCOPE_GPU_SESSION_H

#include <stdint.h>

#include "stepscope.h"

/* 1 when a process-wide trace is running in this process (starting it from
 * $STEPSCOPE_RUN_DIR when the process was launched by `stepscope record`),
 * 0 otherwise. Never fails loudly: a failed start warns once. */
int sgpu_session_ensure(void);

/* 1 when the main program exports stepscope_start (a linked program built
 * with exported symbols): our stepscope_* calls then reach its trace, and the
 * injected library must not start a second one. */
int sgpu_session_linked_program(void);

/* Prints "stepscope: <source>: <message>" on stderr the first time it is
 * called for `once_flag` (a per-source static int), then stays quiet. */
void sgpu_warn_once(int *once_flag, const char *source, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes one dropped record at the current time: `count` records of `source` (a
 * stepscope_drop_source) were lost. */
void sgpu_emit_dropped(uint64_t count, stepscope_drop_source source);

/* Hooks the CUPTI source installs when it runs (all NULL otherwise). */
typedef struct sgpu_hooks {
  /* Trace stream id of a CUDA stream handle (cudaStream_t), 0 if unknown. */
  uint64_t (*stream_id)(void *cuda_stream);
  /* CUDA device ordinal current on the calling thread, or -1. */
  int (*current_device)(void);
} sgpu_hooks;

extern sgpu_hooks sgpu_hook_table;

/* Registers a function the session's exit handler calls before the trace is
 * closed (CUPTI's forced flush, NVTX's drop count); at most 4, duplicates ignored. */
void sgpu_session_add_flush(void (*flush)(void));

/* The NCCL plugin's view of a driver kernel launch: CUPTI calls this on entry
 * to every cuLaunchKernel*-class call with its correlation id, and the plugin
 * attaches it to the NCCL group being launched on this thread, if any. */
void sgpu_nccl_note_launch_correlation(uint64_t correlation_id);

#endif /* STEPSCOPE_GPU_SESSION_H */
