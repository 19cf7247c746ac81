/*
 * test_nccl_linked.c — the NCCL profiler plugin in a LINKED program run under
 * `stepscope record`, without a GPU (issue 14, defect 3).
 *
 * This executable plays stepscope-train: it links the GPU tracer statically,
 * exports its symbols (ENABLE_EXPORTS, like the trainer) and starts its own
 * trace. It loads the built libstepscope_inject.so the way NCCL loads a
 * profiler plugin (dlopen RTLD_LOCAL, dlsym "ncclProfiler_v6") and checks:
 *
 *   1. init order: the trainer creates its communicators BEFORE it starts its
 *      trace. init must still succeed (else NCCL disables the plugin for the
 *      whole run), events before the trace are dropped, and the
 *      communicator's ncclCommInit MARK appears in the trace once it runs;
 *   2. one core: the plugin's events reach the program's own NCCL core, so
 *      the launch correlation id the program's CUPTI callback reports
 *      (sgpu_nccl_note_launch_correlation) and the stream id of the
 *      program's CUPTI hook land in the COLLECTIVE record. With two private
 *      copies (the plugin's and the program's) both would be 0.
 *
 *   test_gpu_tracer_nccl_linked PATH_OF_libstepscope_inject.so
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_session.h"
#include "nccl_profiler_core.h"
#include "nccl_profiler_v6.h"
#include "trace_check.h"

static uint64_t fake_stream_id(void *cuda_stream) {
  return 0x5000u + (uintptr_t)cuda_stream;
}

static void *start(const sgpu_nccl_profiler_v6 *p, void *ctx, sgpu_nccl_descr_v6 *d) {
  void *h = NULL;
  CHECK(p->startEvent(ctx, &h, d) == 0);
  return h;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PATH_OF_libstepscope_inject.so\n", argv[0]);
    return 2;
  }
  const char *dir = make_temp_dir("nccl-linked");
  setenv("STEPSCOPE_RUN_DIR", dir, 1); /* as `stepscope record -o DIR` exports it */
  void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!plugin) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  const sgpu_nccl_profiler_v6 *v6 = dlsym(plugin, "ncclProfiler_v6");
  CHECK(v6 != NULL);
  if (!v6) return 1;

  /* 1. The communicator is created before the program starts its trace. */
  void *ctx = NULL;
  int mask = 0;
  CHECK(v6->init(&ctx, 0xd00dull, &mask, "dp", 1, 2, 0, NULL) == 0);
  CHECK(ctx != NULL);
  CHECK((mask & SGPU_NCCL_EV_COLL) && (mask & SGPU_NCCL_EV_KERNEL_LAUNCH));
  sgpu_nccl_descr_v6 d;
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_GROUP_API;
  CHECK(start(v6, ctx, &d) == NULL); /* no trace yet: dropped */

  stepscope_start_options opt;
  memset(&opt, 0, sizeof opt);
  opt.run_dir = dir;
  opt.rank = 0;
  opt.world_size = 2;
  opt.local_rank = 0;
  opt.producer = "test_nccl_linked";
  stepscope_error err;
  if (stepscope_start(&opt, &err) != 0) {
    fprintf(stderr, "stepscope_start: %s\n", err.message);
    return 1;
  }
  /* The program's CUPTI source installs its hooks (cupti_activity.c). */
  sgpu_hook_table.stream_id = fake_stream_id;

  /* 2. One all-reduce as NCCL 2.28+ reports it. */
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_GROUP_API;
  d.groupApi.groupDepth = 1;
  void *group = start(v6, ctx, &d);
  CHECK(group != NULL);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_COLL_API;
  d.parentObj = group;
  d.collApi.func = "AllReduce";
  d.collApi.count = 256;
  d.collApi.datatype = "ncclFloat32";
  d.collApi.stream = (void *)0x7;
  void *api = start(v6, ctx, &d);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_KERNEL_LAUNCH;
  d.parentObj = group;
  d.kernelLaunch.stream = (void *)0x7;
  void *launch = start(v6, ctx, &d);
  sgpu_nccl_note_launch_correlation(9001); /* the program's CUPTI driver callback */
  v6->stopEvent(launch);
  v6->stopEvent(api);
  v6->stopEvent(group);
  memset(&d, 0, sizeof d);
  d.type = SGPU_NCCL_EV_COLL;
  d.parentObj = api;
  d.coll.func = "AllReduce";
  d.coll.count = 256;
  d.coll.datatype = "ncclFloat32";
  d.coll.algo = "Ring";
  d.coll.proto = "Simple";
  void *coll = start(v6, ctx, &d);
  CHECK(coll != NULL);
  v6->stopEvent(coll);
  CHECK(v6->finalize(ctx) == 0);
  stepscope_stop();

  char path[600];
  snprintf(path, sizeof path, "%s/rank-00000.trace.zst", dir);
  loaded_trace t;
  if (load_trace(path, &t) != 0) return 1;
  int marks = 0, colls = 0;
  for (size_t i = 0; i < t.count; i++) {
    const stepscope_record *r = &t.records[i];
    if (r->kind == STEPSCOPE_REC_MARK &&
        strcmp(trace_string(&t, r->u.mark.name), "ncclCommInit") == 0) {
      marks++;
      CHECK(r->u.mark.payload == 0xd00dull);
      CHECK(strstr(trace_string(&t, r->u.mark.args), "\"name\":\"dp\"") != NULL);
    }
    if (r->kind != STEPSCOPE_REC_COLLECTIVE) continue;
    colls++;
    const stepscope_collective *c = &r->u.collective;
    CHECK(c->op == STEPSCOPE_COLL_ALLREDUCE);
    CHECK(c->comm_id == 0xd00dull && c->seq == 0 && c->bytes == 1024);
    CHECK(c->correlation_id == 9001);
    CHECK(c->stream == 0x5007u);
    CHECK(strcmp(trace_string(&t, c->name), "dp") == 0);
  }
  CHECK(marks == 1);
  CHECK(colls == 1);
  free_trace(&t);
  if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);
  return check_failures ? 1 : 0;
}
