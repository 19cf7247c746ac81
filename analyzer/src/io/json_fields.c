/*
 * json_fields.c — the members of the JSON documents the analyzer writes (the
 * report, the diff, the prediction check): `,"name":value` in one call
 * instead of a key string and a value call, and unknown values as null
 * (ssa_io.h).
 */
#include <string.h>

#include "ssa_io.h"

void ssa_out_key(ssa_out *o, const char *name) {
  size_t n = strlen(name);
  if (o->cap - o->len < n + 4) { /* at the buffer's end: piece by piece */
    ssa_out_str(o, ",\"");
    ssa_out_str(o, name);
    ssa_out_str(o, "\":");
    return;
  }
  char *p = o->buf + o->len; /* the common case, in one go: reports write millions of keys */
  p[0] = ',';
  p[1] = '"';
  memcpy(p + 2, name, n);
  p[n + 2] = '"';
  p[n + 3] = ':';
  o->len += n + 4;
}

void ssa_out_field_i64(ssa_out *o, const char *name, int64_t v) {
  ssa_out_key(o, name);
  ssa_out_i64(o, v);
}

void ssa_out_field_u64(ssa_out *o, const char *name, uint64_t v) {
  ssa_out_key(o, name);
  ssa_out_u64(o, v);
}

void ssa_out_field_double(ssa_out *o, const char *name, double v) {
  ssa_out_key(o, name);
  ssa_out_double(o, v);
}

void ssa_out_field_string(ssa_out *o, const char *name, const char *s) {
  ssa_out_key(o, name);
  ssa_out_json_string(o, s);
}

void ssa_out_field_bool(ssa_out *o, const char *name, int v) {
  ssa_out_key(o, name);
  ssa_out_str(o, v ? "true" : "false");
}

void ssa_out_i64_or_null(ssa_out *o, int64_t v) {
  if (v >= 0)
    ssa_out_i64(o, v);
  else
    ssa_out_str(o, "null");
}

void ssa_out_field_i64_or_null(ssa_out *o, const char *name, int64_t v) {
  ssa_out_key(o, name);
  ssa_out_i64_or_null(o, v);
}

void ssa_out_json_strings(ssa_out *o, char *const *s, size_t n) {
  ssa_out_char(o, '[');
  for (size_t i = 0; i < n; i++) {
    if (i) ssa_out_char(o, ',');
    ssa_out_json_string(o, s[i]);
  }
  ssa_out_char(o, ']');
}
