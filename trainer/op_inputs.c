/*
 * op_inputs.c — the writers of op_inputs.h: a compute operation's inputs in the form of
 * PyTorch's record_shapes, built one input at a time (its dims, its type, its concrete value
 * for a scalar), and the RANGE that carries them around a kernel launch.
 *
 * Why a file of its own: both backends describe the same operations the same way (the CPU
 * backend in its HOST_OP records, the CUDA backend around its launches), so the text is
 * written once, from the shapes, and the two cannot disagree.
 */
#include "op_inputs.h"

#include <stdio.h>

#include "stepscope.h"

typedef struct inputs_text {
  char dims[320], types[256], concrete[160];
  size_t nd, nt, nc;
  int n;
} inputs_text;

const char *op_inputs_act_type(dev_dtype act) {
  return act == DEV_BF16 ? "c10::BFloat16" : "float";
}

/* Appends text to buf (cut at cap). */
static void append(char *buf, size_t cap, size_t *len, const char *text) {
  int w = snprintf(buf + *len, cap - *len, "%s", text);
  if (w > 0) *len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
}

static void next_input(inputs_text *x, const char *type, const char *concrete) {
  const char *sep = x->n++ ? "," : "";
  char q[96];
  snprintf(q, sizeof q, "%s\"%s\"", sep, type);
  append(x->types, sizeof x->types, &x->nt, q);
  snprintf(q, sizeof q, "%s\"%s\"", sep, concrete);
  append(x->concrete, sizeof x->concrete, &x->nc, q);
  append(x->dims, sizeof x->dims, &x->nd, sep);
}

/* A tensor of ndims (<= 4) dims. */
static void in_tensor(inputs_text *x, const char *type, int ndims, int64_t d0, int64_t d1,
                      int64_t d2, int64_t d3) {
  const int64_t d[4] = {d0, d1, d2, d3};
  next_input(x, type, "");
  append(x->dims, sizeof x->dims, &x->nd, "[");
  for (int k = 0; k < ndims; k++) {
    char v[32];
    snprintf(v, sizeof v, "%s%lld", k ? "," : "", (long long)d[k]);
    append(x->dims, sizeof x->dims, &x->nd, v);
  }
  append(x->dims, sizeof x->dims, &x->nd, "]");
}

/* A scalar argument (dims []) with its value as text. */
static void in_scalar(inputs_text *x, const char *type, const char *value) {
  next_input(x, type, value);
  append(x->dims, sizeof x->dims, &x->nd, "[]");
}

static void in_int(inputs_text *x, int64_t v) {
  char s[32];
  snprintf(s, sizeof s, "%lld", (long long)v);
  in_scalar(x, "Scalar", s);
}

/* Which gradients a backward writes, as convolution_backward's output_mask. */
static void in_mask(inputs_text *x, int a, int b, int c) {
  char s[48];
  snprintf(s, sizeof s, "[%s, %s, %s]", a ? "True" : "False", b ? "True" : "False",
           c ? "True" : "False");
  in_scalar(x, "ScalarList", s);
}

static void inputs_write(const inputs_text *x, char *buf, size_t cap) {
  snprintf(buf, cap, "{\"Input Dims\":[%s],\"Input type\":[%s],\"Concrete Inputs\":[%s]}", x->dims,
           x->types, x->concrete);
}

void op_inputs_layernorm_forward(char *buf, size_t cap, const char *act, int64_t N, int64_t C) {
  inputs_text x = {0};
  char shape[32];
  snprintf(shape, sizeof shape, "[%lld]", (long long)C);
  in_tensor(&x, act, 2, N, C, 0, 0);
  in_scalar(&x, "ScalarList", shape);
  in_tensor(&x, "float", 1, C, 0, 0, 0);
  in_tensor(&x, "float", 1, C, 0, 0, 0);
  inputs_write(&x, buf, cap);
}

void op_inputs_layernorm_backward(char *buf, size_t cap, const char *act, int64_t N, int64_t C) {
  inputs_text x = {0};
  in_tensor(&x, act, 2, N, C, 0, 0);
  in_tensor(&x, act, 2, N, C, 0, 0);
  in_tensor(&x, "float", 1, C, 0, 0, 0);
  in_tensor(&x, "float", 1, N, 0, 0, 0);
  in_tensor(&x, "float", 1, N, 0, 0, 0);
  inputs_write(&x, buf, cap);
}

void op_inputs_matmul_forward(char *buf, size_t cap, const char *act, int64_t N, int64_t C,
                              int64_t OC, int has_bias, int bf16_weight) {
  inputs_text x = {0};
  in_tensor(&x, act, 2, N, C, 0, 0);
  in_tensor(&x, bf16_weight ? op_inputs_act_type(DEV_BF16) : "float", 2, OC, C, 0, 0);
  if (has_bias) in_tensor(&x, "float", 1, OC, 0, 0, 0);
  inputs_write(&x, buf, cap);
}

void op_inputs_matmul_backward(char *buf, size_t cap, const char *act, int64_t N, int64_t C,
                               int64_t OC, int dinp, int dweight, int dbias, int bf16_weight) {
  inputs_text x = {0};
  in_tensor(&x, act, 2, N, OC, 0, 0);
  in_tensor(&x, act, 2, N, C, 0, 0);
  in_tensor(&x, bf16_weight ? op_inputs_act_type(DEV_BF16) : "float", 2, OC, C, 0, 0);
  in_mask(&x, dinp, dweight, dbias);
  inputs_write(&x, buf, cap);
}

void op_inputs_attention_forward(char *buf, size_t cap, const char *act, int64_t B, int64_t T,
                                 int64_t C, int64_t NH) {
  inputs_text x = {0};
  in_tensor(&x, act, 3, B, T, 3 * C, 0);
  in_int(&x, NH);
  inputs_write(&x, buf, cap);
}

void op_inputs_attention_backward(char *buf, size_t cap, const char *act, int64_t B, int64_t T,
                                  int64_t C, int64_t NH) {
  inputs_text x = {0};
  in_tensor(&x, act, 3, B, T, C, 0);
  in_tensor(&x, act, 3, B, T, 3 * C, 0);
  in_int(&x, NH);
  inputs_write(&x, buf, cap);
}

void op_inputs_attention_block(char *buf, size_t cap, const char *act, int backward, int64_t B,
                               int64_t Tq, int64_t Tk, int64_t C, int64_t NH, int causal) {
  inputs_text x = {0};
  if (backward) in_tensor(&x, act, 3, B, Tq, C, 0);
  in_tensor(&x, act, 3, B, Tq, C, 0);
  in_tensor(&x, act, 3, B, Tk, 2 * C, 0);
  in_int(&x, NH);
  in_scalar(&x, "Scalar", causal ? "True" : "False");
  inputs_write(&x, buf, cap);
}

void op_inputs_expert_matmul_forward(char *buf, size_t cap, const char *act, int64_t R, int64_t E,
                                     int64_t C, int64_t OC, int has_bias) {
  inputs_text x = {0};
  in_tensor(&x, act, 2, R, C, 0, 0);
  in_tensor(&x, "float", 3, E, OC, C, 0);
  if (has_bias) in_tensor(&x, "float", 2, E, OC, 0, 0);
  inputs_write(&x, buf, cap);
}

void op_inputs_expert_matmul_backward(char *buf, size_t cap, const char *act, int64_t R, int64_t E,
                                      int64_t C, int64_t OC, int dinp, int dweight, int dbias) {
  inputs_text x = {0};
  in_tensor(&x, act, 2, R, OC, 0, 0);
  in_tensor(&x, act, 2, R, C, 0, 0);
  in_tensor(&x, "float", 3, E, OC, C, 0);
  in_mask(&x, dinp, dweight, dbias);
  inputs_write(&x, buf, cap);
}

void op_inputs_gelu_forward(char *buf, size_t cap, const char *act, int64_t N) {
  inputs_text x = {0};
  in_tensor(&x, act, 1, N, 0, 0, 0);
  inputs_write(&x, buf, cap);
}

void op_inputs_two_vectors(char *buf, size_t cap, const char *act, int64_t N) {
  inputs_text x = {0};
  in_tensor(&x, act, 1, N, 0, 0, 0);
  in_tensor(&x, act, 1, N, 0, 0, 0);
  inputs_write(&x, buf, cap);
}

void op_inputs_launch_range(const char *name, const char *inputs, uint64_t start_ns) {
  if (!stepscope_active()) return;
  stepscope_record r = {.kind = STEPSCOPE_REC_RANGE};
  r.u.range.start_ns = start_ns;
  r.u.range.end_ns = stepscope_now_ns();
  r.u.range.thread = stepscope_thread_id();
  r.u.range.name = stepscope_intern_current(name);
  r.u.range.domain = stepscope_intern_current("cpu_op");
  r.u.range.args = stepscope_intern_current(inputs);
  stepscope_emit(&r);
}
