/*
 * schedule.c — AFAB, 1F1B and interleaved 1F1B pipeline orders (see schedule.h).
 *
 * 1F1B: stage s of p runs w = min(p - s - 1, m) warm-up forwards, then
 * alternates one forward and one backward until all forwards are issued, then
 * drains the remaining backwards. At most w + 1 micro-batches are in flight,
 * which is why it needs fewer activation slots than AFAB (m). With one stage
 * both degenerate to gradient accumulation: F0 B0 F1 B1 ... (one slot).
 */
#include "schedule.h"

void schedule_build(schedule_kind kind, int stage, int stages, int m, sched_item *it) {
  int k = 0;
  if (stages == 1) {
    for (int i = 0; i < m; i++) {
      it[k++] = (sched_item){'F', i, 0};
      it[k++] = (sched_item){'B', i, 0};
    }
    return;
  }
  if (kind == SCHED_AFAB) {
    for (int i = 0; i < m; i++)
      it[k++] = (sched_item){'F', i, 0};
    for (int i = 0; i < m; i++)
      it[k++] = (sched_item){'B', i, 0};
    return;
  }
  int warm = stages - stage - 1;
  if (warm > m) warm = m;
  int f = 0, b = 0;
  for (; f < warm; f++)
    it[k++] = (sched_item){'F', f, 0};
  while (f < m) {
    it[k++] = (sched_item){'F', f++, 0};
    it[k++] = (sched_item){'B', b++, 0};
  }
  while (b < m)
    it[k++] = (sched_item){'B', b++, 0};
}

int schedule_slots(schedule_kind kind, int stage, int stages, int m) {
  if (stages == 1) return 1;
  if (kind == SCHED_AFAB) return m;
  int inflight = stages - stage;
  return inflight < m ? inflight : m;
}

double schedule_bubble(int stages, int m) {
  return (double)(stages - 1) / (double)(m + stages - 1);
}

/* Virtual micro-batch k of the interleaved order: its micro-batch and chunk. */
static sched_item interleaved_item(char pass, int k, int stages, int v) {
  int group = stages * v, in_group = k % group;
  int chunk = in_group / stages;
  if (pass == 'B') chunk = v - 1 - chunk;
  return (sched_item){pass, (k / group) * stages + in_group % stages, chunk};
}

void schedule_build_interleaved(int stage, int stages, int v, int m, sched_item *it) {
  int total = m * v, k = 0;
  int warm = m == stages ? total : 2 * (stages - stage - 1) + (v - 1) * stages;
  if (warm > total) warm = total;
  int f = 0, b = 0;
  for (; f < warm; f++)
    it[k++] = interleaved_item('F', f, stages, v);
  while (f < total) {
    it[k++] = interleaved_item('F', f++, stages, v);
    it[k++] = interleaved_item('B', b++, stages, v);
  }
  while (b < total)
    it[k++] = interleaved_item('B', b++, stages, v);
}

double schedule_bubble_interleaved(int stages, int v, int m) {
  return (double)(stages - 1) / ((double)v * m + stages - 1);
}
