/*
 * kineto_host.c — the parts of a Kineto import that deal with what the trace
 * cannot show (docs/kineto-import.md "What the trace cannot show"):
 *
 *   - the categories of events that are not imported (an accelerator whose
 *     events stepscope does not know, e.g. MTIA's `mtia_runtime`), counted
 *     while the file is read and named in the warning below;
 *   - absurd times: an event more than a day from the median time of the
 *     rank's events (one such event would stretch the run's span by days)
 *     is left out and counted (negative `ts` are left out while reading);
 *   - no device activity (CPU-only training, or an accelerator not
 *     imported): instead of a device that is "idle 100 %", the host
 *     timeline is analysed — each host thread becomes a CPU lane whose
 *     top-level `cpu_op` events are compute and whose host collectives
 *     (the host-scope rows of the built-in family table, comm_families.c:
 *     gloo `gloo:*` ranges, `c10d::*`, `nccl:*`, `record_param_comms`,
 *     HCCL, oneCCL; and the user's --comm-kernel rules) are communication,
 *     so a CPU DDP run shows its all-reduces and how much of them the
 *     computation hides.
 */
#include "kineto_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kineto_p2p.h"

void ssa_kineto_unimported_add(ssa_kineto_unimported *u, const char *cat) {
  if (!strcmp(cat, "Trace") || !strcmp(cat, "python_function")) return;
  if (u->n > 0 && !strcmp(u->name[u->last], cat)) {
    u->count[u->last]++;
    return;
  }
  for (int i = 0; i < u->n; i++)
    if (!strcmp(u->name[i], cat)) {
      u->count[i]++;
      u->last = i;
      return;
    }
  if (u->n == SSA_KINETO_UNIMPORTED_MAX) {
    u->more++;
    return;
  }
  snprintf(u->name[u->n], sizeof u->name[u->n], "%s", cat);
  u->count[u->n] = 1;
  u->last = u->n++;
}

int64_t ssa_kineto_first_time(const ssa_rank *r) {
  int64_t t = INT64_MAX;
  for (size_t i = 0; i < r->nops; i++)
    if (r->ops[i].start < t) t = r->ops[i].start;
  for (size_t i = 0; i < r->napis; i++)
    if (r->apis[i].start < t) t = r->apis[i].start;
  for (size_t i = 0; i < r->nranges; i++)
    if (r->ranges[i].start < t) t = r->ranges[i].start;
  return t == INT64_MAX ? 0 : t;
}

uint64_t ssa_kineto_drop_far_times(ssa_rank *r, int64_t far) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
#define SPAN(arr, n)                                                                               \
  for (size_t i = 0; i < r->n; i++) {                                                              \
    if (r->arr[i].start < lo) lo = r->arr[i].start;                                                \
    if (r->arr[i].end > hi) hi = r->arr[i].end;                                                    \
  }
  SPAN(ops, nops)
  SPAN(apis, napis)
  SPAN(ranges, nranges)
#undef SPAN
  if (lo > hi || hi - lo <= far) return 0; /* the usual case: nothing to look for */
  size_t n = r->nops + r->napis + r->nranges, k = 0;
  int64_t *v = malloc(n * sizeof *v);
  if (!v) return 0; /* advisory: without memory the events stay */
  for (size_t i = 0; i < r->nops; i++)
    v[k++] = r->ops[i].start;
  for (size_t i = 0; i < r->napis; i++)
    v[k++] = r->apis[i].start;
  for (size_t i = 0; i < r->nranges; i++)
    v[k++] = r->ranges[i].start;
  qsort(v, n, sizeof *v, ssa_cmp_i64);
  int64_t med = v[(n - 1) / 2];
  free(v);
  int64_t from = med - far, to = med + far;
  uint64_t dropped = 0;
#define KEEP(arr, n, counted)                                                                      \
  do {                                                                                             \
    size_t kept = 0;                                                                               \
    for (size_t i = 0; i < r->n; i++) {                                                            \
      if (r->arr[i].start < from || r->arr[i].end > to) {                                          \
        if (counted) dropped++;                                                                    \
        continue;                                                                                  \
      }                                                                                            \
      r->arr[kept++] = r->arr[i];                                                                  \
    }                                                                                              \
    r->n = kept;                                                                                   \
  } while (0)
  KEEP(ops, nops, 1);
  KEEP(apis, napis, 1);
  KEEP(ranges, nranges, 1);
  KEEP(colls, ncolls, 0); /* records of kernels (counted as ops); not linked before finish */
#undef KEEP
  return dropped;
}

/* What a host range is, in the order of comm_rules.h: a user rule decides,
 * else the host-scope built-in families (comm_families.c). 2: communication;
 * 3: compute because a user rule says so (a range of any domain that the
 * user named becomes an op); 1: neither. */
static uint8_t host_range_class(const ssa_rank *r, const char *n) {
  int u = ssa_comm_rules_match(r->comm_rules, n);
  if (u >= 0) return r->comm_rules->rule[u].comm ? 2 : 3;
  return ssa_comm_family_of(n, SSA_COMM_SCOPE_HOST) >= 0 ? 2 : 1;
}

/* A host range that becomes an op, sortable by sort.c (its first field is
 * an int64 key): key = the rank of its thread's id among the threads' ids,
 * then its start from the earliest, in 15 + 48 bits; the comparator goes on
 * to the end (longer first: parents first) and the name. */
typedef struct host_range {
  int64_t key;
  uint64_t thread;
  int64_t start, end;
  uint32_t name;
  int comm, p2p;
} host_range;

#define HOST_KEY_SHIFT   48
#define HOST_KEY_THREADS ((uint64_t)1 << 15)

static int cmp_host_range(const void *pa, const void *pb) {
  const host_range *a = pa, *b = pb;
  if (a->thread != b->thread) return a->thread < b->thread ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->end != b->end) return a->end > b->end ? -1 : 1; /* parents first */
  return a->name < b->name ? -1 : a->name > b->name;
}

/* Sorts the host ranges by cmp_host_range. Kineto writes each thread's
 * events in time order, so they come as a few sorted runs (HTA's MTIA trace:
 * 108,889 CPU ops in 2 runs): with the key ordering (thread, start), sort.c
 * merges such runs in place where they overlap (its radix sort takes the
 * rest): that trace's sort 1.15 -> 0.75 ms against a pairwise merge through
 * a copy of the whole array. The
 * comparator is total up to identical ranges, so the order is qsort's. When
 * the key cannot hold the order (more than 2^15 threads, or starts more
 * than 2^48 ns, 78 hours, apart: times more than a day from the median are
 * left out before this), qsort. */
static void sort_host_ranges(const ssa_rank *r, host_range *v, size_t n) {
  if (n < 2) return;
  int64_t lo = v[0].start, hi = v[0].start;
  for (size_t i = 1; i < n; i++) {
    if (v[i].start < lo) lo = v[i].start;
    if (v[i].start > hi) hi = v[i].start;
  }
  /* the threads' ids, sorted and unique: a thread's rank is its key's top */
  uint64_t *ids = malloc((r->nlanes ? r->nlanes : 1) * sizeof *ids);
  size_t nids = 0;
  if (ids)
    for (uint32_t l = 0; l < r->nlanes; l++)
      ids[nids++] = r->lanes[l].id;
  int keyed = ids && nids <= HOST_KEY_THREADS &&
              (uint64_t)hi - (uint64_t)lo < ((uint64_t)1 << HOST_KEY_SHIFT);
  if (!keyed) {
    free(ids);
    qsort(v, n, sizeof *v, cmp_host_range);
    return;
  }
  qsort(ids, nids, sizeof *ids, ssa_cmp_u64);
  size_t u = 0;
  for (size_t i = 0; i < nids; i++)
    if (u == 0 || ids[i] != ids[u - 1]) ids[u++] = ids[i];
  uint64_t last_thread = 0, rank = 0;
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || v[i].thread != last_thread) { /* threads come in long stretches */
      size_t a = 0, b = u;
      while (a < b) {
        size_t m = a + (b - a) / 2;
        if (ids[m] < v[i].thread)
          a = m + 1;
        else
          b = m;
      }
      rank = a;
      last_thread = v[i].thread;
    }
    v[i].key = (int64_t)(rank << HOST_KEY_SHIFT | (uint64_t)(v[i].start - lo));
  }
  free(ids);
  ssa_sort_by_start(v, n, sizeof *v, cmp_host_range);
}

int ssa_kineto_host_timeline(ssa_rank *r, const char *file_name, const ssa_kineto_unimported *u) {
  char cats[600] = "";
  size_t len = 0;
  for (int i = 0; i < u->n && len < sizeof cats; i++)
    len += (size_t)snprintf(cats + len, sizeof cats - len, "%s%s (%llu events)", i ? ", " : "",
                            u->name[i], (unsigned long long)u->count[i]);
  if (u->more && len < sizeof cats)
    snprintf(cats + len, sizeof cats - len, ", and %llu events of other categories",
             (unsigned long long)u->more);
  uint32_t dom_cpu = ssa_rank_intern(r, "cpu_op");
  if (!dom_cpu) return STEPSCOPE_E_NOMEM;
  /* the host ranges that become ops */
  host_range *v = malloc((r->nranges ? r->nranges : 1) * sizeof *v);
  /* host_range_class per name (string id), 0 not asked yet */
  uint8_t *is_comm = calloc(r->strings.count ? r->strings.count : 1, 1);
  if (!v || !is_comm) {
    free(v);
    free(is_comm);
    return STEPSCOPE_E_NOMEM;
  }
  size_t n = 0;
  for (size_t i = 0; i < r->nranges; i++) {
    const ssa_range *g = &r->ranges[i];
    uint8_t c = 1;
    if (g->name < r->strings.count) {
      if (!is_comm[g->name]) is_comm[g->name] = host_range_class(r, ssa_rank_str(r, g->name));
      c = is_comm[g->name];
    }
    int comm = c == 2;
    if (g->domain != dom_cpu && c == 1) continue; /* only cpu_op ranges, unless named */
    if (g->end <= g->start) continue;
    int p2p = comm && ssa_host_p2p_call(ssa_rank_str(r, g->name));
    v[n++] = (host_range){0, r->lanes[g->lane].id, g->start, g->end, g->name, comm, p2p};
  }
  free(is_comm);
  if (u->n || u->more)
    ssa_rank_warn(
        r,
        "%s: no device activity in the trace (no kernel, gpu_memcpy or gpu_memset events); event "
        "categories not imported: %s. %s",
        file_name, cats,
        n ? "The host timeline is analysed instead: CPU ops are compute, host collectives "
            "(gloo:*, c10d::*, nccl:*, record_param_comms, HCCL, oneCCL, --comm-kernel "
            "rules) are communication"
          : "There is no host activity to analyse either");
  else
    ssa_rank_warn(
        r, "%s: no device activity in the trace (CPU-only). %s", file_name,
        n ? "The host timeline is analysed instead: CPU ops are compute, host collectives "
            "(gloo:*, c10d::*, nccl:*, record_param_comms, HCCL, oneCCL, --comm-kernel "
            "rules) are communication"
          : "There is no host activity to analyse either");
  sort_host_ranges(r, v, n);
  r->host_timeline = n > 0;
  /* a pipeline's point-to-point calls matched across ranks (kineto_p2p.c): their records */
  ssa_kineto_p2p_index p2p;
  int rc = ssa_kineto_p2p_index_build(r, &p2p);
  uint64_t thread = 0;
  int64_t top_end = INT64_MIN;
  for (size_t i = 0; i < n && rc == 0; i++) {
    const host_range *h = &v[i];
    if (i == 0 || h->thread != thread) {
      thread = h->thread;
      top_end = INT64_MIN;
    }
    int top = h->start >= top_end; /* not inside an earlier op of its thread */
    /* except a point-to-point range: gloo's `gloo:send` / `gloo:recv` span the asynchronous
     * transfer on the thread that posted it, which goes on computing (a pipeline stage's
     * next micro-batch, kineto_pipeline.c); the compute that starts inside one is its own */
    if (top && !h->p2p && h->end > top_end) top_end = h->end;
    if (!top && !h->comm) continue; /* nested compute: its parent covers it */
    stepscope_record rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_HOST_OP;
    rec.u.host_op.start_ns = (uint64_t)h->start;
    rec.u.host_op.end_ns = (uint64_t)h->end;
    rec.u.host_op.stream = h->thread;
    rec.u.host_op.name = h->name;
    rec.u.host_op.category = h->comm ? STEPSCOPE_CAT_COMM : STEPSCOPE_CAT_COMPUTE;
    const ssa_coll *c = h->p2p ? ssa_kineto_p2p_find(r, &p2p, h->thread, h->start, h->end) : NULL;
    if (c) {
      rec.u.host_op.comm_id = c->comm_id;
      rec.u.host_op.seq = c->seq;
    }
    rc = ssa_rank_add_record(r, &rec);
  }
  ssa_kineto_p2p_index_free(&p2p);
  free(v);
  return rc;
}
