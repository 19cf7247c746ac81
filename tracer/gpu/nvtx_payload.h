/*
 * nvtx_payload.h — NVTX extended payloads: a registry of the binary payload
 * schemas and enums a program registers (nvtxPayloadSchemaRegister,
 * nvtxPayloadEnumRegister), and a decoder that turns a payload blob into a
 * JSON object for a record's `args`.
 *
 * NCCL describes every API call's parameters this way (communicator id,
 * message size, reduction op, peer, root, rank/nranks at init); the decoder
 * gives those fields short, stable keys: comm_id (a hex string), bytes, op,
 * peer, root, rank, nranks, device. Other programs' fields keep their schema
 * entry names.
 */
#ifndef STEPSCOPE_NVTX_PAYLOAD_H
#define STEPSCOPE_NVTX_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

/* Registers a schema for `domain`; returns its id (the caller's static id, or
 * a new dynamic id), 0 if the schema is unusable or the registry is full. */
uint64_t sgpu_nvtx_schema_register(const void *domain, const nvtxPayloadSchemaAttr_t *attr);

/* Registers an enum for `domain`; returns its id, 0 on failure. */
uint64_t sgpu_nvtx_enum_register(const void *domain, const nvtxPayloadEnumAttr_t *attr);

/* Resolves a registered-string handle to its text (set by the NVTX handler). */
typedef const char *(*sgpu_nvtx_string_resolver)(const void *handle);
void sgpu_nvtx_payload_set_string_resolver(sgpu_nvtx_string_resolver resolver);

/* Decodes `count` payloads into a JSON object written to out (NUL-terminated,
 * truncated cleanly to out_size). Unknown schemas give {"schema":ID}.
 * Returns the number of fields written. Never reads past a payload's size. */
int sgpu_nvtx_payload_to_json(const void *domain, const nvtxPayloadData_t *payloads, size_t count,
                              char *out, size_t out_size);

/* Forgets every schema and enum (tests). */
void sgpu_nvtx_payload_reset(void);

#endif /* STEPSCOPE_NVTX_PAYLOAD_H */
