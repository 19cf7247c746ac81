/*
 * bench_export.c — the two export formats of `stepscope export` on the same
 * run (issue 19 §1): the size of the Chrome JSON and of the Perfetto
 * .pftrace, their ratio, and each writer's rate, the Perfetto one also as
 * "JSON-equivalent" MB/s (the JSON bytes the same content takes, per second
 * of writing the .pftrace). Goals: ratio >= 5, JSON-equivalent >= 300 MB/s.
 *
 * usage: bench_export [--ranks R] [--kernels N] [--keep DIR] [RUN...]
 *   RUN...        measure these runs (directories or files)
 *   otherwise     generate a GPU-training-like run of R ranks (default 8)
 *                 with N kernels per rank (default 500000) into a temporary
 *                 directory (or DIR, kept): per step, NVTX step/forward/
 *                 backward/layer ranges on the host thread, a launch call per
 *                 kernel, kernels on a compute stream, bucketed all-reduce
 *                 NCCL kernels on a communication stream linked to their
 *                 COLLECTIVE records (matched across ranks), memcpys, and a
 *                 memory counter.
 *
 * Each run is loaded and analysed once (not timed); each export is written
 * three times to a file in a temporary directory (the writer's final fsync
 * included) and the fastest wall time is kept with its CPU time (the machine
 * may be shared). Prints the machine and its load.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "ssa_metrics.h"
#include "ssa_report.h"
#include "stepscope.h"
#include "ssa_import.h"
#include "ssa_export.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void machine(void) {
  struct utsname u;
  uname(&u);
  char model[256] = "unknown";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f)) {
      if (!strncmp(line, "model name", 10)) {
        char *c = strchr(line, ':');
        if (c) snprintf(model, sizeof model, "%s", c + 2);
        model[strcspn(model, "\n")] = 0;
        break;
      }
    }
    fclose(f);
  }
  double load[3] = {0, 0, 0};
  f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    fclose(f);
  }
  printf("machine: %s %s %s, CPU %s, %ld cores, load average %.2f\n", u.sysname, u.release,
         u.machine, model, sysconf(_SC_NPROCESSORS_ONLN), load[0]);
}

static int write_rank(const char *dir, int rank, int world, uint64_t kernels) {
  char path[4400];
  snprintf(path, sizeof path, "%s/rank-%05d.trace.zst", dir, rank);
  stepscope_header h;
  memset(&h, 0, sizeof h);
  h.rank = rank;
  h.world_size = world;
  h.clock_domain = STEPSCOPE_CLOCK_MONOTONIC;
  h.hostname = "bench-host";
  h.device_name = "bench GPU";
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, NULL, &err);
  if (!w) {
    fprintf(stderr, "%s\n", err.message);
    return -1;
  }
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_CLOCK_ANCHOR;
  r.u.clock_anchor.trace_ns = 1000;
  r.u.clock_anchor.realtime_ns = 1700000000000000000ull + (uint64_t)rank * 1000;
  stepscope_write(w, &r);
  static const char *const names[12] = {"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn",
                                        "ampere_bf16_s16816gemm_bf16_256x128_nn",
                                        "layernorm_forward_kernel",
                                        "layernorm_backward_kernel",
                                        "softmax_forward_kernel",
                                        "flash_attention_fwd",
                                        "flash_attention_bwd",
                                        "gelu_forward_kernel",
                                        "gelu_backward_kernel",
                                        "residual_add_kernel",
                                        "adamw_update_kernel",
                                        "cast_bf16_to_fp32_kernel"};
  uint32_t ids[12];
  for (int i = 0; i < 12; i++)
    ids[i] = stepscope_intern(w, names[i]);
  uint32_t nccl = stepscope_intern(w, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  uint32_t launch = stepscope_intern(w, "cudaLaunchKernel");
  uint32_t memcpy_api = stepscope_intern(w, "cudaMemcpyAsync");
  uint32_t s_step = stepscope_intern(w, "step"), s_fwd = stepscope_intern(w, "forward");
  uint32_t s_bwd = stepscope_intern(w, "backward"), dom = stepscope_intern(w, "stepscope");
  uint32_t s_layer = stepscope_intern(w, "layer"), s_dp = stepscope_intern(w, "dp");
  uint32_t s_mem = stepscope_intern(w, "memory.in_use_bytes");
  const uint64_t per_step = 4000, per_layer = 40, per_bucket = 400;
  uint64_t host = 10000, dev[2] = {20000, 20000}, corr = 1, step = 0, seq = 0;
  uint64_t k = 0;
  while (k < kernels) {
    uint64_t step_start = host, phase_start = host, layer_start = host;
    uint64_t n = kernels - k < per_step ? kernels - k : per_step;
    for (uint64_t i = 0; i < n; i++, k++) {
      int comm = i >= n / 3 && i % per_bucket == per_bucket - 1;
      int copy = !comm && i % 500 == 250;
      memset(&r, 0, sizeof r);
      r.kind = STEPSCOPE_REC_API;
      r.u.api.start_ns = host;
      r.u.api.end_ns = host + 2500 + (i * 131) % 1500;
      r.u.api.correlation_id = corr;
      r.u.api.thread = 4242;
      r.u.api.name = copy ? memcpy_api : launch;
      r.u.api.api_kind = STEPSCOPE_API_RUNTIME;
      stepscope_write(w, &r);
      uint64_t api_end = r.u.api.end_ns;
      int lane = comm;
      uint64_t s = dev[lane] > api_end ? dev[lane] + 500 : api_end + 1500;
      uint64_t d = comm ? 60000 + (i * 7919) % 20000 : 3000 + (i * 7919) % 9000;
      memset(&r, 0, sizeof r);
      if (copy) {
        r.kind = STEPSCOPE_REC_MEMCPY;
        r.u.memcpy.start_ns = s;
        r.u.memcpy.end_ns = s + d;
        r.u.memcpy.correlation_id = corr;
        r.u.memcpy.stream = 7;
        r.u.memcpy.bytes = 1u << 20;
        r.u.memcpy.copy_kind = STEPSCOPE_MEMCPY_HTOD;
      } else {
        r.kind = STEPSCOPE_REC_KERNEL;
        r.u.kernel.start_ns = s;
        r.u.kernel.end_ns = s + d;
        r.u.kernel.correlation_id = corr;
        r.u.kernel.stream = 7 + (uint64_t)lane;
        r.u.kernel.name = comm ? nccl : ids[(i * 5 + i / 7) % 12];
      }
      stepscope_write(w, &r);
      if (comm) {
        memset(&r, 0, sizeof r);
        r.kind = STEPSCOPE_REC_COLLECTIVE;
        r.u.collective.start_ns = s;
        r.u.collective.end_ns = s + d;
        r.u.collective.comm_id = 0x5eed0000d00dull;
        r.u.collective.seq = seq++;
        r.u.collective.bytes = 25u << 20;
        r.u.collective.count = (25u << 20) / 2;
        r.u.collective.stream = 8;
        r.u.collective.correlation_id = corr;
        r.u.collective.op = STEPSCOPE_COLL_ALLREDUCE;
        r.u.collective.datatype = STEPSCOPE_DT_BFLOAT16;
        r.u.collective.comm_size = (uint32_t)world;
        r.u.collective.comm_rank = (uint32_t)rank;
        r.u.collective.peer = -1;
        r.u.collective.name = s_dp;
        stepscope_write(w, &r);
      }
      corr++;
      dev[lane] = s + d;
      host = api_end + 500;
      if ((i + 1) % per_layer == 0 || i + 1 == n) { /* a layer range */
        memset(&r, 0, sizeof r);
        r.kind = STEPSCOPE_REC_RANGE;
        r.u.range.start_ns = layer_start;
        r.u.range.end_ns = host;
        r.u.range.thread = 4242;
        r.u.range.name = s_layer;
        r.u.range.domain = dom;
        r.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64;
        r.u.range.payload = (i / per_layer) % 48;
        stepscope_write(w, &r);
        layer_start = host;
      }
      if (i + 1 == n / 3 || i + 1 == n) { /* forward, then backward */
        memset(&r, 0, sizeof r);
        r.kind = STEPSCOPE_REC_RANGE;
        r.u.range.start_ns = phase_start;
        r.u.range.end_ns = host;
        r.u.range.thread = 4242;
        r.u.range.name = i + 1 == n ? s_bwd : s_fwd;
        r.u.range.domain = dom;
        stepscope_write(w, &r);
        phase_start = layer_start = host;
      }
      if (i % 1000 == 0) {
        memset(&r, 0, sizeof r);
        r.kind = STEPSCOPE_REC_COUNTER;
        r.u.counter.time_ns = host;
        r.u.counter.name = s_mem;
        r.u.counter.value = (double)((40ull << 30) + (i << 20));
        stepscope_write(w, &r);
      }
    }
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_RANGE;
    r.u.range.start_ns = step_start;
    r.u.range.end_ns = host;
    r.u.range.thread = 4242;
    r.u.range.name = s_step;
    r.u.range.domain = dom;
    r.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64;
    r.u.range.payload = step++;
    stepscope_write(w, &r);
    host += 20000;
  }
  return stepscope_writer_close(w, &err) ? -1 : 0;
}

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct result {
  double seconds, cpu; /* fastest wall time (with the final fsync), its CPU time */
  uint64_t bytes;
} result;

static int run_export(const ssa_analysis *a, const char *path, int perfetto, result *best) {
  best->seconds = 1e30;
  for (int rep = 0; rep < 3; rep++) {
    ssa_export_stats st;
    memset(&st, 0, sizeof st);
    stepscope_error err;
    memset(&err, 0, sizeof err);
    double t0 = now_s(), c0 = cpu_now();
    int rc =
        perfetto ? ssa_export_perfetto(a, path, &st, &err) : ssa_export_chrome(a, path, &st, &err);
    double t = now_s() - t0, c = cpu_now() - c0;
    if (rc) {
      fprintf(stderr, "export failed: %s\n", err.message);
      return -1;
    }
    if (t < best->seconds) best->seconds = t, best->cpu = c;
    best->bytes = st.bytes;
  }
  return 0;
}

static int measure(const char *run_path, const char *tmp) {
  ssa_run run;
  ssa_load_options lo = {.threads = 0, .progress = 0};
  stepscope_error err;
  memset(&err, 0, sizeof err);
  if (ssa_run_load(&run, run_path, &lo, &err)) {
    fprintf(stderr, "%s: %s\n", run_path, err.message);
    ssa_run_free(&run);
    return -1;
  }
  ssa_options opt;
  ssa_options_default(&opt);
  ssa_analysis a;
  if (ssa_analyze(&run, &opt, &a, &err)) {
    fprintf(stderr, "%s: %s\n", run_path, err.message);
    ssa_analysis_free(&a);
    ssa_run_free(&run);
    return -1;
  }
  uint64_t ops = 0, apis = 0, ranges = 0;
  for (size_t i = 0; i < run.nranks; i++) {
    ops += run.ranks[i].nops;
    apis += run.ranks[i].napis;
    ranges += run.ranks[i].nranges;
  }
  char jpath[4200], ppath[4200];
  snprintf(jpath, sizeof jpath, "%s/bench.json", tmp);
  snprintf(ppath, sizeof ppath, "%s/bench.pftrace", tmp);
  result j, p;
  int rc = run_export(&a, jpath, 0, &j) || run_export(&a, ppath, 1, &p);
  if (!rc) {
    double ratio = (double)j.bytes / (double)p.bytes;
    printf("run %s: %zu ranks, %llu ops, %llu API calls, %llu ranges\n", run_path, run.nranks,
           (unsigned long long)ops, (unsigned long long)apis, (unsigned long long)ranges);
    printf("  json     %10.1f MB in %6.3f s (%6.3f s CPU): %7.1f MB/s\n", (double)j.bytes / 1e6,
           j.seconds, j.cpu, (double)j.bytes / 1e6 / j.seconds);
    printf("  pftrace  %10.1f MB in %6.3f s (%6.3f s CPU): %7.1f MB/s of protobuf, %7.1f MB/s "
           "JSON-equivalent (%.1f per CPU second)\n",
           (double)p.bytes / 1e6, p.seconds, p.cpu, (double)p.bytes / 1e6 / p.seconds,
           (double)j.bytes / 1e6 / p.seconds, (double)j.bytes / 1e6 / p.cpu);
    printf("  size ratio json/pftrace %.2fx (goal >= 5x); bytes per op: json %.1f, pftrace %.1f\n",
           ratio, (double)j.bytes / (double)(ops ? ops : 1),
           (double)p.bytes / (double)(ops ? ops : 1));
  }
  unlink(jpath);
  unlink(ppath);
  ssa_analysis_free(&a);
  ssa_run_free(&run);
  return rc;
}

int main(int argc, char **argv) {
  int ranks = 8;
  uint64_t kernels = 500000;
  const char *keep = NULL;
  const char *runs[64];
  int nruns = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
      ranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--kernels") && i + 1 < argc)
      kernels = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--keep") && i + 1 < argc)
      keep = argv[++i];
    else if (argv[i][0] == '-') {
      fprintf(stderr, "usage: bench_export [--ranks R] [--kernels N] [--keep DIR] [RUN...]\n");
      return 2;
    } else if (nruns < 64)
      runs[nruns++] = argv[i];
  }
  if (ranks < 1 || ranks > 1024) {
    fprintf(stderr, "bench_export: --ranks must be 1..1024\n");
    return 2;
  }
  machine();
  char tmp[] = "/tmp/bench_export.XXXXXX";
  if (!mkdtemp(tmp)) {
    perror("mkdtemp");
    return 1;
  }
  int rc = 0;
  if (nruns == 0) {
    char gen[4200];
    snprintf(gen, sizeof gen, "%s", keep ? keep : tmp);
    if (keep) mkdir(keep, 0755);
    struct stat st;
    char first[4300];
    snprintf(first, sizeof first, "%s/rank-00000.trace.zst", gen);
    if (!keep || stat(first, &st) != 0) {
      double t0 = now_s();
      for (int r = 0; r < ranks && !rc; r++)
        rc = write_rank(gen, r, ranks, kernels);
      fprintf(stderr, "generated %d ranks x %llu kernels in %.1f s\n", ranks,
              (unsigned long long)kernels, now_s() - t0);
    }
    if (!rc) rc = measure(gen, tmp);
    if (!keep) {
      for (int r = 0; r < ranks; r++) {
        char p[4300];
        snprintf(p, sizeof p, "%s/rank-%05d.trace.zst", gen, r);
        unlink(p);
      }
    }
  }
  for (int i = 0; i < nruns && !rc; i++)
    rc = measure(runs[i], tmp);
  rmdir(tmp);
  return rc ? 1 : 0;
}
