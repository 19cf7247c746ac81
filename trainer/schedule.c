/*
 * schedule.c — AFAB and 1F1B pipeline orders (see schedule.h).
 *
 * 1F1B: stage s of p runs w = min(p - s - 1, m) warm-up forwards, then
 * alternates one forward and one backward until all forwards are issued, then
 * drains the remaining backwards. At most w + 1 micro-batches are in flight,
 * which is why it needs fewer activation slots than AFAB (m). With one stage
 * both degenerate to gradient accumulation: F0 B0 F1 B1 ... (one slot).
 */
#include "schedule.h"

void schedule_build(schedule_kind kind, int stage, int stages, int m, sched_item *it)
{
    int k = 0;
    if (stages == 1) {
        for (int i = 0; i < m; i++) {
            it[k++] = (sched_item){'F', i};
            it[k++] = (sched_item){'B', i};
        }
        return;
    }
    if (kind == SCHED_AFAB) {
        for (int i = 0; i < m; i++)
            it[k++] = (sched_item){'F', i};
        for (int i = 0; i < m; i++)
            it[k++] = (sched_item){'B', i};
        return;
    }
    int warm = stages - stage - 1;
    if (warm > m)
        warm = m;
    int f = 0, b = 0;
    for (; f < warm; f++)
        it[k++] = (sched_item){'F', f};
    while (f < m) {
        it[k++] = (sched_item){'F', f++};
        it[k++] = (sched_item){'B', b++};
    }
    while (b < m)
        it[k++] = (sched_item){'B', b++};
}

int schedule_slots(schedule_kind kind, int stage, int stages, int m)
{
    if (stages == 1)
        return 1;
    if (kind == SCHED_AFAB)
        return m;
    int inflight = stages - stage;
    return inflight < m ? inflight : m;
}

double schedule_bubble(int stages, int m)
{
    return (double)(stages - 1) / (double)(m + stages - 1);
}
