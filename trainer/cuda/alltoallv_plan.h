/*
 * alltoallv_plan.h — which sends and receives make up an all-to-all with uneven splits on
 * NCCL, and where each one's bytes are.
 *
 * What it is for: NCCL has no all-to-all with uneven splits, so the NCCL communicator
 * (comm_nccl.c, comm_alltoallv) issues, inside one ncclGroupStart/End, one ncclSend and one
 * ncclRecv per other member, and copies its own part on the device. This header is that
 * plan as plain arithmetic, so that a test without a GPU can check it
 * (tests/gpu/test_cpu_side.c, `alltoallv_plan`: every pair's send meets a receive of the same
 * size, zero-sized transfers are skipped on both sides, and the received buffer equals the
 * CPU communicator's result, for groups of 1 to 9 with random splits).
 *
 * The layout is comm.h's: `in` is packed by destination (rank p's elements start after those
 * for ranks 0..p-1), `out` packed by source the same way. Step d = 1..n-1 of member `me`
 * sends to (me + d) mod n and receives from (me - d) mod n; in a group the order does not
 * matter to NCCL (all of a group's transfers progress together), it only makes every member
 * issue its calls in a fixed order.
 *
 * Plain C, header-only, no CUDA or NCCL.
 */
#ifndef STEPSCOPE_TRAINER_ALLTOALLV_PLAN_H
#define STEPSCOPE_TRAINER_ALLTOALLV_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* One transfer: `bytes` at byte `offset` of the buffer, to or from group rank `peer`
 * (bytes 0: nothing is issued). */
typedef struct a2a_transfer {
  int peer;
  size_t offset, bytes;
} a2a_transfer;

/* Byte offset of rank p's part in a buffer packed by rank (counts[0..p) elements before it). */
static inline size_t a2a_packed_offset(const uint64_t *counts, int p, size_t elem_bytes) {
  uint64_t el = 0;
  for (int q = 0; q < p; q++)
    el += counts[q];
  return (size_t)el * elem_bytes;
}

/* Member me's own part: from `in` at send->offset to `out` at recv->offset (bytes equal when
 * the counts are consistent: recv_counts[me] == send_counts[me]). */
static inline void a2a_plan_own(int me, const uint64_t *send_counts, const uint64_t *recv_counts,
                                size_t elem_bytes, a2a_transfer *send, a2a_transfer *recv) {
  send->peer = recv->peer = me;
  send->offset = a2a_packed_offset(send_counts, me, elem_bytes);
  send->bytes = (size_t)send_counts[me] * elem_bytes;
  recv->offset = a2a_packed_offset(recv_counts, me, elem_bytes);
  recv->bytes = (size_t)recv_counts[me] * elem_bytes;
}

/* Step d (1 <= d < n) of member me in a group of n: the send to (me + d) mod n and the
 * receive from (me - d) mod n. */
static inline void a2a_plan_step(int n, int me, int d, const uint64_t *send_counts,
                                 const uint64_t *recv_counts, size_t elem_bytes, a2a_transfer *send,
                                 a2a_transfer *recv) {
  int to = (me + d) % n, from = (me - d + n) % n;
  send->peer = to;
  send->offset = a2a_packed_offset(send_counts, to, elem_bytes);
  send->bytes = (size_t)send_counts[to] * elem_bytes;
  recv->peer = from;
  recv->offset = a2a_packed_offset(recv_counts, from, elem_bytes);
  recv->bytes = (size_t)recv_counts[from] * elem_bytes;
}

#endif /* STEPSCOPE_TRAINER_ALLTOALLV_PLAN_H */
