/*
 * comm_nccl.c — comm.h's operations on NCCL for the CUDA backend (see comm_nccl.h).
 */
#include "comm_nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alltoallv_plan.h"
#include "device_cuda.h"
#include "ring_links.h"
#include "stepscope.h"
#include "zalloc.h"

#define PENDING_RING 256
#define MAX_COMMS    64

typedef struct pending_op {
  cudaEvent_t done;
  double enqueued_s;
  const char *op;
  uint64_t seq;
} pending_op;

/* One NCCL communicator and its watchdog bookkeeping. */
typedef struct nccl_link {
  ncclComm_t comm;
  char label[96]; /* "dp", "pp 1->2"... for messages */
  pending_op ring[PENDING_RING];
  int head, count;
  int aborted;
} nccl_link;

typedef struct comm_nccl {
  comm_header header; /* first: comm.c finds the operation table here */
  comm_nccl_job *job;
  comm_kind kind;
  char name[32];
  int rank, size;
  uint64_t seq;
  nccl_link *main;
  /* pipeline: index 0 = pair with the previous member, 1 = with the next; per pair
   * [0] carries activations (lower -> upper), [1] gradients (upper -> lower). */
  nccl_link *pair[2][2];
  /* context-parallel ring (ring_links.h): link me -> me+1 for sends, me-1 -> me for
   * receives; separate communicators, one stream each */
  nccl_link *ring_send, *ring_recv;
  float *barrier_buf;
} comm_nccl;

struct comm_nccl_job {
  dev_device *dev;
  rdzv_store *store;
  int rank, world;
  double timeout_s;
  nccl_link *links[MAX_COMMS];
  int nlinks;
  int aborted;
};

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- versions and policy ----------------------------------------------------------------- */

int comm_nccl_version(void) {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return 0;
  return v;
}

void comm_nccl_version_string(char *buf, size_t n) {
  int v = comm_nccl_version();
  /* since 2.9 the code is major*10000 + minor*100 + patch */
  snprintf(buf, n, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}

int comm_nccl_check_gpu_sharing(int ranks_per_gpu, int nccl_version, const char *env_value,
                                char *err, size_t errlen) {
  if (ranks_per_gpu <= 1) return 0;
  if (nccl_version < 23000) {
    snprintf(err, errlen,
             "%d ranks share one GPU: NCCL %d.%d.%d refuses that; it needs NCCL >= 2.30 "
             "with NCCL_MULTI_RANK_GPU_ENABLE=1 (e.g. the nvidia-nccl-cu13 wheel on "
             "LD_LIBRARY_PATH)",
             ranks_per_gpu, nccl_version / 10000, (nccl_version / 100) % 100, nccl_version % 100);
    return -1;
  }
  if (!env_value || strcmp(env_value, "1") != 0) {
    snprintf(err, errlen,
             "%d ranks share one GPU: set NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL %d.%d.%d "
             "supports it, experimentally)",
             ranks_per_gpu, nccl_version / 10000, (nccl_version / 100) % 100, nccl_version % 100);
    return -1;
  }
  return 0;
}

static uint64_t group_hash(comm_kind kind, const int *ranks, int n) {
  uint64_t h = 1469598103934665603ull;
  h = (h ^ (uint64_t)kind) * 1099511628211ull;
  for (int i = 0; i < n; i++)
    h = (h ^ (uint64_t)(unsigned)ranks[i]) * 1099511628211ull;
  return h;
}

void comm_nccl_group_key(char *buf, size_t n, comm_kind kind, const int *ranks, int count,
                         const char *suffix) {
  snprintf(buf, n, "nccl-%d-%016llx%s%s", (int)kind,
           (unsigned long long)group_hash(kind, ranks, count), suffix && suffix[0] ? "-" : "",
           suffix ? suffix : "");
}

/* ---- job ---------------------------------------------------------------------------------- */

static int watchdog_check(void *arg, char *msg, size_t msglen);

comm_nccl_job *comm_nccl_job_open(dev_device *dev, rdzv_store *store, int world_rank, int world,
                                  double timeout_s, char *err, size_t errlen) {
  if (!dev_is_cuda(dev)) {
    snprintf(err, errlen, "the NCCL communicator needs a CUDA device");
    rdzv_close(store);
    return NULL;
  }
  comm_nccl_job *job = zalloc(sizeof *job, err, errlen);
  if (!job) {
    rdzv_close(store);
    return NULL;
  }
  job->dev = dev;
  job->store = store;
  job->rank = world_rank;
  job->world = world;
  job->timeout_s = timeout_s > 0 ? timeout_s : 600;
  /* several ranks of this machine on fewer GPUs: say what NCCL needs before it fails */
  rdzv_env env;
  rdzv_env_detect(&env);
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 1) gpus = 1;
  int local = env.local_world_known ? env.local_world : 1; /* unknown: do not guess */
  int per_gpu = (local + gpus - 1) / gpus;
  char vs[32];
  comm_nccl_version_string(vs, sizeof vs);
  if (world_rank == 0) {
    printf("stepscope-train: NCCL %s, %d rank(s) on %d GPU(s) of this machine%s\n", vs, local, gpus,
           per_gpu > 1 ? " (NCCL_MULTI_RANK_GPU_ENABLE)" : "");
    fflush(stdout);
  }
  if (comm_nccl_check_gpu_sharing(per_gpu, comm_nccl_version(),
                                  getenv("NCCL_MULTI_RANK_GPU_ENABLE"), err, errlen) != 0) {
    rdzv_close(store);
    free(job);
    return NULL;
  }
  if (dev_cuda_add_wait_check(dev, watchdog_check, job) != 0) {
    snprintf(err, errlen, "too many wait checks on the device");
    rdzv_close(store);
    free(job);
    return NULL;
  }
  return job;
}

static void link_free(nccl_link *l, int abort_it) {
  if (!l) return;
  if (l->comm) {
    if (abort_it || l->aborted)
      ncclCommAbort(l->comm);
    else if (ncclCommFinalize(l->comm) == ncclSuccess)
      ncclCommDestroy(l->comm);
    else
      ncclCommAbort(l->comm);
  }
  for (int i = 0; i < PENDING_RING; i++)
    if (l->ring[i].done) cudaEventDestroy(l->ring[i].done);
  free(l);
}

void comm_nccl_job_abort(comm_nccl_job *job, const char *why) {
  if (!job || job->aborted) return;
  job->aborted = 1;
  for (int i = 0; i < job->nlinks; i++)
    if (job->links[i] && job->links[i]->comm && !job->links[i]->aborted) {
      ncclCommAbort(job->links[i]->comm);
      job->links[i]->comm = NULL;
      job->links[i]->aborted = 1;
    }
  dev_cuda_fail(job->dev, why);
}

void comm_nccl_job_close(comm_nccl_job *job) {
  if (!job) return;
  dev_cuda_remove_wait_check(job->dev, job);
  rdzv_close(job->store);
  free(job);
}

/* ---- watchdog ------------------------------------------------------------------------------ */

static int watchdog_check(void *arg, char *msg, size_t msglen) {
  comm_nccl_job *job = arg;
  double now = mono_s();
  for (int i = 0; i < job->nlinks; i++) {
    nccl_link *l = job->links[i];
    if (!l || !l->comm) continue;
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(l->comm, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress) {
      snprintf(msg, msglen, "rank %d: NCCL error on group %s: %s (%s)", job->rank, l->label,
               ncclGetErrorString(async), ncclGetLastError(l->comm));
      comm_nccl_job_abort(job, msg);
      return -1;
    }
    while (l->count > 0) {
      pending_op *p = &l->ring[l->head];
      cudaError_t q = cudaEventQuery(p->done);
      if (q == cudaErrorNotReady) {
        if (now - p->enqueued_s > job->timeout_s) {
          snprintf(msg, msglen,
                   "rank %d: NCCL %s on group %s (seq %llu) did not complete within "
                   "%.0f s (watchdog); aborting the communicators",
                   job->rank, p->op, l->label, (unsigned long long)p->seq, job->timeout_s);
          comm_nccl_job_abort(job, msg);
          return -1;
        }
        break;
      }
      l->head = (l->head + 1) % PENDING_RING;
      l->count--;
    }
  }
  return 0;
}

/* Waits for a tracked operation's event while running the watchdog (a plain
 * cudaEventSynchronize would block forever on a hung collective, with no check running).
 * 0 when it completed, -1 when the watchdog aborted the job or CUDA failed. */
static int wait_tracked(comm_nccl *c, pending_op *p) {
  char msg[512];
  for (;;) {
    cudaError_t q = cudaEventQuery(p->done);
    if (q == cudaSuccess) return 0;
    if (q != cudaErrorNotReady) {
      snprintf(msg, sizeof msg, "rank %d: waiting for NCCL %s on group %s: %s", c->job->rank, p->op,
               c->name, cudaGetErrorString(q));
      comm_nccl_job_abort(c->job, msg);
      return -1;
    }
    if (watchdog_check(c->job, msg, sizeof msg) != 0)
      return -1; /* the check aborted the job and failed the device */
    struct timespec ts = {0, 200 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* Notes an enqueued operation (for the watchdog). A full ring drops the oldest entry's
 * tracking only after waiting for it (watchdog running), which keeps the ring bounded. */
static void track(comm_nccl *c, nccl_link *l, dev_stream *s, const char *op) {
  /* forget what has completed (cheap queries), so the ring holds only work in flight */
  while (l->count > 0 && cudaEventQuery(l->ring[l->head].done) == cudaSuccess) {
    l->head = (l->head + 1) % PENDING_RING;
    l->count--;
  }
  if (l->count == PENDING_RING) {
    if (wait_tracked(c, &l->ring[l->head]) != 0) return;
    /* the watchdog may already have retired it (and others): pop what is complete */
    while (l->count > 0 && cudaEventQuery(l->ring[l->head].done) == cudaSuccess) {
      l->head = (l->head + 1) % PENDING_RING;
      l->count--;
    }
  }
  pending_op *p = &l->ring[(l->head + l->count) % PENDING_RING];
  if (!p->done && cudaEventCreateWithFlags(&p->done, cudaEventDisableTiming) != cudaSuccess) {
    p->done = NULL;
    return;
  }
  if (cudaEventRecord(p->done, (cudaStream_t)dev_cuda_stream_handle(s)) != cudaSuccess) return;
  p->enqueued_s = mono_s();
  p->op = op;
  p->seq = c->seq;
  l->count++;
}

static int nccl_result(comm_nccl *c, nccl_link *l, ncclResult_t r, const char *op) {
  if (r == ncclSuccess) return 0;
  char msg[512];
  snprintf(msg, sizeof msg, "rank %d: NCCL %s on group %s (seq %llu): %s (%s)", c->job->rank, op,
           l ? l->label : c->name, (unsigned long long)c->seq, ncclGetErrorString(r),
           l && l->comm ? ncclGetLastError(l->comm) : "");
  comm_nccl_job_abort(c->job, msg);
  return -1;
}

/* The end of every enqueue: a failed one aborts the job (-1); else the operation is tracked
 * for the watchdog and takes the group's next sequence number. */
static int enqueued(comm_nccl *c, nccl_link *l, dev_stream *s, ncclResult_t r, const char *op) {
  if (nccl_result(c, l, r, op) != 0) return -1;
  track(c, l, s, op);
  c->seq++;
  return 0;
}

/* ---- groups ---------------------------------------------------------------------------------- */

static nccl_link *link_create(comm_nccl_job *job, const char *key, int nranks, int my_rank,
                              const char *label, char *err, size_t errlen) {
  if (job->nlinks >= MAX_COMMS) {
    snprintf(err, errlen, "rank %d: more than %d NCCL communicators", job->rank, MAX_COMMS);
    return NULL;
  }
  nccl_link *l = zalloc(sizeof *l, err, errlen);
  if (!l) return NULL;
  snprintf(l->label, sizeof l->label, "%s", label);
  ncclUniqueId id;
  char e[512];
  if (my_rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      snprintf(err, errlen, "rank %d: ncclGetUniqueId for group %s: %s", job->rank, label,
               ncclGetErrorString(r));
      free(l);
      return NULL;
    }
    if (rdzv_set(job->store, key, &id, sizeof id, e, sizeof e) != 0) {
      snprintf(err, errlen, "rank %d: group %s: %s", job->rank, label, e);
      free(l);
      return NULL;
    }
  } else {
    size_t len = 0;
    if (rdzv_get(job->store, key, &id, sizeof id, &len, e, sizeof e) != 0 || len != sizeof id) {
      snprintf(err, errlen, "rank %d: group %s: %s", job->rank, label,
               e[0] ? e : "unique id of the wrong size");
      free(l);
      return NULL;
    }
  }
  ncclResult_t r = ncclCommInitRank(&l->comm, nranks, id, my_rank);
  if (r != ncclSuccess) {
    snprintf(err, errlen, "rank %d: ncclCommInitRank for group %s (%d of %d): %s", job->rank, label,
             my_rank, nranks, ncclGetErrorString(r));
    free(l);
    return NULL;
  }
  job->links[job->nlinks++] = l;
  return l;
}

static const comm_ops nccl_comm_ops;
static void nccl_destroy(comm *cc);

comm *comm_nccl_group(comm_nccl_job *job, comm_kind kind, const char *name, const int *ranks, int n,
                      char *err, size_t errlen) {
  int me = -1;
  for (int i = 0; i < n; i++)
    if (ranks[i] == job->rank) me = i;
  if (me < 0) {
    snprintf(err, errlen, "rank %d is not a member of group %s", job->rank, name);
    return NULL;
  }
  comm_nccl *c = zalloc(sizeof *c, err, errlen);
  if (!c) return NULL;
  c->job = job;
  c->kind = kind;
  snprintf(c->name, sizeof c->name, "%s", name);
  c->rank = me;
  c->size = n;
  c->header.ops = &nccl_comm_ops;
  c->header.rank = me;
  c->header.size = n;
  c->header.id = group_hash(kind, ranks, n);
  if (n == 1) return (comm *)c; /* nothing to communicate with: every operation is a local no-op */
  /* The barrier's word is allocated now: allocating it at the first barrier would
   * synchronize the device in the middle of a run (cudaMalloc), possibly behind a
   * collective that waits for a peer. */
  c->barrier_buf = dev_cuda_ops()->alloc(job->dev, sizeof(float));
  if (!c->barrier_buf) {
    snprintf(err, errlen, "rank %d: out of device memory for group %s", job->rank, name);
    free(c);
    return NULL;
  }
  char key[256];
  comm_nccl_group_key(key, sizeof key, kind, ranks, n, "");
  c->main = link_create(job, key, n, me, name, err, errlen);
  if (!c->main) {
    dev_cuda_ops()->free(job->dev, c->barrier_buf);
    free(c);
    return NULL;
  }
  if (kind == COMM_KIND_PP) {
    /* lower pair first: every rank walks the chain upwards, so no cycle can form */
    for (int side = 0; side < 2; side++) {
      int lo = side == 0 ? me - 1 : me;
      if (lo < 0 || lo + 1 >= n) continue;
      int pair_ranks[2] = {ranks[lo], ranks[lo + 1]};
      for (int dir = 0; dir < 2; dir++) {
        char label[96];
        snprintf(label, sizeof label, "%s %d%s%d", name, dir == 0 ? lo : lo + 1, "->",
                 dir == 0 ? lo + 1 : lo);
        comm_nccl_group_key(key, sizeof key, kind, pair_ranks, 2, dir == 0 ? "up" : "down");
        c->pair[side][dir] = link_create(job, key, 2, me - lo, label, err, errlen);
        if (!c->pair[side][dir]) {
          nccl_destroy((comm *)c);
          return NULL;
        }
      }
    }
  }
  if (kind == COMM_KIND_CP) {
    ring_link_plan plan[2];
    int np = ring_links_plan(n, me, plan);
    for (int i = 0; i < np; i++) {
      const ring_link_plan *p = &plan[i];
      int link_ranks[2] = {ranks[p->from], ranks[p->to]};
      char label[96], suffix[32];
      snprintf(label, sizeof label, "%s %d->%d", name, p->from, p->to);
      snprintf(suffix, sizeof suffix, "ring%d", p->index);
      comm_nccl_group_key(key, sizeof key, kind, link_ranks, 2, suffix);
      nccl_link *l = link_create(job, key, 2, p->link_rank, label, err, errlen);
      if (!l) {
        nccl_destroy((comm *)c);
        return NULL;
      }
      if (p->link_rank == 0)
        c->ring_send = l;
      else
        c->ring_recv = l;
    }
  }
  return (comm *)c;
}

static void unlink_from_job(comm_nccl_job *job, nccl_link *l) {
  for (int i = 0; i < job->nlinks; i++)
    if (job->links[i] == l) job->links[i] = NULL;
}

static void nccl_destroy(comm *cc) {
  comm_nccl *c = (comm_nccl *)cc;
  if (!c) return;
  nccl_link *all[7] = {c->main,       c->pair[0][0], c->pair[0][1], c->pair[1][0],
                       c->pair[1][1], c->ring_send,  c->ring_recv};
  /* after a failure peers may be gone: abort instead of finalizing (which waits) */
  const char *dev_err = dev_cuda_ops()->last_error(c->job->dev);
  int abort_it = c->job->aborted || (dev_err && dev_err[0]);
  for (int i = 0; i < 7; i++)
    if (all[i]) {
      unlink_from_job(c->job, all[i]);
      link_free(all[i], abort_it);
    }
  if (c->barrier_buf) dev_cuda_ops()->free(c->job->dev, c->barrier_buf);
  free(c);
}

/* ---- operations
 * ---------------------------------------------------------------------------------- */

static cudaStream_t stream_of(dev_stream *s) {
  return (cudaStream_t)dev_cuda_stream_handle(s);
}

/* The one-member group's reduce-scatter / all-gather: a copy, checked like any operation. */
static int local_copy(comm_nccl *c, dev_stream *s, void *out, const void *in, size_t bytes) {
  if (out == in || bytes == 0) return 0;
  dev_cuda_note_write(c->job->dev, out);
  cudaError_t e = cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream_of(s));
  if (e == cudaSuccess) return 0;
  char msg[256];
  snprintf(msg, sizeof msg, "rank %d: copy on one-member group %s: %s", c->job->rank, c->name,
           cudaGetErrorString(e));
  dev_cuda_fail(c->job->dev, msg);
  return -1;
}

static int usable(comm_nccl *c) {
  return !c->job->aborted;
}

static ncclDataType_t nccl_type(comm_dtype dt) {
  return dt == COMM_FLOAT64 ? ncclFloat64 : dt == COMM_BFLOAT16 ? ncclBfloat16 : ncclFloat32;
}

static int nccl_allreduce(comm *cc, dev_stream *s, void *buf, size_t count, comm_dtype dt) {
  comm_nccl *c = (comm_nccl *)cc;
  if (c->size == 1 || count == 0) return 0;
  if (!usable(c)) return -1;
  dev_cuda_note_write(c->job->dev, buf);
  ncclResult_t r =
      ncclAllReduce(buf, buf, count, nccl_type(dt), ncclSum, c->main->comm, stream_of(s));
  return enqueued(c, c->main, s, r, "allreduce");
}

static int nccl_reduce_scatter(comm *cc, dev_stream *s, void *out, const void *in, size_t count,
                               comm_dtype dt) {
  comm_nccl *c = (comm_nccl *)cc;
  if (c->size == 1) return local_copy(c, s, out, in, count * comm_dtype_bytes(dt));
  if (!usable(c)) return -1;
  dev_cuda_note_write(c->job->dev, out);
  ncclResult_t r =
      ncclReduceScatter(in, out, count, nccl_type(dt), ncclSum, c->main->comm, stream_of(s));
  return enqueued(c, c->main, s, r, "reduce_scatter");
}

static int nccl_allgather(comm *cc, dev_stream *s, void *out, const void *in, size_t count,
                          comm_dtype dt) {
  comm_nccl *c = (comm_nccl *)cc;
  if (c->size == 1) return local_copy(c, s, out, in, count * comm_dtype_bytes(dt));
  if (!usable(c)) return -1;
  /* NCCL supports the in-place form (in == out + rank*count) directly */
  dev_cuda_note_write(c->job->dev, out);
  ncclResult_t r = ncclAllGather(in, out, count, nccl_type(dt), c->main->comm, stream_of(s));
  return enqueued(c, c->main, s, r, "allgather");
}

static int nccl_broadcast(comm *cc, dev_stream *s, void *buf, size_t bytes, int root) {
  comm_nccl *c = (comm_nccl *)cc;
  if (c->size == 1 || bytes == 0) return 0;
  if (!usable(c)) return -1;
  dev_cuda_note_write(c->job->dev, buf);
  ncclResult_t r = ncclBroadcast(buf, buf, bytes, ncclInt8, root, c->main->comm, stream_of(s));
  return enqueued(c, c->main, s, r, "broadcast");
}

/* One broadcast from every member of its part, between ncclGroupStart and ncclGroupEnd: NCCL
 * launches the group as one operation (its all-gather of uneven parts). */
static int nccl_allgatherv(comm *cc, dev_stream *s, void *buf, const size_t *offsets,
                           const size_t *bytes) {
  comm_nccl *c = (comm_nccl *)cc;
  if (c->size == 1) return 0;
  if (!usable(c)) return -1;
  dev_cuda_note_write(c->job->dev, buf);
  ncclResult_t r = ncclGroupStart();
  if (r == ncclSuccess) {
    for (int q = 0; q < c->size && r == ncclSuccess; q++) {
      char *part = (char *)buf + offsets[q];
      if (bytes[q] > 0)
        r = ncclBroadcast(part, part, bytes[q], ncclInt8, q, c->main->comm, stream_of(s));
    }
    ncclResult_t e = ncclGroupEnd(); /* always closes the group it opened */
    if (r == ncclSuccess) r = e;
  }
  return enqueued(c, c->main, s, r, "allgatherv");
}

/* The link that carries traffic between this rank and `peer` in the given direction
 * (sending or receiving): the pair communicators of a pipeline group, the ring links of a
 * context-parallel group (ring_links.h), else the main one. */
static nccl_link *p2p_link(comm_nccl *c, int peer, int sending, int *peer_in_link) {
  if (c->kind == COMM_KIND_PP) {
    if (peer == c->rank + 1 && c->pair[1][0]) {
      /* pair (me, me+1): activations go up on [0], gradients come down on [1] */
      *peer_in_link = 1;
      return sending ? c->pair[1][0] : c->pair[1][1];
    }
    if (peer == c->rank - 1 && c->pair[0][0]) {
      *peer_in_link = 0;
      return sending ? c->pair[0][1] : c->pair[0][0];
    }
  }
  if (c->kind == COMM_KIND_CP && c->ring_send) {
    int index = ring_link_for(c->size, c->rank, peer, sending, peer_in_link);
    if (index >= 0) return sending ? c->ring_send : c->ring_recv;
  }
  *peer_in_link = peer;
  return c->main;
}

static int nccl_send(comm *cc, dev_stream *s, const void *buf, size_t bytes, int peer,
                     unsigned flags) {
  comm_nccl *c = (comm_nccl *)cc;
  if (bytes == 0) return 0;
  if (!usable(c) || c->size == 1) return c->size == 1 ? 0 : -1;
  int p = 0;
  nccl_link *l = p2p_link(c, peer, 1, &p);
  ncclResult_t r = ncclSend(buf, bytes, ncclInt8, p, l->comm, stream_of(s));
  return enqueued(c, l, s, r, "send");
}

static int nccl_recv(comm *cc, dev_stream *s, void *buf, size_t bytes, int peer, unsigned flags) {
  comm_nccl *c = (comm_nccl *)cc;
  if (bytes == 0) return 0;
  if (!usable(c) || c->size == 1) return c->size == 1 ? 0 : -1;
  int p = 0;
  nccl_link *l = p2p_link(c, peer, 0, &p);
  dev_cuda_note_write(c->job->dev, buf);
  ncclResult_t r = ncclRecv(buf, bytes, ncclInt8, p, l->comm, stream_of(s));
  return enqueued(c, l, s, r, "recv");
}

static int nccl_barrier(comm *cc, dev_stream *s) {
  comm_nccl *c = (comm_nccl *)cc;
  if (c->size == 1) return 0;
  return nccl_allreduce(cc, s, c->barrier_buf, 1, COMM_FLOAT32);
}

/* ---- all-to-all with uneven splits (comm_alltoallv) ---------------------------------------
 *
 * NCCL has no all-to-all with uneven splits, so this is the usual composition (as PyTorch's
 * all_to_all_single does): between ncclGroupStart and ncclGroupEnd, one ncclSend of what goes
 * to each other member and one ncclRecv of what comes from it, on the group's communicator
 * and the caller's stream. NCCL runs the whole group as one operation in which every pair's
 * transfer progresses together, so no order of the calls can deadlock, whatever the sizes.
 * This member's own part is a device-to-device copy on the same stream. Elements are only
 * moved, never combined: bytes as ncclInt8, like the other byte transfers here. The plan
 * (peers, offsets, sizes) is alltoallv_plan.h, checked without a GPU by
 * gpu.cpu_side.alltoallv_plan.
 *
 * The counts are read on the host when the operation is enqueued (NCCL needs them in the
 * calls). comm.h lets the CPU backend read them when the operation runs; the expert-parallel
 * code (expert_parallel.c) has them on the host before it calls (the fixed counts of the
 * counts exchange; the token splits after its one host synchronisation per route), so both
 * readings are the same there. A receive count that differs from the peer's send count is
 * not detected across ranks (that would take another exchange and a host synchronisation per
 * call; NCCL requires them equal); this member's own part is checked (recv_counts[me] must
 * equal send_counts[me]).
 *
 * Trace: while a trace is recording, one COLLECTIVE record per call (op all_to_all, count and
 * bytes what this member sent, as the CPU backend writes it; comm_id and seq of the group;
 * the group's name, `ep`; algorithm "nccl-p2p"), timed by two host functions on the stream
 * around the group: start when the stream reached the all-to-all, end when it had completed
 * (each includes a host callback's latency, microseconds; the record is not GPU_TIMED). The
 * NCCL profiler plugin, when loaded, sees the same operation as its sends and receives. */

typedef struct a2a_trace {
  stepscope_record r;
} a2a_trace;

static void CUDART_CB a2a_trace_start(void *arg) {
  a2a_trace *t = arg;
  t->r.u.collective.start_ns = stepscope_now_ns();
}

static void CUDART_CB a2a_trace_end(void *arg) {
  a2a_trace *t = arg;
  t->r.u.collective.end_ns = stepscope_now_ns();
  if (stepscope_active()) stepscope_emit(&t->r);
  free(t);
}

static uint32_t trace_datatype(comm_dtype dt) {
  return dt == COMM_FLOAT64    ? STEPSCOPE_DT_FLOAT64
         : dt == COMM_FLOAT32  ? STEPSCOPE_DT_FLOAT32
         : dt == COMM_BFLOAT16 ? STEPSCOPE_DT_BFLOAT16
                               : STEPSCOPE_DT_UINT8;
}

static int nccl_alltoallv(comm *cc, dev_stream *s, void *out, const uint64_t *recv_counts,
                          const void *in, const uint64_t *send_counts, comm_dtype dt) {
  comm_nccl *c = (comm_nccl *)cc;
  size_t es = comm_dtype_bytes(dt);
  int n = c->size, me = c->rank;
  if (recv_counts[me] != send_counts[me]) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "rank %d: alltoallv on group %s: sends %llu elements to itself but expects %llu",
             c->job->rank, c->name, (unsigned long long)send_counts[me],
             (unsigned long long)recv_counts[me]);
    comm_nccl_job_abort(c->job, msg);
    return -1;
  }
  const char *src = in;
  char *dst = out;
  a2a_transfer own_send, own_recv; /* the plan: alltoallv_plan.h */
  a2a_plan_own(me, send_counts, recv_counts, es, &own_send, &own_recv);
  if (n == 1) return local_copy(c, s, dst + own_recv.offset, src + own_send.offset, own_send.bytes);
  if (!usable(c)) return -1;
  a2a_trace *t = NULL;
  if (stepscope_active() && (t = calloc(1, sizeof *t)) != NULL) {
    uint64_t sent = 0;
    for (int p = 0; p < n; p++)
      sent += send_counts[p];
    stepscope_collective *k = &t->r.u.collective;
    t->r.kind = STEPSCOPE_REC_COLLECTIVE;
    k->comm_id = c->header.id;
    k->seq = c->seq;
    k->count = sent;
    k->bytes = sent * es;
    k->stream = dev_cuda_stream_trace_id(s);
    k->op = STEPSCOPE_COLL_ALLTOALL;
    k->datatype = trace_datatype(dt);
    k->peer = -1;
    k->comm_rank = (uint32_t)me;
    k->comm_size = (uint32_t)n;
    k->algorithm = stepscope_intern_current("nccl-p2p");
    k->device = (uint32_t)dev_cuda_ordinal(c->job->dev);
    k->name = stepscope_intern_current(c->name);
    if (cudaLaunchHostFunc(stream_of(s), a2a_trace_start, t) != cudaSuccess) {
      free(t); /* tracing only: the all-to-all goes on without its record */
      t = NULL;
    }
  }
  dev_cuda_note_write(c->job->dev, out);
  if (own_send.bytes > 0 &&
      local_copy(c, s, dst + own_recv.offset, src + own_send.offset, own_send.bytes) != 0)
    return -1; /* t (if any) is lost with the failed device (its start function may
                * still run, so it cannot be freed here) */
  ncclComm_t nc = c->main->comm;
  cudaStream_t st = stream_of(s);
  ncclResult_t r = ncclGroupStart();
  if (r == ncclSuccess) {
    for (int d = 1; d < n && r == ncclSuccess; d++) {
      a2a_transfer snd, rcv;
      a2a_plan_step(n, me, d, send_counts, recv_counts, es, &snd, &rcv);
      if (snd.bytes > 0) r = ncclSend(src + snd.offset, snd.bytes, ncclInt8, snd.peer, nc, st);
      if (r == ncclSuccess && rcv.bytes > 0)
        r = ncclRecv(dst + rcv.offset, rcv.bytes, ncclInt8, rcv.peer, nc, st);
    }
    ncclResult_t e = ncclGroupEnd(); /* always closes the group it opened */
    if (r == ncclSuccess) r = e;
  }
  if (nccl_result(c, c->main, r, "alltoallv") != 0) return -1;
  /* a failure here means a failed stream: the record (one small allocation) is lost; it
   * cannot be freed, the start function may still run */
  if (t) (void)cudaLaunchHostFunc(st, a2a_trace_end, t);
  track(c, c->main, s, "alltoallv");
  c->seq++;
  return 0;
}

static const comm_ops nccl_comm_ops = {
    .backend_name = "nccl",
    .destroy = nccl_destroy,
    .allreduce = nccl_allreduce,
    .reduce_scatter = nccl_reduce_scatter,
    .allgather = nccl_allgather,
    .broadcast = nccl_broadcast,
    .send = nccl_send,
    .recv = nccl_recv,
    .barrier = nccl_barrier,
    .alltoallv = nccl_alltoallv,
    .allgatherv = nccl_allgatherv,
};

rdzv_store *comm_nccl_open_store(const char *shm_path, int world_rank, double timeout_s, char *err,
                                 size_t errlen) {
  const char *spec = getenv("STEPSCOPE_RDZV"), *master = getenv("MASTER_ADDR");
  if ((spec && spec[0]) || (master && master[0])) {
    rdzv_env env;
    rdzv_env_detect(&env);
    env.rank = world_rank;
    return rdzv_open_from_env(&env, timeout_s, err, errlen);
  }
  char dir[600];
  snprintf(dir, sizeof dir, "%s.rdzv", shm_path);
  return rdzv_file_open(dir, timeout_s, err, errlen);
}

/* ---- the CUDA device's communicator library (dev_ops.comm, comm.h's comm_dev_ops) ------------ */

/* The job over the world: the rendezvous store (comm_nccl_open_store), then the NCCL job. */
static void *nccl_dev_job_open(dev_device *dev, const char *shm_path, int rank, int world,
                               double timeout_s, char *err, size_t errlen) {
  rdzv_store *store = comm_nccl_open_store(shm_path, rank, timeout_s, err, errlen);
  if (!store) return NULL;
  return comm_nccl_job_open(dev, store, rank, world, timeout_s, err, errlen);
}

static comm *nccl_dev_group(void *job, comm_kind kind, const char *name, const int *ranks, int n,
                            char *err, size_t errlen) {
  return comm_nccl_group(job, kind, name, ranks, n, err, errlen);
}

static void nccl_dev_job_close(void *job) {
  comm_nccl_job_close(job);
}

const comm_dev_ops comm_nccl_dev_ops = {
    .name = "nccl",
    .job_open = nccl_dev_job_open,
    .group = nccl_dev_group,
    .job_close = nccl_dev_job_close,
};
