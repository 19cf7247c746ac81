/*
 * rank_builder.c — fills one rank of the model from records of the
 * stepscope.h record model, whatever their source (our trace reader, a
 * Kineto importer, the ground-truth generator).
 *
 * Each record is reduced to its compact model struct and appended to the
 * rank's arrays (amortised growth, every allocation checked). Lanes (streams
 * and host threads) are created on first use through a small hash keyed by
 * (kind, id). Records that the metrics do not need (marks, memory events,
 * overhead) are only counted.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_model.h"

static char *dup_or_null(const char *s) {
  if (!s) return NULL;
  return strdup(s);
}

int ssa_rank_init(ssa_rank *r) {
  memset(r, 0, sizeof *r);
  r->rank = -1;
  ssa_strtab_init(&r->strings);
  if (ssa_strtab_intern(&r->strings, "x", 1) == 0) return STEPSCOPE_E_NOMEM;
  return 0;
}

void ssa_rank_free(ssa_rank *r) {
  free(r->path);
  free(r->hostname);
  free(r->device_name);
  free(r->producer);
  free(r->config_json);
  ssa_strtab_free(&r->strings);
  free(r->lanes);
  free(r->lane_slots);
  free(r->ops);
  free(r->apis);
  free(r->ranges);
  free(r->colls);
  free(r->syncs);
  free(r->counters);
  free(r->allocs);
  free(r->op_ranges);
  free(r->anchors);
  free(r->oplinks);
  for (size_t i = 0; i < r->nmeta; i++) {
    free(r->meta[i].key);
    free(r->meta[i].value);
  }
  free(r->meta);
  free(r->moe_marks);
  ssa_text_list_free(r->warnings, r->nwarnings);
  free(r->tally.user);
  if (r->align_input) ssa_rank_align_free(r->align_input);
  free(r->align_input);
  memset(r, 0, sizeof *r);
}

uint32_t ssa_rank_intern(ssa_rank *r, const char *s) {
  if (!s) return 0;
  return ssa_strtab_intern(&r->strings, s, strlen(s));
}

const char *ssa_rank_str(const ssa_rank *r, uint32_t id) {
  return ssa_strtab_get(&r->strings, id);
}

int ssa_rank_set_header(ssa_rank *r, const stepscope_header *h) {
  r->rank = h->rank;
  r->world_size = h->world_size;
  r->local_rank = h->local_rank;
  r->pid = h->pid;
  r->clock_domain = h->clock_domain;
  r->header_start = (int64_t)h->start_ns;
  free(r->hostname);
  free(r->device_name);
  free(r->producer);
  free(r->config_json);
  r->hostname = dup_or_null(h->hostname ? h->hostname : "");
  r->device_name = dup_or_null(h->device_name ? h->device_name : "");
  r->producer = dup_or_null(h->producer ? h->producer : "");
  r->config_json = dup_or_null(h->config_json && h->config_json[0] ? h->config_json : "{}");
  if (!r->hostname || !r->device_name || !r->producer || !r->config_json) return STEPSCOPE_E_NOMEM;
  return 0;
}

int ssa_rank_warn(ssa_rank *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = ssa_text_list_vadd(&r->warnings, &r->nwarnings, &r->warnings_cap, 600, fmt, ap);
  va_end(ap);
  return rc;
}

static uint32_t lane_hash(uint8_t kind, uint64_t id) {
  uint64_t x = id * 0x9E3779B97F4A7C15ull ^ ((uint64_t)kind << 56);
  x ^= x >> 29;
  return (uint32_t)x;
}

static int lane_rehash(ssa_rank *r, uint32_t nslots) {
  uint32_t *slots = calloc(nslots, sizeof *slots);
  if (!slots) return -1;
  for (uint32_t i = 0; i < r->nlanes; i++) {
    uint32_t h = lane_hash(r->lanes[i].kind, r->lanes[i].id) & (nslots - 1);
    while (slots[h])
      h = (h + 1) & (nslots - 1);
    slots[h] = i + 1;
  }
  free(r->lane_slots);
  r->lane_slots = slots;
  r->lane_nslots = nslots;
  return 0;
}

static uint32_t lane_lookup(ssa_rank *r, uint8_t kind, uint64_t id);

/* Records come from a few streams and threads: a small direct-mapped cache
 * of (kind, id) -> lane answers them without hashing. */
uint32_t ssa_rank_lane(ssa_rank *r, uint8_t kind, uint64_t id) {
  unsigned k = ((unsigned)id * 4u + kind) & (SSA_LANE_CACHE - 1);
  uint32_t c = r->lane_cache[k];
  if (c && r->lane_cache_id[k] == id && r->lanes[c - 1].kind == kind) return c - 1;
  uint32_t l = lane_lookup(r, kind, id);
  if (l != SSA_NONE) {
    r->lane_cache[k] = l + 1;
    r->lane_cache_id[k] = id;
  }
  return l;
}

static uint32_t lane_lookup(ssa_rank *r, uint8_t kind, uint64_t id) {
  if (r->lane_nslots) {
    uint32_t h = lane_hash(kind, id) & (r->lane_nslots - 1);
    while (r->lane_slots[h]) {
      ssa_lane *l = &r->lanes[r->lane_slots[h] - 1];
      if (l->kind == kind && l->id == id) return r->lane_slots[h] - 1;
      h = (h + 1) & (r->lane_nslots - 1);
    }
  }
  if (r->nlanes >= 65535) return SSA_NONE; /* lanes are uint16 in ops */
  if ((r->nlanes + 1) * 2 > r->lane_nslots &&
      lane_rehash(r, r->lane_nslots ? r->lane_nslots * 2 : 16))
    return SSA_NONE;
  size_t cap = r->lanes_cap;
  if (ssa_grow((void **)&r->lanes, &cap, r->nlanes + 1, sizeof *r->lanes)) return SSA_NONE;
  r->lanes_cap = (uint32_t)cap;
  uint32_t idx = r->nlanes++;
  memset(&r->lanes[idx], 0, sizeof r->lanes[idx]);
  r->lanes[idx].kind = kind;
  r->lanes[idx].id = id;
  uint32_t h = lane_hash(kind, id) & (r->lane_nslots - 1);
  while (r->lane_slots[h])
    h = (h + 1) & (r->lane_nslots - 1);
  r->lane_slots[h] = idx + 1;
  return idx;
}

/* Device lanes: a stream id names a GPU stream unless a STREAM record said it
 * is a CPU stream; host ops always run on CPU streams. */
static uint32_t device_lane(ssa_rank *r, uint8_t kind, uint64_t stream, uint32_t device) {
  uint32_t l = ssa_rank_lane(r, kind, stream);
  if (l != SSA_NONE && !r->lanes[l].declared) r->lanes[l].device = device;
  return l;
}

static int push_op(ssa_rank *r, int64_t s, int64_t e, uint64_t corr, uint64_t bytes, uint32_t name,
                   uint32_t lane, uint8_t kind, uint8_t cls) {
  if (lane == SSA_NONE) return STEPSCOPE_E_NOMEM;
  if (r->nops == r->ops_cap && ssa_grow((void **)&r->ops, &r->ops_cap, r->nops + 1, sizeof *r->ops))
    return STEPSCOPE_E_NOMEM;
  r->ops[r->nops++] = ssa_op_make(s, e, corr, bytes, name, SSA_NONE, lane, kind, cls);
  return 0;
}

#define PUSH(arr, n, cap)                                                                          \
  (r->n == r->cap && ssa_grow((void **)&r->arr, &r->cap, r->n + 1, sizeof *r->arr)                 \
       ? NULL                                                                                      \
       : &r->arr[r->n++])

int ssa_rank_keep_op_inputs(ssa_rank *r, int64_t start, int64_t end, uint32_t name, uint32_t args,
                            uint32_t lane) {
  ssa_range *x = PUSH(op_ranges, nop_ranges, op_ranges_cap);
  if (!x) return STEPSCOPE_E_NOMEM;
  *x = (ssa_range){.start = start,
                   .end = end < start ? start : end,
                   .name = name,
                   .args = args,
                   .lane = (uint16_t)lane};
  return 0;
}

/* ---- one record of each kind into the rank's tables (ssa_rank_add_record) ---- */

static int add_host_op(ssa_rank *r, const stepscope_host_op *h) {
  uint8_t cls = SSA_CLS_COMPUTE;
  if (h->category == STEPSCOPE_CAT_COMM)
    cls = SSA_CLS_COMM;
  else if (h->category == STEPSCOPE_CAT_MEMCPY)
    cls = SSA_CLS_MEMCPY;
  else if (h->category == STEPSCOPE_CAT_MEMSET)
    cls = SSA_CLS_MEMSET;
  uint32_t lane = device_lane(r, SSA_LANE_CPU, h->stream, 0);
  int rc = push_op(r, (int64_t)h->start_ns, (int64_t)h->end_ns, h->correlation_id, h->bytes,
                   h->name, lane, SSA_OP_HOST, cls);
  if (rc == 0 && h->args)
    rc = ssa_rank_keep_op_inputs(r, (int64_t)h->start_ns, (int64_t)h->end_ns, h->name, h->args,
                                 lane);
  if (rc == 0 && cls == SSA_CLS_COMM && (h->comm_id || h->seq)) {
    /* joined to its COLLECTIVE record by (comm_id, seq) in finish */
    ssa_oplink *k = PUSH(oplinks, noplinks, oplinks_cap);
    if (!k) return STEPSCOPE_E_NOMEM;
    k->comm_id = h->comm_id;
    k->seq = h->seq;
    k->op = (uint32_t)(r->nops - 1);
  }
  return rc;
}

static int add_sync(ssa_rank *r, const stepscope_sync *s) {
  ssa_sync *y = PUSH(syncs, nsyncs, syncs_cap);
  if (!y) return STEPSCOPE_E_NOMEM;
  int64_t start = (int64_t)s->start_ns, end = (int64_t)s->end_ns;
  /* no awaited work named (on_corr 0): a source that knows it sets it after (kineto_mapper.c) */
  *y = (ssa_sync){.start = start,
                  .end = end < start ? start : end,
                  .corr = s->correlation_id,
                  .lane = SSA_NONE,
                  .sync_kind = s->sync_kind};
  if (s->stream) {
    /* the waiting stream: an existing lane of any device kind */
    uint32_t l = SSA_NONE;
    for (uint32_t i = 0; i < r->nlanes && l == SSA_NONE; i++)
      if (r->lanes[i].id == s->stream && r->lanes[i].kind != SSA_LANE_HOST) l = i;
    y->lane = l != SSA_NONE ? l : ssa_rank_lane(r, SSA_LANE_GPU, s->stream);
  }
  return 0;
}

static int add_api(ssa_rank *r, const stepscope_api *a) {
  uint32_t lane = ssa_rank_lane(r, SSA_LANE_HOST, a->thread);
  if (lane == SSA_NONE) return STEPSCOPE_E_NOMEM;
  ssa_api *x = PUSH(apis, napis, apis_cap);
  if (!x) return STEPSCOPE_E_NOMEM;
  x->start = (int64_t)a->start_ns;
  x->end = (int64_t)a->end_ns < x->start ? x->start : (int64_t)a->end_ns;
  x->corr = a->correlation_id;
  x->name = a->name;
  x->lane = (uint16_t)lane;
  x->api_kind = (uint8_t)a->api_kind;
  x->pad = 0;
  return 0;
}

static int add_range(ssa_rank *r, const stepscope_range *g) {
  uint32_t lane = ssa_rank_lane(r, SSA_LANE_HOST, g->thread);
  if (lane == SSA_NONE) return STEPSCOPE_E_NOMEM;
  ssa_range *x = PUSH(ranges, nranges, ranges_cap);
  if (!x) return STEPSCOPE_E_NOMEM;
  x->start = (int64_t)g->start_ns;
  x->end = (int64_t)g->end_ns < x->start ? x->start : (int64_t)g->end_ns;
  x->payload = g->payload;
  x->name = g->name;
  x->domain = g->domain;
  x->args = g->args;
  x->lane = (uint16_t)lane;
  x->payload_kind = (uint8_t)g->payload_kind;
  x->pad = 0;
  return 0;
}

static int add_collective(ssa_rank *r, const stepscope_collective *c) {
  ssa_coll *x = PUSH(colls, ncolls, colls_cap);
  if (!x) return STEPSCOPE_E_NOMEM;
  x->start = (int64_t)c->start_ns;
  x->end = (int64_t)c->end_ns < x->start ? x->start : (int64_t)c->end_ns;
  x->comm_id = c->comm_id;
  x->seq = c->seq;
  x->bytes = c->bytes;
  x->count = c->count;
  x->corr = c->correlation_id;
  x->stream = c->stream;
  x->op = c->op;
  x->datatype = c->datatype;
  x->comm_rank = c->comm_rank;
  x->comm_size = c->comm_size;
  x->name = c->name;
  x->flags = c->flags & 0xffffu;
  x->peer = c->peer;
  x->op_index = SSA_NONE;
  return 0;
}

static int add_stream(ssa_rank *r, const stepscope_stream *s) {
  uint8_t kind = s->stream_kind == STEPSCOPE_STREAM_CPU           ? SSA_LANE_CPU
                 : s->stream_kind == STEPSCOPE_STREAM_HOST_THREAD ? SSA_LANE_HOST
                                                                  : SSA_LANE_GPU;
  uint32_t l = ssa_rank_lane(r, kind, s->stream);
  if (l == SSA_NONE) return STEPSCOPE_E_NOMEM;
  r->lanes[l].name = s->name;
  r->lanes[l].device = s->device;
  r->lanes[l].declared = 1;
  return 0;
}

static int add_counter(ssa_rank *r, const stepscope_counter *c) {
  ssa_counter *x = PUSH(counters, ncounters, counters_cap);
  if (!x) return STEPSCOPE_E_NOMEM;
  x->time = (int64_t)c->time_ns;
  x->value = c->value;
  x->name = c->name;
  x->device = c->device;
  return 0;
}

static int add_metadata(ssa_rank *r, const stepscope_metadata *m) {
  if (!m->key || !m->value_json) return 0;
  ssa_meta *x = PUSH(meta, nmeta, meta_cap);
  if (!x) return STEPSCOPE_E_NOMEM;
  x->key = strdup(m->key);
  x->value = strdup(m->value_json);
  if (!x->key || !x->value) return STEPSCOPE_E_NOMEM;
  return 0;
}

static int add_mark(ssa_rank *r, const stepscope_mark *mk) {
  r->marks++;
  const char *name = ssa_rank_str(r, mk->name);
  if (mk->args && !strcmp(name, "moe.load")) {
    ssa_mark *x = PUSH(moe_marks, nmoe_marks, moe_marks_cap);
    if (!x) return STEPSCOPE_E_NOMEM;
    x->time = (int64_t)mk->time_ns;
    x->args = mk->args;
  }
  return 0;
}

int ssa_rank_add_record(ssa_rank *r, const stepscope_record *rec) {
  r->records++;
  switch (rec->kind) {
  case STEPSCOPE_REC_KERNEL: {
    const stepscope_kernel *k = &rec->u.kernel;
    return push_op(r, (int64_t)k->start_ns, (int64_t)k->end_ns, k->correlation_id, 0, k->name,
                   device_lane(r, SSA_LANE_GPU, k->stream, k->device), SSA_OP_KERNEL,
                   SSA_CLS_COMPUTE);
  }
  case STEPSCOPE_REC_MEMCPY: {
    const stepscope_memcpy *m = &rec->u.memcpy;
    return push_op(r, (int64_t)m->start_ns, (int64_t)m->end_ns, m->correlation_id, m->bytes, 0,
                   device_lane(r, SSA_LANE_GPU, m->stream, m->device), SSA_OP_MEMCPY,
                   SSA_CLS_MEMCPY);
  }
  case STEPSCOPE_REC_MEMSET: {
    const stepscope_memset *m = &rec->u.memset;
    return push_op(r, (int64_t)m->start_ns, (int64_t)m->end_ns, m->correlation_id, m->bytes, 0,
                   device_lane(r, SSA_LANE_GPU, m->stream, m->device), SSA_OP_MEMSET,
                   SSA_CLS_MEMSET);
  }
  case STEPSCOPE_REC_HOST_OP: return add_host_op(r, &rec->u.host_op);
  case STEPSCOPE_REC_SYNC: return add_sync(r, &rec->u.sync);
  case STEPSCOPE_REC_API: return add_api(r, &rec->u.api);
  case STEPSCOPE_REC_RANGE: return add_range(r, &rec->u.range);
  case STEPSCOPE_REC_COLLECTIVE: return add_collective(r, &rec->u.collective);
  case STEPSCOPE_REC_STREAM: return add_stream(r, &rec->u.stream);
  case STEPSCOPE_REC_COUNTER: return add_counter(r, &rec->u.counter);
  case STEPSCOPE_REC_CLOCK_ANCHOR: {
    stepscope_clock_anchor *x = PUSH(anchors, nanchors, anchors_cap);
    if (!x) return STEPSCOPE_E_NOMEM;
    *x = rec->u.clock_anchor;
    return 0;
  }
  case STEPSCOPE_REC_METADATA: return add_metadata(r, &rec->u.metadata);
  case STEPSCOPE_REC_MEMORY:
    r->memory_events++;
    if (rec->u.memory.in_use_bytes > r->memory_peak_bytes)
      r->memory_peak_bytes = rec->u.memory.in_use_bytes;
    return 0;
  case STEPSCOPE_REC_DROPPED:
    r->dropped[rec->u.dropped.source < 8 ? rec->u.dropped.source : 0] += rec->u.dropped.count;
    return 0;
  case STEPSCOPE_REC_MARK: return add_mark(r, &rec->u.mark);
  case STEPSCOPE_REC_OVERHEAD: r->overheads++; return 0;
  case STEPSCOPE_REC_STRING:
  case STEPSCOPE_REC_HEADER:
  case STEPSCOPE_REC_BLOCK: return 0;
  default: r->unknown_records++; return 0;
  }
}

const char *ssa_rank_meta(const ssa_rank *r, const char *key) {
  for (size_t i = r->nmeta; i-- > 0;)
    if (strcmp(r->meta[i].key, key) == 0) return r->meta[i].value;
  return NULL;
}
