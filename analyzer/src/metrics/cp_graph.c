/*
 * cp_graph.c — the dependency graph of a run (docs/metrics.md "Critical path"): nodes are
 * every rank's ops (kernels, copies, the CPU backend's and the host timeline's ops) and host
 * calls (launches, enqueues, synchronising calls); a node's predecessors are
 *
 *   lane        the previous node of its stream or host thread (by start), released at its
 *               end;
 *   launch      an op's launching call (joined by correlation), released at the call's end,
 *               or at the op's start when the op started first;
 *   wait        an op whose stream waited for an event: when the wait names the awaited
 *               work (Kineto's Stream Wait Event, ssa_sync.on_corr), the first op of the
 *               stream launched after the wait call (by correlation) waits for the last op
 *               of the event's stream launched before the event's record call; else (our
 *               tracer: a SYNC record of its stream ending between the previous op's end and
 *               its start) the device op of another stream that ended last before the wait
 *               ended; on a rank whose trace records no waits at all (a Kineto trace without
 *               cuda_sync events), the device op of another stream that ended last before the
 *               op started, after the previous op of its stream, at most wait_slack_ns
 *               before (a stream resumes within microseconds of the event it waits for);
 *   sync        a host call that waited for the device: when a host-side wait naming its
 *               work has the call's correlation (Kineto's Event Sync, Stream Sync: the last
 *               op of the awaited stream launched before the record or sync call; Context
 *               Sync: as a "Synchronize" call), that op; else a call whose name holds
 *               "Synchronize", or one after a host-side SYNC record ending in the gap before
 *               it: the device op that ended last before the wait ended; either when it
 *               ended after the call (the wait) began; on a
 *               host timeline (CPU-only Kineto trace, one lane per thread), an op after a
 *               gap in which a communication op of another thread ended: the one that ended
 *               last (the training thread waits for the collective gloo's thread runs);
 *   collective  a member of a collective or p2p instance (same communicator and sequence on
 *               every rank, coll_members.c) that arrived before another member: the member
 *               that arrived last (its op's start), when that arrival is before this member's
 *               end (a later one would be a mismatch or clock error, and is no edge).
 *
 * The graph is not materialised: per rank it keeps the previous node of each node's lane,
 * the ops and calls in order of end (radix sort) for "what ended last before t", and per
 * collective record the last other arrival, so memory is a few words per event and the
 * predecessors of a node cost O(log n). A file of its own so that a replay can re-simulate
 * over the same nodes and edges.
 */
#include <stdlib.h>
#include <string.h>

#include "critical_path.h"

const char *const ssa_cpe_names[SSA_CPE_N] = {"lane", "launch", "wait", "sync", "collective"};

typedef struct ssa_cp_rank {
  const ssa_rank *r;
  int64_t off;
  /* previous node of the same lane (SSA_NONE), and the indices in order of end; both NULL
   * when one lane holds every item in order of end (a single host thread's calls): then the
   * previous is i - 1 and the order is the index order (one_lane_in_order) */
  uint32_t *op_prev, *api_prev;
  uint32_t *op_by_end, *api_by_end;
  ssa_cp_late *late; /* per collective record: the last other arrival (kept by
                        ssa_cp_rank_index_free: it comes from every rank, not from this one) */
  size_t nlate;
  int built;         /* the indices below and above late are made (ssa_cp_rank_index) */
  size_t host_syncs; /* syncs[host_syncs..] are host-side (lane SSA_NONE) */
  /* waits that name their work (ssa_sync.on_corr), NULL when the rank has none: */
  uint32_t *op_wait;         /* per op: the op its stream waited for, SSA_NONE */
  uint32_t *sync_op;         /* per sync: the op it awaited, SSA_NONE (every lane, or none) */
  ssa_key_index *host_named; /* the host-side ones by correlation (key), index into syncs */
  size_t nhost_named;
  /* per string id of the rank, whether a call of that name synchronises (its name holds
   * "Synchronize"): 0 not looked at yet, 1 no, 2 yes; so the test costs one strstr per
   * distinct name, not one per call the walk enters */
  uint8_t *synchronizes;
  size_t op_end_near; /* where the last search of op_by_end landed (count_ending_by) */
  int failed;         /* out of memory while building */
} ssa_cp_rank;

/* n elements of `size` (room for one when n is 0, so that NULL means out of memory). */
static void *array_alloc(size_t n, size_t size) {
  return malloc((n ? n : 1) * size);
}

/* 1 when every item is on one lane (below nlanes) and they end in index order: the lane
 * links and the order by end are then the index order and need no arrays. Items start with
 * int64 start, end. */
static int one_lane_in_order(const void *items, size_t n, size_t size, size_t lane_offset,
                             uint32_t nlanes) {
  const char *p = items;
  uint16_t lane0 = 0;
  int64_t last_end = INT64_MIN;
  for (size_t i = 0; i < n; i++) {
    uint16_t lane;
    int64_t end;
    memcpy(&lane, p + i * size + lane_offset, sizeof lane);
    memcpy(&end, p + i * size + sizeof(int64_t), sizeof end);
    if (i == 0) lane0 = lane;
    if (lane != lane0 || lane >= nlanes || end < last_end) return 0;
    last_end = end;
  }
  return 1;
}

/* The i-th index in order of end: by_end[i], or i when by_end is NULL (one_lane_in_order). */
static uint32_t by_end_at(const uint32_t *by_end, size_t i) {
  return by_end ? by_end[i] : (uint32_t)i;
}

/* The previous item of item i's lane: prev[i], or i - 1 when prev is NULL. */
static uint32_t prev_at(const uint32_t *prev, uint32_t i) {
  return prev ? prev[i] : i ? i - 1 : SSA_NONE;
}

static int64_t item_end(const void *items, size_t size, uint32_t i) {
  int64_t end;
  memcpy(&end, (const char *)items + (size_t)i * size + sizeof(int64_t), sizeof end);
  return end;
}

/* out: the indices of items in order of (end, index), without scratch, when links_and_order
 * found every lane's items in order of end: the merge of the lanes, written from the back
 * (the lane tail with the greatest end, the later index on a tie, then that lane goes on at
 * its prev). `tail`: each lane's last item, as links_and_order left `last`. Looks at every
 * non-empty lane per item, so only for a few lanes: 1 when done, 0 when there are more than
 * MERGED_LANES_MAX (order_by_end does it then). */
#define MERGED_LANES_MAX 16
static int merge_lanes_by_end(const void *items, size_t n, size_t size, uint32_t nlanes,
                              const uint32_t *tail, const uint32_t *prev, uint32_t *out) {
  uint32_t at[MERGED_LANES_MAX];
  int64_t at_end[MERGED_LANES_MAX];
  size_t k = 0;
  for (uint32_t l = 0; l < nlanes; l++) {
    if (tail[l] == SSA_NONE) continue;
    if (k == MERGED_LANES_MAX) return 0;
    at[k] = tail[l];
    at_end[k++] = item_end(items, size, tail[l]);
  }
  for (size_t o = n; o-- > 0;) {
    size_t best = SIZE_MAX;
    for (size_t j = 0; j < k; j++)
      if (at[j] != SSA_NONE && (best == SIZE_MAX || at_end[j] > at_end[best] ||
                                (at_end[j] == at_end[best] && at[j] > at[best])))
        best = j;
    out[o] = at[best];
    at[best] = prev[at[best]];
    if (at[best] != SSA_NONE) at_end[best] = item_end(items, size, at[best]);
  }
  return 1;
}

/* Item i, which ends at `end`, put into out[0..i] (the items before it in order of (end,
 * index)) at its place: back past those that end later. *budget: how many more moves back
 * the caller allows; 0 when it ran out (out is then no order). */
static int insert_by_end(const void *items, size_t size, uint32_t *out, size_t i, int64_t end,
                         size_t *budget) {
  size_t j = i;
  while (j > 0 && item_end(items, size, out[j - 1]) > end) {
    if ((*budget)-- == 0) return 0;
    out[j] = out[j - 1];
    j--;
  }
  out[j] = (uint32_t)i;
  return 1;
}

/* prev[i]: the previous item of item i's lane (SSA_NONE: none, or no lane), `last` scratch of
 * nlanes entries, left holding each lane's last item; and by_end: the items in order of (end,
 * index), made in the same pass by insertion (insert_by_end) when it can, else by merging the
 * lanes when each lane's items end in index order (a stream or a thread runs one at a time):
 * 1, or 0 when neither can (order_by_end sorts then). Items start with int64 start, end.
 * Insertion first: items in start order are nearly in end order (an op ends after the few
 * that overlap it started), so it costs a comparison per item where the merge chose a lane per
 * item (a data-dependent branch) in a second pass over the items; it gives up after moving
 * items back twice their number in all (many long overlapping items). */
static int links_and_order(const void *items, size_t n, size_t size, size_t lane_offset,
                           uint32_t nlanes, uint32_t *last, uint32_t *prev, uint32_t *by_end) {
  for (uint32_t l = 0; l < nlanes; l++)
    last[l] = SSA_NONE;
  const char *p = items;
  int lanes_end_ordered = 1, inserted = 1;
  size_t budget = 2 * n + 64;
  for (size_t i = 0; i < n; i++) {
    uint16_t lane;
    int64_t end;
    memcpy(&lane, p + i * size + lane_offset, sizeof lane);
    memcpy(&end, p + i * size + sizeof(int64_t), sizeof end);
    if (inserted) inserted = insert_by_end(items, size, by_end, i, end, &budget);
    prev[i] = lane < nlanes ? last[lane] : SSA_NONE;
    if (lane >= nlanes) {
      lanes_end_ordered = 0;
      continue;
    }
    if (last[lane] != SSA_NONE && item_end(items, size, last[lane]) > end) lanes_end_ordered = 0;
    last[lane] = (uint32_t)i;
  }
  return inserted ||
         (lanes_end_ordered && merge_lanes_by_end(items, n, size, nlanes, last, prev, by_end));
}

/* out: the indices of items (each starting with int64 start, end) in order of end; `keys`
 * is scratch of n entries. */
static void order_by_end(const void *items, size_t n, size_t size, ssa_key_index *keys,
                         uint32_t *out) {
  const char *p = items;
  for (size_t i = 0; i < n; i++) {
    int64_t end;
    memcpy(&end, p + i * size + sizeof(int64_t), sizeof end);
    keys[i] = (ssa_key_index){end, i};
  }
  ssa_sort_by_start(keys, n, sizeof *keys, ssa_cmp_key_index);
  for (size_t i = 0; i < n; i++)
    out[i] = (uint32_t)keys[i].index;
}

int ssa_cp_graph_collectives(ssa_cp_graph *g, const ssa_coll_member *m, const int64_t *arrival,
                             size_t n, const size_t *ncolls) {
  for (size_t i = 0; i < g->nranks; i++) {
    ssa_cp_rank *cr = &g->ranks[i];
    free(cr->late);
    cr->nlate = ncolls[i];
    cr->late = array_alloc(ncolls[i], sizeof *cr->late);
    if (!cr->late) return STEPSCOPE_E_NOMEM;
    for (size_t c = 0; c < ncolls[i]; c++)
      cr->late[c] = (ssa_cp_late){SSA_NONE, SSA_NONE, INT64_MIN};
  }
  for (size_t b = 0; b < n;) {
    size_t e = b + 1;
    while (e < n && m[e].comm_id == m[b].comm_id && m[e].seq == m[b].seq)
      e++;
    /* the two latest arrivals, so each member's "other" is known */
    size_t first = SIZE_MAX, second = SIZE_MAX;
    int64_t t1 = INT64_MIN, t2 = INT64_MIN;
    for (size_t x = b; x < e; x++) {
      if (arrival[x] == INT64_MIN) continue; /* no node to go to */
      int64_t at = arrival[x];
      if (at > t1) {
        second = first, t2 = t1;
        first = x, t1 = at;
      } else if (at > t2) {
        second = x, t2 = at;
      }
    }
    for (size_t x = b; x < e && e - b > 1; x++) {
      size_t late = x == first ? second : first;
      if (late == SIZE_MAX || m[late].rank_idx == m[x].rank_idx) continue;
      g->ranks[m[x].rank_idx].late[m[x].coll_idx] =
          (ssa_cp_late){m[late].rank_idx, m[late].coll_idx, x == first ? t2 : t1};
    }
    b = e;
  }
  return 0;
}

/* In ops[lane_ops[lo..hi)] (one lane's, in start order, so in launch order): the first
 * whose correlation is above c (after: 1), or the last below it (after: 0); SSA_NONE if none. */
static uint32_t lane_op_by_corr(const ssa_rank *r, const uint32_t *lane_ops, size_t lo, size_t hi,
                                uint64_t c, int after) {
  size_t a = lo, b = hi; /* first with corr > c (after) or >= c (before) */
  while (a < b) {
    size_t mid = a + (b - a) / 2;
    uint64_t m = r->ops[lane_ops[mid]].corr;
    if (after ? m <= c : m < c)
      a = mid + 1;
    else
      b = mid;
  }
  if (after) return a < hi ? lane_ops[a] : SSA_NONE;
  return a > lo ? lane_ops[a - 1] : SSA_NONE;
}

/* The device lane of a stream id, SSA_NONE if none. */
static uint32_t stream_lane(const ssa_rank *r, uint64_t stream) {
  for (uint32_t l = 0; stream && l < r->nlanes; l++)
    if (r->lanes[l].id == stream && r->lanes[l].kind != SSA_LANE_HOST) return l;
  return SSA_NONE;
}

/* The edges of the waits that name their work (on_corr): op_wait, sync_op, host_named. Leaves
 * them NULL when there are none; 0 or -1 (out of memory). */
static int build_named_waits(ssa_cp_rank *cr) {
  const ssa_rank *r = cr->r;
  size_t named = 0;
  for (size_t i = 0; i < r->nsyncs; i++)
    named += r->syncs[i].on_corr != 0;
  if (!named) return 0;
  uint32_t *lane_first = calloc((size_t)r->nlanes + 1, sizeof *lane_first);
  uint32_t *lane_ops = array_alloc(r->nops, sizeof *lane_ops);
  cr->op_wait = array_alloc(r->nops, sizeof *cr->op_wait);
  cr->sync_op = array_alloc(r->nsyncs, sizeof *cr->sync_op);
  cr->host_named = array_alloc(named, sizeof *cr->host_named);
  int rc = lane_first && lane_ops && cr->op_wait && cr->sync_op && cr->host_named ? 0 : -1;
  if (rc == 0) {
    /* the ops by lane, each lane's in index (start) order: a counting sort */
    for (size_t i = 0; i < r->nops; i++)
      if (r->ops[i].lane < r->nlanes) lane_first[r->ops[i].lane + 1]++;
    for (uint32_t l = 0; l < r->nlanes; l++)
      lane_first[l + 1] += lane_first[l];
    for (size_t i = 0; i < r->nops; i++) {
      cr->op_wait[i] = SSA_NONE;
      if (r->ops[i].lane < r->nlanes) lane_ops[lane_first[r->ops[i].lane]++] = (uint32_t)i;
    }
    for (uint32_t l = r->nlanes; l > 0; l--) /* back to each lane's first */
      lane_first[l] = lane_first[l - 1];
    lane_first[0] = 0;
    for (size_t i = 0; i < r->nsyncs; i++) {
      const ssa_sync *s = &r->syncs[i];
      cr->sync_op[i] = SSA_NONE;
      if (!s->on_corr) continue;
      uint32_t on = stream_lane(r, s->on_stream);
      if (on != SSA_NONE)
        cr->sync_op[i] =
            lane_op_by_corr(r, lane_ops, lane_first[on], lane_first[on + 1], s->on_corr, 0);
      if (s->lane == SSA_NONE) {
        cr->host_named[cr->nhost_named++] = (ssa_key_index){(int64_t)s->corr, i};
        continue;
      }
      uint32_t gated =
          lane_op_by_corr(r, lane_ops, lane_first[s->lane], lane_first[s->lane + 1], s->corr, 1);
      uint32_t w = cr->sync_op[i], *have = gated != SSA_NONE ? &cr->op_wait[gated] : NULL;
      if (have && w != SSA_NONE && on != s->lane &&
          (*have == SSA_NONE || r->ops[w].end > r->ops[*have].end))
        *have = w; /* of several waits before one op, the one released last */
    }
    ssa_sort_by_start(cr->host_named, cr->nhost_named, sizeof *cr->host_named, ssa_cmp_key_index);
  }
  free(lane_first);
  free(lane_ops);
  return rc;
}

/* Frees one rank's indices (not its collective edges). */
static void free_rank_index(ssa_cp_rank *cr) {
  free(cr->op_prev);
  free(cr->api_prev);
  free(cr->op_by_end);
  free(cr->api_by_end);
  free(cr->op_wait);
  free(cr->sync_op);
  free(cr->host_named);
  free(cr->synchronizes);
  ssa_cp_late *late = cr->late;
  size_t nlate = cr->nlate;
  memset(cr, 0, sizeof *cr);
  cr->late = late, cr->nlate = nlate;
}

/* One rank's indices, from its events; a failure leaves `failed` set. */
static void build_rank_index(ssa_cp_rank *cr, const ssa_rank *r) {
  cr->r = r;
  cr->off = r->offset_ns;
  cr->built = 1;
  uint32_t *last = array_alloc(r->nlanes, sizeof *last);
  cr->synchronizes = calloc(r->strings.count ? r->strings.count : 1, 1);
  int ops_in_order =
      one_lane_in_order(r->ops, r->nops, sizeof *r->ops, offsetof(ssa_op, lane), r->nlanes);
  int apis_in_order =
      one_lane_in_order(r->apis, r->napis, sizeof *r->apis, offsetof(ssa_api, lane), r->nlanes);
  if (!ops_in_order) {
    cr->op_prev = array_alloc(r->nops, sizeof *cr->op_prev);
    cr->op_by_end = array_alloc(r->nops, sizeof *cr->op_by_end);
  }
  if (!apis_in_order) {
    cr->api_prev = array_alloc(r->napis, sizeof *cr->api_prev);
    cr->api_by_end = array_alloc(r->napis, sizeof *cr->api_by_end);
  }
  cr->failed = !last || !cr->synchronizes || (!ops_in_order && (!cr->op_prev || !cr->op_by_end)) ||
               (!apis_in_order && (!cr->api_prev || !cr->api_by_end));
  /* the orders by end by merging the lanes when they allow it: no 16-byte keys per item to
   * fault in and sort */
  int ops_merged = ops_in_order, apis_merged = apis_in_order;
  if (!cr->failed && !ops_in_order)
    ops_merged = links_and_order(r->ops, r->nops, sizeof *r->ops, offsetof(ssa_op, lane), r->nlanes,
                                 last, cr->op_prev, cr->op_by_end);
  if (!cr->failed && !apis_in_order)
    apis_merged = links_and_order(r->apis, r->napis, sizeof *r->apis, offsetof(ssa_api, lane),
                                  r->nlanes, last, cr->api_prev, cr->api_by_end);
  if (!cr->failed && (!ops_merged || !apis_merged)) {
    size_t op_keys = ops_merged ? 0 : r->nops, api_keys = apis_merged ? 0 : r->napis;
    size_t most = op_keys > api_keys ? op_keys : api_keys;
    ssa_key_index *keys = array_alloc(most, sizeof *keys);
    if (!keys) cr->failed = 1;
    if (keys && !ops_merged) order_by_end(r->ops, r->nops, sizeof *r->ops, keys, cr->op_by_end);
    if (keys && !apis_merged)
      order_by_end(r->apis, r->napis, sizeof *r->apis, keys, cr->api_by_end);
    free(keys);
  }
  free(last);
  if (cr->failed) return;
  /* syncs are sorted by (lane, start): the host-side ones (lane SSA_NONE) come last */
  cr->host_syncs = r->nsyncs;
  while (cr->host_syncs > 0 && r->syncs[cr->host_syncs - 1].lane == SSA_NONE)
    cr->host_syncs--;
  if (build_named_waits(cr)) cr->failed = 1;
}

/* One rank's indices (a job of ssa_parallel_for). */
static void build_rank(void *ctx, size_t i) {
  ssa_cp_graph *g = ctx;
  build_rank_index(&g->ranks[i], &g->run->ranks[i]);
}

int ssa_cp_graph_init(ssa_cp_graph *g, const ssa_run *run) {
  memset(g, 0, sizeof *g);
  g->run = run;
  g->nranks = run->nranks;
  g->ranks = calloc(run->nranks ? run->nranks : 1, sizeof *g->ranks);
  return g->ranks ? 0 : STEPSCOPE_E_NOMEM;
}

int ssa_cp_rank_index(ssa_cp_graph *g, uint32_t rank_idx) {
  ssa_cp_rank *cr = &g->ranks[rank_idx];
  if (cr->built) return 0;
  build_rank_index(cr, &g->run->ranks[rank_idx]);
  if (!cr->failed) return 0;
  free_rank_index(cr);
  return STEPSCOPE_E_NOMEM;
}

void ssa_cp_rank_index_free(ssa_cp_graph *g, uint32_t rank_idx) {
  free_rank_index(&g->ranks[rank_idx]);
}

int ssa_cp_graph_build(ssa_cp_graph *g, const ssa_run *run, const ssa_coll_member *members,
                       size_t nmembers, int threads) {
  if (ssa_cp_graph_init(g, run)) return STEPSCOPE_E_NOMEM;
  int64_t *arrival = array_alloc(nmembers, sizeof *arrival);
  size_t *ncolls = array_alloc(run->nranks, sizeof *ncolls);
  int rc = arrival && ncolls ? 0 : STEPSCOPE_E_NOMEM;
  for (size_t x = 0; rc == 0 && x < nmembers; x++) {
    const ssa_rank *r = &run->ranks[members[x].rank_idx];
    uint32_t op = r->colls[members[x].coll_idx].op_index;
    arrival[x] = op != SSA_NONE ? r->ops[op].start + r->offset_ns : INT64_MIN;
  }
  for (size_t i = 0; rc == 0 && i < run->nranks; i++)
    ncolls[i] = run->ranks[i].ncolls;
  if (rc == 0) rc = ssa_cp_graph_collectives(g, members, arrival, nmembers, ncolls);
  free(arrival);
  free(ncolls);
  if (rc == 0) ssa_parallel_for(run->nranks, ssa_workers(run->nranks, threads), build_rank, g);
  for (size_t i = 0; rc == 0 && i < run->nranks; i++)
    if (g->ranks[i].failed) rc = STEPSCOPE_E_NOMEM;
  if (rc) ssa_cp_graph_free(g);
  return rc;
}

void ssa_cp_graph_free(ssa_cp_graph *g) {
  for (size_t i = 0; g->ranks && i < g->nranks; i++) {
    free_rank_index(&g->ranks[i]);
    free(g->ranks[i].late);
  }
  free(g->ranks);
  memset(g, 0, sizeof *g);
}

int64_t ssa_cp_node_start(const ssa_cp_graph *g, ssa_cp_node n) {
  const ssa_cp_rank *cr = &g->ranks[n.rank_idx];
  return (n.type == SSA_CPN_OP ? cr->r->ops[n.index].start : cr->r->apis[n.index].start) + cr->off;
}

/* A node's end in trace time (the lane edge reads two per node the walk enters: inlined). */
static inline int64_t node_end_trace(const ssa_rank *r, uint32_t type, uint32_t index) {
  return type == SSA_CPN_OP ? r->ops[index].end : r->apis[index].end;
}

int64_t ssa_cp_node_end(const ssa_cp_graph *g, ssa_cp_node n) {
  const ssa_cp_rank *cr = &g->ranks[n.rank_idx];
  return node_end_trace(cr->r, n.type, n.index) + cr->off;
}

size_t ssa_cp_node_slot(const ssa_cp_graph *g, ssa_cp_node n) {
  return n.type == SSA_CPN_OP ? n.index : g->ranks[n.rank_idx].r->nops + n.index;
}

size_t ssa_cp_rank_slots(const ssa_cp_graph *g, uint32_t rank_idx) {
  return g->ranks[rank_idx].r->nops + g->ranks[rank_idx].r->napis;
}

/* The end of the k-th item in order of end. */
static int64_t end_in_order(const void *items, size_t size, const uint32_t *by_end, size_t k) {
  return item_end(items, size, by_end_at(by_end, k));
}

/* How many of the indexed items end at or before t (trace time). `near` (NULL: none) holds
 * where the rank's last such search landed, and gets this one's: a walk goes back in time a
 * little at a time, so the count is mostly a few places from there, and galloping out from it
 * probes a few nearby (cached) items where a binary search over the whole order would miss
 * the cache at each of its ~log2(n) probes through the index into the items (the one-rank
 * path searches once per op it enters). The count is the same from any start. */
static size_t count_ending_by(const void *items, size_t size, const uint32_t *by_end, size_t n,
                              int64_t t, size_t *near) {
  size_t lo = 0, hi = n; /* the count is in [lo, hi] */
  if (near && *near <= n) {
    size_t h = *near, step = 1;
    if (h < n && end_in_order(items, size, by_end, h) <= t) {
      lo = h + 1;
      while (h + step < n && end_in_order(items, size, by_end, h + step) <= t) {
        lo = h + step + 1;
        step *= 2;
      }
      if (h + step < n) hi = h + step;
    } else {
      hi = h;
      while (step <= h && end_in_order(items, size, by_end, h - step) > t) {
        hi = h - step;
        step *= 2;
      }
      if (step <= h) lo = h - step + 1;
    }
  }
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (end_in_order(items, size, by_end, mid) <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (near) *near = lo;
  return lo;
}

static int device_lane(const ssa_rank *r, uint32_t lane) {
  return lane < r->nlanes && r->lanes[lane].kind != SSA_LANE_HOST;
}

/* The op (not of lane `skip`, with a non-empty duration; a communication op when `comm`, else
 * an op of a device lane) that ended last at or before t (trace time); SSA_NONE if none among
 * the last few hundred ends, or none that ends after `floor` (what a caller would refuse: the
 * scan stops there). */
static uint32_t op_ended_by(ssa_cp_rank *cr, int64_t t, int64_t floor, uint32_t skip, int comm) {
  const ssa_rank *r = cr->r;
  size_t k = count_ending_by(r->ops, sizeof *r->ops, cr->op_by_end, r->nops, t, &cr->op_end_near);
  for (size_t scanned = 0; k > 0 && scanned < 256; scanned++) {
    uint32_t i = by_end_at(cr->op_by_end, --k);
    const ssa_op *o = &r->ops[i];
    if (o->end <= floor) break;
    if (o->lane != skip && o->end > o->start &&
        (comm ? o->cls == SSA_CLS_COMM : device_lane(r, o->lane)))
      return i;
  }
  return SSA_NONE;
}

/* The device op (not of lane `skip`) that ended last at or before t and after `floor`. */
static uint32_t device_op_ended_by(ssa_cp_rank *cr, int64_t t, uint32_t skip, int64_t floor) {
  return op_ended_by(cr, t, floor, skip, 0);
}

/* A host timeline's communication op of another thread (lane) than `lane` that ended last
 * in (a, b] (trace time): what a thread resuming at b may have waited for (a collective run
 * by gloo's thread, awaited by the training thread). */
static uint32_t comm_ended_in(ssa_cp_rank *cr, uint32_t lane, int64_t a, int64_t b) {
  return op_ended_by(cr, b, a, lane, 1);
}

/* The sync record among syncs[lo, hi) (sorted by start, one lane) that ends last in (a, b]. */
static const ssa_sync *sync_ending_in(const ssa_rank *r, size_t lo, size_t hi, int64_t a,
                                      int64_t b) {
  size_t k = lo + ssa_count_below(r->syncs + lo, hi - lo, sizeof *r->syncs, b);
  const ssa_sync *best = NULL;
  for (size_t scanned = 0; k > lo && scanned < 16; scanned++) {
    const ssa_sync *s = &r->syncs[--k];
    if (s->end > a && s->end <= b && (!best || s->end > best->end)) best = s;
  }
  return best;
}

/* The syncs of one device lane: [*lo, *hi). */
static void lane_syncs(const ssa_cp_rank *cr, uint32_t lane, size_t *lo, size_t *hi) {
  const ssa_rank *r = cr->r;
  size_t a = 0, b = cr->host_syncs;
  while (a < b) {
    size_t mid = a + (b - a) / 2;
    if (r->syncs[mid].lane < lane)
      a = mid + 1;
    else
      b = mid;
  }
  *lo = a;
  b = a;
  while (b < cr->host_syncs && r->syncs[b].lane == lane)
    b++;
  *hi = b;
}

static size_t add_edge(ssa_cp_edge *out, size_t n, ssa_cp_node from, uint32_t coll, int64_t release,
                       uint8_t edge) {
  out[n] = (ssa_cp_edge){from, release, edge, coll};
  return n + 1;
}

/* An edge from op i of n's rank. */
static size_t add_op_edge(ssa_cp_edge *out, size_t n, ssa_cp_node to, uint32_t i, int64_t release,
                          uint8_t edge) {
  return add_edge(out, n, (ssa_cp_node){to.rank_idx, i, SSA_CPN_OP}, SSA_NONE, release, edge);
}

/* The lane edge from p, the previous node of n's lane (SSA_NONE: none), released at its end
 * (at most n's own end: nested host calls); *prev_end gets that end in trace time (INT64_MIN
 * without p). Returns the edges written (0 or 1). */
static size_t lane_edge(const ssa_cp_graph *g, ssa_cp_node n, uint32_t p, ssa_cp_edge *out,
                        int64_t *prev_end) {
  *prev_end = INT64_MIN;
  if (p == SSA_NONE) return 0;
  const ssa_cp_rank *cr = &g->ranks[n.rank_idx];
  int64_t end = node_end_trace(cr->r, n.type, p), own = node_end_trace(cr->r, n.type, n.index);
  *prev_end = end;
  out[0] = (ssa_cp_edge){(ssa_cp_node){n.rank_idx, p, n.type}, (end < own ? end : own) + cr->off,
                         SSA_CPE_LANE, SSA_NONE};
  return 1;
}

/* An op's edges after its lane edge (out[0, k)); prev_end as lane_edge gave it. */
static size_t op_preds(const ssa_cp_graph *g, ssa_cp_node n, int64_t prev_end, ssa_cp_edge *out,
                       size_t k) {
  ssa_cp_rank *cr = &g->ranks[n.rank_idx]; /* its search hint moves */
  const ssa_rank *r = cr->r;
  const ssa_op *o = &r->ops[n.index];
  if (o->launch != SSA_NONE) {
    const ssa_api *a = &r->apis[o->launch];
    k = add_edge(out, k, (ssa_cp_node){n.rank_idx, o->launch, SSA_CPN_API}, SSA_NONE,
                 (a->end < o->start ? a->end : o->start) + cr->off, SSA_CPE_LAUNCH);
  }
  if (device_lane(r, o->lane)) {
    uint32_t w = SSA_NONE;
    if (cr->op_wait) { /* the trace names each wait's work */
      w = cr->op_wait[n.index];
    } else if (cr->host_syncs > 0) {
      size_t lo, hi;
      lane_syncs(cr, o->lane, &lo, &hi);
      const ssa_sync *s = hi > lo ? sync_ending_in(r, lo, hi, prev_end, o->start) : NULL;
      w = s ? device_op_ended_by(cr, s->end, o->lane, INT64_MIN) : SSA_NONE;
    } else if (r->nsyncs == 0 && g->wait_slack_ns > 0) {
      /* a trace that records no waits: an op of another stream that ended just before (not
       * by prev_end, not over wait_slack_ns before the op: the scan need not look further) */
      int64_t floor = o->start >= INT64_MIN + g->wait_slack_ns + 1 ? o->start - g->wait_slack_ns - 1
                                                                   : INT64_MIN;
      w = device_op_ended_by(cr, o->start, o->lane, prev_end > floor ? prev_end : floor);
      if (w != SSA_NONE &&
          (r->ops[w].end <= prev_end || o->start - r->ops[w].end > g->wait_slack_ns))
        w = SSA_NONE;
    }
    if (w != SSA_NONE) k = add_op_edge(out, k, n, w, r->ops[w].end + cr->off, SSA_CPE_WAIT);
  }
  if (r->host_timeline) {
    uint32_t c = comm_ended_in(cr, o->lane, prev_end, o->start);
    if (c != SSA_NONE) k = add_op_edge(out, k, n, c, r->ops[c].end + cr->off, SSA_CPE_SYNC);
  }
  if (o->coll != SSA_NONE && o->coll < cr->nlate && cr->late[o->coll].rank_idx != SSA_NONE) {
    const ssa_cp_late *l = &cr->late[o->coll];
    if (l->at > o->start + cr->off && l->at <= o->end + cr->off)
      k = add_edge(out, k, (ssa_cp_node){l->rank_idx, SSA_NONE, SSA_CPN_OP}, l->coll, l->at,
                   SSA_CPE_COLLECTIVE);
  }
  return k;
}

/* The host-side wait naming its work made by the call of correlation `corr`, NULL if none. */
static const ssa_sync *named_host_wait(const ssa_cp_rank *cr, uint64_t corr) {
  if (!cr->nhost_named || !corr) return NULL;
  size_t k =
      ssa_count_below(cr->host_named, cr->nhost_named, sizeof *cr->host_named, (int64_t)corr);
  return k < cr->nhost_named && cr->host_named[k].key == (int64_t)corr
             ? &cr->r->syncs[cr->host_named[k].index]
             : NULL;
}

/* 1 when host call a's name holds "Synchronize" (looked at once per name). */
static int synchronizes(ssa_cp_rank *cr, const ssa_api *a) {
  if (a->name >= cr->r->strings.count)
    return strstr(ssa_rank_str(cr->r, a->name), "Synchronize") != NULL;
  if (!cr->synchronizes[a->name])
    cr->synchronizes[a->name] = strstr(ssa_rank_str(cr->r, a->name), "Synchronize") ? 2 : 1;
  return cr->synchronizes[a->name] == 2;
}

/* A host call's edges after its lane edge, as op_preds. */
static size_t api_preds(const ssa_cp_graph *g, ssa_cp_node n, int64_t prev_end, ssa_cp_edge *out,
                        size_t k) {
  ssa_cp_rank *cr = &g->ranks[n.rank_idx]; /* its search hint and name marks move */
  const ssa_rank *r = cr->r;
  const ssa_api *a = &r->apis[n.index];
  /* a synchronising call returns when the device is done */
  uint32_t w = SSA_NONE;
  const ssa_sync *named = named_host_wait(cr, a->corr);
  if (named) {
    w = named->on_stream ? cr->sync_op[named - r->syncs]
                         : device_op_ended_by(cr, a->end, SSA_NONE, a->start);
    /* a wait that returned before the op ended did not wait for it (cudaEventQuery's "Event
     * Sync": not ready yet) */
    if (w != SSA_NONE && (r->ops[w].end <= a->start || r->ops[w].end > a->end)) w = SSA_NONE;
  } else if (synchronizes(cr, a)) {
    w = device_op_ended_by(cr, a->end, SSA_NONE, a->start);
    if (w != SSA_NONE && r->ops[w].end <= a->start) w = SSA_NONE;
  } else if (cr->host_syncs < r->nsyncs && !cr->op_wait) {
    const ssa_sync *s = sync_ending_in(r, cr->host_syncs, r->nsyncs, prev_end, a->start);
    w = s ? device_op_ended_by(cr, s->end, SSA_NONE, s->start) : SSA_NONE;
    if (w != SSA_NONE && r->ops[w].end <= s->start) w = SSA_NONE;
  }
  if (w != SSA_NONE) k = add_op_edge(out, k, n, w, r->ops[w].end + cr->off, SSA_CPE_SYNC);
  return k;
}

size_t ssa_cp_preds(const ssa_cp_graph *g, ssa_cp_node n, ssa_cp_edge *out) {
  const ssa_cp_rank *cr = &g->ranks[n.rank_idx];
  int64_t prev_end;
  size_t k = lane_edge(g, n, prev_at(n.type == SSA_CPN_OP ? cr->op_prev : cr->api_prev, n.index),
                       out, &prev_end);
  return n.type == SSA_CPN_OP ? op_preds(g, n, prev_end, out, k)
                              : api_preds(g, n, prev_end, out, k);
}

int ssa_cp_last_before(const ssa_cp_graph *g, uint32_t rank_idx, int64_t t, ssa_cp_node *out) {
  const ssa_cp_rank *cr = &g->ranks[rank_idx];
  const ssa_rank *r = cr->r;
  int64_t tt = t - cr->off;
  size_t ko = count_ending_by(r->ops, sizeof *r->ops, cr->op_by_end, r->nops, tt, NULL);
  size_t ka = count_ending_by(r->apis, sizeof *r->apis, cr->api_by_end, r->napis, tt, NULL);
  /* among the ops that end last, the longest (the index order is the start order) */
  uint32_t op = ko ? by_end_at(cr->op_by_end, ko - 1) : SSA_NONE;
  for (size_t k = ko; op != SSA_NONE && k-- > 0;) {
    uint32_t i = by_end_at(cr->op_by_end, k);
    if (r->ops[i].end != r->ops[op].end) break;
    if (i < op) op = i;
  }
  uint32_t api = ka ? by_end_at(cr->api_by_end, ka - 1) : SSA_NONE;
  for (size_t k = ka; api != SSA_NONE && k-- > 0;) {
    uint32_t i = by_end_at(cr->api_by_end, k);
    if (r->apis[i].end != r->apis[api].end) break;
    if (i < api) api = i;
  }
  if (op == SSA_NONE && api == SSA_NONE) return -1;
  if (op != SSA_NONE && (api == SSA_NONE || r->ops[op].end >= r->apis[api].end))
    *out = (ssa_cp_node){rank_idx, op, SSA_CPN_OP};
  else
    *out = (ssa_cp_node){rank_idx, api, SSA_CPN_API};
  return 0;
}
