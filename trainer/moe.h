/*
 * moe.h — the mixture-of-experts FFN of a block (--experts E --top-k K), for one pipeline
 * stage of one rank: its parameters, activations, forward and backward.
 *
 * The math for the block's N tokens x (the output of ln2), with E expert MLPs
 * (fc [4C,C] + bias, GELU, fcproj [C,4C] + bias) and a router Wr [E,C]:
 *   p = softmax(x Wr^T)                      [N,E]
 *   top-K experts per token by p (ties: the lower index), gates g = p (K = 1, Switch) or p
 *   renormalized over the K (K > 1, Mixtral)
 *   y_t = sum_k g_tk expert_{e_tk}(x_t)      (an assignment beyond --capacity-factor's
 *                                             capacity is dropped: it adds nothing)
 *   aux = E sum_i f_i P_i                    (f_i: share of the N K assignments routed to i,
 *                                             P_i: mean of p[:,i]; Switch/GShard)
 * The objective adds coef x aux per MoE layer and micro-batch, averaged over the step's
 * micro-batches (the trainer sets aux_scale = coef / (micro-batches x dp), since DP sums
 * gradients: each DP rank's micro-batch is one term of the average).
 *
 * Where things live: the router Wr is a dense parameter of the block (the flat buffer,
 * replicated over TP and EP, reduced over DP like every dense weight). The experts live in
 * their own flat buffer (param/grad below): per MoE block, fcw [El,4C,C], fcb [El,4C],
 * fcprojw [El,C,4C], fcprojb [El,C] for the rank's El = E/ep experts. Under TP the experts
 * are replicated, not sliced: every TP rank runs the whole MoE on the whole micro-batch
 * (--sp is refused), so their gradients are identical over TP; over DP they are all-reduced
 * over the expert-data-parallel group (dp/ep ranks holding the same experts; the trainer).
 * With --ep > 1 the rows go to their experts' owners and back (expert_parallel.h).
 */
#ifndef STEPSCOPE_TRAINER_MOE_H
#define STEPSCOPE_TRAINER_MOE_H

#include <stddef.h>

#include "comm.h"
#include "device.h"
#include "expert_parallel.h"

struct model;

/* One MoE block's activations for one micro-batch slot (stored for backward). */
typedef struct moe_acts {
  dev_act *logits;                /* [N,E] */
  float *probs, *gate;            /* [N,E], [N,K] */
  int *expert, *counts, *offsets; /* [N,K], [E], [E+1] */
  int *row_token, *row_of;        /* [N K], [N K] */
  dev_act *xp;                    /* [N K, C] input rows in plan order */
  dev_act *xe;                    /* [Rmax, C] expert input rows (== xp without EP) */
  dev_act *h, *hg;                /* [Rmax, 4C] fc output, after GELU */
  dev_act *ye;                    /* [Rmax, C] expert output rows (== yp without EP) */
  dev_act *yp;                    /* [N K, C] expert output rows in plan order */
  ep_route route;                 /* --ep > 1 */
} moe_acts;

/* A tensor of the expert buffer (for the optimizer, the norm and --debug-dump-params). */
typedef struct moe_param {
  const char *name; /* "expfcw", "expfcb", "expfcprojw", "expfcprojb" */
  int layer;
  size_t offset, count; /* in the expert buffer */
  size_t global_first;  /* index of its first element in the layer's whole [E,...] tensor */
  int decay;
} moe_param;

typedef struct moe_state {
  int E, K, El, renorm, capacity, nmoe; /* nmoe: MoE blocks on this stage */
  int ep, ep_rank;
  size_t Rmax;          /* expert-side rows at most */
  size_t expert_floats; /* one expert's parameters */
  float aux_scale;
  float *param, *grad; /* the expert buffer */
  size_t nfloats;
  size_t nfloats_padded; /* allocated: a multiple of edp x 16 (ZeRO-1 slices are equal) */
  moe_param *params;
  int nparams;
  moe_acts *acts; /* [nslots x nmoe] */
  /* backward scratch */
  dev_act *dlogits, *dyp, *dye, *dh, *dhg, *dxe, *dxp;
  float *dgate;
  double *aux_acc;     /* device: sum of aux over this step's MoE forwards */
  int *dropped_acc;    /* device: assignments dropped this step */
  int *counts_scratch; /* [E] */
  int *host_counts;    /* [host_counts_mb x nmoe x E] assignments routed to each expert
                        * (before capacity drops; the aux loss's counts) by each
                        * micro-batch of the step (copied to the host in forward; valid after
                        * the step's sync; allocated by the trainer, may be NULL) */
  int host_counts_mb;
  ep_ctx ep_x;      /* --ep > 1 */
  size_t act_bytes; /* activation bytes allocated here */
} moe_state;

/* Sets up the MoE blocks of model m (its layout is built: m->nblocks, block kinds): the
 * expert buffer and the activations. ep_comm: the EP group (NULL with --ep 1). */
int moe_create(struct model *m, int E, int K, double capacity_factor, comm *ep_comm, char *err,
               size_t errlen);
void moe_destroy(struct model *m);
/* Initial expert weights (layout-independent: expert e of layer l is drawn from the keys
 * (seed, l, 4/5) when e == 0, the dense MLP's, and (seed, l, 16+2e / 17+2e) otherwise). */
int moe_init_params(struct model *m, unsigned long long seed);
/* The MoE FFN of stage block b (its MoE index mi) for the micro-batch in `slot`:
 * out [N,C] = MoE(x) (overwritten). router: the flat offset of Wr [E,C] in the dense layout
 * (a GEMM weight: model_gemm_forward). -1 when a stream failed during an expert-parallel
 * dispatch. */
int moe_forward(struct model *m, int slot, int mi, size_t router, const dev_act *x, dev_act *out);
/* Backward: dx [N,C] += the input gradient; router_grad and the expert gradients
 * accumulate. */
void moe_backward(struct model *m, int slot, int mi, size_t router, float *router_grad,
                  const dev_act *x, const dev_act *dout, dev_act *dx);

#endif /* STEPSCOPE_TRAINER_MOE_H */
