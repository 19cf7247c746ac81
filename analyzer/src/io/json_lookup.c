/*
 * json_lookup.c — just enough JSON to read run metadata values ("flops",
 * "schedule", "layout", "memory"): find a number or a string by a dotted
 * path of object keys, with the project's one skimmer (common/sc_json_skim.h: no tree,
 * never past the terminating NUL, 0 on anything malformed).
 */
#include <stdlib.h>
#include <string.h>

#include "sc_json_skim.h"
#include "ssa_io.h"

int ssa_json_number(const char *json, const char *path, double *out) {
  if (!json) return 0;
  const char *p = sc_json_find(json, path);
  if (!p) return 0;
  char *end;
  double v = strtod(p, &end);
  if (end == p) return 0;
  *out = v;
  return 1;
}

int ssa_json_string(const char *json, const char *path, char *buf, size_t size) {
  if (!json || size == 0) return 0;
  const char *p = sc_json_find(json, path);
  if (!p || *p != '"') return 0;
  const char *e = sc_json_skip_string(p);
  if (!e) return 0;
  size_t n = (size_t)(e - p - 2);
  if (n >= size) n = size - 1;
  memcpy(buf, p + 1, n);
  buf[n] = 0;
  return 1;
}

int ssa_json_bool(const char *json, const char *path, int *out) {
  if (!json) return 0;
  const char *p = sc_json_find(json, path);
  if (!p) return 0;
  if (!strncmp(p, "true", 4))
    *out = 1;
  else if (!strncmp(p, "false", 5))
    *out = 0;
  else
    return 0;
  return 1;
}
