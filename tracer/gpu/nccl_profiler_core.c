/*
 * nccl_profiler_core.c — turns NCCL profiler events into COLLECTIVE records.
 *
 * NCCL reports a tree of events per rank: an API event per user call
 * (GroupApi > CollApi/P2pApi), a Coll or P2p event per operation, KernelCh
 * events per channel while the NCCL kernel runs (with GPU globaltimer
 * stamps), and a KernelLaunch event around the cuLaunchKernel call. What
 * NCCL 2.28 really does (src/enqueue.cc, src/plugin/profiler.cc), and what
 * this file is built around:
 *
 *   - the kernel is launched (KernelLaunch start/stop, user thread) BEFORE
 *     the Coll/P2p events start: those are started and stopped by
 *     hostStreamPlanTask, after the launch, on the user thread or on a CUDA
 *     host-callback thread, possibly after the CollApi and GroupApi events
 *     have already been stopped;
 *   - a Coll's stopEvent only means "enqueued"; its KernelCh events are
 *     started and stopped later by NCCL's proxy thread (one per channel),
 *     with the Coll's handle as parent, after the Coll was stopped;
 *   - NCCL keeps the handles we returned and hands them back as parentObj
 *     later, so a handle must stay valid memory after its event ended.
 *
 * Lifetime: every event is a heap object with a reference count (its own
 * stop, one per live child, and for a Coll/P2p one per channel whose KernelCh
 * stop is expected). At zero it is RETIRED, not freed: its magic changes and
 * it goes into a ring of the last RETIRE_SLOTS retired events; only an event
 * pushed out of the ring is freed. A late child naming a retired parent
 * therefore reads valid memory: it copies what it needs (the group's launch
 * correlation id, the API call's stream) and takes no reference. A Coll/P2p
 * is written as one COLLECTIVE record when its count reaches zero, or at the
 * communicator's finalize / the end of the trace if some KernelCh never came.
 *
 *   - start/end: the earliest KernelCh start and latest KernelCh stop GPU
 *     time, converted to the trace clock (flag GPU_TIMED), when NCCL gave
 *     them and they are plausible; otherwise the host enqueue interval.
 *   - seq: our own per-communicator counter of collectives (NCCL's
 *     seqNumber counts per function), identical on every member because
 *     NCCL requires every rank to issue a communicator's collectives in the
 *     same order. For send/recv, the counter is per (communicator, peer,
 *     direction), so rank a's k-th send to b matches b's k-th recv from a.
 *   - correlation_id: the CUPTI correlation id of the group's kernel launch
 *     (from the CUPTI driver callback), which joins the NCCL kernel record.
 *
 * Threads: API and KernelLaunch events come from the user's thread, Coll/P2p
 * from the user's or a CUDA callback thread, KernelCh from NCCL's proxy
 * thread; reference counts and GPU time bounds are atomics, the retire ring
 * and the list of unwritten operations take a mutex. Nothing here can make
 * NCCL fail: allocation failures drop the event and are counted.
 */
#include "nccl_profiler_core.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_session.h"
#include "nccl_names.h"
#include "stepscope.h"

#define EVENT_MAGIC   0x5354455053434f50ull /* "STEPSCOP": a live event */
#define RETIRED_MAGIC 0x5245544952454421ull /* "RETIRED!": ended, memory still valid */
#define RETIRE_SLOTS  16384                 /* about 4 MB of retired events at most */

typedef struct nccl_comm {
  uint64_t comm_id;
  uint32_t name_id;            /* `name` interned in the trace `marked_in` */
  char *name;                  /* NULL when NCCL gave none (or not JSON-safe) */
  stepscope_writer *marked_in; /* atomic: trace that holds this comm's init MARK */
  int rank, nranks, nnodes, version;
  int device;
  uint64_t next_coll_seq; /* atomic */
  uint64_t *p2p_seq;      /* [2 * nranks]: sends to peer, then recvs from peer */
  uint64_t live_events;   /* atomic: events of this communicator not yet retired */
  int finalized;          /* NCCL called finalize; freed by its last event */
} nccl_comm;

typedef struct nccl_event {
  uint64_t magic;
  uint64_t type;
  nccl_comm *comm;
  struct nccl_event *parent; /* we hold a reference on it (NULL if it had ended) */
  int refs;                  /* atomic */
  uint64_t host_start, host_stop;
  uint64_t correlation_id; /* GroupApi/Group: first kernel launch correlation (atomic);
                              Coll/P2p: copied from an ended group at start */
  uint64_t stream;         /* API events: trace stream id */
  /* Coll / P2p / CE coll */
  struct nccl_event *pending_prev, *pending_next; /* list of operations not yet written */
  int written;                                    /* atomic: the COLLECTIVE record is out */
  stepscope_collective rec;
  uint64_t gpu_start; /* min KernelCh start timer (atomic), UINT64_MAX if none */
  uint64_t gpu_stop;  /* max KernelCh stop timer (atomic), 0 if none */
} nccl_event;

static pthread_mutex_t lifetime_lock = PTHREAD_MUTEX_INITIALIZER; /* ring + pending list */
static nccl_event *retired[RETIRE_SLOTS];
static size_t retire_next;
static nccl_event *pending_head;
static __thread nccl_event *tls_launching_group;
static sgpu_nccl_stats stats; /* atomics */
static int flush_registered;

void sgpu_nccl_get_stats(sgpu_nccl_stats *out) {
  out->collectives_written = __atomic_load_n(&stats.collectives_written, __ATOMIC_RELAXED);
  out->events_live = __atomic_load_n(&stats.events_live, __ATOMIC_RELAXED);
  out->allocation_failures = __atomic_load_n(&stats.allocation_failures, __ATOMIC_RELAXED);
  out->late_events = __atomic_load_n(&stats.late_events, __ATOMIC_RELAXED);
  out->flushed_unfinished = __atomic_load_n(&stats.flushed_unfinished, __ATOMIC_RELAXED);
}

int sgpu_nccl_activation_mask(int version) {
  int mask = SGPU_NCCL_EV_COLL | SGPU_NCCL_EV_P2P | SGPU_NCCL_EV_KERNEL_CH;
  if (version >= 5)
    mask |= SGPU_NCCL_EV_GROUP_API | SGPU_NCCL_EV_COLL_API | SGPU_NCCL_EV_P2P_API |
            SGPU_NCCL_EV_KERNEL_LAUNCH;
  else
    mask |= SGPU_NCCL_EV_GROUP;
  if (version >= 6) mask |= SGPU_NCCL_EV_CE_COLL;
  return mask;
}

/* ---- clocks ------------------------------------------------------------ */

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* NCCL's kernel timers read the GPU globaltimer, which the driver keeps close
 * to the host's CLOCK_REALTIME. Converted to the trace clock (monotonic) with
 * the current realtime-monotonic offset; 0 when the result is implausible. */
typedef struct clock_pair {
  uint64_t mono, real;
} clock_pair;

static clock_pair clock_pair_now(void) {
  clock_pair p;
  p.mono = clock_ns(CLOCK_MONOTONIC);
  p.real = clock_ns(CLOCK_REALTIME);
  return p;
}

static uint64_t gpu_timer_to_trace(uint64_t timer, clock_pair now, uint64_t host_reference) {
  if (timer == 0 || timer < now.real - now.mono) return 0;
  uint64_t t = timer - (now.real - now.mono);
  if (t + 5000000000ull < host_reference || t > now.mono + 1000000000ull) return 0;
  return t;
}

/* ---- string ids (NCCL's algorithm/protocol names are static strings) ---- */

static uint32_t intern_cached(const char *s) {
  enum { SLOTS = 32 };
  static const char *keys[SLOTS];
  static uint32_t ids[SLOTS];
  static stepscope_writer *owner;
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  if (!s || !*s) return 0;
  uint32_t id = 0;
  pthread_mutex_lock(&lock);
  stepscope_writer *w = stepscope_current();
  if (w != owner) { /* a new trace: ids of the old one mean nothing */
    memset(keys, 0, sizeof keys);
    owner = w;
  }
  size_t slot = ((uintptr_t)s >> 3) % SLOTS;
  if (keys[slot] == s) {
    id = ids[slot];
  } else {
    id = stepscope_intern_current(s);
    if (id) {
      keys[slot] = s;
      ids[slot] = id;
    }
  }
  pthread_mutex_unlock(&lock);
  return id;
}

/* ---- communicators ------------------------------------------------------ */

static void write_comm_mark(const nccl_comm *c, const char *name) {
  char args[256];
  snprintf(args, sizeof args,
           "{\"comm_id\":\"0x%016llx\",\"name\":\"%s\",\"rank\":%d,\"nranks\":%d,\"nnodes\":%d,"
           "\"profiler_version\":%d}",
           (unsigned long long)c->comm_id, name ? name : "", c->rank, c->nranks, c->nnodes,
           c->version);
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_MARK;
  r.u.mark.time_ns = stepscope_now_ns();
  r.u.mark.thread = stepscope_thread_id();
  r.u.mark.name = stepscope_intern_current("ncclCommInit");
  r.u.mark.domain = stepscope_intern_current("NCCL");
  r.u.mark.payload_kind = STEPSCOPE_PAYLOAD_UINT64;
  r.u.mark.payload = c->comm_id;
  r.u.mark.args = stepscope_intern_current(args);
  stepscope_emit(&r);
}

static int name_is_json_safe(const char *s) {
  for (; s && *s; s++)
    if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) return 0;
  return 1;
}

/* Writes the communicator's init MARK and interns its name in the running
 * trace, once per trace: at init when a trace runs, else at the first event
 * seen while one runs (a linked program creates its communicators before it
 * starts its trace, and may stop and start it again around a profiling window). */
static void comm_mark_in_current_trace(nccl_comm *c) {
  stepscope_writer *w = stepscope_current();
  stepscope_writer *seen = __atomic_load_n(&c->marked_in, __ATOMIC_ACQUIRE);
  if (!w || seen == w) return;
  if (!__atomic_compare_exchange_n(&c->marked_in, &seen, w, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return; /* another thread is writing it */
  __atomic_store_n(&c->name_id, c->name ? stepscope_intern_current(c->name) : 0, __ATOMIC_RELEASE);
  write_comm_mark(c, c->name);
}

sgpu_nccl_result sgpu_nccl_comm_init(void **context, int version, uint64_t comm_id,
                                     const char *comm_name, int nnodes, int nranks, int rank,
                                     int *activation_mask) {
  *context = NULL;
  /* No trace yet: in a linked program (it calls stepscope_start itself, maybe
   * after creating its communicators) the plugin stays and drops events until
   * the trace runs; anywhere else NCCL disables the plugin. */
  if (!sgpu_session_ensure() && !sgpu_session_linked_program()) return SGPU_NCCL_INTERNAL_ERROR;
  nccl_comm *c = calloc(1, sizeof *c);
  if (!c) return SGPU_NCCL_INTERNAL_ERROR;
  c->comm_id = comm_id;
  c->rank = rank;
  c->nranks = nranks;
  c->nnodes = nnodes;
  c->version = version;
  c->device = sgpu_hook_table.current_device ? sgpu_hook_table.current_device() : 0;
  if (c->device < 0) c->device = 0;
  if (nranks > 0) {
    c->p2p_seq = calloc(2 * (size_t)nranks, sizeof *c->p2p_seq);
    if (!c->p2p_seq) {
      free(c);
      return SGPU_NCCL_INTERNAL_ERROR;
    }
  }
  if (comm_name && *comm_name && name_is_json_safe(comm_name)) c->name = strdup(comm_name);
  comm_mark_in_current_trace(c);
  if (!__atomic_exchange_n(&flush_registered, 1, __ATOMIC_ACQ_REL))
    sgpu_session_add_flush(sgpu_nccl_flush_unfinished);
  *activation_mask = sgpu_nccl_activation_mask(version);
  *context = c;
  return SGPU_NCCL_SUCCESS;
}

/* ---- events ---------------------------------------------------------------- */

/* A live event of ours, or NULL. */
static nccl_event *as_live(void *handle) {
  nccl_event *e = handle;
  return e && __atomic_load_n(&e->magic, __ATOMIC_ACQUIRE) == EVENT_MAGIC ? e : NULL;
}

/* A live or retired event of ours (retired ones are read, never changed). */
static nccl_event *as_known(void *handle) {
  nccl_event *e = handle;
  if (!e) return NULL;
  uint64_t m = __atomic_load_n(&e->magic, __ATOMIC_ACQUIRE);
  return m == EVENT_MAGIC || m == RETIRED_MAGIC ? e : NULL;
}

static int is_group(const nccl_event *e) {
  return e->type == SGPU_NCCL_EV_GROUP_API || e->type == SGPU_NCCL_EV_GROUP;
}

static int is_operation(const nccl_event *e) {
  return e->type == SGPU_NCCL_EV_COLL || e->type == SGPU_NCCL_EV_P2P ||
         e->type == SGPU_NCCL_EV_CE_COLL;
}

static nccl_event *group_of(nccl_event *e) {
  for (nccl_event *p = e ? e->parent : NULL; p; p = p->parent)
    if (is_group(p)) return p;
  return NULL;
}

static uint64_t stream_of(nccl_event *e) {
  for (nccl_event *p = e ? e->parent : NULL; p; p = p->parent)
    if (p->stream) return p->stream;
  return 0;
}

static void pending_add(nccl_event *e) {
  pthread_mutex_lock(&lifetime_lock);
  e->pending_next = pending_head;
  if (pending_head) pending_head->pending_prev = e;
  pending_head = e;
  pthread_mutex_unlock(&lifetime_lock);
}

static void pending_remove_locked(nccl_event *e) {
  if (e->pending_prev)
    e->pending_prev->pending_next = e->pending_next;
  else if (pending_head == e)
    pending_head = e->pending_next;
  if (e->pending_next) e->pending_next->pending_prev = e->pending_prev;
  e->pending_prev = e->pending_next = NULL;
}

/* Writes the COLLECTIVE record of an operation, once. */
static void write_collective(nccl_event *e) {
  if (__atomic_exchange_n(&e->written, 1, __ATOMIC_ACQ_REL)) return;
  stepscope_collective rec = e->rec;
  uint64_t gpu_start = __atomic_load_n(&e->gpu_start, __ATOMIC_ACQUIRE);
  uint64_t gpu_stop = __atomic_load_n(&e->gpu_stop, __ATOMIC_ACQUIRE);
  uint64_t start = 0, end = 0;
  if (gpu_start != UINT64_MAX && gpu_stop != 0 && gpu_stop >= gpu_start) {
    clock_pair now = clock_pair_now(); /* one offset for both ends: durations stay exact */
    start = gpu_timer_to_trace(gpu_start, now, e->host_start);
    end = start ? gpu_timer_to_trace(gpu_stop, now, e->host_start) : 0;
  }
  if (start && end && end >= start) {
    rec.flags |= STEPSCOPE_COLL_F_GPU_TIMED;
  } else {
    start = e->host_start;
    end = e->host_stop > e->host_start ? e->host_stop : e->host_start;
  }
  rec.start_ns = start;
  rec.end_ns = end;
  nccl_event *g = group_of(e);
  uint64_t corr = g ? __atomic_load_n(&g->correlation_id, __ATOMIC_ACQUIRE) : 0;
  if (!corr) corr = e->correlation_id;
  rec.correlation_id = corr;
  /* The stream: the operation's own (inherited at start from an API call
   * that had already ended, NCCL 2.28's order), else a live ancestor's. */
  if (!rec.stream) rec.stream = e->stream ? e->stream : stream_of(e);
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_COLLECTIVE;
  r.u.collective = rec;
  stepscope_emit(&r);
  __atomic_add_fetch(&stats.collectives_written, 1, __ATOMIC_RELAXED);
}

static void comm_event_gone(nccl_comm *c) {
  if (__atomic_sub_fetch(&c->live_events, 1, __ATOMIC_ACQ_REL) == 0 &&
      __atomic_load_n(&c->finalized, __ATOMIC_ACQUIRE)) {
    free(c->p2p_seq);
    free(c->name);
    free(c);
  }
}

/* The event ended for good: write it if it is an operation, keep its memory
 * in the retire ring (NCCL may still name it), free the oldest retired one. */
static void retire(nccl_event *e) {
  if (is_operation(e)) write_collective(e);
  nccl_comm *c = e->comm;
  nccl_event *evicted;
  pthread_mutex_lock(&lifetime_lock);
  if (is_operation(e)) pending_remove_locked(e);
  e->comm = NULL; /* a retired event never touches its communicator again */
  __atomic_store_n(&e->magic, RETIRED_MAGIC, __ATOMIC_RELEASE);
  evicted = retired[retire_next];
  retired[retire_next] = e;
  retire_next = (retire_next + 1) % RETIRE_SLOTS;
  pthread_mutex_unlock(&lifetime_lock);
  free(evicted);
  __atomic_sub_fetch(&stats.events_live, 1, __ATOMIC_RELEASE);
  comm_event_gone(c);
}

static void release(nccl_event *e) {
  while (e && __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    nccl_event *parent = e->parent;
    retire(e);
    e = parent;
  }
}

static void fill_operation(nccl_event *e, const sgpu_nccl_event_desc *d) {
  nccl_comm *c = e->comm;
  stepscope_collective *rec = &e->rec;
  rec->comm_id = c->comm_id;
  rec->op = sgpu_nccl_op_from_name(d->func);
  rec->datatype = sgpu_nccl_datatype_from_name(d->datatype);
  rec->count = d->count;
  rec->bytes = sgpu_nccl_payload_bytes(rec->op, rec->datatype, d->count, c->nranks);
  rec->comm_rank = (uint32_t)(c->rank >= 0 ? c->rank : 0);
  rec->comm_size = (uint32_t)(c->nranks > 0 ? c->nranks : 0);
  rec->channels = d->channels;
  rec->device = (uint32_t)c->device;
  rec->name = __atomic_load_n(&c->name_id, __ATOMIC_ACQUIRE);
  rec->peer = -1;
  if (d->type == SGPU_NCCL_EV_P2P) {
    rec->flags |= STEPSCOPE_COLL_F_P2P;
    rec->peer = d->peer;
    int recv = rec->op == STEPSCOPE_COLL_RECV;
    if (c->p2p_seq && d->peer >= 0 && d->peer < c->nranks)
      rec->seq = __atomic_fetch_add(&c->p2p_seq[(size_t)recv * (size_t)c->nranks + (size_t)d->peer],
                                    1, __ATOMIC_RELAXED);
  } else {
    if (rec->op == STEPSCOPE_COLL_BROADCAST || rec->op == STEPSCOPE_COLL_REDUCE)
      rec->peer = d->root;
    rec->seq = __atomic_fetch_add(&c->next_coll_seq, 1, __ATOMIC_RELAXED);
    rec->algorithm = intern_cached(d->algo);
    rec->protocol = intern_cached(d->proto);
  }
  if (d->stream && sgpu_hook_table.stream_id) rec->stream = sgpu_hook_table.stream_id(d->stream);
}

/* A parent that has already ended (NCCL starts a Coll after its CollApi and
 * GroupApi may have stopped): copy the launch correlation id and the stream
 * from its chain, which stays readable in the retire ring. */
static void inherit_from_ended(nccl_event *e, nccl_event *ended) {
  for (nccl_event *p = ended; p; p = as_known(p->parent)) {
    if (!e->stream && p->stream) e->stream = p->stream;
    if (!e->correlation_id && is_group(p))
      e->correlation_id = __atomic_load_n(&p->correlation_id, __ATOMIC_ACQUIRE);
  }
}

void *sgpu_nccl_event_start(void *context, const sgpu_nccl_event_desc *d) {
  nccl_comm *c = context;
  if (!c || !d || !stepscope_active()) return NULL;
  comm_mark_in_current_trace(c);
  switch (d->type) {
  case SGPU_NCCL_EV_GROUP:
    /* v5+ also report the legacy per-plan Group event; its operations hang
     * under the API events, so only v4 needs it. */
    if (c->version >= 5) return NULL;
    break;
  case SGPU_NCCL_EV_GROUP_API:
  case SGPU_NCCL_EV_COLL_API:
  case SGPU_NCCL_EV_P2P_API:
  case SGPU_NCCL_EV_KERNEL_LAUNCH:
  case SGPU_NCCL_EV_COLL:
  case SGPU_NCCL_EV_P2P:
  case SGPU_NCCL_EV_KERNEL_CH:
  case SGPU_NCCL_EV_CE_COLL: break;
  default: return NULL;
  }
  if (d->type == SGPU_NCCL_EV_KERNEL_CH) {
    /* A channel of a running operation: only its GPU timers matter, kept on
     * the operation, which already holds a reference for this channel's stop
     * (see event_state/stop); the handle is the operation itself. */
    nccl_event *op = as_live(d->parent);
    if (!op || !is_operation(op)) {
      if (as_known(d->parent)) __atomic_add_fetch(&stats.late_events, 1, __ATOMIC_RELAXED);
      return NULL;
    }
    uint64_t cur = __atomic_load_n(&op->gpu_start, __ATOMIC_RELAXED);
    while (d->ptimer && d->ptimer < cur &&
           !__atomic_compare_exchange_n(&op->gpu_start, &cur, d->ptimer, 1, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
    }
    return op;
  }
  nccl_event *e = calloc(1, sizeof *e);
  if (!e) {
    __atomic_add_fetch(&stats.allocation_failures, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  __atomic_add_fetch(&stats.events_live, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&c->live_events, 1, __ATOMIC_RELAXED);
  e->magic = EVENT_MAGIC;
  e->type = d->type;
  e->comm = c;
  e->refs = 1;
  e->host_start = stepscope_now_ns();
  e->gpu_start = UINT64_MAX;
  if ((d->type == SGPU_NCCL_EV_COLL_API || d->type == SGPU_NCCL_EV_P2P_API) && d->stream &&
      sgpu_hook_table.stream_id)
    e->stream = sgpu_hook_table.stream_id(d->stream);
  nccl_event *parent = as_live(d->parent);
  if (parent) {
    /* A parent can end between the check and the increment only if NCCL
     * stops it concurrently with starting its child, which it does not. */
    __atomic_add_fetch(&parent->refs, 1, __ATOMIC_ACQ_REL);
    e->parent = parent;
  } else if (as_known(d->parent)) {
    inherit_from_ended(e, d->parent);
  }
  if (d->type == SGPU_NCCL_EV_KERNEL_LAUNCH) tls_launching_group = group_of(e);
  if (is_operation(e)) {
    fill_operation(e, d);
    /* One more reference per channel whose KernelCh stop NCCL's proxy thread
     * will report (we ask for KernelCh events on every communicator). */
    if (d->type != SGPU_NCCL_EV_CE_COLL) e->refs += (int)d->channels;
    pending_add(e);
  }
  return e;
}

void sgpu_nccl_event_stop(void *handle) {
  nccl_event *e = as_live(handle);
  if (!e) {
    if (as_known(handle)) __atomic_add_fetch(&stats.late_events, 1, __ATOMIC_RELAXED);
    return;
  }
  if (e->type == SGPU_NCCL_EV_KERNEL_LAUNCH && tls_launching_group == group_of(e))
    tls_launching_group = NULL;
  if (e->host_stop == 0) e->host_stop = stepscope_now_ns();
  release(e);
}

void sgpu_nccl_event_state(void *handle, int state, const sgpu_nccl_state_args *args) {
  nccl_event *e = as_live(handle);
  if (!e) return;
  if (state == SGPU_NCCL_STATE_KERNEL_CH_STOP && args && args->kernelCh.pTimer) {
    uint64_t t = args->kernelCh.pTimer;
    uint64_t cur = __atomic_load_n(&e->gpu_stop, __ATOMIC_RELAXED);
    while (t > cur && !__atomic_compare_exchange_n(&e->gpu_stop, &cur, t, 1, __ATOMIC_ACQ_REL,
                                                   __ATOMIC_RELAXED)) {
    }
  } else if (state == SGPU_NCCL_STATE_CE_COLL_START && e->type == SGPU_NCCL_EV_CE_COLL) {
    e->host_start = stepscope_now_ns();
  } else if (state == SGPU_NCCL_STATE_CE_COLL_COMPLETE && e->type == SGPU_NCCL_EV_CE_COLL) {
    e->host_stop = stepscope_now_ns();
  }
}

/* Writes the operations of `c` (every communicator if NULL) that are still
 * waiting for KernelCh events NCCL did not send. At a communicator's
 * finalize (its proxy thread is gone) they are also released; at the end of
 * the trace they stay, since NCCL may still be running. */
static void flush_pending(nccl_comm *c) {
  for (;;) {
    nccl_event *found = NULL;
    pthread_mutex_lock(&lifetime_lock);
    for (nccl_event *e = pending_head; e; e = e->pending_next) /* newest first: keep the oldest */
      if ((!c || e->comm == c) && !__atomic_load_n(&e->written, __ATOMIC_ACQUIRE)) found = e;
    if (found) pending_remove_locked(found);
    pthread_mutex_unlock(&lifetime_lock);
    if (!found) return;
    __atomic_add_fetch(&stats.flushed_unfinished, 1, __ATOMIC_RELAXED);
    write_collective(found);
    if (c) {
      __atomic_store_n(&found->refs, 1, __ATOMIC_RELEASE);
      release(found);
    }
  }
}

void sgpu_nccl_flush_unfinished(void) {
  flush_pending(NULL);
}

sgpu_nccl_result sgpu_nccl_comm_finalize(void *context) {
  nccl_comm *c = context;
  if (!c) return SGPU_NCCL_SUCCESS;
  flush_pending(c);
  /* Freed now if none of its events is alive, else by the last one. */
  __atomic_add_fetch(&c->live_events, 1, __ATOMIC_ACQ_REL);
  __atomic_store_n(&c->finalized, 1, __ATOMIC_RELEASE);
  comm_event_gone(c);
  return SGPU_NCCL_SUCCESS;
}

void sgpu_nccl_note_launch_correlation(uint64_t correlation_id) {
  nccl_event *g = tls_launching_group;
  if (!g || !correlation_id) return;
  uint64_t expected = 0;
  __atomic_compare_exchange_n(&g->correlation_id, &expected, correlation_id, 0, __ATOMIC_ACQ_REL,
                              __ATOMIC_RELAXED);
}

/* This binary's own core (hidden: a reference to it never leaves the binary)
 * and the same table under the exported name other binaries look up. */
const sgpu_nccl_core_api sgpu_nccl_core_local = {
    SGPU_NCCL_CORE_ABI,      sizeof(sgpu_nccl_event_desc), sgpu_nccl_comm_init,
    sgpu_nccl_comm_finalize, sgpu_nccl_event_start,        sgpu_nccl_event_stop,
    sgpu_nccl_event_state};
extern const sgpu_nccl_core_api stepscope_nccl_core_v1
    __attribute__((visibility("default"), alias("sgpu_nccl_core_local")));
