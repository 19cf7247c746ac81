/*
 * trace_source.c — the loader source for stepscope's own trace files
 * (`rank-NNNNN.trace.zst`): reads one file with the streaming reader of
 * libstepscope and feeds every record into a model rank.
 *
 * String ids of the file are translated to ids of the rank's string table
 * through a lazily filled array (file id -> model id), so each distinct
 * string is hashed once. Reader errors after some records keep what was read
 * and become warnings of the rank (a truncated file is analysed up to its
 * last complete frame); an error before the header fails the rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_model.h"

typedef struct id_map {
  uint32_t *ids;   /* file id -> model id + 1 (0 = not yet looked up) */
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

int ssa_trace_source_matches(const char *name) {
  size_t n = strlen(name);
  return strncmp(name, "rank-", 5) == 0 && n > 14 && strcmp(name + n - 10, ".trace.zst") == 0;
}

int ssa_trace_source_load(const char *path, ssa_rank *r, stepscope_error *err) {
  stepscope_reader *rd = stepscope_reader_open(path, err);
  if (!rd) return err ? err->code : STEPSCOPE_E_IO;
  int rc = ssa_rank_set_header(r, stepscope_reader_header(rd));
  if (rc) {
    stepscope_reader_close(rd);
    return rc;
  }
  id_map m = {0};
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
    case STEPSCOPE_REC_KERNEL: MAP(rec.u.kernel.name); break;
    case STEPSCOPE_REC_API: MAP(rec.u.api.name); break;
    case STEPSCOPE_REC_RANGE:
      MAP(rec.u.range.name); MAP(rec.u.range.domain); MAP(rec.u.range.args);
      break;
    case STEPSCOPE_REC_COLLECTIVE:
      MAP(rec.u.collective.name); MAP(rec.u.collective.algorithm);
      MAP(rec.u.collective.protocol);
      break;
    case STEPSCOPE_REC_HOST_OP: MAP(rec.u.host_op.name); MAP(rec.u.host_op.args); break;
    case STEPSCOPE_REC_COUNTER: MAP(rec.u.counter.name); break;
    case STEPSCOPE_REC_STREAM: MAP(rec.u.stream.name); break;
    case STEPSCOPE_REC_STRING: continue; /* looked up lazily by map_id */
    default: break;
    }
#undef MAP
    if (oom) { rc = STEPSCOPE_E_NOMEM; break; }
    rc = ssa_rank_add_record(r, &rec);
    if (rc) break;
  }
  if (rc == 0) {
    for (size_t i = 0; i < stepscope_reader_warning_count(rd); i++)
      ssa_rank_warn(r, "%s", stepscope_reader_warning(rd, i));
    r->unknown_records += stepscope_reader_unknown_records(rd);
  } else if (err) {
    err->code = rc;
    snprintf(err->message, sizeof err->message, "%s: %s while loading", path,
             stepscope_status_name(rc));
  }
  free(m.ids);
  stepscope_reader_close(rd);
  return rc;
}
