/*
 * trace_source.c — the loader source for stepscope's own trace files
 * (`rank-NNNNN.trace.zst`): reads one file with the streaming reader of
 * libstepscope and feeds every record into a model rank.
 *
 * String ids of the file are translated to ids of the rank's string table
 * through a lazily filled array (file id -> model id), so each distinct
 * string is hashed once. The bulk records (kernels, copies, memsets, host
 * ops, API calls) are written straight into the model here, ops staged per
 * lane (ssa_op_stage.h) and merged in order at the end, with exactly the
 * fields ssa_rank_add_record would give them; the other kinds go through
 * ssa_rank_add_record. Reader errors after some records keep what was read
 * and become warnings of the rank (a truncated file is analysed up to its
 * last complete frame); an error before the header fails the rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_import.h"
#include "ssa_model.h"
#include "ssa_op_stage.h"

typedef struct id_map {
  uint32_t *ids; /* file id -> model id + 1 (0 = not yet looked up) */
  size_t cap;
} id_map;

static uint32_t map_id_slow(id_map *m, ssa_rank *r, stepscope_reader *rd, uint32_t id, int *oom);

/* The common case inline: an id already looked up. */
static inline uint32_t map_id(id_map *m, ssa_rank *r, stepscope_reader *rd, uint32_t id, int *oom) {
  if (id == 0) return 0;
  if (id < m->cap && m->ids[id]) return m->ids[id] - 1;
  return map_id_slow(m, r, rd, id, oom);
}

static uint32_t map_id_slow(id_map *m, ssa_rank *r, stepscope_reader *rd, uint32_t id, int *oom) {
  if (id >= m->cap) {
    size_t old = m->cap;
    if (ssa_grow((void **)&m->ids, &m->cap, (size_t)id + 1, sizeof *m->ids)) {
      *oom = 1;
      return 0;
    }
    memset(m->ids + old, 0, (m->cap - old) * sizeof *m->ids);
  }
  if (m->ids[id]) return m->ids[id] - 1;
  const char *s = stepscope_reader_string(rd, id);
  uint32_t mid = 0;
  if (s && s[0]) {
    mid = ssa_rank_intern(r, s);
    if (mid == 0) *oom = 1;
  }
  m->ids[id] = mid + 1;
  return mid;
}

/* The last lanes looked up, by (kind, id), direct-mapped: a trace's records
 * come from a few streams and threads, so most lookups end here without a
 * call (lane indices never change once given). */
#define MEMO 8
typedef struct lane_memo {
  uint64_t id[MEMO];
  uint32_t lane[MEMO]; /* lane + 1, 0 = empty */
  uint8_t kind[MEMO];
} lane_memo;

static inline uint32_t lane_of(lane_memo *m, ssa_rank *r, uint8_t kind, uint64_t id) {
  unsigned k = ((unsigned)id * 4u + kind) & (MEMO - 1);
  if (m->lane[k] && m->id[k] == id && m->kind[k] == kind) return m->lane[k] - 1;
  uint32_t l = ssa_rank_lane(r, kind, id);
  if (l != SSA_NONE) {
    m->id[k] = id;
    m->kind[k] = kind;
    m->lane[k] = l + 1;
  }
  return l;
}

/* A device lane; as in rank_builder.c, a stream's device comes from its ops
 * unless a STREAM record declared it. */
static inline uint32_t device_lane(lane_memo *m, ssa_rank *r, uint8_t kind, uint64_t stream,
                                   uint32_t device) {
  uint32_t l = lane_of(m, r, kind, stream);
  if (l != SSA_NONE && !r->lanes[l].declared) r->lanes[l].device = device;
  return l;
}

/* Capacity reserved up front for the big arrays of a big file, from its
 * size: half a record per compressed byte, more than most files hold (a
 * record takes a few bytes). Growing an array of a few MiB by realloc
 * copies it each time (the C library keeps such blocks on its heap once it
 * has freed bigger ones, as the reader's buffers), which cost as much as
 * filling it; untouched reserved pages cost no memory (what is faulted in
 * ahead is bounded: ssa_prefault_ahead). Where the reservation fails, or
 * the file holds more, arrays simply grow. */
static size_t reserve_for(stepscope_reader *rd, ssa_rank *r) {
  size_t reserve = 0;
  uint64_t est = stepscope_reader_file_size(rd) / 2;
  if (est * sizeof(ssa_op) >= ((uint64_t)1 << 20) && est < ((uint64_t)1 << 32))
    reserve = (size_t)est;
  if (reserve) {
    size_t cap = r->apis_cap;
    if (ssa_grow((void **)&r->apis, &cap, reserve, sizeof *r->apis) == 0) r->apis_cap = cap;
  }
  return reserve;
}

/* What the reader learnt about the file besides its records: its warnings, unknown records,
 * damaged regions, size and how it was closed. */
static void take_reader_state(stepscope_reader *rd, ssa_rank *r) {
  for (size_t i = 0; i < stepscope_reader_warning_count(rd); i++)
    ssa_rank_warn(r, "%s", stepscope_reader_warning(rd, i));
  r->unknown_records += stepscope_reader_unknown_records(rd);
  r->damaged_regions = stepscope_reader_damaged_regions(rd);
  r->damaged_bytes = stepscope_reader_damaged_bytes(rd);
  r->file_bytes = stepscope_reader_file_size(rd);
  r->close_state = stepscope_reader_close_state(rd, &r->close_signal);
}

/* Appends a launch call to the rank's API array (faulting its pages in ahead, as far as
 * *prefaulted says it has); 0, or -1 when out of memory. */
static int add_api(ssa_rank *r, const stepscope_api *a, uint32_t name, uint32_t lane,
                   size_t *prefaulted) {
  if (r->napis == r->apis_cap &&
      ssa_grow((void **)&r->apis, &r->apis_cap, r->napis + 1, sizeof *r->apis))
    return -1;
  if (r->napis >= *prefaulted)
    *prefaulted = ssa_prefault_ahead(r->apis, sizeof *r->apis, r->napis, r->apis_cap);
  ssa_api *x = &r->apis[r->napis++];
  x->start = (int64_t)a->start_ns;
  x->end = (int64_t)a->end_ns < x->start ? x->start : (int64_t)a->end_ns;
  x->corr = a->correlation_id;
  x->name = name;
  x->lane = (uint16_t)lane;
  x->api_kind = (uint8_t)a->api_kind;
  x->pad = 0;
  return 0;
}

/* A MEMORY record as an allocation of the rank (ssa_rank_add_alloc): device 0xffffffff is the
 * host's memory (the trainer's CPU backend; Kineto's CPU, device -1), any other a CUDA
 * device's. Its thread is not recorded. */
static int keep_memory(ssa_rank *r, const stepscope_memory *m) {
  int host = m->device == UINT32_MAX;
  int64_t bytes = m->bytes > INT64_MAX ? INT64_MAX : (int64_t)m->bytes;
  ssa_alloc a = {.time = (int64_t)m->time_ns,
                 .bytes = m->memory_kind == STEPSCOPE_MEM_FREE ? -bytes : bytes,
                 .allocated = m->in_use_bytes > INT64_MAX ? INT64_MAX : (int64_t)m->in_use_bytes,
                 .reserved = -1, /* not recorded */
                 .addr = m->address,
                 .device_type = (int16_t)(host ? 0 : 1),
                 .device_id = (int16_t)(host ? -1 : (int)(m->device & 0x7fff)),
                 .lane = UINT16_MAX};
  return ssa_rank_add_alloc(r, &a);
}

int ssa_trace_source_load(const char *path, const ssa_import_options *opt, ssa_rank *r,
                          stepscope_error *err) {
  stepscope_reader_options ropt = {opt ? opt->inflate : (stepscope_inflate_limits){0, 0}};
  stepscope_reader *rd = stepscope_reader_open_opts(path, &ropt, err);
  if (!rd) return err ? err->code : STEPSCOPE_E_IO;
  int rc = ssa_rank_set_header(r, stepscope_reader_header(rd));
  if (rc) {
    stepscope_reader_close(rd);
    return rc;
  }
  id_map m = {0};
  ssa_op_stage st;
  lane_memo memo = {0};
  ssa_op_stage_begin(&st, reserve_for(rd, r));
  size_t apis_prefaulted = 0;
  int oom = 0;
  stepscope_record rec;
  stepscope_error rerr;
  for (;;) {
    int got = stepscope_reader_next(rd, &rec, &rerr);
    if (got == 0) break;
    if (got < 0) {
      ssa_rank_warn(r, "%s", rerr.message);
      break;
    }
#define MAP(field) (field) = map_id(&m, r, rd, (field), &oom)
    switch (rec.kind) {
    /* the bulk of a trace: straight into the model's arrays */
    case STEPSCOPE_REC_KERNEL: {
      const stepscope_kernel *k = &rec.u.kernel;
      uint32_t name = map_id(&m, r, rd, k->name, &oom);
      uint32_t lane = device_lane(&memo, r, SSA_LANE_GPU, k->stream, k->device);
      r->records++;
      rc = lane == SSA_NONE || oom
               ? STEPSCOPE_E_NOMEM
               : ssa_op_stage_push(&st, lane, (int64_t)k->start_ns, (int64_t)k->end_ns,
                                   k->correlation_id, 0, name, SSA_OP_KERNEL, SSA_CLS_COMPUTE,
                                   SSA_NONE);
      if (rc) goto out;
      continue;
    }
    case STEPSCOPE_REC_MEMCPY:
    case STEPSCOPE_REC_MEMSET: {
      int is_copy = rec.kind == STEPSCOPE_REC_MEMCPY;
      const stepscope_memcpy *c = &rec.u.memcpy;
      const stepscope_memset *z = &rec.u.memset;
      uint32_t lane = is_copy ? device_lane(&memo, r, SSA_LANE_GPU, c->stream, c->device)
                              : device_lane(&memo, r, SSA_LANE_GPU, z->stream, z->device);
      r->records++;
      rc = lane == SSA_NONE ? STEPSCOPE_E_NOMEM
           : is_copy        ? ssa_op_stage_push(&st, lane, (int64_t)c->start_ns, (int64_t)c->end_ns,
                                                c->correlation_id, c->bytes, 0, SSA_OP_MEMCPY,
                                                SSA_CLS_MEMCPY, SSA_NONE)
                            : ssa_op_stage_push(&st, lane, (int64_t)z->start_ns, (int64_t)z->end_ns,
                                                z->correlation_id, z->bytes, 0, SSA_OP_MEMSET,
                                                SSA_CLS_MEMSET, SSA_NONE);
      if (rc) goto out;
      continue;
    }
    case STEPSCOPE_REC_HOST_OP: {
      const stepscope_host_op *h = &rec.u.host_op;
      uint32_t name = map_id(&m, r, rd, h->name, &oom);
      MAP(rec.u.host_op.args); /* interned as ssa_rank_add_record's callers do */
      uint8_t cls = h->category == STEPSCOPE_CAT_COMM     ? SSA_CLS_COMM
                    : h->category == STEPSCOPE_CAT_MEMCPY ? SSA_CLS_MEMCPY
                    : h->category == STEPSCOPE_CAT_MEMSET ? SSA_CLS_MEMSET
                                                          : SSA_CLS_COMPUTE;
      uint32_t lane = device_lane(&memo, r, SSA_LANE_CPU, h->stream, 0);
      uint32_t link = SSA_NONE;
      r->records++;
      if (lane == SSA_NONE || oom) {
        rc = STEPSCOPE_E_NOMEM;
        goto out;
      }
      if (cls == SSA_CLS_COMM && (h->comm_id || h->seq)) {
        /* joined to its COLLECTIVE record by (comm_id, seq) in finish; the
         * op's index is filled in by the merge */
        if (ssa_grow((void **)&r->oplinks, &r->oplinks_cap, r->noplinks + 1, sizeof *r->oplinks)) {
          rc = STEPSCOPE_E_NOMEM;
          goto out;
        }
        link = (uint32_t)r->noplinks++;
        r->oplinks[link] = (ssa_oplink){h->comm_id, h->seq, SSA_NONE};
      }
      rc = ssa_op_stage_push(&st, lane, (int64_t)h->start_ns, (int64_t)h->end_ns, h->correlation_id,
                             h->bytes, name, SSA_OP_HOST, cls, link);
      if (!rc && h->args) /* its inputs, for `stepscope ops` */
        rc = ssa_rank_keep_op_inputs(r, (int64_t)h->start_ns, (int64_t)h->end_ns, name, h->args,
                                     lane);
      if (rc) goto out;
      continue;
    }
    case STEPSCOPE_REC_API: {
      const stepscope_api *a = &rec.u.api;
      uint32_t name = map_id(&m, r, rd, a->name, &oom);
      uint32_t lane = lane_of(&memo, r, SSA_LANE_HOST, a->thread);
      r->records++;
      if (lane == SSA_NONE || oom || add_api(r, a, name, lane, &apis_prefaulted)) {
        rc = STEPSCOPE_E_NOMEM;
        goto out;
      }
      continue;
    }
    case STEPSCOPE_REC_RANGE:
      MAP(rec.u.range.name);
      MAP(rec.u.range.domain);
      MAP(rec.u.range.args);
      break;
    case STEPSCOPE_REC_COLLECTIVE:
      MAP(rec.u.collective.name);
      MAP(rec.u.collective.algorithm);
      MAP(rec.u.collective.protocol);
      break;
    case STEPSCOPE_REC_COUNTER: MAP(rec.u.counter.name); break;
    case STEPSCOPE_REC_MARK:
      MAP(rec.u.mark.name);
      MAP(rec.u.mark.args);
      break;
    case STEPSCOPE_REC_STREAM: MAP(rec.u.stream.name); break;
    case STEPSCOPE_REC_MEMORY:
      if (opt && opt->op_memory && (rc = keep_memory(r, &rec.u.memory))) goto out;
      break;
    case STEPSCOPE_REC_STRING: continue; /* looked up lazily by map_id */
    case STEPSCOPE_REC_END: continue;    /* the clean-close marker: read below */
    default: break;
    }
#undef MAP
    if (oom) {
      rc = STEPSCOPE_E_NOMEM;
      break;
    }
    rc = ssa_rank_add_record(r, &rec);
    if (rc) break;
  }
out:
  if (rc == 0)
    rc = ssa_op_stage_merge(&st, r);
  else
    ssa_op_stage_free(&st);
  if (rc == 0) {
    take_reader_state(rd, r);
  } else if (err) {
    err->code = rc;
    snprintf(err->message, sizeof err->message, "%s: %s while loading", path,
             stepscope_status_name(rc));
  }
  free(m.ids);
  stepscope_reader_close(rd);
  return rc;
}
