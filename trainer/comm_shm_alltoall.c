/*
 * comm_shm_alltoall.c — all-to-all with uneven splits (comm_alltoallv, the token dispatch and
 * combine of expert parallelism) on the shared-memory communicator: rounds over the group's
 * staging slots with comm_shm.c's barriers, and its COLLECTIVE record.
 *
 * Why a file of its own: it is the one collective whose amounts differ per member and are
 * only known when it runs (the routing is computed on the device), so it has its own slot
 * layout and round protocol beside comm_shm.c's fixed-size collectives.
 */
#include "comm_shm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepscope.h"

/* ---- all-to-all with uneven splits (comm_alltoallv) -------------------------------------
 *
 * Rounds over the group's slots, with the same two barriers per round as the other
 * collectives. A member's slot is [u64 "more" flag][u64 send count per member, padded to
 * 64 bytes][one sub-slot of `sub` bytes per member]. In each round every member copies the
 * next (at most `sub` bytes) of what it sends to member p into sub-slot p of its own slot
 * and says whether anything, sent or received, is left after this round; after the first
 * barrier each member takes its sub-slot from every member's slot (its own too), and every
 * member reads every flag, so all agree whether another round follows; the second barrier
 * frees the slots. Round 0 also publishes the send counts, checked against recv_counts. */

static size_t a2a_header_bytes(int n) {
  return (8 + 8 * (size_t)n + 63) & ~(size_t)63;
}

/* Task layout: ctx = comm; p[0] = out, p[1] = in, p[2] = send_counts, p[3] = recv_counts;
 * i[2] = datatype; after the run i[1] = elements sent, i[5] = bytes sent, i[6] = elements
 * received (for the record). */
static int run_alltoallv(cpu_task *t, char *err, size_t errlen) {
  comm *c = t->ctx;
  size_t es = comm_dtype_bytes((comm_dtype)t->i[2]);
  const uint64_t *scount = t->p[2], *rcount = t->p[3];
  const char *in = t->p[1];
  char *out = t->p[0];
  int n = c->n;
  size_t hdr_b = a2a_header_bytes(n);
  size_t sub = (SLOT_BYTES - hdr_b) / (size_t)n / 64 * 64;
  if (sub < 64) sub = 64; /* n <= MAX_WORLD keeps this inside the slot */
  /* per member: byte offsets of its parts (send, receive), bytes moved so far (sent, received) */
  size_t *soff = calloc(4 * (size_t)n, sizeof(size_t));
  if (!soff) {
    snprintf(err, errlen, "alltoallv on group %s: out of memory", c->name);
    return -1;
  }
  size_t *roff = soff + n, *sdone = roff + n, *rdone = sdone + n;
  uint64_t sent = 0, received = 0;
  for (int p = 0; p < n; p++) { /* byte offsets of each member's part, packed in rank order */
    soff[p] = (size_t)sent * es;
    roff[p] = (size_t)received * es;
    sent += scount[p];
    received += rcount[p];
  }
  uint64_t deadline = shm_deadline_of(c->job);
  int rc = 0;
  for (int round = 0;; round++) {
    char *mine = shm_slot(c, c->me);
    int more = 0;
    for (int p = 0; p < n; p++) {
      size_t total = (size_t)scount[p] * es, k = total - sdone[p] < sub ? total - sdone[p] : sub;
      memcpy(mine + hdr_b + (size_t)p * sub, in + soff[p] + sdone[p], k);
      sdone[p] += k;
      more |= sdone[p] < total;
      size_t rtotal = (size_t)rcount[p] * es;
      size_t rk = rtotal - rdone[p] < sub ? rtotal - rdone[p] : sub;
      more |= rdone[p] + rk < rtotal;
      if (round == 0) ((uint64_t *)(mine + 8))[p] = scount[p];
    }
    *(uint64_t *)mine = (uint64_t)more;
    rc = shm_region_barrier(c, deadline);
    if (rc) {
      rc = shm_wait_failed(c, rc, "alltoallv", err, errlen);
      break;
    }
    int any = 0;
    for (int k = 0; k < n && rc == 0; k++) {
      const char *theirs = shm_slot(c, k);
      if (round == 0 && ((const uint64_t *)(theirs + 8))[c->me] != rcount[k]) {
        snprintf(err, errlen,
                 "alltoallv on group %s: rank %d of %d sends %llu elements to rank %d, "
                 "which expects %llu",
                 c->name, k, n, (unsigned long long)((const uint64_t *)(theirs + 8))[c->me], c->me,
                 (unsigned long long)rcount[k]);
        comm_job_abort(c->job, err);
        rc = -1;
        break;
      }
      size_t rtotal = (size_t)rcount[k] * es;
      size_t rk = rtotal - rdone[k] < sub ? rtotal - rdone[k] : sub;
      memcpy(out + roff[k] + rdone[k], theirs + hdr_b + (size_t)c->me * sub, rk);
      rdone[k] += rk;
      any |= *(const uint64_t *)theirs != 0;
    }
    if (rc) break;
    rc = shm_region_barrier(c, deadline);
    if (rc) {
      rc = shm_wait_failed(c, rc, "alltoallv", err, errlen);
      break;
    }
    if (!any) break;
  }
  free(soff); /* with roff, sdone, rdone */
  t->i[1] = (int64_t)sent;
  t->i[5] = (int64_t)(sent * es);
  t->i[6] = (int64_t)received;
  return rc;
}

/* The COLLECTIVE record of an all-to-all: count and bytes are what this member sent (the
 * splits differ per member; a receiver's share is in its own record). */
static void alltoallv_done(cpu_task *t, uint64_t start_ns, uint64_t end_ns) {
  comm *c = t->ctx;
  comm_job_heartbeat(c->job);
  if (!stepscope_active()) return;
  shm_emit_collective_record(t, start_ns, end_ns, STEPSCOPE_COLL_ALLTOALL, -1, "shm-slots", 0);
}

int shm_alltoallv(comm *c, dev_stream *s, void *out, const uint64_t *recv_counts, const void *in,
                  const uint64_t *send_counts, comm_dtype dt) {
  cpu_task t = {0};
  t.run = run_alltoallv;
  t.done = alltoallv_done;
  t.name = "alltoallv";
  t.category = STEPSCOPE_CAT_COMM;
  t.bytes = 0; /* the splits are read when it runs: the COLLECTIVE record has the bytes */
  t.comm_id = c->id;
  t.seq = c->seq++;
  t.ctx = c;
  t.p[0] = out;
  t.p[1] = (void *)in;
  t.p[2] = (void *)send_counts;
  t.p[3] = (void *)recv_counts;
  t.i[2] = dt;
  return cpu_stream_enqueue(s, &t);
}
