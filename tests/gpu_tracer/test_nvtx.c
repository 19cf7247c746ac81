/*
 * test_nvtx.c — NVTX capture through the real NVTX v3 headers.
 *
 * The same file builds two programs:
 *   - test_gpu_tracer_nvtx_static: links stepscope's handler in-process by
 *     NVTX's static-injection symbols, starts a trace, runs the NVTX calls
 *     (run_nvtx_calls), stops, and checks the records (check_trace);
 *   - gpu_tracer_nvtx_app (NVTX_APP_ONLY): only the NVTX calls, traced by
 *     test_nvtx_injected.c through NVTX_INJECTION64_PATH, which reuses
 *     check_trace from here.
 * The calls cover push/pop, start/end on another thread, marks, domains,
 * registered strings, categories, scalar payloads, and an extended payload
 * with a registered schema shaped like NCCL's AllReduce parameters.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

typedef struct allreduce_params {
  uint64_t comm;
  size_t bytes;
  int op;
} allreduce_params;

#define SCHEMA_ID     (NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 5)
#define REDOP_ENUM_ID (NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 20)

static void *range_end_on_other_thread(void *arg) {
  nvtxRangeEnd(*(nvtxRangeId_t *)arg);
  return NULL;
}

static void run_nvtx_calls(void) {
  nvtxRangePushA("outer");
  nvtxMarkA("hello mark");
  nvtxRangePushA("inner");
  nvtxRangePop();
  nvtxRangePop();

  nvtxDomainHandle_t domain = nvtxDomainCreateA("NCCL");
  nvtxStringHandle_t registered = nvtxDomainRegisterStringA(domain, "ncclAllReduce");
  nvtxDomainNameCategoryA(domain, 3, "collectives");

  nvtxEventAttributes_t a;
  memset(&a, 0, sizeof a);
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = registered;
  a.category = 3;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xff00ff00u;
  a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  a.payload.ullValue = 42;
  nvtxDomainRangePushEx(domain, &a);
  nvtxDomainRangePop(domain);

  /* Extended payload with a schema, the way NCCL annotates its API calls. */
  static const nvtxPayloadEnum_t redops[] = {{"ncclSum", 0, 0}, {"ncclMax", 2, 0}};
  nvtxPayloadEnumAttr_t enum_attr;
  memset(&enum_attr, 0, sizeof enum_attr);
  enum_attr.fieldMask = NVTX_PAYLOAD_ENUM_ATTR_FIELD_ENTRIES |
                        NVTX_PAYLOAD_ENUM_ATTR_FIELD_NUM_ENTRIES |
                        NVTX_PAYLOAD_ENUM_ATTR_FIELD_SIZE | NVTX_PAYLOAD_ENUM_ATTR_FIELD_SCHEMA_ID;
  enum_attr.entries = redops;
  enum_attr.numEntries = 2;
  enum_attr.sizeOfEnum = sizeof(int);
  enum_attr.schemaId = REDOP_ENUM_ID;
  nvtxPayloadEnumRegister(domain, &enum_attr);
  static const nvtxPayloadSchemaEntry_t entries[] = {
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "NCCL communicator ID", NULL, 0,
       offsetof(allreduce_params, comm), NULL, NULL},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_SIZE, "Message size [bytes]", NULL, 0,
       offsetof(allreduce_params, bytes), NULL, NULL},
      {0, REDOP_ENUM_ID, "Reduction operation", NULL, 0, offsetof(allreduce_params, op), NULL,
       NULL},
  };
  nvtxPayloadSchemaAttr_t schema;
  memset(&schema, 0, sizeof schema);
  schema.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES |
                     NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                     NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE |
                     NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
  schema.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  schema.entries = entries;
  schema.numEntries = 3;
  schema.payloadStaticSize = sizeof(allreduce_params);
  schema.schemaId = SCHEMA_ID;
  nvtxPayloadSchemaRegister(domain, &schema);
  allreduce_params params = {0x1234abcd5678ef00ull, 1048576, 2};
  nvtxPayloadData_t data[] = {{SCHEMA_ID, sizeof params, &params}};
  nvtxEventAttributes_t b;
  memset(&b, 0, sizeof b);
  b.version = NVTX_VERSION;
  b.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  b.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  b.message.registered = registered;
  b.payloadType = NVTX_PAYLOAD_TYPE_EXT; /* what NVTX_PAYLOAD_EVTATTR_SET_MULTIPLE does */
  b.reserved0 = 1;
  b.payload.ullValue = (uint64_t)(uintptr_t)data;
  nvtxDomainRangePushEx(domain, &b);
  nvtxDomainRangePop(domain);

  /* A start/end range that ends on another thread. */
  nvtxRangeId_t id = nvtxRangeStartA("cross-thread");
  pthread_t th;
  pthread_create(&th, NULL, range_end_on_other_thread, &id);
  pthread_join(th, NULL);

  nvtxEventAttributes_t m;
  memset(&m, 0, sizeof m);
  m.version = NVTX_VERSION;
  m.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  m.messageType = NVTX_MESSAGE_TYPE_ASCII;
  m.message.ascii = "double mark";
  m.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
  m.payload.dValue = 2.5;
  nvtxDomainMarkEx(domain, &m);
}

#ifdef NVTX_APP_ONLY

int main(void) {
  run_nvtx_calls();
  return 0;
}

#else

#include "nvtx_checks.h"

int main(void) {
  const char *dir = make_temp_dir("nvtx");
  stepscope_start_options opt;
  memset(&opt, 0, sizeof opt);
  opt.run_dir = dir;
  opt.rank = 0;
  opt.world_size = 1;
  opt.local_rank = 0;
  stepscope_error err;
  if (stepscope_start(&opt, &err) != 0) {
    fprintf(stderr, "stepscope_start: %s\n", err.message);
    return 1;
  }
  run_nvtx_calls();
  stepscope_stop();
  char path[600];
  snprintf(path, sizeof path, "%s/rank-00000.trace.zst", dir);
  check_nvtx_trace(path);
  if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);
  return check_failures ? 1 : 0;
}

#endif
