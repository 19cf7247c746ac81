/*
 * comm.h — the communicator API of the trainer (collectives between ranks).
 *
 * What it is for: data, tensor and pipeline parallelism exchange gradients,
 * activations and parameters between rank processes. The model and schedules
 * call this API; a backend implements it: shared memory between processes on
 * one machine for the CPU backend (comm_shm.c), NCCL for CUDA (a later
 * comm_nccl.c with the same functions behind `comm_backend`).
 *
 * How it is used:
 *   - `comm_job_open` joins the job (all ranks of the world); `comm_group`
 *     creates a sub-communicator (DP/TP/PP group...). Every member must create
 *     the same groups in the same order, and issue operations on a group in the
 *     same order (as with NCCL).
 *   - Operations are *enqueued on a device stream* and run asynchronously in the
 *     stream's order; completion is observed with events or stream_synchronize.
 *     Errors (timeouts, a peer that aborted) become the stream's error.
 *   - Reductions are sums, in a fixed rank order, so every member gets bitwise
 *     identical results.
 *   - Each operation writes a COLLECTIVE record (comm_id equal on all members,
 *     per-communicator seq from 0, op, count, bytes, peer, stream, times) and its
 *     HOST_OP record carries the same comm_id and seq.
 * Hang safety: every wait has a timeout; a timed-out or aborted operation fails
 * with a message naming the operation, the group and the rank.
 */
#ifndef STEPSCOPE_TRAINER_COMM_H
#define STEPSCOPE_TRAINER_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

typedef struct comm_job comm_job;
typedef struct comm comm;

typedef enum comm_dtype { COMM_FLOAT32 = 1, COMM_FLOAT64 = 2, COMM_BFLOAT16 = 3 } comm_dtype;

/* Bytes per element. bf16 sums are accumulated wider and rounded once. */
static inline size_t comm_dtype_bytes(comm_dtype dt) {
  return dt == COMM_FLOAT64 ? 8 : dt == COMM_BFLOAT16 ? 2 : 4;
}

/* Group kinds (part of the shared-memory layout key, and the trace name). */
typedef enum comm_kind {
  COMM_KIND_WORLD = 0,
  COMM_KIND_DP = 1,
  COMM_KIND_TP = 2,
  COMM_KIND_PP = 3,
  COMM_KIND_EMBED = 4, /* first and last pipeline stage: tied embedding gradients */
  COMM_KIND_CP = 5,    /* context parallel ring: ring-attention key/value blocks */
  COMM_KIND_EP = 6,    /* expert parallel: the token all-to-alls of MoE layers */
  COMM_KIND_EDP = 7,   /* expert data parallel: sums the experts' gradients */
  COMM_KIND_COUNT = 8
} comm_kind;

typedef struct comm_job_options {
  int rank, world;
  const char *path;     /* shared segment (file); created by the launcher or rank 0 */
  int fd;               /* >= 0: the segment is this open file, inherited from the launcher
                         * (comm_shm_create_anonymous); path only names it in messages.
                         * -1: open the file at path */
  int create;           /* 1: this process creates and initializes the segment */
  double timeout_s;     /* every wait gives up after this long */
  long long not_before; /* ignore a segment file created before this time (s since
                         * the epoch; 0: accept any) — a stale one of an earlier job */
  int observer;         /* 1: the launcher's view (reads heartbeats; not a member) */
} comm_job_options;

/* Size of the shared segment a job of `world` ranks needs (for the creator). */
size_t comm_shm_segment_bytes(int world);
/* Creates and initializes the segment file at path (the launcher calls this
 * before forking). Returns 0 or -1 with a message. */
int comm_shm_create(const char *path, int world, char *err, size_t errlen);
/* Creates and initializes a segment that has no name in any directory (memfd): ranks
 * forked after this inherit the returned file descriptor (comm_job_options.fd), and the
 * memory goes when the last process holding it ends, however it ends. `name` only names
 * it in messages. Returns the descriptor (close-on-exec), or -1 with a message. */
int comm_shm_create_anonymous(const char *name, int world, char *err, size_t errlen);

comm_job *comm_job_open(const comm_job_options *opt, char *err, size_t errlen);
/* Changes how long this process's waits give up after (later operations). */
void comm_job_set_timeout(comm_job *job, double timeout_s);
void comm_job_close(comm_job *job);
/* Marks the job aborted (every member's blocked wait fails quickly). */
void comm_job_abort(comm_job *job, const char *why);
/* Why the job was aborted by some rank ("" if not). */
const char *comm_job_abort_reason(comm_job *job);
/* Liveness for the launcher's watchdog: this rank's heartbeat now. */
void comm_job_heartbeat(comm_job *job);
/* Reads rank r's last heartbeat (CLOCK_MONOTONIC ns) from a mapped segment. */
uint64_t comm_job_heartbeat_of(comm_job *job, int r);
/* How many of rank r's threads are blocked in a communication wait now. */
int comm_job_waiting_of(comm_job *job, int r);

/* Sub-communicator over world ranks `ranks[0..n)` (sorted, including this
 * rank). `name` ("dp", "tp", "pp", "cp", "embed", "world") names it in the trace.
 * Groups of one kind must partition the world (the shared-memory backend finds a
 * group's region by its kind and lowest rank). */
comm *comm_group(comm_job *job, comm_kind kind, const char *name, const int *ranks, int n,
                 char *err, size_t errlen);
void comm_destroy(comm *c);
int comm_rank(const comm *c);
int comm_size(const comm *c);
uint64_t comm_id(const comm *c);

/* The operations of one communicator backend. Every backend's comm object
 * begins with a comm_header, so comm.c dispatches the functions below to the
 * backend (shared memory now; a comm_nccl.c adds its own table and a
 * constructor next to comm_group). */
typedef struct comm_ops {
  const char *backend_name;
  void (*destroy)(comm *c);
  int (*allreduce)(comm *c, dev_stream *s, void *buf, size_t count, comm_dtype dt);
  int (*reduce_scatter)(comm *c, dev_stream *s, void *out, const void *in, size_t count,
                        comm_dtype dt);
  int (*allgather)(comm *c, dev_stream *s, void *out, const void *in, size_t count, comm_dtype dt);
  int (*broadcast)(comm *c, dev_stream *s, void *buf, size_t bytes, int root);
  int (*allgatherv)(comm *c, dev_stream *s, void *buf, const size_t *offsets, const size_t *bytes);
  int (*send)(comm *c, dev_stream *s, const void *buf, size_t bytes, int peer, unsigned flags);
  int (*recv)(comm *c, dev_stream *s, void *buf, size_t bytes, int peer, unsigned flags);
  int (*barrier)(comm *c, dev_stream *s);
  /* Optional (NULL: the backend has no all-to-all; comm_alltoallv fails). */
  int (*alltoallv)(comm *c, dev_stream *s, void *out, const uint64_t *recv_counts, const void *in,
                   const uint64_t *send_counts, comm_dtype dt);
} comm_ops;

typedef struct comm_header {
  const comm_ops *ops;
  int rank, size; /* this member's rank in the group, and the group's size */
  uint64_t id;    /* equal on every member */
} comm_header;

/* A device's own communicator library (NCCL on CUDA). A backend whose devices need one
 * names its table in dev_ops.comm (device.h); the trainer opens it for the job with
 * comm_dev_job_open and takes its groups from it instead of the shared-memory job. A
 * backend adds this table, the trainer no control flow. */
typedef struct comm_dev_job comm_dev_job;
typedef struct comm_dev_ops {
  const char *name;
  /* The library's job over the world (rank of world; timeout_s bounds every operation;
   * shm_path: the shared segment, next to which a rendezvous may live): NULL with a
   * message on failure. */
  void *(*job_open)(dev_device *dev, const char *shm_path, int rank, int world, double timeout_s,
                    char *err, size_t errlen);
  comm *(*group)(void *job, comm_kind kind, const char *name, const int *ranks, int n, char *err,
                 size_t errlen);
  void (*job_close)(void *job);
} comm_dev_ops;

/* Opens the communicator library of dev's backend (dev_ops.comm) for this job into *out:
 * 0 (*out NULL when the backend has none: the shared-memory job serves it), or -1 with a
 * message. */
int comm_dev_job_open(dev_device *dev, const char *shm_path, int rank, int world, double timeout_s,
                      comm_dev_job **out, char *err, size_t errlen);
/* A group of the library's job, as comm_group (NULL with a message). */
comm *comm_dev_group(comm_dev_job *job, comm_kind kind, const char *name, const int *ranks, int n,
                     char *err, size_t errlen);
void comm_dev_job_close(comm_dev_job *job); /* NULL: nothing */

/* flags for p2p records */
#define COMM_F_PIPELINE 0x4u

/* In-place sum over the group; count elements of dtype. */
int comm_allreduce(comm *c, dev_stream *s, void *buf, size_t count, comm_dtype dt);
/* out[count] = sum over ranks of in[rank*count .. (rank+1)*count) (in has size*count),
 * elements of dtype dt. */
int comm_reduce_scatter(comm *c, dev_stream *s, void *out, const void *in, size_t count,
                        comm_dtype dt);
/* out[size*count] = concatenation of every rank's in[count] (in may alias its own slot of out). */
int comm_allgather(comm *c, dev_stream *s, void *out, const void *in, size_t count, comm_dtype dt);
int comm_broadcast(comm *c, dev_stream *s, void *buf, size_t bytes, int root);
/* In place, the all-gather of uneven parts (MPI_Allgatherv with every part in its place): member
 * q's bytes [offsets[q], offsets[q] + bytes[q]) of buf reach every member at the same place, as
 * one operation (a comm_broadcast from every member in turn would be group-size ones). offsets
 * and bytes are group-size long, equal on every member and read when the operation is enqueued;
 * the parts must not overlap (empty ones are allowed). */
int comm_allgatherv(comm *c, dev_stream *s, void *buf, const size_t *offsets, const size_t *bytes);
/* Point-to-point within the group (peer is a group rank). Bytes stream through
 * a bounded mailbox per (src, dst): a send completes once the receiver has
 * taken all but the last mailbox-full. Put sends and receives that can cross
 * (pipeline activations one way, gradients the other) on different streams,
 * as with NCCL. Their records carry comm_id = hash(group, src, dst) and a
 * per-pair seq, so (comm_id, seq) names one send and its matching recv. */
int comm_send(comm *c, dev_stream *s, const void *buf, size_t bytes, int peer, unsigned flags);
int comm_recv(comm *c, dev_stream *s, void *buf, size_t bytes, int peer, unsigned flags);
int comm_barrier(comm *c, dev_stream *s);
/* All-to-all with uneven splits (MPI_Alltoallv, the token dispatch and combine of expert
 * parallelism): this member sends send_counts[p] elements to group rank p, taken from `in`
 * packed by destination (p's elements start after those for ranks 0..p-1), and receives
 * recv_counts[k] elements from group rank k into `out` packed by source the same way
 * (its own part included: a copy). Elements are only moved, never combined: any dtype of
 * the right size will do (COMM_FLOAT64 moves 8-byte integers). Both count arrays (group-size
 * long) are read when the operation runs, not when it is enqueued, so an earlier operation
 * on the same stream may compute them (routing on the device, without a host sync);
 * recv_counts[k] must equal member k's send_counts[me] (checked: a mismatch fails the
 * operation, naming both ranks, and aborts the job). Returns -1 when the backend has no
 * all-to-all. The NCCL communicator (trainer/cuda/comm_nccl.c) differs in two ways: it reads
 * both count arrays when the operation is enqueued (NCCL takes them in its calls), so they
 * must be final on the host by then, and it checks only a member's own part (recv_counts[me]
 * against send_counts[me]), not the other members' counts. */
int comm_alltoallv(comm *c, dev_stream *s, void *out, const uint64_t *recv_counts, const void *in,
                   const uint64_t *send_counts, comm_dtype dt);

#endif /* STEPSCOPE_TRAINER_COMM_H */
