/*
 * replay.c — `stepscope replay`: every node of the dependency graph (cp_graph.c) simulated
 * again from its predecessors, with the trace's durations and the edits of replay_edits.c
 * (docs/replay.md gives the model):
 *
 *   start  a node starts when the predecessors that released its start have (each at its
 *          simulated time plus the lag the trace shows between the predecessor's event and
 *          the release), plus a gap: on a host thread the trace's own gap (host gaps are
 *          Python and untraced work: kept, or edited; a removed --debug-delay takes the
 *          host-side synchronisation that came with it too); on a device a gap up to the
 *          launch-gap threshold is latency, replaced by the lane's median such gap, a longer
 *          one a wait the trace does not explain, kept;
 *          a node with no predecessor keeps its traced start;
 *   end    start + duration x scale; a node whose end was held by another (a collective
 *          member by the last member's arrival, a synchronising call by the device) ends at
 *          max(start, the latest such release) + the time the trace shows after it
 *          (transfer), x scale. A collective member waits for every member, whichever
 *          arrives last in the replay.
 *
 * Nodes are evaluated in dependency order by an explicit depth-first stack over (node,
 * start|end) tasks; a cycle (ties in time only) takes the traced value and is counted. A
 * step's predicted time is the longest span of its windows, each end moved by the shift
 * (simulated - traced end) of its rank's last node before it, and its predicted critical
 * path is walked back over the bindings the simulation recorded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "sc_try.h"

#define NO_BIND   UINT32_MAX
#define ST_S_BUSY 1u
#define ST_S_DONE 2u
#define ST_E_BUSY 4u
#define ST_E_DONE 8u

/* A dependency of a node's start or end on another node's start or end. */
typedef struct dep {
  ssa_cp_node from;
  int at_end;      /* the source event: the end (1) or the start (0) of `from` */
  int64_t lag;     /* traced release - traced source event */
  int64_t release; /* traced release (aligned) */
  uint8_t type;    /* the edge's SSA_CPE_* */
} dep;

typedef struct sim_rank {
  int64_t *start, *end; /* simulated, aligned, per node slot */
  uint8_t *state;       /* ST_* */
  uint32_t *sbind, *ebind;
  float *scale, *gaps; /* per slot: duration and host-gap factors */
  uint8_t *unwaited;   /* per slot: an overlap edit selected it */
  int64_t *latency;    /* per lane: its median short traced device gap */
  int64_t delay_ns;    /* the largest declared --debug-delay of the rank, 0 none */
  int64_t new_delay_ns;
  int has_delay_edit;
  uint32_t *group; /* per collective record: its instance in `first`/`count`, SSA_NONE */
} sim_rank;

typedef struct sim {
  const ssa_analysis *a;
  ssa_cp_graph g;
  sim_rank *r;
  ssa_coll_member *members;
  size_t nmembers;
  uint32_t *first, *count; /* per instance: its members */
  dep *deps;
  size_t deps_cap;
  ssa_replay *out;
  int64_t short_gap; /* device gaps up to it are latency, longer ones untraced waits */
} sim;

typedef struct task {
  ssa_cp_node n;
  int end;
} task;

static const ssa_rank *rank_of(const sim *s, ssa_cp_node n) {
  return &s->a->run->ranks[n.rank_idx];
}

static int is_host_node(const sim *s, ssa_cp_node n) {
  const ssa_rank *r = rank_of(s, n);
  if (n.type == SSA_CPN_API || r->host_timeline) return 1;
  uint16_t lane = r->ops[n.index].lane;
  return lane < r->nlanes && r->lanes[lane].kind == SSA_LANE_HOST;
}

static int kind_of(const sim *s, ssa_cp_node n) {
  if (n.type == SSA_CPN_API) return SSA_CP_HOST;
  const ssa_op *o = &rank_of(s, n)->ops[n.index];
  return o->cls == SSA_CLS_COMPUTE ? SSA_CP_COMPUTE
         : o->cls == SSA_CLS_COMM  ? SSA_CP_COMM
                                   : SSA_CP_COPY;
}

static int push_dep(sim *s, size_t *k, dep d) {
  if (ssa_grow((void **)&s->deps, &s->deps_cap, *k + 1, sizeof *s->deps)) return -1;
  s->deps[(*k)++] = d;
  return 0;
}

static dep dep_on(const sim *s, ssa_cp_node p, int64_t release, uint8_t type) {
  int64_t pe = ssa_cp_node_end(&s->g, p);
  int at_end = pe <= release;
  int64_t src = at_end ? pe : ssa_cp_node_start(&s->g, p);
  return (dep){p, at_end, release - src, release, type};
}

/* The dependencies of n's start (want_end 0) or end (1) into s->deps; how many, or -1. */
static long deps_of(sim *s, ssa_cp_node n, int want_end) {
  const ssa_cp_graph *g = &s->g;
  int64_t ns = ssa_cp_node_start(g, n), ne = ssa_cp_node_end(g, n);
  ssa_cp_edge e[SSA_CP_MAX_PREDS];
  size_t np = ssa_cp_preds(g, n, e), k = 0;
  for (size_t i = 0; i < np; i++) {
    ssa_cp_node p = e[i].from;
    if (e[i].type == SSA_CPE_COLLECTIVE) continue; /* every member, below */
    if ((e[i].type == SSA_CPE_WAIT || e[i].type == SSA_CPE_SYNC) && p.type == SSA_CPN_OP &&
        s->r[p.rank_idx].unwaited[ssa_cp_node_slot(g, p)])
      continue; /* overlap: nothing waits for it */
    dep d;
    int on_start;
    if (e[i].type == SSA_CPE_LANE && ssa_cp_node_end(g, p) > ns) { /* nested or overlapping */
      d = (dep){p, 0, ns - ssa_cp_node_start(g, p), ns, SSA_CPE_LANE};
      on_start = 1;
    } else {
      d = dep_on(s, p, e[i].release, e[i].type);
      on_start = e[i].release <= ns;
    }
    if (on_start != !want_end) continue;
    if (push_dep(s, &k, d)) return -1;
  }
  const ssa_rank *r = rank_of(s, n);
  if (!want_end || n.type != SSA_CPN_OP) return (long)k;
  const ssa_op *o = &r->ops[n.index];
  uint32_t gi =
      o->coll != SSA_NONE && o->coll < r->ncolls ? s->r[n.rank_idx].group[o->coll] : SSA_NONE;
  if (gi == SSA_NONE) return (long)k;
  int is_send = r->colls[o->coll].op == STEPSCOPE_COLL_SEND;
  for (uint32_t x = s->first[gi]; x < s->first[gi] + s->count[gi]; x++) {
    const ssa_coll_member *m = &s->members[x];
    if (m->rank_idx == n.rank_idx) continue;
    uint32_t op = s->a->run->ranks[m->rank_idx].colls[m->coll_idx].op_index;
    if (op == SSA_NONE) continue;
    ssa_cp_node mn = {m->rank_idx, op, SSA_CPN_OP};
    int64_t at = ssa_cp_node_start(g, mn);
    /* A send whose receive started only after the send had ended did not wait for it: the
     * data went into a buffer (an eager send: NCCL's FIFO for small messages, the CPU
     * backend's queue). Holding the send's end on that receive would be a dependency the
     * trace contradicts, and a cycle in an exchange where the receive followed the
     * receiver's own send, which was held by this rank's receive, which followed this send
     * (context parallelism's ring on a loaded machine). */
    if (is_send && at >= ne) continue;
    /* any other member that seems to arrive after this one left (the ranks' clocks
     * disagree) still releases it, at its traced end */
    int64_t release = at < ne ? at : ne;
    if (push_dep(s, &k, (dep){mn, 0, release - at, release, SSA_CPE_COLLECTIVE})) return -1;
  }
  return (long)k;
}

static size_t slot(const sim *s, ssa_cp_node n) {
  return ssa_cp_node_slot(&s->g, n);
}

/* The simulated time of a dependency's source event (its traced time when it is still being
 * evaluated: a cycle). */
static int64_t source_time(sim *s, const dep *d) {
  const sim_rank *sr = &s->r[d->from.rank_idx];
  size_t i = slot(s, d->from);
  if (sr->state[i] & (d->at_end ? ST_E_DONE : ST_S_DONE))
    return d->at_end ? sr->end[i] : sr->start[i];
  s->out->cycles++;
  return d->at_end ? ssa_cp_node_end(&s->g, d->from) : ssa_cp_node_start(&s->g, d->from);
}

/* A device op's latency: its lane's. */
static int64_t lane_latency(const sim *s, ssa_cp_node n) {
  const ssa_rank *r = rank_of(s, n);
  uint16_t lane = r->ops[n.index].lane;
  return lane < r->nlanes ? s->r[n.rank_idx].latency[lane] : 0;
}

/* The latest release among deps[0, k) in the trace (*traced) and in the replay (returned;
 * *bind the dependency that gives it), leaving out synchronisations when `skip_sync`. */
static int64_t latest_release(sim *s, long k, int skip_sync, int64_t *traced, uint32_t *bind) {
  int64_t simulated = INT64_MIN;
  *traced = INT64_MIN;
  *bind = NO_BIND;
  for (long j = 0; j < k; j++) {
    const dep *d = &s->deps[j];
    if (d->release > *traced) *traced = d->release;
    if (skip_sync && d->type == SSA_CPE_SYNC) continue;
    int64_t at = source_time(s, d) + d->lag;
    if (at > simulated) simulated = at, *bind = (uint32_t)j;
  }
  return simulated;
}

/* A node's start: the latest release plus its gap (the file's comment). */
static int evaluate_start(sim *s, ssa_cp_node n, long k) {
  sim_rank *sr = &s->r[n.rank_idx];
  size_t i = slot(s, n);
  int64_t ns = ssa_cp_node_start(&s->g, n), traced;
  uint32_t bind;
  int64_t simulated = latest_release(s, k, 0, &traced, &bind), start = ns;
  if (k > 0) {
    int64_t gap = ns - traced;
    if (!is_host_node(s, n)) {
      if (gap <= s->short_gap)
        gap = lane_latency(s, n);
      else
        s->out->device_waits += gap; /* a wait the trace does not explain: kept */
    } else {
      if (sr->has_delay_edit && sr->delay_ns > 0 && gap >= sr->delay_ns) {
        /* the trainer's delay: a host-side synchronisation, then the sleep in this gap */
        gap += sr->new_delay_ns - sr->delay_ns;
        s->out->delay_gaps++;
        int64_t unsynced =
            sr->new_delay_ns == 0 ? latest_release(s, k, 1, &traced, &bind) : INT64_MIN;
        if (unsynced != INT64_MIN) simulated = unsynced; /* no delay, no synchronisation */
      }
      gap = (int64_t)((double)gap * sr->gaps[i]);
    }
    start = simulated + gap;
  }
  sr->start[i] = start;
  sr->sbind[i] = bind;
  sr->state[i] = (uint8_t)((sr->state[i] & ~ST_S_BUSY) | ST_S_DONE);
  return 0;
}

/* A node's end: its start + duration x scale, or, when its end was held, the latest release
 * of its end + the traced time after that release, x scale. */
static int evaluate_end(sim *s, ssa_cp_node n, long k) {
  sim_rank *sr = &s->r[n.rank_idx];
  size_t i = slot(s, n);
  int64_t ns = ssa_cp_node_start(&s->g, n), ne = ssa_cp_node_end(&s->g, n), traced;
  uint32_t bind;
  int64_t simulated = latest_release(s, k, 0, &traced, &bind);
  int64_t from = sr->start[i], held = ns;
  if (k > 0 && simulated > from)
    from = simulated;
  else
    bind = NO_BIND;
  if (k > 0 && traced > held) held = traced;
  sr->end[i] = from + (int64_t)((double)(ne - (held < ne ? held : ne)) * sr->scale[i]);
  sr->ebind[i] = bind;
  sr->state[i] = (uint8_t)((sr->state[i] & ~ST_E_BUSY) | ST_E_DONE);
  return 0;
}

/* Evaluates a task whose dependencies are done (or cycles). 0 or -1 (memory). */
static int evaluate(sim *s, task t) {
  long k = deps_of(s, t.n, t.end);
  if (k < 0) return -1;
  return t.end ? evaluate_end(s, t.n, k) : evaluate_start(s, t.n, k);
}

static int push_task(task **stack, size_t *n, size_t *cap, task t) {
  if (ssa_grow((void **)stack, cap, *n + 1, sizeof **stack)) return -1;
  (*stack)[(*n)++] = t;
  return 0;
}

/* Evaluates the end of `root` and everything it depends on. 0 or -1. */
static int simulate_from(sim *s, ssa_cp_node root, task **stack, size_t *cap) {
  size_t sp = 0;
  if (push_task(stack, &sp, cap, (task){root, 1})) return -1;
  while (sp > 0) {
    task t = (*stack)[sp - 1];
    sim_rank *sr = &s->r[t.n.rank_idx];
    size_t i = slot(s, t.n);
    uint8_t done = t.end ? ST_E_DONE : ST_S_DONE, busy = t.end ? ST_E_BUSY : ST_S_BUSY;
    if (sr->state[i] & done) {
      sp--;
      continue;
    }
    sr->state[i] |= busy;
    long k = deps_of(s, t.n, t.end);
    if (k < 0) return -1;
    size_t before = sp;
    if (t.end && !(sr->state[i] & ST_S_DONE) && push_task(stack, &sp, cap, (task){t.n, 0}))
      return -1;
    for (long j = 0; j < k; j++) {
      const dep *d = &s->deps[j];
      uint8_t st = s->r[d->from.rank_idx].state[slot(s, d->from)];
      uint8_t want = d->at_end ? ST_E_DONE | ST_E_BUSY : ST_S_DONE | ST_S_BUSY;
      if (st & want) continue; /* done, or a cycle (evaluate takes the traced time) */
      if (push_task(stack, &sp, cap, (task){d->from, d->at_end})) return -1;
    }
    if (sp == before) {
      if (evaluate(s, t)) return -1;
      sp--;
    }
  }
  return 0;
}

static int64_t median_i64(int64_t *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, ssa_cmp_i64);
  return v[SSA_MEDIAN_INDEX(n)];
}

/* Each device lane's median short device gap (start - latest start release, in [0,
 * short_gap]): the lane's latency (a GPU's launch latency; on the CPU backend, a stream
 * thread's wake-up). The gaps are sorted by lane, then length, as one key. */
static int device_latency(sim *s, uint32_t ri, int64_t short_gap, int64_t *latency) {
  const ssa_rank *r = &s->a->run->ranks[ri];
  ssa_key_index *v = malloc((r->nops + 1) * sizeof *v);
  if (!v) return -1;
  size_t n = 0;
  for (size_t i = 0; i < r->nops; i++) {
    ssa_cp_node nd = {ri, (uint32_t)i, SSA_CPN_OP};
    if (is_host_node(s, nd) || r->ops[i].lane >= r->nlanes) continue;
    long k = deps_of(s, nd, 0);
    if (k < 0) {
      free(v);
      return -1;
    }
    int64_t traced = INT64_MIN;
    for (long j = 0; j < k; j++)
      if (s->deps[j].release > traced) traced = s->deps[j].release;
    if (traced == INT64_MIN) continue; /* no dependency: no gap to measure */
    int64_t gap = ssa_cp_node_start(&s->g, nd) - traced;
    if (gap >= 0 && gap <= short_gap)
      v[n++] = (ssa_key_index){(int64_t)r->ops[i].lane * (short_gap + 1) + gap, r->ops[i].lane};
  }
  ssa_sort_by_start(v, n, sizeof *v, ssa_cmp_key_index);
  for (uint32_t l = 0; l < r->nlanes; l++)
    latency[l] = 0;
  for (size_t b = 0, e; b < n; b = e) {
    for (e = b; e < n && v[e].index == v[b].index;)
      e++;
    latency[v[b].index] = v[b + SSA_MEDIAN_INDEX(e - b)].key % (short_gap + 1);
  }
  free(v);
  return 0;
}

/* The largest --debug-delay the trainer's config declares for trace rank `rank` (ns). */
static int64_t declared_delay(const ssa_rank *r) {
  const char *p = r->config_json ? strstr(r->config_json, "\"debug_delays\":[") : NULL;
  int64_t most = 0;
  while (p && (p = strstr(p, "{\"rank\":")) != NULL) {
    int rank, ms;
    char phase[32];
    if (sscanf(p, "{\"rank\":%d,\"phase\":\"%31[^\"]\",\"ms\":%d}", &rank, phase, &ms) == 3 &&
        rank == r->rank && (int64_t)ms * 1000000 > most)
      most = (int64_t)ms * 1000000;
    p++;
  }
  return most;
}

/* Per rank: arrays, the edits' factors per slot, the delays. */
static int prepare_rank(sim *s, uint32_t ri, const ssa_replay_edit *edits, size_t nedits, char *msg,
                        size_t n) {
  const ssa_rank *r = &s->a->run->ranks[ri];
  sim_rank *sr = &s->r[ri];
  size_t slots = ssa_cp_rank_slots(&s->g, ri) + 1;
  sr->start = malloc(slots * sizeof *sr->start);
  sr->end = malloc(slots * sizeof *sr->end);
  sr->state = calloc(slots, 1);
  sr->sbind = malloc(slots * sizeof *sr->sbind);
  sr->ebind = malloc(slots * sizeof *sr->ebind);
  sr->scale = malloc(slots * sizeof *sr->scale);
  sr->gaps = malloc(slots * sizeof *sr->gaps);
  sr->unwaited = calloc(slots, 1);
  sr->group = malloc((r->ncolls + 1) * sizeof *sr->group);
  sr->latency = malloc((r->nlanes + 1) * sizeof *sr->latency);
  if (!sr->start || !sr->end || !sr->state || !sr->sbind || !sr->ebind || !sr->scale || !sr->gaps ||
      !sr->unwaited || !sr->group || !sr->latency)
    return STEPSCOPE_E_NOMEM;
  for (size_t c = 0; c < r->ncolls; c++)
    sr->group[c] = SSA_NONE;
  sr->delay_ns = declared_delay(r);
  for (size_t i = 0; i + 1 < slots; i++)
    sr->scale[i] = sr->gaps[i] = 1.0f;
  for (size_t e = 0; e < nedits; e++) {
    const ssa_replay_edit *ed = &edits[e];
    ssa_replay_spans spans;
    if (ed->action == SSA_REPLAY_DELAY) continue;
    if (ssa_replay_spans_build(ed, r, &spans)) return STEPSCOPE_E_NOMEM;
    for (size_t i = 0; i + 1 < slots; i++) {
      int is_api = i >= r->nops;
      size_t index = is_api ? i - r->nops : i;
      if (!ssa_replay_edit_selects(ed, r, is_api, index, &spans)) continue;
      (is_api ? s->out->selected_calls : s->out->selected_ops)[e]++;
      if (ed->action == SSA_REPLAY_SCALE) sr->scale[i] *= (float)ed->factor;
      if (ed->action == SSA_REPLAY_GAPS) sr->gaps[i] *= (float)ed->factor;
      if (ed->action == SSA_REPLAY_OVERLAP && !is_api && r->ops[index].cls == SSA_CLS_COMM)
        sr->unwaited[i] = 1;
    }
    ssa_replay_spans_free(&spans);
  }
  for (size_t e = 0; e < nedits; e++) {
    const ssa_replay_edit *ed = &edits[e];
    if (ed->action != SSA_REPLAY_DELAY || (ed->rank >= 0 && ed->rank != r->rank) ||
        (ed->stage >= 0 && ssa_meta_or(r->tmeta.layout.pp_rank, -1) != ed->stage))
      continue;
    if (sr->delay_ns == 0 && ed->rank >= 0) {
      snprintf(msg, n, "rank %d declares no --debug-delay (the trainer's config); use gaps=F",
               r->rank);
      return STEPSCOPE_E_ARGUMENT;
    }
    sr->has_delay_edit = 1;
    sr->new_delay_ns = (int64_t)(ed->factor * 1e6);
  }
  return device_latency(s, ri, s->short_gap, sr->latency) ? STEPSCOPE_E_NOMEM : 0;
}

/* Collective instances: members of one (comm_id, seq) next to each other. */
static int index_instances(sim *s) {
  size_t n = s->nmembers;
  s->first = malloc((n + 1) * sizeof *s->first);
  s->count = malloc((n + 1) * sizeof *s->count);
  if (!s->first || !s->count) return STEPSCOPE_E_NOMEM;
  uint32_t gi = 0;
  for (size_t b = 0; b < n;) {
    size_t e = b + 1;
    while (e < n && s->members[e].comm_id == s->members[b].comm_id &&
           s->members[e].seq == s->members[b].seq)
      e++;
    s->first[gi] = (uint32_t)b;
    s->count[gi] = (uint32_t)(e - b);
    for (size_t x = b; x < e && e - b > 1; x++)
      s->r[s->members[x].rank_idx].group[s->members[x].coll_idx] = gi;
    gi++;
    b = e;
  }
  return 0;
}

/* Simulated time of traced aligned time t on rank ri: t moved by the shift of the rank's
 * last node ending at or before it. */
static int64_t simulated_at(const sim *s, uint32_t ri, int64_t t, ssa_cp_node *last) {
  ssa_cp_node n;
  if (ssa_cp_last_before(&s->g, ri, t, &n) != 0) {
    last->type = UINT8_MAX;
    return t;
  }
  *last = n;
  return t + s->r[ri].end[slot(s, n)] - ssa_cp_node_end(&s->g, n);
}

static void add_piece(int64_t *kind, int k, int64_t lo, int64_t from, int64_t to) {
  if (from < lo) from = lo;
  if (to > from) kind[k] += to - from;
}

/* The replayed critical path of a step, walked back from node n's end to lo. */
static int walk_path(sim *s, ssa_replay_step *st, ssa_cp_node n, int64_t lo) {
  int end = 1;
  int64_t t = s->r[n.rank_idx].end[slot(s, n)];
  for (size_t guard = 0; t > lo && guard < 1u << 26; guard++) {
    const sim_rank *sr = &s->r[n.rank_idx];
    size_t i = slot(s, n);
    uint32_t bind = end ? sr->ebind[i] : sr->sbind[i];
    if (end && bind == NO_BIND) {
      add_piece(st->path_kind, kind_of(s, n), lo, sr->start[i], t);
      t = sr->start[i];
      end = 0;
      continue;
    }
    if (bind == NO_BIND) break;
    long k = deps_of(s, n, end);
    if (k < 0) return -1;
    if ((long)bind >= k) break;
    dep d = s->deps[bind];
    int64_t src = source_time(s, &d), release = src + d.lag;
    if (end) {
      add_piece(st->path_kind, kind_of(s, n), lo, release, t);
    } else {
      int host = is_host_node(s, n);
      add_piece(st->path_kind, host ? SSA_CP_HOST : SSA_CP_IDLE, lo, release, t);
      if (host) add_piece(&st->path_host_gaps, 0, lo, release, t);
    }
    add_piece(st->path_kind, kind_of(s, d.from), lo, src, release);
    if (src >= t && !(src == t && d.at_end != end)) break; /* no progress: a cycle */
    t = src;
    n = d.from;
    end = d.at_end;
  }
  return 0;
}

/* Each step's predicted time: the longest replayed window span; its path. */
static int predict_steps(sim *s) {
  const ssa_analysis *a = s->a;
  ssa_replay *out = s->out;
  for (size_t k = 0; k < a->nsteps; k++) {
    ssa_replay_step *st = &out->steps[k];
    *st = (ssa_replay_step){.step = a->steps[k].step,
                            .in_medians = a->steps[k].in_medians,
                            .measured = a->steps[k].time,
                            .predicted = -1};
    ssa_cp_node best_last = {0, 0, UINT8_MAX};
    int64_t best_lo = 0;
    for (size_t ri = 0; ri < a->nranks; ri++) {
      const ssa_rank_result *rr = &a->ranks[ri];
      int64_t off = a->run->ranks[ri].offset_ns;
      for (size_t w = 0; w < rr->nsteps; w++) {
        if (rr->windows[w].step != st->step) continue;
        ssa_cp_node first, last;
        int64_t lo = simulated_at(s, (uint32_t)ri, rr->windows[w].start + off, &first);
        int64_t hi = simulated_at(s, (uint32_t)ri, rr->windows[w].end + off, &last);
        if (hi - lo > st->predicted) {
          st->predicted = hi - lo;
          st->end_rank_idx = (uint32_t)ri;
          best_last = last;
          best_lo = lo;
        }
      }
    }
    if (best_last.type != UINT8_MAX && walk_path(s, st, best_last, best_lo)) return -1;
  }
  return 0;
}

static double rel_error(const ssa_replay_step *st) {
  if (st->measured <= 0) return 0;
  double d = (double)(st->predicted - st->measured) / (double)st->measured;
  return d < 0 ? -d : d;
}

static int summarise(ssa_replay *out) {
  size_t n = 0;
  for (size_t k = 0; k < out->nsteps; k++)
    n += out->steps[k].in_medians && out->steps[k].predicted >= 0;
  out->steady = n;
  if (n == 0) return 0;
  int64_t *v = malloc(n * sizeof *v);
  if (!v) return STEPSCOPE_E_NOMEM;
  size_t m;
  int64_t err;
#define MEDIAN_OVER_STEADY(expr, dst)                                                              \
  do {                                                                                             \
    m = 0;                                                                                         \
    for (size_t k = 0; k < out->nsteps; k++)                                                       \
      if (out->steps[k].in_medians && out->steps[k].predicted >= 0) v[m++] = (expr);               \
    dst = median_i64(v, m);                                                                        \
  } while (0)
  MEDIAN_OVER_STEADY(out->steps[k].measured, out->median_measured);
  MEDIAN_OVER_STEADY(out->steps[k].predicted, out->median_predicted);
  /* errors in parts per billion, so that the one median serves */
  MEDIAN_OVER_STEADY((int64_t)(rel_error(&out->steps[k]) * 1e9), err);
  out->median_error = (double)err / 1e9;
  for (int c = 0; c < SSA_CP_KIND_N; c++)
    MEDIAN_OVER_STEADY(out->steps[k].path_kind[c], out->median_path_kind[c]);
#undef MEDIAN_OVER_STEADY
  for (size_t k = 0; k < out->nsteps; k++)
    if (out->steps[k].in_medians && out->steps[k].predicted >= 0 &&
        rel_error(&out->steps[k]) > out->worst_error)
      out->worst_error = rel_error(&out->steps[k]);
  free(v);
  return 0;
}

static void free_sim(sim *s) {
  for (size_t i = 0; s->r && i < s->a->nranks; i++) {
    sim_rank *sr = &s->r[i];
    free(sr->start), free(sr->end), free(sr->state), free(sr->sbind), free(sr->ebind);
    free(sr->scale), free(sr->gaps), free(sr->unwaited), free(sr->group), free(sr->latency);
  }
  free(s->r);
  free(s->members), free(s->first), free(s->count), free(s->deps);
  ssa_cp_graph_free(&s->g);
}

static int simulate_all(sim *s) {
  task *stack = NULL;
  size_t cap = 0;
  int rc = 0;
  for (uint32_t ri = 0; ri < s->a->nranks && rc == 0; ri++) {
    const ssa_rank *r = &s->a->run->ranks[ri];
    for (size_t i = 0; i < r->nops + r->napis && rc == 0; i++) {
      ssa_cp_node n = {ri, (uint32_t)(i < r->nops ? i : i - r->nops),
                       (uint8_t)(i < r->nops ? SSA_CPN_OP : SSA_CPN_API)};
      rc = simulate_from(s, n, &stack, &cap) ? STEPSCOPE_E_NOMEM : 0;
      s->out->nodes++;
    }
  }
  free(stack);
  return rc;
}

/* The simulated op times of every rank, taken from the simulation into out. */
static int keep_op_times(sim *s, ssa_replay *out) {
  size_t nr = s->a->nranks;
  out->op_start = calloc(nr ? nr : 1, sizeof *out->op_start);
  out->op_end = calloc(nr ? nr : 1, sizeof *out->op_end);
  if (!out->op_start || !out->op_end) return STEPSCOPE_E_NOMEM;
  out->nranks = nr;
  for (size_t i = 0; i < nr; i++) { /* ops are the first slots */
    out->op_start[i] = s->r[i].start, out->op_end[i] = s->r[i].end;
    s->r[i].start = s->r[i].end = NULL;
  }
  return 0;
}

static int replay_run(const ssa_analysis *a, const ssa_replay_edit *edits, size_t nedits,
                      int keep_ops, ssa_replay *out, char *msg, size_t n) {
  memset(out, 0, sizeof *out);
  out->steps = calloc(a->nsteps ? a->nsteps : 1, sizeof *out->steps);
  out->selected_ops = calloc(nedits + 1, sizeof *out->selected_ops);
  out->selected_calls = calloc(nedits + 1, sizeof *out->selected_calls);
  out->nedits = nedits;
  if (!out->steps || !out->selected_ops || !out->selected_calls) return STEPSCOPE_E_NOMEM;
  out->nsteps = a->nsteps;
  if (a->nsteps == 0) return 0;
  sim s = {.a = a, .out = out, .short_gap = a->launch_gap_ns};
  int rc = ssa_run_coll_members(a->run, &s.members, &s.nmembers);
  if (rc == 0) rc = ssa_cp_graph_build(&s.g, a->run, s.members, s.nmembers, a->opt.threads);
  if (rc) {
    free(s.members);
    return rc;
  }
  s.g.wait_slack_ns = 5 * a->launch_gap_ns; /* as the critical path's (critical_path.c) */
  s.r = calloc(a->nranks ? a->nranks : 1, sizeof *s.r);
  rc = s.r ? 0 : STEPSCOPE_E_NOMEM;
  for (uint32_t ri = 0; ri < a->nranks && rc == 0; ri++)
    rc = prepare_rank(&s, ri, edits, nedits, msg, n);
  if (rc == 0) rc = index_instances(&s);
  if (rc == 0) rc = simulate_all(&s);
  if (rc == 0) rc = predict_steps(&s) ? STEPSCOPE_E_NOMEM : 0;
  if (rc == 0) rc = summarise(out);
  if (rc == 0 && keep_ops) rc = keep_op_times(&s, out);
  free_sim(&s);
  return rc;
}

int ssa_replay_run(const ssa_analysis *a, const ssa_replay_edit *edits, size_t nedits,
                   ssa_replay *out, char *msg, size_t n) {
  return replay_run(a, edits, nedits, 0, out, msg, n);
}

int ssa_replay_run_ops(const ssa_analysis *a, const ssa_replay_edit *edits, size_t nedits,
                       ssa_replay *out, char *msg, size_t n) {
  return replay_run(a, edits, nedits, 1, out, msg, n);
}

void ssa_replay_free(ssa_replay *r) {
  free(r->steps), free(r->selected_ops), free(r->selected_calls);
  for (size_t i = 0; i < r->nranks; i++)
    free(r->op_start[i]), free(r->op_end[i]);
  free(r->op_start), free(r->op_end);
  memset(r, 0, sizeof *r);
}
