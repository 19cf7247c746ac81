/*
 * cp_walk.c — a rank's answer to a question of the critical path's rounds
 * (critical_path.h, docs/metrics.md "Critical path"): the walk of one step back over the
 * rank's part of the dependency graph (cp_graph.c), from the step's start node or from a
 * collective record's op entered at a time, until the walk reaches the step's window start,
 * runs out of predecessors, or a collective edge to another rank wins (the jump: the asking
 * side goes on there). It reads only this rank's events and indices; what the step's walk
 * entered on other ranks comes with the question (its trail), so "a node is entered at most
 * once per step" holds across the rank's visits.
 *
 * From a node entered at time t the walk takes the predecessor that released the node last
 * (ties: the edge order of SSA_CPE_*, lane first); the node's own time on the path is
 * [max(start, release), t], the gap [release, start] (when the node started after its
 * release) is idle with the edge's cause, or untraced host time on a host thread, and the walk
 * goes on from the predecessor at the release time.
 */
#include <stdlib.h>
#include <string.h>

#include "critical_path.h"
#include "sc_try.h"

/* One walk of a question: the rank's indices and events, the marks (`now`: the stamp of the
 * nodes this answer enters), the answer's storage and where this answer's tallies begin;
 * `trail`: whether it keeps the nodes it enters (a walk that may jump to another rank and come
 * back; a run of one rank has no edge to another). */
typedef struct rank_walk {
  const ssa_cp_graph *g;
  const ssa_rank *r;
  ssa_cp_names *names;
  uint8_t *marks, now;
  int trail;
  ssa_cp_question *q;
  ssa_cp_step_walk *sw;
  size_t first_tally;
} rank_walk;

/* What a piece is but its times and name: its kind, cause, is_api and name_from (the fields
 * of ssa_cp_piece), packed in a word so that it goes from where it is decided to put_piece in
 * a register. A piece filled in place and read back for its tally stalled at every piece (its
 * byte fields, just stored, read back out of wider stores). */
typedef uint32_t piece_what;
static piece_what what_of(unsigned kind, unsigned cause, unsigned is_api, unsigned name_from) {
  return (piece_what)(kind | cause << 8 | is_api << 16 | name_from << 24);
}
static unsigned what_kind(piece_what x) {
  return x & 0xff;
}
static unsigned what_cause(piece_what x) {
  return x >> 8 & 0xff;
}
static unsigned what_is_api(piece_what x) {
  return x >> 16 & 0xff;
}
static unsigned what_name_from(piece_what x) {
  return x >> 24;
}

/* A piece's slot in names->tally_of: by where its name is (a summary name by its id), its
 * kind and its cause (an idle cause, or host time's untraced flag: below SSA_CP_IDLE_N). */
static size_t tally_slot(piece_what x, uint32_t name) {
  size_t at = what_name_from(x) == SSA_CP_NAME_SUMMARY ? SSA_CP_NAME_SUMMARY + (size_t)name
                                                       : what_name_from(x);
  return (at * SSA_CP_KIND_N + what_kind(x)) * SSA_CP_IDLE_N + what_cause(x);
}

/* The piece [from, to) (aligned) on the rank, `x` with `name` (SSA_CP_NAME_SUMMARY: an id in
 * the summary names, else 0), the walk having gone back from it by `edge`: added to its tally
 * in the step's walk (a new one when the visit meets its name, kind and cause for the first
 * time), and appended to the step's pieces when the walk keeps them. 0 or STEPSCOPE_E_NOMEM. */
static int put_piece(rank_walk *w, int64_t from, int64_t to, piece_what x, uint32_t name,
                     unsigned edge) {
  ssa_cp_names *nm = w->names;
  ssa_cp_step_walk *o = w->sw;
  size_t k = tally_slot(x, name);
  if (k >= nm->tally_slots) {
    size_t n = nm->tally_slots, cap = n;
    if (ssa_grow((void **)&nm->tally_of, &cap, 2 * k + 1, sizeof *nm->tally_of))
      return STEPSCOPE_E_NOMEM;
    memset(nm->tally_of + n, 0, (cap - n) * sizeof *nm->tally_of);
    nm->tally_slots = cap;
  }
  uint32_t t = nm->tally_of[k];
  if (!t) {
    if (ssa_grow((void **)&o->tallies, &o->tallies_cap, o->ntallies + 1, sizeof *o->tallies))
      return STEPSCOPE_E_NOMEM;
    o->tallies[o->ntallies++] = (ssa_cp_tally){.name = name,
                                               .rank_idx = w->q->rank_idx,
                                               .name_from = (uint8_t)what_name_from(x),
                                               .kind = (uint8_t)what_kind(x),
                                               .cause = (uint8_t)what_cause(x)};
    t = nm->tally_of[k] = (uint32_t)o->ntallies;
  }
  if (to > from) {
    o->tallies[t - 1].time += to - from;
    o->tallies[t - 1].count++;
  }
  if (!o->keep_pieces) return 0;
  if (o->npieces == o->pieces_cap &&
      ssa_grow((void **)&o->pieces, &o->pieces_cap, o->npieces + 1, sizeof *o->pieces))
    return STEPSCOPE_E_NOMEM;
  int64_t origin = w->g->run->origin;
  o->pieces[o->npieces++] = (ssa_cp_piece){.start_rel = from - origin,
                                           .end_rel = to - origin,
                                           .rank_idx = w->q->rank_idx,
                                           .name = name,
                                           .kind = (uint8_t)what_kind(x),
                                           .cause = (uint8_t)what_cause(x),
                                           .edge = (uint8_t)edge,
                                           .is_api = (uint8_t)what_is_api(x),
                                           .name_from = (uint8_t)what_name_from(x)};
  return 0;
}

/* This answer's tallies' slots zero again for the next visit. */
static void close_answer(rank_walk *w) {
  const ssa_cp_step_walk *o = w->sw;
  for (size_t i = w->first_tally; i < o->ntallies; i++) {
    const ssa_cp_tally *t = &o->tallies[i];
    w->names->tally_of[tally_slot(what_of(t->kind, t->cause, 0, t->name_from), t->name)] = 0;
  }
}

static size_t slot(const rank_walk *w, uint8_t type, uint32_t index) {
  return type == SSA_CPN_OP ? index : w->r->nops + index;
}

static void set_mark(rank_walk *w, uint8_t type, uint32_t index) {
  w->marks[slot(w, type, index)] = w->now;
}

/* Enters node n: marked, and, when the walk keeps its trail, kept in the answer's nodes with
 * the record it is the op of. */
static int enter(rank_walk *w, ssa_cp_node n) {
  set_mark(w, n.type, n.index);
  if (!w->trail) return 0;
  ssa_cp_step_walk *o = w->sw;
  uint32_t coll = SSA_NONE;
  if (n.type == SSA_CPN_OP) {
    uint32_t c = w->r->ops[n.index].coll;
    if (c != SSA_NONE && c < w->r->ncolls && w->r->colls[c].op_index == n.index) coll = c;
  }
  if (o->nnodes == o->nodes_cap &&
      ssa_grow((void **)&o->nodes, &o->nodes_cap, o->nnodes + 1, sizeof *o->nodes))
    return STEPSCOPE_E_NOMEM;
  o->nodes[o->nnodes++] = (ssa_cp_visited){n.index, coll, n.type};
  return 0;
}

/* 1 when the step's walk entered edge e's node before: a node of this rank by its mark, a
 * collective edge's (another rank's) by the trail's records. */
static int taken(const rank_walk *w, const ssa_cp_edge *e) {
  if (e->type == SSA_CPE_COLLECTIVE) {
    const ssa_cp_step_walk *t = w->sw;
    int64_t key = (int64_t)e->from.rank_idx << 32 | e->coll;
    size_t k = ssa_count_below(t->colls, t->ncolls, sizeof *t->colls, key);
    return k < t->ncolls && t->colls[k] == key;
  }
  return w->marks[slot(w, e->from.type, e->from.index)] == w->now;
}

/* A node of the walk's rank: its aligned start (ssa_cp_node_start, read here from the rank's
 * events: the walk asks once per node it enters, and a call into cp_graph.c each time cost
 * more than the read). */
static int64_t own_start(const rank_walk *w, ssa_cp_node n) {
  const ssa_rank *r = w->r;
  return (n.type == SSA_CPN_OP ? r->ops[n.index].start : r->apis[n.index].start) + r->offset_ns;
}

/* The node's piece: *x (its kind, where its name is) and *name. */
static int node_piece(rank_walk *w, ssa_cp_node n, piece_what *x, uint32_t *name) {
  const ssa_rank *r = w->r;
  uint32_t string;
  *name = 0;
  if (n.type == SSA_CPN_API) {
    *x = what_of(SSA_CP_HOST, 0, 1, SSA_CP_NAME_SUMMARY);
    string = r->apis[n.index].name;
  } else {
    const ssa_op *o = &r->ops[n.index];
    unsigned kind = o->cls == SSA_CLS_COMPUTE ? SSA_CP_COMPUTE
                    : o->cls == SSA_CLS_COMM  ? SSA_CP_COMM
                                              : SSA_CP_COPY;
    string = o->name;
    if (!*ssa_rank_str(r, string)) {
      *x = what_of(kind, 0, 0, o->kind == SSA_OP_MEMSET ? SSA_CP_NAME_MEMSET : SSA_CP_NAME_MEMCPY);
      return 0;
    }
    *x = what_of(kind, 0, 0, SSA_CP_NAME_SUMMARY);
  }
  ssa_cp_names *nm = w->names;
  if (string < nm->nstrings && nm->by_string[string]) {
    *name = nm->by_string[string];
    return 0;
  }
  const char *s = ssa_rank_str(r, string);
  size_t len = strlen(s);
  *name = ssa_strtab_intern(nm->summary, s, len);
  if (string < nm->nstrings) nm->by_string[string] = *name;
  return len && !*name ? STEPSCOPE_E_NOMEM : 0;
}

/* The piece of a gap before a node: idle with the edge's cause, or untraced host time when
 * the node runs on a host thread (a call, or an op of a host timeline). */
static piece_what gap_piece(const rank_walk *w, ssa_cp_node n, int edge) {
  const ssa_rank *r = w->r;
  if (n.type == SSA_CPN_API || r->host_timeline)
    return what_of(SSA_CP_HOST, 1, 0, SSA_CP_NAME_UNTRACED);
  /* a stream gap is the device's own delay only when the op's launch is known (it was
   * released earlier): without it the trace does not show what the op waited for */
  if (edge == SSA_CPE_LANE && r->ops[n.index].launch == SSA_NONE) edge = SSA_CPE_N;
  return what_of(SSA_CP_IDLE,
                 edge == SSA_CPE_LAUNCH ? SSA_CP_IDLE_LAUNCH
                 : edge == SSA_CPE_WAIT ? SSA_CP_IDLE_SYNC
                 : edge == SSA_CPE_LANE ? SSA_CP_IDLE_STREAM
                                        : SSA_CP_IDLE_UNEXPLAINED,
                 0, SSA_CP_NAME_NONE);
}

/* The step's start on its end rank: the node that ends last by the window's end hi, and the
 * untraced host time after it (the host had not begun the next step); *n, *t: where the walk
 * goes on, *done when nothing on the rank ends inside the window (then idle). */
static int start_node(rank_walk *w, ssa_cp_node *n, int64_t *t, int *done) {
  const ssa_cp_question *q = w->q;
  int64_t lo = q->lo, hi = q->t;
  *done = 0;
  if (ssa_cp_last_before(w->g, q->rank_idx, hi, n) != 0 || ssa_cp_node_end(w->g, *n) <= lo) {
    *done = 1;
    return put_piece(w, lo, hi, what_of(SSA_CP_IDLE, SSA_CP_IDLE_UNEXPLAINED, 0, SSA_CP_NAME_NONE),
                     0, SSA_CPE_N);
  }
  *t = ssa_cp_node_end(w->g, *n);
  if (*t < hi)
    SC_TRY(put_piece(w, *t, hi, what_of(SSA_CP_HOST, 1, 0, SSA_CP_NAME_UNTRACED), 0, SSA_CPE_N));
  return enter(w, *n);
}

/* The walk from node n (entered) at time t down to lo, or to a collective edge's jump. The
 * node is held as its index and type (its rank is the question's): built from the edge as a
 * struct, it went through the stack, and the call's argument, read back as a word across two
 * fields just stored, stalled every node (a failed store forwarding, half the walk's time). */
static int walk_on(rank_walk *w, ssa_cp_node n, int64_t t) {
  const ssa_cp_graph *g = w->g;
  ssa_cp_question *q = w->q;
  int64_t lo = q->lo;
  const uint32_t rank_idx = n.rank_idx;
  uint32_t index = n.index, type = n.type;
  while (t > lo) {
    ssa_cp_edge e[SSA_CP_MAX_PREDS];
    n = (ssa_cp_node){rank_idx, index, type};
    size_t np = ssa_cp_preds(g, n, e);
    int best = -1;
    for (size_t i = 0; i < np; i++) {
      if (taken(w, &e[i])) continue;
      if (e[i].release > t) {
        q->clipped++;
        e[i].release = t;
      }
      if (best < 0 || e[i].release > e[best].release) best = (int)i;
    }
    int64_t start = own_start(w, n);
    int64_t r = best >= 0 ? e[best].release : lo;
    if (r < lo) r = lo;
    int64_t from = start > r ? start : r;
    if (from > t) from = t;
    piece_what x;
    uint32_t name;
    SC_TRY(node_piece(w, n, &x, &name));
    SC_TRY(put_piece(w, from, t, x, name, best >= 0 ? e[best].type : SSA_CPE_N));
    if (from > r)
      SC_TRY(put_piece(w, r, from, gap_piece(w, n, best >= 0 ? e[best].type : SSA_CPE_N), 0,
                       SSA_CPE_N));
    t = r;
    if (best < 0) break;
    if (e[best].type == SSA_CPE_COLLECTIVE) { /* to another rank: the asking side goes on */
      q->jump = (ssa_cp_late){e[best].from.rank_idx, e[best].coll, t};
      return 0;
    }
    index = e[best].from.index;
    type = e[best].from.type;
    SC_TRY(enter(w, (ssa_cp_node){rank_idx, index, type}));
  }
  return 0;
}

/* Marks the nodes the step's walk entered on this rank before (its visits before `upto`). */
static void trail_marks(rank_walk *w, size_t upto) {
  const ssa_cp_step_walk *sw = w->sw;
  for (size_t v = 0; v < upto; v++) {
    const ssa_cp_visit *vi = &sw->visits[v];
    if (vi->rank_idx != w->q->rank_idx) continue;
    for (size_t k = vi->node_first; k < vi->node_first + vi->nnodes; k++)
      set_mark(w, sw->nodes[k].type, sw->nodes[k].index);
  }
}

/* The walk ended: nothing will ask about its nodes again. */
static void drop_trail(ssa_cp_step_walk *sw) {
  free(sw->visits);
  free(sw->nodes);
  free(sw->colls);
  sw->visits = NULL, sw->nodes = NULL, sw->colls = NULL;
  sw->nvisits = sw->visits_cap = sw->nnodes = sw->nodes_cap = sw->ncolls = sw->colls_cap = 0;
}

int ssa_cp_answer(const ssa_cp_graph *g, ssa_cp_names *names, ssa_cp_marks *marks,
                  ssa_cp_question *q) {
  ssa_cp_step_walk *sw = q->walk;
  if (++marks->now == 0) { /* every stamp used: none entered again */
    memset(marks->stamp, 0, ssa_cp_rank_slots(g, q->rank_idx));
    marks->now = 1;
  }
  rank_walk w = {.g = g,
                 .r = &g->run->ranks[q->rank_idx],
                 .names = names,
                 .marks = marks->stamp,
                 .now = marks->now,
                 .trail = g->nranks > 1,
                 .q = q,
                 .sw = sw,
                 .first_tally = sw->ntallies};
  q->clipped = 0;
  q->jump = (ssa_cp_late){SSA_NONE, SSA_NONE, INT64_MIN};
  if (ssa_grow((void **)&sw->visits, &sw->visits_cap, sw->nvisits + 1, sizeof *sw->visits))
    return STEPSCOPE_E_NOMEM;
  size_t visit = sw->nvisits++;
  sw->visits[visit] = (ssa_cp_visit){q->rank_idx, sw->nnodes, 0};
  trail_marks(&w, visit);
  ssa_cp_node n;
  int64_t t = q->t;
  int done = 0, rc;
  if (q->coll == SSA_NONE) {
    rc = start_node(&w, &n, &t, &done);
  } else {
    n = (ssa_cp_node){q->rank_idx, w.r->colls[q->coll].op_index, SSA_CPN_OP};
    rc = enter(&w, n);
  }
  if (rc == 0 && !done) rc = walk_on(&w, n, t);
  close_answer(&w);
  sw->visits[visit].nnodes = sw->nnodes - sw->visits[visit].node_first;
  if (q->jump.rank_idx == SSA_NONE) drop_trail(sw);
  return rc;
}
