/*
 * op_inputs.c — a CPU op's inputs as the Kineto importer keeps them (ssa_ops.h): the compact
 * JSON {"Input Dims":[[64,128],[128,256],[]],"Input type":["float","float","Scalar"],
 * "Concrete Inputs":["","","1"]} read into one ssa_op_input per position, the element
 * sizes of Kineto's type names, and a backward's output_mask from its concrete value.
 *
 * The text is the importer's own (kineto_fast.c / kineto_reader.c write it: no blanks,
 * strings as JSON strings), so the reader here is a small one over that form; anything else
 * (an object, a value of another kind where a list is expected) makes the parse fail, and
 * the op is then listed without a model.
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_ops.h"

typedef struct cursor {
  const char *p;
  int bad;
} cursor;

static int eat(cursor *c, char ch) {
  if (*c->p == ch) {
    c->p++;
    return 1;
  }
  return 0;
}

/* A JSON string's body into dst (cut to cap), escapes kept as their second byte. */
static void read_string(cursor *c, char *dst, size_t cap) {
  size_t n = 0;
  if (!eat(c, '"')) {
    c->bad = 1;
    return;
  }
  while (*c->p && *c->p != '"') {
    char ch = *c->p++;
    if (ch == '\\' && *c->p) ch = *c->p++;
    if (dst && n + 1 < cap) dst[n++] = ch;
  }
  if (dst && cap) dst[n] = 0;
  if (!eat(c, '"')) c->bad = 1;
}

/* Skips any value (arrays nested, strings, numbers, literals). */
static void skip_value(cursor *c, int depth) {
  if (depth > 64) {
    c->bad = 1;
    return;
  }
  if (*c->p == '"') {
    read_string(c, NULL, 0);
  } else if (eat(c, '[')) {
    if (eat(c, ']')) return;
    do
      skip_value(c, depth + 1);
    while (!c->bad && eat(c, ','));
    if (!eat(c, ']')) c->bad = 1;
  } else if (*c->p && strchr("-0123456789tfn", *c->p)) {
    while (*c->p && !strchr(",]}", *c->p))
      c->p++;
  } else {
    c->bad = 1;
  }
}

/* One element of "Input Dims": a list of integers (a tensor), or anything else (a tensor
 * list, nested: ndims -1). */
static void read_dims(cursor *c, ssa_op_input *in) {
  in->ndims = -1;
  if (*c->p != '[') {
    skip_value(c, 0);
    return;
  }
  const char *start = c->p;
  c->p++;
  int n = 0;
  if (eat(c, ']')) {
    in->ndims = 0;
    return;
  }
  for (;;) {
    if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9')) {
      char *end;
      long long v = strtoll(c->p, &end, 10);
      c->p = end;
      if (n < SSA_OP_MAX_DIMS) in->dims[n] = v;
      n++;
    } else { /* a list of tensors' dims: not one tensor */
      c->p = start;
      skip_value(c, 0);
      in->ndims = -1;
      return;
    }
    if (eat(c, ',')) continue;
    if (eat(c, ']')) break;
    c->bad = 1;
    return;
  }
  in->ndims = n <= SSA_OP_MAX_DIMS ? n : -1;
}

enum { L_DIMS, L_TYPE, L_CONCRETE, L_OTHER };

/* A list of the object: each element read by its kind into in[i]. */
static void read_list(cursor *c, int kind, ssa_op_inputs *out) {
  if (!eat(c, '[')) {
    c->bad = 1;
    return;
  }
  if (eat(c, ']')) return;
  int i = 0;
  do {
    ssa_op_input *in = i < SSA_OP_MAX_INPUTS ? &out->in[i] : NULL;
    if (!in || kind == L_OTHER)
      skip_value(c, 0);
    else if (kind == L_DIMS)
      read_dims(c, in);
    else if (*c->p == '"')
      read_string(c, kind == L_TYPE ? in->type : in->concrete,
                  kind == L_TYPE ? sizeof in->type : sizeof in->concrete);
    else
      skip_value(c, 0);
    i++;
  } while (!c->bad && eat(c, ','));
  if (!eat(c, ']')) c->bad = 1;
  if (kind != L_OTHER && i > out->n) out->n = i < SSA_OP_MAX_INPUTS ? i : SSA_OP_MAX_INPUTS;
}

int ssa_op_inputs_parse(const char *json, ssa_op_inputs *out) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < SSA_OP_MAX_INPUTS; i++)
    out->in[i].ndims = -1;
  cursor c = {json ? json : "", 0};
  if (!eat(&c, '{')) return -1;
  if (eat(&c, '}')) return 0;
  do {
    char key[32];
    read_string(&c, key, sizeof key);
    if (c.bad || !eat(&c, ':')) return -1;
    int kind = !strcmp(key, "Input Dims")        ? L_DIMS
               : !strcmp(key, "Input type")      ? L_TYPE
               : !strcmp(key, "Concrete Inputs") ? L_CONCRETE
                                                 : L_OTHER;
    read_list(&c, kind, out);
    if (c.bad) return -1;
  } while (eat(&c, ','));
  return eat(&c, '}') && !*c.p ? 0 : -1;
}

int ssa_op_type_bytes(const char *t) {
  static const struct {
    const char *name;
    int bytes;
  } sizes[] = {
      {"float", 4},
      {"double", 8},
      {"c10::Half", 2},
      {"c10::BFloat16", 2},
      {"c10::Float8_e4m3fn", 1},
      {"c10::Float8_e5m2", 1},
      {"c10::Float8_e4m3fnuz", 1},
      {"c10::Float8_e5m2fnuz", 1},
      {"long int", 8},
      {"long", 8},
      {"int64_t", 8},
      {"int", 4},
      {"short int", 2},
      {"bool", 1},
      {"unsigned char", 1},
      {"signed char", 1},
      {"c10::complex<float>", 8},
      {"c10::complex<double>", 16},
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    if (!strcmp(t, sizes[i].name)) return sizes[i].bytes;
  return 0;
}

int ssa_op_is_tensor(const ssa_op_input *in) {
  /* a Python scalar (bool, int, float argument) has dims [] and its value as concrete text; a
   * 0-d tensor has dims [] and no concrete value */
  return in->ndims > 0 || (in->ndims == 0 && !in->concrete[0] && ssa_op_type_bytes(in->type));
}

uint64_t ssa_op_numel(const ssa_op_input *in) {
  if (!ssa_op_is_tensor(in) || !ssa_op_type_bytes(in->type)) return 0;
  uint64_t n = 1;
  for (int i = 0; i < in->ndims; i++)
    n *= in->dims[i] > 0 ? (uint64_t)in->dims[i] : 0;
  return n;
}

int ssa_op_concrete_mask(const ssa_op_inputs *in, int i, int *m, int n) {
  const char *p = i >= 0 && i < in->n ? in->in[i].concrete : "";
  for (int k = 0; k < n; k++) {
    p += strspn(p, "[, ");
    char *end;
    long digits = strtol(p, &end, 10);
    if (end != p) { /* "[1, 1, 0]" */
      m[k] = digits != 0;
      p = end;
    } else if (!strncmp(p, "True", 4)) {
      m[k] = 1;
      p += 4;
    } else if (!strncmp(p, "False", 5)) {
      m[k] = 0;
      p += 5;
    } else {
      return -1;
    }
  }
  p += strspn(p, " ]");
  return *p ? -1 : 0;
}
