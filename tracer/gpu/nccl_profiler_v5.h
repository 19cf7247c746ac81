/*
 * nccl_profiler_v5.h — NCCL profiler plugin interface, version 5: the newest
 * version NCCL 2.27–2.28 looks for. Written from NCCL's documentation.
 *
 * New in v5: a 64-bit event type; API events (group, collective, p2p) that
 * parent the collective and kernel-launch events; kernel-launch events around
 * the cuLaunchKernel call; init takes the communicator id first.
 * Hierarchy: GroupApi -> CollApi -> Coll -> KernelCh, GroupApi -> KernelLaunch.
 */
#ifndef STEPSCOPE_NCCL_PROFILER_V5_H
#define STEPSCOPE_NCCL_PROFILER_V5_H

#include "nccl_profiler_common.h"

/* The v5 union members; v6 appends its own after these. */
#define SGPU_NCCL_DESCR_V5_MEMBERS                                                                 \
  struct {                                                                                         \
    bool graphCaptured;                                                                            \
    int groupDepth;                                                                                \
  } groupApi;                                                                                      \
  struct {                                                                                         \
    const char *func;                                                                              \
    size_t count;                                                                                  \
    const char *datatype;                                                                          \
    int root;                                                                                      \
    void *stream;                                                                                  \
    bool graphCaptured;                                                                            \
  } collApi;                                                                                       \
  struct {                                                                                         \
    const char *func;                                                                              \
    size_t count;                                                                                  \
    const char *datatype;                                                                          \
    void *stream;                                                                                  \
    bool graphCaptured;                                                                            \
  } p2pApi;                                                                                        \
  struct {                                                                                         \
    void *stream;                                                                                  \
  } kernelLaunch;                                                                                  \
  struct {                                                                                         \
    uint64_t seqNumber;                                                                            \
    const char *func;                                                                              \
    const void *sendBuff;                                                                          \
    void *recvBuff;                                                                                \
    size_t count;                                                                                  \
    int root;                                                                                      \
    const char *datatype;                                                                          \
    uint8_t nChannels;                                                                             \
    uint8_t nWarps;                                                                                \
    const char *algo;                                                                              \
    const char *proto;                                                                             \
    void *parentGroup;                                                                             \
  } coll;                                                                                          \
  struct {                                                                                         \
    const char *func;                                                                              \
    void *buff;                                                                                    \
    const char *datatype;                                                                          \
    size_t count;                                                                                  \
    int peer;                                                                                      \
    uint8_t nChannels;                                                                             \
    void *parentGroup;                                                                             \
  } p2p;                                                                                           \
  struct {                                                                                         \
    pid_t pid;                                                                                     \
    uint8_t channelId;                                                                             \
    int peer;                                                                                      \
    int nSteps;                                                                                    \
    int chunkSize;                                                                                 \
    int isSend;                                                                                    \
  } proxyOp;                                                                                       \
  struct {                                                                                         \
    int step;                                                                                      \
  } proxyStep;                                                                                     \
  struct {                                                                                         \
    uint8_t channelId;                                                                             \
    uint64_t pTimer;                                                                               \
  } kernelCh;                                                                                      \
  struct {                                                                                         \
    int64_t id;                                                                                    \
    void *data;                                                                                    \
  } netPlugin;

typedef struct sgpu_nccl_descr_v5 {
  uint64_t type;
  void *parentObj;
  int rank;
  union {
    SGPU_NCCL_DESCR_V5_MEMBERS
  };
} sgpu_nccl_descr_v5;

typedef struct sgpu_nccl_profiler_v5 {
  const char *name;
  sgpu_nccl_result (*init)(void **context, uint64_t commId, int *eActivationMask,
                           const char *commName, int nNodes, int nranks, int rank,
                           sgpu_nccl_logger logfn);
  sgpu_nccl_result (*startEvent)(void *context, void **eHandle, sgpu_nccl_descr_v5 *eDescr);
  sgpu_nccl_result (*stopEvent)(void *eHandle);
  sgpu_nccl_result (*recordEventState)(void *eHandle, int eState, sgpu_nccl_state_args *eStateArgs);
  sgpu_nccl_result (*finalize)(void *context);
} sgpu_nccl_profiler_v5;

#endif /* STEPSCOPE_NCCL_PROFILER_V5_H */
