/*
 * plan_ranking.c — how far `stepscope plan` can rank its layouts (ssa_plan.h; docs/plan.md
 * "How far the ranking goes").
 *
 * The planner orders every layout by predicted tokens/s, but its predictions carry an error, and
 * two layouts of one job are misordered whenever their predicted gap is smaller than the error
 * between them. That error was measured: between two published runs of one model on one device
 * at one sequence length the ratio of the planner's errors is within 9.0 % in three pairs of
 * four (bench/plan/published), between two layouts of a calibrated CPU run within 10.3 %
 * (bench/plan/RESULTS.md, the quiet machine). So the fitting layouts predicted within that band
 * (10 %) of the best are one undecided group. For each choice (dp, tp, ..., recomputation) the
 * planner lists the values found in the group (open: the user picks among them, e.g. by memory
 * headroom) and the values that only layouts outside it have (ruled out: every layout with them
 * is predicted more than the band slower); a choice with one open value is decided. It names the
 * layout of the group with the least memory. When no other layout is within the band, the best
 * is decided, and the gap to the next is given. A --what-if change is judged the same way:
 * its predicted tokens/s against the run's own layout's, under the same model, decide only
 * beyond the band.
 */
#include "ssa_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"

double plan_ranking_band(const plan_job *job) {
  return job->ranking_band > 0 ? job->ranking_band : PLAN_BAND_DEFAULT;
}

/* A field's value as one integer: the schedule is -1 without a pipeline, else
 * schedule x 64 + virtual stages; the recomputation is recompute + 4 x its modules. */
static int field_code(const mm_layout *l, int field) {
  switch (field) {
  case PLAN_FIELD_DP: return l->dp;
  case PLAN_FIELD_TP: return l->tp;
  case PLAN_FIELD_SP: return l->sp != 0;
  case PLAN_FIELD_PP: return l->pp;
  case PLAN_FIELD_CP: return l->cp;
  case PLAN_FIELD_EP: return l->ep > 0 ? l->ep : 1;
  case PLAN_FIELD_ZERO: return l->zero;
  case PLAN_FIELD_SCHEDULE:
    return l->pp > 1 ? (int)l->schedule * 64 +
                           (l->schedule == MM_SCHED_INTERLEAVED ? l->virtual_stages : 1)
                     : -1;
  case PLAN_FIELD_MICRO_BATCH: return l->micro_batch;
  case PLAN_FIELD_SHARD_GROUP: return l->shard_group;
  default: /* the recomputation, and what a selective one recomputes (Megatron's modules) */
    return (int)l->recompute +
           4 * (l->recompute == MM_RECOMPUTE_SELECTIVE ? l->recompute_modules : 0);
  }
}

static int values_has(const plan_field_values *s, int code) {
  for (int i = 0; i < s->n; i++)
    if (s->v[i] == code) return 1;
  return 0;
}

static void values_add(plan_field_values *s, int code) {
  if (values_has(s, code)) return;
  if (s->n == PLAN_RANK_VALUES)
    s->overflow = 1;
  else
    s->v[s->n++] = code;
}

void plan_rank_resolution(const plan_result *r, long n, double band, plan_ranking *out) {
  memset(out, 0, sizeof *out);
  out->band = band;
  out->least_memory = -1;
  out->next_gap = -1;
  if (n <= 0 || !r[0].fits || !(r[0].tokens_per_s > 0)) return;
  double floor = r[0].tokens_per_s * (1.0 - band);
  out->least_memory = 0;
  long i = 0;
  for (; i < n && r[i].fits && r[i].tokens_per_s >= floor; i++) { /* fastest fitting first */
    out->undecided++;
    for (int field = 0; field < PLAN_FIELDS; field++)
      values_add(&out->open[field], field_code(&r[i].layout, field));
    if (r[i].memory_total < r[out->least_memory].memory_total) out->least_memory = i;
  }
  if (out->undecided == 1 && i < n && r[i].fits)
    out->next_gap = 1.0 - r[i].tokens_per_s / r[0].tokens_per_s; /* as the band counts */
  for (; i < n && r[i].fits; i++)
    for (int field = 0; field < PLAN_FIELDS; field++) {
      int code = field_code(&r[i].layout, field);
      if (!values_has(&out->open[field], code)) values_add(&out->ruled_out[field], code);
    }
}

const char *plan_field_name(int field) {
  static const char *const names[PLAN_FIELDS] = {
      "dp",   "tp",       "sp",          "pp",        "cp",         "ep",
      "zero", "schedule", "micro_batch", "recompute", "shard_group"};
  return field >= 0 && field < PLAN_FIELDS ? names[field] : "?";
}

/* A value in the table's words, without the field's label ("4", "none", "interleaved v2"). */
static void code_name(int field, int code, char *buf, size_t size) {
  switch (field) {
  case PLAN_FIELD_SP: snprintf(buf, size, "%s", code ? "on" : "off"); break;
  case PLAN_FIELD_SCHEDULE:
    if (code < 0)
      snprintf(buf, size, "none");
    else if (code / 64 == MM_SCHED_INTERLEAVED)
      snprintf(buf, size, "interleaved v%d", code % 64);
    else
      snprintf(buf, size, "%s", mm_schedule_name((mm_schedule)(code / 64)));
    break;
  case PLAN_FIELD_RECOMPUTE:
    mm_recompute_text((mm_recompute)(code % 4), code / 4, buf, size);
    break;
  case PLAN_FIELD_SHARD_GROUP:
    if (code == 0) { /* sharded over the whole group */
      snprintf(buf, size, "off");
      break;
    }
    snprintf(buf, size, "%d", code);
    break;
  default: snprintf(buf, size, "%d", code); break;
  }
}

static const char *field_label(int field) {
  return field == PLAN_FIELD_MICRO_BATCH   ? "micro-batch"
         : field == PLAN_FIELD_SHARD_GROUP ? "hybrid shard group"
                                           : plan_field_name(field);
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* "; pp 1, 2" appended to buf (the values sorted; no "; " before the first list). */
static void append_values(char *buf, size_t size, int field, const plan_field_values *s) {
  int v[PLAN_RANK_VALUES], n = 0;
  for (int i = 0; i < s->n; i++) /* "schedule none" is "pp 1", said there */
    if (field != PLAN_FIELD_SCHEDULE || s->v[i] >= 0) v[n++] = s->v[i];
  qsort(v, (size_t)n, sizeof *v, cmp_int);
  size_t used = strlen(buf);
  for (int i = 0; i < n && used + 1 < size; i++) {
    char name[48];
    code_name(field, v[i], name, sizeof name);
    if (i)
      snprintf(buf + used, size - used, ", %s", name);
    else
      snprintf(buf + used, size - used, "%s%s %s", used ? "; " : "", field_label(field), name);
    used = strlen(buf);
  }
  if (s->overflow && used + 1 < size) snprintf(buf + used, size - used, ", ...");
}

/* Whether a choice is worth a word: not ep without experts, not sp when every layout of the
 * group has tp 1, not the schedule when every one has no pipeline (pp says it). */
static int field_applies(const plan_ranking *k, const plan_result *r, int field) {
  const plan_field_values *tp = &k->open[PLAN_FIELD_TP], *pp = &k->open[PLAN_FIELD_PP];
  if (field == PLAN_FIELD_EP) return r[0].layout.experts > 0;
  if (field == PLAN_FIELD_SHARD_GROUP) /* only where some layout shards hybrid */
    return k->open[field].n > 1 || k->ruled_out[field].n > 0 || k->open[field].v[0] > 0;
  if (field == PLAN_FIELD_SP) return !(tp->n == 1 && tp->v[0] == 1);
  if (field == PLAN_FIELD_SCHEDULE) return !(pp->n == 1 && pp->v[0] == 1);
  return 1;
}

void plan_print_ranking(FILE *f, const plan_ranking *k, const plan_result *r) {
  if (k->undecided <= 0) return;
  if (k->undecided == 1) {
    if (k->next_gap >= 0)
      fprintf(f,
              "\nranking: every other layout that fits is predicted at least %.1f %% slower than "
              "the best (fewer tokens/s), beyond the planner's %.0f %% error between two layouts "
              "(docs/plan.md): decided\n",
              100 * k->next_gap, 100 * k->band);
    else
      fprintf(f, "\nranking: the best is the only layout that fits\n");
    return;
  }
  fprintf(f,
          "\nranking: %ld layouts (#1-#%ld) are predicted within %.0f %% of the best, within the "
          "planner's error between two layouts (docs/plan.md): it cannot order them\n",
          k->undecided, k->undecided, 100 * k->band);
  char decided[512] = "", open[1024] = "", ruled[1024] = "";
  for (int field = 0; field < PLAN_FIELDS; field++) {
    if (!field_applies(k, r, field)) continue;
    const plan_field_values *o = &k->open[field];
    if (o->n == 1 && !o->overflow)
      append_values(decided, sizeof decided, field, o);
    else
      append_values(open, sizeof open, field, o);
    append_values(ruled, sizeof ruled, field, &k->ruled_out[field]);
  }
  fprintf(f, "  decided (every one of them): %s\n", decided[0] ? decided : "nothing");
  if (open[0]) fprintf(f, "  open (they differ): %s\n", open);
  if (ruled[0])
    fprintf(f, "  ruled out (every layout with it predicted > %.0f %% slower): %s\n", 100 * k->band,
            ruled);
  if (k->least_memory == 0)
    fprintf(f, "  the best also needs the least memory among them\n");
  else if (k->least_memory > 0) {
    const plan_result *m = &r[k->least_memory];
    char name[128];
    plan_layout_name(&m->layout, name, sizeof name);
    fprintf(f,
            "  the least memory among them: #%ld %s, %.2f GiB (predicted %.1f %% fewer "
            "tokens/s)\n",
            k->least_memory + 1, name, m->memory_total / (double)(1u << 30),
            100 * (1.0 - m->tokens_per_s / r[0].tokens_per_s));
  }
}

/* One field's values as a JSON array: numbers, sp as booleans, schedule and recompute as the
 * table's words. */
static void json_values(ssa_out *o, int field, const plan_field_values *s) {
  ssa_out_char(o, '[');
  for (int i = 0; i < s->n; i++) {
    if (i) ssa_out_char(o, ',');
    if (field == PLAN_FIELD_SP) {
      ssa_out_str(o, s->v[i] ? "true" : "false");
    } else if (field == PLAN_FIELD_SCHEDULE || field == PLAN_FIELD_RECOMPUTE) {
      char name[48];
      code_name(field, s->v[i], name, sizeof name);
      ssa_out_json_string(o, name);
    } else {
      ssa_out_printf(o, "%d", s->v[i]);
    }
  }
  ssa_out_char(o, ']');
}

int plan_write_ranking_json(ssa_out *o, const plan_ranking *k) {
  ssa_out_printf(o, "\"ranking\":{\"band\":%.9g,\"undecided\":%ld,", k->band, k->undecided);
  if (k->least_memory >= 0)
    ssa_out_printf(o, "\"least_memory_index\":%ld,", k->least_memory);
  else
    ssa_out_str(o, "\"least_memory_index\":null,");
  if (k->next_gap >= 0)
    ssa_out_printf(o, "\"next_gap\":%.6f,", k->next_gap);
  else
    ssa_out_str(o, "\"next_gap\":null,");
  ssa_out_str(o, "\"choices\":{");
  for (int field = 0; field < PLAN_FIELDS; field++) {
    ssa_out_printf(o, "%s\"%s\":{\"open\":", field ? "," : "", plan_field_name(field));
    json_values(o, field, &k->open[field]);
    ssa_out_str(o, ",\"ruled_out\":");
    json_values(o, field, &k->ruled_out[field]);
    ssa_out_printf(o, ",\"complete\":%s}",
                   k->open[field].overflow || k->ruled_out[field].overflow ? "false" : "true");
  }
  ssa_out_str(o, "}},");
  return o->error ? -1 : 0;
}

/* A what-if's change of tokens/s against the run's own layout, both under the same model. */
static double change_of(const plan_result *before, const plan_result *after) {
  return after->tokens_per_s / before->tokens_per_s - 1.0;
}

void plan_write_change_json(ssa_out *o, double band, const plan_result *before,
                            const plan_result *after) {
  if (!(before->tokens_per_s > 0) || !(after->tokens_per_s > 0)) return;
  double gain = change_of(before, after);
  ssa_out_printf(o,
                 "\"what_if\":{\"run_layout_tokens_per_s\":%.9g,\"tokens_per_s\":%.9g,"
                 "\"change\":%.6f,\"band\":%.9g,\"decided\":%s},",
                 before->tokens_per_s, after->tokens_per_s, gain, band,
                 fabs(gain) > band ? "true" : "false");
}

void plan_print_change(FILE *f, double band, const plan_result *before, const plan_result *after) {
  if (!(before->tokens_per_s > 0) || !(after->tokens_per_s > 0)) return;
  double gain = change_of(before, after);
  char change[64]; /* below the print's 0.1 %, neither more nor fewer */
  if (fabs(gain) < 0.0005)
    snprintf(change, sizeof change, "the same");
  else
    snprintf(change, sizeof change, "%.1f %% %s", 100 * fabs(gain), gain >= 0 ? "more" : "fewer");
  if (fabs(gain) > band)
    fprintf(f,
            "\nverdict: %s tokens/s than the run's own layout under the same model "
            "(%.4g -> %.4g), beyond the planner's %.0f %% error between two layouts "
            "(docs/plan.md)\n",
            change, before->tokens_per_s, after->tokens_per_s, 100 * band);
  else
    fprintf(f,
            "\nverdict: undecided: %s tokens/s %s the run's own layout under the same "
            "model (%.4g -> %.4g), within the planner's %.0f %% error between two layouts "
            "(docs/plan.md): it cannot tell whether the change helps\n",
            change, fabs(gain) < 0.0005 ? "as" : "than", before->tokens_per_s, after->tokens_per_s,
            100 * band);
}
