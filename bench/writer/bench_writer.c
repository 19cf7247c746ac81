/*
 * bench_writer.c — how fast libstepscope writes, and how small, on a record
 * mix shaped like a real GPU training trace.
 *
 * The synthetic trace replays a GPT training step as CUPTI would see it:
 * per layer and micro-batch, forward and backward kernels (each with its
 * cudaLaunchKernel API record, its own grid/block/registers, durations with
 * a few percent of noise, increasing correlation ids), NVTX ranges per layer,
 * bucketed NCCL all-reduce collectives with their kernels on a second
 * stream, and the odd memcpy. Timestamps are CUPTI-like absolute ns.
 *
 * Reported (SPEC §6 goals: >= 20 M records/s per core, <= 8 bytes/kernel record):
 *   1. the writer alone (records generated beforehand, untimed): records per
 *      CPU second with compression in the appending thread, then in the
 *      tracer's setting (a background thread compresses): the appending
 *      thread's own cost, which is what a traced program pays, and the whole
 *      process's; compressed bytes per record of the mix; and the append
 *      path alone with its input in cache (the runs above read 120-byte
 *      input records from memory, a few ns each);
 *   2. bytes per kernel record in a kernels-only file of the same kernels;
 *   3. records/s with several threads generating and appending at once;
 * and the reader's rate on the file of part 1.
 *
 * usage: bench_writer [records (default 20000000)] [threads for part 3 (default cores)]
 *        STEPSCOPE_BENCH_ZSTD_LEVEL=N to try another zstd level
 *        STEPSCOPE_BENCH_ONLY=inline|background to run only that measurement of part 1
 *        (for profiling)
 *        STEPSCOPE_BENCH_KEEP=PATH to keep the file of the first measurement there
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "stepscope.h"

typedef struct kernel_shape {
  const char *name;
  uint32_t grid, block, regs, smem;
  uint64_t dur_ns;
} kernel_shape;

/* A transformer layer's kernels, forward then backward (H100-like durations). */
static const kernel_shape LAYER_FWD[] = {
    {"layernorm_forward_kernel3", 1024, 256, 32, 0, 9000},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 132, 384, 168, 232448, 61000},
    {"flash_fwd_kernel_hdim64", 768, 128, 255, 49152, 88000},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x64x64", 132, 256, 168, 147456, 22000},
    {"residual_forward_kernel", 2048, 256, 16, 0, 6000},
    {"layernorm_forward_kernel3", 1024, 256, 32, 0, 9000},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", 132, 384, 168, 232448, 80000},
    {"gelu_forward_kernel2", 4096, 256, 18, 0, 12000},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 132, 384, 168, 232448, 79000},
    {"residual_forward_kernel", 2048, 256, 16, 0, 6000},
};

typedef struct sim {
  stepscope_writer *w;
  uint32_t kernel_names[sizeof LAYER_FWD / sizeof LAYER_FWD[0]][2]; /* fwd, bwd */
  uint32_t launch_name, range_layer, range_domain, nccl_kernel, ring, simple, memcpy_api;
  uint64_t now, corr, seq, rng;
  int kernels_only;
  uint64_t records, kernels;
  stepscope_record *capture; /* when set, records are stored here instead of written */
  size_t capture_cap;
} sim;

static uint64_t rnd(sim *s) {
  s->rng ^= s->rng << 13;
  s->rng ^= s->rng >> 7;
  s->rng ^= s->rng << 17;
  return s->rng;
}

static uint64_t jitter(sim *s, uint64_t base) { /* +-3 % */
  uint64_t span = base / 16 + 1;
  return base - base / 32 + rnd(s) % span;
}

static void emit(sim *s, const stepscope_record *r) {
  if (s->capture) {
    if (s->records < s->capture_cap) s->capture[s->records] = *r;
  } else {
    stepscope_write(s->w, r);
  }
  s->records++;
}

/* Appends n pre-generated records `rounds` times: the writer's cost alone. */
static uint64_t replay(stepscope_writer *w, const stepscope_record *recs, size_t n, int rounds) {
  for (int k = 0; k < rounds; k++)
    for (size_t i = 0; i < n; i++)
      stepscope_write(w, &recs[i]);
  return (uint64_t)n * (uint64_t)rounds;
}

static void launch_kernel(sim *s, const kernel_shape *k, uint32_t name, uint64_t stream, int bwd) {
  stepscope_record r;
  uint64_t corr = ++s->corr;
  uint64_t api_start = s->now;
  uint64_t api_end = api_start + jitter(s, 4000);
  if (!s->kernels_only) {
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_API;
    r.u.api.start_ns = api_start;
    r.u.api.end_ns = api_end;
    r.u.api.correlation_id = corr;
    r.u.api.thread = 4711;
    r.u.api.name = s->launch_name;
    r.u.api.api_kind = STEPSCOPE_API_RUNTIME;
    r.u.api.callback_id = 211;
    emit(s, &r);
  }
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_KERNEL;
  r.u.kernel.start_ns = api_end + jitter(s, 2000);
  r.u.kernel.end_ns = r.u.kernel.start_ns + jitter(s, k->dur_ns * (bwd ? 2 : 1));
  r.u.kernel.correlation_id = corr;
  r.u.kernel.stream = stream;
  r.u.kernel.name = name;
  r.u.kernel.grid[0] = k->grid, r.u.kernel.grid[1] = 1, r.u.kernel.grid[2] = 1;
  r.u.kernel.block[0] = k->block, r.u.kernel.block[1] = 1, r.u.kernel.block[2] = 1;
  r.u.kernel.registers_per_thread = k->regs;
  r.u.kernel.dynamic_shared_bytes = k->smem;
  emit(s, &r);
  s->kernels++;
  s->now = api_end + 500;
}

static void layer(sim *s, int bwd, int layer_idx) {
  uint64_t start = s->now;
  size_t n = sizeof LAYER_FWD / sizeof LAYER_FWD[0];
  for (size_t i = 0; i < n; i++) {
    size_t k = bwd ? n - 1 - i : i;
    launch_kernel(s, &LAYER_FWD[k], s->kernel_names[k][bwd], 7, bwd);
  }
  if (!s->kernels_only) {
    stepscope_record r;
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_RANGE;
    r.u.range.start_ns = start;
    r.u.range.end_ns = s->now;
    r.u.range.thread = 4711;
    r.u.range.name = s->range_layer;
    r.u.range.domain = s->range_domain;
    r.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64;
    r.u.range.payload = (uint64_t)layer_idx;
    emit(s, &r);
  }
  if (bwd && layer_idx % 4 == 0) { /* a gradient bucket is ready: all-reduce it */
    static const kernel_shape nccl = {"", 32, 640, 96, 0, 150000};
    uint64_t corr_before = s->corr;
    launch_kernel(s, &nccl, s->nccl_kernel, 13, 0);
    if (!s->kernels_only) {
      stepscope_record r;
      memset(&r, 0, sizeof r);
      r.kind = STEPSCOPE_REC_COLLECTIVE;
      r.u.collective.start_ns = s->now - 400;
      r.u.collective.end_ns = s->now + 150000;
      r.u.collective.correlation_id = corr_before + 1;
      r.u.collective.comm_id = 0x5eed1234abcdull;
      r.u.collective.seq = s->seq++;
      r.u.collective.count = 25u << 20;
      r.u.collective.bytes = 50u << 20;
      r.u.collective.stream = 13;
      r.u.collective.op = STEPSCOPE_COLL_ALLREDUCE;
      r.u.collective.datatype = STEPSCOPE_DT_BFLOAT16;
      r.u.collective.peer = -1;
      r.u.collective.comm_size = 8;
      r.u.collective.comm_rank = 3;
      r.u.collective.algorithm = s->ring;
      r.u.collective.protocol = s->simple;
      r.u.collective.channels = 16;
      r.u.collective.flags = STEPSCOPE_COLL_F_GPU_TIMED;
      emit(s, &r);
    }
  }
}

static void sim_init(sim *s, stepscope_writer *w, int kernels_only) {
  memset(s, 0, sizeof *s);
  s->w = w;
  s->kernels_only = kernels_only;
  s->rng = 88172645463325252ull;
  s->now = 1732000000000000000ull;
  char buf[256];
  for (size_t i = 0; i < sizeof LAYER_FWD / sizeof LAYER_FWD[0]; i++) {
    s->kernel_names[i][0] = stepscope_intern(w, LAYER_FWD[i].name);
    snprintf(buf, sizeof buf, "%s_backward", LAYER_FWD[i].name);
    s->kernel_names[i][1] = stepscope_intern(w, buf);
  }
  s->launch_name = stepscope_intern(w, "cudaLaunchKernel");
  s->range_layer = stepscope_intern(w, "layer");
  s->range_domain = stepscope_intern(w, "trainer");
  s->nccl_kernel = stepscope_intern(w, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  s->ring = stepscope_intern(w, "RING");
  s->simple = stepscope_intern(w, "SIMPLE");
}

/* Runs steps until at least `target` records were written. */
static void sim_run(sim *s, uint64_t target, uint64_t target_kernels) {
  while (s->records < target && s->kernels < target_kernels) {
    for (int mb = 0; mb < 4; mb++) {
      for (int l = 0; l < 24; l++)
        layer(s, 0, l);
      for (int l = 23; l >= 0; l--)
        layer(s, 1, l);
    }
    s->now += 2000000; /* optimizer, data loading */
  }
}

static double now_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long minor_faults(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : 0;
}

static uint64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static stepscope_writer *open_writer(const char *path, int background) {
  stepscope_header h = {.rank = 0,
                        .world_size = 1,
                        .hostname = "bench",
                        .device_name = "bench",
                        .clock_domain = STEPSCOPE_CLOCK_CUPTI};
  const char *level = getenv("STEPSCOPE_BENCH_ZSTD_LEVEL"); /* default: the writer's (-5) */
  stepscope_writer_options opt = {.background_flush = background,
                                  .compression_level = level ? atoi(level) : 0};
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, &opt, &err);
  if (!w) {
    fprintf(stderr, "bench_writer: %s\n", err.message);
    exit(1);
  }
  return w;
}

typedef struct thread_arg {
  stepscope_writer *w;
  uint64_t records;
  int id;
} thread_arg;

static void *thread_main(void *p) {
  thread_arg *a = p;
  sim s;
  sim_init(&s, a->w, 0);
  s.rng += (uint64_t)a->id * 7919;
  sim_run(&s, a->records, UINT64_MAX);
  a->records = s.records;
  return NULL;
}

static void print_machine(void) {
  struct utsname u;
  uname(&u);
  char model[256] = "unknown";
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    if (!strncmp(line, "model name", 10)) {
      char *c = strchr(line, ':');
      if (c) {
        snprintf(model, sizeof model, "%s", c + 2);
        model[strcspn(model, "\n")] = '\0';
      }
      break;
    }
  }
  if (f) fclose(f);
  printf("machine: %s %s %s, CPU: %s, %ld cores online\n", u.sysname, u.release, u.machine, model,
         sysconf(_SC_NPROCESSORS_ONLN));
}

int main(int argc, char **argv) {
  uint64_t records = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000ull;
  long threads = argc > 2 ? atol(argv[2]) : sysconf(_SC_NPROCESSORS_ONLN);
  if (threads < 1) threads = 1;
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char path[512];
  snprintf(path, sizeof path, "%s/bench_writer_%ld.trace.zst", dir, (long)getpid());
  print_machine();
  printf("libstepscope %s, trace format %d.%d, zstd level %s, 4 MiB frames\n\n",
         STEPSCOPE_VERSION_STRING, STEPSCOPE_FORMAT_MAJOR, STEPSCOPE_FORMAT_MINOR,
         getenv("STEPSCOPE_BENCH_ZSTD_LEVEL") ? getenv("STEPSCOPE_BENCH_ZSTD_LEVEL")
                                              : "-5 (default)");

  /* 1: the writer alone, one thread: records are generated first (untimed),
   * then appended, in the writer's two configurations. */
  size_t ncap = records < 4000000 ? (size_t)records : 4000000;
  int rounds = (int)((records + ncap - 1) / ncap);
  stepscope_record *recs = malloc(ncap * sizeof *recs);
  if (!recs) {
    fprintf(stderr, "bench_writer: out of memory\n");
    return 1;
  }
  stepscope_writer *w = open_writer(path, 0);
  sim s;
  sim_init(&s, w, 0); /* interns the names in this writer; ids are equal in every writer */
  s.capture = recs;
  s.capture_cap = ncap;
  sim_run(&s, ncap, UINT64_MAX);
  uint64_t kernels_in_mix = s.kernels;
  const char *only = getenv("STEPSCOPE_BENCH_ONLY");
  int skip_inline = only && !strcmp(only, "background");
  double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID), t0 = now_s(CLOCK_MONOTONIC);
  uint64_t n = skip_inline ? 1 : replay(w, recs, ncap, rounds);
  stepscope_writer_close(w, NULL);
  double cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0, wall = now_s(CLOCK_MONOTONIC) - t0;
  uint64_t bytes = file_size(path);
  printf("writer alone, 1 thread, realistic mix (kernel %.0f%%, api, range, collective), "
         "%llu records:\n",
         100.0 * (double)kernels_in_mix / (double)ncap, (unsigned long long)n);
  printf("  compression in the appending thread: %.1f M records/s per CPU second "
         "(%.0f ns/record; %.1f M/s wall)\n",
         (double)n / cpu / 1e6, cpu / (double)n * 1e9, (double)n / wall / 1e6);
  printf("  size: %.2f bytes/record\n", (double)bytes / (double)n);
  if (only && !strcmp(only, "inline")) { /* for profiling this part alone */
    unlink(path);
    free(recs);
    return 0;
  }
  /* the reader on the same file: decompression, validation, decoding */
  stepscope_error rerr;
  stepscope_reader *rd = stepscope_reader_open(path, &rerr);
  if (rd) {
    stepscope_record rec;
    uint64_t nread = 0, sink = 0;
    c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    while (stepscope_reader_next(rd, &rec, &rerr) == 1) {
      nread++;
      sink += rec.kind;
    }
    cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    stepscope_reader_close(rd);
    printf(
        "reader on that file: %.1f M records/s per CPU second (%.0f ns/record, %llu records%s)\n",
        (double)nread / cpu / 1e6, cpu / (double)nread * 1e9, (unsigned long long)nread,
        sink ? "" : "?");
  }
  const char *keep = getenv("STEPSCOPE_BENCH_KEEP"); /* to study the mix: zstd -dc, zstd -b */
  if (!keep || rename(path, keep) != 0) unlink(path);

  w = open_writer(path, 1);
  sim_init(&s, w, 0);
  long faults0 = minor_faults();
  c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
  double tc0 = now_s(CLOCK_THREAD_CPUTIME_ID);
  n = replay(w, recs, ncap, rounds);
  double tcpu = now_s(CLOCK_THREAD_CPUTIME_ID) - tc0;
  stepscope_writer_close(w, NULL);
  cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  printf("  compression on the background thread (the tracer's setting):\n");
  printf("    appending thread: %.1f M records/s per CPU second (%.0f ns/record: what the "
         "traced program pays)\n",
         (double)n / tcpu / 1e6, tcpu / (double)n * 1e9);
  printf("    whole process: %.1f M records/s per CPU second (%ld page faults)\n",
         (double)n / cpu / 1e6, minor_faults() - faults0);
  unlink(path);

  /* the append path alone, its input in cache: the first 16384 records of
   * the mix appended over and over (the background thread compresses; only
   * the appending thread's CPU time counts, best of the repetitions) */
  w = open_writer(path, 1);
  size_t hot = ncap < 16384 ? ncap : 16384;
  double best = 1e30;
  for (uint64_t done = 0; done < n; done += hot) {
    tc0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    replay(w, recs, hot, 1);
    double t = now_s(CLOCK_THREAD_CPUTIME_ID) - tc0;
    if (t < best) best = t;
  }
  stepscope_writer_close(w, NULL);
  unlink(path);
  printf(
      "    appending thread, input records in cache: %.1f ns/record (best of %llu runs of %zu)\n",
      best / (double)hot * 1e9, (unsigned long long)(n / hot), hot);
  free(recs);
  if (skip_inline) return 0;

  /* 2: size of kernel records alone */
  w = open_writer(path, 0);
  sim_init(&s, w, 1);
  uint64_t kernel_target = records / 2;
  sim_run(&s, UINT64_MAX, kernel_target);
  stepscope_writer_close(w, NULL);
  bytes = file_size(path);
  printf("kernel records only: %llu kernels, %.2f bytes/kernel record (goal <= 8)\n",
         (unsigned long long)s.kernels, (double)bytes / (double)s.kernels);
  unlink(path);

  /* 3: several threads appending to one writer, background flush on */
  w = open_writer(path, 1);
  thread_arg *args = calloc((size_t)threads, sizeof *args);
  pthread_t *tids = calloc((size_t)threads, sizeof *tids);
  t0 = now_s(CLOCK_MONOTONIC);
  c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
  for (long t = 0; t < threads; t++) {
    args[t] = (thread_arg){w, records / (uint64_t)threads, (int)t};
    pthread_create(&tids[t], NULL, thread_main, &args[t]);
  }
  uint64_t total = 0;
  for (long t = 0; t < threads; t++) {
    pthread_join(tids[t], NULL);
    total += args[t].records;
  }
  stepscope_writer_close(w, NULL);
  wall = now_s(CLOCK_MONOTONIC) - t0;
  cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  printf("%ld threads generating and appending (background compression): %llu records\n", threads,
         (unsigned long long)total);
  printf("  rate: %.1f M records/s wall, %.1f M records/s per CPU second\n",
         (double)total / wall / 1e6, (double)total / cpu / 1e6);
  unlink(path);
  free(args);
  free(tids);
  return 0;
}
