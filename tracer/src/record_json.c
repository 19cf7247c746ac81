/*
 * record_json.c — one record as one JSON object, for `stepscope dump`, test
 * diagnostics and anyone who wants the raw records in a scripting language.
 * Driven by the codec's field tables, so every field the format carries is
 * printed under its wire name and nothing can be forgotten.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "record_codec.h"
#include "stepscope.h"
#include "sc_json.h"

typedef struct out {
  char *buf;
  size_t cap, len;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = o->len < o->cap ? o->cap - o->len : 0;
  int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) o->len += (size_t)n;
}

static void put_bytes(void *ctx, const char *bytes, size_t n) {
  out *o = ctx;
  if (o->len < o->cap) {
    size_t room =
        o->cap - o->len; /* as put: what fits, NUL-terminated, and the whole length counted */
    size_t k = n < room - 1 ? n : room - 1;
    memcpy(o->buf + o->len, bytes, k);
    o->buf[o->len + k] = '\0';
  }
  o->len += n;
}

static void put_json_string(out *o, const char *s) {
  sc_json_string(s, s ? strlen(s) : 0, 0, put_bytes, o);
}

/* "grid[0]" -> "grid_x": array members get axis suffixes. */
static void put_key(out *o, const char *name) {
  const char *br = strchr(name, '[');
  if (!br) {
    put(o, ",\"%s\":", name);
    return;
  }
  static const char axes[] = "xyz";
  int idx = br[1] - '0';
  put(o, ",\"%.*s_%c\":", (int)(br - name), name, idx >= 0 && idx < 3 ? axes[idx] : '?');
}

#define CAT(base, off, type) (*(const type *)((const char *)(base) + (off)))

size_t stepscope_record_to_json(const stepscope_record *rec, const stepscope_reader *r, char *buf,
                                size_t cap) {
  out o = {buf, cap, 0};
  if (cap) buf[0] = '\0';
  const char *kind = stepscope_record_kind_name(rec->kind);
  put(&o, "{\"kind\":\"%s\"", kind ? kind : "unknown");
  if (rec->kind == STEPSCOPE_REC_STRING) {
    put(&o, ",\"id\":%" PRIu32 ",\"value\":", rec->u.string.id);
    put_json_string(&o, rec->u.string.data);
    put(&o, "}");
    return o.len;
  }
  const kind_desc *d = codec_desc(rec->kind);
  if (!d) {
    put(&o, "}");
    return o.len;
  }
  const void *body = &rec->u;
  if (d->time_offset >= 0)
    put(&o, ",\"%s\":%" PRIu64, d->time_name, CAT(body, d->time_offset, uint64_t));
  for (const field *f = d->fields; f->type != FT_END; f++) {
    put_key(&o, f->name);
    switch ((field_type)f->type) {
    case FT_U64:
    case FT_DUR:
    case FT_CORR: put(&o, "%" PRIu64, CAT(body, f->offset, uint64_t)); break;
    case FT_U32: put(&o, "%" PRIu32, CAT(body, f->offset, uint32_t)); break;
    case FT_I32: put(&o, "%" PRId32, CAT(body, f->offset, int32_t)); break;
    case FT_I64: put(&o, "%" PRId64, CAT(body, f->offset, int64_t)); break;
    case FT_F64: { /* JSON has no NaN or infinity: null */
      double v = CAT(body, f->offset, double);
      if (isfinite(v))
        put(&o, "%.17g", v);
      else
        put(&o, "null");
      break;
    }
    case FT_STR: {
      uint32_t id = CAT(body, f->offset, uint32_t);
      const char *s = r ? stepscope_reader_string(r, id) : NULL;
      if (s)
        put_json_string(&o, s);
      else if (id == 0)
        put(&o, "null");
      else
        put(&o, "%" PRIu32, id);
      break;
    }
    case FT_ISTR: put_json_string(&o, CAT(body, f->offset, char *)); break;
    case FT_END: break;
    }
  }
  put(&o, "}");
  return o.len;
}

size_t stepscope_header_to_json(const stepscope_header *h, char *buf, size_t cap) {
  out o = {buf, cap, 0};
  if (cap) buf[0] = '\0';
  put(&o,
      "{\"kind\":\"header\",\"format_version\":\"%u.%u\",\"rank\":%d,\"world_size\":%d,"
      "\"local_rank\":%d,\"pid\":%" PRId64 ",\"clock_domain\":%u,\"start_ns\":%" PRIu64,
      h->format_major, h->format_minor, h->rank, h->world_size, h->local_rank, h->pid,
      h->clock_domain, h->start_ns);
  const struct {
    const char *name, *value;
  } strs[] = {{"hostname", h->hostname},
              {"producer", h->producer},
              {"device_name", h->device_name},
              {"device_json", h->device_json},
              {"driver_version", h->driver_version},
              {"cuda_version", h->cuda_version},
              {"nccl_version", h->nccl_version},
              {"cupti_version", h->cupti_version},
              {"config_json", h->config_json}};
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
    put(&o, ",\"%s\":", strs[i].name);
    put_json_string(&o, strs[i].value);
  }
  put(&o, "}");
  return o.len;
}
