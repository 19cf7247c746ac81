/*
 * nccl_profiler_core.c — turns NCCL profiler events into COLLECTIVE records.
 *
 * NCCL reports a tree of events per rank: an API event per user call
 * (GroupApi > CollApi/P2pApi), a Coll or P2p event per operation, KernelCh
 * events per channel while the NCCL kernel runs (with GPU globaltimer
 * stamps), and a KernelLaunch event around the cuLaunchKernel call. Every
 * event we follow is a small heap object with a reference count: it holds a
 * reference on its parent, children hold references on it, and an operation
 * is also held by its group until the group's API call returns (so that the
 * group's kernel launch, and its CUPTI correlation id, is known before the
 * operation is written). When the last reference goes, a Coll/P2p event is
 * written as one COLLECTIVE record:
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
 * Threads: API, Coll and KernelLaunch events come from the user's thread,
 * KernelCh events from NCCL's proxy thread; reference counts and GPU time
 * bounds are atomics, group hold lists take a mutex. Nothing here can make
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

#define EVENT_MAGIC 0x5354455053434f50ull /* "STEPSCOP" */

typedef struct nccl_comm {
  uint64_t comm_id;
  uint32_t name_id;
  int rank, nranks, nnodes, version;
  int device;
  uint64_t next_coll_seq;        /* atomic */
  uint64_t *p2p_seq;             /* [2 * nranks]: sends to peer, then recvs from peer */
} nccl_comm;

typedef struct nccl_event {
  uint64_t magic;
  uint64_t type;
  nccl_comm *comm;
  struct nccl_event *parent;     /* we hold a reference on it */
  int refs;                      /* atomic */
  uint64_t host_start, host_stop;
  uint64_t correlation_id;       /* GroupApi/Group: first kernel launch correlation (atomic) */
  uint64_t stream;               /* API events: trace stream id */
  struct nccl_event *held;       /* GroupApi/Group: operations held until the group returns */
  struct nccl_event *held_next;
  int held_by_group;
  /* Coll / P2p */
  stepscope_collective rec;
  uint64_t gpu_start;            /* min KernelCh start timer (atomic), UINT64_MAX if none */
  uint64_t gpu_stop;             /* max KernelCh stop timer (atomic), 0 if none */
} nccl_event;

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread nccl_event *tls_launching_group;
static sgpu_nccl_stats stats;     /* atomics */

void sgpu_nccl_get_stats(sgpu_nccl_stats *out) {
  out->collectives_written = __atomic_load_n(&stats.collectives_written, __ATOMIC_RELAXED);
  out->events_live = __atomic_load_n(&stats.events_live, __ATOMIC_RELAXED);
  out->allocation_failures = __atomic_load_n(&stats.allocation_failures, __ATOMIC_RELAXED);
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

sgpu_nccl_result sgpu_nccl_comm_init(void **context, int version, uint64_t comm_id,
                                     const char *comm_name, int nnodes, int nranks, int rank,
                                     int *activation_mask) {
  *context = NULL;
  if (!sgpu_session_ensure()) return SGPU_NCCL_INTERNAL_ERROR; /* NCCL disables the plugin */
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
  const char *name = comm_name && *comm_name && name_is_json_safe(comm_name) ? comm_name : NULL;
  c->name_id = name ? stepscope_intern_current(name) : 0;
  write_comm_mark(c, name);
  *activation_mask = sgpu_nccl_activation_mask(version);
  *context = c;
  return SGPU_NCCL_SUCCESS;
}

sgpu_nccl_result sgpu_nccl_comm_finalize(void *context) {
  /* Events still alive may point at the communicator; NCCL finalizes after
   * its last event, so only a misbehaving caller would leave any. */
  nccl_comm *c = context;
  if (!c) return SGPU_NCCL_SUCCESS;
  if (__atomic_load_n(&stats.events_live, __ATOMIC_ACQUIRE) == 0) {
    free(c->p2p_seq);
    free(c);
  }
  return SGPU_NCCL_SUCCESS;
}

/* ---- events ---------------------------------------------------------------- */

static nccl_event *as_event(void *handle) {
  nccl_event *e = handle;
  return e && e->magic == EVENT_MAGIC ? e : NULL;
}

static nccl_event *group_of(nccl_event *e) {
  for (nccl_event *p = e ? e->parent : NULL; p; p = p->parent)
    if (p->type == SGPU_NCCL_EV_GROUP_API || p->type == SGPU_NCCL_EV_GROUP) return p;
  return NULL;
}

static uint64_t stream_of(nccl_event *e) {
  for (nccl_event *p = e ? e->parent : NULL; p; p = p->parent)
    if (p->stream) return p->stream;
  return 0;
}

static void write_collective(nccl_event *e) {
  stepscope_collective *rec = &e->rec;
  uint64_t gpu_start = __atomic_load_n(&e->gpu_start, __ATOMIC_ACQUIRE);
  uint64_t gpu_stop = __atomic_load_n(&e->gpu_stop, __ATOMIC_ACQUIRE);
  uint64_t start = 0, end = 0;
  if (gpu_start != UINT64_MAX && gpu_stop != 0 && gpu_stop >= gpu_start) {
    clock_pair now = clock_pair_now(); /* one offset for both ends: durations stay exact */
    start = gpu_timer_to_trace(gpu_start, now, e->host_start);
    end = start ? gpu_timer_to_trace(gpu_stop, now, e->host_start) : 0;
  }
  if (start && end && end >= start) {
    rec->flags |= STEPSCOPE_COLL_F_GPU_TIMED;
  } else {
    start = e->host_start;
    end = e->host_stop > e->host_start ? e->host_stop : e->host_start;
  }
  rec->start_ns = start;
  rec->end_ns = end;
  nccl_event *g = group_of(e);
  if (g) rec->correlation_id = __atomic_load_n(&g->correlation_id, __ATOMIC_ACQUIRE);
  if (!rec->stream) rec->stream = stream_of(e);
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_COLLECTIVE;
  r.u.collective = *rec;
  stepscope_emit(&r);
  __atomic_add_fetch(&stats.collectives_written, 1, __ATOMIC_RELAXED);
}

static void release(nccl_event *e) {
  while (e && __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    nccl_event *parent = e->parent;
    if (e->type == SGPU_NCCL_EV_COLL || e->type == SGPU_NCCL_EV_P2P ||
        e->type == SGPU_NCCL_EV_CE_COLL)
      write_collective(e);
    e->magic = 0;
    free(e);
    __atomic_sub_fetch(&stats.events_live, 1, __ATOMIC_RELEASE);
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
  rec->name = c->name_id;
  rec->peer = -1;
  if (d->type == SGPU_NCCL_EV_P2P) {
    rec->flags |= STEPSCOPE_COLL_F_P2P;
    rec->peer = d->peer;
    int recv = rec->op == STEPSCOPE_COLL_RECV;
    if (c->p2p_seq && d->peer >= 0 && d->peer < c->nranks)
      rec->seq = __atomic_fetch_add(&c->p2p_seq[(size_t)recv * (size_t)c->nranks + (size_t)d->peer],
                                    1, __ATOMIC_RELAXED);
  } else {
    if (rec->op == STEPSCOPE_COLL_BROADCAST || rec->op == STEPSCOPE_COLL_REDUCE) rec->peer = d->root;
    rec->seq = __atomic_fetch_add(&c->next_coll_seq, 1, __ATOMIC_RELAXED);
    rec->algorithm = intern_cached(d->algo);
    rec->protocol = intern_cached(d->proto);
  }
  if (d->stream && sgpu_hook_table.stream_id) rec->stream = sgpu_hook_table.stream_id(d->stream);
}

void *sgpu_nccl_event_start(void *context, const sgpu_nccl_event_desc *d) {
  nccl_comm *c = context;
  if (!c || !d || !stepscope_active()) return NULL;
  switch (d->type) {
    case SGPU_NCCL_EV_GROUP: case SGPU_NCCL_EV_GROUP_API: case SGPU_NCCL_EV_COLL_API:
    case SGPU_NCCL_EV_P2P_API: case SGPU_NCCL_EV_KERNEL_LAUNCH: case SGPU_NCCL_EV_COLL:
    case SGPU_NCCL_EV_P2P: case SGPU_NCCL_EV_KERNEL_CH: case SGPU_NCCL_EV_CE_COLL:
      break;
    default:
      return NULL;
  }
  nccl_event *parent = as_event(d->parent);
  if (d->type == SGPU_NCCL_EV_KERNEL_CH) {
    /* A channel of a running operation: only its GPU timers matter, kept on
     * the operation; the handle is the operation itself with one more ref. */
    if (!parent) return NULL;
    __atomic_add_fetch(&parent->refs, 1, __ATOMIC_ACQ_REL);
    uint64_t cur = __atomic_load_n(&parent->gpu_start, __ATOMIC_RELAXED);
    while (d->ptimer && d->ptimer < cur &&
           !__atomic_compare_exchange_n(&parent->gpu_start, &cur, d->ptimer, 1, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
    }
    return parent;
  }
  nccl_event *e = calloc(1, sizeof *e);
  if (!e) {
    __atomic_add_fetch(&stats.allocation_failures, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  __atomic_add_fetch(&stats.events_live, 1, __ATOMIC_RELAXED);
  e->magic = EVENT_MAGIC;
  e->type = d->type;
  e->comm = c;
  e->refs = 1;
  e->host_start = stepscope_now_ns();
  e->gpu_start = UINT64_MAX;
  if (parent) {
    __atomic_add_fetch(&parent->refs, 1, __ATOMIC_ACQ_REL);
    e->parent = parent;
  }
  if ((d->type == SGPU_NCCL_EV_COLL_API || d->type == SGPU_NCCL_EV_P2P_API) && d->stream &&
      sgpu_hook_table.stream_id)
    e->stream = sgpu_hook_table.stream_id(d->stream);
  if (d->type == SGPU_NCCL_EV_KERNEL_LAUNCH) tls_launching_group = group_of(e);
  if (d->type == SGPU_NCCL_EV_COLL || d->type == SGPU_NCCL_EV_P2P || d->type == SGPU_NCCL_EV_CE_COLL) {
    fill_operation(e, d);
    nccl_event *g = group_of(e);
    if (g) {
      e->refs++; /* not yet visible to other threads */
      pthread_mutex_lock(&hold_lock);
      e->held_next = g->held;
      g->held = e;
      e->held_by_group = 1;
      pthread_mutex_unlock(&hold_lock);
    }
  }
  return e;
}

static void release_held(nccl_event *group) {
  pthread_mutex_lock(&hold_lock);
  nccl_event *held = group->held, *list = NULL;
  group->held = NULL;
  pthread_mutex_unlock(&hold_lock);
  while (held) { /* the list was built newest first: release in issue order */
    nccl_event *next = held->held_next;
    held->held_next = list;
    list = held;
    held = next;
  }
  while (list) {
    nccl_event *next = list->held_next;
    list->held_next = NULL;
    release(list);
    list = next;
  }
}

void sgpu_nccl_event_stop(void *handle) {
  nccl_event *e = as_event(handle);
  if (!e) return;
  if (e->type == SGPU_NCCL_EV_KERNEL_LAUNCH && tls_launching_group == group_of(e))
    tls_launching_group = NULL;
  if (e->host_stop == 0) e->host_stop = stepscope_now_ns();
  if (e->type == SGPU_NCCL_EV_GROUP_API || e->type == SGPU_NCCL_EV_GROUP) release_held(e);
  release(e);
}

void sgpu_nccl_event_state(void *handle, int state, const sgpu_nccl_state_args *args) {
  nccl_event *e = as_event(handle);
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

void sgpu_nccl_note_launch_correlation(uint64_t correlation_id) {
  nccl_event *g = tls_launching_group;
  if (!g || !correlation_id) return;
  uint64_t expected = 0;
  __atomic_compare_exchange_n(&g->correlation_id, &expected, correlation_id, 0, __ATOMIC_ACQ_REL,
                              __ATOMIC_RELAXED);
}
