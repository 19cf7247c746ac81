/*
 * ring_attention.c — ring attention over the CP group (see ring_attention.h).
 *
 * How the streams are ordered. Buffer slot(s) holds the k|v block of step s:
 * slot 0 the rank's own, then 1, 2, 1, 2, ... for received blocks. Per slot,
 * three events: *_filled (packed on compute or received on "comm cp recv"),
 * *_used (the compute stream has finished the step that reads it) and *_sent
 * (the send stream has passed it on). A receive into a slot waits until the
 * slot's previous content is both used and sent; compute waits until its block
 * is filled; a send waits until its block is filled (for dk|dv: used). An event
 * wait covers the latest record made before it was enqueued, so reusing the
 * events from layer to layer is safe.
 *
 * Byte order per neighbour pair: the send stream carries, in order, kv(0),
 * dkv(0), kv(1), dkv(1), ..., kv(n-2), dkv(n-2), dkv(n-1); the receiving
 * side takes kv(1), dkv(1), kv(2), ..., dkv(n-1), dkv(n) in the same order
 * (step s receives its dk|dv accumulator before prefetching the next k|v).
 */
#include "ring_attention.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int ring_attention_chunk(int n, int r, int h) {
  return h == 0 ? r : 2 * n - 1 - r;
}

/* buffer slot of the block a rank holds at ring step s (s = n: the home-coming dk|dv) */
static int slot_of(int s) {
  return s == 0 ? 0 : 1 + ((s - 1) & 1);
}

int ring_attention_create(ring_attention *ra, dev_device *dev, comm *cp, dev_stream *compute,
                          dev_stream *send, dev_stream *recv, int B, int Tc, int C, int NH,
                          char *err, size_t errlen) {
  memset(ra, 0, sizeof *ra);
  ra->dev = dev;
  ra->ops = dev_get_ops(dev);
  const char *missing = NULL;
  if (!dev_ops_support_cp(ra->ops, &missing)) {
    snprintf(err, errlen,
             "context parallelism: the %s backend has no %s operation (use --backend cpu)",
             ra->ops->backend_name, missing);
    return -1;
  }
  ra->cp = cp;
  ra->n = comm_size(cp);
  ra->rank = comm_rank(cp);
  ra->compute = compute;
  ra->send = send;
  ra->recv = recv;
  ra->B = B;
  ra->Tc = Tc;
  ra->C = C;
  ra->NH = NH;
  ra->rows = (size_t)2 * B * Tc;
  ra->act = dev_activation_dtype(dev);
  size_t bytes = ra->rows * 2 * (size_t)C * dev_dtype_bytes(ra->act);
  for (int k = 0; k < 3; k++) {
    ra->kv[k] = ra->ops->alloc(dev, bytes);
    ra->dkv[k] = ra->ops->alloc(dev, bytes);
    dev_event **ev[] = {&ra->kv_filled[k],  &ra->kv_used[k],  &ra->kv_sent[k],
                        &ra->dkv_filled[k], &ra->dkv_used[k], &ra->dkv_sent[k]};
    for (size_t e = 0; e < sizeof ev / sizeof ev[0]; e++)
      if (!(*ev[e] = ra->ops->event_create(dev))) {
        snprintf(err, errlen, "ring attention: out of memory creating events");
        return -1;
      }
    if (!ra->kv[k] || !ra->dkv[k]) {
      snprintf(err, errlen, "ring attention: out of device memory for %zu-byte blocks", bytes);
      return -1;
    }
    ra->bytes += 2 * bytes;
  }
  return 0;
}

void ring_attention_destroy(ring_attention *ra) {
  if (!ra->ops) return;
  for (int k = 0; k < 3; k++) {
    ra->ops->free(ra->dev, ra->kv[k]);
    ra->ops->free(ra->dev, ra->dkv[k]);
    dev_event *ev[] = {ra->kv_filled[k],  ra->kv_used[k],  ra->kv_sent[k],
                       ra->dkv_filled[k], ra->dkv_used[k], ra->dkv_sent[k]};
    for (size_t e = 0; e < sizeof ev / sizeof ev[0]; e++)
      if (ev[e]) ra->ops->event_destroy(ev[e]);
  }
  memset(ra, 0, sizeof *ra);
}

static size_t block_bytes(const ring_attention *ra) {
  return ra->rows * 2 * (size_t)ra->C * dev_dtype_bytes(ra->act);
}

/* The activation `elems` elements past p. */
static dev_act *at(const ring_attention *ra, const dev_act *p, size_t elems) {
  return dev_act_at(p, ra->act, elems);
}

static int next_rank(const ring_attention *ra) {
  return (ra->rank + 1) % ra->n;
}
static int prev_rank(const ring_attention *ra) {
  return (ra->rank + ra->n - 1) % ra->n;
}

/* Packs this rank's k|v columns of qkv into kv[0] (once its previous send is done). */
static void pack_own_kv(ring_attention *ra, const dev_act *qkv) {
  const dev_ops *o = ra->ops;
  size_t C = (size_t)ra->C, es = dev_dtype_bytes(ra->act);
  o->stream_wait_event(ra->compute, ra->kv_sent[0]);
  o->copy_2d(ra->compute, ra->kv[0], 2 * C * es, at(ra, qkv, C), 3 * C * es, 2 * C * es, ra->rows);
  o->event_record(ra->kv_filled[0], ra->compute);
}

/* Passes the block in slot `cur` on to the next rank and receives the following
 * one from the previous rank into slot `nxt`. */
static void pass_kv(ring_attention *ra, int cur, int nxt) {
  const dev_ops *o = ra->ops;
  o->stream_wait_event(ra->send, ra->kv_filled[cur]);
  comm_send(ra->cp, ra->send, ra->kv[cur], block_bytes(ra), next_rank(ra), 0);
  o->event_record(ra->kv_sent[cur], ra->send);
  o->stream_wait_event(ra->recv, ra->kv_used[nxt]);
  o->stream_wait_event(ra->recv, ra->kv_sent[nxt]);
  comm_recv(ra->cp, ra->recv, ra->kv[nxt], block_bytes(ra), prev_rank(ra), 0);
  o->event_record(ra->kv_filled[nxt], ra->recv);
}

/* Receives a travelling dk|dv accumulator from the previous rank into slot k. */
static void recv_dkv(ring_attention *ra, int k) {
  const dev_ops *o = ra->ops;
  o->stream_wait_event(ra->recv, ra->dkv_used[k]);
  o->stream_wait_event(ra->recv, ra->dkv_sent[k]);
  comm_recv(ra->cp, ra->recv, ra->dkv[k], block_bytes(ra), prev_rank(ra), 0);
  o->event_record(ra->dkv_filled[k], ra->recv);
}

/* The (query chunk, key chunk) pairs of a step: calls fn for each visible pair.
 * Key chunks after the query chunk are masked out entirely; the equal chunk is
 * the causal diagonal block. */
typedef struct block_pair {
  int hq, hk, causal;
} block_pair;

static int visible_pairs(const ring_attention *ra, int src, block_pair out[4]) {
  int k = 0;
  for (int hq = 0; hq < 2; hq++)
    for (int hk = 0; hk < 2; hk++) {
      int gq = ring_attention_chunk(ra->n, ra->rank, hq);
      int gk = ring_attention_chunk(ra->n, src, hk);
      if (gk > gq) continue;
      out[k++] = (block_pair){hq, hk, gk == gq};
    }
  return k;
}

void ring_attention_forward(ring_attention *ra, dev_act *out, float *lse, const dev_act *qkv) {
  const dev_ops *o = ra->ops;
  dev_stream *cs = ra->compute;
  size_t C = (size_t)ra->C, chunk_rows = (size_t)ra->B * ra->Tc;
  size_t chunk_lse = (size_t)ra->B * ra->NH * ra->Tc;
  o->zero(cs, out, ra->rows * C * dev_dtype_bytes(ra->act));
  o->fill(cs, lse, -INFINITY, 2 * chunk_lse);
  pack_own_kv(ra, qkv);
  for (int s = 0; s < ra->n; s++) {
    int cur = slot_of(s), src = (ra->rank - s + ra->n) % ra->n;
    if (s + 1 < ra->n) pass_kv(ra, cur, slot_of(s + 1));
    if (s > 0) o->stream_wait_event(cs, ra->kv_filled[cur]);
    block_pair pairs[4];
    int np = visible_pairs(ra, src, pairs);
    for (int i = 0; i < np; i++) {
      const block_pair *p = &pairs[i];
      o->attention_block_forward(cs, at(ra, out, p->hq * chunk_rows * C), lse + p->hq * chunk_lse,
                                 at(ra, qkv, p->hq * chunk_rows * 3 * C), 3 * ra->C,
                                 at(ra, ra->kv[cur], p->hk * chunk_rows * 2 * C), 2 * ra->C, ra->B,
                                 ra->Tc, ra->Tc, ra->C, ra->NH, p->causal);
    }
    o->event_record(ra->kv_used[cur], cs);
  }
}

void ring_attention_backward(ring_attention *ra, dev_act *dqkv, const dev_act *dout,
                             const dev_act *out, const float *lse, const dev_act *qkv) {
  const dev_ops *o = ra->ops;
  dev_stream *cs = ra->compute;
  size_t C = (size_t)ra->C, chunk_rows = (size_t)ra->B * ra->Tc;
  size_t chunk_lse = (size_t)ra->B * ra->NH * ra->Tc;
  pack_own_kv(ra, qkv);
  o->stream_wait_event(cs, ra->dkv_sent[0]);
  o->zero(cs, ra->dkv[0], block_bytes(ra));
  for (int s = 0; s < ra->n; s++) {
    int cur = slot_of(s), src = (ra->rank - s + ra->n) % ra->n;
    if (s > 0) recv_dkv(ra, cur);
    if (s + 1 < ra->n) pass_kv(ra, cur, slot_of(s + 1));
    if (s > 0) {
      o->stream_wait_event(cs, ra->kv_filled[cur]);
      o->stream_wait_event(cs, ra->dkv_filled[cur]);
    }
    block_pair pairs[4];
    int np = visible_pairs(ra, src, pairs);
    for (int i = 0; i < np; i++) {
      const block_pair *p = &pairs[i];
      size_t q_off = p->hq * chunk_rows, k_off = p->hk * chunk_rows;
      o->attention_block_backward(
          cs, at(ra, dqkv, q_off * 3 * C), 3 * ra->C, at(ra, ra->dkv[cur], k_off * 2 * C),
          2 * ra->C, at(ra, dout, q_off * C), at(ra, out, q_off * C), lse + p->hq * chunk_lse,
          at(ra, qkv, q_off * 3 * C), 3 * ra->C, at(ra, ra->kv[cur], k_off * 2 * C), 2 * ra->C,
          ra->B, ra->Tc, ra->Tc, ra->C, ra->NH, p->causal);
    }
    o->event_record(ra->kv_used[cur], cs);
    o->event_record(ra->dkv_used[cur], cs);
    o->stream_wait_event(ra->send, ra->dkv_used[cur]);
    comm_send(ra->cp, ra->send, ra->dkv[cur], block_bytes(ra), next_rank(ra), 0);
    o->event_record(ra->dkv_sent[cur], ra->send);
  }
  /* one more hop: the accumulator of this rank's own keys comes home complete */
  int home = slot_of(ra->n);
  recv_dkv(ra, home);
  o->stream_wait_event(cs, ra->dkv_filled[home]);
  size_t es = dev_dtype_bytes(ra->act);
  o->copy_2d(cs, at(ra, dqkv, C), 3 * C * es, ra->dkv[home], 2 * C * es, 2 * C * es, ra->rows);
  o->event_record(ra->dkv_used[home], cs);
}
