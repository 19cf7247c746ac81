/*
 * test_op_stage.c — the trace loader's staged ops (trace_source.c, op_stage.c)
 * against the plain model builder.
 *
 * Random rank files are written with libstepscope's writer — kernels,
 * copies, memsets and host ops on one to many lanes, lanes in order and out
 * of order, lanes that lag far behind others, many equal start times,
 * collectives linked by correlation id and by (comm_id, seq), launch calls
 * on two threads, big files and small ones (whose stages reuse the arrays
 * of the previous small file) — then loaded twice: by ssa_trace_source_load
 * (ops staged per lane and merged, memory handed back as the merge goes) and
 * by feeding the same records to ssa_rank_add_record (one op array, sorted
 * by finish).
 * After ssa_rank_finish both ranks must hold the same ops in the same order
 * (every field, names compared as strings), the same API calls and the same
 * collective-to-op links; and every op's launch call must be the call with
 * its correlation id, or none when no call has it (some calls are left out
 * on purpose), checked by brute force.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ssa_model.h"
#include "ssa_import.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      if (failures < 20) {                                                                         \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                       \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
      }                                                                                            \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static uint64_t rng;
static uint64_t next_u64(void) {
  uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

typedef struct scenario {
  const char *what;
  int gpu_lanes, cpu_lanes; /* streams used by device ops and host ops */
  size_t ops;
  int lag;           /* lane 0 falls further behind at every op */
  int shuffled_lane; /* this lane's ops come out of order (-1: none) */
  int coarse;        /* start times on a coarse grid: many ties */
} scenario;

static int jitter_apis;

static int cmp_u64(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a < b ? -1 : a > b;
}

static const char *names[] = {"gemm", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "softmax", "copy"};

/* The reference: the same records through ssa_rank_add_record, strings
 * interned at first use in record order as the trace source does. */
typedef struct ref_rank {
  ssa_rank r;
  uint32_t ids[16]; /* writer string id -> model id + 1 */
} ref_rank;

static uint32_t ref_map(ref_rank *x, const char *const *strs, uint32_t id) {
  if (id == 0) return 0;
  if (!x->ids[id]) x->ids[id] = ssa_rank_intern(&x->r, strs[id]) + 1;
  return x->ids[id] - 1;
}

static void emit(stepscope_writer *w, ref_rank *x, const char *const *strs, stepscope_record *rec) {
  CHECK(stepscope_write(w, rec) == 0, "write");
  stepscope_record m = *rec;
  switch (m.kind) {
  case STEPSCOPE_REC_KERNEL: m.u.kernel.name = ref_map(x, strs, m.u.kernel.name); break;
  case STEPSCOPE_REC_API: m.u.api.name = ref_map(x, strs, m.u.api.name); break;
  case STEPSCOPE_REC_HOST_OP:
    m.u.host_op.name = ref_map(x, strs, m.u.host_op.name);
    m.u.host_op.args = ref_map(x, strs, m.u.host_op.args);
    break;
  case STEPSCOPE_REC_COLLECTIVE: m.u.collective.name = ref_map(x, strs, m.u.collective.name); break;
  default: break;
  }
  CHECK(ssa_rank_add_record(&x->r, &m) == 0, "add_record");
}

static void run(const scenario *sc, const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/rank-00000.trace.zst", dir);
  stepscope_header h;
  memset(&h, 0, sizeof h);
  h.world_size = 1;
  h.clock_domain = STEPSCOPE_CLOCK_MONOTONIC;
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, NULL, &err);
  CHECK(w != NULL, "open %s", path);
  if (!w) return;
  ref_rank x;
  memset(&x, 0, sizeof x);
  CHECK(ssa_rank_init(&x.r) == 0, "init");
  ssa_rank_set_header(&x.r, &h);
  const char *strs[16] = {""};
  for (int i = 0; i < 4; i++) {
    uint32_t id = stepscope_intern(w, names[i]);
    if (id < 16) strs[id] = names[i];
  }
  uint32_t args = stepscope_intern(w, "{\"mb\":1}"), launch = stepscope_intern(w, "launch"),
           dp = stepscope_intern(w, "dp");
  strs[args] = "{\"mb\":1}";
  strs[launch] = "launch";
  strs[dp] = "dp";
  uint64_t host = 100000, corr = 1, seq = 0;
  int64_t lane_t[16] = {0};
  stepscope_record rec;
  for (size_t i = 0; i < sc->ops; i++) {
    int nl = sc->gpu_lanes + sc->cpu_lanes;
    int lane = (int)(next_u64() % (uint64_t)nl);
    if (sc->lag && next_u64() % 4) lane = 0; /* lane 0 is the busy one */
    host += sc->coarse ? 1000 * (next_u64() % 2) : 500 + next_u64() % 1000;
    uint64_t start = host + 100 + (sc->lag && lane == 0 ? i * 37 : 0);
    if (lane == sc->shuffled_lane) start = host + next_u64() % 50000;
    if (sc->coarse) start -= start % 1000;
    if (lane != sc->shuffled_lane && (int64_t)start < lane_t[lane]) start = (uint64_t)lane_t[lane];
    uint64_t dur = sc->coarse ? 1000 * (next_u64() % 3) : 10 + next_u64() % 3000;
    lane_t[lane] = (int64_t)start;
    uint64_t c = next_u64() % 10 ? corr++ : 0;
    int thread = (int)(next_u64() % 2) + 1;
    if (c && next_u64() % 16 == 0) {
      /* a launch call lost: the op's id matches nothing */
    } else if (c) {
      memset(&rec, 0, sizeof rec);
      rec.kind = STEPSCOPE_REC_API;
      /* with jitter, calls of thread 2 start earlier: sorted by start, the
       * ids no longer rise (the join's table path instead of its search) */
      rec.u.api.start_ns = host - 50 - (jitter_apis && thread == 2 ? next_u64() % 3000 : 0);
      rec.u.api.end_ns = host;
      rec.u.api.correlation_id = c;
      rec.u.api.thread = (uint64_t)thread;
      rec.u.api.name = launch;
      emit(w, &x, strs, &rec);
    }
    memset(&rec, 0, sizeof rec);
    if (lane >= sc->gpu_lanes) {
      int comm = next_u64() % 3 == 0;
      rec.kind = STEPSCOPE_REC_HOST_OP;
      rec.u.host_op.start_ns = start;
      rec.u.host_op.end_ns = start + dur;
      rec.u.host_op.stream = 100 + (uint64_t)lane;
      rec.u.host_op.category = comm ? STEPSCOPE_CAT_COMM : STEPSCOPE_CAT_COMPUTE;
      rec.u.host_op.name = comm ? dp : 1;
      rec.u.host_op.args = args;
      rec.u.host_op.correlation_id = c;
      rec.u.host_op.bytes = next_u64() % 4096;
      if (comm) {
        rec.u.host_op.comm_id = 77;
        rec.u.host_op.seq = seq;
      }
      emit(w, &x, strs, &rec);
      if (comm) {
        memset(&rec, 0, sizeof rec);
        rec.kind = STEPSCOPE_REC_COLLECTIVE;
        rec.u.collective.start_ns = start;
        rec.u.collective.end_ns = start + dur;
        rec.u.collective.comm_id = 77;
        rec.u.collective.seq = seq++;
        rec.u.collective.comm_size = 1;
        rec.u.collective.name = dp;
        emit(w, &x, strs, &rec);
      }
      continue;
    }
    uint64_t kind = next_u64() % 8;
    if (kind == 0) {
      rec.kind = STEPSCOPE_REC_MEMCPY;
      rec.u.memcpy.start_ns = start;
      rec.u.memcpy.end_ns = start + dur;
      rec.u.memcpy.stream = 7 + (uint64_t)lane;
      rec.u.memcpy.correlation_id = c;
      rec.u.memcpy.bytes = next_u64() % 100000;
    } else if (kind == 1) {
      rec.kind = STEPSCOPE_REC_MEMSET;
      rec.u.memset.start_ns = start;
      rec.u.memset.end_ns = start + dur;
      rec.u.memset.stream = 7 + (uint64_t)lane;
      rec.u.memset.correlation_id = c;
      rec.u.memset.bytes = next_u64() % 100000;
    } else {
      rec.kind = STEPSCOPE_REC_KERNEL;
      rec.u.kernel.start_ns = start;
      rec.u.kernel.end_ns = start + dur;
      rec.u.kernel.stream = 7 + (uint64_t)lane;
      rec.u.kernel.device = (uint32_t)lane % 2;
      rec.u.kernel.correlation_id = c;
      rec.u.kernel.name = (uint32_t)(next_u64() % 4) + 1;
    }
    emit(w, &x, strs, &rec);
    if (rec.kind == STEPSCOPE_REC_KERNEL && rec.u.kernel.name == 2 && c) {
      memset(&rec, 0, sizeof rec);
      rec.kind = STEPSCOPE_REC_COLLECTIVE;
      rec.u.collective.start_ns = start;
      rec.u.collective.end_ns = start + dur;
      rec.u.collective.comm_id = 5;
      rec.u.collective.seq = seq++;
      rec.u.collective.correlation_id = c;
      rec.u.collective.comm_size = 1;
      rec.u.collective.name = dp;
      emit(w, &x, strs, &rec);
    }
  }
  CHECK(stepscope_writer_close(w, &err) == 0, "close");

  ssa_rank s;
  CHECK(ssa_rank_init(&s) == 0, "init");
  CHECK(ssa_trace_source_load(path, NULL, &s, &err) == 0, "%s: load", sc->what);
  /* the merge itself put them in order (finish's sort would hide it) */
  size_t unordered = 0;
  for (size_t i = 1; i < s.nops; i++)
    unordered += ssa_cmp_ops(&s.ops[i - 1], &s.ops[i]) > 0;
  CHECK(unordered == 0, "%s: %zu ops out of order after the merge", sc->what, unordered);
  CHECK(ssa_rank_finish(&s) == 0, "finish");
  CHECK(ssa_rank_finish(&x.r) == 0, "finish");
  CHECK(s.nops == x.r.nops && s.nops > 0, "%s: %zu ops vs %zu", sc->what, s.nops, x.r.nops);
  CHECK(s.napis == x.r.napis, "%s: apis", sc->what);
  CHECK(s.ncolls == x.r.ncolls, "%s: colls", sc->what);
  CHECK(s.nlanes == x.r.nlanes, "%s: lanes", sc->what);
  CHECK(s.records == x.r.records, "%s: records %llu vs %llu", sc->what,
        (unsigned long long)s.records, (unsigned long long)x.r.records);
  CHECK(s.joined_ops == x.r.joined_ops && s.comm_by_evidence == x.r.comm_by_evidence &&
            s.comm_by_name == x.r.comm_by_name,
        "%s: joins", sc->what);
  size_t bad = 0;
  for (size_t i = 0; i < s.nops && i < x.r.nops; i++) {
    const ssa_op *a = &s.ops[i], *b = &x.r.ops[i];
    int same = a->start == b->start && a->end == b->end && a->corr == b->corr &&
               a->bytes == b->bytes && a->launch == b->launch && a->coll == b->coll &&
               a->lane == b->lane && a->kind == b->kind && a->cls == b->cls &&
               strcmp(ssa_rank_str(&s, a->name), ssa_rank_str(&x.r, b->name)) == 0;
    if (!same && bad++ < 3) CHECK(same, "%s: op %zu differs", sc->what, i);
  }
  CHECK(bad == 0, "%s: %zu ops differ", sc->what, bad);
  for (size_t i = 0; i < s.ncolls && i < x.r.ncolls; i++)
    CHECK(s.colls[i].op_index == x.r.colls[i].op_index, "%s: coll %zu op", sc->what, i);
  for (size_t i = 0; i < s.napis && i < x.r.napis; i++)
    CHECK(memcmp(&s.apis[i], &x.r.apis[i], sizeof s.apis[i]) == 0, "%s: api %zu", sc->what, i);
  for (uint32_t i = 0; i < s.nlanes && i < x.r.nlanes; i++)
    CHECK(s.lanes[i].id == x.r.lanes[i].id && s.lanes[i].kind == x.r.lanes[i].kind &&
              s.lanes[i].device == x.r.lanes[i].device,
          "%s: lane %u", sc->what, i);
  for (size_t i = 1; i < s.nops; i++)
    CHECK(ssa_cmp_ops(&s.ops[i - 1], &s.ops[i]) <= 0, "%s: not sorted at %zu", sc->what, i);
  /* the join against brute force: an op's launch call has its id, and an
   * op without one has an id that no call has */
  uint64_t *ids = malloc((s.napis ? s.napis : 1) * sizeof *ids);
  for (size_t i = 0; i < s.napis; i++)
    ids[i] = s.apis[i].corr;
  qsort(ids, s.napis, sizeof *ids, cmp_u64);
  size_t wrong = 0;
  for (size_t i = 0; i < s.nops; i++) {
    const ssa_op *o = &s.ops[i];
    if (o->launch != SSA_NONE) {
      wrong += o->launch >= s.napis || s.apis[o->launch].corr != o->corr || !o->corr;
    } else if (o->corr) {
      wrong += bsearch(&o->corr, ids, s.napis, sizeof *ids, cmp_u64) != NULL;
    }
  }
  CHECK(wrong == 0, "%s: %zu ops joined wrongly", sc->what, wrong);
  free(ids);
  ssa_rank_free(&s);
  ssa_rank_free(&x.r);
  unlink(path);
}

int main(void) {
  char dir[] = "/tmp/test_op_stage_XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  static const scenario scenarios[] = {
      {"one lane", 1, 0, 20000, 0, -1, 0},
      {"two lanes, one lagging (memory handed back)", 2, 0, 400000, 1, -1, 0},
      {"six gpu lanes and two cpu lanes", 6, 2, 60000, 0, -1, 0},
      {"many lanes, one lagging, one out of order", 9, 3, 80000, 1, 4, 0},
      {"coarse times: many ties", 3, 1, 50000, 0, -1, 1},
      {"cpu lanes only", 0, 2, 30000, 0, -1, 0},
      {"out-of-order single lane", 1, 0, 20000, 0, 0, 0},
      /* small files (no reservation from their size): their stages reuse the lane arrays the
       * previous small file left to this thread (op_stage_cache.c), of other lanes and sizes */
      {"small file: many lanes, one lagging, one out of order", 9, 3, 600, 1, 4, 0},
      {"small file: two lanes", 2, 0, 300, 0, -1, 0},
      {"small file: coarse times", 3, 1, 200, 0, -1, 1},
      {"small file: one lane", 1, 0, 40, 0, -1, 0},
      {"small file: out-of-order single lane", 1, 0, 120, 0, 0, 0},
  };
  for (int seed = 1; seed <= 2; seed++) {
    rng = (uint64_t)seed * 1234567;
    jitter_apis = seed == 2;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
      run(&scenarios[i], dir);
  }
  rmdir(dir);
  if (failures) {
    fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  printf("op stage: all scenarios give the builder's model\n");
  return 0;
}
