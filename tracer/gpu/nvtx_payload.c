/*
 * nvtx_payload.c — registry and decoder of NVTX extended payloads (see
 * nvtx_payload.h).
 *
 * Registration is rare (once per schema per process) and takes a mutex; it
 * copies the schema (names included) into a fixed table and publishes the
 * new count with a release store, so lookups on the hot path read without a
 * lock. Decoding walks the schema's entries, reads each field at its offset
 * with memcpy after checking it lies inside the payload, and appends
 * `"key":value` to a bounded JSON buffer. Only scalar fields, C strings,
 * fixed-size char arrays, registered strings and enums are decoded; other
 * entry types (nested schemas, arrays of numbers) are skipped.
 */
#include "nvtx_payload.h"
#include "sc_json.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SCHEMAS     256
#define MAX_ENTRIES     32
#define MAX_ENUM_VALUES 64
#define NAME_LEN        48

typedef struct schema_entry {
  uint64_t type, flags, offset, array_size;
  char name[NAME_LEN];
} schema_entry;

typedef struct schema {
  const void *domain;
  uint64_t id;
  size_t static_size;
  size_t n_entries;
  schema_entry entries[MAX_ENTRIES];
  /* enums */
  int is_enum;
  size_t enum_size;
  size_t n_values;
  uint64_t values[MAX_ENUM_VALUES];
  char value_names[MAX_ENUM_VALUES][NAME_LEN];
} schema;

static schema *table;      /* MAX_SCHEMAS entries, allocated on first use */
static size_t table_count; /* published with release stores */
static uint64_t next_dynamic_id = NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static sgpu_nvtx_string_resolver string_resolver;

void sgpu_nvtx_payload_set_string_resolver(sgpu_nvtx_string_resolver resolver) {
  string_resolver = resolver;
}

void sgpu_nvtx_payload_reset(void) {
  pthread_mutex_lock(&table_lock);
  __atomic_store_n(&table_count, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&table_lock);
}

static void copy_name(char *dst, const char *src) {
  snprintf(dst, NAME_LEN, "%s", src ? src : "");
}

/* Takes a free slot (table lock held); NULL when full. */
static schema *new_slot(void) {
  if (!table) {
    table = calloc(MAX_SCHEMAS, sizeof *table);
    if (!table) return NULL;
  }
  size_t n = __atomic_load_n(&table_count, __ATOMIC_RELAXED);
  if (n >= MAX_SCHEMAS) return NULL;
  memset(&table[n], 0, sizeof table[n]);
  return &table[n];
}

static void publish(void) {
  __atomic_store_n(&table_count, __atomic_load_n(&table_count, __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELEASE);
}

static const schema *find(const void *domain, uint64_t id) {
  size_t n = __atomic_load_n(&table_count, __ATOMIC_ACQUIRE);
  for (size_t i = n; i-- > 0;)
    if (table[i].id == id &&
        (table[i].domain == domain || id >= NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START))
      return &table[i];
  return NULL;
}

/* Adds a schema for `domain` to the table: with *given_id as its id, or the next dynamic id
 * when given_id is NULL; fill() sets the rest from attr. The new schema's id, 0 when the table
 * is full. */
static uint64_t add_schema(const void *domain, const uint64_t *given_id,
                           void (*fill)(schema *s, const void *attr), const void *attr) {
  uint64_t id = 0;
  pthread_mutex_lock(&table_lock);
  schema *s = new_slot();
  if (s) {
    s->domain = domain;
    id = given_id ? *given_id : next_dynamic_id++;
    s->id = id;
    fill(s, attr);
    publish();
  }
  pthread_mutex_unlock(&table_lock);
  return id;
}

static void fill_struct_schema(schema *s, const void *arg) {
  const nvtxPayloadSchemaAttr_t *attr = arg;
  s->static_size =
      (attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE) ? attr->payloadStaticSize : 0;
  size_t n = (attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES) ? attr->numEntries
                                                                            : MAX_ENTRIES;
  for (size_t i = 0; i < n && s->n_entries < MAX_ENTRIES; i++) {
    const nvtxPayloadSchemaEntry_t *e = &attr->entries[i];
    /* Without a count, the entry list ends with a zero type. */
    if (!(attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES) && e->type == 0) break;
    schema_entry *d = &s->entries[s->n_entries++];
    d->type = e->type;
    d->flags = e->flags;
    d->offset = e->offset;
    d->array_size = e->arrayOrUnionDetail;
    copy_name(d->name, e->name);
  }
}

static void fill_enum_schema(schema *s, const void *arg) {
  const nvtxPayloadEnumAttr_t *attr = arg;
  s->is_enum = 1;
  s->enum_size = (attr->fieldMask & NVTX_PAYLOAD_ENUM_ATTR_FIELD_SIZE) ? attr->sizeOfEnum : 4;
  size_t n = (attr->fieldMask & NVTX_PAYLOAD_ENUM_ATTR_FIELD_NUM_ENTRIES) ? attr->numEntries : 0;
  for (size_t i = 0; i < n && s->n_values < MAX_ENUM_VALUES; i++) {
    s->values[s->n_values] = attr->entries[i].value;
    copy_name(s->value_names[s->n_values], attr->entries[i].name);
    s->n_values++;
  }
}

uint64_t sgpu_nvtx_schema_register(const void *domain, const nvtxPayloadSchemaAttr_t *attr) {
  if (!attr || !(attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES) || !attr->entries)
    return 0;
  return add_schema(
      domain, (attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID) ? &attr->schemaId : NULL,
      fill_struct_schema, attr);
}

uint64_t sgpu_nvtx_enum_register(const void *domain, const nvtxPayloadEnumAttr_t *attr) {
  if (!attr || !(attr->fieldMask & NVTX_PAYLOAD_ENUM_ATTR_FIELD_ENTRIES) || !attr->entries)
    return 0;
  return add_schema(
      domain, (attr->fieldMask & NVTX_PAYLOAD_ENUM_ATTR_FIELD_SCHEMA_ID) ? &attr->schemaId : NULL,
      fill_enum_schema, attr);
}

/* ---- JSON output --------------------------------------------------------- */

typedef struct json_out {
  char *buf;
  size_t size, len;
  int fields;
} json_out;

static void put(json_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(json_out *o, const char *fmt, ...) {
  if (o->len >= o->size) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  o->len = (size_t)n < o->size - o->len ? o->len + (size_t)n : o->size;
}

static void put_bytes(void *ctx, const char *bytes, size_t n) {
  json_out *o = ctx;
  put(o, "%.*s", (int)n, bytes);
}

static void put_string(json_out *o, const char *s, size_t max) {
  sc_json_string(s, s ? strnlen(s, max) : 0, 0, put_bytes, o);
}

/* NCCL's field names, and the short keys we give them. */
static const char *short_key(const char *name) {
  static const char *const map[][2] = {
      {"NCCL communicator ID", "comm_id"},
      {"Parent NCCL communicator ID", "parent_comm_id"},
      {"Message size [bytes]", "bytes"},
      {"Reduction operation", "op"},
      {"Peer rank", "peer"},
      {"Root", "root"},
      {"Rank", "rank"},
      {"No. of ranks", "nranks"},
      {"CUDA device", "device"},
      {"No. of devices", "ndev"},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(map[i][0], name) == 0) return map[i][1];
  return name;
}

static size_t scalar_size(uint64_t type) {
  switch (type) {
  case NVTX_PAYLOAD_ENTRY_TYPE_CHAR:
  case NVTX_PAYLOAD_ENTRY_TYPE_UCHAR:
  case NVTX_PAYLOAD_ENTRY_TYPE_INT8:
  case NVTX_PAYLOAD_ENTRY_TYPE_UINT8: return 1;
  case NVTX_PAYLOAD_ENTRY_TYPE_SHORT:
  case NVTX_PAYLOAD_ENTRY_TYPE_USHORT:
  case NVTX_PAYLOAD_ENTRY_TYPE_INT16:
  case NVTX_PAYLOAD_ENTRY_TYPE_UINT16: return 2;
  case NVTX_PAYLOAD_ENTRY_TYPE_INT:
  case NVTX_PAYLOAD_ENTRY_TYPE_UINT:
  case NVTX_PAYLOAD_ENTRY_TYPE_INT32:
  case NVTX_PAYLOAD_ENTRY_TYPE_UINT32:
  case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT:
  case NVTX_PAYLOAD_ENTRY_TYPE_CATEGORY:
  case NVTX_PAYLOAD_ENTRY_TYPE_COLOR_ARGB:
  case NVTX_PAYLOAD_ENTRY_TYPE_PID_UINT32:
  case NVTX_PAYLOAD_ENTRY_TYPE_TID_UINT32:
  case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT32: return 4;
  case NVTX_PAYLOAD_ENTRY_TYPE_LONG:
  case NVTX_PAYLOAD_ENTRY_TYPE_ULONG: return sizeof(long);
  case NVTX_PAYLOAD_ENTRY_TYPE_LONGLONG:
  case NVTX_PAYLOAD_ENTRY_TYPE_ULONGLONG:
  case NVTX_PAYLOAD_ENTRY_TYPE_INT64:
  case NVTX_PAYLOAD_ENTRY_TYPE_UINT64:
  case NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE:
  case NVTX_PAYLOAD_ENTRY_TYPE_SCOPE_ID:
  case NVTX_PAYLOAD_ENTRY_TYPE_PID_UINT64:
  case NVTX_PAYLOAD_ENTRY_TYPE_TID_UINT64:
  case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT64: return 8;
  case NVTX_PAYLOAD_ENTRY_TYPE_SIZE: return sizeof(size_t);
  case NVTX_PAYLOAD_ENTRY_TYPE_ADDRESS:
  case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING:
  case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8:
  case NVTX_PAYLOAD_ENTRY_TYPE_NVTX_REGISTERED_STRING_HANDLE: return sizeof(void *);
  default: return 0;
  }
}

static int is_signed(uint64_t type) {
  switch (type) {
  case NVTX_PAYLOAD_ENTRY_TYPE_CHAR:
  case NVTX_PAYLOAD_ENTRY_TYPE_INT8:
  case NVTX_PAYLOAD_ENTRY_TYPE_SHORT:
  case NVTX_PAYLOAD_ENTRY_TYPE_INT16:
  case NVTX_PAYLOAD_ENTRY_TYPE_INT:
  case NVTX_PAYLOAD_ENTRY_TYPE_INT32:
  case NVTX_PAYLOAD_ENTRY_TYPE_LONG:
  case NVTX_PAYLOAD_ENTRY_TYPE_LONGLONG:
  case NVTX_PAYLOAD_ENTRY_TYPE_INT64: return 1;
  default: return 0;
  }
}

static uint64_t read_unsigned(const unsigned char *p, size_t size) {
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64 = 0;
  switch (size) {
  case 1: memcpy(&u8, p, 1); return u8;
  case 2: memcpy(&u16, p, 2); return u16;
  case 4: memcpy(&u32, p, 4); return u32;
  default: memcpy(&u64, p, 8); return u64;
  }
}

static int64_t read_signed(const unsigned char *p, size_t size) {
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64 = 0;
  switch (size) {
  case 1: memcpy(&i8, p, 1); return i8;
  case 2: memcpy(&i16, p, 2); return i16;
  case 4: memcpy(&i32, p, 4); return i32;
  default: memcpy(&i64, p, 8); return i64;
  }
}

static void decode_field(json_out *o, const void *domain, const schema_entry *e,
                         const unsigned char *blob, size_t blob_size, int index) {
  const char *key = e->name[0] ? short_key(e->name) : NULL;
  char fallback_key[24];
  if (!key) {
    snprintf(fallback_key, sizeof fallback_key, "field%d", index);
    key = fallback_key;
  }
  if (e->flags & NVTX_PAYLOAD_ENTRY_FLAG_HIDE) return;
  /* Fixed-size char array: a string inline in the payload. */
  if ((e->type == NVTX_PAYLOAD_ENTRY_TYPE_CHAR || e->type == NVTX_PAYLOAD_ENTRY_TYPE_CHAR8) &&
      (e->flags & NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE)) {
    if (e->offset >= blob_size) return;
    size_t max = blob_size - e->offset;
    if (e->array_size < max) max = e->array_size;
    put(o, "%s", o->fields ? "," : "");
    put_string(o, key, NAME_LEN);
    put(o, ":");
    put_string(o, (const char *)blob + e->offset, max);
    o->fields++;
    return;
  }
  if (e->flags & (NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE | NVTX_PAYLOAD_ENTRY_FLAG_POINTER))
    return; /* arrays and pointed-to data are not decoded */
  const schema *en = e->type >= NVTX_PAYLOAD_SCHEMA_ID_STATIC_START ? find(domain, e->type) : NULL;
  size_t size = en && en->is_enum ? en->enum_size : scalar_size(e->type);
  if (size == 0 || size > 8 || e->offset > blob_size || blob_size - e->offset < size) return;
  const unsigned char *p = blob + e->offset;
  put(o, "%s", o->fields ? "," : "");
  put_string(o, key, NAME_LEN);
  put(o, ":");
  o->fields++;
  if (en && en->is_enum) {
    uint64_t v = read_unsigned(p, size);
    for (size_t i = 0; i < en->n_values; i++)
      if (en->values[i] == v) {
        put_string(o, en->value_names[i], NAME_LEN);
        return;
      }
    put(o, "%" PRIu64, v);
    return;
  }
  switch (e->type) {
  case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT:
  case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT32: {
    float f;
    memcpy(&f, p, 4);
    put(o, "%.9g", (double)f);
    return;
  }
  case NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE:
  case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT64: {
    double d;
    memcpy(&d, p, 8);
    put(o, "%.17g", d);
    return;
  }
  case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING:
  case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8: {
    const char *s;
    memcpy(&s, p, sizeof s);
    put_string(o, s, 256);
    return;
  }
  case NVTX_PAYLOAD_ENTRY_TYPE_NVTX_REGISTERED_STRING_HANDLE: {
    const void *h;
    memcpy(&h, p, sizeof h);
    put_string(o, string_resolver ? string_resolver(h) : NULL, 256);
    return;
  }
  case NVTX_PAYLOAD_ENTRY_TYPE_ADDRESS: put(o, "\"0x%" PRIx64 "\"", read_unsigned(p, size)); return;
  default: break;
  }
  if (strcmp(key, "comm_id") == 0 || strcmp(key, "parent_comm_id") == 0) {
    put(o, "\"0x%016" PRIx64 "\"", read_unsigned(p, size));
  } else if (is_signed(e->type)) {
    put(o, "%" PRId64, read_signed(p, size));
  } else {
    uint64_t v = read_unsigned(p, size);
    if (v > (1ull << 53))
      put(o, "\"%" PRIu64 "\"", v); /* beyond a double's exact range */
    else
      put(o, "%" PRIu64, v);
  }
}

int sgpu_nvtx_payload_to_json(const void *domain, const nvtxPayloadData_t *payloads, size_t count,
                              char *out, size_t out_size) {
  json_out o = {out, out_size, 0, 0};
  if (!out || out_size < 3) return 0;
  put(&o, "{");
  for (size_t k = 0; payloads && k < count; k++) {
    const nvtxPayloadData_t *pd = &payloads[k];
    const schema *s = find(domain, pd->schemaId);
    if (!s || s->is_enum || !pd->payload) {
      put(&o, "%s\"schema\":%" PRIu64, o.fields ? "," : "", (uint64_t)pd->schemaId);
      o.fields++;
      continue;
    }
    size_t size = pd->size == SIZE_MAX ? s->static_size : pd->size;
    for (size_t i = 0; i < s->n_entries; i++)
      decode_field(&o, domain, &s->entries[i], pd->payload, size, (int)i);
  }
  /* Always leave room for the closing brace; a truncated field is cut cleanly. */
  if (o.len >= out_size - 1) {
    o.len = out_size - 2;
    /* back off to the last complete field */
    while (o.len > 1 && out[o.len - 1] != ',' && out[o.len - 1] != '{')
      o.len--;
    if (out[o.len - 1] == ',') o.len--;
  }
  out[o.len++] = '}';
  out[o.len] = '\0';
  return o.fields;
}
