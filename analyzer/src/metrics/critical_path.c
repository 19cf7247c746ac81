/*
 * critical_path.c — the critical path of each step (docs/metrics.md "Critical path"): walked
 * back over the dependency graph (cp_graph.c) from the end of the step's window on the rank
 * whose window is the step time, to that window's start.
 *
 * The walk (cp_walk.c) follows a rank's own edges; the only edge between ranks is the
 * collective edge (to the member that arrived last). So it runs in rounds of questions, as the
 * culprit walk does: per step, this file keeps the rank its walk stands on and asks that rank
 * to walk on; a rank answers all its questions of a round in one pass over its events (one
 * read in the bounded mode, ssa_with_rank_events) with the pieces and where the walk jumped;
 * the next round asks the ranks jumped to. Each question carries the step's trail, so a node
 * is entered at most once per step, as in one walk over the whole graph. Time only goes back
 * and every piece ends where the next begins, so the pieces tile the window: the path's
 * length is the step time. A rank tallies its pieces as it walks (path time per name, kind
 * and cause in each visit: ssa_cp_tally), and keeps them too only for the exports' track (the
 * reports print sums: ssa_options.path_sums_only keeps none, a piece per event less at one
 * rank). Once no walk goes on, each step's tallies become its sums, the names interned in step
 * and walk order (the ids, and so the ties below, of one walk), and its kept pieces its
 * segments.
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

/* Path time by (name, rank, kind): an open-addressing table (count 0: empty) sized by the
 * distinct keys (a path has few distinct ops), not by the segments: a table of twice as many
 * slots as the run's segments cost its page faults. */
typedef struct top_table {
  ssa_cp_top *t;
  size_t slots, used;
} top_table;

static int top_table_init(top_table *tt) {
  tt->slots = 64, tt->used = 0;
  tt->t = calloc(tt->slots, sizeof *tt->t);
  return tt->t ? 0 : STEPSCOPE_E_NOMEM;
}

/* Doubles the table, rehashing its keys. */
static int top_table_double(top_table *tt) {
  size_t n = tt->slots * 2;
  ssa_cp_top *d = calloc(n, sizeof *d);
  if (!d) return STEPSCOPE_E_NOMEM;
  for (size_t h = 0; h < tt->slots; h++)
    if (tt->t[h].count)
      d[top_slot(d, n, tt->t[h].name, tt->t[h].rank_idx, tt->t[h].kind)] = tt->t[h];
  free(tt->t);
  tt->t = d;
  tt->slots = n;
  return 0;
}

/* Adds `time` over `count` segments to key (name, rank, kind). */
static int top_add(top_table *tt, uint32_t name, uint32_t rank_idx, uint8_t kind, int64_t time,
                   uint64_t count) {
  size_t h = top_slot(tt->t, tt->slots, name, rank_idx, kind);
  if (!tt->t[h].count) {
    if (2 * (tt->used + 1) > tt->slots) {
      SC_TRY(top_table_double(tt));
      h = top_slot(tt->t, tt->slots, name, rank_idx, kind);
    }
    tt->t[h] = (ssa_cp_top){name, rank_idx, kind, 0, 0};
    tt->used++;
  }
  tt->t[h].time += time;
  tt->t[h].count += count;
  return 0;
}

/* The table's top `cap` keys by time (ties: by key) into out; the table is spent. */
static void top_table_best(top_table *tt, ssa_cp_top *out, size_t cap, size_t *nout) {
  size_t m = 0;
  for (size_t h = 0; h < tt->slots; h++)
    if (tt->t[h].count) tt->t[m++] = tt->t[h];
  qsort(tt->t, m, sizeof *tt->t, cmp_top_time);
  *nout = m < cap ? m : cap;
  memcpy(out, tt->t, *nout * sizeof *out);
  free(tt->t);
  tt->t = NULL;
}

/* A tally of segments (`name`: its name in the analysis' names) counted in its step's sums
 * (time by kind, idle cause and rank, the segments) and, unless idle, in the step's table of
 * top ops `tt`. */
static int account_tally(ssa_cp_step *st, top_table *tt, const ssa_cp_tally *t, uint32_t name) {
  int64_t d = t->time;
  st->nseg += t->count;
  st->length += d;
  st->kind[t->kind] += d;
  if (t->kind == SSA_CP_IDLE) st->idle_cause[t->cause] += d;
  if (t->kind == SSA_CP_HOST && t->cause) st->host_untraced += d;
  st->by_rank[t->rank_idx] += d;
  return t->kind == SSA_CP_IDLE ? 0 : top_add(tt, name, t->rank_idx, t->kind, d, t->count);
}

/* A step's top ops from its table `tt` (spent); the step's time by (name, rank, kind) added to
 * the run's table `run` when the step counts in the medians (the run's top ops: the sum over
 * those steps, one entry per distinct key of a step rather than one per segment). */
static int step_tops(ssa_cp_step *st, top_table *tt, top_table *run) {
  int rc = 0;
  for (size_t h = 0; h < tt->slots && rc == 0 && st->in_medians; h++)
    if (tt->t[h].count)
      rc = top_add(run, tt->t[h].name, tt->t[h].rank_idx, tt->t[h].kind, tt->t[h].time,
                   tt->t[h].count);
  top_table_best(tt, st->top, SSA_CP_TOP_STEP, &st->ntop);
  return rc;
}

static int64_t median_of(int64_t *v, size_t n) {
  qsort(v, n, sizeof *v, ssa_cmp_i64);
  return v[SSA_MEDIAN_INDEX(n)];
}

/* The run's summary over the steps counted in the medians; `run`: their top ops' table. */
static int summarise(ssa_critical_path *cp, top_table *run) {
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
  top_table_best(run, cp->top, SSA_CP_TOP_RUN, &cp->ntop);
  return 0;
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

/* The rounds' state: the graph (collective edges; rank indices while a rank answers), per
 * step its walk, this round's questions by rank. */
typedef struct rounds {
  ssa_analysis *a;
  ssa_cp_graph g;
  int *rcs;                  /* [nranks] */
  ssa_cp_step_walk *walks;   /* [nsteps] */
  unsigned char *walked;     /* [nsteps]: the step has an end rank, its walk was asked */
  ssa_cp_question *q, *next; /* this round's, by rank; the next round's */
  size_t nq, nnext, q_cap, next_cap;
  size_t *first; /* [nranks + 1]: rank i's questions are q[first[i], first[i + 1]) */
} rounds;

static int add_question(ssa_cp_question **v, size_t *n, size_t *cap, ssa_cp_question q) {
  if (ssa_grow((void **)v, cap, *n + 1, sizeof **v)) return STEPSCOPE_E_NOMEM;
  (*v)[(*n)++] = q;
  return 0;
}

static int cmp_question_rank(const void *pa, const void *pb) {
  const ssa_cp_question *a = pa, *b = pb;
  if (a->rank_idx != b->rank_idx) return a->rank_idx < b->rank_idx ? -1 : 1;
  return (a->step > b->step) - (a->step < b->step);
}

/* One rank's answers to this round's questions (a pass: its events are there). */
static int answer_questions(ssa_analysis *a, size_t i, void *ctx) {
  rounds *x = ctx;
  int rc = ssa_cp_rank_index(&x->g, (uint32_t)i);
  ssa_cp_marks marks = {rc ? NULL : calloc(ssa_cp_rank_slots(&x->g, (uint32_t)i) + 1, 1), 0};
  size_t nstrings = a->run->ranks[i].strings.count;
  ssa_cp_names names = {&a->ranks[i].summary.names,
                        calloc(nstrings ? nstrings : 1, sizeof *names.by_string), nstrings, NULL,
                        0};
  if (!marks.stamp || !names.by_string) rc = STEPSCOPE_E_NOMEM;
  for (size_t k = x->first[i]; k < x->first[i + 1] && rc == 0; k++)
    rc = ssa_cp_answer(&x->g, &names, &marks, &x->q[k]);
  free(marks.stamp);
  free(names.by_string);
  free(names.tally_of);
  if (a->opt.rank_events) ssa_cp_rank_index_free(&x->g, (uint32_t)i); /* its events go */
  return rc;
}

/* A rank's pass of a round (a job of ssa_parallel_for): only a rank asked something is read. */
static void answer_rank(void *ctx, size_t i) {
  rounds *x = ctx;
  x->rcs[i] =
      x->first[i] < x->first[i + 1] ? ssa_with_rank_events(x->a, i, answer_questions, x) : 0;
}

/* Question q's answer: the clipped count; where the walk jumped to another rank before the
 * window's start, the records of the visit's entered nodes on the step's walk and the next
 * question. */
static int take_answer(rounds *x, const ssa_cp_question *q) {
  ssa_cp_step_walk *sw = q->walk;
  x->a->critical_path->steps[q->step].clipped += q->clipped;
  if (q->jump.rank_idx == SSA_NONE) return 0; /* the walk ended (its trail is gone) */
  const ssa_cp_visit *vi = &sw->visits[sw->nvisits - 1];
  if (ssa_grow((void **)&sw->colls, &sw->colls_cap, sw->ncolls + vi->nnodes, sizeof *sw->colls))
    return STEPSCOPE_E_NOMEM;
  size_t ncolls = sw->ncolls;
  for (size_t k = vi->node_first; k < vi->node_first + vi->nnodes; k++)
    if (sw->nodes[k].coll != SSA_NONE)
      sw->colls[sw->ncolls++] = (int64_t)vi->rank_idx << 32 | sw->nodes[k].coll;
  if (sw->ncolls > ncolls) qsort(sw->colls, sw->ncolls, sizeof *sw->colls, ssa_cmp_i64);
  if (q->jump.at <= q->lo) return 0; /* it jumped at the window's start: done */
  return add_question(&x->next, &x->nnext, &x->next_cap,
                      (ssa_cp_question){.step = q->step,
                                        .rank_idx = q->jump.rank_idx,
                                        .coll = q->jump.coll,
                                        .t = q->jump.at,
                                        .lo = q->lo,
                                        .walk = sw});
}

/* Asks this round's questions, takes the answers, and makes the next round's. */
static int round_of_questions(rounds *x) {
  ssa_analysis *a = x->a;
  qsort(x->q, x->nq, sizeof *x->q, cmp_question_rank);
  for (size_t r = 0, i = 0; r <= a->nranks; r++) {
    while (i < x->nq && x->q[i].rank_idx < r)
      i++;
    x->first[r] = i;
  }
  ssa_parallel_for(a->nranks, ssa_workers(a->nranks, a->opt.threads), answer_rank, x);
  for (size_t i = 0; i < a->nranks; i++)
    if (x->rcs[i]) return x->rcs[i];
  x->nnext = 0;
  for (size_t k = 0; k < x->nq; k++)
    SC_TRY(take_answer(x, &x->q[k]));
  ssa_cp_question *t = x->q;
  size_t cap = x->q_cap;
  x->q = x->next, x->q_cap = x->next_cap, x->nq = x->nnext;
  x->next = t, x->next_cap = cap;
  return 0;
}

/* The collective edges, from the ranks' summaries: each record's arrival is its op's start. */
static int collective_edges(rounds *x) {
  ssa_analysis *a = x->a;
  ssa_coll_member *m = NULL;
  size_t n = 0;
  SC_TRY(ssa_summary_coll_members(a, &m, &n));
  int64_t *arrival = malloc((n ? n : 1) * sizeof *arrival);
  size_t *ncolls = malloc((a->nranks ? a->nranks : 1) * sizeof *ncolls);
  int rc = arrival && ncolls ? 0 : STEPSCOPE_E_NOMEM;
  for (size_t k = 0; rc == 0 && k < n; k++) {
    const ssa_rank_summary *s = &a->ranks[m[k].rank_idx].summary;
    const ssa_coll_rec *c = &s->colls[m[k].coll_idx];
    arrival[k] = c->flags & SSA_COLL_REC_F_NO_OP ? INT64_MIN : c->start + s->offset_ns;
  }
  for (size_t i = 0; rc == 0 && i < a->nranks; i++)
    ncolls[i] = a->ranks[i].summary.ncolls;
  if (rc == 0) rc = ssa_cp_graph_collectives(&x->g, m, arrival, n, ncolls);
  free(m);
  free(arrival);
  free(ncolls);
  return rc;
}

/* The first round's questions: each step from its end rank's window end. */
static int first_questions(rounds *x) {
  ssa_analysis *a = x->a;
  ssa_critical_path *cp = a->critical_path;
  for (size_t i = 0; i < a->nsteps; i++) {
    ssa_cp_step *st = &cp->steps[i];
    st->step = a->steps[i].step;
    st->step_time = a->steps[i].time;
    st->in_medians = a->steps[i].in_medians;
    st->by_rank = cp->by_rank_all + i * cp->nranks;
    const ssa_window *win = NULL;
    if (end_rank(a, st->step, &st->end_rank_idx, &win) != 0) continue;
    x->walked[i] = 1;
    int64_t off = a->run->ranks[st->end_rank_idx].offset_ns;
    st->start_rel = win->start + off - a->run->origin;
    st->end_rel = win->end + off - a->run->origin;
    SC_TRY(add_question(&x->q, &x->nq, &x->q_cap,
                        (ssa_cp_question){.step = (uint32_t)i,
                                          .rank_idx = st->end_rank_idx,
                                          .coll = SSA_NONE,
                                          .t = win->end + off,
                                          .lo = win->start + off,
                                          .walk = &x->walks[i]}));
  }
  return 0;
}

/* The name in the analysis' names of a piece's or tally's name (`name_from`, rank, `name`);
 * `ids`: per rank, its summary names' ids there (0: not yet), made on first use. */
static int piece_name(ssa_analysis *a, uint8_t name_from, uint32_t rank_idx, uint32_t name,
                      const uint32_t *constants, uint32_t **ids, uint32_t *out) {
  if (name_from != SSA_CP_NAME_SUMMARY) {
    *out = name_from == SSA_CP_NAME_NONE ? 0 : constants[name_from];
    return 0;
  }
  const ssa_strtab *names = &a->ranks[rank_idx].summary.names;
  uint32_t **own = &ids[rank_idx];
  if (!*own && !(*own = calloc(names->count ? names->count : 1, sizeof **own)))
    return STEPSCOPE_E_NOMEM;
  if (!(*own)[name]) {
    const char *s = ssa_strtab_get(names, name);
    size_t len = strlen(s);
    (*own)[name] = ssa_strtab_intern(&a->names, s, len);
    if (len && !(*own)[name]) return STEPSCOPE_E_NOMEM;
  }
  *out = (*own)[name];
  return 0;
}

/* Step i's sums and table of top ops `tt` from its tallies, the names interned in the order a
 * single walk of the steps met them (the tallies are in the order of the pieces' first
 * names, empty pieces' too). */
static int tally_step(rounds *x, size_t i, const uint32_t *constants, uint32_t **ids,
                      top_table *tt) {
  ssa_cp_step_walk *sw = &x->walks[i];
  ssa_cp_step *st = &x->a->critical_path->steps[i];
  for (size_t k = 0; k < sw->ntallies; k++) {
    const ssa_cp_tally *t = &sw->tallies[k];
    uint32_t name = 0;
    SC_TRY(piece_name(x->a, t->name_from, t->rank_idx, t->name, constants, ids, &name));
    if (t->count) SC_TRY(account_tally(st, tt, t, name));
  }
  free(sw->tallies);
  sw->tallies = NULL;
  sw->ntallies = sw->tallies_cap = 0;
  return 0;
}

/* A step's pieces and, once turned, its segments: the same storage (the pieces are as big as
 * segments), so that the path is never held twice. */
typedef union piece_or_segment {
  ssa_cp_piece piece;
  ssa_cp_segment seg;
} piece_or_segment;
_Static_assert(sizeof(ssa_cp_piece) == sizeof(ssa_cp_segment), "a piece turns into a segment");

/* Step i's pieces (when the walk kept them) turned into its segments in place, the empty
 * pieces left out (their names are interned already: tally_step). */
static int turn_pieces(rounds *x, size_t i, const uint32_t *constants, uint32_t **ids) {
  ssa_cp_step_walk *sw = &x->walks[i];
  ssa_cp_step *st = &x->a->critical_path->steps[i];
  piece_or_segment *v = (piece_or_segment *)(void *)sw->pieces;
  size_t m = 0;
  for (size_t k = 0; k < sw->npieces; k++) {
    ssa_cp_piece p = v[k].piece;
    uint32_t name = 0;
    SC_TRY(piece_name(x->a, p.name_from, p.rank_idx, p.name, constants, ids, &name));
    if (p.end_rel <= p.start_rel) continue;
    v[m].seg = (ssa_cp_segment){.start_rel = p.start_rel,
                                .end_rel = p.end_rel,
                                .rank_idx = p.rank_idx,
                                .name = name,
                                .kind = p.kind,
                                .cause = p.cause,
                                .edge = p.edge,
                                .is_api = p.is_api};
    m++;
  }
  ssa_cp_segment *segs = m ? realloc(v, m * sizeof *segs) : NULL; /* its exact size */
  if (m && !segs) segs = &v[0].seg;
  if (!m) free(v);
  sw->pieces = NULL;
  sw->npieces = sw->pieces_cap = 0;
  st->segs = segs;
  return 0;
}

/* Every step's sums and top ops from its tallies, in step order, its pieces into its segments
 * when the walk kept them; then the run's summary. */
static int assemble(rounds *x, const uint32_t *constants) {
  ssa_analysis *a = x->a;
  ssa_critical_path *cp = a->critical_path;
  uint32_t **ids = calloc(a->nranks ? a->nranks : 1, sizeof *ids);
  top_table run = {0};
  int rc = ids ? top_table_init(&run) : STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < a->nsteps && rc == 0; i++) {
    top_table tt;
    if ((rc = top_table_init(&tt)) != 0) break;
    rc = tally_step(x, i, constants, ids, &tt);
    if (rc == 0 && !cp->sums_only) rc = turn_pieces(x, i, constants, ids);
    ssa_cp_step *st = &cp->steps[i];
    cp->nsegs += st->nseg;
    if (rc == 0 && x->walked[i]) { /* else no rank has a window of the step: no pieces */
      rc = step_tops(st, &tt, &run);
      if (st->length != st->step_time) cp->mismatched_steps++;
    }
    free(tt.t); /* NULL when spent */
  }
  for (size_t i = 0; ids && i < a->nranks; i++)
    free(ids[i]);
  free(ids);
  if (rc == 0) rc = summarise(cp, &run);
  free(run.t);
  return rc;
}

static void rounds_free(rounds *x) {
  for (size_t i = 0; x->walks && i < x->a->nsteps; i++) {
    ssa_cp_step_walk *sw = &x->walks[i];
    free(sw->pieces);
    free(sw->tallies);
    free(sw->visits);
    free(sw->nodes);
    free(sw->colls);
  }
  free(x->rcs);
  free(x->walks);
  free(x->walked);
  free(x->q);
  free(x->next);
  free(x->first);
  ssa_cp_graph_free(&x->g);
}

static int intern_const(ssa_analysis *a, const char *s, uint32_t *id) {
  *id = ssa_strtab_intern(&a->names, s, strlen(s));
  return *id ? 0 : STEPSCOPE_E_NOMEM;
}

/* The walk in rounds: the first questions, rounds until no step's walk goes on, the pieces
 * assembled. */
static int walk_in_rounds(rounds *x, const uint32_t *constants) {
  ssa_analysis *a = x->a;
  size_t nr = a->nranks ? a->nranks : 1, ns = a->nsteps;
  x->rcs = calloc(nr, sizeof *x->rcs);
  x->first = calloc(nr + 1, sizeof *x->first);
  x->walks = calloc(ns, sizeof *x->walks);
  x->walked = calloc(ns, sizeof *x->walked);
  if (!x->rcs || !x->first || !x->walks || !x->walked) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < ns; i++)
    x->walks[i].keep_pieces = !a->critical_path->sums_only;
  SC_TRY(ssa_cp_graph_init(&x->g, a->run));
  x->g.wait_slack_ns = 5 * a->launch_gap_ns; /* ROCm streams resume ~15 us after the event */
  SC_TRY(collective_edges(x));
  SC_TRY(first_questions(x));
  while (x->nq > 0)
    SC_TRY(round_of_questions(x));
  ssa_cp_graph_free(&x->g); /* the walks are done: the ranks' indices go */
  return assemble(x, constants);
}

int ssa_find_critical_paths(ssa_analysis *a) {
  ssa_critical_path *cp = calloc(1, sizeof *cp);
  if (!cp) return STEPSCOPE_E_NOMEM;
  a->critical_path = cp;
  cp->nranks = a->nranks;
  cp->nsteps = a->nsteps;
  cp->sums_only = a->opt.path_sums_only;
  cp->steps = calloc(a->nsteps ? a->nsteps : 1, sizeof *cp->steps);
  cp->by_rank_all =
      calloc((a->nsteps ? a->nsteps : 1) * (a->nranks ? a->nranks : 1), sizeof *cp->by_rank_all);
  cp->total_by_rank = calloc(a->nranks ? a->nranks : 1, sizeof *cp->total_by_rank);
  if (!cp->steps || !cp->by_rank_all || !cp->total_by_rank) return STEPSCOPE_E_NOMEM;
  if (a->nsteps == 0) return 0;
  uint32_t constants[SSA_CP_NAME_SUMMARY] = {0};
  SC_TRY(intern_const(a, "memcpy", &constants[SSA_CP_NAME_MEMCPY]));
  SC_TRY(intern_const(a, "memset", &constants[SSA_CP_NAME_MEMSET]));
  SC_TRY(intern_const(a, "(host, untraced)", &constants[SSA_CP_NAME_UNTRACED]));
  rounds x = {.a = a};
  int rc = walk_in_rounds(&x, constants);
  rounds_free(&x);
  return rc;
}

void ssa_critical_path_free(ssa_critical_path *cp) {
  if (!cp) return;
  for (size_t i = 0; cp->steps && i < cp->nsteps; i++)
    free(cp->steps[i].segs);
  free(cp->steps);
  free(cp->by_rank_all);
  free(cp->total_by_rank);
  free(cp);
}

/* Segment number i of the path (steps in order, each's segments in order): its step. */
static size_t step_of_segment(const ssa_critical_path *cp, const size_t *first, size_t i) {
  size_t lo = 0, hi = cp->nsteps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (first[mid] <= i)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - 1; /* a step without segments shares its first with the next */
}

int ssa_cp_track(const ssa_critical_path *cp, uint32_t rank_idx,
                 void (*emit)(void *ctx, const ssa_cp_segment *s, int64_t step, int64_t start_rel,
                              int64_t end_rel),
                 void *ctx) {
  if (cp->sums_only) return STEPSCOPE_E_STATE; /* no segments: the caller's options */
  size_t n = 0;
  for (size_t i = 0; i < cp->nsteps; i++)
    for (size_t k = 0; k < cp->steps[i].nseg; k++)
      n += cp->steps[i].segs[k].rank_idx == rank_idx;
  if (n == 0) return 0;
  /* by (start, the segment's number in the path), each step's number of its first */
  ssa_key_index *v = malloc(n * sizeof *v);
  size_t *first = malloc(cp->nsteps * sizeof *first);
  if (!v || !first) {
    free(v);
    free(first);
    return STEPSCOPE_E_NOMEM;
  }
  n = 0;
  for (size_t i = 0, number = 0; i < cp->nsteps; number += cp->steps[i++].nseg) {
    first[i] = number;
    for (size_t k = 0; k < cp->steps[i].nseg; k++)
      if (cp->steps[i].segs[k].rank_idx == rank_idx)
        v[n++] = (ssa_key_index){cp->steps[i].segs[k].start_rel, number + k};
  }
  ssa_sort_by_start(v, n, sizeof *v, ssa_cmp_key_index);
  int64_t reached = INT64_MIN;
  for (size_t i = 0; i < n; i++) {
    size_t st = step_of_segment(cp, first, v[i].index);
    const ssa_cp_segment *s = &cp->steps[st].segs[v[i].index - first[st]];
    int64_t from = s->start_rel > reached ? s->start_rel : reached;
    if (from >= s->end_rel) continue;
    emit(ctx, s, cp->steps[st].step, from, s->end_rel);
    reached = s->end_rel;
  }
  free(v);
  free(first);
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
