/*
 * diff_causes_report.c — the step time's change in parts (diff_causes.c) as the text report's
 * section, the JSON's `step_time_parts` and the Markdown summary's first list: one
 * decomposition, three forms (docs/diff.md "What changed the step time").
 */
#include <math.h>
#include <stdio.h>

#include "ssa_diff.h"

/* A part is shown when either side has some of it. */
static int shown(const ssa_diff_decomp *x, int p) {
  return x->part_a[p] != 0 || x->part_b[p] != 0;
}

static double share(const ssa_diff_decomp *x, int p) {
  double total = x->mean_b - x->mean_a;
  return total != 0 ? (x->part_b[p] - x->part_a[p]) / total : NAN;
}

void ssa_diff_decomp_text(const ssa_diff *d, FILE *f) {
  const ssa_diff_decomp *x = &d->decomp;
  if (!x->known) return;
  char a[32], b[32], c[32];
  fprintf(f,
          "\n== what changed the step time (mean over %zu and %zu steps of the rank that set each "
          "step; the parts add up to the change) ==\n",
          x->steps_a, x->steps_b);
  fprintf(f, "%-28s %12s %12s %12s %9s\n", "part", "A", "B", "change", "share");
  for (int i = 0; i < SSA_DPART_N; i++) {
    int p = x->order[i];
    if (!shown(x, p)) continue;
    ssa_fmt_time(a, sizeof a, x->part_a[p]);
    ssa_fmt_time(b, sizeof b, x->part_b[p]);
    ssa_fmt_time(c, sizeof c, x->part_b[p] - x->part_a[p]);
    double s = share(x, p);
    if (isnan(s))
      fprintf(f, "%-28s %12s %12s %12s %9s\n", ssa_diff_part_name(p), a, b, c, "-");
    else
      fprintf(f, "%-28s %12s %12s %12s %8.1f%%\n", ssa_diff_part_name(p), a, b, c, 100.0 * s);
  }
  ssa_fmt_time(a, sizeof a, x->mean_a);
  ssa_fmt_time(b, sizeof b, x->mean_b);
  ssa_fmt_time(c, sizeof c, x->mean_b - x->mean_a);
  fprintf(f, "%-28s %12s %12s %12s %9s\n", "mean step time", a, b, c, "100.0%");
  if (x->pipeline) {
    ssa_fmt_time(a, sizeof a, x->bubble_a);
    ssa_fmt_time(b, sizeof b, x->bubble_b);
    fprintf(f, "(of which pipeline bubble, across idle and exposed transfers: %s -> %s)\n", a, b);
  }
  fprintf(f, "(the headline compares medians; these parts decompose the mean)\n");
}

void ssa_diff_decomp_json(const ssa_diff *d, ssa_out *o) {
  const ssa_diff_decomp *x = &d->decomp;
  ssa_out_str(o, ",\"step_time_parts\":");
  if (!x->known) {
    ssa_out_str(o, "null");
    return;
  }
  ssa_out_printf(o,
                 "{\"basis\":\"mean over the judged steps of the rank that set each step\","
                 "\"steps_a\":%zu,\"steps_b\":%zu,\"mean_a_ns\":",
                 x->steps_a, x->steps_b);
  ssa_out_i64(o, (int64_t)llround(x->mean_a));
  ssa_out_str(o, ",\"mean_b_ns\":");
  ssa_out_i64(o, (int64_t)llround(x->mean_b));
  ssa_out_str(o, ",\"change_ns\":");
  ssa_out_i64(o, (int64_t)llround(x->mean_b - x->mean_a));
  ssa_out_str(o, ",\"parts\":[");
  int n = 0;
  for (int i = 0; i < SSA_DPART_N; i++) {
    int p = x->order[i];
    if (!shown(x, p)) continue;
    ssa_out_printf(o, "%s{\"part\":\"%s\",\"name\":\"%s\",\"a_ns\":", n++ ? "," : "",
                   ssa_diff_part_key(p), ssa_diff_part_name(p));
    ssa_out_i64(o, (int64_t)llround(x->part_a[p]));
    ssa_out_str(o, ",\"b_ns\":");
    ssa_out_i64(o, (int64_t)llround(x->part_b[p]));
    ssa_out_str(o, ",\"change_ns\":");
    ssa_out_i64(o, (int64_t)llround(x->part_b[p] - x->part_a[p]));
    ssa_out_str(o, ",\"share\":");
    double s = share(x, p);
    if (isnan(s))
      ssa_out_str(o, "null");
    else
      ssa_out_double(o, s);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "],\"bubble_a_ns\":");
  if (x->pipeline)
    ssa_out_i64(o, (int64_t)llround(x->bubble_a));
  else
    ssa_out_str(o, "null");
  ssa_out_str(o, ",\"bubble_b_ns\":");
  if (x->pipeline)
    ssa_out_i64(o, (int64_t)llround(x->bubble_b));
  else
    ssa_out_str(o, "null");
  ssa_out_char(o, '}');
}

void ssa_diff_decomp_markdown(const ssa_diff *d, ssa_out *o) {
  const ssa_diff_decomp *x = &d->decomp;
  if (!x->known || x->mean_b == x->mean_a) return;
  char a[32], b[32], c[32];
  ssa_fmt_time(a, sizeof a, x->mean_a);
  ssa_fmt_time(b, sizeof b, x->mean_b);
  ssa_fmt_time(c, sizeof c, x->mean_b - x->mean_a);
  ssa_out_printf(o, "\n**What changed the step time** (mean step %s → %s, %s; the parts add up)\n",
                 a, b, c);
  for (int i = 0, listed = 0; i < SSA_DPART_N && listed < 4; i++) {
    int p = x->order[i];
    double s = share(x, p);
    if (!shown(x, p) || !(fabs(s) >= 0.05)) continue; /* parts of 5 % of the change or more */
    ssa_fmt_time(a, sizeof a, x->part_a[p]);
    ssa_fmt_time(b, sizeof b, x->part_b[p]);
    ssa_fmt_time(c, sizeof c, x->part_b[p] - x->part_a[p]);
    ssa_out_printf(o, "- %s: %s → %s (%s, %.0f %% of the change)\n", ssa_diff_part_name(p), a, b, c,
                   100.0 * s);
    listed++;
  }
}
