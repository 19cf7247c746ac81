/*
 * ring_attention.h — causal attention over a sequence split across the ranks of a
 * context-parallel (CP) group: ring attention with the zig-zag split.
 *
 * What it is for: under --cp N every rank holds 2 of the 2N chunks of each sequence
 * (chunks r and 2N-1-r for CP rank r, so that under the causal mask every rank does
 * the same work), in every layer. Everything but attention is per token and stays
 * local; attention needs every earlier key. This module computes it, written over
 * the device API (dev_ops copy_2d, attention_block_forward/backward) and the
 * communicator's point-to-point send/recv, so a backend only adds operations.
 *
 * Layout: a rank's tokens are chunk-major, [2][B][Tc] (its first chunk of every
 * sequence, then its second), so a chunk of all B sequences is one strided block.
 *
 * Forward (N steps): the rank packs its own k|v columns of qkv into a buffer; at
 * step s it holds the k|v of CP rank r-s, sends that block on to rank r+1 on the
 * "comm cp send" stream and receives the next one from r-1 on "comm cp recv"
 * while the compute stream attends its queries to the block at hand (causal on
 * the diagonal chunk, full for earlier chunks, skipped for later ones), merging
 * into out/lse by log-sum-exp. Received blocks are double-buffered; events order
 * the three streams, so transfers overlap compute exactly as on a GPU.
 *
 * Backward: the same ring again, with a dk|dv accumulator travelling with each
 * k|v block: at step s a rank adds its queries' contributions to the block's
 * accumulator and sends it on; after N steps each accumulator has visited every
 * rank, and one more hop brings it home, where it becomes the k|v columns of dqkv.
 * dq accumulates locally. Transfers are p2p records of group "cp" (flags P2P,
 * not PIPELINE: communication that can overlap compute).
 *
 * Every CP rank must call forward/backward in the same order (each pair of
 * neighbours shares one byte stream per direction).
 *
 * Activations are in the device's storage type (dev_act): with bf16, the k|v blocks and
 * the travelling dk|dv accumulators are bf16 (half the bytes on the ring), and each
 * block's log-sum-exp merge rounds the running output once (lse stays fp32).
 */
#ifndef STEPSCOPE_TRAINER_RING_ATTENTION_H
#define STEPSCOPE_TRAINER_RING_ATTENTION_H

#include <stddef.h>

#include "comm.h"
#include "device.h"

typedef struct ring_attention {
  dev_device *dev;
  const dev_ops *ops;
  comm *cp;    /* the CP group; ring order is the group rank */
  int n, rank; /* CP degree and this rank's position */
  dev_stream *compute, *send, *recv;
  int B, Tc, C, NH; /* sequences, chunk length, channels and heads of this TP rank */
  dev_dtype act;    /* the device's activation type (of qkv, out, the blocks) */
  size_t rows;      /* 2 * B * Tc local tokens */
  /* [rows, 2C] k|v blocks: 0 = this rank's own, 1 and 2 = received (alternating);
   * dkv: the dk|dv accumulators travelling with them in backward */
  dev_act *kv[3], *dkv[3];
  dev_event *kv_filled[3], *kv_used[3], *kv_sent[3];
  dev_event *dkv_filled[3], *dkv_used[3], *dkv_sent[3];
  size_t bytes; /* device memory allocated */
} ring_attention;

/* The global chunk (0 .. 2n-1) held as local chunk h (0 or 1) by CP rank r. */
int ring_attention_chunk(int n, int r, int h);

/* Sets up the buffers and events. Returns 0, or -1 with a message. */
int ring_attention_create(ring_attention *ra, dev_device *dev, comm *cp, dev_stream *compute,
                          dev_stream *send, dev_stream *recv, int B, int Tc, int C, int NH,
                          char *err, size_t errlen);
void ring_attention_destroy(ring_attention *ra);

/* out [rows, C] (overwritten), lse [2, B, NH, Tc] (overwritten, kept for backward)
 * from this rank's qkv [rows, 3C]. Everything is enqueued on the compute stream
 * (and the cp streams); out and lse are ready in compute-stream order. */
void ring_attention_forward(ring_attention *ra, dev_act *out, float *lse, const dev_act *qkv);

/* dqkv [rows, 3C] gets the gradient: q columns accumulate, k|v columns are
 * overwritten (they are complete only after the whole ring). */
void ring_attention_backward(ring_attention *ra, dev_act *dqkv, const dev_act *dout,
                             const dev_act *out, const float *lse, const dev_act *qkv);

#endif /* STEPSCOPE_TRAINER_RING_ATTENTION_H */
