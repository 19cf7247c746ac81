/*
 * test_nccl_plugin.c — drives the NCCL profiler plugin's exported entry
 * points (ncclProfiler_v5 as NCCL 2.28 does, and ncclProfiler_v4) with
 * constructed descriptors, then reads the trace back and checks the
 * COLLECTIVE records: communicator id, per-communicator sequence numbers,
 * op, datatype, count, busbw bytes, algorithm/protocol/channels, the kernel
 * launch correlation id, GPU-timed intervals from kernel-channel timers,
 * and send/recv sequence numbers per peer; the event order NCCL 2.28 really
 * uses (Coll started after its API events ended, KernelCh after the Coll
 * stopped) with handles reused late. Also checks that init fails
 * (so NCCL disables the plugin) when no trace runs.
 */
#include <time.h>

#include "nccl_profiler_core.h"
#include "nccl_profiler_v4.h"
#include "nccl_profiler_v5.h"
#include "gpu_session.h"
#include "trace_check.h"

#include <stddef.h>

#include "nccl_profiler_v6.h"

/* Our descriptors against the layout of NCCL's profiler_v4/v5/v6.h (LP64),
 * field by field: a wrong order or type moves an offset and fails the build. */
_Static_assert(offsetof(sgpu_nccl_descr_v5, parentObj) == 8 &&
                   offsetof(sgpu_nccl_descr_v5, rank) == 16 &&
                   offsetof(sgpu_nccl_descr_v5, groupApi) == 24,
               "v5 header");
_Static_assert(offsetof(sgpu_nccl_descr_v4, parentObj) == 8 &&
                   offsetof(sgpu_nccl_descr_v4, coll) == 24,
               "v4 header (uint8_t type)");
_Static_assert(offsetof(sgpu_nccl_descr_v5, coll.func) == 24 + 8 &&
                   offsetof(sgpu_nccl_descr_v5, coll.count) == 24 + 32 &&
                   offsetof(sgpu_nccl_descr_v5, coll.root) == 24 + 40 &&
                   offsetof(sgpu_nccl_descr_v5, coll.datatype) == 24 + 48 &&
                   offsetof(sgpu_nccl_descr_v5, coll.nChannels) == 24 + 56 &&
                   offsetof(sgpu_nccl_descr_v5, coll.nWarps) == 24 + 57 &&
                   offsetof(sgpu_nccl_descr_v5, coll.algo) == 24 + 64 &&
                   offsetof(sgpu_nccl_descr_v5, coll.proto) == 24 + 72 &&
                   offsetof(sgpu_nccl_descr_v5, coll.parentGroup) == 24 + 80,
               "v5 coll");
_Static_assert(offsetof(sgpu_nccl_descr_v5, p2p.count) == 24 + 24 &&
                   offsetof(sgpu_nccl_descr_v5, p2p.peer) == 24 + 32 &&
                   offsetof(sgpu_nccl_descr_v5, p2p.nChannels) == 24 + 36,
               "v5 p2p");
_Static_assert(offsetof(sgpu_nccl_descr_v5, collApi.stream) == 24 + 32 &&
                   offsetof(sgpu_nccl_descr_v5, collApi.graphCaptured) == 24 + 40 &&
                   offsetof(sgpu_nccl_descr_v5, p2pApi.stream) == 24 + 24,
               "v5 API events");
_Static_assert(offsetof(sgpu_nccl_descr_v5, kernelCh.pTimer) == 24 + 8 &&
                   offsetof(sgpu_nccl_descr_v4, kernelCh.pTimer) == 24 + 8,
               "kernelCh");
_Static_assert(offsetof(sgpu_nccl_descr_v6, ceColl.syncStrategy) == 24 + 56 &&
                   offsetof(sgpu_nccl_descr_v6, ceColl.ceSeqNum) == 24 + 76 &&
                   offsetof(sgpu_nccl_descr_v6, ceColl.stream) == 24 + 80,
               "v6 ceColl");
_Static_assert(sizeof(sgpu_nccl_state_args) == 8, "state args union");
_Static_assert(offsetof(sgpu_nccl_profiler_v5, finalize) == 5 * sizeof(void *), "function table");
_Static_assert(SGPU_NCCL_EV_KERNEL_CH == 64 && SGPU_NCCL_EV_KERNEL_LAUNCH == 2048 &&
                   SGPU_NCCL_EV_CE_COLL == 4096 && SGPU_NCCL_STATE_KERNEL_CH_STOP == 22 &&
                   SGPU_NCCL_STATE_CE_COLL_COMPLETE == 26,
               "event bits and states");

extern const sgpu_nccl_profiler_v5 ncclProfiler_v5;
extern const sgpu_nccl_profiler_v4 ncclProfiler_v4;

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *start(void *ctx, sgpu_nccl_descr_v5 *d) {
  void *h = NULL;
  CHECK(ncclProfiler_v5.startEvent(ctx, &h, d) == 0);
  return h;
}

static void drive_v5(void) {
  void *ctx = NULL;
  int mask = 0;
  CHECK(ncclProfiler_v5.init(&ctx, 0xabcdef0123456789ull, &mask, "dp", 1, 4, 1, NULL) == 0);
  CHECK(ctx != NULL);
  CHECK(mask & SGPU_NCCL_EV_COLL);
  CHECK(mask & SGPU_NCCL_EV_KERNEL_CH);
  CHECK(mask & SGPU_NCCL_EV_KERNEL_LAUNCH);

  /* Group 1: one all-reduce, launched with correlation 777, GPU-timed. */
  sgpu_nccl_descr_v5 d;
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_GROUP_API;
  d.rank = 1;
  void *group = start(ctx, &d);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_COLL_API;
  d.parentObj = group;
  d.collApi.func = "AllReduce";
  d.collApi.count = 1024;
  d.collApi.datatype = "ncclBfloat16";
  void *api = start(ctx, &d);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_COLL;
  d.parentObj = api;
  d.coll.seqNumber = 41; /* NCCL's own per-function counter: not what we record */
  d.coll.func = "AllReduce";
  d.coll.count = 1024;
  d.coll.datatype = "ncclBfloat16";
  d.coll.root = 0;
  d.coll.nChannels = 2;
  d.coll.algo = "Ring";
  d.coll.proto = "Simple";
  void *coll = start(ctx, &d);
  CHECK(coll != NULL);
  CHECK(ncclProfiler_v5.stopEvent(api) == 0);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_KERNEL_LAUNCH;
  d.parentObj = group;
  void *launch = start(ctx, &d);
  sgpu_nccl_note_launch_correlation(777); /* what CUPTI's driver callback does */
  sgpu_nccl_note_launch_correlation(778); /* a second launch keeps the first id */
  ncclProfiler_v5.stopEvent(launch);
  ncclProfiler_v5.stopEvent(coll);
  /* Two channels report GPU timers (globaltimer ~ realtime). */
  uint64_t t0 = realtime_ns();
  for (int ch = 0; ch < 2; ch++) {
    memset(&d, 0, sizeof d);
    d.type = SGPU_NCCL_EV_KERNEL_CH;
    d.parentObj = coll;
    d.kernelCh.channelId = (uint8_t)ch;
    d.kernelCh.pTimer = t0 + (uint64_t)ch * 1000;
    void *kch = start(ctx, &d);
    sgpu_nccl_state_args args;
    args.kernelCh.pTimer = t0 + 50000 + (uint64_t)ch * 2000;
    ncclProfiler_v5.recordEventState(kch, SGPU_NCCL_STATE_KERNEL_CH_STOP, &args);
    ncclProfiler_v5.stopEvent(kch);
  }
  sgpu_nccl_note_launch_correlation(999); /* no launch in progress: ignored */
  ncclProfiler_v5.stopEvent(group);

  /* Group 2: an all-gather without kernel timers, and three p2p ops. */
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_GROUP_API;
  group = start(ctx, &d);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_COLL;
  d.parentObj = group;
  d.coll.func = "AllGather";
  d.coll.count = 10;
  d.coll.datatype = "ncclFloat32";
  d.coll.algo = "Ring";
  d.coll.proto = "LL";
  ncclProfiler_v5.stopEvent(start(ctx, &d));
  const char *p2p_funcs[] = {"Send", "Send", "Recv"};
  for (int i = 0; i < 3; i++) {
    memset(&d, 0, sizeof d);
    d.type = SGPU_NCCL_EV_P2P;
    d.parentObj = group;
    d.p2p.func = p2p_funcs[i];
    d.p2p.count = 256;
    d.p2p.datatype = "ncclFloat16";
    d.p2p.peer = 2;
    d.p2p.nChannels = 1;
    ncclProfiler_v5.stopEvent(start(ctx, &d));
  }
  ncclProfiler_v5.stopEvent(group);
  /* Events we do not follow get no handle and stop cleanly. */
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_PROXY_OP;
  CHECK(start(ctx, &d) == NULL);
  CHECK(ncclProfiler_v5.stopEvent(NULL) == 0);
  CHECK(ncclProfiler_v5.finalize(ctx) == 0);
}

/* The order NCCL 2.28 really uses (src/enqueue.cc, src/plugin/profiler.cc):
 * the API events and the kernel launch come first and all end; the Coll
 * event is started afterwards (hostStreamPlanTask, possibly on a CUDA
 * callback thread) naming the already-stopped CollApi as its parent, and is
 * stopped at once ("enqueued"); its KernelCh events come later still from the
 * proxy thread, naming the stopped Coll. The handles must stay usable, the
 * launch correlation id must reach the record, and the GPU timers too. */
static void drive_v5_nccl_2_28_order(void) {
  void *ctx = NULL;
  int mask = 0;
  CHECK(ncclProfiler_v5.init(&ctx, 0x77ull, &mask, "tp", 1, 2, 0, NULL) == 0);
  sgpu_nccl_descr_v5 d;
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_GROUP_API;
  d.groupApi.groupDepth = 1;
  void *group = start(ctx, &d);
  CHECK(group != NULL);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_COLL_API;
  d.parentObj = group;
  d.collApi.func = "ReduceScatter";
  d.collApi.count = 64;
  d.collApi.datatype = "ncclFloat32";
  void *api = start(ctx, &d);
  CHECK(api != NULL);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_KERNEL_LAUNCH;
  d.parentObj = group;
  void *launch = start(ctx, &d);
  sgpu_nccl_note_launch_correlation(4242);
  ncclProfiler_v5.stopEvent(launch);
  ncclProfiler_v5.stopEvent(api);
  ncclProfiler_v5.stopEvent(group); /* ncclGroupEnd returns: every API event has ended */
  /* v5 also reports the legacy per-plan Group event: not followed. */
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_GROUP;
  void *legacy_group = start(ctx, &d);
  CHECK(legacy_group == NULL);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_COLL;
  d.parentObj = api; /* stopped already */
  d.coll.func = "ReduceScatter";
  d.coll.count = 64;
  d.coll.datatype = "ncclFloat32";
  d.coll.nChannels = 2;
  d.coll.algo = "Ring";
  d.coll.proto = "LL128";
  d.coll.parentGroup = legacy_group;
  void *coll = start(ctx, &d);
  CHECK(coll != NULL);
  ncclProfiler_v5.stopEvent(coll); /* enqueued */
  sgpu_nccl_stats before;
  sgpu_nccl_get_stats(&before);
  CHECK(before.collectives_written == 5); /* not written yet: its channels are still due */
  uint64_t t0 = realtime_ns();
  for (int ch = 0; ch < 2; ch++) {
    memset(&d, 0, sizeof d);
    d.type = SGPU_NCCL_EV_KERNEL_CH;
    d.parentObj = coll;
    d.kernelCh.channelId = (uint8_t)ch;
    d.kernelCh.pTimer = t0 + (uint64_t)ch * 500;
    void *kch = start(ctx, &d);
    CHECK(kch != NULL);
    sgpu_nccl_state_args args;
    args.kernelCh.pTimer = t0 + 30000 + (uint64_t)ch * 500;
    ncclProfiler_v5.recordEventState(kch, SGPU_NCCL_STATE_KERNEL_CH_STOP, &args);
    ncclProfiler_v5.stopEvent(kch);
  }
  /* A late call on the ended operation is ignored (its memory is still ours). */
  ncclProfiler_v5.stopEvent(coll);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_KERNEL_CH;
  d.parentObj = coll;
  CHECK(start(ctx, &d) == NULL);
  sgpu_nccl_stats after;
  sgpu_nccl_get_stats(&after);
  CHECK(after.collectives_written == 6);
  CHECK(after.late_events == before.late_events + 2);
  CHECK(ncclProfiler_v5.finalize(ctx) == 0);
}

static void drive_v4(void) {
  void *ctx = NULL;
  int mask = 0;
  CHECK(ncclProfiler_v4.init(&ctx, &mask, NULL, 0x1111ull, 1, 2, 0, NULL) == 0);
  CHECK(mask & SGPU_NCCL_EV_GROUP);
  sgpu_nccl_descr_v4 d;
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_GROUP;
  void *group = NULL, *coll = NULL;
  ncclProfiler_v4.startEvent(ctx, &group, &d);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_COLL;
  d.parentObj = group;
  d.coll.func = "Broadcast";
  d.coll.count = 100;
  d.coll.root = 1;
  d.coll.datatype = "ncclInt8";
  ncclProfiler_v4.startEvent(ctx, &coll, &d);
  ncclProfiler_v4.stopEvent(coll);
  ncclProfiler_v4.stopEvent(group);
  ncclProfiler_v4.finalize(ctx);
}

int main(void) {
  /* No trace running: init must fail so that NCCL disables the plugin. */
  unsetenv("STEPSCOPE_RUN_DIR");
  void *ctx = NULL;
  int mask = 0;
  CHECK(ncclProfiler_v5.init(&ctx, 1, &mask, "x", 1, 1, 0, NULL) != 0);
  CHECK(ctx == NULL);

  const char *dir = make_temp_dir("nccl");
  stepscope_start_options opt;
  memset(&opt, 0, sizeof opt);
  opt.run_dir = dir;
  opt.rank = 1;
  opt.world_size = 4;
  opt.local_rank = 1;
  opt.producer = "test_nccl_plugin";
  stepscope_error err;
  if (stepscope_start(&opt, &err) != 0) {
    fprintf(stderr, "stepscope_start: %s\n", err.message);
    return 1;
  }
  drive_v5();
  drive_v5_nccl_2_28_order();
  drive_v4();
  stepscope_stop();

  char path[600];
  snprintf(path, sizeof path, "%s/rank-00001.trace.zst", dir);
  loaded_trace t;
  if (load_trace(path, &t) != 0) return 1;
  CHECK(count_kind(&t, STEPSCOPE_REC_COLLECTIVE) == 7);
  int seen_ar = 0, seen_ag = 0, sends = 0, recvs = 0, seen_bcast = 0, seen_rs = 0, marks = 0;
  for (size_t i = 0; i < t.count; i++) {
    const stepscope_record *r = &t.records[i];
    if (r->kind == STEPSCOPE_REC_MARK &&
        strcmp(trace_string(&t, r->u.mark.name), "ncclCommInit") == 0) {
      marks++;
      CHECK(strcmp(trace_string(&t, r->u.mark.domain), "NCCL") == 0);
    }
    if (r->kind != STEPSCOPE_REC_COLLECTIVE) continue;
    const stepscope_collective *c = &r->u.collective;
    CHECK(c->end_ns >= c->start_ns);
    if (c->op == STEPSCOPE_COLL_ALLREDUCE) {
      seen_ar++;
      CHECK(c->comm_id == 0xabcdef0123456789ull);
      CHECK(c->seq == 0);
      CHECK(c->datatype == STEPSCOPE_DT_BFLOAT16);
      CHECK(c->count == 1024);
      CHECK(c->bytes == 2048);
      CHECK(c->comm_rank == 1 && c->comm_size == 4);
      CHECK(c->channels == 2);
      CHECK(c->peer == -1);
      CHECK(c->correlation_id == 777);
      CHECK(c->flags & STEPSCOPE_COLL_F_GPU_TIMED);
      /* 50 us + 2 us between the earliest channel start and the latest stop. */
      CHECK(c->end_ns - c->start_ns == 52000);
      CHECK(strcmp(trace_string(&t, c->algorithm), "Ring") == 0);
      CHECK(strcmp(trace_string(&t, c->protocol), "Simple") == 0);
      CHECK(strcmp(trace_string(&t, c->name), "dp") == 0);
    } else if (c->op == STEPSCOPE_COLL_ALLGATHER) {
      seen_ag++;
      CHECK(c->seq == 1);
      CHECK(c->bytes == 10 * 4 * 4); /* per-rank count x size x nranks */
      CHECK(!(c->flags & STEPSCOPE_COLL_F_GPU_TIMED));
      CHECK(c->correlation_id == 0);
      CHECK(strcmp(trace_string(&t, c->protocol), "LL") == 0);
    } else if (c->op == STEPSCOPE_COLL_SEND) {
      CHECK(c->flags & STEPSCOPE_COLL_F_P2P);
      CHECK(c->peer == 2);
      CHECK(c->bytes == 512);
      CHECK(c->seq == (uint64_t)sends);
      sends++;
    } else if (c->op == STEPSCOPE_COLL_RECV) {
      CHECK(c->seq == 0);
      CHECK(c->peer == 2);
      recvs++;
    } else if (c->op == STEPSCOPE_COLL_REDUCESCATTER) {
      seen_rs++;
      CHECK(c->comm_id == 0x77ull && c->seq == 0 && c->comm_size == 2);
      CHECK(c->correlation_id == 4242); /* from the group that had ended before the Coll began */
      CHECK(c->flags & STEPSCOPE_COLL_F_GPU_TIMED);
      CHECK(c->end_ns - c->start_ns == 30500);
      CHECK(strcmp(trace_string(&t, c->protocol), "LL128") == 0);
    } else if (c->op == STEPSCOPE_COLL_BROADCAST) {
      seen_bcast++;
      CHECK(c->comm_id == 0x1111ull);
      CHECK(c->seq == 0); /* its own communicator's counter */
      CHECK(c->peer == 1);
      CHECK(c->bytes == 100);
      CHECK(c->comm_size == 2);
    }
  }
  CHECK(seen_ar == 1 && seen_ag == 1 && sends == 2 && recvs == 1 && seen_bcast == 1 &&
        seen_rs == 1);
  CHECK(marks == 3);
  sgpu_nccl_stats stats;
  sgpu_nccl_get_stats(&stats);
  CHECK(stats.events_live == 0);
  free_trace(&t);
  if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);
  return check_failures ? 1 : 0;
}
