/*
 * test_comm.c — the shared-memory communicator between real processes.
 *
 * Forks 3 ranks over one segment. Each runs, on a CPU stream: an fp32
 * all-reduce larger than a staging slot (chunking), an fp64 all-reduce, a
 * reduce-scatter, an all-gather, bf16 all-reduce (larger than a slot),
 * reduce-scatter and all-gather (sums in fp32, rounded once), a broadcast, an all-gather of uneven
 * parts (one empty, one over two slots, out of rank order), a send/recv ring larger
 * than the mailbox (sends on their own stream, as the trainer does), and a barrier, checking every
 * value against the closed form; the all-reduce result must be bitwise identical on all ranks (rank
 * 0 publishes its checksum). Then a timeout case: a 2-member group where one member never arrives
 * must fail within the timeout with a message naming the operation, the group and the rank.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bf16.h"
#include "comm.h"
#include "device.h"

#define WORLD 3

/* comm_allgatherv's parts of a 1.5 MB buffer: rank 0 none, rank 1 1,200,001 bytes (more than two
 * 512 KiB slots, an odd length) after rank 2's 1000; the rest of the buffer is no one's. */
static const size_t agv_at[WORLD] = {0, 300000, 1000}, agv_len[WORLD] = {0, 1200001, 1000};
#define AGV_BYTES     1500001
#define AGV_UNTOUCHED 0xEE

static unsigned char agv_value(int k, size_t i) {
  return (unsigned char)((size_t)k * 31 + i * 7);
}

/* The buffer before: this rank's part filled, everything else AGV_UNTOUCHED. */
static unsigned char *agv_buffer(int rank) {
  unsigned char *b = malloc(AGV_BYTES);
  memset(b, AGV_UNTOUCHED, AGV_BYTES);
  for (size_t i = 0; i < agv_len[rank]; i++)
    b[agv_at[rank] + i] = agv_value(rank, i);
  return b;
}

/* After: every member's part in its place, the bytes no one owns untouched. 1 when wrong. */
static int agv_wrong(int rank, const unsigned char *b) {
  unsigned char *want = malloc(AGV_BYTES);
  memset(want, AGV_UNTOUCHED, AGV_BYTES);
  for (int k = 0; k < WORLD; k++)
    for (size_t i = 0; i < agv_len[k]; i++)
      want[agv_at[k] + i] = agv_value(k, i);
  size_t i = 0;
  while (i < AGV_BYTES && b[i] == want[i])
    i++;
  if (i < AGV_BYTES)
    printf("rank %d: allgatherv byte %zu is %u, want %u\n", rank, i, b[i], want[i]);
  free(want);
  return i < AGV_BYTES;
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
  dev_stream *s = o->stream_create(d, "comm");
  dev_stream *sends = o->stream_create(d, "sends");
  int all[WORLD] = {0, 1, 2};
  comm *c = comm_group(job, COMM_KIND_WORLD, "world", all, WORLD, err, sizeof err);
  if (!c) {
    printf("rank %d: %s\n", rank, err);
    return 1;
  }
  int bad = 0;
  size_t n = 300000; /* > one 512 KiB slot of floats */
  float *x = malloc(n * 4);
  for (size_t i = 0; i < n; i++)
    x[i] = (float)(rank + 1) * 0.1f + (float)(i % 7);
  comm_allreduce(c, s, x, n, COMM_FLOAT32);
  double dx[3] = {rank + 0.5, 1e300 * 0, (double)rank * rank};
  comm_allreduce(c, s, dx, 3, COMM_FLOAT64);
  size_t cnt = 1000;
  float *in = malloc(cnt * WORLD * 4), *rs = malloc(cnt * 4), *ag = malloc(cnt * WORLD * 4);
  for (size_t i = 0; i < cnt * WORLD; i++)
    in[i] = (float)(i + rank);
  comm_reduce_scatter(c, s, rs, in, cnt, COMM_FLOAT32);
  float mine[1000];
  for (size_t i = 0; i < cnt; i++)
    mine[i] = (float)(rank * 10000 + (int)i);
  comm_allgather(c, s, ag, mine, cnt, COMM_FLOAT32);
  /* bf16: rank r holds 1 + r/256 + i%5 (exact in bf16); the fp32 sum is rounded once */
  size_t bn = 600000; /* > one 512 KiB slot of bf16 */
  uint16_t *bx = malloc(bn * 2), *brs = malloc(cnt * 2), *bag = malloc(cnt * WORLD * 2);
  uint16_t *bin = malloc(cnt * WORLD * 2), bmine[1000];
  for (size_t i = 0; i < bn; i++)
    bx[i] = bf16_from_float(1.0f + (float)rank / 256.0f + (float)(i % 5));
  comm_allreduce(c, s, bx, bn, COMM_BFLOAT16);
  for (size_t i = 0; i < cnt * WORLD; i++)
    bin[i] = bf16_from_float((float)(i % 97) + (float)rank / 128.0f);
  comm_reduce_scatter(c, s, brs, bin, cnt, COMM_BFLOAT16);
  for (size_t i = 0; i < cnt; i++)
    bmine[i] = bf16_from_float((float)(rank * 16 + (int)(i % 16)));
  comm_allgather(c, s, bag, bmine, cnt, COMM_BFLOAT16);
  char msg[64] = {0};
  if (rank == 1) strcpy(msg, "hello from rank 1");
  comm_broadcast(c, s, msg, sizeof msg, 1);
  unsigned char *agv = agv_buffer(rank);
  comm_allgatherv(c, s, agv, agv_at, agv_len);
  size_t pn = 700000; /* > the 1 MiB mailbox */
  float *sendbuf = malloc(pn * 4), *recvbuf = malloc(pn * 4);
  for (size_t i = 0; i < pn; i++)
    sendbuf[i] = (float)(rank * 1000000 + (int)i);
  comm_send(c, sends, sendbuf, pn * 4, (rank + 1) % WORLD, 0);
  comm_recv(c, s, recvbuf, pn * 4, (rank + WORLD - 1) % WORLD, 0);
  comm_barrier(c, s);
  if (o->stream_synchronize(s) != 0 || o->stream_synchronize(sends) != 0) {
    printf("rank %d: stream error %s\n", rank, dev_last_error(d));
    return 1;
  }
  for (size_t i = 0; i < n && !bad; i++) {
    float v0 = 1.0f * 0.1f + (float)(i % 7), v1 = 2.0f * 0.1f + (float)(i % 7),
          v2 = 3.0f * 0.1f + (float)(i % 7);
    float want = (v0 + v1) + v2;
    if (x[i] != want) {
      printf("rank %d: allreduce[%zu] = %.9g, want %.9g\n", rank, i, x[i], want);
      bad = 1;
    }
  }
  if (dx[0] != 0.5 + 1.5 + 2.5 || dx[2] != 0 + 1 + 4) {
    printf("rank %d: f64 allreduce %g %g\n", rank, dx[0], dx[2]);
    bad = 1;
  }
  for (size_t i = 0; i < cnt && !bad; i++) {
    size_t j = (size_t)rank * cnt + i;
    float want = (float)(j + 0) + (float)(j + 1) + (float)(j + 2);
    if (rs[i] != want) {
      printf("rank %d: reduce_scatter[%zu] = %g, want %g\n", rank, i, rs[i], want);
      bad = 1;
    }
  }
  for (int k = 0; k < WORLD && !bad; k++)
    for (size_t i = 0; i < cnt; i++)
      if (ag[(size_t)k * cnt + i] != (float)(k * 10000 + (int)i)) {
        printf("rank %d: allgather wrong at %d/%zu\n", rank, k, i);
        bad = 1;
        break;
      }
  for (size_t i = 0; i < bn && !bad; i++) {
    float acc = 0;
    for (int r = 0; r < WORLD; r++)
      acc += bf16_to_float(bf16_from_float(1.0f + (float)r / 256.0f + (float)(i % 5)));
    if (bx[i] != bf16_from_float(acc)) {
      printf("rank %d: bf16 allreduce[%zu] = %g, want %g\n", rank, i, bf16_to_float(bx[i]),
             bf16_to_float(bf16_from_float(acc)));
      bad = 1;
    }
  }
  for (size_t i = 0; i < cnt && !bad; i++) {
    size_t j = (size_t)rank * cnt + i;
    float acc = 0;
    for (int r = 0; r < WORLD; r++)
      acc += bf16_to_float(bf16_from_float((float)(j % 97) + (float)r / 128.0f));
    if (brs[i] != bf16_from_float(acc)) {
      printf("rank %d: bf16 reduce_scatter[%zu] = %g, want %g\n", rank, i, bf16_to_float(brs[i]),
             acc);
      bad = 1;
    }
  }
  for (int k = 0; k < WORLD && !bad; k++)
    for (size_t i = 0; i < cnt; i++)
      if (bag[(size_t)k * cnt + i] != bf16_from_float((float)(k * 16 + (int)(i % 16)))) {
        printf("rank %d: bf16 allgather wrong at %d/%zu\n", rank, k, i);
        bad = 1;
        break;
      }
  free(bx);
  free(brs);
  free(bag);
  free(bin);
  if (!bad) bad = agv_wrong(rank, agv);
  free(agv);
  if (strcmp(msg, "hello from rank 1") != 0) {
    printf("rank %d: broadcast got '%s'\n", rank, msg);
    bad = 1;
  }
  int from = (rank + WORLD - 1) % WORLD;
  for (size_t i = 0; i < pn && !bad; i++)
    if (recvbuf[i] != (float)(from * 1000000 + (int)i)) {
      printf("rank %d: recv[%zu] = %g\n", rank, i, recvbuf[i]);
      bad = 1;
    }
  /* timeout: ranks 0 and 2 form a group; only rank 0 calls into it */
  if (rank == 0) {
    int pair[2] = {0, 2};
    comm_job_options jo2 = jo;
    comm *p = comm_group(job, COMM_KIND_DP, "dp", pair, 2, err, sizeof err);
    (void)jo2;
    dev_device *d2 = dev_cpu_open(err, sizeof err);
    dev_stream *s2 = dev_get_ops(d2)->stream_create(d2, "t");
    /* a short timeout (the segment's name is gone once every rank attached:
     * no second handle by path) */
    comm_job_set_timeout(job, 0.5);
    comm *p3 = comm_group(job, COMM_KIND_PP, "pp", pair, 2, err, sizeof err);
    float v = 1;
    comm_allreduce(p3, s2, &v, 1, COMM_FLOAT32);
    int rc = dev_get_ops(d2)->stream_synchronize(s2);
    const char *why = dev_last_error(d2);
    if (rc == 0 || !strstr(why, "allreduce") || !strstr(why, "group pp") ||
        !strstr(why, "timed out")) {
      printf("rank 0: timeout not reported properly (rc %d): %s\n", rc, why);
      bad = 1;
    } else {
      printf("timeout reported: %s\n", why);
    }
    comm_destroy(p);
    comm_destroy(p3);
    dev_close(d2);
  }
  free(x);
  free(in);
  free(rs);
  free(ag);
  free(sendbuf);
  free(recvbuf);
  /* ranks 1 and 2 stay alive while rank 0 tests the timeout with rank 2: a
   * member that has exited is reported as such, not as a timeout */
  if (rank != 0) sleep(2);
  comm_destroy(c);
  dev_close(d);
  comm_job_close(job);
  return bad;
}

int main(void) {
  char path[256], err[512];
  snprintf(path, sizeof path, "%s/ss-test-comm-%d.shm",
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
