/*
 * train.c — one rank's training run (see train.h): set-up (device, streams, communicator
 * groups, the model chunks, events, optimizer and host buffers), the loop over the steps
 * (printing, the JSON log, MFU, checkpoints, the --debug-die/--debug-hang test hooks),
 * tracing (metadata, the memory prediction beside the measured peak), the checkpoint glue,
 * --debug-dump-params and clean-up.
 *
 * The rest of a rank's run lives beside it, one concern per file, over the trainer state of
 * train_internal.h; each sub-state has one owner that makes and frees it:
 *   train_step.c     one optimizer step: the batch, the pipeline walk, the end-of-step
 *                    loss and gradient norm, clipping and AdamW; the stage operations
 *                    (train_stage_ops) the pipeline executor runs the stages with
 *   pipeline_exec.c  the pipeline executor (struct pipeline): the schedule walk and each
 *                    (chunk, micro-batch) forward or backward with its p2p transfers (AFAB,
 *                    1F1B, interleaved), over a table of stage operations
 *   grad_sync.c      gradient synchronisation (struct grad_sync): DP buckets, the optimizer
 *                    shard, ZeRO-2/3 reduce-scatter into shards, ZeRO-1/2 parameter
 *                    all-gathers, ZeRO-3 gathers before each unit
 *   expert_step.c    the experts' share of a step (struct expert_state: their AdamW moments)
 * Interleaved 1F1B (--schedule interleaved --virtual-stages V): a rank holds V models
 * (chunks), chunk j being the ordinary stage model of virtual stage j*pp + pp_rank in a
 * pipeline of pp*V stages (chunk_grid); set-up creates them all, and checkpoints hold every
 * chunk in the shard.
 * Context parallelism (--cp) lives in the model (ring_attention.c); here it only
 * adds the CP group and its two streams, the dp x cp gradient group and the
 * choice of each CP rank's chunks of the sequences it loads (train_step.c).
 */
#include "train.h"
#include "train_internal.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "comm.h"
#include "device.h"
#include "memory_model.h"
#include "model.h"
#include "model_flops.h"
#include "schedule.h"
#include "stepscope.h"
#include "trace_metadata.h"
#include "train_data.h"
#include "zero.h"

static void progress_hook(void *arg) {
  comm_job_heartbeat(arg);
}

/* The grid a chunk's model sees: virtual stage j*pp + pp_rank of pp*V stages. */
static model_grid chunk_grid(const trainer *t, int j) {
  model_grid g = t->g;
  g.pp_rank = j * g.pp + g.pp_rank;
  g.pp *= t->V;
  return g;
}

/* ---- FLOPs and memory --------------------------------------------------------------- */

/* The model's shape (layers, widths, sequence, recomputation, experts) as the FLOPs count
 * takes it (model_flops.c: the one implementation the planner's MFU uses too); the rest of
 * the layout zero. */
static mm_layout model_shape(const train_config *c) {
  return (mm_layout){.layers = c->layers,
                     .hidden = c->hidden,
                     .heads = c->heads,
                     .vocab = c->vocab,
                     .max_seq = c->max_seq,
                     .seq = c->seq,
                     .cp = c->cp,
                     .recompute = (mm_recompute)c->recompute,
                     /* with experts: the parameters a token is multiplied with */
                     .experts = c->experts,
                     .top_k = c->top_k,
                     .moe_every = c->moe_every};
}

double train_model_flops_per_step(const train_config *c) {
  mm_layout s = model_shape(c);
  return mf_model_flops_per_step(&s, c->batch);
}

double train_hardware_flops_per_step(const train_config *c) {
  mm_layout s = model_shape(c);
  return mf_hardware_flops_per_step(&s, c->batch);
}

/* --peak-tflops, else the device's dense peak as its backend gives it (dev_peak_flops: on
 * CUDA the GPU's bf16 peak from its table), else the CPU assumption: 0.1 TFLOP/s, one core
 * with two 8-wide fp32 FMA units at about 3 GHz (2 x 8 x 2 x 3e9 = 96e9; docs/ops.md "CPU
 * ceilings" compares it with bench_cpu_peaks' measurement). */
static double peak_flops_of(const train_config *c, dev_device *d) {
  if (c->peak_tflops > 0) return c->peak_tflops * 1e12;
  double p = d ? dev_peak_flops(d) : 0;
  return p > 0 ? p : 0.1e12;
}

/* ---- setup ------------------------------------------------------------------------------ */

static comm *make_group(trainer *t, comm_kind kind, const char *name, int *ranks, int n) {
  char e[256];
  comm *c;
  if (t->dev_job) /* the device's own communicator library (NCCL on CUDA) */
    c = comm_dev_group(t->dev_job, kind, name, ranks, n, e, sizeof e);
  else
    c = comm_group(t->job, kind, name, ranks, n, e, sizeof e);
  if (!c) fail(t, "%s", e);
  return c;
}

static int setup_groups(trainer *t) {
  model_grid *g = &t->g;
  int ranks[64], n;
  n = 0;
  for (int r = 0; r < g->world; r++)
    ranks[n++] = r;
  if (!(t->world_c = make_group(t, COMM_KIND_WORLD, "world", ranks, n))) return -1;
  /* gradients: every replica of this (stage, TP slice), i.e. all of DP x CP, in
   * rank order (group rank = dp_rank * cp + cp_rank, the ZeRO-1 shard index) */
  n = 0;
  for (int d = 0; d < g->dp; d++)
    for (int k = 0; k < g->cp; k++)
      ranks[n++] = model_grid_rank(g, d, g->pp_rank, k, g->tp_rank);
  if (!(t->dp_c = make_group(t, COMM_KIND_DP, g->cp > 1 ? "dp_cp" : "dp", ranks, n))) return -1;
  t->reduce_n = n;
  n = 0;
  for (int k = 0; k < g->tp; k++)
    ranks[n++] = model_grid_rank(g, g->dp_rank, g->pp_rank, g->cp_rank, k);
  if (!(t->tp_c = make_group(t, COMM_KIND_TP, "tp", ranks, n))) return -1;
  n = 0;
  for (int p = 0; p < g->pp; p++)
    ranks[n++] = model_grid_rank(g, g->dp_rank, p, g->cp_rank, g->tp_rank);
  if (!(t->pp_c = make_group(t, COMM_KIND_PP, "pp", ranks, n))) return -1;
  if (g->pp > 1 && (g->pp_rank == 0 || g->pp_rank == g->pp - 1)) {
    ranks[0] = model_grid_rank(g, g->dp_rank, 0, g->cp_rank, g->tp_rank);
    ranks[1] = model_grid_rank(g, g->dp_rank, g->pp - 1, g->cp_rank, g->tp_rank);
    if (!(t->embed_c = make_group(t, COMM_KIND_EMBED, "embed", ranks, 2))) return -1;
  }
  if (g->cp > 1) {
    n = 0;
    for (int k = 0; k < g->cp; k++)
      ranks[n++] = model_grid_rank(g, g->dp_rank, g->pp_rank, k, g->tp_rank);
    if (!(t->cp_c = make_group(t, COMM_KIND_CP, "cp", ranks, n))) return -1;
  }
  /* experts: EP groups of consecutive DP ranks, EDP groups of the DP ranks with the same
   * place in their EP group (README: the rank grid) */
  if (t->cfg.experts > 0 && g->ep > 1) {
    n = 0;
    for (int k = 0; k < g->ep; k++)
      ranks[n++] = model_grid_rank(g, g->edp_rank * g->ep + k, g->pp_rank, g->cp_rank, g->tp_rank);
    if (!(t->ep_c = make_group(t, COMM_KIND_EP, "ep", ranks, n))) return -1;
  }
  if (t->cfg.experts > 0 && g->dp / g->ep > 1) {
    n = 0;
    for (int k = 0; k < g->dp / g->ep; k++)
      ranks[n++] = model_grid_rank(g, k * g->ep + g->ep_rank, g->pp_rank, g->cp_rank, g->tp_rank);
    if (!(t->edp_c = make_group(t, COMM_KIND_EDP, "edp", ranks, n))) return -1;
  }
  return 0;
}

/* --activations: fp32 or bf16 as asked (refused when the device cannot); auto: what the
 * device's backend asks for (dev_auto_activation_dtype: bf16 where it computes its GEMMs in
 * bf16 anyway, CUDA in bf16 precision), else fp32. */
static int set_activations(trainer *t) {
  char e[256];
  const char *want = t->cfg.activations;
  if (!strcmp(want, "auto")) {
    if (dev_auto_activation_dtype(t->dev) == DEV_BF16 &&
        dev_set_activation_dtype(t->dev, DEV_BF16, e, sizeof e) == 0)
      return 0;
    return dev_set_activation_dtype(t->dev, DEV_F32, e, sizeof e) == 0 ? 0 : fail(t, "%s", e);
  }
  dev_dtype dt = !strcmp(want, "bf16") ? DEV_BF16 : DEV_F32;
  if (dev_set_activation_dtype(t->dev, dt, e, sizeof e) != 0) {
    char msg[320];
    snprintf(msg, sizeof msg, "--activations %s: %s", want, e);
    return fail(t, "%s", msg);
  }
  return 0;
}

static size_t rss_now(void);

static int setup(trainer *t) {
  char e[512];
  train_config *c = &t->cfg;
  t->rss_baseline = rss_now();
  model_grid_of(&t->g, c->world, c->dp, c->tp, c->pp, c->cp, t->env.rank);
  if (c->experts > 0) {
    t->g.ep = c->ep;
    t->g.ep_rank = t->g.dp_rank % c->ep;
    t->g.edp_rank = t->g.dp_rank / c->ep;
  }
  t->dev = dev_open(c->backend, e, sizeof e);
  if (!t->dev) return fail(t, "%s", e);
  t->o = dev_get_ops(t->dev);
  if (set_activations(t) != 0) return -1;
  t->compute = t->o->stream_create(t->dev, "compute");
  t->dp_stream = t->o->stream_create(t->dev, "comm dp");
  t->pp_send = t->o->stream_create(t->dev, "comm pp send");
  t->pp_recv = t->o->stream_create(t->dev, "comm pp recv");
  if (!t->compute || !t->dp_stream || !t->pp_send || !t->pp_recv)
    return fail(t, "%s", "cannot start the stream threads");
  if (c->cp > 1) {
    const char *missing = NULL;
    if (!dev_ops_support_cp(t->o, &missing)) {
      snprintf(t->err, sizeof t->err,
               "--cp %d: the %s backend has no %s operation yet, so context parallelism "
               "(ring attention) needs a backend that has it",
               c->cp, t->o->backend_name, missing);
      return -1;
    }
    t->cp_send = t->o->stream_create(t->dev, "comm cp send");
    t->cp_recv = t->o->stream_create(t->dev, "comm cp recv");
    if (!t->cp_send || !t->cp_recv) return fail(t, "%s", "cannot start the stream threads");
  }
  train_debug_delay(t, DELAY_START);
  comm_job_options jo = {.rank = t->env.rank,
                         .world = t->env.world,
                         .path = t->env.shm_path,
                         .fd = t->env.shm_fd,
                         .create = t->env.create_shm,
                         .timeout_s = t->env.comm_timeout_s,
                         .not_before = t->env.shm_not_before};
  t->job = comm_job_open(&jo, e, sizeof e);
  if (!t->job) return fail(t, "%s", e);
  dev_set_progress_hook(t->dev, progress_hook, t->job);
  t->peak_flops = peak_flops_of(c, t->dev);
  if (comm_dev_job_open(t->dev, t->env.shm_path, t->env.rank, t->env.world, t->env.comm_timeout_s,
                        &t->dev_job, e, sizeof e) != 0)
    return fail(t, "%s", e);
  if (setup_groups(t) != 0) return -1;
  t->M = c->microbatches;
  t->mb_size = config_micro_batch(c);
  t->V = c->schedule == SCHED_INTERLEAVED ? c->virtual_stages : 1;
  /* interleaved: every (chunk, micro-batch) has its own slot */
  t->nslots = t->V > 1 ? t->M : schedule_slots(c->schedule, t->g.pp_rank, c->pp, t->M);
  model_cp_links cp_links = {t->cp_c, t->cp_send, t->cp_recv};
  if (t->V > 1) {
    t->more = calloc((size_t)t->V - 1, sizeof(model));
    t->more_adam = calloc(2 * ((size_t)t->V - 1), sizeof(float *));
    t->ckpt_more = calloc((size_t)t->V - 1, sizeof(ckpt_chunk));
    if (!t->more || !t->more_adam || !t->ckpt_more) return fail(t, "%s", "out of memory");
  }
  for (int j = 0; j < t->V; j++) {
    model_grid cg = chunk_grid(t, j);
    model *mc = chunk_model(t, j);
    if (model_create(mc, c, &cg, t->dev, t->compute, t->tp_c, c->cp > 1 ? &cp_links : NULL, t->ep_c,
                     t->mb_size, t->nslots, e, sizeof e) != 0)
      return fail(t, "%s", e);
    if (model_init_params(mc, c->seed, e, sizeof e) != 0) return fail(t, "%s", e);
    if (j > 0) {
      size_t state = c->zero ? mc->nfloats_padded / (size_t)t->reduce_n : mc->nfloats_padded;
      for (int k = 0; k < 2; k++)
        if (!(t->more_adam[2 * (j - 1) + k] = t->o->alloc(t->dev, state * 4)))
          return fail(t, "%s", "out of device memory for the optimizer state");
    }
  }
  /* the pipeline executor: the schedule, the per-slot events, this rank's stage operations */
  pipeline_setup ps = {.dev = t->dev,
                       .o = t->o,
                       .compute = t->compute,
                       .send = t->pp_send,
                       .recv = t->pp_recv,
                       .pp_c = t->pp_c,
                       .pp_rank = t->g.pp_rank,
                       .pp = c->pp,
                       .schedule = c->schedule,
                       .V = t->V,
                       .M = t->M,
                       .nslots = t->nslots};
  pipeline_stage_ops ops = train_stage_ops(t);
  if (pipeline_init(&t->pipe, &ps, &ops, e, sizeof e) != 0) return fail(t, "%s", e);
  if (grad_sync_init(t) != 0) /* buckets, the optimizer shard, ZeRO-2/3 */
    return -1;
  size_t state_begin, state; /* chunk 0's AdamW moments: the optimizer shard */
  grad_sync_optimizer_shard(t, &state_begin, &state);
  t->adam_m = t->o->alloc(t->dev, state * 4);
  t->adam_v = t->o->alloc(t->dev, state * 4);
  t->stat = t->o->alloc(t->dev, 4 * sizeof(double));
  if (!t->adam_m || !t->adam_v || !t->stat)
    return fail(t, "%s", "out of device memory for the optimizer state");
  if (train_moe_setup(t) != 0) return -1;
  size_t N = (size_t)t->m.N;
  t->host_tokens = malloc(sizeof(int) * N * (size_t)t->M);
  t->host_targets = malloc(sizeof(int) * N * (size_t)t->M);
  if (!t->host_tokens || !t->host_targets) return fail(t, "%s", "out of memory");
  if (c->cp > 1) {
    size_t whole = (size_t)t->mb_size * c->seq;
    t->host_seq_tokens = malloc(sizeof(int) * whole);
    t->host_seq_targets = malloc(sizeof(int) * whole);
    if (!t->host_seq_tokens || !t->host_seq_targets) return fail(t, "%s", "out of memory");
  }
  return 0;
}

/* ---- tracing ------------------------------------------------------------------------------- */

/* `memory` again at the end of tracing, when the measured peak is known; the
 * other keys once at the start. */
static void write_memory_metadata(trainer *t);

static void write_metadata(trainer *t) {
  train_config *c = &t->cfg;
  model_grid *g = &t->g;
  char buf[1024];
  snprintf(buf, sizeof buf,
           "{\"world\":%d,\"dp\":%d,\"tp\":%d,\"pp\":%d,\"cp\":%d,\"rank\":%d,\"dp_rank\":%d,"
           "\"tp_rank\":%d,\"pp_rank\":%d,\"cp_rank\":%d}",
           g->world, g->dp, g->tp, g->pp, g->cp, g->rank, g->dp_rank, g->tp_rank, g->pp_rank,
           g->cp_rank);
  stepscope_metadata_set(TM_KEY_LAYOUT, buf);
  if (c->experts > 0) {
    /* the expert-parallel place of this rank (README: the rank grid) */
    snprintf(buf, sizeof buf,
             "{\"experts\":%d,\"top_k\":%d,\"moe_every\":%d,\"ep\":%d,\"ep_rank\":%d,"
             "\"edp\":%d,\"edp_rank\":%d,\"experts_per_rank\":%d,\"capacity\":%d,"
             "\"aux_loss_coef\":%g,\"total_params\":%zu,\"active_params\":%zu}",
             c->experts, c->top_k, c->moe_every, g->ep, g->ep_rank, g->dp / g->ep, g->edp_rank,
             c->experts / g->ep, t->m.moe.capacity, c->aux_loss_coef, model_total_params(c),
             model_active_params(c));
    stepscope_metadata_set(TM_KEY_MOE, buf);
  }
  double bubble = c->pp == 1 ? 0.0
                  : t->V > 1 ? schedule_bubble_interleaved(c->pp, t->V, c->microbatches)
                             : schedule_bubble(c->pp, c->microbatches);
  snprintf(buf, sizeof buf,
           "{\"name\":\"%s\",\"stages\":%d,\"microbatches\":%d,\"virtual_stages\":%d,"
           "\"bubble_theory\":%.6f}",
           c->pp == 1                  ? "none"
           : t->V > 1                  ? "interleaved"
           : c->schedule == SCHED_AFAB ? "afab"
                                       : "1f1b",
           c->pp, c->microbatches, t->V, bubble);
  stepscope_metadata_set(TM_KEY_SCHEDULE, buf);
  snprintf(buf, sizeof buf,
           "{\"model_flops_per_step\":%.6g,\"hardware_flops_per_step\":%.6g,"
           "\"total_params\":%zu,\"active_params\":%zu,"
           "\"tokens_per_step\":%d,\"peak_flops_per_device\":%.6g,\"world\":%d}",
           train_model_flops_per_step(c), train_hardware_flops_per_step(c), model_total_params(c),
           model_active_params(c), c->batch * c->seq, t->peak_flops, c->world);
  stepscope_metadata_set(TM_KEY_FLOPS, buf);
  write_memory_metadata(t);
}

/* This rank's layout as the memory model takes it (memory_model.h). */
static mm_layout memory_layout_of(const trainer *t) {
  const train_config *c = &t->cfg;
  mm_layout l = model_shape(c);
  l.dp = c->dp;
  l.tp = c->tp;
  l.pp = c->pp;
  l.sp = c->sp;
  l.schedule = t->V > 1                    ? MM_SCHED_INTERLEAVED
               : c->schedule == SCHED_AFAB ? MM_SCHED_AFAB
                                           : MM_SCHED_1F1B;
  l.virtual_stages = t->V;
  l.microbatches = c->microbatches;
  l.micro_batch = config_micro_batch(c);
  l.zero = c->zero;
  l.act_bytes = (int)dev_dtype_bytes(dev_activation_dtype(t->dev));
  l.fused_attention = c->cp == 1 && dev_attention_fused(t->dev, l.micro_batch, c->seq,
                                                        c->hidden / c->tp, c->heads / c->tp);
  l.bucket_mb = c->bucket_mb;
  l.ep = c->ep;
  /* bf16 copies of the GEMM weights: the model's working copy (model_gemm.c) or, on CUDA in bf16
   * precision (auto activations bf16) without one, the kernels' cache (kernels/cuda/matmul.cu) */
  l.gemm_weights_bf16 = model_gemm_weights_bf16(c, t->dev);
  l.bf16_weight_copies = l.gemm_weights_bf16 || dev_auto_activation_dtype(t->dev) == DEV_BF16;
  return l;
}

/* The process's resident memory now (Linux /proc/self/statm), 0 if unknown. */
static size_t rss_now(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    fclose(f);
  }
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* "memory": the memory model's prediction for this rank (memory_model.c: the one
 * implementation the planner uses too) beside what was measured: the device API's peak of
 * live allocations (the same buffers, counted as they are made; on CUDA the driver's view,
 * device_cuda.h), the process's peak RSS and its RSS before the trainer allocated anything
 * (the runtime baseline: program, libraries, the communicator's shared segment mapping,
 * thread stacks, the data). */
static void write_memory_metadata(trainer *t) {
  train_config *c = &t->cfg;
  char buf[768];
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  long long rss_peak = (long long)ru.ru_maxrss * 1024;
  const char *measured_source = "device-allocations";
  long long measured = (long long)dev_measured_peak(t->dev, &measured_source);
  mm_layout l = memory_layout_of(t);
  mm_breakdown p;
  char err[160];
  if (mm_rank_memory(&l, t->g.pp_rank, &p, err, sizeof err) != 0) {
    fprintf(stderr, "rank %d: warning: no memory prediction: %s\n", t->env.rank, err);
    memset(&p, 0, sizeof p);
  }
  snprintf(buf, sizeof buf,
           "{\"predicted\":{\"parameters\":%zu,\"gradients\":%zu,\"optimizer\":%zu,"
           "\"activations\":%zu,\"other\":%zu,\"steady\":%zu,\"total\":%zu},"
           "\"zero\":%d,\"activation_dtype\":\"%s\",\"measured_peak_bytes\":%lld,"
           "\"measured_source\":\"%s\",\"rss_peak_bytes\":%lld,\"runtime_baseline_bytes\":%zu}",
           p.parameters, p.gradients, p.optimizer, p.activations, p.other, p.steady, p.peak,
           c->zero, dev_dtype_name(dev_activation_dtype(t->dev)), measured, measured_source,
           rss_peak, t->rss_baseline);
  stepscope_metadata_set(TM_KEY_MEMORY, buf);
}

#ifdef STEPSCOPE_TRAINER_GPU_TRACE
#include "stepscope_gpu.h"

/* Whether the GPU tracer records this run's CUDA activity (CUDA backend only). */
static int gpu_trace_wanted(trainer *t) {
  return strcmp(dev_get_ops(t->dev)->backend_name, "cuda") == 0;
}
#endif

/* Creates the directories leading to `path` (like mkdir -p of its dirname);
 * failures are left to the fopen that follows, which reports them. */
static void make_parent_dirs(const char *path) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return;
  *slash = '\0';
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(dir, 0755);
    *p = '/';
  }
  mkdir(dir, 0755);
}

static int trace_stop(trainer *t);

/* Flushes what rank 0 printed: -1 (t->err set) when it cannot be written (a full disk,
 * a closed pipe): the numbers are the run's result, so losing them is a failure. */
static int flush_stdout(trainer *t) {
  if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
  snprintf(t->err, sizeof t->err, "cannot write the standard output: %s", strerror(errno));
  return -1;
}

/* t->err for a --log that cannot be written; -1. */
static int log_failed(trainer *t) {
  snprintf(t->err, sizeof t->err, "--log %s: cannot write: %s", t->cfg.log, strerror(errno));
  return -1;
}

/* A step whose loss or gradient norm is not a finite number (NaN, inf) has diverged:
 * the weights it updated are lost, and every later step would be too. -1 with t->err (the
 * step is neither printed nor logged: the log stays JSON); every rank sees the same sums,
 * so all stop at the same step. */
static int check_finite(trainer *t, int step, double loss, double norm) {
  if (isfinite(loss) && isfinite(norm)) return 0;
  char l[32] = "NaN", g[32] = "NaN"; /* not printf's "-nan" */
  if (!isnan(loss)) snprintf(l, sizeof l, "%g", loss);
  if (!isnan(norm)) snprintf(g, sizeof g, "%g", norm);
  snprintf(t->err, sizeof t->err,
           "step %d: the loss is %s and the gradient norm %s: training diverged (not a finite "
           "number), so the run stops; try a lower --lr (now %g)",
           step, l, g, t->cfg.lr);
  return -1;
}

/* Rank 0's line for a step (unless --quiet) and its --log record. -1 (t->err set) when
 * either cannot be written. */
static int report_step(trainer *t, int step, double loss, double norm, double dt) {
  const train_config *c = &t->cfg;
  double tokens = (double)c->batch * c->seq;
  double mfu = train_model_flops_per_step(c) / (dt * t->peak_flops * c->world);
  if (!c->quiet) {
    printf("step %4d | loss %.6f | norm %.4f | lr %.3e | %8.1f ms | %9.0f tok/s | MFU "
           "%.2f%%\n",
           step, loss, norm, train_lr_at(c, step), dt * 1e3, tokens / dt, mfu * 100);
    if (flush_stdout(t) != 0) return -1;
  }
  if (!t->log) return 0;
  fprintf(t->log,
          "{\"step\":%d,\"loss\":%.9g,\"step_ms\":%.3f,\"tokens_per_s\":%.1f,\"mfu\":%.6g,"
          "\"grad_norm\":%.6g,\"lr\":%.6g",
          step, loss, dt * 1e3, tokens / dt, mfu, norm, train_lr_at(c, step));
  if (c->experts > 0) fprintf(t->log, ",\"aux_loss\":%.9g", t->aux_loss);
  fprintf(t->log, "}\n");
  return fflush(t->log) == 0 && !ferror(t->log) ? 0 : log_failed(t);
}

/* Starts this rank's trace. -1 (t->err set) when it cannot be written: the user asked
 * for it, so the run stops rather than train untraced. */
static int trace_start(trainer *t) {
  char *cfg_json = config_to_json(&t->cfg);
  stepscope_start_options so;
  memset(&so, 0, sizeof so);
  so.run_dir = t->cfg.trace;
  so.rank = t->env.rank;
  so.world_size = t->env.world;
  so.local_rank = t->env.local_rank;
  so.producer = "stepscope-train " STEPSCOPE_VERSION_STRING;
  char devjson[128];
  snprintf(devjson, sizeof devjson, "{\"backend\":\"%s\"}", dev_get_ops(t->dev)->backend_name);
  so.device_name = dev_name(t->dev);
  so.device_json = devjson;
  so.config_json = cfg_json;
  stepscope_error e;
  memset(&e, 0, sizeof e);
  int rc = 0;
  if (stepscope_start(&so, &e) != 0) {
    snprintf(t->err, sizeof t->err, "--trace: cannot write the trace: %s", e.message);
    rc = -1;
  } else {
    t->tracing = 1;
#ifdef STEPSCOPE_TRAINER_GPU_TRACE
    /* CUPTI first: the device names its streams under CUPTI's stream ids. */
    if (gpu_trace_wanted(t) && stepscope_gpu_start() != 0)
      fprintf(stderr, "rank %d: warning: GPU activity will not be traced\n", t->env.rank);
#endif
    dev_trace_started(t->dev);
    stepscope_stream_declare(stepscope_thread_id(), STEPSCOPE_STREAM_HOST_THREAD, 0,
                             "host (training loop)");
    write_metadata(t);
  }
  free(cfg_json);
  return rc;
}

/* Writes the measured memory, flushes the GPU tracer's buffers into the
 * trace, then closes it. -1 (t->err set) when the trace could not be written whole (the
 * tracer said why, e.g. a full disk). */
static int trace_stop(trainer *t) {
  write_memory_metadata(t);
#ifdef STEPSCOPE_TRAINER_GPU_TRACE
  if (gpu_trace_wanted(t)) {
    stepscope_gpu_stop();
    /* CUPTI's last buffers declared their streams as "stream N": name them again. */
    dev_trace_started(t->dev);
  }
#endif
  int rc = stepscope_stop();
  t->tracing = 0;
  if (rc != 0)
    snprintf(t->err, sizeof t->err, "--trace %s: the trace could not be written whole (%s)",
             t->cfg.trace, stepscope_status_name(rc));
  return rc != 0 ? -1 : 0;
}

/* ---- checkpoints (checkpoint.c) ------------------------------------------------------------ */

static ckpt_rank_state ckpt_state_of(trainer *t) {
  ckpt_rank_state s = {
      t->dev,    t->o,         t->compute, t->world_c,
      &t->cfg,   &t->g,        t->m.param, t->m.nfloats_padded,
      NULL,      NULL,         NULL,       NULL, /* ZeRO-3's parameter stream: below */
      t->adam_m, t->adam_v,    0, /* state_floats, state_offset: grad_sync_optimizer_shard */
      0,         t->ckpt_more, t->V - 1};
  if (!t->m.param) /* no flat parameter buffer (ZeRO-3, sharded masters): streamed */
    grad_sync_ckpt_stream(t, &s);
  grad_sync_optimizer_shard(t, &s.state_offset, &s.state_floats);
  /* the expert buffer rides as one more chunk (train_moe_setup: V == 1) */
  if (train_moe_ckpt_chunk(t, t->ckpt_more)) s.nmore = 1;
  for (int j = 1; j < t->V; j++) { /* interleaved: the other chunks (zero 0 or 1; streamed) */
    model *mc = chunk_model(t, j);
    size_t lo = 0, hi = mc->nfloats_padded;
    if (t->cfg.zero) chunk_slice(t, j, &lo, &hi);
    t->ckpt_more[j - 1] = (ckpt_chunk){mc->param,
                                       mc->nfloats_padded,
                                       t->more_adam[2 * (j - 1)],
                                       t->more_adam[2 * (j - 1) + 1],
                                       hi - lo,
                                       lo};
  }
  return s;
}

/* After `done` completed steps (every stream idle). */
static int save_checkpoint(trainer *t, int done) {
  ckpt_rank_state s = ckpt_state_of(t);
  if (!t->m.param) grad_sync_ckpt_stream_begin(t);
  size_t bytes = 0;
  if (stepscope_active()) stepscope_range_push("checkpoint", NULL);
  double t0 = now_s();
  int rc = ckpt_save(&s, done, &bytes, t->err, sizeof t->err);
  double dt = now_s() - t0;
  pop_range();
  if (rc == 0 && t->env.rank == 0 && !t->cfg.quiet) {
    printf("checkpoint: step %d written to %s/step-%08d (rank 0's shard %.2f MiB, %.1f ms)\n", done,
           t->cfg.checkpoint_dir, done, bytes / 1048576.0, dt * 1e3);
    fflush(stdout);
  }
  return rc;
}

static int resume_checkpoint(trainer *t, int *start_step) {
  ckpt_rank_state s = ckpt_state_of(t);
  char note[512];
  int rc = ckpt_load_latest(&s, start_step, note, sizeof note, t->err, sizeof t->err);
  if (rc != 0) return -1;
  train_refresh_gemm_weights(t); /* the restored parameters' working copies */
  if (t->env.rank == 0) {
    if (note[0]) fprintf(stderr, "rank 0: note: %s\n", note);
    if (*start_step >= t->cfg.steps)
      printf("resumed from %s/step-%08d: already at --steps %d, nothing to do\n",
             t->cfg.checkpoint_dir, *start_step, t->cfg.steps);
    else if (!t->cfg.quiet)
      printf("resumed from %s/step-%08d: continuing at step %d of %d\n", t->cfg.checkpoint_dir,
             *start_step, *start_step, t->cfg.steps);
    fflush(stdout);
  }
  return 0;
}

/* A host copy of nfloats device parameters (NULL after fail()). */
static float *params_on_host(trainer *t, const float *param, size_t nfloats) {
  float *host = malloc(nfloats * 4);
  if (!host) {
    fail(t, "%s", "out of memory");
    return NULL;
  }
  t->o->copy_to_host(t->compute, host, param, nfloats * 4);
  if (t->o->stream_synchronize(t->compute) != 0) {
    fail(t, "%s", dev_last_error(t->dev));
    free(host);
    return NULL;
  }
  return host;
}

/* The dump's lines of one tensor: "name layer index value", indices from `first`. */
static void dump_values(FILE *f, const char *name, int layer, size_t first, const float *v,
                        size_t n) {
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%s %d %zu %.9g\n", name, layer, first + i, v[i]);
}

/* --debug-dump-params DIR: this rank's parameters (every chunk) as text lines
 * "name layer index value", for tests that compare final weights across layouts. Under
 * --zero 3 the rank holds only pieces, so nothing is written there. */
static int dump_params(trainer *t) {
  const char *dir = t->cfg.debug_dump_params;
  mkdir(dir, 0755);
  char path[600];
  snprintf(path, sizeof path, "%s/rank-%05d.params", dir, t->env.rank);
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(t->err, sizeof t->err, "--debug-dump-params: cannot write %s: %s", path,
             strerror(errno));
    return -1;
  }
  int rc = 0;
  for (int j = 0; j < t->V && rc == 0; j++) {
    model *mc = chunk_model(t, j);
    if (!mc->param && !mc->fp32_w) continue;
    float *host = mc->param ? params_on_host(t, mc->param, mc->nfloats_padded)
                            : grad_sync_master_params(t, j); /* sharded masters */
    if (!host) {
      rc = -1;
      break;
    }
    for (int k = 0; k < mc->nparams; k++) {
      const param_info *p = &mc->params[k];
      dump_values(f, p->name, p->layer, 0, host + p->offset, p->count);
    }
    free(host);
    /* the experts this rank holds, indexed in the layer's whole [E,...] tensors (all TP
     * ranks hold the same copy) */
    const moe_state *q = &mc->moe;
    if (q->nmoe == 0 || t->g.tp_rank != 0) continue;
    if (!(host = params_on_host(t, q->param, q->nfloats))) {
      rc = -1;
      break;
    }
    for (int k = 0; k < q->nparams; k++) {
      const moe_param *p = &q->params[k];
      dump_values(f, p->name, p->layer, p->global_first, host + p->offset, p->count);
    }
    free(host);
  }
  if (fclose(f) != 0 && rc == 0) {
    snprintf(t->err, sizeof t->err, "--debug-dump-params: cannot write %s", path);
    rc = -1;
  }
  return rc;
}

static void cleanup(trainer *t) {
  if (t->o) {
    const dev_ops *o = t->o;
    if (t->compute) {
      o->stream_synchronize(t->compute);
      o->stream_synchronize(t->dp_stream);
      o->stream_synchronize(t->pp_send);
      o->stream_synchronize(t->pp_recv);
      if (t->cp_send) {
        o->stream_synchronize(t->cp_send);
        o->stream_synchronize(t->cp_recv);
      }
    }
    pipeline_free(&t->pipe);
    model_destroy(&t->m);
    for (int j = 1; t->more && j < t->V; j++)
      model_destroy(&t->more[j - 1]);
    for (int j = 0; t->more_adam && j < 2 * (t->V - 1); j++)
      o->free(t->dev, t->more_adam[j]);
    o->free(t->dev, t->adam_m);
    o->free(t->dev, t->adam_v);
    o->free(t->dev, t->stat);
  }
  grad_sync_free(t);
  train_moe_free(t);
  comm_destroy(t->world_c);
  comm_destroy(t->dp_c);
  comm_destroy(t->tp_c);
  comm_destroy(t->pp_c);
  comm_destroy(t->embed_c);
  comm_destroy(t->cp_c);
  comm_destroy(t->ep_c);
  comm_destroy(t->edp_c);
  comm_dev_job_close(t->dev_job);
  dev_close(t->dev); /* joins the stream threads (drained above) */
  comm_job_close(t->job);
  free(t->more);
  free(t->more_adam);
  free(t->ckpt_more);
  free(t->host_tokens);
  free(t->host_targets);
  free(t->host_seq_tokens);
  free(t->host_seq_targets);
  train_data_close(t->data);
  if (t->log) fclose(t->log);
}

int train_rank_run(const train_config *cfg_in, const rank_env *env) {
  trainer *t = calloc(1, sizeof *t);
  if (!t) {
    fprintf(stderr, "rank %d: error: out of memory\n", env->rank);
    return 1;
  }
  t->cfg = *cfg_in;
  t->env = *env;
  train_config *c = &t->cfg;
  int rc = 0;
  char e[512];
  t->data = train_data_open(c->data, c->bpe_merges, c->seq, c->seed, c->batch, e, sizeof e);
  if (!t->data) {
    fail(t, "%s", e);
    rc = -1;
  }
  if (rc == 0 && !c->vocab_given) c->vocab = train_data_vocab(t->data);
  if (rc == 0 && c->vocab < train_data_vocab(t->data)) {
    snprintf(t->err, sizeof t->err, "--vocab %d is smaller than the data's vocabulary %d", c->vocab,
             train_data_vocab(t->data));
    rc = -1;
  }
  if (rc == 0) rc = setup(t);
  int is_printer = env->rank == 0;
  if (rc == 0 && is_printer && !c->quiet) {
    printf("stepscope-train: %s model, %d layers, hidden %d, %d heads, seq %d, vocab %d, "
           "%.3f M parameters\n",
           c->model, c->layers, c->hidden, c->heads, c->seq, c->vocab, model_total_params(c) / 1e6);
    if (c->experts > 0)
      printf("stepscope-train: %d experts, top-%d, every %d block(s), ep %d: %.3f M "
             "parameters active per token (MFU counts these)\n",
             c->experts, c->top_k, c->moe_every, c->ep, model_active_params(c) / 1e6);
    printf("stepscope-train: world %d = dp %d x pp %d x cp %d x tp %d%s, schedule %s, %d "
           "micro-batches of %d, global batch %d, zero %d, recompute %s, data: %s\n",
           c->world, c->dp, c->pp, c->cp, c->tp, c->sp ? " (sp)" : "",
           c->schedule == SCHED_AFAB   ? "afab"
           : c->schedule == SCHED_1F1B ? "1f1b"
                                       : "interleaved",
           c->microbatches, t->mb_size, c->batch, c->zero,
           c->recompute == RECOMPUTE_NONE   ? "none"
           : c->recompute == RECOMPUTE_FULL ? "full"
                                            : "selective",
           train_data_describe(t->data));
    rc = flush_stdout(t);
  }
  if (rc == 0 && is_printer && c->log[0]) {
    make_parent_dirs(c->log); /* e.g. --log RUN/train.jsonl beside --trace RUN */
    t->log = fopen(c->log, c->resume ? "a" : "w"); /* a resumed run continues the log */
    if (!t->log) {
      snprintf(t->err, sizeof t->err, "--log %s: cannot open for writing: %s", c->log,
               strerror(errno));
      rc = -1;
    }
  }
  int start_step = 0;
  if (rc == 0 && c->resume) rc = resume_checkpoint(t, &start_step);
  if (rc == 0 && c->trace[0] && c->profile_first < 0) rc = trace_start(t);
  double last_loss = NAN;
  for (int step = start_step; rc == 0 && step < c->steps; step++) {
    int profile_from = c->profile_first > start_step ? c->profile_first : start_step;
    if (c->trace[0] && step == profile_from && step <= c->profile_last && !t->tracing &&
        (rc = trace_start(t)) != 0)
      break;
    if (step == c->debug_die_step && env->rank == c->debug_die_rank) {
      fflush(stdout);
      raise(SIGKILL);
    }
    if (step == c->debug_hang_step && env->rank == c->debug_hang_rank)
      for (;;)
        pause();
    comm_job_heartbeat(t->job);
    if (t->tracing) stepscope_step_begin((uint64_t)step);
    double t0 = now_s(), loss = 0, norm = 0;
    rc = train_run_step(t, step, &loss, &norm);
    double dt = now_s() - t0;
    if (t->tracing) stepscope_step_end();
    if (rc != 0 || (rc = check_finite(t, step, loss, norm)) != 0) break;
    last_loss = loss;
    if (t->tracing) {
      stepscope_counter_now("loss", 0, loss);
      stepscope_counter_now("grad_norm", 0, norm);
      stepscope_counter_now("tokens_per_s", 0, (double)c->batch * c->seq / dt);
    }
    if (is_printer && (rc = report_step(t, step, loss, norm, dt)) != 0) break;
    if (t->tracing && c->profile_last >= 0 && step >= c->profile_last &&
        (rc = trace_stop(t)) != 0) /* the measured peak so far goes in with it */
      break;
    if (c->checkpoint_dir[0] &&
        ((c->checkpoint_every > 0 && (step + 1) % c->checkpoint_every == 0) ||
         step + 1 == c->steps))
      rc = save_checkpoint(t, step + 1);
  }
  if (t->tracing && trace_stop(t) != 0) rc = -1;
  if (rc == 0 && c->debug_dump_params[0]) rc = dump_params(t);
  if (rc == 0 && is_printer && !isnan(last_loss)) printf("final loss %.6f\n", last_loss);
  if (rc == 0 && is_printer) rc = flush_stdout(t);
  if (rc == 0 && t->log && fclose(t->log) != 0) rc = log_failed(t);
  if (rc == 0) t->log = NULL; /* closed */
  if (rc != 0) {
    train_debug_delay(t, DELAY_ERROR);
    const char *why = t->job ? comm_job_abort_reason(t->job) : "";
    fprintf(stderr, "rank %d: error: %s\n", env->rank, t->err[0] ? t->err : why);
    if (t->job) comm_job_abort(t->job, t->err);
  }
  fflush(stdout);
  cleanup(t);
  if (rc == 0 && env->remove_shm) unlink(env->shm_path);
  free(t);
  return rc == 0 ? 0 : 1;
}
