/*
 * nccl_names.h — NCCL's operation and datatype names as stepscope enums.
 *
 * NCCL's profiler hands over strings ("AllReduce", "ncclBfloat16", ...).
 * These pure functions map them to the trace format's enums and compute the
 * byte count the analyzer's bus-bandwidth formulas expect (the nccl-tests
 * convention: the whole gathered/scattered buffer for all-gather,
 * reduce-scatter and all-to-all, the buffer itself for the others).
 */
#ifndef STEPSCOPE_NCCL_NAMES_H
#define STEPSCOPE_NCCL_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* stepscope_collective_op for an NCCL function name; STEPSCOPE_COLL_UNKNOWN if unknown. */
uint32_t sgpu_nccl_op_from_name(const char *func);

/* stepscope_datatype for an NCCL datatype name ("ncclFloat32", "float", "bf16"...). */
uint32_t sgpu_nccl_datatype_from_name(const char *datatype);

/* Bytes for the busbw formulas: count elements of `datatype` on a
 * communicator of `nranks` ranks, for operation `op`. 0 if the size is unknown. */
uint64_t sgpu_nccl_payload_bytes(uint32_t op, uint32_t datatype, uint64_t count, int nranks);

#endif /* STEPSCOPE_NCCL_NAMES_H */
