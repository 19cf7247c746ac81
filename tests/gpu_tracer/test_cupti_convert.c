/*
 * test_cupti_convert.c — CUPTI activity records built by hand (the structs
 * of the CUPTI 13 headers) go through sgpu_cupti_convert; checks every
 * field that reaches the trace, the stream declarations, the clock offset,
 * the context -> device map used by synchronization records, and the API
 * name filter. Needs CUPTI's headers only, no GPU and no libcupti call.
 */
#include "cupti_convert.h"
#include "trace_check.h"

static const char *interned[64];
static uint32_t n_interned;

static uint32_t fake_intern(void *ctx, const char *s) {
  for (uint32_t i = 0; i < n_interned; i++)
    if (strcmp(interned[i], s) == 0) return i + 1;
  interned[n_interned] = strdup(s);
  return ++n_interned;
}

static const char *fake_api_name(void *ctx, int is_driver, uint32_t cbid) {
  if (is_driver) return cbid == 652 ? "cuLaunchKernelEx" : "cuCtxGetCurrent";
  return cbid == 211 ? "cudaLaunchKernel_v7000" : "cudaGetDevice_v3020";
}

static const char *name_of(uint32_t id) {
  return id && id <= n_interned ? interned[id - 1] : "";
}

int main(void) {
  sgpu_cupti_converter c;
  sgpu_cupti_converter_init(&c, fake_intern, fake_api_name, NULL);
  c.clock_offset_ns = -1000;
  stepscope_record out[4];

  CUpti_ActivityKernel10 k;
  memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 5000;
  k.end = 9000;
  k.deviceId = 3;
  k.contextId = 7;
  k.streamId = 13;
  k.correlationId = 99;
  k.gridX = 128;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.registersPerThread = 40;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 4096;
  k.graphId = 5;
  k.name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";
  int n = sgpu_cupti_convert(&c, (CUpti_Activity *)&k, out, 4);
  CHECK(n == 2);
  CHECK(out[0].kind == STEPSCOPE_REC_STREAM);
  CHECK(out[0].u.stream.stream == sgpu_cupti_stream_key(7, 13));
  CHECK(out[0].u.stream.stream_kind == STEPSCOPE_STREAM_GPU && out[0].u.stream.device == 3);
  CHECK(strcmp(name_of(out[0].u.stream.name), "stream 13") == 0);
  const stepscope_kernel *ko = &out[1].u.kernel;
  CHECK(out[1].kind == STEPSCOPE_REC_KERNEL);
  CHECK(ko->start_ns == 4000 && ko->end_ns == 8000);
  CHECK(ko->correlation_id == 99 && ko->device == 3 && ko->graph_id == 5);
  CHECK(ko->stream == ((uint64_t)7 << 32 | 13));
  CHECK(ko->grid[0] == 128 && ko->grid[1] == 2 && ko->block[0] == 256);
  CHECK(ko->registers_per_thread == 40 && ko->static_shared_bytes == 1024 &&
        ko->dynamic_shared_bytes == 4096);
  CHECK(strcmp(name_of(ko->name), k.name) == 0);
  /* The same stream is declared once. */
  CHECK(sgpu_cupti_convert(&c, (CUpti_Activity *)&k, out, 4) == 1 &&
        out[0].kind == STEPSCOPE_REC_KERNEL);

  CUpti_ActivityMemcpy6 m;
  memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.bytes = 1 << 20;
  m.start = 2000;
  m.end = 3000;
  m.deviceId = 3;
  m.contextId = 7;
  m.streamId = 13;
  m.correlationId = 100;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&m, out, 4);
  CHECK(n == 1 && out[0].kind == STEPSCOPE_REC_MEMCPY);
  CHECK(out[0].u.memcpy.copy_kind == STEPSCOPE_MEMCPY_HTOD && out[0].u.memcpy.bytes == (1u << 20));
  CHECK(out[0].u.memcpy.start_ns == 1000 && out[0].u.memcpy.correlation_id == 100);

  CUpti_ActivityMemcpyPtoP4 p;
  memset(&p, 0, sizeof p);
  p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  p.bytes = 4096;
  p.start = 10;
  p.end = 20;
  p.deviceId = 0;
  p.contextId = 1;
  p.streamId = 7;
  p.srcDeviceId = 0;
  p.dstDeviceId = 1;
  p.correlationId = 5;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&p, out, 4);
  CHECK(n == 2 && out[1].kind == STEPSCOPE_REC_MEMCPY);
  CHECK(out[1].u.memcpy.copy_kind == STEPSCOPE_MEMCPY_PTOP && out[1].u.memcpy.dst_device == 1);

  CUpti_ActivityMemset4 s;
  memset(&s, 0, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.value = 0xab;
  s.bytes = 512;
  s.start = 3000;
  s.end = 3500;
  s.deviceId = 3;
  s.contextId = 7;
  s.streamId = 13;
  s.correlationId = 101;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&s, out, 4);
  CHECK(n == 1 && out[0].kind == STEPSCOPE_REC_MEMSET && out[0].u.memset.value == 0xab &&
        out[0].u.memset.bytes == 512);

  CUpti_ActivitySynchronization2 y;
  memset(&y, 0, sizeof y);
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  y.start = 4000;
  y.end = 4100;
  y.contextId = 7;
  y.streamId = 13;
  y.cudaEventId = 4;
  y.correlationId = 102;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&y, out, 4);
  CHECK(n == 1 && out[0].kind == STEPSCOPE_REC_SYNC);
  CHECK(out[0].u.sync.sync_kind == STEPSCOPE_SYNC_STREAM_WAIT_EVENT && out[0].u.sync.event_id == 4);
  CHECK(out[0].u.sync.device == 3); /* learned from the kernel of context 7 */
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  y.streamId = UINT32_MAX;
  y.cudaEventId = UINT32_MAX;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&y, out, 4);
  CHECK(n == 1 && out[0].u.sync.stream == 0 && out[0].u.sync.event_id == 0 &&
        out[0].u.sync.sync_kind == STEPSCOPE_SYNC_CONTEXT);

  CUpti_ActivityAPI a;
  memset(&a, 0, sizeof a);
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = 211;
  a.start = 1500;
  a.end = 1700;
  a.threadId = 4242;
  a.correlationId = 99;
  a.returnValue = 0;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&a, out, 4);
  CHECK(n == 1 && out[0].kind == STEPSCOPE_REC_API);
  CHECK(out[0].u.api.api_kind == STEPSCOPE_API_RUNTIME && out[0].u.api.thread == 4242);
  CHECK(out[0].u.api.callback_id == 211 && out[0].u.api.correlation_id == 99);
  CHECK(strcmp(name_of(out[0].u.api.name), "cudaLaunchKernel_v7000") == 0);
  a.cbid = 1; /* cudaGetDevice: filtered out */
  CHECK(sgpu_cupti_convert(&c, (CUpti_Activity *)&a, out, 4) == 0);
  a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  a.cbid = 652;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&a, out, 4);
  CHECK(n == 1 && out[0].u.api.api_kind == STEPSCOPE_API_DRIVER);

  CUpti_ActivityOverhead3 o;
  memset(&o, 0, sizeof o);
  o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  o.objectId.pt.threadId = 77;
  o.start = 6000;
  o.end = 6500;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&o, out, 4);
  CHECK(n == 1 && out[0].kind == STEPSCOPE_REC_OVERHEAD && out[0].u.overhead.thread == 77);
  CHECK(strcmp(name_of(out[0].u.overhead.name), "cupti buffer flush") == 0);

  CUpti_ActivityExternalCorrelation x;
  memset(&x, 0, sizeof x);
  x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  x.externalId = 0x1234567890ull;
  x.correlationId = 99;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&x, out, 4);
  CHECK(n == 1 && out[0].kind == STEPSCOPE_REC_EXTERNAL_CORRELATION);
  CHECK(out[0].u.external_correlation.correlation_id == 99);
  CHECK(out[0].u.external_correlation.external_id == 0x1234567890ull);
  CHECK(out[0].u.external_correlation.external_kind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  CHECK(c.external_correlations == 1);

  /* A kernel CUPTI could not time (start 0) is counted, not written at time 0. */
  uint64_t ignored_before = c.ignored;
  k.start = 0;
  k.end = 0;
  CHECK(sgpu_cupti_convert(&c, (CUpti_Activity *)&k, out, 4) == 0);
  CHECK(c.untimed == 1 && c.ignored == ignored_before + 1);
  m.start = 0;
  CHECK(sgpu_cupti_convert(&c, (CUpti_Activity *)&m, out, 4) == 0 && c.untimed == 2);

  /* Overhead kinds added in CUDA 12/13 have names. */
  o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&o, out, 4);
  CHECK(n == 1 && strcmp(name_of(out[0].u.overhead.name), "lazy function loading") == 0);

  /* Device memory (MEMORY2): allocations and releases with the bytes allocated since tracing
   * began per device; a release of memory allocated before takes no more than is counted;
   * other memory kinds are not kept; untimed ones are counted. */
  CUpti_ActivityMemory4 mem;
  memset(&mem, 0, sizeof mem);
  mem.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  mem.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  mem.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  mem.deviceId = 2;
  mem.address = 0x7000;
  mem.bytes = 1 << 20;
  mem.timestamp = 5000;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&mem, out, 4);
  CHECK(n == 1 && out[0].kind == STEPSCOPE_REC_MEMORY && out[0].u.memory.device == 2 &&
        out[0].u.memory.address == 0x7000 && out[0].u.memory.bytes == 1 << 20 &&
        out[0].u.memory.in_use_bytes == 1 << 20 &&
        out[0].u.memory.memory_kind == STEPSCOPE_MEM_ALLOC &&
        out[0].u.memory.time_ns == (uint64_t)(5000 + c.clock_offset_ns));
  mem.address = 0x9000;
  mem.bytes = 4096;
  mem.timestamp = 5100;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&mem, out, 4);
  CHECK(n == 1 && out[0].u.memory.in_use_bytes == (1 << 20) + 4096);
  mem.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  mem.address = 0x7000;
  mem.bytes = 1 << 20;
  mem.timestamp = 5200;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&mem, out, 4);
  CHECK(n == 1 && out[0].u.memory.memory_kind == STEPSCOPE_MEM_FREE &&
        out[0].u.memory.in_use_bytes == 4096 && out[0].u.memory.bytes == 1 << 20);
  mem.bytes = 1 << 30; /* allocated before the trace began */
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&mem, out, 4);
  CHECK(n == 1 && out[0].u.memory.in_use_bytes == 0);
  mem.deviceId = 0; /* another device counts apart */
  mem.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  mem.bytes = 64;
  n = sgpu_cupti_convert(&c, (CUpti_Activity *)&mem, out, 4);
  CHECK(n == 1 && out[0].u.memory.device == 0 && out[0].u.memory.in_use_bytes == 64 &&
        c.memory_in_use[2] == 0);
  uint64_t kept = c.kept, ignored = c.ignored, untimed = c.untimed;
  mem.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED; /* host memory: not kept */
  CHECK(sgpu_cupti_convert(&c, (CUpti_Activity *)&mem, out, 4) == 0);
  mem.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  mem.deviceId = SGPU_MAX_DEVICES;
  CHECK(sgpu_cupti_convert(&c, (CUpti_Activity *)&mem, out, 4) == 0);
  mem.deviceId = 0;
  mem.timestamp = 0;
  CHECK(sgpu_cupti_convert(&c, (CUpti_Activity *)&mem, out, 4) == 0);
  CHECK(c.kept == kept && c.ignored == ignored + 3 && c.untimed == untimed + 1 &&
        c.memory_in_use[0] == 64);

  /* The enumerations the converter maps are CUPTI's own numbers (a renumbering
   * in a future toolkit must fail here, not silently in a trace). */
  CHECK(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL == 10 && CUPTI_ACTIVITY_KIND_MEMCPY == 1 &&
        CUPTI_ACTIVITY_KIND_MEMCPY2 == 22 && CUPTI_ACTIVITY_KIND_MEMSET == 2 &&
        CUPTI_ACTIVITY_KIND_SYNCHRONIZATION == 38 &&
        CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION == 39 && CUPTI_ACTIVITY_KIND_OVERHEAD == 17 &&
        CUPTI_ACTIVITY_KIND_RUNTIME == 5 && CUPTI_ACTIVITY_KIND_DRIVER == 4 &&
        CUPTI_ACTIVITY_KIND_CONTEXT == 9 && CUPTI_ACTIVITY_KIND_MEMORY2 == 49);
  CHECK(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION == 1 &&
        CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE == 2 &&
        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE == 3);
  CHECK(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD == 8 && CUPTI_ACTIVITY_MEMCPY_KIND_HTOH == 9 &&
        CUPTI_ACTIVITY_MEMCPY_KIND_PTOP == 10);
  static const struct {
    uint8_t cupti;
    uint32_t ours;
  } copies[] = {{CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, STEPSCOPE_MEMCPY_HTOD},
                {CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, STEPSCOPE_MEMCPY_DTOH},
                {CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, STEPSCOPE_MEMCPY_HTOD},
                {CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, STEPSCOPE_MEMCPY_DTOH},
                {CUPTI_ACTIVITY_MEMCPY_KIND_ATOA, STEPSCOPE_MEMCPY_DTOD},
                {CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, STEPSCOPE_MEMCPY_DTOD},
                {CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, STEPSCOPE_MEMCPY_HTOH},
                {CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, STEPSCOPE_MEMCPY_PTOP},
                {CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN, STEPSCOPE_MEMCPY_UNKNOWN}};
  m.start = 2000;
  for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++) {
    m.copyKind = copies[i].cupti;
    n = sgpu_cupti_convert(&c, (CUpti_Activity *)&m, out, 4);
    CHECK(n == 1 && out[0].u.memcpy.copy_kind == copies[i].ours);
  }
  static const struct {
    CUpti_ActivitySynchronizationType cupti;
    uint32_t ours;
  } syncs[] = {
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, STEPSCOPE_SYNC_EVENT},
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, STEPSCOPE_SYNC_STREAM_WAIT_EVENT},
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, STEPSCOPE_SYNC_STREAM},
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, STEPSCOPE_SYNC_CONTEXT},
      {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN, STEPSCOPE_SYNC_UNKNOWN}};
  for (size_t i = 0; i < sizeof syncs / sizeof syncs[0]; i++) {
    y.type = syncs[i].cupti;
    n = sgpu_cupti_convert(&c, (CUpti_Activity *)&y, out, 4);
    CHECK(n == 1 && out[0].u.sync.sync_kind == syncs[i].ours);
  }
  /* "No stream / no event" is CUPTI's CUPTI_SYNCHRONIZATION_INVALID_VALUE. */
  CHECK(CUPTI_SYNCHRONIZATION_INVALID_VALUE == UINT32_MAX);

  /* The API filter. */
  CHECK(sgpu_cupti_api_is_kept("cuLaunchKernelEx_ptsz"));
  CHECK(sgpu_cupti_api_is_kept("cudaMemcpyAsync_v3020"));
  CHECK(sgpu_cupti_api_is_kept("cuMemsetD32Async"));
  CHECK(sgpu_cupti_api_is_kept("cudaStreamSynchronize_v3020"));
  CHECK(sgpu_cupti_api_is_kept("cuStreamWaitEvent"));
  CHECK(sgpu_cupti_api_is_kept("cuGraphLaunch"));
  CHECK(!sgpu_cupti_api_is_kept("cudaGetDevice_v3020"));
  CHECK(!sgpu_cupti_api_is_kept("cuCtxGetCurrent"));
  CHECK(!sgpu_cupti_api_is_kept("cudaStreamQuery_v3020"));
  CHECK(!sgpu_cupti_api_is_kept(NULL));

  if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);
  return check_failures ? 1 : 0;
}
