/*
 * moe.c — the mixture-of-experts FFN of a block: set-up, initial weights, forward and
 * backward, written over the device API's moe_* operations (device.h; the math is
 * kernels/cpu/moe_*.c) and, with --ep > 1, expert_parallel.c's dispatch and combine.
 * See moe.h for the math and where the parameters live.
 *
 * Forward of one MoE block for one micro-batch (everything enqueued on the compute stream):
 *   logits = x Wr^T; router (top-K, gates); aux += E sum f_i P_i; dispatch plan (dropless or
 *   capacity); xp = x permuted into plan order; [EP: rows to their experts' owners];
 *   h = fc(xp) grouped by expert; hg = gelu(h); ye = fcproj(hg); [EP: rows back];
 *   out = sum_k gate * ye (un-permute).
 * Backward runs the same chain in reverse; the router's gradient gets the gates' gradient
 * plus aux_scale x the load-balancing loss's. Without a capacity, the N x K rows are all
 * kept, so the row count needs no host sync; with EP the route's host sync gives it.
 */
#include "moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* Offsets (floats) of the four tensors inside one MoE block's slice of the expert buffer. */
static size_t ofc_w(const moe_state *q, int C) {
  (void)q;
  (void)C;
  return 0;
}
static size_t ofc_b(const moe_state *q, int C) {
  return (size_t)q->El * 4 * C * C;
}
static size_t oproj_w(const moe_state *q, int C) {
  return ofc_b(q, C) + (size_t)q->El * 4 * C;
}
static size_t oproj_b(const moe_state *q, int C) {
  return oproj_w(q, C) + (size_t)q->El * C * 4 * C;
}

static void *dalloc(struct model *m, size_t bytes, int *fail) {
  if (bytes == 0) return NULL;
  void *p = m->ops->alloc(m->dev, bytes);
  if (!p)
    *fail = 1;
  else
    m->moe.act_bytes += bytes;
  return p;
}

int moe_create(struct model *m, int E, int K, double capacity_factor, comm *ep_comm, char *err,
               size_t errlen) {
  moe_state *q = &m->moe;
  int N = m->N, C = m->C;
  q->E = E;
  q->K = K;
  q->renorm = K > 1;
  q->capacity = capacity_factor > 0 ? (int)ceil(capacity_factor * N * K / E) : -1;
  q->ep = ep_comm ? comm_size(ep_comm) : 1;
  q->ep_rank = ep_comm ? comm_rank(ep_comm) : 0;
  q->El = E / q->ep;
  q->nmoe = 0;
  for (int b = 0; b < m->nblocks; b++)
    if (m->block_moe[b] >= 0) q->nmoe++;
  if (q->nmoe == 0) return 0;
  const dev_ops *o = m->ops;
  if (!o->moe_router_forward || !o->moe_router_backward || !o->moe_aux_loss_accumulate ||
      !o->moe_dispatch_plan || !o->moe_permute_forward || !o->moe_permute_backward ||
      !o->moe_unpermute_forward || !o->moe_unpermute_backward || !o->moe_expert_matmul_forward ||
      !o->moe_expert_matmul_backward) {
    snprintf(err, errlen, "--experts: the %s backend has no mixture-of-experts operations yet",
             o->backend_name);
    return -1;
  }
  if (q->ep > 1 && ep_create(&q->ep_x, ep_comm, m->dev, m->compute, E, C, N, K, err, errlen))
    return -1;
  q->Rmax = q->ep > 1 ? q->ep_x.rows_max : (size_t)N * K;
  q->expert_floats = (size_t)4 * C * C + 4 * (size_t)C + (size_t)C * 4 * C + (size_t)C;
  q->nfloats = (size_t)q->nmoe * q->El * q->expert_floats;
  size_t unit = (size_t)(m->grid.dp / (m->grid.ep > 0 ? m->grid.ep : 1)) * 16; /* edp x 16 */
  q->nfloats_padded = (q->nfloats + unit - 1) / unit * unit;
  q->param = o->alloc(m->dev, q->nfloats_padded * sizeof(float));
  q->grad = o->alloc(m->dev, q->nfloats_padded * sizeof(float));
  q->params = calloc((size_t)q->nmoe * 4, sizeof(moe_param));
  q->acts = calloc((size_t)m->nslots * q->nmoe, sizeof(moe_acts));
  if (!q->param || !q->grad || !q->params || !q->acts) {
    snprintf(err, errlen, "out of memory for %zu expert parameters", q->nfloats);
    return -1;
  }
  for (int b = 0; b < m->nblocks; b++) {
    int mi = m->block_moe[b];
    if (mi < 0) continue;
    int layer = m->first_layer + b;
    size_t base = (size_t)mi * q->El * q->expert_floats;
    size_t el = (size_t)q->El, g0 = (size_t)q->ep_rank * el;
    moe_param *p = &q->params[q->nparams];
    p[0] = (moe_param){"expfcw", layer, base + ofc_w(q, C), el * 4 * C * C, g0 * 4 * C * C, 1};
    p[1] = (moe_param){"expfcb", layer, base + ofc_b(q, C), el * 4 * C, g0 * 4 * C, 0};
    p[2] =
        (moe_param){"expfcprojw", layer, base + oproj_w(q, C), el * C * 4 * C, g0 * C * 4 * C, 1};
    p[3] = (moe_param){"expfcprojb", layer, base + oproj_b(q, C), el * C, g0 * C, 0};
    q->nparams += 4;
  }
  int fail = 0;
  size_t es = m->act_es, NK = (size_t)N * K;
  for (int k = 0; k < m->nslots * q->nmoe; k++) {
    moe_acts *a = &q->acts[k];
    a->logits = dalloc(m, (size_t)N * E * es, &fail);
    a->probs = dalloc(m, (size_t)N * E * 4, &fail);
    a->gate = dalloc(m, NK * 4, &fail);
    a->expert = dalloc(m, NK * sizeof(int), &fail);
    a->counts = dalloc(m, (size_t)E * sizeof(int), &fail);
    a->offsets = dalloc(m, ((size_t)E + 1) * sizeof(int), &fail);
    a->row_token = dalloc(m, NK * sizeof(int), &fail);
    a->row_of = dalloc(m, NK * sizeof(int), &fail);
    a->xp = dalloc(m, NK * C * es, &fail);
    a->yp = dalloc(m, NK * C * es, &fail);
    a->xe = q->ep > 1 ? dalloc(m, q->Rmax * C * es, &fail) : a->xp;
    a->ye = q->ep > 1 ? dalloc(m, q->Rmax * C * es, &fail) : a->yp;
    a->h = dalloc(m, q->Rmax * 4 * C * es, &fail);
    a->hg = dalloc(m, q->Rmax * 4 * C * es, &fail);
    if (q->ep > 1 && ep_route_init(&q->ep_x, &a->route) != 0) fail = 1;
  }
  q->dlogits = dalloc(m, (size_t)N * E * es, &fail);
  q->dgate = dalloc(m, NK * 4, &fail);
  q->dyp = dalloc(m, NK * C * es, &fail);
  q->dxp = dalloc(m, NK * C * es, &fail);
  q->dye = q->ep > 1 ? dalloc(m, q->Rmax * C * es, &fail) : q->dyp;
  q->dxe = q->ep > 1 ? dalloc(m, q->Rmax * C * es, &fail) : q->dxp;
  q->dh = dalloc(m, q->Rmax * 4 * C * es, &fail);
  q->dhg = dalloc(m, q->Rmax * 4 * C * es, &fail);
  q->aux_acc = dalloc(m, sizeof(double), &fail);
  q->dropped_acc = dalloc(m, sizeof(int), &fail);
  q->counts_scratch = dalloc(m, (size_t)E * sizeof(int), &fail);
  if (fail) {
    snprintf(err, errlen, "out of device memory for the experts' activations");
    return -1;
  }
  return 0;
}

void moe_destroy(struct model *m) {
  moe_state *q = &m->moe;
  const dev_ops *o = m->ops;
  if (!o) return;
  dev_device *d = m->dev;
  for (int k = 0; q->acts && k < m->nslots * q->nmoe; k++) {
    moe_acts *a = &q->acts[k];
    void *bufs[] = {a->logits,    a->probs,  a->gate, a->expert, a->counts, a->offsets,
                    a->row_token, a->row_of, a->xp,   a->yp,     a->h,      a->hg};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
      o->free(d, bufs[i]);
    if (q->ep > 1) {
      o->free(d, a->xe);
      o->free(d, a->ye);
      ep_route_free(&q->ep_x, &a->route);
    }
  }
  free(q->acts);
  void *bufs[] = {q->dlogits,     q->dgate,          q->dyp,   q->dxp, q->dh, q->dhg, q->aux_acc,
                  q->dropped_acc, q->counts_scratch, q->param, q->grad};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    o->free(d, bufs[i]);
  if (q->ep > 1) {
    o->free(d, q->dye);
    o->free(d, q->dxe);
  }
  ep_destroy(&q->ep_x);
  free(q->params);
  free(q->host_counts);
  memset(q, 0, sizeof *q);
}

int moe_init_params(struct model *m, unsigned long long seed) {
  moe_state *q = &m->moe;
  if (q->nmoe == 0) return 0;
  size_t C = (size_t)m->C;
  float *host = calloc(q->nfloats, sizeof(float));
  if (!host) return -1;
  const double std = 0.02, proj_std = 0.02 / sqrt(2.0 * m->L);
  for (int b = 0; b < m->nblocks; b++) {
    int mi = m->block_moe[b];
    if (mi < 0) continue;
    int layer = m->first_layer + b;
    float *base = host + (size_t)mi * q->El * q->expert_floats;
    for (int j = 0; j < q->El; j++) {
      int e = q->ep_rank * q->El + j;
      /* expert 0 draws the dense MLP's weights: E = K = 1 is the dense model */
      model_fill_normal(base + ofc_w(q, m->C) + (size_t)j * 4 * C * C, 4 * C * C, std, seed, layer,
                        e == 0 ? 4 : 16 + 2 * e);
      model_fill_normal(base + oproj_w(q, m->C) + (size_t)j * C * 4 * C, C * 4 * C, proj_std, seed,
                        layer, e == 0 ? 5 : 17 + 2 * e);
    }
  }
  m->ops->copy_to_device(m->compute, q->param, host, q->nfloats * sizeof(float));
  int rc = m->ops->stream_synchronize(m->compute);
  free(host);
  return rc;
}

int moe_forward(struct model *m, int slot, int mi, size_t router, const dev_act *x, dev_act *out) {
  const dev_ops *o = m->ops;
  dev_stream *s = m->compute;
  moe_state *q = &m->moe;
  moe_acts *a = &q->acts[slot * q->nmoe + mi];
  int N = m->N, C = m->C, E = q->E, K = q->K;
  const float *w = q->param + (size_t)mi * q->El * q->expert_floats;
  model_gemm_forward(m, router, a->logits, x, NULL, N, C, E);
  o->moe_router_forward(s, a->expert, a->gate, a->probs, a->logits, N, E, K, q->renorm);
  o->moe_aux_loss_accumulate(s, q->aux_acc, a->probs, a->expert, q->counts_scratch, N, E, K);
  /* the routing decisions per expert (before any capacity drop), for the trace */
  if (q->host_counts && m->cur_mb >= 0 && m->cur_mb < q->host_counts_mb)
    o->copy_to_host(s, q->host_counts + ((size_t)m->cur_mb * q->nmoe + mi) * E, q->counts_scratch,
                    (size_t)E * sizeof(int));
  o->moe_dispatch_plan(s, a->counts, a->offsets, a->row_token, a->row_of, q->dropped_acc, a->expert,
                       N, E, K, q->capacity);
  o->moe_permute_forward(s, a->xp, x, a->row_token, a->offsets, N, E, K, C);
  const int *off = a->offsets;
  int ne = E;
  size_t R = (size_t)N * K, Rmax = q->Rmax;
  if (q->ep > 1) {
    if (ep_dispatch_forward(&q->ep_x, &a->route, a->xe, a->xp, a->counts) != 0) return -1;
    off = a->route.off_dev;
    ne = q->El;
    R = (size_t)a->route.rows;
    Rmax = R ? R : 1;
  }
  o->moe_expert_matmul_forward(s, a->h, a->xe, w + ofc_w(q, C), w + ofc_b(q, C), off, (int)Rmax, ne,
                               C, 4 * C);
  if (R) o->gelu_forward(s, a->hg, a->h, (int)(R * 4 * C));
  o->moe_expert_matmul_forward(s, a->ye, a->hg, w + oproj_w(q, C), w + oproj_b(q, C), off,
                               (int)Rmax, ne, 4 * C, C);
  if (q->ep > 1) ep_return_from_experts(&q->ep_x, &a->route, a->yp, a->ye);
  o->moe_unpermute_forward(s, out, a->yp, a->gate, a->row_of, N, K, C);
  return 0;
}

void moe_backward(struct model *m, int slot, int mi, size_t router, float *router_grad,
                  const dev_act *x, const dev_act *dout, dev_act *dx) {
  const dev_ops *o = m->ops;
  dev_stream *s = m->compute;
  moe_state *q = &m->moe;
  moe_acts *a = &q->acts[slot * q->nmoe + mi];
  int N = m->N, C = m->C, E = q->E, K = q->K;
  size_t es = m->act_es, NK = (size_t)N * K;
  size_t eoff = (size_t)mi * q->El * q->expert_floats;
  const float *w = q->param + eoff;
  float *g = q->grad + eoff;
  const int *off = a->offsets;
  int ne = E;
  size_t R = NK, Rmax = q->Rmax;
  if (q->ep > 1) {
    off = a->route.off_dev;
    ne = q->El;
    R = (size_t)a->route.rows;
    Rmax = R ? R : 1;
  }
  /* combine's backward: the gradient of each kept row, and of the gates */
  o->zero(s, q->dyp, NK * C * es);
  o->zero(s, q->dgate, NK * 4);
  o->moe_unpermute_backward(s, q->dyp, q->dgate, dout, a->yp, a->gate, a->row_of, N, K, C);
  if (q->ep > 1) ep_send_to_experts(&q->ep_x, &a->route, q->dye, q->dyp);
  /* the experts */
  o->zero(s, q->dhg, Rmax * 4 * C * es);
  o->moe_expert_matmul_backward(s, q->dhg, g + oproj_w(q, C), g + oproj_b(q, C), q->dye, a->hg,
                                w + oproj_w(q, C), off, (int)Rmax, ne, 4 * C, C);
  o->zero(s, q->dh, Rmax * 4 * C * es);
  if (R) o->gelu_backward(s, q->dh, a->h, q->dhg, (int)(R * 4 * C));
  o->zero(s, q->dxe, Rmax * C * es);
  o->moe_expert_matmul_backward(s, q->dxe, g + ofc_w(q, C), g + ofc_b(q, C), q->dh, a->xe,
                                w + ofc_w(q, C), off, (int)Rmax, ne, C, 4 * C);
  if (q->ep > 1) ep_return_from_experts(&q->ep_x, &a->route, q->dxp, q->dxe);
  /* dispatch's backward, then the router */
  o->moe_permute_backward(s, dx, q->dxp, a->row_token, a->offsets, N, E, K, C);
  o->zero(s, q->dlogits, (size_t)N * E * es);
  o->moe_router_backward(s, q->dlogits, q->dgate, a->probs, a->expert, q->counts_scratch, N, E, K,
                         q->renorm, q->aux_scale);
  model_gemm_backward(m, router, dx, router_grad, NULL, q->dlogits, x, N, C, E);
}
