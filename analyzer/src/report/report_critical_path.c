/*
 * report_critical_path.c — the critical path in the reports (docs/metrics.md "Critical
 * path"): the `critical_path` section of the JSON report (docs/report-schema.md) and its
 * lines in the text report. A file of its own so that the two reports' main files only call
 * it.
 */
#include <math.h>
#include <string.h>

#include "critical_path.h"
#include "ssa_report.h"

static double share(int64_t part, int64_t whole) {
  return whole > 0 ? (double)part / (double)whole : NAN;
}

static int rank_number(const ssa_analysis *a, uint32_t rank_idx) {
  return a->run->ranks[rank_idx].rank;
}

/* {"<name>_ns": value, ...} of n named times. */
static void times_obj(ssa_out *o, const char *const *names, const int64_t *v, int n) {
  ssa_out_char(o, '{');
  for (int k = 0; k < n; k++) {
    ssa_out_printf(o, "%s\"%s_ns\":", k ? "," : "", names[k]);
    ssa_out_i64(o, v[k]);
  }
  ssa_out_char(o, '}');
}

/* ,"<prefix>parts":{...by kind},"<prefix>idle":{...by cause} */
static void parts_fields(ssa_out *o, const char *prefix, const int64_t *kind,
                         const int64_t *cause) {
  ssa_out_printf(o, ",\"%sparts\":", prefix);
  times_obj(o, ssa_cp_kind_names, kind, SSA_CP_KIND_N);
  ssa_out_printf(o, ",\"%sidle\":", prefix);
  times_obj(o, ssa_cp_idle_names, cause, SSA_CP_IDLE_N);
}

static void top_list(const ssa_analysis *a, ssa_out *o, const ssa_cp_top *t, size_t n,
                     int64_t length) {
  ssa_out_char(o, '[');
  for (size_t i = 0; i < n; i++) {
    ssa_out_str(o, i ? ",{\"name\":" : "{\"name\":");
    ssa_out_json_string(o, ssa_name(a, t[i].name));
    ssa_out_printf(o, ",\"rank\":%d,\"kind\":\"%s\",\"ns\":", rank_number(a, t[i].rank_idx),
                   ssa_cp_kind_names[t[i].kind]);
    ssa_out_i64(o, t[i].time);
    ssa_out_field_double(o, "share", share(t[i].time, length));
    ssa_out_printf(o, ",\"segments\":%llu}", (unsigned long long)t[i].count);
  }
  ssa_out_char(o, ']');
}

static void by_rank_list(const ssa_analysis *a, ssa_out *o, const int64_t *by_rank,
                         int64_t length) {
  ssa_out_char(o, '[');
  int any = 0;
  for (size_t r = 0; r < a->nranks; r++) {
    if (!by_rank[r]) continue;
    ssa_out_printf(o, "%s{\"rank\":%d,\"ns\":", any++ ? "," : "", rank_number(a, (uint32_t)r));
    ssa_out_i64(o, by_rank[r]);
    ssa_out_field_double(o, "share", share(by_rank[r], length));
    ssa_out_char(o, '}');
  }
  ssa_out_char(o, ']');
}

void ssa_report_json_critical_path(const ssa_analysis *a, ssa_out *o) {
  const ssa_critical_path *cp = a->critical_path;
  ssa_out_str(o, ",\"critical_path\":");
  if (!cp || cp->nsteps == 0) {
    ssa_out_str(o, "null");
    return;
  }
  ssa_out_printf(o, "{\"steady_steps\":%llu,\"mismatched_steps\":%llu",
                 (unsigned long long)cp->steady, (unsigned long long)cp->mismatched_steps);
  if (cp->median_step < cp->nsteps)
    ssa_out_printf(o, ",\"median_step\":%lld", (long long)cp->steps[cp->median_step].step);
  ssa_out_field_i64(o, "median_length_ns", cp->median_length);
  ssa_out_field_i64(o, "median_step_time_ns", cp->median_step_time);
  parts_fields(o, "median_", cp->median_kind, cp->median_idle_cause);
  ssa_out_str(o, ",\"share\":{");
  for (int k = 0; k < SSA_CP_KIND_N; k++) {
    ssa_out_printf(o, "%s\"%s\":", k ? "," : "", ssa_cp_kind_names[k]);
    ssa_out_double(o, share(cp->total_kind[k], cp->total_length));
  }
  ssa_out_field_double(o, "host_untraced", share(cp->total_host_untraced, cp->total_length));
  ssa_out_str(o, "},\"by_rank\":");
  by_rank_list(a, o, cp->total_by_rank, cp->total_length);
  ssa_out_str(o, ",\"top_ops\":");
  top_list(a, o, cp->top, cp->ntop, cp->total_length);
  ssa_out_str(o, ",\"steps\":[");
  for (size_t i = 0; i < cp->nsteps; i++) {
    const ssa_cp_step *s = &cp->steps[i];
    ssa_out_printf(o, "%s{\"step\":%lld,\"end_rank\":%d", i ? "," : "", (long long)s->step,
                   rank_number(a, s->end_rank_idx));
    ssa_out_field_i64(o, "step_time_ns", s->step_time);
    ssa_out_field_i64(o, "length_ns", s->length);
    ssa_out_field_i64(o, "start_ns", s->start_rel);
    ssa_out_field_i64(o, "end_ns", s->end_rel);
    ssa_out_field_bool(o, "in_medians", s->in_medians);
    parts_fields(o, "", s->kind, s->idle_cause);
    ssa_out_field_i64(o, "host_untraced_ns", s->host_untraced);
    ssa_out_printf(o,
                   ",\"segments\":%llu,\"clipped\":%llu,\"by_rank\":", (unsigned long long)s->nseg,
                   (unsigned long long)s->clipped);
    by_rank_list(a, o, s->by_rank, s->length);
    ssa_out_str(o, ",\"top_ops\":");
    top_list(a, o, s->top, s->ntop, s->length);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "]}");
}

/* The top op of a kind among n, or NULL. */
static const ssa_cp_top *top_of_kind(const ssa_cp_top *t, size_t n, int kind) {
  for (size_t i = 0; i < n; i++)
    if (t[i].kind == kind) return &t[i];
  return NULL;
}

/* Two lines: the median steady step's path by kind (its communication's top op named), and
 * its top op. */
void ssa_report_text_critical_path(const ssa_analysis *a, FILE *f) {
  const ssa_critical_path *cp = a->critical_path;
  if (!cp || cp->steady == 0 || cp->median_step >= cp->nsteps) return;
  const ssa_cp_step *st = &cp->steps[cp->median_step];
  if (st->length <= 0) return;
  char safe[128], b1[32];
  int64_t L = st->length;
  fprintf(f, "\n== critical path (step %lld: the median of %zu steady step%s, %s) ==\n",
          (long long)st->step, cp->steady, cp->steady == 1 ? "" : "s",
          ssa_fmt_time(b1, sizeof b1, (double)L));
  fprintf(f, "critical path: %.0f %% compute, %.0f %% communication",
          100 * share(st->kind[SSA_CP_COMPUTE], L), 100 * share(st->kind[SSA_CP_COMM], L));
  const ssa_cp_top *c = top_of_kind(st->top, st->ntop, SSA_CP_COMM);
  if (c)
    fprintf(f, " (most: rank %d's %s)", rank_number(a, c->rank_idx),
            sc_text_safe(ssa_name(a, c->name), safe, 60));
  fprintf(f, ", %.0f %% copies, %.0f %% host", 100 * share(st->kind[SSA_CP_COPY], L),
          100 * share(st->kind[SSA_CP_HOST], L));
  if (st->host_untraced > 0) fprintf(f, " (%.0f %% untraced)", 100 * share(st->host_untraced, L));
  fprintf(f, ", %.0f %% idle", 100 * share(st->kind[SSA_CP_IDLE], L));
  if (st->kind[SSA_CP_IDLE] > 0) {
    int worst = 0;
    for (int k = 1; k < SSA_CP_IDLE_N; k++)
      if (st->idle_cause[k] > st->idle_cause[worst]) worst = k;
    fprintf(f, " (most: %s)", ssa_cp_idle_names[worst]);
  }
  fprintf(f, "; on rank");
  for (size_t r = 0, any = 0; r < cp->nranks; r++)
    if (st->by_rank[r])
      fprintf(f, "%s %d %.0f %%", any++ ? "," : "", rank_number(a, (uint32_t)r),
              100 * share(st->by_rank[r], L));
  fprintf(f, "\n");
  if (st->ntop) {
    const ssa_cp_top *t = &st->top[0];
    fprintf(f, "top op on it: %s (%s, rank %d), %.0f %% of the path",
            sc_text_safe(ssa_name(a, t->name), safe, 80), ssa_cp_kind_names[t->kind],
            rank_number(a, t->rank_idx), 100 * share(t->time, L));
    if (cp->mismatched_steps)
      fprintf(f, "; %llu step(s) whose path length differs from the step time",
              (unsigned long long)cp->mismatched_steps);
    fprintf(f, "\n");
  }
}
