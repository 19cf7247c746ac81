/*
 * test_cpu_side.c — the parts of the CUDA backend that need no GPU, run on every
 * machine: the peak-FLOPs table, the launcher-environment detection, the file and
 * TCP rendezvous stores (with forked "ranks"), and the NCCL policy checks (several
 * ranks per GPU, group keys), and the row-major to column-major GEMM translation
 * (kernels/cuda/gemm_plan.h) that every cuBLASLt call goes through, checked with a
 * naive column-major GEMM that follows cuBLAS's definition, and when the bf16 weight
 * copies go stale (trainer/cuda/weight_watch.h), the context-parallel ring's NCCL links
 * (trainer/cuda/ring_links.h: pairing, and a simulation of their blocking creation that
 * must not deadlock), and which kernels the attention blocks of ring attention choose,
 * and the NCCL all-to-all's plan of sends and receives (trainer/cuda/alltoallv_plan.h),
 * simulated against the result comm.h defines, with the MoE operations the trainer needs
 * present in the CUDA device table.
 *
 * Usage: test_gpu_cpu_side peak|env|file_store|tcp_store|nccl_policy|gemm_plan|weight_watch|
 *                          fused_shapes|ring_links|block_paths|alltoallv_plan
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alltoallv_plan.h"
#include "comm_nccl.h"
#include "cpu_kernels.h"
#include "cuda_kernels.h"
#include "gemm_plan.h"
#include "device_cuda.h"
#include "memory_model.h"
#include "rendezvous.h"
#include "ring_links.h"
#include "weight_watch.h"

static int failures;

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static int test_peak(void) {
  struct {
    const char *name;
    double tflops;
  } cases[] = {
      {"NVIDIA H100 80GB HBM3", 989}, {"NVIDIA H100 PCIe", 756},
      {"NVIDIA H100 NVL", 835},       {"NVIDIA H200", 989},
      {"NVIDIA A100-SXM4-80GB", 312}, {"NVIDIA A10G", 70},
      {"NVIDIA L40S", 362},           {"NVIDIA L4", 121},
      {"NVIDIA GH200 480GB", 989},    {"nvidia h100 80gb hbm3", 989},
      {"Some Future GPU", 0},         {"", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double got = dev_cuda_peak_flops_bf16(cases[i].name);
    EXPECT(fabs(got - cases[i].tflops * 1e12) < 1, "%s: %g, expected %g TFLOP/s", cases[i].name,
           got / 1e12, cases[i].tflops);
  }
  EXPECT(!strcmp(dev_cuda_peak_table_match("NVIDIA H100 PCIe"), "H100 PCIe"), "match row");
  EXPECT(dev_cuda_peak_flops_bf16(NULL) == 0, "NULL name");
  return 0;
}

static void clear_launcher_env(void) {
  const char *names[] = {"RANK",
                         "WORLD_SIZE",
                         "LOCAL_RANK",
                         "LOCAL_WORLD_SIZE",
                         "SLURM_PROCID",
                         "SLURM_NTASKS",
                         "SLURM_LOCALID",
                         "SLURM_NTASKS_PER_NODE",
                         "OMPI_COMM_WORLD_RANK",
                         "OMPI_COMM_WORLD_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_RANK",
                         "OMPI_COMM_WORLD_LOCAL_SIZE",
                         "PMI_RANK",
                         "PMI_SIZE",
                         "MASTER_ADDR",
                         "MASTER_PORT",
                         "STEPSCOPE_RDZV"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    unsetenv(names[i]);
}

static int test_env(void) {
  rdzv_env e;
  clear_launcher_env();
  EXPECT(rdzv_env_detect(&e) == -1 && !strcmp(e.source, "none") && e.world == 1, "no launcher");
  EXPECT(!strcmp(e.master_addr, "127.0.0.1") && e.master_port == 29500, "defaults");
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "node7", 1);
  setenv("MASTER_PORT", "1234", 1);
  EXPECT(rdzv_env_detect(&e) == 0 && !strcmp(e.source, "torchrun") && e.local_world_known,
         "torchrun: %s", e.source);
  EXPECT(e.rank == 3 && e.world == 8 && e.local_rank == 1 && e.local_world == 2, "torchrun ids");
  EXPECT(!strcmp(e.master_addr, "node7") && e.master_port == 1234, "master");
  clear_launcher_env();
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "16", 1);
  setenv("SLURM_LOCALID", "1", 1);
  EXPECT(rdzv_env_detect(&e) == 0 && !strcmp(e.source, "slurm") && e.rank == 5 && e.world == 16 &&
             e.local_rank == 1 && !e.local_world_known,
         "slurm: %s %d %d %d %d", e.source, e.rank, e.world, e.local_rank, e.local_world_known);
  setenv("SLURM_NTASKS_PER_NODE", "4(x4)", 1); /* not a plain number: still unknown */
  EXPECT(rdzv_env_detect(&e) == 0 && !e.local_world_known, "slurm per-node list");
  setenv("SLURM_NTASKS_PER_NODE", "4", 1);
  EXPECT(rdzv_env_detect(&e) == 0 && e.local_world_known && e.local_world == 4, "slurm 4/node");
  clear_launcher_env();
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  EXPECT(rdzv_env_detect(&e) == 0 && !strcmp(e.source, "openmpi") && e.rank == 2 &&
             e.local_rank == 2,
         "openmpi");
  clear_launcher_env();
  setenv("PMI_RANK", "1", 1);
  setenv("PMI_SIZE", "2", 1);
  setenv("RANK", "x", 1); /* malformed: ignored */
  EXPECT(rdzv_env_detect(&e) == 0 && !strcmp(e.source, "pmi") && e.rank == 1, "pmi");
  clear_launcher_env();
  return 0;
}

/* Forks `ranks` children; child r sets key "k<r>" and reads every other key, checking
 * the values, then exits 0. Returns the number of failed children. */
static int run_ranks(int ranks, rdzv_store *(*open_store)(int rank, void *arg), void *arg) {
  pid_t pids[8];
  for (int r = 0; r < ranks; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      if (r % 2) usleep(100000); /* readers arrive before and after the writers */
      rdzv_store *s = open_store(r, arg);
      if (!s) _exit(10);
      char key[32], val[64], err[256];
      snprintf(key, sizeof key, "k%d", r);
      snprintf(val, sizeof val, "value of rank %d", r);
      if (rdzv_set(s, key, val, strlen(val) + 1, err, sizeof err) != 0) {
        fprintf(stderr, "rank %d: %s\n", r, err);
        _exit(11);
      }
      for (int q = 0; q < ranks; q++) {
        char got[64], want[64];
        size_t len = 0;
        snprintf(key, sizeof key, "k%d", q);
        snprintf(want, sizeof want, "value of rank %d", q);
        if (rdzv_get(s, key, got, sizeof got, &len, err, sizeof err) != 0) {
          fprintf(stderr, "rank %d: %s\n", r, err);
          _exit(12);
        }
        if (len != strlen(want) + 1 || strcmp(got, want) != 0) _exit(13);
      }
      /* close removes this rank's key (file) or stops the server (TCP, rank 0): wait
       * until the others have read everything, as NCCL's collective init ensures */
      usleep(500000);
      rdzv_close(s);
      _exit(0);
    }
  }
  int bad = 0;
  for (int r = 0; r < ranks; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      printf("rank %d exited with status %d\n", r, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
      bad++;
    }
  }
  return bad;
}

static rdzv_store *open_file_store(int rank, void *arg) {
  char err[256];
  rdzv_store *s = rdzv_file_open(arg, 10, err, sizeof err);
  if (!s) fprintf(stderr, "rank %d: %s\n", rank, err);
  return s;
}

static int test_file_store(void) {
  char dir[] = "/tmp/stepscope-rdzv-XXXXXX";
  if (!mkdtemp(dir)) {
    printf("FAIL mkdtemp: %s\n", strerror(errno));
    return 1;
  }
  EXPECT(run_ranks(4, open_file_store, dir) == 0, "four ranks through a file store");
  /* a missing key times out with a message naming it */
  char err[256], buf[8];
  size_t len;
  rdzv_store *s = rdzv_file_open(dir, 0.2, err, sizeof err);
  EXPECT(s != NULL, "reopen");
  if (s) {
    EXPECT(rdzv_get(s, "never-set", buf, sizeof buf, &len, err, sizeof err) != 0 &&
               strstr(err, "never-set"),
           "timeout message: %s", err);
    EXPECT(rdzv_set(s, "../escape", "x", 1, err, sizeof err) != 0, "path traversal refused");
    rdzv_close(s);
  }
  rmdir(dir); /* every rank removed its key: the directory must be empty now */
  EXPECT(access(dir, F_OK) != 0, "store directory left behind");
  return 0;
}

static rdzv_store *open_tcp_store(int rank, void *arg) {
  char err[256];
  rdzv_store *s = rdzv_tcp_open("127.0.0.1", *(int *)arg, rank == 0, 10, err, sizeof err);
  if (!s) fprintf(stderr, "rank %d: %s\n", rank, err);
  return s;
}

static int test_tcp_store(void) {
  int port = 20000 + (int)(getpid() % 20000);
  EXPECT(run_ranks(4, open_tcp_store, &port) == 0, "four ranks through a TCP store on port %d",
         port);
  /* nobody serving: a clear message after the timeout */
  char err[256], buf[8];
  size_t len;
  rdzv_store *s = rdzv_tcp_open("127.0.0.1", port + 1, 0, 0.3, err, sizeof err);
  EXPECT(s != NULL, "client without server opens");
  if (s) {
    EXPECT(rdzv_get(s, "k0", buf, sizeof buf, &len, err, sizeof err) != 0 &&
               strstr(err, "cannot reach"),
           "unreachable store message: %s", err);
    rdzv_close(s);
  }
  EXPECT(rdzv_tcp_open("127.0.0.1", 70000, 1, 1, err, sizeof err) == NULL, "bad port refused");
  return 0;
}

static int test_nccl_policy(void) {
  char err[512];
  EXPECT(comm_nccl_check_gpu_sharing(1, 22809, NULL, err, sizeof err) == 0, "one rank per GPU");
  EXPECT(comm_nccl_check_gpu_sharing(4, 22809, "1", err, sizeof err) != 0 && strstr(err, "2.30") &&
             strstr(err, "2.28.9"),
         "old NCCL refused: %s", err);
  EXPECT(comm_nccl_check_gpu_sharing(4, 23203, NULL, err, sizeof err) != 0 &&
             strstr(err, "NCCL_MULTI_RANK_GPU_ENABLE=1"),
         "env var required: %s", err);
  EXPECT(comm_nccl_check_gpu_sharing(4, 23203, "1", err, sizeof err) == 0, "2.32 + env ok");
  int a[3] = {0, 2, 4}, b[3] = {0, 2, 4}, c[3] = {1, 3, 5};
  char ka[128], kb[128], kc[128], kd[128];
  comm_nccl_group_key(ka, sizeof ka, COMM_KIND_DP, a, 3, "");
  comm_nccl_group_key(kb, sizeof kb, COMM_KIND_DP, b, 3, "");
  comm_nccl_group_key(kc, sizeof kc, COMM_KIND_DP, c, 3, "");
  comm_nccl_group_key(kd, sizeof kd, COMM_KIND_TP, a, 3, "up");
  EXPECT(!strcmp(ka, kb) && strcmp(ka, kc) && strcmp(ka, kd), "group keys %s %s %s", ka, kc, kd);
  EXPECT(strstr(kd, "-up") != NULL, "suffix in key: %s", kd);
  int v = comm_nccl_version();
  char vs[32];
  comm_nccl_version_string(vs, sizeof vs);
  printf("linked NCCL: %s (%d)\n", vs, v);
  EXPECT(v >= 20900, "ncclGetVersion works without a GPU: %d", v);
  return 0;
}

/* cuBLAS's column-major GEMM: D[m,n] = alpha op1(X1)[m,k] op2(X2)[k,n] + beta D, where
 * element (i,j) of a column-major matrix with leading dimension ld is at i + j*ld. */
static void cm_gemm(int trans1, int trans2, int m, int n, int k, float alpha, const float *x1,
                    int ld1, const float *x2, int ld2, float beta, float *d, int ldd) {
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double acc = 0;
      for (int l = 0; l < k; l++) {
        float a = trans1 ? x1[l + (size_t)i * ld1] : x1[i + (size_t)l * ld1];
        float b = trans2 ? x2[j + (size_t)l * ld2] : x2[l + (size_t)j * ld2];
        acc += (double)a * b;
      }
      d[i + (size_t)j * ldd] = (float)(alpha * acc + beta * d[i + (size_t)j * ldd]);
    }
}

/* The row-major GEMM as the CUDA backend runs it: through the plan. */
static void planned(int transA, int transB, int M, int N, int K, float alpha, const float *A,
                    const float *B, float beta, float *C) {
  kcuda_gemm_plan p = kcuda_plan_row_major(transA, transB, M, N, K);
  cm_gemm(p.trans1, p.trans2, p.m, p.n, p.k, alpha, B, p.ld1, A, p.ld2, beta, C, p.ldd);
}

/* Row-major reference with explicit indexing: C = alpha op(A) op(B) + beta C. */
static void rm_ref(int transA, int transB, int M, int N, int K, float alpha, const float *A,
                   const float *B, float beta, float *C) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int l = 0; l < K; l++) {
        float a = transA ? A[(size_t)l * M + i] : A[(size_t)i * K + l];
        float b = transB ? B[(size_t)j * K + l] : B[(size_t)l * N + j];
        acc += (double)a * b;
      }
      C[(size_t)i * N + j] = (float)(alpha * acc + beta * C[(size_t)i * N + j]);
    }
}

static float *filled(size_t n, float seed) {
  float *x = malloc(n * sizeof *x);
  if (!x) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < n; i++)
    x[i] = (float)sin(seed + 0.37 * (double)i);
  return x;
}

static double max_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++)
    if (fabs((double)a[i] - b[i]) > m) m = fabs((double)a[i] - b[i]);
  return m;
}

static int test_gemm_plan(void) {
  /* the linear layer, as kcuda_matmul_forward/backward call the planner */
  int N = 7, C = 5, OC = 3;
  float *inp = filled((size_t)N * C, 1), *w = filled((size_t)OC * C, 2),
        *dout = filled((size_t)N * OC, 3);
  float *ref = calloc((size_t)N * OC, 4), *got = calloc((size_t)N * OC, 4);
  cpu_matmul_forward(ref, inp, w, NULL, N, C, OC);
  planned(0, 1, N, OC, C, 1.0f, inp, w, 0.0f, got);
  EXPECT(max_diff(ref, got, (size_t)N * OC) < 1e-5, "matmul forward through the plan");
  float *dref = filled((size_t)N * C, 4), *dgot = filled((size_t)N * C, 4);
  cpu_matmul_backward(dref, NULL, NULL, dout, inp, w, N, C, OC);
  planned(0, 0, N, C, OC, 1.0f, dout, w, 1.0f, dgot);
  EXPECT(max_diff(dref, dgot, (size_t)N * C) < 1e-5, "matmul dinp (accumulating) through the plan");
  float *wref = filled((size_t)OC * C, 5), *wgot = filled((size_t)OC * C, 5);
  cpu_matmul_backward(NULL, wref, NULL, dout, inp, w, N, C, OC);
  planned(1, 0, OC, C, N, 1.0f, dout, inp, 1.0f, wgot);
  EXPECT(max_diff(wref, wgot, (size_t)OC * C) < 1e-5,
         "matmul dweight (accumulating) through the plan");
  /* every transposition combination and attention's shapes (T x hs, T x T), scaled */
  int shapes[][3] = {{6, 6, 4}, {6, 4, 6}, {5, 3, 7}, {1, 9, 2}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        int M = shapes[s][0], Nn = shapes[s][1], K = shapes[s][2];
        float *A = filled((size_t)M * K, 6 + ta), *B = filled((size_t)K * Nn, 8 + tb);
        float *c1 = filled((size_t)M * Nn, 9), *c2 = filled((size_t)M * Nn, 9);
        rm_ref(ta, tb, M, Nn, K, 0.5f, A, B, 0.25f, c1);
        planned(ta, tb, M, Nn, K, 0.5f, A, B, 0.25f, c2);
        EXPECT(max_diff(c1, c2, (size_t)M * Nn) < 1e-5, "plan M=%d N=%d K=%d transA=%d transB=%d",
               M, Nn, K, ta, tb);
        free(A);
        free(B);
        free(c1);
        free(c2);
      }
  free(inp);
  free(w);
  free(dout);
  free(ref);
  free(got);
  free(dref);
  free(dgot);
  free(wref);
  free(wgot);
  return 0;
}

/* Which shapes the fused attention takes (the device falls back to the GEMM path for the
 * others, and must make the same choice in forward and backward: a pure function). */
static int test_fused_shapes(void) {
  EXPECT(kcuda_attention_fused_supported(8, 1024, 768, 12), "GPT-2 124M");
  EXPECT(kcuda_attention_fused_supported(8, 1024, 1024, 16), "GPT-2 350M");
  EXPECT(kcuda_attention_fused_supported(4, 1024, 384, 6), "GPT-2 124M with TP2 (6 heads)");
  EXPECT(kcuda_attention_fused_supported(1, 129, 256, 2), "hs 128 with T = 129");
  EXPECT(!kcuda_attention_fused_supported(1, 128, 256, 2), "hs 128 needs T > 128");
  EXPECT(!kcuda_attention_fused_supported(4, 64, 256, 4), "hs 64 with T = 64: att too small");
  EXPECT(!kcuda_attention_fused_supported(4, 256, 240, 5), "hs 48 unsupported");
  EXPECT(!kcuda_attention_fused_supported(4, 256, 250, 4), "C not a multiple of NH");
  EXPECT(!kcuda_attention_fused_supported(0, 256, 256, 4), "no batch");
  EXPECT(!kcuda_attention_fused_supported(70000, 256, 64, 1), "grid y limit");
  /* the memory model's copy of the rule (the planner has no device to ask) says the same */
  const int Bs[] = {0, 1, 4, 70000}, Ts[] = {1, 32, 33, 64, 65, 128, 129, 1024};
  const int Cs[] = {64, 96, 240, 250, 256, 768}, NHs[] = {1, 2, 3, 4, 5, 6, 8, 12};
  for (size_t b = 0; b < sizeof Bs / sizeof *Bs; b++)
    for (size_t t = 0; t < sizeof Ts / sizeof *Ts; t++)
      for (size_t c = 0; c < sizeof Cs / sizeof *Cs; c++)
        for (size_t h = 0; h < sizeof NHs / sizeof *NHs; h++)
          EXPECT(mm_fused_attention_supported(Bs[b], Ts[t], Cs[c], NHs[h]) ==
                     kcuda_attention_fused_supported(Bs[b], Ts[t], Cs[c], NHs[h]),
                 "B %d T %d C %d NH %d: memory_model.c and flash_attention.cu disagree", Bs[b],
                 Ts[t], Cs[c], NHs[h]);
  return 0;
}

static int test_weight_watch(void) {
  /* two fake allocations: parameters and gradients (only addresses are compared) */
  static float params[1000], grads[1000], acts[100];
  weight_watch w;
  weight_watch_init(&w);
  EXPECT(w.version == 1, "versions start at 1 (0 means no cache)");
  /* a write before anything is watched changes nothing */
  weight_watch_note_write(&w, params);
  EXPECT(w.version == 1, "unwatched write");
  /* the first GEMM on a weight watches its allocation */
  unsigned long long v = weight_watch_version_for(&w, params + 10, params, sizeof params);
  EXPECT(v == 1 && w.n == 1, "watch on first use");
  EXPECT(weight_watch_version_for(&w, params + 500, params, sizeof params) == 1 && w.n == 1,
         "a second weight of the same allocation shares the watch");
  /* activations and gradients are written all the time: no invalidation */
  weight_watch_note_write(&w, acts);
  weight_watch_note_write(&w, grads);
  weight_watch_note_write(&w, grads + 999);
  weight_watch_note_write(&w, NULL);
  EXPECT(w.version == 1, "writes outside the weights keep the copies");
  /* AdamW on any parameter (start inside the allocation), a copy into it, its last float */
  weight_watch_note_write(&w, params + 300);
  EXPECT(w.version == 2, "a write into the weights invalidates");
  weight_watch_note_write(&w, params + 999);
  EXPECT(w.version == 3, "a write at the allocation's end invalidates");
  weight_watch_note_write(&w, params + 1000); /* one past the end: another allocation */
  EXPECT(w.version == 3, "the byte after the allocation is not in it");
  EXPECT(weight_watch_version_for(&w, params + 10, params, sizeof params) == 3,
         "the GEMM now sees the new version (its copy recasts)");
  /* unknown memory: no cache */
  EXPECT(weight_watch_version_for(&w, acts, NULL, 0) == 0, "unknown allocation: version 0");
  /* a full watch caches nothing more, but keeps watching what it has */
  static float more[WEIGHT_WATCH_MAX][4];
  for (int i = 0; i < WEIGHT_WATCH_MAX - 1; i++)
    EXPECT(weight_watch_version_for(&w, more[i], more[i], sizeof more[i]) != 0, "room %d", i);
  EXPECT(w.n == WEIGHT_WATCH_MAX, "full");
  EXPECT(weight_watch_version_for(&w, grads, grads, sizeof grads) == 0, "full watch: no cache");
  unsigned long long before = w.version;
  weight_watch_note_write(&w, more[3] + 1);
  EXPECT(w.version == before + 1, "still watching after it filled up");
  /* freeing a watched allocation forgets it and moves the version */
  weight_watch_forget(&w, params);
  EXPECT(w.n == WEIGHT_WATCH_MAX - 1 && w.version == before + 2, "forget");
  weight_watch_note_write(&w, params + 5);
  EXPECT(w.version == before + 2, "forgotten memory is not watched");
  weight_watch_forget(&w, acts);
  EXPECT(w.n == WEIGHT_WATCH_MAX - 1 && w.version == before + 2, "forgetting the unwatched");
  return 0;
}

/* Simulates blocking communicator creation: rank r creates the links plans[r][0..count[r])
 * in order, and a link's creation returns once both its members are at it. 1 when every
 * rank gets through its list, 0 when they wait on each other forever. */
static int links_created_without_deadlock(int n, ring_link_plan plans[][2], const int *count) {
  int pos[16] = {0};
  for (;;) {
    int done = 1, progress = 0;
    for (int r = 0; r < n; r++)
      done &= pos[r] == count[r];
    if (done) return 1;
    for (int i = 0; i < n; i++) {
      int a = i, b = (i + 1) % n; /* the members of link i */
      if (pos[a] < count[a] && pos[b] < count[b] && plans[a][pos[a]].index == i &&
          plans[b][pos[b]].index == i) {
        pos[a]++;
        pos[b]++;
        progress = 1;
      }
    }
    if (!progress) return 0;
  }
}

static int test_ring_links(void) {
  ring_link_plan plans[16][2];
  int count[16];
  /* the simulation sees a deadlock where there is one: every rank creating its send link
   * first (n = 2: rank 0 waits on link 0 for rank 1, which waits on link 1 for rank 0) */
  for (int n = 2; n <= 5; n++) {
    for (int r = 0; r < n; r++) {
      plans[r][0] = (ring_link_plan){r, r, (r + 1) % n, 0};
      plans[r][1] = (ring_link_plan){(r + n - 1) % n, (r + n - 1) % n, r, 1};
      count[r] = 2;
    }
    EXPECT(!links_created_without_deadlock(n, plans, count),
           "n=%d: send-link-first creation should deadlock", n);
  }
  for (int n = 1; n <= 16; n++) {
    for (int r = 0; r < n; r++) {
      count[r] = ring_links_plan(n, r, plans[r]);
      EXPECT(count[r] == (n >= 2 ? 2 : 0), "n=%d rank %d: %d links", n, r, count[r]);
      if (count[r] == 2)
        EXPECT(plans[r][0].index < plans[r][1].index, "n=%d rank %d: ascending", n, r);
      for (int i = 0; i < count[r]; i++) {
        const ring_link_plan *p = &plans[r][i];
        EXPECT(p->to == (p->from + 1) % n && p->index == p->from, "n=%d rank %d: link %d is %d->%d",
               n, r, p->index, p->from, p->to);
        EXPECT((p->link_rank == 0 && p->from == r) || (p->link_rank == 1 && p->to == r),
               "n=%d rank %d: link rank %d in %d->%d", n, r, p->link_rank, p->from, p->to);
      }
    }
    EXPECT(links_created_without_deadlock(n, plans, count), "n=%d: creation deadlocks", n);
    for (int r = 0; r < n && n >= 2; r++) {
      int next = (r + 1) % n, prev = (r + n - 1) % n, pl = -1, pl2 = -1;
      int send = ring_link_for(n, r, next, 1, &pl);
      int recv_at_next = ring_link_for(n, next, r, 0, &pl2);
      EXPECT(send == r && pl == 1, "n=%d rank %d sends on link %d (peer rank %d)", n, r, send, pl);
      EXPECT(recv_at_next == send && pl2 == 0,
             "n=%d: rank %d's send link %d is rank %d's receive link %d", n, r, send, next,
             recv_at_next);
      int recv = ring_link_for(n, r, prev, 0, &pl);
      EXPECT(recv >= 0 && recv != send,
             "n=%d rank %d: send and receive on different communicators (%d, %d)", n, r, send,
             recv);
      /* the send link is the plan's link rank 0, the receive link its link rank 1 */
      for (int i = 0; i < 2; i++)
        EXPECT(plans[r][i].index == (plans[r][i].link_rank == 0 ? send : recv),
               "n=%d rank %d: plan and lookup agree", n, r);
      if (n >= 3) {
        EXPECT(ring_link_for(n, r, prev, 1, &pl) < 0, "n=%d: a send backwards", n);
        EXPECT(ring_link_for(n, r, next, 0, &pl) < 0, "n=%d: a receive forwards", n);
      }
    }
  }
  EXPECT(ring_link_for(1, 0, 0, 1, &(int){0}) < 0, "a ring of one has no links");
  /* cp = 2 (next == prev): the two directions have distinct rendezvous keys */
  int ab[2] = {4, 6}, ba[2] = {6, 4};
  char k0[128], k1[128], km[128];
  comm_nccl_group_key(k0, sizeof k0, COMM_KIND_CP, ab, 2, "ring0");
  comm_nccl_group_key(k1, sizeof k1, COMM_KIND_CP, ba, 2, "ring1");
  comm_nccl_group_key(km, sizeof km, COMM_KIND_CP, ab, 2, "");
  EXPECT(strcmp(k0, k1) && strcmp(k0, km) && strcmp(k1, km), "keys %s %s %s", k0, k1, km);
  return 0;
}

/* Which kernels ring attention's blocks run: a pure function of precision and shape, so
 * forward and backward agree. */
static int test_block_paths(void) {
  EXPECT(kcuda_attention_block_path(KCUDA_BF16, 4, 768, 12) == KCUDA_BLOCK_TENSOR_CORES, "124M");
  EXPECT(kcuda_attention_block_path(KCUDA_TF32, 4, 768, 12) == KCUDA_BLOCK_TENSOR_CORES, "tf32");
  EXPECT(kcuda_attention_block_path(KCUDA_BF16, 4, 64, 4) == KCUDA_BLOCK_TENSOR_CORES, "hs 16");
  EXPECT(kcuda_attention_block_path(KCUDA_BF16, 1, 256, 2) == KCUDA_BLOCK_TENSOR_CORES, "hs 128");
  EXPECT(kcuda_attention_block_path(KCUDA_FP32, 4, 768, 12) == KCUDA_BLOCK_FP32, "fp32 mode");
  EXPECT(kcuda_attention_block_path(KCUDA_BF16, 4, 240, 5) == KCUDA_BLOCK_FP32, "hs 48");
  EXPECT(kcuda_attention_block_path(KCUDA_BF16, 70000, 64, 1) == KCUDA_BLOCK_FP32, "grid y");
  EXPECT(kcuda_attention_block_path(KCUDA_BF16, 1, 512, 1) < 0, "hs 512 unsupported");
  EXPECT(kcuda_attention_block_path(KCUDA_FP32, 1, 250, 4) < 0, "C not a multiple of NH");
  /* the device table has every operation context parallelism needs (else --cp is refused) */
  const dev_ops *o = dev_cuda_ops();
  EXPECT(o->copy_2d && o->attention_block_forward && o->attention_block_backward,
         "the CUDA device table has copy_2d and the attention block operations");
  return 0;
}

/* ---- alltoallv_plan: NCCL's grouped sends and receives, simulated -------------------------- */

#define A2A_MAX 9

/* Runs every member's plan (alltoallv_plan.h) for a group of n with C[i][j] elements of es
 * bytes from i to j: every send must meet exactly one receive of the same size on the other
 * side (zero-sized ones issued by neither), and the received buffers must equal comm.h's
 * definition, computed here independently. `broken` places received parts by the send counts
 * (a plausible slip) to show that the simulation notices. 0: all correct; else the number of
 * problems found. */
static int a2a_simulate(int n, size_t es, uint64_t C[A2A_MAX][A2A_MAX], unsigned seed, int broken,
                        int report) {
  unsigned char *in[A2A_MAX], *out[A2A_MAX], *want[A2A_MAX];
  uint64_t sc[A2A_MAX][A2A_MAX], rc[A2A_MAX][A2A_MAX];
  size_t in_b[A2A_MAX] = {0}, out_b[A2A_MAX] = {0};
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      sc[i][j] = C[i][j]; /* member i sends C[i][j] to j */
      rc[i][j] = C[j][i]; /* member i receives C[j][i] from j */
      in_b[i] += (size_t)C[i][j] * es;
      out_b[i] += (size_t)C[j][i] * es;
    }
  for (int i = 0; i < n; i++) {
    in[i] = malloc(in_b[i] + 1);
    out[i] = calloc(1, out_b[i] + 1);
    want[i] = calloc(1, out_b[i] + 1);
    for (size_t b = 0; b < in_b[i]; b++)
      in[i][b] = (unsigned char)(rand_r(&seed) & 0xff);
  }
  /* comm.h's definition: out[j] = concatenation over k of the part of in[k] addressed to j */
  for (int j = 0; j < n; j++) {
    size_t at = 0;
    for (int k = 0; k < n; k++) {
      size_t from = 0;
      for (int q = 0; q < j; q++)
        from += (size_t)C[k][q] * es;
      memcpy(want[j] + at, in[k] + from, (size_t)C[k][j] * es);
      at += (size_t)C[k][j] * es;
    }
  }
  int bad = 0;
  /* every member's calls: sends[i][j] (issued by i) and recvs[i][j] (issued by j) describe
   * the transfer i -> j; nsend/nrecv count them, so that a duplicate or a missing call
   * shows */
  a2a_transfer sends[A2A_MAX][A2A_MAX], recvs[A2A_MAX][A2A_MAX];
  int nsend[A2A_MAX][A2A_MAX] = {{0}}, nrecv[A2A_MAX][A2A_MAX] = {{0}};
  for (int me = 0; me < n; me++) {
    a2a_transfer s_own, r_own;
    a2a_plan_own(me, sc[me], broken ? sc[me] : rc[me], es, &s_own, &r_own);
    if (s_own.bytes != r_own.bytes || s_own.offset + s_own.bytes > in_b[me] ||
        r_own.offset + r_own.bytes > out_b[me]) {
      bad++;
    } else {
      memcpy(out[me] + r_own.offset, in[me] + s_own.offset, s_own.bytes);
    }
    for (int d = 1; d < n; d++) {
      a2a_transfer snd, rcv;
      a2a_plan_step(n, me, d, sc[me], broken ? sc[me] : rc[me], es, &snd, &rcv);
      if (snd.bytes > 0) { /* what comm_nccl.c issues: ncclSend only when bytes > 0 */
        sends[me][snd.peer] = snd;
        nsend[me][snd.peer]++;
      }
      if (rcv.bytes > 0) {
        recvs[rcv.peer][me] = rcv;
        nrecv[rcv.peer][me]++;
      }
    }
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j) {
        if (nsend[i][j] || nrecv[i][j]) {
          bad++;
          if (report) printf("  member %d sends to or receives from itself over NCCL\n", i);
        }
        continue;
      }
      int expect = C[i][j] > 0;
      if (nsend[i][j] != expect || nrecv[i][j] != expect) {
        bad++;
        if (report)
          printf("  %d -> %d: %d sends, %d receives, %llu elements\n", i, j, nsend[i][j],
                 nrecv[i][j], (unsigned long long)C[i][j]);
        continue;
      }
      if (!expect) continue;
      if (sends[i][j].bytes != recvs[i][j].bytes ||
          recvs[i][j].offset + recvs[i][j].bytes > out_b[j] ||
          sends[i][j].offset + sends[i][j].bytes > in_b[i]) {
        bad++;
        continue;
      }
      memcpy(out[j] + recvs[i][j].offset, in[i] + sends[i][j].offset, sends[i][j].bytes);
    }
  for (int j = 0; j < n; j++)
    if (memcmp(out[j], want[j], out_b[j]) != 0) {
      bad++;
      if (report) printf("  member %d received the wrong bytes\n", j);
    }
  for (int i = 0; i < n; i++) {
    free(in[i]);
    free(out[i]);
    free(want[i]);
  }
  return bad;
}

static int test_alltoallv_plan(void) {
  unsigned seed = 20;
  uint64_t C[A2A_MAX][A2A_MAX];
  int caught = 0, trials = 0;
  for (int n = 1; n <= A2A_MAX; n++)
    for (int trial = 0; trial < 40; trial++) {
      size_t es = trial % 3 == 0 ? 2 : trial % 3 == 1 ? 4 : 8;
      for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) /* about a third of the splits empty */
          C[i][j] = rand_r(&seed) % 3 == 0 ? 0 : 1 + rand_r(&seed) % 17;
      if (trial == 0) /* the expert-parallel counts exchange: fixed splits */
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            C[i][j] = 2;
      if (trial == 1) /* nothing at all moves */
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            C[i][j] = 0;
      int bad = a2a_simulate(n, es, C, seed + (unsigned)trial, 0, 1);
      EXPECT(bad == 0, "n=%d trial %d (%zu-byte elements): %d problems", n, trial, es, bad);
      if (n >= 2) {
        trials++;
        caught += a2a_simulate(n, es, C, seed + (unsigned)trial, 1, 0) != 0;
      }
    }
  /* the simulation notices a plan that places received parts by the send counts, wherever
   * the two differ (all but the symmetric trials) */
  EXPECT(caught >= trials * 3 / 4, "the broken plan was caught in only %d of %d trials", caught,
         trials);
  /* the trainer's MoE path (moe.c, expert_parallel.c, expert_step.c) calls only operations
   * the CUDA device table has */
  const dev_ops *o = dev_cuda_ops();
  EXPECT(o->moe_router_forward && o->moe_router_backward && o->moe_aux_loss_accumulate &&
             o->moe_dispatch_plan && o->moe_permute_forward && o->moe_permute_backward &&
             o->moe_unpermute_forward && o->moe_unpermute_backward &&
             o->moe_expert_matmul_forward && o->moe_expert_matmul_backward,
         "the CUDA device table has every moe_* operation");
  EXPECT(o->copy && o->copy_to_host && o->copy_to_device && o->zero && o->stream_synchronize,
         "the CUDA device table has the copies expert parallelism uses");
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr,
            "usage: %s "
            "peak|env|file_store|tcp_store|nccl_policy|gemm_plan|weight_watch|fused_shapes|ring_"
            "links|block_paths|alltoallv_plan\n",
            argv[0]);
    return 2;
  }
  const char *t = argv[1];
  if (!strcmp(t, "peak"))
    test_peak();
  else if (!strcmp(t, "env"))
    test_env();
  else if (!strcmp(t, "file_store"))
    test_file_store();
  else if (!strcmp(t, "tcp_store"))
    test_tcp_store();
  else if (!strcmp(t, "nccl_policy"))
    test_nccl_policy();
  else if (!strcmp(t, "gemm_plan"))
    test_gemm_plan();
  else if (!strcmp(t, "weight_watch"))
    test_weight_watch();
  else if (!strcmp(t, "fused_shapes"))
    test_fused_shapes();
  else if (!strcmp(t, "ring_links"))
    test_ring_links();
  else if (!strcmp(t, "alltoallv_plan"))
    test_alltoallv_plan();
  else if (!strcmp(t, "block_paths"))
    test_block_paths();
  else {
    fprintf(stderr, "unknown test %s\n", t);
    return 2;
  }
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
