/*
 * kineto_mapper.c — the mapper of the Kineto importer: what each event read
 * (a `kevent`, from kineto_reader.c or the split import's store) becomes in
 * the rank model (stepscope.h records through ssa_rank_add_record), and what
 * can only be fixed once the whole file is read (the rank's header, its
 * threads' names). The collectives (the NCCL kernels' records, their groups
 * and sequence numbers, the metadata joined from record_param_comms ops) are
 * kineto_collectives.c's. A file of its own because it knows nothing of JSON:
 * it is the importer's model side, as Perfetto's json parser is to its
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

static uint32_t memcpy_kind_of(const char *name) {
  static const kname_part kinds[] = {
      {"HtoD", STEPSCOPE_MEMCPY_HTOD}, {"DtoH", STEPSCOPE_MEMCPY_DTOH},
      {"DtoD", STEPSCOPE_MEMCPY_DTOD}, {"HtoH", STEPSCOPE_MEMCPY_HTOH},
      {"PtoP", STEPSCOPE_MEMCPY_PTOP},
  };
  return kind_by_name_part(name, kinds, sizeof kinds / sizeof kinds[0], STEPSCOPE_MEMCPY_UNKNOWN);
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
      rc = ssa_kineto_emit_collective(k, s, e, 0);
    else if (rc == 0 && ssa_is_nccl_kernel_name(ev->name))
      rc = ssa_kineto_keep_bare_nccl_kernel(k, s, e, stream, device);
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
      int rc = ssa_kineto_keep_param_comms(k, s, e);
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
  if ((rc = ssa_kineto_finish_collectives(k))) return rc;
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
