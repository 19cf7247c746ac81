/*
 * bench_analyzer.c — analyzer throughput (SPEC §6): load + full analysis in
 * events/s on one core and on all cores, peak memory per event, and export
 * MB/s, on generated runs of R ranks and N events in total.
 *
 * usage: bench_analyzer [--ranks R --events N]... [--keep DIR [--reuse]]
 *                       [--export-max N]
 *   --export-max N: skip the export measurement for runs over N events
 *   (an export of 1e8 events is ~28 GB of JSON).
 *   default: the grid 1/8/64 ranks x 1e5/1e6 events; bigger runs (up to
 *   1024 ranks, 1e8 events) are opt-in by arguments, e.g.
 *   bench_analyzer --ranks 1024 --events 100000000
 *
 * Each rank file is streamed by libstepscope's writer: steps of kernels on
 * two streams, each with its launch call, and a world all-reduce per step,
 * so events = kernels + launch calls + collectives + ranges. Every
 * measurement runs in a forked child so that getrusage(RUSAGE_CHILDREN)
 * max RSS is the peak of that measurement alone.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
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

/* CPU time (user + system) of this process, all threads. */
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

typedef struct gen_task {
  const char *dir;
  int rank, world;
  uint64_t events;
  int rc;
} gen_task;

/* ~4 events per kernel pair step unit: kernel + launch. */
static void *gen_rank(void *arg) {
  gen_task *t = arg;
  char path[4096];
  snprintf(path, sizeof path, "%s/rank-%05d.trace.zst", t->dir, t->rank);
  stepscope_header h;
  memset(&h, 0, sizeof h);
  h.rank = t->rank;
  h.world_size = t->world;
  h.clock_domain = STEPSCOPE_CLOCK_MONOTONIC;
  h.hostname = "bench";
  h.device_name = "bench GPU";
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, NULL, &err);
  if (!w) {
    t->rc = -1;
    return NULL;
  }
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_CLOCK_ANCHOR;
  r.u.clock_anchor.trace_ns = 1000;
  r.u.clock_anchor.realtime_ns = 1700000000000000000ull + (uint64_t)t->rank * 1000;
  stepscope_write(w, &r);
  const char *names[4] = {"gemm_fwd", "gemm_bwd", "layernorm", "softmax"};
  uint32_t ids[4];
  for (int i = 0; i < 4; i++)
    ids[i] = stepscope_intern(w, names[i]);
  uint32_t nccl = stepscope_intern(w, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  uint32_t launch = stepscope_intern(w, "cudaLaunchKernel");
  uint32_t step_s = stepscope_intern(w, "step"), dom = stepscope_intern(w, "stepscope");
  uint64_t per_step = 2000; /* kernels per step */
  uint64_t kernels = t->events / 2;
  uint64_t host = 10000, dev[2] = {20000, 20000}, corr = 1, step = 0;
  uint64_t k = 0;
  while (k < kernels) {
    uint64_t step_start = host;
    uint64_t n = kernels - k < per_step ? kernels - k : per_step;
    for (uint64_t i = 0; i < n; i++, k++) {
      int lane = (i % 8) == 7;
      memset(&r, 0, sizeof r);
      r.kind = STEPSCOPE_REC_API;
      r.u.api.start_ns = host;
      r.u.api.end_ns = host + 3000;
      r.u.api.correlation_id = corr;
      r.u.api.thread = 1;
      r.u.api.name = launch;
      r.u.api.api_kind = STEPSCOPE_API_RUNTIME;
      stepscope_write(w, &r);
      host += 4000;
      uint64_t s = dev[lane] > host ? dev[lane] + 1000 : host + 2000;
      uint64_t d = 2000 + (i * 7919) % 4000; /* 2-6 us: the device keeps pace with the host */
      memset(&r, 0, sizeof r);
      r.kind = STEPSCOPE_REC_KERNEL;
      r.u.kernel.start_ns = s;
      r.u.kernel.end_ns = s + d;
      r.u.kernel.correlation_id = corr++;
      r.u.kernel.stream = 7 + (uint64_t)lane;
      r.u.kernel.name = lane && i % 64 == 7 ? nccl : ids[i % 4];
      stepscope_write(w, &r);
      dev[lane] = s + d;
    }
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_COLLECTIVE;
    r.u.collective.start_ns = dev[1];
    r.u.collective.end_ns = dev[1] + 50000;
    r.u.collective.comm_id = 42;
    r.u.collective.seq = step;
    r.u.collective.bytes = 64u << 20;
    r.u.collective.op = STEPSCOPE_COLL_ALLREDUCE;
    r.u.collective.comm_size = (uint32_t)t->world;
    r.u.collective.comm_rank = (uint32_t)t->rank;
    r.u.collective.peer = -1;
    stepscope_write(w, &r);
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_RANGE;
    r.u.range.start_ns = step_start;
    r.u.range.end_ns = host;
    r.u.range.thread = 1;
    r.u.range.name = step_s;
    r.u.range.domain = dom;
    r.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64;
    r.u.range.payload = step++;
    stepscope_write(w, &r);
    host += 5000;
  }
  t->rc = stepscope_writer_close(w, &err);
  return NULL;
}

static int generate(const char *dir, int ranks, uint64_t events) {
  mkdir(dir, 0755);
  gen_task *t = calloc((size_t)ranks, sizeof *t);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  for (int base = 0; base < ranks; base += (int)cores) {
    pthread_t th[256];
    int n = 0;
    for (int r = base; r < ranks && n < cores && n < 256; r++, n++) {
      t[r] = (gen_task){dir, r, ranks, events / (uint64_t)ranks, 0};
      pthread_create(&th[n], NULL, gen_rank, &t[r]);
    }
    for (int i = 0; i < n; i++)
      pthread_join(th[i], NULL);
  }
  int rc = 0;
  for (int r = 0; r < ranks; r++)
    rc |= t[r].rc;
  free(t);
  return rc;
}

/* Peak RSS (KB) of a forked child that exits at once: the process's own
 * fixed footprint, which small runs would otherwise count per event. */
static double baseline_kb(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status;
  struct rusage ru;
  wait4(pid, &status, 0, &ru);
  return (double)ru.ru_maxrss;
}

/* Runs in a child: load + analyze (+ export); prints one result line. */
static void measure(const char *dir, int threads, int do_export, int ranks, uint64_t events) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    double t0 = now_s(), c0 = cpu_s();
    ssa_run run;
    ssa_load_options lo = {.threads = threads, .progress = 0};
    stepscope_error err;
    if (ssa_run_load(&run, dir, &lo, &err)) {
      fprintf(stderr, "%s\n", err.message);
      _exit(1);
    }
    double c_load = cpu_s() - c0;
    ssa_analysis a;
    ssa_options opt;
    ssa_options_default(&opt);
    opt.threads = threads;
    opt.path_sums_only = !do_export; /* as `stepscope analyze`: the export draws the segments */
    if (ssa_analyze(&run, &opt, &a, &err)) {
      fprintf(stderr, "%s\n", err.message);
      _exit(1);
    }
    double t1 = now_s();
    double cpu = cpu_s() - c0;
    if (getenv("BENCH_SPLIT"))
      fprintf(stderr, "  [CPU: load %.3f s, analyze %.3f s]\n", c_load, cpu - c_load);
    uint64_t rec = 0;
    for (size_t i = 0; i < run.nranks; i++)
      rec += run.ranks[i].records;
    if (do_export) {
      char path[4200];
      snprintf(path, sizeof path, "%s/export.json", dir);
      ssa_export_stats st;
      double e0 = now_s();
      ssa_export_chrome(&a, path, &st, &err);
      double e1 = now_s();
      unlink(path);
      printf("%6d ranks %11llu events  export: %8.1f MB in %6.2f s = %7.1f MB/s\n", ranks,
             (unsigned long long)rec, (double)st.bytes / 1e6, e1 - e0,
             (double)st.bytes / 1e6 / (e1 - e0));
    } else {
      printf("%6d ranks %11llu events  threads %2d: load+analyze wall %7.3f s = %7.2f M events/s,"
             " CPU %7.3f s = %7.2f M events/s per core",
             ranks, (unsigned long long)rec, threads, t1 - t0, (double)rec / (t1 - t0) / 1e6, cpu,
             (double)rec / cpu / 1e6);
    }
    fflush(stdout);
    _exit(0);
  }
  int status;
  struct rusage ru;
  wait4(pid, &status, 0, &ru);
  if (!do_export) {
    double base = baseline_kb();
    printf("  peak RSS %.1f MB = %.1f bytes/event (%.1f above the %.1f MB of a child that loads "
           "nothing)\n",
           (double)ru.ru_maxrss / 1024.0, (double)ru.ru_maxrss * 1024.0 / (double)events,
           ((double)ru.ru_maxrss - base) * 1024.0 / (double)events, base / 1024.0);
  }
}

static void machine(void) {
  struct utsname u;
  uname(&u);
  char model[256] = "?";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "model name", 10)) {
        char *c = strchr(line, ':');
        if (c) snprintf(model, sizeof model, "%s", c + 2);
        model[strcspn(model, "\n")] = 0;
        break;
      }
    fclose(f);
  }
  printf("machine: %s %s %s, CPU %s, %ld cores\n", u.sysname, u.release, u.machine, model,
         sysconf(_SC_NPROCESSORS_ONLN));
}

int main(int argc, char **argv) {
  int ranks[32], n = 0;
  uint64_t events[32];
  const char *keep = NULL;
  int reuse = 0;
  uint64_t export_max = UINT64_MAX;
  for (int i = 1; i < argc; i += 2) {
    if (!strcmp(argv[i], "--reuse")) {
      reuse = 1;
      i--;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "usage: bench_analyzer [--ranks R --events N]... [--keep DIR [--reuse]] "
                      "[--export-max N]\n");
      return 2;
    }
    if (!strcmp(argv[i], "--ranks") && n < 32)
      ranks[n] = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--events") && n < 32)
      events[n++] = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--keep"))
      keep = argv[i + 1];
    else if (!strcmp(argv[i], "--export-max"))
      export_max = strtoull(argv[i + 1], NULL, 10);
    else {
      fprintf(stderr, "usage: bench_analyzer [--ranks R --events N]... [--keep DIR [--reuse]] "
                      "[--export-max N]\n");
      return 2;
    }
  }
  if (n == 0) {
    int r[] = {1, 8, 64, 1, 8, 64};
    uint64_t e[] = {100000, 100000, 100000, 1000000, 1000000, 1000000};
    for (; n < 6; n++) {
      ranks[n] = r[n];
      events[n] = e[n];
    }
  }
  machine();
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  for (int i = 0; i < n; i++) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/bench-analyzer-%d-%llu", keep ? keep : "/tmp", ranks[i],
             (unsigned long long)events[i]);
    double g0 = now_s();
    struct stat st;
    if (keep && reuse && stat(dir, &st) == 0) {
      printf("reusing %s\n", dir);
    } else {
      if (generate(dir, ranks[i], events[i])) {
        fprintf(stderr, "generation failed\n");
        return 1;
      }
      printf("generated %d ranks, %llu events in %.2f s\n", ranks[i], (unsigned long long)events[i],
             now_s() - g0);
    }
    fflush(stdout);
    measure(dir, 1, 0, ranks[i], events[i]);
    if (cores > 1) measure(dir, (int)cores, 0, ranks[i], events[i]);
    if (events[i] <= export_max) measure(dir, (int)cores, 1, ranks[i], events[i]);
    if (!keep) {
      char cmd[600];
      snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
      if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
  }
  return 0;
}
