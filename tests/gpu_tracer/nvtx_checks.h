/*
 * nvtx_checks.h — the checks both NVTX tests (in-process and injected) run
 * on the trace written while test_nvtx.c's run_nvtx_calls() executed.
 */
#ifndef STEPSCOPE_TESTS_GPU_NVTX_CHECKS_H
#define STEPSCOPE_TESTS_GPU_NVTX_CHECKS_H

#include "trace_check.h"

static inline const stepscope_record *find_named(const loaded_trace *t, uint32_t kind,
                                                 const char *name, int nth) {
  for (size_t i = 0; i < t->count; i++) {
    const stepscope_record *r = &t->records[i];
    if (r->kind != kind) continue;
    uint32_t id = kind == STEPSCOPE_REC_RANGE ? r->u.range.name : r->u.mark.name;
    if (strcmp(trace_string(t, id), name) == 0 && nth-- == 0) return r;
  }
  return NULL;
}

static inline void check_nvtx_trace(const char *path) {
  loaded_trace t;
  if (load_trace(path, &t) != 0) {
    check_failures++;
    return;
  }
  const stepscope_record *outer = find_named(&t, STEPSCOPE_REC_RANGE, "outer", 0);
  const stepscope_record *inner = find_named(&t, STEPSCOPE_REC_RANGE, "inner", 0);
  CHECK(outer && inner);
  if (outer && inner) {
    CHECK(outer->u.range.start_ns <= inner->u.range.start_ns);
    CHECK(inner->u.range.end_ns <= outer->u.range.end_ns);
    CHECK(outer->u.range.thread == inner->u.range.thread);
    CHECK(outer->u.range.domain == 0);
  }
  CHECK(find_named(&t, STEPSCOPE_REC_MARK, "hello mark", 0) != NULL);
  const stepscope_record *reg = find_named(&t, STEPSCOPE_REC_RANGE, "ncclAllReduce", 0);
  const stepscope_record *ext = find_named(&t, STEPSCOPE_REC_RANGE, "ncclAllReduce", 1);
  CHECK(reg && ext);
  if (reg) {
    CHECK(strcmp(trace_string(&t, reg->u.range.domain), "NCCL") == 0);
    CHECK(reg->u.range.category == 3);
    CHECK(reg->u.range.color == 0xff00ff00u);
    CHECK(reg->u.range.payload_kind == STEPSCOPE_PAYLOAD_UINT64);
    CHECK(reg->u.range.payload == 42);
  }
  if (ext) {
    const char *args = trace_string(&t, ext->u.range.args);
    CHECK(strstr(args, "\"comm_id\":\"0x1234abcd5678ef00\"") != NULL);
    CHECK(strstr(args, "\"bytes\":1048576") != NULL);
    CHECK(strstr(args, "\"op\":\"ncclMax\"") != NULL);
    if (!strstr(args, "ncclMax")) fprintf(stderr, "payload args were: %s\n", args);
  }
  const stepscope_record *cross = find_named(&t, STEPSCOPE_REC_RANGE, "cross-thread", 0);
  CHECK(cross && cross->u.range.end_ns >= cross->u.range.start_ns);
  const stepscope_record *dm = find_named(&t, STEPSCOPE_REC_MARK, "double mark", 0);
  CHECK(dm != NULL);
  if (dm) {
    double v;
    memcpy(&v, &dm->u.mark.payload, sizeof v);
    CHECK(dm->u.mark.payload_kind == STEPSCOPE_PAYLOAD_DOUBLE && v == 2.5);
  }
  int category_named = 0;
  for (size_t i = 0; i < t.count; i++)
    if (t.records[i].kind == STEPSCOPE_REC_METADATA &&
        strcmp(t.records[i].u.metadata.key, "nvtx_category:NCCL:3") == 0)
      category_named = strcmp(t.records[i].u.metadata.value_json, "\"collectives\"") == 0;
  CHECK(category_named);
  free_trace(&t);
}

#endif /* STEPSCOPE_TESTS_GPU_NVTX_CHECKS_H */
