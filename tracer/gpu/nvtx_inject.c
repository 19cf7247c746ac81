/*
 * nvtx_inject.c — stepscope's NVTX v3 injection handler: NVTX ranges, marks,
 * domains, registered strings, categories, thread names, user sync objects
 * and extended payloads become trace records. Needs no GPU.
 *
 * How NVTX finds us: on the first NVTX call, the NVTX headers compiled into
 * the program load $NVTX_INJECTION64_PATH (or use a statically linked
 * `InitializeInjectionNvtx2_fnptr`) and call InitializeInjectionNvtx2 with a
 * function that exports NVTX's tables; we fill the slots of the CORE, CORE2
 * and SYNC modules with our handlers. The payload extension calls
 * InitializeInjectionNvtxExtension the same way for its own slots.
 *
 * Records: push/pop and start/end ranges become RANGE records when they end
 * (push/pop use a per-thread stack, searched by domain; start/end use a
 * small id table shared by all threads), marks become MARK records.
 * Scalar payloads keep their NVTX type; extended payloads are decoded to a
 * JSON `args` object (nvtx_payload.c). Domain and registered-string handles
 * are our own heap objects carrying the text, interned into the trace when
 * used. Category names become metadata `nvtx_category:<domain>:<id>`, thread
 * names STREAM records of kind HOST_THREAD. Every handler is a cheap no-op
 * while no trace runs; overflows (stack depth, open start/end ranges) are
 * counted and written as one DROPPED record (source NVTX) at exit.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <nvtx3/nvToolsExtSync.h>

#include "gpu_session.h"
#include "nvtx_payload.h"
#include "stepscope.h"

#define SGPU_EXPORT  __attribute__((visibility("default")))
#define HANDLE_MAGIC 0x4e565458u /* "NVTX" */
#define STACK_DEPTH  128
#define OPEN_RANGES  4096
#define ARGS_MAX     1024

typedef struct nvtx_text {
  struct nvtx_text
      *next_kept; /* every handle stays listed: NVTX handles live as long as the process */
  uint32_t magic;
  stepscope_writer *writer; /* trace the cached id belongs to */
  uint32_t id;
  char *text;
} nvtx_text;

typedef struct nvtx_domain {
  nvtx_text name;
} nvtx_domain;

typedef struct nvtx_sync {
  uint32_t magic;
  nvtx_domain *domain;
  nvtx_text name;
} nvtx_sync;

typedef struct open_range {
  stepscope_range rec;
  const void *domain;
} open_range;

typedef struct thread_stack {
  int depth;
  open_range entries[STACK_DEPTH];
  uint64_t sync_wait_start;
  const void *sync_waiting;
} thread_stack;

static __thread thread_stack *tls_stack;
static pthread_mutex_t ranges_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  uint64_t id;
  open_range r;
} * start_end_ranges; /* OPEN_RANGES slots, id 0 = free */
static uint64_t next_range_id = 1;
static uint64_t dropped; /* atomic */

/* ---- strings ---------------------------------------------------------------- */

static nvtx_text *kept_handles;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

static int text_init(nvtx_text *t, const char *s) {
  t->magic = HANDLE_MAGIC;
  t->text = strdup(s ? s : "");
  if (!t->text) return -1;
  pthread_mutex_lock(&kept_lock);
  t->next_kept = kept_handles;
  kept_handles = t;
  pthread_mutex_unlock(&kept_lock);
  return 0;
}

static char *narrow_copy(const wchar_t *w) {
  size_t n = w ? wcslen(w) : 0;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  for (size_t i = 0; i < n; i++)
    s[i] = (w[i] > 0 && w[i] < 0x80) ? (char)w[i] : '?';
  s[n] = '\0';
  return s;
}

static uint32_t text_id(nvtx_text *t) {
  if (!t || t->magic != HANDLE_MAGIC) return 0;
  stepscope_writer *w = stepscope_current();
  if (t->writer != w || !t->id) {
    t->id = stepscope_intern_current(t->text);
    t->writer = w;
  }
  return t->id;
}

static const char *resolve_registered(const void *handle) {
  const nvtx_text *t = handle;
  return t && t->magic == HANDLE_MAGIC ? t->text : NULL;
}

static uint32_t domain_id(nvtxDomainHandle_t d) {
  nvtx_domain *dom = (nvtx_domain *)d;
  return dom ? text_id(&dom->name) : 0;
}

/* ---- attribute decoding ------------------------------------------------------ */

static void count_drop(void) {
  __atomic_add_fetch(&dropped, 1, __ATOMIC_RELAXED);
}

/* Fills the fields a range and a mark share from NVTX event attributes. */
static void decode_attributes(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a,
                              uint32_t *name, uint32_t *category, uint32_t *color,
                              uint32_t *payload_kind, uint64_t *payload, uint32_t *args) {
  *name = *category = *color = *payload_kind = *args = 0;
  *payload = 0;
  if (!a) return;
  if (a->size >= offsetof(nvtxEventAttributes_t, message) + sizeof a->message) {
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: *name = stepscope_intern_current(a->message.ascii); break;
    case NVTX_MESSAGE_TYPE_REGISTERED: *name = text_id((nvtx_text *)a->message.registered); break;
    case NVTX_MESSAGE_TYPE_UNICODE: {
      char *s = narrow_copy(a->message.unicode);
      if (s) *name = stepscope_intern_current(s);
      free(s);
      break;
    }
    default: break;
    }
  }
  *category = a->category;
  if (a->colorType == NVTX_COLOR_ARGB) *color = a->color;
  switch (a->payloadType) {
  case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
    *payload_kind = STEPSCOPE_PAYLOAD_UINT64;
    *payload = a->payload.ullValue;
    break;
  case NVTX_PAYLOAD_TYPE_INT64:
    *payload_kind = STEPSCOPE_PAYLOAD_INT64;
    *payload = (uint64_t)a->payload.llValue;
    break;
  case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
    *payload_kind = STEPSCOPE_PAYLOAD_UINT64;
    *payload = a->payload.uiValue;
    break;
  case NVTX_PAYLOAD_TYPE_INT32:
    *payload_kind = STEPSCOPE_PAYLOAD_INT64;
    *payload = (uint64_t)(int64_t)a->payload.iValue;
    break;
  case NVTX_PAYLOAD_TYPE_DOUBLE:
    *payload_kind = STEPSCOPE_PAYLOAD_DOUBLE;
    memcpy(payload, &a->payload.dValue, 8);
    break;
  case NVTX_PAYLOAD_TYPE_FLOAT: {
    double d = a->payload.fValue;
    *payload_kind = STEPSCOPE_PAYLOAD_DOUBLE;
    memcpy(payload, &d, 8);
    break;
  }
  case NVTX_PAYLOAD_TYPE_EXT: {
    const nvtxPayloadData_t *pd = (const nvtxPayloadData_t *)(uintptr_t)a->payload.ullValue;
    size_t n = a->reserved0 > 0 ? (size_t)a->reserved0 : 1;
    char json[ARGS_MAX];
    if (pd && sgpu_nvtx_payload_to_json(domain, pd, n, json, sizeof json) > 0)
      *args = stepscope_intern_current(json);
    break;
  }
  default: break;
  }
}

/* ---- ranges and marks ------------------------------------------------------------ */

static thread_stack *stack_get(void) {
  if (!tls_stack) tls_stack = calloc(1, sizeof *tls_stack); /* freed with the process */
  return tls_stack;
}

static void emit_range(const stepscope_range *r) {
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_RANGE;
  rec.u.range = *r;
  stepscope_emit(&rec);
}

static void fill_range(stepscope_range *r, nvtxDomainHandle_t domain,
                       const nvtxEventAttributes_t *a) {
  memset(r, 0, sizeof *r);
  r->start_ns = stepscope_now_ns();
  r->thread = stepscope_thread_id();
  r->domain = domain_id(domain);
  decode_attributes(domain, a, &r->name, &r->category, &r->color, &r->payload_kind, &r->payload,
                    &r->args);
}

static int push_attr(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a) {
  if (!stepscope_active()) return 0;
  thread_stack *s = stack_get();
  if (!s) {
    count_drop();
    return -1;
  }
  if (s->depth >= STACK_DEPTH) {
    s->depth++;
    count_drop();
    return s->depth - 1;
  }
  open_range *o = &s->entries[s->depth++];
  fill_range(&o->rec, domain, a);
  o->domain = domain;
  return s->depth - 1;
}

static int pop_domain(nvtxDomainHandle_t domain, const char *extra_args) {
  thread_stack *s = tls_stack;
  if (!s || s->depth == 0) return -1;
  if (s->depth > STACK_DEPTH) {
    s->depth--;
    return s->depth;
  }
  int i = s->depth - 1;
  while (i >= 0 && s->entries[i].domain != (const void *)domain)
    i--;
  if (i < 0) return -1;
  open_range o = s->entries[i];
  memmove(&s->entries[i], &s->entries[i + 1], (size_t)(s->depth - 1 - i) * sizeof s->entries[0]);
  s->depth--;
  if (!stepscope_active()) return s->depth;
  o.rec.end_ns = stepscope_now_ns();
  if (extra_args && !o.rec.args) o.rec.args = stepscope_intern_current(extra_args);
  emit_range(&o.rec);
  return s->depth;
}

static nvtxRangeId_t start_attr(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a) {
  if (!stepscope_active()) return 0;
  open_range o;
  fill_range(&o.rec, domain, a);
  o.domain = domain;
  nvtxRangeId_t id = 0;
  pthread_mutex_lock(&ranges_lock);
  if (!start_end_ranges) start_end_ranges = calloc(OPEN_RANGES, sizeof *start_end_ranges);
  if (start_end_ranges) {
    uint64_t candidate = next_range_id++;
    size_t slot = candidate % OPEN_RANGES;
    for (size_t probe = 0; probe < OPEN_RANGES; probe++, slot = (slot + 1) % OPEN_RANGES)
      if (start_end_ranges[slot].id == 0) {
        start_end_ranges[slot].id = candidate;
        start_end_ranges[slot].r = o;
        id = candidate;
        break;
      }
  }
  pthread_mutex_unlock(&ranges_lock);
  if (!id) count_drop();
  return id;
}

static void end_id(nvtxRangeId_t id, const char *extra_args) {
  if (!id) return;
  open_range o;
  int found = 0;
  pthread_mutex_lock(&ranges_lock);
  if (start_end_ranges) {
    size_t slot = id % OPEN_RANGES;
    for (size_t probe = 0; probe < OPEN_RANGES; probe++, slot = (slot + 1) % OPEN_RANGES) {
      if (start_end_ranges[slot].id == id) {
        o = start_end_ranges[slot].r;
        start_end_ranges[slot].id = 0;
        found = 1;
        break;
      }
      if (start_end_ranges[slot].id == 0) break;
    }
  }
  pthread_mutex_unlock(&ranges_lock);
  if (!found || !stepscope_active()) return;
  o.rec.end_ns = stepscope_now_ns();
  if (extra_args && !o.rec.args) o.rec.args = stepscope_intern_current(extra_args);
  emit_range(&o.rec);
}

static void mark_attr(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a,
                      const char *args_json) {
  if (!stepscope_active()) return;
  stepscope_record rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = STEPSCOPE_REC_MARK;
  stepscope_mark *m = &rec.u.mark;
  m->time_ns = stepscope_now_ns();
  m->thread = stepscope_thread_id();
  m->domain = domain_id(domain);
  decode_attributes(domain, a, &m->name, &m->category, &m->color, &m->payload_kind, &m->payload,
                    &m->args);
  if (args_json && !m->args) m->args = stepscope_intern_current(args_json);
  stepscope_emit(&rec);
}

static nvtxEventAttributes_t ascii_attr(const char *message) {
  nvtxEventAttributes_t a;
  memset(&a, 0, sizeof a);
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  return a;
}

/* ---- CORE module --------------------------------------------------------------- */

static void NVTX_API h_mark_ex(const nvtxEventAttributes_t *a) {
  mark_attr(NULL, a, NULL);
}
static void NVTX_API h_mark_a(const char *m) {
  nvtxEventAttributes_t a = ascii_attr(m);
  mark_attr(NULL, &a, NULL);
}
static void NVTX_API h_mark_w(const wchar_t *m) {
  char *s = narrow_copy(m);
  if (s) h_mark_a(s);
  free(s);
}
static nvtxRangeId_t NVTX_API h_start_ex(const nvtxEventAttributes_t *a) {
  return start_attr(NULL, a);
}
static nvtxRangeId_t NVTX_API h_start_a(const char *m) {
  nvtxEventAttributes_t a = ascii_attr(m);
  return start_attr(NULL, &a);
}
static nvtxRangeId_t NVTX_API h_start_w(const wchar_t *m) {
  char *s = narrow_copy(m);
  nvtxRangeId_t id = s ? h_start_a(s) : 0;
  free(s);
  return id;
}
static void NVTX_API h_end(nvtxRangeId_t id) {
  end_id(id, NULL);
}
static int NVTX_API h_push_ex(const nvtxEventAttributes_t *a) {
  return push_attr(NULL, a);
}
static int NVTX_API h_push_a(const char *m) {
  nvtxEventAttributes_t a = ascii_attr(m);
  return push_attr(NULL, &a);
}
static int NVTX_API h_push_w(const wchar_t *m) {
  char *s = narrow_copy(m);
  int depth = s ? h_push_a(s) : -1;
  free(s);
  return depth;
}
static int NVTX_API h_pop(void) {
  return pop_domain(NULL, NULL);
}

static void name_category(nvtxDomainHandle_t domain, uint32_t category, const char *name) {
  if (!stepscope_active() || !name) return;
  nvtx_domain *dom = (nvtx_domain *)domain;
  char key[160], value[160];
  snprintf(key, sizeof key, "nvtx_category:%s:%u", dom ? dom->name.text : "", category);
  size_t j = 0;
  value[j++] = '"';
  for (size_t i = 0; name[i] && j < sizeof value - 3; i++)
    if (name[i] != '"' && name[i] != '\\' && (unsigned char)name[i] >= 0x20) value[j++] = name[i];
  value[j++] = '"';
  value[j] = '\0';
  stepscope_metadata_set(key, value);
}
static void NVTX_API h_name_category_a(uint32_t c, const char *n) {
  name_category(NULL, c, n);
}
static void NVTX_API h_name_category_w(uint32_t c, const wchar_t *n) {
  char *s = narrow_copy(n);
  name_category(NULL, c, s);
  free(s);
}
static void NVTX_API h_name_thread_a(uint32_t tid, const char *name) {
  if (stepscope_active() && name)
    stepscope_stream_declare(tid, STEPSCOPE_STREAM_HOST_THREAD, 0, name);
}
static void NVTX_API h_name_thread_w(uint32_t tid, const wchar_t *name) {
  char *s = narrow_copy(name);
  h_name_thread_a(tid, s);
  free(s);
}

/* ---- CORE2 module (domains) ------------------------------------------------------ */

static void NVTX_API h_d_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  mark_attr(d, a, NULL);
}
static nvtxRangeId_t NVTX_API h_d_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  return start_attr(d, a);
}
static void NVTX_API h_d_end(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  end_id(id, NULL);
}
static int NVTX_API h_d_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  return push_attr(d, a);
}
static int NVTX_API h_d_pop(nvtxDomainHandle_t d) {
  return pop_domain(d, NULL);
}
static nvtxResourceHandle_t NVTX_API h_d_resource_create(nvtxDomainHandle_t d,
                                                         nvtxResourceAttributes_t *a) {
  static int resource_placeholder;
  return (nvtxResourceHandle_t)&resource_placeholder; /* resources are accepted, not recorded */
}
static void NVTX_API h_d_resource_destroy(nvtxResourceHandle_t r) {}
static void NVTX_API h_d_name_category_a(nvtxDomainHandle_t d, uint32_t c, const char *n) {
  name_category(d, c, n);
}
static void NVTX_API h_d_name_category_w(nvtxDomainHandle_t d, uint32_t c, const wchar_t *n) {
  char *s = narrow_copy(n);
  name_category(d, c, s);
  free(s);
}
static nvtxStringHandle_t NVTX_API h_d_register_string_a(nvtxDomainHandle_t d, const char *s) {
  nvtx_text *t = calloc(1, sizeof *t);
  if (!t || text_init(t, s) != 0) {
    free(t);
    return NULL;
  }
  return (nvtxStringHandle_t)t;
}
static nvtxStringHandle_t NVTX_API h_d_register_string_w(nvtxDomainHandle_t d, const wchar_t *w) {
  char *s = narrow_copy(w);
  nvtxStringHandle_t h = s ? h_d_register_string_a(d, s) : NULL;
  free(s);
  return h;
}
static nvtxDomainHandle_t NVTX_API h_domain_create_a(const char *name) {
  nvtx_domain *d = calloc(1, sizeof *d);
  if (!d || text_init(&d->name, name) != 0) {
    free(d);
    return NULL;
  }
  return (nvtxDomainHandle_t)d;
}
static nvtxDomainHandle_t NVTX_API h_domain_create_w(const wchar_t *w) {
  char *s = narrow_copy(w);
  nvtxDomainHandle_t h = s ? h_domain_create_a(s) : NULL;
  free(s);
  return h;
}
static void NVTX_API h_domain_destroy(nvtxDomainHandle_t d) {
  /* Kept: records already written may still refer to its interned name, and
   * NCCL's static handles outlive their destroy calls in practice. */
}
static void NVTX_API h_initialize(const void *reserved) {}

/* ---- SYNC module (user locks) ------------------------------------------------------ */

static nvtxSyncUser_t NVTX_API h_sync_create(nvtxDomainHandle_t d,
                                             const nvtxSyncUserAttributes_t *a) {
  nvtx_sync *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->magic = HANDLE_MAGIC;
  s->domain = (nvtx_domain *)d;
  const char *name = a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "sync";
  if (a && a->messageType == NVTX_MESSAGE_TYPE_REGISTERED && a->message.registered)
    name = ((nvtx_text *)a->message.registered)->text;
  if (text_init(&s->name, name) != 0) {
    free(s);
    return NULL;
  }
  return (nvtxSyncUser_t)s;
}
static void NVTX_API h_sync_destroy(nvtxSyncUser_t h) {
  nvtx_sync *s = (nvtx_sync *)h;
  if (!s || s->magic != HANDLE_MAGIC) return;
  pthread_mutex_lock(&kept_lock);
  for (nvtx_text **p = &kept_handles; *p; p = &(*p)->next_kept)
    if (*p == &s->name) {
      *p = s->name.next_kept;
      break;
    }
  pthread_mutex_unlock(&kept_lock);
  s->magic = 0;
  free(s->name.text);
  free(s);
}
static void NVTX_API h_sync_acquire_start(nvtxSyncUser_t h) {
  thread_stack *st = stepscope_active() ? stack_get() : NULL;
  if (!st) return;
  st->sync_waiting = h;
  st->sync_wait_start = stepscope_now_ns();
}
static void sync_acquired(nvtxSyncUser_t h, const char *outcome) {
  thread_stack *st = tls_stack;
  nvtx_sync *s = (nvtx_sync *)h;
  if (!st || st->sync_waiting != (const void *)h || !s || s->magic != HANDLE_MAGIC ||
      !stepscope_active())
    return;
  st->sync_waiting = NULL;
  stepscope_range r;
  memset(&r, 0, sizeof r);
  r.start_ns = st->sync_wait_start;
  r.end_ns = stepscope_now_ns();
  r.thread = stepscope_thread_id();
  r.name = text_id(&s->name);
  r.domain = s->domain ? text_id(&s->domain->name) : 0;
  char args[64];
  snprintf(args, sizeof args, "{\"sync\":\"acquire\",\"outcome\":\"%s\"}", outcome);
  r.args = stepscope_intern_current(args);
  emit_range(&r);
}
static void NVTX_API h_sync_acquire_failed(nvtxSyncUser_t h) {
  sync_acquired(h, "failed");
}
static void NVTX_API h_sync_acquire_success(nvtxSyncUser_t h) {
  sync_acquired(h, "success");
}
static void NVTX_API h_sync_releasing(nvtxSyncUser_t h) {
  nvtx_sync *s = (nvtx_sync *)h;
  if (!s || s->magic != HANDLE_MAGIC || !stepscope_active()) return;
  nvtxEventAttributes_t a = ascii_attr(s->name.text);
  mark_attr((nvtxDomainHandle_t)s->domain, &a, "{\"sync\":\"release\"}");
}

/* ---- payload extension ------------------------------------------------------------- */

static uint64_t NVTX_API h_schema_register(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *a) {
  return sgpu_nvtx_schema_register(d, a);
}
static uint64_t NVTX_API h_enum_register(nvtxDomainHandle_t d, const nvtxPayloadEnumAttr_t *a) {
  return sgpu_nvtx_enum_register(d, a);
}
static const char *payload_json(nvtxDomainHandle_t d, const nvtxPayloadData_t *p, size_t n,
                                char *buf, size_t size) {
  return p && n && sgpu_nvtx_payload_to_json(d, p, n, buf, size) > 0 ? buf : NULL;
}
static void NVTX_API h_mark_payload(nvtxDomainHandle_t d, const nvtxPayloadData_t *p, size_t n) {
  if (!stepscope_active()) return;
  char buf[ARGS_MAX];
  mark_attr(d, NULL, payload_json(d, p, n, buf, sizeof buf));
}
static int NVTX_API h_push_payload(nvtxDomainHandle_t d, const nvtxPayloadData_t *p, size_t n) {
  if (!stepscope_active()) return 0;
  int depth = push_attr(d, NULL);
  thread_stack *s = tls_stack;
  char buf[ARGS_MAX];
  if (s && depth >= 0 && depth < STACK_DEPTH && payload_json(d, p, n, buf, sizeof buf))
    s->entries[depth].rec.args = stepscope_intern_current(buf);
  return depth;
}
static int NVTX_API h_pop_payload(nvtxDomainHandle_t d, const nvtxPayloadData_t *p, size_t n) {
  char buf[ARGS_MAX];
  return pop_domain(d, stepscope_active() ? payload_json(d, p, n, buf, sizeof buf) : NULL);
}
static nvtxRangeId_t NVTX_API h_start_payload(nvtxDomainHandle_t d, const nvtxPayloadData_t *p,
                                              size_t n) {
  char buf[ARGS_MAX];
  const char *json = stepscope_active() ? payload_json(d, p, n, buf, sizeof buf) : NULL;
  nvtxRangeId_t id = start_attr(d, NULL);
  if (id && json) {
    pthread_mutex_lock(&ranges_lock);
    size_t slot = id % OPEN_RANGES;
    for (size_t probe = 0; probe < OPEN_RANGES; probe++, slot = (slot + 1) % OPEN_RANGES)
      if (start_end_ranges[slot].id == id) {
        start_end_ranges[slot].r.rec.args = stepscope_intern_current(json);
        break;
      }
    pthread_mutex_unlock(&ranges_lock);
  }
  return id;
}
static void NVTX_API h_end_payload(nvtxDomainHandle_t d, nvtxRangeId_t id,
                                   const nvtxPayloadData_t *p, size_t n) {
  char buf[ARGS_MAX];
  end_id(id, stepscope_active() ? payload_json(d, p, n, buf, sizeof buf) : NULL);
}
static uint8_t NVTX_API h_domain_is_enabled(nvtxDomainHandle_t d) {
  return stepscope_active() ? 1 : 0;
}

/* ---- installation -------------------------------------------------------------------- */

typedef struct slot_value {
  unsigned id;
  NvtxFunctionPointer fn;
} slot_value;

#define FN(f) ((NvtxFunctionPointer)(void (*)(void))(f))

static int fill_module(const NvtxExportTableCallbacks *cb, NvtxCallbackModule module,
                       const slot_value *values, size_t n) {
  NvtxFunctionTable table = NULL;
  unsigned int size = 0;
  if (!cb->GetModuleFunctionTable(module, &table, &size) || !table) return 0;
  for (size_t i = 0; i < n; i++)
    if (values[i].id < size && table[values[i].id]) *table[values[i].id] = values[i].fn;
  return 1;
}

static void write_drop_count(void) {
  uint64_t n = __atomic_exchange_n(&dropped, 0, __ATOMIC_RELAXED);
  if (!n || !stepscope_active()) return;
  sgpu_emit_dropped(n, STEPSCOPE_DROP_NVTX);
}

/* Writes the NVTX drop count now (called at exit by the injection library). */
void sgpu_nvtx_flush_drops(void);
void sgpu_nvtx_flush_drops(void) {
  write_drop_count();
}

static int install(NvtxGetExportTableFunc_t get_export_table) {
  static int warned;
  const NvtxExportTableCallbacks *cb =
      get_export_table ? (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS)
                       : NULL;
  if (!cb || cb->struct_size < sizeof *cb) {
    sgpu_warn_once(&warned, "nvtx", "this NVTX has no callback table; NVTX ranges are not traced");
    return 0;
  }
  sgpu_nvtx_payload_set_string_resolver(resolve_registered);
  sgpu_session_add_flush(sgpu_nvtx_flush_drops);
  const slot_value core[] = {
      {NVTX_CBID_CORE_MarkEx, FN(h_mark_ex)},
      {NVTX_CBID_CORE_MarkA, FN(h_mark_a)},
      {NVTX_CBID_CORE_MarkW, FN(h_mark_w)},
      {NVTX_CBID_CORE_RangeStartEx, FN(h_start_ex)},
      {NVTX_CBID_CORE_RangeStartA, FN(h_start_a)},
      {NVTX_CBID_CORE_RangeStartW, FN(h_start_w)},
      {NVTX_CBID_CORE_RangeEnd, FN(h_end)},
      {NVTX_CBID_CORE_RangePushEx, FN(h_push_ex)},
      {NVTX_CBID_CORE_RangePushA, FN(h_push_a)},
      {NVTX_CBID_CORE_RangePushW, FN(h_push_w)},
      {NVTX_CBID_CORE_RangePop, FN(h_pop)},
      {NVTX_CBID_CORE_NameCategoryA, FN(h_name_category_a)},
      {NVTX_CBID_CORE_NameCategoryW, FN(h_name_category_w)},
      {NVTX_CBID_CORE_NameOsThreadA, FN(h_name_thread_a)},
      {NVTX_CBID_CORE_NameOsThreadW, FN(h_name_thread_w)},
  };
  const slot_value core2[] = {
      {NVTX_CBID_CORE2_DomainMarkEx, FN(h_d_mark_ex)},
      {NVTX_CBID_CORE2_DomainRangeStartEx, FN(h_d_start_ex)},
      {NVTX_CBID_CORE2_DomainRangeEnd, FN(h_d_end)},
      {NVTX_CBID_CORE2_DomainRangePushEx, FN(h_d_push_ex)},
      {NVTX_CBID_CORE2_DomainRangePop, FN(h_d_pop)},
      {NVTX_CBID_CORE2_DomainResourceCreate, FN(h_d_resource_create)},
      {NVTX_CBID_CORE2_DomainResourceDestroy, FN(h_d_resource_destroy)},
      {NVTX_CBID_CORE2_DomainNameCategoryA, FN(h_d_name_category_a)},
      {NVTX_CBID_CORE2_DomainNameCategoryW, FN(h_d_name_category_w)},
      {NVTX_CBID_CORE2_DomainRegisterStringA, FN(h_d_register_string_a)},
      {NVTX_CBID_CORE2_DomainRegisterStringW, FN(h_d_register_string_w)},
      {NVTX_CBID_CORE2_DomainCreateA, FN(h_domain_create_a)},
      {NVTX_CBID_CORE2_DomainCreateW, FN(h_domain_create_w)},
      {NVTX_CBID_CORE2_DomainDestroy, FN(h_domain_destroy)},
      {NVTX_CBID_CORE2_Initialize, FN(h_initialize)},
  };
  const slot_value sync[] = {
      {NVTX_CBID_SYNC_DomainSyncUserCreate, FN(h_sync_create)},
      {NVTX_CBID_SYNC_DomainSyncUserDestroy, FN(h_sync_destroy)},
      {NVTX_CBID_SYNC_DomainSyncUserAcquireStart, FN(h_sync_acquire_start)},
      {NVTX_CBID_SYNC_DomainSyncUserAcquireFailed, FN(h_sync_acquire_failed)},
      {NVTX_CBID_SYNC_DomainSyncUserAcquireSuccess, FN(h_sync_acquire_success)},
      {NVTX_CBID_SYNC_DomainSyncUserReleasing, FN(h_sync_releasing)},
  };
  if (!fill_module(cb, NVTX_CB_MODULE_CORE, core, sizeof core / sizeof core[0]) ||
      !fill_module(cb, NVTX_CB_MODULE_CORE2, core2, sizeof core2 / sizeof core2[0])) {
    sgpu_warn_once(&warned, "nvtx", "NVTX refused our handlers; NVTX ranges are not traced");
    return 0;
  }
  fill_module(cb, NVTX_CB_MODULE_SYNC, sync, sizeof sync / sizeof sync[0]); /* optional */
  return 1;
}

/* The entry NVTX calls in a library named by NVTX_INJECTION64_PATH. Returns
 * 1 on success; on 0 NVTX turns every call into a no-op. The trace itself is
 * started here in injected mode; in linked mode it may start later, and the
 * handlers stay no-ops until it does. */
SGPU_EXPORT int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);
SGPU_EXPORT int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  sgpu_session_ensure();
  return install(get_export_table);
}

/* The payload extension's entry (same library, same lookup rules). */
SGPU_EXPORT int NVTX_API InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info);
SGPU_EXPORT int NVTX_API InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info) {
  if (!info || info->moduleId != NVTX_EXT_PAYLOAD_MODULEID || info->segmentsCount < 1 ||
      !info->segments)
    return 0;
  nvtxExtModuleSegment_t *seg = &info->segments[0];
  const struct {
    unsigned id;
    intptr_t fn;
  } slots[] = {
      {NVTX3EXT_CBID_nvtxPayloadSchemaRegister, (intptr_t)h_schema_register},
      {NVTX3EXT_CBID_nvtxPayloadEnumRegister, (intptr_t)h_enum_register},
      {NVTX3EXT_CBID_nvtxMarkPayload, (intptr_t)h_mark_payload},
      {NVTX3EXT_CBID_nvtxRangePushPayload, (intptr_t)h_push_payload},
      {NVTX3EXT_CBID_nvtxRangePopPayload, (intptr_t)h_pop_payload},
      {NVTX3EXT_CBID_nvtxRangeStartPayload, (intptr_t)h_start_payload},
      {NVTX3EXT_CBID_nvtxRangeEndPayload, (intptr_t)h_end_payload},
      {NVTX3EXT_CBID_nvtxDomainIsEnabled, (intptr_t)h_domain_is_enabled},
  };
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
    if (slots[i].id < seg->slotCount) seg->functionSlots[slots[i].id] = slots[i].fn;
  return 1;
}
