/*
 * nccl_profiler_v4.h — NCCL profiler plugin interface, version 4 (NCCL
 * 2.25–2.26, still accepted by later NCCL). Written from NCCL's documentation.
 *
 * Differences from v5: the event type is a byte, there are no API or
 * kernel-launch events, and init takes the communicator hash after the name.
 */
#ifndef STEPSCOPE_NCCL_PROFILER_V4_H
#define STEPSCOPE_NCCL_PROFILER_V4_H

#include "nccl_profiler_common.h"

typedef struct sgpu_nccl_descr_v4 {
  uint8_t type;
  void *parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char *func;
      const void *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      const char *datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char *algo;
      const char *proto;
    } coll;
    struct {
      const char *func;
      void *buff;
      const char *datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void *data;
    } netPlugin;
  };
} sgpu_nccl_descr_v4;

typedef struct sgpu_nccl_profiler_v4 {
  const char *name;
  sgpu_nccl_result (*init)(void **context, int *eActivationMask, const char *commName,
                           uint64_t commHash, int nNodes, int nranks, int rank,
                           sgpu_nccl_logger logfn);
  sgpu_nccl_result (*startEvent)(void *context, void **eHandle, sgpu_nccl_descr_v4 *eDescr);
  sgpu_nccl_result (*stopEvent)(void *eHandle);
  sgpu_nccl_result (*recordEventState)(void *eHandle, int eState, sgpu_nccl_state_args *eStateArgs);
  sgpu_nccl_result (*finalize)(void *context);
} sgpu_nccl_profiler_v4;

#endif /* STEPSCOPE_NCCL_PROFILER_V4_H */
