/*
 * device_cpu.c — the CPU backend of the device API (device.h).
 *
 * How it works:
 *   - Memory is host memory (64-byte aligned, zeroed); the device counts the
 *     bytes in use and their peak, and, when tracing, writes each allocation and
 *     free as a MEMORY record (device 0xffffffff: host memory).
 *   - A stream is a worker thread that pops closures (`cpu_task`) from a FIFO
 *     and runs them in order. Enqueueing never blocks on the work itself.
 *   - An event is a pair of counters: `recorded` (bumped on the host when the
 *     event is recorded) and `done` (set by the stream's worker when it reaches
 *     the record). `stream_wait_event` enqueues a task that blocks its worker
 *     until `done` reaches the value `recorded` had at enqueue time — the GPU's
 *     semantics, so a communication stream really overlaps compute.
 *   - Errors are sticky: the first failing task's message becomes the device's
 *     error, later tasks of that stream are skipped, blocked waits give up, and
 *     stream_synchronize returns -1.
 *   - Activations are fp32, or bf16 (set_activation_dtype): then each operation runs
 *     the fp32 reference kernel on fp32 copies of its activation arguments and rounds
 *     what it wrote back to bf16 (run_staged in device_cpu_ops.c).
 *   - Tracing: when a trace is active, each enqueue writes an API record of kind
 *     HOST_ENQUEUE on the host thread, and each executed task a HOST_OP record
 *     (stream, category, flops, bytes, same correlation id; a compute task's inputs, their
 *     shapes and types, as its args). Stream waits that
 *     actually block write a SYNC record (stream waits on event), and so do host waits for
 *     a stream that block (stream 0: the host waits). When no trace
 *     is running these cost one flag check.
 * This file is the device's machinery (memory, streams, events, copies and the
 * device-level operations); the model operations it runs live in device_cpu_ops.c.
 */
#include "device_cpu.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "op_inputs.h"
#include "stepscope.h"

#define CPU_MAX_STREAMS 16

/* Before each allocation: its block and size, and its place in the device's list of live
 * allocations (oldest first), which a trace that starts later is told of. */
typedef struct alloc_header {
  void *base;
  size_t bytes;
  struct alloc_header *prev, *next;
} alloc_header;

struct dev_device {
  const dev_ops *ops; /* first: the dev_device_header of device.h */
  pthread_mutex_t mu; /* guards events' done counters and the error text */
  pthread_cond_t cv;
  atomic_int failed;
  char error[512];
  atomic_size_t in_use, peak;
  alloc_header live; /* the live allocations' list (circular; guarded by mu) */
  dev_stream *streams[CPU_MAX_STREAMS];
  int nstreams;
  dev_dtype act; /* activation storage (fp32, or bf16 staged through fp32) */
  void (*hook)(void *);
  void *hook_arg;
};

struct dev_stream {
  dev_device *d;
  char name[64];
  uint64_t trace_id;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  cpu_task *head, *tail;
  uint64_t enqueued, completed;
  int stop;
  int failed;
};

struct dev_event {
  dev_device *d;
  uint64_t id;
  uint64_t recorded; /* host side */
  uint64_t done;     /* guarded by d->mu */
};

static atomic_uint_fast64_t g_correlation = 1;
static atomic_uint_fast64_t g_event_ids = 1;

static void device_fail(dev_device *d, const char *msg) {
  pthread_mutex_lock(&d->mu);
  if (!atomic_load(&d->failed)) {
    /* the first error, cut to fit (a bounded copy: snprintf here trips
     * -Werror=format-truncation at -O3) */
    size_t n = strnlen(msg, sizeof d->error - 1);
    memcpy(d->error, msg, n);
    d->error[n] = '\0';
    atomic_store(&d->failed, 1);
  }
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

int cpu_device_failed(const dev_device *d) {
  return atomic_load(&((dev_device *)d)->failed);
}

static void cpu_abort(dev_device *d, const char *why) {
  device_fail(d, why);
}

/* ---- memory ------------------------------------------------------------------- */

/* An allocation or free as a MEMORY record (device 0xffffffff: host memory, docs/trace-format.md
 * §6), with the bytes in use after it, when tracing. */
static void trace_memory(const void *p, size_t bytes, size_t in_use, uint32_t kind) {
  if (!stepscope_active()) return;
  stepscope_record r = {.kind = STEPSCOPE_REC_MEMORY};
  r.u.memory.time_ns = stepscope_now_ns();
  r.u.memory.address = (uint64_t)(uintptr_t)p;
  r.u.memory.bytes = bytes;
  r.u.memory.in_use_bytes = in_use;
  r.u.memory.device = UINT32_MAX;
  r.u.memory.memory_kind = kind;
  stepscope_emit(&r);
}

static void *cpu_alloc(dev_device *d, size_t bytes) {
  size_t total = bytes + 64 + sizeof(alloc_header);
  if (total < bytes) return NULL;
  char *base = calloc(1, total);
  if (!base) return NULL;
  uintptr_t a = ((uintptr_t)base + sizeof(alloc_header) + 63) & ~(uintptr_t)63;
  alloc_header *h = (alloc_header *)(a - sizeof(alloc_header));
  h->base = base;
  h->bytes = bytes;
  pthread_mutex_lock(&d->mu);
  h->prev = d->live.prev;
  h->next = &d->live;
  d->live.prev->next = h;
  d->live.prev = h;
  pthread_mutex_unlock(&d->mu);
  size_t now = atomic_fetch_add(&d->in_use, bytes) + bytes;
  size_t peak = atomic_load(&d->peak);
  while (now > peak && !atomic_compare_exchange_weak(&d->peak, &peak, now)) {
  }
  trace_memory((void *)a, bytes, now, STEPSCOPE_MEM_ALLOC);
  return (void *)a;
}

static void cpu_free(dev_device *d, void *p) {
  if (!p) return;
  alloc_header *h = (alloc_header *)((char *)p - sizeof(alloc_header));
  pthread_mutex_lock(&d->mu);
  h->prev->next = h->next;
  h->next->prev = h->prev;
  pthread_mutex_unlock(&d->mu);
  size_t now = atomic_fetch_sub(&d->in_use, h->bytes) - h->bytes;
  trace_memory(p, h->bytes, now, STEPSCOPE_MEM_FREE);
  free(h->base);
}

static size_t cpu_bytes_in_use(const dev_device *d) {
  return atomic_load(&((dev_device *)d)->in_use);
}
static size_t cpu_bytes_peak(const dev_device *d) {
  return atomic_load(&((dev_device *)d)->peak);
}

/* ---- streams ------------------------------------------------------------------- */

static void trace_host_op(dev_stream *s, const cpu_task *t, uint64_t t0, uint64_t t1) {
  stepscope_record r = {.kind = STEPSCOPE_REC_HOST_OP};
  r.u.host_op.start_ns = t0;
  r.u.host_op.end_ns = t1;
  r.u.host_op.stream = s->trace_id;
  r.u.host_op.correlation_id = t->correlation;
  r.u.host_op.bytes = t->bytes;
  r.u.host_op.flops = t->flops;
  r.u.host_op.comm_id = t->comm_id;
  r.u.host_op.seq = t->seq;
  r.u.host_op.name = stepscope_intern_current(t->name);
  r.u.host_op.category = t->category;
  if (t->inputs) {
    char args[OP_INPUTS_MAX];
    t->inputs(t, op_inputs_act_type(s->d->act), args, sizeof args);
    r.u.host_op.args = stepscope_intern_current(args);
  }
  stepscope_emit(&r);
}

static void *stream_worker(void *arg) {
  dev_stream *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (!s->head && !s->stop)
      pthread_cond_wait(&s->cv, &s->mu);
    if (!s->head && s->stop) {
      pthread_mutex_unlock(&s->mu);
      return NULL;
    }
    cpu_task *t = s->head;
    s->head = t->next;
    if (!s->head) s->tail = NULL;
    int skip = s->failed;
    pthread_mutex_unlock(&s->mu);

    if (!skip && atomic_load(&s->d->failed) && t->category == STEPSCOPE_CAT_COMM)
      skip = 1; /* a peer or another stream failed: do not start new collectives */
    if (!skip) {
      char err[512];
      err[0] = 0;
      int tracing = stepscope_active();
      uint64_t t0 = tracing ? stepscope_now_ns() : 0;
      int rc = t->run(t, err, sizeof err);
      uint64_t t1 = tracing ? stepscope_now_ns() : 0;
      if (rc != 0) {
        char msg[640];
        snprintf(msg, sizeof msg, "%s (stream %s)", err[0] ? err : t->name, s->name);
        device_fail(s->d, msg);
        pthread_mutex_lock(&s->mu);
        s->failed = 1;
        pthread_mutex_unlock(&s->mu);
      } else {
        if (tracing && t->category != STEPSCOPE_CAT_NONE) trace_host_op(s, t, t0, t1);
        if (t->done) t->done(t, t0, t1);
      }
    }
    free(t);
    if (s->d->hook) s->d->hook(s->d->hook_arg);
    pthread_mutex_lock(&s->mu);
    s->completed++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
}

static void trace_enqueue(const cpu_task *t, uint64_t t0) {
  stepscope_record r = {.kind = STEPSCOPE_REC_API};
  r.u.api.start_ns = t0;
  r.u.api.end_ns = stepscope_now_ns();
  r.u.api.correlation_id = t->correlation;
  r.u.api.thread = stepscope_thread_id();
  char name[96];
  snprintf(name, sizeof name, "enqueue %s", t->name);
  r.u.api.name = stepscope_intern_current(name);
  r.u.api.api_kind = STEPSCOPE_API_HOST_ENQUEUE;
  stepscope_emit(&r);
}

int cpu_stream_enqueue(dev_stream *s, const cpu_task *src) {
  int tracing = stepscope_active();
  uint64_t t0 = tracing ? stepscope_now_ns() : 0;
  cpu_task *t = malloc(sizeof *t);
  if (!t) {
    device_fail(s->d, "out of memory enqueueing an operation");
    return -1;
  }
  *t = *src;
  t->next = NULL;
  t->correlation = atomic_fetch_add(&g_correlation, 1);
  t->stream_trace_id = s->trace_id;
  pthread_mutex_lock(&s->mu);
  if (s->tail)
    s->tail->next = t;
  else
    s->head = t;
  s->tail = t;
  s->enqueued++;
  pthread_cond_broadcast(&s->cv);
  /* the worker may already have run and freed t: trace from the caller's copy */
  uint64_t correlation = t->correlation;
  pthread_mutex_unlock(&s->mu);
  if (tracing && src->category != STEPSCOPE_CAT_NONE) {
    cpu_task meta = *src;
    meta.correlation = correlation;
    trace_enqueue(&meta, t0);
  }
  return 0;
}

static dev_stream *cpu_stream_create(dev_device *d, const char *name) {
  if (d->nstreams >= CPU_MAX_STREAMS) return NULL;
  dev_stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->d = d;
  snprintf(s->name, sizeof s->name, "%s", name);
  s->trace_id = (uint64_t)d->nstreams + 1;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  if (pthread_create(&s->thread, NULL, stream_worker, s) != 0) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    return NULL;
  }
  d->streams[d->nstreams++] = s;
  if (stepscope_active()) stepscope_stream_declare(s->trace_id, STEPSCOPE_STREAM_CPU, 0, s->name);
  return s;
}

static void cpu_stream_destroy(dev_stream *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  dev_device *d = s->d;
  for (int i = 0; i < d->nstreams; i++)
    if (d->streams[i] == s) d->streams[i] = NULL;
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}

/* The host waits for a stream; a wait that blocks is a host-side SYNC record (stream 0: the
 * host waits), which the critical path follows from the host to the device. */
static int cpu_stream_synchronize(dev_stream *s) {
  int tracing = stepscope_active();
  uint64_t t0 = tracing ? stepscope_now_ns() : 0;
  int waited = 0;
  pthread_mutex_lock(&s->mu);
  uint64_t target = s->enqueued;
  while (s->completed < target) {
    waited = 1;
    pthread_cond_wait(&s->cv, &s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  if (tracing && waited) {
    stepscope_record r = {.kind = STEPSCOPE_REC_SYNC};
    r.u.sync.start_ns = t0;
    r.u.sync.end_ns = stepscope_now_ns();
    r.u.sync.sync_kind = STEPSCOPE_SYNC_STREAM;
    stepscope_emit(&r);
  }
  return atomic_load(&s->d->failed) ? -1 : 0;
}

/* ---- events ------------------------------------------------------------------- */

static dev_event *cpu_event_create(dev_device *d) {
  dev_event *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->d = d;
  e->id = atomic_fetch_add(&g_event_ids, 1);
  return e;
}

static void cpu_event_destroy(dev_event *e) {
  free(e);
}

static int run_event_record(cpu_task *t, char *err, size_t errlen) {
  dev_event *e = t->p[0];
  uint64_t target = (uint64_t)t->i[0];
  pthread_mutex_lock(&e->d->mu);
  if (e->done < target) e->done = target;
  pthread_cond_broadcast(&e->d->cv);
  pthread_mutex_unlock(&e->d->mu);
  return 0;
}

static void cpu_event_record(dev_event *e, dev_stream *s) {
  cpu_task t = {0};
  t.run = run_event_record;
  t.name = "event record";
  t.category = STEPSCOPE_CAT_NONE;
  t.p[0] = e;
  t.i[0] = (int64_t)++e->recorded;
  cpu_stream_enqueue(s, &t);
}

static int run_wait_event(cpu_task *t, char *err, size_t errlen) {
  dev_event *e = t->p[0];
  uint64_t target = (uint64_t)t->i[0];
  dev_device *d = e->d;
  int tracing = stepscope_active();
  uint64_t t0 = tracing ? stepscope_now_ns() : 0;
  int waited = 0;
  pthread_mutex_lock(&d->mu);
  while (e->done < target && !atomic_load(&d->failed)) {
    waited = 1;
    pthread_cond_wait(&d->cv, &d->mu);
  }
  int ok = e->done >= target;
  pthread_mutex_unlock(&d->mu);
  if (!ok) {
    snprintf(err, errlen, "stream wait on event %llu abandoned: %s", (unsigned long long)e->id,
             d->error);
    return -1;
  }
  if (tracing && waited) {
    stepscope_record r = {.kind = STEPSCOPE_REC_SYNC};
    r.u.sync.start_ns = t0;
    r.u.sync.end_ns = stepscope_now_ns();
    r.u.sync.stream = t->stream_trace_id;
    r.u.sync.event_id = e->id;
    r.u.sync.correlation_id = t->correlation;
    r.u.sync.sync_kind = STEPSCOPE_SYNC_STREAM_WAIT_EVENT;
    stepscope_emit(&r);
  }
  return 0;
}

static void cpu_stream_wait_event(dev_stream *s, dev_event *e) {
  if (e->recorded == 0) return;
  cpu_task t = {0};
  t.run = run_wait_event;
  t.name = "wait event";
  t.category = STEPSCOPE_CAT_NONE;
  t.p[0] = e;
  t.i[0] = (int64_t)e->recorded;
  cpu_stream_enqueue(s, &t);
}

/* ---- copies --------------------------------------------------------------------- */

static int run_copy(cpu_task *t, char *err, size_t errlen) {
  memcpy(t->p[0], t->p[1], (size_t)t->i[0]);
  return 0;
}

static void enqueue_copy(dev_stream *s, void *dst, const void *src, size_t bytes,
                         const char *name) {
  cpu_task t = {0};
  t.run = run_copy;
  t.name = name;
  t.category = STEPSCOPE_CAT_MEMCPY;
  t.bytes = bytes;
  t.p[0] = dst;
  t.p[1] = (void *)src;
  t.i[0] = (int64_t)bytes;
  cpu_stream_enqueue(s, &t);
}

static void cpu_copy_to_device(dev_stream *s, void *dst, const void *src, size_t bytes) {
  enqueue_copy(s, dst, src, bytes, "copy to device");
}
static void cpu_copy_to_host(dev_stream *s, void *dst, const void *src, size_t bytes) {
  enqueue_copy(s, dst, src, bytes, "copy to host");
}
static void cpu_copy(dev_stream *s, void *dst, const void *src, size_t bytes) {
  enqueue_copy(s, dst, src, bytes, "copy");
}

static int run_zero(cpu_task *t, char *err, size_t errlen) {
  memset(t->p[0], 0, (size_t)t->i[0]);
  return 0;
}

static void cpu_zero(dev_stream *s, void *dst, size_t bytes) {
  cpu_task t = {0};
  t.run = run_zero;
  t.name = "zero";
  t.category = STEPSCOPE_CAT_MEMSET;
  t.bytes = bytes;
  t.p[0] = dst;
  t.i[0] = (int64_t)bytes;
  cpu_stream_enqueue(s, &t);
}

static int run_copy_2d(cpu_task *t, char *err, size_t errlen) {
  char *dst = t->p[0];
  const char *src = t->p[1];
  size_t dpitch = (size_t)t->i[0], spitch = (size_t)t->i[1], width = (size_t)t->i[2];
  for (size_t r = 0; r < (size_t)t->i[3]; r++)
    memcpy(dst + r * dpitch, src + r * spitch, width);
  return 0;
}

static void cpu_copy_2d(dev_stream *s, void *dst, size_t dst_pitch, const void *src,
                        size_t src_pitch, size_t width_bytes, size_t rows) {
  cpu_task t = {0};
  t.run = run_copy_2d;
  t.name = "copy 2d";
  t.category = STEPSCOPE_CAT_MEMCPY;
  t.bytes = width_bytes * rows;
  t.p[0] = dst;
  t.p[1] = (void *)src;
  t.i[0] = (int64_t)dst_pitch;
  t.i[1] = (int64_t)src_pitch;
  t.i[2] = (int64_t)width_bytes;
  t.i[3] = (int64_t)rows;
  cpu_stream_enqueue(s, &t);
}

dev_dtype cpu_stream_activation_dtype(const dev_stream *s) {
  return s->d->act;
}

static int cpu_set_activation_dtype(dev_device *d, dev_dtype t, char *err, size_t errlen) {
  if (t != DEV_F32 && t != DEV_BF16) {
    snprintf(err, errlen, "unknown activation type %d", (int)t);
    return -1;
  }
  d->act = t;
  return 0;
}
static dev_dtype cpu_activation_dtype(const dev_device *d) {
  return d->act;
}

static void cpu_close(dev_device *d);
static const char *cpu_name(const dev_device *d) {
  return "cpu";
}
static const char *cpu_last_error(const dev_device *d) {
  return d->error;
}
static void cpu_trace_started(dev_device *d);
static void cpu_set_progress_hook(dev_device *d, void (*hook)(void *), void *arg);

/* The backend's table: the device-level operations below, the model operations of
 * device_cpu_ops.c (dev_cpu_fill_model_ops); built once, at first use. */
static dev_ops cpu_ops;
static pthread_once_t cpu_ops_once = PTHREAD_ONCE_INIT;

static void cpu_ops_build(void) {
  cpu_ops = (dev_ops){
      .backend_name = "cpu",
      .close = cpu_close,
      .name = cpu_name,
      .last_error = cpu_last_error,
      .trace_started = cpu_trace_started,
      .set_progress_hook = cpu_set_progress_hook,
      .bytes_in_use = cpu_bytes_in_use,
      .bytes_peak = cpu_bytes_peak,
      .abort = cpu_abort,
      .set_activation_dtype = cpu_set_activation_dtype,
      .activation_dtype = cpu_activation_dtype,
      .alloc = cpu_alloc,
      .free = cpu_free,
      .stream_create = cpu_stream_create,
      .stream_destroy = cpu_stream_destroy,
      .stream_synchronize = cpu_stream_synchronize,
      .event_create = cpu_event_create,
      .event_destroy = cpu_event_destroy,
      .event_record = cpu_event_record,
      .stream_wait_event = cpu_stream_wait_event,
      .copy_to_device = cpu_copy_to_device,
      .copy_to_host = cpu_copy_to_host,
      .copy = cpu_copy,
      .zero = cpu_zero,
      .copy_2d = cpu_copy_2d,
  };
  dev_cpu_fill_model_ops(&cpu_ops);
}

const dev_ops *dev_cpu_ops(void) {
  pthread_once(&cpu_ops_once, cpu_ops_build);
  return &cpu_ops;
}

dev_device *dev_cpu_open(char *err, size_t errlen) {
  dev_device *d = calloc(1, sizeof *d);
  if (!d) {
    snprintf(err, errlen, "out of memory creating the cpu device");
    return NULL;
  }
  d->ops = dev_cpu_ops();
  pthread_mutex_init(&d->mu, NULL);
  d->live.prev = d->live.next = &d->live;
  pthread_cond_init(&d->cv, NULL);
  return d;
}

static void cpu_close(dev_device *d) {
  for (int i = 0; i < d->nstreams; i++)
    if (d->streams[i]) cpu_stream_destroy(d->streams[i]);
  pthread_mutex_destroy(&d->mu);
  pthread_cond_destroy(&d->cv);
  free(d);
}

/* Declares the streams, and writes the allocations live when the trace starts as MEMORY
 * records at its start (oldest first, the bytes in use adding up to the device's), so that
 * the trace's memory timeline starts from what the run holds. */
static void cpu_trace_started(dev_device *d) {
  for (int i = 0; i < d->nstreams; i++)
    if (d->streams[i])
      stepscope_stream_declare(d->streams[i]->trace_id, STEPSCOPE_STREAM_CPU, 0,
                               d->streams[i]->name);
  pthread_mutex_lock(&d->mu);
  size_t in_use = 0;
  for (alloc_header *h = d->live.next; h != &d->live; h = h->next) {
    in_use += h->bytes;
    trace_memory((char *)h + sizeof *h, h->bytes, in_use, STEPSCOPE_MEM_ALLOC);
  }
  pthread_mutex_unlock(&d->mu);
}

static void cpu_set_progress_hook(dev_device *d, void (*hook)(void *), void *arg) {
  d->hook = hook;
  d->hook_arg = arg;
}
