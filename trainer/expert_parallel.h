/*
 * expert_parallel.h — expert parallelism: moving a mixture-of-experts layer's token rows to
 * the ranks that hold their experts and back (the dispatch and combine all-to-alls).
 *
 * What it is for: with --ep N the E experts of every MoE layer are sharded over an EP group
 * of N data-parallel ranks (rank k of the group holds experts [k E/N, (k+1) E/N)). Each rank
 * routes its own tokens (moe.c), then:
 *   dispatch: its expert-grouped rows (the dispatch plan's order: global expert, then token)
 *             go to the owners of their experts; the owner regroups what it received from
 *             every source into local-expert-major order for the grouped GEMMs;
 *   combine:  the experts' output rows go back the same way, in the source's plan order.
 * Backward uses the same two moves for the gradients (dispatch for the gradient of the
 * experts' outputs, combine for the gradient of their inputs), with the routes recorded in
 * forward.
 *
 * How it works: the row counts depend on the routing, which lives on the device. A route is
 * decided once per (layer, micro-batch) in forward: an all-to-all of the per-expert counts
 * (each rank sends owner k the counts of k's experts; 4-byte integers moved as COMM_FLOAT32),
 * then one host synchronisation of the compute stream to read them (as Megatron's
 * all-to-all token dispatcher does with its splits), which gives the uneven splits of the
 * token all-to-all (comm_alltoallv) and the regrouping copies. Everything runs on the
 * compute stream (dispatch and combine are on the critical path, like TP's collectives).
 * Element counts of the all-to-alls are rows x C of the activation type.
 */
#ifndef STEPSCOPE_TRAINER_EXPERT_PARALLEL_H
#define STEPSCOPE_TRAINER_EXPERT_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "device.h"

/* One (layer, micro-batch slot)'s route, decided in forward and reused in backward. Host
 * arrays, except off_dev. */
typedef struct ep_route {
  uint64_t *send_el, *recv_el; /* [ep] elements (rows x C) to / from each group rank */
  int *my_counts;              /* [E] this rank's rows per global expert */
  int *recv_counts;            /* [ep x El] rows from source k for local expert j ([k][j]) */
  int *off;                    /* [El+1] local-expert offsets of the received rows */
  int *off_dev;                /* the same on the device (read by the grouped GEMMs) */
  int rows;                    /* rows received (off[El]) */
} ep_route;

typedef struct ep_ctx {
  comm *c;      /* the EP group (group rank = ep rank) */
  int ep, rank; /* group size and this rank's place */
  int E, El, C; /* experts, experts per rank, row width */
  dev_dtype act;
  size_t act_es;
  const dev_ops *o;
  dev_device *dev;
  dev_stream *s;        /* the compute stream */
  int *recv_counts_dev; /* [ep x El] device */
  uint64_t *count_el;   /* [ep] El each: the counts all-to-all's splits */
  dev_act *stage;       /* [rows_max, C] source-major staging */
  size_t rows_max;      /* received rows at most: ep x N x min(K, El) */
  /* per-step statistics (host): rows received per local expert, summed over the step */
  long long tokens_in; /* rows this rank's experts processed this step */
} ep_ctx;

/* Sets up the context for an EP group of size comm_size(c) holding E experts (E/ep each),
 * rows of C activations, at most N tokens x K per micro-batch per rank. 0 or -1 with err. */
int ep_create(ep_ctx *x, comm *c, dev_device *dev, dev_stream *s, int E, int C, int N, int K,
              char *err, size_t errlen);
void ep_destroy(ep_ctx *x);
int ep_route_init(ep_ctx *x, ep_route *r);
void ep_route_free(ep_ctx *x, ep_route *r);

/* Forward dispatch: exchanges the counts (counts_dev [E], the plan's rows per expert, read on
 * the device), waits for them on the host, fills the route, then sends xp's rows [R, C] (the
 * plan's order) to their experts' owners and writes what this rank's experts receive into
 * xe [route->rows, C], grouped by local expert. -1 when the stream failed (its error says
 * why). */
int ep_dispatch_forward(ep_ctx *x, ep_route *r, dev_act *xe, const dev_act *xp,
                        const int *counts_dev);
/* Rows in the plan's order of this rank -> its experts' owners, expert-grouped (route
 * known): the forward's token move, and backward's move of the output gradient. */
void ep_send_to_experts(ep_ctx *x, const ep_route *r, dev_act *xe, const dev_act *xp);
/* Expert-grouped rows -> back to their sources in each source's plan order: forward's
 * combine, and backward's move of the input gradient. */
void ep_return_from_experts(ep_ctx *x, const ep_route *r, dev_act *yp, const dev_act *ye);

#endif /* STEPSCOPE_TRAINER_EXPERT_PARALLEL_H */
