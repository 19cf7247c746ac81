/*
 * test_kineto.c — the Kineto importer on small hand-built documents whose
 * every expected number is worked out by hand in the comments:
 *   precision   decimal us with ns digits -> exact integer ns (no doubles)
 *   metrics     one step with a compute kernel and an overlapping NCCL
 *               kernel: compute, comm, overlap, exposed comm, idle exactly
 *   colls       two ranks, two process groups: comm_id equal across ranks,
 *               seq by order, comm_rank from the member list, bytes
 *   graph       kernels sharing a cudaGraphLaunch correlation: a compute
 *               kernel of the graph is not turned into communication
 *   missing     a kernel without correlation: kept, not joined
 *   malformed   truncated, deep nesting, huge integers, bad UTF-8, garbage
 *               -> clear errors naming the byte offset (or warnings)
 *   param_comms NCCL metadata only on record_param_comms CPU ops: joined to
 *               kernels through their launch call (or External id)
 *   skipped     parts of events skipped unread (not-complete events after
 *               ph, unused CPU-op args) are still checked, whole = chunked
 *   host_order  a CPU-only trace's host ops in (thread, start) order from
 *               CPU ops written in 1 to 300 sorted runs
 *   boundaries  escapes, surrogate pairs, UTF-8 and numbers cut by input
 *               refills (every read size; a pair across the 256 KiB buffer)
 *   gzip        a .json.gz file read through the run loader, rank from
 *               distributedInfo and from the file name
 *   gzip_paths  the same gzip files decompressed whole (libdeflate),
 *               streamed (zlib) and through the pipe thread (inflate_pipe.c)
 *               give identical ranks, also on a 40000-kernel document of
 *               one and two members; several members, a bad CRC or a wrong
 *               ISIZE fall back to the stream (its errors; the pipe reports
 *               the damage too)
 * Usage: test_kineto [SCRATCH_DIR]. Exit 0 when every check passes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <fcntl.h>

#include "gzip_whole.h"
#include "json_stream.h"
#include "kineto_source.h"
#include "ssa_metrics.h"

#include "kineto_check.h"
#include "ssa_import.h"

static int load(const char *doc, const char *name, ssa_rank *r, stepscope_error *err) {
  if (ssa_rank_init(r)) return -1;
  return ssa_kineto_load_memory(doc, strlen(doc), name, r, err);
}

/* ---- number conversion ---- */
static void test_numbers(void) {
  int64_t v;
  CHECK(js_number_scaled("1700000000123.456", 3, &v) && v == 1700000000123456LL);
  CHECK(js_number_scaled("1700000000123.4567", 3, &v) && v == 1700000000123457LL); /* rounds */
  CHECK(js_number_scaled("0.0004", 3, &v) && v == 0);
  CHECK(js_number_scaled("-2.5", 3, &v) && v == -2500);
  CHECK(js_number_scaled("1.5e3", 3, &v) && v == 1500000);
  CHECK(js_number_scaled("9223372036854775.807", 3, &v) && v == INT64_MAX);
  CHECK(!js_number_scaled("9223372036854775.808", 3, &v));
  CHECK(!js_number_scaled("1e400", 3, &v));
  uint64_t u;
  CHECK(js_number_u64("18446744073709551615", &u) && u == UINT64_MAX);
  CHECK(!js_number_u64("18446744073709551616", &u));
  CHECK(!js_number_u64("-1", &u));
  CHECK(!js_number_u64("1.5", &u));
}

/* The tokenizer's fast conversions (digits accumulated while scanning, 8 at
 * a time) agree with the text ones on numbers of every length and shape. */
typedef struct text_src {
  const char *p;
  size_t n, pos;
} text_src;
static long text_read(void *ctx, void *buf, size_t n) {
  text_src *t = ctx;
  if (n > t->n - t->pos) n = t->n - t->pos;
  memcpy(buf, t->p + t->pos, n);
  t->pos += n;
  return (long)n;
}

static void test_number_tokens(void) {
  char *doc = malloc(1 << 20);
  CHECK(doc != NULL);
  if (!doc) return;
  size_t n = 0;
  unsigned seed = 12345;
  doc[n++] = '[';
  for (int i = 0; i < 4000; i++) {
    int ndig = 1 + i % 24, nfrac = (i / 24) % 7;
    if (i) doc[n++] = ',';
    if (i % 5 == 0) doc[n++] = '-';
    for (int d = 0; d < ndig; d++) {
      seed = seed * 1103515245u + 12345u;
      doc[n++] = (char)('0' + (d == 0 && ndig > 1 ? 1 + (seed >> 16) % 9 : (seed >> 16) % 10));
    }
    if (nfrac) {
      doc[n++] = '.';
      for (int d = 0; d < nfrac; d++) {
        seed = seed * 1103515245u + 12345u;
        doc[n++] = (char)('0' + (seed >> 16) % 10);
      }
    }
  }
  doc[n++] = ']';
  text_src src = {doc, n, 0};
  js_stream js;
  CHECK(js_init(&js, text_read, &src) == 0);
  int bad = 0, count = 0;
  for (js_kind k = js_next(&js); k == JS_NUMBER || k == JS_BEGIN_ARRAY; k = js_next(&js)) {
    if (k != JS_NUMBER) continue;
    count++;
    uint64_t a = 0, b = 0;
    int64_t x = 0, y = 0;
    int ra = js_tok_u64(&js, &a), rb = js_number_u64(js.tok, &b);
    int rx = js_tok_scaled(&js, 3, &x), ry = js_number_scaled(js.tok, 3, &y);
    if (ra != rb || (ra && a != b) || rx != ry || (rx && x != y)) {
      if (bad++ < 5)
        fprintf(stderr, "number %s: u64 %d/%llu vs %d/%llu, scaled %d/%lld vs %d/%lld\n", js.tok,
                ra, (unsigned long long)a, rb, (unsigned long long)b, rx, (long long)x, ry,
                (long long)y);
    }
  }
  CHECK_EQ(count, 4000);
  CHECK_EQ(bad, 0);
  js_free(&js);
  free(doc);
}

/* ---- one step, exact metrics ----
 * Step range [0, 1000) us on thread 1, launches at 10 and 20 us.
 * compute kernel  [100.001, 300.001) us = [100001, 300001) ns
 * nccl kernel     [200.001, 400.001) us = [200001, 400001) ns
 * window = the iteration [0, 1000000) ns (the only step: from its range's
 * start to the later of its range's end and its last op's end): span
 * 1000000, compute 200000, comm 200000, overlap 100000, exposed comm
 * 100000, idle 700000; device latency [100001, 400001) = 300000.
 */
static const char *doc_metrics =
    "{\"distributedInfo\":{\"rank\":0,\"world_size\":1},\"traceEvents\":["
    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#7\",\"pid\":1,\"tid\":1,"
    "\"ts\":0,\"dur\":1000},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,"
    "\"ts\":10,\"dur\":5,"
    "\"args\":{\"correlation\":11}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,"
    "\"ts\":20,\"dur\":5,"
    "\"args\":{\"correlation\":12}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":100.001,\"dur\":"
    "200.000,"
    "\"args\":{\"device\":0,\"stream\":7,\"correlation\":11,\"grid\":[4,2,1],\"block\":[128,1,1]}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)\","
    "\"pid\":0,"
    "\"tid\":20,\"ts\":200.001,\"dur\":200.000,"
    "\"args\":{\"device\":0,\"stream\":20,\"correlation\":12}}"
    "]}";

static void test_metrics(void) {
  ssa_rank *r = calloc(1, sizeof *r);
  stepscope_error err;
  CHECK_EQ(load(doc_metrics, "m.json", r, &err), 0);
  ssa_run run;
  memset(&run, 0, sizeof run);
  CHECK_EQ(ssa_run_from_ranks(&run, r, 1, &err), 0);
  CHECK_EQ(run.ranks[0].nops, 2);
  CHECK_EQ(run.ranks[0].ops[0].start, 100001);
  CHECK_EQ(run.ranks[0].joined_ops, 2);
  ssa_analysis a;
  CHECK_EQ(ssa_analyze(&run, NULL, &a, &err), 0);
  CHECK_EQ(a.ranks[0].nsteps, 1);
  const ssa_window *w = &a.ranks[0].windows[0];
  CHECK_EQ(w->step, 7);
  CHECK_EQ(w->span, 1000000);          /* [0, 1000) us: the iteration */
  CHECK_EQ(w->device_latency, 300000); /* [100.001, 400.001) us */
  CHECK_EQ(w->compute, 200000);
  CHECK_EQ(w->comm, 200000); /* ncclDevKernel_ by name */
  CHECK_EQ(w->overlap, 100000);
  CHECK_EQ(w->exposed_comm, 100000);
  CHECK_EQ(w->idle, 700000);
  CHECK_EQ(w->compute + w->exposed_comm + w->exposed_mem + w->idle, w->span);
  ssa_analysis_free(&a);
  ssa_run_free(&run);
}

/* ---- collectives across two ranks and two groups ---- */
static char *doc_coll(int rank) {
  char *buf = malloc(8192);
  int n = snprintf(buf, 8192,
                   "{\"distributedInfo\":{\"rank\":%d,\"world_size\":4},\"traceEvents\":[", rank);
  const char *groups[2][3] = {{"5", "dp", "[0, 2]"}, {"6", "tp", "[2, 3]"}};
  long long t = 1000;
  for (int i = 0; i < 3; i++) {
    int g = rank == 0 ? 0 : (i % 2); /* rank 0 is only in dp; rank 2 in both */
    if (rank == 0 && i == 2) break;
    n += snprintf(
        buf + n, 8192 - (size_t)n,
        "%s{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum_bf16_RING_LL\","
        "\"pid\":0,\"tid\":20,\"ts\":%lld.250,\"dur\":10,\"args\":{\"stream\":20,\"correlation\":%"
        "d,"
        "\"Collective name\":\"allreduce\",\"In msg nelems\":1024,\"Out msg nelems\":1024,"
        "\"Group size\":2,\"dtype\":\"BFloat16\",\"Process Group Name\":\"%s\","
        "\"Process Group Description\":\"%s\",\"Process Group Ranks\":\"%s\"}}",
        i ? "," : "", t, 100 + i, groups[g][0], groups[g][1], groups[g][2]);
    t += 100;
  }
  snprintf(buf + n, 8192 - (size_t)n, "]}");
  return buf;
}

static void test_collectives(void) {
  ssa_rank *r = calloc(2, sizeof *r);
  stepscope_error err;
  char *d0 = doc_coll(0), *d2 = doc_coll(2);
  CHECK_EQ(load(d0, "x.json", &r[0], &err), 0);
  CHECK_EQ(load(d2, "y.json", &r[1], &err), 0);
  CHECK_EQ(r[0].rank, 0);
  CHECK_EQ(r[1].rank, 2);
  CHECK_EQ(r[0].ncolls, 2);
  CHECK_EQ(r[1].ncolls, 3);
  /* rank 0: both dp, seq 0 and 1, comm_rank 0 */
  CHECK_EQ(r[0].colls[0].seq, 0);
  CHECK_EQ(r[0].colls[1].seq, 1);
  CHECK_EQ(r[0].colls[0].comm_rank, 0);
  CHECK_EQ(r[0].colls[0].bytes, 2048);
  CHECK_EQ(r[0].colls[0].op, STEPSCOPE_COLL_ALLREDUCE);
  CHECK_EQ(r[0].colls[0].datatype, STEPSCOPE_DT_BFLOAT16);
  CHECK_EQ(r[0].colls[0].comm_size, 2);
  /* rank 2: dp (i=0), tp (i=1), dp (i=2); dp has seq 0,1; tp seq 0 */
  CHECK(r[1].colls[0].comm_id == r[0].colls[0].comm_id);
  CHECK(r[1].colls[1].comm_id != r[0].colls[0].comm_id);
  CHECK_EQ(r[1].colls[0].seq, 0);
  CHECK_EQ(r[1].colls[1].seq, 0);
  CHECK_EQ(r[1].colls[2].seq, 1);
  CHECK_EQ(r[1].colls[0].comm_rank, 1); /* position of 2 in [0, 2] */
  CHECK_EQ(r[1].colls[1].comm_rank, 0); /* position of 2 in [2, 3] */
  CHECK_EQ(r[1].colls[0].start, 1000250);
  ssa_run run;
  memset(&run, 0, sizeof run);
  CHECK_EQ(ssa_run_from_ranks(&run, r, 2, &err), 0);
  ssa_analysis a;
  CHECK_EQ(ssa_analyze(&run, NULL, &a, &err), 0);
  /* dp instances are complete (2 of 2); the tp one misses rank 3 */
  size_t complete = 0;
  for (size_t i = 0; i < a.ncolls; i++)
    complete += a.colls[i].present == 2;
  CHECK_EQ(complete, 2);
  ssa_analysis_free(&a);
  ssa_run_free(&run);
  free(d0);
  free(d2);
}

/* ---- CUDA graph: three kernels share correlation 50, one is NCCL ---- */
static const char *doc_graph =
    "{\"traceEvents\":["
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaGraphLaunch\",\"pid\":1,\"tid\":1,"
    "\"ts\":1,\"dur\":2,"
    "\"args\":{\"correlation\":50}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":10,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":50}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllGather_RING_LL\",\"pid\":0,"
    "\"tid\":7,\"ts\":20,"
    "\"dur\":10,\"args\":{\"stream\":7,\"correlation\":50,\"Collective name\":\"_allgather_base\","
    "\"In msg nelems\":8,\"Out msg nelems\":16,\"Group size\":2,\"dtype\":\"Float\","
    "\"Process Group Name\":\"0\",\"Process Group Ranks\":[0,1]}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"add\",\"pid\":0,\"tid\":7,\"ts\":30,\"dur\":10,"
    "\"args\":{\"stream\":7,\"correlation\":50}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"nocorr\",\"pid\":0,\"tid\":7,\"ts\":40,\"dur\":10,"
    "\"args\":{\"stream\":7}}"
    "]}";

static void test_graph_and_missing(void) {
  ssa_rank *r = calloc(1, sizeof *r);
  stepscope_error err;
  CHECK_EQ(load(doc_graph, "/x/rank-3.json", r, &err), 0);
  CHECK_EQ(r->rank, 3); /* from the file name */
  CHECK_EQ(r->ncolls, 1);
  CHECK_EQ(r->colls[0].op, STEPSCOPE_COLL_ALLGATHER);
  CHECK_EQ(r->colls[0].bytes, 64); /* out 16 x 4 bytes */
  CHECK_EQ(r->colls[0].corr, 0);   /* shared correlation: not linked */
  CHECK_EQ(ssa_rank_finish(r), 0);
  int comm = 0, compute = 0, joined = 0;
  for (size_t i = 0; i < r->nops; i++) {
    comm += r->ops[i].cls == SSA_CLS_COMM;
    compute += r->ops[i].cls == SSA_CLS_COMPUTE;
    joined += r->ops[i].launch != SSA_NONE;
  }
  CHECK_EQ(comm, 1);    /* only the NCCL kernel, by name */
  CHECK_EQ(compute, 3); /* gemm, add and the kernel without correlation */
  CHECK_EQ(joined, 3);  /* all graph kernels joined to cudaGraphLaunch */
  ssa_rank_free(r);
  free(r);
}

/* ---- malformed input ---- */
static void expect_error(const char *doc, const char *needle) {
  ssa_rank r;
  stepscope_error err;
  memset(&err, 0, sizeof err);
  int rc = load(doc, "bad.json", &r, &err);
  CHECK(rc != 0);
  if (rc != 0 && (!strstr(err.message, needle) || !strstr(err.message, "bad.json: byte "))) {
    fprintf(stderr, "message '%s' lacks '%s'\n", err.message, needle);
    failures++;
  }
  ssa_rank_free(&r);
}

static void test_malformed(void) {
  expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"ts\":1", "unexpected end of input");
  expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"ts\":1e30,\"dur\":1}]}",
               "does not fit in 64-bit");
  expect_error("{\"traceEvents\":[]} x", "data after the end");
  expect_error("{\"traceEvents\":[{\"ph\":\"X\" \"ts\":1}]}", "expected ',' or '}'");
  expect_error("{\"traceEvents\":[01]}", "expected ',' or ']'");
  expect_error("{\"traceEvents\":[\"a\tb\"]}", "control character");
  expect_error("{\"traceEvents\":[nul]}", "expected null");
  expect_error("[1,]", "where a value was expected");
  expect_error("{\"schemaVersion\":1}", "no \"traceEvents\"");
  /* errors inside skipped values (args not used, events of an unimported
   * category): found by the skipping scanner, reported by the tokenizer */
  expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"args\":{\"x\":[1,]}}]}",
               "byte 56 of the JSON text: unexpected ']' where a value was expected");
  expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"args\":{\"x\":{\"a\" 1}}}]}",
               "expected ':' after an object key");
  expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"f\","
               "\"args\":{\"x\":01}}]}",
               "expected ',' or '}'");
  expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"args\":{\"x\":tru}}]}",
               "expected true");
  expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"args\":{\"x\":-}}]}",
               "bad number");
  expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"other\",\"args\":{\"x\":1.}}]}",
               "digits must follow '.'");
  expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"other\",\"args\":{\"x\":\"a\tb\"}}]}",
               "control character");
  expect_error("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"other\",\"x\":[[[1]]}]}",
               "expected ',' or ']'");
  expect_error("", "no value");
  /* deep nesting */
  size_t depth = 100000;
  char *deep = malloc(depth * 2 + 64);
  strcpy(deep, "{\"traceEvents\":[");
  size_t n = strlen(deep);
  memset(deep + n, '[', depth);
  memset(deep + n + depth, ']', depth);
  strcpy(deep + n + 2 * depth, "]}");
  expect_error(deep, "nesting deeper than 512");
  free(deep);
  /* a huge integer where an id is expected is ignored, not an error */
  ssa_rank r;
  stepscope_error err;
  CHECK_EQ(
      load("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1,\"dur\":1,"
           "\"args\":{\"correlation\":123456789012345678901234567890}}]}",
           "big.json", &r, &err),
      0);
  CHECK_EQ(r.nops, 1);
  CHECK_EQ(r.ops[0].corr, 0);
  ssa_rank_free(&r);
  /* bad UTF-8 in a name: replaced, counted, warned */
  CHECK_EQ(
      load("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\xff\xc3(\xed\xa0\x80\","
           "\"ts\":1,\"dur\":1},{\"name\":\"\\ud800x\"}]}",
           "utf.json", &r, &err),
      0);
  CHECK_EQ(r.nops, 1);
  CHECK(strcmp(ssa_rank_str(&r, r.ops[0].name),
               "k\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd") ==
        0); /* ED A0 80: 3 (maximal subparts) */
  int warned = 0;
  for (size_t i = 0; i < r.nwarnings; i++)
    warned |= strstr(r.warnings[i], "invalid UTF-8") != NULL;
  CHECK(warned);
  ssa_rank_free(&r);
  /* a negative duration is ignored with a warning */
  CHECK_EQ(load("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":5,"
                "\"dur\":-1}]}",
                "neg.json", &r, &err),
           0);
  CHECK_EQ(r.nops, 0);
  ssa_rank_free(&r);
}

/* ---- NCCL metadata only on record_param_comms CPU ops ---- */
static void test_param_comms(void) {
  /* kernel 1: launched (corr 11) inside the op on thread 5 -> joined;
   * kernel 2: no correlation, External id 77 = the second op's -> joined;
   * kernel 3: launched (corr 13) on thread 6, no op there -> not joined.
   * The kernels come first, as the order of a file is not guaranteed. */
  static const char doc[] =
      "{\"distributedInfo\":{\"rank\":1,\"world_size\":2},\"traceEvents\":["
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum_f32_RING_LL\","
      "\"pid\":0,\"tid\":20,"
      "\"ts\":200,\"dur\":50,\"args\":{\"stream\":20,\"device\":0,\"correlation\":11,\"External "
      "id\":70}},"
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllGather_RING_LL\",\"pid\":0,"
      "\"tid\":20,"
      "\"ts\":400,\"dur\":50,\"args\":{\"stream\":20,\"device\":0,\"External id\":77}},"
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum_f32_RING_LL\","
      "\"pid\":0,\"tid\":20,"
      "\"ts\":600,\"dur\":50,\"args\":{\"stream\":20,\"device\":0,\"correlation\":13}},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"c10d::allreduce_\",\"pid\":9,\"tid\":5,\"ts\":"
      "99,\"dur\":30},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"record_param_comms\",\"pid\":9,\"tid\":5,\"ts\":"
      "100,\"dur\":20,"
      "\"args\":{\"External id\":69,\"Collective name\":\"allreduce\",\"dtype\":\"Float\",\"In msg "
      "nelems\":256,"
      "\"Out msg nelems\":256,\"Group size\":2,\"Process Group Name\":\"0\",\"Process Group "
      "Description\":\"default_pg\","
      "\"Process Group Ranks\":\"[0, 1]\"}},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"nccl:all_reduce\",\"pid\":9,\"tid\":5,\"ts\":"
      "105,\"dur\":10,"
      "\"args\":{\"External id\":70}},"
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":9,\"tid\":5,"
      "\"ts\":110,\"dur\":4,"
      "\"args\":{\"correlation\":11}},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"record_param_comms\",\"pid\":9,\"tid\":5,\"ts\":"
      "300,\"dur\":20,"
      "\"args\":{\"External id\":77,\"Collective "
      "name\":\"_allgather_base\",\"dtype\":\"BFloat16\",\"In msg nelems\":16,"
      "\"Out msg nelems\":32,\"Group size\":2,\"Process Group Name\":\"0\",\"Process Group "
      "Description\":\"default_pg\","
      "\"Process Group Ranks\":\"[0, 1]\"}},"
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":9,\"tid\":6,"
      "\"ts\":550,\"dur\":4,"
      "\"args\":{\"correlation\":13}}"
      "]}";
  ssa_rank r;
  stepscope_error err;
  CHECK_EQ(load(doc, "pc.json", &r, &err), 0);
  /* two joined to their ops; the third, with no op around its launch, matched by its order
   * on its stream (an inferred collective: no bytes, every rank a member) */
  CHECK_EQ(r.ncolls, 3);
  if (r.ncolls == 3) {
    const ssa_coll *in = &r.colls[2];
    CHECK(in->flags & STEPSCOPE_COLL_F_INFERRED);
    CHECK_EQ(in->op, STEPSCOPE_COLL_ALLREDUCE);
    CHECK_EQ(in->start, 600000);
    CHECK_EQ(in->bytes, 0);
    CHECK_EQ(in->comm_size, 2);
    CHECK_EQ(in->comm_rank, 1);
    CHECK_EQ(in->seq, 0);
    CHECK(!(r.colls[0].flags & STEPSCOPE_COLL_F_INFERRED));
    const ssa_coll *ar = r.colls[0].op == STEPSCOPE_COLL_ALLREDUCE ? &r.colls[0] : &r.colls[1];
    const ssa_coll *ag = ar == &r.colls[0] ? &r.colls[1] : &r.colls[0];
    CHECK_EQ(ar->op, STEPSCOPE_COLL_ALLREDUCE);
    CHECK_EQ(ar->start, 200000);
    CHECK_EQ(ar->end, 250000);
    CHECK_EQ(ar->bytes, 1024); /* 256 floats */
    CHECK_EQ(ar->comm_size, 2);
    CHECK_EQ(ar->comm_rank, 1);
    CHECK_EQ(ar->corr, 11);
    CHECK_EQ(ag->op, STEPSCOPE_COLL_ALLGATHER);
    CHECK_EQ(ag->bytes, 64); /* out 32 bf16 */
    CHECK_EQ(ag->start, 400000);
    CHECK(ar->comm_id == ag->comm_id);
    CHECK_EQ(ar->seq, 0); /* order within the group */
    CHECK_EQ(ag->seq, 1);
  }
  int warned = 0;
  for (size_t i = 0; i < r.nwarnings; i++)
    warned |= strstr(r.warnings[i], "1 NCCL kernels carry no collective metadata") != NULL;
  CHECK(warned);
  ssa_rank_free(&r);
}

/* ---- parts of events skipped unread: the rest of an event that is not
 * complete (ph other than "X": metadata, flows, instants) and the args of a
 * CPU op or host annotation named before them (except record_param_comms).
 * They are still checked as JSON, with the same messages whole and in
 * chunks; what the mapping uses is still read. ---- */

/* Imports doc whole and in reads of 1 to 24 bytes: the same outcome, error
 * message and record counts every time. Returns the whole import's code;
 * *nranges / *ncolls / *nops get its counts, msg its error message. */
static int import_every_way(const char *doc, size_t *nops, size_t *nranges, size_t *ncolls,
                            char *msg, size_t msg_cap) {
  ssa_rank r;
  stepscope_error err;
  memset(&err, 0, sizeof err);
  int rc = ssa_rank_init(&r) ? -1 : ssa_kineto_load_memory(doc, strlen(doc), "skip.json", &r, &err);
  *nops = r.nops;
  *nranges = r.nranges;
  *ncolls = r.ncolls;
  snprintf(msg, msg_cap, "%s", rc ? err.message : "");
  ssa_rank_free(&r);
  for (size_t chunk = 1; chunk <= 24; chunk++) {
    stepscope_error e2;
    memset(&e2, 0, sizeof e2);
    int rc2 = ssa_rank_init(&r)
                  ? -1
                  : ssa_kineto_load_memory_chunked(doc, strlen(doc), chunk, "skip.json", &r, &e2);
    if ((rc != 0) != (rc2 != 0) || r.nops != *nops || r.nranges != *nranges ||
        r.ncolls != *ncolls || (rc && strcmp(err.message, e2.message))) {
      fprintf(stderr, "chunk %zu differs from the whole import: rc %d/%d, '%s' / '%s'\n", chunk, rc,
              rc2, err.message, e2.message);
      failures++;
    }
    ssa_rank_free(&r);
  }
  return rc;
}

static void test_skipped_parts(void) {
  size_t nops, nranges, ncolls;
  char msg[512];
  /* metadata and flow events around a kernel and a CPU op: only those two
   * are imported; an absurd ts after a metadata event's ph is not looked at */
  static const char ok[] =
      "{\"traceEvents\":["
      "{\"name\":\"process_name\",\"ph\":\"M\",\"ts\":1e30,\"pid\":9,\"tid\":0,\"args\":{\"name\":"
      "\"MTIA 9\"}},"
      "{\"ph\":\"f\",\"id\":1,\"pid\":9,\"tid\":5,\"ts\":1,\"cat\":\"ac2g\",\"name\":\"ac2g\","
      "\"bp\":\"e\"},"
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":1,\"dur\":2,"
      "\"args\":{\"stream\":7,\"correlation\":3}},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":9,\"tid\":5,\"ts\":0.5,"
      "\"dur\":3,"
      "\"args\":{\"External id\":3,\"Input Dims\":[[1, 77, 3072], []],\"Concrete Inputs\":[\"\", "
      "\"a\\\"\\u00e9\\ud83d\\ude00\"],"
      "\"x\":{\"y\":[true,false,null,-1.5e-3]}}},"
      "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":9,\"tid\":5,\"args\":{\"name\":\"thread 5 "
      "\\u00e9\"}}"
      "]}";
  CHECK_EQ(import_every_way(ok, &nops, &nranges, &ncolls, msg, sizeof msg), 0);
  CHECK_EQ(nops, 1);
  CHECK_EQ(nranges, 1);
  /* errors in skipped parts are found and reported as ever */
  static const struct {
    const char *doc, *needle;
  } bad[] = {
      {"{\"traceEvents\":[{\"name\":\"n\",\"ph\":\"M\",\"args\":{\"x\":01}}]}",
       "expected ',' or '}'"},
      {"{\"traceEvents\":[{\"ph\":\"s\",\"id\":[1,]}]}",
       "unexpected ']' where a value was expected"},
      {"{\"traceEvents\":[{\"ph\":\"i\",\"s\":\"a\tb\"}]}", "control character"},
      {"{\"traceEvents\":[{\"ph\":\"M\",\"args\":{\"name\":\"x\"}]}", "expected ',' or '}'"},
      {"{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"args\":{\"x\":["
       "1,]}}]}",
       "byte 74 of the JSON text: unexpected ']' where a value was expected"},
      {"{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"a\",\"args\":{\"x\" "
       "1}}]}",
       "expected ':' after an object key"},
      {"{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"args\":{\"x\":"
       "\"\\q\"}}]}",
       "bad escape"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (import_every_way(bad[i].doc, &nops, &nranges, &ncolls, msg, sizeof msg) == 0 ||
        !strstr(msg, bad[i].needle)) {
      fprintf(stderr, "bad[%zu]: message '%s' lacks '%s'\n", i, msg, bad[i].needle);
      failures++;
    }
  }
  /* record_param_comms: its args are read, whether its name comes before or
   * after them; the NCCL kernel without metadata is joined to it */
  for (int name_last = 0; name_last < 2; name_last++) {
    char doc[2048];
    const char *args =
        "\"args\":{\"External id\":69,\"Collective name\":\"allreduce\",\"dtype\":\"Float\","
        "\"In msg nelems\":256,\"Out msg nelems\":256,\"Group size\":2,"
        "\"Process Group Name\":\"0\",\"Process Group Ranks\":\"[0, 1]\"}";
    snprintf(
        doc, sizeof doc,
        "{\"traceEvents\":["
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum_f32_RING_LL\","
        "\"pid\":0,"
        "\"tid\":20,\"ts\":200,\"dur\":50,\"args\":{\"stream\":20,\"device\":0,\"correlation\":11}}"
        ","
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",%s%s\"pid\":9,\"tid\":5,\"ts\":100,\"dur\":20,%s%s},"
        "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":9,\"tid\":5,"
        "\"ts\":110,\"dur\":4,\"args\":{\"correlation\":11}}]}",
        name_last ? "" : "\"name\":\"record_param_comms\",", name_last ? "" : "", args,
        name_last ? ",\"name\":\"record_param_comms\"" : "");
    CHECK_EQ(import_every_way(doc, &nops, &nranges, &ncolls, msg, sizeof msg), 0);
    CHECK_EQ(ncolls, 1);
  }
}

/* ---- the host timeline of a CPU-only trace: its CPU ops sorted by thread
 * and time whatever their order in the file (kineto_host.c keys them by the
 * thread's rank and the start, and sort.c merges the sorted runs Kineto
 * writes or radix-sorts) ---- */
static void test_host_order(void) {
  /* children before parents, threads interleaved: only the top-level ops
   * of each thread become host ops, in (thread, start) order: A, B, C */
  static const char doc[] =
      "{\"traceEvents\":["
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"B.child\",\"pid\":1,\"tid\":1,\"ts\":210,"
      "\"dur\":10},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"B\",\"pid\":1,\"tid\":1,\"ts\":200,\"dur\":100},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"C.child\",\"pid\":1,\"tid\":2,\"ts\":60,\"dur\":"
      "10},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":100},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"C\",\"pid\":1,\"tid\":2,\"ts\":50,\"dur\":100},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"A.child\",\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":"
      "10}"
      "]}";
  ssa_rank r;
  stepscope_error err;
  CHECK_EQ(load(doc, "host.json", &r, &err), 0);
  CHECK_EQ(r.nops, 3);
  if (r.nops == 3) {
    CHECK(!strcmp(ssa_rank_str(&r, r.ops[0].name), "A"));
    CHECK(!strcmp(ssa_rank_str(&r, r.ops[1].name), "B"));
    CHECK(!strcmp(ssa_rank_str(&r, r.ops[2].name), "C"));
  }
  ssa_rank_free(&r);
  /* thread ids far apart (a 64-bit OS thread id beside small ones): ordered
   * by id, whatever the file's order */
  static const char ids[] =
      "{\"traceEvents\":["
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"T3\",\"pid\":1,\"tid\":18446744073709551000,"
      "\"ts\":5,\"dur\":10},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"T1\",\"pid\":1,\"tid\":5,\"ts\":50,\"dur\":10},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"T2\",\"pid\":1,\"tid\":4000000000000,\"ts\":0,"
      "\"dur\":10},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"T1b\",\"pid\":1,\"tid\":5,\"ts\":70,\"dur\":10}"
      "]}";
  CHECK_EQ(load(ids, "host.json", &r, &err), 0);
  CHECK_EQ(r.nops, 4);
  if (r.nops == 4) {
    const char *want[] = {"T1", "T1b", "T2", "T3"};
    for (size_t i = 0; i < 4; i++)
      CHECK(!strcmp(ssa_rank_str(&r, r.ops[i].name), want[i]));
  }
  ssa_rank_free(&r);
  /* 300 disjoint ops on 3 threads, written as `runs` sorted runs (the
   * sorted list cut in pieces, the pieces in reverse order): every op is a
   * host op, in (thread, start) order */
  static const size_t run_counts[] = {1, 2, 3, 7, 64, 65, 300};
  const size_t n = 300;
  char *big = malloc(n * 128 + 64);
  CHECK(big != NULL);
  if (!big) return;
  for (size_t c = 0; c < sizeof run_counts / sizeof run_counts[0]; c++) {
    size_t runs = run_counts[c], len = 0;
    len += (size_t)sprintf(big + len, "{\"traceEvents\":[");
    for (size_t piece = runs; piece-- > 0;) {
      for (size_t i = piece * n / runs; i < (piece + 1) * n / runs;
           i++) /* sorted: thread, then time */
        len += (size_t)sprintf(big + len,
                               "%s{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"op%zu\",\"pid\":1,"
                               "\"tid\":%zu,\"ts\":%zu,\"dur\":5}",
                               len > 20 ? "," : "", i, 1 + i / 100, (i % 100) * 10);
    }
    sprintf(big + len, "]}");
    CHECK_EQ(load(big, "host.json", &r, &err), 0);
    CHECK_EQ(r.nops, n);
    int bad = 0;
    for (size_t i = 0; i < r.nops && i < n; i++) {
      char want[16];
      snprintf(want, sizeof want, "op%zu", i);
      bad += strcmp(ssa_rank_str(&r, r.ops[i].name), want) != 0;
    }
    if (bad) {
      fprintf(stderr, "%zu runs: %d host ops out of order\n", runs, bad);
      failures++;
    }
    ssa_rank_free(&r);
  }
  free(big);
}

/* ---- token boundaries: a surrogate pair, UTF-8, numbers and escapes cut by
 * input-buffer refills give the same result as when whole ---- */

/* The name of the only op, or NULL when the import failed. */
static char *only_op_name(const char *doc, size_t len, size_t chunk) {
  ssa_rank r;
  stepscope_error err;
  char *out = NULL;
  if (ssa_rank_init(&r)) return NULL;
  int rc = chunk ? ssa_kineto_load_memory_chunked(doc, len, chunk, "cut.json", &r, &err)
                 : ssa_kineto_load_memory(doc, len, "cut.json", &r, &err);
  if (rc == 0 && r.nops == 1) out = strdup(ssa_rank_str(&r, r.ops[0].name));
  ssa_rank_free(&r);
  return out;
}

static void test_boundaries(void) {
  /* every chunk size: every token boundary falls everywhere */
  static const char doc[] =
      "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"ts\":1700000000000001.5,\"dur\":2,"
      "\"name\":\"a\\uD83D\\uDE00b\\u00e9\xc3\xa9\\\"\xe2\x82\xac\xf0\x9f\x98\x80\\n\"}]}";
  static const char want[] = "a\xf0\x9f\x98\x80"
                             "b\xc3\xa9\xc3\xa9\"\xe2\x82\xac\xf0\x9f\x98\x80\n";
  for (size_t chunk = 1; chunk <= 24; chunk++) {
    char *name = only_op_name(doc, sizeof doc - 1, chunk);
    if (!name || strcmp(name, want)) {
      fprintf(stderr, "chunk %zu: name '%s'\n", chunk, name ? name : "(import failed)");
      failures++;
    }
    free(name);
  }
  /* a surrogate pair across the tokenizer's 256 KiB buffer, read whole: the
   * pair starts at every position from 14 bytes before the end to the end */
  const size_t buffer = 256u << 10;
  const char *head =
      "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"ts\":1,\"dur\":1,\"pad\":\"";
  const char *mid = "\",\"name\":\"x";
  const char *tail = "\\uD83D\\uDE00y\"}]}";
  size_t fixed = strlen(head) + strlen(mid);
  char *big = malloc(buffer + 4096);
  CHECK(big != NULL);
  if (!big) return;
  int bad = 0;
  for (size_t back = 0; back <= 14; back++) {
    size_t pad = buffer - back - fixed; /* the escape starts at buffer - back */
    size_t n = 0;
    memcpy(big + n, head, strlen(head));
    n += strlen(head);
    memset(big + n, 'p', pad);
    n += pad;
    memcpy(big + n, mid, strlen(mid));
    n += strlen(mid);
    memcpy(big + n, tail, strlen(tail));
    n += strlen(tail);
    char *name = only_op_name(big, n, 0);
    if (!name || strcmp(name, "x\xf0\x9f\x98\x80y")) {
      fprintf(stderr, "pair at %zu bytes before the buffer end: name '%s'\n", back,
              name ? name : "(import failed)");
      bad++;
    }
    free(name);
  }
  CHECK_EQ(bad, 0);
  free(big);
}

/* ---- gzip through the run loader, baseTimeNanoseconds ---- */
static void test_gzip(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/kineto_gz", dir);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", path, path);
  CHECK_EQ(system(cmd), 0);
  for (int rank = 0; rank < 2; rank++) {
    char file[640];
    snprintf(file, sizeof file, "%s/rank-%d.json.gz", path, rank);
    gzFile g = gzopen(file, "wb");
    CHECK(g != NULL);
    if (!g) return;
    /* ts relative to baseTimeNanoseconds, which comes last */
    gzprintf(
        g,
        "{\"distributedInfo\":{\"rank\":%d,\"world_size\":2},\"traceEvents\":["
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":1.5,\"dur\":2,"
        "\"args\":{\"stream\":7}}],\"baseTimeNanoseconds\":%lld}",
        rank, 1700000000000000000LL + rank * 1000LL);
    gzclose(g);
  }
  ssa_run run;
  stepscope_error err;
  memset(&err, 0, sizeof err);
  int rc = ssa_run_load(&run, path, NULL, &err);
  CHECK_EQ(rc, 0);
  if (rc == 0) {
    CHECK_EQ(run.nranks, 2);
    CHECK_EQ(run.ranks[1].rank, 1);
    CHECK_EQ(run.ranks[0].ops[0].start, 1500);
    /* rank 1's base is 1 us later: its kernel is 1 us later on the common time base */
    CHECK_EQ((run.ranks[1].ops[0].start + run.ranks[1].offset_ns) -
                 (run.ranks[0].ops[0].start + run.ranks[0].offset_ns),
             1000);
  }
  ssa_run_free(&run);
  /* a corrupt gzip stream is an error naming the file */
  char bad[640];
  snprintf(bad, sizeof bad, "%s/rank-9.json.gz", path);
  FILE *f = fopen(bad, "wb");
  CHECK(f != NULL);
  if (f) {
    static const unsigned char junk[] = {0x1f, 0x8b, 8, 0,    0,    0,    0,
                                         0,    0,    3, 0xff, 0xff, 0xff, 0x12};
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
  }
  ssa_rank r;
  ssa_rank_init(&r);
  memset(&err, 0, sizeof err);
  CHECK(ssa_kineto_source_load(bad, &r, &err) != 0);
  CHECK(strstr(err.message, "rank-9.json.gz") != NULL);
  ssa_rank_free(&r);
}

/* ---- gzip: whole-buffer (libdeflate) and streaming (zlib) paths ---- */
static void write_gz(const char *file, const char *doc, int members) {
  size_t n = strlen(doc), cut = members > 1 ? n / 2 : n;
  gzFile g = gzopen(file, "wb");
  CHECK(g != NULL);
  if (!g) return;
  CHECK_EQ(gzwrite(g, doc, (unsigned)cut), (long long)cut);
  gzclose(g);
  if (members > 1) { /* appended: a second gzip member */
    g = gzopen(file, "ab");
    CHECK(g != NULL);
    if (!g) return;
    CHECK_EQ(gzwrite(g, doc + cut, (unsigned)(n - cut)), (long long)(n - cut));
    gzclose(g);
  }
}

static void same_ranks(const ssa_rank *a, const ssa_rank *b) {
  CHECK_EQ(a->nops, b->nops);
  CHECK_EQ(a->napis, b->napis);
  CHECK_EQ(a->nranges, b->nranges);
  CHECK_EQ(a->ncolls, b->ncolls);
  CHECK_EQ(a->nwarnings, b->nwarnings);
  if (a->nops == b->nops) CHECK(memcmp(a->ops, b->ops, a->nops * sizeof *a->ops) == 0);
  if (a->napis == b->napis) CHECK(memcmp(a->apis, b->apis, a->napis * sizeof *a->apis) == 0);
  if (a->nranges == b->nranges)
    CHECK(memcmp(a->ranges, b->ranges, a->nranges * sizeof *a->ranges) == 0);
  if (a->ncolls == b->ncolls) CHECK(memcmp(a->colls, b->colls, a->ncolls * sizeof *a->colls) == 0);
  for (size_t i = 0; i < a->nops && a->nops == b->nops; i++)
    CHECK(strcmp(ssa_rank_str(a, a->ops[i].name), ssa_rank_str(b, b->ops[i].name)) == 0);
  for (size_t i = 0; i < a->nwarnings && a->nwarnings == b->nwarnings; i++)
    CHECK(strcmp(a->warnings[i], b->warnings[i]) == 0);
}

/* Loads `file` three ways: whole (libdeflate), streamed (zlib) and through
 * the pipe thread (inflate_pipe.c); the ranks must be identical. Returns
 * the load's status (the same every way). An error is the stream's message
 * when whole (the whole path declines a damaged file); the pipe's may word
 * the damage differently (ISA-L), but says the same kind of thing. */
static int same_both_ways(const char *file, stepscope_error *err_out) {
  ssa_rank a, b, c;
  stepscope_error ea, eb, ec;
  ssa_rank_init(&a);
  ssa_rank_init(&b);
  ssa_rank_init(&c);
  int ra = ssa_kineto_source_load_whole_max(file, SSA_GZIP_WHOLE_MAX, &a, &ea);
  int rb = ssa_kineto_source_load_whole_max(file, 0, &b, &eb);
  int rc = ssa_kineto_source_load_gzip(file, SSA_GZIP_PIPE, &c, &ec);
  CHECK_EQ(ra, rb);
  CHECK_EQ(rc, rb);
  if (ra == 0 && rb == 0)
    same_ranks(&a, &b);
  else
    CHECK(strcmp(ea.message, eb.message) == 0);
  if (rc == 0 && rb == 0)
    same_ranks(&c, &b);
  else if (strstr(eb.message, "gzip data is corrupt"))
    CHECK(strstr(ec.message, "gzip data is corrupt") != NULL);
  else
    CHECK(strcmp(ec.message, eb.message) == 0);
  if (err_out) *err_out = eb;
  ssa_rank_free(&a);
  ssa_rank_free(&b);
  ssa_rank_free(&c);
  return rb;
}

/* Whether the whole-buffer path takes the file (1), so that the comparison
 * above compares two different paths. */
#ifdef STEPSCOPE_HAVE_LIBDEFLATE
#define WHOLE_EXPECTED 1
#else
#define WHOLE_EXPECTED 0
#endif
static int whole_taken(const char *file) {
  int fd = open(file, O_RDONLY);
  CHECK(fd >= 0);
  if (fd < 0) return -1;
  off_t size = lseek(fd, 0, SEEK_END);
  unsigned char *buf;
  size_t len;
  int took = ssa_gzip_whole(fd, (uint64_t)size, SSA_GZIP_WHOLE_MAX, &buf, &len);
  if (took) ssa_gzip_whole_free(buf, len);
  close(fd);
  return took;
}

static void test_gzip_paths(const char *dir) {
  char path[512], file[640];
  snprintf(path, sizeof path, "%s/kineto_gz_paths", dir);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", path, path);
  CHECK_EQ(system(cmd), 0);
  /* escapes, a surrogate pair, bad UTF-8 (a warning), skipped args of every
   * kind, a collective, numbers with and without fractions, a number last */
  const char *doc =
      "{\"traceEvents\":["
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\\\"1\\u00e9\\ud83d\\ude00\",\"pid\":0,\"tid\":"
      "7,"
      "\"ts\":1.5,\"dur\":2.25,\"args\":{\"stream\":7,\"correlation\":11,\"grid\":[1,2,3],"
      "\"x\":[[1,-2.5e3],{\"a\":null,\"b\":true,\"c\":false}],\"y\":\"bad\xff\"}},"
      "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"f\",\"pid\":1,\"tid\":1,\"ts\":0.5,"
      "\"dur\":9,\"args\":{\"Python id\":3}},"
      "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,"
      "\"ts\":1,\"dur\":0.5,\"args\":{\"correlation\":11}},"
      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum_f32\",\"pid\":0,"
      "\"tid\":8,\"ts\":2,\"dur\":3,\"args\":{\"stream\":8,\"Collective name\":\"allreduce\","
      "\"dtype\":\"Float\",\"In msg nelems\":1024,\"Out msg nelems\":1024,\"Group size\":2,"
      "\"Process Group Name\":\"0\",\"Process Group Ranks\":\"[0, 1]\"}},"
      "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,\"tid\":1,"
      "\"ts\":0,\"dur\":10}"
      "],\"distributedInfo\":{\"rank\":0,\"world_size\":2},\"baseTimeNanoseconds\":0}";
  snprintf(file, sizeof file, "%s/rank-0.json.gz", path);
  write_gz(file, doc, 1);
  CHECK_EQ(same_both_ways(file, NULL), 0);
  CHECK_EQ(whole_taken(file), WHOLE_EXPECTED);
  /* two gzip members: ISIZE is the last member's, so the whole path declines */
  snprintf(file, sizeof file, "%s/rank-1.json.gz", path);
  write_gz(file, doc, 2);
  CHECK_EQ(same_both_ways(file, NULL), 0);
  CHECK_EQ(whole_taken(file), 0);
  /* a larger document, many times the pipe's ring (4 x 256 KiB) and the
   * tokenizer's buffer: steps, launches, kernels, collectives, skipped
   * python events; one member and two */
  {
    size_t cap = 24u << 20, n = 0;
    char *big = malloc(cap);
    CHECK(big != NULL);
    if (big) {
      n += (size_t)snprintf(big + n, cap - n, "{\"traceEvents\":[");
      for (int i = 0; i < 40000 && n + 2048 < cap; i++) {
        long long t = 1000LL * i;
        if (i % 1000 == 0)
          n += (size_t)snprintf(
              big + n, cap - n,
              "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\",\"pid\":1,"
              "\"tid\":1,\"ts\":%lld.250,\"dur\":999000},",
              i / 1000, t);
        n += (size_t)snprintf(
            big + n, cap - n,
            "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"torch/nn/%d.py(1): f\","
            "\"pid\":1,\"tid\":1,\"ts\":%lld.5,\"dur\":3,\"args\":{\"Python id\":%d}},"
            "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,"
            "\"tid\":1,\"ts\":%lld.125,\"dur\":4.5,\"args\":{\"correlation\":%d}},",
            i % 97, t, i, t + 1, i + 1);
        if (i % 50 == 7)
          n += (size_t)snprintf(
              big + n, cap - n,
              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum_f32\","
              "\"pid\":0,\"tid\":8,\"ts\":%lld,\"dur\":30,\"args\":{\"stream\":8,"
              "\"correlation\":%d,\"Collective name\":\"allreduce\",\"dtype\":\"Float\","
              "\"In msg nelems\":%d,\"Out msg nelems\":%d,\"Group size\":2,"
              "\"Process Group Name\":\"0\",\"Process Group Ranks\":\"[0, 1]\"}},",
              t + 10, i + 1, 1024 + i, 1024 + i);
        else
          n += (size_t)snprintf(
              big + n, cap - n,
              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm_%d\\u00e9\",\"pid\":0,\"tid\":7,"
              "\"ts\":%lld.%03d,\"dur\":%d.5,\"args\":{\"stream\":7,\"correlation\":%d,"
              "\"grid\":[%d,1,1],\"block\":[256,1,1]}},",
              i % 13, t + 10, i % 1000, 100 + i % 300, i + 1, 1 + i % 108);
      }
      n += (size_t)snprintf(big + n, cap - n,
                            "{\"ph\":\"i\",\"name\":\"end\",\"pid\":1,\"tid\":1,\"ts\":0}],"
                            "\"distributedInfo\":{\"rank\":0,\"world_size\":2}}");
      CHECK(n + 16 < cap);
      for (int members = 1; members <= 2; members++) {
        snprintf(file, sizeof file, "%s/big-%d.json.gz", path, members);
        write_gz(file, big, members);
        CHECK_EQ(same_both_ways(file, NULL), 0);
        ssa_rank r;
        stepscope_error e;
        ssa_rank_init(&r);
        CHECK_EQ(ssa_kineto_source_load_gzip(file, SSA_GZIP_PIPE, &r, &e), 0);
        CHECK_EQ(r.nops, 40000);  /* kernels */
        CHECK_EQ(r.ncolls, 800);  /* one in 50 */
        CHECK_EQ(r.napis, 40000); /* launches */
        ssa_rank_free(&r);
      }
      /* a JSON error a third of the way in: the tokenizer stops while the
       * pipe thread still has most of the file to inflate; the same error
       * every way */
      big[n / 3] = '\x01';
      snprintf(file, sizeof file, "%s/big-bad.json.gz", path);
      write_gz(file, big, 1);
      stepscope_error e;
      CHECK(same_both_ways(file, &e) != 0);
      CHECK(strstr(e.message, "of the JSON text") != NULL && strstr(e.message, "gzip") == NULL);
      free(big);
    }
  }
  /* a damaged CRC-32 or ISIZE: declined, and the stream reports the damage */
  for (int which = 0; which < 2; which++) {
    snprintf(file, sizeof file, "%s/rank-%d.json.gz", path, 2 + which);
    write_gz(file, doc, 1);
    FILE *f = fopen(file, "r+b");
    CHECK(f != NULL);
    if (!f) continue;
    fseek(f, which == 0 ? -8 : -4, SEEK_END); /* CRC-32, then ISIZE */
    int c = fgetc(f);
    fseek(f, which == 0 ? -8 : -4, SEEK_END);
    fputc(c ^ 0x01, f);
    fclose(f);
    stepscope_error err;
    CHECK_EQ(whole_taken(file), 0);
    CHECK(same_both_ways(file, &err) != 0);
    CHECK(strstr(err.message, "gzip data is corrupt") != NULL);
  }
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "/tmp";
  test_numbers();
  test_number_tokens();
  test_metrics();
  test_collectives();
  test_graph_and_missing();
  test_malformed();
  test_param_comms();
  test_skipped_parts();
  test_host_order();
  test_boundaries();
  test_gzip(dir);
  test_gzip_paths(dir);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("kineto: all checks passed\n");
  return 0;
}
