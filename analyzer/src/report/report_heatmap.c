/*
 * report_heatmap.c — the heatmap file of `stepscope analyze --heatmap FILE`: what the viewer's
 * ranks x steps heatmap draws (docs/report-schema.md, "Heatmap file").
 *
 * The report of a 16,384-rank run is about a gigabyte (its collective instances), more than a
 * browser holds in one string; this file keeps, per rank and step, only the four numbers the
 * heatmap colours (the rank's step span, exposed communication, idle and bubble, integer ns),
 * as one flat rank-major array each (null where a rank has no window for that step), plus the
 * run's headline and who made the others wait (report_culprits.c): about 4 x 8 bytes per rank
 * and step. Columns are the run's steps (a->steps); a rank's window of a step the run does not
 * list is left out.
 */
#include <stdlib.h>

#include "ssa_report.h"

static int cmp_step_id(const void *key, const void *elem) {
  int64_t k = *(const int64_t *)key, s = ((const ssa_run_step *)elem)->step;
  return k < s ? -1 : k > s;
}

/* The column of step id `step` among the run's steps (sorted by id, run_metadata.c), or -1. */
static long step_column(const ssa_analysis *a, int64_t step) {
  if (!a->nsteps) return -1; /* bsearch wants a base even for no elements */
  const ssa_run_step *s = bsearch(&step, a->steps, a->nsteps, sizeof *a->steps, cmp_step_id);
  return s ? (long)(s - a->steps) : -1;
}

static int selected(const ssa_analysis *a, size_t i) {
  return a->opt.rank < 0 || a->ranks[i].rank->rank == a->opt.rank;
}

enum { HEAT_SPAN, HEAT_EXPOSED_COMM, HEAT_IDLE, HEAT_BUBBLE, HEAT_N };
static const char *const heat_names[HEAT_N] = {"step_time_ns", "exposed_comm_ns", "idle_ns",
                                               "bubble_ns"};

static int64_t heat_value(const ssa_window *w, int metric) {
  switch (metric) {
  case HEAT_SPAN: return w->span;
  case HEAT_EXPOSED_COMM: return w->exposed_comm;
  case HEAT_IDLE: return w->idle;
  default: return w->bubble;
  }
}

/* One metric's rank-major array: for each selected rank, one value per run step. */
static void write_cells(const ssa_analysis *a, int metric, const ssa_window **cell, ssa_out *o) {
  ssa_out_char(o, '[');
  int first = 1;
  for (size_t i = 0; i < a->nranks; i++) {
    if (!selected(a, i)) continue;
    const ssa_rank_result *rr = &a->ranks[i];
    for (size_t s = 0; s < a->nsteps; s++)
      cell[s] = NULL;
    for (size_t s = 0; s < rr->nsteps; s++) {
      long c = step_column(a, rr->windows[s].step);
      if (c >= 0) cell[c] = &rr->windows[s];
    }
    for (size_t s = 0; s < a->nsteps; s++) {
      if (!first) ssa_out_char(o, ',');
      first = 0;
      if (cell[s])
        ssa_out_i64(o, heat_value(cell[s], metric));
      else
        ssa_out_str(o, "null");
    }
  }
  ssa_out_char(o, ']');
}

int ssa_report_heatmap(const ssa_analysis *a, ssa_out *o) {
  const ssa_window **cell = malloc((a->nsteps ? a->nsteps : 1) * sizeof *cell);
  if (!cell) return o->error = STEPSCOPE_E_NOMEM;
  ssa_out_str(o,
              "{\"heatmap_version\":1,\"generator\":\"stepscope analyze " STEPSCOPE_VERSION_STRING
              "\",\"run\":{\"path\":");
  ssa_out_json_string(o, a->run->dir);
  int world = 0;
  for (size_t i = 0; i < a->run->nranks; i++)
    if (a->run->ranks[i].world_size > world) world = a->run->ranks[i].world_size;
  ssa_out_printf(o, ",\"world\":%d,\"ranks_loaded\":%zu", world, a->run->nranks);
  ssa_out_field_i64_or_null(o, "step_time_ns", a->step_time_median);
  ssa_out_str(o, ",\"schedule\":");
  if (a->schedule_stages > 0) {
    ssa_out_str(o, "{\"name\":");
    ssa_out_json_string(o, a->schedule_name);
    ssa_out_printf(o, ",\"stages\":%d,\"microbatches\":%d}", a->schedule_stages,
                   a->schedule_microbatches);
  } else {
    ssa_out_str(o, "null");
  }
  ssa_out_str(o, "},\"steps\":[");
  for (size_t s = 0; s < a->nsteps; s++) {
    if (s) ssa_out_char(o, ',');
    ssa_out_i64(o, a->steps[s].step);
  }
  ssa_out_str(o, "],\"step_time_ns\":[");
  for (size_t s = 0; s < a->nsteps; s++) {
    if (s) ssa_out_char(o, ',');
    ssa_out_i64(o, a->steps[s].time);
  }
  ssa_out_str(o, "],\"ranks\":[");
  int first = 1;
  for (size_t i = 0; i < a->nranks; i++)
    if (selected(a, i)) {
      ssa_out_printf(o, "%s%d", first ? "" : ",", a->ranks[i].rank->rank);
      first = 0;
    }
  ssa_out_str(o, "],\"pipeline_stage\":[");
  first = 1;
  for (size_t i = 0; i < a->nranks; i++)
    if (selected(a, i)) {
      if (!first) ssa_out_char(o, ',');
      ssa_out_i64_or_null(o, a->ranks[i].stage);
      first = 0;
    }
  ssa_out_str(o, "],\"cells\":{");
  for (int m = 0; m < HEAT_N; m++) {
    ssa_out_printf(o, "%s\"%s\":", m ? "," : "", heat_names[m]);
    write_cells(a, m, cell, o);
  }
  ssa_out_char(o, '}');
  ssa_report_json_culprits(a, o);
  ssa_out_str(o, "}\n");
  free(cell);
  return o->error;
}
