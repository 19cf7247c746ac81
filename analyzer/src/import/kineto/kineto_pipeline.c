/*
 * kineto_pipeline.c — pipeline parallelism recognised in a PyTorch profiler
 * trace (docs/kineto-import.md "Pipelines"). stepscope's trainer declares its
 * pipeline: `layout` and `schedule` metadata and one `forward` / `backward`
 * range per micro-batch with args {"microbatch":i,"stage":s,"chunk":c}
 * (docs/trace-format.md §6). A PyTorch job declares nothing, so this file
 * reads the same facts from what the trace holds, once the whole rank is
 * read:
 *
 *   - a pipeline at all: point-to-point calls on the host (`c10d::send`,
 *     `c10d::recv_`, `gloo:send`/`gloo:recv`, `nccl:send`/`nccl:recv`) or
 *     collective records of a send or recv (NCCL metadata); without them a
 *     rank is left alone. NCCL `SendRecv` kernels alone are no evidence:
 *     PyTorch's all_to_all launches them too;
 *   - the schedule's own annotations where torch.distributed.pipelining
 *     writes them: `Forward i` / `Backward i` (ScheduleGPipe), and
 *     `PP:<stage><F|B|I|W><mb>` (the schedules run by
 *     _PipelineScheduleRuntime: ScheduleInterleaved1F1B,
 *     ScheduleInterleavedZeroBubble, ScheduleLoopedBFS...), where the stage
 *     is the global (virtual) stage, I the input-gradient and W the
 *     weight-gradient half of a zero-bubble backward;
 *   - otherwise (Schedule1F1B writes no annotation) the order of the work:
 *     the rank's top-level CPU ops in each ProfilerStep cut at point-to-point
 *     calls and at every change between forward work and backward work
 *     (`autograd::engine::evaluate_function: ...`); a piece of forward work
 *     counts as a micro-batch's forward when it begins at a receive, ends in
 *     a send or is followed by a backward (the first stage receives nothing,
 *     the last sends nothing, and in 1F1B computes its loss and goes straight
 *     on), so the split of the batch before the first forward and the
 *     gradient scaling after the last backward are not taken for one;
 *     forwards and backwards are numbered in their order within the step.
 *
 * The stages: the pipeline is the rank's process group that
 * distributedInfo.pg_config names as one (DeviceMesh's "mesh_pp": its ranks,
 * by group rank, are the pipeline's), else the world
 * (`distributedInfo.world_size`); stage v runs on the pipeline's rank v mod p
 * (PyTorch's mapping of stages to ranks for every schedule above), and the
 * chunk of stage v is v / p. The pipelines of a job are told apart by
 * `layout.dp_rank`: the rank's place in its data-parallel group ("mesh_dp"),
 * else the lowest global rank of its pipeline. What is
 * found must hold in every step — as many forwards as backwards (and weight
 * backwards, if any) for each chunk, the same micro-batches in every step,
 * every stage on this rank — else the rank gets a warning that says why and
 * no pipeline is declared.
 */
#include "kineto_pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kineto_p2p.h"

enum { PASS_FORWARD, PASS_BACKWARD, PASS_WEIGHT, PASS_N };

static const char *const pass_range_name[PASS_N] = {"forward", "backward", "backward_weight"};

/* One micro-batch's forward, backward or weight backward on this rank. */
typedef struct pp_item {
  int64_t start, end;
  uint64_t thread;
  int pass, mb, stage; /* stage: the global (virtual) stage */
  size_t step;
} pp_item;

typedef struct pp_items {
  pp_item *v;
  size_t n, cap;
} pp_items;

static int push_item(pp_items *it, pp_item x) {
  if (ssa_grow((void **)&it->v, &it->cap, it->n + 1, sizeof *it->v)) return STEPSCOPE_E_NOMEM;
  it->v[it->n++] = x;
  return 0;
}

static int has_p2p(const ssa_rank *r) {
  for (size_t i = 0; i < r->nranges; i++)
    if (ssa_host_p2p_call(ssa_rank_str(r, r->ranges[i].name))) return 1;
  for (size_t i = 0; i < r->ncolls; i++)
    if (r->colls[i].flags & STEPSCOPE_COLL_F_P2P) return 1;
  return 0;
}

/* The decimal number at *p (advanced past it), or -1 when there is none. */
static int number_at(const char **p) {
  const char *s = *p;
  long v = 0;
  if (*s < '0' || *s > '9') return -1;
  while (*s >= '0' && *s <= '9' && v < 100000000)
    v = v * 10 + (*s++ - '0');
  if (*s >= '0' && *s <= '9') return -1;
  *p = s;
  return (int)v;
}

/* An annotation of a schedule: 1 and the pass, stage and micro-batch, else 0.
 * `gpipe` is set for ScheduleGPipe's `Forward i` / `Backward i` (stage: -1,
 * this rank's). */
static int parse_annotation(const char *n, int *pass, int *stage, int *mb, int *gpipe) {
  *gpipe = 0;
  if (!strncmp(n, "PP:", 3)) {
    const char *p = n + 3;
    if ((*stage = number_at(&p)) < 0) return 0;
    char t = *p++;
    *pass = t == 'F'               ? PASS_FORWARD
            : t == 'B' || t == 'I' ? PASS_BACKWARD
            : t == 'W'             ? PASS_WEIGHT
                                   : -1;
    if (*pass < 0 || (*mb = number_at(&p)) < 0 || *p) return 0;
    return 1;
  }
  const char *p = NULL;
  if (!strncmp(n, "Forward ", 8)) *pass = PASS_FORWARD, p = n + 8;
  if (!strncmp(n, "Backward ", 9)) *pass = PASS_BACKWARD, p = n + 9;
  if (!p || (*mb = number_at(&p)) < 0 || *p) return 0;
  *stage = -1;
  *gpipe = 1;
  return 1;
}

/* The steps: ProfilerStep#N ranges, by start. */
typedef struct pp_steps {
  int64_t *start, *end;
  size_t n;
} pp_steps;

static long step_of(const pp_steps *s, int64_t t) {
  for (size_t i = 0; i < s->n; i++)
    if (s->start[i] <= t && t < s->end[i]) return (long)i;
  return -1;
}

/* ---- inference from the order of the work (no annotation) ---- */

enum { W_NEUTRAL, W_FORWARD, W_BACKWARD, W_SEND, W_RECV };

/* What a top-level CPU op is to the schedule. Neutral: bookkeeping that
 * belongs to whatever is going on (detaching, allocating, splitting the
 * batch) and communication other than point-to-point. */
static int work_kind(const char *n) {
  int p = ssa_host_p2p_call(n);
  if (p) return p == 1 ? W_SEND : W_RECV;
  if (!strncmp(n, "autograd::engine::evaluate_function:", 36)) return W_BACKWARD;
  static const char *const neutral[] = {"aten::detach", "aten::detach_",      "aten::empty",
                                        "aten::zeros",  "aten::tensor_split", "aten::split",
                                        "aten::chunk",  "aten::view",         "aten::alias"};
  for (size_t i = 0; i < sizeof neutral / sizeof neutral[0]; i++)
    if (!strcmp(n, neutral[i])) return W_NEUTRAL;
  if (!strncmp(n, "aten::empty_", 12)) return W_NEUTRAL;
  if (!strncmp(n, "c10d::", 6) || !strncmp(n, "gloo:", 5) || !strncmp(n, "nccl:", 5) ||
      !strcmp(n, "record_param_comms"))
    return W_NEUTRAL;
  return W_FORWARD;
}

typedef struct host_call { /* start first: ssa_count_below searches them */
  int64_t start, end;
  uint64_t thread;
  int kind;
} host_call;

/* By start, parents (longer) first. */
static int cmp_call_start(const void *pa, const void *pb) {
  const host_call *a = pa, *b = pb;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return (a->end < b->end) - (a->end > b->end);
}

/* By thread, then as cmp_call_start. */
static int cmp_call_thread(const void *pa, const void *pb) {
  const host_call *a = pa, *b = pb;
  if (a->thread != b->thread) return a->thread < b->thread ? -1 : 1;
  return cmp_call_start(pa, pb);
}

/* A piece of forward or backward work being gathered. */
typedef struct piece {
  int open, kind, sent, received; /* ends in a send; begins at a receive */
  int64_t start, end;
  uint64_t thread;
} piece;

typedef struct pieces {
  piece *v;
  size_t n, cap;
} pieces;

static int close_piece(piece *cur, pieces *out) {
  if (!cur->open) return 0;
  cur->open = 0;
  if (ssa_grow((void **)&out->v, &out->cap, out->n + 1, sizeof *out->v)) return STEPSCOPE_E_NOMEM;
  out->v[out->n++] = *cur;
  return 0;
}

/* The pieces of one step's top-level calls (by start). */
static int cut_pieces(const host_call *c, size_t n, pieces *out) {
  piece cur = {0};
  int64_t pending = -1; /* a receive's start: the next piece begins there */
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    switch (c[i].kind) {
    case W_SEND:
      if (!cur.open) break;
      if (c[i].end > cur.end) cur.end = c[i].end;
      cur.sent = 1;
      rc = close_piece(&cur, out);
      break;
    case W_RECV:
      rc = close_piece(&cur, out);
      if (pending < 0) pending = c[i].start;
      break;
    case W_NEUTRAL:
      if (cur.open && c[i].end > cur.end) cur.end = c[i].end;
      break;
    default:
      if (cur.open && cur.kind != c[i].kind) rc = close_piece(&cur, out);
      if (!cur.open) {
        cur = (piece){1,        c[i].kind,  0, pending >= 0, pending >= 0 ? pending : c[i].start,
                      c[i].end, c[i].thread};
        pending = -1;
      }
      if (c[i].end > cur.end) cur.end = c[i].end;
    }
  }
  if (rc == 0) rc = close_piece(&cur, out);
  return rc;
}

/* The top-level CPU ops of every thread (not inside another of its thread), by start: *n of
 * them, or NULL without memory. */
static host_call *top_calls(const ssa_rank *r, size_t *n_out) {
  uint32_t dom_cpu = 0;
  for (uint32_t i = 1; i < r->strings.count && !dom_cpu; i++)
    if (!strcmp(ssa_rank_str(r, i), "cpu_op")) dom_cpu = i;
  size_t n = 0;
  host_call *c = malloc((r->nranges ? r->nranges : 1) * sizeof *c);
  if (!c) return NULL;
  for (size_t i = 0; i < r->nranges; i++) {
    const ssa_range *g = &r->ranges[i];
    if (g->domain != dom_cpu || !dom_cpu) continue;
    c[n++] =
        (host_call){g->start, g->end, r->lanes[g->lane].id, work_kind(ssa_rank_str(r, g->name))};
  }
  qsort(c, n, sizeof *c, cmp_call_thread);
  size_t top = 0;
  int64_t top_end = INT64_MIN;
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || c[i].thread != c[i - 1].thread) top_end = INT64_MIN;
    if (c[i].start < top_end) continue;
    top_end = c[i].end;
    c[top++] = c[i];
  }
  qsort(c, top, sizeof *c, cmp_call_start);
  *n_out = top;
  return c;
}

static int infer_items(const host_call *c, size_t top, const pp_steps *steps, int stage,
                       pp_items *items) {
  int rc = 0;
  pieces ps = {0};
  size_t from = 0;
  for (size_t s = 0; s < steps->n && rc == 0; s++) {
    while (from < top && c[from].start < steps->start[s])
      from++;
    size_t to = from;
    while (to < top && c[to].start < steps->end[s])
      to++;
    ps.n = 0;
    rc = cut_pieces(c + from, to - from, &ps);
    int nf = 0, nb = 0;
    for (size_t k = 0; k < ps.n && rc == 0; k++) {
      const piece *p = &ps.v[k];
      int pass = p->kind == W_BACKWARD ? PASS_BACKWARD : PASS_FORWARD;
      if (pass == PASS_FORWARD && !p->sent && !p->received &&
          !(k + 1 < ps.n && ps.v[k + 1].kind == W_BACKWARD))
        continue; /* not a micro-batch's forward: the batch's split, the gradients' scaling */
      rc = push_item(items, (pp_item){p->start, p->end, p->thread, pass,
                                      pass == PASS_FORWARD ? nf++ : nb++, stage, s});
    }
    from = to;
  }
  free(ps.v);
  return rc;
}

/* Each item's interval narrowed to its forward or backward work (the top-level CPU ops inside
 * it), so that a range does not cover the wait for a receive that GPipe's annotations and the
 * pieces cut at receives begin with: the viewer draws the ranges as the work. */
static void trim_items(pp_items *it, const host_call *c, size_t n) {
  for (size_t i = 0; i < it->n; i++) {
    pp_item *x = &it->v[i];
    size_t k = ssa_count_below(c, n, sizeof *c, x->start); /* the first call starting there */
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (; k < n && c[k].start < x->end; k++)
      if (c[k].kind == W_FORWARD || c[k].kind == W_BACKWARD) {
        if (c[k].start < lo) lo = c[k].start;
        if (c[k].end > hi) hi = c[k].end;
      }
    if (lo > hi) continue;
    x->start = lo;
    x->end = hi < x->end ? hi : x->end;
  }
}

/* ---- from annotations ---- */

static int annotated_items(const ssa_rank *r, const pp_steps *steps, int own, pp_items *items,
                           int *gpipe) {
  *gpipe = 0;
  for (size_t i = 0; i < r->nranges; i++) {
    const ssa_range *g = &r->ranges[i];
    int pass, stage, mb, gp;
    if (!parse_annotation(ssa_rank_str(r, g->name), &pass, &stage, &mb, &gp)) continue;
    long s = step_of(steps, g->start);
    if (s < 0) continue;
    *gpipe |= gp;
    int rc = push_item(items, (pp_item){g->start, g->end, r->lanes[g->lane].id, pass, mb,
                                        stage < 0 ? own : stage, (size_t)s});
    if (rc) return rc;
  }
  return 0;
}

static int cmp_item(const void *pa, const void *pb) {
  const pp_item *a = pa, *b = pb;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return (a->end < b->end) - (a->end > b->end);
}

/* The schedule found: stages (ranks), virtual stages, micro-batches. */
typedef struct pp_found {
  int p, V, M, weight, interleaved_fb;
  char why[160];
} pp_found;

/* Checks the items of every step: each stage of this rank's (its place `own` in the pipeline) has
 * micro-batches 0..M-1 once in
 * each pass (the weight pass in all or none). 0, or -1 with the reason in f->why. */
static int check_items(const pp_items *it, const pp_steps *steps, int own, int annotated,
                       pp_found *f) {
  int p = f->p, maxv = -1;
  for (size_t i = 0; i < it->n; i++) {
    if (it->v[i].stage % p != own) {
      snprintf(f->why, sizeof f->why,
               "stage %d runs on the pipeline's rank %d, not on its rank %d of %d", it->v[i].stage,
               it->v[i].stage % p, own, p);
      return -1;
    }
    if (it->v[i].stage > maxv) maxv = it->v[i].stage;
    f->weight |= it->v[i].pass == PASS_WEIGHT;
  }
  f->V = maxv / p + 1;
  f->M = 0;
  for (size_t i = 0; i < it->n; i++)
    if (it->v[i].mb + 1 > f->M) f->M = it->v[i].mb + 1;
  if (f->M < 2 && !annotated) {
    /* one forward and one backward a step: plain training with some p2p, not a pipeline told
     * by its work's order */
    snprintf(f->why, sizeof f->why, "one forward and one backward a step");
    return -1;
  }
  if (f->V > 64 || f->M > 4096) {
    snprintf(f->why, sizeof f->why, "%d virtual stages and %d micro-batches are implausible", f->V,
             f->M);
    return -1;
  }
  size_t cells = (size_t)PASS_N * (size_t)f->V * (size_t)f->M;
  unsigned char *seen = malloc(cells);
  if (!seen) {
    snprintf(f->why, sizeof f->why, "out of memory");
    return -1;
  }
  int ok = 1;
  size_t i = 0;
  f->interleaved_fb = 0;
  for (size_t s = 0; s < steps->n && ok; s++) {
    memset(seen, 0, cells);
    size_t b = i;
    int any = 0, backward_seen = 0;
    for (; i < it->n && it->v[i].step == s; i++) {
      const pp_item *x = &it->v[i];
      size_t cell =
          ((size_t)x->pass * (size_t)f->V + (size_t)(x->stage / p)) * (size_t)f->M + (size_t)x->mb;
      if (seen[cell]++) ok = 0;
      any = 1;
      if (x->pass != PASS_FORWARD) backward_seen = 1;
      if (x->pass == PASS_FORWARD && backward_seen) f->interleaved_fb = 1;
    }
    if (!any) continue; /* a step without pipeline work (a stub) */
    for (size_t k = 0; k < cells && ok; k++)
      if (!seen[k] && (k / ((size_t)f->V * (size_t)f->M) != PASS_WEIGHT || f->weight)) ok = 0;
    if (!ok)
      snprintf(f->why, sizeof f->why,
               "step %zu does not run every micro-batch 0..%d once in each pass of each stage "
               "(%zu pieces of work)",
               s + 1, f->M - 1, i - b);
  }
  free(seen);
  return ok ? 0 : -1;
}

/* The schedule's name, as the trainer spells it where it has one (ssa_bubble_theory reads it). */
static const char *schedule_name(const pp_found *f, int gpipe) {
  if (f->weight) return f->V > 1 ? "interleaved_zero_bubble" : "zero_bubble";
  if (f->V > 1) return "interleaved";
  if (gpipe) return "afab";
  return f->interleaved_fb ? "1f1b" : "afab";
}

static int add_metadata(ssa_rank *r, const char *key, const char *json) {
  stepscope_record m = {.kind = STEPSCOPE_REC_METADATA,
                        .u.metadata = {.key = key, .value_json = json}};
  return ssa_rank_add_record(r, &m);
}

static int declare(ssa_rank *r, const pp_items *it, const pp_found *f, const ssa_kineto_pp *pp,
                   const char *name, int annotated) {
  uint32_t dom = ssa_rank_intern(r, "pipeline (recognised)");
  uint32_t names[PASS_N];
  for (int k = 0; k < PASS_N; k++)
    if (!(names[k] = ssa_rank_intern(r, pass_range_name[k]))) return STEPSCOPE_E_NOMEM;
  if (!dom) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < it->n; i++) {
    const pp_item *x = &it->v[i];
    char args[96];
    snprintf(args, sizeof args, "{\"microbatch\":%d,\"stage\":%d,\"chunk\":%d}", x->mb, pp->stage,
             x->stage / f->p);
    stepscope_record rec = {.kind = STEPSCOPE_REC_RANGE,
                            .u.range = {.start_ns = (uint64_t)x->start,
                                        .end_ns = (uint64_t)x->end,
                                        .thread = x->thread,
                                        .name = names[x->pass],
                                        .domain = dom,
                                        .args = ssa_rank_intern(r, args)}};
    if (!rec.u.range.args) return STEPSCOPE_E_NOMEM;
    int rc = ssa_rank_add_record(r, &rec);
    if (rc) return rc;
  }
  char json[256];
  snprintf(json, sizeof json,
           "{\"world\":%d,\"rank\":%d,\"pp\":%d,\"pp_rank\":%d,\"dp\":%d,\"dp_rank\":%d,"
           "\"tp\":1,\"cp\":1,\"virtual_stages\":%d,\"microbatches\":%d}",
           pp->world, pp->rank, f->p, pp->stage, pp->dp, pp->dp_rank, f->V, f->M);
  int rc = add_metadata(r, "layout", json);
  if (rc) return rc;
  snprintf(json, sizeof json,
           "{\"name\":\"%s\",\"stages\":%d,\"microbatches\":%d,\"virtual_stages\":%d,"
           "\"bubble_theory\":%.6f,\"recognised_from\":\"%s\"}",
           name, f->p, f->M, f->V, ssa_bubble_theory(name, f->p, f->M, f->V),
           annotated ? "annotations" : "order of work");
  if ((rc = add_metadata(r, "schedule", json))) return rc;
  /* the point-to-point transfers are the pipeline's (the bubble counts them) */
  for (size_t i = 0; i < r->ncolls; i++)
    if (r->colls[i].flags & STEPSCOPE_COLL_F_P2P) r->colls[i].flags |= STEPSCOPE_COLL_F_PIPELINE;
  /* the host's point-to-point calls matched across ranks (kineto_p2p.c) */
  return ssa_kineto_p2p_match(r, pp, f->V);
}

int ssa_kineto_pipeline(ssa_rank *r, const char *file_name, const ssa_kineto_pp *pp) {
  if (pp->stages < 2 || pp->stage < 0 || pp->stage >= pp->stages || !has_p2p(r)) return 0;
  pp_steps steps = {0};
  size_t cap = 0;
  for (size_t i = 0; i < r->nranges; i++)
    cap += !strncmp(ssa_rank_str(r, r->ranges[i].name), "ProfilerStep#", 13);
  if (cap == 0) return 0; /* no steps: nothing to count micro-batches in */
  steps.start = malloc(cap * sizeof *steps.start);
  steps.end = malloc(cap * sizeof *steps.end);
  pp_items items = {0};
  host_call *calls = NULL;
  int rc = STEPSCOPE_E_NOMEM, gpipe = 0;
  if (!steps.start || !steps.end) goto out;
  for (size_t i = 0; i < r->nranges; i++)
    if (!strncmp(ssa_rank_str(r, r->ranges[i].name), "ProfilerStep#", 13)) {
      size_t k = steps.n++; /* ranges are in file order: keep the steps by start */
      while (k > 0 && steps.start[k - 1] > r->ranges[i].start) {
        steps.start[k] = steps.start[k - 1];
        steps.end[k] = steps.end[k - 1];
        k--;
      }
      steps.start[k] = r->ranges[i].start;
      steps.end[k] = r->ranges[i].end;
    }
  if ((rc = annotated_items(r, &steps, pp->stage, &items, &gpipe))) goto out;
  int annotated = items.n > 0;
  rc = STEPSCOPE_E_NOMEM;
  size_t ncalls = 0;
  if (!(calls = top_calls(r, &ncalls))) goto out;
  if (!annotated && (rc = infer_items(calls, ncalls, &steps, pp->stage, &items))) goto out;
  trim_items(&items, calls, ncalls);
  if (items.n) qsort(items.v, items.n, sizeof *items.v, cmp_item); /* v is NULL without any */
  pp_found f = {.p = pp->stages};
  if (items.n == 0) {
    snprintf(f.why, sizeof f.why, "no forward or backward work was found between them");
  } else if (check_items(&items, &steps, pp->stage, annotated, &f) == 0) {
    rc = declare(r, &items, &f, pp, schedule_name(&f, gpipe), annotated);
    goto out;
  }
  rc = ssa_rank_warn(r,
                     "%s: point-to-point communication, but no pipeline recognised (%s, from %s): "
                     "no bubble is reported for this rank (docs/kineto-import.md \"Pipelines\")",
                     file_name, f.why,
                     annotated ? "the schedule's annotations" : "the order of the work");
out:
  free(calls);
  free(steps.start);
  free(steps.end);
  free(items.v);
  return rc;
}
