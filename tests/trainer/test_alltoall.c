/*
 * test_alltoall.c — the shared-memory communicator's all-to-all with uneven splits
 * (comm_alltoallv), between real processes.
 *
 * Forks 4 ranks over one segment. Each, on one CPU stream:
 *   1. sends every member a different number of fp32 elements (zero for some pairs, and
 *      parts many times a staging sub-slot, so it takes many rounds), each element naming
 *      its source, destination and index, and checks everything it receives;
 *   2. the token-dispatch pattern of expert parallelism: an all-to-all of the send counts
 *      (one 8-byte count per member, moved as COMM_FLOAT64) straight followed, on the same
 *      stream and before either has run, by the bf16 data exchange that uses the received
 *      counts as its recv_counts (counts are read when the operation runs);
 *   3. a deliberate mismatch (rank 1 expects one element more from rank 2 than rank 2
 *      sends): rank 1's stream must fail naming both ranks and the group, the others must
 *      fail with the job aborted, and nobody may hang.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bf16.h"
#include "comm.h"
#include "device.h"

#define WORLD 4

/* Elements rank r sends to rank p in part 1: zero for some pairs, up to 150000 (several
 * hundred KiB: many rounds of a sub-slot). */
static uint64_t part1_count(int r, int p) {
  return (uint64_t)(((r * 7 + p * 13) % 5) * 37500);
}
static float part1_value(int r, int p, uint64_t j) {
  return (float)(r * 1000000 + p * 200000 + (int)(j % 199999));
}

/* part 2: small uneven counts (0..9 rows of 4 bf16) */
static uint64_t part2_count(int r, int p) {
  return (uint64_t)(((r + 2 * p) % 4) * 3 * 4);
}

static int rank_main(const char *path, int rank) {
  char err[512];
  comm_job_options jo = {.rank = rank, .world = WORLD, .path = path, .fd = -1, .timeout_s = 20.0};
  comm_job *job = comm_job_open(&jo, err, sizeof err);
  if (!job) {
    printf("rank %d: %s\n", rank, err);
    return 1;
  }
  dev_device *d = dev_cpu_open(err, sizeof err);
  const dev_ops *o = dev_get_ops(d);
  dev_stream *s = o->stream_create(d, "comm ep");
  int all[WORLD] = {0, 1, 2, 3};
  comm *c = comm_group(job, COMM_KIND_WORLD, "world", all, WORLD, err, sizeof err);
  if (!c) {
    printf("rank %d: %s\n", rank, err);
    return 1;
  }
  int bad = 0;

  /* 1. uneven fp32 splits */
  uint64_t sc[WORLD], rc[WORLD], stot = 0, rtot = 0;
  for (int p = 0; p < WORLD; p++) {
    sc[p] = part1_count(rank, p);
    rc[p] = part1_count(p, rank);
    stot += sc[p];
    rtot += rc[p];
  }
  float *in = malloc((stot ? stot : 1) * 4), *out = malloc((rtot ? rtot : 1) * 4);
  for (int p = 0, at = 0; p < WORLD; p++)
    for (uint64_t j = 0; j < sc[p]; j++)
      in[at++] = part1_value(rank, p, j);
  if (comm_alltoallv(c, s, out, rc, in, sc, COMM_FLOAT32) != 0 || o->stream_synchronize(s) != 0) {
    printf("rank %d: alltoallv failed: %s\n", rank, dev_last_error(d));
    bad = 1;
  }
  for (int k = 0, at = 0; k < WORLD && !bad; k++)
    for (uint64_t j = 0; j < rc[k]; j++, at++)
      if (out[at] != part1_value(k, rank, j)) {
        printf("rank %d: from rank %d element %llu = %g, want %g\n", rank, k, (unsigned long long)j,
               out[at], part1_value(k, rank, j));
        bad = 1;
        break;
      }
  if (!bad)
    printf("rank %d: part 1 ok: sent %llu, received %llu fp32 elements\n", rank,
           (unsigned long long)stot, (unsigned long long)rtot);

  /* 2. counts first, then the data with the counts just received, both enqueued at once */
  uint64_t one[WORLD], sc2[WORLD], rc2[WORLD];
  uint64_t s2 = 0, r2max = 0;
  for (int p = 0; p < WORLD; p++) {
    one[p] = 1;
    sc2[p] = part2_count(rank, p);
    s2 += sc2[p];
    r2max += part2_count(p, rank);
    rc2[p] = 999999; /* overwritten by the first all-to-all before the second runs */
  }
  uint16_t *in2 = malloc((s2 ? s2 : 1) * 2), *out2 = calloc(r2max ? r2max : 1, 2);
  for (int p = 0, at = 0; p < WORLD; p++)
    for (uint64_t j = 0; j < sc2[p]; j++)
      in2[at++] = bf16_from_float((float)(rank * 16 + p * 4) + (float)(j % 4));
  comm_alltoallv(c, s, rc2, one, sc2, one, COMM_FLOAT64);
  comm_alltoallv(c, s, out2, rc2, in2, sc2, COMM_BFLOAT16);
  if (o->stream_synchronize(s) != 0) {
    printf("rank %d: part 2 failed: %s\n", rank, dev_last_error(d));
    bad = 1;
  }
  for (int k = 0, at = 0; k < WORLD && !bad; k++) {
    if (rc2[k] != part2_count(k, rank)) {
      printf("rank %d: received count from %d = %llu, want %llu\n", rank, k,
             (unsigned long long)rc2[k], (unsigned long long)part2_count(k, rank));
      bad = 1;
      break;
    }
    for (uint64_t j = 0; j < rc2[k]; j++, at++)
      if (bf16_to_float(out2[at]) != (float)(k * 16 + rank * 4) + (float)(j % 4)) {
        printf("rank %d: part 2 from %d element %llu wrong\n", rank, k, (unsigned long long)j);
        bad = 1;
        break;
      }
  }
  if (!bad) printf("rank %d: part 2 ok (counts exchanged on the stream, bf16 data)\n", rank);

  /* 3. a mismatch: rank 1 expects one element more from rank 2 than rank 2 sends */
  uint64_t sc3[WORLD], rc3[WORLD];
  float in3[WORLD * 2] = {0}, out3[WORLD * 2 + 1];
  for (int p = 0; p < WORLD; p++)
    sc3[p] = rc3[p] = 1;
  if (rank == 1) rc3[2] = 2;
  comm_alltoallv(c, s, out3, rc3, in3, sc3, COMM_FLOAT32);
  int rc_sync = o->stream_synchronize(s);
  const char *why = dev_last_error(d);
  if (rc_sync == 0) {
    printf("rank %d: the mismatched all-to-all did not fail\n", rank);
    bad = 1;
  } else if (rank == 1 &&
             (!strstr(why, "alltoallv on group world") ||
              !strstr(why, "rank 2 of 4 sends 1 elements to rank 1, which expects 2"))) {
    printf("rank 1: mismatch not named: %s\n", why);
    bad = 1;
  } else if (rank != 1 && !strstr(why, "aborted")) {
    printf("rank %d: expected the job aborted, got: %s\n", rank, why);
    bad = 1;
  } else {
    printf("rank %d: mismatch reported: %s\n", rank, why);
  }
  free(in);
  free(out);
  free(in2);
  free(out2);
  comm_destroy(c);
  dev_close(d);
  comm_job_close(job);
  return bad;
}

int main(void) {
  char path[256], err[512];
  snprintf(path, sizeof path, "%s/ss-test-alltoall-%d.shm",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
  if (comm_shm_create(path, WORLD, err, sizeof err) != 0) {
    printf("FAIL: %s\n", err);
    return 1;
  }
  fflush(stdout);
  pid_t pids[WORLD];
  for (int r = 0; r < WORLD; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      int rc = rank_main(path, r);
      fflush(stdout);
      _exit(rc);
    }
  }
  int failed = 0;
  for (int r = 0; r < WORLD; r++) {
    int st;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      printf("FAIL: rank %d status %d\n", r, st);
      failed = 1;
    }
  }
  unlink(path);
  printf(failed ? "FAILED\n" : "OK\n");
  return failed;
}
