/*
 * test_schedule.c — the pipeline schedules (trainer/schedule.c) as lists.
 *
 * Checks, for AFAB and 1F1B over a range of stages and micro-batch counts:
 * every micro-batch runs F then B exactly once; backwards run in order; the
 * micro-batches in flight never exceed the stage's activation slots (so that
 * slot mb % slots is free when reused); 1F1B's exact order on a known case;
 * and the theoretical bubble (p-1)/(m+p-1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

int main(void)
{
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
                            CHECK(inflight <= slots, "kind %d p %d m %d s %d: %d in flight > %d slots",
                                  kind, p, m, s, inflight, slots);
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
