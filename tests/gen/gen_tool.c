/*
 * gen_tool.c — `stepscope-gen OUT_DIR [knobs]`: writes a generated run (for
 * trying the analyzer, the export and the viewer by hand) and prints the
 * expected headline metrics per rank computed by gen_expect. Test and bench
 * helper only; not installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepscope_gen.h"

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: stepscope-gen OUT_DIR [--seed N] [--ranks N] [--lanes N] [--steps N] [--ops N]\n"
      "       [--no-comm] [--no-compute] [--copies] [--cpu] [--pipeline] [--syncs]\n"
      "       [--clock-spread NS] [--anchor-error NS] [--missing-member] [--empty-rank]\n"
      "       [--name-only-nccl] [--overlap] [--flops] [--overlap-steps N]\n"
      "   or: stepscope-gen OUT_DIR --iter [--ranks N] [--steps N] [--load-us N] [--host-ahead N]\n"
      "       [--graphs] [--prefetch] [--cut-last] [--iter-comm]   (a training loop, "
      "gen_iter.c)\n"
      "   or: stepscope-gen OUT_DIR --scale [--ranks N] [--events-per-rank N] [--steps N]\n"
      "       [--tp N] [--pp N] [--microbatches N] [--stragglers N] [--straggle-us N]\n"
      "       [--straggle-uneven]   (straggler k of S: k / S of --straggle-us)\n"
      "       [--launch-lead-us N]  (each launch ends N us before its kernel: the host runs "
      "ahead)\n"
      "       [--clock-spread NS] [--seed N] [--threads N] [--waits [--1f1b]]\n"
      "       (thousands of ranks, fast: gen_scale.c; --waits: stages wait on each other's\n"
      "       sends, gen_scale_waits.c;\n"
      "       the random scenarios above compute exact expectations by brute force, linear in "
      "ranks,\n"
      "       up to %d ranks)\n",
      GEN_MAX_RANKS);
}

/* `--scale`: a run of thousands of ranks and what holds by construction. */
static int scale_main(int argc, char **argv) {
  gen_scale s;
  gen_scale_default(&s);
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    long long v = i + 1 < argc ? atoll(argv[i + 1]) : 0;
    int takes = 1;
    if (!strcmp(a, "--scale"))
      takes = 0;
    else if (!strcmp(a, "--ranks"))
      s.nranks = (int)v;
    else if (!strcmp(a, "--events-per-rank"))
      s.events_per_rank = v;
    else if (!strcmp(a, "--steps"))
      s.nsteps = (int)v;
    else if (!strcmp(a, "--tp"))
      s.tp = (int)v;
    else if (!strcmp(a, "--pp"))
      s.pp = (int)v;
    else if (!strcmp(a, "--microbatches"))
      s.microbatches = (int)v;
    else if (!strcmp(a, "--stragglers"))
      s.stragglers = (int)v;
    else if (!strcmp(a, "--straggle-us"))
      s.straggle_ns = v * 1000;
    else if (!strcmp(a, "--clock-spread"))
      s.clock_spread = v;
    else if (!strcmp(a, "--seed"))
      s.seed = (uint64_t)v;
    else if (!strcmp(a, "--threads"))
      s.threads = (int)v;
    else if (!strcmp(a, "--waits")) {
      s.waits = 1;
      takes = 0;
    } else if (!strcmp(a, "--launch-lead-us")) {
      s.launch_lead = v * 1000;
    } else if (!strcmp(a, "--straggle-uneven")) {
      s.straggle_uneven = 1;
      takes = 0;
    } else if (!strcmp(a, "--1f1b")) {
      s.one_f_one_b = 1;
      takes = 0;
    } else if (a[0] != '-' && !out) {
      out = a;
      takes = 0;
    } else {
      usage(stderr);
      return 2;
    }
    i += takes;
  }
  if (!out || s.nranks < 1 || s.nsteps < 1 || s.events_per_rank < 1 || s.straggle_ns < 0 ||
      s.launch_lead < 0 || (s.one_f_one_b && !s.waits) || gen_scale_layout(&s)) {
    usage(stderr);
    return 2;
  }
  char err[4200];
  uint64_t events = 0;
  if (gen_scale_write(&s, out, &events, err, sizeof err)) {
    fprintf(stderr, "stepscope-gen: %s\n", err);
    return 1;
  }
  printf("ranks %d: tp %d pp %d dp %d, %d micro-batches, %d steps, %d kernels per slot\n", s.nranks,
         s.tp, s.pp, s.dp, s.microbatches, s.nsteps, s.kernels_per_slot);
  printf("events %llu\nstep_ns %lld\nslot_ns %lld\nstragglers", (unsigned long long)events,
         (long long)s.step_ns, (long long)s.slot_ns);
  for (int r = 0; r < s.nranks; r++)
    if (gen_scale_is_straggler(&s, r)) printf(" %d", r);
  printf("\n");
  if (s.waits) /* the pipelines' receives, and those that waited on a late send */
    printf("receives %lld\nwaited %lld\n", (long long)s.receives, (long long)s.waited);
  return 0;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--scale")) return scale_main(argc, argv);
  gen_scenario sc;
  gen_scenario_default(&sc);
  gen_iter it;
  gen_iter_default(&it);
  int iter = 0;
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    long long v = i + 1 < argc ? atoll(argv[i + 1]) : 0;
    if (!strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--seed")) {
      sc.seed = (uint64_t)v;
      i++;
    } else if (!strcmp(a, "--ranks")) {
      sc.nranks = (int)v;
      i++;
    } else if (!strcmp(a, "--lanes")) {
      sc.nlanes = (int)v;
      i++;
    } else if (!strcmp(a, "--steps")) {
      sc.nsteps = (int)v;
      i++;
    } else if (!strcmp(a, "--ops")) {
      sc.ops_per_step = (int)v;
      i++;
    } else if (!strcmp(a, "--clock-spread")) {
      sc.clock_spread = v;
      i++;
    } else if (!strcmp(a, "--anchor-error")) {
      sc.anchor_error = v;
      i++;
    } else if (!strcmp(a, "--no-comm"))
      sc.comm = 0;
    else if (!strcmp(a, "--no-compute"))
      sc.compute = 0;
    else if (!strcmp(a, "--copies"))
      sc.copies = 1;
    else if (!strcmp(a, "--cpu"))
      sc.cpu_backend = 1;
    else if (!strcmp(a, "--pipeline"))
      sc.pipeline = 1;
    else if (!strcmp(a, "--syncs"))
      sc.syncs = 1;
    else if (!strcmp(a, "--missing-member"))
      sc.missing_member = 1;
    else if (!strcmp(a, "--empty-rank"))
      sc.empty_rank = 1;
    else if (!strcmp(a, "--name-only-nccl"))
      sc.name_only_nccl = 1;
    else if (!strcmp(a, "--overlap"))
      sc.overlap_same_lane = 1;
    else if (!strcmp(a, "--flops"))
      sc.flops = 1;
    else if (!strcmp(a, "--overlap-steps")) {
      sc.overlap_steps = (int)v;
      i++;
    } else if (!strcmp(a, "--iter"))
      iter = 1;
    else if (!strcmp(a, "--load-us")) {
      it.load_ns = v * 1000;
      i++;
    } else if (!strcmp(a, "--host-ahead")) {
      it.host_ahead = (int)v;
      i++;
    } else if (!strcmp(a, "--graphs"))
      it.graphs = 1;
    else if (!strcmp(a, "--prefetch"))
      it.prefetch = 1;
    else if (!strcmp(a, "--cut-last"))
      it.cut_last = 1;
    else if (!strcmp(a, "--iter-comm"))
      it.comm = 1;
    else if (a[0] != '-' && !out)
      out = a;
    else {
      usage(stderr);
      return 2;
    }
  }
  if (!out || sc.nranks < 1 || sc.nranks > GEN_MAX_RANKS || sc.nsteps > 64) {
    usage(stderr);
    return 2;
  }
  gen_run g;
  it.nranks = sc.nranks;
  if (iter) it.nsteps = sc.nsteps;
  if (iter ? gen_iter_build(&g, &it) : gen_build(&g, &sc)) {
    fprintf(stderr, "stepscope-gen: out of memory\n");
    return 1;
  }
  char err[600];
  if (gen_write(&g, out, err, sizeof err)) {
    fprintf(stderr, "stepscope-gen: %s\n", err);
    gen_free(&g);
    return 1;
  }
  gen_expect x;
  if (gen_expect_compute(&g, &x) == 0) {
    for (int k = 0; k < x.nranks; k++) {
      const gen_window *w = &x.ranks[k].totals;
      printf("rank %d: span %lld compute %lld comm %lld overlap %lld exposed_comm %lld exposed_mem "
             "%lld idle %lld bubble %lld\n",
             x.ranks[k].rank, (long long)w->span, (long long)w->compute, (long long)w->comm,
             (long long)w->overlap, (long long)w->exposed_comm, (long long)w->exposed_mem,
             (long long)w->idle, (long long)w->bubble);
    }
    printf("step_time_median %lld device_latency_median %lld\n", (long long)x.step_time_median,
           (long long)x.device_latency_median);
    gen_expect_free(&x);
  }
  gen_free(&g);
  return 0;
}
