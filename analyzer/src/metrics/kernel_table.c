/*
 * kernel_table.c — the kernel table of SPEC §4: per kernel name (CUDA
 * kernels and CPU-backend host ops) the count, total, mean, min and max
 * duration and the share of all kernel time, over every rank's analysed
 * window. Per-rank statistics (breakdown.c, keyed by ids of the names in
 * the rank's summary, rank_summary.c: the table reads no event of a rank)
 * are merged by name through the analysis string table, then sorted by
 * total time, descending (ties by name).
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

static int cmp_rows(const void *pa, const void *pb, void *arg) {
  const ssa_analysis *a = arg;
  const ssa_kernel_row *x = pa, *y = pb;
  if (x->total != y->total) return x->total > y->total ? -1 : 1;
  return strcmp(ssa_name(a, x->name), ssa_name(a, y->name));
}

int ssa_build_kernel_table(ssa_analysis *a) {
  size_t cap = 0;
  uint32_t *row_of = NULL; /* analysis name id -> row + 1 */
  size_t row_cap = 0;
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    for (size_t k = 0; k < rr->nkstats; k++) {
      const ssa_rank_kstat *s = &rr->kstats[k];
      const char *name = ssa_strtab_get(&rr->summary.names, s->name);
      uint32_t id = ssa_strtab_intern(&a->names, name[0] ? name : "(unnamed)",
                                      strlen(name[0] ? name : "(unnamed)"));
      if (id == 0) goto nomem;
      if (id >= row_cap) {
        size_t old = row_cap;
        if (ssa_grow((void **)&row_of, &row_cap, (size_t)id + 1, sizeof *row_of)) goto nomem;
        memset(row_of + old, 0, (row_cap - old) * sizeof *row_of);
      }
      if (!row_of[id]) {
        if (ssa_grow((void **)&a->kernels, &cap, a->nkernels + 1, sizeof *a->kernels)) goto nomem;
        ssa_kernel_row *r = &a->kernels[a->nkernels++];
        memset(r, 0, sizeof *r);
        r->name = id;
        r->min = s->min;
        r->max = s->max;
        row_of[id] = (uint32_t)a->nkernels;
      }
      ssa_kernel_row *r = &a->kernels[row_of[id] - 1];
      r->count += s->count;
      r->total += s->total;
      if (s->min < r->min) r->min = s->min;
      if (s->max > r->max) r->max = s->max;
      r->comm |= (int)s->comm;
      a->kernel_time_total += s->total;
    }
  }
  free(row_of);
  if (a->nkernels > 1) qsort_r(a->kernels, a->nkernels, sizeof *a->kernels, cmp_rows, a);
  return 0;
nomem:
  free(row_of);
  return STEPSCOPE_E_NOMEM;
}
