/*
 * expert_parallel.c — the dispatch and combine all-to-alls of expert parallelism (see
 * expert_parallel.h for the data flow).
 *
 * Layouts, for an EP group of `ep` ranks with El experts each:
 *   plan order (a source rank's rows): grouped by global expert e = k El + j, so the rows for
 *     group rank k are contiguous and already "packed by destination" for comm_alltoallv;
 *   source-major (what the all-to-all delivers): [source k][local expert j] blocks;
 *   expert-major (what the grouped GEMMs read): [local expert j][source k] blocks, so that
 *     local expert j's rows are [off[j], off[j+1]).
 * Regrouping between the last two is one device copy per non-empty (k, j) block: with the
 * counts known on the host that needs no new device operation, so every backend that has
 * `copy` and an all-to-all runs it.
 */
#include "expert_parallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepscope.h"

int ep_create(ep_ctx *x, comm *c, dev_device *dev, dev_stream *s, int E, int C, int N, int K,
              char *err, size_t errlen) {
  memset(x, 0, sizeof *x);
  const comm_header *h = (const comm_header *)c;
  if (!h->ops->alltoallv) {
    snprintf(err, errlen, "--ep %d: the %s communicator has no all-to-all yet", comm_size(c),
             h->ops->backend_name);
    return -1;
  }
  x->c = c;
  x->ep = comm_size(c);
  x->rank = comm_rank(c);
  x->E = E;
  x->El = E / x->ep;
  x->C = C;
  x->o = dev_get_ops(dev);
  x->dev = dev;
  x->s = s;
  x->act = dev_activation_dtype(dev);
  x->act_es = dev_dtype_bytes(x->act);
  int per_source = K < x->El ? K : x->El; /* a token's K experts are distinct */
  x->rows_max = (size_t)x->ep * (size_t)N * (size_t)per_source;
  x->recv_counts_dev = x->o->alloc(dev, sizeof(int) * (size_t)x->ep * x->El);
  x->count_el = calloc((size_t)x->ep, sizeof(uint64_t));
  x->stage = x->o->alloc(dev, x->rows_max * (size_t)C * x->act_es);
  if (!x->recv_counts_dev || !x->count_el || !x->stage) {
    snprintf(err, errlen, "out of memory for the expert-parallel buffers");
    return -1;
  }
  for (int k = 0; k < x->ep; k++)
    x->count_el[k] = (uint64_t)x->El;
  return 0;
}

void ep_destroy(ep_ctx *x) {
  if (!x->o) return;
  x->o->free(x->dev, x->recv_counts_dev);
  x->o->free(x->dev, x->stage);
  free(x->count_el);
  memset(x, 0, sizeof *x);
}

int ep_route_init(ep_ctx *x, ep_route *r) {
  memset(r, 0, sizeof *r);
  r->send_el = calloc((size_t)x->ep, sizeof(uint64_t));
  r->recv_el = calloc((size_t)x->ep, sizeof(uint64_t));
  r->my_counts = calloc((size_t)x->E, sizeof(int));
  r->recv_counts = calloc((size_t)x->ep * x->El, sizeof(int));
  r->off = calloc((size_t)x->El + 1, sizeof(int));
  r->off_dev = x->o->alloc(x->dev, sizeof(int) * ((size_t)x->El + 1));
  return r->send_el && r->recv_el && r->my_counts && r->recv_counts && r->off && r->off_dev ? 0
                                                                                            : -1;
}

void ep_route_free(ep_ctx *x, ep_route *r) {
  free(r->send_el);
  free(r->recv_el);
  free(r->my_counts);
  free(r->recv_counts);
  free(r->off);
  if (x->o) x->o->free(x->dev, r->off_dev);
  memset(r, 0, sizeof *r);
}

static comm_dtype act_comm(const ep_ctx *x) {
  return x->act == DEV_BF16 ? COMM_BFLOAT16 : COMM_FLOAT32;
}

static dev_act *row(const ep_ctx *x, const dev_act *p, size_t r) {
  return dev_act_at(p, x->act, r * (size_t)x->C);
}

/* Copies between source-major `sm` and expert-major `em`; to_expert: sm -> em. */
static void regroup(ep_ctx *x, const ep_route *r, dev_act *em, dev_act *sm, int to_expert) {
  int ep = x->ep, El = x->El;
  size_t at_sm = 0;
  for (int k = 0; k < ep; k++) {
    for (int j = 0; j < El; j++) {
      int n = r->recv_counts[k * El + j];
      if (n == 0) continue;
      size_t at_em = (size_t)r->off[j];
      for (int k2 = 0; k2 < k; k2++)
        at_em += (size_t)r->recv_counts[k2 * El + j];
      size_t bytes = (size_t)n * x->C * x->act_es;
      if (to_expert)
        x->o->copy(x->s, row(x, em, at_em), row(x, sm, at_sm), bytes);
      else
        x->o->copy(x->s, row(x, sm, at_sm), row(x, em, at_em), bytes);
      at_sm += (size_t)n;
    }
  }
}

/* The splits in rows, "[a,b,...]" (at most 64 ranks). */
static size_t rows_json(char *b, size_t cap, const uint64_t *el, int n, int C) {
  size_t at = 0;
  for (int k = 0; k < n && at < cap; k++)
    at += (size_t)snprintf(b + at, cap - at, "%s%llu", k ? "," : "[",
                           (unsigned long long)(el[k] / (uint64_t)C));
  if (at < cap) at += (size_t)snprintf(b + at, cap - at, "]");
  return at;
}

/* A range whose arguments are the all-to-all's splits: rows this rank sends to and receives
 * from each EP group rank (send_rows / recv_rows; bytes = rows x C x the activation size). */
static void range_push(const ep_ctx *x, const char *name, const ep_route *r, int backward) {
  if (!stepscope_active()) return;
  char args[1400], a[640], b[640];
  rows_json(a, sizeof a, backward ? r->recv_el : r->send_el, x->ep, x->C);
  rows_json(b, sizeof b, backward ? r->send_el : r->recv_el, x->ep, x->C);
  snprintf(args, sizeof args,
           "{\"send_rows\":%s,\"recv_rows\":%s,\"row_bytes\":%zu,\"ep_rank\":%d}", a, b,
           (size_t)x->C * x->act_es, x->rank);
  stepscope_range_push(name, args);
}

static void range_pop(void) {
  if (stepscope_active()) stepscope_range_pop();
}

int ep_dispatch_forward(ep_ctx *x, ep_route *r, dev_act *xe, const dev_act *xp,
                        const int *counts_dev) {
  int ep = x->ep, El = x->El;
  if (stepscope_active()) stepscope_range_push("moe.dispatch", NULL);
  /* 1. counts: owner k receives this rank's counts of its El experts */
  comm_alltoallv(x->c, x->s, x->recv_counts_dev, x->count_el, counts_dev, x->count_el,
                 COMM_FLOAT32);
  x->o->copy_to_host(x->s, r->my_counts, counts_dev, sizeof(int) * (size_t)x->E);
  x->o->copy_to_host(x->s, r->recv_counts, x->recv_counts_dev, sizeof(int) * (size_t)ep * El);
  int rc = x->o->stream_synchronize(x->s);
  if (rc != 0) {
    range_pop();
    return -1;
  }
  /* 2. the splits and the local experts' offsets */
  for (int k = 0; k < ep; k++) {
    uint64_t s = 0, q = 0;
    for (int j = 0; j < El; j++) {
      s += (uint64_t)r->my_counts[k * El + j];
      q += (uint64_t)r->recv_counts[k * El + j];
    }
    r->send_el[k] = s * (uint64_t)x->C;
    r->recv_el[k] = q * (uint64_t)x->C;
  }
  r->off[0] = 0;
  for (int j = 0; j < El; j++) {
    int n = 0;
    for (int k = 0; k < ep; k++)
      n += r->recv_counts[k * El + j];
    r->off[j + 1] = r->off[j] + n;
  }
  r->rows = r->off[El];
  x->tokens_in += r->rows;
  x->o->copy_to_device(x->s, r->off_dev, r->off, sizeof(int) * ((size_t)El + 1));
  /* 3. the tokens (a nested range carries the splits, known only now) */
  range_push(x, "moe.dispatch.tokens", r, 0);
  comm_alltoallv(x->c, x->s, x->stage, r->recv_el, xp, r->send_el, act_comm(x));
  regroup(x, r, xe, x->stage, 1);
  range_pop();
  range_pop();
  return 0;
}

void ep_send_to_experts(ep_ctx *x, const ep_route *r, dev_act *xe, const dev_act *xp) {
  range_push(x, "moe.dispatch", r, 0);
  comm_alltoallv(x->c, x->s, x->stage, r->recv_el, xp, r->send_el, act_comm(x));
  regroup(x, r, xe, x->stage, 1);
  range_pop();
}

void ep_return_from_experts(ep_ctx *x, const ep_route *r, dev_act *yp, const dev_act *ye) {
  range_push(x, "moe.combine", r, 1);
  regroup(x, r, (dev_act *)ye, x->stage, 0);
  comm_alltoallv(x->c, x->s, yp, r->send_el, x->stage, r->recv_el, act_comm(x));
  range_pop();
}
