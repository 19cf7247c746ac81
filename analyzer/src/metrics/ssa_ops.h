/*
 * ssa_ops.h — down to the operator (issue 33 §1): what each PyTorch op of a Kineto trace
 * computed and moved, and how close it came to the device's ceilings.
 *
 *   op_inputs.c     a CPU op's input args (the compact JSON the Kineto importer keeps as the
 *                   op range's args when asked: ssa_import_options.op_inputs) as shapes,
 *                   element types and concrete values
 *   op_models.c     FLOPs and bytes moved of one op from its name and inputs (docs/ops.md
 *                   gives every formula and the reference it follows)
 *   trainer_op_models.c  the same for the stepscope trainer's operations (its CPU backend
 *                   writes their inputs in the same form)
 *   device_peaks.c  the ceilings of known devices per dtype (datasheet numbers) and the
 *                   user's measured ones (`--peak bf16=780T,bw=4.3T`)
 *   range_index.c   a rank's ranges of one domain as stacks per thread
 *   op_perf.c       the run's ops: each device kernel attributed to the deepest modelled CPU
 *                   op around its launch (or, on a CPU-only trace, each such op's own time),
 *                   grouped by op name and input shapes
 *   module_perf.c   the same ops' time and FLOPs by the nn.Module around them (with_modules)
 *   memory_timeline.c  memory over time: peaks per device and step, what was live at the peak
 */
#ifndef SSA_OPS_H
#define SSA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ssa_metrics.h"

/* ---- inputs (op_inputs.c) ---- */

#define SSA_OP_MAX_INPUTS 24
#define SSA_OP_MAX_DIMS   8

typedef struct ssa_op_input {
  int ndims;                     /* -1: not one tensor (a list, or no dims given) */
  int64_t dims[SSA_OP_MAX_DIMS]; /* the first SSA_OP_MAX_DIMS */
  char type[32];                 /* "float", "c10::BFloat16", "Scalar", "" ... */
  char concrete[48];             /* its concrete value as text ("1", "[1, 1]", "True"), "" */
} ssa_op_input;

typedef struct ssa_op_inputs {
  int n; /* inputs given (the longest of the lists) */
  ssa_op_input in[SSA_OP_MAX_INPUTS];
} ssa_op_inputs;

/* Parses the compact JSON of a CPU op's inputs ({"Input Dims":[...],"Input type":[...],
 * "Concrete Inputs":[...]}); 0, or -1 when it is not that form. */
int ssa_op_inputs_parse(const char *json, ssa_op_inputs *out);

/* The bytes of one element of a Kineto type name ("float" 4, "c10::BFloat16" 2,
 * "c10::Float8_e4m3fn" 1, "long int" 8 ...); 0 when unknown (not a tensor type). */
int ssa_op_type_bytes(const char *type);

/* Whether an input is a tensor with shapes (a Python scalar argument is not: it has a concrete
 * value). */
int ssa_op_is_tensor(const ssa_op_input *in);

/* The number of elements of a tensor input (1 for a 0-d tensor); 0 when it is none. */
uint64_t ssa_op_numel(const ssa_op_input *in);

/* A backward's output_mask, input i's concrete boolean list of `n` entries ("[True, True,
 * False]", or "[1, 1, 0]"), into m[0..n): 0, or -1 when it is not recorded or not that long. */
int ssa_op_concrete_mask(const ssa_op_inputs *in, int i, int *m, int n);

/* ---- models (op_models.c) ---- */

typedef enum ssa_op_family {
  SSA_OPF_NONE = 0, /* no model */
  SSA_OPF_GEMM,
  SSA_OPF_CONV,
  SSA_OPF_ATTENTION,
  SSA_OPF_NORM,
  SSA_OPF_SOFTMAX,
  SSA_OPF_ELEMENTWISE,
  SSA_OPF_REDUCTION,
  SSA_OPF_EMBEDDING,
  SSA_OPF_N
} ssa_op_family;

extern const char *const ssa_op_family_names[SSA_OPF_N];

/* The compute dtype an op's peak is taken for. */
typedef enum ssa_peak_dtype {
  SSA_PEAK_FP32 = 0,
  SSA_PEAK_TF32,
  SSA_PEAK_BF16,
  SSA_PEAK_FP16,
  SSA_PEAK_FP8,
  SSA_PEAK_N
} ssa_peak_dtype;

extern const char *const ssa_peak_dtype_names[SSA_PEAK_N];

typedef struct ssa_op_cost {
  ssa_op_family family;
  ssa_peak_dtype dtype;
  double flops; /* floating-point operations (a multiply-add is 2) */
  double bytes; /* bytes read and written, each tensor once */
  /* attention ops only (family SSA_OPF_ATTENTION), for the planner's measured attention rate
   * (plan_ceilings.c), which counts work as MFU does: */
  double attention_whole_flops; /* its forward's QK^T and PV over every (query, key) pair,
                                   2 B H Sq Sk (D + Dv), whatever the mask skips */
  int attention_causal;         /* 1: the kernel computed only the causal pairs */
  int attention_backward;       /* 1: a backward */
} ssa_op_cost;

/* Whether an op name has a model (its inputs still decide whether it can be costed). */
int ssa_op_has_model(const char *name);

/* Whether a modelled op is a composite: one that dispatches to other modelled ops
 * (aten::linear, aten::matmul, aten::conv2d, aten::convolution, aten::scaled_dot_product_attention,
 * aten::layer_norm, aten::softmax...), whose work is counted in them (op_perf.c). */
int ssa_op_is_composite(const char *name);

/* The cost of op `name` (with or without "aten::") with inputs `in`: 1 with *out filled, 0
 * when there is no model or the inputs do not say enough (then out->family says which model
 * was tried, SSA_OPF_NONE for none). */
int ssa_op_cost_of(const char *name, const ssa_op_inputs *in, ssa_op_cost *out);

/* The output of a GEMM op (mm, bmm, addmm, baddbmm, addbmm, matmul, linear, _scaled_mm; with or
 * without "aten::"; the stepscope trainer's matmul_forward): *batch matrices of *rows x *cols. 1,
 * or 0 when `name` is not one of them or its inputs do not say (the planner's measured GEMM ceiling
 * takes their tile quantization out: plan_ceilings.c). */
int ssa_gemm_output(const char *name, const ssa_op_inputs *in, double *batch, double *rows,
                    double *cols);

/* The cost of one of the stepscope trainer's operations (trainer_op_models.c): 1 with *out
 * filled, 0 when its inputs (NULL: none given) do not say enough, -1 when `name` is not one. */
int ssa_trainer_op_cost(const char *name, const ssa_op_inputs *in, ssa_op_cost *out);

/* ---- device ceilings (device_peaks.c) ---- */

typedef struct ssa_ceilings {
  char device[64];          /* the table row's name, or "given" */
  double flops[SSA_PEAK_N]; /* dense FLOP/s per dtype, 0 unknown */
  double bandwidth;         /* memory bytes/s, 0 unknown */
  int given;                /* some value came from the user */
} ssa_ceilings;

/* The ceilings of the device named `device_name` (a trace header's: "NVIDIA H100 80GB
 * HBM3"); 1 found, 0 not in the table (all zero). */
int ssa_ceilings_of_device(const char *device_name, ssa_ceilings *c);

/* Applies a user's ceilings ("bf16=780T,fp32=60T,bw=4.3T": T/G/P suffixes, FLOP/s and
 * bytes/s; "device=h100" takes a table row first) over *c. 0, or -1 with why in msg. */
int ssa_ceilings_parse(const char *spec, ssa_ceilings *c, char *msg, size_t cap);

/* The names of the table's rows, "h100|h200|...", for help texts. */
const char *ssa_ceilings_devices(void);

/* ---- ranges as stacks (range_index.c) ---- */

/* A rank's ranges of one domain, sorted by thread (lane), start, longer first: idx[i] the
 * range, parent[i] the position of the one enclosing it (SSA_NONE at the top). */
typedef struct ssa_range_index {
  uint32_t *idx, *parent;
  size_t n;
} ssa_range_index;

int ssa_range_index_build(const ssa_rank *r, const char *domain, ssa_range_index *c); /* 0/-1 */
/* The innermost range (a position) on `lane` containing time t, or SSA_NONE. */
uint32_t ssa_range_index_around(const ssa_rank *r, const ssa_range_index *c, uint16_t lane,
                                int64_t t);
void ssa_range_index_free(ssa_range_index *c);

/* ---- the run's op table (op_perf.c) ---- */

typedef struct ssa_op_row {
  uint32_t rank_idx;    /* the rank whose strings hold name and args */
  const char *name;     /* the op's name */
  const char *inputs;   /* its inputs' JSON ("" none) */
  char shape[160];      /* the shapes in words: "[64,128] x [128,256] bf16" */
  ssa_op_family family; /* SSA_OPF_NONE: no model, or inputs not enough */
  ssa_peak_dtype dtype;
  uint64_t count;      /* op instances */
  uint64_t kernels;    /* device kernels attributed (0 on a CPU-only trace) */
  int64_t time_ns;     /* device time of its kernels, or its own time on the host */
  double flops, bytes; /* over every instance */
} ssa_op_row;

typedef struct ssa_op_table {
  ssa_op_row *rows; /* by time, descending */
  size_t nrows;
  int host_time;               /* times are CPU op times (a CPU-only trace) */
  int64_t time_total;          /* over every row */
  int64_t time_modelled;       /* of rows with a model */
  int64_t unattributed_ns;     /* kernel time with no CPU op around its launch */
  uint64_t ops_without_inputs; /* op instances whose trace gave no shapes */
  double flops_total;
  int64_t span_ns; /* the analysed steps' time (sum over steps, slowest rank), or the
                      device time's span when there are no steps */
  int ranks;       /* ranks counted */
  char device_name[128];
} ssa_op_table;

/* The op instances of rank an->ranks[ri] that get time, each handed to fn (which returns 0, or
 * non-zero to stop): `op` its CPU op range, its time and kernels (op_perf.c's comment says
 * which ops count); t's counts (host_time, unattributed_ns, ops_without_inputs) are added to.
 * 0, or -1 (out of memory, or fn stopped). */
typedef int (*ssa_op_instance_fn)(void *ctx, size_t ri, const ssa_range *op, int64_t time_ns,
                                  uint32_t kernels);
int ssa_op_rank_instances(const ssa_analysis *an, size_t ri, ssa_op_instance_fn fn, void *ctx,
                          ssa_op_table *t);

/* The op table of an analysed run (loaded with op inputs): only the analysed steps' ops when
 * there are steps, only opt->rank's when it is set (ssa_op_table_counts). It adds up the
 * ranks' groups (ssa_rank_op_groups), making those the analysis did not (through
 * ssa_with_rank_events). 0, or STEPSCOPE_E_NOMEM. */
int ssa_op_table_build(ssa_analysis *an, ssa_op_table *t);
/* Whether the op table counts rank an->ranks[ri] (opt.rank). */
int ssa_op_table_counts(const ssa_analysis *an, size_t ri);
/* Rank rr's op instances grouped by (op name, inputs) into rr->ops, from its events (its
 * totals window measured): the per-rank part of the op table. 0, or STEPSCOPE_E_NOMEM. */
int ssa_rank_op_groups(const ssa_analysis *an, ssa_rank_result *rr);
void ssa_op_table_free(ssa_op_table *t);

/* Achieved rates and roofline of a row against the ceilings: FLOP/s, bytes/s, arithmetic
 * intensity (FLOP/byte), % of the roofline's bound at that intensity, and the bound
 * ("compute", "memory", or "" when unknown). */
typedef struct ssa_op_rates {
  double flops_per_s, bytes_per_s, intensity, pct_of_peak;
  const char *bound;
} ssa_op_rates;
void ssa_op_rates_of(const ssa_op_row *row, const ssa_ceilings *c, ssa_op_rates *out);

/* MFU from op FLOPs: the table's FLOPs / (the steps' time x ranks x the peak of the dtype
 * that carries most of the FLOPs, put in *dtype). NaN without steps, FLOPs or that peak. */
double ssa_op_table_mfu(const ssa_op_table *t, const ssa_ceilings *c, ssa_peak_dtype *dtype);

/* a->op_mfu from the op table, for `stepscope analyze` (ssa_analyze calls it when the run's
 * metadata has no FLOPs). 0 or STEPSCOPE_E_NOMEM. */
int ssa_op_flops_mfu_of(ssa_analysis *a);

/* ---- modules (module_perf.c) ---- */

typedef struct ssa_module_row {
  const char *path; /* "Attention_0/Linear_1" (in the table's paths) */
  int depth;        /* the '/' in path */
  uint64_t calls;   /* module events in the steps' window */
  int64_t time_ns;  /* its ops' time, its children's included */
  int64_t self_ns;  /* its own ops' time (no child module around them) */
  double flops, self_flops;
} ssa_module_row;

typedef struct ssa_module_table {
  ssa_module_row *rows; /* by path: a module before its children */
  size_t nrows;
  ssa_strtab paths;
  int host_time;        /* times are CPU op times (a CPU-only trace) */
  int64_t time_total;   /* the op table's: every row's self time + no_module_ns */
  int64_t no_module_ns; /* ops outside every module (backward, optimizer, loss...) */
  double flops_total, no_module_flops;
  uint64_t modules_seen; /* module events in the trace (0: profiled without with_modules) */
} ssa_module_table;

/* The module table of an analysed run loaded with op inputs and modules (op_modules). 0 or
 * STEPSCOPE_E_NOMEM. */
int ssa_module_table_build(const ssa_analysis *an, ssa_module_table *mt);
void ssa_module_table_free(ssa_module_table *mt);

/* ---- memory over time (memory_timeline.c) ---- */

#define SSA_MEM_TOP 10

typedef struct ssa_mem_live {
  int64_t bytes, time; /* the allocation, when (rank clock) */
  const char *op;      /* the CPU op that made it, "" none */
} ssa_mem_live;

typedef struct ssa_mem_device {
  int rank;
  const ssa_rank *rank_ptr;
  int device_type, device_id; /* Kineto's: 0 CPU (id -1), 1 CUDA ... */
  uint64_t events;
  int64_t peak_allocated, peak_time, peak_reserved;
  int64_t *step_peak, *step_number; /* per analysed step of the rank */
  size_t nsteps;
  uint64_t live_count; /* allocations live at the peak */
  int64_t live_bytes;
  ssa_mem_live top[SSA_MEM_TOP]; /* the largest of them */
  size_t ntop;
  uint32_t *series; /* its `events` events in time order (indices of rank_ptr->allocs) */
} ssa_mem_device;

typedef struct ssa_mem_table {
  ssa_mem_device *devices; /* by rank, device */
  size_t n;
} ssa_mem_table;

/* The memory timeline of an analysed run loaded with its memory events (op_memory). 0 or
 * STEPSCOPE_E_NOMEM. */
int ssa_mem_table_build(const ssa_analysis *an, ssa_mem_table *mt);
void ssa_mem_table_free(ssa_mem_table *mt);

#endif
