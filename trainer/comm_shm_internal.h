/*
 * comm_shm_internal.h — internal to the shared-memory communicator (comm_shm.c, its
 * all-to-all comm_shm_alltoall.c and all-gather of uneven parts comm_shm_allgatherv.c) and to
 * nothing else: the layout of the shared segment, the job and communicator objects, and the few
 * waiting and record helpers of comm_shm.c that those two use too. comm.h is the public side.
 */
#ifndef STEPSCOPE_TRAINER_COMM_SHM_INTERNAL_H
#define STEPSCOPE_TRAINER_COMM_SHM_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "comm.h"
#include "device_cpu.h"

#define SHM_MAGIC     0x4d48535043535453ull /* "STSCPSHM" */
#define SHM_VERSION   2u                    /* 2: creator pid, attach count and member pids */
#define SLOT_BYTES    ((size_t)512 * 1024)
#define RING_BYTES    ((size_t)1024 * 1024)
#define REGION_HEADER 128
#define RING_HEADER   128
#define MAX_WORLD     1024

typedef struct shm_header {
  uint64_t magic;
  uint32_t version;
  uint32_t world;
  atomic_uint ready;
  atomic_uint abort;
  char abort_msg[480];
  int32_t creator_pid;  /* the job's identity: a segment whose creator is gone is stale */
  atomic_uint attached; /* members that have mapped it (observers not counted) */
                        /* heartbeats, waiting counts and member pids follow at HEARTBEAT_OFFSET */
} shm_header;

#define HEARTBEAT_OFFSET 1024

typedef struct region_header {
  atomic_uint count;
  atomic_uint gen;
} region_header;

typedef struct ring_header {
  _Atomic uint64_t head; /* bytes written, by the sender */
  _Atomic uint64_t tail; /* bytes read, by the receiver */
  atomic_uint signal;    /* bumped on every change, futex word */
} ring_header;

struct comm_job {
  int rank, world;
  double timeout_s;
  char *base;
  size_t bytes;
  char path[512];
};

struct comm {
  comm_header h; /* first: ops, rank, size, id */
  comm_job *job;
  comm_kind kind;
  char name[16];
  int *ranks; /* world ranks of the members */
  int n, me;
  uint64_t id;
  uint64_t seq;                  /* next sequence number (host side, at enqueue) */
  uint64_t *send_seq, *recv_seq; /* per peer: point-to-point sequence numbers (one allocation) */
  char *region;
};

/* ---- comm_shm.c, for comm_shm_alltoall.c and comm_shm_allgatherv.c ---------------------- */

/* When a wait that starts now gives up (the job's timeout). */
uint64_t shm_deadline_of(comm_job *j);
/* A failed wait (rc -2: the job was aborted; else timed out, which aborts the job): writes
 * the message naming `what`, the group and the rank; returns -1. */
int shm_wait_failed(comm *c, int rc, const char *what, char *err, size_t errlen);
/* Meets the group's other members at its region's barrier: 0, or what wait_until returned. */
int shm_region_barrier(comm *c, uint64_t deadline);
/* Group member k's staging slot in the group's region. */
char *shm_slot(comm *c, int k);
/* The COLLECTIVE record of a finished task: count, bytes and datatype from the task's
 * arguments (i[1], i[5], i[2]), the op, peer, algorithm and flags as given. */
void shm_emit_collective_record(const cpu_task *t, uint64_t start_ns, uint64_t end_ns, uint32_t op,
                                int32_t peer, const char *algorithm, uint32_t flags);

/* ---- comm_shm_alltoall.c ------------------------------------------------------------------ */

/* comm_ops.alltoallv of the shared-memory communicator. */
int shm_alltoallv(comm *c, dev_stream *s, void *out, const uint64_t *recv_counts, const void *in,
                  const uint64_t *send_counts, comm_dtype dt);

/* ---- comm_shm_allgatherv.c ---------------------------------------------------------------- */

/* comm_ops.allgatherv of the shared-memory communicator. */
int shm_allgatherv(comm *c, dev_stream *s, void *buf, const size_t *offsets, const size_t *bytes);

#endif /* STEPSCOPE_TRAINER_COMM_SHM_INTERNAL_H */
