/*
 * kineto_source.c — imports a PyTorch profiler (Kineto) trace into a model
 * rank. See kineto_source.h and docs/kineto-import.md.
 *
 * How it works: the document is pulled token by token (json_stream.c).
 * Top-level keys that matter are `distributedInfo` (rank, world size),
 * `deviceProperties` (device names), `baseTimeNanoseconds` (newer Kineto
 * writes `ts` relative to it) and `traceEvents`; a top-level array is taken
 * as the event list itself. Each event object is read into one fixed-size
 * `kevent` (kineto_event.h: only the fields and args the mapping uses;
 * everything else is skipped without being stored) and converted at once.
 * An event is first offered to kineto_fast.c, which reads the common case
 * whole over the buffer; what it does not take is read here token by
 * token, with every check and message (next_element). The mapping:
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
 *
 * Times: `ts` and `dur` are microseconds with up to three (or more)
 * decimals; they are converted to integer ns from their decimal text
 * (js_tok_scaled), never through a double, so
 * 1700000000123.456 us is exactly 1700000000123456 ns.
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
#include "kineto_source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "gzip_whole.h"
#include "inflate_pipe.h"
#include "json_scan.h"
#include "json_stream.h"
#include "kineto_event.h"
#include "kineto_fast.h"
#include "kineto_host.h"
#include "kineto_split.h"

#define KDEVICES   64
#define NAME_CACHE 1024 /* sets of kimport.name_cache, two names each (a power of two) */

/* A process group seen on this rank. */
typedef struct kgroup {
  uint64_t comm_id;
  int *ranks; /* parsed member list (may be empty) */
  size_t nranks;
  uint64_t with_seq, without_seq;
} kgroup;

/* NCCL metadata seen on a `record_param_comms` CPU op (older PyTorch puts it
 * only there, not on the kernel), kept until the whole file is read. */
typedef struct kparam {
  int64_t start, end;
  uint64_t tid, ext_id;
  int has_ext_id;
  char coll_name[KSHORT], dtype[KSHORT], pg_name[KSHORT], pg_desc[KSHORT];
  char *pg_ranks; /* normalised "0,1,2,3" (owned) */
  int has_in, has_out, has_group_size, has_seq;
  uint64_t in_nelems, out_nelems, group_size, seq;
} kparam;

/* An NCCL kernel (by name) that carried no metadata of its own. */
typedef struct kbare {
  int64_t start, end;
  uint64_t corr, ext_id, stream, device;
  int has_corr, has_ext_id;
} kbare;

typedef struct kimport {
  js_stream js;
  ssa_rank *r;
  const char *name; /* file name for messages */
  stepscope_error *err;
  kevent ev;
  int rank, world;
  int has_rank;
  int has_base;
  int64_t base_ns;
  char *device_names[KDEVICES];
  uint64_t device_use[KDEVICES];
  int64_t first_ts;
  kgroup *groups;
  size_t ngroups, groups_cap;
  kparam *params;
  size_t nparams, params_cap;
  kbare *bares;
  size_t nbares, bares_cap;
  uint64_t events, ignored, bad_times, truncated_names;
  uint64_t events_whole, events_by_token; /* how each event object was read */
  uint64_t negative_ts;                   /* events with ts < 0: left out */
  ssa_kineto_unimported unimported;       /* categories of complete events not imported */
  char host_name[KSHORT];                 /* top-level or distributedInfo host_name */
  uint32_t dom_user, dom_cpu, dom_gpu, id_none;
  uint32_t name_cache[NAME_CACHE][2]; /* recent event names: string id by a cheap key */
  /* one document on two threads (kineto_split.h) */
  struct ksplit_out *store;       /* the helper's import: events stored here, not converted */
  ssa_split *split;               /* the caller's import: the helper */
  int fast;                       /* events read whole when they can be (kineto_fast.c) */
  const unsigned char *fast_next; /* the end of the event just read whole, or NULL */
  ssa_skip_templates templates; /* the fast path's: the rests of skipped events (skip_template.h) */
  struct ksplit_out *split_res; /* the caller's import: what the helper stored */
} kimport;

/* ---- small helpers ---- */

static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = 0;
}

static int set_error(kimport *k, int code, uint64_t offset, const char *what) {
  if (k->err) {
    k->err->code = code;
    k->err->offset = offset;
    snprintf(k->err->message, sizeof k->err->message, "%s: byte %llu of the JSON text: %s", k->name,
             (unsigned long long)offset, what);
  }
  return code;
}

static int js_error(kimport *k) {
  return set_error(k, STEPSCOPE_E_FORMAT, k->js.error_offset, k->js.error);
}

/* A number token as u64 (negative or fractional: 0 returned, ok = 0). */
static int tok_u64(kimport *k, js_kind t, uint64_t *out) {
  if (t == JS_NUMBER) return js_tok_u64(&k->js, out);
  if (t == JS_STRING) {
    /* some producers quote numbers */
    char *end;
    unsigned long long v = strtoull(k->js.tok, &end, 10);
    if (end != k->js.tok && *end == 0 && k->js.tok[0] != '-') {
      *out = v;
      return 1;
    }
  }
  return 0;
}

/* pid / tid: a number, or a string (hashed; "Spans", "PyTorch Profiler"). */
static uint64_t tok_id(kimport *k, js_kind t) {
  uint64_t v = 0;
  if (t == JS_NUMBER) {
    int64_t s;
    if (js_tok_u64(&k->js, &v)) return v;
    if (js_number_i64(k->js.tok, &s)) return (uint64_t)s;
    return sc_fnv1a_str(SC_FNV1A_INIT, k->js.tok);
  }
  if (t == JS_STRING) return sc_fnv1a_str(SC_FNV1A_INIT, k->js.tok);
  return 0;
}

/* ---- args ---- */

static int read_u32_triple(kimport *k, js_kind t, uint32_t out[3]) {
  if (t != JS_BEGIN_ARRAY) return js_skip_rest(&k->js, t);
  for (int i = 0;; i++) {
    js_kind e = js_next(&k->js);
    if (e == JS_END_ARRAY) return 0;
    if (e == JS_ERROR) return -1;
    uint64_t v;
    if (e == JS_NUMBER && i < 3 && js_tok_u64(&k->js, &v))
      out[i] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
    if (js_skip_rest(&k->js, e)) return -1;
  }
}

static int read_args(kimport *k) {
  kevent *ev = &k->ev;
  for (;;) {
    js_kind t = js_next_member(&k->js);
    if (t == JS_END_OBJECT) return 0;
    if (t != JS_KEY) return -1;
    int key = args_key(k->js.tok, k->js.len); /* the key text lives until the next token */
    if (key == A_NONE) {
      if (js_skip(&k->js)) return -1;
      continue;
    }
    js_kind v = js_next(&k->js);
    if (v == JS_ERROR) return -1;
    uint64_t u;
    switch (key) {
    case A_CORRELATION:
      if (tok_u64(k, v, &u)) {
        ev->corr = u;
        ev->has_corr = 1;
      }
      break;
    case A_STREAM:
      if (tok_u64(k, v, &u)) {
        ev->stream = u;
        ev->has_stream = 1;
      }
      break;
    case A_DEVICE:
      if (tok_u64(k, v, &u)) {
        ev->device = u;
        ev->has_device = 1;
      }
      break;
    case A_BYTES:
      if (tok_u64(k, v, &u)) {
        ev->bytes = u;
        ev->has_bytes = 1;
      }
      break;
    case A_EXTERNAL_ID:
      if (tok_u64(k, v, &u)) {
        ev->ext_id = u;
        ev->has_ext_id = 1;
      }
      break;
    case A_GRID:
    case A_BLOCK:
      if (read_u32_triple(k, v, key == A_GRID ? ev->grid : ev->block)) return -1;
      continue;
    case A_COLL_NAME:
      if (v == JS_STRING) copy_tok(ev->coll_name, sizeof ev->coll_name, k->js.tok, k->js.len);
      break;
    case A_DTYPE:
      if (v == JS_STRING) copy_tok(ev->dtype, sizeof ev->dtype, k->js.tok, k->js.len);
      break;
    case A_PG_NAME:
      if (v == JS_STRING || v == JS_NUMBER)
        copy_tok(ev->pg_name, sizeof ev->pg_name, k->js.tok, k->js.len);
      break;
    case A_PG_DESC:
      if (v == JS_STRING) copy_tok(ev->pg_desc, sizeof ev->pg_desc, k->js.tok, k->js.len);
      break;
    case A_PG_RANKS:
      ev->pg_ranks[0] = 0;
      if (v == JS_STRING) {
        kevent_ranks_append(ev, k->js.tok, k->js.len);
      } else if (v == JS_BEGIN_ARRAY) {
        for (;;) {
          js_kind e = js_next(&k->js);
          if (e == JS_END_ARRAY) break;
          if (e == JS_ERROR) return -1;
          if (e == JS_NUMBER)
            kevent_ranks_append(ev, k->js.tok, k->js.len);
          else if (js_skip_rest(&k->js, e))
            return -1;
        }
        continue;
      }
      break;
    case A_IN_NELEMS:
      if (tok_u64(k, v, &u)) {
        ev->in_nelems = u;
        ev->has_in = 1;
      }
      break;
    case A_OUT_NELEMS:
      if (tok_u64(k, v, &u)) {
        ev->out_nelems = u;
        ev->has_out = 1;
      }
      break;
    case A_GROUP_SIZE:
      if (tok_u64(k, v, &u)) {
        ev->group_size = u;
        ev->has_group_size = 1;
      }
      break;
    case A_SEQ:
      if (tok_u64(k, v, &u)) {
        ev->seq = u;
        ev->has_seq = 1;
      }
      break;
    default: break;
    }
    if (js_skip_rest(&k->js, v)) return -1;
  }
}

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

static int emit_collective(kimport *k, int64_t s, int64_t e) {
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
  c->flags = STEPSCOPE_COLL_F_GPU_TIMED |
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

static int join_param_comms(kimport *k) {
  ssa_rank *r = k->r;
  if (k->nbares == 0) return 0;
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
  uint64_t joined = 0, missed = 0;
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
    if (!p) {
      missed++;
      continue;
    }
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
    rc = emit_collective(k, kb->start, kb->end);
    joined++;
  }
  free(by_corr);
  free(by_ext);
  if (rc == 0 && missed)
    ssa_rank_warn(r,
                  "%s: %llu of %llu NCCL kernels without metadata found no record_param_comms op "
                  "around their launch; classified by name",
                  k->name, (unsigned long long)missed, (unsigned long long)(missed + joined));
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

/* Whether convert_event only counts the event (k->events, k->ignored):
 * not a complete one, or a complete one of the host's Python functions
 * (not imported, and not listed among the unimported categories:
 * ssa_kineto_unimported_add). Keep in step with convert_event. */
static int only_counted(const kevent *ev) {
  return ev->ph[0] != 'X' || ev->ph[1] ||
         (ev->cat == KC_OTHER &&
          !memcmp(ev->cat_text, "python_function", sizeof "python_function"));
}

static int convert_event(kimport *k) {
  kevent *ev = &k->ev;
  k->events++;
  if (ev->ph[0] != 'X' || ev->ph[1]) {
    k->ignored++;
    return 0;
  }
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
      rc = emit_collective(k, s, e);
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
    return ssa_rank_add_record(r, &rec);
  }
  default: k->ignored++; return 0;
  }
}

static int split_store(kimport *k);

/* Reads one event object (its '{' already consumed) into k->ev and converts
 * it (or, on the split helper's thread, stores it: kineto_split.h). */
static int read_event(kimport *k) {
  kevent *ev = &k->ev;
  kevent_clear(ev);
  for (;;) {
    js_kind t = js_next_member(&k->js);
    if (t == JS_END_OBJECT) break;
    if (t != JS_KEY) return js_error(k);
    int key = event_key(k->js.tok, k->js.len); /* the key text lives until the next token */
    if (key == E_NONE) {
      if (js_skip(&k->js)) return js_error(k);
      continue;
    }
    js_kind v = js_next(&k->js);
    if (v == JS_ERROR) return js_error(k);
    switch (key) {
    case E_ARGS:
      if (v == JS_BEGIN_OBJECT && !args_unused(ev)) {
        if (read_args(k)) return js_error(k);
        continue;
      }
      break; /* skipped whole below (checked) */
    case E_PH:
      if (v == JS_STRING) copy_tok(ev->ph, sizeof ev->ph, k->js.tok, k->js.len);
      break;
    case E_CAT:
      if (v == JS_STRING) {
        ev->cat = cat_of(k->js.tok, k->js.len);
        if (ev->cat == KC_OTHER) copy_tok(ev->cat_text, sizeof ev->cat_text, k->js.tok, k->js.len);
      }
      break;
    case E_NAME:
      if (v == JS_STRING) {
        if (k->js.len >= sizeof ev->name) k->truncated_names++;
        copy_tok(ev->name, sizeof ev->name, k->js.tok, k->js.len);
        /* decoded strings hold no NUL (\u0000 becomes U+FFFD) */
        ev->name_len = k->js.len < sizeof ev->name ? k->js.len : sizeof ev->name - 1;
      }
      break;
    case E_TS:
    case E_DUR: {
      int64_t ns;
      if (v == JS_NUMBER) {
        if (!js_tok_scaled(&k->js, 3, &ns))
          return set_error(k, STEPSCOPE_E_FORMAT, k->js.tok_offset,
                           key == E_TS ? "\"ts\" does not fit in 64-bit nanoseconds"
                                       : "\"dur\" does not fit in 64-bit nanoseconds");
        if (key == E_TS) {
          ev->ts = ns;
          ev->has_ts = 1;
        } else {
          ev->dur = ns;
          ev->has_dur = 1;
        }
      }
      break;
    }
    case E_PID: ev->pid = tok_id(k, v); break;
    case E_TID: ev->tid = tok_id(k, v); break;
    default: break;
    }
    if (js_skip_rest(&k->js, v)) return js_error(k);
    if ((key == E_CAT && skip_unimported(ev)) || (key == E_PH && skip_not_complete(ev))) {
      if (js_skip_object_rest(&k->js)) return js_error(k);
      break;
    }
  }
  return k->store ? split_store(k) : convert_event(k);
}

static int split_handoff(kimport *k);

/* The next element of the events array: an event is read (whole over the
 * buffer by kineto_fast.c when it can be, else token by token) and
 * converted, or stored on the split helper's thread; anything else is
 * skipped. *t says what came: JS_BEGIN_OBJECT (an event), JS_END_ARRAY (the
 * array's ']', its offset in tok_offset), another value, or JS_ERROR.
 * Returns 0 or an error code. */
static int next_element(kimport *k, js_kind *t) {
  const unsigned char *p = NULL, *e, *end;
  int have = 0;
  if (k->fast_next) {
    /* right after an event read whole: its ',' and the next element's
     * first byte found here, without the stream's bookkeeping (which
     * js_array_took then brings up to date) */
    e = k->js.in + k->js.in_len;
    p = skip_blank(k->fast_next, e);
    if (p < e && *p == ',') {
      p = skip_blank(p + 1, e);
      have = p < e;
    }
    k->fast_next = NULL;
  }
  if (k->fast && (have || js_array_peek(&k->js, &p, &e)) && *p == '{' &&
      (end = ssa_kineto_fast_event(&k->ev, p, e, &k->truncated_names, &k->templates))) {
    js_array_took(&k->js, end);
    k->fast_next = end;
    k->events_whole++;
    *t = JS_BEGIN_OBJECT;
    return k->store ? split_store(k) : convert_event(k);
  }
  *t = js_next(&k->js);
  if (*t == JS_ERROR) return js_error(k);
  if (*t == JS_BEGIN_OBJECT) {
    k->events_by_token++;
    return read_event(k);
  }
  if (*t == JS_END_ARRAY) return 0;
  return js_skip_rest(&k->js, *t) ? js_error(k) : 0;
}

static int read_events(kimport *k) {
  for (;;) {
    js_kind t;
    int rc = next_element(k, &t);
    if (rc) return rc;
    if (t == JS_END_ARRAY) return 0;
    if (t == JS_BEGIN_OBJECT && k->split && k->js.in_len == ssa_split_point(k->split) &&
        (rc = split_handoff(k)))
      return rc;
  }
}

static int read_distributed_info(kimport *k) {
  for (;;) {
    js_kind t = js_next_member(&k->js);
    if (t == JS_END_OBJECT) return 0;
    if (t != JS_KEY) return js_error(k);
    int is_rank = !strcmp(k->js.tok, "rank"), is_world = !strcmp(k->js.tok, "world_size");
    int is_host = !strcmp(k->js.tok, "host_name") || !strcmp(k->js.tok, "hostname");
    js_kind v = js_next(&k->js);
    if (is_host && v == JS_STRING && !k->host_name[0])
      copy_str(k->host_name, sizeof k->host_name, k->js.tok);
    uint64_t u;
    if ((is_rank || is_world) && v == JS_NUMBER && js_tok_u64(&k->js, &u) && u < INT_MAX) {
      if (is_rank) {
        k->rank = (int)u;
        k->has_rank = 1;
      } else
        k->world = (int)u;
    }
    if (js_skip_rest(&k->js, v)) return js_error(k);
  }
}

static int read_device_properties(kimport *k) {
  for (;;) {
    js_kind t = js_next(&k->js);
    if (t == JS_END_ARRAY) return 0;
    if (t == JS_ERROR) return js_error(k);
    if (t != JS_BEGIN_OBJECT) {
      if (js_skip_rest(&k->js, t)) return js_error(k);
      continue;
    }
    uint64_t id = UINT64_MAX;
    char name[KSHORT] = "";
    for (;;) {
      js_kind kk = js_next_member(&k->js);
      if (kk == JS_END_OBJECT) break;
      if (kk != JS_KEY) return js_error(k);
      int is_id = !strcmp(k->js.tok, "id"), is_name = !strcmp(k->js.tok, "name");
      js_kind v = js_next(&k->js);
      if (is_id && v == JS_NUMBER) js_tok_u64(&k->js, &id);
      if (is_name && v == JS_STRING) copy_str(name, sizeof name, k->js.tok);
      if (js_skip_rest(&k->js, v)) return js_error(k);
    }
    if (id < KDEVICES && name[0] && !k->device_names[id]) {
      k->device_names[id] = strdup(name);
      if (!k->device_names[id]) return STEPSCOPE_E_NOMEM;
    }
  }
}

static int read_document(kimport *k) {
  js_kind t = js_next(&k->js);
  if (t == JS_BEGIN_ARRAY) return read_events(k); /* the JSON array form */
  if (t == JS_ERROR) return js_error(k);
  if (t != JS_BEGIN_OBJECT)
    return set_error(k, STEPSCOPE_E_FORMAT, k->js.tok_offset,
                     "not a Kineto trace (expected a JSON object or array)");
  int saw_events = 0;
  for (;;) {
    t = js_next_member(&k->js);
    if (t == JS_END_OBJECT) break;
    if (t != JS_KEY) return js_error(k);
    char key[32];
    copy_str(key, sizeof key, k->js.tok);
    js_kind v = js_next(&k->js);
    if (v == JS_ERROR) return js_error(k);
    int rc = 0;
    if (!strcmp(key, "traceEvents") && v == JS_BEGIN_ARRAY) {
      saw_events = 1;
      rc = read_events(k);
    } else if (!strcmp(key, "distributedInfo") && v == JS_BEGIN_OBJECT) {
      rc = read_distributed_info(k);
    } else if (!strcmp(key, "deviceProperties") && v == JS_BEGIN_ARRAY) {
      rc = read_device_properties(k);
    } else {
      if ((!strcmp(key, "host_name") || !strcmp(key, "hostname")) && v == JS_STRING &&
          !k->host_name[0])
        copy_str(k->host_name, sizeof k->host_name, k->js.tok);
      if (!strcmp(key, "baseTimeNanoseconds") && v == JS_NUMBER) {
        if (!js_tok_scaled(&k->js, 0, &k->base_ns))
          return set_error(k, STEPSCOPE_E_FORMAT, k->js.tok_offset,
                           "\"baseTimeNanoseconds\" does not fit in 64 bits");
        k->has_base = 1;
      }
      if (js_skip_rest(&k->js, v)) return js_error(k);
    }
    if (rc) return rc;
  }
  if (js_next(&k->js) != JS_EOF) return js_error(k);
  if (!saw_events)
    return set_error(k, STEPSCOPE_E_FORMAT, 0, "no \"traceEvents\" array: not a Kineto trace");
  return 0;
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

static int cmp_u64(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a < b ? -1 : a > b;
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
    c->comm_rank = 0;
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
  qsort(corrs, nk, sizeof *corrs, cmp_u64);
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

static int finish_rank(kimport *k) {
  ssa_rank *r = k->r;
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
  if ((rc = join_param_comms(k))) return rc;
  if ((rc = finish_groups(k))) return rc;
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

/* STEPSCOPE_KINETO_FAST=off reads every event token by token (for tests
 * and measurements: the result must not change); STEPSCOPE_KINETO_FAST_TRACE
 * says on stderr how many events each import read which way. */
static int fast_reader_wanted(void) {
  const char *v = getenv("STEPSCOPE_KINETO_FAST");
  return !(v && !strcmp(v, "off"));
}

/* Imports from the read callback, or, when `doc` is not NULL, from the
 * whole document in memory (tokenized in place: doc must be writable). */
static int import_with(js_read_fn read, void *ctx, void *doc, size_t doc_len, ssa_split *sp,
                       struct ksplit_out *res, const char *name, ssa_rank *r,
                       stepscope_error *err) {
  kimport *k = calloc(1, sizeof *k);
  if (!k) return STEPSCOPE_E_NOMEM;
  k->r = r;
  k->name = name;
  k->err = err;
  k->first_ts = INT64_MAX;
  k->split = sp;
  k->split_res = res;
  k->fast = fast_reader_wanted();
  int rc = STEPSCOPE_E_NOMEM;
  if (sp ? js_init_buffer_grow(&k->js, ssa_split_doc(sp), ssa_split_cap(sp), 0, ssa_split_grow, sp)
      : doc ? js_init_buffer(&k->js, doc, doc_len)
            : js_init(&k->js, read, ctx))
    goto out;
  k->dom_user = ssa_rank_intern(r, "user_annotation");
  k->dom_cpu = ssa_rank_intern(r, "cpu_op");
  k->dom_gpu = ssa_rank_intern(r, "gpu_user_annotation");
  if (!k->dom_user || !k->dom_cpu || !k->dom_gpu) goto out;
  rc = read_document(k);
  if (getenv("STEPSCOPE_KINETO_FAST_TRACE"))
    fprintf(stderr, "kineto fast: %s: %llu events read whole, %llu token by token\n", name,
            (unsigned long long)k->events_whole, (unsigned long long)k->events_by_token);
  if (rc == 0) rc = finish_rank(k);
  if (rc == STEPSCOPE_E_NOMEM && err && !err->message[0])
    snprintf(err->message, sizeof err->message, "%s: out of memory while importing", name);
out:
  js_free(&k->js);
  for (size_t i = 0; i < k->ngroups; i++)
    free(k->groups[i].ranks);
  free(k->groups);
  for (size_t i = 0; i < k->nparams; i++)
    free(k->params[i].pg_ranks);
  free(k->params);
  free(k->bares);
  for (int d = 0; d < KDEVICES; d++)
    free(k->device_names[d]);
  free(k);
  return rc;
}

static int import(js_read_fn read, void *ctx, void *doc, size_t doc_len, const char *name,
                  ssa_rank *r, stepscope_error *err) {
  return import_with(read, ctx, doc, doc_len, NULL, NULL, name, r, err);
}

/* ---- file and memory readers ---- */

/* A file, plain or gzip (told by its first two bytes, whatever its name).
 * Plain files are read() straight into the tokenizer's buffer; gzip data is
 * inflated straight into it from a 256 KiB buffer of compressed bytes, so
 * each byte is copied once. Concatenated gzip members are read in turn;
 * anything else after a member ends the input (as gzread does). */
#define ZIN_CAP (256u << 10)

typedef struct file_ctx {
  int fd;
  int gzip;
  unsigned char *zin;        /* compressed input; for a plain file, its first bytes */
  size_t pend_pos, pend_len; /* plain: first bytes not yet handed over */
  int zin_eof;               /* no more bytes in the file */
  z_stream z;
  int z_ready, z_end;
  int failed;
  char msg[128];
} file_ctx;

static long read_retry(int fd, void *buf, size_t n) {
  for (;;) {
    ssize_t got = read(fd, buf, n);
    if (got >= 0 || errno != EINTR) return (long)got;
  }
}

static long file_fail(file_ctx *f, const char *what) {
  snprintf(f->msg, sizeof f->msg, "%s", what);
  f->failed = 1;
  return -1;
}

/* Refills zin when it is empty; 0, or -1 on a read error. */
static int file_fill_zin(file_ctx *f) {
  if (f->z.avail_in > 0 || f->zin_eof) return 0;
  long got = read_retry(f->fd, f->zin, ZIN_CAP);
  if (got < 0) return (int)file_fail(f, strerror(errno));
  if (got == 0) f->zin_eof = 1;
  f->z.next_in = f->zin;
  f->z.avail_in = (uInt)got;
  return 0;
}

static long file_read(void *ctx, void *buf, size_t n) {
  file_ctx *f = ctx;
  if (n > (1u << 30)) n = 1u << 30;
  if (!f->gzip) {
    if (f->pend_pos < f->pend_len) {
      size_t m = f->pend_len - f->pend_pos;
      if (m > n) m = n;
      memcpy(buf, f->zin + f->pend_pos, m);
      f->pend_pos += m;
      return (long)m;
    }
    long got = read_retry(f->fd, buf, n);
    return got < 0 ? file_fail(f, strerror(errno)) : got;
  }
  if (f->z_end) return 0;
  f->z.next_out = buf;
  f->z.avail_out = (uInt)n;
  while (f->z.avail_out > 0) {
    if (file_fill_zin(f)) return -1;
    if (f->z.avail_in == 0) {
      if (f->z.avail_out < n) break; /* hand over what we have; fail on the next call */
      return file_fail(f, "unexpected end of file");
    }
    int zr = inflate(&f->z, Z_NO_FLUSH);
    if (zr == Z_STREAM_END) {
      /* another gzip member may follow */
      if (file_fill_zin(f)) return -1;
      if (f->z.avail_in > 0 && f->z.next_in[0] == 0x1f && inflateReset(&f->z) == Z_OK) continue;
      f->z_end = 1;
      break;
    }
    if (zr != Z_OK && zr != Z_BUF_ERROR)
      return file_fail(f, f->z.msg ? f->z.msg : "inflate failed");
  }
  return (long)(n - f->z.avail_out);
}

typedef struct mem_ctx {
  const unsigned char *p;
  size_t n, pos;
  size_t chunk; /* most bytes per read */
} mem_ctx;

static long mem_read(void *ctx, void *buf, size_t n) {
  mem_ctx *m = ctx;
  size_t left = m->n - m->pos;
  if (n > left) n = left;
  if (n > m->chunk) n = m->chunk;
  memcpy(buf, m->p + m->pos, n);
  m->pos += n;
  return (long)n;
}

/* The whole document tokenized in place (as a gzip file inflated whole is),
 * on a private copy: the fuzz target compares this path with the chunked
 * streaming one. */
int ssa_kineto_load_memory(const void *data, size_t size, const char *name, ssa_rank *r,
                           stepscope_error *err) {
  if (err) memset(err, 0, sizeof *err);
  unsigned char *copy = malloc(size ? size : 1);
  if (!copy) return ssa_kineto_load_memory_chunked(data, size, SIZE_MAX, name, r, err);
  if (size) memcpy(copy, data, size);
  int rc = import(NULL, NULL, copy, size, name, r, err);
  free(copy);
  return rc;
}

int ssa_kineto_load_memory_chunked(const void *data, size_t size, size_t chunk, const char *name,
                                   ssa_rank *r, stepscope_error *err) {
  mem_ctx m = {data, size, 0, chunk ? chunk : 1};
  if (err) memset(err, 0, sizeof *err);
  return import(mem_read, &m, NULL, 0, name, r, err);
}

/* ---- one document on two threads (kineto_split.h) ----
 *
 * The helper's import (split_work) reads the events from the split point
 * with the same read_event as the caller's, into a kimport of its own whose
 * `store` is set: each event is then appended to an arena in a compact form
 * (split_store: the numbers, the name and category text, the NCCL fields
 * only when there are some) instead of being converted. The caller, at the
 * split point inside the events array (split_handoff), converts them in
 * order with convert_event, so records, names and collectives come in the
 * sequential order, and resumes at the ']' where the helper stopped.
 * Events that convert_event only counts (only_counted: ph other than "X",
 * i.e. flows, instants, metadata, two thirds of some traces; Python
 * functions, nine tenths of vLLM's capture traces) are counted by the
 * helper instead of stored. */

typedef struct ksplit_out {
  unsigned char *arena;
  size_t len, cap;
  int ok;       /* the helper reached the array's ']' with no error */
  int depth;    /* the events array's depth it assumed */
  uint64_t end; /* document offset of that ']' */
  uint64_t truncated_names, bad_utf8, first_bad_utf8;
  uint64_t events_whole, events_by_token;
  uint64_t only_counted; /* events convert_event only counts (only_counted): not stored */
} ksplit_out;

enum {
  KS_TS = 1,
  KS_DUR = 2,
  KS_CORR = 4,
  KS_STREAM = 8,
  KS_DEVICE = 16,
  KS_BYTES = 32,
  KS_EXT = 64,
  KS_NCCL = 128
};

typedef struct ksrec {
  int64_t ts, dur;
  uint64_t pid, tid, corr, stream, device, bytes, ext_id;
  uint32_t grid[3], block[3];
  uint32_t name_len;
  uint8_t flags, cat, cat_text_len;
  char ph[4];
} ksrec;

/* The fields copied as they are between a kevent and its stored form, in
 * one list each for split_store and split_load (X-macros): the numbers, the
 * has_ flags (one bit each in ksrec.flags) and, for NCCL metadata, the
 * numbers, flags and short texts of ksnccl. */
#define KSREC_NUMBERS(X) X(ts) X(dur) X(pid) X(tid) X(corr) X(stream) X(device) X(bytes) X(ext_id)
/* one flag per line pair, laid out by hand: clang-format 14 moves this list on every run */
// clang-format off
#define KSREC_FLAGS(X)                                                                             \
  X(has_ts, KS_TS) X(has_dur, KS_DUR) X(has_corr, KS_CORR) X(has_stream, KS_STREAM)                \
  X(has_device, KS_DEVICE) X(has_bytes, KS_BYTES) X(has_ext_id, KS_EXT)
// clang-format on
#define KSNCCL_SCALARS(X)                                                                          \
  X(in_nelems) X(out_nelems) X(group_size) X(seq) X(has_in) X(has_out) X(has_group_size) X(has_seq)
#define KSNCCL_TEXTS(X) X(coll_name) X(dtype) X(pg_name) X(pg_desc)

typedef struct ksnccl {
  uint64_t in_nelems, out_nelems, group_size, seq;
  uint8_t has_in, has_out, has_group_size, has_seq;
  char coll_name[KSHORT], dtype[KSHORT], pg_name[KSHORT], pg_desc[KSHORT];
  uint32_t ranks_len;
} ksnccl;

static int split_put(ksplit_out *o, const void *p, size_t n) {
  if (o->len + n > o->cap) {
    size_t cap = o->cap ? o->cap : (size_t)1 << 20;
    while (cap < o->len + n)
      cap *= 2;
    unsigned char *a = realloc(o->arena, cap);
    if (!a) return -1;
    o->arena = a;
    o->cap = cap;
  }
  memcpy(o->arena + o->len, p, n);
  o->len += n;
  return 0;
}

static int split_store(kimport *k) {
  const kevent *ev = &k->ev;
  ksplit_out *o = k->store;
  if (only_counted(ev)) { /* all convert_event does with them: count */
    o->only_counted++;
    return 0;
  }
  ksrec h;
  memset(&h, 0, sizeof h);
#define PUT(f)           h.f = ev->f;
#define PUT_FLAG(f, bit) h.flags |= ev->f ? bit : 0;
  KSREC_NUMBERS(PUT)
  KSREC_FLAGS(PUT_FLAG)
#undef PUT_FLAG
#undef PUT
  memcpy(h.grid, ev->grid, sizeof h.grid);
  memcpy(h.block, ev->block, sizeof h.block);
  h.name_len = (uint32_t)ev->name_len;
  int nccl = ev->coll_name[0] || ev->dtype[0] || ev->pg_name[0] || ev->pg_desc[0] ||
             ev->pg_ranks[0] || ev->has_in || ev->has_out || ev->has_group_size || ev->has_seq;
  if (nccl) h.flags |= KS_NCCL;
  h.cat = (uint8_t)ev->cat;
  h.cat_text_len = (uint8_t)strlen(ev->cat_text);
  memcpy(h.ph, ev->ph, sizeof h.ph);
  size_t ranks_len = nccl ? strlen(ev->pg_ranks) : 0;
  if (split_put(o, &h, sizeof h) || split_put(o, ev->name, h.name_len) ||
      split_put(o, ev->cat_text, h.cat_text_len))
    return STEPSCOPE_E_NOMEM;
  if (nccl) {
    ksnccl n;
    memset(&n, 0, sizeof n);
#define PUT(f)      n.f = ev->f;
#define PUT_TEXT(f) memcpy(n.f, ev->f, sizeof n.f);
    KSNCCL_SCALARS(PUT)
    KSNCCL_TEXTS(PUT_TEXT)
#undef PUT_TEXT
#undef PUT
    n.ranks_len = (uint32_t)ranks_len;
    if (split_put(o, &n, sizeof n) || split_put(o, ev->pg_ranks, ranks_len))
      return STEPSCOPE_E_NOMEM;
  }
  static const unsigned char zero[8];
  return split_put(o, zero, (8 - o->len % 8) % 8) ? STEPSCOPE_E_NOMEM : 0;
}

/* The stored event at `p` into k->ev; returns the next one. */
static const unsigned char *split_load(kimport *k, const unsigned char *p) {
  kevent *ev = &k->ev;
  const unsigned char *start = p;
  ksrec h;
  memcpy(&h, p, sizeof h);
  p += sizeof h;
#define GET(f)           ev->f = h.f;
#define GET_FLAG(f, bit) ev->f = (h.flags & bit) != 0;
  KSREC_NUMBERS(GET)
  KSREC_FLAGS(GET_FLAG)
#undef GET_FLAG
#undef GET
  memcpy(ev->grid, h.grid, sizeof ev->grid);
  memcpy(ev->block, h.block, sizeof ev->block);
  ev->cat = h.cat;
  memcpy(ev->ph, h.ph, sizeof ev->ph);
  ev->name_len = h.name_len;
  memcpy(ev->name, p, h.name_len);
  ev->name[h.name_len] = 0;
  p += h.name_len;
  memcpy(ev->cat_text, p, h.cat_text_len);
  ev->cat_text[h.cat_text_len] = 0;
  p += h.cat_text_len;
  if (h.flags & KS_NCCL) {
    ksnccl n;
    memcpy(&n, p, sizeof n);
    p += sizeof n;
#define GET(f)      ev->f = n.f;
#define GET_TEXT(f) memcpy(ev->f, n.f, sizeof ev->f);
    KSNCCL_SCALARS(GET)
    KSNCCL_TEXTS(GET_TEXT)
#undef GET_TEXT
#undef GET
    memcpy(ev->pg_ranks, p, n.ranks_len);
    ev->pg_ranks[n.ranks_len] = 0;
    p += n.ranks_len;
  } else {
    ev->coll_name[0] = ev->dtype[0] = ev->pg_name[0] = ev->pg_desc[0] = ev->pg_ranks[0] = 0;
    ev->has_in = ev->has_out = ev->has_group_size = ev->has_seq = 0;
    ev->in_nelems = ev->out_nelems = ev->group_size = ev->seq = 0;
  }
  size_t used = (size_t)(p - start);
  return start + used + (8 - used % 8) % 8;
}

/* The helper's work: the events from `at` to the ']' that closes their
 * array, stored in the ksplit_out `arg`. */
static void split_work(void *arg, ssa_split *sp, const unsigned char *doc, size_t at) {
  ksplit_out *o = arg;
  /* the events array is at depth 2 in the object form, 1 in the array
   * form (the first byte that is not blank says which: the caller never
   * writes to it) */
  size_t i = 0;
  while (i < at && (doc[i] == ' ' || doc[i] == '\n' || doc[i] == '\r' || doc[i] == '\t'))
    i++;
  if (i >= at || (doc[i] != '{' && doc[i] != '[')) return;
  int depth = doc[i] == '{' ? 2 : 1;
  kimport *w = calloc(1, sizeof *w);
  if (!w) return;
  /* in place from `at` over the document's buffer, which is not written
   * (the caller reads it again when it abandons the split) */
  if (js_init_buffer_grow(&w->js, (void *)doc, ssa_split_cap(sp), at, ssa_split_follow, sp)) {
    free(w);
    return;
  }
  js_set_readonly(&w->js);
  js_enter_array_in_place(&w->js, at, depth);
  w->name = "";
  w->store = o;
  w->fast = fast_reader_wanted();
  for (uint64_t n = 0;; n++) {
    if ((n & 255) == 0 && ssa_split_cancelled(sp)) break;
    js_kind t;
    if (next_element(w, &t)) break;
    if (t == JS_END_ARRAY) {
      o->ok = w->js.depth == depth - 1;
      o->end = w->js.tok_offset;
      break;
    }
  }
  o->depth = depth;
  o->truncated_names = w->truncated_names;
  o->events_whole = w->events_whole;
  o->events_by_token = w->events_by_token;
  o->bad_utf8 = w->js.bad_utf8;
  o->first_bad_utf8 = w->js.first_bad_utf8_offset;
  js_free(&w->js);
  free(w);
}

/* After an event, with the caller's view ending at the split point: when
 * only a ',' and blanks lie before it inside the events array, the helper's
 * events are converted here and the tokenizer goes on at their ']'. */
static int split_handoff(kimport *k) {
  k->fast_next = NULL; /* the stream may go on elsewhere */
  if (!js_at_array_gap(&k->js)) return 0;
  size_t visible = ssa_split_finish(k->split);
  const ksplit_out *o = k->split_res;
  if (!o->ok || o->depth != js_depth(&k->js)) return 0; /* read sequentially from here */
  for (const unsigned char *p = o->arena, *e = o->arena + o->len; p < e;) {
    p = split_load(k, p);
    int rc = convert_event(k);
    if (rc) return rc;
  }
  k->truncated_names += o->truncated_names;
  k->events += o->only_counted;
  k->ignored += o->only_counted;
  k->events_whole += o->events_whole;
  k->events_by_token += o->events_by_token;
  if (o->bad_utf8) {
    if (!k->js.bad_utf8) k->js.first_bad_utf8_offset = o->first_bad_utf8;
    k->js.bad_utf8 += o->bad_utf8;
  }
  js_resume_at(&k->js, o->end, visible);
  ssa_split_used(k->split);
  return 0;
}

/* Imports the file on `fd` (plain, or gzip with `size` bytes of text per its
 * trailer) through the split: 1 and the import's status in *rc_out, or 0
 * when the helper cannot be had (read the file another way). */
static int import_split(int fd, int gzip, size_t size, const char *path, ssa_rank *r,
                        stepscope_error *err, int *rc_out) {
  ksplit_out *o = calloc(1, sizeof *o);
  if (!o) return 0;
  ssa_split *sp = ssa_split_open(fd, gzip, size, split_work, o);
  if (!sp) {
    free(o);
    return 0;
  }
  int rc = import_with(NULL, NULL, NULL, 0, sp, o, path, r, err);
  char msg[128];
  if (ssa_split_close(sp, msg, sizeof msg) && err) {
    char m[sizeof err->message];
    if (gzip)
      snprintf(m, sizeof m,
               "%s: gzip data is corrupt or truncated (%s) near byte %llu of the JSON text", path,
               msg, (unsigned long long)err->offset);
    else
      snprintf(m, sizeof m, "%s: read error (%s) near byte %llu", path, msg,
               (unsigned long long)err->offset);
    snprintf(err->message, sizeof err->message, "%s", m);
    err->code = gzip ? STEPSCOPE_E_FORMAT : STEPSCOPE_E_IO;
    rc = err->code;
  }
  free(o->arena);
  free(o);
  *rc_out = rc;
  return 1;
}

/* ---- which way a gzip file is read ----
 *
 * whole:  inflated in one piece with libdeflate (gzip_whole.c), then
 *         tokenized in place; one thread.
 * pipe:   inflated on a second thread (ISA-L, else zlib) into a small ring
 *         of buffers while this thread tokenizes (inflate_pipe.c).
 * stream: inflated with zlib on this thread as the tokenizer reads.
 * The automatic choice, from measurements on 21 real gzip traces of
 * 0.75-4 MB (docs/hta-comparison.md, "Reading gzip"): with ISA-L, the pipe,
 * always: its median wall time was 0.64-0.77 of the whole buffer's where the
 * second core was free, and 0.87-0.96 on one core (taskset), where its CPU
 * time is lower too (ISA-L streams 1.5-1.9 times faster than libdeflate
 * inflates whole with the page faults of its 15-90 MB buffer); 6 files
 * loaded 2 at a time on 2 cores (run_load.c), a pipe thread each: 0.20 s
 * against 0.23 s, less CPU, so no thread budget across files. With zlib in the pipe, the
 * pipe was 1.06-1.29 times slower on one core and slower on most files with
 * two: the whole buffer then, when the file is small enough
 * (ssa_gzip_whole_bound), else the stream. */
#ifdef STEPSCOPE_HAVE_ISAL
#define GZIP_AUTO_PIPE 1
#else
#define GZIP_AUTO_PIPE 0
#endif

static int gzip_mode_from_env(void) {
  const char *v = getenv("STEPSCOPE_KINETO_GZIP");
  if (!v) return SSA_GZIP_AUTO;
  if (!strcmp(v, "whole")) return SSA_GZIP_WHOLE;
  if (!strcmp(v, "pipe")) return SSA_GZIP_PIPE;
  if (!strcmp(v, "stream")) return SSA_GZIP_STREAM;
  return SSA_GZIP_AUTO;
}

static int load_file(const char *path, int mode, size_t whole_max, ssa_rank *r,
                     stepscope_error *err);

int ssa_kineto_source_load(const char *path, ssa_rank *r, stepscope_error *err) {
  return load_file(path, gzip_mode_from_env(), ssa_gzip_whole_bound(), r, err);
}

int ssa_kineto_source_load_whole_max(const char *path, size_t whole_max, ssa_rank *r,
                                     stepscope_error *err) {
  return load_file(path, whole_max ? SSA_GZIP_WHOLE : SSA_GZIP_STREAM, whole_max, r, err);
}

int ssa_kineto_source_load_gzip(const char *path, ssa_gzip_mode mode, ssa_rank *r,
                                stepscope_error *err) {
  return load_file(path, (int)mode, ssa_gzip_whole_bound(), r, err);
}

/* Imports the gzip file on `fd` through a pipe: 1 and the import's status
 * in *rc_out, or 0 when the pipe cannot be had (read the file another way). */
static int import_piped(int fd, const char *path, ssa_rank *r, stepscope_error *err, int *rc_out) {
  ssa_inflate_pipe *p = ssa_inflate_pipe_open(fd, SSA_PIPE_CHUNK, SSA_PIPE_NCHUNKS);
  if (!p) return 0;
  int rc = import(ssa_inflate_pipe_read, p, NULL, 0, path, r, err);
  char msg[128];
  if (ssa_inflate_pipe_close(p, msg, sizeof msg) && err) {
    /* say what failed rather than "read error" */
    char m[sizeof err->message];
    snprintf(m, sizeof m,
             "%s: gzip data is corrupt or truncated (%s) near byte %llu of the JSON text", path,
             msg, (unsigned long long)err->offset);
    snprintf(err->message, sizeof err->message, "%s", m);
    err->code = STEPSCOPE_E_FORMAT;
    rc = err->code;
  }
  *rc_out = rc;
  return 1;
}

/* The text length a gzip file's trailer states (ISIZE, the last member's
 * length mod 2^32): 1, or 0 when it cannot be read or is 0. */
static int gzip_isize(int fd, uint64_t file_size, size_t *out) {
  unsigned char t[4];
  if (file_size < 18 || pread(fd, t, 4, (off_t)(file_size - 4)) != 4) return 0;
  *out = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
  return *out != 0;
}

static int load_file(const char *path, int mode, size_t whole_max, ssa_rank *r,
                     stepscope_error *err) {
  if (err) memset(err, 0, sizeof *err);
  int rc = 0;
  file_ctx f;
  memset(&f, 0, sizeof f);
  /* O_NONBLOCK, then fstat: a FIFO (or device, socket) is refused at once
   * instead of blocking the open or the first read forever. */
  f.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  int not_regular = f.fd >= 0 && (fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode));
  if (f.fd >= 0 && !not_regular) fcntl(f.fd, F_SETFL, fcntl(f.fd, F_GETFL) & ~O_NONBLOCK);
  f.zin = malloc(ZIN_CAP);
  if (f.fd < 0 || not_regular || !f.zin) {
    rc = f.fd < 0 ? STEPSCOPE_E_IO : not_regular ? STEPSCOPE_E_ARGUMENT : STEPSCOPE_E_NOMEM;
    if (err) {
      err->code = rc;
      snprintf(err->message, sizeof err->message, "%s: %s", path,
               f.fd < 0      ? "cannot open"
               : not_regular ? "is not a regular file (a FIFO, device or socket?), expected a "
                               "Kineto trace"
                             : "out of memory");
    }
    goto done;
  }
  posix_fadvise(f.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  /* the first bytes say whether it is gzip */
  long got = read_retry(f.fd, f.zin, ZIN_CAP);
  if (got < 0) {
    rc = STEPSCOPE_E_IO;
    if (err) {
      err->code = rc;
      snprintf(err->message, sizeof err->message, "%s: cannot read (%s)", path, strerror(errno));
    }
    goto done;
  } else if (got >= 2 && f.zin[0] == 0x1f && f.zin[1] == 0x8b) {
    /* large enough: tokenized on two threads (kineto_split.h), its text
     * pulled through the same pipe */
    size_t isize;
    if ((mode == SSA_GZIP_PIPE || mode == SSA_GZIP_AUTO) &&
        gzip_isize(f.fd, (uint64_t)st.st_size, &isize) && isize <= ssa_gzip_whole_bound() &&
        ssa_split_wanted(isize) && import_split(f.fd, 1, isize, path, r, err, &rc))
      goto done;
    if ((mode == SSA_GZIP_PIPE || (mode == SSA_GZIP_AUTO && GZIP_AUTO_PIPE)) &&
        import_piped(f.fd, path, r, err, &rc))
      goto done;
    /* moderate and well-formed: inflated whole with libdeflate, which is
     * three times faster (gzip_whole.h); else streamed with zlib below */
    unsigned char *doc;
    size_t doc_len;
    if (mode != SSA_GZIP_STREAM &&
        ssa_gzip_whole(f.fd, (uint64_t)st.st_size, whole_max, &doc, &doc_len)) {
      rc = import(NULL, NULL, doc, doc_len, path, r, err);
      ssa_gzip_whole_free(doc, doc_len);
      goto done;
    }
    f.gzip = 1;
    f.z.next_in = f.zin;
    f.z.avail_in = (uInt)got;
    if (inflateInit2(&f.z, 15 + 32) != Z_OK)
      rc = STEPSCOPE_E_NOMEM;
    else
      f.z_ready = 1;
  } else if ((uint64_t)st.st_size <= ssa_gzip_whole_bound() &&
             ssa_split_wanted((uint64_t)st.st_size) &&
             import_split(f.fd, 0, (size_t)st.st_size, path, r, err, &rc)) {
    goto done;
  } else {
    f.pend_len = (size_t)got;
    f.zin_eof = got == 0;
  }
  if (rc == 0) {
    rc = import(file_read, &f, NULL, 0, path, r, err);
    if (f.failed && err) {
      /* say what failed rather than "read error" */
      char m[sizeof err->message];
      if (f.gzip)
        snprintf(m, sizeof m,
                 "%s: gzip data is corrupt or truncated (%s) near byte %llu of the JSON text", path,
                 f.msg, (unsigned long long)err->offset);
      else
        snprintf(m, sizeof m, "%s: read error (%s) near byte %llu", path, f.msg,
                 (unsigned long long)err->offset);
      snprintf(err->message, sizeof err->message, "%s", m);
      err->code = f.gzip ? STEPSCOPE_E_FORMAT : STEPSCOPE_E_IO;
      rc = err->code;
    }
  } else if (rc == STEPSCOPE_E_NOMEM && err) {
    err->code = rc;
    snprintf(err->message, sizeof err->message, "%s: out of memory for gzip", path);
  }
done:
  if (f.z_ready) inflateEnd(&f.z);
  if (f.fd >= 0) close(f.fd);
  free(f.zin);
  return rc;
}
