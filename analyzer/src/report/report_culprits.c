/*
 * report_culprits.c — who made the others wait, as JSON: the straggler ranking, the culprit rows
 * (beyond noise, and every candidate) and the straggler verdict (culprits.c,
 * culprit_verdict.c). One writer shared by the JSON report (report_json.c, docs/report-schema.md)
 * and the heatmap file (report_heatmap.c), so that both say the same thing in the same words.
 */
#include <stdlib.h>

#include "ssa_ops.h"
#include "ssa_report.h"

/* One culprit row (culprits.c): culprits (beyond noise) and culprit_candidates (all). */
static void write_culprit_row(ssa_out *o, const ssa_culprit *c, size_t i) {
  ssa_out_printf(o, "%s{\"rank\":%d,\"phase\":\"%s\",\"caused_wait_ns\":", i ? "," : "", c->rank,
                 ssa_phase_names[c->phase]);
  ssa_out_i64(o, c->caused);
  ssa_out_str(o, ",\"phase_excess_ns\":");
  ssa_out_i64(o, c->excess);
  ssa_out_printf(
      o, ",\"steps\":%llu,\"instances\":%llu,\"via_victim_steps\":%llu,\"beyond_noise\":%s}",
      (unsigned long long)c->steps, (unsigned long long)c->instances,
      (unsigned long long)c->via_victim, c->beyond_noise ? "true" : "false");
}

/* The ranks that made others wait, by caused wait descending (ties: in rank order). */
static void write_stragglers(ssa_out *o, const ssa_analysis *a) {
  /* key -caused: ascending (key, index) is caused descending, ties in rank order */
  ssa_key_index *keys = malloc((a->nranks ? a->nranks : 1) * sizeof *keys);
  size_t n = 0;
  for (size_t i = 0; keys && i < a->nranks; i++)
    if (a->ranks[i].coll_caused > 0) keys[n++] = (ssa_key_index){-a->ranks[i].coll_caused, i};
  if (n > 1) qsort(keys, n, sizeof *keys, ssa_cmp_key_index);
  for (size_t k = 0; k < n; k++) {
    const ssa_rank_result *rr = &a->ranks[keys[k].index];
    ssa_out_printf(o, "%s{\"rank\":%d,\"caused_wait_ns\":", k ? "," : "", rr->rank->rank);
    ssa_out_i64(o, rr->coll_caused);
    ssa_out_field_u64(o, "arrived_last", rr->coll_last);
    ssa_out_field_i64(o, "own_wait_ns", rr->coll_wait);
    ssa_out_char(o, '}');
  }
  free(keys);
}

/* The straggler verdict (culprit_verdict.c): the test's numbers and its top candidate. */
static void write_culprit_verdict(ssa_out *o, const ssa_culprit_verdict *v) {
  static const char *const status[] = {"no late arrival", "culprit", "no culprit beyond noise",
                                       "undecided"};
  ssa_out_printf(o, "{\"status\":\"%s\",\"steps_judged\":%llu,\"steps_needed\":%llu",
                 status[v->status], (unsigned long long)v->steps,
                 (unsigned long long)v->steps_needed);
  ssa_out_field_i64(o, "noise_ns", v->noise_ns);
  ssa_out_field_i64(o, "threshold_ns", v->threshold_ns);
  if (v->rank < 0) {
    ssa_out_str(o, ",\"candidate\":null}");
    return;
  }
  ssa_out_printf(o, ",\"candidate\":{\"rank\":%d,\"phase\":", v->rank);
  if (v->phase >= 0)
    ssa_out_printf(o, "\"%s\"", ssa_phase_names[v->phase]);
  else
    ssa_out_str(o, "null");
  ssa_out_field_u64(o, "steps_late", v->steps_late);
  ssa_out_field_i64(o, "effect_median_ns", v->effect_median);
  ssa_out_field_i64(o, "effect_max_ns", v->effect_max);
  ssa_out_field_i64(o, "caused_wait_ns", v->caused);
  ssa_out_field_i64(o, "phase_excess_ns", v->phase_excess);
  ssa_out_printf(o, ",\"phase_steps\":%llu,\"via_victim_steps\":%llu}",
                 (unsigned long long)v->phase_steps, (unsigned long long)v->phase_via_victim);
  /* the other ranks beyond noise: how many, and the first few (tied: not told apart) */
  ssa_out_field_u64(o, "also_beyond_noise", v->nalso);
  ssa_out_str(o, ",\"also\":[");
  for (size_t k = 0; k < v->nalso && k < SSA_CULPRIT_ALSO; k++) {
    const ssa_culprit_also *c = &v->also[k];
    ssa_out_printf(o, "%s{\"rank\":%d,\"tied\":%s", k ? "," : "", c->rank,
                   c->tied ? "true" : "false");
    ssa_out_field_u64(o, "steps_late", c->steps_late);
    ssa_out_field_i64(o, "effect_median_ns", c->effect_median);
    ssa_out_field_i64(o, "caused_wait_ns", c->caused);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "]}");
}

void ssa_report_json_culprits(const ssa_analysis *a, ssa_out *o) {
  ssa_out_str(o, ",\"stragglers\":[");
  write_stragglers(o, a);
  ssa_out_str(o, "],\"culprits\":[");
  for (size_t i = 0, n = 0; i < a->nculprits; i++)
    if (a->culprits[i].beyond_noise) write_culprit_row(o, &a->culprits[i], n++);
  ssa_out_str(o, "],\"culprit_candidates\":[");
  for (size_t i = 0; i < a->nculprits; i++)
    write_culprit_row(o, &a->culprits[i], i);
  ssa_out_str(o, "],\"culprit_verdict\":");
  write_culprit_verdict(o, &a->culprit_verdict);
}
