/*
 * comm_shm.c — the shared-memory communicator (comm.h) for the CPU backend.
 *
 * How it works: all ranks of a job on one machine map one file (in /dev/shm or
 * a temporary directory) laid out as
 *
 *   [header: magic, world, abort flag and reason, one heartbeat per rank]
 *   [group regions: COMM_KIND_COUNT x world regions, each a barrier and one
 *    staging slot of SLOT_BYTES per world rank]
 *   [mailboxes: world x world single-producer/single-consumer byte rings]
 *
 * A group's region is found without negotiation: kind x world + its lowest
 * member rank (groups of one kind partition the ranks, so that is unique).
 * Collectives proceed in chunks that fit a slot: every member copies its chunk
 * into its slot, meets the others at a barrier, reads all slots and reduces
 * them in rank order 0..n-1 (bitwise identical on every member), and meets them
 * again before the slots are reused. Send/recv stream bytes through the ring of
 * (src, dst): the sender blocks only while the ring is full.
 *
 * The header also holds, per rank, a heartbeat and the number of its threads
 * blocked waiting for peers, which the launcher's watchdog reads to tell the
 * hung rank from the ranks waiting for it, and its pid: a blocked wait checks
 * every 200 ms that the group's members still run, and names a dead one at
 * once (under an outside launcher nobody else would).
 *
 * Job identity. Under the built-in launcher the segment is an anonymous file
 * (memfd, comm_shm_create_anonymous) that the forked ranks inherit open
 * (comm_job_options.fd): it has no name to find, to join by mistake or to
 * leave behind. Under an outside launcher it is a file that rank 0 creates and
 * the others open by name; it records its creator's pid and how many members
 * attached. A process never joins a segment whose creator is gone, that was
 * aborted or whose members are all attached: it belongs to an earlier job. The
 * last member to attach removes the segment's name, so no job leaves a file
 * behind in /dev/shm once all its ranks have started, however it dies.
 *
 * Waiting uses futexes on 32-bit words in the shared mapping (no PRIVATE flag,
 * so they work across processes), after a short spin, in slices of at most
 * 20 ms: every wait re-checks the job's abort flag and gives up at its
 * deadline with a message naming the operation, the group and the rank.
 *
 * Operations run on CPU streams as `cpu_task`s (device_cpu.h); each writes its
 * COLLECTIVE record from the task's `done` callback.
 *
 * The segment's layout and the objects are in comm_shm_internal.h; all-to-all with
 * uneven splits (comm_alltoallv) is in comm_shm_alltoall.c.
 */
#include "comm_shm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bf16.h"
#include "device_cpu.h"
#include "stepscope.h"
#include "zalloc.h"
#include "sc_hash.h"

/* ---- layout ----------------------------------------------------------------- */

static size_t header_bytes(int world) {
  size_t b = HEARTBEAT_OFFSET + 24 * (size_t)world;
  return (b + 4095) & ~(size_t)4095;
}
static size_t region_bytes(int world) {
  return REGION_HEADER + SLOT_BYTES * (size_t)world;
}
static size_t ring_bytes(void) {
  return RING_HEADER + RING_BYTES;
}

size_t comm_shm_segment_bytes(int world) {
  return header_bytes(world) + (size_t)COMM_KIND_COUNT * world * region_bytes(world) +
         (size_t)world * world * ring_bytes();
}

static char *region_of(comm_job *j, comm_kind kind, int lowest) {
  return j->base + header_bytes(j->world) +
         ((size_t)kind * j->world + lowest) * region_bytes(j->world);
}

static char *ring_of(comm_job *j, int src, int dst) {
  return j->base + header_bytes(j->world) +
         (size_t)COMM_KIND_COUNT * j->world * region_bytes(j->world) +
         ((size_t)src * j->world + dst) * ring_bytes();
}

static _Atomic uint64_t *heartbeat_slot(comm_job *j, int r) {
  return (_Atomic uint64_t *)(j->base + HEARTBEAT_OFFSET + 8 * (size_t)r);
}

/* How many of rank r's threads are blocked waiting for peers right now. */
static _Atomic uint64_t *waiting_slot(comm_job *j, int r) {
  return (_Atomic uint64_t *)(j->base + HEARTBEAT_OFFSET + 8 * (size_t)j->world + 8 * (size_t)r);
}

/* Rank r's pid, stored when it attaches (0 before). */
static _Atomic int64_t *pid_slot(comm_job *j, int r) {
  return (_Atomic int64_t *)(j->base + HEARTBEAT_OFFSET + 16 * (size_t)j->world + 8 * (size_t)r);
}

/* Whether process `pid` has ended: gone, or a zombie its parent has not
 * reaped yet (an outside launcher may take seconds to). */
static int pid_gone(pid_t pid) {
  if (pid <= 0) return 0;
  if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0; /* no /proc: liveness by kill() alone */
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')'); /* the command name may hold spaces */
  return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* ---- waiting ----------------------------------------------------------------- */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void futex_wait(atomic_uint *word, uint32_t seen, uint64_t max_ns) {
  struct timespec ts = {.tv_sec = (time_t)(max_ns / 1000000000ull),
                        .tv_nsec = (long)(max_ns % 1000000000ull)};
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, &ts, NULL, 0);
}

static void futex_wake(atomic_uint *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static shm_header *hdr(comm_job *j) {
  return (shm_header *)j->base;
}

typedef int (*wait_cond)(void *arg);

/* Waits until cond(arg) holds. `word` changes whenever the condition may have.
 * Returns 0, -1 on timeout, -2 when the job was aborted. */
static int check_members(comm_job *job, const int *ranks, int n);

static int wait_until(comm *c, atomic_uint *word, wait_cond cond, void *arg, uint64_t deadline) {
  comm_job *j = c->job;
  for (int spin = 0; spin < 64; spin++) {
    if (cond(arg)) return 0;
    sched_yield();
  }
  atomic_fetch_add(waiting_slot(j, j->rank), 1);
  int rc;
  uint64_t next_check = now_ns() + 200000000ull;
  for (;;) {
    uint32_t seen = atomic_load(word);
    if (cond(arg)) {
      rc = 0;
      break;
    }
    if (atomic_load(&hdr(j)->abort)) {
      rc = -2;
      break;
    }
    uint64_t now = now_ns();
    if (now >= deadline) {
      rc = -1;
      break;
    }
    if (now >= next_check) { /* a member that died cannot be waited for: say who */
      next_check = now + 200000000ull;
      if (check_members(j, c->ranks, c->n) != 0) {
        rc = -2;
        break;
      }
    }
    uint64_t slice = deadline - now;
    if (slice > 20000000ull) slice = 20000000ull;
    futex_wait(word, seen, slice);
  }
  atomic_fetch_sub(waiting_slot(j, j->rank), 1);
  return rc;
}

uint64_t shm_deadline_of(comm_job *j) {
  return now_ns() + (uint64_t)(j->timeout_s * 1e9);
}

int shm_wait_failed(comm *c, int rc, const char *what, char *err, size_t errlen) {
  if (rc == -2) {
    snprintf(err, errlen, "%s on group %s (rank %d of %d, world rank %d): job aborted: %s", what,
             c->name, c->me, c->n, c->job->rank, hdr(c->job)->abort_msg);
    return -1;
  }
  snprintf(err, errlen,
           "%s on group %s (rank %d of %d, world rank %d): timed out after %g s waiting for "
           "the other members",
           what, c->name, c->me, c->n, c->job->rank, c->job->timeout_s);
  comm_job_abort(c->job, err);
  return -1;
}

/* ---- barrier ----------------------------------------------------------------- */

typedef struct gen_wait {
  atomic_uint *gen;
  uint32_t seen;
} gen_wait;

static int gen_changed(void *arg) {
  gen_wait *g = arg;
  return atomic_load(g->gen) != g->seen;
}

int shm_region_barrier(comm *c, uint64_t deadline) {
  if (c->n == 1) return 0;
  region_header *r = (region_header *)c->region;
  uint32_t g = atomic_load(&r->gen);
  if (atomic_fetch_add(&r->count, 1) == (unsigned)c->n - 1) {
    atomic_store(&r->count, 0);
    atomic_fetch_add(&r->gen, 1);
    futex_wake(&r->gen);
    return 0;
  }
  gen_wait w = {&r->gen, g};
  return wait_until(c, &r->gen, gen_changed, &w, deadline);
}

char *shm_slot(comm *c, int k) {
  return c->region + REGION_HEADER + SLOT_BYTES * (size_t)k;
}

/* ---- the collectives (run on a stream worker) ------------------------------------ */

enum { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER, OP_BROADCAST, OP_SEND, OP_RECV, OP_BARRIER };

/* out[i] = sum over ranks k (in rank order) of element i of slot k, from element `at` of
 * each slot, for n elements of type dt: fp32 and fp64 sums in their own type, bf16 summed
 * in fp32 and rounded once (as NCCL's bf16 reductions accumulate wider than bf16). */
static void sum_slots(comm *c, int dt, void *out, size_t at, size_t n) {
  if (dt == COMM_FLOAT64) {
    double *o = out;
    for (size_t i = 0; i < n; i++) {
      double acc = ((const double *)shm_slot(c, 0))[at + i];
      for (int k = 1; k < c->n; k++)
        acc += ((const double *)shm_slot(c, k))[at + i];
      o[i] = acc;
    }
  } else if (dt == COMM_BFLOAT16) {
    uint16_t *o = out;
    for (size_t i = 0; i < n; i++) {
      float acc = bf16_to_float(((const uint16_t *)shm_slot(c, 0))[at + i]);
      for (int k = 1; k < c->n; k++)
        acc += bf16_to_float(((const uint16_t *)shm_slot(c, k))[at + i]);
      o[i] = bf16_from_float(acc);
    }
  } else {
    float *o = out;
    const float *s0 = (const float *)shm_slot(c, 0) + at;
    for (size_t i = 0; i < n; i++)
      o[i] = s0[i];
    for (int k = 1; k < c->n; k++) {
      const float *sk = (const float *)shm_slot(c, k) + at;
      for (size_t i = 0; i < n; i++)
        o[i] += sk[i];
    }
  }
}

static int run_allreduce(comm *c, void *buf, size_t count, int dt, char *err, size_t errlen) {
  size_t es = comm_dtype_bytes((comm_dtype)dt);
  size_t chunk = SLOT_BYTES / es;
  uint64_t deadline = shm_deadline_of(c->job);
  for (size_t off = 0; off < count; off += chunk) {
    size_t n = count - off < chunk ? count - off : chunk;
    memcpy(shm_slot(c, c->me), (char *)buf + off * es, n * es);
    int rc = shm_region_barrier(c, deadline);
    if (rc) return shm_wait_failed(c, rc, "allreduce", err, errlen);
    sum_slots(c, dt, (char *)buf + off * es, 0, n);
    rc = shm_region_barrier(c, deadline);
    if (rc) return shm_wait_failed(c, rc, "allreduce", err, errlen);
  }
  return 0;
}

static int run_reduce_scatter(comm *c, void *out, const void *in, size_t count, int dt, char *err,
                              size_t errlen) {
  size_t es = comm_dtype_bytes((comm_dtype)dt);
  size_t sub = SLOT_BYTES / (es * (size_t)c->n);
  uint64_t deadline = shm_deadline_of(c->job);
  for (size_t off = 0; off < count; off += sub) {
    size_t n = count - off < sub ? count - off : sub;
    char *mine = shm_slot(c, c->me);
    for (int r = 0; r < c->n; r++)
      memcpy(mine + (size_t)r * sub * es, (const char *)in + ((size_t)r * count + off) * es,
             n * es);
    int rc = shm_region_barrier(c, deadline);
    if (rc) return shm_wait_failed(c, rc, "reduce_scatter", err, errlen);
    sum_slots(c, dt, (char *)out + off * es, (size_t)c->me * sub, n);
    rc = shm_region_barrier(c, deadline);
    if (rc) return shm_wait_failed(c, rc, "reduce_scatter", err, errlen);
  }
  return 0;
}

static int run_allgather(comm *c, void *out, const void *in, size_t count, int dt, char *err,
                         size_t errlen) {
  size_t es = comm_dtype_bytes((comm_dtype)dt);
  size_t chunk = SLOT_BYTES / es;
  uint64_t deadline = shm_deadline_of(c->job);
  for (size_t off = 0; off < count; off += chunk) {
    size_t n = count - off < chunk ? count - off : chunk;
    memcpy(shm_slot(c, c->me), (const char *)in + off * es, n * es);
    int rc = shm_region_barrier(c, deadline);
    if (rc) return shm_wait_failed(c, rc, "allgather", err, errlen);
    for (int k = 0; k < c->n; k++)
      memcpy((char *)out + ((size_t)k * count + off) * es, shm_slot(c, k), n * es);
    rc = shm_region_barrier(c, deadline);
    if (rc) return shm_wait_failed(c, rc, "allgather", err, errlen);
  }
  return 0;
}

static int run_broadcast(comm *c, void *buf, size_t bytes, int root, char *err, size_t errlen) {
  uint64_t deadline = shm_deadline_of(c->job);
  for (size_t off = 0; off < bytes; off += SLOT_BYTES) {
    size_t n = bytes - off < SLOT_BYTES ? bytes - off : SLOT_BYTES;
    if (c->me == root) memcpy(shm_slot(c, root), (char *)buf + off, n);
    int rc = shm_region_barrier(c, deadline);
    if (rc) return shm_wait_failed(c, rc, "broadcast", err, errlen);
    if (c->me != root) memcpy((char *)buf + off, shm_slot(c, root), n);
    rc = shm_region_barrier(c, deadline);
    if (rc) return shm_wait_failed(c, rc, "broadcast", err, errlen);
  }
  return 0;
}

typedef struct ring_wait {
  ring_header *r;
  int sending;
} ring_wait;

static int ring_ready(void *arg) {
  ring_wait *w = arg;
  uint64_t head = atomic_load(&w->r->head), tail = atomic_load(&w->r->tail);
  return w->sending ? head - tail < RING_BYTES : head != tail;
}

static int run_p2p(comm *c, void *buf, size_t bytes, int peer, int sending, char *err,
                   size_t errlen) {
  int src = sending ? c->job->rank : c->ranks[peer];
  int dst = sending ? c->ranks[peer] : c->job->rank;
  char *ring = ring_of(c->job, src, dst);
  ring_header *r = (ring_header *)ring;
  char *data = ring + RING_HEADER;
  uint64_t deadline = shm_deadline_of(c->job);
  ring_wait w = {r, sending};
  size_t done = 0;
  while (done < bytes) {
    int rc = wait_until(c, &r->signal, ring_ready, &w, deadline);
    if (rc) {
      char what[64];
      snprintf(what, sizeof what, "%s world rank %d", sending ? "send to" : "recv from",
               c->ranks[peer]);
      return shm_wait_failed(c, rc, what, err, errlen);
    }
    uint64_t head = atomic_load(&r->head), tail = atomic_load(&r->tail);
    size_t avail = sending ? RING_BYTES - (size_t)(head - tail) : (size_t)(head - tail);
    uint64_t pos = sending ? head : tail;
    size_t at = (size_t)(pos % RING_BYTES);
    size_t n = bytes - done;
    if (n > avail) n = avail;
    if (n > RING_BYTES - at) n = RING_BYTES - at;
    if (sending) {
      memcpy(data + at, (const char *)buf + done, n);
      atomic_store(&r->head, head + n);
    } else {
      memcpy((char *)buf + done, data + at, n);
      atomic_store(&r->tail, tail + n);
    }
    atomic_fetch_add(&r->signal, 1);
    futex_wake(&r->signal);
    done += n;
  }
  return 0;
}

/* Task layout: ctx = comm; p[0] = buf/out, p[1] = in; i[0] = op, i[1] = count,
 * i[2] = datatype, i[3] = peer/root, i[4] = flags, i[5] = bytes. */
static int run_comm_task(cpu_task *t, char *err, size_t errlen) {
  comm *c = t->ctx;
  int op = (int)t->i[0];
  size_t count = (size_t)t->i[1];
  switch (op) {
  case OP_ALLREDUCE: return run_allreduce(c, t->p[0], count, (int)t->i[2], err, errlen);
  case OP_REDUCE_SCATTER:
    return run_reduce_scatter(c, t->p[0], t->p[1], count, (int)t->i[2], err, errlen);
  case OP_ALLGATHER: return run_allgather(c, t->p[0], t->p[1], count, (int)t->i[2], err, errlen);
  case OP_BROADCAST: return run_broadcast(c, t->p[0], count, (int)t->i[3], err, errlen);
  case OP_SEND: return run_p2p(c, t->p[0], count, (int)t->i[3], 1, err, errlen);
  case OP_RECV: return run_p2p(c, t->p[0], count, (int)t->i[3], 0, err, errlen);
  case OP_BARRIER: {
    int rc = shm_region_barrier(c, shm_deadline_of(c->job));
    return rc ? shm_wait_failed(c, rc, "barrier", err, errlen) : 0;
  }
  }
  snprintf(err, errlen, "unknown communicator operation %d", op);
  return -1;
}

/* The COLLECTIVE record of a finished task: count, bytes and datatype from the task's
 * arguments (i[1], i[5], i[2]), the op, peer, algorithm and flags as given. */
void shm_emit_collective_record(const cpu_task *t, uint64_t start_ns, uint64_t end_ns, uint32_t op,
                                int32_t peer, const char *algorithm, uint32_t flags) {
  const comm *c = t->ctx;
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_COLLECTIVE;
  stepscope_collective *k = &r.u.collective;
  k->start_ns = start_ns;
  k->end_ns = end_ns;
  k->comm_id = t->comm_id;
  k->seq = t->seq;
  k->count = (uint64_t)t->i[1];
  k->bytes = (uint64_t)t->i[5];
  k->stream = t->stream_trace_id;
  k->correlation_id = t->correlation;
  k->op = op;
  k->datatype = t->i[2] == COMM_FLOAT64    ? STEPSCOPE_DT_FLOAT64
                : t->i[2] == COMM_FLOAT32  ? STEPSCOPE_DT_FLOAT32
                : t->i[2] == COMM_BFLOAT16 ? STEPSCOPE_DT_BFLOAT16
                                           : STEPSCOPE_DT_UINT8;
  k->peer = peer;
  k->comm_rank = (uint32_t)c->me;
  k->comm_size = (uint32_t)c->n;
  k->algorithm = stepscope_intern_current(algorithm);
  k->flags = flags;
  k->name = stepscope_intern_current(c->name);
  stepscope_emit(&r);
}

static void comm_task_done(cpu_task *t, uint64_t start_ns, uint64_t end_ns) {
  comm *c = t->ctx;
  comm_job_heartbeat(c->job);
  if (!stepscope_active()) return;
  static const uint32_t coll_op[] = {STEPSCOPE_COLL_ALLREDUCE, STEPSCOPE_COLL_REDUCESCATTER,
                                     STEPSCOPE_COLL_ALLGATHER, STEPSCOPE_COLL_BROADCAST,
                                     STEPSCOPE_COLL_SEND,      STEPSCOPE_COLL_RECV,
                                     STEPSCOPE_COLL_BARRIER};
  int op = (int)t->i[0];
  int p2p = op == OP_SEND || op == OP_RECV;
  shm_emit_collective_record(t, start_ns, end_ns, coll_op[op],
                             p2p || op == OP_BROADCAST ? (int32_t)t->i[3] : -1,
                             p2p ? "shm-ring" : "shm-slots", (uint32_t)t->i[4]);
}

static uint64_t p2p_id(const comm *c, int src, int dst) {
  int pair[2] = {src, dst};
  return sc_fnv1a(c->id, pair, sizeof pair);
}

static int enqueue_comm(comm *c, dev_stream *s, int op, void *p0, const void *p1, size_t count,
                        int dt, int peer, unsigned flags, size_t bytes) {
  static const char *host_names[] = {"allreduce", "reduce_scatter", "allgather", "broadcast",
                                     "send",      "recv",           "barrier"};
  cpu_task t = {0};
  t.run = run_comm_task;
  t.done = comm_task_done;
  t.name = host_names[op];
  t.category = STEPSCOPE_CAT_COMM;
  t.bytes = bytes;
  if (op == OP_SEND || op == OP_RECV) {
    /* a point-to-point transfer is its own little communicator: (group, src, dst),
     * numbered per pair, so that (comm_id, seq) names exactly one send and its recv */
    int src = op == OP_SEND ? c->job->rank : c->ranks[peer];
    int dst = op == OP_SEND ? c->ranks[peer] : c->job->rank;
    t.comm_id = p2p_id(c, src, dst);
    t.seq = op == OP_SEND ? c->send_seq[peer]++ : c->recv_seq[peer]++;
  } else {
    t.comm_id = c->id;
    t.seq = c->seq++;
  }
  t.ctx = c;
  t.p[0] = p0;
  t.p[1] = (void *)p1;
  t.i[0] = op;
  t.i[1] = (int64_t)count;
  t.i[2] = dt;
  t.i[3] = peer;
  t.i[4] = flags;
  t.i[5] = (int64_t)bytes;
  return cpu_stream_enqueue(s, &t);
}

static int shm_allreduce(comm *c, dev_stream *s, void *buf, size_t count, comm_dtype dt) {
  return enqueue_comm(c, s, OP_ALLREDUCE, buf, NULL, count, dt, -1, 0,
                      count * comm_dtype_bytes(dt));
}

static int shm_reduce_scatter(comm *c, dev_stream *s, void *out, const void *in, size_t count,
                              comm_dtype dt) {
  /* bytes as in the busbw formulas: the size of the full (input) buffer */
  return enqueue_comm(c, s, OP_REDUCE_SCATTER, out, in, count, dt, -1, 0,
                      count * comm_dtype_bytes(dt) * (size_t)c->n);
}

static int shm_allgather(comm *c, dev_stream *s, void *out, const void *in, size_t count,
                         comm_dtype dt) {
  return enqueue_comm(c, s, OP_ALLGATHER, out, in, count, dt, -1, 0,
                      count * comm_dtype_bytes(dt) * (size_t)c->n);
}

static int shm_broadcast(comm *c, dev_stream *s, void *buf, size_t bytes, int root) {
  return enqueue_comm(c, s, OP_BROADCAST, buf, NULL, bytes, 0, root, 0, bytes);
}

static int shm_send(comm *c, dev_stream *s, const void *buf, size_t bytes, int peer,
                    unsigned flags) {
  return enqueue_comm(c, s, OP_SEND, (void *)buf, NULL, bytes, 0, peer,
                      STEPSCOPE_COLL_F_P2P | flags, bytes);
}

static int shm_recv(comm *c, dev_stream *s, void *buf, size_t bytes, int peer, unsigned flags) {
  return enqueue_comm(c, s, OP_RECV, buf, NULL, bytes, 0, peer, STEPSCOPE_COLL_F_P2P | flags,
                      bytes);
}

static int shm_barrier(comm *c, dev_stream *s) {
  return enqueue_comm(c, s, OP_BARRIER, NULL, NULL, 0, 0, -1, 0, 0);
}

/* ---- job and groups ---------------------------------------------------------------- */

/* Sizes a new, empty segment file and writes its header (this process is its creator).
 * 0, or -1 with a message naming `name`. */
static int init_segment(int fd, const char *name, int world, char *err, size_t errlen) {
  if (world < 1 || world > MAX_WORLD) {
    snprintf(err, errlen, "world size %d out of range 1..%d", world, MAX_WORLD);
    return -1;
  }
  size_t bytes = comm_shm_segment_bytes(world);
  if (ftruncate(fd, (off_t)bytes) != 0) {
    snprintf(err, errlen, "cannot size shared segment %s to %zu bytes: %s", name, bytes,
             strerror(errno));
    return -1;
  }
  shm_header h;
  memset(&h, 0, sizeof h);
  h.magic = SHM_MAGIC;
  h.version = SHM_VERSION;
  h.world = (uint32_t)world;
  h.creator_pid = (int32_t)getpid();
  atomic_store(&h.ready, 1);
  if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
    snprintf(err, errlen, "cannot write shared segment %s: %s", name, strerror(errno));
    return -1;
  }
  return 0;
}

int comm_shm_create(const char *path, int world, char *err, size_t errlen) {
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
  int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create shared segment %s: %s", tmp, strerror(errno));
    return -1;
  }
  int rc = init_segment(fd, tmp, world, err, errlen);
  close(fd);
  if (rc == 0 && rename(tmp, path) != 0) {
    snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    rc = -1;
  }
  if (rc != 0) unlink(tmp);
  return rc;
}

int comm_shm_create_anonymous(const char *name, int world, char *err, size_t errlen) {
  /* close-on-exec: forked ranks inherit it, programs they might run do not */
  int fd = memfd_create("stepscope-job", MFD_CLOEXEC);
  if (fd < 0 && errno == ENOSYS) { /* a kernel before 3.17: a file, unlinked at once */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", name, (int)getpid());
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) unlink(tmp);
  }
  if (fd < 0) {
    snprintf(err, errlen, "cannot create shared segment %s: %s", name, strerror(errno));
    return -1;
  }
  if (init_segment(fd, name, world, err, errlen) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Maps the segment of a job whose creator handed it down as an open file (opt->fd): it is
 * this job's by construction, and it has no name to wait for or to remove. */
static void *map_inherited(const comm_job_options *opt, size_t bytes, char *err, size_t errlen) {
  struct stat st;
  if (fstat(opt->fd, &st) != 0 || (size_t)st.st_size != bytes) {
    snprintf(err, errlen, "rank %d: the inherited shared segment %s is not one for world %d",
             opt->rank, opt->path, opt->world);
    return MAP_FAILED;
  }
  void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, opt->fd, 0);
  if (base == MAP_FAILED)
    snprintf(err, errlen, "cannot map shared segment %s: %s", opt->path, strerror(errno));
  else if (((shm_header *)base)->magic != SHM_MAGIC ||
           ((shm_header *)base)->version != SHM_VERSION ||
           ((shm_header *)base)->world != (uint32_t)opt->world) {
    snprintf(err, errlen, "shared segment %s is not a stepscope segment for world %d", opt->path,
             opt->world);
    munmap(base, bytes);
    base = MAP_FAILED;
  }
  return base;
}

/* Why a mapped segment is not this job's (NULL: it is). A stale segment is
 * one an earlier job left behind (it crashed before every member attached):
 * its creator is gone, it was aborted, or all its members are there. */
static const char *segment_stale(const shm_header *h, const comm_job_options *opt) {
  if (pid_gone((pid_t)h->creator_pid)) return "its creator is gone";
  if (opt->observer) return NULL;
  if (atomic_load(&h->abort)) return "it was aborted";
  if (atomic_load(&h->attached) >= h->world) return "all its members are attached";
  return NULL;
}

/* Maps the segment at opt->path, waiting until the timeout for this job's to appear (an
 * earlier job's is never joined); *mine: the file mapped. MAP_FAILED with a message. */
static void *map_by_path(const comm_job_options *opt, size_t bytes, struct stat *mine, char *err,
                         size_t errlen) {
  uint64_t deadline = now_ns() + (uint64_t)(opt->timeout_s * 1e9);
  void *base = MAP_FAILED;
  const char *stale = NULL;
  for (;;) {
    int fd = open(opt->path, O_RDWR);
    if (fd >= 0) {
      struct stat st;
      /* a segment older than not_before is a stale one from an earlier job */
      if (fstat(fd, &st) == 0 && (size_t)st.st_size == bytes &&
          (opt->not_before == 0 || st.st_ctime >= opt->not_before)) {
        base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED) {
          snprintf(err, errlen, "cannot map shared segment %s: %s", opt->path, strerror(errno));
          close(fd);
          return MAP_FAILED;
        }
        shm_header *h = base;
        if (h->magic != SHM_MAGIC || h->version != SHM_VERSION ||
            h->world != (uint32_t)opt->world) {
          snprintf(err, errlen, "shared segment %s is not a stepscope segment for world %d",
                   opt->path, opt->world);
          munmap(base, bytes);
          close(fd);
          return MAP_FAILED;
        }
        /* never join an earlier job's segment: wait for this job's */
        stale = opt->create ? NULL : segment_stale(h, opt);
        if (!stale) {
          *mine = st;
          close(fd);
          break;
        }
        munmap(base, bytes);
        base = MAP_FAILED;
      }
      close(fd);
    }
    if (now_ns() > deadline) {
      if (stale)
        snprintf(err, errlen,
                 "rank %d: shared segment %s belongs to an earlier job (%s), and this "
                 "job's did not appear within %.0f s",
                 opt->rank, opt->path, stale, opt->timeout_s);
      else
        snprintf(err, errlen,
                 "rank %d: shared segment %s did not appear (or has the wrong size for "
                 "world %d) within %.0f s",
                 opt->rank, opt->path, opt->world, opt->timeout_s);
      return MAP_FAILED;
    }
    usleep(10000);
  }
  return base;
}

comm_job *comm_job_open(const comm_job_options *opt, char *err, size_t errlen) {
  if (opt->create && comm_shm_create(opt->path, opt->world, err, errlen) != 0) return NULL;
  size_t bytes = comm_shm_segment_bytes(opt->world);
  struct stat mine;
  memset(&mine, 0, sizeof mine);
  void *base = opt->fd >= 0 ? map_inherited(opt, bytes, err, errlen)
                            : map_by_path(opt, bytes, &mine, err, errlen);
  if (base == MAP_FAILED) return NULL;
  shm_header *h = base;
  comm_job *j = zalloc(sizeof *j, err, errlen);
  if (!j) {
    munmap(base, bytes);
    return NULL;
  }
  j->rank = opt->rank;
  j->world = opt->world;
  j->timeout_s = opt->timeout_s;
  j->base = base;
  j->bytes = bytes;
  snprintf(j->path, sizeof j->path, "%s", opt->path);
  if (opt->observer) return j;
  atomic_store(pid_slot(j, opt->rank), (int64_t)getpid());
  comm_job_heartbeat(j);
  /* Once every member has mapped the segment, nobody needs its name: the
   * last to attach removes it, so that no job killed from then on (even
   * with SIGKILL) leaves it in /dev/shm, and no later job can find it.
   * Only if the name still is this segment (not a newer job's). */
  if (atomic_fetch_add(&h->attached, 1) + 1 == (unsigned)opt->world && opt->fd < 0) {
    struct stat now;
    if (stat(opt->path, &now) == 0 && now.st_ino == mine.st_ino && now.st_dev == mine.st_dev)
      unlink(opt->path);
  }
  return j;
}

void comm_job_set_timeout(comm_job *job, double timeout_s) {
  job->timeout_s = timeout_s;
}

void comm_job_close(comm_job *job) {
  if (!job) return;
  munmap(job->base, job->bytes);
  free(job);
}

void comm_job_abort(comm_job *job, const char *why) {
  shm_header *h = hdr(job);
  unsigned expected = 0;
  if (atomic_compare_exchange_strong(&h->abort, &expected, 2)) {
    snprintf(h->abort_msg, sizeof h->abort_msg, "rank %d: %s", job->rank, why);
    atomic_store(&h->abort, 1);
  }
}

const char *comm_job_abort_reason(comm_job *job) {
  return atomic_load(&hdr(job)->abort) == 1 ? hdr(job)->abort_msg : "";
}

/* Whether the members `ranks` of a group that attached are still running
 * (pid liveness; a zombie counts as gone). If one is gone, aborts the job
 * with a message naming it and returns -1; also -1 when the job was
 * already aborted; else 0. A member that is gone cannot be waited for:
 * waits check every 200 ms, so an outside launcher's killed rank is named
 * at once instead of after the whole timeout. */
static int check_members(comm_job *job, const int *ranks, int n) {
  if (atomic_load(&hdr(job)->abort)) return -1;
  for (int i = 0; i < n; i++) {
    int r = ranks[i];
    pid_t pid = (pid_t)atomic_load(pid_slot(job, r));
    if (r == job->rank || pid <= 0 || !pid_gone(pid)) continue;
    char why[200];
    snprintf(why, sizeof why,
             "rank %d (pid %d) is no longer running (killed, crashed or exited early)", r,
             (int)pid);
    comm_job_abort(job, why);
    return -1;
  }
  return 0;
}

void comm_job_heartbeat(comm_job *job) {
  atomic_store(heartbeat_slot(job, job->rank), now_ns());
}

uint64_t comm_job_heartbeat_of(comm_job *job, int r) {
  return atomic_load(heartbeat_slot(job, r));
}

int comm_job_waiting_of(comm_job *job, int r) {
  return (int)atomic_load(waiting_slot(job, r));
}

static void shm_destroy(comm *c);

static const comm_ops shm_ops = {
    .backend_name = "shm",
    .destroy = shm_destroy,
    .allreduce = shm_allreduce,
    .reduce_scatter = shm_reduce_scatter,
    .allgather = shm_allgather,
    .broadcast = shm_broadcast,
    .send = shm_send,
    .recv = shm_recv,
    .barrier = shm_barrier,
    .alltoallv = shm_alltoallv,
    .allgatherv = shm_allgatherv,
};

comm *comm_group(comm_job *job, comm_kind kind, const char *name, const int *ranks, int n,
                 char *err, size_t errlen) {
  int me = -1;
  for (int k = 0; k < n; k++) {
    if (ranks[k] < 0 || ranks[k] >= job->world || (k > 0 && ranks[k] <= ranks[k - 1])) {
      snprintf(err, errlen, "group %s: member ranks must be sorted world ranks", name);
      return NULL;
    }
    if (ranks[k] == job->rank) me = k;
  }
  if (me < 0) {
    snprintf(err, errlen, "group %s: rank %d is not a member", name, job->rank);
    return NULL;
  }
  comm *c = calloc(1, sizeof *c);
  int *copy = malloc(sizeof(int) * (size_t)n);
  uint64_t *seq = calloc(2 * (size_t)n, sizeof(uint64_t)); /* send_seq, then recv_seq */
  if (!c || !copy || !seq) {
    free(c);
    free(copy);
    free(seq);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  memcpy(copy, ranks, sizeof(int) * (size_t)n);
  c->job = job;
  c->kind = kind;
  snprintf(c->name, sizeof c->name, "%s", name);
  c->ranks = copy;
  c->send_seq = seq;
  c->recv_seq = seq + n;
  c->n = n;
  c->me = me;
  uint64_t h = 0xcbf29ce484222325ull;
  h = sc_fnv1a(h, name, strlen(name));
  h = sc_fnv1a(h, ranks, sizeof(int) * (size_t)n);
  c->id = h;
  c->region = region_of(job, kind, ranks[0]);
  c->h.ops = &shm_ops;
  c->h.rank = me;
  c->h.size = n;
  c->h.id = h;
  return c;
}

static void shm_destroy(comm *c) {
  if (!c) return;
  free(c->ranks);
  free(c->send_seq); /* and recv_seq, the same allocation */
  free(c);
}
