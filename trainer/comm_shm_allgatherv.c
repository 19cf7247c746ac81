/*
 * comm_shm_allgatherv.c — the in-place all-gather of uneven parts (comm_allgatherv: every
 * member's span of one buffer to every member, the sharded master weights' working copies,
 * master_shard.c) on the shared-memory communicator: rounds over the group's staging slots with
 * comm_shm.c's barriers, and its COLLECTIVE record.
 *
 * Why a file of its own: like the all-to-all (comm_shm_alltoall.c) its amounts differ per member
 * and its slots carry a header, so it has its own slot layout and round protocol beside
 * comm_shm.c's fixed-size collectives.
 *
 * Protocol: a member's slot is [u64 offset][u64 bytes] of its part (padded to 64 bytes), then
 * `data` bytes of it. In round r every member copies bytes [r data, (r + 1) data) of its part
 * into its slot; after the first barrier each takes that piece of every other member's part
 * from its slot to the same place in its own buffer, and reads every header, so all agree
 * whether another round follows (a part longer than r + 1 rounds' worth); the second barrier
 * frees the slots. One member's enqueue needs only its own span: the others come with their
 * headers.
 */
#include "comm_shm_internal.h"

#include <string.h>

#include "stepscope.h"

#define AGV_HEADER_BYTES 64

/* Task layout: ctx = comm; p[0] = buf; i[3] = this member's offset, i[6] = its bytes; after
 * the run i[1] = i[5] = the bytes gathered over all members (for the record). */
static int run_allgatherv(cpu_task *t, char *err, size_t errlen) {
  comm *c = t->ctx;
  char *buf = t->p[0];
  size_t offset = (size_t)t->i[3], bytes = (size_t)t->i[6], data = SLOT_BYTES - AGV_HEADER_BYTES;
  uint64_t deadline = shm_deadline_of(c->job), total = 0;
  for (size_t at = 0;; at += data) {
    char *mine = shm_slot(c, c->me);
    ((uint64_t *)mine)[0] = offset;
    ((uint64_t *)mine)[1] = bytes;
    if (at < bytes)
      memcpy(mine + AGV_HEADER_BYTES, buf + offset + at, bytes - at < data ? bytes - at : data);
    int rc = shm_region_barrier(c, deadline);
    if (rc) return shm_wait_failed(c, rc, "allgatherv", err, errlen);
    int more = 0;
    for (int k = 0; k < c->n; k++) {
      const char *theirs = shm_slot(c, k);
      size_t off_k = (size_t)((const uint64_t *)theirs)[0];
      size_t bytes_k = (size_t)((const uint64_t *)theirs)[1];
      if (at == 0) total += bytes_k;
      more |= at + data < bytes_k;
      if (k != c->me && at < bytes_k)
        memcpy(buf + off_k + at, theirs + AGV_HEADER_BYTES,
               bytes_k - at < data ? bytes_k - at : data);
    }
    rc = shm_region_barrier(c, deadline);
    if (rc) return shm_wait_failed(c, rc, "allgatherv", err, errlen);
    if (!more) break;
  }
  t->i[1] = t->i[5] = (int64_t)total;
  return 0;
}

/* The COLLECTIVE record: an all-gather of the bytes of every member's part. */
static void allgatherv_done(cpu_task *t, uint64_t start_ns, uint64_t end_ns) {
  comm *c = t->ctx;
  comm_job_heartbeat(c->job);
  if (!stepscope_active()) return;
  shm_emit_collective_record(t, start_ns, end_ns, STEPSCOPE_COLL_ALLGATHER, -1, "shm-slots", 0);
}

int shm_allgatherv(comm *c, dev_stream *s, void *buf, const size_t *offsets, const size_t *bytes) {
  cpu_task t = {0};
  t.run = run_allgatherv;
  t.done = allgatherv_done;
  t.name = "allgatherv";
  t.category = STEPSCOPE_CAT_COMM;
  t.bytes = 0; /* the other members' parts come when it runs: the record has the bytes */
  t.comm_id = c->id;
  t.seq = c->seq++;
  t.ctx = c;
  t.p[0] = buf;
  t.i[2] = 0; /* bytes: recorded as uint8 */
  t.i[3] = (int64_t)offsets[c->me];
  t.i[6] = (int64_t)bytes[c->me];
  return cpu_stream_enqueue(s, &t);
}
