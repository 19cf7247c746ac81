/*
 * bench_cpu_peaks.c — measures this machine's CPU ceilings for `stepscope ops --peak` (issue
 * 33 §1: a CPU trace's roofline needs a peak that was measured, never guessed;
 * docs/ops.md "CPU ceilings").
 *
 *   fp32 FLOP/s  independent chains of fused multiply-adds (2 FLOPs each) on registers, with
 *                the widest vector instructions the CPU runs (AVX-512F, AVX2 + FMA on x86-64,
 *                checked at run time), and portable C vectors as the build's own flags
 *                compile them (what the trainer's CPU kernels reach without
 *                STEPSCOPE_KERNELS_NATIVE); the peak is the best of them
 *   bytes/s      a STREAM-style copy (b[i] = a[i]) over two arrays far larger than the
 *                caches, counting the bytes read and written (STREAM's convention)
 *
 * each on one thread (the ceiling of one stepscope-train rank: its compute runs on one CPU
 * stream) and on every CPU online (a PyTorch CPU trace's intra-op threads), best of --reps
 * runs of --seconds each. A rate is given per second of wall time and per second of each
 * thread's own CPU time (CLOCK_THREAD_CPUTIME_ID, summed over the threads): on a machine
 * shared with other work the threads do not run all the time, the wall rate drops and the
 * CPU-time rate stays the hardware's; the --peak specs printed use the CPU-time rates.
 *
 * usage: bench_cpu_peaks [--seconds S] [--reps N] [--mib M] [--threads N]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define CHAINS 12 /* independent FMA chains: more than latency x FMA units */

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One FMA kernel: runs `iters` rounds of CHAINS vector FMAs; returns the FLOPs done and a
 * value that depends on every chain (so none is optimised away). */
typedef double (*fma_kernel)(long iters, float *sink);

typedef float v8 __attribute__((vector_size(32)));

/* Portable: a*b+c on 8-wide C vectors, as the build's flags compile them (without
 * -ffp-contract, a multiply and an add: still 2 FLOPs each). */
static double fma_portable(long iters, float *sink) {
  v8 acc[CHAINS];
  v8 a = {0.999f, 0.999f, 0.999f, 0.999f, 0.999f, 0.999f, 0.999f, 0.999f};
  v8 b = {1e-3f, 1e-3f, 1e-3f, 1e-3f, 1e-3f, 1e-3f, 1e-3f, 1e-3f};
  for (int k = 0; k < CHAINS; k++)
    acc[k] = b * (float)k;
  for (long i = 0; i < iters; i++)
    for (int k = 0; k < CHAINS; k++)
      acc[k] = acc[k] * a + b;
  float s = 0;
  for (int k = 0; k < CHAINS; k++)
    for (int l = 0; l < 8; l++)
      s += acc[k][l];
  *sink = s;
  return 2.0 * 8 * CHAINS * (double)iters;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static double fma_avx2(long iters, float *sink) {
  __m256 acc[CHAINS];
  __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  for (int k = 0; k < CHAINS; k++)
    acc[k] = _mm256_set1_ps((float)k * 1e-3f);
  for (long i = 0; i < iters; i++)
    for (int k = 0; k < CHAINS; k++)
      acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  float out[8], s = 0;
  for (int k = 0; k < CHAINS; k++) {
    _mm256_storeu_ps(out, acc[k]);
    for (int l = 0; l < 8; l++)
      s += out[l];
  }
  *sink = s;
  return 2.0 * 8 * CHAINS * (double)iters;
}

__attribute__((target("avx512f"))) static double fma_avx512(long iters, float *sink) {
  __m512 acc[CHAINS];
  __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (int k = 0; k < CHAINS; k++)
    acc[k] = _mm512_set1_ps((float)k * 1e-3f);
  for (long i = 0; i < iters; i++)
    for (int k = 0; k < CHAINS; k++)
      acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  float s = 0;
  for (int k = 0; k < CHAINS; k++)
    s += _mm512_reduce_add_ps(acc[k]);
  *sink = s;
  return 2.0 * 16 * CHAINS * (double)iters;
}
#endif

typedef struct job {
  fma_kernel fma; /* NULL: the copy */
  long iters;
  float *a, *b;
  size_t n;
  double work;  /* FLOPs or bytes done */
  double cpu_s; /* the thread's CPU time doing it */
  float sink;
} job;

static void *run_job(void *arg) {
  job *j = arg;
  double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
  if (j->fma) {
    j->work = j->fma(j->iters, &j->sink);
  } else {
    for (long r = 0; r < j->iters; r++) {
      for (size_t i = 0; i < j->n; i++)
        j->b[i] = j->a[i];
      j->a[r % j->n] += j->b[(r + 1) % j->n]; /* a dependency between passes */
    }
    j->work = 2.0 * sizeof(float) * (double)j->n * (double)j->iters;
  }
  j->cpu_s = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
  return NULL;
}

/* The rate of `threads` jobs like `proto` run at once: work / wall time, and (*per_cpu) the
 * sum over the threads of work / CPU time. */
static double rate(const job *proto, int threads, job *jobs, pthread_t *tids, double *per_cpu) {
  double t0 = clock_s(CLOCK_MONOTONIC);
  for (int k = 0; k < threads; k++) {
    jobs[k].fma = proto->fma;
    jobs[k].iters = proto->iters;
    if (k && pthread_create(&tids[k], NULL, run_job, &jobs[k])) return 0;
  }
  run_job(&jobs[0]);
  for (int k = 1; k < threads; k++)
    pthread_join(tids[k], NULL);
  double dt = clock_s(CLOCK_MONOTONIC) - t0, work = 0;
  *per_cpu = 0;
  for (int k = 0; k < threads; k++) {
    work += jobs[k].work;
    *per_cpu += jobs[k].cpu_s > 0 ? jobs[k].work / jobs[k].cpu_s : 0;
  }
  return dt > 0 ? work / dt : 0;
}

/* The best rates (wall, *per_cpu) of `reps` runs of about `seconds` each (iterations sized
 * by a short run). */
static double best_rate(job proto, int threads, int reps, double seconds, job *jobs,
                        pthread_t *tids, double *per_cpu) {
  proto.iters = proto.fma ? 1000 : 1;
  double c;
  rate(&proto, 1, jobs, tids, &c);
  double per_iter = jobs[0].work / (double)proto.iters;
  if (c > 0 && per_iter > 0) proto.iters = (long)(seconds * c / per_iter) + 1;
  double best = 0;
  *per_cpu = 0;
  for (int i = 0; i < reps; i++) {
    double x = rate(&proto, threads, jobs, tids, &c);
    if (x > best) best = x;
    if (c > *per_cpu) *per_cpu = c;
  }
  return best;
}

int main(int argc, char **argv) {
  double seconds = 0.5;
  int reps = 5, all = (int)sysconf(_SC_NPROCESSORS_ONLN);
  size_t mib = 256;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
      seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
      mib = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      all = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_cpu_peaks [--seconds S] [--reps N] [--mib M] [--threads N]\n");
      return 2;
    }
  }
  if (all < 1) all = 1;
  if (reps < 1) reps = 1;
  job *jobs = calloc((size_t)all, sizeof *jobs);
  pthread_t *tids = calloc((size_t)all, sizeof *tids);
  if (!jobs || !tids) return 1;

  struct {
    const char *name;
    fma_kernel fn;
    int supported;
  } kernels[] = {
    {"portable C vectors (the build's flags)", fma_portable, 1},
#if defined(__x86_64__)
    {"AVX2 + FMA", fma_avx2, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")},
    {"AVX-512F", fma_avx512, __builtin_cpu_supports("avx512f")},
#endif
  };
  int threads[2] = {1, all};
  double flops[2] = {0, 0}, bw[2] = {0, 0};
  printf("CPUs online: %d; best of %d runs of %.2f s each\n", all, reps, seconds);
  for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
    if (!kernels[k].supported) {
      printf("fp32 FMA, %-40s not supported by this CPU\n", kernels[k].name);
      continue;
    }
    for (int t = 0; t < 2; t++) {
      if (t && all == 1) break;
      job proto = {.fma = kernels[k].fn};
      double c, r = best_rate(proto, threads[t], reps, seconds, jobs, tids, &c);
      printf("fp32 FMA, %-40s %2d thread(s): %8.1f GFLOP/s wall, %8.1f per CPU second\n",
             kernels[k].name, threads[t], r / 1e9, c / 1e9);
      if (c > flops[t]) flops[t] = c;
    }
  }
  size_t n = mib * 1024 * 1024 / 2 / sizeof(float) / (size_t)all; /* two arrays per thread */
  for (int k = 0; k < all; k++) {
    jobs[k].n = n;
    jobs[k].a = malloc(n * sizeof(float));
    jobs[k].b = malloc(n * sizeof(float));
    if (!jobs[k].a || !jobs[k].b) return 1;
    for (size_t i = 0; i < n; i++)
      jobs[k].a[i] = (float)i, jobs[k].b[i] = 0;
  }
  for (int t = 0; t < 2; t++) {
    if (t && all == 1) break;
    job proto = {.fma = NULL, .n = n};
    for (int k = 0; k < threads[t]; k++)
      jobs[k].n = n;
    double r = best_rate(proto, threads[t], reps, seconds, jobs, tids, &bw[t]);
    printf("copy (read + write), %4zu MiB per thread,       %2d thread(s): %8.1f GB/s wall, "
           "%8.1f per CPU second\n",
           2 * n * sizeof(float) >> 20, threads[t], r / 1e9, bw[t] / 1e9);
  }
  for (int t = 0; t < 2; t++) {
    if (t && all == 1) break;
    printf("--peak fp32=%.1fG,bw=%.1fG   (%s)\n", flops[t] / 1e9, bw[t] / 1e9,
           t ? "every CPU: a multi-threaded PyTorch CPU trace"
             : "one thread: a stepscope-train rank, whose compute runs on one CPU stream");
  }
  for (int k = 0; k < all; k++) {
    free(jobs[k].a);
    free(jobs[k].b);
  }
  free(jobs);
  free(tids);
  return 0;
}
