/*
 * comm.c — the backend-independent entry points of the communicator API
 * (comm.h): each call finds the backend's operation table in the comm_header
 * that starts every communicator object and forwards to it; and the job of a
 * device's own communicator library (comm_dev_job: NCCL for CUDA devices), found in
 * the device's operation table.
 */
#include "comm.h"

#include <stdio.h>
#include <stdlib.h>

struct comm_dev_job {
  const comm_dev_ops *ops;
  void *impl;
};

int comm_dev_job_open(dev_device *dev, const char *shm_path, int rank, int world, double timeout_s,
                      comm_dev_job **out, char *err, size_t errlen) {
  const comm_dev_ops *ops = dev_get_ops(dev)->comm;
  *out = NULL;
  if (!ops) return 0;
  void *impl = ops->job_open(dev, shm_path, rank, world, timeout_s, err, errlen);
  if (!impl) return -1;
  comm_dev_job *job = malloc(sizeof *job);
  if (!job) {
    ops->job_close(impl);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  job->ops = ops;
  job->impl = impl;
  *out = job;
  return 0;
}

comm *comm_dev_group(comm_dev_job *job, comm_kind kind, const char *name, const int *ranks, int n,
                     char *err, size_t errlen) {
  return job->ops->group(job->impl, kind, name, ranks, n, err, errlen);
}

void comm_dev_job_close(comm_dev_job *job) {
  if (!job) return;
  job->ops->job_close(job->impl);
  free(job);
}

static const comm_ops *ops_of(const comm *c) {
  return ((const comm_header *)c)->ops;
}

void comm_destroy(comm *c) {
  if (c) ops_of(c)->destroy(c);
}

int comm_rank(const comm *c) {
  return ((const comm_header *)c)->rank;
}
int comm_size(const comm *c) {
  return ((const comm_header *)c)->size;
}
uint64_t comm_id(const comm *c) {
  return ((const comm_header *)c)->id;
}

int comm_allreduce(comm *c, dev_stream *s, void *buf, size_t count, comm_dtype dt) {
  return ops_of(c)->allreduce(c, s, buf, count, dt);
}

int comm_reduce_scatter(comm *c, dev_stream *s, void *out, const void *in, size_t count,
                        comm_dtype dt) {
  return ops_of(c)->reduce_scatter(c, s, out, in, count, dt);
}

int comm_allgather(comm *c, dev_stream *s, void *out, const void *in, size_t count, comm_dtype dt) {
  return ops_of(c)->allgather(c, s, out, in, count, dt);
}

int comm_broadcast(comm *c, dev_stream *s, void *buf, size_t bytes, int root) {
  return ops_of(c)->broadcast(c, s, buf, bytes, root);
}

int comm_allgatherv(comm *c, dev_stream *s, void *buf, const size_t *offsets, const size_t *bytes) {
  return ops_of(c)->allgatherv(c, s, buf, offsets, bytes);
}

int comm_send(comm *c, dev_stream *s, const void *buf, size_t bytes, int peer, unsigned flags) {
  return ops_of(c)->send(c, s, buf, bytes, peer, flags);
}

int comm_recv(comm *c, dev_stream *s, void *buf, size_t bytes, int peer, unsigned flags) {
  return ops_of(c)->recv(c, s, buf, bytes, peer, flags);
}

int comm_barrier(comm *c, dev_stream *s) {
  return ops_of(c)->barrier(c, s);
}

int comm_alltoallv(comm *c, dev_stream *s, void *out, const uint64_t *recv_counts, const void *in,
                   const uint64_t *send_counts, comm_dtype dt) {
  if (!ops_of(c)->alltoallv) return -1;
  return ops_of(c)->alltoallv(c, s, out, recv_counts, in, send_counts, dt);
}
