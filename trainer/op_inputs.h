/*
 * op_inputs.h — a compute operation's inputs as the trace records them, for both backends of
 * the device API: the text PyTorch's profiler writes with record_shapes
 * ({"Input Dims":[[N,C],[OC,C],[OC]],"Input type":["float","float","float"],
 * "Concrete Inputs":["","",""]}), one writer per kind of operation, from the shapes the
 * operation was called with, so that `stepscope ops` costs the trainer's operations with the
 * same models as a PyTorch trace's (docs/ops.md "The trainer's ops"). Parameters and their
 * gradients are fp32 ("float"), activations of the device's type (op_inputs_act_type).
 *
 * Where the text goes: the CPU backend puts it in the args of each task's HOST_OP record
 * (device_cpu.c); the CUDA backend in a RANGE of domain "cpu_op" on the launching thread
 * around the kernel launch (op_inputs_launch_range), which the analyzer joins to the
 * kernels by the launch's correlation id, as it does a Kineto trace's cpu_op events.
 */
#ifndef STEPSCOPE_TRAINER_OP_INPUTS_H
#define STEPSCOPE_TRAINER_OP_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

/* Room for the longest description the writers below produce. */
#define OP_INPUTS_MAX 512

/* The activations' element type name as PyTorch writes it ("float", "c10::BFloat16"). */
const char *op_inputs_act_type(dev_dtype act);

/* x[N,C], normalized_shape, weight[C], bias[C]: as aten::native_layer_norm */
void op_inputs_layernorm_forward(char *buf, size_t cap, const char *act, int64_t N, int64_t C);
/* dout[N,C], x[N,C], weight[C], mean[N], rstd[N] */
void op_inputs_layernorm_backward(char *buf, size_t cap, const char *act, int64_t N, int64_t C);
/* x[N,C], weight[OC,C], bias[OC] when there is one: as aten::linear */
void op_inputs_matmul_forward(char *buf, size_t cap, const char *act, int64_t N, int64_t C,
                              int64_t OC, int has_bias, int bf16_weight);
/* dout[N,OC], x[N,C], weight[OC,C], output_mask [dinp, dweight, dbias]: which gradients the
 * backward writes, as convolution_backward's */
void op_inputs_matmul_backward(char *buf, size_t cap, const char *act, int64_t N, int64_t C,
                               int64_t OC, int dinp, int dweight, int dbias, int bf16_weight);
/* qkv[B,T,3C], heads (causal) */
void op_inputs_attention_forward(char *buf, size_t cap, const char *act, int64_t B, int64_t T,
                                 int64_t C, int64_t NH);
/* dout[B,T,C], qkv[B,T,3C], heads (causal) */
void op_inputs_attention_backward(char *buf, size_t cap, const char *act, int64_t B, int64_t T,
                                  int64_t C, int64_t NH);
/* q[B,Tq,C], kv[B,Tk,2C], heads, causal; the backward adds dout[B,Tq,C] first */
void op_inputs_attention_block(char *buf, size_t cap, const char *act, int backward, int64_t B,
                               int64_t Tq, int64_t Tk, int64_t C, int64_t NH, int causal);
/* x[R,C] (R the rows routed to this rank's experts), weight[E,OC,C], bias[E,OC] */
void op_inputs_expert_matmul_forward(char *buf, size_t cap, const char *act, int64_t R, int64_t E,
                                     int64_t C, int64_t OC, int has_bias);
/* dout[R,OC], x[R,C], weight[E,OC,C], output_mask [dinp, dweight, dbias] */
void op_inputs_expert_matmul_backward(char *buf, size_t cap, const char *act, int64_t R, int64_t E,
                                      int64_t C, int64_t OC, int dinp, int dweight, int dbias);
/* x[N]: as aten::gelu */
void op_inputs_gelu_forward(char *buf, size_t cap, const char *act, int64_t N);
/* two activations of N elements: gelu_backward's dout and x (as aten::gelu_backward),
 * residual_forward's a and b (as aten::add) */
void op_inputs_two_vectors(char *buf, size_t cap, const char *act, int64_t N);

/* Writes a RANGE of domain "cpu_op" named `name` with `inputs` as its args, on the calling
 * thread, from start_ns to now: around the launch of the kernels that ran the operation
 * (the CUDA backend). Nothing when no trace is running. */
void op_inputs_launch_range(const char *name, const char *inputs, uint64_t start_ns);

#endif /* STEPSCOPE_TRAINER_OP_INPUTS_H */
