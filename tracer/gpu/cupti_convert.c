/*
 * cupti_convert.c — CUPTI activity record -> stepscope record (see
 * cupti_convert.h).
 *
 * Kinds handled: CONCURRENT_KERNEL (CUpti_ActivityKernel10), MEMCPY
 * (Memcpy6), MEMCPY2 (peer-to-peer, MemcpyPtoP4), MEMSET (Memset4),
 * SYNCHRONIZATION (Synchronization2), RUNTIME and DRIVER (CUpti_ActivityAPI),
 * OVERHEAD (Overhead3), EXTERNAL_CORRELATION (ExternalCorrelation: an
 * EXTERNAL_CORRELATION record, e.g. PyTorch operator ids) and CONTEXT (learns
 * context -> device). Kernels, copies and memsets whose start is 0 (CUPTI
 * could not time them) are counted in `untimed` and not written.
 * Streams are keyed (context id << 32 | stream id) so that ids stay unique
 * across devices; each is declared once with a STREAM record named
 * "stream N". Synchronization records carry no device, so the device comes
 * from the context map filled by kernels, copies and context records.
 */
#include "cupti_convert.h"

#include <stdio.h>
#include <string.h>

void sgpu_cupti_converter_init(sgpu_cupti_converter *c, sgpu_intern_fn intern,
                               sgpu_api_name_fn api_name, void *ctx) {
  memset(c, 0, sizeof *c);
  c->intern = intern;
  c->api_name = api_name;
  c->ctx = ctx;
}

uint64_t sgpu_cupti_stream_key(uint32_t context_id, uint32_t stream_id) {
  return ((uint64_t)context_id << 32) | stream_id;
}

static uint64_t to_trace(const sgpu_cupti_converter *c, uint64_t t) {
  if (t == 0) return 0;
  return (uint64_t)((int64_t)t + c->clock_offset_ns);
}

static void learn_context(sgpu_cupti_converter *c, uint32_t context_id, uint32_t device) {
  for (size_t i = 0; i < c->n_contexts; i++)
    if (c->context_ids[i] == context_id) {
      c->context_devices[i] = device;
      return;
    }
  if (c->n_contexts < SGPU_MAX_CONTEXTS) {
    c->context_ids[c->n_contexts] = context_id;
    c->context_devices[c->n_contexts++] = device;
  }
}

static uint32_t device_of_context(const sgpu_cupti_converter *c, uint32_t context_id) {
  for (size_t i = 0; i < c->n_contexts; i++)
    if (c->context_ids[i] == context_id) return c->context_devices[i];
  return 0;
}

/* Writes a STREAM declaration into out[0] the first time a stream is seen;
 * returns 1 if it did. */
static int declare_stream(sgpu_cupti_converter *c, uint64_t key, uint32_t stream_id,
                          uint32_t device, stepscope_record *out, int max) {
  if (max < 2) return 0;
  uint64_t tag = key + 1; /* 0 marks an empty slot */
  size_t slot = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 54) % SGPU_MAX_STREAMS;
  for (size_t probe = 0; probe < SGPU_MAX_STREAMS; probe++, slot = (slot + 1) % SGPU_MAX_STREAMS) {
    if (c->streams_declared[slot] == tag) return 0;
    if (c->streams_declared[slot] == 0) {
      c->streams_declared[slot] = tag;
      char name[32];
      snprintf(name, sizeof name, "stream %u", stream_id);
      memset(out, 0, sizeof *out);
      out->kind = STEPSCOPE_REC_STREAM;
      out->u.stream.stream = key;
      out->u.stream.device = device;
      out->u.stream.stream_kind = STEPSCOPE_STREAM_GPU;
      out->u.stream.name = c->intern ? c->intern(c->ctx, name) : 0;
      return 1;
    }
  }
  return 0; /* table full: records still carry the stream id */
}

static uint32_t memcpy_kind(uint8_t k) {
  switch (k) {
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return STEPSCOPE_MEMCPY_HTOD;
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return STEPSCOPE_MEMCPY_DTOH;
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return STEPSCOPE_MEMCPY_DTOD;
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return STEPSCOPE_MEMCPY_HTOH;
  case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return STEPSCOPE_MEMCPY_PTOP;
  default: return STEPSCOPE_MEMCPY_UNKNOWN;
  }
}

static uint32_t sync_kind(uint32_t t) {
  switch (t) {
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return STEPSCOPE_SYNC_EVENT;
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
    return STEPSCOPE_SYNC_STREAM_WAIT_EVENT;
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return STEPSCOPE_SYNC_STREAM;
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return STEPSCOPE_SYNC_CONTEXT;
  default: return STEPSCOPE_SYNC_UNKNOWN;
  }
}

static uint32_t intern(sgpu_cupti_converter *c, const char *s) {
  return c->intern && s ? c->intern(c->ctx, s) : 0;
}

/* Start of a timed GPU activity record, for the "no timing" check. */
static uint64_t activity_start(const CUpti_Activity *a) {
  switch (a->kind) {
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return ((const CUpti_ActivityKernel10 *)a)->start;
  case CUPTI_ACTIVITY_KIND_MEMCPY: return ((const CUpti_ActivityMemcpy6 *)a)->start;
  case CUPTI_ACTIVITY_KIND_MEMCPY2: return ((const CUpti_ActivityMemcpyPtoP4 *)a)->start;
  case CUPTI_ACTIVITY_KIND_MEMSET: return ((const CUpti_ActivityMemset4 *)a)->start;
  default: return 1;
  }
}

int sgpu_cupti_convert(sgpu_cupti_converter *c, const CUpti_Activity *a, stepscope_record *out,
                       int max) {
  if (!a || !out || max < 1) return 0;
  if (activity_start(a) == 0) {
    /* CUPTI gives 0 timestamps when it had no device memory to time the
     * activity: it would land at time 0 of the trace. Counted, not written. */
    c->untimed++;
    c->ignored++;
    return 0;
  }
  int n = 0;
  switch (a->kind) {
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)a;
    learn_context(c, k->contextId, k->deviceId);
    uint64_t key = sgpu_cupti_stream_key(k->contextId, k->streamId);
    n += declare_stream(c, key, k->streamId, k->deviceId, out, max);
    stepscope_record *r = &out[n++];
    memset(r, 0, sizeof *r);
    r->kind = STEPSCOPE_REC_KERNEL;
    stepscope_kernel *o = &r->u.kernel;
    o->start_ns = to_trace(c, k->start);
    o->end_ns = to_trace(c, k->end);
    o->correlation_id = k->correlationId;
    o->stream = key;
    o->graph_id = k->graphId;
    if (k->name != c->last_kernel_name || !c->last_kernel_name_id) {
      c->last_kernel_name = k->name;
      c->last_kernel_name_id = intern(c, k->name);
    }
    o->name = c->last_kernel_name_id;
    o->device = k->deviceId;
    o->grid[0] = (uint32_t)k->gridX;
    o->grid[1] = (uint32_t)k->gridY;
    o->grid[2] = (uint32_t)k->gridZ;
    o->block[0] = (uint32_t)k->blockX;
    o->block[1] = (uint32_t)k->blockY;
    o->block[2] = (uint32_t)k->blockZ;
    o->registers_per_thread = k->registersPerThread;
    o->static_shared_bytes = (uint32_t)k->staticSharedMemory;
    o->dynamic_shared_bytes = (uint32_t)k->dynamicSharedMemory;
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMCPY: {
    const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)a;
    learn_context(c, m->contextId, m->deviceId);
    uint64_t key = sgpu_cupti_stream_key(m->contextId, m->streamId);
    n += declare_stream(c, key, m->streamId, m->deviceId, out, max);
    stepscope_record *r = &out[n++];
    memset(r, 0, sizeof *r);
    r->kind = STEPSCOPE_REC_MEMCPY;
    r->u.memcpy.start_ns = to_trace(c, m->start);
    r->u.memcpy.end_ns = to_trace(c, m->end);
    r->u.memcpy.correlation_id = m->correlationId;
    r->u.memcpy.stream = key;
    r->u.memcpy.bytes = m->bytes;
    r->u.memcpy.device = m->deviceId;
    r->u.memcpy.copy_kind = memcpy_kind(m->copyKind);
    r->u.memcpy.src_device = m->deviceId;
    r->u.memcpy.dst_device = m->deviceId;
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMCPY2: {
    const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)a;
    learn_context(c, m->contextId, m->deviceId);
    uint64_t key = sgpu_cupti_stream_key(m->contextId, m->streamId);
    n += declare_stream(c, key, m->streamId, m->deviceId, out, max);
    stepscope_record *r = &out[n++];
    memset(r, 0, sizeof *r);
    r->kind = STEPSCOPE_REC_MEMCPY;
    r->u.memcpy.start_ns = to_trace(c, m->start);
    r->u.memcpy.end_ns = to_trace(c, m->end);
    r->u.memcpy.correlation_id = m->correlationId;
    r->u.memcpy.stream = key;
    r->u.memcpy.bytes = m->bytes;
    r->u.memcpy.device = m->deviceId;
    r->u.memcpy.copy_kind = STEPSCOPE_MEMCPY_PTOP;
    r->u.memcpy.src_device = m->srcDeviceId;
    r->u.memcpy.dst_device = m->dstDeviceId;
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMSET: {
    const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)a;
    learn_context(c, m->contextId, m->deviceId);
    uint64_t key = sgpu_cupti_stream_key(m->contextId, m->streamId);
    n += declare_stream(c, key, m->streamId, m->deviceId, out, max);
    stepscope_record *r = &out[n++];
    memset(r, 0, sizeof *r);
    r->kind = STEPSCOPE_REC_MEMSET;
    r->u.memset.start_ns = to_trace(c, m->start);
    r->u.memset.end_ns = to_trace(c, m->end);
    r->u.memset.correlation_id = m->correlationId;
    r->u.memset.stream = key;
    r->u.memset.bytes = m->bytes;
    r->u.memset.device = m->deviceId;
    r->u.memset.value = m->value;
    break;
  }
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
    const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)a;
    stepscope_record *r = &out[n++];
    memset(r, 0, sizeof *r);
    r->kind = STEPSCOPE_REC_SYNC;
    r->u.sync.start_ns = to_trace(c, s->start);
    r->u.sync.end_ns = to_trace(c, s->end);
    r->u.sync.correlation_id = s->correlationId;
    /* CUPTI uses streamId 0xffffffff (CUPTI_SYNCHRONIZATION_INVALID_VALUE) for "none". */
    r->u.sync.stream =
        s->streamId == UINT32_MAX ? 0 : sgpu_cupti_stream_key(s->contextId, s->streamId);
    r->u.sync.event_id = s->cudaEventId == UINT32_MAX ? 0 : s->cudaEventId;
    r->u.sync.device = device_of_context(c, s->contextId);
    r->u.sync.sync_kind = sync_kind(s->type);
    break;
  }
  case CUPTI_ACTIVITY_KIND_RUNTIME:
  case CUPTI_ACTIVITY_KIND_DRIVER: {
    const CUpti_ActivityAPI *p = (const CUpti_ActivityAPI *)a;
    int is_driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
    const char *name = c->api_name ? c->api_name(c->ctx, is_driver, p->cbid) : NULL;
    if (name && !sgpu_cupti_api_is_kept(name)) break;
    stepscope_record *r = &out[n++];
    memset(r, 0, sizeof *r);
    r->kind = STEPSCOPE_REC_API;
    r->u.api.start_ns = to_trace(c, p->start);
    r->u.api.end_ns = to_trace(c, p->end);
    r->u.api.correlation_id = p->correlationId;
    r->u.api.thread = p->threadId;
    r->u.api.name = intern(c, name);
    r->u.api.api_kind = is_driver ? STEPSCOPE_API_DRIVER : STEPSCOPE_API_RUNTIME;
    r->u.api.callback_id = p->cbid;
    r->u.api.return_code = (int32_t)p->returnValue;
    break;
  }
  case CUPTI_ACTIVITY_KIND_OVERHEAD: {
    const CUpti_ActivityOverhead3 *o = (const CUpti_ActivityOverhead3 *)a;
    const char *name = "cupti overhead";
    switch (o->overheadKind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: name = "driver compiler"; break;
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: name = "cupti buffer flush"; break;
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: name = "cupti instrumentation"; break;
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: name = "cupti resource"; break;
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: name = "module loading"; break;
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: name = "lazy function loading"; break;
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: name = "command buffer full"; break;
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: name = "cupti buffer request"; break;
    default: break;
    }
    stepscope_record *r = &out[n++];
    memset(r, 0, sizeof *r);
    r->kind = STEPSCOPE_REC_OVERHEAD;
    r->u.overhead.start_ns = to_trace(c, o->start);
    r->u.overhead.end_ns = to_trace(c, o->end);
    r->u.overhead.thread =
        o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? o->objectId.pt.threadId : 0;
    r->u.overhead.name = intern(c, name);
    break;
  }
  case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
    const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *)a;
    c->external_correlations++;
    stepscope_record *r = &out[n++];
    memset(r, 0, sizeof *r);
    r->kind = STEPSCOPE_REC_EXTERNAL_CORRELATION;
    r->u.external_correlation.correlation_id = x->correlationId;
    r->u.external_correlation.external_id = x->externalId;
    r->u.external_correlation.external_kind = (uint32_t)x->externalKind;
    break;
  }
  case CUPTI_ACTIVITY_KIND_CONTEXT: {
    const CUpti_ActivityContext3 *x = (const CUpti_ActivityContext3 *)a;
    learn_context(c, x->contextId, x->deviceId);
    break;
  }
  default: break;
  }
  if (n)
    c->kept++;
  else
    c->ignored++;
  return n;
}

static int starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

int sgpu_cupti_api_is_kept(const char *name) {
  if (!name) return 0;
  char base[96];
  size_t i = 0;
  for (; name[i] && name[i] != '_' && i < sizeof base - 1; i++)
    base[i] = name[i];
  base[i] = '\0';
  static const char *const prefixes[] = {"cudaLaunch",    "cuLaunch",   "cudaGraphLaunch",
                                         "cuGraphLaunch", "cudaMemcpy", "cuMemcpy",
                                         "cudaMemset",    "cuMemset"};
  for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++)
    if (starts_with(base, prefixes[k])) return 1;
  static const char *const exact[] = {
      "cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize",
      "cudaStreamWaitEvent",   "cudaEventRecord",      "cudaEventRecordWithFlags",
      "cuStreamSynchronize",   "cuEventSynchronize",   "cuCtxSynchronize",
      "cuStreamWaitEvent",     "cuEventRecord",        "cuEventRecordWithFlags"};
  for (size_t k = 0; k < sizeof exact / sizeof exact[0]; k++)
    if (strcmp(base, exact[k]) == 0) return 1;
  return 0;
}
