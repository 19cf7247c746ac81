/*
 * rank_finish.c — turns a freshly filled rank into the form the metrics need.
 *
 *   1. Join: every op with a correlation id is joined to the API call (launch
 *      or host enqueue) with the same id (the first one, if several have it;
 *      see below for how it is found).
 *   2. Collectives: a COLLECTIVE record is linked to the op that executed it,
 *      by correlation id (NCCL kernel or copy on a GPU) or by (comm_id, seq)
 *      (CPU-backend host ops). Linked ops are communication by evidence.
 *   3. Classification, in the order of comm_rules.h: a user rule
 *      (--compute-kernel, --comm-kernel) that matches the op's name; else
 *      evidence (a linked collective record, a host op's category); else a
 *      built-in communication family (comm_families.h: NCCL/RCCL, DeepEP,
 *      symmetric memory, ...; for a Kineto trace without device activity,
 *      host collectives such as gloo:*); else compute. Copies and memsets
 *      stay copies. Each op is credited to the rule that decided it, and
 *      communication ops are counted by op kind (r->tally).
 *   4. Sorting: ops by (start, longer first, lane) so that one sweep visits
 *      activity in time order with parents before children; ranges likewise;
 *      syncs by (lane, start); counters by time. Ops, API calls and ranges
 *      are sorted in place by sort.c's radix sort (no copy of the array),
 *      with the last ties broken by the bytes of the records so that the
 *      order is total and does not depend on the algorithm. Ops that a
 *      source merged in order already (ssa_op_stage.h) are not sorted: the
 *      op pass below checks their order as it goes. Ranges, syncs and
 *      counters are sorted apart from the join (side_sorts), on a second
 *      thread when there are many ranges.
 *
 * Steps 1-3 build their lookups first (host ops are linked through their
 * oplinks then) and visit the ops in one pass, since each pass over the ops
 * costs a trip through memory. When the ids rise strictly along the calls
 * sorted by start (one launching thread, as CUPTI and our tracer number
 * them), each op's call is found by a galloping search from where the
 * previous op of its lane found its own, with no table; otherwise, when the
 * ids are dense, the join indexes a plain array by id - min, and else it
 * hashes.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ssa_model.h"
#include "sc_hash.h"

int ssa_is_nccl_kernel_name(const char *n) {
  return strncmp(n, "ncclKernel_", 11) == 0 || strncmp(n, "ncclDevKernel_", 14) == 0 ||
         strncmp(n, "ncclSymkDevKernel_", 18) == 0;
}

int ssa_is_nccl_p2p_kernel_name(const char *n) {
  return ssa_is_nccl_kernel_name(n) &&
         (strstr(n, "SendRecv") || strstr(n, "_Send") || strstr(n, "_Recv"));
}

int ssa_host_p2p_call(const char *n) {
  if (!strcmp(n, "c10d::send") || !strcmp(n, "gloo:send") || !strcmp(n, "nccl:send")) return 1;
  if (!strcmp(n, "c10d::recv_") || !strcmp(n, "c10d::recv_any_source_") ||
      !strcmp(n, "gloo:recv") || !strcmp(n, "nccl:recv"))
    return 2;
  return 0;
}

/* A transient hash of indices keyed by a 64-bit key computed from the item. */
typedef struct idx_hash {
  uint32_t *slots;
  uint64_t mask;
} idx_hash;

static int idx_hash_init(idx_hash *h, size_t n) {
  uint64_t size = 16;
  while (size < (uint64_t)n * 2)
    size <<= 1;
  h->slots = calloc(size, sizeof *h->slots);
  h->mask = size - 1;
  return h->slots ? 0 : -1;
}

int ssa_cmp_ops(const void *pa, const void *pb) {
  const ssa_op *a = pa, *b = pb;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->end != b->end) return a->end > b->end ? -1 : 1;
  if (a->lane != b->lane) return a->lane < b->lane ? -1 : 1;
  return memcmp(a, b, sizeof *a);
}

static int cmp_ranges(const void *pa, const void *pb) {
  const ssa_range *a = pa, *b = pb;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->end != b->end) return a->end > b->end ? -1 : 1;
  return memcmp(a, b, sizeof *a);
}

static int cmp_syncs(const void *pa, const void *pb) {
  const ssa_sync *a = pa, *b = pb;
  if (a->lane != b->lane) return a->lane < b->lane ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return 0;
}

static int cmp_counters(const void *pa, const void *pb) {
  const ssa_counter *a = pa, *b = pb;
  if (a->time != b->time) return a->time < b->time ? -1 : 1;
  return 0;
}

static int cmp_apis(const void *pa, const void *pb) {
  const ssa_api *a = pa, *b = pb;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->end != b->end) return a->end > b->end ? -1 : 1;
  return memcmp(a, b, sizeof *a);
}

static void sort_if_needed(void *base, size_t n, size_t size,
                           int (*cmp)(const void *, const void *)) {
  char *p = base;
  for (size_t i = 1; i < n; i++) {
    if (cmp(p + (i - 1) * size, p + i * size) > 0) {
      qsort(base, n, size, cmp);
      return;
    }
  }
}

/* What the rules say about one name (string id), computed on first use:
 * the deciding user rule, the built-in family for kernels and for host ops,
 * and the op kind the name tells. */
enum { NC_USER = 1, NC_FAMILY_KERNEL = 2, NC_FAMILY_HOST = 4, NC_KIND = 8 };
typedef struct name_class {
  int32_t user;     /* rule index, -1 none */
  int8_t family[2]; /* [0] kernels, [1] host ops: family index, -1 none */
  uint8_t kind;     /* ssa_comm_kind of the name */
  uint8_t known;    /* NC_* bits: which fields are computed */
} name_class;

/* The lookups of the op pass, built first. */
typedef struct joins {
  /* launch calls by correlation id: dense table or hash */
  uint32_t *slot; /* dense: api index + 1 at corr - lo */
  uint64_t lo, hi;
  idx_hash api_hash; /* sparse ids */
  int dense, any_api;
  /* ids rising strictly along the (sorted) calls, none 0: no table, each
   * op's call is searched from where its lane's last one was found */
  int rising;
  size_t *lane_hint;
  /* collectives by correlation id; corr_lo > corr_hi when none has one */
  idx_hash coll_hash;
  uint64_t corr_lo, corr_hi;
  /* the rules' answers per string id, computed on first use */
  name_class *names;
  /* seen by the op pass: an op that goes before its predecessor */
  int ops_unordered;
} joins;

static void joins_free(joins *j) {
  free(j->lane_hint);
  free(j->slot);
  free(j->api_hash.slots);
  free(j->coll_hash.slots);
  free(j->names);
}

/* Dense ids: a table indexed by corr - lo (api index + 1, the first call
 * with an id wins); sparse ids: a hash. */
static int build_launch_index(ssa_rank *r, joins *j) {
  /* one pass: the range of ids, and whether the calls are in order (then
   * the sort has nothing to do; ids do not depend on the order) */
  uint64_t lo = UINT64_MAX, hi = 0;
  size_t with = 0;
  int unordered = 0, rising = 1;
  for (size_t i = 0; i < r->napis; i++) {
    const ssa_api *a = &r->apis[i];
    if (i > 0 && !unordered &&
        (a[-1].start > a->start || (a[-1].start == a->start && cmp_apis(a - 1, a) > 0)))
      unordered = 1;
    uint64_t c = a->corr;
    if (i > 0 && c <= a[-1].corr) rising = 0;
    if (!c) {
      rising = 0;
      continue;
    }
    with++;
    if (c < lo) lo = c;
    if (c > hi) hi = c;
  }
  /* APIs sorted first: ops refer to them by index */
  if (unordered) ssa_sort_by_start(r->apis, r->napis, sizeof *r->apis, cmp_apis);
  if (with == 0) return 0;
  j->any_api = 1;
  if (rising && !unordered) {
    j->lane_hint = calloc(r->nlanes ? r->nlanes : 1, sizeof *j->lane_hint);
    if (!j->lane_hint) return STEPSCOPE_E_NOMEM;
    j->rising = 1;
    return 0;
  }
  uint64_t span = hi - lo + 1;
  if (span <= (uint64_t)with * 2 + 1024 && span <= UINT32_MAX) {
    j->slot = calloc((size_t)span, sizeof *j->slot);
    if (!j->slot) return STEPSCOPE_E_NOMEM;
    j->dense = 1;
    j->lo = lo;
    j->hi = hi;
    for (size_t i = 0; i < r->napis; i++) {
      uint64_t c = r->apis[i].corr;
      if (c && !j->slot[c - lo]) j->slot[c - lo] = (uint32_t)i + 1;
    }
    return 0;
  }
  idx_hash *h = &j->api_hash;
  if (idx_hash_init(h, r->napis)) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < r->napis; i++) {
    if (!r->apis[i].corr) continue;
    uint64_t s = sc_mix64(r->apis[i].corr) & h->mask;
    int dup = 0;
    while (h->slots[s]) {
      if (r->apis[h->slots[s] - 1].corr == r->apis[i].corr) {
        dup = 1;
        break;
      }
      s = (s + 1) & h->mask;
    }
    if (!dup) h->slots[s] = (uint32_t)i + 1; /* the first call with an id wins */
  }
  return 0;
}

/* The call with id `corr` among calls whose ids rise strictly, searched by
 * galloping from *hint (ops of a lane come in launch order, so the next
 * one is usually the next call or close to it); *hint moves past it. */
static uint32_t launch_rising(const ssa_rank *r, size_t *hint, uint64_t corr) {
  const ssa_api *a = r->apis;
  size_t n = r->napis, h = *hint < n ? *hint : n - 1;
  size_t lo, hi; /* the call is in (lo, hi], or absent */
  if (a[h].corr == corr) {
    *hint = h + 1;
    return (uint32_t)h;
  }
  if (a[h].corr < corr) {
    size_t step = 1;
    lo = h;
    while (lo + step < n && a[lo + step].corr < corr) {
      lo += step;
      step *= 2;
    }
    hi = lo + step < n ? lo + step : n - 1;
    if (a[hi].corr < corr) return SSA_NONE;
  } else {
    size_t step = 1;
    hi = h;
    while (hi >= step && a[hi - step].corr > corr) {
      hi -= step;
      step *= 2;
    }
    if (hi < step) { /* nothing below: search [0, hi) */
      if (a[0].corr > corr) return SSA_NONE;
      if (a[0].corr == corr) {
        *hint = 1;
        return 0;
      }
      lo = 0;
    } else {
      lo = hi - step;
    }
    hi--; /* a[hi + 1].corr > corr, a[lo].corr <= corr */
    if (a[lo].corr == corr) {
      *hint = lo + 1;
      return (uint32_t)lo;
    }
  }
  /* a[lo].corr < corr <= a[hi].corr */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (a[mid].corr < corr)
      lo = mid;
    else
      hi = mid;
  }
  if (a[hi].corr != corr) return SSA_NONE;
  *hint = hi + 1;
  return (uint32_t)hi;
}

static inline uint32_t launch_of(const ssa_rank *r, const joins *j, const ssa_op *o) {
  uint64_t corr = o->corr;
  if (j->rising) return corr ? launch_rising(r, &j->lane_hint[o->lane], corr) : SSA_NONE;
  if (j->dense) {
    if (corr < j->lo || corr > j->hi) return SSA_NONE;
    uint32_t ai = j->slot[corr - j->lo];
    return ai ? ai - 1 : SSA_NONE;
  }
  if (!corr) return SSA_NONE;
  const idx_hash *h = &j->api_hash;
  uint64_t s = sc_mix64(corr) & h->mask;
  while (h->slots[s]) {
    uint32_t ai = h->slots[s] - 1;
    if (r->apis[ai].corr == corr) return ai;
    s = (s + 1) & h->mask;
  }
  return SSA_NONE;
}

/* Collectives: host ops are linked by (comm_id, seq) here, from their
 * oplinks; the index by correlation id is left for the op pass. */
static int build_collective_index(ssa_rank *r, joins *j) {
  j->corr_lo = UINT64_MAX;
  j->corr_hi = 0;
  if (r->ncolls == 0) return 0;
  idx_hash by_seq;
  if (idx_hash_init(&j->coll_hash, r->ncolls)) return STEPSCOPE_E_NOMEM;
  if (idx_hash_init(&by_seq, r->ncolls)) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < r->ncolls; i++) {
    const ssa_coll *c = &r->colls[i];
    if (c->corr) {
      uint64_t h = sc_mix64(c->corr) & j->coll_hash.mask;
      while (j->coll_hash.slots[h])
        h = (h + 1) & j->coll_hash.mask;
      j->coll_hash.slots[h] = (uint32_t)i + 1;
      if (c->corr < j->corr_lo) j->corr_lo = c->corr;
      if (c->corr > j->corr_hi) j->corr_hi = c->corr;
    }
    uint64_t h = sc_mix64(c->comm_id ^ sc_mix64(c->seq + 1)) & by_seq.mask;
    while (by_seq.slots[h])
      h = (h + 1) & by_seq.mask;
    by_seq.slots[h] = (uint32_t)i + 1;
  }
  /* host ops by (comm_id, seq) */
  for (size_t i = 0; i < r->noplinks; i++) {
    const ssa_oplink *k = &r->oplinks[i];
    uint64_t h = sc_mix64(k->comm_id ^ sc_mix64(k->seq + 1)) & by_seq.mask;
    while (by_seq.slots[h]) {
      uint32_t ci = by_seq.slots[h] - 1;
      if (r->colls[ci].comm_id == k->comm_id && r->colls[ci].seq == k->seq) {
        r->ops[k->op].coll = ci;
        r->comm_by_evidence++;
        break;
      }
      h = (h + 1) & by_seq.mask;
    }
  }
  free(by_seq.slots);
  return 0;
}

static inline uint32_t collective_of(const ssa_rank *r, const joins *j, uint64_t corr) {
  if (corr < j->corr_lo || corr > j->corr_hi) return SSA_NONE;
  const idx_hash *h = &j->coll_hash;
  uint64_t s = sc_mix64(corr) & h->mask;
  while (h->slots[s]) {
    uint32_t ci = h->slots[s] - 1;
    if (r->colls[ci].corr == corr) return ci;
    s = (s + 1) & h->mask;
  }
  return SSA_NONE;
}

/* One pass over the ops: the launch call, the collective by correlation id
 * (GPU ops not already linked), and kernels named like NCCL's and not
 * classifies each op (classify_op; the name tests run once per distinct
 * string). It also notes each collective's first op
 * and whether the ops are in order; when they are not, join_all sorts them
 * and finds the first ops again. */
static inline int ops_out_of_order(const ssa_op *a, const ssa_op *b) {
  return a->start > b->start || (a->start == b->start && ssa_cmp_ops(a, b) > 0);
}

static name_class *name_class_of(const ssa_rank *r, joins *j, uint32_t name, int want) {
  name_class *c = &j->names[name];
  if ((c->known & want) == want) return c;
  const char *s = ssa_rank_str(r, name);
  if ((want & NC_USER) && !(c->known & NC_USER)) c->user = ssa_comm_rules_match(r->comm_rules, s);
  if ((want & NC_FAMILY_KERNEL) && !(c->known & NC_FAMILY_KERNEL)) {
    int f = ssa_comm_family_of(s, SSA_COMM_SCOPE_KERNEL);
    c->family[0] = (int8_t)(f >= 0 ? f : -1);
  }
  if ((want & NC_FAMILY_HOST) && !(c->known & NC_FAMILY_HOST)) {
    int f = ssa_comm_family_of(s, SSA_COMM_SCOPE_HOST);
    c->family[1] = (int8_t)(f >= 0 ? f : -1);
  }
  if ((want & NC_KIND) && !(c->known & NC_KIND)) c->kind = (uint8_t)ssa_comm_kind_of_name(s);
  c->known |= (uint8_t)want;
  return c;
}

/* The op kind of a communication op: its collective record's op when linked
 * (and known), else what its name tells. */
static int comm_kind_of(const ssa_rank *r, joins *j, const ssa_op *o, uint32_t nstrings) {
  if (o->coll != SSA_NONE && !(r->colls[o->coll].flags & STEPSCOPE_COLL_F_INFERRED)) {
    int k = ssa_comm_kind_of_collective(r->colls[o->coll].op);
    if (k != SSA_COMM_KIND_UNKNOWN) return k;
  }
  if (!o->name || o->name >= nstrings) return SSA_COMM_KIND_UNKNOWN;
  return name_class_of(r, j, o->name, NC_KIND)->kind;
}

/* Classifies one op in the order of comm_rules.h and credits the rule. */
static void classify_op(ssa_rank *r, joins *j, ssa_op *o, uint32_t nstrings) {
  if (o->kind != SSA_OP_KERNEL && o->kind != SSA_OP_HOST) return; /* copies stay copies */
  ssa_comm_tally *t = &r->tally;
  int named = o->name && o->name < nstrings;
  /* host ops of a Kineto trace without device activity were classified by
   * name (kineto_host.c), not by evidence: they go through the families */
  int evidence_host = o->kind == SSA_OP_HOST && !r->host_timeline;
  if (named && r->comm_rules && r->comm_rules->n) {
    int u = name_class_of(r, j, o->name, NC_USER)->user;
    if (u >= 0 && (size_t)u < t->nuser) {
      o->cls = r->comm_rules->rule[u].comm ? SSA_CLS_COMM : SSA_CLS_COMPUTE;
      ssa_class_count_add(&t->user[u], o->start, o->end);
      if (o->cls == SSA_CLS_COMM)
        ssa_class_count_add(&t->kind[comm_kind_of(r, j, o, nstrings)], o->start, o->end);
      return;
    }
  }
  /* a collective inferred from the kernel's name and stream (kineto_collectives.c) is no evidence:
   * the name's family classifies the kernel */
  int by_record = o->coll != SSA_NONE && !(r->colls[o->coll].flags & STEPSCOPE_COLL_F_INFERRED);
  if (by_record || (evidence_host && o->cls == SSA_CLS_COMM)) {
    o->cls = SSA_CLS_COMM;
    ssa_class_count_add(&t->evidence, o->start, o->end);
    ssa_class_count_add(&t->kind[comm_kind_of(r, j, o, nstrings)], o->start, o->end);
    return;
  }
  if (evidence_host) return; /* its category decided (compute, copy) */
  int host = o->kind == SSA_OP_HOST;
  int f = named
              ? name_class_of(r, j, o->name, host ? NC_FAMILY_HOST : NC_FAMILY_KERNEL)->family[host]
              : -1;
  if (f >= 0) {
    o->cls = SSA_CLS_COMM;
    r->comm_by_name++;
    ssa_class_count_add(&t->family[f], o->start, o->end);
    int k = ssa_comm_families[f].kind;
    if (k < 0) k = comm_kind_of(r, j, o, nstrings);
    ssa_class_count_add(&t->kind[k], o->start, o->end);
    return;
  }
  o->cls = SSA_CLS_COMPUTE;
}

static void join_ops(ssa_rank *r, joins *j) {
  uint32_t nstrings = r->strings.count;
  for (size_t i = 0; i < r->nops; i++) {
    ssa_op *o = &r->ops[i];
    /* whether the ops, as completed by this pass, are in order (so the sort
     * after it can be skipped): ops i-2 and i-1 are complete by now */
    if (i > 1 && !j->ops_unordered && ops_out_of_order(o - 2, o - 1)) j->ops_unordered = 1;
    if (j->any_api) {
      uint32_t ai = launch_of(r, j, o);
      if (ai != SSA_NONE) {
        o->launch = ai;
        r->joined_ops++;
      }
    }
    if (o->corr && o->coll == SSA_NONE && o->kind != SSA_OP_HOST) {
      uint32_t ci = collective_of(r, j, o->corr);
      if (ci != SSA_NONE) {
        o->coll = ci;
        if (!(r->colls[ci].flags & STEPSCOPE_COLL_F_INFERRED)) {
          o->cls = SSA_CLS_COMM;
          r->comm_by_evidence++;
        }
      }
    }
    if (o->coll != SSA_NONE) { /* the first op of a collective, if this order stands */
      if (r->colls[o->coll].op_index == SSA_NONE) r->colls[o->coll].op_index = (uint32_t)i;
    }
    classify_op(r, j, o, nstrings);
  }
  if (r->nops > 1 && ops_out_of_order(&r->ops[r->nops - 2], &r->ops[r->nops - 1]))
    j->ops_unordered = 1;
}

static int join_all(ssa_rank *r) {
  joins j;
  memset(&j, 0, sizeof j);
  int rc = build_launch_index(r, &j);
  if (rc == 0) rc = build_collective_index(r, &j);
  if (rc == 0) {
    j.names = calloc(r->strings.count ? r->strings.count : 1, sizeof *j.names);
    if (!j.names) rc = STEPSCOPE_E_NOMEM;
  }
  memset(&r->tally, 0, sizeof r->tally);
  if (rc == 0 && r->comm_rules && r->comm_rules->n) {
    r->tally.user = calloc(r->comm_rules->n, sizeof *r->tally.user);
    if (!r->tally.user)
      rc = STEPSCOPE_E_NOMEM;
    else
      r->tally.nuser = r->comm_rules->n;
  }
  for (size_t i = 0; i < r->ncolls; i++)
    r->colls[i].op_index = SSA_NONE;
  if (rc == 0) join_ops(r, &j);
  joins_free(&j);
  if (rc == 0 && j.ops_unordered) {
    ssa_sort_by_start(r->ops, r->nops, sizeof *r->ops, ssa_cmp_ops);
    for (size_t i = 0; i < r->ncolls; i++)
      r->colls[i].op_index = SSA_NONE;
    for (size_t i = 0; i < r->nops; i++) {
      uint32_t c = r->ops[i].coll;
      if (c != SSA_NONE && r->colls[c].op_index == SSA_NONE) r->colls[c].op_index = (uint32_t)i;
    }
  }
  return rc;
}

/* The ranges, syncs and counters are sorted apart from the join, which
 * neither reads nor writes them: on a rank with many ranges, on a second
 * thread while the join runs (a Kineto trace's CPU ops are ranges: 59
 * thousand on HTA's df_index_resolver trace, radix-sorted in 1.35 ms while
 * the join took 1.67 ms, one after the other before; sort.c's merge of a
 * few sorted runs has since made both sorts there ~9x faster, and the
 * thread serves ranks whose ranges are many runs). The order is the
 * comparators' total order either way. */
#define SIDE_SORT_THREAD_MIN 16384

static void *side_sorts(void *arg) {
  ssa_rank *r = arg;
  ssa_sort_by_start(r->ranges, r->nranges, sizeof *r->ranges, cmp_ranges);
  sort_if_needed(r->syncs, r->nsyncs, sizeof *r->syncs, cmp_syncs);
  sort_if_needed(r->counters, r->ncounters, sizeof *r->counters, cmp_counters);
  return NULL;
}

int ssa_rank_finish(ssa_rank *r) {
  if (r->finished) return 0;
  int rc = ssa_rank_bound_times(r);
  if (rc) return rc;
  pthread_t th;
  int threaded = r->nranges >= SIDE_SORT_THREAD_MIN && sysconf(_SC_NPROCESSORS_ONLN) > 1 &&
                 pthread_create(&th, NULL, side_sorts, r) == 0;
  rc = join_all(r); /* sorts the API calls, joins, links, classifies, sorts the ops */
  if (threaded)
    pthread_join(th, NULL);
  else
    side_sorts(r);
  if (rc) return rc;
  free(r->oplinks);
  r->oplinks = NULL;
  r->noplinks = r->oplinks_cap = 0;
  if (r->nops > 0 && r->napis > 0 && r->joined_ops == 0)
    ssa_rank_warn(r,
                  "rank %d: no operation could be joined to its launch call (no correlation ids)",
                  r->rank);
  ssa_rank_decode_trainer_meta(r);
  r->finished = 1;
  return 0;
}
