/*
 * cupti_activity.c — runs CUPTI's Activity API for the trace: start-up
 * checks, buffers, the flush thread and the exit flush.
 *
 * Start-up: CUPTI's run-time version must be at least the one we were built
 * against, with the same major (the activity structs we decode are those of
 * our headers). We subscribe to CUPTI callbacks first: CUPTI allows one
 * subscriber per process, so failure there means another profiler (Nsight,
 * PyTorch's Kineto) holds CUPTI, and we step aside with one warning. The
 * subscription gives us the driver launch callbacks (to hand the
 * correlation id of NCCL's kernel launches to the NCCL plugin) and context
 * creation (to record the device's name and properties as metadata). CUPTI
 * timestamps are made CLOCK_MONOTONIC through
 * cuptiActivityRegisterTimestampCallback, so they share the trace clock of
 * every other source; if that is refused, an offset from CUPTI's clock to
 * CLOCK_MONOTONIC is re-measured at each flush and applied.
 *
 * Buffers: a pool of 4 MiB buffers, zeroed once when allocated and again
 * (only the used part) when returned, so we can tell CUPTI they come zeroed
 * (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER) and it does not zero them
 * on the application's thread. At most 64 buffers exist; past that CUPTI
 * gets none and drops records, which it counts and we write as DROPPED.
 *
 * Flushing: a thread calls cuptiActivityFlushAll every 200 ms; the
 * completion callback converts records (cupti_convert.c) and appends them to
 * the trace. At exit (session flush hook, or stepscope_gpu_stop) a forced
 * flush empties everything before the file is closed.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cupti.h>

#include "cupti_convert.h"
#include "gpu_session.h"
#include "nccl_profiler_core.h"
#include "stepscope_gpu.h"

#define BUFFER_BYTES    (4u << 20)
#define MAX_BUFFERS     64
#define FLUSH_PERIOD_MS 200
#define CONVERT_BATCH   8

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static int running;
static int stopping;
static CUpti_SubscriberHandle subscriber;
static pthread_t flush_thread;
static int flush_thread_started;
static pthread_cond_t flush_wake = PTHREAD_COND_INITIALIZER;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *free_buffers[MAX_BUFFERS];
static size_t n_free, n_allocated;

static pthread_mutex_t convert_lock = PTHREAD_MUTEX_INITIALIZER;
static sgpu_cupti_converter converter;
static int timestamps_are_monotonic;
static int warned_version, warned_subscriber, warned_enable, warned_start;

/* ---- CUDA driver entry points ------------------------------------------------------
 * Looked up at run time rather than linked, so that this library loads on
 * machines without a driver (NVTX-only and NCCL-only use, tests). They are
 * taken from a handle on libcuda.so.1 itself: the CUDA runtime (static or
 * shared, PyTorch's included) dlopen()s libcuda without RTLD_GLOBAL, so its
 * symbols are usually NOT visible through RTLD_DEFAULT. RTLD_NOLOAD finds the
 * copy already loaded (injected mode: we are called from cuInit); in linked
 * mode, before the program's first CUDA call, we load it ourselves (the same
 * copy the runtime will use). The names go through cuda.h's macros, so
 * "cuCtxPushCurrent" resolves to the versioned symbol. */

#define SGPU_STR2(x)    #x
#define SGPU_STR(x)     SGPU_STR2(x)
#define DRIVER_FN(name) static __typeof__(&name) p_##name
DRIVER_FN(cuCtxGetDevice);
DRIVER_FN(cuDeviceGet);
DRIVER_FN(cuDeviceGetName);
DRIVER_FN(cuDeviceTotalMem);
DRIVER_FN(cuDeviceGetAttribute);
DRIVER_FN(cuDriverGetVersion);
DRIVER_FN(cuStreamGetCtx);
#define LOAD_DRIVER_FN(lib, name) (p_##name = (__typeof__(&name))dlsym(lib, SGPU_STR(name)))

static int load_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) return 0; /* kept open for the life of the process */
  int ok = 1;
  ok &= LOAD_DRIVER_FN(lib, cuCtxGetDevice) != NULL;
  ok &= LOAD_DRIVER_FN(lib, cuDeviceGet) != NULL;
  ok &= LOAD_DRIVER_FN(lib, cuDeviceGetName) != NULL;
  ok &= LOAD_DRIVER_FN(lib, cuDeviceTotalMem) != NULL;
  ok &= LOAD_DRIVER_FN(lib, cuDeviceGetAttribute) != NULL;
  ok &= LOAD_DRIVER_FN(lib, cuDriverGetVersion) != NULL;
  ok &= LOAD_DRIVER_FN(lib, cuStreamGetCtx) != NULL;
  return ok;
}

/* ---- clocks ------------------------------------------------------------------ */

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t CUPTIAPI timestamp_callback(void) {
  return monotonic_ns();
}

/* Offset that maps CUPTI's clock to the trace clock (0 when CUPTI already
 * uses our monotonic callback). */
static int64_t measure_clock_offset(void) {
  if (timestamps_are_monotonic) return 0;
  uint64_t before = monotonic_ns(), cupti = 0;
  if (cuptiGetTimestamp(&cupti) != CUPTI_SUCCESS) return 0;
  uint64_t after = monotonic_ns();
  return (int64_t)(before / 2 + after / 2) - (int64_t)cupti;
}

/* ---- names ----------------------------------------------------------------------- */

static uint32_t intern_name(void *ctx, const char *s) {
  (void)ctx;
  /* Demangle C++ kernel names when the process has libstdc++ (PyTorch does). */
  typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
  static demangle_fn demangle;
  static int looked_up;
  if (!looked_up) {
    demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
    looked_up = 1;
  }
  if (demangle && s && s[0] == '_' && s[1] == 'Z') {
    int status = 0;
    char *d = demangle(s, NULL, NULL, &status);
    if (d && status == 0) {
      uint32_t id = stepscope_intern_current(d);
      free(d);
      return id;
    }
    free(d);
  }
  return stepscope_intern_current(s);
}

static const char *api_name(void *ctx, int is_driver, uint32_t cbid) {
  (void)ctx;
  const char *name = NULL;
  if (cuptiGetCallbackName(is_driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
                           cbid, &name) != CUPTI_SUCCESS)
    return NULL;
  return name;
}

/* ---- buffers ---------------------------------------------------------------------- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  uint8_t *b = NULL;
  pthread_mutex_lock(&pool_lock);
  if (n_free > 0) {
    b = free_buffers[--n_free];
  } else if (n_allocated < MAX_BUFFERS) {
    b = aligned_alloc(8, BUFFER_BYTES);
    if (b) {
      memset(b, 0, BUFFER_BYTES);
      n_allocated++;
    }
  }
  pthread_mutex_unlock(&pool_lock);
  *buffer = b;
  *size = b ? BUFFER_BYTES : 0;
  *max_records = 0;
}

static void buffer_release(uint8_t *b, size_t used) {
  if (!b) return;
  memset(b, 0, used < BUFFER_BYTES ? used : BUFFER_BYTES);
  pthread_mutex_lock(&pool_lock);
  if (n_free < MAX_BUFFERS)
    free_buffers[n_free++] = b;
  else
    free(b);
  pthread_mutex_unlock(&pool_lock);
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t *buffer,
                                      size_t size, size_t valid) {
  CUpti_Activity *record = NULL;
  stepscope_record out[CONVERT_BATCH];
  if (!buffer) return;
  pthread_mutex_lock(&convert_lock);
  converter.clock_offset_ns = measure_clock_offset();
  while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    int n = sgpu_cupti_convert(&converter, record, out, CONVERT_BATCH);
    for (int i = 0; i < n; i++)
      stepscope_emit(&out[i]);
  }
  pthread_mutex_unlock(&convert_lock);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS &&
      dropped > 0)
    sgpu_emit_dropped(dropped, STEPSCOPE_DROP_CUPTI);
  buffer_release(buffer, valid);
}

/* ---- callbacks ---------------------------------------------------------------------- */

static void write_device_metadata(CUcontext ctx) {
  /* CUPTI knows the context's device; no driver call on the context is made
   * inside CUPTI's resource callback. */
  uint32_t ordinal = 0;
  CUdevice dev;
  if (cuptiGetDeviceId(ctx, &ordinal) != CUPTI_SUCCESS) return;
  if (p_cuDeviceGet(&dev, (int)ordinal) != CUDA_SUCCESS) return;
  char name[128] = "", json[512];
  size_t total = 0;
  int major = 0, minor = 0, sms = 0, driver = 0;
  p_cuDeviceGetName(name, sizeof name, dev);
  p_cuDeviceTotalMem(&total, dev);
  p_cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  p_cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  p_cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  p_cuDriverGetVersion(&driver);
  for (char *p = name; *p; p++)
    if (*p == '"' || *p == '\\') *p = ' ';
  snprintf(
      json, sizeof json,
      "{\"ordinal\":%d,\"name\":\"%s\",\"total_memory_bytes\":%zu,\"compute_capability\":\"%d.%d\","
      "\"multiprocessors\":%d,\"cuda_driver_version\":%d}",
      (int)dev, name, total, major, minor, sms, driver);
  char key[32];
  snprintf(key, sizeof key, "device:%d", (int)dev);
  stepscope_metadata_set(key, json);
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data) {
  (void)userdata;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const CUpti_CallbackData *cb = data;
    if (cb->callbackSite == CUPTI_API_ENTER) sgpu_nccl_note_launch_correlation(cb->correlationId);
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    const CUpti_ResourceData *rd = data;
    if (rd->context) write_device_metadata(rd->context);
  }
}

/* ---- hooks for the other sources ------------------------------------------------------- */

static uint64_t hook_stream_id(void *cuda_stream) {
  CUcontext ctx = NULL;
  uint32_t context_id = 0, stream_id = 0;
  if (p_cuStreamGetCtx((CUstream)cuda_stream, &ctx) != CUDA_SUCCESS || !ctx) return 0;
  if (cuptiGetContextId(ctx, &context_id) != CUPTI_SUCCESS) return 0;
  if (cuptiGetStreamIdEx(ctx, (CUstream)cuda_stream, 0, &stream_id) != CUPTI_SUCCESS) return 0;
  return sgpu_cupti_stream_key(context_id, stream_id);
}

static int hook_current_device(void) {
  CUdevice dev;
  return p_cuCtxGetDevice(&dev) == CUDA_SUCCESS ? (int)dev : -1;
}

/* ---- flushing -------------------------------------------------------------------------- */

static void *flush_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&state_lock);
  while (!stopping) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += FLUSH_PERIOD_MS * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&flush_wake, &state_lock, &deadline);
    if (stopping) break;
    pthread_mutex_unlock(&state_lock);
    cuptiActivityFlushAll(0);
    pthread_mutex_lock(&state_lock);
  }
  pthread_mutex_unlock(&state_lock);
  return NULL;
}

static void flush_all_forced(void) {
  pthread_mutex_lock(&state_lock);
  int was_running = running;
  pthread_mutex_unlock(&state_lock);
  if (!was_running) return;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_lock(&convert_lock);
  char json[192];
  snprintf(json, sizeof json,
           "{\"records_kept\":%llu,\"records_ignored\":%llu,\"untimed\":%llu,"
           "\"external_correlations\":%llu}",
           (unsigned long long)converter.kept, (unsigned long long)converter.ignored,
           (unsigned long long)converter.untimed,
           (unsigned long long)converter.external_correlations);
  pthread_mutex_unlock(&convert_lock);
  stepscope_metadata_set("cupti_stats", json);
}

/* ---- start / stop ---------------------------------------------------------------------- */

static const CUpti_ActivityKind activity_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_OVERHEAD,          CUPTI_ACTIVITY_KIND_CONTEXT,
    CUPTI_ACTIVITY_KIND_MEMORY2, /* device memory allocations and releases */
};

/* Enables API records only for the calls sgpu_cupti_api_is_kept() wants. */
static void enable_kept_apis(void) {
  for (uint32_t cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; cbid++) {
    const char *name = api_name(NULL, 0, cbid);
    if (name && sgpu_cupti_api_is_kept(name)) cuptiActivityEnableRuntimeApi(cbid, 1);
  }
  for (uint32_t cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; cbid++) {
    const char *name = api_name(NULL, 1, cbid);
    if (!name || !sgpu_cupti_api_is_kept(name)) continue;
    cuptiActivityEnableDriverApi(cbid, 1);
    if (strncmp(name, "cuLaunch", 8) == 0)
      cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
  }
}

/* Activity structs are versioned by name (CUpti_ActivityKernel10 keeps its
 * layout in every release), so any CUPTI of our major version will do, older
 * updates included (13.0 GA reports 130000, our headers 130001). */
static int cupti_version_usable(uint32_t version) {
  return version / 10000 == (uint32_t)CUPTI_API_VERSION / 10000;
}

/* cuptiSubscribe_v2 names the tool that already holds CUPTI; it may be
 * missing from an older CUPTI of our major version, hence the weak reference. */
#pragma weak cuptiSubscribe_v2
static CUptiResult subscribe(char *holder, size_t holder_size) {
  if (cuptiSubscribe_v2) {
    CUpti_SubscriberParams params;
    memset(&params, 0, sizeof params);
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "stepscope";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = holder_size;
    return cuptiSubscribe_v2(&subscriber, on_callback, NULL, &params);
  }
  return cuptiSubscribe(&subscriber, on_callback, NULL);
}

static int start_locked(void) {
  static int warned_driver;
  if (!load_driver()) {
    sgpu_warn_once(&warned_driver, "cupti",
                   "the CUDA driver is not loaded; GPU activity is not traced");
    return -1;
  }
  uint32_t version = 0;
  if (cuptiGetVersion(&version) != CUPTI_SUCCESS || !cupti_version_usable(version)) {
    sgpu_warn_once(&warned_version, "cupti",
                   "CUPTI version %u is not of the major version of the %u this tracer was built "
                   "for; GPU activity is not traced",
                   version, (unsigned)CUPTI_API_VERSION);
    return -1;
  }
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
  CUptiResult res = subscribe(holder, sizeof holder);
  if (res != CUPTI_SUCCESS) {
    const char *why = NULL;
    cuptiGetResultString(res, &why);
    if (res == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      sgpu_warn_once(
          &warned_subscriber, "cupti",
          "CUPTI is held by another profiler (%s); stepping aside, GPU activity is not traced",
          holder[0] ? holder : "Nsight, Kineto, cuda-gdb or compute-sanitizer?");
    else
      sgpu_warn_once(&warned_subscriber, "cupti",
                     "cannot subscribe to CUPTI (%s); GPU activity is not traced",
                     why ? why : "error");
    return -1;
  }
  /* API records carry the OS thread id (gettid), as every other record does,
   * not pthread_self() (CUPTI's default), so they line up with NVTX ranges. */
  cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  timestamps_are_monotonic =
      cuptiActivityRegisterTimestampCallback(timestamp_callback) == CUPTI_SUCCESS;
  sgpu_cupti_converter_init(&converter, intern_name, api_name, NULL);
  converter.clock_offset_ns = measure_clock_offset();
  uint8_t zeroed = 1;
  size_t attr_size = sizeof zeroed;
  cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &attr_size, &zeroed);
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
    sgpu_warn_once(&warned_enable, "cupti",
                   "cannot register activity buffers; GPU activity is not traced");
    cuptiUnsubscribe(subscriber);
    return -1;
  }
  for (size_t i = 0; i < sizeof activity_kinds / sizeof activity_kinds[0]; i++) {
    if (cuptiActivityEnable(activity_kinds[i]) != CUPTI_SUCCESS &&
        activity_kinds[i] == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      sgpu_warn_once(&warned_enable, "cupti",
                     "cannot enable kernel activity; GPU activity is not traced");
      cuptiUnsubscribe(subscriber);
      return -1;
    }
  }
  enable_kept_apis();
  cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  char json[160];
  snprintf(json, sizeof json, "{\"cupti_version\":%u,\"timestamps\":\"%s\",\"flush_period_ms\":%d}",
           version, timestamps_are_monotonic ? "monotonic-callback" : "offset-corrected",
           FLUSH_PERIOD_MS);
  stepscope_metadata_set("cupti", json);
  stopping = 0;
  flush_thread_started = pthread_create(&flush_thread, NULL, flush_main, NULL) == 0;
  if (!flush_thread_started) {
    sgpu_warn_once(&warned_start, "cupti",
                   "cannot start the flush thread; records are flushed at exit only");
  }
  sgpu_hook_table.stream_id = hook_stream_id;
  sgpu_hook_table.current_device = hook_current_device;
  sgpu_session_add_flush(stepscope_gpu_stop);
  running = 1;
  return 0;
}

__attribute__((visibility("default"))) int stepscope_gpu_start(void) {
  if (!sgpu_session_ensure()) {
    sgpu_warn_once(&warned_start, "cupti", "no trace is running; call stepscope_start() first");
    return -1;
  }
  pthread_mutex_lock(&state_lock);
  int rc = running ? 0 : start_locked();
  pthread_mutex_unlock(&state_lock);
  return rc;
}

__attribute__((visibility("default"))) unsigned long long
stepscope_gpu_stream_id(void *cuda_stream) {
  pthread_mutex_lock(&state_lock);
  int on = running;
  pthread_mutex_unlock(&state_lock);
  return on && cuda_stream ? hook_stream_id(cuda_stream) : 0;
}

__attribute__((visibility("default"))) void stepscope_gpu_stop(void) {
  pthread_mutex_lock(&state_lock);
  if (!running) {
    pthread_mutex_unlock(&state_lock);
    return;
  }
  stopping = 1;
  pthread_cond_signal(&flush_wake);
  int joinable = flush_thread_started;
  flush_thread_started = 0;
  pthread_mutex_unlock(&state_lock);
  if (joinable) pthread_join(flush_thread, NULL);
  flush_all_forced();
  /* NCCL operations still waiting for their channels' stop events go out
   * with their host times now, while the program's trace is still open. */
  sgpu_nccl_flush_unfinished();
  pthread_mutex_lock(&state_lock);
  for (size_t i = 0; i < sizeof activity_kinds / sizeof activity_kinds[0]; i++)
    cuptiActivityDisable(activity_kinds[i]);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
  cuptiUnsubscribe(subscriber);
  memset(&sgpu_hook_table, 0, sizeof sgpu_hook_table);
  running = 0;
  pthread_mutex_unlock(&state_lock);
}
