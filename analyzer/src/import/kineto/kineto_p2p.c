/*
 * kineto_p2p.c — a recognised pipeline's point-to-point calls on the host
 * matched across ranks (docs/kineto-import.md "Point-to-point matched across
 * ranks"). A CPU-only PyTorch trace (gloo) says that a rank sent or received
 * (`gloo:send` / `gloo:recv`, spanning the transfer from its post to its
 * completion, inside `c10d::send` / `c10d::recv_`), but not to or from whom
 * nor which message, so nothing links a stage's receive to the send it
 * waits for on the upstream rank. Once kineto_pipeline.c has declared the
 * rank's forward and backward ranges, each call gets:
 *
 *   - its peer (places in the pipeline, kineto_pipeline.c: its process group
 *     named as one, else the world; records name global ranks): with two
 *     stages, the other rank; else from the pipeline's order: a send after a forward (the last
 * forward or backward range of its thread that starts by the call) goes to the next rank, after a
 *     backward to the previous one; a receive before a forward (the first
 *     range of its thread that starts from the call) comes from the previous
 *     rank, before a backward from the next one; ranks wrap around only
 *     with several virtual stages per rank (an interleaved schedule's last
 *     stage of a chunk sends to rank 0). A call without such a range is
 *     left unmatched;
 *   - its message: per step (ProfilerStep#N) and ordered pair (src, dst),
 *     the sends of src to dst and the receives of dst from src are numbered
 *     in the order they were posted: gloo delivers a pair's messages of one
 *     tag in order, and torch.distributed.pipelining posts them with one.
 *
 * A call becomes a collective record: communicator (src, dst) of comm_size
 * stages, seq (step N, number), flags point-to-point and pipeline (and
 * SSA_COLL_F_SPANS_WAIT: a gloo range lasts until its work is waited for, so
 * the transfer is the time from the later post to the receive's end), peer
 * the peer rank; the host timeline links the call's op to it (kineto_host.c),
 * so the collective matching, the bubble's transfer part and the critical
 * path's cross-rank edge apply as they do to stepscope's own trainer, whose
 * records name each transfer the same way (communicator per (src, dst),
 * numbered per pair). Only the transport's calls are matched (`gloo:*`,
 * `nccl:*`), or `c10d::*` where the trace has none of that direction: one
 * call per transfer.
 * A rank with point-to-point collective records of its own (NCCL metadata)
 * is left alone.
 */
#include "kineto_p2p.h"

#include <stdlib.h>
#include <string.h>

#include "kineto_import.h"
#include "sc_hash.h"

enum { PASS_NONE = -1, PASS_FORWARD, PASS_BACKWARD };

/* A forward or backward range of the pipeline (tag: its pass), a point-to-point call (tag: its
 * direction, 1 send, 2 receive) or a step (tag: its number). */
typedef ssa_kineto_p2p_call timed;

/* By start, then thread and end: the order in which a rank posted its calls. */
static int cmp_call(const void *pa, const void *pb) {
  const timed *a = pa, *b = pb;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->thread != b->thread) return a->thread < b->thread ? -1 : 1;
  return (a->end > b->end) - (a->end < b->end);
}

/* The pass of the work a call belongs to: for a send the last item (by start) of its thread
 * starting by it, for a receive the first one starting from it; PASS_NONE without one. */
static int pass_of_call(const timed *it, size_t n, const timed *call) {
  enum { LOOK = 64 }; /* items of other threads passed over, at most */
  if (call->tag == 1) {
    size_t k = ssa_count_at_most(it, n, sizeof *it, call->start);
    for (size_t seen = 0; k-- > 0 && seen < LOOK; seen++)
      if (it[k].thread == call->thread) return (int)it[k].tag;
    return PASS_NONE;
  }
  size_t k = ssa_count_below(it, n, sizeof *it, call->start);
  for (size_t seen = 0; k < n && seen < LOOK; k++, seen++)
    if (it[k].thread == call->thread) return (int)it[k].tag;
  return PASS_NONE;
}

/* The peer of a call (direction 1 send, 2 receive) in the pipeline: its place there, -1 when
 * it cannot be told; rank: the caller's place. */
static int peer_of(int rank, int stages, int virtual_stages, int direction, int pass) {
  if (stages == 2) return 1 - rank;
  if (pass == PASS_NONE) return -1;
  /* downstream: a forward's send, a backward's receive */
  int peer = (direction == 1) == (pass == PASS_FORWARD) ? rank + 1 : rank - 1;
  if (peer >= 0 && peer < stages) return peer;
  return virtual_stages > 1 ? (peer + stages) % stages : -1;
}

/* The profiler's steps: start, end and number, by start. */
typedef struct step_list {
  timed *v; /* tag: the step's number */
  size_t n;
} step_list;

static long step_at(const step_list *s, size_t *cursor, int64_t t) {
  while (*cursor < s->n && s->v[*cursor].end <= t)
    (*cursor)++;
  return *cursor < s->n && s->v[*cursor].start <= t ? (long)s->v[*cursor].tag : -1;
}

static uint64_t pair_id(int src, int dst) {
  int pair[2] = {src, dst};
  return sc_fnv1a(sc_fnv1a_str(SC_FNV1A_INIT, "kineto pipeline p2p"), pair, sizeof pair);
}

/* The ranges of `r` sorted into the pipeline's items, the point-to-point calls and the steps. */
static void gather(const ssa_rank *r, uint32_t dom, uint32_t fwd, uint32_t bwd, timed *items,
                   size_t *nitems, timed *calls, size_t *ncalls, step_list *steps) {
  /* per direction (1 send, 2 receive): the transport's own calls (gloo:*, nccl:*) are in the
   * trace, so its c10d:: calls are not matched too */
  int transport[3] = {0, 0, 0};
  for (size_t i = 0; i < r->nranges; i++) {
    const char *n = ssa_rank_str(r, r->ranges[i].name);
    if (strncmp(n, "c10d::", 6) != 0) transport[ssa_host_p2p_call(n)] = 1;
  }
  for (size_t i = 0; i < r->nranges; i++) {
    const ssa_range *g = &r->ranges[i];
    const char *n = ssa_rank_str(r, g->name);
    timed x = {g->start, g->end, r->lanes[g->lane].id, 0};
    int dir = ssa_host_p2p_call(n);
    if (g->domain == dom && (g->name == fwd || g->name == bwd)) {
      x.tag = g->name == fwd ? PASS_FORWARD : PASS_BACKWARD;
      items[(*nitems)++] = x;
    } else if (dir && (strncmp(n, "c10d::", 6) != 0) == transport[dir]) {
      x.tag = (uint32_t)dir;
      calls[(*ncalls)++] = x;
    } else if (!strncmp(n, "ProfilerStep#", 13)) {
      x.tag = (uint32_t)atoi(n + 13);
      steps->v[steps->n++] = x;
    }
  }
  qsort(items, *nitems, sizeof *items, cmp_call);
  qsort(calls, *ncalls, sizeof *calls, cmp_call);
  qsort(steps->v, steps->n, sizeof *steps->v, cmp_call);
}

/* The global rank at a place of the pipeline (the world's ranks are their places). */
static int global_rank(const ssa_kineto_pp *pp, int place) {
  return pp->ranks ? pp->ranks[place] : place;
}

/* The record of a call to or from the pipeline's rank at place `peer`. */
static int add_record(ssa_rank *r, const timed *call, const ssa_kineto_pp *pp, int peer,
                      uint64_t seq, uint32_t name) {
  int send = call->tag == 1;
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_COLLECTIVE;
  stepscope_collective *c = &rec.u.collective;
  c->start_ns = (uint64_t)call->start;
  c->end_ns = (uint64_t)call->end;
  int me = global_rank(pp, pp->stage), other = global_rank(pp, peer);
  c->comm_id = send ? pair_id(me, other) : pair_id(other, me);
  c->seq = seq;
  c->stream = call->thread;
  c->op = send ? STEPSCOPE_COLL_SEND : STEPSCOPE_COLL_RECV;
  c->datatype = STEPSCOPE_DT_UINT8;
  c->peer = other;
  c->comm_rank = (uint32_t)pp->stage;
  c->comm_size = (uint32_t)pp->stages;
  c->flags = STEPSCOPE_COLL_F_P2P | STEPSCOPE_COLL_F_PIPELINE;
  c->name = name;
  int rc = ssa_rank_add_record(r, &rec);
  if (rc == 0) r->colls[r->ncolls - 1].flags |= SSA_COLL_F_SPANS_WAIT;
  return rc;
}

int ssa_kineto_p2p_match(ssa_rank *r, const ssa_kineto_pp *pp, int virtual_stages) {
  int rank = pp->stage, stages = pp->stages;
  for (size_t i = 0; i < r->ncolls; i++)
    if (r->colls[i].flags & STEPSCOPE_COLL_F_P2P) return 0; /* matched by their own records */
  uint32_t dom = ssa_rank_intern(r, "pipeline (recognised)"), fwd = ssa_rank_intern(r, "forward"),
           bwd = ssa_rank_intern(r, "backward"), name = ssa_rank_intern(r, "pp");
  if (!dom || !fwd || !bwd || !name) return STEPSCOPE_E_NOMEM;
  size_t cap = r->nranges ? r->nranges : 1, nitems = 0, ncalls = 0;
  timed *items = malloc(cap * sizeof *items), *calls = malloc(cap * sizeof *calls);
  step_list steps = {malloc(cap * sizeof *steps.v), 0};
  /* per peer: sends to it and receives from it in the current step */
  uint64_t *count = calloc(2 * (size_t)stages, sizeof *count);
  int rc = STEPSCOPE_E_NOMEM;
  if (!items || !calls || !steps.v || !count) goto out;
  gather(r, dom, fwd, bwd, items, &nitems, calls, &ncalls, &steps);
  rc = 0;
  size_t cursor = 0;
  long step = -1;
  for (size_t i = 0; i < ncalls && rc == 0; i++) {
    long s = step_at(&steps, &cursor, calls[i].start);
    if (s < 0) continue; /* outside the profiled steps: its peer's may not be in its trace */
    if (s != step) {
      memset(count, 0, 2 * (size_t)stages * sizeof *count);
      step = s;
    }
    int peer = peer_of(rank, stages, virtual_stages, (int)calls[i].tag,
                       pass_of_call(items, nitems, &calls[i]));
    if (peer < 0 || peer == rank) continue;
    uint64_t k = count[2 * (size_t)peer + (calls[i].tag - 1)]++;
    rc = add_record(r, &calls[i], pp, peer, (uint64_t)s << 24 | k, name);
  }
out:
  free(items);
  free(calls);
  free(steps.v);
  free(count);
  return rc;
}

static int is_p2p_param(const kparam *p) {
  return !strcmp(p->coll_name, "send") || !strncmp(p->coll_name, "recv", 4);
}

int ssa_kineto_p2p_group(const kparam *params, size_t n, int rank, int *ranks, int cap) {
  const char *group = NULL;
  for (size_t i = 0; i < n; i++) {
    if (!is_p2p_param(&params[i])) continue;
    if (!params[i].pg_ranks[0] || (group && strcmp(group, params[i].pg_ranks))) return 0;
    group = params[i].pg_ranks;
  }
  int count = 0, place = -1;
  for (const char *p = group; p && *p && count < cap;) { /* "0,1,2,3" */
    ranks[count] = atoi(p);
    if (ranks[count] == rank) place = count;
    count++;
    p = strchr(p, ',');
    p = p ? p + 1 : NULL;
  }
  if (place < 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (is_p2p_param(&params[i]) && params[i].has_rank_arg &&
        (params[i].rank_arg >= (uint64_t)count || params[i].rank_arg == (uint64_t)place))
      return 0;
  return count;
}

int ssa_kineto_p2p_index_build(const ssa_rank *r, ssa_kineto_p2p_index *ix) {
  ix->n = 0;
  ix->v = malloc((r->ncolls ? r->ncolls : 1) * sizeof *ix->v);
  if (!ix->v) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < r->ncolls; i++) {
    const ssa_coll *c = &r->colls[i];
    if (c->flags & STEPSCOPE_COLL_F_P2P)
      ix->v[ix->n++] = (ssa_kineto_p2p_call){c->start, c->end, c->stream, (uint32_t)i};
  }
  qsort(ix->v, ix->n, sizeof *ix->v, cmp_call);
  return 0;
}

const ssa_coll *ssa_kineto_p2p_find(const ssa_rank *r, const ssa_kineto_p2p_index *ix,
                                    uint64_t thread, int64_t start, int64_t end) {
  ssa_kineto_p2p_call key = {start, end, thread, 0};
  const ssa_kineto_p2p_call *hit = ix->n ? bsearch(&key, ix->v, ix->n, sizeof key, cmp_call) : NULL;
  return hit ? &r->colls[hit->tag] : NULL;
}

void ssa_kineto_p2p_index_free(ssa_kineto_p2p_index *ix) {
  free(ix->v);
  ix->v = NULL;
  ix->n = 0;
}
