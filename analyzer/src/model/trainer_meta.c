/*
 * trainer_meta.c — the trainer's metadata decoded once per rank. The trainer declares its
 * layout, schedule, FLOPs and memory as JSON objects (and the tracer the machine's load)
 * (model/trace_metadata.h names the keys and members); this file turns the last value of each key
 * into the typed fields of ssa_trainer_meta when the rank is finished, so that the metrics, the
 * diff and the planner read numbers instead of searching JSON text, and a member means the same to
 * all of them. It also holds the schedules' theoretical bubble (ssa_bubble_theory), which
 * the metrics and the Kineto importer's recognised pipelines (kineto_pipeline.c) both use.
 */
#include <math.h>
#include <string.h>

#include "ssa_model.h"

/* A member's number, NaN when absent or not a number; a number outside [lo, hi] (or not
 * finite) is NaN too, with a warning naming it, so that no reader casts it to an int. */
static double number(ssa_rank *r, const char *key, const char *json, const char *path, double lo,
                     double hi) {
  double v = NAN;
  if (!ssa_json_number(json, path, &v) || isnan(v)) return NAN;
  if (!(v >= lo && v <= hi)) {
    ssa_rank_warn(r, "rank %d: metadata %s.%s = %.15g is outside %.15g..%.15g; ignored", r->rank,
                  key, path, v, lo, hi);
    return NAN;
  }
  return v;
}

void ssa_rank_decode_trainer_meta(ssa_rank *r) {
  ssa_trainer_meta *m = &r->tmeta;
  memset(m, 0, sizeof *m);
#define DECODE(object, key, field, path, lo, hi)                                                   \
  m->object.field = number(r, key, json, path, lo, hi);
#define DECODE_LAYOUT(field, path, lo, hi)   DECODE(layout, TM_KEY_LAYOUT, field, path, lo, hi)
#define DECODE_SCHEDULE(field, path, lo, hi) DECODE(schedule, TM_KEY_SCHEDULE, field, path, lo, hi)
#define DECODE_FLOPS(field, path, lo, hi)    DECODE(flops, TM_KEY_FLOPS, field, path, lo, hi)
#define DECODE_MEMORY(field, path, lo, hi)   DECODE(memory, TM_KEY_MEMORY, field, path, lo, hi)
#define DECODE_MACHINE(field, path, lo, hi)  DECODE(machine, TM_KEY_MACHINE, field, path, lo, hi)
  const char *json = ssa_rank_meta(r, TM_KEY_LAYOUT);
  m->layout.present = json != NULL;
  TM_LAYOUT_NUMBERS(DECODE_LAYOUT)
  json = ssa_rank_meta(r, TM_KEY_SCHEDULE);
  m->schedule.present = json != NULL;
  TM_SCHEDULE_NUMBERS(DECODE_SCHEDULE)
  m->schedule.has_name = ssa_json_string(json, "name", m->schedule.name, sizeof m->schedule.name);
  json = ssa_rank_meta(r, TM_KEY_FLOPS);
  m->flops.present = json != NULL;
  TM_FLOPS_NUMBERS(DECODE_FLOPS)
  json = ssa_rank_meta(r, TM_KEY_MEMORY);
  m->memory.present = json != NULL;
  TM_MEMORY_NUMBERS(DECODE_MEMORY)
  json = ssa_rank_meta(r, TM_KEY_MACHINE);
  m->machine.present = json != NULL;
  TM_MACHINE_NUMBERS(DECODE_MACHINE)
#undef DECODE_MACHINE
#undef DECODE_MEMORY
#undef DECODE_FLOPS
#undef DECODE_SCHEDULE
#undef DECODE_LAYOUT
#undef DECODE
}

/* The idle fraction of a stage's step that the schedule itself implies when every stage's
 * work takes the same time (docs/metrics.md, docs/kineto-import.md "Pipelines"): p stages,
 * m micro-batches, v virtual stages (chunks) per stage.
 *   AFAB (GPipe) and 1F1B:             (p-1) / (m + p-1)
 *   interleaved 1F1B (v > 1):          (p-1) / (v m + p-1)
 *   zero bubble (a name with "zero_bubble"): the backward split into input gradient (B) and
 *   weight gradient (W), taken as equal thirds of a micro-batch's work with the forward (the
 *   zero-bubble paper's T_F = T_B = T_W); the fill and drain then cost (p-1)(T_F + T_B - T_W)
 *   = (p-1) thirds of a chunk's work instead of (p-1) whole ones (ZB-H1), so
 *                                      (p-1) / (3 v m + p-1). */
double ssa_bubble_theory(const char *name, int p, int m, int v) {
  if (p <= 1) return 0.0;
  if (m <= 0) return NAN;
  if (v < 1) v = 1;
  if (name && strstr(name, "zero_bubble")) return (double)(p - 1) / (3.0 * v * m + p - 1);
  if (v > 1 || (name && strstr(name, "interleav")))
    return (double)(p - 1) / ((double)v * m + p - 1);
  return (double)(p - 1) / ((double)m + p - 1);
}
