/*
 * module_perf.c — which nn.Module spent the time (ssa_ops.h, issue 33 §2): the op instances of
 * the op table (ssa_op_rank_instances: a kernel's time goes to its op, a CPU-only trace's ops
 * count their own time) attributed to the innermost module around the op on the op's thread.
 * Modules are the profiler's with_modules events ("nn.Module: Linear_0"), which the Kineto
 * importer keeps as ranges of domain "python_function" when asked (ssa_import_options.
 * op_modules); nested modules make a path ("Attention_0/Linear_1"). An op outside every module
 * (the optimizer, the loss, and the backward pass, whose ops run on the autograd thread where
 * no module event is) counts as "no module". The totals agree with the op table: the self
 * times of all modules and the no-module time add up to its time_total.
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_ops.h"

typedef struct path_stat {
  uint64_t calls;
  int64_t self_ns;
  double self_flops;
} path_stat;

typedef struct module_build {
  const ssa_analysis *an;
  ssa_module_table *mt;
  path_stat *stats; /* by path id */
  size_t nstats;
  /* the current rank's modules */
  const ssa_rank *r;
  ssa_range_index mods;
  uint32_t *path; /* path id of each module (by position in mods) */
} module_build;

static path_stat *stat_of(module_build *b, uint32_t id) {
  if (id >= b->nstats) {
    size_t n = b->nstats ? b->nstats : 64;
    while (n <= id)
      n *= 2;
    path_stat *v = realloc(b->stats, n * sizeof *v);
    if (!v) return NULL;
    memset(v + b->nstats, 0, (n - b->nstats) * sizeof *v);
    b->stats = v;
    b->nstats = n;
  }
  return &b->stats[id];
}

/* The path ids of the rank's modules, parents first (the index's order). */
static int module_paths(module_build *b) {
  const ssa_rank *r = b->r;
  b->path = malloc((b->mods.n ? b->mods.n : 1) * sizeof *b->path);
  if (!b->path) return -1;
  char buf[1024];
  for (size_t i = 0; i < b->mods.n; i++) {
    const char *name = ssa_rank_str(r, r->ranges[b->mods.idx[i]].name);
    uint32_t p = b->mods.parent[i];
    int n = p == SSA_NONE ? snprintf(buf, sizeof buf, "%s", name)
                          : snprintf(buf, sizeof buf, "%s/%s",
                                     ssa_strtab_get(&b->mt->paths, b->path[p]), name);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    if (!(b->path[i] = ssa_strtab_intern(&b->mt->paths, buf, len))) return -1;
  }
  return 0;
}

static int add_instance(void *ctx, size_t ri, const ssa_range *op, int64_t time_ns,
                        uint32_t kernels) {
  module_build *b = ctx;
  (void)ri;
  (void)kernels;
  double flops = 0;
  ssa_op_inputs in;
  ssa_op_cost cost;
  if (op->args && !ssa_op_inputs_parse(ssa_rank_str(b->r, op->args), &in) &&
      ssa_op_cost_of(ssa_rank_str(b->r, op->name), &in, &cost))
    flops = cost.flops;
  b->mt->time_total += time_ns;
  b->mt->flops_total += flops;
  uint32_t m = ssa_range_index_around(b->r, &b->mods, op->lane, op->start);
  if (m == SSA_NONE) {
    b->mt->no_module_ns += time_ns;
    b->mt->no_module_flops += flops;
    return 0;
  }
  path_stat *st = stat_of(b, b->path[m]);
  if (!st) return -1;
  st->self_ns += time_ns;
  st->self_flops += flops;
  return 0;
}

static int rank_modules(module_build *b, size_t ri) {
  const ssa_rank_result *rr = &b->an->ranks[ri];
  b->r = rr->rank;
  if (ssa_range_index_build(b->r, "python_function", &b->mods) || module_paths(b)) return -1;
  int64_t w0 = rr->nsteps ? rr->totals.start : INT64_MIN;
  int64_t w1 = rr->nsteps ? rr->totals.end : INT64_MAX;
  for (size_t i = 0; i < b->mods.n; i++) {
    int64_t s = b->r->ranges[b->mods.idx[i]].start;
    if (s < w0 || s >= w1) continue;
    path_stat *st = stat_of(b, b->path[i]);
    if (!st) return -1;
    st->calls++;
  }
  b->mt->modules_seen += b->mods.n;
  ssa_op_table counts; /* the op table's counts, for host_time */
  memset(&counts, 0, sizeof counts);
  int rc = ssa_op_rank_instances(b->an, ri, add_instance, b, &counts);
  b->mt->host_time = b->mt->host_time || counts.host_time;
  ssa_range_index_free(&b->mods);
  free(b->path);
  b->path = NULL;
  return rc;
}

static int cmp_row_path(const void *pa, const void *pb) {
  return strcmp(((const ssa_module_row *)pa)->path, ((const ssa_module_row *)pb)->path);
}

int ssa_module_table_build(const ssa_analysis *an, ssa_module_table *mt) {
  memset(mt, 0, sizeof *mt);
  ssa_strtab_init(&mt->paths);
  module_build b;
  memset(&b, 0, sizeof b);
  b.an = an;
  b.mt = mt;
  int rc = 0;
  for (size_t ri = 0; ri < an->nranks && !rc; ri++)
    if (an->opt.rank < 0 || an->ranks[ri].rank->rank == an->opt.rank) rc = rank_modules(&b, ri);
  ssa_range_index_free(&b.mods);
  free(b.path);
  size_t n = 0;
  for (uint32_t id = 1; !rc && id < mt->paths.count; id++)
    n++;
  if (!rc && !(mt->rows = calloc(n ? n : 1, sizeof *mt->rows))) rc = -1;
  for (uint32_t id = 1; !rc && id < mt->paths.count; id++) {
    ssa_module_row *row = &mt->rows[mt->nrows++];
    path_stat *st = id < b.nstats ? &b.stats[id] : NULL;
    row->path = ssa_strtab_get(&mt->paths, id);
    row->calls = st ? st->calls : 0;
    row->self_ns = st ? st->self_ns : 0;
    row->self_flops = st ? st->self_flops : 0;
    for (const char *p = row->path; *p; p++)
      row->depth += *p == '/';
  }
  if (!rc) { /* a module's time holds its children's: each self added to every ancestor */
    qsort(mt->rows, mt->nrows, sizeof *mt->rows, cmp_row_path);
    for (size_t i = 0; i < mt->nrows; i++) {
      mt->rows[i].time_ns += mt->rows[i].self_ns;
      mt->rows[i].flops += mt->rows[i].self_flops;
      size_t len = strlen(mt->rows[i].path);
      for (size_t j = i; j-- > 0;) { /* ancestors sort before, as prefixes followed by '/' */
        size_t l = strlen(mt->rows[j].path);
        if (l < len && !strncmp(mt->rows[j].path, mt->rows[i].path, l) &&
            mt->rows[i].path[l] == '/') {
          mt->rows[j].time_ns += mt->rows[i].self_ns;
          mt->rows[j].flops += mt->rows[i].self_flops;
        }
      }
    }
  }
  free(b.stats);
  if (rc) ssa_module_table_free(mt);
  return rc ? STEPSCOPE_E_NOMEM : 0;
}

void ssa_module_table_free(ssa_module_table *mt) {
  free(mt->rows);
  ssa_strtab_free(&mt->paths);
  memset(mt, 0, sizeof *mt);
}
