/*
 * cupti_convert.c — CUPTI activity record -> stepscope record (see
 * cupti_convert.h).
 *
 * Kinds handled: CONCURRENT_KERNEL (CUpti_ActivityKernel10), MEMCPY
 * (Memcpy6), MEMCPY2 (peer-to-peer, MemcpyPtoP4), MEMSET (Memset4),
 * SYNCHRONIZATION (Synchronization2), RUNTIME and DRIVER (CUpti_ActivityAPI),
 * OVERHEAD (Overhead3), EXTERNAL_CORRELATION (ExternalCorrelation: an
 * EXTERNAL_CORRELATION record, e.g. PyTorch operator ids), MEMORY2 (Memory4: a
 * device memory allocation or release as a MEMORY record, with the bytes the
 * device has allocated since tracing began, net of releases; other memory kinds
 * are not kept) and CONTEXT (learns context -> device). Kernels, copies and memsets whose start is
 * 0 (CUPTI could not time them) are counted in `untimed` and not written. Streams are keyed
 * (context id << 32 | stream id) so that ids stay unique across devices; each is declared once with
 * a STREAM record named "stream N". Synchronization records carry no device, so the device comes
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

/* ---- the preamble most kinds share ----
 *
 * A timed record starts the same way in every kind: a start and an end on
 * CUPTI's clock (converted to the trace's), most often a correlation id,
 * and for the activities of a stream (kernels, copies, memsets) a context,
 * a device and a stream. A kind's layout gives where its CUPTI struct keeps
 * them, so that begin_record writes them once; the cases of
 * sgpu_cupti_convert add what is particular to a kind. The records written
 * share the offsets of start_ns, end_ns, correlation_id and stream (checked
 * below); the device's differs, so the layout gives it. */

#define NO_FIELD UINT16_MAX

typedef struct kind_layout {
  uint16_t rec_kind;                /* stepscope_record_kind; 0: no layout */
  uint16_t start, end, correlation; /* offsets in the CUPTI record (correlation: or NO_FIELD) */
  uint16_t context, device, stream; /* likewise; NO_FIELD but for a stream's activities */
  uint16_t out_device;              /* the device's offset in the record's union member */
} kind_layout;

#define STREAM_KIND(T, rec, O)                                                                     \
  rec, offsetof(T, start), offsetof(T, end), offsetof(T, correlationId), offsetof(T, contextId),   \
      offsetof(T, deviceId), offsetof(T, streamId), offsetof(O, device)
#define HOST_KIND(T, rec, correlation)                                                             \
  rec, offsetof(T, start), offsetof(T, end), correlation, NO_FIELD, NO_FIELD, NO_FIELD, NO_FIELD

static const kind_layout layouts[] = {
    [CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] = {STREAM_KIND(CUpti_ActivityKernel10,
                                                           STEPSCOPE_REC_KERNEL, stepscope_kernel)},
    [CUPTI_ACTIVITY_KIND_MEMCPY] = {STREAM_KIND(CUpti_ActivityMemcpy6, STEPSCOPE_REC_MEMCPY,
                                                stepscope_memcpy)},
    [CUPTI_ACTIVITY_KIND_MEMCPY2] = {STREAM_KIND(CUpti_ActivityMemcpyPtoP4, STEPSCOPE_REC_MEMCPY,
                                                 stepscope_memcpy)},
    [CUPTI_ACTIVITY_KIND_MEMSET] = {STREAM_KIND(CUpti_ActivityMemset4, STEPSCOPE_REC_MEMSET,
                                                stepscope_memset)},
    [CUPTI_ACTIVITY_KIND_SYNCHRONIZATION] = {HOST_KIND(
        CUpti_ActivitySynchronization2, STEPSCOPE_REC_SYNC,
        offsetof(CUpti_ActivitySynchronization2, correlationId))},
    [CUPTI_ACTIVITY_KIND_RUNTIME] = {HOST_KIND(CUpti_ActivityAPI, STEPSCOPE_REC_API,
                                               offsetof(CUpti_ActivityAPI, correlationId))},
    [CUPTI_ACTIVITY_KIND_DRIVER] = {HOST_KIND(CUpti_ActivityAPI, STEPSCOPE_REC_API,
                                              offsetof(CUpti_ActivityAPI, correlationId))},
    [CUPTI_ACTIVITY_KIND_OVERHEAD] = {HOST_KIND(CUpti_ActivityOverhead3, STEPSCOPE_REC_OVERHEAD,
                                                NO_FIELD)},
};

/* The fields begin_record reads have the sizes it reads (start, end: 64
 * bits; ids: 32), and the records it writes keep theirs in one place. */
#define SIZES_64_32(T)                                                                             \
  _Static_assert(sizeof((T *)0)->start == 8 && sizeof((T *)0)->end == 8 &&                         \
                     sizeof((T *)0)->correlationId == 4,                                           \
                 #T " times and correlation id")
#define STREAM_SIZES(T)                                                                            \
  SIZES_64_32(T);                                                                                  \
  _Static_assert(sizeof((T *)0)->contextId == 4 && sizeof((T *)0)->deviceId == 4 &&                \
                     sizeof((T *)0)->streamId == 4,                                                \
                 #T " ids")
STREAM_SIZES(CUpti_ActivityKernel10);
STREAM_SIZES(CUpti_ActivityMemcpy6);
STREAM_SIZES(CUpti_ActivityMemcpyPtoP4);
STREAM_SIZES(CUpti_ActivityMemset4);
SIZES_64_32(CUpti_ActivitySynchronization2);
SIZES_64_32(CUpti_ActivityAPI);
_Static_assert(sizeof((CUpti_ActivityOverhead3 *)0)->start == 8 &&
                   sizeof((CUpti_ActivityOverhead3 *)0)->end == 8,
               "overhead times");
#define SAME_AT(O, f) (offsetof(O, f) == offsetof(stepscope_kernel, f))
_Static_assert(SAME_AT(stepscope_memcpy, start_ns) && SAME_AT(stepscope_memset, start_ns) &&
                   SAME_AT(stepscope_sync, start_ns) && SAME_AT(stepscope_api, start_ns) &&
                   SAME_AT(stepscope_overhead, start_ns) && SAME_AT(stepscope_memcpy, end_ns) &&
                   SAME_AT(stepscope_memset, end_ns) && SAME_AT(stepscope_sync, end_ns) &&
                   SAME_AT(stepscope_api, end_ns) && SAME_AT(stepscope_overhead, end_ns),
               "one place for the times");
_Static_assert(SAME_AT(stepscope_memcpy, correlation_id) &&
                   SAME_AT(stepscope_memset, correlation_id) &&
                   SAME_AT(stepscope_sync, correlation_id) &&
                   SAME_AT(stepscope_api, correlation_id) && SAME_AT(stepscope_memcpy, stream) &&
                   SAME_AT(stepscope_memset, stream) && SAME_AT(stepscope_sync, stream),
               "one place for the correlation id and the stream");

static const kind_layout *layout_of(const CUpti_Activity *a) {
  if ((size_t)a->kind >= sizeof layouts / sizeof layouts[0]) return NULL;
  return layouts[a->kind].rec_kind ? &layouts[a->kind] : NULL;
}

static uint64_t u64_at(const void *p, size_t off) {
  uint64_t v;
  memcpy(&v, (const char *)p + off, sizeof v);
  return v;
}

static uint32_t u32_at(const void *p, size_t off) {
  uint32_t v;
  memcpy(&v, (const char *)p + off, sizeof v);
  return v;
}

static void put_u64(void *p, size_t off, uint64_t v) {
  memcpy((char *)p + off, &v, sizeof v);
}

/* A timed record of a kind with a layout: a STREAM declaration first when
 * its stream is new, then the record, cleared, with its kind, times,
 * correlation id and, for a stream's activity, stream and device (its
 * context's device is learned). Returns the number of records written. */
static int begin_record(sgpu_cupti_converter *c, const CUpti_Activity *a, const kind_layout *l,
                        stepscope_record *out, int max) {
  int n = 0;
  uint64_t key = 0;
  uint32_t device = 0;
  if (l->stream != NO_FIELD) {
    uint32_t context = u32_at(a, l->context), stream = u32_at(a, l->stream);
    device = u32_at(a, l->device);
    learn_context(c, context, device);
    key = sgpu_cupti_stream_key(context, stream);
    n += declare_stream(c, key, stream, device, out, max);
  }
  stepscope_record *r = &out[n++];
  memset(r, 0, sizeof *r);
  r->kind = l->rec_kind;
  put_u64(&r->u, offsetof(stepscope_kernel, start_ns), to_trace(c, u64_at(a, l->start)));
  put_u64(&r->u, offsetof(stepscope_kernel, end_ns), to_trace(c, u64_at(a, l->end)));
  if (l->correlation != NO_FIELD)
    put_u64(&r->u, offsetof(stepscope_kernel, correlation_id), u32_at(a, l->correlation));
  if (l->stream != NO_FIELD) {
    put_u64(&r->u, offsetof(stepscope_kernel, stream), key);
    memcpy((char *)&r->u + l->out_device, &device, sizeof device);
  }
  return n;
}

static const char *overhead_name(uint32_t kind) {
  switch (kind) {
  case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "driver compiler";
  case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "cupti buffer flush";
  case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "cupti instrumentation";
  case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "cupti resource";
  case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "module loading";
  case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "lazy function loading";
  case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "command buffer full";
  case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "cupti buffer request";
  default: return "cupti overhead";
  }
}

/* Counts a record converted into n records (kept) or into none (ignored). */
static int counted(sgpu_cupti_converter *c, int n) {
  if (n)
    c->kept++;
  else
    c->ignored++;
  return n;
}

/* A device memory allocation or release (MEMORY2) as a MEMORY record: 1, or 0 when it is not
 * device memory, not an allocation or release, beyond SGPU_MAX_DEVICES or untimed. */
static int memory_record(sgpu_cupti_converter *c, const CUpti_ActivityMemory4 *m,
                         stepscope_record *out) {
  int alloc = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  int release = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  if (m->memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE || (!alloc && !release) ||
      m->deviceId >= SGPU_MAX_DEVICES)
    return 0;
  if (m->timestamp == 0) {
    c->untimed++;
    return 0;
  }
  uint64_t *in_use = &c->memory_in_use[m->deviceId];
  if (alloc)
    *in_use += m->bytes;
  else /* a release of memory allocated before tracing began takes what is counted */
    *in_use -= m->bytes < *in_use ? m->bytes : *in_use;
  memset(out, 0, sizeof *out);
  out->kind = STEPSCOPE_REC_MEMORY;
  out->u.memory.time_ns = to_trace(c, m->timestamp);
  out->u.memory.address = m->address;
  out->u.memory.bytes = m->bytes;
  out->u.memory.in_use_bytes = *in_use;
  out->u.memory.device = m->deviceId;
  out->u.memory.memory_kind = alloc ? STEPSCOPE_MEM_ALLOC : STEPSCOPE_MEM_FREE;
  return 1;
}

/* The kinds without a timed record of a layout: an external correlation (kept as its own
 * record), a memory allocation or release (memory_record) and a context (learned). Returns
 * the records written. */
static int other_record(sgpu_cupti_converter *c, const CUpti_Activity *a, stepscope_record *out) {
  if (a->kind == CUPTI_ACTIVITY_KIND_MEMORY2)
    return memory_record(c, (const CUpti_ActivityMemory4 *)a, out);
  if (a->kind == CUPTI_ACTIVITY_KIND_CONTEXT) {
    const CUpti_ActivityContext3 *x = (const CUpti_ActivityContext3 *)a;
    learn_context(c, x->contextId, x->deviceId);
  }
  if (a->kind != CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) return 0;
  const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *)a;
  c->external_correlations++;
  memset(out, 0, sizeof *out);
  out->kind = STEPSCOPE_REC_EXTERNAL_CORRELATION;
  out->u.external_correlation.correlation_id = x->correlationId;
  out->u.external_correlation.external_id = x->externalId;
  out->u.external_correlation.external_kind = (uint32_t)x->externalKind;
  return 1;
}

int sgpu_cupti_convert(sgpu_cupti_converter *c, const CUpti_Activity *a, stepscope_record *out,
                       int max) {
  if (!a || !out || max < 1) return 0;
  const kind_layout *l = layout_of(a);
  if (l && l->stream != NO_FIELD && u64_at(a, l->start) == 0) {
    /* CUPTI gives 0 timestamps when it had no device memory to time the
     * activity: it would land at time 0 of the trace. Counted, not written. */
    c->untimed++;
    return counted(c, 0);
  }
  int is_driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
  const char *api = NULL; /* a runtime or driver call's name */
  if (is_driver || a->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
    const CUpti_ActivityAPI *p = (const CUpti_ActivityAPI *)a;
    api = c->api_name ? c->api_name(c->ctx, is_driver, p->cbid) : NULL;
    if (api && !sgpu_cupti_api_is_kept(api)) l = NULL; /* not written */
  }
  if (!l) return counted(c, other_record(c, a, out));
  int n = begin_record(c, a, l, out, max);
  stepscope_record *r = &out[n - 1];
  switch (a->kind) {
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)a;
    stepscope_kernel *o = &r->u.kernel;
    o->graph_id = k->graphId;
    if (k->name != c->last_kernel_name || !c->last_kernel_name_id) {
      c->last_kernel_name = k->name;
      c->last_kernel_name_id = intern(c, k->name);
    }
    o->name = c->last_kernel_name_id;
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
    r->u.memcpy.bytes = m->bytes;
    r->u.memcpy.copy_kind = memcpy_kind(m->copyKind);
    r->u.memcpy.src_device = m->deviceId;
    r->u.memcpy.dst_device = m->deviceId;
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMCPY2: {
    const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)a;
    r->u.memcpy.bytes = m->bytes;
    r->u.memcpy.copy_kind = STEPSCOPE_MEMCPY_PTOP;
    r->u.memcpy.src_device = m->srcDeviceId;
    r->u.memcpy.dst_device = m->dstDeviceId;
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMSET: {
    const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)a;
    r->u.memset.bytes = m->bytes;
    r->u.memset.value = m->value;
    break;
  }
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
    const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)a;
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
    r->u.api.thread = p->threadId;
    r->u.api.name = intern(c, api);
    r->u.api.api_kind = is_driver ? STEPSCOPE_API_DRIVER : STEPSCOPE_API_RUNTIME;
    r->u.api.callback_id = p->cbid;
    r->u.api.return_code = (int32_t)p->returnValue;
    break;
  }
  case CUPTI_ACTIVITY_KIND_OVERHEAD: {
    const CUpti_ActivityOverhead3 *o = (const CUpti_ActivityOverhead3 *)a;
    r->u.overhead.thread =
        o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? o->objectId.pt.threadId : 0;
    r->u.overhead.name = intern(c, overhead_name(o->overheadKind));
    break;
  }
  default: break;
  }
  return counted(c, n);
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
