/*
 * train.c — one rank's training loop (see train.h).
 *
 * How a step runs on a rank (all of it enqueued on streams; the host waits once
 * per step, to read the loss and the gradient norm):
 *   1. zero the gradients and the loss accumulator; load this DP rank's share of
 *      the global batch into host buffers (one per micro-batch);
 *   2. walk the stage's pipeline schedule (schedule.c). A forward receives its
 *      input activation from the previous stage on the "comm pp recv" stream (or
 *      embeds the tokens on the first stage) and sends its output to the next on
 *      "comm pp send"; a backward receives the output gradient from the next
 *      stage (or starts from the loss on the last stage) and sends the input
 *      gradient back. Sends and receives sit on separate streams because they
 *      cross (activations one way, gradients the other) and a transfer larger
 *      than the mailbox would otherwise deadlock. Per-slot events order these
 *      streams with compute, so p2p overlaps compute;
 *   3. during the last micro-batch's backward, as soon as the gradients of a
 *      bucket are final, the bucket is all-reduced over the gradient group (DP,
 *      times CP under context parallelism: weights are replicated over both) on the
 *      "comm dp" stream (overlapping the rest of backward; --overlap off issues
 *      every bucket after backward instead);
 *   4. the tied embedding's gradient is summed over the first and last stage;
 *      loss and squared gradient norm are summed over the world in one f64
 *      all-reduce; the host reads them, computes the clip factor and enqueues
 *      AdamW on the rank's shard (the whole buffer without ZeRO; with --zero 1
 *      its 1/(dp x cp) slice, followed by an all-gather of the parameters over
 *      DP x CP).
 * ZeRO-2/3 (--zero 2/3; zero.h for the cut): instead of step 3, every micro-batch's
 * gradients go through two rotating bucket buffers that are reduce-scattered into the
 * rank's gradient shard as backward finishes each bucket; AdamW runs on the shard; ZeRO-2
 * then all-gathers the parameters, ZeRO-3 keeps only its parameter pieces and gathers a
 * bucket before the model uses it (zero3_before_unit, with a prefetch of the next).
 * The gradient norm counts every parameter once: each member of the gradient
 * group its 1/(dp x cp) slice of the flat buffer, TP-replicated parameters only
 * on TP rank 0, the last stage's copy of the tied embedding not at all.
 * Interleaved 1F1B (--schedule interleaved --virtual-stages V): a rank holds V models
 * (chunks), chunk j being the ordinary stage model of virtual stage j*pp + pp_rank in a
 * pipeline of pp*V stages; the schedule names the chunk of every item, transfers go to the
 * next (previous) rank for every chunk transition (rank pp-1's chunk j feeds rank 0's chunk
 * j+1), every (chunk, micro-batch) has its own activation slot and events, and chunk 0's
 * gradient buckets are all-reduced as usual while the other chunks' whole gradient buffers
 * are all-reduced after the pipeline flush. With --zero 1 each chunk's AdamW state is this
 * rank's slice of it (chunk_slice) and every chunk is all-gathered after the optimizer;
 * CP and checkpoints (every chunk in the shard) work as for one chunk; ZeRO-2/3 are refused.
 * Context parallelism (--cp) lives in the model (ring_attention.c); here it only
 * adds the CP group and its two streams, the dp x cp gradient group and the
 * choice of each CP rank's chunks of the sequences it loads.
 */
#include "train.h"

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
#include "schedule.h"
#include "stepscope.h"
#include "train_data.h"
#include "zero.h"

#ifdef STEPSCOPE_TRAINER_HAVE_CUDA
#include "comm_nccl.h"
#include "device_cuda.h"
#endif

typedef struct bucket {
    size_t begin, end; /* floats */
    int ready_unit;    /* launched once this backward unit is done */
    int launched;
    /* --zero 2/3 */
    int embed;  /* the embedding unit's bucket: its own buffers, reduced once per step */
    int slot;   /* rotating gradient buffer (0/1) of the other buckets */
} bucket;

/* --zero 2/3 state (see zero.h for the cut and the README for the memory). */
typedef struct zero_state {
    zero_plan plan;          /* a piece of every bucket per member of the gradient group */
    float *grad_shard;       /* [plan.shard_len] this rank's reduced gradients */
    float *gbuf[2];          /* rotating bucket gradient buffers (each the largest padded bucket) */
    float *gembed;           /* the embedding bucket's gradients, accumulated over micro-batches */
    float *piece_tmp;        /* [plan.max_piece] a reduce-scatter's result before it is added */
    dev_event *ev_gfree[2];  /* gbuf[s] reduced and zeroed: compute may write it again */
    /* ZeRO-3 */
    float *param_shard;      /* [plan.shard_len] the master parameters this rank owns */
    float *pbuf[2];          /* rotating gathered parameter buffers */
    float *pembed;           /* the embedding bucket's parameters, gathered for the whole step */
    int resident[2];         /* bucket gathered (or being gathered) into pbuf[s], -1 none */
    int cur;                 /* pbuf slot of the bucket compute uses now, -1 none */
    int cur_bucket;
    dev_event *ev_pfree, *ev_gathered[2];
    int *bucket_of_unit;     /* unit -> bucket, -1 for an empty unit */
    size_t gbuf_floats, pbuf_floats;
} zero_state;

typedef struct trainer {
    train_config cfg;
    rank_env env;
    model_grid g;
    dev_device *dev;
    const dev_ops *o;
    dev_stream *compute, *dp_stream, *pp_send, *pp_recv;
    dev_stream *cp_send, *cp_recv; /* --cp > 1: ring attention's transfers */
    comm_job *job; /* the shared segment: heartbeats, abort flag, CPU collectives */
#ifdef STEPSCOPE_TRAINER_HAVE_CUDA
    comm_nccl_job *nccl; /* NCCL communicators when the device is a GPU */
#endif
    double peak_flops;   /* per rank, for MFU */
    comm *world_c, *dp_c, *tp_c, *pp_c, *embed_c, *cp_c;
    int reduce_n; /* members of dp_c, the gradient group: dp x cp (weights are replicated over
                   * both; a CP rank's gradients cover only its tokens) */
    int *host_seq_tokens, *host_seq_targets; /* --cp > 1: one micro-batch of whole sequences */
    model m;     /* chunk 0 (the only one without interleaving) */
    int V;       /* model chunks (virtual stages) on this rank */
    model *more; /* chunks 1 .. V-1 */
    float **more_adam; /* [2 (V-1)]: AdamW moments m, v of chunks 1 .. V-1 (ZeRO-1: of this
                        * rank's slice of each, chunk_slice) */
    ckpt_chunk *ckpt_more; /* [V-1]: chunks 1 .. V-1 as checkpoints see them (ckpt_state_of) */
    int cur_chunk; /* the chunk whose backward is being enqueued */
    int nevents;   /* per-slot events of each kind: nslots x V */
    int M, nslots, mb_size;
    sched_item *items;
    dev_event **ev_in_ready, **ev_grad_ready, **ev_out_ready, **ev_din_ready, **ev_slot_free,
        **ev_sent;
    dev_event *ev_bucket, *ev_dp_done, *ev_opt_done, *ev_gather_done;
    bucket *buckets;
    int nbuckets;
    zero_state z;   /* --zero >= 2 */
    int last_mb;    /* the micro-batch being walked backward is the step's last */
    float *adam_m, *adam_v; /* shard-sized */
    size_t shard_begin, shard_end, shard_len;
    double *stat;      /* device: [loss sum, grad norm^2] */
    double host_stat[2];
    int *host_tokens, *host_targets; /* [M][N] */
    train_data *data;
    FILE *log;
    int tracing;
    size_t rss_baseline; /* resident bytes before set-up allocated anything */
    char err[1024];
} trainer;

static void progress_hook(void *arg) { comm_job_heartbeat(arg); }

static model *chunk_model(trainer *t, int j) { return j == 0 ? &t->m : &t->more[j - 1]; }

/* Interleaved chunks 1 .. V-1: this rank's 1/n slice [*lo, *hi) of chunk j's flat buffer over
 * the gradient group, the same cut as chunk 0's ZeRO-1 shard (every chunk is padded to a
 * multiple of dp x cp x 16). Its gradient norm is summed over this slice, and under ZeRO-1 the
 * rank updates only this slice and keeps AdamW moments for it alone. */
static void chunk_slice(trainer *t, int j, size_t *lo, size_t *hi)
{
    size_t len = chunk_model(t, j)->nfloats_padded / (size_t)t->reduce_n;
    *lo = (size_t)comm_rank(t->dp_c) * len;
    *hi = *lo + len;
}

/* The grid a chunk's model sees: virtual stage j*pp + pp_rank of pp*V stages. */
static model_grid chunk_grid(const trainer *t, int j)
{
    model_grid g = t->g;
    g.pp_rank = j * g.pp + g.pp_rank;
    g.pp *= t->V;
    return g;
}

/* ---- FLOPs and memory --------------------------------------------------------------- */

/* Parameters behind the FLOPs: all of them but the position embedding, a lookup that does
 * no multiply-add (nanoGPT's estimate_mfu leaves it out the same way; the token embedding
 * stays because, tied, it is the LM head's matmul; Megatron's formula counts the blocks and
 * the LM head's V x h and no embedding lookup either). */
static double flop_params(const train_config *c)
{
    return (double)model_total_params(c) - (double)c->max_seq * c->hidden;
}

double train_model_flops_per_step(const train_config *c)
{
    double tokens = (double)c->batch * c->seq;
    return 6.0 * flop_params(c) * tokens + 12.0 * c->layers * (double)c->hidden * c->seq * tokens;
}

double train_hardware_flops_per_step(const train_config *c)
{
    double tokens = (double)c->batch * c->seq;
    double extra = 0;
    double C = c->hidden;
    if (c->recompute == RECOMPUTE_FULL) /* one more forward of the blocks only (not the LM
                                         * head, embeddings or final LayerNorm) */
        extra = 2.0 * c->layers * (12.0 * C * C + 13.0 * C) * tokens +
                4.0 * c->layers * C * c->seq * tokens;
    else if (c->recompute == RECOMPUTE_SELECTIVE && c->cp == 1) /* ring attention: no matrix */
        extra = 4.0 * c->layers * (double)c->hidden * c->seq * tokens;
    return train_model_flops_per_step(c) + extra;
}

/* --peak-tflops, else the GPU's dense bf16 peak from the CUDA backend's table
 * (H100 SXM's 989 TFLOP/s when the name is unknown), else the CPU assumption. */
static double peak_flops_of(const train_config *c, dev_device *d)
{
    if (c->peak_tflops > 0)
        return c->peak_tflops * 1e12;
#ifdef STEPSCOPE_TRAINER_HAVE_CUDA
    if (d && dev_is_cuda(d)) {
        double p = dev_cuda_peak_flops_bf16(dev_name(d));
        return p > 0 ? p : 989e12;
    }
#endif
    return 0.1e12;
}

/* ---- setup ------------------------------------------------------------------------------ */

static int fail(trainer *t, const char *fmt, const char *detail)
{
    snprintf(t->err, sizeof t->err, fmt, detail);
    return -1;
}

static comm *make_group(trainer *t, comm_kind kind, const char *name, int *ranks, int n)
{
    char e[256];
    comm *c;
#ifdef STEPSCOPE_TRAINER_HAVE_CUDA
    if (t->nccl)
        c = comm_nccl_group(t->nccl, kind, name, ranks, n, e, sizeof e);
    else
#endif
        c = comm_group(t->job, kind, name, ranks, n, e, sizeof e);
    if (!c)
        fail(t, "%s", e);
    return c;
}

static int setup_groups(trainer *t)
{
    model_grid *g = &t->g;
    int ranks[64], n;
    n = 0;
    for (int r = 0; r < g->world; r++)
        ranks[n++] = r;
    if (!(t->world_c = make_group(t, COMM_KIND_WORLD, "world", ranks, n)))
        return -1;
    /* gradients: every replica of this (stage, TP slice), i.e. all of DP x CP, in
     * rank order (group rank = dp_rank * cp + cp_rank, the ZeRO-1 shard index) */
    n = 0;
    for (int d = 0; d < g->dp; d++)
        for (int k = 0; k < g->cp; k++)
            ranks[n++] = model_grid_rank(g, d, g->pp_rank, k, g->tp_rank);
    if (!(t->dp_c = make_group(t, COMM_KIND_DP, g->cp > 1 ? "dp_cp" : "dp", ranks, n)))
        return -1;
    t->reduce_n = n;
    n = 0;
    for (int k = 0; k < g->tp; k++)
        ranks[n++] = model_grid_rank(g, g->dp_rank, g->pp_rank, g->cp_rank, k);
    if (!(t->tp_c = make_group(t, COMM_KIND_TP, "tp", ranks, n)))
        return -1;
    n = 0;
    for (int p = 0; p < g->pp; p++)
        ranks[n++] = model_grid_rank(g, g->dp_rank, p, g->cp_rank, g->tp_rank);
    if (!(t->pp_c = make_group(t, COMM_KIND_PP, "pp", ranks, n)))
        return -1;
    if (g->pp > 1 && (g->pp_rank == 0 || g->pp_rank == g->pp - 1)) {
        ranks[0] = model_grid_rank(g, g->dp_rank, 0, g->cp_rank, g->tp_rank);
        ranks[1] = model_grid_rank(g, g->dp_rank, g->pp - 1, g->cp_rank, g->tp_rank);
        if (!(t->embed_c = make_group(t, COMM_KIND_EMBED, "embed", ranks, 2)))
            return -1;
    }
    if (g->cp > 1) {
        n = 0;
        for (int k = 0; k < g->cp; k++)
            ranks[n++] = model_grid_rank(g, g->dp_rank, g->pp_rank, k, g->tp_rank);
        if (!(t->cp_c = make_group(t, COMM_KIND_CP, "cp", ranks, n)))
            return -1;
    }
    return 0;
}

static dev_event **make_events(trainer *t, int n)
{
    dev_event **e = calloc((size_t)n, sizeof *e);
    if (!e)
        return NULL;
    for (int i = 0; i < n; i++)
        if (!(e[i] = t->o->event_create(t->dev)))
            return NULL;
    return e;
}

static void build_buckets(trainer *t)
{
    model *m = &t->m;
    int units = model_unit_count(m);
    size_t limit = (size_t)(t->cfg.bucket_mb * 1024 * 1024 / 4);
    if (limit < 1)
        limit = 1;
    t->buckets = calloc((size_t)units, sizeof(bucket));
    t->nbuckets = 0;
    if (!t->buckets)
        return;
    bucket cur = {0, 0, -1, 0, 0, 0};
    int open = 0;
    for (int u = 0; u < units; u++) {
        size_t b, e;
        model_unit_range(m, u, &b, &e);
        if (e <= b)
            continue;
        if (t->cfg.zero >= 2 && u == units - 1 && open) {
            /* ZeRO-2/3: the embedding unit is a bucket of its own (train.c, zero_state) */
            t->buckets[t->nbuckets++] = cur;
            open = 0;
        }
        if (!open) {
            cur.begin = b;
            cur.end = e;
            open = 1;
        } else {
            cur.begin = b; /* units are laid out in reverse backward order */
        }
        cur.ready_unit = u;
        if (cur.end - cur.begin >= limit) {
            t->buckets[t->nbuckets++] = cur;
            open = 0;
        }
    }
    if (open)
        t->buckets[t->nbuckets++] = cur;
    int rotating = 0;
    for (int k = 0; k < t->nbuckets; k++) {
        bucket *bk = &t->buckets[k];
        bk->embed = t->cfg.zero >= 2 && bk->ready_unit == units - 1;
        bk->slot = bk->embed ? -1 : rotating++ % 2;
    }
    /* the padding tail (ZeRO shards) rides with the bucket that ends at nfloats */
    for (int k = 0; k < t->nbuckets; k++)
        if (t->buckets[k].end == m->nfloats)
            t->buckets[k].end = m->nfloats_padded;
}

static void zero3_before_unit(void *arg, int unit, int backward);

/* --zero 2/3: the sharding plan, the shard and bucket buffers, and the model's units bound to
 * them; under ZeRO-3 also the rank's parameter pieces (taken from the initialized full buffer,
 * which is then freed). */
static int zero_setup(trainer *t)
{
    zero_state *z = &t->z;
    model *m = &t->m;
    const dev_ops *o = t->o;
    size_t *begins = calloc((size_t)t->nbuckets + 1, sizeof(size_t));
    size_t *ends = calloc((size_t)t->nbuckets + 1, sizeof(size_t));
    int units = model_unit_count(m);
    z->bucket_of_unit = malloc(sizeof(int) * (size_t)units);
    if (!begins || !ends || !z->bucket_of_unit) {
        free(begins);
        free(ends);
        return fail(t, "%s", "out of memory");
    }
    for (int k = 0; k < t->nbuckets; k++) {
        begins[k] = t->buckets[k].begin;
        ends[k] = t->buckets[k].end;
    }
    int rc = zero_plan_build(&z->plan, begins, ends, t->nbuckets, t->reduce_n, comm_rank(t->dp_c));
    free(begins);
    free(ends);
    if (rc != 0)
        return fail(t, "%s", "out of memory");
    size_t rot = 0, emb = 0;
    for (int k = 0; k < t->nbuckets; k++) {
        size_t padded = z->plan.b[k].padded;
        if (t->buckets[k].embed)
            emb = padded;
        else if (padded > rot)
            rot = padded;
    }
    z->gbuf_floats = z->pbuf_floats = rot;
    z->grad_shard = o->alloc(t->dev, z->plan.shard_len * 4);
    z->piece_tmp = o->alloc(t->dev, (z->plan.max_piece ? z->plan.max_piece : 1) * 4);
    int bad = !z->grad_shard || !z->piece_tmp;
    for (int s = 0; s < 2 && rot; s++) {
        z->gbuf[s] = o->alloc(t->dev, rot * 4);
        z->ev_gfree[s] = o->event_create(t->dev);
        bad |= !z->gbuf[s] || !z->ev_gfree[s];
    }
    if (emb) {
        z->gembed = o->alloc(t->dev, emb * 4);
        bad |= !z->gembed;
    }
    z->cur = -1;
    z->cur_bucket = -1;
    z->resident[0] = z->resident[1] = -1;
    if (t->cfg.zero >= 3) {
        z->param_shard = o->alloc(t->dev, z->plan.shard_len * 4);
        z->ev_pfree = o->event_create(t->dev);
        bad |= !z->param_shard || !z->ev_pfree;
        for (int s = 0; s < 2 && rot; s++) {
            z->pbuf[s] = o->alloc(t->dev, rot * 4);
            z->ev_gathered[s] = o->event_create(t->dev);
            bad |= !z->pbuf[s] || !z->ev_gathered[s];
        }
        if (emb) {
            z->pembed = o->alloc(t->dev, emb * 4);
            bad |= !z->pembed;
        }
    }
    if (bad)
        return fail(t, "%s", "out of device memory for the ZeRO shards and bucket buffers");
    for (int u = 0; u < units; u++)
        z->bucket_of_unit[u] = -1;
    for (int k = 0; k < t->nbuckets; k++) {
        bucket *bk = &t->buckets[k];
        for (int u = 0; u < units; u++) {
            size_t b, e;
            model_unit_range(m, u, &b, &e);
            if (e <= b || b < bk->begin || b >= bk->end)
                continue;
            z->bucket_of_unit[u] = k;
            float *g = bk->embed ? z->gembed : z->gbuf[bk->slot];
            float *p = bk->embed && z->pembed ? z->pembed : NULL;
            model_bind_unit(m, u, p ? p + (b - bk->begin) : NULL, g + (b - bk->begin));
        }
    }
    if (t->cfg.zero >= 3) {
        /* take this rank's pieces of the initialized parameters; the full buffer goes */
        int r = z->plan.rank;
        for (int k = 0; k < t->nbuckets; k++) {
            size_t lo, hi;
            zero_owned(&z->plan, k, r, &lo, &hi);
            if (hi > lo)
                o->copy(t->compute, z->param_shard + z->plan.b[k].shard_off, m->param + lo,
                        (hi - lo) * 4);
        }
        if (o->stream_synchronize(t->compute) != 0)
            return fail(t, "%s", dev_last_error(t->dev));
        o->free(t->dev, m->param);
        m->param = NULL;
        for (int u = 0; u < units; u++) /* bound by zero3_before_unit when needed */
            if (z->bucket_of_unit[u] < 0 || !t->buckets[z->bucket_of_unit[u]].embed)
                m->unit_param[u] = NULL;
        m->before_unit = zero3_before_unit;
        m->before_unit_arg = t;
    }
    return 0;
}

/* --activations: fp32 or bf16 as asked (refused when the device cannot); auto: bf16 where
 * the device computes its GEMMs in bf16 anyway (CUDA, bf16 precision), else fp32. */
static int set_activations(trainer *t)
{
    char e[256];
    const char *want = t->cfg.activations;
    if (!strcmp(want, "auto")) {
        if (!strcmp(t->o->backend_name, "cuda") &&
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

static int setup(trainer *t)
{
    char e[512];
    train_config *c = &t->cfg;
    t->rss_baseline = rss_now();
    model_grid_of(&t->g, c->world, c->dp, c->tp, c->pp, c->cp, t->env.rank);
    t->dev = dev_open(c->backend, e, sizeof e);
    if (!t->dev)
        return fail(t, "%s", e);
    t->o = dev_get_ops(t->dev);
    if (set_activations(t) != 0)
        return -1;
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
        if (!t->cp_send || !t->cp_recv)
            return fail(t, "%s", "cannot start the stream threads");
    }
    comm_job_options jo = {t->env.rank, t->env.world, t->env.shm_path, t->env.create_shm,
                           t->env.comm_timeout_s, t->env.shm_not_before, 0};
    t->job = comm_job_open(&jo, e, sizeof e);
    if (!t->job)
        return fail(t, "%s", e);
    dev_set_progress_hook(t->dev, progress_hook, t->job);
    t->peak_flops = peak_flops_of(c, t->dev);
#ifdef STEPSCOPE_TRAINER_HAVE_CUDA
    if (dev_is_cuda(t->dev)) {
        rdzv_store *store = comm_nccl_open_store(t->env.shm_path, t->env.rank,
                                                 t->env.comm_timeout_s, e, sizeof e);
        if (!store)
            return fail(t, "%s", e);
        t->nccl = comm_nccl_job_open(t->dev, store, t->env.rank, t->env.world,
                                     t->env.comm_timeout_s, e, sizeof e);
        if (!t->nccl)
            return fail(t, "%s", e);
    }
#endif
    if (setup_groups(t) != 0)
        return -1;
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
        if (!t->more || !t->more_adam || !t->ckpt_more)
            return fail(t, "%s", "out of memory");
    }
    for (int j = 0; j < t->V; j++) {
        model_grid cg = chunk_grid(t, j);
        model *mc = chunk_model(t, j);
        if (model_create(mc, c, &cg, t->dev, t->compute, t->tp_c, c->cp > 1 ? &cp_links : NULL,
                         t->mb_size, t->nslots, e, sizeof e) != 0)
            return fail(t, "%s", e);
        if (model_init_params(mc, c->seed, e, sizeof e) != 0)
            return fail(t, "%s", e);
        if (j > 0) {
            size_t state = c->zero ? mc->nfloats_padded / (size_t)t->reduce_n : mc->nfloats_padded;
            for (int k = 0; k < 2; k++)
                if (!(t->more_adam[2 * (j - 1) + k] = t->o->alloc(t->dev, state * 4)))
                    return fail(t, "%s", "out of device memory for the optimizer state");
        }
    }
    t->items = calloc((size_t)2 * t->M * t->V, sizeof(sched_item));
    if (!t->items)
        return fail(t, "%s", "out of memory");
    if (t->V > 1)
        schedule_build_interleaved(t->g.pp_rank, c->pp, t->V, t->M, t->items);
    else
        schedule_build(c->schedule, t->g.pp_rank, c->pp, t->M, t->items);
    int S = t->nslots * t->V;
    t->nevents = S;
    t->ev_in_ready = make_events(t, S);
    t->ev_grad_ready = make_events(t, S);
    t->ev_out_ready = make_events(t, S);
    t->ev_din_ready = make_events(t, S);
    t->ev_slot_free = make_events(t, S);
    t->ev_sent = make_events(t, S);
    t->ev_bucket = t->o->event_create(t->dev);
    t->ev_dp_done = t->o->event_create(t->dev);
    t->ev_opt_done = t->o->event_create(t->dev);
    t->ev_gather_done = t->o->event_create(t->dev);
    if (!t->ev_in_ready || !t->ev_grad_ready || !t->ev_out_ready || !t->ev_din_ready ||
        !t->ev_slot_free || !t->ev_sent || !t->ev_bucket || !t->ev_dp_done || !t->ev_opt_done ||
        !t->ev_gather_done)
        return fail(t, "%s", "out of memory creating events");
    build_buckets(t);
    if (!t->buckets)
        return fail(t, "%s", "out of memory");
    /* optimizer shard: ZeRO-1 a contiguous 1/n slice of the flat buffer, ZeRO-2/3 a piece of
     * every bucket (zero.h) */
    size_t P = t->m.nfloats_padded;
    t->shard_len = P / (size_t)t->reduce_n;
    t->shard_begin = (size_t)comm_rank(t->dp_c) * t->shard_len;
    t->shard_end = t->shard_begin + t->shard_len;
    if (c->zero >= 2) {
        if (zero_setup(t) != 0)
            return -1;
        t->shard_len = t->z.plan.shard_len;
        t->shard_begin = t->shard_end = 0; /* not one slice */
    }
    size_t state = c->zero ? t->shard_len : P;
    t->adam_m = t->o->alloc(t->dev, state * 4);
    t->adam_v = t->o->alloc(t->dev, state * 4);
    t->stat = t->o->alloc(t->dev, 2 * sizeof(double));
    if (!t->adam_m || !t->adam_v || !t->stat)
        return fail(t, "%s", "out of device memory for the optimizer state");
    size_t N = (size_t)t->m.N;
    t->host_tokens = malloc(sizeof(int) * N * (size_t)t->M);
    t->host_targets = malloc(sizeof(int) * N * (size_t)t->M);
    if (!t->host_tokens || !t->host_targets)
        return fail(t, "%s", "out of memory");
    if (c->cp > 1) {
        size_t whole = (size_t)t->mb_size * c->seq;
        t->host_seq_tokens = malloc(sizeof(int) * whole);
        t->host_seq_targets = malloc(sizeof(int) * whole);
        if (!t->host_seq_tokens || !t->host_seq_targets)
            return fail(t, "%s", "out of memory");
    }
    return 0;
}

/* ---- tracing ------------------------------------------------------------------------------- */

/* `memory` again at the end of tracing, when the measured peak is known; the
 * other keys once at the start. */
static void write_memory_metadata(trainer *t);

static void write_metadata(trainer *t)
{
    train_config *c = &t->cfg;
    model_grid *g = &t->g;
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"world\":%d,\"dp\":%d,\"tp\":%d,\"pp\":%d,\"cp\":%d,\"rank\":%d,\"dp_rank\":%d,"
             "\"tp_rank\":%d,\"pp_rank\":%d,\"cp_rank\":%d}",
             g->world, g->dp, g->tp, g->pp, g->cp, g->rank, g->dp_rank, g->tp_rank, g->pp_rank,
             g->cp_rank);
    stepscope_metadata_set("layout", buf);
    double bubble = c->pp == 1 ? 0.0
                    : t->V > 1 ? schedule_bubble_interleaved(c->pp, t->V, c->microbatches)
                               : schedule_bubble(c->pp, c->microbatches);
    snprintf(buf, sizeof buf,
             "{\"name\":\"%s\",\"stages\":%d,\"microbatches\":%d,\"virtual_stages\":%d,"
             "\"bubble_theory\":%.6f}",
             c->pp == 1 ? "none" : t->V > 1 ? "interleaved" : c->schedule == SCHED_AFAB ? "afab" : "1f1b",
             c->pp, c->microbatches, t->V, bubble);
    stepscope_metadata_set("schedule", buf);
    snprintf(buf, sizeof buf,
             "{\"model_flops_per_step\":%.6g,\"hardware_flops_per_step\":%.6g,"
             "\"tokens_per_step\":%d,\"peak_flops_per_device\":%.6g,\"world\":%d}",
             train_model_flops_per_step(c), train_hardware_flops_per_step(c), c->batch * c->seq,
             t->peak_flops, c->world);
    stepscope_metadata_set("flops", buf);
    write_memory_metadata(t);
}

/* This rank's layout as the memory model takes it (memory_model.h). */
static mm_layout memory_layout_of(const trainer *t)
{
    const train_config *c = &t->cfg;
    mm_layout l;
    memset(&l, 0, sizeof l);
    l.layers = c->layers;
    l.hidden = c->hidden;
    l.heads = c->heads;
    l.vocab = c->vocab;
    l.max_seq = c->max_seq;
    l.seq = c->seq;
    l.dp = c->dp;
    l.tp = c->tp;
    l.pp = c->pp;
    l.cp = c->cp;
    l.sp = c->sp;
    l.schedule = t->V > 1                      ? MM_SCHED_INTERLEAVED
                 : c->schedule == SCHED_AFAB ? MM_SCHED_AFAB
                                             : MM_SCHED_1F1B;
    l.virtual_stages = t->V;
    l.microbatches = c->microbatches;
    l.micro_batch = config_micro_batch(c);
    l.zero = c->zero;
    l.recompute = c->recompute == RECOMPUTE_FULL        ? MM_RECOMPUTE_FULL
                  : c->recompute == RECOMPUTE_SELECTIVE ? MM_RECOMPUTE_SELECTIVE
                                                        : MM_RECOMPUTE_NONE;
    l.act_bytes = (int)dev_dtype_bytes(dev_activation_dtype(t->dev));
    l.bucket_mb = c->bucket_mb;
    return l;
}

/* The process's resident memory now (Linux /proc/self/statm), 0 if unknown. */
static size_t rss_now(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
            resident = 0;
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
static void write_memory_metadata(trainer *t)
{
    train_config *c = &t->cfg;
    char buf[768];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long long rss_peak = (long long)ru.ru_maxrss * 1024;
    long long measured = (long long)dev_bytes_peak(t->dev);
    const char *measured_source = "device-allocations";
#ifdef STEPSCOPE_TRAINER_HAVE_CUDA
    if (dev_is_cuda(t->dev))
        measured = (long long)dev_cuda_measured_peak(t->dev, &measured_source);
#endif
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
    stepscope_metadata_set("memory", buf);
}

#ifdef STEPSCOPE_TRAINER_GPU_TRACE
#include "stepscope_gpu.h"

/* Whether the GPU tracer records this run's CUDA activity (CUDA backend only). */
static int gpu_trace_wanted(trainer *t)
{
    return strcmp(dev_get_ops(t->dev)->backend_name, "cuda") == 0;
}
#endif

/* Creates the directories leading to `path` (like mkdir -p of its dirname);
 * failures are left to the fopen that follows, which reports them. */
static void make_parent_dirs(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
    mkdir(dir, 0755);
}

static void trace_stop(trainer *t);

static void trace_start(trainer *t)
{
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
    if (stepscope_start(&so, &e) != 0) {
        fprintf(stderr, "rank %d: warning: tracing disabled: %s\n", t->env.rank, e.message);
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
}

/* Writes the measured memory, flushes the GPU tracer's buffers into the
 * trace, then closes it. */
static void trace_stop(trainer *t)
{
    write_memory_metadata(t);
#ifdef STEPSCOPE_TRAINER_GPU_TRACE
    if (gpu_trace_wanted(t)) {
        stepscope_gpu_stop();
        /* CUPTI's last buffers declared their streams as "stream N": name them again. */
        dev_trace_started(t->dev);
    }
#endif
    stepscope_stop();
    t->tracing = 0;
}

/* chunk < 0: no interleaving (no "chunk" key) */
static void push_mb_range(const char *name, int mb, int stage, int chunk)
{
    if (!stepscope_active())
        return;
    char args[96];
    if (chunk >= 0)
        snprintf(args, sizeof args, "{\"microbatch\":%d,\"stage\":%d,\"chunk\":%d}", mb, stage,
                 chunk);
    else
        snprintf(args, sizeof args, "{\"microbatch\":%d,\"stage\":%d}", mb, stage);
    stepscope_range_push(name, args);
}

static void pop_range(void)
{
    if (stepscope_active())
        stepscope_range_pop();
}

/* ---- the step ---------------------------------------------------------------------------------- */

/* --debug-delay: this rank's device stops for the delays given for `phase`. The host waits
 * for the compute stream, then sleeps, so the device idles for the delay before the phase's
 * next operation whatever the backend (a host-side sleep alone would hide while the host
 * runs ahead of the device). */
static void debug_delay(trainer *t, int phase)
{
    const train_config *c = &t->cfg;
    for (int k = 0; k < c->ndebug_delays; k++) {
        if (c->debug_delay[k].rank != t->env.rank || c->debug_delay[k].phase != phase)
            continue;
        t->o->stream_synchronize(t->compute); /* an error is sticky: the step's sync reports it */
        struct timespec ts = {c->debug_delay[k].ms / 1000, (long)(c->debug_delay[k].ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
}

static void launch_bucket(trainer *t, int k)
{
    bucket *b = &t->buckets[k];
    if (b->launched)
        return;
    b->launched = 1;
    if (stepscope_active()) {
        char args[96];
        snprintf(args, sizeof args, "{\"bucket\":%d,\"bytes\":%zu}", k, (b->end - b->begin) * 4);
        stepscope_range_push("allreduce bucket", args);
    }
    t->o->event_record(t->ev_bucket, t->compute);
    t->o->stream_wait_event(t->dp_stream, t->ev_bucket);
    comm_allreduce(t->dp_c, t->dp_stream, t->m.grad + b->begin, b->end - b->begin, COMM_FLOAT32);
    pop_range();
}

/* ZeRO-2/3: reduce-scatters bucket k's gradient buffer over the gradient group on "comm
 * dp" and adds this rank's piece into its gradient shard. A rotating buffer is then zeroed
 * for the next bucket that uses it (and compute waits for that: ev_gfree); with --overlap off
 * compute waits right away, so nothing of it hides under backward. */
static void zero_reduce_bucket(trainer *t, int k)
{
    const dev_ops *o = t->o;
    zero_state *z = &t->z;
    bucket *b = &t->buckets[k];
    const zero_bucket *zb = &z->plan.b[k];
    float *buf = b->embed ? z->gembed : z->gbuf[b->slot];
    if (stepscope_active()) {
        char args[96];
        snprintf(args, sizeof args, "{\"bucket\":%d,\"bytes\":%zu}", k, zb->padded * 4);
        stepscope_range_push("reduce_scatter bucket", args);
    }
    o->event_record(t->ev_bucket, t->compute);
    o->stream_wait_event(t->dp_stream, t->ev_bucket);
    float *dst = z->grad_shard + zb->shard_off;
    if (t->reduce_n > 1) {
        comm_reduce_scatter(t->dp_c, t->dp_stream, z->piece_tmp, buf, zb->piece, COMM_FLOAT32);
        o->add(t->dp_stream, dst, z->piece_tmp, zb->piece);
    } else {
        o->add(t->dp_stream, dst, buf, zb->piece);
    }
    if (!b->embed) {
        o->zero(t->dp_stream, buf, zb->padded * 4);
        o->event_record(z->ev_gfree[b->slot], t->dp_stream);
        if (!t->cfg.overlap)
            o->stream_wait_event(t->compute, z->ev_gfree[b->slot]);
    }
    pop_range();
}

/* ZeRO-2/3: all-gathers bucket k's parameters over the gradient group into dst (k's padded
 * size), each rank contributing its piece from `pieces` (its shard); on "comm dp". */
static void zero_gather_bucket(trainer *t, int k, float *dst, const float *pieces)
{
    const dev_ops *o = t->o;
    const zero_bucket *zb = &t->z.plan.b[k];
    float *mine = dst + (size_t)t->z.plan.rank * zb->piece;
    if (stepscope_active()) {
        char args[96];
        snprintf(args, sizeof args, "{\"bucket\":%d,\"bytes\":%zu}", k, zb->padded * 4);
        stepscope_range_push("allgather bucket", args);
    }
    o->copy(t->dp_stream, mine, pieces + zb->shard_off, zb->piece * 4);
    if (t->reduce_n > 1)
        comm_allgather(t->dp_c, t->dp_stream, dst, mine, zb->piece, COMM_FLOAT32);
    pop_range();
}

/* ZeRO-3: starts gathering rotating bucket k into the parameter buffer compute is not using
 * (once compute has enqueued everything that reads that buffer's previous bucket). */
static int zero3_start_gather(trainer *t, int k)
{
    zero_state *z = &t->z;
    int s = z->cur < 0 ? 0 : 1 - z->cur;
    t->o->event_record(z->ev_pfree, t->compute);
    t->o->stream_wait_event(t->dp_stream, z->ev_pfree);
    zero_gather_bucket(t, k, z->pbuf[s], z->param_shard);
    t->o->event_record(z->ev_gathered[s], t->dp_stream);
    z->resident[s] = k;
    return s;
}

/* ZeRO-3, called by the model before a unit uses its parameters: makes the unit's bucket
 * resident in a gathered buffer (waiting for its gather), binds its units there, and
 * prefetches the bucket that comes next in this pass (forward walks the buckets down,
 * backward up) into the other buffer, so that its gather overlaps this bucket's compute.
 * The embedding bucket stays gathered for the whole step (zero3_gather_embed). */
static void zero3_before_unit(void *arg, int unit, int backward)
{
    trainer *t = arg;
    zero_state *z = &t->z;
    model *m = &t->m;
    int k = z->bucket_of_unit[unit];
    if (k < 0 || t->buckets[k].embed || k == z->cur_bucket)
        return;
    int s = z->resident[0] == k ? 0 : z->resident[1] == k ? 1 : -1;
    if (s < 0)
        s = zero3_start_gather(t, k);
    t->o->stream_wait_event(t->compute, z->ev_gathered[s]);
    z->cur = s;
    z->cur_bucket = k;
    const bucket *bk = &t->buckets[k];
    for (int u = 0; u < model_unit_count(m); u++)
        if (z->bucket_of_unit[u] == k)
            model_bind_unit(m, u, z->pbuf[s] + (m->unit_begin[u] - bk->begin), NULL);
    int next = backward ? k + 1 : k - 1;
    if (next >= 0 && next < t->nbuckets && !t->buckets[next].embed && z->resident[1 - s] != next)
        zero3_start_gather(t, next);
}

/* ZeRO-3, at the start of a step (after the previous optimizer step): the embedding bucket
 * is gathered for the whole step (the first stage embeds at the start of forward and the
 * last reads the tied LM head at its end and at the start of backward); the rotating
 * buffers' contents are stale. */
static void zero3_step_begin(trainer *t)
{
    zero_state *z = &t->z;
    z->resident[0] = z->resident[1] = -1;
    z->cur = -1;
    z->cur_bucket = -1;
    for (int k = 0; k < t->nbuckets; k++) {
        if (!t->buckets[k].embed)
            continue;
        t->o->event_record(z->ev_pfree, t->compute);
        t->o->stream_wait_event(t->dp_stream, z->ev_pfree);
        zero_gather_bucket(t, k, z->pembed, z->param_shard);
        t->o->event_record(t->ev_gather_done, t->dp_stream);
        t->o->stream_wait_event(t->compute, t->ev_gather_done);
    }
}

/* Called by model_backward after each unit: on the last micro-batch, or on every one under
 * ZeRO-2/3 (whose rotating bucket buffers hold one micro-batch's gradients). */
static void unit_done(void *arg, int unit)
{
    trainer *t = arg;
    model *m = chunk_model(t, t->cur_chunk);
    /* sequence parallel: LayerNorm gradients of a block are partial over TP */
    if (m->sp && unit >= 1 && unit <= m->nblocks) {
        comm_allreduce(t->tp_c, t->compute, m->unit_grad[unit], 4 * (size_t)m->C, COMM_FLOAT32);
    }
    if (t->cfg.zero >= 2) {
        for (int k = 0; k < t->nbuckets; k++) {
            if (t->buckets[k].ready_unit != unit || t->buckets[k].embed)
                continue;
            zero_reduce_bucket(t, k);
            /* the next bucket's rotating buffer must be free before backward writes it */
            if (k + 1 < t->nbuckets && !t->buckets[k + 1].embed)
                t->o->stream_wait_event(t->compute, t->z.ev_gfree[t->buckets[k + 1].slot]);
        }
        return;
    }
    if (t->reduce_n > 1 && t->cfg.overlap && t->cur_chunk == 0) /* buckets cut chunk 0 */
        for (int k = 0; k < t->nbuckets; k++)
            if (t->buckets[k].ready_unit == unit)
                launch_bucket(t, k);
}

/* Pipeline neighbours (group ranks of pp_c): the previous and next rank in the ring (a chunk
 * transition wraps from rank pp-1 to rank 0). */
static int pp_prev(const trainer *t) { return (t->g.pp_rank + t->g.pp - 1) % t->g.pp; }
static int pp_next(const trainer *t) { return (t->g.pp_rank + 1) % t->g.pp; }

static void forward_mb(trainer *t, int chunk, int mb)
{
    const dev_ops *o = t->o;
    model *m = chunk_model(t, chunk);
    int slot = mb % t->nslots, ev = chunk * t->nslots + slot;
    model_slot *sl = &m->slots[slot];
    size_t N = (size_t)m->N, NsC = (size_t)m->Ns * m->C;
    push_mb_range("forward", mb, t->g.pp_rank, t->V > 1 ? chunk : -1);
    debug_delay(t, DELAY_FORWARD);
    if (m->first_stage)
        o->copy_to_device(t->compute, sl->tokens, t->host_tokens + (size_t)mb * N, N * 4);
    if (m->last_stage)
        o->copy_to_device(t->compute, sl->targets, t->host_targets + (size_t)mb * N, N * 4);
    if (!m->first_stage) {
        o->stream_wait_event(t->pp_recv, t->ev_slot_free[ev]);
        comm_recv(t->pp_c, t->pp_recv, sl->stage_in, NsC * m->act_es, pp_prev(t), COMM_F_PIPELINE);
        o->event_record(t->ev_in_ready[ev], t->pp_recv);
        o->stream_wait_event(t->compute, t->ev_in_ready[ev]);
    }
    if (!m->last_stage)
        o->stream_wait_event(t->compute, t->ev_sent[ev]);
    model_forward(m, slot, mb);
    if (!m->last_stage) {
        o->event_record(t->ev_out_ready[ev], t->compute);
        o->stream_wait_event(t->pp_send, t->ev_out_ready[ev]);
        comm_send(t->pp_c, t->pp_send, sl->stage_out, NsC * m->act_es, pp_next(t), COMM_F_PIPELINE);
        o->event_record(t->ev_sent[ev], t->pp_send);
    }
    pop_range();
}

static void backward_mb(trainer *t, int chunk, int mb)
{
    const dev_ops *o = t->o;
    model *m = chunk_model(t, chunk);
    int slot = mb % t->nslots, ev = chunk * t->nslots + slot;
    model_slot *sl = &m->slots[slot];
    size_t NsC = (size_t)m->Ns * m->C;
    push_mb_range("backward", mb, t->g.pp_rank, t->V > 1 ? chunk : -1);
    debug_delay(t, DELAY_BACKWARD);
    if (!m->last_stage) {
        o->stream_wait_event(t->pp_recv, t->ev_slot_free[ev]);
        comm_recv(t->pp_c, t->pp_recv, sl->grad_in, NsC * m->act_es, pp_next(t), COMM_F_PIPELINE);
        o->event_record(t->ev_grad_ready[ev], t->pp_recv);
        o->stream_wait_event(t->compute, t->ev_grad_ready[ev]);
    }
    if (!m->first_stage)
        o->stream_wait_event(t->compute, t->ev_sent[ev]);
    int last = mb == t->M - 1;
    t->last_mb = last;
    t->cur_chunk = chunk;
    if (t->cfg.zero >= 2) {
        /* every micro-batch's gradients go through the bucket buffers */
        if (t->nbuckets > 0 && !t->buckets[0].embed)
            o->stream_wait_event(t->compute, t->z.ev_gfree[t->buckets[0].slot]);
        model_backward(m, slot, mb, unit_done, t);
    } else {
        model_backward(m, slot, mb, last ? unit_done : NULL, t);
    }
    o->event_record(t->ev_slot_free[ev], t->compute);
    if (!m->first_stage) {
        o->event_record(t->ev_din_ready[ev], t->compute);
        o->stream_wait_event(t->pp_send, t->ev_din_ready[ev]);
        comm_send(t->pp_c, t->pp_send, sl->grad_out, NsC * m->act_es, pp_prev(t), COMM_F_PIPELINE);
        o->event_record(t->ev_sent[ev], t->pp_send);
    }
    pop_range();
}

static double lr_at(const train_config *c, int step)
{
    if (c->warmup > 0 && step < c->warmup)
        return c->lr * (step + 1) / c->warmup;
    int decay_steps = c->steps - c->warmup;
    if (decay_steps <= 1)
        return c->lr;
    double progress = (double)(step - c->warmup) / (decay_steps - 1);
    if (progress > 1)
        progress = 1;
    double min_lr = c->lr * c->min_lr_ratio;
    return min_lr + 0.5 * (c->lr - min_lr) * (1 + cos(M_PI * progress));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* This CP rank's share of whole sequences src [B,T] in the model's layout
 * dst [2][B][Tc]: its two chunks (ring_attention_chunk) of every sequence. */
static void take_cp_chunks(const trainer *t, int *dst, const int *src)
{
    int B = t->mb_size, T = t->cfg.seq, cp = t->g.cp, Tc = T / (2 * cp);
    for (int h = 0; h < 2; h++) {
        int pos = ring_attention_chunk(cp, t->g.cp_rank, h) * Tc;
        for (int b = 0; b < B; b++)
            memcpy(dst + ((size_t)h * B + b) * Tc, src + (size_t)b * T + pos,
                   sizeof(int) * (size_t)Tc);
    }
}

static int load_batch(trainer *t, int step)
{
    size_t N = (size_t)t->m.N;
    int per_dp = t->cfg.batch / t->cfg.dp;
    for (int mb = 0; mb < t->M; mb++) {
        int first = t->g.dp_rank * per_dp + mb * t->mb_size;
        char e[256];
        int *tokens = t->host_tokens + (size_t)mb * N, *targets = t->host_targets + (size_t)mb * N;
        if (t->g.cp > 1) {
            /* every CP rank reads the same sequences and keeps its chunks */
            tokens = t->host_seq_tokens;
            targets = t->host_seq_targets;
        }
        if (train_data_batch(t->data, step, first, t->mb_size, tokens, targets, e, sizeof e) != 0)
            return fail(t, "%s", e);
        if (t->g.cp > 1) {
            take_cp_chunks(t, t->host_tokens + (size_t)mb * N, tokens);
            take_cp_chunks(t, t->host_targets + (size_t)mb * N, targets);
        }
    }
    return 0;
}

static int sync_all(trainer *t)
{
    int rc = t->o->stream_synchronize(t->compute);
    rc |= t->o->stream_synchronize(t->dp_stream);
    rc |= t->o->stream_synchronize(t->pp_send);
    rc |= t->o->stream_synchronize(t->pp_recv);
    if (t->cp_send) {
        rc |= t->o->stream_synchronize(t->cp_send);
        rc |= t->o->stream_synchronize(t->cp_recv);
    }
    if (rc) {
        const char *why = dev_last_error(t->dev);
        snprintf(t->err, sizeof t->err, "%s", why[0] ? why : "a stream failed");
        comm_job_abort(t->job, t->err);
        return -1;
    }
    return 0;
}

/* Calls fn for every piece of parameter `p` this rank owns under ZeRO-2/3: flat range
 * [b, e) at shard offset `at`. */
typedef void (*zero_piece_fn)(trainer *t, const param_info *p, size_t b, size_t e, size_t at,
                              void *arg);
static void zero_for_owned(trainer *t, const param_info *p, zero_piece_fn fn, void *arg)
{
    const zero_plan *zp = &t->z.plan;
    for (int k = 0; k < zp->nbuckets; k++) {
        size_t lo, hi;
        zero_owned(zp, k, zp->rank, &lo, &hi);
        size_t b = p->offset > lo ? p->offset : lo;
        size_t e = p->offset + p->count < hi ? p->offset + p->count : hi;
        if (e > b)
            fn(t, p, b, e, zp->b[k].shard_off + (b - lo), arg);
    }
}

static void norm_piece(trainer *t, const param_info *p, size_t b, size_t e, size_t at, void *arg)
{
    (void)p;
    (void)arg;
    t->o->sum_squares_accumulate(t->compute, t->stat + 1, t->z.grad_shard + at, e - b);
}

typedef struct adam_args {
    int step;
    float lr;
} adam_args;

static void adam_piece(trainer *t, const param_info *p, size_t b, size_t e, size_t at, void *arg)
{
    const adam_args *a = arg;
    const train_config *c = &t->cfg;
    /* ZeRO-2: the full parameter buffer; ZeRO-3: the rank's parameter shard */
    float *param = t->z.param_shard ? t->z.param_shard + at : t->m.param + b;
    t->o->adamw(t->compute, param, t->z.grad_shard + at, t->adam_m + at, t->adam_v + at, e - b,
                a->lr, (float)c->beta1, (float)c->beta2, (float)c->eps,
                p->decay ? (float)c->weight_decay : 0.0f, a->step + 1);
}

/* ZeRO-2/3: AdamW on the rank's pieces; ZeRO-2 then all-gathers every bucket's parameters
 * (through a free rotating gradient buffer, zeroed again after) into the full buffer. ZeRO-3
 * gathers on demand in the next step. */
static void zero_optimizer(trainer *t, int step, double clip_scale, float lr)
{
    const dev_ops *o = t->o;
    model *m = &t->m;
    zero_state *z = &t->z;
    if (clip_scale < 1.0)
        o->scale(t->compute, z->grad_shard, (float)clip_scale, z->plan.shard_len);
    adam_args a = {step, lr};
    for (int k = 0; k < m->nparams; k++)
        zero_for_owned(t, &m->params[k], adam_piece, &a);
    if (z->param_shard || t->reduce_n == 1) /* ZeRO-3, or one rank: nothing to gather */
        return;
    o->event_record(t->ev_opt_done, t->compute);
    o->stream_wait_event(t->dp_stream, t->ev_opt_done);
    for (int k = 0; k < t->nbuckets; k++) {
        const bucket *bk = &t->buckets[k];
        float *staging = bk->embed ? z->gembed : z->gbuf[0];
        /* every rank's piece, from its own updated parameters */
        size_t lo, hi;
        zero_owned(&z->plan, k, z->plan.rank, &lo, &hi);
        float *mine = staging + (size_t)z->plan.rank * z->plan.b[k].piece;
        if (stepscope_active()) {
            char args[96];
            snprintf(args, sizeof args, "{\"bucket\":%d,\"bytes\":%zu}", k,
                     z->plan.b[k].padded * 4);
            stepscope_range_push("allgather bucket", args);
        }
        if (hi > lo)
            o->copy(t->dp_stream, mine, m->param + lo, (hi - lo) * 4);
        comm_allgather(t->dp_c, t->dp_stream, staging, mine, z->plan.b[k].piece, COMM_FLOAT32);
        o->copy(t->dp_stream, m->param + bk->begin, staging, (bk->end - bk->begin) * 4);
        o->zero(t->dp_stream, staging, z->plan.b[k].padded * 4);
        pop_range();
    }
    o->event_record(t->ev_gather_done, t->dp_stream);
    o->stream_wait_event(t->compute, t->ev_gather_done);
}

static void optimizer(trainer *t, int step, double clip_scale, float lr)
{
    const dev_ops *o = t->o;
    model *m = &t->m;
    train_config *c = &t->cfg;
    if (c->zero >= 2) {
        zero_optimizer(t, step, clip_scale, lr);
        return;
    }
    size_t lo = c->zero ? t->shard_begin : 0, hi = c->zero ? t->shard_end : m->nfloats_padded;
    if (clip_scale < 1.0)
        o->scale(t->compute, m->grad + lo, (float)clip_scale, hi - lo);
    for (int k = 0; k < m->nparams; k++) {
        param_info *p = &m->params[k];
        size_t b = p->offset > lo ? p->offset : lo;
        size_t e = p->offset + p->count < hi ? p->offset + p->count : hi;
        if (e <= b)
            continue;
        size_t state_off = b - (c->zero ? t->shard_begin : 0);
        o->adamw(t->compute, m->param + b, m->grad + b, t->adam_m + state_off,
                 t->adam_v + state_off, e - b, lr, (float)c->beta1, (float)c->beta2, (float)c->eps,
                 p->decay ? (float)c->weight_decay : 0.0f, step + 1);
    }
    /* interleaved: the other chunks, whole (zero 0) or this rank's slice of each (zero 1) */
    for (int j = 1; j < t->V; j++) {
        model *mc = chunk_model(t, j);
        float *am = t->more_adam[2 * (j - 1)], *av = t->more_adam[2 * (j - 1) + 1];
        size_t clo = 0, chi = mc->nfloats_padded;
        if (c->zero)
            chunk_slice(t, j, &clo, &chi);
        if (clip_scale < 1.0)
            o->scale(t->compute, mc->grad + clo, (float)clip_scale, chi - clo);
        for (int k = 0; k < mc->nparams; k++) {
            param_info *p = &mc->params[k];
            size_t b = p->offset > clo ? p->offset : clo;
            size_t e = p->offset + p->count < chi ? p->offset + p->count : chi;
            if (e <= b)
                continue;
            o->adamw(t->compute, mc->param + b, mc->grad + b, am + (b - clo), av + (b - clo),
                     e - b, lr, (float)c->beta1, (float)c->beta2, (float)c->eps,
                     p->decay ? (float)c->weight_decay : 0.0f, step + 1);
        }
    }
    if (c->zero && t->reduce_n > 1) {
        o->event_record(t->ev_opt_done, t->compute);
        o->stream_wait_event(t->dp_stream, t->ev_opt_done);
        comm_allgather(t->dp_c, t->dp_stream, m->param, m->param + t->shard_begin, t->shard_len,
                       COMM_FLOAT32);
        for (int j = 1; j < t->V; j++) {
            model *mc = chunk_model(t, j);
            size_t clo, chi;
            chunk_slice(t, j, &clo, &chi);
            comm_allgather(t->dp_c, t->dp_stream, mc->param, mc->param + clo, chi - clo,
                           COMM_FLOAT32);
        }
        o->event_record(t->ev_gather_done, t->dp_stream);
        o->stream_wait_event(t->compute, t->ev_gather_done);
    }
}

static int run_step(trainer *t, int step, double *loss_out, double *norm_out)
{
    const dev_ops *o = t->o;
    model *m = &t->m;
    train_config *c = &t->cfg;
    debug_delay(t, DELAY_DATA);
    if (load_batch(t, step) != 0)
        return -1;
    if (c->zero >= 2) {
        o->zero(t->compute, t->z.grad_shard, t->z.plan.shard_len * 4);
        for (int k = 0; k < t->nbuckets; k++)
            if (t->buckets[k].embed)
                o->zero(t->compute, t->z.gembed, t->z.plan.b[k].padded * 4);
        if (c->zero >= 3)
            zero3_step_begin(t);
    } else {
        for (int j = 0; j < t->V; j++)
            o->zero(t->compute, chunk_model(t, j)->grad, chunk_model(t, j)->nfloats_padded * 4);
    }
    for (int j = 0; j < t->V; j++) {
        o->zero(t->compute, chunk_model(t, j)->loss_acc, sizeof(double));
        model_set_loss_weight(chunk_model(t, j), 1.0f / ((float)c->batch * (float)c->seq));
    }
    for (int k = 0; k < t->nbuckets; k++)
        t->buckets[k].launched = 0;
    for (int i = 0; i < 2 * t->M * t->V; i++) {
        if (t->items[i].pass == 'F')
            forward_mb(t, t->items[i].chunk, t->items[i].mb);
        else
            backward_mb(t, t->items[i].chunk, t->items[i].mb);
    }
    /* interleaved: the other chunks' gradients, whole, after the flush (zero 0 only) */
    if (t->reduce_n > 1 && t->V > 1) {
        o->event_record(t->ev_bucket, t->compute);
        o->stream_wait_event(t->dp_stream, t->ev_bucket);
        for (int j = 1; j < t->V; j++)
            comm_allreduce(t->dp_c, t->dp_stream, chunk_model(t, j)->grad,
                           chunk_model(t, j)->nfloats_padded, COMM_FLOAT32);
    }
    /* the chunk holding this rank's copy of the tied embedding (first or last virtual stage) */
    model *me = t->V > 1 && t->g.pp_rank == t->g.pp - 1 ? chunk_model(t, t->V - 1) : m;
    if (c->zero >= 2) {
        /* the embedding bucket: tied-embedding sum first (its buffer holds the full wte
         * gradient of the step), then reduce-scattered once */
        for (int k = 0; k < t->nbuckets; k++) {
            if (!t->buckets[k].embed)
                continue;
            if (t->embed_c)
                comm_allreduce(t->embed_c, t->compute, t->z.gembed + (m->off_wte - t->buckets[k].begin),
                               (size_t)m->Vp * m->C, COMM_FLOAT32);
            zero_reduce_bucket(t, k);
        }
        o->event_record(t->ev_dp_done, t->dp_stream);
        o->stream_wait_event(t->compute, t->ev_dp_done);
    } else {
        if (t->reduce_n > 1) {
            for (int k = 0; k < t->nbuckets; k++)
                launch_bucket(t, k); /* --overlap off, or buckets never marked ready */
            o->event_record(t->ev_dp_done, t->dp_stream);
            o->stream_wait_event(t->compute, t->ev_dp_done);
        }
        if (t->embed_c)
            comm_allreduce(t->embed_c, t->compute, me->grad + me->off_wte, (size_t)me->Vp * me->C,
                           COMM_FLOAT32);
    }
    /* loss and gradient norm, summed over the world */
    model *ml = chunk_model(t, t->V - 1); /* the last virtual stage's chunk, if here */
    if (ml->last_stage && t->g.tp_rank == 0)
        o->copy(t->compute, t->stat, ml->loss_acc, sizeof(double));
    else
        o->zero(t->compute, t->stat, sizeof(double));
    o->zero(t->compute, t->stat + 1, sizeof(double));
    for (int k = 0; k < m->nparams; k++) {
        param_info *p = &m->params[k];
        if (!p->norm_counted)
            continue;
        if (c->zero >= 2) {
            zero_for_owned(t, p, norm_piece, NULL);
            continue;
        }
        size_t b = p->offset > t->shard_begin ? p->offset : t->shard_begin;
        size_t e = p->offset + p->count < t->shard_end ? p->offset + p->count : t->shard_end;
        if (e > b)
            o->sum_squares_accumulate(t->compute, t->stat + 1, m->grad + b, e - b);
    }
    for (int j = 1; j < t->V; j++) { /* interleaved: the other chunks, this rank's 1/n slice */
        model *mc = chunk_model(t, j);
        size_t lo, hi;
        chunk_slice(t, j, &lo, &hi);
        for (int k = 0; k < mc->nparams; k++) {
            const param_info *p = &mc->params[k];
            size_t b = p->offset > lo ? p->offset : lo;
            size_t e = p->offset + p->count < hi ? p->offset + p->count : hi;
            if (p->norm_counted && e > b)
                o->sum_squares_accumulate(t->compute, t->stat + 1, mc->grad + b, e - b);
        }
    }
    comm_allreduce(t->world_c, t->compute, t->stat, 2, COMM_FLOAT64);
    o->copy_to_host(t->compute, t->host_stat, t->stat, sizeof t->host_stat);
    if (sync_all(t) != 0)
        return -1;
    double loss = t->host_stat[0] / ((double)c->batch * c->seq);
    double norm = sqrt(t->host_stat[1]);
    double scale = c->grad_clip > 0 && norm > c->grad_clip ? c->grad_clip / norm : 1.0;
    if (stepscope_active())
        stepscope_range_push("optimizer", NULL);
    debug_delay(t, DELAY_OPTIMIZER);
    optimizer(t, step, scale, (float)lr_at(c, step));
    pop_range();
    if (sync_all(t) != 0)
        return -1;
    *loss_out = loss;
    *norm_out = norm;
    return 0;
}

/* ---- checkpoints (checkpoint.c) ------------------------------------------------------------ */

static ckpt_rank_state ckpt_state_of(trainer *t)
{
    ckpt_rank_state s = {t->dev,
                         t->o,
                         t->compute,
                         t->world_c,
                         &t->cfg,
                         &t->g,
                         t->m.param,
                         t->m.nfloats_padded,
                         t->adam_m,
                         t->adam_v,
                         t->cfg.zero ? t->shard_len : t->m.nfloats_padded,
                         t->cfg.zero == 1 ? t->shard_begin : 0,
                         t->ckpt_more,
                         t->V - 1};
    for (int j = 1; j < t->V; j++) { /* interleaved: the other chunks (zero 0 or 1) */
        model *mc = chunk_model(t, j);
        size_t lo = 0, hi = mc->nfloats_padded;
        if (t->cfg.zero)
            chunk_slice(t, j, &lo, &hi);
        t->ckpt_more[j - 1] = (ckpt_chunk){mc->param, mc->nfloats_padded,
                                           t->more_adam[2 * (j - 1)], t->more_adam[2 * (j - 1) + 1],
                                           hi - lo, lo};
    }
    return s;
}

/* ZeRO-3 checkpoints hold the same shard format as the other stages (the stage's full flat
 * parameters, then the rank's AdamW moments), so the parameters are gathered into a
 * temporary full buffer for saving and cut from one after loading; that buffer (4 bytes x
 * the stage's parameters) exists only while a checkpoint is written or read. */
static float *zero3_alloc_full(trainer *t)
{
    float *full = t->o->alloc(t->dev, t->m.nfloats_padded * 4);
    if (!full)
        fail(t, "%s", "checkpoint: out of device memory for the gathered ZeRO-3 parameters");
    return full;
}

static int zero3_gather_all(trainer *t, float *full)
{
    zero_state *z = &t->z;
    for (int k = 0; k < t->nbuckets; k++) {
        const bucket *bk = &t->buckets[k];
        float *staging = bk->embed ? z->pembed : z->pbuf[0];
        zero_gather_bucket(t, k, staging, z->param_shard);
        t->o->copy(t->dp_stream, full + bk->begin, staging, (bk->end - bk->begin) * 4);
    }
    z->resident[0] = z->resident[1] = -1; /* pbuf[0] was overwritten */
    z->cur = z->cur_bucket = -1;
    return sync_all(t);
}

static int zero3_scatter_all(trainer *t, const float *full)
{
    zero_state *z = &t->z;
    for (int k = 0; k < t->nbuckets; k++) {
        size_t lo, hi;
        zero_owned(&z->plan, k, z->plan.rank, &lo, &hi);
        if (hi > lo)
            t->o->copy(t->compute, z->param_shard + z->plan.b[k].shard_off, full + lo,
                       (hi - lo) * 4);
    }
    return sync_all(t);
}

/* After `done` completed steps (every stream idle). */
static int save_checkpoint(trainer *t, int done)
{
    ckpt_rank_state s = ckpt_state_of(t);
    float *full = NULL;
    if (t->cfg.zero >= 3) {
        if (!(full = zero3_alloc_full(t)))
            return -1;
        if (zero3_gather_all(t, full) != 0) {
            t->o->free(t->dev, full);
            return -1;
        }
        s.param = full;
    }
    size_t bytes = 0;
    if (stepscope_active())
        stepscope_range_push("checkpoint", NULL);
    double t0 = now_s();
    int rc = ckpt_save(&s, done, &bytes, t->err, sizeof t->err);
    double dt = now_s() - t0;
    pop_range();
    t->o->free(t->dev, full);
    if (rc == 0 && t->env.rank == 0 && !t->cfg.quiet) {
        printf("checkpoint: step %d written to %s/step-%08d (rank 0's shard %.2f MiB, %.1f ms)\n",
               done, t->cfg.checkpoint_dir, done, bytes / 1048576.0, dt * 1e3);
        fflush(stdout);
    }
    return rc;
}

static int resume_checkpoint(trainer *t, int *start_step)
{
    ckpt_rank_state s = ckpt_state_of(t);
    char note[512];
    float *full = NULL;
    if (t->cfg.zero >= 3) {
        if (!(full = zero3_alloc_full(t)))
            return -1;
        s.param = full;
    }
    int rc = ckpt_load_latest(&s, start_step, note, sizeof note, t->err, sizeof t->err);
    if (rc == 0 && full)
        rc = zero3_scatter_all(t, full);
    t->o->free(t->dev, full);
    if (rc != 0)
        return -1;
    if (t->env.rank == 0) {
        if (note[0])
            fprintf(stderr, "rank 0: note: %s\n", note);
        if (*start_step >= t->cfg.steps)
            printf("resumed from %s/step-%08d: already at --steps %d, nothing to do\n",
                   t->cfg.checkpoint_dir, *start_step, t->cfg.steps);
        else if (!t->cfg.quiet)
            printf("resumed from %s/step-%08d: continuing at step %d of %d\n",
                   t->cfg.checkpoint_dir, *start_step, *start_step, t->cfg.steps);
        fflush(stdout);
    }
    return 0;
}

/* --debug-dump-params DIR: this rank's parameters (every chunk) as text lines
 * "name layer index value", for tests that compare final weights across layouts. Under
 * --zero 3 the rank holds only pieces, so nothing is written there. */
static int dump_params(trainer *t)
{
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
        if (!mc->param)
            continue;
        float *host = malloc(mc->nfloats_padded * 4);
        if (!host) {
            rc = fail(t, "%s", "out of memory");
            break;
        }
        t->o->copy_to_host(t->compute, host, mc->param, mc->nfloats_padded * 4);
        if (t->o->stream_synchronize(t->compute) != 0)
            rc = fail(t, "%s", dev_last_error(t->dev));
        for (int k = 0; k < mc->nparams && rc == 0; k++) {
            const param_info *p = &mc->params[k];
            for (size_t i = 0; i < p->count; i++)
                fprintf(f, "%s %d %zu %.9g\n", p->name, p->layer, i, host[p->offset + i]);
        }
        free(host);
    }
    if (fclose(f) != 0 && rc == 0) {
        snprintf(t->err, sizeof t->err, "--debug-dump-params: cannot write %s", path);
        rc = -1;
    }
    return rc;
}

static void cleanup(trainer *t)
{
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
        dev_event **per_slot[] = {t->ev_in_ready, t->ev_grad_ready, t->ev_out_ready,
                                  t->ev_din_ready, t->ev_slot_free, t->ev_sent};
        for (size_t k = 0; k < sizeof per_slot / sizeof per_slot[0]; k++) {
            for (int i = 0; per_slot[k] && i < t->nevents; i++)
                if (per_slot[k][i])
                    o->event_destroy(per_slot[k][i]);
            free(per_slot[k]);
        }
        dev_event *single[] = {t->ev_bucket, t->ev_dp_done, t->ev_opt_done, t->ev_gather_done};
        for (size_t k = 0; k < sizeof single / sizeof single[0]; k++)
            if (single[k])
                o->event_destroy(single[k]);
        model_destroy(&t->m);
        for (int j = 1; t->more && j < t->V; j++)
            model_destroy(&t->more[j - 1]);
        for (int j = 0; t->more_adam && j < 2 * (t->V - 1); j++)
            o->free(t->dev, t->more_adam[j]);
        zero_state *z = &t->z;
        void *zbufs[] = {z->grad_shard, z->gbuf[0], z->gbuf[1], z->gembed, z->piece_tmp,
                         z->param_shard, z->pbuf[0], z->pbuf[1], z->pembed};
        for (size_t k = 0; k < sizeof zbufs / sizeof zbufs[0]; k++)
            o->free(t->dev, zbufs[k]);
        dev_event *zev[] = {z->ev_gfree[0], z->ev_gfree[1], z->ev_pfree, z->ev_gathered[0],
                            z->ev_gathered[1]};
        for (size_t k = 0; k < sizeof zev / sizeof zev[0]; k++)
            if (zev[k])
                o->event_destroy(zev[k]);
        o->free(t->dev, t->adam_m);
        o->free(t->dev, t->adam_v);
        o->free(t->dev, t->stat);
    }
    comm_destroy(t->world_c);
    comm_destroy(t->dp_c);
    comm_destroy(t->tp_c);
    comm_destroy(t->pp_c);
    comm_destroy(t->embed_c);
    comm_destroy(t->cp_c);
#ifdef STEPSCOPE_TRAINER_HAVE_CUDA
    comm_nccl_job_close(t->nccl);
#endif
    dev_close(t->dev); /* joins the stream threads (drained above) */
    comm_job_close(t->job);
    free(t->items);
    free(t->more);
    free(t->more_adam);
    free(t->ckpt_more);
    free(t->buckets);
    free(t->z.bucket_of_unit);
    zero_plan_free(&t->z.plan);
    free(t->host_tokens);
    free(t->host_targets);
    free(t->host_seq_tokens);
    free(t->host_seq_targets);
    train_data_close(t->data);
    if (t->log)
        fclose(t->log);
}

int train_rank_run(const train_config *cfg_in, const rank_env *env)
{
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
    if (rc == 0 && !c->vocab_given)
        c->vocab = train_data_vocab(t->data);
    if (rc == 0 && c->vocab < train_data_vocab(t->data)) {
        snprintf(t->err, sizeof t->err, "--vocab %d is smaller than the data's vocabulary %d",
                 c->vocab, train_data_vocab(t->data));
        rc = -1;
    }
    if (rc == 0)
        rc = setup(t);
    int is_printer = env->rank == 0;
    if (rc == 0 && is_printer && !c->quiet) {
        printf("stepscope-train: %s model, %d layers, hidden %d, %d heads, seq %d, vocab %d, "
               "%.3f M parameters\n",
               c->model, c->layers, c->hidden, c->heads, c->seq, c->vocab,
               model_total_params(c) / 1e6);
        printf("stepscope-train: world %d = dp %d x pp %d x cp %d x tp %d%s, schedule %s, %d "
               "micro-batches of %d, global batch %d, zero %d, recompute %s, data: %s\n",
               c->world, c->dp, c->pp, c->cp, c->tp, c->sp ? " (sp)" : "",
               c->schedule == SCHED_AFAB ? "afab" : c->schedule == SCHED_1F1B ? "1f1b"
                                                                : "interleaved",
               c->microbatches, t->mb_size, c->batch,
               c->zero, c->recompute == RECOMPUTE_NONE ? "none"
                        : c->recompute == RECOMPUTE_FULL ? "full" : "selective",
               train_data_describe(t->data));
        fflush(stdout);
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
    if (rc == 0 && c->resume)
        rc = resume_checkpoint(t, &start_step);
    if (rc == 0 && c->trace[0] && c->profile_first < 0)
        trace_start(t);
    double last_loss = NAN;
    for (int step = start_step; rc == 0 && step < c->steps; step++) {
        int profile_from = c->profile_first > start_step ? c->profile_first : start_step;
        if (c->trace[0] && step == profile_from && step <= c->profile_last && !t->tracing)
            trace_start(t);
        if (step == c->debug_die_step && env->rank == c->debug_die_rank) {
            fflush(stdout);
            raise(SIGKILL);
        }
        if (step == c->debug_hang_step && env->rank == c->debug_hang_rank)
            for (;;)
                pause();
        comm_job_heartbeat(t->job);
        if (t->tracing)
            stepscope_step_begin((uint64_t)step);
        double t0 = now_s(), loss = 0, norm = 0;
        rc = run_step(t, step, &loss, &norm);
        double dt = now_s() - t0;
        if (t->tracing)
            stepscope_step_end();
        if (rc != 0)
            break;
        last_loss = loss;
        double tokens = (double)c->batch * c->seq;
        double mfu = train_model_flops_per_step(c) / (dt * t->peak_flops * c->world);
        if (t->tracing) {
            stepscope_counter_now("loss", 0, loss);
            stepscope_counter_now("grad_norm", 0, norm);
            stepscope_counter_now("tokens_per_s", 0, tokens / dt);
        }
        if (is_printer && !c->quiet) {
            printf("step %4d | loss %.6f | norm %.4f | lr %.3e | %8.1f ms | %9.0f tok/s | MFU "
                   "%.2f%%\n",
                   step, loss, norm, lr_at(c, step), dt * 1e3, tokens / dt, mfu * 100);
            fflush(stdout);
        }
        if (t->log) {
            fprintf(t->log,
                    "{\"step\":%d,\"loss\":%.9g,\"step_ms\":%.3f,\"tokens_per_s\":%.1f,\"mfu\":%.6g,"
                    "\"grad_norm\":%.6g,\"lr\":%.6g}\n",
                    step, loss, dt * 1e3, tokens / dt, mfu, norm, lr_at(c, step));
            fflush(t->log);
        }
        if (t->tracing && c->profile_last >= 0 && step >= c->profile_last)
            trace_stop(t); /* the measured peak so far goes in with it */
        if (c->checkpoint_dir[0] &&
            ((c->checkpoint_every > 0 && (step + 1) % c->checkpoint_every == 0) ||
             step + 1 == c->steps))
            rc = save_checkpoint(t, step + 1);
    }
    if (t->tracing)
        trace_stop(t);
    if (rc == 0 && c->debug_dump_params[0])
        rc = dump_params(t);
    if (rc == 0 && is_printer && !isnan(last_loss))
        printf("final loss %.6f\n", last_loss);
    if (rc != 0) {
        const char *why = t->job ? comm_job_abort_reason(t->job) : "";
        fprintf(stderr, "rank %d: error: %s\n", env->rank, t->err[0] ? t->err : why);
        if (t->job)
            comm_job_abort(t->job, t->err);
    }
    fflush(stdout);
    cleanup(t);
    if (rc == 0 && env->remove_shm)
        unlink(env->shm_path);
    free(t);
    return rc == 0 ? 0 : 1;
}
