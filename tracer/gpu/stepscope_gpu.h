/*
 * stepscope_gpu.h — the GPU tracer's linked-mode API (library
 * `stepscope_gpu`, built when CUDA is available).
 *
 * A program that calls stepscope_start() itself (the trainer) calls
 * stepscope_gpu_start() right after it, before its first CUDA call if
 * possible, to record CUPTI activity (kernels, copies, memsets,
 * synchronizations, launch/copy/sync API calls, CUPTI overhead) into the same
 * trace, and stepscope_gpu_stop() before stepscope_stop(). NCCL collectives
 * are recorded when NCCL loads the plugin (NCCL_PROFILER_PLUGIN=<path of
 * libstepscope_inject.so>); NVTX ranges when NVTX_INJECTION64_PATH names the
 * same library, or when the program links `stepscope_nvtx_static`.
 *
 * Injected mode (`stepscope record`) needs none of this: CUDA calls
 * InitializeInjection in libstepscope_inject.so, which does the same.
 */
#ifndef STEPSCOPE_GPU_H
#define STEPSCOPE_GPU_H

#ifdef __cplusplus
extern "C" {
#endif

/* Starts CUPTI activity recording into the running trace. Returns 0, or -1
 * when it cannot (no trace running, CUPTI missing, too old or held by
 * another profiler; a warning is printed once). Never takes the process down. */
int stepscope_gpu_start(void);

/* Flushes every CUPTI buffer into the trace and stops recording. */
void stepscope_gpu_stop(void);

/* The trace's stream id of a CUDA stream (cudaStream_t): the key CUPTI's
 * records of that stream carry ((CUPTI context id << 32) | CUPTI stream id),
 * so that a program's STREAM declaration (its name for the stream) attaches
 * to the kernels recorded on it. 0 when recording is off or CUPTI cannot
 * tell. (cudaStreamGetId is NOT this id.) */
unsigned long long stepscope_gpu_stream_id(void *cuda_stream);

#ifdef __cplusplus
}
#endif

#endif /* STEPSCOPE_GPU_H */
