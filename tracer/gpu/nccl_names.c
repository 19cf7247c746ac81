/*
 * nccl_names.c — maps NCCL's function and datatype names to stepscope enums
 * (see nccl_names.h). Names are compared case-insensitively with an optional
 * "nccl" prefix removed, so "ncclAllReduce", "AllReduce" and "allreduce" are
 * the same operation.
 */
#include "nccl_names.h"

#include <strings.h>

#include "stepscope.h"

static const char *strip_nccl_prefix(const char *s) {
  if (s && strncasecmp(s, "nccl", 4) == 0) return s + 4;
  return s;
}

typedef struct name_value {
  const char *name;
  uint32_t value;
} name_value;

static uint32_t lookup(const name_value *table, size_t n, const char *s, uint32_t fallback) {
  s = strip_nccl_prefix(s);
  if (!s) return fallback;
  for (size_t i = 0; i < n; i++)
    if (strcasecmp(table[i].name, s) == 0) return table[i].value;
  return fallback;
}

uint32_t sgpu_nccl_op_from_name(const char *func) {
  static const name_value ops[] = {
      {"AllReduce", STEPSCOPE_COLL_ALLREDUCE}, {"ReduceScatter", STEPSCOPE_COLL_REDUCESCATTER},
      {"AllGather", STEPSCOPE_COLL_ALLGATHER}, {"Broadcast", STEPSCOPE_COLL_BROADCAST},
      {"Bcast", STEPSCOPE_COLL_BROADCAST},     {"Reduce", STEPSCOPE_COLL_REDUCE},
      {"AllToAll", STEPSCOPE_COLL_ALLTOALL},   {"AlltoAll", STEPSCOPE_COLL_ALLTOALL},
      {"Send", STEPSCOPE_COLL_SEND},           {"Recv", STEPSCOPE_COLL_RECV},
      {"Barrier", STEPSCOPE_COLL_BARRIER},
  };
  return lookup(ops, sizeof ops / sizeof ops[0], func, STEPSCOPE_COLL_UNKNOWN);
}

uint32_t sgpu_nccl_datatype_from_name(const char *datatype) {
  static const name_value types[] = {
      {"Int8", STEPSCOPE_DT_INT8},           {"Char", STEPSCOPE_DT_INT8},
      {"Uint8", STEPSCOPE_DT_UINT8},         {"Int32", STEPSCOPE_DT_INT32},
      {"Int", STEPSCOPE_DT_INT32},           {"Uint32", STEPSCOPE_DT_UINT32},
      {"Int64", STEPSCOPE_DT_INT64},         {"Uint64", STEPSCOPE_DT_UINT64},
      {"Float16", STEPSCOPE_DT_FLOAT16},     {"Half", STEPSCOPE_DT_FLOAT16},
      {"fp16", STEPSCOPE_DT_FLOAT16},        {"Float32", STEPSCOPE_DT_FLOAT32},
      {"Float", STEPSCOPE_DT_FLOAT32},       {"fp32", STEPSCOPE_DT_FLOAT32},
      {"Float64", STEPSCOPE_DT_FLOAT64},     {"Double", STEPSCOPE_DT_FLOAT64},
      {"Bfloat16", STEPSCOPE_DT_BFLOAT16},   {"bf16", STEPSCOPE_DT_BFLOAT16},
      {"Float8e4m3", STEPSCOPE_DT_FP8_E4M3}, {"Fp8E4M3", STEPSCOPE_DT_FP8_E4M3},
      {"Float8e5m2", STEPSCOPE_DT_FP8_E5M2}, {"Fp8E5M2", STEPSCOPE_DT_FP8_E5M2},
  };
  return lookup(types, sizeof types / sizeof types[0], datatype, STEPSCOPE_DT_UNKNOWN);
}

uint64_t sgpu_nccl_payload_bytes(uint32_t op, uint32_t datatype, uint64_t count, int nranks) {
  uint64_t bytes = count * (uint64_t)stepscope_datatype_size(datatype);
  switch (op) {
  case STEPSCOPE_COLL_ALLGATHER:
  case STEPSCOPE_COLL_REDUCESCATTER:
  case STEPSCOPE_COLL_ALLTOALL:
    /* NCCL's count is per rank; the formulas use the whole buffer. */
    return bytes * (uint64_t)(nranks > 0 ? nranks : 1);
  default: return bytes;
  }
}
