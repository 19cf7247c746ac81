/*
 * cuda_injection.c — the CUDA driver's entry into libstepscope_inject.so.
 *
 * When CUDA_INJECTION64_PATH names this library, the CUDA driver loads it
 * during cuInit and calls InitializeInjection(). We start the process-wide
 * trace (gpu_session.c) and CUPTI activity recording; whatever fails, we
 * return success so that CUDA goes on: the tracer never takes the job down.
 * In a linked program (gpu_session.h) nothing starts here: the program runs
 * CUPTI itself (stepscope_gpu_start), into the one shared trace.
 */
#include "gpu_session.h"
#include "stepscope_gpu.h"

__attribute__((visibility("default"))) int InitializeInjection(void);
__attribute__((visibility("default"))) int InitializeInjection(void) {
  if (sgpu_session_ensure()) stepscope_gpu_start();
  return 1;
}
