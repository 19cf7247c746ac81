/*
 * test_kineto_limits.c — small Kineto traces written for these tests
 * (tests/kineto/traces, every number worked out by hand in the comments
 * below), loaded and analysed through the library as `stepscope analyze`
 * does:
 *   host_ahead     the host runs two steps ahead and each step first copies
 *                  its batch on a side stream: step windows follow the
 *                  device (step time = the 100 us device period), device
 *                  latency is the separate, longer figure
 *   loader_bound   200 us of data loading per 300 us iteration: step time =
 *                  the iteration, the loader's wait is data_loading in the step
 *   cpu_ddp        a CPU-only DDP run with gloo (two ranks): the host
 *                  timeline is analysed (CPU ops compute, gloo:* and
 *                  record_param_comms communication), with its overlap
 *   mtia_like      an accelerator whose events are not imported: one
 *                  warning naming the categories; host_name read
 *   absurd_times   a negative ts and an event three days later: left out,
 *                  counted, the span unchanged; host_name in distributedInfo
 *   cut_by_stop    the last ProfilerStep range runs 13 s past the end of the
 *                  profiling session (the `Trace` span): cut there, flagged,
 *                  left out of the step time
 * Usage: test_kineto_limits TRACES_DIR. Exit 0 when every check passes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

#include "kineto_check.h"

/* How many warnings of rank i contain `text`. */
static int rank_warnings(const ssa_rank *r, const char *text) {
  int n = 0;
  for (size_t w = 0; w < r->nwarnings; w++)
    n += strstr(r->warnings[w], text) != NULL;
  return n;
}

static int64_t rel(const loaded *l, const ssa_rank_result *rr, int64_t t) {
  return ssa_rel_time(&l->run, rr->rank, t);
}

/* Steps 1-4, ranges [0,20) [20,40) [40,120) [120,220) us; each copies its
 * batch first (5 us on stream 9, at range start + 4: runs at once) and
 * launches two 50 us kernels that run back to back on stream 7 from 10 us:
 * step k's kernels [10 + 100(k-1), 110 + 100(k-1)). The device finishes
 * steps at 110, 210, 310, 410 us, so the windows are [0,110) [110,210)
 * [210,310) [310,410): step time (median) 100 us. Device latency (copy
 * start to last kernel end): 106, 186, 266, 286 us, median 186 us. Window 1
 * holds copy 1 [4,9) before any kernel (exposed 5 us) and copies 2 and 3
 * under kernels. */
static void test_host_ahead(const char *dir) {
  loaded l;
  if (load_trace(dir, "host_ahead.json", NULL, &l)) return;
  const ssa_rank_result *rr = &l.an.ranks[0];
  CHECK_EQ(l.an.step_time_median, 100000);
  CHECK_EQ(l.an.device_latency_median, 186000);
  CHECK_EQ(rr->nsteps, 4);
  static const int64_t start[4] = {0, 110000, 210000, 310000},
                       end[4] = {110000, 210000, 310000, 410000};
  static const int64_t lat[4] = {106000, 186000, 266000, 286000};
  for (size_t s = 0; s < rr->nsteps && s < 4; s++) {
    CHECK_EQ(rel(&l, rr, rr->windows[s].start), start[s]);
    CHECK_EQ(rel(&l, rr, rr->windows[s].end), end[s]);
    CHECK_EQ(rr->windows[s].device_latency, lat[s]);
    CHECK_EQ(rr->windows[s].compute, 100000);
    CHECK_EQ(rr->steps[s].launched, 3);
  }
  CHECK_EQ(rr->windows[0].exposed_mem, 5000);
  CHECK_EQ(rr->windows[1].idle, 0);
  CHECK_EQ(rr->totals.span, 410000);
  unload(&l);
}

/* Steps 0-2, ranges [300k, 300k + 300) us: the loader [s, s+200), one 80
 * us kernel [s+205, s+285) launched at s+201, a sync until it ends. The
 * device finished the previous step before each range starts, so windows
 * are the ranges: step time 300 us, device latency 80 us, idle 220 us per
 * step: the gap before each kernel is the device waiting for the host (its
 * launch began after the gap did): data_loading while the loader range is
 * open (200 us), host_wait for the rest (5 us before the kernel, and the 15
 * us after the previous step's kernel); the 15 us after the last kernel is
 * `other`. */
static void test_loader_bound(const char *dir) {
  loaded l;
  if (load_trace(dir, "loader_bound.json", NULL, &l)) return;
  const ssa_rank_result *rr = &l.an.ranks[0];
  CHECK_EQ(l.an.step_time_median, 300000);
  CHECK_EQ(l.an.device_latency_median, 80000);
  CHECK_EQ(rr->nsteps, 3);
  for (size_t s = 0; s < rr->nsteps && s < 3; s++) {
    CHECK_EQ(rel(&l, rr, rr->windows[s].start), 300000 * (int64_t)s);
    CHECK_EQ(rr->windows[s].span, 300000);
    CHECK_EQ(rr->windows[s].idle, 220000);
    CHECK_EQ(rr->windows[s].idle_cause[SSA_IDLE_DATA_LOADING], 200000);
    CHECK_EQ(rr->windows[s].idle_cause[SSA_IDLE_HOST_WAIT], s < 2 ? 20000 : 5000);
    CHECK_EQ(rr->windows[s].idle_cause[SSA_IDLE_OTHER], s < 2 ? 0 : 15000);
  }
  unload(&l);
}

/* Two ranks, CPU only. Thread 1: top-level aten::linear [10,300),
 * autograd [300,800) (holding aten::mm and record_param_comms [710,720)),
 * aten::empty [950,960); thread 9: gloo:all_reduce [720,900) on rank 0,
 * [720,880) on rank 1; step [0,1000). Compute = 290 + 500 + 10 = 800 us;
 * comm = 10 + 180 = 190 us (rank 1: 170); overlap = [710,800) = 90 us;
 * exposed comm 100 (80) us; idle = 1000 - 900 (880) = 100 (120) us. */
static void test_cpu_ddp(const char *dir) {
  loaded l;
  if (load_trace(dir, "cpu_ddp", NULL, &l)) return;
  CHECK_EQ(l.an.nranks, 2);
  for (size_t i = 0; i < l.an.nranks; i++) {
    const ssa_rank_result *rr = &l.an.ranks[i];
    const ssa_window *w = &rr->totals;
    int r1 = rr->rank->rank == 1;
    CHECK(rr->rank->host_timeline);
    CHECK_EQ(rank_warnings(rr->rank, "no device activity"), 1);
    CHECK_EQ(rr->nsteps, 1);
    CHECK_EQ(w->span, 1000000);
    CHECK_EQ(w->compute, 800000);
    CHECK_EQ(w->comm, r1 ? 170000 : 190000);
    CHECK_EQ(w->overlap, 90000);
    CHECK_EQ(w->exposed_comm, r1 ? 80000 : 100000);
    CHECK_EQ(w->idle, r1 ? 120000 : 100000);
    CHECK_EQ(w->compute + w->exposed_comm + w->exposed_mem + w->idle, w->span);
  }
  unload(&l);
}

/* MTIA-like: mtia_runtime (2) and mtia_ccp_events (3) are not imported;
 * python_function and Trace are bookkeeping, not named. One aten::mul of
 * 100 us in a 500 us step. */
static void test_mtia_like(const char *dir) {
  loaded l;
  if (load_trace(dir, "mtia_like.json", NULL, &l)) return;
  const ssa_rank *r = l.an.ranks[0].rank;
  CHECK_EQ(rank_warnings(r, "no device activity"), 1);
  CHECK_EQ(rank_warnings(r, "mtia_runtime (2 events)"), 1);
  CHECK_EQ(rank_warnings(r, "mtia_ccp_events (3 events)"), 1);
  CHECK_EQ(rank_warnings(r, "python_function"), 0);
  CHECK_EQ(rank_warnings(r, "Trace"), 0);
  CHECK(r->hostname && !strcmp(r->hostname, "node-a17"));
  CHECK_EQ(l.an.ranks[0].totals.compute, 100000);
  CHECK_EQ(l.an.ranks[0].totals.span, 500000);
  unload(&l);
}

/* A step [0,1000) us with a kernel [100,300); aten::add at ts -5 and
 * aten::copy_ three days later are left out: the run starts at the step
 * and spans 1 ms. */
static void test_absurd_times(const char *dir) {
  loaded l;
  if (load_trace(dir, "absurd_times.json", NULL, &l)) return;
  const ssa_rank_result *rr = &l.an.ranks[0];
  CHECK_EQ(rank_warnings(rr->rank,
                         "2 events with absurd timestamps left out (1 with a negative ts, 1 more"),
           1);
  CHECK_EQ(rr->rank->nranges, 1);
  CHECK_EQ(rel(&l, rr, rr->totals.start), 0);
  CHECK_EQ(rr->totals.span, 1000000);
  CHECK_EQ(rr->totals.compute, 200000);
  CHECK(rr->rank->hostname && !strcmp(rr->rank->hostname, "node-b3"));
  unload(&l);
}

/* Steps [0,100) [100,200) us and a third whose range runs to 13 s while
 * the session (`Trace`) stops at 250 us; kernels [s+10, s+60) (the third
 * [210,240)). Windows [0,100) [100,200) [200,250); the third is cut and
 * left out of the medians: step time 100 us, device latency 50 us. */
static void test_cut_by_stop(const char *dir) {
  loaded l;
  if (load_trace(dir, "cut_by_stop.json", NULL, &l)) return;
  const ssa_rank_result *rr = &l.an.ranks[0];
  CHECK_EQ(rr->nsteps, 3);
  if (rr->nsteps != 3) goto out;
  CHECK_EQ(rr->windows[0].cut, 0);
  CHECK_EQ(rr->windows[1].cut, 0);
  CHECK_EQ(rr->windows[2].cut, 1);
  CHECK_EQ(rel(&l, rr, rr->windows[2].start), 200000);
  CHECK_EQ(rel(&l, rr, rr->windows[2].end), 250000);
  CHECK_EQ(rr->totals.span, 250000);
  CHECK_EQ(l.an.step_time_median, 100000);
  CHECK_EQ(l.an.device_latency_median, 50000);
out:
  unload(&l);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_kineto_limits TRACES_DIR\n");
    return 2;
  }
  test_host_ahead(argv[1]);
  test_loader_bound(argv[1]);
  test_cpu_ddp(argv[1]);
  test_mtia_like(argv[1]);
  test_absurd_times(argv[1]);
  test_cut_by_stop(argv[1]);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
