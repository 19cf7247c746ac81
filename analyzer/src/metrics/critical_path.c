/*
 * critical_path.c — the critical path of each step (docs/metrics.md "Critical path"): walked
 * back over the dependency graph (cp_graph.c) from the end of the step's window on the rank
 * whose window is the step time, to that window's start.
 *
 * From a node entered at time t the walk takes the predecessor that released the node last
 * (ties: the edge order of SSA_CPE_*, lane first); the node's own time on the path is
 * [max(start, release), t], the gap [release, start] (when the node started after its
 * release) is idle with the edge's cause, or untraced host time on a host thread, and the walk
 * goes on from the predecessor at the release time. Time only goes back and every piece ends
 * where the next begins, so the pieces tile the window: the path's length is the step time.
 * A node is entered at most once per step (marks), so a step costs at most its nodes.
 *
 * Then per step: time by kind, by idle cause and by rank, and the top ops (path time per
 * name and rank); over the steps counted in the medians: each part's median, the totals and
 * the top ops.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "critical_path.h"
#include "sc_hash.h"
#include "sc_try.h"

const char *const ssa_cp_kind_names[SSA_CP_KIND_N] = {"compute", "communication", "copy", "host",
                                                      "idle"};
const char *const ssa_cp_idle_names[SSA_CP_IDLE_N] = {"launch", "sync", "stream", "unexplained"};

typedef struct walk {
  ssa_analysis *a;
  const ssa_cp_graph *g;
  ssa_critical_path *cp;
  uint64_t **marks;    /* per rank: a bit per node slot */
  ssa_cp_node *marked; /* the nodes marked in this step, to clear */
  size_t nmarked, marked_cap;
  uint32_t name_memcpy, name_memset, name_untraced;
} walk;

static int push_seg(walk *w, const ssa_cp_segment *s) {
  ssa_critical_path *cp = w->cp;
  if (s->end_rel <= s->start_rel) return 0;
  if (ssa_grow((void **)&cp->segs, &cp->segs_cap, cp->nsegs + 1, sizeof *cp->segs))
    return STEPSCOPE_E_NOMEM;
  cp->segs[cp->nsegs++] = *s;
  return 0;
}

static int mark(walk *w, ssa_cp_node n) {
  size_t slot = ssa_cp_node_slot(w->g, n);
  uint64_t *m = w->marks[n.rank_idx];
  if (m[slot / 64] >> (slot % 64) & 1) return 1;
  m[slot / 64] |= (uint64_t)1 << (slot % 64);
  if (ssa_grow((void **)&w->marked, &w->marked_cap, w->nmarked + 1, sizeof *w->marked)) return -1;
  w->marked[w->nmarked++] = n;
  return 0;
}

static int is_marked(const walk *w, ssa_cp_node n) {
  size_t slot = ssa_cp_node_slot(w->g, n);
  return (int)(w->marks[n.rank_idx][slot / 64] >> (slot % 64) & 1);
}

static void clear_marks(walk *w) {
  for (size_t i = 0; i < w->nmarked; i++) {
    size_t slot = ssa_cp_node_slot(w->g, w->marked[i]);
    w->marks[w->marked[i].rank_idx][slot / 64] = 0;
  }
  w->nmarked = 0;
}

/* The node's piece: its kind and name in the analysis' names. */
static void node_piece(walk *w, ssa_cp_node n, ssa_cp_segment *s) {
  const ssa_rank *r = &w->a->run->ranks[n.rank_idx];
  const char *name;
  if (n.type == SSA_CPN_API) {
    s->kind = SSA_CP_HOST;
    s->is_api = 1;
    name = ssa_rank_str(r, r->apis[n.index].name);
  } else {
    const ssa_op *o = &r->ops[n.index];
    s->kind = o->cls == SSA_CLS_COMPUTE ? SSA_CP_COMPUTE
              : o->cls == SSA_CLS_COMM  ? SSA_CP_COMM
                                        : SSA_CP_COPY;
    name = ssa_rank_str(r, o->name);
    if (!*name) {
      s->name = o->kind == SSA_OP_MEMSET ? w->name_memset : w->name_memcpy;
      return;
    }
  }
  s->name = ssa_strtab_intern(&w->a->names, name, strlen(name));
}

/* The piece of a gap before a node: idle with the edge's cause, or untraced host time when
 * the node runs on a host thread (a call, or an op of a host timeline). */
static void gap_piece(walk *w, ssa_cp_node n, int edge, ssa_cp_segment *s) {
  const ssa_rank *r = &w->a->run->ranks[n.rank_idx];
  if (n.type == SSA_CPN_API || r->host_timeline) {
    s->kind = SSA_CP_HOST;
    s->cause = 1;
    s->name = w->name_untraced;
    return;
  }
  s->kind = SSA_CP_IDLE;
  /* a stream gap is the device's own delay only when the op's launch is known (it was
   * released earlier): without it the trace does not show what the op waited for */
  if (edge == SSA_CPE_LANE && r->ops[n.index].launch == SSA_NONE) edge = SSA_CPE_N;
  s->cause = edge == SSA_CPE_LAUNCH ? SSA_CP_IDLE_LAUNCH
             : edge == SSA_CPE_WAIT ? SSA_CP_IDLE_SYNC
             : edge == SSA_CPE_LANE ? SSA_CP_IDLE_STREAM
                                    : SSA_CP_IDLE_UNEXPLAINED;
}

static int64_t rel(const walk *w, int64_t aligned) {
  return aligned - w->a->run->origin;
}

/* Walks step `st` back from aligned time hi on rank R to lo. */
static int walk_step(walk *w, ssa_cp_step *st, uint32_t R, int64_t lo, int64_t hi) {
  const ssa_cp_graph *g = w->g;
  ssa_cp_segment base = {.edge = SSA_CPE_N};
  ssa_cp_node n;
  if (ssa_cp_last_before(g, R, hi, &n) != 0 || ssa_cp_node_end(g, n) <= lo) {
    ssa_cp_segment s = base;
    s.rank_idx = R;
    s.start_rel = rel(w, lo), s.end_rel = rel(w, hi);
    s.kind = SSA_CP_IDLE, s.cause = SSA_CP_IDLE_UNEXPLAINED;
    return push_seg(w, &s);
  }
  int64_t t = ssa_cp_node_end(g, n);
  if (t < hi) { /* the step ended when its host began the next one */
    ssa_cp_segment s = base;
    s.rank_idx = R;
    s.start_rel = rel(w, t), s.end_rel = rel(w, hi);
    s.kind = SSA_CP_HOST, s.cause = 1, s.name = w->name_untraced;
    SC_TRY(push_seg(w, &s));
  }
  if (mark(w, n) < 0) return STEPSCOPE_E_NOMEM;
  while (t > lo) {
    ssa_cp_edge e[SSA_CP_MAX_PREDS];
    size_t np = ssa_cp_preds(g, n, e);
    int best = -1;
    for (size_t i = 0; i < np; i++) {
      if (is_marked(w, e[i].from)) continue;
      if (e[i].release > t) {
        st->clipped++;
        e[i].release = t;
      }
      if (best < 0 || e[i].release > e[best].release) best = (int)i;
    }
    int64_t start = ssa_cp_node_start(g, n);
    int64_t r = best >= 0 ? e[best].release : lo;
    if (r < lo) r = lo;
    ssa_cp_segment s = base;
    s.rank_idx = n.rank_idx;
    node_piece(w, n, &s);
    s.edge = best >= 0 ? e[best].type : SSA_CPE_N;
    int64_t from = start > r ? start : r;
    if (from > t) from = t;
    s.start_rel = rel(w, from), s.end_rel = rel(w, t);
    SC_TRY(push_seg(w, &s));
    if (from > r) {
      ssa_cp_segment gs = base;
      gs.rank_idx = n.rank_idx;
      gap_piece(w, n, best >= 0 ? e[best].type : SSA_CPE_N, &gs);
      gs.start_rel = rel(w, r), gs.end_rel = rel(w, from);
      SC_TRY(push_seg(w, &gs));
    }
    t = r;
    if (best < 0) break;
    n = e[best].from;
    if (mark(w, n) < 0) return STEPSCOPE_E_NOMEM;
  }
  return 0;
}

static int cmp_top_key(const void *pa, const void *pb) {
  const ssa_cp_top *a = pa, *b = pb;
  if (a->name != b->name) return a->name < b->name ? -1 : 1;
  if (a->rank_idx != b->rank_idx) return a->rank_idx < b->rank_idx ? -1 : 1;
  return (a->kind > b->kind) - (a->kind < b->kind);
}

static int cmp_top_time(const void *pa, const void *pb) {
  const ssa_cp_top *a = pa, *b = pb;
  if (a->time != b->time) return a->time > b->time ? -1 : 1;
  return cmp_top_key(pa, pb);
}

/* The slot of key (name, rank, kind) in the open-addressing table t of `slots` (a power of
 * two, never full): the key's own slot, or the empty one where it belongs. */
static size_t top_slot(const ssa_cp_top *t, size_t slots, uint32_t name, uint32_t rank_idx,
                       uint8_t kind) {
  size_t h = sc_mix64((uint64_t)name << 32 ^ (uint64_t)rank_idx << 3 ^ kind) & (slots - 1);
  while (t[h].count && (t[h].name != name || t[h].rank_idx != rank_idx || t[h].kind != kind))
    h = (h + 1) & (slots - 1);
  return h;
}

/* Doubles the table, rehashing its keys. */
static int top_table_double(ssa_cp_top **t, size_t *slots) {
  size_t n = *slots * 2;
  ssa_cp_top *d = calloc(n, sizeof *d); /* count 0: empty */
  if (!d) return STEPSCOPE_E_NOMEM;
  for (size_t h = 0; h < *slots; h++)
    if ((*t)[h].count) d[top_slot(d, n, (*t)[h].name, (*t)[h].rank_idx, (*t)[h].kind)] = (*t)[h];
  free(*t);
  *t = d;
  *slots = n;
  return 0;
}

/* The top `cap` (name, rank, kind) of the segments of steps[0, nsteps) (those counted in the
 * medians only, when `medians_only`; idle left out) into out: summed in an open-addressing
 * table of the keys, the distinct ones sorted. The table is sized by the distinct keys (a path
 * has few distinct ops), not by the segments: the run's summary passes every segment of the
 * run, and a table of twice that many slots cost its page faults. */
static int top_ops(const ssa_critical_path *cp, const ssa_cp_step *steps, size_t nsteps,
                   int medians_only, ssa_cp_top *out, size_t cap, size_t *nout) {
  size_t slots = 64, used = 0;
  ssa_cp_top *t = calloc(slots, sizeof *t); /* count 0: empty */
  if (!t) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < nsteps; i++) {
    if (medians_only && !steps[i].in_medians) continue;
    for (size_t j = 0; j < steps[i].nseg; j++) {
      const ssa_cp_segment *s = &cp->segs[steps[i].seg_first + j];
      if (s->kind == SSA_CP_IDLE) continue;
      size_t h = top_slot(t, slots, s->name, s->rank_idx, s->kind);
      if (!t[h].count) {
        if (2 * (used + 1) > slots) {
          if (top_table_double(&t, &slots)) {
            free(t);
            return STEPSCOPE_E_NOMEM;
          }
          h = top_slot(t, slots, s->name, s->rank_idx, s->kind);
        }
        t[h] = (ssa_cp_top){s->name, s->rank_idx, s->kind, 0, 0};
        used++;
      }
      t[h].time += s->end_rel - s->start_rel;
      t[h].count++;
    }
  }
  size_t m = 0;
  for (size_t h = 0; h < slots; h++)
    if (t[h].count) t[m++] = t[h];
  qsort(t, m, sizeof *t, cmp_top_time);
  *nout = m < cap ? m : cap;
  memcpy(out, t, *nout * sizeof *out);
  free(t);
  return 0;
}

static void account_step(ssa_critical_path *cp, ssa_cp_step *st) {
  for (size_t i = st->seg_first; i < st->seg_first + st->nseg; i++) {
    const ssa_cp_segment *s = &cp->segs[i];
    int64_t d = s->end_rel - s->start_rel;
    st->length += d;
    st->kind[s->kind] += d;
    if (s->kind == SSA_CP_IDLE) st->idle_cause[s->cause] += d;
    if (s->kind == SSA_CP_HOST && s->cause) st->host_untraced += d;
    st->by_rank[s->rank_idx] += d;
  }
}

static int64_t median_of(int64_t *v, size_t n) {
  qsort(v, n, sizeof *v, ssa_cmp_i64);
  return v[SSA_MEDIAN_INDEX(n)];
}

/* The run's summary over the steps counted in the medians. */
static int summarise(ssa_critical_path *cp) {
  size_t n = 0;
  for (size_t i = 0; i < cp->nsteps; i++)
    n += cp->steps[i].in_medians != 0;
  cp->steady = n;
  if (n == 0) return 0;
  int64_t *v = malloc(n * sizeof *v);
  if (!v) return STEPSCOPE_E_NOMEM;
  size_t k = 0;
#define MEDIAN_OF(field, out)                                                                      \
  do {                                                                                             \
    k = 0;                                                                                         \
    for (size_t i = 0; i < cp->nsteps; i++)                                                        \
      if (cp->steps[i].in_medians) v[k++] = cp->steps[i].field;                                    \
    out = median_of(v, k);                                                                         \
  } while (0)
  MEDIAN_OF(length, cp->median_length);
  MEDIAN_OF(step_time, cp->median_step_time);
  for (int c = 0; c < SSA_CP_KIND_N; c++)
    MEDIAN_OF(kind[c], cp->median_kind[c]);
  for (int c = 0; c < SSA_CP_IDLE_N; c++)
    MEDIAN_OF(idle_cause[c], cp->median_idle_cause[c]);
#undef MEDIAN_OF
  cp->median_step = SIZE_MAX;
  for (size_t i = 0; i < cp->nsteps; i++)
    if (cp->steps[i].in_medians && cp->steps[i].length == cp->median_length &&
        cp->median_step == SIZE_MAX)
      cp->median_step = i;
  k = 0;
  for (size_t i = 0; i < cp->nsteps; i++) {
    const ssa_cp_step *st = &cp->steps[i];
    if (!st->in_medians) continue;
    cp->total_length += st->length;
    cp->total_host_untraced += st->host_untraced;
    for (int c = 0; c < SSA_CP_KIND_N; c++)
      cp->total_kind[c] += st->kind[c];
    for (int c = 0; c < SSA_CP_IDLE_N; c++)
      cp->total_idle_cause[c] += st->idle_cause[c];
    for (size_t r = 0; r < cp->nranks; r++)
      cp->total_by_rank[r] += st->by_rank[r];
  }
  free(v);
  return top_ops(cp, cp->steps, cp->nsteps, 1, cp->top, SSA_CP_TOP_RUN, &cp->ntop);
}

/* The rank whose window of step `number` is the longest (the step time), its window. */
static int end_rank(const ssa_analysis *a, int64_t number, uint32_t *R, const ssa_window **win) {
  int64_t best = -1;
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    for (size_t s = 0; s < rr->nsteps; s++)
      if (rr->windows[s].step == number && rr->windows[s].span > best) {
        best = rr->windows[s].span;
        *R = (uint32_t)i;
        *win = &rr->windows[s];
      }
  }
  return best >= 0 ? 0 : -1;
}

static int walk_all(walk *w) {
  ssa_analysis *a = w->a;
  ssa_critical_path *cp = w->cp;
  for (size_t i = 0; i < a->nsteps; i++) {
    ssa_cp_step *st = &cp->steps[i];
    st->step = a->steps[i].step;
    st->step_time = a->steps[i].time;
    st->in_medians = a->steps[i].in_medians;
    st->by_rank = cp->by_rank_all + i * cp->nranks;
    st->seg_first = cp->nsegs;
    const ssa_window *win = NULL;
    if (end_rank(a, st->step, &st->end_rank_idx, &win) != 0) continue;
    int64_t off = a->run->ranks[st->end_rank_idx].offset_ns;
    st->start_rel = rel(w, win->start + off);
    st->end_rel = rel(w, win->end + off);
    SC_TRY(walk_step(w, st, st->end_rank_idx, win->start + off, win->end + off));
    clear_marks(w);
    st->nseg = cp->nsegs - st->seg_first;
    account_step(cp, st);
    if (st->length != st->step_time) cp->mismatched_steps++;
  }
  for (size_t i = 0; i < a->nsteps; i++) {
    ssa_cp_step *st = &cp->steps[i];
    SC_TRY(top_ops(cp, st, 1, 0, st->top, SSA_CP_TOP_STEP, &st->ntop));
  }
  return summarise(cp);
}

static int intern_const(ssa_analysis *a, const char *s, uint32_t *id) {
  *id = ssa_strtab_intern(&a->names, s, strlen(s));
  return *id ? 0 : STEPSCOPE_E_NOMEM;
}

int ssa_find_critical_paths(ssa_analysis *a) {
  ssa_critical_path *cp = calloc(1, sizeof *cp);
  if (!cp) return STEPSCOPE_E_NOMEM;
  a->critical_path = cp;
  cp->nranks = a->nranks;
  cp->nsteps = a->nsteps;
  cp->steps = calloc(a->nsteps ? a->nsteps : 1, sizeof *cp->steps);
  cp->by_rank_all =
      calloc((a->nsteps ? a->nsteps : 1) * (a->nranks ? a->nranks : 1), sizeof *cp->by_rank_all);
  cp->total_by_rank = calloc(a->nranks ? a->nranks : 1, sizeof *cp->total_by_rank);
  if (!cp->steps || !cp->by_rank_all || !cp->total_by_rank) return STEPSCOPE_E_NOMEM;
  if (a->nsteps == 0) return 0;
  walk w = {.a = a, .cp = cp};
  SC_TRY(intern_const(a, "memcpy", &w.name_memcpy));
  SC_TRY(intern_const(a, "memset", &w.name_memset));
  SC_TRY(intern_const(a, "(host, untraced)", &w.name_untraced));
  ssa_coll_member *members = NULL;
  size_t nmembers = 0;
  SC_TRY(ssa_run_coll_members(a->run, &members, &nmembers));
  ssa_cp_graph g;
  int rc = ssa_cp_graph_build(&g, a->run, members, nmembers, a->opt.threads);
  free(members);
  if (rc) return rc;
  g.wait_slack_ns = 5 * a->launch_gap_ns; /* ROCm streams resume ~15 us after the event */
  w.g = &g;
  w.marks = calloc(a->nranks ? a->nranks : 1, sizeof *w.marks);
  rc = w.marks ? 0 : STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < a->nranks && rc == 0; i++) {
    w.marks[i] = calloc(ssa_cp_rank_slots(&g, (uint32_t)i) / 64 + 1, sizeof **w.marks);
    if (!w.marks[i]) rc = STEPSCOPE_E_NOMEM;
  }
  if (rc == 0) rc = walk_all(&w);
  for (size_t i = 0; w.marks && i < a->nranks; i++)
    free(w.marks[i]);
  free(w.marks);
  free(w.marked);
  ssa_cp_graph_free(&g);
  return rc;
}

void ssa_critical_path_free(ssa_critical_path *cp) {
  if (!cp) return;
  free(cp->steps);
  free(cp->segs);
  free(cp->by_rank_all);
  free(cp->total_by_rank);
  free(cp);
}

typedef struct piece_order {
  int64_t start;
  uint64_t seg;
} piece_order;

/* The step of segment i: the last step whose segments start at or before it (steps are in
 * the order of their segments; a step without any shares its start with the next). */
static int64_t step_of_segment(const ssa_critical_path *cp, size_t i) {
  size_t lo = 0, hi = cp->nsteps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cp->steps[mid].seg_first <= i)
      lo = mid + 1;
    else
      hi = mid;
  }
  return cp->steps[lo - 1].step;
}

int ssa_cp_track(const ssa_critical_path *cp, uint32_t rank_idx,
                 void (*emit)(void *ctx, const ssa_cp_segment *s, int64_t step, int64_t start_rel,
                              int64_t end_rel),
                 void *ctx) {
  size_t n = 0;
  for (size_t i = 0; i < cp->nsegs; i++)
    n += cp->segs[i].rank_idx == rank_idx;
  if (n == 0) return 0;
  ssa_key_index *v = malloc(n * sizeof *v);
  if (!v) return STEPSCOPE_E_NOMEM;
  n = 0;
  for (size_t i = 0; i < cp->nsegs; i++)
    if (cp->segs[i].rank_idx == rank_idx) v[n++] = (ssa_key_index){cp->segs[i].start_rel, i};
  ssa_sort_by_start(v, n, sizeof *v, ssa_cmp_key_index);
  int64_t reached = INT64_MIN;
  for (size_t i = 0; i < n; i++) {
    const ssa_cp_segment *s = &cp->segs[v[i].index];
    int64_t from = s->start_rel > reached ? s->start_rel : reached;
    if (from >= s->end_rel) continue;
    emit(ctx, s, step_of_segment(cp, v[i].index), from, s->end_rel);
    reached = s->end_rel;
  }
  free(v);
  return 0;
}

const char *ssa_cp_segment_label(const ssa_analysis *a, const ssa_cp_segment *s, char *buf,
                                 size_t n) {
  if (s->kind == SSA_CP_IDLE) {
    snprintf(buf, n, "idle (%s)", ssa_cp_idle_names[s->cause]);
    return buf;
  }
  return ssa_name(a, s->name);
}
