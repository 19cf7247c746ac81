/*
 * names.c — the English/wire names of the format's enumerations, used by
 * `stepscope dump`, `info`, the analyzer's reports and the Chrome export, so
 * that every tool spells a record kind or collective the same way.
 */
#include "stepscope.h"

const char *stepscope_status_name(int status) {
  switch (status) {
  case STEPSCOPE_OK: return "ok";
  case STEPSCOPE_E_IO: return "I/O error";
  case STEPSCOPE_E_FORMAT: return "format error";
  case STEPSCOPE_E_VERSION: return "unsupported format version";
  case STEPSCOPE_E_NOMEM: return "out of memory";
  case STEPSCOPE_E_ARGUMENT: return "invalid argument";
  case STEPSCOPE_E_COMPRESS: return "compression error";
  case STEPSCOPE_E_LIMIT: return "size limit exceeded";
  case STEPSCOPE_E_STATE: return "invalid state";
  default: return "unknown error";
  }
}

const char *stepscope_record_kind_name(uint32_t kind) {
  switch (kind) {
  case STEPSCOPE_REC_HEADER: return "header";
  case STEPSCOPE_REC_BLOCK: return "block";
  case STEPSCOPE_REC_STRING: return "string";
  case STEPSCOPE_REC_METADATA: return "metadata";
  case STEPSCOPE_REC_STREAM: return "stream";
  case STEPSCOPE_REC_KERNEL: return "kernel";
  case STEPSCOPE_REC_MEMCPY: return "memcpy";
  case STEPSCOPE_REC_MEMSET: return "memset";
  case STEPSCOPE_REC_SYNC: return "sync";
  case STEPSCOPE_REC_API: return "api";
  case STEPSCOPE_REC_RANGE: return "range";
  case STEPSCOPE_REC_MARK: return "mark";
  case STEPSCOPE_REC_COLLECTIVE: return "collective";
  case STEPSCOPE_REC_HOST_OP: return "host_op";
  case STEPSCOPE_REC_COUNTER: return "counter";
  case STEPSCOPE_REC_MEMORY: return "memory";
  case STEPSCOPE_REC_DROPPED: return "dropped";
  case STEPSCOPE_REC_CLOCK_ANCHOR: return "clock_anchor";
  case STEPSCOPE_REC_OVERHEAD: return "overhead";
  case STEPSCOPE_REC_EXTERNAL_CORRELATION: return "external_correlation";
  case STEPSCOPE_REC_END: return "end";
  default: return NULL;
  }
}

const char *stepscope_category_name(uint32_t category) {
  switch (category) {
  case STEPSCOPE_CAT_NONE: return "none";
  case STEPSCOPE_CAT_COMPUTE: return "compute";
  case STEPSCOPE_CAT_COMM: return "comm";
  case STEPSCOPE_CAT_MEMCPY: return "memcpy";
  case STEPSCOPE_CAT_MEMSET: return "memset";
  case STEPSCOPE_CAT_SYNC: return "sync";
  case STEPSCOPE_CAT_OTHER: return "other";
  default: return "unknown";
  }
}

const char *stepscope_collective_op_name(uint32_t op) {
  switch (op) {
  case STEPSCOPE_COLL_ALLREDUCE: return "all_reduce";
  case STEPSCOPE_COLL_REDUCESCATTER: return "reduce_scatter";
  case STEPSCOPE_COLL_ALLGATHER: return "all_gather";
  case STEPSCOPE_COLL_BROADCAST: return "broadcast";
  case STEPSCOPE_COLL_REDUCE: return "reduce";
  case STEPSCOPE_COLL_ALLTOALL: return "all_to_all";
  case STEPSCOPE_COLL_SEND: return "send";
  case STEPSCOPE_COLL_RECV: return "recv";
  case STEPSCOPE_COLL_BARRIER: return "barrier";
  default: return "unknown";
  }
}

const char *stepscope_datatype_name(uint32_t datatype) {
  static const char *const names[] = {"unknown",  "int8",     "uint8",   "int32",   "uint32",
                                      "int64",    "uint64",   "float16", "float32", "float64",
                                      "bfloat16", "fp8_e4m3", "fp8_e5m2"};
  return datatype < sizeof names / sizeof names[0] ? names[datatype] : "unknown";
}

size_t stepscope_datatype_size(uint32_t datatype) {
  static const unsigned char sizes[] = {0, 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return datatype < sizeof sizes ? sizes[datatype] : 0;
}
