/*
 * nccl_profiler_core.h — the version-independent heart of the NCCL profiler
 * plugin. The per-version adapters (nccl_profiler_exports.c) translate each
 * ABI's descriptor into sgpu_nccl_event_desc and call these functions.
 */
#ifndef STEPSCOPE_NCCL_PROFILER_CORE_H
#define STEPSCOPE_NCCL_PROFILER_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_profiler_common.h"

typedef struct sgpu_nccl_event_desc {
  uint64_t type; /* one SGPU_NCCL_EV_* bit */
  void *parent;  /* parent event handle (ours), or NULL */
  int rank;
  const char *func, *datatype, *algo, *proto;
  uint64_t seq_number; /* NCCL's own sequence number (per function) */
  uint64_t count;
  int root, peer;
  unsigned channels;
  unsigned channel_id;
  uint64_t ptimer; /* kernelCh: GPU globaltimer at start */
  void *stream;    /* cudaStream_t of API / kernel-launch / CE events */
  bool graph_captured;
} sgpu_nccl_event_desc;

/* Events the plugin asks for, per interface version. */
int sgpu_nccl_activation_mask(int version);

/* init: creates the per-communicator context. Returns SGPU_NCCL_SUCCESS, or
 * an error (NCCL then disables the plugin) when no trace is running. */
sgpu_nccl_result sgpu_nccl_comm_init(void **context, int version, uint64_t comm_id,
                                     const char *comm_name, int nnodes, int nranks, int rank,
                                     int *activation_mask);
sgpu_nccl_result sgpu_nccl_comm_finalize(void *context);

/* Writes every operation still waiting for KernelCh events (the session's
 * exit handler calls it before the trace is closed). */
void sgpu_nccl_flush_unfinished(void);

/* Returns the new event handle, or NULL for events we do not follow. */
void *sgpu_nccl_event_start(void *context, const sgpu_nccl_event_desc *d);
void sgpu_nccl_event_stop(void *handle);
void sgpu_nccl_event_state(void *handle, int state, const sgpu_nccl_state_args *args);

/* The core's entry points as one table, exported from every binary that
 * holds the core (default visibility) so that a process has ONE core: the
 * injected plugin (libstepscope_inject.so, loaded by NCCL) routes NCCL's
 * calls to the table of the main program when that program links the GPU
 * tracer itself and exports its symbols (stepscope-train: -rdynamic). The
 * program's CUPTI source then feeds the same core the launch correlation ids
 * and stream ids the plugin's records need; two private copies never would.
 * `abi` and `desc_size` guard against a program built from other sources. */
#define SGPU_NCCL_CORE_ABI 1u
typedef struct sgpu_nccl_core_api {
  unsigned abi;
  unsigned desc_size; /* sizeof(sgpu_nccl_event_desc) */
  sgpu_nccl_result (*comm_init)(void **context, int version, uint64_t comm_id,
                                const char *comm_name, int nnodes, int nranks, int rank,
                                int *activation_mask);
  sgpu_nccl_result (*comm_finalize)(void *context);
  void *(*event_start)(void *context, const sgpu_nccl_event_desc *d);
  void (*event_stop)(void *handle);
  void (*event_state)(void *handle, int state, const sgpu_nccl_state_args *args);
} sgpu_nccl_core_api;

#define SGPU_NCCL_CORE_SYMBOL "stepscope_nccl_core_v1"
extern const sgpu_nccl_core_api
    sgpu_nccl_core_local; /* this binary's; exported as the symbol above */

/* Counters for tests and the exit summary. */
typedef struct sgpu_nccl_stats {
  uint64_t collectives_written;
  uint64_t events_live;
  uint64_t allocation_failures;
  uint64_t late_events;        /* stop/KernelCh for an event that had already ended */
  uint64_t flushed_unfinished; /* operations written at finalize/exit, KernelCh missing */
} sgpu_nccl_stats;
void sgpu_nccl_get_stats(sgpu_nccl_stats *out);

#endif /* STEPSCOPE_NCCL_PROFILER_CORE_H */
