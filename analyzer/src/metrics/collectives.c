/*
 * collectives.c — collectives matched across ranks (SPEC §4 "collectives").
 *
 * Every rank's COLLECTIVE records, as its summary holds them (rank_summary.c:
 * the matching reads no event of a rank), are gathered as (comm_id, seq, rank) and
 * sorted, so each instance's members are adjacent. A member's interval is
 * the op that executed it when linked (GPU kernel or CPU-backend host op),
 * else the record's own start and end, in aligned run time. Per instance:
 *   arrival skew = latest start - earliest start
 *   transfer     = shortest member duration; for a host send/recv pair whose calls span
 *                  until they were waited for (SSA_COLL_F_SPANS_WAIT: gloo), at most the time
 *                  from the later start to the receive's end (the data had arrived then)
 *   wait(rank)   = its duration - transfer
 *   algbw        = bytes / transfer (bytes per ns = GB/s)
 *   busbw        = algbw x 2(n-1)/n all-reduce, x (n-1)/n all-gather,
 *                  reduce-scatter and all-to-all, x 1 broadcast, reduce, p2p
 *                  (n = comm_size)
 * An all-to-all's members send different amounts (uneven splits: expert
 * parallelism's token dispatch); its bytes are the largest any member sent
 * (the busiest member bounds the transfer), and its summary is one row per
 * (op, communicator) whose bytes are the mean over its instances.
 * An instance is complete when all its members are present: comm_size of
 * them, two for a p2p transfer (a send/recv pair of a bigger communicator).
 * An incomplete instance (a rank missing, a trace cut short) is warned about
 * and listed, but left out of everything that compares members: per-rank
 * counts and waits, the straggler ranking and the summaries' counts and
 * bandwidths (a->colls_incomplete says how many were left out).
 * Stragglers: the rank that arrived last "caused" the waits of the others,
 * except what the pipeline schedule implies: pipeline send/recv waits are
 * never straggling, and in other collectives the part of a member's wait
 * until the last member of another pipeline stage arrived (pipeline_waits.c)
 * is the drain, not the straggler's doing. Each late arrival that caused a
 * wait is noted (ssa_late) for the culprit walk-back (culprits.c).
 * Instances are kept when at least one member starts inside its rank's
 * analysed window. Summaries group instances by (op, communicator name,
 * bytes).
 * Collectives imported without metadata (STEPSCOPE_COLL_F_INFERRED: the
 * communicator is an NCCL stream, seq the order on it, the members every
 * rank) are matched the same way, but a stream is refused (its instances left
 * out like incomplete ones, with one warning) when its ranks disagree: a
 * member runs another op at the same position, or in more than a tenth of
 * its instances a member finished (by more than 10 us) before another had
 * arrived, which no collective allows (a stream whose ranks run different
 * communicators' collectives in the same order positions). What it cannot
 * see: disjoint groups that reuse one stream number (tensor-parallel pairs
 * on every rank's stream #0) are taken as one communicator of all ranks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_summaries.h"
#include "ssa_metrics.h"

double ssa_busbw_factor(uint32_t op, uint32_t n) {
  if (n == 0) return 1.0;
  switch (op) {
  case STEPSCOPE_COLL_ALLREDUCE: return 2.0 * (double)(n - 1) / (double)n;
  case STEPSCOPE_COLL_ALLGATHER:
  case STEPSCOPE_COLL_REDUCESCATTER:
  case STEPSCOPE_COLL_ALLTOALL: return (double)(n - 1) / (double)n;
  default: return 1.0;
  }
}

/* A member's record in its rank's summary (rank_summary.c), and that summary. */
static const ssa_rank_summary *member_summary(const ssa_analysis *a, const ssa_coll_member *m) {
  return &a->ranks[m->rank_idx].summary;
}

static const ssa_coll_rec *member_coll(const ssa_analysis *a, const ssa_coll_member *m) {
  return &member_summary(a, m)->colls[m->coll_idx];
}

static void member_times(const ssa_analysis *a, const ssa_coll_member *m, int64_t *s, int64_t *e) {
  const ssa_rank_summary *rs = member_summary(a, m);
  const ssa_coll_rec *c = &rs->colls[m->coll_idx];
  *s = ssa_summary_rel_time(a, rs, c->start);
  *e = ssa_summary_rel_time(a, rs, c->end);
}

/* When a rank left the previous instance of the communicator (members [b, e) of the
 * sorted array; aligned end), INT64_MIN when it was not in it. */
static int64_t since_of(const ssa_analysis *a, const ssa_coll_member *m, size_t b, size_t e,
                        uint32_t rank_idx) {
  for (size_t y = b; y < e; y++)
    if (m[y].rank_idx == rank_idx) {
      int64_t s, en;
      member_times(a, &m[y], &s, &en);
      return en;
    }
  return INT64_MIN;
}

static int in_window(const ssa_rank_result *rr, const ssa_coll_rec *c) {
  return c->start >= rr->totals.start && c->start < rr->totals.end;
}

/* Per stream matched by order (inferred collectives): what speaks against the matching. */
typedef struct inferred_stream {
  uint64_t comm_id;
  const char *name;                         /* "nccl stream #k" (kineto_collectives.c) */
  uint64_t instances, misaligned, disagree; /* misaligned: one left before another came */
  uint64_t first_seq;                       /* the first disagreement */
  uint32_t first_op[2];                     /* ... its two ops */
  int first_rank[2];                        /* ... and their ranks */
} inferred_stream;

/* Checks the streams matched by order (members [0, n) sorted); *out lists them. */
static int check_inferred_streams(const ssa_analysis *a, const ssa_coll_member *m, size_t n,
                                  inferred_stream **out, size_t *nout) {
  size_t cap = 0;
  *out = NULL;
  *nout = 0;
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    while (e < n && m[e].comm_id == m[g].comm_id && m[e].seq == m[g].seq)
      e++;
    const ssa_coll_rec *c0 = member_coll(a, &m[g]);
    if (!(c0->flags & STEPSCOPE_COLL_F_INFERRED)) {
      g = e;
      continue;
    }
    if (*nout == 0 || (*out)[*nout - 1].comm_id != m[g].comm_id) {
      if (ssa_grow((void **)out, &cap, *nout + 1, sizeof **out)) return STEPSCOPE_E_NOMEM;
      (*out)[(*nout)++] =
          (inferred_stream){.comm_id = m[g].comm_id,
                            .name = ssa_strtab_get(&member_summary(a, &m[g])->names, c0->name)};
    }
    inferred_stream *st = &(*out)[*nout - 1];
    st->instances++;
    int64_t first_end = INT64_MAX, last_start = INT64_MIN;
    for (size_t x = g; x < e; x++) {
      int64_t s, en;
      member_times(a, &m[x], &s, &en);
      if (en < first_end) first_end = en;
      if (s > last_start) last_start = s;
      const ssa_coll_rec *cx = member_coll(a, &m[x]);
      if (cx->op != c0->op && st->disagree++ == 0) {
        st->first_seq = m[g].seq;
        st->first_op[0] = c0->op;
        st->first_op[1] = cx->op;
        st->first_rank[0] = member_summary(a, &m[g])->rank;
        st->first_rank[1] = member_summary(a, &m[x])->rank;
      }
    }
    /* no member of one collective leaves before the last has arrived (10 us for clocks) */
    st->misaligned += first_end + 10000 < last_start;
    g = e;
  }
  return 0;
}

static const inferred_stream *refused_stream(const inferred_stream *st, size_t n,
                                             uint64_t comm_id) {
  for (size_t i = 0; i < n; i++)
    if (st[i].comm_id == comm_id)
      return st[i].disagree || 10 * st[i].misaligned > st[i].instances ? &st[i] : NULL;
  return NULL;
}

static void warn_refused(ssa_analysis *a, const inferred_stream *st, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!refused_stream(st, n, st[i].comm_id)) continue;
    if (st[i].disagree)
      ssa_analysis_warn(a,
                        "collectives without metadata on %s cannot be matched by order: at "
                        "position %llu rank %d ran %s and rank %d %s (%llu disagreements); its "
                        "%llu instances are left out of skew, waits and stragglers",
                        st[i].name, (unsigned long long)st[i].first_seq, st[i].first_rank[0],
                        stepscope_collective_op_name(st[i].first_op[0]), st[i].first_rank[1],
                        stepscope_collective_op_name(st[i].first_op[1]),
                        (unsigned long long)st[i].disagree, (unsigned long long)st[i].instances);
    else
      ssa_analysis_warn(a,
                        "collectives without metadata on %s cannot be matched by order: in %llu "
                        "of %llu instances a member finished before another arrived (the ranks' "
                        "collectives at one position differ); left out of skew, waits and "
                        "stragglers",
                        st[i].name, (unsigned long long)st[i].misaligned,
                        (unsigned long long)st[i].instances);
  }
}

/* The times of instance `in` from its members m[g .. e) (each one's start and end relative to
 * its summary into starts, ends): first and last arrival, end, skew, the transfer (the shortest
 * member's duration) and the bandwidths; its communicator size and an all-to-all's bytes, the
 * largest member's. Returns the position of the last arrival. */
static size_t instance_times(const ssa_analysis *a, const ssa_coll_member *m, size_t g, size_t e,
                             int64_t *starts, int64_t *ends, ssa_coll_instance *in) {
  int64_t first = INT64_MAX, last = INT64_MIN, end = INT64_MIN, transfer = INT64_MAX;
  size_t last_i = g;
  for (size_t x = g; x < e; x++) {
    member_times(a, &m[x], &starts[x - g], &ends[x - g]);
    int64_t d = ends[x - g] - starts[x - g];
    if (starts[x - g] < first) first = starts[x - g];
    if (starts[x - g] > last) {
      last = starts[x - g];
      last_i = x;
    }
    if (ends[x - g] > end) end = ends[x - g];
    if (d < transfer) transfer = d;
    const ssa_coll_rec *cx = member_coll(a, &m[x]);
    if (cx->comm_size > in->comm_size) in->comm_size = cx->comm_size;
    if (in->op == STEPSCOPE_COLL_ALLTOALL && cx->bytes > in->bytes) in->bytes = cx->bytes;
  }
  /* a host transfer pair whose calls span until they were waited for (gloo): its data had
   * arrived by the receive's end, and moved only once both had posted */
  for (size_t x = g; x < e && e - g == 2 && (in->flags & SSA_COLL_F_SPANS_WAIT); x++)
    if (member_coll(a, &m[x])->op == STEPSCOPE_COLL_RECV && ends[x - g] - last >= 0 &&
        ends[x - g] - last < transfer)
      transfer = ends[x - g] - last;
  in->first_start_rel = first;
  in->last_start_rel = last;
  in->end_rel = end;
  in->skew = last - first;
  in->transfer = transfer;
  in->last_rank = member_summary(a, &m[last_i])->rank;
  in->algbw = transfer > 0 ? (double)in->bytes / (double)transfer : 0.0;
  in->busbw = in->algbw * ssa_busbw_factor(in->op, in->comm_size);
  return last_i;
}

/* The waits of instance `in` (members m[g .. e), times in starts and ends, the last arrival
 * m[last_i]): each member's wait beyond the transfer, its schedule's part (the whole wait of a
 * pipeline transfer, else the wait for the last member of another stage), added to the
 * instance and, when complete, to the member's rank; a complete non-pipeline instance's wait
 * for its late arrival beyond the schedule, per member (member_caused) and in all (returned). */
static int64_t instance_waits(ssa_analysis *a, const ssa_coll_member *m, size_t g, size_t e,
                              const int64_t *starts, const int64_t *ends, size_t last_i,
                              ssa_coll_instance *in, int64_t *member_caused) {
  int64_t caused = 0, last = in->last_start_rel, transfer = in->transfer;
  int straggling = in->complete && !(in->flags & STEPSCOPE_COLL_F_PIPELINE);
  for (size_t x = g; x < e; x++) {
    int64_t w = ends[x - g] - starts[x - g] - transfer;
    ssa_rank_result *rr = &a->ranks[m[x].rank_idx];
    in->total_wait += w;
    if (w > in->max_wait) in->max_wait = w;
    int64_t sched = w;
    member_caused[x - g] = 0;
    if (!(in->flags & STEPSCOPE_COLL_F_PIPELINE)) {
      sched = 0;
      if (rr->coll_wait_end && rr->coll_wait_end[m[x].coll_idx] != INT64_MIN) {
        sched =
            ssa_summary_rel_time(a, &rr->summary, rr->coll_wait_end[m[x].coll_idx]) - starts[x - g];
        if (sched > w) sched = w;
        if (sched < 0) sched = 0;
      }
    }
    in->schedule_wait += sched;
    if (!in->complete) continue;
    if (rr->coll_transfer) rr->coll_transfer[m[x].coll_idx] = transfer;
    rr->coll_count++;
    rr->coll_wait += w;
    rr->coll_schedule_wait += sched;
    if (straggling && x != last_i) { /* the wait for the late arrival, beyond the schedule */
      int64_t late = last - starts[x - g] < w ? last - starts[x - g] : w;
      if (late > sched) {
        member_caused[x - g] = late - sched;
        caused += late - sched;
      }
    }
  }
  return caused;
}

/* Pipeline ranks: each collective record's transfer time, -1 until matched. 0, or -1 out of
 * memory. */
static int alloc_coll_transfers(ssa_analysis *a) {
  for (size_t i = 0; i < a->nranks; i++) {
    ssa_rank_result *rr = &a->ranks[i];
    if (rr->stage_of_waits < 0 || rr->summary.ncolls == 0) continue;
    rr->coll_transfer = malloc(rr->summary.ncolls * sizeof *rr->coll_transfer);
    if (!rr->coll_transfer) return -1;
    for (size_t j = 0; j < rr->summary.ncolls; j++)
      rr->coll_transfer[j] = -1;
  }
  return 0;
}

/* A new, zeroed late arrival at the end of a->lates, or NULL out of memory. */
static ssa_late *add_late(ssa_analysis *a, size_t *cap) {
  if (ssa_grow((void **)&a->lates, cap, a->nlates + 1, sizeof *a->lates)) return NULL;
  ssa_late *lt = &a->lates[a->nlates++];
  memset(lt, 0, sizeof *lt);
  return lt;
}

/* The late arrival m[last_i] of the instance m[g .. e) and up to SSA_LATE_PEERS of its peers,
 * for the walk-back: each one's rank, what it did since the previous instance m[pg .. pg_end)
 * (0, 0: none), its arrival (starts) and the wait it was caused (member_caused). */
static void fill_late(const ssa_analysis *a, const ssa_coll_member *m, size_t g, size_t e,
                      size_t last_i, size_t pg, size_t pg_end, const int64_t *starts,
                      const int64_t *member_caused, ssa_late *lt) {
  lt->rank_idx = m[last_i].rank_idx;
  lt->since_rel = since_of(a, m, pg, pg_end, m[last_i].rank_idx);
  for (size_t x = g; x < e && lt->npeers < SSA_LATE_PEERS; x++) {
    if (x == last_i) continue;
    lt->peer_idx[lt->npeers] = m[x].rank_idx;
    lt->peer_since_rel[lt->npeers] = since_of(a, m, pg, pg_end, m[x].rank_idx);
    lt->peer_caused[lt->npeers] = member_caused[x - g];
    lt->peer_arrival_rel[lt->npeers++] = starts[x - g];
  }
}

/* Warns that instance `in` (members m[g .. e)) misses ranks, naming the missing communicator
 * ranks when it expected the whole communicator. */
static void warn_incomplete(ssa_analysis *a, const ssa_coll_member *m, size_t g, size_t e,
                            const ssa_coll_instance *in, uint32_t expected) {
  char list[200] = "";
  size_t len = 0;
  for (uint32_t cr = 0; cr < in->comm_size && len < sizeof list - 16 && expected == in->comm_size;
       cr++) {
    int found = 0;
    for (size_t x = g; x < e && !found; x++)
      found = member_coll(a, &m[x])->comm_rank == cr;
    if (!found) len += (size_t)snprintf(list + len, sizeof list - len, "%s%u", len ? "," : "", cr);
  }
  if (expected == in->comm_size)
    ssa_analysis_warn(a,
                      "collective %s comm %016llx seq %llu: %zu of %u ranks present (missing "
                      "communicator ranks: %s); left out of the statistics",
                      stepscope_collective_op_name(in->op), (unsigned long long)in->comm_id,
                      (unsigned long long)in->seq, e - g, in->comm_size, list);
  else
    ssa_analysis_warn(a,
                      "p2p %s comm %016llx seq %llu: only one of its two ranks present; left "
                      "out of the statistics",
                      stepscope_collective_op_name(in->op), (unsigned long long)in->comm_id,
                      (unsigned long long)in->seq);
}

int ssa_match_collectives(ssa_analysis *a) {
  ssa_coll_member *m;
  size_t n;
  if (ssa_take_coll_members(a, &m, &n)) return STEPSCOPE_E_NOMEM;
  if (n == 0) return 0;
  size_t k = 0;
  for (size_t x = 0; x < n; x++) /* one rank: its collectives without metadata match nothing */
    if (a->nranks > 1 || !(member_coll(a, &m[x])->flags & STEPSCOPE_COLL_F_INFERRED)) m[k++] = m[x];
  n = k;
  inferred_stream *streams = NULL;
  size_t nstreams = 0;
  if (check_inferred_streams(a, m, n, &streams, &nstreams)) {
    free(m);
    return STEPSCOPE_E_NOMEM;
  }
  if (alloc_coll_transfers(a)) {
    free(m);
    free(streams);
    return STEPSCOPE_E_NOMEM;
  }
  size_t cap = 0;
  int64_t *starts = NULL, *ends = NULL, *member_caused = NULL;
  size_t scap = 0, ccap = 0;
  int rc = 0;
  uint64_t warned = 0;
  size_t late_cap = 0;
  size_t pg = 0, pg_end = 0; /* the previous group of members */
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    while (e < n && m[e].comm_id == m[g].comm_id && m[e].seq == m[g].seq)
      e++;
    size_t cnt = e - g;
    int keep = 0;
    for (size_t x = g; x < e && !keep; x++)
      keep = in_window(&a->ranks[m[x].rank_idx], member_coll(a, &m[x]));
    if (!keep) {
      pg = g;
      pg_end = e;
      g = e;
      continue;
    }
    size_t need = cnt;
    if (ssa_grow((void **)&starts, &scap, need, sizeof *starts) ||
        ssa_grow((void **)&member_caused, &ccap, need, sizeof *member_caused)) {
      rc = STEPSCOPE_E_NOMEM;
      break;
    }
    free(ends);
    ends = malloc(need * sizeof *ends);
    if (!ends || ssa_grow((void **)&a->colls, &cap, a->ncolls + 1, sizeof *a->colls)) {
      rc = STEPSCOPE_E_NOMEM;
      break;
    }
    const ssa_rank_summary *r0 = member_summary(a, &m[g]);
    const ssa_coll_rec *c0 = &r0->colls[m[g].coll_idx];
    ssa_coll_instance *in = &a->colls[a->ncolls];
    memset(in, 0, sizeof *in);
    in->comm_id = c0->comm_id;
    in->seq = c0->seq;
    in->op = c0->op;
    in->flags = c0->flags;
    in->bytes = c0->bytes;
    in->comm_size = c0->comm_size;
    const char *group = ssa_strtab_get(&r0->names, c0->name);
    uint32_t gid = ssa_strtab_intern(&a->names, group, strlen(group));
    if (c0->name && gid == 0) {
      rc = STEPSCOPE_E_NOMEM;
      break;
    }
    in->group = gid;
    size_t last_i = instance_times(a, m, g, e, starts, ends, in);
    int64_t last = in->last_start_rel;
    in->present = (uint32_t)cnt;
    uint32_t expected = (in->flags & STEPSCOPE_COLL_F_P2P) && in->comm_size > 2 ? 2 : in->comm_size;
    int inferred = (in->flags & STEPSCOPE_COLL_F_INFERRED) != 0;
    if (inferred && expected == 0) expected = (uint32_t)a->nranks; /* world size unknown */
    int refused = inferred && refused_stream(streams, nstreams, in->comm_id);
    in->complete = cnt >= expected && !refused;
    a->colls_inferred += inferred && !refused;
    a->colls_refused += refused;
    int straggling = in->complete && !(in->flags & STEPSCOPE_COLL_F_PIPELINE);
    int64_t caused = instance_waits(a, m, g, e, starts, ends, last_i, in, member_caused);
    if (straggling) {
      ssa_rank_result *lr = &a->ranks[m[last_i].rank_idx];
      lr->coll_caused += caused;
      lr->coll_last++;
      in->caused_wait = caused;
      if (caused > 0) {
        ssa_late *lt = add_late(a, &late_cap);
        if (!lt) {
          rc = STEPSCOPE_E_NOMEM;
          break;
        }
        int has_prev = pg_end == g && pg < pg_end && m[pg].comm_id == m[g].comm_id &&
                       m[pg].seq + 1 == m[g].seq;
        fill_late(a, m, g, e, last_i, has_prev ? pg : 0, has_prev ? pg_end : 0, starts,
                  member_caused, lt);
        lt->comm_id = in->comm_id;
        lt->arrival_rel = last;
        lt->caused = caused;
      }
    }
    if (!in->complete) {
      a->colls_incomplete++;
      if (!refused && warned++ < 5) warn_incomplete(a, m, g, e, in, expected);
    }
    a->ncolls++;
    pg = g;
    pg_end = e;
    g = e;
  }
  free(m);
  free(starts);
  free(ends);
  free(member_caused);
  if (rc == 0) warn_refused(a, streams, nstreams);
  free(streams);
  if (rc) return rc;
  if (a->colls_incomplete - a->colls_refused > 5)
    ssa_analysis_warn(
        a, "%llu collective instances in all had missing ranks (left out of the statistics)",
        (unsigned long long)(a->colls_incomplete - a->colls_refused));
  return ssa_summarize_collectives(a); /* coll_summaries.c */
}
