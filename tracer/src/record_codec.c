/*
 * record_codec.c — one record to bytes and back.
 *
 * Wire layout of a record (docs/trace-format.md):
 *
 *   varint tag            kind << 1 | timed
 *   [varint zigzag dt]    if timed: time - prev_time (then prev_time = time)
 *   varint length         payload bytes
 *   payload               the kind's fields, in the order of its table below
 *
 * Every kind is described by a table of fields (type + offset in the C
 * struct), so encoding and decoding cannot drift apart. A reader fills fields
 * missing at the end of a payload with 0 and ignores extra trailing bytes:
 * that is how fields are added compatibly. Unknown kinds are skipped by
 * length, and their optional timestamp still updates prev_time, so delta
 * decoding stays in step. The correlation delta (FT_CORR) is only ever used by
 * the kinds of format 1.0; kinds added later must encode correlations as
 * plain FT_U64, because an older reader skipping them could not follow.
 */
#include "record_codec.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "varint.h"

#define F(type, st, member)                                                                        \
  { type, (uint16_t)offsetof(st, member), #member }
#define T(st, member) (int)offsetof(st, member), #member

/* Field orders are part of the format: append only, never reorder. */
/* Each kind's fields are listed once (an X-macro list) and expand into both
 * its table (decoding, JSON) and a straight-line encoder (the writer's hot
 * path): the two cannot disagree, and the encoder's enc_FT_* helpers take
 * typed pointers, so a field whose C type does not match its wire type does
 * not compile. */
#define TABLE_ENTRY(type, st, member) F(type, st, member),

static inline uint8_t *enc_FT_U64(codec_state *cs, uint8_t *p, const uint64_t *v, uint64_t t) {
  (void)cs, (void)t;
  return varint_put(p, *v);
}
static inline uint8_t *enc_FT_U32(codec_state *cs, uint8_t *p, const uint32_t *v, uint64_t t) {
  (void)cs, (void)t;
  return varint_put(p, *v);
}
#define enc_FT_STR enc_FT_U32
static inline uint8_t *enc_FT_I32(codec_state *cs, uint8_t *p, const int32_t *v, uint64_t t) {
  (void)cs, (void)t;
  return varint_put(p, zigzag_encode(*v));
}
static inline uint8_t *enc_FT_F64(codec_state *cs, uint8_t *p, const double *v, uint64_t t) {
  (void)cs, (void)t;
  return f64_put(p, *v);
}
static inline uint8_t *enc_FT_DUR(codec_state *cs, uint8_t *p, const uint64_t *v, uint64_t t) {
  (void)cs;
  return varint_put(p, zigzag_encode((int64_t)(*v - t)));
}
static inline uint8_t *enc_FT_CORR(codec_state *cs, uint8_t *p, const uint64_t *v, uint64_t t) {
  (void)t;
  uint8_t *q = varint_put(p, zigzag_encode((int64_t)(*v - cs->prev_corr)));
  cs->prev_corr = *v;
  return q;
}

/* Writes the payload after a one-byte length slot, then fixes the length
 * (moving the payload when the length needs more than one byte). */
static inline uint8_t *finish_length(uint8_t *len_slot, uint8_t *end) {
  size_t len = (size_t)(end - len_slot - 1);
  if (len < 0x80) {
    *len_slot = (uint8_t)len;
    return end;
  }
  uint8_t lenbuf[VARINT_MAX];
  size_t lenlen = (size_t)(varint_put(lenbuf, len) - lenbuf);
  memmove(len_slot + lenlen, len_slot + 1, len);
  memcpy(len_slot, lenbuf, lenlen);
  return len_slot + lenlen + len;
}

#define ENCODE_FIELD(type, st, member) p = enc_##type(cs, p, &b->member, time);
#define DEFINE_TIMED_ENCODER(lower, st, time_member, KIND)                                         \
  static uint8_t *encode_##lower(codec_state *cs, uint8_t *p, const st *b) {                       \
    uint64_t time = b->time_member;                                                                \
    p = varint_put(p, (uint64_t)STEPSCOPE_REC_##KIND << 1 | 1u);                                   \
    p = varint_put(p, zigzag_encode((int64_t)(time - cs->prev_time)));                             \
    cs->prev_time = time;                                                                          \
    uint8_t *len_slot = p++;                                                                       \
    KIND##_FIELDS(ENCODE_FIELD) return finish_length(len_slot, p);                                 \
  }
#define DEFINE_UNTIMED_ENCODER(lower, st, KIND)                                                    \
  static uint8_t *encode_##lower(codec_state *cs, uint8_t *p, const st *b) {                       \
    const uint64_t time = 0;                                                                       \
    p = varint_put(p, (uint64_t)STEPSCOPE_REC_##KIND << 1);                                        \
    uint8_t *len_slot = p++;                                                                       \
    KIND##_FIELDS(ENCODE_FIELD) return finish_length(len_slot, p);                                 \
  }

/* Straight-line decoders from the same lists (the reader's hot path). A
 * field missing at the end of a payload keeps 0 (an end time: the start). */
typedef struct dec_ctx {
  codec_state *cs;
  uint64_t time;
  uint32_t max_string_id;
  char *why;
  size_t why_len;
} dec_ctx;

static const uint8_t *dec_fail(dec_ctx *c, const char *what) {
  if (c->why && c->why_len) snprintf(c->why, c->why_len, "%s", what);
  return NULL;
}
static inline const uint8_t *dec_FT_U64(dec_ctx *c, const uint8_t *p, const uint8_t *end,
                                        uint64_t *v) {
  p = varint_get(p, end, v);
  return p ? p : dec_fail(c, "a complete varint field inside the record");
}
static inline const uint8_t *dec_FT_U32(dec_ctx *c, const uint8_t *p, const uint8_t *end,
                                        uint32_t *v) {
  uint64_t x;
  if (!(p = dec_FT_U64(c, p, end, &x))) return NULL;
  if (x > UINT32_MAX) return dec_fail(c, "a 32-bit field value");
  *v = (uint32_t)x;
  return p;
}
static inline const uint8_t *dec_FT_STR(dec_ctx *c, const uint8_t *p, const uint8_t *end,
                                        uint32_t *v) {
  uint64_t x;
  if (!(p = dec_FT_U64(c, p, end, &x))) return NULL;
  if (x > c->max_string_id) {
    if (c->why && c->why_len)
      snprintf(c->why, c->why_len, "a defined string id (got %llu, %u defined)",
               (unsigned long long)x, c->max_string_id);
    return NULL;
  }
  *v = (uint32_t)x;
  return p;
}
static inline const uint8_t *dec_FT_I32(dec_ctx *c, const uint8_t *p, const uint8_t *end,
                                        int32_t *v) {
  uint64_t x;
  if (!(p = dec_FT_U64(c, p, end, &x))) return NULL;
  int64_t sv = zigzag_decode(x);
  if (sv < INT32_MIN || sv > INT32_MAX) return dec_fail(c, "a 32-bit signed field value");
  *v = (int32_t)sv;
  return p;
}
static inline const uint8_t *dec_FT_F64(dec_ctx *c, const uint8_t *p, const uint8_t *end,
                                        double *v) {
  p = f64_get(p, end, v);
  return p ? p : dec_fail(c, "a complete 8-byte float field");
}
static inline const uint8_t *dec_FT_DUR(dec_ctx *c, const uint8_t *p, const uint8_t *end,
                                        uint64_t *v) {
  uint64_t x;
  if (!(p = dec_FT_U64(c, p, end, &x))) return NULL;
  *v = c->time + (uint64_t)zigzag_decode(x);
  return p;
}
static inline const uint8_t *dec_FT_CORR(dec_ctx *c, const uint8_t *p, const uint8_t *end,
                                         uint64_t *v) {
  uint64_t x;
  if (!(p = dec_FT_U64(c, p, end, &x))) return NULL;
  c->cs->prev_corr += (uint64_t)zigzag_decode(x);
  *v = c->cs->prev_corr;
  return p;
}
static inline void missing_FT_DUR(dec_ctx *c, uint64_t *v) {
  *v = c->time;
}
#define missing_FT_U64(c, v)  (*(v) = 0)
#define missing_FT_U32(c, v)  (*(v) = 0)
#define missing_FT_STR(c, v)  (*(v) = 0)
#define missing_FT_I32(c, v)  (*(v) = 0)
#define missing_FT_F64(c, v)  (*(v) = 0.0)
#define missing_FT_CORR(c, v) (*(v) = 0)

#define DECODE_FIELD(type, st, member)                                                             \
  if (p < end) {                                                                                   \
    if (!(p = dec_##type(c, p, end, &b->member))) return -1;                                       \
  } else {                                                                                         \
    missing_##type(c, &b->member);                                                                 \
  }
/* Decodes the payload into *b, setting every field (time already set). */
#define DEFINE_DECODER(lower, st, KIND)                                                            \
  static int decode_##lower(dec_ctx *c, const uint8_t *p, const uint8_t *end, st *b) {             \
    KIND##_FIELDS(                                                                                 \
        DECODE_FIELD) return 0; /* extra trailing bytes: fields of a newer minor version */        \
  }

#define KERNEL_FIELDS(X)                                                                           \
  X(FT_DUR, stepscope_kernel, end_ns)                                                              \
  X(FT_CORR, stepscope_kernel, correlation_id)                                                     \
  X(FT_U64, stepscope_kernel, stream)                                                              \
  X(FT_STR, stepscope_kernel, name)                                                                \
  X(FT_U32, stepscope_kernel, device)                                                              \
  X(FT_U32, stepscope_kernel, grid[0])                                                             \
  X(FT_U32, stepscope_kernel, grid[1])                                                             \
  X(FT_U32, stepscope_kernel, grid[2])                                                             \
  X(FT_U32, stepscope_kernel, block[0])                                                            \
  X(FT_U32, stepscope_kernel, block[1])                                                            \
  X(FT_U32, stepscope_kernel, block[2])                                                            \
  X(FT_U32, stepscope_kernel, registers_per_thread)                                                \
  X(FT_U32, stepscope_kernel, static_shared_bytes)                                                 \
  X(FT_U32, stepscope_kernel, dynamic_shared_bytes)                                                \
  X(FT_U64, stepscope_kernel, graph_id)
static const kind_desc DESC_KERNEL = {T(stepscope_kernel, start_ns), {KERNEL_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(kernel, stepscope_kernel, start_ns, KERNEL)
DEFINE_DECODER(kernel, stepscope_kernel, KERNEL)

#define MEMCPY_FIELDS(X)                                                                           \
  X(FT_DUR, stepscope_memcpy, end_ns)                                                              \
  X(FT_CORR, stepscope_memcpy, correlation_id)                                                     \
  X(FT_U64, stepscope_memcpy, stream)                                                              \
  X(FT_U64, stepscope_memcpy, bytes)                                                               \
  X(FT_U32, stepscope_memcpy, device)                                                              \
  X(FT_U32, stepscope_memcpy, copy_kind)                                                           \
  X(FT_U32, stepscope_memcpy, src_device)                                                          \
  X(FT_U32, stepscope_memcpy, dst_device)
static const kind_desc DESC_MEMCPY = {T(stepscope_memcpy, start_ns), {MEMCPY_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(memcpy, stepscope_memcpy, start_ns, MEMCPY)
DEFINE_DECODER(memcpy, stepscope_memcpy, MEMCPY)

#define MEMSET_FIELDS(X)                                                                           \
  X(FT_DUR, stepscope_memset, end_ns)                                                              \
  X(FT_CORR, stepscope_memset, correlation_id)                                                     \
  X(FT_U64, stepscope_memset, stream)                                                              \
  X(FT_U64, stepscope_memset, bytes)                                                               \
  X(FT_U32, stepscope_memset, device)                                                              \
  X(FT_U32, stepscope_memset, value)
static const kind_desc DESC_MEMSET = {T(stepscope_memset, start_ns), {MEMSET_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(memset, stepscope_memset, start_ns, MEMSET)
DEFINE_DECODER(memset, stepscope_memset, MEMSET)

#define SYNC_FIELDS(X)                                                                             \
  X(FT_DUR, stepscope_sync, end_ns)                                                                \
  X(FT_CORR, stepscope_sync, correlation_id)                                                       \
  X(FT_U64, stepscope_sync, stream)                                                                \
  X(FT_U64, stepscope_sync, event_id)                                                              \
  X(FT_U32, stepscope_sync, device)                                                                \
  X(FT_U32, stepscope_sync, sync_kind)
static const kind_desc DESC_SYNC = {T(stepscope_sync, start_ns), {SYNC_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(sync, stepscope_sync, start_ns, SYNC)
DEFINE_DECODER(sync, stepscope_sync, SYNC)

#define API_FIELDS(X)                                                                              \
  X(FT_DUR, stepscope_api, end_ns)                                                                 \
  X(FT_CORR, stepscope_api, correlation_id)                                                        \
  X(FT_U64, stepscope_api, thread)                                                                 \
  X(FT_STR, stepscope_api, name)                                                                   \
  X(FT_U32, stepscope_api, api_kind)                                                               \
  X(FT_U32, stepscope_api, callback_id)                                                            \
  X(FT_I32, stepscope_api, return_code)
static const kind_desc DESC_API = {T(stepscope_api, start_ns), {API_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(api, stepscope_api, start_ns, API)
DEFINE_DECODER(api, stepscope_api, API)

#define RANGE_FIELDS(X)                                                                            \
  X(FT_DUR, stepscope_range, end_ns)                                                               \
  X(FT_U64, stepscope_range, thread)                                                               \
  X(FT_STR, stepscope_range, name)                                                                 \
  X(FT_STR, stepscope_range, domain)                                                               \
  X(FT_U32, stepscope_range, category)                                                             \
  X(FT_U32, stepscope_range, color)                                                                \
  X(FT_U32, stepscope_range, payload_kind)                                                         \
  X(FT_U64, stepscope_range, payload)                                                              \
  X(FT_STR, stepscope_range, args)
static const kind_desc DESC_RANGE = {T(stepscope_range, start_ns), {RANGE_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(range, stepscope_range, start_ns, RANGE)
DEFINE_DECODER(range, stepscope_range, RANGE)

#define MARK_FIELDS(X)                                                                             \
  X(FT_U64, stepscope_mark, thread)                                                                \
  X(FT_STR, stepscope_mark, name)                                                                  \
  X(FT_STR, stepscope_mark, domain)                                                                \
  X(FT_U32, stepscope_mark, category)                                                              \
  X(FT_U32, stepscope_mark, color)                                                                 \
  X(FT_U32, stepscope_mark, payload_kind)                                                          \
  X(FT_U64, stepscope_mark, payload)                                                               \
  X(FT_STR, stepscope_mark, args)
static const kind_desc DESC_MARK = {T(stepscope_mark, time_ns), {MARK_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(mark, stepscope_mark, time_ns, MARK)
DEFINE_DECODER(mark, stepscope_mark, MARK)

#define COLLECTIVE_FIELDS(X)                                                                       \
  X(FT_DUR, stepscope_collective, end_ns)                                                          \
  X(FT_CORR, stepscope_collective, correlation_id)                                                 \
  X(FT_U64, stepscope_collective, comm_id)                                                         \
  X(FT_U64, stepscope_collective, seq)                                                             \
  X(FT_U64, stepscope_collective, count)                                                           \
  X(FT_U64, stepscope_collective, bytes)                                                           \
  X(FT_U64, stepscope_collective, stream)                                                          \
  X(FT_U32, stepscope_collective, op)                                                              \
  X(FT_U32, stepscope_collective, datatype)                                                        \
  X(FT_I32, stepscope_collective, peer)                                                            \
  X(FT_U32, stepscope_collective, comm_rank)                                                       \
  X(FT_U32, stepscope_collective, comm_size)                                                       \
  X(FT_STR, stepscope_collective, algorithm)                                                       \
  X(FT_STR, stepscope_collective, protocol)                                                        \
  X(FT_U32, stepscope_collective, channels)                                                        \
  X(FT_U32, stepscope_collective, device)                                                          \
  X(FT_U32, stepscope_collective, flags)                                                           \
  X(FT_STR, stepscope_collective, name)
static const kind_desc DESC_COLLECTIVE = {T(stepscope_collective, start_ns),
                                          {COLLECTIVE_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(collective, stepscope_collective, start_ns, COLLECTIVE)
DEFINE_DECODER(collective, stepscope_collective, COLLECTIVE)

#define HOST_OP_FIELDS(X)                                                                          \
  X(FT_DUR, stepscope_host_op, end_ns)                                                             \
  X(FT_CORR, stepscope_host_op, correlation_id)                                                    \
  X(FT_U64, stepscope_host_op, stream)                                                             \
  X(FT_U64, stepscope_host_op, bytes)                                                              \
  X(FT_U64, stepscope_host_op, flops)                                                              \
  X(FT_U64, stepscope_host_op, comm_id)                                                            \
  X(FT_U64, stepscope_host_op, seq)                                                                \
  X(FT_STR, stepscope_host_op, name)                                                               \
  X(FT_U32, stepscope_host_op, category)                                                           \
  X(FT_STR, stepscope_host_op, args)
static const kind_desc DESC_HOST_OP = {T(stepscope_host_op, start_ns),
                                       {HOST_OP_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(host_op, stepscope_host_op, start_ns, HOST_OP)
DEFINE_DECODER(host_op, stepscope_host_op, HOST_OP)

#define COUNTER_FIELDS(X)                                                                          \
  X(FT_STR, stepscope_counter, name)                                                               \
  X(FT_U32, stepscope_counter, device)                                                             \
  X(FT_F64, stepscope_counter, value)
static const kind_desc DESC_COUNTER = {T(stepscope_counter, time_ns),
                                       {COUNTER_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(counter, stepscope_counter, time_ns, COUNTER)
DEFINE_DECODER(counter, stepscope_counter, COUNTER)

#define MEMORY_FIELDS(X)                                                                           \
  X(FT_U64, stepscope_memory, address)                                                             \
  X(FT_U64, stepscope_memory, bytes)                                                               \
  X(FT_U64, stepscope_memory, in_use_bytes)                                                        \
  X(FT_U32, stepscope_memory, device)                                                              \
  X(FT_U32, stepscope_memory, memory_kind)
static const kind_desc DESC_MEMORY = {T(stepscope_memory, time_ns), {MEMORY_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(memory, stepscope_memory, time_ns, MEMORY)
DEFINE_DECODER(memory, stepscope_memory, MEMORY)

#define DROPPED_FIELDS(X)                                                                          \
  X(FT_U64, stepscope_dropped, count)                                                              \
  X(FT_U32, stepscope_dropped, source)
static const kind_desc DESC_DROPPED = {T(stepscope_dropped, time_ns),
                                       {DROPPED_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(dropped, stepscope_dropped, time_ns, DROPPED)
DEFINE_DECODER(dropped, stepscope_dropped, DROPPED)

#define CLOCK_ANCHOR_FIELDS(X)                                                                     \
  X(FT_U64, stepscope_clock_anchor, trace_ns)                                                      \
  X(FT_U64, stepscope_clock_anchor, realtime_ns)                                                   \
  X(FT_U64, stepscope_clock_anchor, monotonic_ns)                                                  \
  X(FT_U64, stepscope_clock_anchor, uncertainty_ns)
static const kind_desc DESC_CLOCK_ANCHOR = {-1, NULL, {CLOCK_ANCHOR_FIELDS(TABLE_ENTRY)}};
DEFINE_UNTIMED_ENCODER(clock_anchor, stepscope_clock_anchor, CLOCK_ANCHOR)
DEFINE_DECODER(clock_anchor, stepscope_clock_anchor, CLOCK_ANCHOR)

#define OVERHEAD_FIELDS(X)                                                                         \
  X(FT_DUR, stepscope_overhead, end_ns)                                                            \
  X(FT_U64, stepscope_overhead, thread)                                                            \
  X(FT_STR, stepscope_overhead, name)
static const kind_desc DESC_OVERHEAD = {T(stepscope_overhead, start_ns),
                                        {OVERHEAD_FIELDS(TABLE_ENTRY)}};
DEFINE_TIMED_ENCODER(overhead, stepscope_overhead, start_ns, OVERHEAD)
DEFINE_DECODER(overhead, stepscope_overhead, OVERHEAD)

/* Added after the kinds above: correlations as plain u64 (no delta). */
#define EXTERNAL_CORRELATION_FIELDS(X)                                                             \
  X(FT_U64, stepscope_external_correlation, correlation_id)                                        \
  X(FT_U64, stepscope_external_correlation, external_id)                                           \
  X(FT_U32, stepscope_external_correlation, external_kind)
static const kind_desc DESC_EXTERNAL_CORRELATION = {
    -1, NULL, {EXTERNAL_CORRELATION_FIELDS(TABLE_ENTRY)}};
DEFINE_UNTIMED_ENCODER(external_correlation, stepscope_external_correlation, EXTERNAL_CORRELATION)
DEFINE_DECODER(external_correlation, stepscope_external_correlation, EXTERNAL_CORRELATION)

/* Added in 1.1, written by the writer alone as a closed file's last record. */
#define END_FIELDS(X)                                                                              \
  X(FT_U32, stepscope_end, reason)                                                                 \
  X(FT_U32, stepscope_end, signal)
static const kind_desc DESC_END = {-1, NULL, {END_FIELDS(TABLE_ENTRY)}};
DEFINE_UNTIMED_ENCODER(end, stepscope_end, END)
DEFINE_DECODER(end, stepscope_end, END)

#define STREAM_FIELDS(X)                                                                           \
  X(FT_U64, stepscope_stream, stream)                                                              \
  X(FT_U32, stepscope_stream, device)                                                              \
  X(FT_U32, stepscope_stream, stream_kind)                                                         \
  X(FT_STR, stepscope_stream, name)                                                                \
  X(FT_I32, stepscope_stream, priority)
static const kind_desc DESC_STREAM = {-1, NULL, {STREAM_FIELDS(TABLE_ENTRY)}};
DEFINE_UNTIMED_ENCODER(stream, stepscope_stream, STREAM)
DEFINE_DECODER(stream, stepscope_stream, STREAM)

static const kind_desc DESC_METADATA = {
    -1, NULL, {F(FT_ISTR, stepscope_metadata, key), F(FT_ISTR, stepscope_metadata, value_json)}};

static const kind_desc DESC_BLOCK = {-1, NULL, {{FT_U64, 0, "thread"}}};

static const kind_desc DESC_HEADER = {
    -1,
    NULL,
    {/* preceded on the wire by the inline magic "stepscope" */
     F(FT_U32, stepscope_header, format_major), F(FT_U32, stepscope_header, format_minor),
     F(FT_I32, stepscope_header, rank), F(FT_I32, stepscope_header, world_size),
     F(FT_I32, stepscope_header, local_rank), F(FT_I64, stepscope_header, pid),
     F(FT_U32, stepscope_header, clock_domain), F(FT_U64, stepscope_header, start_ns),
     F(FT_ISTR, stepscope_header, hostname), F(FT_ISTR, stepscope_header, producer),
     F(FT_ISTR, stepscope_header, device_name), F(FT_ISTR, stepscope_header, device_json),
     F(FT_ISTR, stepscope_header, driver_version), F(FT_ISTR, stepscope_header, cuda_version),
     F(FT_ISTR, stepscope_header, nccl_version), F(FT_ISTR, stepscope_header, cupti_version),
     F(FT_ISTR, stepscope_header, config_json)}};

const kind_desc *codec_desc(uint32_t kind) {
  switch (kind) {
  case STEPSCOPE_REC_KERNEL: return &DESC_KERNEL;
  case STEPSCOPE_REC_MEMCPY: return &DESC_MEMCPY;
  case STEPSCOPE_REC_MEMSET: return &DESC_MEMSET;
  case STEPSCOPE_REC_SYNC: return &DESC_SYNC;
  case STEPSCOPE_REC_API: return &DESC_API;
  case STEPSCOPE_REC_RANGE: return &DESC_RANGE;
  case STEPSCOPE_REC_MARK: return &DESC_MARK;
  case STEPSCOPE_REC_COLLECTIVE: return &DESC_COLLECTIVE;
  case STEPSCOPE_REC_HOST_OP: return &DESC_HOST_OP;
  case STEPSCOPE_REC_COUNTER: return &DESC_COUNTER;
  case STEPSCOPE_REC_MEMORY: return &DESC_MEMORY;
  case STEPSCOPE_REC_DROPPED: return &DESC_DROPPED;
  case STEPSCOPE_REC_CLOCK_ANCHOR: return &DESC_CLOCK_ANCHOR;
  case STEPSCOPE_REC_OVERHEAD: return &DESC_OVERHEAD;
  case STEPSCOPE_REC_STREAM: return &DESC_STREAM;
  case STEPSCOPE_REC_EXTERNAL_CORRELATION: return &DESC_EXTERNAL_CORRELATION;
  case STEPSCOPE_REC_END: return &DESC_END;
  case STEPSCOPE_REC_METADATA: return &DESC_METADATA;
  default: return NULL;
  }
}

/* Typed access to a struct member at a byte offset. */
#define AT(base, off, type)  (*(type *)((char *)(base) + (off)))
#define CAT(base, off, type) (*(const type *)((const char *)(base) + (off)))

static size_t inline_len(const char *s) {
  return s ? strlen(s) : 0;
}

static size_t desc_max_size(const kind_desc *d, const void *body) {
  size_t n = 3 * VARINT_MAX; /* tag, time, length */
  for (const field *f = d->fields; f->type != FT_END; f++)
    n += f->type == FT_ISTR ? VARINT_MAX + inline_len(CAT(body, f->offset, char *))
                            : (f->type == FT_F64 ? 8 : VARINT_MAX);
  return n;
}

size_t codec_max_size(const stepscope_record *rec) {
  /* Fixed-size kinds: a per-kind bound computed once (this runs per append). */
  static _Atomic size_t fixed_max[STEPSCOPE_REC_KIND_MAX];
  uint32_t kind = rec->kind;
  if (kind == STEPSCOPE_REC_END) return 0; /* the writer's own, not appendable */
  if (kind < STEPSCOPE_REC_KIND_MAX) {
    size_t cached = atomic_load_explicit(&fixed_max[kind], memory_order_relaxed);
    if (cached) return cached;
  }
  const kind_desc *d = codec_desc(kind);
  if (!d) return 0;
  size_t n = desc_max_size(d, &rec->u);
  if (kind != STEPSCOPE_REC_METADATA && kind < STEPSCOPE_REC_KIND_MAX)
    atomic_store_explicit(&fixed_max[kind], n, memory_order_relaxed); /* same value everywhere */
  return n;
}

/* Encodes the payload of `body` per `d` at p; returns the end. */
static uint8_t *encode_fields(codec_state *st, uint8_t *p, const kind_desc *d, const void *body,
                              uint64_t time) {
  for (const field *f = d->fields; f->type != FT_END; f++) {
    switch ((field_type)f->type) {
    case FT_U64: p = varint_put(p, CAT(body, f->offset, uint64_t)); break;
    case FT_U32:
    case FT_STR: p = varint_put(p, CAT(body, f->offset, uint32_t)); break;
    case FT_I32: p = varint_put(p, zigzag_encode(CAT(body, f->offset, int32_t))); break;
    case FT_I64: p = varint_put(p, zigzag_encode(CAT(body, f->offset, int64_t))); break;
    case FT_F64: p = f64_put(p, CAT(body, f->offset, double)); break;
    case FT_DUR:
      p = varint_put(p, zigzag_encode((int64_t)(CAT(body, f->offset, uint64_t) - time)));
      break;
    case FT_CORR: {
      uint64_t c = CAT(body, f->offset, uint64_t);
      p = varint_put(p, zigzag_encode((int64_t)(c - st->prev_corr)));
      st->prev_corr = c;
      break;
    }
    case FT_ISTR: {
      const char *s = CAT(body, f->offset, char *);
      size_t len = inline_len(s);
      p = varint_put(p, len);
      if (len) memcpy(p, s, len);
      p += len;
      break;
    }
    case FT_END: break;
    }
  }
  return p;
}

/* Writes tag [+ time] + length + payload; the payload is first encoded one
 * byte after the tag/time (room for a one-byte length) and moved forward when
 * its length needs more bytes. */
static uint8_t *encode_with_desc(codec_state *st, uint8_t *p, uint32_t kind, const kind_desc *d,
                                 const void *body) {
  uint64_t time = 0;
  int timed = d->time_offset >= 0;
  p = varint_put(p, (uint64_t)kind << 1 | (uint64_t)timed);
  if (timed) {
    time = CAT(body, d->time_offset, uint64_t);
    p = varint_put(p, zigzag_encode((int64_t)(time - st->prev_time)));
    st->prev_time = time;
  }
  uint8_t *payload = p + 1;
  uint8_t *end = encode_fields(st, payload, d, body, time);
  size_t len = (size_t)(end - payload);
  if (len < 0x80) {
    *p = (uint8_t)len;
    return end;
  }
  uint8_t lenbuf[VARINT_MAX];
  size_t lenlen = (size_t)(varint_put(lenbuf, len) - lenbuf);
  memmove(p + lenlen, payload, len);
  memcpy(p, lenbuf, lenlen);
  return p + lenlen + len;
}

uint8_t *codec_encode(codec_state *st, uint8_t *p, const stepscope_record *rec) {
  switch (rec->kind) {
  case STEPSCOPE_REC_KERNEL: return encode_kernel(st, p, &rec->u.kernel);
  case STEPSCOPE_REC_MEMCPY: return encode_memcpy(st, p, &rec->u.memcpy);
  case STEPSCOPE_REC_MEMSET: return encode_memset(st, p, &rec->u.memset);
  case STEPSCOPE_REC_SYNC: return encode_sync(st, p, &rec->u.sync);
  case STEPSCOPE_REC_API: return encode_api(st, p, &rec->u.api);
  case STEPSCOPE_REC_RANGE: return encode_range(st, p, &rec->u.range);
  case STEPSCOPE_REC_MARK: return encode_mark(st, p, &rec->u.mark);
  case STEPSCOPE_REC_COLLECTIVE: return encode_collective(st, p, &rec->u.collective);
  case STEPSCOPE_REC_HOST_OP: return encode_host_op(st, p, &rec->u.host_op);
  case STEPSCOPE_REC_COUNTER: return encode_counter(st, p, &rec->u.counter);
  case STEPSCOPE_REC_MEMORY: return encode_memory(st, p, &rec->u.memory);
  case STEPSCOPE_REC_DROPPED: return encode_dropped(st, p, &rec->u.dropped);
  case STEPSCOPE_REC_CLOCK_ANCHOR: return encode_clock_anchor(st, p, &rec->u.clock_anchor);
  case STEPSCOPE_REC_OVERHEAD: return encode_overhead(st, p, &rec->u.overhead);
  case STEPSCOPE_REC_STREAM: return encode_stream(st, p, &rec->u.stream);
  case STEPSCOPE_REC_EXTERNAL_CORRELATION:
    return encode_external_correlation(st, p, &rec->u.external_correlation);
  case STEPSCOPE_REC_END: return encode_end(st, p, &rec->u.end);
  default: /* METADATA (inline strings): the table-driven path */
    return encode_with_desc(st, p, rec->kind, codec_desc(rec->kind), &rec->u);
  }
}

uint8_t *codec_encode_block(codec_state *st, uint8_t *p, uint64_t thread) {
  st->prev_time = 0;
  st->prev_corr = 0;
  return encode_with_desc(st, p, STEPSCOPE_REC_BLOCK, &DESC_BLOCK, &thread);
}

uint8_t *codec_encode_string(uint8_t *p, uint32_t id, const char *s, size_t len) {
  uint8_t idbuf[VARINT_MAX];
  size_t idlen = (size_t)(varint_put(idbuf, id) - idbuf);
  p = varint_put(p, (uint64_t)STEPSCOPE_REC_STRING << 1);
  p = varint_put(p, idlen + len);
  memcpy(p, idbuf, idlen);
  p += idlen;
  if (len) memcpy(p, s, len);
  return p + len;
}

static const char HEADER_MAGIC[] = "stepscope";

size_t codec_header_max_size(const stepscope_header *h) {
  return desc_max_size(&DESC_HEADER, h) + sizeof HEADER_MAGIC;
}

uint8_t *codec_encode_header(uint8_t *p, const stepscope_header *h) {
  codec_state st = {0, 0};
  p = varint_put(p, (uint64_t)STEPSCOPE_REC_HEADER << 1);
  uint8_t *payload = p + VARINT_MAX; /* room for the length, moved back below */
  uint8_t *q = varint_put(payload, sizeof HEADER_MAGIC - 1);
  memcpy(q, HEADER_MAGIC, sizeof HEADER_MAGIC - 1);
  q = encode_fields(&st, q + sizeof HEADER_MAGIC - 1, &DESC_HEADER, h, 0);
  size_t len = (size_t)(q - payload);
  uint8_t *after_len = varint_put(p, len);
  memmove(after_len, payload, len);
  return after_len + len;
}

static void set_why(char *why, size_t why_len, const char *msg) {
  if (why && why_len) snprintf(why, why_len, "%s", msg);
}

/* Decodes the fields of `d` from [p, end) into body; missing trailing fields
 * are 0. Returns 0, or -1 with `why`. */
static int decode_fields(codec_state *st, const uint8_t *p, const uint8_t *end, const kind_desc *d,
                         void *body, uint64_t time, uint32_t max_string_id, codec_store_fn store,
                         void *store_ctx, char *why, size_t why_len) {
  for (const field *f = d->fields; f->type != FT_END; f++) {
    if (p >= end) { /* absent field: zero (and an absent duration is zero) */
      if (f->type == FT_DUR) AT(body, f->offset, uint64_t) = time;
      continue;
    }
    uint64_t v = 0;
    if (f->type == FT_F64) {
      double dv;
      if (!(p = f64_get(p, end, &dv))) {
        set_why(why, why_len, "a complete 8-byte float field");
        return -1;
      }
      AT(body, f->offset, double) = dv;
      continue;
    }
    if (!(p = varint_get(p, end, &v))) {
      set_why(why, why_len, "a complete varint field inside the record");
      return -1;
    }
    switch ((field_type)f->type) {
    case FT_U64: AT(body, f->offset, uint64_t) = v; break;
    case FT_U32:
      if (v > UINT32_MAX) {
        set_why(why, why_len, "a 32-bit field value");
        return -1;
      }
      AT(body, f->offset, uint32_t) = (uint32_t)v;
      break;
    case FT_STR:
      if (v > max_string_id) {
        if (why && why_len)
          snprintf(why, why_len, "a defined string id (got %llu, %u defined)",
                   (unsigned long long)v, max_string_id);
        return -1;
      }
      AT(body, f->offset, uint32_t) = (uint32_t)v;
      break;
    case FT_I32: {
      int64_t s = zigzag_decode(v);
      if (s < INT32_MIN || s > INT32_MAX) {
        set_why(why, why_len, "a 32-bit signed field value");
        return -1;
      }
      AT(body, f->offset, int32_t) = (int32_t)s;
      break;
    }
    case FT_I64: AT(body, f->offset, int64_t) = zigzag_decode(v); break;
    case FT_DUR: AT(body, f->offset, uint64_t) = time + (uint64_t)zigzag_decode(v); break;
    case FT_CORR:
      st->prev_corr += (uint64_t)zigzag_decode(v);
      AT(body, f->offset, uint64_t) = st->prev_corr;
      break;
    case FT_ISTR: {
      if (v > (uint64_t)(end - p)) {
        set_why(why, why_len, "an inline string within the record");
        return -1;
      }
      const char *copy = store(store_ctx, (const char *)p, (size_t)v);
      if (!copy) {
        set_why(why, why_len, "memory for an inline string (out of memory)");
        return -1;
      }
      AT(body, f->offset, const char *) = copy;
      p += v;
      break;
    }
    case FT_F64:
    case FT_END: break;
    }
  }
  return 0; /* extra trailing bytes: fields of a newer minor version, ignored */
}

/* A string record's payload [p, end): its id (>= 1), then its bytes, left in place. Cold (once
 * a string; the header once a file) and out of line: kept out of codec_decode's per-record path,
 * which measured faster so (bench_analyzer, 2026-11-30). */
__attribute__((cold, noinline)) static codec_result
decode_string_record(const uint8_t *p, const uint8_t *end, stepscope_record *rec, char *why,
                     size_t why_len) {
  uint64_t id;
  const uint8_t *q = varint_get(p, end, &id);
  if (!q || id == 0 || id > UINT32_MAX) {
    set_why(why, why_len, "a string record with an id >= 1");
    return CODEC_ERROR;
  }
  rec->kind = STEPSCOPE_REC_STRING;
  rec->u.string.id = (uint32_t)id;
  rec->u.string.length = (uint32_t)(end - q);
  rec->u.string.data = (const char *)q;
  return CODEC_RECORD;
}

/* The header record's payload [p, end): the magic "stepscope", then the header's fields. */
__attribute__((cold, noinline)) static codec_result
decode_header_record(codec_state *st, const uint8_t *p, const uint8_t *end, stepscope_record *rec,
                     stepscope_header *hdr, codec_store_fn store, void *store_ctx, char *why,
                     size_t why_len) {
  uint64_t mlen;
  const uint8_t *q = varint_get(p, end, &mlen);
  if (!q || mlen != sizeof HEADER_MAGIC - 1 || (uint64_t)(end - q) < mlen ||
      memcmp(q, HEADER_MAGIC, mlen) != 0) {
    set_why(why, why_len, "the header magic \"stepscope\"");
    return CODEC_ERROR;
  }
  q += mlen;
  memset(hdr, 0, sizeof *hdr);
  if (decode_fields(st, q, end, &DESC_HEADER, hdr, 0, 0, store, store_ctx, why, why_len))
    return CODEC_ERROR;
  rec->kind = STEPSCOPE_REC_HEADER;
  return CODEC_RECORD;
}

codec_result codec_decode(codec_state *st, const uint8_t **pp, const uint8_t *end,
                          uint32_t max_string_id, stepscope_record *rec, stepscope_header *hdr,
                          codec_store_fn store, void *store_ctx, char *why, size_t why_len) {
  const uint8_t *p = *pp;
  uint64_t tag, len, time = 0;
  if (!(p = varint_get(p, end, &tag))) {
    set_why(why, why_len, "a record tag");
    return CODEC_ERROR;
  }
  int timed = (int)(tag & 1);
  uint64_t kind = tag >> 1;
  if (timed) {
    uint64_t dt;
    if (!(p = varint_get(p, end, &dt))) {
      set_why(why, why_len, "a record timestamp");
      return CODEC_ERROR;
    }
    time = st->prev_time + (uint64_t)zigzag_decode(dt);
    st->prev_time = time;
  }
  if (!(p = varint_get(p, end, &len))) {
    set_why(why, why_len, "a record length");
    return CODEC_ERROR;
  }
  if (len > (uint64_t)(end - p)) {
    if (why && why_len)
      snprintf(why, why_len, "a record of %llu bytes within the frame (%llu left)",
               (unsigned long long)len, (unsigned long long)(end - p));
    return CODEC_ERROR;
  }
  const uint8_t *payload = p, *payload_end = p + len;
  *pp = payload_end;

  if (kind == STEPSCOPE_REC_BLOCK) {
    st->prev_time = 0;
    st->prev_corr = 0;
    return CODEC_BLOCK;
  }
  if (kind == STEPSCOPE_REC_STRING)
    return decode_string_record(payload, payload_end, rec, why, why_len);
  if (kind == STEPSCOPE_REC_HEADER)
    return decode_header_record(st, payload, payload_end, rec, hdr, store, store_ctx, why, why_len);
  /* A kind's own decoder; the kind is set only for what decodes. */
  dec_ctx c = {st, time, max_string_id, why, why_len};
  int rc;
  /* Each decoder sets every field of its member (missing trailing fields to
   * 0), so nothing is zeroed first: a memset per record was half of the
   * decoder's time. Readers use rec->kind's member only. */
  switch (kind) {
  case STEPSCOPE_REC_KERNEL:
    if (!timed) goto timed_mismatch;
    rec->u.kernel.start_ns = time;
    rc = decode_kernel(&c, payload, payload_end, &rec->u.kernel);
    break;
  case STEPSCOPE_REC_MEMCPY:
    if (!timed) goto timed_mismatch;
    rec->u.memcpy.start_ns = time;
    rc = decode_memcpy(&c, payload, payload_end, &rec->u.memcpy);
    break;
  case STEPSCOPE_REC_MEMSET:
    if (!timed) goto timed_mismatch;
    rec->u.memset.start_ns = time;
    rc = decode_memset(&c, payload, payload_end, &rec->u.memset);
    break;
  case STEPSCOPE_REC_SYNC:
    if (!timed) goto timed_mismatch;
    rec->u.sync.start_ns = time;
    rc = decode_sync(&c, payload, payload_end, &rec->u.sync);
    break;
  case STEPSCOPE_REC_API:
    if (!timed) goto timed_mismatch;
    rec->u.api.start_ns = time;
    rc = decode_api(&c, payload, payload_end, &rec->u.api);
    break;
  case STEPSCOPE_REC_RANGE:
    if (!timed) goto timed_mismatch;
    rec->u.range.start_ns = time;
    rc = decode_range(&c, payload, payload_end, &rec->u.range);
    break;
  case STEPSCOPE_REC_MARK:
    if (!timed) goto timed_mismatch;
    rec->u.mark.time_ns = time;
    rc = decode_mark(&c, payload, payload_end, &rec->u.mark);
    break;
  case STEPSCOPE_REC_COLLECTIVE:
    if (!timed) goto timed_mismatch;
    rec->u.collective.start_ns = time;
    rc = decode_collective(&c, payload, payload_end, &rec->u.collective);
    break;
  case STEPSCOPE_REC_HOST_OP:
    if (!timed) goto timed_mismatch;
    rec->u.host_op.start_ns = time;
    rc = decode_host_op(&c, payload, payload_end, &rec->u.host_op);
    break;
  case STEPSCOPE_REC_COUNTER:
    if (!timed) goto timed_mismatch;
    rec->u.counter.time_ns = time;
    rc = decode_counter(&c, payload, payload_end, &rec->u.counter);
    break;
  case STEPSCOPE_REC_MEMORY:
    if (!timed) goto timed_mismatch;
    rec->u.memory.time_ns = time;
    rc = decode_memory(&c, payload, payload_end, &rec->u.memory);
    break;
  case STEPSCOPE_REC_DROPPED:
    if (!timed) goto timed_mismatch;
    rec->u.dropped.time_ns = time;
    rc = decode_dropped(&c, payload, payload_end, &rec->u.dropped);
    break;
  case STEPSCOPE_REC_OVERHEAD:
    if (!timed) goto timed_mismatch;
    rec->u.overhead.start_ns = time;
    rc = decode_overhead(&c, payload, payload_end, &rec->u.overhead);
    break;
  case STEPSCOPE_REC_CLOCK_ANCHOR:
    if (timed) goto timed_mismatch;
    rc = decode_clock_anchor(&c, payload, payload_end, &rec->u.clock_anchor);
    break;
  case STEPSCOPE_REC_EXTERNAL_CORRELATION:
    if (timed) goto timed_mismatch;
    rc = decode_external_correlation(&c, payload, payload_end, &rec->u.external_correlation);
    break;
  case STEPSCOPE_REC_END:
    if (timed) goto timed_mismatch;
    rc = decode_end(&c, payload, payload_end, &rec->u.end);
    break;
  case STEPSCOPE_REC_STREAM:
    if (timed) goto timed_mismatch;
    rc = decode_stream(&c, payload, payload_end, &rec->u.stream);
    break;
  case STEPSCOPE_REC_METADATA: { /* inline strings: the table-driven path */
    if (timed) goto timed_mismatch;
    rec->u.metadata = (stepscope_metadata){0};
    rc = decode_fields(st, payload, payload_end, &DESC_METADATA, &rec->u, time, max_string_id,
                       store, store_ctx, why, why_len);
    break;
  }
  default: return CODEC_SKIPPED;
  }
  if (rc) return CODEC_ERROR;
  rec->kind = (uint32_t)kind;
  return CODEC_RECORD;
timed_mismatch:
  set_why(why, why_len,
          timed ? "no timestamp on this record kind" : "a timestamp on this record kind");
  return CODEC_ERROR;
}
