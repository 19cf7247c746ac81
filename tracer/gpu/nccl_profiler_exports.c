/*
 * nccl_profiler_exports.c — the `ncclProfiler_v6`, `_v5` and `_v4` symbols
 * NCCL looks up in a profiler plugin (newest first: NCCL 2.29+ takes v6,
 * 2.27–2.28 take v5, 2.25–2.26 take v4).
 *
 * Each adapter copies its version's descriptor into the version-neutral
 * sgpu_nccl_event_desc and calls the process's one NCCL core (core(), below:
 * the main program's when it links the GPU tracer itself, else this
 * library's). Every entry point returns success except init when no trace
 * runs and none will (not a linked program), which makes NCCL disable the
 * plugin: the plugin never makes an NCCL call fail.
 */
#include <dlfcn.h>
#include <string.h>

#include "nccl_profiler_core.h"
#include "nccl_profiler_v4.h"
#include "nccl_profiler_v5.h"
#include "nccl_profiler_v6.h"

#define SGPU_EXPORT __attribute__((visibility("default")))

/* Fills the fields v5 and v6 share (v6 extends v5's union). */
#define FILL_FROM_V5_UNION(out, in)                                                                \
  do {                                                                                             \
    switch ((in)->type) {                                                                          \
    case SGPU_NCCL_EV_GROUP_API: (out)->graph_captured = (in)->groupApi.graphCaptured; break;      \
    case SGPU_NCCL_EV_COLL_API:                                                                    \
      (out)->func = (in)->collApi.func;                                                            \
      (out)->count = (in)->collApi.count;                                                          \
      (out)->datatype = (in)->collApi.datatype;                                                    \
      (out)->root = (in)->collApi.root;                                                            \
      (out)->stream = (in)->collApi.stream;                                                        \
      (out)->graph_captured = (in)->collApi.graphCaptured;                                         \
      break;                                                                                       \
    case SGPU_NCCL_EV_P2P_API:                                                                     \
      (out)->func = (in)->p2pApi.func;                                                             \
      (out)->count = (in)->p2pApi.count;                                                           \
      (out)->datatype = (in)->p2pApi.datatype;                                                     \
      (out)->stream = (in)->p2pApi.stream;                                                         \
      (out)->graph_captured = (in)->p2pApi.graphCaptured;                                          \
      break;                                                                                       \
    case SGPU_NCCL_EV_KERNEL_LAUNCH: (out)->stream = (in)->kernelLaunch.stream; break;             \
    case SGPU_NCCL_EV_COLL:                                                                        \
      (out)->seq_number = (in)->coll.seqNumber;                                                    \
      (out)->func = (in)->coll.func;                                                               \
      (out)->count = (in)->coll.count;                                                             \
      (out)->root = (in)->coll.root;                                                               \
      (out)->datatype = (in)->coll.datatype;                                                       \
      (out)->channels = (in)->coll.nChannels;                                                      \
      (out)->algo = (in)->coll.algo;                                                               \
      (out)->proto = (in)->coll.proto;                                                             \
      break;                                                                                       \
    case SGPU_NCCL_EV_P2P:                                                                         \
      (out)->func = (in)->p2p.func;                                                                \
      (out)->datatype = (in)->p2p.datatype;                                                        \
      (out)->count = (in)->p2p.count;                                                              \
      (out)->peer = (in)->p2p.peer;                                                                \
      (out)->channels = (in)->p2p.nChannels;                                                       \
      break;                                                                                       \
    case SGPU_NCCL_EV_KERNEL_CH:                                                                   \
      (out)->channel_id = (in)->kernelCh.channelId;                                                \
      (out)->ptimer = (in)->kernelCh.pTimer;                                                       \
      break;                                                                                       \
    default: break;                                                                                \
    }                                                                                              \
  } while (0)

static void desc_init(sgpu_nccl_event_desc *out, uint64_t type, void *parent, int rank) {
  memset(out, 0, sizeof *out);
  out->type = type;
  out->parent = parent;
  out->rank = rank;
  out->root = -1;
  out->peer = -1;
}

/* ---- the one core of the process ------------------------------------------ */

/* The core NCCL's calls go to, looked up once: the first definition of
 * SGPU_NCCL_CORE_SYMBOL in the process's global scope (the main program
 * comes first; a plain program has none, and NCCL loads this library
 * RTLD_LOCAL), if it was built from these sources; else our own copy. */
static const sgpu_nccl_core_api *core(void) {
  static const sgpu_nccl_core_api *chosen;
  const sgpu_nccl_core_api *c = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
  if (c) return c;
  c = &sgpu_nccl_core_local;
  const sgpu_nccl_core_api *found = dlsym(RTLD_DEFAULT, SGPU_NCCL_CORE_SYMBOL);
  if (found && found->abi == SGPU_NCCL_CORE_ABI && found->desc_size == sizeof(sgpu_nccl_event_desc))
    c = found;
  __atomic_store_n(&chosen, c, __ATOMIC_RELEASE);
  return c;
}

/* ---- shared by all versions ------------------------------------------------ */

static sgpu_nccl_result stop_event(void *handle) {
  core()->event_stop(handle);
  return SGPU_NCCL_SUCCESS;
}

static sgpu_nccl_result record_state(void *handle, int state, sgpu_nccl_state_args *args) {
  core()->event_state(handle, state, args);
  return SGPU_NCCL_SUCCESS;
}

static sgpu_nccl_result finalize(void *context) {
  return core()->comm_finalize(context);
}

/* ---- v6 ---------------------------------------------------------------------- */

static sgpu_nccl_result init_v6(void **context, uint64_t comm_id, int *mask, const char *name,
                                int nnodes, int nranks, int rank, sgpu_nccl_logger log) {
  return core()->comm_init(context, 6, comm_id, name, nnodes, nranks, rank, mask);
}

static sgpu_nccl_result start_v6(void *context, void **handle, sgpu_nccl_descr_v6 *d) {
  *handle = NULL;
  if (!d) return SGPU_NCCL_SUCCESS;
  sgpu_nccl_event_desc e;
  desc_init(&e, d->type, d->parentObj, d->rank);
  FILL_FROM_V5_UNION(&e, d);
  if (d->type == SGPU_NCCL_EV_CE_COLL) {
    e.seq_number = d->ceColl.seqNumber;
    e.func = d->ceColl.func;
    e.count = d->ceColl.count;
    e.root = d->ceColl.root;
    e.datatype = d->ceColl.datatype;
    e.stream = d->ceColl.stream;
    e.algo = "CE";
  }
  *handle = core()->event_start(context, &e);
  return SGPU_NCCL_SUCCESS;
}

SGPU_EXPORT const sgpu_nccl_profiler_v6 ncclProfiler_v6 = {"stepscope", init_v6,      start_v6,
                                                           stop_event,  record_state, finalize};

/* ---- v5 ---------------------------------------------------------------------- */

static sgpu_nccl_result init_v5(void **context, uint64_t comm_id, int *mask, const char *name,
                                int nnodes, int nranks, int rank, sgpu_nccl_logger log) {
  return core()->comm_init(context, 5, comm_id, name, nnodes, nranks, rank, mask);
}

static sgpu_nccl_result start_v5(void *context, void **handle, sgpu_nccl_descr_v5 *d) {
  *handle = NULL;
  if (!d) return SGPU_NCCL_SUCCESS;
  sgpu_nccl_event_desc e;
  desc_init(&e, d->type, d->parentObj, d->rank);
  FILL_FROM_V5_UNION(&e, d);
  *handle = core()->event_start(context, &e);
  return SGPU_NCCL_SUCCESS;
}

SGPU_EXPORT const sgpu_nccl_profiler_v5 ncclProfiler_v5 = {"stepscope", init_v5,      start_v5,
                                                           stop_event,  record_state, finalize};

/* ---- v4 ---------------------------------------------------------------------- */

static sgpu_nccl_result init_v4(void **context, int *mask, const char *name, uint64_t comm_hash,
                                int nnodes, int nranks, int rank, sgpu_nccl_logger log) {
  return core()->comm_init(context, 4, comm_hash, name, nnodes, nranks, rank, mask);
}

static sgpu_nccl_result start_v4(void *context, void **handle, sgpu_nccl_descr_v4 *d) {
  *handle = NULL;
  if (!d) return SGPU_NCCL_SUCCESS;
  sgpu_nccl_event_desc e;
  desc_init(&e, d->type, d->parentObj, d->rank);
  switch (d->type) {
  case SGPU_NCCL_EV_COLL:
    e.seq_number = d->coll.seqNumber;
    e.func = d->coll.func;
    e.count = d->coll.count;
    e.root = d->coll.root;
    e.datatype = d->coll.datatype;
    e.channels = d->coll.nChannels;
    e.algo = d->coll.algo;
    e.proto = d->coll.proto;
    break;
  case SGPU_NCCL_EV_P2P:
    e.func = d->p2p.func;
    e.datatype = d->p2p.datatype;
    e.count = d->p2p.count;
    e.peer = d->p2p.peer;
    e.channels = d->p2p.nChannels;
    break;
  case SGPU_NCCL_EV_KERNEL_CH:
    e.channel_id = d->kernelCh.channelId;
    e.ptimer = d->kernelCh.pTimer;
    break;
  default: break;
  }
  *handle = core()->event_start(context, &e);
  return SGPU_NCCL_SUCCESS;
}

SGPU_EXPORT const sgpu_nccl_profiler_v4 ncclProfiler_v4 = {"stepscope", init_v4,      start_v4,
                                                           stop_event,  record_state, finalize};
