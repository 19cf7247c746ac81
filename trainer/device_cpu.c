/*
 * device_cpu.c — the CPU backend of the device API (device.h).
 *
 * How it works:
 *   - Memory is host memory (64-byte aligned, zeroed); the device counts the
 *     bytes in use and their peak.
 *   - A stream is a worker thread that pops closures (`cpu_task`) from a FIFO
 *     and runs them in order. Enqueueing never blocks on the work itself.
 *   - An event is a pair of counters: `recorded` (bumped on the host when the
 *     event is recorded) and `done` (set by the stream's worker when it reaches
 *     the record). `stream_wait_event` enqueues a task that blocks its worker
 *     until `done` reaches the value `recorded` had at enqueue time — the GPU's
 *     semantics, so a communication stream really overlaps compute.
 *   - Errors are sticky: the first failing task's message becomes the device's
 *     error, later tasks of that stream are skipped, blocked waits give up, and
 *     stream_synchronize returns -1.
 *   - Activations are fp32, or bf16 (set_activation_dtype): then each operation runs
 *     the fp32 reference kernel on fp32 copies of its activation arguments and rounds
 *     what it wrote back to bf16 (run_staged below).
 *   - Tracing: when a trace is active, each enqueue writes an API record of kind
 *     HOST_ENQUEUE on the host thread, and each executed task a HOST_OP record
 *     (stream, category, flops, bytes, same correlation id). Stream waits that
 *     actually block write a SYNC record (stream waits on event). When no trace
 *     is running these cost one flag check.
 */
#include "device_cpu.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bf16.h"
#include "cpu_kernels.h"
#include "stepscope.h"

#define CPU_MAX_STREAMS 16

struct dev_device {
    const dev_ops *ops; /* first: the dev_device_header of device.h */
    pthread_mutex_t mu; /* guards events' done counters and the error text */
    pthread_cond_t cv;
    atomic_int failed;
    char error[512];
    atomic_size_t in_use, peak;
    dev_stream *streams[CPU_MAX_STREAMS];
    int nstreams;
    dev_dtype act; /* activation storage (fp32, or bf16 staged through fp32) */
    void (*hook)(void *);
    void *hook_arg;
};

struct dev_stream {
    dev_device *d;
    char name[64];
    uint64_t trace_id;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cpu_task *head, *tail;
    uint64_t enqueued, completed;
    int stop;
    int failed;
};

struct dev_event {
    dev_device *d;
    uint64_t id;
    uint64_t recorded; /* host side */
    uint64_t done;     /* guarded by d->mu */
};

static atomic_uint_fast64_t g_correlation = 1;
static atomic_uint_fast64_t g_event_ids = 1;

static void device_fail(dev_device *d, const char *msg)
{
    pthread_mutex_lock(&d->mu);
    if (!atomic_load(&d->failed)) {
        /* the first error, cut to fit (a bounded copy: snprintf here trips
         * -Werror=format-truncation at -O3) */
        size_t n = strnlen(msg, sizeof d->error - 1);
        memcpy(d->error, msg, n);
        d->error[n] = '\0';
        atomic_store(&d->failed, 1);
    }
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

int cpu_device_failed(const dev_device *d) { return atomic_load(&((dev_device *)d)->failed); }

static void cpu_abort(dev_device *d, const char *why) { device_fail(d, why); }

/* ---- memory ------------------------------------------------------------------- */

typedef struct alloc_header {
    void *base;
    size_t bytes;
} alloc_header;

static void *cpu_alloc(dev_device *d, size_t bytes)
{
    size_t total = bytes + 64 + sizeof(alloc_header);
    if (total < bytes)
        return NULL;
    char *base = calloc(1, total);
    if (!base)
        return NULL;
    uintptr_t a = ((uintptr_t)base + sizeof(alloc_header) + 63) & ~(uintptr_t)63;
    alloc_header *h = (alloc_header *)(a - sizeof(alloc_header));
    h->base = base;
    h->bytes = bytes;
    size_t now = atomic_fetch_add(&d->in_use, bytes) + bytes;
    size_t peak = atomic_load(&d->peak);
    while (now > peak && !atomic_compare_exchange_weak(&d->peak, &peak, now)) {
    }
    return (void *)a;
}

static void cpu_free(dev_device *d, void *p)
{
    if (!p)
        return;
    alloc_header *h = (alloc_header *)((char *)p - sizeof(alloc_header));
    atomic_fetch_sub(&d->in_use, h->bytes);
    free(h->base);
}

static size_t cpu_bytes_in_use(const dev_device *d) { return atomic_load(&((dev_device *)d)->in_use); }
static size_t cpu_bytes_peak(const dev_device *d) { return atomic_load(&((dev_device *)d)->peak); }

/* ---- streams ------------------------------------------------------------------- */

static void trace_host_op(dev_stream *s, const cpu_task *t, uint64_t t0, uint64_t t1)
{
    stepscope_record r;
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_HOST_OP;
    r.u.host_op.start_ns = t0;
    r.u.host_op.end_ns = t1;
    r.u.host_op.stream = s->trace_id;
    r.u.host_op.correlation_id = t->correlation;
    r.u.host_op.bytes = t->bytes;
    r.u.host_op.flops = t->flops;
    r.u.host_op.comm_id = t->comm_id;
    r.u.host_op.seq = t->seq;
    r.u.host_op.name = stepscope_intern_current(t->name);
    r.u.host_op.category = t->category;
    stepscope_emit(&r);
}

static void *stream_worker(void *arg)
{
    dev_stream *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head && s->stop) {
            pthread_mutex_unlock(&s->mu);
            return NULL;
        }
        cpu_task *t = s->head;
        s->head = t->next;
        if (!s->head)
            s->tail = NULL;
        int skip = s->failed;
        pthread_mutex_unlock(&s->mu);

        if (!skip && atomic_load(&s->d->failed) && t->category == STEPSCOPE_CAT_COMM)
            skip = 1; /* a peer or another stream failed: do not start new collectives */
        if (!skip) {
            char err[512];
            err[0] = 0;
            int tracing = stepscope_active();
            uint64_t t0 = tracing ? stepscope_now_ns() : 0;
            int rc = t->run(t, err, sizeof err);
            uint64_t t1 = tracing ? stepscope_now_ns() : 0;
            if (rc != 0) {
                char msg[640];
                snprintf(msg, sizeof msg, "%s (stream %s)", err[0] ? err : t->name, s->name);
                device_fail(s->d, msg);
                pthread_mutex_lock(&s->mu);
                s->failed = 1;
                pthread_mutex_unlock(&s->mu);
            } else {
                if (tracing && t->category != STEPSCOPE_CAT_NONE)
                    trace_host_op(s, t, t0, t1);
                if (t->done)
                    t->done(t, t0, t1);
            }
        }
        free(t);
        if (s->d->hook)
            s->d->hook(s->d->hook_arg);
        pthread_mutex_lock(&s->mu);
        s->completed++;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
}

static void trace_enqueue(const cpu_task *t, uint64_t t0)
{
    stepscope_record r;
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_API;
    r.u.api.start_ns = t0;
    r.u.api.end_ns = stepscope_now_ns();
    r.u.api.correlation_id = t->correlation;
    r.u.api.thread = stepscope_thread_id();
    char name[96];
    snprintf(name, sizeof name, "enqueue %s", t->name);
    r.u.api.name = stepscope_intern_current(name);
    r.u.api.api_kind = STEPSCOPE_API_HOST_ENQUEUE;
    stepscope_emit(&r);
}

int cpu_stream_enqueue(dev_stream *s, const cpu_task *src)
{
    int tracing = stepscope_active();
    uint64_t t0 = tracing ? stepscope_now_ns() : 0;
    cpu_task *t = malloc(sizeof *t);
    if (!t) {
        device_fail(s->d, "out of memory enqueueing an operation");
        return -1;
    }
    *t = *src;
    t->next = NULL;
    t->correlation = atomic_fetch_add(&g_correlation, 1);
    t->stream_trace_id = s->trace_id;
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = t;
    else
        s->head = t;
    s->tail = t;
    s->enqueued++;
    pthread_cond_broadcast(&s->cv);
    /* the worker may already have run and freed t: trace from the caller's copy */
    uint64_t correlation = t->correlation;
    pthread_mutex_unlock(&s->mu);
    if (tracing && src->category != STEPSCOPE_CAT_NONE) {
        cpu_task meta = *src;
        meta.correlation = correlation;
        trace_enqueue(&meta, t0);
    }
    return 0;
}

static dev_stream *cpu_stream_create(dev_device *d, const char *name)
{
    if (d->nstreams >= CPU_MAX_STREAMS)
        return NULL;
    dev_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->d = d;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->trace_id = (uint64_t)d->nstreams + 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, stream_worker, s) != 0) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s);
        return NULL;
    }
    d->streams[d->nstreams++] = s;
    if (stepscope_active())
        stepscope_stream_declare(s->trace_id, STEPSCOPE_STREAM_CPU, 0, s->name);
    return s;
}

static void cpu_stream_destroy(dev_stream *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    dev_device *d = s->d;
    for (int i = 0; i < d->nstreams; i++)
        if (d->streams[i] == s)
            d->streams[i] = NULL;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

static int cpu_stream_synchronize(dev_stream *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->enqueued;
    while (s->completed < target)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return atomic_load(&s->d->failed) ? -1 : 0;
}


/* ---- events ------------------------------------------------------------------- */

static dev_event *cpu_event_create(dev_device *d)
{
    dev_event *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->d = d;
    e->id = atomic_fetch_add(&g_event_ids, 1);
    return e;
}

static void cpu_event_destroy(dev_event *e) { free(e); }

static int run_event_record(cpu_task *t, char *err, size_t errlen)
{
    dev_event *e = t->p[0];
    uint64_t target = (uint64_t)t->i[0];
    pthread_mutex_lock(&e->d->mu);
    if (e->done < target)
        e->done = target;
    pthread_cond_broadcast(&e->d->cv);
    pthread_mutex_unlock(&e->d->mu);
    return 0;
}

static void cpu_event_record(dev_event *e, dev_stream *s)
{
    cpu_task t = {0};
    t.run = run_event_record;
    t.name = "event record";
    t.category = STEPSCOPE_CAT_NONE;
    t.p[0] = e;
    t.i[0] = (int64_t)++e->recorded;
    cpu_stream_enqueue(s, &t);
}

static int run_wait_event(cpu_task *t, char *err, size_t errlen)
{
    dev_event *e = t->p[0];
    uint64_t target = (uint64_t)t->i[0];
    dev_device *d = e->d;
    int tracing = stepscope_active();
    uint64_t t0 = tracing ? stepscope_now_ns() : 0;
    int waited = 0;
    pthread_mutex_lock(&d->mu);
    while (e->done < target && !atomic_load(&d->failed)) {
        waited = 1;
        pthread_cond_wait(&d->cv, &d->mu);
    }
    int ok = e->done >= target;
    pthread_mutex_unlock(&d->mu);
    if (!ok) {
        snprintf(err, errlen, "stream wait on event %llu abandoned: %s",
                 (unsigned long long)e->id, d->error);
        return -1;
    }
    if (tracing && waited) {
        stepscope_record r;
        memset(&r, 0, sizeof r);
        r.kind = STEPSCOPE_REC_SYNC;
        r.u.sync.start_ns = t0;
        r.u.sync.end_ns = stepscope_now_ns();
        r.u.sync.stream = t->stream_trace_id;
        r.u.sync.event_id = e->id;
        r.u.sync.correlation_id = t->correlation;
        r.u.sync.sync_kind = STEPSCOPE_SYNC_STREAM_WAIT_EVENT;
        stepscope_emit(&r);
    }
    return 0;
}

static void cpu_stream_wait_event(dev_stream *s, dev_event *e)
{
    if (e->recorded == 0)
        return;
    cpu_task t = {0};
    t.run = run_wait_event;
    t.name = "wait event";
    t.category = STEPSCOPE_CAT_NONE;
    t.p[0] = e;
    t.i[0] = (int64_t)e->recorded;
    cpu_stream_enqueue(s, &t);
}

/* ---- copies --------------------------------------------------------------------- */

static int run_copy(cpu_task *t, char *err, size_t errlen)
{
    memcpy(t->p[0], t->p[1], (size_t)t->i[0]);
    return 0;
}

static void enqueue_copy(dev_stream *s, void *dst, const void *src, size_t bytes, const char *name)
{
    cpu_task t = {0};
    t.run = run_copy;
    t.name = name;
    t.category = STEPSCOPE_CAT_MEMCPY;
    t.bytes = bytes;
    t.p[0] = dst;
    t.p[1] = (void *)src;
    t.i[0] = (int64_t)bytes;
    cpu_stream_enqueue(s, &t);
}

static void cpu_copy_to_device(dev_stream *s, void *dst, const void *src, size_t bytes)
{
    enqueue_copy(s, dst, src, bytes, "copy to device");
}
static void cpu_copy_to_host(dev_stream *s, void *dst, const void *src, size_t bytes)
{
    enqueue_copy(s, dst, src, bytes, "copy to host");
}
static void cpu_copy(dev_stream *s, void *dst, const void *src, size_t bytes)
{
    enqueue_copy(s, dst, src, bytes, "copy");
}

static int run_zero(cpu_task *t, char *err, size_t errlen)
{
    memset(t->p[0], 0, (size_t)t->i[0]);
    return 0;
}

static void cpu_zero(dev_stream *s, void *dst, size_t bytes)
{
    cpu_task t = {0};
    t.run = run_zero;
    t.name = "zero";
    t.category = STEPSCOPE_CAT_MEMSET;
    t.bytes = bytes;
    t.p[0] = dst;
    t.i[0] = (int64_t)bytes;
    cpu_stream_enqueue(s, &t);
}

static int run_copy_2d(cpu_task *t, char *err, size_t errlen)
{
    char *dst = t->p[0];
    const char *src = t->p[1];
    size_t dpitch = (size_t)t->i[0], spitch = (size_t)t->i[1], width = (size_t)t->i[2];
    for (size_t r = 0; r < (size_t)t->i[3]; r++)
        memcpy(dst + r * dpitch, src + r * spitch, width);
    return 0;
}

static void cpu_copy_2d(dev_stream *s, void *dst, size_t dst_pitch, const void *src,
                        size_t src_pitch, size_t width_bytes, size_t rows)
{
    cpu_task t = {0};
    t.run = run_copy_2d;
    t.name = "copy 2d";
    t.category = STEPSCOPE_CAT_MEMCPY;
    t.bytes = width_bytes * rows;
    t.p[0] = dst;
    t.p[1] = (void *)src;
    t.i[0] = (int64_t)dst_pitch;
    t.i[1] = (int64_t)src_pitch;
    t.i[2] = (int64_t)width_bytes;
    t.i[3] = (int64_t)rows;
    cpu_stream_enqueue(s, &t);
}

/* ---- model operations -------------------------------------------------------------
 * Each wrapper packs its arguments into a task (pointers in p[], integers in i[],
 * scalars in f[]), names its activation arguments (act() below: which p[], how many
 * elements, whether the kernel writes them), states the work's flops and bytes moved,
 * and enqueues it; the matching run_* unpacks and calls the reference kernel.
 *
 * bf16 activations: the reference kernels are fp32, so a task whose device stores
 * activations in bf16 runs on fp32 copies: run_staged widens every activation argument,
 * runs the kernel, and rounds the ones it writes back into bf16 (nearest even, like
 * __float2bfloat16_rn). That is exactly "bf16 storage, fp32 math, one rounding per store"
 * for every operation, which is what the CUDA kernels do (their accumulation order
 * differs), so a CPU run is the reference for a CUDA run in bf16. Accumulating backward
 * operations read their bf16 gradient, add in fp32 and store rounded, as on the GPU. */

#define P(k) (t->p[k])
#define I(k) ((int)t->i[k])
#define F(k) ((float)t->f[k])

/* Names p[index] an activation argument of rows x width elements, stride apart. */
static void act(cpu_task *t, int index, int written, size_t rows, size_t width, size_t stride)
{
    cpu_act_arg *a = &t->acts[t->nacts++];
    a->index = index;
    a->written = written;
    a->rows = rows;
    a->width = width;
    a->stride = stride;
}

/* A contiguous activation argument of n elements. */
static void act_n(cpu_task *t, int index, int written, size_t n) { act(t, index, written, 1, n, n); }

static size_t act_span(const cpu_act_arg *a) { return a->rows ? (a->rows - 1) * a->stride + a->width : 0; }

/* Runs t->staged_run on fp32 copies of the task's bf16 activation arguments. Arguments
 * that alias (the same buffer twice) share one copy, as they would share memory. */
static int run_staged(cpu_task *t, char *err, size_t errlen)
{
    void *orig[CPU_TASK_MAX_ACTS] = {0};
    float *tmp[CPU_TASK_MAX_ACTS] = {0};
    int owner[CPU_TASK_MAX_ACTS];
    int rc = 0;
    for (int k = 0; k < t->nacts; k++) {
        const cpu_act_arg *a = &t->acts[k];
        orig[k] = t->p[a->index];
        owner[k] = k;
        if (!orig[k])
            continue;
        for (int j = 0; j < k; j++)
            if (orig[j] == orig[k] && tmp[j]) {
                owner[k] = j;
                break;
            }
        if (owner[k] != k && act_span(a) > act_span(&t->acts[owner[k]])) {
            snprintf(err, errlen, "%s: aliased activation arguments of different extents", t->name);
            rc = -1;
            goto out;
        }
        if (owner[k] != k) {
            t->p[a->index] = tmp[owner[k]];
            continue;
        }
        tmp[k] = malloc(act_span(a) * sizeof(float) + 1);
        if (!tmp[k]) {
            snprintf(err, errlen, "%s: out of memory staging bf16 activations", t->name);
            rc = -1;
            goto out;
        }
        for (size_t r = 0; r < a->rows; r++)
            bf16_widen(tmp[k] + r * a->stride, (const uint16_t *)orig[k] + r * a->stride, a->width);
        t->p[a->index] = tmp[k];
    }
    rc = t->staged_run(t, err, errlen);
    if (rc == 0)
        for (int k = 0; k < t->nacts; k++) {
            const cpu_act_arg *a = &t->acts[k];
            if (!orig[k] || !a->written)
                continue;
            for (size_t r = 0; r < a->rows; r++)
                bf16_round((uint16_t *)orig[k] + r * a->stride, tmp[owner[k]] + r * a->stride,
                           a->width);
        }
out:
    for (int k = 0; k < t->nacts; k++) {
        free(tmp[k]);
        if (orig[k])
            t->p[t->acts[k].index] = orig[k];
    }
    return rc;
}

static void enqueue_compute(dev_stream *s, cpu_task *t, const char *name, double flops, double bytes)
{
    t->name = name;
    t->category = STEPSCOPE_CAT_COMPUTE;
    t->flops = (uint64_t)flops;
    t->bytes = (uint64_t)bytes;
    if (s->d->act == DEV_BF16 && t->nacts > 0) {
        t->staged_run = t->run;
        t->run = run_staged;
    }
    cpu_stream_enqueue(s, t);
}

static int run_encoder_forward(cpu_task *t, char *e, size_t n)
{
    cpu_encoder_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
    return 0;
}
static void cpu_op_encoder_forward(dev_stream *s, dev_act *out, const int *tokens, const float *wte,
                                   const float *wpe, int B, int T, int C)
{
    cpu_task t = {.run = run_encoder_forward, .p = {out, (void *)tokens, (void *)wte, (void *)wpe},
                  .i = {B, T, C}};
    act_n(&t, 0, 1, (size_t)B * T * C);
    enqueue_compute(s, &t, "encoder_forward", (double)B * T * C, 12.0 * B * T * C);
}

static int run_encoder_backward(cpu_task *t, char *e, size_t n)
{
    cpu_encoder_backward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
    return 0;
}
static void cpu_op_encoder_backward(dev_stream *s, float *dwte, float *dwpe, const dev_act *dout,
                                    const int *tokens, int B, int T, int C)
{
    cpu_task t = {.run = run_encoder_backward, .p = {dwte, dwpe, (void *)dout, (void *)tokens},
                  .i = {B, T, C}};
    act_n(&t, 2, 0, (size_t)B * T * C);
    enqueue_compute(s, &t, "encoder_backward", 2.0 * B * T * C, 20.0 * B * T * C);
}

static int run_layernorm_forward(cpu_task *t, char *e, size_t n)
{
    cpu_layernorm_forward(P(0), P(1), P(2), P(3), P(4), P(5), I(0), I(1));
    return 0;
}
static void cpu_op_layernorm_forward(dev_stream *s, dev_act *out, float *mean, float *rstd,
                                     const dev_act *inp, const float *weight, const float *bias,
                                     int N, int C)
{
    cpu_task t = {.run = run_layernorm_forward,
                  .p = {out, mean, rstd, (void *)inp, (void *)weight, (void *)bias},
                  .i = {N, C}};
    act_n(&t, 0, 1, (size_t)N * C);
    act_n(&t, 3, 0, (size_t)N * C);
    enqueue_compute(s, &t, "layernorm_forward", 8.0 * N * C, 8.0 * N * C);
}

static int run_layernorm_backward(cpu_task *t, char *e, size_t n)
{
    cpu_layernorm_backward(P(0), P(1), P(2), P(3), P(4), P(5), P(6), P(7), I(0), I(1));
    return 0;
}
static void cpu_op_layernorm_backward(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                      const dev_act *dout, const dev_act *inp, const float *weight,
                                      const float *mean, const float *rstd, int N, int C)
{
    cpu_task t = {.run = run_layernorm_backward,
                  .p = {dinp, dweight, dbias, (void *)dout, (void *)inp, (void *)weight,
                        (void *)mean, (void *)rstd},
                  .i = {N, C}};
    act_n(&t, 0, 1, (size_t)N * C);
    act_n(&t, 3, 0, (size_t)N * C);
    act_n(&t, 4, 0, (size_t)N * C);
    enqueue_compute(s, &t, "layernorm_backward", 14.0 * N * C, 16.0 * N * C);
}

static int run_matmul_forward(cpu_task *t, char *e, size_t n)
{
    cpu_matmul_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
    return 0;
}
static void cpu_op_matmul_forward(dev_stream *s, dev_act *out, const dev_act *inp,
                                  const float *weight, const float *bias, int N, int C, int OC)
{
    cpu_task t = {.run = run_matmul_forward,
                  .p = {out, (void *)inp, (void *)weight, (void *)bias},
                  .i = {N, C, OC}};
    act_n(&t, 0, 1, (size_t)N * OC);
    act_n(&t, 1, 0, (size_t)N * C);
    enqueue_compute(s, &t, "matmul_forward", 2.0 * N * C * OC,
                    4.0 * ((double)N * C + (double)OC * C + (double)N * OC));
}

static int run_matmul_backward(cpu_task *t, char *e, size_t n)
{
    cpu_matmul_backward(P(0), P(1), P(2), P(3), P(4), P(5), I(0), I(1), I(2));
    return 0;
}
static void cpu_op_matmul_backward(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                   const dev_act *dout, const dev_act *inp, const float *weight,
                                   int N, int C, int OC)
{
    cpu_task t = {.run = run_matmul_backward,
                  .p = {dinp, dweight, dbias, (void *)dout, (void *)inp, (void *)weight},
                  .i = {N, C, OC}};
    act_n(&t, 0, 1, (size_t)N * C);
    act_n(&t, 3, 0, (size_t)N * OC);
    act_n(&t, 4, 0, (size_t)N * C);
    double flops = (dinp ? 2.0 * N * C * OC : 0) + (dweight ? 2.0 * N * C * OC : 0);
    enqueue_compute(s, &t, "matmul_backward", flops,
                    8.0 * ((double)N * C + (double)OC * C + (double)N * OC));
}

static int run_attention_forward(cpu_task *t, char *e, size_t n)
{
    cpu_attention_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2), I(3));
    return 0;
}
static void cpu_op_attention_forward(dev_stream *s, dev_act *out, float *preatt, float *att,
                                     const dev_act *qkv, int B, int T, int C, int NH)
{
    cpu_task t = {.run = run_attention_forward, .p = {out, preatt, att, (void *)qkv},
                  .i = {B, T, C, NH}};
    act_n(&t, 0, 1, (size_t)B * T * C);
    act_n(&t, 3, 0, (size_t)B * T * 3 * C);
    /* causal: about half of the T x T scores; QK^T and AV are 2*T*T*C each when full */
    enqueue_compute(s, &t, "attention_forward", 2.0 * B * (double)T * T * C,
                    4.0 * (4.0 * B * T * C + 2.0 * B * NH * (double)T * T));
}

static int run_attention_backward(cpu_task *t, char *e, size_t n)
{
    cpu_attention_backward(P(0), P(1), P(2), P(3), P(4), P(5), I(0), I(1), I(2), I(3));
    return 0;
}
static void cpu_op_attention_backward(dev_stream *s, dev_act *dqkv, float *dpreatt, float *datt,
                                      const dev_act *dout, const dev_act *qkv, const float *att,
                                      int B, int T, int C, int NH)
{
    cpu_task t = {.run = run_attention_backward,
                  .p = {dqkv, dpreatt, datt, (void *)dout, (void *)qkv, (void *)att},
                  .i = {B, T, C, NH}};
    act_n(&t, 0, 1, (size_t)B * T * 3 * C);
    act_n(&t, 3, 0, (size_t)B * T * C);
    act_n(&t, 4, 0, (size_t)B * T * 3 * C);
    enqueue_compute(s, &t, "attention_backward", 4.0 * B * (double)T * T * C,
                    4.0 * (8.0 * B * T * C + 4.0 * B * NH * (double)T * T));
}

/* The block kernels need Tk floats of scratch (one row of scores). */
static int run_attention_block_forward(cpu_task *t, char *e, size_t n)
{
    float *scratch = malloc(sizeof(float) * (size_t)(t->i[4] > 0 ? t->i[4] : 1));
    if (!scratch) {
        snprintf(e, n, "attention_block_forward: out of memory");
        return -1;
    }
    cpu_attention_block_forward(P(0), P(1), P(2), I(0), P(3), I(1), I(2), I(3), I(4), I(5), I(6),
                                I(7), scratch);
    free(scratch);
    return 0;
}
static void cpu_op_attention_block_forward(dev_stream *s, dev_act *out, float *lse,
                                           const dev_act *q, int q_stride, const dev_act *kv,
                                           int kv_stride, int B, int Tq, int Tk, int C, int NH,
                                           int causal)
{
    cpu_task t = {.run = run_attention_block_forward,
                  .p = {out, lse, (void *)q, (void *)kv},
                  .i = {q_stride, kv_stride, B, Tq, Tk, C, NH, causal}};
    act_n(&t, 0, 1, (size_t)B * Tq * C);
    act(&t, 2, 0, (size_t)B * Tq, (size_t)C, (size_t)q_stride);
    act(&t, 3, 0, (size_t)B * Tk, 2 * (size_t)C, (size_t)kv_stride);
    /* scores and the weighted sum: 2*Tq*Tk*C each, half of it on a causal block */
    double pairs = causal ? 0.5 * Tq * (Tk + 1.0) : (double)Tq * Tk;
    enqueue_compute(s, &t, "attention_block_forward", 4.0 * B * pairs * C,
                    4.0 * B * (3.0 * Tq * C + 2.0 * Tk * C + 2.0 * NH * Tq));
}

static int run_attention_block_backward(cpu_task *t, char *e, size_t n)
{
    float *scratch = malloc(sizeof(float) * (size_t)(t->i[7] > 0 ? t->i[7] : 1));
    if (!scratch) {
        snprintf(e, n, "attention_block_backward: out of memory");
        return -1;
    }
    cpu_attention_block_backward(P(0), I(0), P(1), I(1), P(2), P(3), P(4), P(5), I(2), P(6), I(3),
                                 I(4), I(5), I(6), I(7), I(8), I(9), scratch);
    free(scratch);
    return 0;
}
static void cpu_op_attention_block_backward(dev_stream *s, dev_act *dq, int dq_stride,
                                            dev_act *dkv, int dkv_stride, const dev_act *dout,
                                            const dev_act *out, const float *lse, const dev_act *q,
                                            int q_stride, const dev_act *kv, int kv_stride, int B,
                                            int Tq, int Tk, int C, int NH, int causal)
{
    cpu_task t = {.run = run_attention_block_backward,
                  .p = {dq, dkv, (void *)dout, (void *)out, (void *)lse, (void *)q, (void *)kv},
                  .i = {dq_stride, dkv_stride, q_stride, kv_stride, B, Tq, Tk, C, NH, causal}};
    act(&t, 0, 1, (size_t)B * Tq, (size_t)C, (size_t)dq_stride);
    act(&t, 1, 1, (size_t)B * Tk, 2 * (size_t)C, (size_t)dkv_stride);
    act_n(&t, 2, 0, (size_t)B * Tq * C);
    act_n(&t, 3, 0, (size_t)B * Tq * C);
    act(&t, 5, 0, (size_t)B * Tq, (size_t)C, (size_t)q_stride);
    act(&t, 6, 0, (size_t)B * Tk, 2 * (size_t)C, (size_t)kv_stride);
    /* recomputed scores, dv, dp, dq and dk: 2*Tq*Tk*C each */
    double pairs = causal ? 0.5 * Tq * (Tk + 1.0) : (double)Tq * Tk;
    enqueue_compute(s, &t, "attention_block_backward", 10.0 * B * pairs * C,
                    4.0 * B * (6.0 * Tq * C + 4.0 * Tk * C + NH * Tq));
}

/* ---- mixture of experts (kernels/cpu/moe_*.c) --------------------------------------------
 * The routing-dependent row count R is offsets[E], read when the task runs; activation
 * arguments in the expert-grouped layout are staged for their bound Rmax = N x K rows. */

static int run_moe_router_forward(cpu_task *t, char *e, size_t n)
{
    cpu_moe_router_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2), I(3));
    return 0;
}
static void cpu_op_moe_router_forward(dev_stream *s, int *expert, float *gate, float *probs,
                                      const dev_act *logits, int N, int E, int K, int renorm)
{
    cpu_task t = {.run = run_moe_router_forward,
                  .p = {expert, gate, probs, (void *)logits},
                  .i = {N, E, K, renorm}};
    act_n(&t, 3, 0, (size_t)N * E);
    enqueue_compute(s, &t, "moe_router_forward", 5.0 * N * E + (double)N * E * K,
                    8.0 * N * E + 8.0 * N * K);
}

static int run_moe_router_backward(cpu_task *t, char *e, size_t n)
{
    cpu_moe_router_backward(P(0), P(1), P(2), P(3), I(0), I(1), I(2), I(3), F(0), P(4));
    return 0;
}
static void cpu_op_moe_router_backward(dev_stream *s, dev_act *dlogits, const float *dgate,
                                       const float *probs, const int *expert, int *counts, int N,
                                       int E, int K, int renorm, float aux_scale)
{
    cpu_task t = {.run = run_moe_router_backward,
                  .p = {dlogits, (void *)dgate, (void *)probs, (void *)expert, counts},
                  .i = {N, E, K, renorm},
                  .f = {aux_scale}};
    act_n(&t, 0, 1, (size_t)N * E);
    enqueue_compute(s, &t, "moe_router_backward", 6.0 * N * E + 4.0 * N * E * K,
                    12.0 * N * E + 8.0 * N * K);
}

static int run_moe_aux_loss(cpu_task *t, char *e, size_t n)
{
    *(double *)P(0) += cpu_moe_aux_loss(P(1), P(2), I(0), I(1), I(2), P(3));
    return 0;
}
static void cpu_op_moe_aux_loss_accumulate(dev_stream *s, double *acc, const float *probs,
                                           const int *expert, int *counts, int N, int E, int K)
{
    cpu_task t = {.run = run_moe_aux_loss,
                  .p = {acc, (void *)probs, (void *)expert, counts},
                  .i = {N, E, K}};
    enqueue_compute(s, &t, "moe_aux_loss", 2.0 * N * E, 4.0 * N * E + 4.0 * N * K);
}

static int run_moe_dispatch_plan(cpu_task *t, char *e, size_t n)
{
    int dropped = cpu_moe_dispatch_plan(P(0), P(1), P(2), P(3), P(5), I(0), I(1), I(2), I(3));
    if (P(4))
        *(int *)P(4) += dropped;
    return 0;
}
static void cpu_op_moe_dispatch_plan(dev_stream *s, int *counts, int *offsets, int *row_token,
                                     int *row_of, int *dropped_acc, const int *expert, int N,
                                     int E, int K, int capacity)
{
    cpu_task t = {.run = run_moe_dispatch_plan,
                  .p = {counts, offsets, row_token, row_of, dropped_acc, (void *)expert},
                  .i = {N, E, K, capacity}};
    enqueue_compute(s, &t, "moe_dispatch_plan", 0, 16.0 * N * K);
}

static int run_moe_permute_forward(cpu_task *t, char *e, size_t n)
{
    const int *offsets = P(3);
    cpu_moe_permute_forward(P(0), P(1), P(2), offsets[I(0)], I(1));
    return 0;
}
static void cpu_op_moe_permute_forward(dev_stream *s, dev_act *xp, const dev_act *x,
                                       const int *row_token, const int *offsets, int N, int E,
                                       int K, int C)
{
    cpu_task t = {.run = run_moe_permute_forward,
                  .p = {xp, (void *)x, (void *)row_token, (void *)offsets},
                  .i = {E, C}};
    act_n(&t, 0, 1, (size_t)N * K * C);
    act_n(&t, 1, 0, (size_t)N * C);
    enqueue_compute(s, &t, "moe_permute_forward", 0, 8.0 * N * K * C);
}

static int run_moe_permute_backward(cpu_task *t, char *e, size_t n)
{
    const int *offsets = P(3);
    cpu_moe_permute_backward(P(0), P(1), P(2), offsets[I(0)], I(1));
    return 0;
}
static void cpu_op_moe_permute_backward(dev_stream *s, dev_act *dx, const dev_act *dxp,
                                        const int *row_token, const int *offsets, int N, int E,
                                        int K, int C)
{
    cpu_task t = {.run = run_moe_permute_backward,
                  .p = {dx, (void *)dxp, (void *)row_token, (void *)offsets},
                  .i = {E, C}};
    act_n(&t, 0, 1, (size_t)N * C);
    act_n(&t, 1, 0, (size_t)N * K * C);
    enqueue_compute(s, &t, "moe_permute_backward", (double)N * K * C, 12.0 * N * K * C);
}

static int run_moe_unpermute_forward(cpu_task *t, char *e, size_t n)
{
    cpu_moe_unpermute_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
    return 0;
}
static void cpu_op_moe_unpermute_forward(dev_stream *s, dev_act *out, const dev_act *yp,
                                         const float *gate, const int *row_of, int N, int K, int C)
{
    cpu_task t = {.run = run_moe_unpermute_forward,
                  .p = {out, (void *)yp, (void *)gate, (void *)row_of},
                  .i = {N, K, C}};
    act_n(&t, 0, 1, (size_t)N * C);
    act_n(&t, 1, 0, (size_t)N * K * C);
    enqueue_compute(s, &t, "moe_unpermute_forward", 2.0 * N * K * C, 4.0 * N * C + 4.0 * N * K * C);
}

static int run_moe_unpermute_backward(cpu_task *t, char *e, size_t n)
{
    cpu_moe_unpermute_backward(P(0), P(1), P(2), P(3), P(4), P(5), I(0), I(1), I(2));
    return 0;
}
static void cpu_op_moe_unpermute_backward(dev_stream *s, dev_act *dyp, float *dgate,
                                          const dev_act *dout, const dev_act *yp, const float *gate,
                                          const int *row_of, int N, int K, int C)
{
    cpu_task t = {.run = run_moe_unpermute_backward,
                  .p = {dyp, dgate, (void *)dout, (void *)yp, (void *)gate, (void *)row_of},
                  .i = {N, K, C}};
    act_n(&t, 0, 1, (size_t)N * K * C);
    act_n(&t, 2, 0, (size_t)N * C);
    act_n(&t, 3, 0, (size_t)N * K * C);
    enqueue_compute(s, &t, "moe_unpermute_backward", 4.0 * N * K * C, 4.0 * N * C + 12.0 * N * K * C);
}

static int run_moe_expert_matmul_forward(cpu_task *t, char *e, size_t n)
{
    cpu_moe_expert_matmul_forward(P(0), P(1), P(2), P(3), P(4), I(0), I(1), I(2));
    return 0;
}
static void cpu_op_moe_expert_matmul_forward(dev_stream *s, dev_act *out, const dev_act *inp,
                                             const float *weight, const float *bias,
                                             const int *offsets, int Rmax, int E, int C, int OC)
{
    cpu_task t = {.run = run_moe_expert_matmul_forward,
                  .p = {out, (void *)inp, (void *)weight, (void *)bias, (void *)offsets},
                  .i = {E, C, OC}};
    act_n(&t, 0, 1, (size_t)Rmax * OC);
    act_n(&t, 1, 0, (size_t)Rmax * C);
    /* the bound: the rows actually multiplied are offsets[E] <= Rmax */
    enqueue_compute(s, &t, "moe_expert_matmul_forward", 2.0 * Rmax * C * OC,
                    4.0 * ((double)Rmax * (C + OC) + (double)E * OC * C));
}

static int run_moe_expert_matmul_backward(cpu_task *t, char *e, size_t n)
{
    cpu_moe_expert_matmul_backward(P(0), P(1), P(2), P(3), P(4), P(5), P(6), I(0), I(1), I(2));
    return 0;
}
static void cpu_op_moe_expert_matmul_backward(dev_stream *s, dev_act *dinp, float *dweight,
                                              float *dbias, const dev_act *dout, const dev_act *inp,
                                              const float *weight, const int *offsets, int Rmax,
                                              int E, int C, int OC)
{
    cpu_task t = {.run = run_moe_expert_matmul_backward,
                  .p = {dinp, dweight, dbias, (void *)dout, (void *)inp, (void *)weight,
                        (void *)offsets},
                  .i = {E, C, OC}};
    act_n(&t, 0, 1, (size_t)Rmax * C);
    act_n(&t, 3, 0, (size_t)Rmax * OC);
    act_n(&t, 4, 0, (size_t)Rmax * C);
    enqueue_compute(s, &t, "moe_expert_matmul_backward", 4.0 * Rmax * C * OC,
                    8.0 * ((double)Rmax * (C + OC) + (double)E * OC * C));
}

static int run_gelu_forward(cpu_task *t, char *e, size_t n)
{
    cpu_gelu_forward(P(0), P(1), I(0));
    return 0;
}
static void cpu_op_gelu_forward(dev_stream *s, dev_act *out, const dev_act *inp, int N)
{
    cpu_task t = {.run = run_gelu_forward, .p = {out, (void *)inp}, .i = {N}};
    act_n(&t, 0, 1, (size_t)N);
    act_n(&t, 1, 0, (size_t)N);
    enqueue_compute(s, &t, "gelu_forward", 10.0 * N, 8.0 * N);
}

static int run_gelu_backward(cpu_task *t, char *e, size_t n)
{
    cpu_gelu_backward(P(0), P(1), P(2), I(0));
    return 0;
}
static void cpu_op_gelu_backward(dev_stream *s, dev_act *dinp, const dev_act *inp,
                                 const dev_act *dout, int N)
{
    cpu_task t = {.run = run_gelu_backward, .p = {dinp, (void *)inp, (void *)dout}, .i = {N}};
    act_n(&t, 0, 1, (size_t)N);
    act_n(&t, 1, 0, (size_t)N);
    act_n(&t, 2, 0, (size_t)N);
    enqueue_compute(s, &t, "gelu_backward", 20.0 * N, 16.0 * N);
}

static int run_residual_forward(cpu_task *t, char *e, size_t n)
{
    cpu_residual_forward(P(0), P(1), P(2), I(0));
    return 0;
}
static void cpu_op_residual_forward(dev_stream *s, dev_act *out, const dev_act *a,
                                    const dev_act *b, int N)
{
    cpu_task t = {.run = run_residual_forward, .p = {out, (void *)a, (void *)b}, .i = {N}};
    act_n(&t, 0, 1, (size_t)N);
    act_n(&t, 1, 0, (size_t)N);
    act_n(&t, 2, 0, (size_t)N);
    enqueue_compute(s, &t, "residual_forward", 1.0 * N, 12.0 * N);
}

static int run_residual_backward(cpu_task *t, char *e, size_t n)
{
    cpu_residual_backward(P(0), P(1), P(2), I(0));
    return 0;
}
static void cpu_op_residual_backward(dev_stream *s, dev_act *da, dev_act *db, const dev_act *dout,
                                     int N)
{
    cpu_task t = {.run = run_residual_backward, .p = {da, db, (void *)dout}, .i = {N}};
    act_n(&t, 0, 1, (size_t)N);
    act_n(&t, 1, 1, (size_t)N);
    act_n(&t, 2, 0, (size_t)N);
    enqueue_compute(s, &t, "residual_backward", 2.0 * N, 20.0 * N);
}

static int run_crossentropy_forward(cpu_task *t, char *e, size_t n)
{
    cpu_softmax_crossentropy_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
    return 0;
}
static void cpu_op_crossentropy_forward(dev_stream *s, float *losses, dev_act *probs,
                                        const dev_act *logits, const int *targets, int N, int V,
                                        int Vp)
{
    cpu_task t = {.run = run_crossentropy_forward,
                  .p = {losses, probs, (void *)logits, (void *)targets},
                  .i = {N, V, Vp}};
    act_n(&t, 1, 1, (size_t)N * Vp);
    act_n(&t, 2, 0, (size_t)N * Vp);
    enqueue_compute(s, &t, "crossentropy_forward", 5.0 * N * (double)V, 8.0 * N * (double)Vp);
}

static int run_crossentropy_backward(cpu_task *t, char *e, size_t n)
{
    cpu_softmax_crossentropy_backward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
    return 0;
}
static void cpu_op_crossentropy_backward(dev_stream *s, dev_act *dlogits, const float *dlosses,
                                         const dev_act *probs, const int *targets, int N, int V,
                                         int Vp)
{
    cpu_task t = {.run = run_crossentropy_backward,
                  .p = {dlogits, (void *)dlosses, (void *)probs, (void *)targets},
                  .i = {N, V, Vp}};
    act_n(&t, 0, 1, (size_t)N * Vp);
    act_n(&t, 2, 0, (size_t)N * Vp);
    enqueue_compute(s, &t, "crossentropy_backward", 3.0 * N * (double)V, 12.0 * N * (double)Vp);
}

static int run_fill(cpu_task *t, char *e, size_t n)
{
    float *x = P(0);
    float v = F(0);
    for (size_t k = 0; k < (size_t)t->i[0]; k++)
        x[k] = v;
    return 0;
}
static void cpu_op_fill(dev_stream *s, float *x, float value, size_t n)
{
    cpu_task t = {.run = run_fill, .p = {x}, .i = {(int64_t)n}, .f = {value}};
    t.name = "fill";
    t.category = STEPSCOPE_CAT_MEMSET;
    t.bytes = 4 * n;
    cpu_stream_enqueue(s, &t);
}

static int run_sum_accumulate(cpu_task *t, char *e, size_t n)
{
    const float *x = P(1);
    double acc = 0;
    for (size_t k = 0; k < (size_t)t->i[0]; k++)
        acc += x[k];
    *(double *)P(0) += acc;
    return 0;
}
static void cpu_op_sum_accumulate(dev_stream *s, double *acc, const float *x, size_t n)
{
    cpu_task t = {.run = run_sum_accumulate, .p = {acc, (void *)x}, .i = {(int64_t)n}};
    enqueue_compute(s, &t, "sum", (double)n, 4.0 * n);
}

static int run_sum_squares_accumulate(cpu_task *t, char *e, size_t n)
{
    *(double *)P(0) += cpu_sum_squares(P(1), (size_t)t->i[0]);
    return 0;
}
static void cpu_op_sum_squares_accumulate(dev_stream *s, double *acc, const float *x, size_t n)
{
    cpu_task t = {.run = run_sum_squares_accumulate, .p = {acc, (void *)x}, .i = {(int64_t)n}};
    enqueue_compute(s, &t, "sum_squares", 2.0 * n, 4.0 * n);
}

static int run_scale(cpu_task *t, char *e, size_t n)
{
    cpu_scale(P(0), F(0), (size_t)t->i[0]);
    return 0;
}
static void cpu_op_scale(dev_stream *s, float *x, float factor, size_t n)
{
    cpu_task t = {.run = run_scale, .p = {x}, .i = {(int64_t)n}, .f = {factor}};
    enqueue_compute(s, &t, "scale", (double)n, 8.0 * n);
}

static int run_add(cpu_task *t, char *e, size_t n)
{
    float *dst = P(0);
    const float *src = P(1);
    for (size_t k = 0; k < (size_t)t->i[0]; k++)
        dst[k] += src[k];
    return 0;
}
static void cpu_op_add(dev_stream *s, float *dst, const float *src, size_t n)
{
    cpu_task t = {.run = run_add, .p = {dst, (void *)src}, .i = {(int64_t)n}};
    enqueue_compute(s, &t, "add", (double)n, 12.0 * n);
}

static int run_adamw(cpu_task *t, char *e, size_t n)
{
    cpu_adamw_update(P(0), P(1), P(2), P(3), (size_t)t->i[0], F(0), F(1), F(2), F(3), F(4),
                     (int)t->i[1]);
    return 0;
}
static void cpu_op_adamw(dev_stream *s, float *params, const float *grads, float *m, float *v,
                         size_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int step)
{
    cpu_task t = {.run = run_adamw,
                  .p = {params, (void *)grads, m, v},
                  .i = {(int64_t)n, step},
                  .f = {lr, beta1, beta2, eps, weight_decay}};
    enqueue_compute(s, &t, "adamw", 12.0 * n, 28.0 * n);
}

static int cpu_set_activation_dtype(dev_device *d, dev_dtype t, char *err, size_t errlen)
{
    if (t != DEV_F32 && t != DEV_BF16) {
        snprintf(err, errlen, "unknown activation type %d", (int)t);
        return -1;
    }
    d->act = t;
    return 0;
}
static dev_dtype cpu_activation_dtype(const dev_device *d) { return d->act; }

static void cpu_close(dev_device *d);
static const char *cpu_name(const dev_device *d) { return "cpu"; }
static const char *cpu_last_error(const dev_device *d) { return d->error; }
static void cpu_trace_started(dev_device *d);
static void cpu_set_progress_hook(dev_device *d, void (*hook)(void *), void *arg);

static const dev_ops cpu_ops = {
    .backend_name = "cpu",
    .close = cpu_close,
    .name = cpu_name,
    .last_error = cpu_last_error,
    .trace_started = cpu_trace_started,
    .set_progress_hook = cpu_set_progress_hook,
    .bytes_in_use = cpu_bytes_in_use,
    .bytes_peak = cpu_bytes_peak,
    .abort = cpu_abort,
    .set_activation_dtype = cpu_set_activation_dtype,
    .activation_dtype = cpu_activation_dtype,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_synchronize = cpu_stream_synchronize,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .copy_to_device = cpu_copy_to_device,
    .copy_to_host = cpu_copy_to_host,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .copy_2d = cpu_copy_2d,
    .encoder_forward = cpu_op_encoder_forward,
    .encoder_backward = cpu_op_encoder_backward,
    .layernorm_forward = cpu_op_layernorm_forward,
    .layernorm_backward = cpu_op_layernorm_backward,
    .matmul_forward = cpu_op_matmul_forward,
    .matmul_backward = cpu_op_matmul_backward,
    .attention_forward = cpu_op_attention_forward,
    .attention_backward = cpu_op_attention_backward,
    .attention_block_forward = cpu_op_attention_block_forward,
    .attention_block_backward = cpu_op_attention_block_backward,
    .moe_router_forward = cpu_op_moe_router_forward,
    .moe_router_backward = cpu_op_moe_router_backward,
    .moe_aux_loss_accumulate = cpu_op_moe_aux_loss_accumulate,
    .moe_dispatch_plan = cpu_op_moe_dispatch_plan,
    .moe_permute_forward = cpu_op_moe_permute_forward,
    .moe_permute_backward = cpu_op_moe_permute_backward,
    .moe_unpermute_forward = cpu_op_moe_unpermute_forward,
    .moe_unpermute_backward = cpu_op_moe_unpermute_backward,
    .moe_expert_matmul_forward = cpu_op_moe_expert_matmul_forward,
    .moe_expert_matmul_backward = cpu_op_moe_expert_matmul_backward,
    .gelu_forward = cpu_op_gelu_forward,
    .gelu_backward = cpu_op_gelu_backward,
    .residual_forward = cpu_op_residual_forward,
    .residual_backward = cpu_op_residual_backward,
    .crossentropy_forward = cpu_op_crossentropy_forward,
    .crossentropy_backward = cpu_op_crossentropy_backward,
    .fill = cpu_op_fill,
    .sum_accumulate = cpu_op_sum_accumulate,
    .sum_squares_accumulate = cpu_op_sum_squares_accumulate,
    .scale = cpu_op_scale,
    .add = cpu_op_add,
    .adamw = cpu_op_adamw,
};

const dev_ops *dev_cpu_ops(void) { return &cpu_ops; }

dev_device *dev_cpu_open(char *err, size_t errlen)
{
    dev_device *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory creating the cpu device");
        return NULL;
    }
    d->ops = &cpu_ops;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    return d;
}

static void cpu_close(dev_device *d)
{
    for (int i = 0; i < d->nstreams; i++)
        if (d->streams[i])
            cpu_stream_destroy(d->streams[i]);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}

static void cpu_trace_started(dev_device *d)
{
    for (int i = 0; i < d->nstreams; i++)
        if (d->streams[i])
            stepscope_stream_declare(d->streams[i]->trace_id, STEPSCOPE_STREAM_CPU, 0,
                                     d->streams[i]->name);
}

static void cpu_set_progress_hook(dev_device *d, void (*hook)(void *), void *arg)
{
    d->hook = hook;
    d->hook_arg = arg;
}
