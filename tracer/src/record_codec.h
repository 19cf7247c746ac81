/*
 * record_codec.h — encoding and decoding of single records (the byte layout
 * of docs/trace-format.md §Records). Frames, buffers and files are the
 * writer's and reader's business; this module only turns one
 * `stepscope_record` into bytes and back, with the per-block delta state.
 */
#ifndef STEPSCOPE_RECORD_CODEC_H
#define STEPSCOPE_RECORD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "stepscope.h"

/* The field table of a record kind: what the encoder writes, in order. */
typedef enum field_type {
  FT_END = 0,
  FT_U64,  /* varint */
  FT_U32,  /* varint, must fit 32 bits */
  FT_I32,  /* zigzag varint, must fit 32 bits */
  FT_I64,  /* zigzag varint */
  FT_F64,  /* 8 bytes little endian */
  FT_STR,  /* string id (u32 varint), validated against the string table */
  FT_DUR,  /* an end time: zigzag(end - time) */
  FT_CORR, /* correlation id: zigzag(corr - prev_corr) */
  FT_ISTR  /* inline string: varint length + bytes (a const char * in the struct) */
} field_type;

typedef struct field {
  uint8_t type;
  uint16_t offset;
  const char *name; /* JSON name (stepscope dump) */
} field;

typedef struct kind_desc {
  int time_offset; /* offset of the record's time, -1 if untimed */
  const char *time_name;
  field fields[24];
} kind_desc;

/* The table of a kind (not STRING, HEADER or BLOCK), or NULL. */
const kind_desc *codec_desc(uint32_t kind);

/* Delta state of a block: reset at every frame start and BLOCK record. */
typedef struct codec_state {
  uint64_t prev_time;
  uint64_t prev_corr;
} codec_state;

/* Stores a string carried inline in a record (metadata, header values) and
 * returns a stable NUL-terminated copy, or NULL when out of memory. */
typedef const char *(*codec_store_fn)(void *ctx, const char *data, size_t len);

#define CODEC_MAX_RECORD (16u << 20) /* largest payload accepted, both ways */

/* Upper bound of the encoded size of `rec` (kinds other than STRING/HEADER);
 * 0 if the kind cannot be encoded (unknown, STRING, HEADER, BLOCK). */
size_t codec_max_size(const stepscope_record *rec);

/* The same bound for the writer's hot path: kinds without inline strings
 * (all but METADATA) share one constant bound (tag, time, length and at
 * most 24 fields of at most VARINT_MAX bytes), so no table is consulted. */
#define CODEC_FIXED_MAX (3 * 10 + 24 * 10)
#define CODEC_FIXED_KINDS                                                                          \
  ((1ull << STEPSCOPE_REC_STREAM) | (((1ull << (STEPSCOPE_REC_EXTERNAL_CORRELATION + 1)) - 1) &    \
                                     ~((1ull << STEPSCOPE_REC_KERNEL) - 1)))
static inline size_t codec_bound(const stepscope_record *rec) {
  if (rec->kind < 64 && ((CODEC_FIXED_KINDS >> rec->kind) & 1)) return CODEC_FIXED_MAX;
  return codec_max_size(rec);
}

/* Encodes `rec` at p (which has codec_max_size bytes free); returns the end. */
uint8_t *codec_encode(codec_state *st, uint8_t *p, const stepscope_record *rec);

/* A BLOCK record (resets the state). At most 2 + 2*VARINT_MAX bytes. */
uint8_t *codec_encode_block(codec_state *st, uint8_t *p, uint64_t thread);

/* A STRING record; at most 3*VARINT_MAX + len bytes. */
uint8_t *codec_encode_string(uint8_t *p, uint32_t id, const char *s, size_t len);
#define CODEC_STRING_OVERHEAD (3 * 10)

/* The HEADER record. */
size_t codec_header_max_size(const stepscope_header *h);
uint8_t *codec_encode_header(uint8_t *p, const stepscope_header *h);

typedef enum codec_result {
  CODEC_RECORD = 1,  /* *rec filled */
  CODEC_SKIPPED = 2, /* unknown kind, skipped */
  CODEC_BLOCK = 3,   /* BLOCK consumed (state reset) */
  CODEC_ERROR = -1   /* `why` says what was expected */
} codec_result;

/* Decodes one record at *pp (< end). String-id fields must be <= max_string_id.
 * STRING records fill rec->u.string (data points into the input, not
 * NUL-terminated). A HEADER record fills *hdr (rec->kind = HEADER). Inline
 * strings (METADATA, HEADER) go through `store`. On success *pp is advanced
 * past the record. */
codec_result codec_decode(codec_state *st, const uint8_t **pp, const uint8_t *end,
                          uint32_t max_string_id, stepscope_record *rec, stepscope_header *hdr,
                          codec_store_fn store, void *store_ctx, char *why, size_t why_len);

#endif
