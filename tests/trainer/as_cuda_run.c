/*
 * as_cuda_run.c — rewrites a traced CPU-backend trainer run into the records the CUDA backend
 * and the GPU tracer write for the same work, so that `stepscope ops` on the CUDA layout is
 * tested without a GPU (traced_ops.sh with AS_CUDA set; trainer.ops.cuda_layout_*).
 *
 * usage: as_cuda_run CPU_RUN_DIR OUT_DIR
 *
 * For each rank, the header, metadata, clock anchors and ranges (steps, phases) are kept,
 * the CPU streams become GPU streams, and each compute HOST_OP becomes what a CUDA launch
 * leaves in the trace: on the thread and in the interval of its HOST_ENQUEUE call, one
 * runtime API record (cudaLaunchKernel) per kernel the CUDA backend launches for that
 * operation, each with its own correlation id; on the stream, those KERNEL records (the
 * kernels of kernels/cuda, cuBLAS for the GEMMs) sharing the operation's interval; and,
 * for an operation whose inputs the CUDA backend describes (device_cuda_ops.c), a RANGE of
 * domain "cpu_op" named after the operation with the same inputs as args (op_inputs.h: both
 * backends write the same text for the same shapes), around the launches. The experts'
 * GEMMs are launched without one (their row count is on the device), as on CUDA.
 * Communication, copies and other host ops are left out: the op table does not count them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "stepscope.h"

/* The kernels the CUDA backend's default paths launch for an operation; a name not listed
 * launches one kernel of its own name. The cuBLAS names vary with GPU and library. */
#define GEMM "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_cublas"
static const struct {
  const char *op;
  const char *kernels[8];
  int has_range;
} launches[] = {
    {"layernorm_forward", {"layernorm_forward_kernel"}, 1},
    {"layernorm_backward", {"layernorm_backward_kernel"}, 1},
    {"matmul_forward", {GEMM, "bias_add_kernel"}, 1},
    {"matmul_backward", {GEMM, GEMM, "dbias_partial_kernel", "dbias_final_kernel"}, 1},
    {"attention_forward",
     {"permute_qkv_kernel", GEMM, "causal_softmax_kernel", GEMM, "unpermute_kernel"},
     1},
    {"attention_backward",
     {"permute_dout_kernel", GEMM, GEMM, "causal_softmax_backward_kernel", GEMM, GEMM,
      "unpermute_add_qkv_kernel"},
     1},
    {"attention_block_forward", {"ab_forward_kernel"}, 1},
    {"attention_block_backward", {"ab_dot_kernel", "ab_backward_kernel"}, 1},
    {"gelu_forward", {"gelu_forward_kernel"}, 1},
    {"gelu_backward", {"gelu_backward_kernel"}, 1},
    {"residual_forward", {"residual_forward_kernel"}, 1},
    {"moe_expert_matmul_forward", {"moe_grouped_gemm_tc_kernel"}, 0},
    {"moe_expert_matmul_backward",
     {"moe_grouped_gemm_tc_kernel", "moe_grouped_dweight_kernel", "moe_grouped_dbias_kernel"},
     0},
};

typedef struct enqueue {
  uint64_t corr, thread, start, end;
} enqueue;

static int cmp_enqueue(const void *a, const void *b) {
  uint64_t x = ((const enqueue *)a)->corr, y = ((const enqueue *)b)->corr;
  return x < y ? -1 : x > y;
}

/* The HOST_ENQUEUE calls of a rank file, sorted by correlation id. */
static enqueue *read_enqueues(const char *path, size_t *n) {
  stepscope_error err;
  stepscope_reader *rd = stepscope_reader_open(path, &err);
  if (!rd) return NULL;
  size_t cap = 1024;
  enqueue *v = malloc(cap * sizeof *v);
  stepscope_record rec;
  *n = 0;
  while (v && stepscope_reader_next(rd, &rec, &err) == 1) {
    if (rec.kind != STEPSCOPE_REC_API || rec.u.api.api_kind != STEPSCOPE_API_HOST_ENQUEUE) continue;
    if (*n == cap) {
      enqueue *w = realloc(v, 2 * cap * sizeof *v);
      if (!w) free(v);
      v = w, cap *= 2;
      if (!v) break;
    }
    v[(*n)++] =
        (enqueue){rec.u.api.correlation_id, rec.u.api.thread, rec.u.api.start_ns, rec.u.api.end_ns};
  }
  stepscope_reader_close(rd);
  if (v) qsort(v, *n, sizeof *v, cmp_enqueue);
  return v;
}

static uint32_t copy_str(stepscope_writer *w, const stepscope_reader *rd, uint32_t id) {
  return id ? stepscope_intern(w, stepscope_reader_string(rd, id)) : 0;
}

/* One compute operation as the CUDA backend's launches and their kernels. */
static void write_launches(stepscope_writer *w, const stepscope_reader *rd,
                           const stepscope_host_op *h, const enqueue *q) {
  const char *op = stepscope_reader_string(rd, h->name);
  const char *own[2] = {op, NULL};
  const char *const *kernels = own;
  int has_range = 0;
  for (size_t i = 0; i < sizeof launches / sizeof launches[0]; i++)
    if (!strcmp(launches[i].op, op))
      kernels = launches[i].kernels, has_range = launches[i].has_range;
  uint64_t k = 0;
  while (k < 8 && kernels[k])
    k++;
  stepscope_record r;
  if (has_range && h->args) {
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_RANGE;
    r.u.range = (stepscope_range){.start_ns = q->start,
                                  .end_ns = q->end,
                                  .thread = q->thread,
                                  .name = stepscope_intern(w, op),
                                  .domain = stepscope_intern(w, "cpu_op"),
                                  .args = copy_str(w, rd, h->args)};
    stepscope_write(w, &r);
  }
  uint64_t call = (q->end - q->start) / k, run = (h->end_ns - h->start_ns) / k;
  for (uint64_t j = 0; j < k; j++) {
    uint64_t corr = h->correlation_id * 8 + j;
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_API;
    r.u.api = (stepscope_api){.start_ns = q->start + j * call,
                              .end_ns = q->start + (j + 1) * call,
                              .correlation_id = corr,
                              .thread = q->thread,
                              .name = stepscope_intern(w, "cudaLaunchKernel"),
                              .api_kind = STEPSCOPE_API_RUNTIME};
    stepscope_write(w, &r);
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_KERNEL;
    r.u.kernel = (stepscope_kernel){.start_ns = h->start_ns + j * run,
                                    .end_ns = h->start_ns + (j + 1) * run,
                                    .correlation_id = corr,
                                    .stream = h->stream,
                                    .name = stepscope_intern(w, kernels[j])};
    stepscope_write(w, &r);
  }
}

static int convert(const char *in, const char *out) {
  size_t nq = 0;
  enqueue *q = read_enqueues(in, &nq);
  stepscope_error err;
  stepscope_reader *rd = stepscope_reader_open(in, &err);
  if (!q || !rd) {
    fprintf(stderr, "as_cuda_run: cannot read %s\n", in);
    return -1;
  }
  stepscope_header hd = *stepscope_reader_header(rd);
  stepscope_writer *w = stepscope_writer_open(out, &hd, NULL, &err);
  if (!w) {
    fprintf(stderr, "as_cuda_run: cannot write %s: %s\n", out, err.message);
    return -1;
  }
  stepscope_record rec;
  while (stepscope_reader_next(rd, &rec, &err) == 1) {
    switch (rec.kind) {
    case STEPSCOPE_REC_METADATA:
    case STEPSCOPE_REC_CLOCK_ANCHOR: stepscope_write(w, &rec); break;
    case STEPSCOPE_REC_RANGE:
      rec.u.range.name = copy_str(w, rd, rec.u.range.name);
      rec.u.range.domain = copy_str(w, rd, rec.u.range.domain);
      rec.u.range.args = copy_str(w, rd, rec.u.range.args);
      stepscope_write(w, &rec);
      break;
    case STEPSCOPE_REC_STREAM:
      rec.u.stream.name = copy_str(w, rd, rec.u.stream.name);
      if (rec.u.stream.stream_kind == STEPSCOPE_STREAM_CPU)
        rec.u.stream.stream_kind = STEPSCOPE_STREAM_GPU;
      stepscope_write(w, &rec);
      break;
    case STEPSCOPE_REC_HOST_OP: {
      enqueue key = {.corr = rec.u.host_op.correlation_id};
      const enqueue *e = bsearch(&key, q, nq, sizeof *q, cmp_enqueue);
      if (rec.u.host_op.category == STEPSCOPE_CAT_COMPUTE && e)
        write_launches(w, rd, &rec.u.host_op, e);
      break;
    }
    default: break;
    }
  }
  stepscope_reader_close(rd);
  free(q);
  return stepscope_writer_close(w, &err);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: as_cuda_run CPU_RUN_DIR OUT_DIR\n");
    return 2;
  }
  char **paths = NULL;
  size_t n = 0;
  stepscope_error err;
  if (stepscope_run_files(argv[1], &paths, &n, &err) || n == 0) {
    fprintf(stderr, "as_cuda_run: no trace files in %s\n", argv[1]);
    return 1;
  }
  mkdir(argv[2], 0755);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    const char *base = strrchr(paths[i], '/');
    char out[4096];
    snprintf(out, sizeof out, "%s/%s", argv[2], base ? base + 1 : paths[i]);
    rc = convert(paths[i], out);
  }
  stepscope_run_files_free(paths, n);
  return rc ? 1 : 0;
}
