/*
 * op_perf.c — the run's op table (ssa_ops.h): which PyTorch op each device kernel ran for,
 * grouped by op name and input shapes, with FLOPs and bytes from op_models.c.
 *
 * Attribution: a kernel (memcpy, memset) is joined to the runtime call that launched it
 * (correlation, done when the rank was finished); the CPU ops (`cpu_op` ranges) of that
 * call's thread that contain the call form a stack. Modelled ops are either primitives
 * (aten::addmm, aten::mm, aten::_softmax...: they do the work, whatever they call inside,
 * such as a copy_) or composites (aten::linear, aten::matmul, aten::conv2d,
 * aten::scaled_dot_product_attention, aten::layer_norm...: they dispatch to others,
 * ssa_op_is_composite). The kernel goes to the outermost primitive of the stack
 * (aten::linear -> aten::addmm -> kernel: aten::addmm), else to its deepest composite, else
 * to the innermost op. An op instance's time is the sum of its kernels' times. On a trace
 * without device activity (CPU-only) the same ops count their own durations: each primitive
 * with no primitive around it, each composite with no modelled op inside or primitive around
 * it, and each innermost op with no modelled op around it. A stepscope trainer's trace (CPU
 * backend) has no CPU ops: its compute operations carry their inputs themselves (host ops
 * with args, ssa_rank.op_ranges) and count their own time on their CPU stream; its CUDA
 * backend writes cpu_op ranges around its launches, which take the kernel path above. Only the
 * analysed steps' work counts (kernels, or CPU ops, that start inside the steps' window), and
 * only --rank's when it is given.
 *
 * The table is made in two parts, so that a bounded analysis (docs/scale.md) gives the same
 * rows: per rank, from its events, its instances grouped by (op name, inputs) with their
 * counts, kernels and times (ssa_rank_op_groups, kept in its result, the strings in its
 * summary's); then, across ranks, the groups of one (name, inputs) added up into a row, whose
 * FLOPs and bytes come from the total count, in the same order as before.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_ops.h"

/* One op instance (a CPU op range that got time). */
typedef struct instance {
  const char *name, *args;
  uint32_t rank_idx;
  uint32_t kernels;
  int64_t time;
  const void *group; /* the table's: the rank's ssa_op_group it stands for */
} instance;

typedef struct instances {
  instance *v;
  size_t n, cap;
} instances;

static int push(instances *s, instance x) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 1024;
    instance *v = realloc(s->v, cap * sizeof *v);
    if (!v) return -1;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = x;
  return 0;
}

int ssa_op_rank_instances(const ssa_analysis *an, size_t ri, ssa_op_instance_fn fn, void *ctx,
                          ssa_op_table *t) {
  const ssa_rank_result *rr = &an->ranks[ri];
  const ssa_rank *r = rr->rank;
  int64_t w0 = rr->nsteps ? rr->totals.start : INT64_MIN;
  int64_t w1 = rr->nsteps ? rr->totals.end : INT64_MAX;
  ssa_range_index c;
  int rc = -1;
  /* per op: its kind (0 no model, 1 primitive, 2 composite) and flags: ANC_PRIM a primitive
   * around it, ANC_MODEL a modelled op around it, DESC_MODEL one inside it, DESC_ANY any */
  enum { ANC_PRIM = 1, ANC_MODEL = 2, DESC_MODEL = 4, DESC_ANY = 8 };
  uint8_t *kind = NULL, *flags = NULL;
  int64_t *time = NULL;
  uint32_t *kernels = NULL;
  if (ssa_range_index_build(r, "cpu_op", &c)) goto out;
  kind = calloc(c.n ? c.n : 1, 1);
  flags = calloc(c.n ? c.n : 1, 1);
  time = calloc(c.n ? c.n : 1, sizeof *time);
  kernels = calloc(c.n ? c.n : 1, sizeof *kernels);
  if (!kind || !flags || !time || !kernels) goto out;
  for (size_t i = 0; i < c.n; i++) {
    const char *name = ssa_rank_str(r, r->ranges[c.idx[i]].name);
    kind[i] = !ssa_op_has_model(name) ? 0 : ssa_op_is_composite(name) ? 2 : 1;
    uint32_t p = c.parent[i]; /* sorted: a parent comes before its children */
    if (p != SSA_NONE)
      flags[i] |= (uint8_t)((flags[p] & (ANC_PRIM | ANC_MODEL)) | (kind[p] == 1 ? ANC_PRIM : 0) |
                            (kind[p] ? ANC_MODEL : 0));
  }
  for (size_t i = c.n; i-- > 0;)
    if (c.parent[i] != SSA_NONE)
      flags[c.parent[i]] |=
          (uint8_t)(DESC_ANY | (kind[i] || (flags[i] & DESC_MODEL) ? DESC_MODEL : 0));
  int device = !r->host_timeline && r->nops > 0;
  t->host_time = t->host_time || !device;
  if (device) {
    for (size_t k = 0; k < r->nops; k++) {
      const ssa_op *o = &r->ops[k];
      if (o->kind == SSA_OP_HOST || o->start < w0 || o->start >= w1) continue;
      uint32_t at = SSA_NONE;
      if (o->launch != SSA_NONE) {
        const ssa_api *a = &r->apis[o->launch];
        at = ssa_range_index_around(r, &c, a->lane, a->start);
      }
      if (at == SSA_NONE) {
        t->unattributed_ns += o->end - o->start;
        continue;
      }
      uint32_t prim = SSA_NONE, comp = SSA_NONE; /* the outermost primitive, deepest composite */
      for (uint32_t j = at; j != SSA_NONE; j = c.parent[j]) {
        if (kind[j] == 1) prim = j;
        if (kind[j] == 2 && comp == SSA_NONE) comp = j;
      }
      at = prim != SSA_NONE ? prim : comp != SSA_NONE ? comp : at;
      time[at] += o->end - o->start;
      kernels[at]++;
    }
  } else {
    for (size_t i = 0; i < c.n; i++) {
      const ssa_range *g = &r->ranges[c.idx[i]];
      if (g->start < w0 || g->start >= w1) continue;
      int counted = kind[i] == 1   ? !(flags[i] & ANC_PRIM)
                    : kind[i] == 2 ? !(flags[i] & (ANC_PRIM | DESC_MODEL))
                                   : !(flags[i] & (ANC_MODEL | DESC_ANY));
      if (counted) time[i] = g->end - g->start;
    }
  }
  for (size_t i = 0; i < c.n; i++) {
    if (!time[i] && !kernels[i]) continue;
    const ssa_range *g = &r->ranges[c.idx[i]];
    if (!g->args) t->ops_without_inputs++;
    if (fn(ctx, ri, g, time[i], kernels[i])) goto out;
  }
  /* the trainer's CPU backend: each compute operation that carries its inputs, its own time
   * on its CPU stream */
  t->host_time = t->host_time || r->nop_ranges > 0;
  for (size_t i = 0; i < r->nop_ranges; i++) {
    const ssa_range *g = &r->op_ranges[i];
    if (g->start >= w0 && g->start < w1 && fn(ctx, ri, g, g->end - g->start, 0)) goto out;
  }
  rc = 0;
out:
  ssa_range_index_free(&c);
  free(kind);
  free(flags);
  free(time);
  free(kernels);
  return rc;
}

/* The shapes of a row in words: each tensor input's dims, then the dtype. */
static void shape_words(const ssa_op_inputs *in, const ssa_op_cost *cost, char *s, size_t cap) {
  size_t n = 0;
  s[0] = 0;
  for (int i = 0; i < in->n && n + 1 < cap; i++) {
    const ssa_op_input *x = &in->in[i];
    if (!ssa_op_is_tensor(x) || !ssa_op_type_bytes(x->type)) continue;
    n += (size_t)snprintf(s + n, cap - n, "%s[", n ? " " : "");
    for (int d = 0; d < x->ndims && n + 1 < cap; d++)
      n += (size_t)snprintf(s + n, cap - n, "%s%lld", d ? "," : "", (long long)x->dims[d]);
    if (n + 1 < cap) n += (size_t)snprintf(s + n, cap - n, "]");
  }
  if (n && n + 1 < cap && cost->family != SSA_OPF_NONE)
    snprintf(s + n, cap - n, " %s", ssa_peak_dtype_names[cost->dtype]);
}

/* ssa_op_rank_instances' callback for a rank's groups: each instance kept. */
static int keep_instance(void *ctx, size_t ri, const ssa_range *op, int64_t time_ns,
                         uint32_t kernels) {
  const ssa_analysis *an = ((void **)ctx)[0];
  const ssa_rank *r = an->ranks[ri].rank;
  instance x = {
      ssa_rank_str(r, op->name), ssa_rank_str(r, op->args), (uint32_t)ri, kernels, time_ns, NULL};
  return push(((void **)ctx)[1], x);
}

static int cmp_instance(const void *pa, const void *pb) {
  const instance *a = pa, *b = pb;
  int d = strcmp(a->name, b->name);
  return d ? d : strcmp(a->args, b->args);
}

/* Sorts the instances by (name, inputs) and calls fn on each run of equal ones, [i, j). */
static int for_each_group(instances *all, int (*fn)(void *ctx, const instance *v, size_t n),
                          void *ctx) {
  if (all->n) qsort(all->v, all->n, sizeof *all->v, cmp_instance); /* v is NULL without any */
  for (size_t i = 0, j; i < all->n; i = j) {
    for (j = i + 1; j < all->n && !cmp_instance(&all->v[i], &all->v[j]); j++)
      ;
    if (fn(ctx, all->v + i, j - i)) return -1;
  }
  return 0;
}

/* for_each_group's callback for a rank's groups: one group, its strings in the summary's. */
static int add_group(void *ctx, const instance *v, size_t n) {
  ssa_rank_result *rr = ctx;
  ssa_op_group g = {0, 0, n, 0, 0};
  for (size_t k = 0; k < n; k++) {
    g.kernels += v[k].kernels;
    g.time_ns += v[k].time;
  }
  size_t nlen = strlen(v->name), alen = strlen(v->args);
  g.name = ssa_strtab_intern(&rr->summary.names, v->name, nlen);
  g.inputs = ssa_strtab_intern(&rr->summary.names, v->args, alen);
  if ((nlen && !g.name) || (alen && !g.inputs)) return -1;
  rr->ops.groups[rr->ops.ngroups++] = g;
  return 0;
}

int ssa_op_table_counts(const ssa_analysis *an, size_t ri) {
  return an->opt.rank < 0 || an->ranks[ri].rank->rank == an->opt.rank;
}

int ssa_rank_op_groups(const ssa_analysis *an, ssa_rank_result *rr) {
  instances all = {0};
  ssa_op_table counts;
  memset(&counts, 0, sizeof counts);
  void *ctx[2] = {(void *)an, &all};
  int rc = STEPSCOPE_E_NOMEM;
  if (ssa_op_rank_instances(an, rr->rank_index, keep_instance, ctx, &counts)) goto out;
  rr->ops.groups = malloc((all.n ? all.n : 1) * sizeof *rr->ops.groups);
  if (!rr->ops.groups || for_each_group(&all, add_group, rr)) goto out;
  rr->ops.host_time = counts.host_time;
  rr->ops.unattributed_ns = counts.unattributed_ns;
  rr->ops.ops_without_inputs = counts.ops_without_inputs;
  rr->ops.made = 1;
  rc = 0;
out:
  free(all.v);
  return rc;
}

static int make_op_groups(ssa_analysis *an, size_t ri, void *unused) {
  (void)unused;
  return ssa_rank_op_groups(an, &an->ranks[ri]);
}

/* for_each_group's callback for the table: one row, the ranks' groups of it added up. */
static int add_row(void *ctx, const instance *v, size_t n) {
  ssa_op_table *t = ctx;
  ssa_op_row *row = &t->rows[t->nrows++];
  row->rank_idx = v->rank_idx;
  row->name = v->name;
  row->inputs = v->args;
  for (size_t k = 0; k < n; k++) {
    const ssa_op_group *g = (const ssa_op_group *)v[k].group;
    row->count += g->count;
    row->kernels += g->kernels;
    row->time_ns += g->time_ns;
  }
  ssa_op_inputs in;
  ssa_op_cost cost;
  memset(&cost, 0, sizeof cost);
  int parsed = ssa_op_inputs_parse(row->inputs, &in) == 0;
  if (parsed && ssa_op_cost_of(row->name, &in, &cost)) {
    row->family = cost.family;
    row->dtype = cost.dtype;
    row->flops = cost.flops * (double)row->count;
    row->bytes = cost.bytes * (double)row->count;
    t->time_modelled += row->time_ns;
    t->flops_total += row->flops;
  } else {
    cost.family = SSA_OPF_NONE;
  }
  if (parsed) shape_words(&in, &cost, row->shape, sizeof row->shape);
  t->time_total += row->time_ns;
  return 0;
}

static int cmp_row_time(const void *pa, const void *pb) {
  const ssa_op_row *a = pa, *b = pb;
  if (a->time_ns != b->time_ns) return a->time_ns > b->time_ns ? -1 : 1;
  int d = strcmp(a->name, b->name);
  return d ? d : strcmp(a->inputs, b->inputs);
}

int ssa_op_table_build(ssa_analysis *an, ssa_op_table *t) {
  memset(t, 0, sizeof *t);
  /* every counted rank's groups first (made by the analysis when it wanted them, else here):
   * no summary's names grow once the rows point into them */
  size_t ngroups = 0;
  for (size_t ri = 0; ri < an->nranks; ri++) {
    if (!ssa_op_table_counts(an, ri)) continue;
    if (!an->ranks[ri].ops.made && ssa_with_rank_events(an, ri, make_op_groups, NULL))
      return STEPSCOPE_E_NOMEM;
    ngroups += an->ranks[ri].ops.ngroups;
  }
  instances all = {calloc(ngroups ? ngroups : 1, sizeof *all.v), 0, ngroups};
  t->rows = calloc(ngroups ? ngroups : 1, sizeof *t->rows);
  if (!all.v || !t->rows) {
    free(all.v);
    ssa_op_table_free(t);
    return STEPSCOPE_E_NOMEM;
  }
  for (size_t ri = 0; ri < an->nranks; ri++) {
    const ssa_rank_result *rr = &an->ranks[ri];
    if (!ssa_op_table_counts(an, ri)) continue;
    const ssa_rank *r = rr->rank;
    if (!t->device_name[0] && r->device_name && r->device_name[0])
      snprintf(t->device_name, sizeof t->device_name, "%s", r->device_name);
    t->ranks++;
    t->host_time = t->host_time || rr->ops.host_time;
    t->unattributed_ns += rr->ops.unattributed_ns;
    t->ops_without_inputs += rr->ops.ops_without_inputs;
    for (size_t k = 0; k < rr->ops.ngroups; k++) {
      const ssa_op_group *g = &rr->ops.groups[k];
      all.v[all.n++] = (instance){ssa_strtab_get(&rr->summary.names, g->name),
                                  ssa_strtab_get(&rr->summary.names, g->inputs),
                                  (uint32_t)ri,
                                  0,
                                  0,
                                  g};
    }
  }
  for_each_group(&all, add_row, t);
  free(all.v);
  qsort(t->rows, t->nrows, sizeof *t->rows, cmp_row_time);
  for (size_t i = 0; i < an->nsteps; i++)
    t->span_ns += an->steps[i].time;
  return 0;
}

void ssa_op_table_free(ssa_op_table *t) {
  free(t->rows);
  memset(t, 0, sizeof *t);
}

void ssa_op_rates_of(const ssa_op_row *row, const ssa_ceilings *c, ssa_op_rates *o) {
  memset(o, 0, sizeof *o);
  o->bound = "";
  double sec = (double)row->time_ns * 1e-9;
  if (row->family == SSA_OPF_NONE || sec <= 0) return;
  o->flops_per_s = row->flops / sec;
  o->bytes_per_s = row->bytes / sec;
  o->intensity = row->bytes > 0 ? row->flops / row->bytes : 0;
  double peak = c->flops[row->dtype], bw = c->bandwidth;
  if (peak <= 0 || bw <= 0) return;
  /* the roofline at this intensity: min(peak, intensity x bandwidth) */
  double ridge = peak / bw;
  int memory = o->intensity < ridge;
  double roof = memory ? o->intensity * bw : peak;
  o->bound = memory ? "memory" : "compute";
  o->pct_of_peak = roof > 0 ? 100.0 * (memory ? o->bytes_per_s / bw : o->flops_per_s / peak) : 0;
}

double ssa_op_table_mfu(const ssa_op_table *t, const ssa_ceilings *c, ssa_peak_dtype *dtype) {
  double by[SSA_PEAK_N] = {0};
  for (size_t i = 0; i < t->nrows; i++)
    by[t->rows[i].dtype] += t->rows[i].flops;
  int best = 0;
  for (int d = 1; d < SSA_PEAK_N; d++)
    if (by[d] > by[best]) best = d;
  *dtype = (ssa_peak_dtype)best;
  double denom = (double)t->span_ns * 1e-9 * t->ranks * c->flops[best];
  return t->flops_total > 0 && denom > 0 ? t->flops_total / denom : NAN;
}

int ssa_op_flops_mfu_of(ssa_analysis *a) {
  ssa_op_flops_mfu *m = &a->op_mfu;
  memset(m, 0, sizeof *m);
  m->mfu = NAN;
  ssa_op_table t;
  if (ssa_op_table_build(a, &t)) return STEPSCOPE_E_NOMEM;
  ssa_ceilings c;
  ssa_ceilings_of_device(t.device_name, &c);
  ssa_peak_dtype dt;
  m->known = t.flops_total > 0;
  m->flops = t.flops_total;
  m->mfu = ssa_op_table_mfu(&t, &c, &dt);
  m->dtype = (int)dt;
  m->peak = c.flops[dt];
  m->steps_time = t.span_ns;
  m->ranks = t.ranks;
  for (int d = 0; d < SSA_PEAK_N; d++)
    m->peaks[d] = c.flops[d];
  m->bandwidth = c.bandwidth;
  for (size_t i = 0; i < t.nrows && m->npoints < SSA_OP_POINTS; i++) { /* rows: by time */
    const ssa_op_row *row = &t.rows[i];
    if (row->family == SSA_OPF_NONE || row->time_ns <= 0) continue;
    ssa_op_point *pt = &m->points[m->npoints++];
    pt->op = row->name;
    _Static_assert(sizeof pt->shapes == sizeof row->shape, "the row's shapes fit");
    memcpy(pt->shapes, row->shape, sizeof pt->shapes);
    pt->dtype = (int)row->dtype;
    pt->time_ns = row->time_ns;
    pt->flops = row->flops;
    pt->bytes = row->bytes;
  }
  ssa_op_table_free(&t);
  return 0;
}
