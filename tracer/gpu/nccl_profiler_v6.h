/*
 * nccl_profiler_v6.h — NCCL profiler plugin interface, version 6 (NCCL 2.29+).
 * Written from NCCL's documentation.
 *
 * v6 keeps v5's descriptor and appends copy-engine (CE) collective
 * descriptors to the union; the function table has v5's shape with the v6
 * descriptor type. CE collectives carry their own sequence number and stream.
 */
#ifndef STEPSCOPE_NCCL_PROFILER_V6_H
#define STEPSCOPE_NCCL_PROFILER_V6_H

#include "nccl_profiler_v5.h"

typedef struct sgpu_nccl_descr_v6 {
  uint64_t type;
  void *parentObj;
  int rank;
  union {
    SGPU_NCCL_DESCR_V5_MEMBERS
    struct {
      uint64_t seqNumber;
      const char *func;
      const void *sendBuff;
      void *recvBuff;
      size_t count;
      int root;
      const char *datatype;
      const char *syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void *stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
} sgpu_nccl_descr_v6;

typedef struct sgpu_nccl_profiler_v6 {
  const char *name;
  sgpu_nccl_result (*init)(void **context, uint64_t commId, int *eActivationMask,
                           const char *commName, int nNodes, int nranks, int rank,
                           sgpu_nccl_logger logfn);
  sgpu_nccl_result (*startEvent)(void *context, void **eHandle, sgpu_nccl_descr_v6 *eDescr);
  sgpu_nccl_result (*stopEvent)(void *eHandle);
  sgpu_nccl_result (*recordEventState)(void *eHandle, int eState, sgpu_nccl_state_args *eStateArgs);
  sgpu_nccl_result (*finalize)(void *context);
} sgpu_nccl_profiler_v6;

#endif /* STEPSCOPE_NCCL_PROFILER_V6_H */
