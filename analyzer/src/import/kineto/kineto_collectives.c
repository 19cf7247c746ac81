/*
 * kineto_collectives.c — the collectives of the Kineto importer: an NCCL kernel's collective
 * record (from the metadata on the kernel, or on the record_param_comms CPU op around its
 * launch, or inferred from its name and stream), and what is fixed once the whole file is read
 * (the groups' members, the sequence numbers, the links by correlation). The mapper
 * (kineto_mapper.c) hands it the events; kineto_import.h says who does what.
 *
 * Collectives: comm_id is a 64-bit FNV-1a hash of the process group's name
 * and member list ("Process Group Name" + "Process Group Ranks"), identical
 * on every member. seq is the kernel's "Seq" argument when every collective
 * of the group has one, else the collective's index in time order within
 * its group on this rank (every member issues a group's collectives in the
 * same order). comm_rank is this rank's position in the member list. These
 * are fixed after the whole file is read, when the rank is known.
 *
 * CUDA graphs: kernels replayed from a graph share the correlation id of
 * their cudaGraphLaunch. A collective record is linked to its kernel by
 * correlation only when that id belongs to that one kernel; otherwise the
 * record keeps its own times and the kernel is classified by name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kineto_event.h"
#include "kineto_import.h"

static uint32_t coll_op_of(const char *name) {
  char s[KSHORT];
  size_t n = 0;
  for (const char *p = name; *p && n + 1 < sizeof s; p++)
    if (*p != '_' && *p != ' ') s[n++] = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
  s[n] = 0;
  static const kname_part ops[] = {
      /* "allreduce" before "reduce" */
      {"allreduce", STEPSCOPE_COLL_ALLREDUCE}, {"reducescatter", STEPSCOPE_COLL_REDUCESCATTER},
      {"allgather", STEPSCOPE_COLL_ALLGATHER}, {"alltoall", STEPSCOPE_COLL_ALLTOALL},
      {"broadcast", STEPSCOPE_COLL_BROADCAST}, {"barrier", STEPSCOPE_COLL_BARRIER},
      {"reduce", STEPSCOPE_COLL_REDUCE},       {"send", STEPSCOPE_COLL_SEND},
      {"recv", STEPSCOPE_COLL_RECV},
  };
  return kind_by_name_part(s, ops, sizeof ops / sizeof ops[0], STEPSCOPE_COLL_UNKNOWN);
}

/* The collective an NCCL kernel runs, from its name (ncclDevKernel_AllReduce_Sum_bf16_RING_LL,
 * ncclKernel_SendRecv...). A SendRecv kernel is taken as an all-to-all: PyTorch's all_to_all
 * launches one on every rank of the group, while pipeline send/recv pairs, which cannot be
 * matched without metadata, make the ranks' sequences disagree (collectives.c refuses them). */
static uint32_t nccl_kernel_op(const char *name) {
  if (strstr(name, "SendRecv") || strstr(name, "sendrecv")) return STEPSCOPE_COLL_ALLTOALL;
  return coll_op_of(name);
}

static uint32_t dtype_of(const char *s) {
  static const struct {
    const char *name;
    uint32_t dt;
  } map[] = {
      {"Float", STEPSCOPE_DT_FLOAT32},
      {"float", STEPSCOPE_DT_FLOAT32},
      {"Half", STEPSCOPE_DT_FLOAT16},
      {"BFloat16", STEPSCOPE_DT_BFLOAT16},
      {"Double", STEPSCOPE_DT_FLOAT64},
      {"Int", STEPSCOPE_DT_INT32},
      {"Long", STEPSCOPE_DT_INT64},
      {"Byte", STEPSCOPE_DT_UINT8},
      {"Char", STEPSCOPE_DT_INT8},
      {"Bool", STEPSCOPE_DT_UINT8},
      {"Float8_e4m3fn", STEPSCOPE_DT_FP8_E4M3},
      {"Float8_e5m2", STEPSCOPE_DT_FP8_E5M2},
      {"UInt32", STEPSCOPE_DT_UINT32},
      {"UInt64", STEPSCOPE_DT_UINT64},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (!strcmp(s, map[i].name)) return map[i].dt;
  return STEPSCOPE_DT_UNKNOWN;
}

static kgroup *group_for(kimport *k, uint64_t comm_id, const char *ranks) {
  for (size_t i = 0; i < k->ngroups; i++)
    if (k->groups[i].comm_id == comm_id) return &k->groups[i];
  if (ssa_grow((void **)&k->groups, &k->groups_cap, k->ngroups + 1, sizeof *k->groups)) return NULL;
  kgroup *g = &k->groups[k->ngroups];
  memset(g, 0, sizeof *g);
  g->comm_id = comm_id;
  size_t cnt = 0;
  for (const char *p = ranks; *p; p++)
    cnt += *p == ',';
  if (ranks[0]) {
    g->ranks = malloc((cnt + 1) * sizeof *g->ranks);
    if (!g->ranks) return NULL;
    for (const char *p = ranks; *p;) {
      g->ranks[g->nranks++] = atoi(p);
      while (*p && *p != ',')
        p++;
      if (*p == ',') p++;
    }
  }
  k->ngroups++;
  return g;
}

int ssa_kineto_emit_collective(kimport *k, int64_t s, int64_t e, uint32_t extra_flags) {
  kevent *ev = &k->ev;
  uint32_t op = coll_op_of(ev->coll_name);
  uint32_t dt = dtype_of(ev->dtype);
  uint64_t count = ev->in_nelems > ev->out_nelems ? ev->in_nelems : ev->out_nelems;
  size_t esize = stepscope_datatype_size(dt);
  /* the communicator: name + members; both are equal on every member rank */
  uint64_t h = sc_fnv1a_str(SC_FNV1A_INIT, "pg:");
  h = sc_fnv1a_str(h, ev->pg_name);
  h = sc_fnv1a_str(h, "|");
  h = sc_fnv1a_str(h, ev->pg_ranks);
  if (!ev->pg_name[0] && !ev->pg_ranks[0]) {
    char sz[32];
    snprintf(sz, sizeof sz, "size %llu", (unsigned long long)ev->group_size);
    h = sc_fnv1a_str(h, sz);
  }
  kgroup *g = group_for(k, h, ev->pg_ranks);
  if (!g) return STEPSCOPE_E_NOMEM;
  if (ev->has_seq)
    g->with_seq++;
  else
    g->without_seq++;
  char gname[KSHORT + 8];
  if (ev->pg_desc[0] && strcmp(ev->pg_desc, "undefined") != 0)
    copy_str(gname, sizeof gname, ev->pg_desc);
  else if (ev->pg_name[0])
    snprintf(gname, sizeof gname, "pg %s", ev->pg_name);
  else
    copy_str(gname, sizeof gname, "nccl");
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_COLLECTIVE;
  stepscope_collective *c = &rec.u.collective;
  c->start_ns = (uint64_t)s;
  c->end_ns = (uint64_t)e;
  c->comm_id = h;
  c->seq = ev->has_seq ? ev->seq : 0; /* fixed in finish_groups */
  c->count = count;
  c->bytes = count * (esize ? esize : 1);
  c->stream = ev->has_stream ? ev->stream : ev->tid;
  c->correlation_id = ev->has_corr ? ev->corr : 0;
  c->op = op;
  c->datatype = dt;
  c->peer = -1;
  c->comm_size = (uint32_t)(ev->has_group_size ? ev->group_size : g->nranks);
  c->comm_rank = UINT32_MAX; /* fixed when the rank is known */
  c->device = (uint32_t)(ev->has_device ? ev->device : ev->pid);
  c->flags = STEPSCOPE_COLL_F_GPU_TIMED | extra_flags |
             (op == STEPSCOPE_COLL_SEND || op == STEPSCOPE_COLL_RECV ? STEPSCOPE_COLL_F_P2P : 0);
  c->name = ssa_rank_intern(k->r, gname);
  if (!c->name) return STEPSCOPE_E_NOMEM;
  int rc = ssa_rank_add_record(k->r, &rec);
  if (rc) return rc;
  /* whether it carried an explicit seq: the top bit of the model's datatype,
   * cleared again by finish_groups */
  k->r->colls[k->r->ncolls - 1].datatype = dt | (ev->has_seq ? 0x80000000u : 0);
  return 0;
}

/* ---- NCCL metadata on record_param_comms CPU ops ----
 *
 * Older PyTorch versions write the collective's metadata (name, sizes,
 * dtype, process group) only on the `record_param_comms` CPU op that wraps
 * the collective call, not on the NCCL kernel. Such ops and the NCCL
 * kernels without metadata are kept while the file is read (in any order)
 * and joined at the end: kernel -> (correlation) the runtime call that
 * launched it -> the innermost record_param_comms op on the same host
 * thread whose interval contains that call. When the launch call is
 * missing, the kernel's "External id" equal to the op's is the fallback. */

/* The metadata an op lends its kernels: the fields of the same names in a kevent and a kparam,
 * copied from `from` to `to` (the member list, an array in one and owned text in the other,
 * is the callers'). */
#define COPY_LENT_METADATA(to, from)                                                               \
  do {                                                                                             \
    memcpy((to)->coll_name, (from)->coll_name, sizeof(to)->coll_name);                             \
    memcpy((to)->dtype, (from)->dtype, sizeof(to)->dtype);                                         \
    memcpy((to)->pg_name, (from)->pg_name, sizeof(to)->pg_name);                                   \
    memcpy((to)->pg_desc, (from)->pg_desc, sizeof(to)->pg_desc);                                   \
    (to)->has_in = (from)->has_in;                                                                 \
    (to)->has_out = (from)->has_out;                                                               \
    (to)->has_group_size = (from)->has_group_size;                                                 \
    (to)->has_seq = (from)->has_seq;                                                               \
    (to)->in_nelems = (from)->in_nelems;                                                           \
    (to)->out_nelems = (from)->out_nelems;                                                         \
    (to)->group_size = (from)->group_size;                                                         \
    (to)->seq = (from)->seq;                                                                       \
  } while (0)

int ssa_kineto_keep_param_comms(kimport *k, int64_t s, int64_t e) {
  kevent *ev = &k->ev;
  if (ssa_grow((void **)&k->params, &k->params_cap, k->nparams + 1, sizeof *k->params))
    return STEPSCOPE_E_NOMEM;
  kparam *p = &k->params[k->nparams];
  memset(p, 0, sizeof *p);
  p->pg_ranks = strdup(ev->pg_ranks);
  if (!p->pg_ranks) return STEPSCOPE_E_NOMEM;
  k->nparams++;
  p->start = s;
  p->end = e;
  p->tid = ev->tid;
  p->ext_id = ev->ext_id;
  p->has_ext_id = ev->has_ext_id;
  COPY_LENT_METADATA(p, ev);
  p->has_rank_arg = ev->has_rank_arg;
  p->rank_arg = ev->rank_arg;
  return 0;
}

int ssa_kineto_keep_bare_nccl_kernel(kimport *k, int64_t s, int64_t e, uint64_t stream,
                                     uint64_t device) {
  kevent *ev = &k->ev;
  if (ssa_grow((void **)&k->bares, &k->bares_cap, k->nbares + 1, sizeof *k->bares))
    return STEPSCOPE_E_NOMEM;
  kbare *b = &k->bares[k->nbares++];
  b->start = s;
  b->end = e;
  b->corr = ev->corr;
  b->has_corr = ev->has_corr;
  b->ext_id = ev->ext_id;
  b->has_ext_id = ev->has_ext_id;
  b->stream = stream;
  b->device = device;
  b->op = nccl_kernel_op(ev->name);
  return 0;
}

static int cmp_param_thread_start(const void *pa, const void *pb) {
  const kparam *a = pa, *b = pb;
  if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return (a->end > b->end) - (a->end < b->end);
}

/* The keys the launch calls and the ops are looked up by: item i's correlation, External id. */
static uint64_t api_corr(const void *apis, uint32_t i) {
  return ((const ssa_api *)apis)[i].corr;
}
static uint64_t param_ext(const void *params, uint32_t i) {
  return ((const kparam *)params)[i].ext_id;
}

static int cmp_u32_by_api_corr(const void *pa, const void *pb, void *ctx) {
  uint64_t a = api_corr(ctx, *(const uint32_t *)pa), b = api_corr(ctx, *(const uint32_t *)pb);
  return (a > b) - (a < b);
}

static int cmp_u32_by_param_ext(const void *pa, const void *pb, void *ctx) {
  uint64_t a = param_ext(ctx, *(const uint32_t *)pa), b = param_ext(ctx, *(const uint32_t *)pb);
  return (a > b) - (a < b);
}

/* The item of `items` among the n indexes of `order` (sorted by key_of) whose key is `key`, as
 * an index of items; UINT32_MAX when none is. */
static uint32_t find_by_key(const uint32_t *order, size_t n, uint64_t key,
                            uint64_t (*key_of)(const void *, uint32_t), const void *items) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (key_of(items, order[mid]) < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && key_of(items, order[lo]) == key ? order[lo] : UINT32_MAX;
}

/* The innermost op on thread `tid` whose interval contains time t, or NULL
 * (params sorted by thread, then start). */
static const kparam *param_around(const kimport *k, uint64_t tid, int64_t t) {
  size_t lo = 0, hi = k->nparams;
  while (lo < hi) { /* first index after (tid, t) */
    size_t mid = lo + (hi - lo) / 2;
    const kparam *p = &k->params[mid];
    if (p->tid < tid || (p->tid == tid && p->start <= t))
      lo = mid + 1;
    else
      hi = mid;
  }
  /* the latest start first; nesting is shallow, so look back a little */
  for (size_t i = lo, looked = 0; i > 0 && looked < 64; i--, looked++) {
    const kparam *p = &k->params[i - 1];
    if (p->tid != tid) break;
    if (p->end >= t) return p;
  }
  return NULL;
}

/* The collective of a kept NCCL kernel, its metadata in k->ev already (joined or inferred):
 * the kernel's stream, device, correlation and times. */
static int emit_bare_kernel(kimport *k, const kbare *kb, uint32_t extra_flags) {
  kevent *ev = &k->ev;
  ev->has_stream = ev->has_device = 1;
  ev->stream = ev->tid = kb->stream;
  ev->device = ev->pid = kb->device;
  ev->has_corr = kb->has_corr;
  ev->corr = kb->corr;
  return ssa_kineto_emit_collective(k, kb->start, kb->end, extra_flags);
}

static int join_param_comms(kimport *k, unsigned char *joined_out) {
  ssa_rank *r = k->r;
  if (k->nparams == 0) return 0;
  qsort(k->params, k->nparams, sizeof *k->params, cmp_param_thread_start);
  /* launch calls by correlation */
  uint32_t *by_corr = malloc((r->napis ? r->napis : 1) * sizeof *by_corr);
  if (!by_corr) return STEPSCOPE_E_NOMEM;
  size_t n = 0;
  for (size_t i = 0; i < r->napis; i++)
    if (r->apis[i].corr) by_corr[n++] = (uint32_t)i;
  qsort_r(by_corr, n, sizeof *by_corr, cmp_u32_by_api_corr, r->apis);
  /* ops by External id, for kernels whose launch call is missing */
  uint32_t *by_ext = malloc(k->nparams * sizeof *by_ext);
  if (!by_ext) {
    free(by_corr);
    return STEPSCOPE_E_NOMEM;
  }
  size_t next = 0;
  for (size_t i = 0; i < k->nparams; i++)
    if (k->params[i].has_ext_id) by_ext[next++] = (uint32_t)i;
  qsort_r(by_ext, next, sizeof *by_ext, cmp_u32_by_param_ext, k->params);
  int rc = 0;
  for (size_t b = 0; b < k->nbares && rc == 0; b++) {
    const kbare *kb = &k->bares[b];
    const kparam *p = NULL;
    uint32_t call =
        kb->has_corr ? find_by_key(by_corr, n, kb->corr, api_corr, r->apis) : UINT32_MAX;
    if (call != UINT32_MAX) {
      const ssa_api *a = &r->apis[call];
      p = param_around(k, r->lanes[a->lane].id, a->start);
    }
    uint32_t op = !p && kb->has_ext_id ? find_by_key(by_ext, next, kb->ext_id, param_ext, k->params)
                                       : UINT32_MAX;
    if (op != UINT32_MAX) p = &k->params[op];
    if (!p) continue; /* infer_stream_collectives takes it */
    /* the kernel, with the op's metadata */
    kevent *ev = &k->ev;
    COPY_LENT_METADATA(ev, p);
    size_t len = strlen(p->pg_ranks);
    if (len >= sizeof ev->pg_ranks) len = sizeof ev->pg_ranks - 1;
    memcpy(ev->pg_ranks, p->pg_ranks, len);
    ev->pg_ranks[len] = 0;
    rc = emit_bare_kernel(k, kb, 0);
    joined_out[b] = 1;
  }
  free(by_corr);
  free(by_ext);
  return rc;
}

/* Where a kept kernel or a collective stands in the order they are numbered in: by group
 * (comm_id; 0 for the kept kernels), start, then index (the order is the same every time). */
typedef struct korder {
  uint64_t group;
  int64_t start;
  uint32_t index;
} korder;

static int cmp_korder(const void *pa, const void *pb) {
  const korder *a = pa, *b = pb;
  if (a->group != b->group) return a->group < b->group ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

/* NCCL kernels with no collective metadata anywhere (no args, no record_param_comms op) become
 * collectives matched by order (STEPSCOPE_COLL_F_INFERRED): the communicator is the kernel's
 * NCCL stream, numbered by first use on this rank (PyTorch gives each process group a stream
 * of its own, created in the same order on every rank), seq its position there (finish_groups),
 * the members every rank of the run (comm_size = world size when the trace gives it). What
 * cannot be known is checked across ranks by collectives.c, which refuses a stream whose
 * ranks disagree. */
static int infer_stream_collectives(kimport *k, const unsigned char *joined) {
  korder *order = malloc(k->nbares * sizeof *order);
  uint64_t *streams = malloc(k->nbares * sizeof *streams);
  if (!order || !streams) {
    free(order);
    free(streams);
    return STEPSCOPE_E_NOMEM;
  }
  size_t n = 0, nstreams = 0;
  for (size_t b = 0; b < k->nbares; b++)
    if (!joined[b]) order[n++] = (korder){0, k->bares[b].start, (uint32_t)b};
  qsort(order, n, sizeof *order, cmp_korder);
  int rc = 0;
  kevent *ev = &k->ev;
  for (size_t i = 0; i < n && rc == 0; i++) {
    const kbare *kb = &k->bares[order[i].index];
    size_t ord = 0;
    while (ord < nstreams && streams[ord] != kb->stream)
      ord++;
    if (ord == nstreams) streams[nstreams++] = kb->stream;
    copy_str(ev->coll_name, sizeof ev->coll_name, stepscope_collective_op_name(kb->op));
    ev->dtype[0] = ev->pg_ranks[0] = 0;
    snprintf(ev->pg_name, sizeof ev->pg_name, "stream#%zu", ord);
    snprintf(ev->pg_desc, sizeof ev->pg_desc, "nccl stream #%zu", ord);
    ev->has_in = ev->has_out = ev->has_seq = 0;
    ev->in_nelems = ev->out_nelems = 0;
    ev->has_group_size = k->world > 0;
    ev->group_size = k->world > 0 ? (uint64_t)k->world : 0;
    rc = emit_bare_kernel(k, kb, STEPSCOPE_COLL_F_INFERRED);
  }
  if (rc == 0 && n)
    ssa_rank_warn(k->r,
                  "%s: %zu NCCL kernels carry no collective metadata (no args, no "
                  "record_param_comms op around their launch): across ranks they are matched by "
                  "their order on each of %zu NCCL stream(s) (docs/kineto-import.md)",
                  k->name, n, nstreams);
  free(order);
  free(streams);
  return rc;
}

/* NCCL kernels without metadata on them: joined to record_param_comms ops, else matched by
 * their order on their stream. */
static int finish_bare_nccl_kernels(kimport *k) {
  if (k->nbares == 0) return 0;
  unsigned char *joined = calloc(k->nbares, 1);
  if (!joined) return STEPSCOPE_E_NOMEM;
  int rc = join_param_comms(k, joined);
  if (rc == 0) rc = infer_stream_collectives(k, joined);
  free(joined);
  return rc;
}

/* Sequence numbers and comm ranks of the collectives, once the whole file
 * (and so the rank) is known. */
static int finish_groups(kimport *k) {
  ssa_rank *r = k->r;
  if (r->ncolls == 0) return 0;
  korder *order = malloc(r->ncolls * sizeof *order);
  if (!order) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < r->ncolls; i++)
    order[i] = (korder){r->colls[i].comm_id, r->colls[i].start, (uint32_t)i};
  qsort(order, r->ncolls, sizeof *order, cmp_korder);
  uint64_t ordinal = 0;
  for (size_t i = 0; i < r->ncolls; i++) {
    ssa_coll *c = &r->colls[order[i].index];
    if (i == 0 || c->comm_id != order[i - 1].group) ordinal = 0;
    kgroup *g = NULL;
    for (size_t j = 0; j < k->ngroups; j++)
      if (k->groups[j].comm_id == c->comm_id) g = &k->groups[j];
    int explicit_seq = (c->datatype & 0x80000000u) != 0;
    c->datatype &= 0x7fffffffu;
    if (!(explicit_seq && g && g->without_seq == 0)) c->seq = ordinal;
    ordinal++;
    c->comm_rank = c->flags & STEPSCOPE_COLL_F_INFERRED ? (uint32_t)r->rank : 0;
    if (g)
      for (size_t m = 0; m < g->nranks; m++)
        if (g->ranks[m] == r->rank) c->comm_rank = (uint32_t)m;
  }
  free(order);
  /* CUDA graphs: a correlation id shared by several kernels cannot link a
   * collective to one of them */
  size_t nk = 0;
  for (size_t i = 0; i < r->nops; i++)
    nk += r->ops[i].corr != 0;
  uint64_t *corrs = malloc((nk ? nk : 1) * sizeof *corrs);
  if (!corrs) return STEPSCOPE_E_NOMEM;
  nk = 0;
  for (size_t i = 0; i < r->nops; i++)
    if (r->ops[i].corr) corrs[nk++] = r->ops[i].corr;
  qsort(corrs, nk, sizeof *corrs, ssa_cmp_u64);
  uint64_t unlinked = 0;
  for (size_t i = 0; i < r->ncolls; i++) {
    ssa_coll *c = &r->colls[i];
    if (!c->corr) continue;
    size_t lo = 0, hi = nk;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (corrs[mid] < c->corr)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo + 1 < nk && corrs[lo] == c->corr && corrs[lo + 1] == c->corr) {
      c->corr = 0;
      unlinked++;
    }
  }
  free(corrs);
  if (unlinked)
    ssa_rank_warn(r,
                  "%s: %llu NCCL kernels share their correlation id with other kernels (CUDA graph "
                  "replay); classified by name",
                  k->name, (unsigned long long)unlinked);
  return 0;
}

int ssa_kineto_finish_collectives(kimport *k) {
  int rc = finish_bare_nccl_kernels(k);
  return rc ? rc : finish_groups(k);
}
