/*
 * test_schedule.c — the pipeline schedules (trainer/schedule.c) as lists.
 *
 * Checks, for AFAB and 1F1B over a range of stages and micro-batch counts:
 * every micro-batch runs F then B exactly once; backwards run in order; the
 * micro-batches in flight never exceed the stage's activation slots (so that
 * slot mb % slots is free when reused); 1F1B's exact order on a known case;
 * and the theoretical bubble (p-1)/(m+p-1).
 * Interleaved 1F1B: every (chunk, micro-batch) runs F then B exactly once, a
 * chunk's backwards in micro-batch order; and, for every ordered pair of ranks,
 * the messages the sender emits (activations to the next virtual stage,
 * gradients to the previous one) come in exactly the order the receiver
 * consumes them (the shared-memory mailboxes and NCCL match p2p in order);
 * Megatron's order on a known case; the bubble (p-1)/(v m+p-1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* A pipeline message: kind (activation 'A' or gradient 'G'), receiving chunk, micro-batch. */
typedef struct msg {
  char kind;
  int chunk, mb;
} msg;

/* Appends to out the messages `stage` sends to (sending = 1) or receives from (0) `peer`, in
 * its program order. */
static int pair_messages(int stage, int peer, int p, int v, int m, int sending, msg *out) {
  sched_item it[512];
  schedule_build_interleaved(stage, p, v, m, it);
  int n = 0;
  for (int i = 0; i < 2 * m * v; i++) {
    int vs = it[i].chunk * p + stage; /* virtual stage */
    int fwd = it[i].pass == 'F';
    /* forward: receive from vs-1, send to vs+1; backward the other way */
    int other = sending == fwd ? vs + 1 : vs - 1;
    if (other < 0 || other >= p * v || other % p != peer) continue;
    int recv_chunk = sending ? other / p : it[i].chunk;
    out[n++] = (msg){fwd ? 'A' : 'G', recv_chunk, it[i].mb};
  }
  return n;
}

static void check_interleaved(void) {
  sched_item it[512];
  for (int p = 2; p <= 4; p++)
    for (int v = 2; v <= 3; v++)
      for (int m = p; m <= 3 * p; m += p) {
        for (int s = 0; s < p; s++) {
          schedule_build_interleaved(s, p, v, m, it);
          int fdone[8][16] = {{0}}, bdone[8][16] = {{0}}, next_b[8] = {0};
          for (int i = 0; i < 2 * m * v; i++) {
            int c = it[i].chunk, mb = it[i].mb;
            CHECK(c >= 0 && c < v && mb >= 0 && mb < m, "p %d v %d m %d: item %d/%d", p, v, m, c,
                  mb);
            if (c < 0 || c >= v || mb < 0 || mb >= m) continue;
            if (it[i].pass == 'F') {
              CHECK(!fdone[c][mb], "F twice");
              fdone[c][mb] = 1;
            } else {
              CHECK(fdone[c][mb] && !bdone[c][mb], "B before F or twice");
              CHECK(mb == next_b[c], "a chunk's backwards out of order");
              bdone[c][mb] = 1;
              next_b[c]++;
            }
          }
          for (int c = 0; c < v; c++)
            CHECK(next_b[c] == m, "p %d v %d m %d s %d: chunk %d ran %d backwards", p, v, m, s, c,
                  next_b[c]);
        }
        for (int a = 0; a < p; a++)
          for (int b = 0; b < p; b++) {
            if (a == b) continue;
            msg sent[512], got[512];
            int ns = pair_messages(a, b, p, v, m, 1, sent);
            int nr = pair_messages(b, a, p, v, m, 0, got);
            CHECK(ns == nr, "p %d v %d m %d: %d->%d sends %d, receives %d", p, v, m, a, b, ns, nr);
            for (int i = 0; i < ns && i < nr; i++)
              CHECK(sent[i].kind == got[i].kind && sent[i].chunk == got[i].chunk &&
                        sent[i].mb == got[i].mb,
                    "p %d v %d m %d: %d->%d message %d sent %c%d/%d, received %c%d/%d", p, v, m, a,
                    b, i, sent[i].kind, sent[i].chunk, sent[i].mb, got[i].kind, got[i].chunk,
                    got[i].mb);
          }
      }
  /* stage 0 of 2, V 2, 4 micro-batches: 2 (p-1) + (V-1) p = 4 warm-up forwards, then 1F1B */
  schedule_build_interleaved(0, 2, 2, 4, it);
  const char *want = "F0.0F0.1F1.0F1.1F0.2B1.0F0.3B1.1F1.2B0.0F1.3B0.1B1.2B1.3B0.2B0.3";
  char got[128];
  int at = 0;
  for (int i = 0; i < 16; i++)
    at += snprintf(got + at, sizeof got - (size_t)at, "%c%d.%d", it[i].pass, it[i].chunk, it[i].mb);
  CHECK(!strcmp(got, want), "interleaved order %s, expected %s", got, want);
  CHECK(fabs(schedule_bubble_interleaved(4, 2, 8) - 3.0 / 19.0) < 1e-12, "interleaved bubble");
}

int main(void) {
  check_interleaved();
  sched_item it[256];
  for (int kind = 0; kind < 2; kind++)
    for (int p = 1; p <= 4; p++)
      for (int m = 1; m <= 8; m++)
        for (int s = 0; s < p; s++) {
          schedule_build((schedule_kind)kind, s, p, m, it);
          int slots = schedule_slots((schedule_kind)kind, s, p, m);
          int fdone[64] = {0}, bdone[64] = {0}, inflight = 0, next_b = 0;
          for (int i = 0; i < 2 * m; i++) {
            int mb = it[i].mb;
            CHECK(mb >= 0 && mb < m, "mb %d out of range", mb);
            if (it[i].pass == 'F') {
              CHECK(!fdone[mb], "F%d twice", mb);
              fdone[mb] = 1;
              inflight++;
              CHECK(inflight <= slots, "kind %d p %d m %d s %d: %d in flight > %d slots", kind, p,
                    m, s, inflight, slots);
            } else {
              CHECK(fdone[mb] && !bdone[mb], "B%d before F or twice", mb);
              CHECK(mb == next_b, "backwards out of order");
              bdone[mb] = 1;
              next_b++;
              inflight--;
            }
          }
          CHECK(next_b == m, "not every backward ran");
        }
  /* 1F1B, stage 0 of 2, 4 micro-batches: F0 F1 B0 F2 B1 F3 B2 B3 */
  schedule_build(SCHED_1F1B, 0, 2, 4, it);
  const char *want = "F0F1B0F2B1F3B2B3";
  char got[64];
  int at = 0;
  for (int i = 0; i < 8; i++)
    at += snprintf(got + at, sizeof got - (size_t)at, "%c%d", it[i].pass, it[i].mb);
  CHECK(!strcmp(got, want), "1f1b order %s, expected %s", got, want);
  schedule_build(SCHED_AFAB, 1, 2, 3, it);
  CHECK(it[0].pass == 'F' && it[2].pass == 'F' && it[3].pass == 'B', "afab order");
  CHECK(fabs(schedule_bubble(2, 4) - 0.2) < 1e-12, "bubble(2,4) = %g", schedule_bubble(2, 4));
  CHECK(fabs(schedule_bubble(4, 8) - 3.0 / 11.0) < 1e-12, "bubble(4,8)");
  CHECK(schedule_slots(SCHED_1F1B, 0, 4, 8) == 4 && schedule_slots(SCHED_1F1B, 3, 4, 8) == 1,
        "1f1b slots");
  CHECK(schedule_slots(SCHED_AFAB, 0, 4, 8) == 8, "afab slots");
  if (failures) {
    printf("%d failures\n", failures);
    return 1;
  }
  printf("OK\n");
  return 0;
}
