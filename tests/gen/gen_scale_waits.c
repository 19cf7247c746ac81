/*
 * gen_scale_waits.c — the timelines of a generated pipeline whose stages wait for each other
 * (`stepscope-gen OUT --scale --waits [--1f1b]`): what gen_scale.c writes instead of its
 * lockstep slots when receives must really wait on late sends.
 *
 * A pipeline is the tp x pp ranks of one dp index; a stage is its tp ranks of one pp index.
 * Per step, each stage runs its 2 M items (forward and backward of each micro-batch) in the
 * schedule's order (all-forward-all-backward, or 1F1B: P - 1 - p warm-up forwards, then one
 * forward and one backward in turn, then the remaining backwards), each as soon as it can
 * (true times, all multiples of GEN_Q):
 *
 *   the input's receive (a forward's from stage p - 1, a backward's from p + 1) is posted when
 *   the stage is ready for it: the step's start for its first item, else its previous item's
 *   end; its transfer starts when both sides are there, max(the send's start, the post), and
 *   both the send and the receive end P2P_NS later; so a receive posted before its send
 *   started waits until the sender's stage has done its work;
 *   the item starts at max(previous end + Q, the receive's end) (the step's start for the first
 *   item without a receive); the tp ranks' kernels run from start + 4 Q, each rank's own
 *   durations (gen_scale_kernel_ns: a straggler's are longer); the stage's work ends with its
 *   TP all-reduce, TRANSFER_NS after the slowest member's compute (T > 1), at `end`;
 *   the output's send is posted at end + Q.
 *
 * Every item lasts at most a lockstep slot (slot_ns holds the longest compute, the TP transfer
 * and a pipeline transfer), so each stage is done before the lockstep schedule's last slot
 * ends: the step's length, the world all-reduce's end and the DP all-reduce stay as in
 * lockstep (checked: a timeline past that is an error). A straggler's stage takes longer, so
 * its downstream stages' receives wait for it (forwards) and so do its upstream stages'
 * (backwards): the waits of real pipelines, and the drain they add before the world
 * all-reduce.
 */
#include <stdlib.h>
#include <string.h>

#include "stepscope_gen.h"

#define Q GEN_Q

/* The order of stage p's items: k-th item's pass and micro-batch. */
static void stage_order(const gen_scale *s, int p, int k, int *forward, int *mb) {
  int M = s->microbatches, P = s->pp;
  if (!s->one_f_one_b) {
    *forward = k < M;
    *mb = k < M ? k : k - M;
    return;
  }
  int warm = P - 1 - p < M ? P - 1 - p : M;
  if (k < warm) { /* warm-up forwards */
    *forward = 1;
    *mb = k;
  } else if (k < warm + 2 * (M - warm)) { /* steady state: forward, backward in turn */
    int i = k - warm;
    *forward = i % 2 == 0;
    *mb = *forward ? warm + i / 2 : i / 2;
  } else { /* cool-down backwards */
    *forward = 0;
    *mb = k - warm - (M - warm);
  }
}

/* The longest compute of the stage's tp ranks for an item, from its start + 4 Q. */
static int64_t stage_compute_ns(const gen_scale *s, int first_rank, int64_t step, int slot_no) {
  int64_t most = 0;
  for (int t = 0; t < s->tp; t++) {
    int64_t d = 0;
    for (int k = 0; k < s->kernels_per_slot; k++)
      d += gen_scale_kernel_ns(s, first_rank + t, step, slot_no, k);
    if (d > most) most = d;
  }
  return most;
}

const gen_scale_item *gen_scale_pipe_items(const gen_scale *s, const gen_scale_pipe *p,
                                           int64_t step, int stage) {
  return p->items + (step * s->pp + stage) * 2 * s->microbatches;
}

void gen_scale_pipe_free(gen_scale_pipe *p) {
  free(p->items);
  free(p->stage_done);
  memset(p, 0, sizeof *p);
}

/* Step n of the pipeline: every stage's items, as soon as their inputs allow. at[(p * 2 + pass)
 * * M + mb] is the item's index in stage p's order once computed (scratch, -1 before). */
static int pipe_step(const gen_scale *s, int dp_idx, int64_t n, gen_scale_pipe *pipe, int *at,
                     int *next) {
  int M = s->microbatches, P = s->pp;
  int64_t t0 = (int64_t)1000000 + n * s->step_ns;
  int64_t done = t0 + 2 * ((int64_t)M + P - 1) * s->slot_ns;
  for (int i = 0; i < 2 * P * M; i++)
    at[i] = -1;
  for (int p = 0; p < P; p++)
    next[p] = 0;
  for (int left = 2 * P * M; left > 0;) {
    int progress = 0;
    for (int p = 0; p < P; p++) {
      gen_scale_item *its = pipe->items + (n * P + p) * 2 * M;
      for (; next[p] < 2 * M; next[p]++, left--, progress = 1) {
        int k = next[p], forward, mb;
        stage_order(s, p, k, &forward, &mb);
        int from = forward ? p - 1 : p + 1; /* the input's stage; none at the ends */
        int has_input = from >= 0 && from < P;
        if (has_input && at[(from * 2 + !forward) * M + mb] < 0) break; /* not sent yet */
        gen_scale_item *it = &its[k];
        *it = (gen_scale_item){forward, mb, 0, 0, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN};
        int64_t ready = k == 0 ? t0 : its[k - 1].end + Q;
        if (has_input) {
          gen_scale_item *src =
              pipe->items + (n * P + from) * 2 * M + at[(from * 2 + !forward) * M + mb];
          it->recv_post = k == 0 ? t0 : its[k - 1].end;
          int64_t xfer = src->send_start > it->recv_post ? src->send_start : it->recv_post;
          it->recv_end = src->send_end = xfer + GEN_SCALE_P2P_NS;
          if (ready < it->recv_end) ready = it->recv_end;
          pipe->receives += s->tp; /* one per rank of the stage */
          pipe->waited += it->recv_post < src->send_start ? s->tp : 0;
        }
        it->start = ready;
        int slot_no = forward ? mb : M + mb;
        it->end = ready + 4 * Q + stage_compute_ns(s, (dp_idx * P + p) * s->tp, n, slot_no) +
                  (s->tp > 1 ? GEN_SCALE_TRANSFER_NS : 0);
        int to = forward ? p + 1 : p - 1;
        if (to >= 0 && to < P) it->send_start = it->end + Q; /* its end: the receiver's */
        at[(p * 2 + !forward) * M + mb] = k;
      }
    }
    if (!progress) return -1; /* an order that deadlocks: a bug */
  }
  for (int p = 0; p < P; p++) {
    pipe->stage_done[n * P + p] = pipe->items[(n * P + p + 1) * 2 * M - 1].end;
    if (pipe->stage_done[n * P + p] + 2 * Q > done) return -1;
  }
  return 0;
}

int gen_scale_pipe_make(const gen_scale *s, int dp_idx, gen_scale_pipe *p) {
  memset(p, 0, sizeof *p);
  size_t per_step = (size_t)s->pp * 2 * (size_t)s->microbatches;
  p->items = malloc((size_t)s->nsteps * per_step * sizeof *p->items);
  p->stage_done = malloc((size_t)s->nsteps * (size_t)s->pp * sizeof *p->stage_done);
  int *at = malloc(per_step * sizeof *at), *next = malloc((size_t)s->pp * sizeof *next);
  int rc = p->items && p->stage_done && at && next ? 0 : -1;
  for (int64_t n = 0; n < s->nsteps && rc == 0; n++)
    rc = pipe_step(s, dp_idx, n, p, at, next);
  free(at);
  free(next);
  if (rc) gen_scale_pipe_free(p);
  return rc;
}
