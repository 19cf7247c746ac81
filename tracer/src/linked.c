/*
 * linked.c — the process-wide tracer used in "linked" mode: the trainer, the
 * CPU backend and user code call stepscope_start/stop and the small host
 * activity API (ranges, steps, marks, counters, metadata, streams).
 *
 * One global trace session (the writer and the ids it interned at start),
 * published through an atomic pointer so that every call is a single load
 * and a branch while no trace runs. Ranges use a per-thread stack (pushes
 * without pops at stop are dropped, as NVTX does). The tracer never takes
 * the process down: a failure to start returns an error to the caller,
 * later failures print one warning and the trace goes quiet.
 *
 * Stopping while other threads emit. A thread may load the session just
 * before stepscope_stop unpublishes it and go on using it while stop runs
 * or after. So stop closes the writer with writer_retire, which finishes
 * the appends in flight, writes them, and turns later appends and interns
 * into no-ops, and a stopped session (with its writer's shell) is never
 * freed: it is moved to a list of retired sessions (a few hundred bytes per
 * start/stop cycle).
 *
 * Signals and failures. stepscope_start installs (once) the handlers of
 * signal_flush.c: SIGTERM, SIGINT and SIGHUP close the trace with an END
 * record naming the signal before the process dies of it (or flush it when
 * the program handles the signal itself). A write failure (a full disk)
 * is reported once by the writer, when it happens; stop does not repeat it.
 *
 * Clock: the trace clock of linked mode is CLOCK_MONOTONIC; clock anchors
 * (monotonic, realtime) are written at start, about every 10 s from the
 * writer's background thread, and at stop.
 *
 * Machine load: at start and at stop the `machine` metadata (model/trace_metadata.h) records
 * the CPUs online and the 1-minute load average, so that a trace says whether it was taken
 * on a busy machine (the diff withholds verdicts when two runs' loads differ).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "signal_flush.h"
#include "stepscope.h"
#include "writer_internal.h"
#include "sc_file.h"
#include "trace_metadata.h"

#define RANGE_STACK_DEPTH  128
#define ANCHOR_INTERVAL_MS 10000

typedef struct trace_session {
  stepscope_writer *w;
  uint32_t domain;    /* "stepscope" */
  uint32_t step_name; /* "step" */
  char path[4096];
  double load_start; /* 1-minute load average at start; NaN unknown */
  struct trace_session *retired_next;
} trace_session;

static _Atomic(trace_session *) g_session;
static pthread_mutex_t g_start_mu = PTHREAD_MUTEX_INITIALIZER;
static trace_session *g_retired; /* stopped sessions: threads may still hold them */

static trace_session *current_session(void) {
  return atomic_load_explicit(&g_session, memory_order_acquire);
}

typedef struct open_range {
  uint64_t start_ns;
  uint32_t name, args;
  uint32_t payload_kind;
  uint64_t payload;
} open_range;

static _Thread_local open_range tls_ranges[RANGE_STACK_DEPTH];
static _Thread_local int tls_depth;
static _Thread_local stepscope_writer *tls_ranges_owner; /* ranges belong to this trace */

uint64_t stepscope_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t stepscope_thread_id(void) {
  return (uint64_t)syscall(SYS_gettid);
}

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void write_anchor(stepscope_writer *w) {
  uint64_t m0 = stepscope_now_ns();
  uint64_t rt = realtime_ns();
  uint64_t m1 = stepscope_now_ns();
  stepscope_record rec = {.kind = STEPSCOPE_REC_CLOCK_ANCHOR};
  rec.u.clock_anchor.monotonic_ns = m0 + (m1 - m0) / 2;
  rec.u.clock_anchor.trace_ns = rec.u.clock_anchor.monotonic_ns;
  rec.u.clock_anchor.realtime_ns = rt;
  rec.u.clock_anchor.uncertainty_ns = (m1 - m0) / 2;
  stepscope_write(w, &rec);
}

static void anchor_tick(void *arg) {
  write_anchor(arg);
}

/* The 1-minute load average now; NaN when the system does not say. */
static double load_1m(void) {
  double v;
  return getloadavg(&v, 1) == 1 && v >= 0 ? v : NAN;
}

/* The `machine` metadata: CPUs online, the load when tracing started and (at stop) now. */
static void write_machine(stepscope_writer *w, double load_start, int at_stop) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  double end = at_stop ? load_1m() : NAN;
  char json[160];
  int n = snprintf(json, sizeof json, "{\"cpus\":%ld", cpus > 0 ? cpus : 1);
  if (!isnan(load_start))
    n += snprintf(json + n, sizeof json - (size_t)n, ",\"load_1m_start\":%.2f", load_start);
  if (!isnan(end)) n += snprintf(json + n, sizeof json - (size_t)n, ",\"load_1m_end\":%.2f", end);
  snprintf(json + n, sizeof json - (size_t)n, "}");
  stepscope_record rec = {.kind = STEPSCOPE_REC_METADATA};
  rec.u.metadata.key = TM_KEY_MACHINE;
  rec.u.metadata.value_json = json;
  stepscope_write(w, &rec);
}

static int env_int(const char *const *names, int fallback) {
  for (; *names; names++) {
    const char *v = getenv(*names);
    if (v && *v) {
      char *end;
      long n = strtol(v, &end, 10);
      if (*end == '\0' && n >= 0 && n < (1L << 30)) return (int)n;
    }
  }
  return fallback;
}

/* On the signal thread (signal_flush.c): `final` closes the trace for good,
 * the process is about to die of `sig`; otherwise the program handles the
 * signal and the trace is only flushed. Races with stepscope_stop like any
 * emitter: whoever takes the session from g_session closes it, and a
 * session is never freed. */
static void flush_for_signal(int sig, int final) {
  if (!final) {
    trace_session *session = current_session();
    if (session) writer_flush_on_signal(session->w);
    return;
  }
  trace_session *session = atomic_exchange(&g_session, NULL);
  if (!session) return;
  write_anchor(session->w);
  stepscope_error err;
  err.message[0] = '\0';
  if (writer_retire_reason(session->w, STEPSCOPE_END_SIGNAL, sig, &err) &&
      !writer_io_failed(session->w)) {
    static const char msg[] = "stepscope: closing the trace on a signal failed\n";
    (void)!write(2, msg, sizeof msg - 1);
  }
  /* not put on g_retired (that takes g_start_mu, which the interrupted
   * thread may hold): the process is about to end */
}

int stepscope_start(const stepscope_start_options *opt, stepscope_error *err) {
  if (!opt || !opt->run_dir) {
    error_set(err, STEPSCOPE_E_ARGUMENT, 0, "stepscope_start: run_dir is required");
    return STEPSCOPE_E_ARGUMENT;
  }
  pthread_mutex_lock(&g_start_mu);
  if (atomic_load(&g_session)) {
    pthread_mutex_unlock(&g_start_mu);
    error_set(err, STEPSCOPE_E_STATE, 0, "stepscope_start: a trace is already running");
    return STEPSCOPE_E_STATE;
  }
  static const char *const rank_env[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK",
                                         NULL};
  static const char *const world_env[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS",
                                          "PMI_SIZE", NULL};
  static const char *const local_env[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "SLURM_LOCALID", NULL};
  stepscope_header h = {0};
  h.rank = opt->rank >= 0 ? opt->rank : env_int(rank_env, 0);
  h.world_size = opt->world_size > 0 ? opt->world_size : env_int(world_env, 1);
  h.local_rank = opt->local_rank >= 0 ? opt->local_rank : env_int(local_env, 0);
  h.pid = (int64_t)getpid();
  h.clock_domain = opt->clock_domain ? opt->clock_domain : STEPSCOPE_CLOCK_MONOTONIC;
  h.start_ns = stepscope_now_ns();
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  h.hostname = host;
  h.producer = opt->producer ? opt->producer : "libstepscope " STEPSCOPE_VERSION_STRING;
  h.device_name = opt->device_name ? opt->device_name : "cpu";
  h.device_json = opt->device_json;
  h.driver_version = opt->driver_version;
  h.cuda_version = opt->cuda_version;
  h.nccl_version = opt->nccl_version;
  h.cupti_version = opt->cupti_version;
  h.config_json = opt->config_json;

  if (sc_mkdir_p(opt->run_dir, 0755) != 0) {
    pthread_mutex_unlock(&g_start_mu);
    error_set(err, STEPSCOPE_E_IO, 0, "%s: cannot create run directory: %s", opt->run_dir,
              strerror(errno));
    return STEPSCOPE_E_IO;
  }
  trace_session *session = calloc(1, sizeof *session);
  if (!session) {
    pthread_mutex_unlock(&g_start_mu);
    error_set(err, STEPSCOPE_E_NOMEM, 0, "stepscope_start: out of memory");
    return STEPSCOPE_E_NOMEM;
  }
  snprintf(session->path, sizeof session->path, "%s/rank-%05d.trace.zst", opt->run_dir, h.rank);
  stepscope_writer_options wopt = {.background_flush = 1};
  if (opt->writer) wopt = *opt->writer;
  stepscope_writer *w = stepscope_writer_open(session->path, &h, &wopt, err);
  if (!w) {
    pthread_mutex_unlock(&g_start_mu);
    free(session);
    return err ? err->code : STEPSCOPE_E_IO;
  }
  session->w = w;
  session->domain = stepscope_intern(w, "stepscope");
  session->step_name = stepscope_intern(w, "step");
  write_anchor(w);
  session->load_start = load_1m();
  write_machine(w, session->load_start, 0);
  writer_set_tick(w, anchor_tick, w, ANCHOR_INTERVAL_MS);
  signal_flush_install(flush_for_signal); /* once per process; failure: no flush on signals */
  atomic_store_explicit(&g_session, session, memory_order_release);
  pthread_mutex_unlock(&g_start_mu);
  return 0;
}

int stepscope_stop(void) {
  pthread_mutex_lock(&g_start_mu);
  trace_session *session = atomic_exchange(&g_session, NULL);
  int rc = 0;
  if (session) {
    write_anchor(session->w);
    write_machine(session->w, session->load_start, 1);
    stepscope_error err;
    err.message[0] = '\0';
    rc = writer_retire(session->w, &err);
    /* a failed write was reported when it happened: said once, not again */
    if (rc && !writer_io_failed(session->w))
      fprintf(stderr, "stepscope: closing the trace failed: %s\n",
              err.message[0] ? err.message : stepscope_status_name(rc));
    session->retired_next = g_retired; /* other threads may still hold it: kept */
    g_retired = session;
  }
  pthread_mutex_unlock(&g_start_mu);
  return rc;
}

int stepscope_active(void) {
  return current_session() != NULL;
}

stepscope_writer *stepscope_current(void) {
  trace_session *session = current_session();
  return session ? session->w : NULL;
}

const char *stepscope_current_path(void) {
  trace_session *session = current_session();
  return session ? session->path : NULL;
}

void stepscope_clock_anchor_now(void) {
  stepscope_writer *w = stepscope_current();
  if (w) write_anchor(w);
}

void stepscope_emit(const stepscope_record *rec) {
  stepscope_writer *w = stepscope_current();
  if (w) stepscope_write(w, rec);
}

uint32_t stepscope_intern_current(const char *s) {
  stepscope_writer *w = stepscope_current();
  return w ? stepscope_intern(w, s) : 0;
}

uint64_t stepscope_stream_declare(uint64_t stream, stepscope_stream_kind kind, uint32_t device,
                                  const char *name) {
  stepscope_writer *w = stepscope_current();
  if (!w) return stream;
  stepscope_record rec = {.kind = STEPSCOPE_REC_STREAM};
  rec.u.stream.stream = stream;
  rec.u.stream.stream_kind = (uint32_t)kind;
  rec.u.stream.device = device;
  rec.u.stream.name = stepscope_intern(w, name);
  stepscope_write(w, &rec);
  return stream;
}

static void push_range(stepscope_writer *w, uint32_t name, uint32_t args, uint32_t payload_kind,
                       uint64_t payload) {
  if (tls_ranges_owner != w) { /* ranges left open in an earlier trace do not carry over */
    tls_ranges_owner = w;
    tls_depth = 0;
  }
  if (tls_depth < RANGE_STACK_DEPTH)
    tls_ranges[tls_depth] = (open_range){stepscope_now_ns(), name, args, payload_kind, payload};
  tls_depth++; /* counted past the limit so pops stay balanced */
}

void stepscope_range_push(const char *name, const char *args_json) {
  stepscope_writer *w = stepscope_current();
  if (!w) return;
  push_range(w, stepscope_intern(w, name), args_json ? stepscope_intern(w, args_json) : 0,
             STEPSCOPE_PAYLOAD_NONE, 0);
}

void stepscope_range_pop(void) {
  trace_session *session = current_session();
  stepscope_writer *w = session ? session->w : NULL;
  if (!w || tls_ranges_owner != w || tls_depth == 0) return;
  tls_depth--;
  if (tls_depth >= RANGE_STACK_DEPTH) return;
  const open_range *o = &tls_ranges[tls_depth];
  stepscope_record rec = {.kind = STEPSCOPE_REC_RANGE};
  rec.u.range.start_ns = o->start_ns;
  rec.u.range.end_ns = stepscope_now_ns();
  rec.u.range.thread = stepscope_thread_id();
  rec.u.range.name = o->name;
  rec.u.range.domain = session->domain;
  rec.u.range.args = o->args;
  rec.u.range.payload_kind = o->payload_kind;
  rec.u.range.payload = o->payload;
  stepscope_write(w, &rec);
}

void stepscope_step_begin(uint64_t step) {
  trace_session *session = current_session();
  if (session) push_range(session->w, session->step_name, 0, STEPSCOPE_PAYLOAD_UINT64, step);
}

void stepscope_step_end(void) {
  stepscope_range_pop();
}

void stepscope_mark_now(const char *name, const char *args_json) {
  trace_session *session = current_session();
  if (!session) return;
  stepscope_writer *w = session->w;
  stepscope_record rec = {.kind = STEPSCOPE_REC_MARK};
  rec.u.mark.time_ns = stepscope_now_ns();
  rec.u.mark.thread = stepscope_thread_id();
  rec.u.mark.name = stepscope_intern(w, name);
  rec.u.mark.domain = session->domain;
  rec.u.mark.args = args_json ? stepscope_intern(w, args_json) : 0;
  stepscope_write(w, &rec);
}

void stepscope_counter_now(const char *name, uint32_t device, double value) {
  stepscope_writer *w = stepscope_current();
  if (!w) return;
  stepscope_record rec = {.kind = STEPSCOPE_REC_COUNTER};
  rec.u.counter.time_ns = stepscope_now_ns();
  rec.u.counter.name = stepscope_intern(w, name);
  rec.u.counter.device = device;
  rec.u.counter.value = value;
  stepscope_write(w, &rec);
}

void stepscope_metadata_set(const char *key, const char *value_json) {
  stepscope_writer *w = stepscope_current();
  if (!w || !key || !value_json) return;
  stepscope_record rec = {.kind = STEPSCOPE_REC_METADATA};
  rec.u.metadata.key = key;
  rec.u.metadata.value_json = value_json;
  stepscope_write(w, &rec);
}

stepscope_op stepscope_op_begin(uint64_t stream, stepscope_category category, const char *name,
                                const char *args_json) {
  stepscope_op op = {0};
  stepscope_writer *w = stepscope_current();
  if (!w) return op;
  op.start_ns = stepscope_now_ns();
  op.stream = stream;
  op.category = (uint32_t)category;
  op.name = stepscope_intern(w, name);
  op.args = args_json ? stepscope_intern(w, args_json) : 0;
  return op;
}

void stepscope_op_end(const stepscope_op *op, uint64_t bytes, uint64_t flops) {
  stepscope_writer *w = stepscope_current();
  if (!w || !op || op->start_ns == 0) return; /* begun while no trace ran */
  stepscope_record rec = {.kind = STEPSCOPE_REC_HOST_OP};
  rec.u.host_op.start_ns = op->start_ns;
  rec.u.host_op.end_ns = stepscope_now_ns();
  rec.u.host_op.stream = op->stream;
  rec.u.host_op.correlation_id = op->correlation_id;
  rec.u.host_op.name = op->name;
  rec.u.host_op.category = op->category;
  rec.u.host_op.args = op->args;
  rec.u.host_op.bytes = bytes;
  rec.u.host_op.flops = flops;
  stepscope_write(w, &rec);
}
