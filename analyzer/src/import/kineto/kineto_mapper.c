/*
 * kineto_mapper.c — the mapper of the Kineto importer: what each event read
 * (a `kevent`, from kineto_reader.c or the split import's store) becomes in
 * the rank model (stepscope.h records through ssa_rank_add_record), and what
 * can only be fixed once the whole file is read (collectives' groups and
 * sequence numbers, NCCL metadata joined from record_param_comms ops, the
 * rank's header). A file of its own because it knows nothing of JSON: it
 * is the importer's model side, as Perfetto's json parser is to its
 * tokenizer (kineto_import.h says who does what). The mapping:
 *
 *   cat kernel              -> KERNEL (stream, device, correlation, grid, block)
 *                              + COLLECTIVE when the args carry NCCL metadata
 *   cat gpu_memcpy/memset   -> MEMCPY / MEMSET (bytes, copy kind from the name)
 *   cat cuda_runtime/driver -> API (joined to GPU work by args.correlation
 *                              when the analyzer finishes the rank)
 *   cat user_annotation,
 *       cpu_op              -> RANGE on the host thread (ProfilerStep#N steps)
 *   cat gpu_user_annotation -> RANGE on a per-stream annotation lane
 *                              (GPU-side ProfilerStep#N copies are dropped:
 *                              the host ones define the steps)
 *   cat cuda_sync           -> SYNC naming the awaited work (sync_record):
 *       Stream Wait Event      stream `stream` waits for wait_on_stream's ops launched
 *                              before the cudaEventRecord wait_on_cuda_event_record_corr_id
 *                              (older traces lack it: before the wait call itself)
 *       Event Sync             the host waits for the same (none named: by the call's name)
 *       Stream Sync            the host waits for stream's ops launched before the call
 *       Context Sync           the host waits for every stream's ops launched before it
 *                              (each only with a correlation: the call that waited)
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
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kineto_event.h"
#include "kineto_host.h"
#include "kineto_import.h"
#include "kineto_p2p.h"
#include "kineto_pipeline.h"

/* ---- conversion ---- */

static uint32_t coll_op_of(const char *name) {
  char s[KSHORT];
  size_t n = 0;
  for (const char *p = name; *p && n + 1 < sizeof s; p++)
    if (*p != '_' && *p != ' ') s[n++] = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
  s[n] = 0;
  if (strstr(s, "allreduce")) return STEPSCOPE_COLL_ALLREDUCE;
  if (strstr(s, "reducescatter")) return STEPSCOPE_COLL_REDUCESCATTER;
  if (strstr(s, "allgather")) return STEPSCOPE_COLL_ALLGATHER;
  if (strstr(s, "alltoall")) return STEPSCOPE_COLL_ALLTOALL;
  if (strstr(s, "broadcast")) return STEPSCOPE_COLL_BROADCAST;
  if (strstr(s, "barrier")) return STEPSCOPE_COLL_BARRIER;
  if (strstr(s, "reduce")) return STEPSCOPE_COLL_REDUCE;
  if (strstr(s, "send")) return STEPSCOPE_COLL_SEND;
  if (strstr(s, "recv")) return STEPSCOPE_COLL_RECV;
  return STEPSCOPE_COLL_UNKNOWN;
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

static uint32_t memcpy_kind_of(const char *name) {
  if (strstr(name, "HtoD")) return STEPSCOPE_MEMCPY_HTOD;
  if (strstr(name, "DtoH")) return STEPSCOPE_MEMCPY_DTOH;
  if (strstr(name, "DtoD")) return STEPSCOPE_MEMCPY_DTOD;
  if (strstr(name, "HtoH")) return STEPSCOPE_MEMCPY_HTOH;
  if (strstr(name, "PtoP")) return STEPSCOPE_MEMCPY_PTOP;
  return STEPSCOPE_MEMCPY_UNKNOWN;
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

static int emit_collective(kimport *k, int64_t s, int64_t e, uint32_t extra_flags) {
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

static int keep_param_comms(kimport *k, int64_t s, int64_t e) {
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
  memcpy(p->coll_name, ev->coll_name, sizeof p->coll_name);
  memcpy(p->dtype, ev->dtype, sizeof p->dtype);
  memcpy(p->pg_name, ev->pg_name, sizeof p->pg_name);
  memcpy(p->pg_desc, ev->pg_desc, sizeof p->pg_desc);
  p->has_in = ev->has_in;
  p->has_out = ev->has_out;
  p->has_group_size = ev->has_group_size;
  p->has_seq = ev->has_seq;
  p->in_nelems = ev->in_nelems;
  p->out_nelems = ev->out_nelems;
  p->group_size = ev->group_size;
  p->seq = ev->seq;
  p->has_rank_arg = ev->has_rank_arg;
  p->rank_arg = ev->rank_arg;
  return 0;
}

static int keep_bare_nccl_kernel(kimport *k, int64_t s, int64_t e, uint64_t stream,
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

static int cmp_u32_by_api_corr(const void *pa, const void *pb, void *ctx) {
  const ssa_api *apis = ctx;
  uint64_t a = apis[*(const uint32_t *)pa].corr, b = apis[*(const uint32_t *)pb].corr;
  return (a > b) - (a < b);
}

static int cmp_u32_by_param_ext(const void *pa, const void *pb, void *ctx) {
  const kparam *params = ctx;
  uint64_t a = params[*(const uint32_t *)pa].ext_id, b = params[*(const uint32_t *)pb].ext_id;
  return (a > b) - (a < b);
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
    if (kb->has_corr) {
      size_t lo = 0, hi = n;
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->apis[by_corr[mid]].corr < kb->corr)
          lo = mid + 1;
        else
          hi = mid;
      }
      if (lo < n && r->apis[by_corr[lo]].corr == kb->corr) {
        const ssa_api *a = &r->apis[by_corr[lo]];
        p = param_around(k, r->lanes[a->lane].id, a->start);
      }
    }
    if (!p && kb->has_ext_id) {
      size_t lo = 0, hi = next;
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (k->params[by_ext[mid]].ext_id < kb->ext_id)
          lo = mid + 1;
        else
          hi = mid;
      }
      if (lo < next && k->params[by_ext[lo]].ext_id == kb->ext_id) p = &k->params[by_ext[lo]];
    }
    if (!p) continue; /* infer_stream_collectives takes it */
    /* the kernel, with the op's metadata */
    kevent *ev = &k->ev;
    memcpy(ev->coll_name, p->coll_name, sizeof ev->coll_name);
    memcpy(ev->dtype, p->dtype, sizeof ev->dtype);
    memcpy(ev->pg_name, p->pg_name, sizeof ev->pg_name);
    memcpy(ev->pg_desc, p->pg_desc, sizeof ev->pg_desc);
    size_t len = strlen(p->pg_ranks);
    if (len >= sizeof ev->pg_ranks) len = sizeof ev->pg_ranks - 1;
    memcpy(ev->pg_ranks, p->pg_ranks, len);
    ev->pg_ranks[len] = 0;
    ev->has_in = p->has_in;
    ev->has_out = p->has_out;
    ev->has_group_size = p->has_group_size;
    ev->has_seq = p->has_seq;
    ev->in_nelems = p->in_nelems;
    ev->out_nelems = p->out_nelems;
    ev->group_size = p->group_size;
    ev->seq = p->seq;
    ev->has_stream = ev->has_device = 1;
    ev->stream = ev->tid = kb->stream;
    ev->device = ev->pid = kb->device;
    ev->has_corr = kb->has_corr;
    ev->corr = kb->corr;
    rc = emit_collective(k, kb->start, kb->end, 0);
    joined_out[b] = 1;
  }
  free(by_corr);
  free(by_ext);
  return rc;
}

static int cmp_bare_start(const void *pa, const void *pb, void *ctx) {
  const kbare *bares = ctx;
  const kbare *a = &bares[*(const uint32_t *)pa], *b = &bares[*(const uint32_t *)pb];
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return *(const uint32_t *)pa < *(const uint32_t *)pb ? -1 : 1;
}

/* NCCL kernels with no collective metadata anywhere (no args, no record_param_comms op) become
 * collectives matched by order (STEPSCOPE_COLL_F_INFERRED): the communicator is the kernel's
 * NCCL stream, numbered by first use on this rank (PyTorch gives each process group a stream
 * of its own, created in the same order on every rank), seq its position there (finish_groups),
 * the members every rank of the run (comm_size = world size when the trace gives it). What
 * cannot be known is checked across ranks by collectives.c, which refuses a stream whose
 * ranks disagree. */
static int infer_stream_collectives(kimport *k, const unsigned char *joined) {
  uint32_t *idx = malloc(k->nbares * sizeof *idx);
  uint64_t *streams = malloc(k->nbares * sizeof *streams);
  if (!idx || !streams) {
    free(idx);
    free(streams);
    return STEPSCOPE_E_NOMEM;
  }
  size_t n = 0, nstreams = 0;
  for (size_t b = 0; b < k->nbares; b++)
    if (!joined[b]) idx[n++] = (uint32_t)b;
  qsort_r(idx, n, sizeof *idx, cmp_bare_start, k->bares);
  int rc = 0;
  kevent *ev = &k->ev;
  for (size_t i = 0; i < n && rc == 0; i++) {
    const kbare *kb = &k->bares[idx[i]];
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
    ev->has_stream = ev->has_device = 1;
    ev->stream = ev->tid = kb->stream;
    ev->device = ev->pid = kb->device;
    ev->has_corr = kb->has_corr;
    ev->corr = kb->corr;
    rc = emit_collective(k, kb->start, kb->end, STEPSCOPE_COLL_F_INFERRED);
  }
  if (rc == 0 && n)
    ssa_rank_warn(k->r,
                  "%s: %zu NCCL kernels carry no collective metadata (no args, no "
                  "record_param_comms op around their launch): across ranks they are matched by "
                  "their order on each of %zu NCCL stream(s) (docs/kineto-import.md)",
                  k->name, n, nstreams);
  free(idx);
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

/* The string id of an event name. A trace repeats a few thousand names
 * millions of times: a cache keyed by the length and a few bytes, checked
 * by comparing the text, saves hashing the whole name. */
/* The cache set of a name: its length and five of its 8-byte words (start,
 * quarters, middle, end), mixed by multiplies. Kernel names are long and
 * differ anywhere (template arguments; CUTLASS kernels of one length differ
 * only in a tile shape a quarter of the way in). Each set holds two names,
 * the most recent first. Misses (names interned through the string
 * table's hash) on HTA's df_index_resolver trace, 119 names in 123 thousand
 * named events: 5394 with one name a set and three words, 243 now; on
 * trace_diff control (407 names): 2066, now 805. */
static inline unsigned name_slot(const char *s, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0, f = 0;
  if (n >= 8) {
    memcpy(&a, s, 8);
    memcpy(&b, s + (n - 8) / 4, 8);
    memcpy(&c, s + (n - 8) / 2, 8);
    memcpy(&d, s + (n - 8) / 4 * 3, 8);
    memcpy(&f, s + n - 8, 8);
  } else {
    memcpy(&a, s, n & 7); /* n < 8 */
  }
  uint64_t h = (a * 0x9E3779B97F4A7C15ull) ^ (b * 0xD6E8FEB86659FD93ull) ^
               (c * 0xC2B2AE3D27D4EB4Full) ^ (d * 0xFF51AFD7ED558CCDull) ^
               (f * 0x165667B19E3779F9ull);
  h = (h ^ n) * 0x9E3779B97F4A7C15ull;
  return (unsigned)(h >> 54) & (NAME_CACHE - 1);
}

/* Whether string `id` of t is the n bytes at s: its length from where the
 * next string starts (strings lie back to back, each NUL-terminated), then
 * one memcmp of n bytes, which costs less than strncmp through the PLT
 * (measured: ~1 % of the import of tracelens xdit_sd_3.5). */
static inline int same_name(const ssa_strtab *t, uint32_t id, const char *s, size_t n) {
  size_t end = id + 1 < t->count ? t->offsets[id + 1] : t->bytes_len;
  return end - t->offsets[id] - 1 == n && !memcmp(t->bytes + t->offsets[id], s, n);
}

static uint32_t intern_name(kimport *k, const char *s, size_t n) {
  uint32_t *set = k->name_cache[name_slot(s, n)];
  const ssa_strtab *t = &k->r->strings;
  if (set[0] && same_name(t, set[0], s, n)) return set[0];
  if (set[1] && same_name(t, set[1], s, n)) { /* the most recent first */
    uint32_t id = set[1];
    set[1] = set[0];
    set[0] = id;
    return id;
  }
  uint32_t id = ssa_strtab_intern(&k->r->strings, s, n);
  if (id) {
    set[1] = set[0];
    set[0] = id;
  }
  return id;
}

/* Names the host lane `thread` by `name` (its id is no number to show: lane.by_name), once.
 * 0 or STEPSCOPE_E_NOMEM. */
static int name_lane(kimport *k, uint64_t thread, const char *name) {
  uint32_t l = ssa_rank_lane(k->r, SSA_LANE_HOST, thread);
  if (l == SSA_NONE) return STEPSCOPE_E_NOMEM;
  ssa_lane *lane = &k->r->lanes[l];
  if (lane->by_name) return 0;
  lane->name = intern_name(k, name, strlen(name));
  lane->by_name = 1;
  return lane->name ? 0 : STEPSCOPE_E_NOMEM;
}

/* A module event (module_event) as a range of domain "python_function" on its thread, named
 * by the module ("Linear_0": the prefix dropped). Bad times are counted as other events'. */
static int module_range(kimport *k) {
  kevent *ev = &k->ev;
  int64_t s = ev->ts, d = ev->has_dur ? ev->dur : 0;
  if (s < 0) {
    k->negative_ts++;
    return 0;
  }
  if (d < 0 || (s > 0 && d > INT64_MAX - s)) {
    k->bad_times++;
    return 0;
  }
  const size_t skip = sizeof KMODULE_PREFIX - 1;
  uint32_t name = intern_name(k, ev->name + skip, ev->name_len - skip);
  if (!name) return STEPSCOPE_E_NOMEM;
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_RANGE;
  rec.u.range.start_ns = (uint64_t)s;
  rec.u.range.end_ns = (uint64_t)(s + d);
  rec.u.range.thread = ev->tid;
  rec.u.range.name = name;
  rec.u.range.domain = k->dom_python;
  return ssa_rank_add_record(k->r, &rec);
}

/* A memory event (memory_event) as an allocation of the rank (and its counters). */
static int memory_record(kimport *k) {
  kevent *ev = &k->ev;
  uint32_t lane = ssa_rank_lane(k->r, SSA_LANE_HOST, ev->tid);
  if (lane == SSA_NONE) return STEPSCOPE_E_NOMEM;
  ssa_alloc a = {.time = ev->ts,
                 .bytes = ev->mem_bytes,
                 .allocated = ev->mem_allocated,
                 .reserved = ev->mem_reserved,
                 .addr = ev->mem_addr,
                 .device_type = (int16_t)ev->mem_device_type,
                 .device_id = (int16_t)ev->mem_device_id,
                 .lane = (uint16_t)lane};
  return ssa_rank_add_alloc(k->r, &a);
}

/* A thread_name event's name kept for ssa_kineto_finish_rank (name_threads) when it is a host
 * thread's as Kineto writes them, "thread TID (NAME)" with the event's own tid: NAME, the last
 * one of a thread. Other names (GPU streams' "stream 7 ", an accelerator's queues) are not. */
static int keep_thread_name(kimport *k) {
  const kevent *ev = &k->ev;
  char prefix[40];
  int n = snprintf(prefix, sizeof prefix, "thread %llu (", (unsigned long long)ev->tid);
  size_t len = strlen(ev->arg_name);
  if (strncmp(ev->arg_name, prefix, (size_t)n) || len <= (size_t)n + 1 ||
      ev->arg_name[len - 1] != ')')
    return 0;
  len -= (size_t)n + 1;
  kthread_name *t = NULL;
  for (size_t i = 0; i < k->nthread_names && !t; i++) /* a few threads: a short scan */
    if (k->thread_names[i].tid == ev->tid) t = &k->thread_names[i];
  if (!t) {
    if (k->nthread_names == k->thread_names_cap) {
      size_t cap = k->thread_names_cap ? 2 * k->thread_names_cap : 16;
      kthread_name *a = realloc(k->thread_names, cap * sizeof *a);
      if (!a) return STEPSCOPE_E_NOMEM;
      k->thread_names = a;
      k->thread_names_cap = cap;
    }
    t = &k->thread_names[k->nthread_names++];
    t->tid = ev->tid;
  }
  memcpy(t->name, ev->arg_name + n, len);
  t->name[len] = 0;
  return 0;
}

/* The host threads' lanes labelled by their kept names (the export shows "thread 25286
 * (python3)"); threads without a lane get none (no empty lane is made), nor string tids
 * (named by their text). */
static int name_threads(kimport *k) {
  ssa_rank *r = k->r;
  for (size_t i = 0; i < k->nthread_names; i++) {
    const kthread_name *t = &k->thread_names[i];
    for (uint32_t l = 0; l < r->nlanes; l++) {
      ssa_lane *lane = &r->lanes[l];
      if (lane->kind != SSA_LANE_HOST || lane->id != t->tid || lane->by_name) continue;
      lane->name = intern_name(k, t->name, strlen(t->name));
      if (!lane->name) return STEPSCOPE_E_NOMEM;
    }
  }
  return 0;
}

/* A cuda_sync event (s, e: its times) as a SYNC record naming what it awaited; an unknown
 * kind or one without a correlation is left out (counted as ignored). */
static int sync_record(kimport *k, int64_t s, int64_t e, uint64_t device) {
  const kevent *ev = &k->ev;
  static const struct {
    const char *name;
    uint32_t kind;
  } kinds[] = {{"Stream Wait Event", STEPSCOPE_SYNC_STREAM_WAIT_EVENT},
               {"Event Sync", STEPSCOPE_SYNC_EVENT},
               {"Stream Sync", STEPSCOPE_SYNC_STREAM},
               {"Context Sync", STEPSCOPE_SYNC_CONTEXT}};
  uint32_t kind = STEPSCOPE_SYNC_UNKNOWN;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (!strcmp(ev->name, kinds[i].name)) kind = kinds[i].kind;
  if (kind == STEPSCOPE_SYNC_UNKNOWN || !ev->has_corr || !ev->corr) {
    k->ignored++;
    return 0;
  }
  int by_event = kind == STEPSCOPE_SYNC_STREAM_WAIT_EVENT || kind == STEPSCOPE_SYNC_EVENT;
  uint64_t on_stream = by_event ? (ev->has_wait_stream ? ev->wait_stream : 0)
                       : kind == STEPSCOPE_SYNC_STREAM && ev->has_stream ? ev->stream
                                                                         : 0;
  /* the event's record call, or (a stream's wait in an older trace) the wait call: the
   * event was recorded before it */
  uint64_t on_corr = !by_event                                  ? ev->corr
                     : ev->has_wait_corr                        ? ev->wait_corr
                     : kind == STEPSCOPE_SYNC_STREAM_WAIT_EVENT ? ev->corr
                                                                : 0;
  if (by_event && !on_stream) on_corr = 0; /* the record was not traced: nothing named */
  stepscope_record rec = {.kind = STEPSCOPE_REC_SYNC};
  rec.u.sync = (stepscope_sync){.start_ns = (uint64_t)s,
                                .end_ns = (uint64_t)e,
                                .correlation_id = ev->corr,
                                .stream = kind == STEPSCOPE_SYNC_STREAM_WAIT_EVENT ? ev->stream : 0,
                                .device = (uint32_t)device,
                                .sync_kind = kind};
  if (kind == STEPSCOPE_SYNC_STREAM_WAIT_EVENT && (!ev->has_stream || !ev->stream)) {
    k->ignored++; /* no waiting stream */
    return 0;
  }
  int rc = ssa_rank_add_record(k->r, &rec);
  if (rc) return rc;
  ssa_sync *y = &k->r->syncs[k->r->nsyncs - 1];
  y->on_corr = on_corr;
  y->on_stream = on_stream;
  return 0;
}

int ssa_kineto_convert(kimport *k) {
  kevent *ev = &k->ev;
  k->events++;
  if (memory_event(ev) && ev->has_ts && ev->has_mem && ev->ts >= 0) return memory_record(k);
  if (ev->ph[0] != 'X' || ev->ph[1]) {
    k->ignored++; /* a thread's name is kept for its lane, the event counted as before */
    return thread_name_event(ev, ev->name, ev->name_len) && ev->arg_name[0] ? keep_thread_name(k)
                                                                            : 0;
  }
  if (module_event(ev) && ev->has_ts) /* a module's forward: a range of its thread */
    return module_range(k);
  if (ev->cat == KC_OTHER || !ev->has_ts) {
    if (ev->cat == KC_OTHER && ev->cat_text[0])
      ssa_kineto_unimported_add(&k->unimported, ev->cat_text);
    if (ev->cat == KC_OTHER && ev->has_ts && ev->has_dur && ev->ts >= 0 && ev->dur >= 0 &&
        !memcmp(ev->cat_text, "Trace", sizeof "Trace") && ev->dur <= INT64_MAX - ev->ts) {
      /* the profiling session: where it ends, a step range still open was cut */
      if (!k->r->has_trace_stop || ev->ts + ev->dur > k->r->trace_stop)
        k->r->trace_stop = ev->ts + ev->dur;
      k->r->has_trace_stop = 1;
    }
    k->ignored++;
    return 0;
  }
  int64_t s = ev->ts, d = ev->has_dur ? ev->dur : 0;
  if (s < 0) { /* absurd: left out, counted (docs/kineto-import.md) */
    k->negative_ts++;
    return 0;
  }
  if (d < 0 || (s > 0 && d > INT64_MAX - s)) {
    k->bad_times++;
    return 0;
  }
  int64_t e = s + d;
  if (s < k->first_ts) k->first_ts = s;
  ssa_rank *r = k->r;
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  uint32_t name = ev->name[0] ? intern_name(k, ev->name, ev->name_len) : 0;
  if (ev->name[0] && !name) return STEPSCOPE_E_NOMEM;
  uint64_t device = ev->has_device ? ev->device : ev->pid;
  uint64_t stream = ev->has_stream ? ev->stream : ev->tid;
  int on_thread = ev->cat == KC_RUNTIME || ev->cat == KC_DRIVER || ev->cat == KC_USER_ANNOTATION ||
                  ev->cat == KC_CPU_OP; /* records on the host thread ev->tid */
  if (on_thread && ev->tid_name[0]) {   /* a string tid ("PyTorch Profiler"): shown by it */
    int rc = name_lane(k, ev->tid, ev->tid_name);
    if (rc) return rc;
  }
  if (device < KDEVICES && (ev->cat == KC_KERNEL || ev->cat == KC_MEMCPY || ev->cat == KC_MEMSET))
    k->device_use[device]++;
  switch (ev->cat) {
  case KC_KERNEL: {
    rec.kind = STEPSCOPE_REC_KERNEL;
    stepscope_kernel *x = &rec.u.kernel;
    x->start_ns = (uint64_t)s;
    x->end_ns = (uint64_t)e;
    x->correlation_id = ev->has_corr ? ev->corr : 0;
    x->stream = stream;
    x->name = name;
    x->device = (uint32_t)device;
    memcpy(x->grid, ev->grid, sizeof x->grid);
    memcpy(x->block, ev->block, sizeof x->block);
    int rc = ssa_rank_add_record(r, &rec);
    if (rc == 0 && ev->coll_name[0])
      rc = emit_collective(k, s, e, 0);
    else if (rc == 0 && ssa_is_nccl_kernel_name(ev->name))
      rc = keep_bare_nccl_kernel(k, s, e, stream, device);
    return rc;
  }
  case KC_MEMCPY: {
    rec.kind = STEPSCOPE_REC_MEMCPY;
    stepscope_memcpy *x = &rec.u.memcpy;
    x->start_ns = (uint64_t)s;
    x->end_ns = (uint64_t)e;
    x->correlation_id = ev->has_corr ? ev->corr : 0;
    x->stream = stream;
    x->bytes = ev->bytes;
    x->device = (uint32_t)device;
    x->copy_kind = memcpy_kind_of(ev->name);
    return ssa_rank_add_record(r, &rec);
  }
  case KC_MEMSET: {
    rec.kind = STEPSCOPE_REC_MEMSET;
    stepscope_memset *x = &rec.u.memset;
    x->start_ns = (uint64_t)s;
    x->end_ns = (uint64_t)e;
    x->correlation_id = ev->has_corr ? ev->corr : 0;
    x->stream = stream;
    x->bytes = ev->bytes;
    x->device = (uint32_t)device;
    return ssa_rank_add_record(r, &rec);
  }
  case KC_RUNTIME:
  case KC_DRIVER: {
    rec.kind = STEPSCOPE_REC_API;
    stepscope_api *x = &rec.u.api;
    x->start_ns = (uint64_t)s;
    x->end_ns = (uint64_t)e;
    x->correlation_id = ev->has_corr ? ev->corr : 0;
    x->thread = ev->tid;
    x->name = name;
    x->api_kind = ev->cat == KC_RUNTIME ? STEPSCOPE_API_RUNTIME : STEPSCOPE_API_DRIVER;
    return ssa_rank_add_record(r, &rec);
  }
  case KC_USER_ANNOTATION:
  case KC_CPU_OP:
  case KC_GPU_USER_ANNOTATION: {
    uint64_t thread = ev->tid;
    uint32_t domain = ev->cat == KC_USER_ANNOTATION ? k->dom_user
                      : ev->cat == KC_CPU_OP        ? k->dom_cpu
                                                    : k->dom_gpu;
    if (ev->cat == KC_GPU_USER_ANNOTATION) {
      if (!strncmp(ev->name, "ProfilerStep#", 13)) { /* the host range defines the step */
        k->ignored++;
        return 0;
      }
      thread = 0x6b00000000000000ull ^ stream; /* an annotation lane per stream */
      char label[64];
      snprintf(label, sizeof label, "GPU annotations, stream %llu", (unsigned long long)stream);
      int rc = name_lane(k, thread, label);
      if (rc) return rc;
    }
    if (ev->cat == KC_CPU_OP && ev->coll_name[0] && !strcmp(ev->name, "record_param_comms")) {
      int rc = keep_param_comms(k, s, e);
      if (rc) return rc;
    }
    rec.kind = STEPSCOPE_REC_RANGE;
    stepscope_range *x = &rec.u.range;
    x->start_ns = (uint64_t)s;
    x->end_ns = (uint64_t)e;
    x->thread = thread;
    x->name = name;
    x->domain = domain;
    if (ev->cat == KC_CPU_OP && ev->inputs_len && !ev->inputs_cut) {
      ev->inputs[ev->inputs_len] = '}'; /* kevent_inputs_put kept the byte */
      x->args = ssa_strtab_intern(&r->strings, ev->inputs, ev->inputs_len + 1);
      if (!x->args) return STEPSCOPE_E_NOMEM;
    }
    return ssa_rank_add_record(r, &rec);
  }
  case KC_CUDA_SYNC: return sync_record(k, s, e, device);
  default: k->ignored++; return 0;
  }
}

/* Sequence numbers and comm ranks of the collectives, once the whole file
 * (and so the rank) is known. */
static int cmp_coll_order(const void *pa, const void *pb, void *ctx) {
  const ssa_coll *colls = ctx;
  const ssa_coll *a = &colls[*(const uint32_t *)pa], *b = &colls[*(const uint32_t *)pb];
  if (a->comm_id != b->comm_id) return a->comm_id < b->comm_id ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return *(const uint32_t *)pa < *(const uint32_t *)pb ? -1 : 1;
}

static int finish_groups(kimport *k) {
  ssa_rank *r = k->r;
  if (r->ncolls == 0) return 0;
  uint32_t *idx = malloc(r->ncolls * sizeof *idx);
  if (!idx) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < r->ncolls; i++)
    idx[i] = (uint32_t)i;
  qsort_r(idx, r->ncolls, sizeof *idx, cmp_coll_order, r->colls);
  uint64_t ordinal = 0;
  for (size_t i = 0; i < r->ncolls; i++) {
    ssa_coll *c = &r->colls[idx[i]];
    if (i == 0 || c->comm_id != r->colls[idx[i - 1]].comm_id) ordinal = 0;
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
  free(idx);
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

static int rank_from_name(const char *name, int *rank) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  const char *p = strstr(base, "rank");
  while (p) {
    const char *q = p + 4;
    if (*q == '-' || *q == '_') q++;
    if (*q >= '0' && *q <= '9') {
      long v = strtol(q, NULL, 10);
      if (v >= 0 && v < INT_MAX) {
        *rank = (int)v;
        return 1;
      }
    }
    p = strstr(p + 4, "rank");
  }
  return 0;
}

/* The place of global rank `rank` among n ranks, -1 when it is not one of them. */
static int place_of(const int *ranks, int n, int rank) {
  for (int i = 0; i < n; i++)
    if (ranks[i] == rank) return i;
  return -1;
}

/* A pipeline stage (kineto_pipeline.c): in the process group that distributedInfo.pg_config
 * names as the rank's pipeline, told apart from the job's other pipelines by the rank's place
 * in its data-parallel group (else its pipeline's lowest rank); without one, the group that its
 * point-to-point record_param_comms ops name (kineto_p2p.c), else the world. */
static int pipeline(kimport *k, ssa_rank *r, int rank) {
  ssa_kineto_pp pp = {rank, k->world, rank, k->world, NULL, 1, 0, 0};
  int stage = place_of(k->pp_ranks, k->npp_ranks, rank);
  if (stage >= 0) {
    int lowest = k->pp_ranks[0];
    for (int i = 1; i < k->npp_ranks; i++)
      if (k->pp_ranks[i] < lowest) lowest = k->pp_ranks[i];
    int dp_place = place_of(k->dp_ranks, k->ndp_ranks, rank);
    pp.stage = stage;
    pp.stages = k->npp_ranks;
    pp.ranks = k->pp_ranks;
    pp.dp = dp_place >= 0 ? k->ndp_ranks : k->world / k->npp_ranks;
    pp.dp_rank = dp_place >= 0 ? dp_place : lowest;
    pp.from_groups = 1;
    return ssa_kineto_pipeline(r, k->name, &pp);
  }
  int group[KGROUP_RANKS]; /* no group named as the pipeline: the one its sends go through */
  int n = ssa_kineto_p2p_group(k->params, k->nparams, rank, group, KGROUP_RANKS);
  if (n >= 2 && n < k->world) {
    pp.stage = place_of(group, n, rank);
    pp.stages = n;
    pp.ranks = group;
    pp.dp = k->world / n;
    pp.dp_rank = group[0];
    for (int i = 1; i < n; i++)
      if (group[i] < pp.dp_rank) pp.dp_rank = group[i];
    pp.from_groups = 1;
  }
  return ssa_kineto_pipeline(r, k->name, &pp);
}

int ssa_kineto_finish_rank(kimport *k) {
  ssa_rank *r = k->r;
  int rc_names = name_threads(k);
  if (rc_names) return rc_names;
  int rank = 0;
  if (k->has_rank)
    rank = k->rank;
  else if (!rank_from_name(k->name, &rank))
    ssa_rank_warn(r, "%s: no distributedInfo.rank and no rank in the file name: taken as rank 0",
                  k->name);
  /* the device this rank used most */
  uint64_t best = 0;
  int dev = -1;
  for (int d = 0; d < KDEVICES; d++)
    if (k->device_use[d] > best) {
      best = k->device_use[d];
      dev = d;
    }
  const char *dname = dev >= 0 && k->device_names[dev] ? k->device_names[dev] : "";
  if (!dname[0])
    for (int d = 0; d < KDEVICES && !dname[0]; d++)
      if (k->device_names[d]) dname = k->device_names[d];
  stepscope_header h;
  memset(&h, 0, sizeof h);
  h.rank = rank;
  h.world_size = k->world;
  h.local_rank = dev >= 0 ? dev : 0;
  h.clock_domain = STEPSCOPE_CLOCK_REALTIME;
  h.start_ns = (uint64_t)(k->first_ts == INT64_MAX ? 0 : k->first_ts);
  h.hostname = k->host_name;
  h.producer = "PyTorch profiler (Kineto JSON)";
  h.device_name = dname;
  h.config_json = "{}";
  int rc = ssa_rank_set_header(r, &h);
  if (rc) return rc;
  if (k->has_base) {
    /* trace time t (ns since the base) is realtime base + t */
    stepscope_record rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = STEPSCOPE_REC_CLOCK_ANCHOR;
    rec.u.clock_anchor.trace_ns = 0;
    rec.u.clock_anchor.realtime_ns = (uint64_t)k->base_ns;
    rec.u.clock_anchor.monotonic_ns = 0;
    if ((rc = ssa_rank_add_record(r, &rec))) return rc;
    r->clock_domain = STEPSCOPE_CLOCK_CUPTI;
  }
  char layout[96];
  snprintf(layout, sizeof layout, "{\"world\":%d,\"rank\":%d}", k->world, rank);
  stepscope_record m;
  memset(&m, 0, sizeof m);
  m.kind = STEPSCOPE_REC_METADATA;
  m.u.metadata.key = "layout";
  m.u.metadata.value_json = layout;
  if (k->world > 0 && (rc = ssa_rank_add_record(r, &m))) return rc;
  if ((rc = finish_bare_nccl_kernels(k))) return rc;
  if ((rc = finish_groups(k))) return rc;
  /* a pipeline stage: its schedule and micro-batches (kineto_pipeline.c) */
  if ((rc = pipeline(k, r, rank))) return rc;
  /* what the trace cannot show (kineto_host.c): absurd times, no device */
  uint64_t far = ssa_kineto_drop_far_times(r, SSA_KINETO_FAR_NS);
  if (k->negative_ts || far) {
    ssa_rank_warn(
        r,
        "%s: %llu events with absurd timestamps left out (%llu with a negative ts, %llu more "
        "than a day from the trace's median time)",
        k->name, (unsigned long long)(k->negative_ts + far), (unsigned long long)k->negative_ts,
        (unsigned long long)far);
    if (far) r->header_start = ssa_kineto_first_time(r);
  }
  if (r->nops == 0 && (rc = ssa_kineto_host_timeline(r, k->name, &k->unimported))) return rc;
  if (k->js.bad_utf8)
    ssa_rank_warn(r, "%s: %llu invalid UTF-8 sequences replaced by U+FFFD (first at byte %llu)",
                  k->name, (unsigned long long)k->js.bad_utf8,
                  (unsigned long long)k->js.first_bad_utf8_offset);
  if (k->bad_times)
    ssa_rank_warn(r, "%s: %llu events with a negative or overflowing duration ignored", k->name,
                  (unsigned long long)k->bad_times);
  if (k->truncated_names)
    ssa_rank_warn(r, "%s: %llu event names longer than %d bytes were cut", k->name,
                  (unsigned long long)k->truncated_names, KNAME_MAX - 1);
  return 0;
}
