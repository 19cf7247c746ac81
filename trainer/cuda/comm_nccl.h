/*
 * comm_nccl.h — the communicator of the CUDA backend: comm.h's operations on NCCL.
 *
 * What it is for: the same collectives and point-to-point operations as the
 * shared-memory communicator (comm.h: in-place sum all-reduce, reduce-scatter,
 * all-gather, broadcast, all-gather of uneven parts, send/recv, barrier, all-to-all with
 * uneven splits), enqueued on the CUDA streams of a CUDA device, so that the model and the
 * schedules run unchanged on GPUs.
 *
 * How it works:
 *   - A `comm_nccl_job` holds the rendezvous store (rendezvous.h) and every
 *     communicator of this process. `comm_nccl_group` creates an NCCL
 *     communicator over world ranks `ranks[0..n)`: the first member makes the
 *     unique id and publishes it under a key derived from the group (kind and
 *     members); the others fetch it; then ncclCommInitRank. Every member must
 *     create the same groups in the same order (as with comm_group).
 *   - Pipeline groups also get one two-rank communicator per adjacent pair of
 *     stages and direction (activations up, gradients down), so that each NCCL
 *     communicator is only ever used from one stream per rank: NCCL requires the
 *     operations of a communicator to be issued in one order, and sends and
 *     receives run on different streams ("comm pp send", "comm pp recv").
 *   - Context-parallel groups (ring attention) likewise get one two-rank
 *     communicator per directed ring edge i -> i+1 (ring_links.h): a rank sends to
 *     the next on its own edge's communicator ("comm cp send") and receives from the
 *     previous on the previous edge's ("comm cp recv"), so the ring's send and receive
 *     are in flight at once on different communicators, also for cp = 2.
 *   - All-to-all with uneven splits (comm_alltoallv, expert parallelism's token dispatch
 *     and combine): ncclSend/ncclRecv to and from every other member inside one
 *     ncclGroupStart/End on the group's communicator, the own part a device copy; the
 *     counts are read on the host when it is enqueued (see comm_nccl.c).
 *   - All-gather of uneven parts (comm_allgatherv, the sharded master weights' working
 *     copies): one ncclBroadcast from every member of its part, in place, inside one
 *     ncclGroupStart/End, so NCCL launches them as one operation.
 *   - Watchdog: every operation records an event; while the device waits
 *     (stream_synchronize), the job checks ncclCommGetAsyncError on each
 *     communicator and the age of the oldest unfinished operation. An error or an
 *     operation older than the timeout aborts every communicator (ncclCommAbort)
 *     and fails the device with a message naming the rank, the group, the
 *     operation and its sequence number.
 *   - Several ranks on one GPU need NCCL >= 2.30 and NCCL_MULTI_RANK_GPU_ENABLE=1;
 *     comm_nccl_check_gpu_sharing says so before NCCL fails obscurely.
 */
#ifndef STEPSCOPE_TRAINER_COMM_NCCL_H
#define STEPSCOPE_TRAINER_COMM_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "device.h"
#include "rendezvous.h"

typedef struct comm_nccl_job comm_nccl_job;

/* The NCCL library's version as major*10000 + minor*100 + patch (e.g. 22809), and
 * as text "2.28.9". */
int comm_nccl_version(void);
void comm_nccl_version_string(char *buf, size_t n);

/* 0 when `ranks_per_gpu` ranks may share one GPU with this NCCL and environment,
 * else -1 with a message saying what is missing. */
int comm_nccl_check_gpu_sharing(int ranks_per_gpu, int nccl_version, const char *env_value,
                                char *err, size_t errlen);

/* Takes ownership of `store`. `dev` must be a CUDA device (the current device is
 * set). timeout_s bounds every operation (watchdog). World rank 0 prints the NCCL
 * version and how many ranks share this machine's GPUs; several ranks per GPU
 * without NCCL >= 2.30 and NCCL_MULTI_RANK_GPU_ENABLE=1 is an error (see
 * comm_nccl_check_gpu_sharing). */
comm_nccl_job *comm_nccl_job_open(dev_device *dev, rdzv_store *store, int world_rank, int world,
                                  double timeout_s, char *err, size_t errlen);
void comm_nccl_job_close(comm_nccl_job *job);
/* Aborts every communicator of the job (ncclCommAbort) and fails the device. */
void comm_nccl_job_abort(comm_nccl_job *job, const char *why);

/* A communicator over world ranks ranks[0..n) (sorted, including this rank), used
 * through comm.h (comm_allreduce, ..., comm_destroy): its comm_header carries the
 * NCCL operation table. Operations fail the device with a message naming the
 * rank, the group and the sequence number. */
comm *comm_nccl_group(comm_nccl_job *job, comm_kind kind, const char *name, const int *ranks, int n,
                      char *err, size_t errlen);

/* The rendezvous store a rank should use: STEPSCOPE_RDZV when set; else, under an
 * outside launcher that gives MASTER_ADDR, the TCP store served by world rank 0 at
 * MASTER_ADDR:MASTER_PORT+1; else a directory next to the job's shared segment
 * (`<shm_path>.rdzv`, the built-in launcher's case). */
rdzv_store *comm_nccl_open_store(const char *shm_path, int world_rank, double timeout_s, char *err,
                                 size_t errlen);

/* The table the CUDA backend's dev_ops.comm names (comm.h): the trainer opens the NCCL job
 * (rendezvous store, then comm_nccl_job_open) and makes its groups through it. */
extern const comm_dev_ops comm_nccl_dev_ops;

/* The group key used in the rendezvous store (exposed for tests). */
void comm_nccl_group_key(char *buf, size_t n, comm_kind kind, const int *ranks, int count,
                         const char *suffix);

#endif /* STEPSCOPE_TRAINER_COMM_NCCL_H */
