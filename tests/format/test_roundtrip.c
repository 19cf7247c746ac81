/*
 * test_roundtrip.c — what goes in comes out: every record kind, randomized
 * records over many frames, interned strings, forward compatibility (unknown
 * kinds, extra and missing fields), version and header checks, and a small
 * file truncated at every byte offset and with random bytes flipped, where
 * the reader must always return a prefix of the written records and then
 * end, warn or fail with a message — never crash or invent data.
 */
#include <zstd.h>

#include "record_codec.h"
#include "test_util.h"
#include "varint.h"

#define MAX_RECS 20000

/* Records equal, comparing metadata by content. */
static int records_equal(const stepscope_record *a, const stepscope_record *b) {
  if (a->kind != b->kind) return 0;
  if (a->kind == STEPSCOPE_REC_METADATA)
    return !strcmp(a->u.metadata.key, b->u.metadata.key) &&
           !strcmp(a->u.metadata.value_json, b->u.metadata.value_json);
  /* field by field, through the library's JSON formatting (ids as numbers):
   * padding bytes are not part of a record */
  char ja[2048], jb[2048];
  stepscope_record_to_json(a, NULL, ja, sizeof ja);
  stepscope_record_to_json(b, NULL, jb, sizeof jb);
  return strcmp(ja, jb) == 0;
}

static uint32_t pick_string(uint32_t nstrings) {
  return nstrings ? (uint32_t)(test_rand() % (nstrings + 1)) : 0;
}

/* A random record of a random kind; values span small, large and extreme. */
static void random_record(stepscope_record *r, uint32_t nstrings, uint64_t *clock) {
  static const uint32_t kinds[] = {STEPSCOPE_REC_KERNEL,       STEPSCOPE_REC_MEMCPY,
                                   STEPSCOPE_REC_MEMSET,       STEPSCOPE_REC_SYNC,
                                   STEPSCOPE_REC_API,          STEPSCOPE_REC_RANGE,
                                   STEPSCOPE_REC_MARK,         STEPSCOPE_REC_COLLECTIVE,
                                   STEPSCOPE_REC_HOST_OP,      STEPSCOPE_REC_COUNTER,
                                   STEPSCOPE_REC_MEMORY,       STEPSCOPE_REC_DROPPED,
                                   STEPSCOPE_REC_CLOCK_ANCHOR, STEPSCOPE_REC_OVERHEAD,
                                   STEPSCOPE_REC_STREAM,       STEPSCOPE_REC_EXTERNAL_CORRELATION};
  memset(r, 0, sizeof *r);
  r->kind = kinds[test_rand() % (sizeof kinds / sizeof kinds[0])];
  /* Times mostly move forward a little; sometimes jump anywhere. */
  *clock += test_rand() % 100000;
  uint64_t t = (test_rand() % 16 == 0) ? test_rand() : *clock;
  uint64_t end = (test_rand() % 16 == 0) ? test_rand() : t + test_rand() % 50000;
  switch (r->kind) {
  case STEPSCOPE_REC_KERNEL:
    memset(&r->u.kernel, 0, sizeof r->u.kernel);
    r->u.kernel.start_ns = t, r->u.kernel.end_ns = end;
    r->u.kernel.correlation_id = test_rand() % 4 ? test_rand() % 100000 : test_rand();
    r->u.kernel.stream = test_rand() % 32;
    r->u.kernel.name = pick_string(nstrings);
    r->u.kernel.device = (uint32_t)test_rand();
    r->u.kernel.grid[0] = (uint32_t)test_rand(), r->u.kernel.block[2] = 1024;
    r->u.kernel.registers_per_thread = 255, r->u.kernel.graph_id = test_rand();
    break;
  case STEPSCOPE_REC_MEMCPY:
    memset(&r->u.memcpy, 0, sizeof r->u.memcpy);
    r->u.memcpy.start_ns = t, r->u.memcpy.end_ns = end, r->u.memcpy.bytes = test_rand();
    r->u.memcpy.correlation_id = test_rand(), r->u.memcpy.copy_kind = 3;
    r->u.memcpy.dst_device = UINT32_MAX;
    break;
  case STEPSCOPE_REC_MEMSET:
    memset(&r->u.memset, 0, sizeof r->u.memset);
    r->u.memset.start_ns = t, r->u.memset.end_ns = end, r->u.memset.value = 7;
    r->u.memset.bytes = 1u << 30, r->u.memset.stream = UINT64_MAX;
    break;
  case STEPSCOPE_REC_SYNC:
    memset(&r->u.sync, 0, sizeof r->u.sync);
    r->u.sync.start_ns = t, r->u.sync.end_ns = end, r->u.sync.event_id = test_rand();
    r->u.sync.sync_kind = STEPSCOPE_SYNC_STREAM_WAIT_EVENT;
    break;
  case STEPSCOPE_REC_API:
    memset(&r->u.api, 0, sizeof r->u.api);
    r->u.api.start_ns = t, r->u.api.end_ns = end, r->u.api.thread = test_rand();
    r->u.api.name = pick_string(nstrings), r->u.api.return_code = -(int32_t)(test_rand() % 1000);
    r->u.api.correlation_id = test_rand() % 1000;
    break;
  case STEPSCOPE_REC_RANGE:
    memset(&r->u.range, 0, sizeof r->u.range);
    r->u.range.start_ns = t, r->u.range.end_ns = end, r->u.range.name = pick_string(nstrings);
    r->u.range.domain = pick_string(nstrings), r->u.range.args = pick_string(nstrings);
    r->u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64, r->u.range.payload = test_rand();
    r->u.range.color = 0xff00ff00u;
    break;
  case STEPSCOPE_REC_MARK:
    memset(&r->u.mark, 0, sizeof r->u.mark);
    r->u.mark.time_ns = t, r->u.mark.name = pick_string(nstrings), r->u.mark.thread = 3;
    break;
  case STEPSCOPE_REC_COLLECTIVE:
    memset(&r->u.collective, 0, sizeof r->u.collective);
    r->u.collective.start_ns = t, r->u.collective.end_ns = end;
    r->u.collective.comm_id = test_rand(), r->u.collective.seq = test_rand() % 100000;
    r->u.collective.count = test_rand(), r->u.collective.bytes = test_rand();
    r->u.collective.op = STEPSCOPE_COLL_ALLREDUCE, r->u.collective.peer = -1;
    r->u.collective.datatype = STEPSCOPE_DT_BFLOAT16, r->u.collective.comm_size = 16384;
    r->u.collective.algorithm = pick_string(nstrings),
    r->u.collective.protocol = pick_string(nstrings);
    r->u.collective.name = pick_string(nstrings), r->u.collective.flags = 7;
    break;
  case STEPSCOPE_REC_HOST_OP:
    memset(&r->u.host_op, 0, sizeof r->u.host_op);
    r->u.host_op.start_ns = t, r->u.host_op.end_ns = end, r->u.host_op.flops = test_rand();
    r->u.host_op.name = pick_string(nstrings), r->u.host_op.category = STEPSCOPE_CAT_COMM;
    r->u.host_op.args = pick_string(nstrings), r->u.host_op.seq = 12;
    break;
  case STEPSCOPE_REC_COUNTER:
    memset(&r->u.counter, 0, sizeof r->u.counter);
    r->u.counter.time_ns = t, r->u.counter.name = pick_string(nstrings);
    r->u.counter.value = (double)(int64_t)test_rand() / 3.0;
    break;
  case STEPSCOPE_REC_MEMORY:
    memset(&r->u.memory, 0, sizeof r->u.memory);
    r->u.memory.time_ns = t, r->u.memory.address = test_rand(), r->u.memory.bytes = 4096;
    r->u.memory.memory_kind = STEPSCOPE_MEM_FREE;
    break;
  case STEPSCOPE_REC_DROPPED:
    memset(&r->u.dropped, 0, sizeof r->u.dropped);
    r->u.dropped.time_ns = t, r->u.dropped.count = test_rand(), r->u.dropped.source = 2;
    break;
  case STEPSCOPE_REC_CLOCK_ANCHOR:
    memset(&r->u.clock_anchor, 0, sizeof r->u.clock_anchor);
    r->u.clock_anchor.trace_ns = t, r->u.clock_anchor.realtime_ns = test_rand();
    r->u.clock_anchor.monotonic_ns = t + 5;
    break;
  case STEPSCOPE_REC_OVERHEAD:
    memset(&r->u.overhead, 0, sizeof r->u.overhead);
    r->u.overhead.start_ns = t, r->u.overhead.end_ns = end,
    r->u.overhead.name = pick_string(nstrings);
    break;
  case STEPSCOPE_REC_EXTERNAL_CORRELATION:
    r->u.external_correlation.correlation_id = test_rand();
    r->u.external_correlation.external_id = test_rand() % 1000;
    r->u.external_correlation.external_kind = 2;
    break;
  case STEPSCOPE_REC_STREAM:
    memset(&r->u.stream, 0, sizeof r->u.stream);
    r->u.stream.stream = test_rand(), r->u.stream.name = pick_string(nstrings);
    r->u.stream.priority = -5, r->u.stream.stream_kind = STEPSCOPE_STREAM_GPU;
    break;
  }
}

typedef struct read_result {
  stepscope_record *recs;
  size_t n;
  int rc; /* 0 end, <0 error, 1 open failed */
  size_t warnings;
  stepscope_error err;
} read_result;

/* Reads all non-string records of a file. */
static read_result read_all(const char *path) {
  read_result rr = {0};
  rr.recs = calloc(MAX_RECS + 16, sizeof *rr.recs);
  stepscope_reader *r = stepscope_reader_open(path, &rr.err);
  if (!r) {
    rr.rc = 1;
    CHECK_MSG(rr.err.message[0] != '\0', "open failed without a message");
    CHECK_MSG(strstr(rr.err.message, path) != NULL, "error does not name the file: %s",
              rr.err.message);
    return rr;
  }
  stepscope_record rec;
  int rc;
  while ((rc = stepscope_reader_next(r, &rec, &rr.err)) == 1) {
    if (rec.kind == STEPSCOPE_REC_STRING || rec.kind == STEPSCOPE_REC_HEADER) continue;
    if (rr.n < MAX_RECS + 16) {
      rr.recs[rr.n] = rec;
      if (rec.kind == STEPSCOPE_REC_METADATA) { /* pointers die with the reader */
        rr.recs[rr.n].u.metadata.key = strdup(rec.u.metadata.key);
        rr.recs[rr.n].u.metadata.value_json = strdup(rec.u.metadata.value_json);
      }
      rr.n++;
    }
  }
  rr.rc = rc;
  if (rc < 0) {
    CHECK_MSG(strstr(rr.err.message, path) != NULL, "error does not name the file: %s",
              rr.err.message);
    CHECK_MSG(strstr(rr.err.message, "offset") != NULL, "error does not give an offset: %s",
              rr.err.message);
  }
  rr.warnings = stepscope_reader_warning_count(r);
  stepscope_reader_close(r);
  return rr;
}

static void free_result(read_result *rr) {
  for (size_t i = 0; i < rr->n; i++)
    if (rr->recs[i].kind == STEPSCOPE_REC_METADATA) {
      free((char *)rr->recs[i].u.metadata.key);
      free((char *)rr->recs[i].u.metadata.value_json);
    }
  free(rr->recs);
}

/* Writes n random records (single thread) with small frames. */
static void write_random(const char *path, stepscope_record *recs, size_t n, size_t frame_bytes) {
  stepscope_header h = test_header(0);
  stepscope_writer_options opt = {.frame_bytes = frame_bytes};
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, &opt, &err);
  CHECK_MSG(w != NULL, "%s", err.message);
  if (!w) return;
  uint32_t nstrings = 0;
  uint64_t clock = 1000;
  char name[64];
  for (size_t i = 0; i < n; i++) {
    if (test_rand() % 8 == 0) { /* new strings appear as the trace goes on */
      snprintf(name, sizeof name, "kernel_%zu_\"quoted\"\\n", i);
      uint32_t id = stepscope_intern(w, name);
      CHECK(id == nstrings + 1);
      nstrings = id;
    }
    if (test_rand() % 50 == 0) {
      memset(&recs[i], 0, sizeof recs[i]);
      recs[i].kind = STEPSCOPE_REC_METADATA;
      recs[i].u.metadata.key = "layout";
      recs[i].u.metadata.value_json = "{\"dp\":2,\"pp\":2}";
    } else {
      random_record(&recs[i], nstrings, &clock);
    }
    CHECK(stepscope_write(w, &recs[i]) == 0);
  }
  CHECK(stepscope_writer_dropped(w) == 0);
  CHECK_MSG(stepscope_writer_close(w, &err) == 0, "%s", err.message);
}

static void test_every_kind_and_random(void) {
  char path[512];
  test_tmp_path(path, sizeof path, "random");
  static stepscope_record recs[MAX_RECS];
  size_t n = MAX_RECS;
  write_random(path, recs, n, 64 << 10);
  read_result rr = read_all(path);
  CHECK_MSG(rr.rc == 0, "rc %d: %s", rr.rc, rr.err.message);
  CHECK_MSG(rr.n == n, "read %zu of %zu records", rr.n, n);
  CHECK(rr.warnings == 0);
  size_t mismatches = 0;
  for (size_t i = 0; i < n && i < rr.n; i++)
    if (!records_equal(&recs[i], &rr.recs[i])) {
      if (mismatches++ < 5) fprintf(stderr, "record %zu (kind %u) differs\n", i, recs[i].kind);
    }
  CHECK(mismatches == 0);
  /* every kind was exercised */
  int seen[STEPSCOPE_REC_KIND_MAX] = {0};
  for (size_t i = 0; i < rr.n; i++)
    seen[rr.recs[i].kind] = 1;
  for (uint32_t k = STEPSCOPE_REC_KERNEL; k <= STEPSCOPE_REC_EXTERNAL_CORRELATION; k++)
    CHECK_MSG(seen[k], "kind %u never round-tripped", k);
  CHECK(seen[STEPSCOPE_REC_METADATA] && seen[STEPSCOPE_REC_STREAM]);
  free_result(&rr);
  unlink(path);
}

static void test_strings_and_header(void) {
  char path[512];
  test_tmp_path(path, sizeof path, "strings");
  stepscope_header h = test_header(3);
  h.cuda_version = "13.0";
  stepscope_error err;
  stepscope_writer_options opt = {.frame_bytes = 4096};
  stepscope_writer *w = stepscope_writer_open(path, &h, &opt, &err);
  CHECK(w != NULL);
  if (!w) return;
  CHECK(stepscope_intern(w, NULL) == 0);
  uint32_t a = stepscope_intern(w, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  uint32_t b = stepscope_intern(w, "");
  CHECK(a == 1 && b == 2);
  CHECK(stepscope_intern(w, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == a);
  char big[5000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  uint32_t c = stepscope_intern(w, big);
  for (int i = 0; i < 3000; i++) { /* strings spread over many frames */
    char s[32];
    snprintf(s, sizeof s, "s%d", i);
    stepscope_record rec = {.kind = STEPSCOPE_REC_MARK};
    rec.u.mark.time_ns = (uint64_t)i;
    rec.u.mark.name = stepscope_intern(w, s);
    rec.u.mark.args = c;
    stepscope_write(w, &rec);
  }
  CHECK(stepscope_writer_close(w, &err) == 0);
  stepscope_reader *r = stepscope_reader_open(path, &err);
  CHECK_MSG(r != NULL, "%s", err.message);
  if (!r) return;
  const stepscope_header *rh = stepscope_reader_header(r);
  CHECK(rh->rank == 3 && rh->world_size == 4 && rh->pid == 4242 && rh->start_ns == 1000);
  CHECK(rh->format_major == STEPSCOPE_FORMAT_MAJOR && rh->format_minor == STEPSCOPE_FORMAT_MINOR);
  CHECK(!strcmp(rh->hostname, "testhost") && !strcmp(rh->cuda_version, "13.0"));
  CHECK(!strcmp(rh->nccl_version, "")); /* NULL is written as empty */
  CHECK(!strcmp(rh->config_json, "{\"test\":true}"));
  stepscope_record rec;
  int i = 0, rc;
  while ((rc = stepscope_reader_next(r, &rec, &err)) == 1) {
    if (rec.kind != STEPSCOPE_REC_MARK) continue;
    char s[32];
    snprintf(s, sizeof s, "s%d", i);
    const char *name = stepscope_reader_string(r, rec.u.mark.name);
    CHECK_MSG(name && !strcmp(name, s), "mark %d has name %s", i, name ? name : "(null)");
    CHECK(rec.u.mark.time_ns == (uint64_t)i);
    const char *args = stepscope_reader_string(r, rec.u.mark.args);
    CHECK(args && strlen(args) == sizeof big - 1);
    i++;
  }
  CHECK(rc == 0 && i == 3000);
  CHECK(!strcmp(stepscope_reader_string(r, a), "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"));
  CHECK(!strcmp(stepscope_reader_string(r, b), ""));
  CHECK(stepscope_reader_string(r, 0) == NULL && stepscope_reader_string(r, 999999) == NULL);
  stepscope_reader_close(r);
  unlink(path);
}

/* Builds a trace by hand: the writer's header frame, then one frame of raw bytes. */
static void write_raw_frame_file(const char *path, const uint8_t *raw, size_t len, int major) {
  stepscope_header h = test_header(0);
  h.format_major = (uint32_t)major;
  h.format_minor = 7;
  uint8_t hb[4096];
  size_t hl = (size_t)(codec_encode_header(hb, &h) - hb);
  FILE *f = fopen(path, "wb");
  uint8_t cb[8192];
  size_t c1 = ZSTD_compress(cb, sizeof cb, hb, hl, 3);
  fwrite(cb, 1, c1, f);
  if (len) {
    size_t c2 = ZSTD_compress(cb, sizeof cb, raw, len, 3);
    fwrite(cb, 1, c2, f);
  }
  fclose(f);
}

static void test_forward_compatibility(void) {
  char path[512];
  test_tmp_path(path, sizeof path, "compat");
  uint8_t raw[512], *p = raw;
  codec_state st = {0, 0};
  p = codec_encode_block(&st, p, 77);
  /* an unknown timed kind (50) at t=1000, with a 3-byte payload */
  p = varint_put(p, 50u << 1 | 1);
  p = varint_put(p, zigzag_encode(1000));
  p = varint_put(p, 3);
  *p++ = 1, *p++ = 2, *p++ = 3;
  /* a kernel at t=1500 (delta 500 from the unknown record) with two extra
   * trailing bytes: fields of a future minor version */
  p = varint_put(p, STEPSCOPE_REC_KERNEL << 1 | 1);
  p = varint_put(p, zigzag_encode(500));
  uint8_t payload[64], *q = payload;
  q = varint_put(q, zigzag_encode(100)); /* end = start + 100 */
  q = varint_put(q, zigzag_encode(42));  /* correlation */
  q = varint_put(q, 7);                  /* stream */
  for (int i = 0; i < 12; i++)
    q = varint_put(q, 0);
  q = varint_put(q, 0);     /* graph id */
  *q++ = 0x05, *q++ = 0x06; /* unknown extra fields */
  p = varint_put(p, (uint64_t)(q - payload));
  memcpy(p, payload, (size_t)(q - payload));
  p += q - payload;
  /* a memset with only its duration: missing fields read as 0 */
  p = varint_put(p, STEPSCOPE_REC_MEMSET << 1 | 1);
  p = varint_put(p, zigzag_encode(10));
  p = varint_put(p, 1);
  p = varint_put(p, zigzag_encode(5));
  write_raw_frame_file(path, raw, (size_t)(p - raw), 1);

  stepscope_error err;
  stepscope_reader *r = stepscope_reader_open(path, &err);
  CHECK_MSG(r != NULL, "%s", err.message);
  if (!r) return;
  CHECK(stepscope_reader_header(r)->format_minor == 7); /* newer minor: read */
  stepscope_record rec;
  CHECK(stepscope_reader_next(r, &rec, &err) == 1);
  CHECK(rec.kind == STEPSCOPE_REC_KERNEL);
  CHECK_MSG(rec.u.kernel.start_ns == 1500, "start %llu", (unsigned long long)rec.u.kernel.start_ns);
  CHECK(rec.u.kernel.end_ns == 1600 && rec.u.kernel.correlation_id == 42 &&
        rec.u.kernel.stream == 7);
  CHECK(stepscope_reader_next(r, &rec, &err) == 1);
  CHECK(rec.kind == STEPSCOPE_REC_MEMSET && rec.u.memset.start_ns == 1510 &&
        rec.u.memset.end_ns == 1515 && rec.u.memset.bytes == 0 && rec.u.memset.stream == 0);
  CHECK(stepscope_reader_next(r, &rec, &err) == 0);
  CHECK(stepscope_reader_unknown_records(r) == 1);
  stepscope_reader_close(r);

  /* a newer major version is refused with a clear message */
  write_raw_frame_file(path, NULL, 0, 2);
  r = stepscope_reader_open(path, &err);
  CHECK(r == NULL && err.code == STEPSCOPE_E_VERSION && strstr(err.message, "2.7"));
  stepscope_reader_close(r);

  /* an undefined string id after the header is damage: the rest of its
   * frame is skipped with a warning naming the file and offset, and
   * reading goes on */
  p = raw;
  st = (codec_state){0, 0};
  stepscope_record bad = {.kind = STEPSCOPE_REC_MARK};
  bad.u.mark.name = 3;
  p = codec_encode(&st, p, &bad);
  write_raw_frame_file(path, raw, (size_t)(p - raw), 1);
  r = stepscope_reader_open(path, &err);
  CHECK(r != NULL);
  if (r) {
    CHECK(stepscope_reader_next(r, &rec, &err) == 0);
    CHECK(stepscope_reader_damaged_regions(r) == 1);
    const char *w = stepscope_reader_warning_count(r) ? stepscope_reader_warning(r, 0) : "";
    CHECK_MSG(strstr(w, "string id") && strstr(w, "offset") && strstr(w, path), "%s", w);
    stepscope_reader_close(r);
  }
  unlink(path);
}

static void test_bad_files(void) {
  stepscope_error err;
  CHECK(stepscope_reader_open("/nonexistent/x.trace.zst", &err) == NULL);
  CHECK(err.code == STEPSCOPE_E_IO && strstr(err.message, "/nonexistent/x.trace.zst"));
  char path[512];
  test_tmp_path(path, sizeof path, "bad");
  FILE *f = fopen(path, "wb");
  fclose(f);
  CHECK(stepscope_reader_open(path, &err) == NULL && err.code == STEPSCOPE_E_FORMAT);
  CHECK(strstr(err.message, "empty"));
  f = fopen(path, "wb");
  fputs("{\"traceEvents\": []}\n", f);
  fclose(f);
  CHECK(stepscope_reader_open(path, &err) == NULL && err.code == STEPSCOPE_E_FORMAT);
  CHECK_MSG(strstr(err.message, "offset 0"), "%s", err.message);
  /* a valid zstd frame that does not start with a header */
  uint8_t raw[64], *p = raw, cb[256];
  codec_state st = {0, 0};
  stepscope_record m = {.kind = STEPSCOPE_REC_MARK};
  p = codec_encode(&st, p, &m);
  size_t c = ZSTD_compress(cb, sizeof cb, raw, (size_t)(p - raw), 1);
  f = fopen(path, "wb");
  fwrite(cb, 1, c, f);
  fclose(f);
  CHECK(stepscope_reader_open(path, &err) == NULL && strstr(err.message, "header"));
  CHECK(stepscope_reader_open("/tmp", &err) == NULL && strstr(err.message, "directory"));
  unlink(path);
}

/* Reads `len` bytes of `data` as a file; the result must be a prefix of
 * what was written (a cut file), or with `damaged` a subsequence of it (a
 * damaged frame's records are skipped, the later frames read). */
static void check_read_property(const char *path, const uint8_t *data, size_t len,
                                const stepscope_record *orig, size_t norig, int expect_all,
                                int damaged, size_t *errors, size_t *warnings) {
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, len, f);
  fclose(f);
  read_result rr = read_all(path);
  if (rr.rc == 1) {
    (*errors)++;
  } else {
    if (rr.rc < 0) (*errors)++;
    if (rr.warnings) (*warnings)++;
    CHECK_MSG(rr.n <= norig, "read %zu > %zu records", rr.n, norig);
    for (size_t i = 0, j = 0; i < rr.n && j <= norig; i++, j++) {
      while (damaged && j < norig && !records_equal(&orig[j], &rr.recs[i]))
        j++;
      if (j == norig || !records_equal(&orig[j], &rr.recs[i])) {
        CHECK_MSG(0, "length %zu: record %zu is not one written (in order)", len, i);
        break;
      }
    }
    if (expect_all) CHECK(rr.n == norig && rr.rc == 0 && rr.warnings == 0);
  }
  free_result(&rr);
}

static void test_truncation_and_corruption(void) {
  char path[512], cut[512];
  test_tmp_path(path, sizeof path, "small");
  test_tmp_path(cut, sizeof cut, "cut");
  static stepscope_record recs[400];
  size_t n = 400;
  write_random(path, recs, n, 2048); /* many small frames */
  FILE *f = fopen(path, "rb");
  static uint8_t data[1 << 20];
  size_t len = fread(data, 1, sizeof data, f);
  fclose(f);
  CHECK(len > 1000 && len < sizeof data);
  size_t errors = 0, warnings = 0;
  for (size_t at = 0; at <= len; at++)
    check_read_property(cut, data, at, recs, n, at == len, 0, &errors, &warnings);
  CHECK(warnings > 0); /* truncations inside frames were reported */
  fprintf(stderr, "truncation: %zu lengths, %zu errors (header incomplete), %zu warnings\n",
          len + 1, errors, warnings);

  /* Any bit may flip, the frame header's content-checksum flag (bit 2 of
   * the byte after the magic) included: the reader refuses a frame without
   * it, since zstd would then skip that frame's check. */
  /* A later frame whose checksum flag was cleared (bit 2 of the descriptor)
   * and its 4 checksum bytes removed is a valid zstd frame that zstd does not
   * check: the reader must still skip it with a warning, since the header
   * frame had a checksum (without that rule it reads the frame silently). */
  size_t frame_at[64], nframes = 0;
  for (size_t off = 0; off < len && nframes < 64;) {
    size_t fs = ZSTD_findFrameCompressedSize(data + off, len - off);
    if (ZSTD_isError(fs)) break;
    frame_at[nframes++] = off;
    off += fs;
  }
  CHECK_MSG(nframes >= 3, "%zu frames in %zu bytes", nframes, len); /* header, records, end */
  static uint8_t flipped[1 << 20];
  for (size_t fr = 1; fr < nframes; fr++) {
    size_t end = fr + 1 < nframes ? frame_at[fr + 1] : len;
    memcpy(flipped, data, end - 4);
    memcpy(flipped + end - 4, data + end, len - end);
    CHECK(flipped[frame_at[fr] + 4] & 0x04);
    flipped[frame_at[fr] + 4] &= (uint8_t)~0x04;
    CHECK(!ZSTD_isError(
        ZSTD_findFrameCompressedSize(flipped + frame_at[fr], len - 4 - frame_at[fr])));
    size_t e = 0, w = 0;
    check_read_property(cut, flipped, len - 4, recs, n, 0, 1, &e, &w);
    CHECK_MSG(e == 0 && w == 1, "frame %zu without checksum: %zu errors, %zu warnings", fr, e, w);
  }
  size_t flip_errors = 0, flip_warnings = 0;
  for (int iter = 0; iter < 3000; iter++) {
    memcpy(flipped, data, len);
    int nflips = 1 + (int)(test_rand() % 3);
    for (int k = 0; k < nflips; k++) {
      size_t at = test_rand() % len;
      unsigned bit = (unsigned)(test_rand() % 8);
      flipped[at] ^= (uint8_t)(1u << bit);
    }
    check_read_property(cut, flipped, len, recs, n, 0, 1, &flip_errors, &flip_warnings);
  }
  /* checksums catch nearly every flip; after the header frame the damaged
   * frame is skipped with a warning and the rest of the file is read */
  CHECK(flip_warnings > 2000);
  CHECK(flip_errors < 500);
  fprintf(stderr, "bit flips: 3000 files, %zu errors, %zu warnings\n", flip_errors, flip_warnings);
  unlink(path);
  unlink(cut);
}

/* The writer's hot path reserves codec_bound() bytes per record: it must
 * bound every kind's real maximum (codec_max_size), and refuse what
 * codec_max_size refuses. */
static void test_codec_bound(void) {
  for (uint32_t kind = 0; kind < 80; kind++) {
    stepscope_record rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = kind;
    if (kind == STEPSCOPE_REC_METADATA) {
      rec.u.metadata.key = "k";
      rec.u.metadata.value_json = "{\"a\":1}";
    }
    size_t exact = codec_max_size(&rec), bound = codec_bound(&rec);
    CHECK_MSG(bound >= exact && (exact == 0) == (bound == 0), "kind %u: bound %zu, max %zu", kind,
              bound, exact);
  }
}

/* A record larger than a thread buffer (a 600 kB METADATA value) between
 * small ones, with and without the background thread: each arrives whole,
 * in order with the others of its thread. */
static void test_record_larger_than_a_buffer(void) {
  size_t big_len = 600u << 10;
  char *big = malloc(big_len + 1);
  CHECK(big != NULL);
  if (!big) return;
  for (size_t i = 0; i < big_len; i++)
    big[i] = (char)('a' + i % 26);
  big[big_len] = '\0';
  for (int background = 0; background < 2; background++) {
    char path[512];
    test_tmp_path(path, sizeof path, "bigrecord");
    stepscope_header h = test_header(0);
    stepscope_writer_options opt = {.background_flush = background};
    stepscope_error err;
    stepscope_writer *w = stepscope_writer_open(path, &h, &opt, &err);
    CHECK_MSG(w != NULL, "%s", err.message);
    if (!w) break;
    for (uint64_t i = 0; i < 3000; i++) {
      stepscope_record rec = {.kind = STEPSCOPE_REC_MEMORY};
      rec.u.memory.time_ns = 1000 + i;
      rec.u.memory.address = i;
      CHECK(stepscope_write(w, &rec) == 0);
      if (i % 1000 == 500) {
        stepscope_record m = {.kind = STEPSCOPE_REC_METADATA};
        m.u.metadata.key = "big";
        m.u.metadata.value_json = big;
        CHECK(stepscope_write(w, &m) == 0);
      }
    }
    CHECK_MSG(stepscope_writer_close(w, &err) == 0, "%s", err.message);
    stepscope_reader *r = stepscope_reader_open(path, &err);
    CHECK_MSG(r != NULL, "%s", err.message);
    if (!r) break;
    stepscope_record rec;
    uint64_t next = 0, bigs = 0;
    int rc;
    while ((rc = stepscope_reader_next(r, &rec, &err)) == 1) {
      if (rec.kind == STEPSCOPE_REC_MEMORY) {
        CHECK(rec.u.memory.address == next && rec.u.memory.time_ns == 1000 + next);
        next++;
      } else if (rec.kind == STEPSCOPE_REC_METADATA) {
        CHECK(!strcmp(rec.u.metadata.key, "big") && !strcmp(rec.u.metadata.value_json, big));
        CHECK(next % 1000 == 501);
        bigs++;
      }
    }
    CHECK_MSG(rc == 0, "%s", err.message);
    CHECK(next == 3000 && bigs == 3);
    stepscope_reader_close(r);
    unlink(path);
  }
  free(big);
}

int main(void) {
  test_codec_bound();
  test_record_larger_than_a_buffer();
  test_every_kind_and_random();
  test_strings_and_header();
  test_forward_compatibility();
  test_bad_files();
  test_truncation_and_corruption();
  if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
  return test_failures ? 1 : 0;
}
