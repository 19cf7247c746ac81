/*
 * nccl_profiler_common.h — the parts of NCCL's profiler-plugin ABI shared by
 * every interface version we implement (v4, v5, v6).
 *
 * NCCL loads a profiler plugin with dlopen() and looks up a symbol named
 * `ncclProfiler_vN` (highest N first): a struct of function pointers whose
 * layout is fixed per N. These declarations were written from NCCL's
 * plugins/profiler/README.md and the documented headers; they are ours, named
 * with our own prefix so that they never clash with NCCL's if both are seen.
 * The event-type bits and state numbers are part of NCCL's ABI and must keep
 * exactly these values.
 */
#ifndef STEPSCOPE_NCCL_PROFILER_COMMON_H
#define STEPSCOPE_NCCL_PROFILER_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ncclResult_t is a C enum (an int); ncclSuccess is 0, ncclInternalError 3. */
typedef int sgpu_nccl_result;
#define SGPU_NCCL_SUCCESS        0
#define SGPU_NCCL_INTERNAL_ERROR 3

/* NCCL's logger: level, subsystem flags, file, line, printf format. */
typedef void (*sgpu_nccl_logger)(int level, unsigned long flags, const char *file, int line,
                                 const char *fmt, ...);

/* Event types (bit flags; also the activation mask the plugin returns). */
enum {
  SGPU_NCCL_EV_GROUP = 1 << 0,
  SGPU_NCCL_EV_COLL = 1 << 1,
  SGPU_NCCL_EV_P2P = 1 << 2,
  SGPU_NCCL_EV_PROXY_OP = 1 << 3,
  SGPU_NCCL_EV_PROXY_STEP = 1 << 4,
  SGPU_NCCL_EV_PROXY_CTRL = 1 << 5,
  SGPU_NCCL_EV_KERNEL_CH = 1 << 6,
  SGPU_NCCL_EV_NET_PLUGIN = 1 << 7,
  SGPU_NCCL_EV_GROUP_API = 1 << 8,      /* v5+ */
  SGPU_NCCL_EV_COLL_API = 1 << 9,       /* v5+ */
  SGPU_NCCL_EV_P2P_API = 1 << 10,       /* v5+ */
  SGPU_NCCL_EV_KERNEL_LAUNCH = 1 << 11, /* v5+ */
  SGPU_NCCL_EV_CE_COLL = 1 << 12,       /* v6 */
  SGPU_NCCL_EV_CE_SYNC = 1 << 13,       /* v6 */
  SGPU_NCCL_EV_CE_BATCH = 1 << 14       /* v6 */
};

/* Event states passed to recordEventState (the ones we act on). */
enum {
  SGPU_NCCL_STATE_KERNEL_CH_STOP = 22, /* kernelCh: args carry the GPU stop timer */
  SGPU_NCCL_STATE_GROUP_START_API_STOP = 23,
  SGPU_NCCL_STATE_GROUP_END_API_START = 24,
  SGPU_NCCL_STATE_CE_COLL_START = 25,   /* v6 */
  SGPU_NCCL_STATE_CE_COLL_COMPLETE = 26 /* v6 */
};

/* State arguments (v4, v5 and v6 share this layout). */
typedef union sgpu_nccl_state_args {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void *data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} sgpu_nccl_state_args;

#endif /* STEPSCOPE_NCCL_PROFILER_COMMON_H */
