/*
 * cupti_convert.h — pure conversion of CUPTI activity records into stepscope
 * records. No CUPTI call is made here, so tests can build CUPTI structs by
 * hand and check the result without a GPU.
 *
 * A converter carries the little state the conversion needs: how to intern
 * strings and name API callbacks (function pointers, so tests can provide
 * fakes), the offset from CUPTI's clock to the trace clock, the
 * context -> device map learned from records that carry both, the streams
 * already declared, and counters of what was seen.
 */
#ifndef STEPSCOPE_CUPTI_CONVERT_H
#define STEPSCOPE_CUPTI_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>

#include "stepscope.h"

typedef uint32_t (*sgpu_intern_fn)(void *ctx, const char *s);
/* Name of a runtime (is_driver 0) or driver (1) API callback id, or NULL. */
typedef const char *(*sgpu_api_name_fn)(void *ctx, int is_driver, uint32_t cbid);

#define SGPU_MAX_CONTEXTS 64
#define SGPU_MAX_STREAMS  1024
#define SGPU_MAX_DEVICES  64

typedef struct sgpu_cupti_converter {
  sgpu_intern_fn intern;
  sgpu_api_name_fn api_name;
  void *ctx;
  int64_t clock_offset_ns; /* trace clock = CUPTI timestamp + offset */
  uint32_t context_ids[SGPU_MAX_CONTEXTS], context_devices[SGPU_MAX_CONTEXTS];
  size_t n_contexts;
  uint64_t streams_declared[SGPU_MAX_STREAMS]; /* open addressing, 0 = empty */
  const char *last_kernel_name;                /* one-entry cache of the last kernel name */
  uint32_t last_kernel_name_id;
  uint64_t kept, ignored, external_correlations;
  uint64_t untimed; /* GPU records CUPTI could not time (start 0) */
  /* device memory allocated while tracing, net of frees, per device (MEMORY2 records) */
  uint64_t memory_in_use[SGPU_MAX_DEVICES];
} sgpu_cupti_converter;

void sgpu_cupti_converter_init(sgpu_cupti_converter *c, sgpu_intern_fn intern,
                               sgpu_api_name_fn api_name, void *ctx);

/* The trace's stream id of CUPTI stream `stream_id` in context `context_id`. */
uint64_t sgpu_cupti_stream_key(uint32_t context_id, uint32_t stream_id);

/* Converts one activity record into at most `max` records (a STREAM
 * declaration may precede the first activity seen on a stream). Returns the
 * number of records written to `out`; 0 when the record is not kept. */
int sgpu_cupti_convert(sgpu_cupti_converter *c, const CUpti_Activity *activity,
                       stepscope_record *out, int max);

/* Whether an API of this name is worth a record: launches, copies, memsets,
 * synchronizations, event record/wait, graph launches. Versioned suffixes
 * ("_v2", "_ptsz", "_v7000") are ignored. */
int sgpu_cupti_api_is_kept(const char *name);

#endif /* STEPSCOPE_CUPTI_CONVERT_H */
