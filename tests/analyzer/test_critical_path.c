/*
 * test_critical_path.c — the critical path (docs/metrics.md "Critical path") on generated
 * runs whose path can be worked out by hand:
 *
 *   collective  two ranks; rank 1's compute before an all-reduce is long, so rank 0's
 *               all-reduce waits for it: the path ends on rank 0 (its last kernel), goes
 *               back through the all-reduce's transfer to rank 1's arrival, then rank 1's
 *               long kernel, its launch gap and its launch call;
 *   stream_wait one rank, two streams: a kernel on stream 8 waits (an event wait, SYNC
 *               record) for a kernel of stream 7: the path crosses the wait;
 *   stream_wait_inferred, stream_wait_too_late: the same without the record (a trace that
 *               records no waits): the wait is inferred when the kernel starts within the
 *               5 launch-gap thresholds after the other stream's kernel ended, not otherwise;
 *   revisit     two ranks whose path goes from rank 0 to rank 1 and back, where rank 0's
 *               nodes have dependencies (clipped) on nodes already on the path, on rank 0
 *               and on rank 1: none is entered again;
 *   host_bound  one rank, two steps whose kernels are short and far apart: the host's
 *               untraced time is the path;
 *   eager_send  two ranks exchange (each sends to the other, then receives); rank 0's send
 *               ends before rank 1, late, posts the receive it is matched with (a buffered
 *               send). The path tiles the step, and the replay (replay.c) reproduces the
 *               step with no dependency cycle: the send does not wait for that receive.
 *   order_inserted, order_merged, order_sorted: the graph's order of ops by end, which each
 *               shape of ops gets a different way (cp_graph.c), seen through
 *               ssa_cp_last_before against every node looked at by hand.
 *
 * Each case checks every part of the path (kind, idle cause, rank, top op) against the
 * numbers worked out in its comment, and that the pieces tile the step's window (each
 * ends where the next, earlier one, begins), so the length is the step time.
 *
 * usage: test_critical_path CASE
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "critical_path.h"
#include "replay.h"
#include "ssa_metrics.h"
#include "ssa_model.h"
#include "stepscope.h"

static int failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                              \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

#define US 1000 /* times below are in microseconds */

static void header(ssa_rank *r, int rank, int world) {
  ssa_rank_init(r);
  stepscope_header h = {.rank = rank,
                        .world_size = world,
                        .clock_domain = STEPSCOPE_CLOCK_MONOTONIC,
                        .hostname = "host",
                        .producer = "test_critical_path",
                        .device_name = "GPU"};
  CHECK(ssa_rank_set_header(r, &h) == 0);
}

static void add(ssa_rank *r, stepscope_record *rec) {
  CHECK(ssa_rank_add_record(r, rec) == 0);
}

static void step_range(ssa_rank *r, uint64_t number, int64_t s, int64_t e) {
  stepscope_record rec = {.kind = STEPSCOPE_REC_RANGE};
  rec.u.range = (stepscope_range){.start_ns = (uint64_t)(s * US),
                                  .end_ns = (uint64_t)(e * US),
                                  .thread = 1,
                                  .payload = number,
                                  .name = ssa_rank_intern(r, "step"),
                                  .domain = ssa_rank_intern(r, "stepscope"),
                                  .payload_kind = STEPSCOPE_PAYLOAD_UINT64};
  add(r, &rec);
}

/* A launch call [as, ae] of kernel `name` that runs [ks, ke] on `stream`. */
static void kernel(ssa_rank *r, const char *name, int64_t as, int64_t ae, int64_t ks, int64_t ke,
                   uint64_t stream, uint64_t corr) {
  stepscope_record api = {.kind = STEPSCOPE_REC_API};
  api.u.api = (stepscope_api){.start_ns = (uint64_t)(as * US),
                              .end_ns = (uint64_t)(ae * US),
                              .correlation_id = corr,
                              .thread = 1,
                              .name = ssa_rank_intern(r, "cudaLaunchKernel"),
                              .api_kind = STEPSCOPE_API_RUNTIME};
  add(r, &api);
  stepscope_record k = {.kind = STEPSCOPE_REC_KERNEL};
  k.u.kernel = (stepscope_kernel){.start_ns = (uint64_t)(ks * US),
                                  .end_ns = (uint64_t)(ke * US),
                                  .correlation_id = corr,
                                  .stream = stream,
                                  .name = ssa_rank_intern(r, name)};
  add(r, &k);
}

/* All-reduce `seq` of communicator 42 executed by kernel `corr`. */
static void allreduce_seq(ssa_rank *r, int rank, uint64_t seq, int64_t s, int64_t e,
                          uint64_t corr) {
  stepscope_record c = {.kind = STEPSCOPE_REC_COLLECTIVE};
  c.u.collective = (stepscope_collective){.start_ns = (uint64_t)(s * US),
                                          .end_ns = (uint64_t)(e * US),
                                          .comm_id = 42,
                                          .seq = seq,
                                          .count = 1024,
                                          .bytes = 4096,
                                          .stream = 7,
                                          .correlation_id = corr,
                                          .op = STEPSCOPE_COLL_ALLREDUCE,
                                          .peer = -1,
                                          .comm_rank = (uint32_t)rank,
                                          .comm_size = 2,
                                          .name = ssa_rank_intern(r, "dp")};
  add(r, &c);
}

static void allreduce(ssa_rank *r, int rank, int64_t s, int64_t e, uint64_t corr) {
  allreduce_seq(r, rank, 0, s, e, corr);
}

static const ssa_critical_path *analyse(ssa_run *run, ssa_analysis *a, ssa_rank *ranks, size_t n) {
  stepscope_error err = {0};
  CHECK(ssa_run_from_ranks(run, ranks, n, &err) == 0);
  CHECK(ssa_analyze(run, NULL, a, &err) == 0);
  return a->critical_path;
}

/* The pieces of every step tile its window, latest first; the length is the step time. */
static void check_tiling(const ssa_critical_path *cp) {
  CHECK(cp->mismatched_steps == 0);
  for (size_t i = 0; i < cp->nsteps; i++) {
    const ssa_cp_step *st = &cp->steps[i];
    CHECK(st->length == st->step_time);
    CHECK(st->end_rel - st->start_rel == st->step_time);
    int64_t t = st->end_rel;
    for (size_t k = 0; k < st->nseg; k++) {
      const ssa_cp_segment *s = &st->segs[k];
      CHECK(s->end_rel == t);
      CHECK(s->start_rel < s->end_rel);
      t = s->start_rel;
    }
    CHECK(t == st->start_rel);
  }
}

static const char *top_name(const ssa_analysis *a, const ssa_cp_top *t) {
  return ssa_name(a, t->name);
}

/* Rank 0: A0 [10,30], all-reduce [30,90] (rank 1 arrives at 70), B0 [90,100].
 * Rank 1: A1 [10,70] launched by [1,2], all-reduce [70,90], B1 [90,95].
 * Step time 100 (rank 0's window [0,100]). Path, from 100 back: B0 [90,100] compute on rank 0;
 * its all-reduce's transfer [70,90] on rank 0; rank 1's arrival at 70: A1 [10,70] compute;
 * idle [2,10] (launch) on rank 1; the launch call [1,2] and untraced host [0,1] on rank 1.
 * compute 70, communication 20, idle 8 (launch), host 2; rank 0 30, rank 1 70. */
static void case_collective(void) {
  ssa_rank *ranks = calloc(2, sizeof *ranks);
  for (int q = 0; q < 2; q++) {
    ssa_rank *r = &ranks[q];
    header(r, q, 2);
    step_range(r, 0, 0, 8);
    kernel(r, q ? "A1" : "A0", 1, 2, 10, q ? 70 : 30, 7, 1);
    kernel(r, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 3, 4, q ? 70 : 30, 90, 7, 2);
    allreduce(r, q, q ? 70 : 30, 90, 2);
    kernel(r, q ? "B1" : "B0", 5, 6, 90, q ? 95 : 100, 7, 3);
  }
  ssa_run run = {0};
  ssa_analysis a;
  const ssa_critical_path *cp = analyse(&run, &a, ranks, 2);
  CHECK(cp && cp->nsteps == 1);
  if (!cp || cp->nsteps != 1) return;
  check_tiling(cp);
  const ssa_cp_step *st = &cp->steps[0];
  CHECK(st->step_time == 100 * US);
  CHECK(st->end_rank_idx == 0);
  CHECK(st->kind[SSA_CP_COMPUTE] == 70 * US);
  CHECK(st->kind[SSA_CP_COMM] == 20 * US);
  CHECK(st->kind[SSA_CP_IDLE] == 8 * US);
  CHECK(st->idle_cause[SSA_CP_IDLE_LAUNCH] == 8 * US);
  CHECK(st->kind[SSA_CP_HOST] == 2 * US);
  CHECK(st->host_untraced == 1 * US);
  CHECK(st->by_rank[0] == 30 * US);
  CHECK(st->by_rank[1] == 70 * US);
  CHECK(st->ntop >= 3);
  CHECK(!strcmp(top_name(&a, &st->top[0]), "A1") && st->top[0].rank_idx == 1);
  CHECK(st->top[0].time == 60 * US);
  CHECK(st->top[1].kind == SSA_CP_COMM && st->top[1].rank_idx == 0);
  CHECK(st->top[1].time == 20 * US);
  CHECK(!strcmp(top_name(&a, &st->top[2]), "B0") && st->top[2].time == 10 * US);
  CHECK(cp->steady == 1 && cp->median_length == 100 * US);
  ssa_analysis_free(&a);
  ssa_run_free(&run);
}

/* Half of a p2p exchange: a send (or receive) of communicator `comm` to (from) `peer`,
 * executed by kernel `corr`. */
static void p2p(ssa_rank *r, int rank, int send, uint64_t comm, int peer, int64_t s, int64_t e,
                uint64_t corr) {
  stepscope_record c = {.kind = STEPSCOPE_REC_COLLECTIVE};
  c.u.collective = (stepscope_collective){.start_ns = (uint64_t)(s * US),
                                          .end_ns = (uint64_t)(e * US),
                                          .comm_id = comm,
                                          .count = 1024,
                                          .bytes = 4096,
                                          .stream = 7,
                                          .correlation_id = corr,
                                          .op = send ? STEPSCOPE_COLL_SEND : STEPSCOPE_COLL_RECV,
                                          .flags = STEPSCOPE_COLL_F_P2P,
                                          .peer = peer,
                                          .comm_rank = (uint32_t)rank,
                                          .comm_size = 2,
                                          .name = ssa_rank_intern(r, "cp")};
  add(r, &c);
}

/* Each rank sends to the other, then receives from it, on one stream; every device gap is
 * 2 (so the replay's latency, the lanes' median gap, is the traced one).
 * Rank 0: send [4,20] (to 1, communicator 50) launched by [1,2]; receive [22,50] (from 1,
 *         communicator 51) by [3,4], held until rank 1's send arrives at 32.
 * Rank 1: A1 [4,30] by [1,2]; send [32,35] by [3,4]; receive [37,40] by [5,6].
 * Rank 0's send ended at 20, before rank 1's receive began (37): buffered, it waited for no
 * one. Were its end held by that receive, the replay's graph would have a cycle: rank 1's
 * receive follows its send on the stream, which rank 0's receive released, which follows
 * rank 0's send. Step time 50 (rank 0); the replay predicts 50, with no cycle. */
static void case_eager_send(void) {
  ssa_rank *ranks = calloc(2, sizeof *ranks);
  for (int q = 0; q < 2; q++) {
    header(&ranks[q], q, 2);
    step_range(&ranks[q], 0, 0, 8);
  }
  ssa_rank *r0 = &ranks[0], *r1 = &ranks[1];
  kernel(r0, "ncclDevKernel_SendRecv", 1, 2, 4, 20, 7, 1);
  p2p(r0, 0, 1, 50, 1, 4, 20, 1);
  kernel(r0, "ncclDevKernel_SendRecv", 3, 4, 22, 50, 7, 2);
  p2p(r0, 0, 0, 51, 1, 22, 50, 2);
  kernel(r1, "A1", 1, 2, 4, 30, 7, 1);
  kernel(r1, "ncclDevKernel_SendRecv", 3, 4, 32, 35, 7, 2);
  p2p(r1, 1, 1, 51, 0, 32, 35, 2);
  kernel(r1, "ncclDevKernel_SendRecv", 5, 6, 37, 40, 7, 3);
  p2p(r1, 1, 0, 50, 0, 37, 40, 3);
  ssa_run run = {0};
  ssa_analysis a;
  const ssa_critical_path *cp = analyse(&run, &a, ranks, 2);
  CHECK(cp && cp->nsteps == 1);
  if (!cp || cp->nsteps != 1) return;
  check_tiling(cp);
  CHECK(cp->steps[0].step_time == 50 * US);
  ssa_replay rep;
  char msg[256] = "";
  CHECK(ssa_replay_run(&a, NULL, 0, &rep, msg, sizeof msg) == 0);
  CHECK(rep.cycles == 0);
  CHECK(rep.nsteps == 1 && rep.steps[0].measured == 50 * US);
  CHECK(rep.nsteps == 1 && rep.steps[0].predicted == 50 * US);
  ssa_replay_free(&rep);
  ssa_analysis_free(&a);
  ssa_run_free(&run);
}

/* A walk that comes back to a rank (the rounds of questions carry the step's trail: a node is
 * entered once per step). Three all-reduces A, B, D; one stream per rank, whose ops overlap on
 * rank 0 (nested: a trace's imprecision), so that released dependencies are clipped:
 * Rank 0: A [10,100] launched by [1,2], D [12,60] by [3,4], B [30,50] by [5,6].
 * Rank 1: B [20,50] by [1,2], D [55,60] by [3,4], A [70,100] by [5,6].
 * Path from 100 back: rank 0's A [70,100] (rank 1 arrived last at 70: the jump); rank 1's A
 * from 70 (nothing of it left), idle [60,70] (stream), D [55,60], idle [50,55] (stream), B
 * [30,50] (rank 0 arrived last at 30: back to rank 0); rank 0's B from 30 (its stream
 * predecessor D released at 50, clipped to 30: clipped 1), D [12,30]: D's stream predecessor A
 * and its collective edge to rank 1's D (released at 55, clipped to 30) are both on the path
 * already, so its launch wins: idle [4,12] (launch), the call [3,4], untraced [2,3], the call
 * [1,2], untraced [0,1]. Taking A again would go on from A; taking rank 1's D again would
 * jump there at 30. comm 73, idle 23 (stream 15, launch 8), host 4; rank 0 60, rank 1 40. */
static void case_revisit(void) {
  ssa_rank *ranks = calloc(2, sizeof *ranks);
  static const int64_t ops[2][3][3] = {{{0, 10, 100}, {2, 12, 60}, {1, 30, 50}},
                                       {{1, 20, 50}, {2, 55, 60}, {0, 70, 100}}};
  for (int q = 0; q < 2; q++) {
    ssa_rank *r = &ranks[q];
    header(r, q, 2);
    step_range(r, 0, 0, 8);
    for (int k = 0; k < 3; k++) {
      const int64_t *o = ops[q][k]; /* seq, start, end */
      kernel(r, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1 + 2 * k, 2 + 2 * k, o[1], o[2], 7,
             (uint64_t)k + 1);
      allreduce_seq(r, q, (uint64_t)o[0], o[1], o[2], (uint64_t)k + 1);
    }
  }
  ssa_run run = {0};
  ssa_analysis a;
  const ssa_critical_path *cp = analyse(&run, &a, ranks, 2);
  CHECK(cp && cp->nsteps == 1);
  if (!cp || cp->nsteps != 1) return;
  check_tiling(cp);
  const ssa_cp_step *st = &cp->steps[0];
  CHECK(st->step_time == 100 * US);
  CHECK(st->end_rank_idx == 0);
  CHECK(st->kind[SSA_CP_COMM] == 73 * US);
  CHECK(st->kind[SSA_CP_IDLE] == 23 * US);
  CHECK(st->idle_cause[SSA_CP_IDLE_STREAM] == 15 * US);
  CHECK(st->idle_cause[SSA_CP_IDLE_LAUNCH] == 8 * US);
  CHECK(st->kind[SSA_CP_HOST] == 4 * US);
  CHECK(st->host_untraced == 2 * US);
  CHECK(st->by_rank[0] == 60 * US);
  CHECK(st->by_rank[1] == 40 * US);
  CHECK(st->clipped == 1);
  static const int64_t pieces[][3] = {{0, 70, 100}, {1, 60, 70}, {1, 55, 60}, {1, 50, 55},
                                      {1, 30, 50},  {0, 12, 30}, {0, 4, 12},  {0, 3, 4},
                                      {0, 2, 3},    {0, 1, 2},   {0, 0, 1}};
  size_t n = sizeof pieces / sizeof pieces[0];
  CHECK(st->nseg == n);
  for (size_t k = 0; k < n && k < st->nseg; k++) {
    const ssa_cp_segment *g = &st->segs[k];
    CHECK(g->rank_idx == (uint32_t)pieces[k][0]);
    CHECK(g->start_rel == pieces[k][1] * US && g->end_rel == pieces[k][2] * US);
  }
  ssa_analysis_free(&a);
  ssa_run_free(&run);
}

/* One rank. Stream 7: K1 [10,50] launched by [1,2]. Stream 8: K0 [5,15] launched by [3,4],
 * then K2 [60,80] launched by [5,6], after a wait of stream 8 for K1 (SYNC [20,50]).
 * Step time 80. Path: K2 [60,80]; idle [50,60] (sync: the wait released K2 at K1's end);
 * K1 [10,50]; idle [2,10] (launch); the call [1,2]; untraced host [0,1].
 * compute 60, idle 18 (sync 10, launch 8), host 2. */
static void case_stream_wait(void) {
  ssa_rank *r = calloc(1, sizeof *r);
  header(r, 0, 1);
  step_range(r, 0, 0, 8);
  kernel(r, "K1", 1, 2, 10, 50, 7, 1);
  kernel(r, "K0", 3, 4, 5, 15, 8, 2);
  kernel(r, "K2", 5, 6, 60, 80, 8, 3);
  stepscope_record y = {.kind = STEPSCOPE_REC_SYNC};
  y.u.sync = (stepscope_sync){.start_ns = 20 * US,
                              .end_ns = 50 * US,
                              .stream = 8,
                              .event_id = 1,
                              .sync_kind = STEPSCOPE_SYNC_STREAM_WAIT_EVENT};
  add(r, &y);
  ssa_run run = {0};
  ssa_analysis a;
  const ssa_critical_path *cp = analyse(&run, &a, r, 1);
  CHECK(cp && cp->nsteps == 1);
  if (!cp || cp->nsteps != 1) return;
  check_tiling(cp);
  const ssa_cp_step *st = &cp->steps[0];
  CHECK(st->step_time == 80 * US);
  CHECK(st->kind[SSA_CP_COMPUTE] == 60 * US);
  CHECK(st->idle_cause[SSA_CP_IDLE_SYNC] == 10 * US);
  CHECK(st->idle_cause[SSA_CP_IDLE_LAUNCH] == 8 * US);
  CHECK(st->kind[SSA_CP_IDLE] == 18 * US);
  CHECK(st->kind[SSA_CP_HOST] == 2 * US);
  CHECK(st->ntop >= 2 && !strcmp(top_name(&a, &st->top[0]), "K1"));
  CHECK(st->ntop >= 2 && !strcmp(top_name(&a, &st->top[1]), "K2"));
  ssa_analysis_free(&a);
  ssa_run_free(&run);
}

/* One rank, steps 0 [0,100] and 1 [100,200] (host ranges); kernels [15,20], [64,70],
 * [115,120], [154,160] launched by [10,12], [60,62], [110,112], [150,152]. Step 0's window
 * is [0,100] (step 1's range starts at 100, after step 0's last kernel), step 1's [100,200].
 * Step 0's path: untraced host [70,100], kernel [64,70], idle (launch) [62,64], call [60,62],
 * untraced host [12,60], call [10,12], untraced host [0,10]: host 92, compute 6, idle 2.
 * Step 1's: [160,200] host, kernel 6, idle 2, call 2, [112,150] host, call 2, [100,110] host
 * (the call's predecessor, step 0's last call, ended before the window): the same parts. */
static void case_host_bound(void) {
  ssa_rank *r = calloc(1, sizeof *r);
  header(r, 0, 1);
  step_range(r, 0, 0, 100);
  step_range(r, 1, 100, 200);
  kernel(r, "k", 10, 12, 15, 20, 7, 1);
  kernel(r, "k", 60, 62, 64, 70, 7, 2);
  kernel(r, "k", 110, 112, 115, 120, 7, 3);
  kernel(r, "k", 150, 152, 154, 160, 7, 4);
  ssa_run run = {0};
  ssa_analysis a;
  const ssa_critical_path *cp = analyse(&run, &a, r, 1);
  CHECK(cp && cp->nsteps == 2);
  if (!cp || cp->nsteps != 2) return;
  check_tiling(cp);
  for (int s = 0; s < 2; s++) {
    const ssa_cp_step *st = &cp->steps[s];
    CHECK(st->step_time == 100 * US);
    CHECK(st->kind[SSA_CP_HOST] == 92 * US);
    CHECK(st->host_untraced == 88 * US);
    CHECK(st->kind[SSA_CP_COMPUTE] == 6 * US);
    CHECK(st->idle_cause[SSA_CP_IDLE_LAUNCH] == 2 * US);
    CHECK(st->ntop >= 1 && !strcmp(top_name(&a, &st->top[0]), "(host, untraced)"));
  }
  CHECK(cp->total_kind[SSA_CP_HOST] == 184 * US);
  ssa_analysis_free(&a);
  ssa_run_free(&run);
}

/* The same rank without the SYNC record: a trace that records no waits (Kineto). K2 starts
 * `after` us after K1's end. Within 5 launch-gap thresholds (50 us) the wait is inferred:
 * with after = 5, K2 [55,75], idle (sync) [50,55], K1 [10,50], idle (launch) [2,10], the call
 * and untraced host: 75 = compute 60 + idle 13 + host 2. With after = 80 it is not: K2
 * [130,150] follows its stream's K0 [5,15] with idle (stream) [15,130], K0's launch gap [4,5],
 * its call [3,4], untraced host [2,3], the call [1,2], untraced host [0,1]: 150 = compute 30 +
 * idle 116 (stream 115, launch 1) + host 4. */
static void case_stream_wait_inferred(int64_t after) {
  ssa_rank *r = calloc(1, sizeof *r);
  header(r, 0, 1);
  step_range(r, 0, 0, 8);
  kernel(r, "K1", 1, 2, 10, 50, 7, 1);
  kernel(r, "K0", 3, 4, 5, 15, 8, 2);
  kernel(r, "K2", 5, 6, 50 + after, 70 + after, 8, 3);
  ssa_run run = {0};
  ssa_analysis a;
  const ssa_critical_path *cp = analyse(&run, &a, r, 1);
  CHECK(cp && cp->nsteps == 1);
  if (!cp || cp->nsteps != 1) return;
  check_tiling(cp);
  const ssa_cp_step *st = &cp->steps[0];
  if (after <= 50) {
    CHECK(st->step_time == 75 * US);
    CHECK(st->kind[SSA_CP_COMPUTE] == 60 * US);
    CHECK(st->idle_cause[SSA_CP_IDLE_SYNC] == 5 * US);
    CHECK(st->idle_cause[SSA_CP_IDLE_LAUNCH] == 8 * US);
    CHECK(st->kind[SSA_CP_HOST] == 2 * US);
  } else {
    CHECK(st->step_time == (70 + after) * US);
    CHECK(st->kind[SSA_CP_COMPUTE] == 30 * US);
    CHECK(st->idle_cause[SSA_CP_IDLE_SYNC] == 0);
    CHECK(st->idle_cause[SSA_CP_IDLE_STREAM] == (35 + after) * US);
    CHECK(st->idle_cause[SSA_CP_IDLE_LAUNCH] == 1 * US);
    CHECK(st->kind[SSA_CP_HOST] == 4 * US);
  }
  ssa_analysis_free(&a);
  ssa_run_free(&run);
}

/* The node that ends last by t, as ssa_cp_last_before defines it, by looking at every node:
 * the latest end, then an op before a host call, then the lower index (the longer one). */
static ssa_cp_node last_before_by_hand(const ssa_cp_graph *g, const ssa_rank *r, int64_t t,
                                       int *found) {
  ssa_cp_node best = {0, SSA_NONE, SSA_CPN_OP};
  int64_t best_end = INT64_MIN;
  *found = 0;
  for (uint32_t type = SSA_CPN_OP; type <= SSA_CPN_API; type++)
    for (uint32_t i = 0; i < (type == SSA_CPN_OP ? r->nops : r->napis); i++) {
      ssa_cp_node n = {0, i, type};
      int64_t e = ssa_cp_node_end(g, n);
      if (e > t || (*found && e <= best_end)) continue; /* ties: the op, the lower index */
      best = n, best_end = e, *found = 1;
    }
  return best;
}

/* The rank's order by end (cp_graph.c: by insertion, by merging the lanes, or sorted, by the
 * shape of the ops), seen through ssa_cp_last_before at every node's end and next to it,
 * against every node looked at by hand: `lanes` streams, each round a kernel per stream, the
 * kernels of a round nested (each starts after and ends before the one of the stream before)
 * when `nested`, else each odd stream's ending before the even one's before it (one place
 * out of start order). Nested rounds of 16 streams are too far from start order for the
 * insertion and go to the merge of the lanes; of 20, to the sort. */
static void case_order_by_end(int rounds, int lanes, int nested) {
  ssa_rank *r = calloc(1, sizeof *r);
  header(r, 0, 1);
  step_range(r, 0, 0, (int64_t)rounds * 1000 + 1000);
  uint64_t corr = 1;
  for (int k = 0; k < rounds; k++)
    for (int i = 0; i < lanes; i++) {
      int64_t base = (int64_t)k * 1000, as = base + 2 * i;
      int64_t ks = nested ? base + 100 + i : base + 100 + 10 * i;
      int64_t ke = nested ? base + 600 - 10 * i : ks + (i % 2 ? 5 : 25);
      kernel(r, "K", as, as + 1, ks, ke, 100 + (uint64_t)i, corr++);
    }
  ssa_run run = {0};
  ssa_analysis a;
  CHECK(analyse(&run, &a, r, 1) != NULL);
  ssa_cp_graph g;
  CHECK(ssa_cp_graph_build(&g, &run, NULL, 0, 1) == 0);
  const ssa_rank *rk = &run.ranks[0];
  size_t checked = 0;
  for (uint32_t type = SSA_CPN_OP; type <= SSA_CPN_API; type++)
    for (uint32_t i = 0; i < (type == SSA_CPN_OP ? rk->nops : rk->napis); i++)
      for (int64_t d = -1; d <= 1; d++) {
        int64_t t = ssa_cp_node_end(&g, (ssa_cp_node){0, i, type}) + d;
        int found;
        ssa_cp_node want = last_before_by_hand(&g, rk, t, &found), got;
        int rc = ssa_cp_last_before(&g, 0, t, &got);
        CHECK(rc == (found ? 0 : -1));
        if (rc == 0 && found) CHECK(got.type == want.type && got.index == want.index);
        checked++;
      }
  CHECK(rk->nops == (size_t)(rounds * lanes) && checked == 3 * (rk->nops + rk->napis));
  ssa_cp_graph_free(&g);
  ssa_analysis_free(&a);
  ssa_run_free(&run);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_critical_path "
                    "collective|revisit|stream_wait|stream_wait_inferred|stream_wait_too_late|"
                    "host_bound|eager_send|order_inserted|order_merged|order_sorted\n");
    return 2;
  }
  if (!strcmp(argv[1], "collective"))
    case_collective();
  else if (!strcmp(argv[1], "revisit"))
    case_revisit();
  else if (!strcmp(argv[1], "stream_wait"))
    case_stream_wait();
  else if (!strcmp(argv[1], "stream_wait_inferred"))
    case_stream_wait_inferred(5);
  else if (!strcmp(argv[1], "stream_wait_too_late"))
    case_stream_wait_inferred(80);
  else if (!strcmp(argv[1], "eager_send"))
    case_eager_send();
  else if (!strcmp(argv[1], "host_bound"))
    case_host_bound();
  else if (!strcmp(argv[1], "order_inserted"))
    case_order_by_end(20, 2, 0);
  else if (!strcmp(argv[1], "order_merged"))
    case_order_by_end(4, 16, 1);
  else if (!strcmp(argv[1], "order_sorted"))
    case_order_by_end(2, 20, 1);
  else
    return 2;
  if (failures) fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
