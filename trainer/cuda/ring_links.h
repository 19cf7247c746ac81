/*
 * ring_links.h — which NCCL communicators carry a context-parallel ring, and in which
 * order the ranks create them.
 *
 * What it is for: ring attention (trainer/ring_attention.c) sends to group rank r+1 on
 * the "comm cp send" stream while it receives from r-1 on "comm cp recv". NCCL requires
 * the operations of one communicator to be issued in one order from one stream, so
 * using the group's communicator from both streams is unsafe, and issuing the send and
 * the receive on one stream deadlocks once a block exceeds NCCL's buffers (every rank
 * sends first). The NCCL communicator (comm_nccl.c) therefore gives a CP ring of n >= 2
 * members one two-rank communicator per directed edge: link i carries i -> (i+1) mod n,
 * with the sender as its rank 0 and the receiver as its rank 1. On rank `me`, link me
 * is used only for sends (one stream) and link me-1 only for receives (the other
 * stream): separate communicators, so the send and the receive are in flight together
 * and progress independently, also for n = 2 (links 0: 0 -> 1 and 1: 1 -> 0 are two
 * communicators although next == prev).
 *
 * Creation order: ncclCommInitRank blocks until both members of a link have called it.
 * If every rank created its send link first, rank n-1 would wait on link n-1 for rank 0,
 * which waits on link 0 for rank 1, ... a cycle. Each rank creates its two links in
 * ascending link index instead: link 0 is the first link of both its members (ranks 0
 * and 1), and link i completes once link i-1 has (rank i's first link), so by induction
 * every link completes. tests/gpu/test_cpu_side.c (ring_links) simulates the blocking
 * creation for n = 1..16 and checks the pairing.
 *
 * Plain C, header-only, no CUDA: the CPU-side test includes it.
 */
#ifndef STEPSCOPE_TRAINER_RING_LINKS_H
#define STEPSCOPE_TRAINER_RING_LINKS_H

/* One link a rank joins: link `index` carries from -> to (group ranks); this rank is
 * link rank `link_rank` (0: the sender, 1: the receiver). */
typedef struct ring_link_plan {
  int index;
  int from, to;
  int link_rank;
} ring_link_plan;

/* The links group rank `me` of an n-member ring joins, in creation order (ascending
 * index); returns how many (0 for n < 2, else 2). */
static inline int ring_links_plan(int n, int me, ring_link_plan out[2]) {
  if (n < 2 || me < 0 || me >= n) return 0;
  int send = me, recv = (me + n - 1) % n; /* link me: me -> me+1; link me-1: me-1 -> me */
  ring_link_plan s = {send, me, (me + 1) % n, 0};
  ring_link_plan r = {recv, recv, me, 1};
  out[0] = send < recv ? s : r;
  out[1] = send < recv ? r : s;
  return 2;
}

/* The link index that carries a point-to-point operation of rank `me` with `peer`
 * (sending or receiving), with the peer's rank in that link in *peer_link_rank; -1 when
 * the operation is not along the ring's direction (send to the next, receive from the
 * previous), which the caller carries on the group's own communicator. */
static inline int ring_link_for(int n, int me, int peer, int sending, int *peer_link_rank) {
  if (n < 2) return -1;
  if (sending && peer == (me + 1) % n) {
    *peer_link_rank = 1;
    return me;
  }
  if (!sending && peer == (me + n - 1) % n) {
    *peer_link_rank = 0;
    return peer;
  }
  return -1;
}

#endif /* STEPSCOPE_TRAINER_RING_LINKS_H */
