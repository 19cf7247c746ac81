/*
 * steps.c — finds a rank's training steps, gives each op to one step and
 * cuts the rank's timeline into step windows that never overlap.
 *
 * Step ranges, in order of preference:
 *   1. ranges named by the user (--step-range NAME): step number = payload if
 *      the range has an integer payload, else its index in time order;
 *   2. ranges named `step` in domain `stepscope` (the trainer's
 *      stepscope_step_begin): step number = payload;
 *   3. ranges named `ProfilerStep#N` (PyTorch): step number = N.
 *
 * Membership (docs/metrics.md "Steps"): an op belongs to the step whose host
 * range [range_start, range_end) contains the *start* of the API call that
 * launched it (joined by correlation id); when several ranges contain it
 * (overlapping or nested ranges) to the one that started last. Each step
 * keeps the first start and last end of its ops (its device latency).
 *
 * Windows (the partition): steps in iteration order (range start, then
 * number); step k's window starts at its anchor
 *     a_k = max(range_start_k, D_k),
 * where D_k is the latest end of the ops of the steps before it (the device
 * has finished the previous iterations' work); it ends where step k+1's
 * window starts; the last one ends at the later of its host range end and
 * its last op's end. Both terms only grow with k, so windows never overlap.
 * A step range that ends after the profiling session stopped (when the
 * source knows where: Kineto's `Trace` span) was cut by the trace's end
 * (`cut`): it counts only up to the stop.
 * A host running ahead does not stretch windows (they follow the device's
 * completions), and the device idling while the host prepares the next
 * iteration (data loading, Python) lies inside the next step's window.
 *
 * The step index answers "which ranges contain t" in O(log n + matches):
 * ranges sorted by start, and a max-tree of their ends over that order; the
 * ranges containing t are those among the first k (start <= t) whose end is
 * after t, found by descending only into subtrees whose max end is after t.
 * When no two ranges overlap (the usual case) the only candidate is the
 * k-th, with no tree.
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

void ssa_step_index_free(ssa_step_index *ix) {
  free(ix->order);
  free(ix->starts);
  free(ix->tree);
  memset(ix, 0, sizeof *ix);
}

int ssa_step_index_build(ssa_step_index *ix, const ssa_step *steps, size_t n) {
  memset(ix, 0, sizeof *ix);
  ix->steps = steps;
  ix->n = n;
  ix->disjoint = 1;
  if (n == 0) return 0;
  ssa_key_index *k = malloc(n * sizeof *k); /* (range start, step index) */
  ix->order = malloc(n * sizeof *ix->order);
  ix->starts = malloc(n * sizeof *ix->starts);
  if (!k || !ix->order || !ix->starts) goto nomem;
  /* empty ranges contain nothing: left out */
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (steps[i].range_end > steps[i].range_start)
      k[m++] = (ssa_key_index){steps[i].range_start, i};
  qsort(k, m, sizeof *k, ssa_cmp_key_index);
  n = ix->n = m;
  int64_t reach = INT64_MIN;
  for (size_t i = 0; i < n; i++) {
    ix->order[i] = (uint32_t)k[i].index;
    ix->starts[i] = k[i].key;
    const ssa_step *s = &steps[k[i].index];
    if (s->range_start < reach) ix->disjoint = 0;
    if (s->range_end > reach) reach = s->range_end;
  }
  free(k);
  k = NULL;
  if (!ix->disjoint && n > 0) {
    size_t leaves = 1;
    while (leaves < n)
      leaves <<= 1;
    ix->leaves = leaves;
    ix->tree = malloc(2 * leaves * sizeof *ix->tree);
    if (!ix->tree) goto nomem;
    for (size_t i = 0; i < leaves; i++)
      ix->tree[leaves + i] = i < n ? steps[ix->order[i]].range_end : INT64_MIN;
    for (size_t i = leaves - 1; i >= 1; i--)
      ix->tree[i] = ix->tree[2 * i] > ix->tree[2 * i + 1] ? ix->tree[2 * i] : ix->tree[2 * i + 1];
  }
  return 0;
nomem:
  free(k);
  ssa_step_index_free(ix);
  return STEPSCOPE_E_NOMEM;
}

/* Appends the steps under tree node `node` (covering positions [lo, lo +
 * width)) with position < k and end > t. */
static void stab_node(const ssa_step_index *ix, size_t node, size_t lo, size_t width, size_t k,
                      int64_t t, uint32_t *out, size_t cap, size_t *found) {
  if (lo >= k || ix->tree[node] <= t) return;
  if (width == 1) {
    if (*found < cap) out[*found] = ix->order[lo];
    (*found)++;
    return;
  }
  stab_node(ix, 2 * node, lo, width / 2, k, t, out, cap, found);
  stab_node(ix, 2 * node + 1, lo + width / 2, width / 2, k, t, out, cap, found);
}

/* Disjoint ranges: where the answer for t, whose slot is k (ranges starting
 * at or before t), holds (ssa_step_index.fast_lo, fast_hi, fast_step). */
static void remember_answer(ssa_step_index *ix, size_t k, int64_t t) {
  int64_t next = k < ix->n ? ix->starts[k] : INT64_MAX;
  int64_t end = k ? ix->steps[ix->order[k - 1]].range_end : INT64_MIN;
  if (k && t < end) {
    ix->fast_lo = ix->starts[k - 1], ix->fast_hi = end < next ? end : next;
    ix->fast_step = ix->order[k - 1];
  } else {
    ix->fast_lo = end, ix->fast_hi = next;
    ix->fast_step = SSA_NONE;
  }
}

size_t ssa_step_index_stab(ssa_step_index *ix, int64_t t, uint32_t *out, size_t cap) {
  /* k = number of ranges starting at or before t (remembered as a hint for
   * ssa_step_index_stab_fast) */
  size_t k = ssa_count_at_most(ix->starts, ix->n, sizeof *ix->starts, t);
  ix->hint[ix->next_hint++ & 3] = k;
  if (ix->disjoint) remember_answer(ix, k, t);
  if (k == 0) return 0;
  if (ix->disjoint) { /* ranges never overlap: only the last one can contain t */
    if (t >= ix->steps[ix->order[k - 1]].range_end) return 0;
    if (cap) out[0] = ix->order[k - 1];
    return 1;
  }
  size_t found = 0;
  stab_node(ix, 1, 0, ix->leaves, k, t, out, cap, &found);
  return found;
}

/* The rightmost position < k under `node` whose range ends after t, or
 * SIZE_MAX. */
static size_t owner_node(const ssa_step_index *ix, size_t node, size_t lo, size_t width, size_t k,
                         int64_t t) {
  if (lo >= k || ix->tree[node] <= t) return SIZE_MAX;
  if (width == 1) return lo;
  size_t p = owner_node(ix, 2 * node + 1, lo + width / 2, width / 2, k, t);
  return p != SIZE_MAX ? p : owner_node(ix, 2 * node, lo, width / 2, k, t);
}

uint32_t ssa_step_index_owner(ssa_step_index *ix, int64_t t) {
  uint32_t one;
  if (ix->disjoint) return ssa_step_index_stab_fast(ix, t, &one, 1) ? one : SSA_NONE;
  size_t k = ssa_count_at_most(ix->starts, ix->n, sizeof *ix->starts, t); /* started by t */
  if (k == 0) return SSA_NONE;
  size_t p = owner_node(ix, 1, 0, ix->leaves, k, t);
  return p == SIZE_MAX ? SSA_NONE : ix->order[p];
}

static int cmp_step_range(const void *pa, const void *pb) {
  const ssa_step *a = pa, *b = pb;
  if (a->range_start != b->range_start) return a->range_start < b->range_start ? -1 : 1;
  return a->number < b->number ? -1 : a->number > b->number;
}

static int cmp_step_number(const void *pa, const void *pb) {
  const ssa_step *a = pa, *b = pb;
  if (a->number != b->number) return a->number < b->number ? -1 : 1;
  return a->range_start < b->range_start ? -1 : a->range_start > b->range_start;
}

static int parse_profiler_step(const char *name, int64_t *n) {
  /* the first byte first: called on every range (a Kineto trace's CPU ops) */
  if (name[0] != 'P' || strncmp(name, "ProfilerStep#", 13) != 0) return 0;
  char *end;
  long long v = strtoll(name + 13, &end, 10);
  if (end == name + 13 || *end) return 0;
  *n = v;
  return 1;
}

/* Which names are ProfilerStep#N, and their N: decided once per distinct
 * name, so that the passes over the ranges (a Kineto trace's CPU ops, tens
 * of thousands over a few thousand names) look a byte up instead of reading
 * each range's name, and the first pass stops at the first step range when
 * no other kind of step can be there (HTA's trace_diff control trace, 41
 * thousand ranges: ssa_find_steps ~0.18 -> ~0.13 ms, the rest being the
 * step ranges' pass and the ops' membership). NULL `*is_step` when no name
 * is one (or no memory: then `*failed`). */
static void profiler_step_names(const ssa_rank *r, uint8_t **is_step, int64_t **number,
                                int *failed) {
  uint32_t count = r->strings.count ? r->strings.count : 1;
  *is_step = NULL;
  *number = NULL;
  *failed = 0;
  uint8_t *flag = NULL;
  int64_t *num = NULL;
  for (uint32_t id = 1; id < r->strings.count; id++) {
    int64_t v;
    if (!parse_profiler_step(ssa_strtab_get(&r->strings, id), &v)) continue;
    if (!flag) {
      flag = calloc(count, 1);
      num = malloc(count * sizeof *num);
      if (!flag || !num) {
        free(flag);
        free(num);
        *failed = 1;
        return;
      }
    }
    flag[id] = 1;
    num[id] = v;
  }
  *is_step = flag;
  *number = num;
}

uint32_t ssa_rank_string_id(const ssa_rank *r, const char *name) {
  for (uint32_t i = 1; i < r->strings.count; i++) /* without interning: the rank is read-only */
    if (!strcmp(ssa_strtab_get(&r->strings, i), name)) return i;
  return 0;
}

int ssa_rank_has_range(const ssa_rank *r, const char *name) {
  uint32_t id = ssa_rank_string_id(r, name);
  for (size_t i = 0; id && i < r->nranges; i++)
    if (r->ranges[i].name == id) return 1;
  return 0;
}

int ssa_find_steps(const ssa_rank *r, const char *user_name, ssa_step **out, size_t *nout) {
  *out = NULL;
  *nout = 0;
  uint32_t id_step = 0, id_domain = 0, id_user = 0;
  /* look the names up without interning (the rank is read-only here) */
  for (uint32_t id = 1; id < r->strings.count; id++) {
    const char *s = ssa_strtab_get(&r->strings, id);
    if (!id_step && strcmp(s, "step") == 0) id_step = id;
    if (!id_domain && strcmp(s, "stepscope") == 0) id_domain = id;
    if (user_name && !id_user && strcmp(s, user_name) == 0) id_user = id;
  }
  uint8_t *is_step;
  int64_t *step_number;
  int failed;
  profiler_step_names(r, &is_step, &step_number, &failed);
  if (failed) return STEPSCOPE_E_NOMEM;
    /* a range's name id past the table reads as "" (ssa_strtab_get) */
#define PROFILER_STEP(id) (is_step && (id) < r->strings.count && is_step[id])
  int has_user = 0, has_step = 0, has_profiler = 0;
  if (id_user || id_step || is_step)
    for (size_t i = 0; i < r->nranges; i++) {
      const ssa_range *g = &r->ranges[i];
      if (id_user && g->name == id_user)
        has_user = 1;
      else if (id_step && g->name == id_step && g->domain == id_domain)
        has_step = 1;
      else if (PROFILER_STEP(g->name))
        has_profiler = 1;
      if (has_user || (has_profiler && !id_user && !id_step)) break; /* the mode is decided */
    }
  int mode = has_user ? 1 : has_step ? 2 : has_profiler ? 3 : 0; /* user, stepscope, PyTorch */
  if (!mode) {
    free(is_step);
    free(step_number);
    return 0;
  }
  ssa_step *v = NULL;
  size_t n = 0, cap = 0;
  for (size_t i = 0; i < r->nranges; i++) {
    const ssa_range *g = &r->ranges[i];
    int64_t number = 0;
    int step;
    if (mode == 1) {
      step = g->name == id_user;
      number =
          g->payload_kind == STEPSCOPE_PAYLOAD_UINT64 || g->payload_kind == STEPSCOPE_PAYLOAD_INT64
              ? (int64_t)g->payload
              : (int64_t)n;
    } else if (mode == 2) {
      step = g->name == id_step && g->domain == id_domain;
      number = (int64_t)g->payload;
    } else {
      step = PROFILER_STEP(g->name);
      if (step) number = step_number[g->name];
    }
    if (!step) continue;
    if (ssa_grow((void **)&v, &cap, n + 1, sizeof *v)) {
      free(v);
      free(is_step);
      free(step_number);
      return STEPSCOPE_E_NOMEM;
    }
    ssa_step *s = &v[n++];
    memset(s, 0, sizeof *s);
    s->number = number;
    s->range_start = g->start;
    s->range_end = g->end;
    s->dev_start = INT64_MAX;
    s->dev_end = INT64_MIN;
  }
#undef PROFILER_STEP
  free(is_step);
  free(step_number);
  if (n > 1) qsort(v, n, sizeof *v, cmp_step_range);
  /* membership: every op to the latest-starting step range that contains
   * its launch */
  ssa_step_index ix;
  if (ssa_step_index_build(&ix, v, n)) {
    free(v);
    return STEPSCOPE_E_NOMEM;
  }
  for (size_t i = 0; i < r->nops && n; i++) {
    const ssa_op *o = &r->ops[i];
    if (o->launch == SSA_NONE) continue;
    uint32_t k = ssa_step_index_owner(&ix, r->apis[o->launch].start);
    if (k == SSA_NONE) continue;
    ssa_step *s = &v[k];
    if (o->start < s->dev_start) s->dev_start = o->start;
    if (o->end > s->dev_end) s->dev_end = o->end;
    s->launched++;
  }
  ssa_step_index_free(&ix);
  /* windows: anchors in iteration order, each window up to the next anchor */
  int64_t device_done = INT64_MIN, prev = INT64_MIN;
  for (size_t i = 0; i < n; i++) {
    ssa_step *s = &v[i];
    s->projected = s->launched > 0;
    if (!s->projected) s->dev_start = s->dev_end = 0;
    int64_t a = s->range_start > device_done ? s->range_start : device_done;
    if (a < prev) a = prev; /* cannot happen (both terms only grow): kept as a guard */
    s->start = prev = a;
    if (s->projected && s->dev_end > device_done) device_done = s->dev_end;
    if (i > 0) v[i - 1].end = a;
  }
  /* a range that ends after the profiling session stopped (when the
   * source knows where) was cut by the trace's end: it counts only up to
   * there */
  for (size_t i = 0; i < n && r->has_trace_stop; i++)
    if (v[i].range_end > r->trace_stop) v[i].cut = 1;
  if (n) {
    ssa_step *last = &v[n - 1];
    last->end = last->cut ? r->trace_stop : last->range_end;
    if (last->projected && last->dev_end > last->end) last->end = last->dev_end;
    if (last->end < last->start) last->end = last->start;
  }
  if (n > 1) qsort(v, n, sizeof *v, cmp_step_number);
  *out = v;
  *nout = n;
  return 0;
}
