/*
 * replay_report.c — see ssa_replay_report.h: the text table and the JSON document of
 * `stepscope replay` (docs/replay.md names every field).
 */
#include <stdio.h>
#include <string.h>

#include "ssa_replay_report.h"

static double change(int64_t to, int64_t from) {
  return from > 0 ? (double)(to - from) / (double)from : 0.0;
}

/* The path's composition: the shares of its kinds. */
static void path_text(ssa_out *o, const int64_t *kind) {
  int64_t total = 0;
  for (int c = 0; c < SSA_CP_KIND_N; c++)
    total += kind[c];
  for (int c = 0; c < SSA_CP_KIND_N; c++)
    if (kind[c] > 0)
      ssa_out_printf(o, " %s %.0f%%", c == SSA_CP_IDLE ? "device idle" : ssa_cp_kind_names[c],
                     total ? 100.0 * (double)kind[c] / (double)total : 0.0);
}

/* A delay edit (delay=MS, no-delay) selects ranks, not ops or calls. */
static int is_delay_edit(const char *text) {
  const char *action = strrchr(text, ':');
  action = action ? action + 1 : text;
  return !strncmp(action, "delay=", 6) || !strcmp(action, "no-delay");
}

void ssa_replay_report_text(const void *rp, ssa_out *o) {
  const ssa_replay_report *r = rp;
  const ssa_replay *p = r->plain, *e = r->edited;
  char b1[32], b2[32], b3[32];
  ssa_out_printf(o, "replay of %s: %zu steps, %llu nodes\n", r->run_path, p->nsteps,
                 (unsigned long long)p->nodes);
  for (size_t i = 0; i < r->nedits; i++) {
    ssa_out_printf(o, "what-if: %s", r->edits[i]);
    if (e && i < e->nedits && (e->selected_ops[i] || e->selected_calls[i]))
      ssa_out_printf(o, " (selects %llu ops, %llu host calls)",
                     (unsigned long long)e->selected_ops[i],
                     (unsigned long long)e->selected_calls[i]);
    else if (e && i < e->nedits && !is_delay_edit(r->edits[i]))
      ssa_out_str(o, " (selects no op or call)");
    ssa_out_char(o, '\n');
  }
  ssa_out_printf(o, "\n%8s %12s %12s %8s", "step", "measured", "replayed", "error");
  if (e) ssa_out_printf(o, " %12s %8s", "predicted", "change");
  ssa_out_str(o, "  predicted critical path\n");
  for (size_t k = 0; k < p->nsteps; k++) {
    const ssa_replay_step *s = &p->steps[k], *es = e ? &e->steps[k] : s;
    if (s->predicted < 0) continue;
    ssa_out_printf(o, "%8lld %12s %12s %+7.1f%%", (long long)s->step,
                   ssa_fmt_time(b1, sizeof b1, (double)s->measured),
                   ssa_fmt_time(b2, sizeof b2, (double)s->predicted),
                   100.0 * change(s->predicted, s->measured));
    if (e)
      ssa_out_printf(o, " %12s %+7.1f%%", ssa_fmt_time(b3, sizeof b3, (double)es->predicted),
                     100.0 * change(es->predicted, s->predicted));
    ssa_out_str(o, " ");
    path_text(o, es->path_kind);
    ssa_out_str(o, s->in_medians ? "\n" : "  (not in the medians)\n");
  }
  ssa_out_printf(o,
                 "\nreplay fidelity over %zu steady steps: median error %.1f%%, worst %.1f%%"
                 " (median step %s measured, %s replayed)\n",
                 p->steady, 100.0 * p->median_error, 100.0 * p->worst_error,
                 ssa_fmt_time(b1, sizeof b1, (double)p->median_measured),
                 ssa_fmt_time(b2, sizeof b2, (double)p->median_predicted));
  if (e) {
    ssa_out_printf(o,
                   "what-if: median step %s predicted (%+.1f%% against the replay; %s "
                   "measured)\n",
                   ssa_fmt_time(b1, sizeof b1, (double)e->median_predicted),
                   100.0 * change(e->median_predicted, p->median_predicted),
                   ssa_fmt_time(b2, sizeof b2, (double)p->median_measured));
    if (e->delay_gaps)
      ssa_out_printf(o, "delay edits changed %llu host gaps\n", (unsigned long long)e->delay_gaps);
  }
  if (p->cycles)
    ssa_out_printf(o, "dependency cycles cut (ties in time): %llu\n",
                   (unsigned long long)p->cycles);
}

static void path_json(ssa_out *o, const char *key, const int64_t *kind, int64_t host_gaps) {
  ssa_out_key(o, key);
  ssa_out_char(o, '{');
  for (int c = 0; c < SSA_CP_KIND_N; c++)
    ssa_out_printf(o, "%s\"%s_ns\":%lld", c ? "," : "",
                   c == SSA_CP_IDLE ? "device_idle" : ssa_cp_kind_names[c], (long long)kind[c]);
  if (host_gaps >= 0) ssa_out_field_i64(o, "host_gaps_ns", host_gaps);
  ssa_out_char(o, '}');
}

static void summary_json(ssa_out *o, const char *key, const ssa_replay *p) {
  ssa_out_key(o, key);
  ssa_out_printf(o, "{\"steady_steps\":%zu", p->steady);
  ssa_out_field_i64(o, "median_measured_ns", p->median_measured);
  ssa_out_field_i64(o, "median_predicted_ns", p->median_predicted);
  ssa_out_field_double(o, "median_error", p->median_error);
  ssa_out_field_double(o, "worst_error", p->worst_error);
  path_json(o, "median_path", p->median_path_kind, -1);
  ssa_out_field_u64(o, "nodes", p->nodes);
  ssa_out_field_u64(o, "cycles", p->cycles);
  ssa_out_field_u64(o, "delay_gaps", p->delay_gaps);
  ssa_out_field_i64(o, "device_waits_ns", p->device_waits);
  if (p->nedits) {
    ssa_out_key(o, "selected");
    ssa_out_char(o, '[');
    for (size_t i = 0; i < p->nedits; i++)
      ssa_out_printf(o, "%s{\"ops\":%llu,\"calls\":%llu}", i ? "," : "",
                     (unsigned long long)p->selected_ops[i],
                     (unsigned long long)p->selected_calls[i]);
    ssa_out_char(o, ']');
  }
  ssa_out_char(o, '}');
}

void ssa_replay_report_json(const void *rp, ssa_out *o) {
  const ssa_replay_report *r = rp;
  const ssa_replay *p = r->plain, *e = r->edited;
  ssa_out_str(o, "{\"run\":");
  ssa_out_json_string(o, r->run_path);
  ssa_out_key(o, "edits");
  ssa_out_json_strings(o, r->edits, r->nedits);
  ssa_out_key(o, "steps");
  ssa_out_char(o, '[');
  for (size_t k = 0; k < p->nsteps; k++) {
    const ssa_replay_step *s = &p->steps[k], *es = e ? &e->steps[k] : s;
    ssa_out_printf(o, "%s{\"step\":%lld", k ? "," : "", (long long)s->step);
    ssa_out_field_bool(o, "in_medians", s->in_medians);
    ssa_out_field_i64(o, "measured_ns", s->measured);
    ssa_out_field_i64_or_null(o, "replayed_ns", s->predicted);
    ssa_out_field_double(o, "error", change(s->predicted, s->measured));
    ssa_out_field_i64_or_null(o, "predicted_ns", es->predicted);
    ssa_out_field_i64(o, "end_rank_index", es->end_rank_idx);
    path_json(o, "path", es->path_kind, es->path_host_gaps);
    ssa_out_char(o, '}');
  }
  ssa_out_char(o, ']');
  summary_json(o, "replay", p);
  if (e) summary_json(o, "what_if", e);
  ssa_out_str(o, "}\n");
}
