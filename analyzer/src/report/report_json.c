/*
 * report_json.c — the JSON report of `stepscope analyze --json FILE`,
 * schema_version 1, documented field by field in docs/report-schema.md.
 * Times are integer nanoseconds; points in time are relative to the run
 * origin after clock alignment (the same origin as the Chrome export).
 * Ratios are numbers or null when undefined (overlap_ratio with no comm).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_ops.h"
#include "ssa_report.h"

/* num / den, NaN (null) when den is not positive. */
static double ratio(int64_t num, int64_t den) {
  return den > 0 ? (double)num / (double)den : NAN;
}

/* A predicted or measured amount, NaN (null) when unknown (negative). */
static double known_or_nan(double v) {
  return v >= 0 ? v : NAN;
}

static void idle_obj(ssa_out *o, const int64_t *c) {
  ssa_out_char(o, '{');
  for (int k = 0; k < SSA_IDLE_N; k++) {
    if (k) ssa_out_char(o, ',');
    ssa_out_printf(o, "\"%s_ns\":", ssa_idle_cause_names[k]);
    ssa_out_i64(o, c[k]);
  }
  ssa_out_char(o, '}');
}

static void window_obj(const ssa_analysis *a, const ssa_rank_result *rr, const ssa_window *w,
                       ssa_out *o) {
  const ssa_run *run = a->run;
  ssa_out_str(o, "{\"step\":");
  if (w->step < 0 && w == &rr->totals)
    ssa_out_str(o, "null");
  else
    ssa_out_i64(o, w->step);
  ssa_out_field_i64(o, "start_ns", ssa_rel_time(run, rr->rank, w->start));
  ssa_out_field_i64(o, "end_ns", ssa_rel_time(run, rr->rank, w->end));
  ssa_out_field_i64(o, "span_ns", w->span);
  ssa_out_field_i64(o, "busy_ns", w->busy);
  ssa_out_field_i64(o, "idle_ns", w->idle);
  ssa_out_field_i64(o, "compute_ns", w->compute);
  ssa_out_field_i64(o, "comm_ns", w->comm);
  ssa_out_field_i64(o, "overlap_ns", w->overlap);
  ssa_out_field_i64(o, "exposed_comm_ns", w->exposed_comm);
  ssa_out_field_i64(o, "exposed_mem_ns", w->exposed_mem);
  ssa_out_field_double(o, "overlap_ratio", ratio(w->overlap, w->comm));
  ssa_out_field_i64(o, "bubble_ns", w->bubble);
  ssa_out_field_double(o, "bubble_ratio", ratio(w->bubble, w->span));
  ssa_out_field_double(o, "bubble_theory_ratio", rr->bubble_theory);
  ssa_out_field_double(o, "bubble_excess_ratio", ratio(w->bubble, w->span) - rr->bubble_theory);
  ssa_out_field_i64(o, "pipeline_comm_only_ns", w->pipeline_comm_only);
  if (rr->pipeline && w->has_bubble_causes) {
    ssa_out_str(o, ",\"bubble_causes\":{");
    for (int k = 0; k < SSA_BUBBLE_N; k++) {
      ssa_out_printf(o, "%s\"%s_ns\":", k ? "," : "", ssa_bubble_cause_names[k]);
      ssa_out_i64(o, w->bubble_cause[k]);
    }
    ssa_out_char(o, '}');
    ssa_out_field_i64_or_null(o, "imbalance_stage", w->imbalance_stage);
    ssa_out_field_i64_or_null(o, "schedule_idle_ns", w->schedule_idle);
    ssa_out_field_i64_or_null(o, "schedule_idle_balanced_ns", w->schedule_idle_balanced);
    if (w->late_from_rank >= 0) {
      ssa_out_printf(o, ",\"late_upstream_from\":{\"rank\":%d,\"phase\":\"%s\",\"wait_ns\":",
                     w->late_from_rank, ssa_phase_names[w->late_from_phase]);
      ssa_out_i64(o, w->late_from_ns);
      ssa_out_char(o, '}');
    } else {
      ssa_out_str(o, ",\"late_upstream_from\":null");
    }
  } else if (rr->pipeline) {
    ssa_out_str(o, ",\"bubble_causes\":null,\"imbalance_stage\":null");
  }
  ssa_out_field_bool(o, "projected", w->projected);
  ssa_out_field_i64_or_null(o, "device_latency_ns", w->device_latency);
  ssa_out_field_bool(o, "cut_by_trace_end", w->cut);
  ssa_out_str(o, ",\"idle_breakdown\":");
  idle_obj(o, w->idle_cause);
  ssa_out_str(o, ",\"launch\":{\"count\":");
  ssa_out_u64(o, w->launch.count);
  if (w->launch.count) {
    ssa_out_field_i64(o, "min_ns", w->launch.min);
    ssa_out_field_i64(o, "p50_ns", w->launch.p50);
    ssa_out_field_i64(o, "p90_ns", w->launch.p90);
    ssa_out_field_i64(o, "p99_ns", w->launch.p99);
    ssa_out_field_i64(o, "max_ns", w->launch.max);
    ssa_out_field_double(o, "mean_ns", w->launch.mean);
  }
  ssa_out_char(o, '}');
  ssa_out_field_bool(o, "cpu_bound", w->cpu_bound);
  ssa_out_char(o, '}');
}

static int selected(const ssa_analysis *a, const ssa_rank_result *rr) {
  return a->opt.rank < 0 || rr->rank->rank == a->opt.rank;
}

static const char *lane_kind_name(uint8_t k) {
  return k == SSA_LANE_GPU ? "gpu" : k == SSA_LANE_CPU ? "cpu" : "host";
}

/* How the rank's ops were classified (comm_rules.h): by evidence, per
 * built-in family that classified any op, per user rule (every rule, so that
 * a rule that matched nothing shows 0), and its communication by op kind. */
static void class_count(ssa_out *o, const ssa_class_count *c) {
  ssa_out_printf(o, "\"ops\":%llu,\"time_ns\":", (unsigned long long)c->ops);
  ssa_out_i64(o, c->time_ns);
}

static void classification_obj(const ssa_rank *r, ssa_out *o) {
  const ssa_comm_tally *t = &r->tally;
  ssa_out_str(o, ",\"classification\":{\"evidence\":{");
  class_count(o, &t->evidence);
  ssa_out_str(o, "},\"families\":[");
  int first = 1;
  for (int f = 0; f < ssa_comm_nfamilies; f++) {
    if (!t->family[f].ops) continue;
    ssa_out_printf(o, "%s{\"family\":\"%s\",", first ? "" : ",", ssa_comm_families[f].id);
    class_count(o, &t->family[f]);
    ssa_out_char(o, '}');
    first = 0;
  }
  ssa_out_str(o, "],\"user_rules\":[");
  for (size_t u = 0; u < t->nuser && r->comm_rules && u < r->comm_rules->n; u++) {
    const ssa_comm_rule *rule = &r->comm_rules->rule[u];
    ssa_out_printf(o, "%s{\"option\":\"%s\",\"class\":\"%s\",\"pattern\":", u ? "," : "",
                   ssa_comm_rule_option(rule), rule->comm ? "comm" : "compute");
    ssa_out_json_string(o, rule->pattern);
    ssa_out_field_string(o, "origin", rule->origin);
    ssa_out_char(o, ',');
    class_count(o, &t->user[u]);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "],\"comm_op_kinds\":[");
  first = 1;
  for (int k = 0; k < SSA_COMM_KIND_N; k++) {
    if (!t->kind[k].ops) continue;
    ssa_out_printf(o, "%s{\"op\":\"%s\",", first ? "" : ",", ssa_comm_kind_name(k));
    class_count(o, &t->kind[k]);
    ssa_out_char(o, '}');
    first = 0;
  }
  ssa_out_str(o, "]}");
}

/* run */
static void json_run(const ssa_analysis *a, ssa_out *o) {
  const ssa_run *run = a->run;
  ssa_out_str(o, ",\"run\":{\"path\":");
  ssa_out_json_string(o, run->dir);
  int world = 0;
  for (size_t i = 0; i < run->nranks; i++)
    if (run->ranks[i].world_size > world) world = run->ranks[i].world_size;
  ssa_out_printf(o, ",\"world\":%d,\"ranks_loaded\":%zu,\"origin_ns\":", world, run->nranks);
  ssa_out_i64(o, run->origin);
  ssa_out_str(o, ",\"config\":");
  const char *config = run->nranks && run->ranks[0].config_json && run->ranks[0].config_json[0]
                           ? run->ranks[0].config_json
                           : "{}";
  if (ssa_json_valid(config)) {
    ssa_out_utf8(o, config);
  } else { /* not JSON (a damaged or foreign header): kept as text */
    ssa_out_str(o, "{\"unparsed\":");
    ssa_out_json_string(o, config);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, ",\"devices\":[");
  for (size_t i = 0; i < run->nranks; i++) {
    const ssa_rank *r = &run->ranks[i];
    ssa_out_printf(o, "%s{\"rank\":%d,\"host\":", i ? "," : "", r->rank);
    ssa_out_json_string(o, r->hostname);
    ssa_out_field_string(o, "device", r->device_name);
    ssa_out_field_string(o, "producer", r->producer);
    ssa_out_field_string(o, "path", r->path);
    ssa_out_char(o, '}');
  }
  ssa_out_char(o, ']');
  ssa_out_field_i64_or_null(o, "step_time_ns", a->step_time_median);
  ssa_out_field_i64_or_null(o, "device_latency_ns", a->device_latency_median);
  ssa_out_str(o, ",\"step_windows\":\"iteration\"");
  ssa_out_str(o, ",\"steps\":[");
  for (size_t i = 0; i < a->nsteps; i++) {
    const ssa_run_step *s = &a->steps[i];
    ssa_out_printf(o, "%s{\"step\":", i ? "," : "");
    ssa_out_i64(o, s->step);
    ssa_out_field_i64(o, "start_ns", s->start_rel);
    ssa_out_field_i64(o, "end_ns", s->end_rel);
    ssa_out_field_i64(o, "time_ns", s->time);
    ssa_out_field_i64_or_null(o, "device_latency_ns", s->device_latency);
    ssa_out_field_bool(o, "cut_by_trace_end", s->cut);
    ssa_out_field_bool(o, "stub", s->stub);
    ssa_out_field_double(o, "mfu", s->mfu);
    ssa_out_field_double(o, "hfu", s->hfu);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "],\"launch_gap_threshold_ns\":");
  ssa_out_i64(o, a->launch_gap_ns);
  ssa_out_str(o, ",\"schedule\":");
  if (a->schedule_stages > 0) {
    ssa_out_str(o, "{\"name\":");
    ssa_out_json_string(o, a->schedule_name);
    ssa_out_printf(
        o, ",\"stages\":%d,\"microbatches\":%d,\"virtual_stages\":%d,\"bubble_theory_ratio\":",
        a->schedule_stages, a->schedule_microbatches, a->schedule_virtual);
    ssa_out_double(o, a->bubble_theory);
    ssa_out_char(o, '}');
  } else {
    ssa_out_str(o, "null");
  }
  ssa_out_char(o, '}');
}

/* mfu */
static void json_mfu(const ssa_analysis *a, ssa_out *o) {
  ssa_out_str(o, ",\"mfu\":");
  if (!isnan(a->model_flops_per_step)) {
    ssa_out_str(o, "{\"mfu\":");
    ssa_out_double(o, a->mfu);
    ssa_out_field_double(o, "hfu", a->hfu);
    ssa_out_field_double(o, "model_flops_per_step", a->model_flops_per_step);
    ssa_out_field_double(o, "hardware_flops_per_step", a->hardware_flops_per_step);
    ssa_out_field_double(o, "peak_flops_per_device", a->peak_flops_per_device);
    ssa_out_field_double(o, "tokens_per_step", a->tokens_per_step);
    ssa_out_field_i64(o, "world", a->flops_world);
    ssa_out_field_i64_or_null(o, "step_time_ns", a->step_time_median);
    ssa_out_char(o, '}');
  } else {
    ssa_out_str(o, "null");
  }
}

/* mfu_from_op_flops: the ops' FLOPs of a PyTorch trace (docs/ops.md), when the metadata has none */
static void json_op_mfu(const ssa_analysis *a, ssa_out *o) {
  const ssa_op_flops_mfu *m = &a->op_mfu;
  ssa_out_str(o, ",\"mfu_from_op_flops\":");
  if (!m->known) {
    ssa_out_str(o, "null");
    return;
  }
  ssa_out_str(o, "{\"mfu\":");
  ssa_out_double(o, m->mfu);
  ssa_out_field_double(o, "flops", m->flops);
  ssa_out_field_string(o, "peak_dtype", ssa_peak_dtype_names[m->dtype]);
  ssa_out_field_double(o, "peak_flops_per_device", m->peak > 0 ? m->peak : NAN);
  ssa_out_field_i64(o, "steps_time_ns", m->steps_time);
  ssa_out_field_i64(o, "ranks", m->ranks);
  ssa_out_str(o, ",\"ceilings\":{\"bytes_per_s\":"); /* the roofline's (docs/ops.md) */
  ssa_out_double(o, m->bandwidth > 0 ? m->bandwidth : NAN);
  for (int d = 0; d < SSA_PEAK_N; d++)
    ssa_out_field_double(o, ssa_peak_dtype_names[d], m->peaks[d] > 0 ? m->peaks[d] : NAN);
  ssa_out_str(o, "},\"ops\":[");
  for (size_t i = 0; i < m->npoints; i++) {
    const ssa_op_point *p = &m->points[i];
    ssa_out_str(o, i ? ",{\"op\":" : "{\"op\":");
    ssa_out_json_string(o, p->op);
    ssa_out_field_string(o, "shapes", p->shapes);
    ssa_out_field_string(o, "dtype", ssa_peak_dtype_names[p->dtype]);
    ssa_out_field_i64(o, "time_ns", p->time_ns);
    ssa_out_field_double(o, "flops", p->flops);
    ssa_out_field_double(o, "bytes", p->bytes);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "]}");
}

/* memory */
static void json_memory(const ssa_analysis *a, ssa_out *o) {
  ssa_out_str(o, ",\"memory\":");
  if (a->mem_predicted_total >= 0 || a->mem_measured_peak >= 0) {
    ssa_out_str(o, "{\"predicted\":{\"parameters\":");
    ssa_out_double(o, known_or_nan(a->mem_predicted_parameters));
    ssa_out_field_double(o, "gradients", known_or_nan(a->mem_predicted_gradients));
    ssa_out_field_double(o, "optimizer", known_or_nan(a->mem_predicted_optimizer));
    ssa_out_field_double(o, "activations", known_or_nan(a->mem_predicted_activations));
    ssa_out_field_double(o, "total", known_or_nan(a->mem_predicted_total));
    ssa_out_char(o, '}');
    ssa_out_field_double(o, "measured_peak_bytes", known_or_nan(a->mem_measured_peak));
    ssa_out_str(o, ",\"measured_over_predicted\":");
    ssa_out_double(o, a->mem_predicted_total > 0 && a->mem_measured_peak >= 0
                          ? a->mem_measured_peak / a->mem_predicted_total
                          : NAN);
    ssa_out_char(o, '}');
  } else {
    ssa_out_str(o, "null");
  }
}

/* alignment */
static void json_alignment(const ssa_analysis *a, ssa_out *o) {
  const ssa_run *run = a->run;
  ssa_out_printf(o,
                 ",\"alignment\":{\"reference_rank\":%d,\"refined_by_collectives\":%s,\"ranks\":[",
                 run->reference_rank, run->refined ? "true" : "false");
  int64_t ref_anchor = run->nranks ? run->anchor_offset[0] : 0;
  for (size_t i = 0; i < run->nranks; i++) {
    ssa_out_printf(o, "%s{\"rank\":%d,\"anchor_offset_ns\":", i ? "," : "", run->ranks[i].rank);
    ssa_out_i64(o, run->anchor_offset[i] - ref_anchor);
    ssa_out_field_i64(o, "refine_ns", run->refine_offset[i]);
    ssa_out_field_i64(o, "offset_ns", run->ranks[i].offset_ns - run->ranks[0].offset_ns);
    ssa_out_printf(o, ",\"anchors\":%zu,\"collective_samples\":%u}", run->ranks[i].nanchors,
                   run->refine_samples[i]);
  }
  ssa_out_str(o, "]}");
}

/* ranks */
static void json_ranks(const ssa_analysis *a, ssa_out *o) {
  int64_t agg[SSA_IDLE_N] = {0};
  ssa_out_str(o, ",\"ranks\":[");
  int first = 1;
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    if (!selected(a, rr)) continue;
    const ssa_rank *r = rr->rank;
    ssa_out_printf(o, "%s{\"rank\":%d,\"host\":", first ? "" : ",", r->rank);
    first = 0;
    ssa_out_json_string(o, r->hostname);
    ssa_out_field_string(o, "device", r->device_name);
    ssa_out_field_i64_or_null(o, "pipeline_stage", rr->stage);
    ssa_out_printf(o,
                   ",\"events\":%llu,\"ops\":%zu,\"ops_joined_to_launch\":%llu,\"comm_ops_by_"
                   "evidence\":%llu,\"comm_kernels_by_name\":%llu",
                   (unsigned long long)r->records, r->nops, (unsigned long long)r->joined_ops,
                   (unsigned long long)r->comm_by_evidence, (unsigned long long)r->comm_by_name);
    uint64_t dropped = 0;
    for (int k = 0; k < 8; k++)
      dropped += r->dropped[k];
    ssa_out_printf(o, ",\"dropped_records\":%llu", (unsigned long long)dropped);
    ssa_out_field_bool(o, "host_timeline", r->host_timeline);
    classification_obj(r, o);
    ssa_out_str(o, ",\"totals\":");
    window_obj(a, rr, &rr->totals, o);
    for (int k = 0; k < SSA_IDLE_N; k++)
      agg[k] += rr->totals.idle_cause[k];
    ssa_out_str(o, ",\"steps\":[");
    for (size_t s = 0; s < rr->nsteps; s++) {
      if (s) ssa_out_char(o, ',');
      window_obj(a, rr, &rr->windows[s], o);
    }
    ssa_out_str(o, "],\"idle_breakdown\":{\"device\":");
    idle_obj(o, rr->totals.idle_cause);
    ssa_out_str(o, ",\"streams\":[");
    for (size_t s = 0; s < rr->nlanes; s++) {
      const ssa_lane_idle *li = &rr->lanes[s];
      const ssa_lane *l = &r->lanes[li->lane];
      ssa_out_printf(o, "%s{\"stream\":%llu,\"kind\":\"%s\",\"device\":%u,\"name\":", s ? "," : "",
                     (unsigned long long)l->id, lane_kind_name(l->kind), l->device);
      ssa_out_json_string(o, ssa_rank_str(r, l->name));
      ssa_out_field_i64(o, "busy_ns", li->busy);
      ssa_out_str(o, ",\"idle\":");
      idle_obj(o, li->idle_cause);
      ssa_out_char(o, '}');
    }
    ssa_out_str(o, "]},\"collectives\":{\"count\":");
    ssa_out_u64(o, rr->coll_count);
    ssa_out_field_i64(o, "wait_ns", rr->coll_wait);
    ssa_out_field_i64(o, "caused_wait_ns", rr->coll_caused);
    ssa_out_field_u64(o, "arrived_last", rr->coll_last);
    ssa_out_field_i64(o, "schedule_wait_ns", rr->coll_schedule_wait);
    ssa_out_str(o, "},\"warnings\":");
    ssa_out_json_strings(o, r->warnings, r->nwarnings);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "],\"idle_breakdown\":");
  idle_obj(o, agg);
}

/* collectives */
static void json_collectives(const ssa_analysis *a, ssa_out *o) {
  ssa_out_str(o, ",\"collectives\":{\"incomplete\":");
  ssa_out_u64(o, a->colls_incomplete - a->colls_refused);
  ssa_out_str(o, ",\"left_out_of_statistics\":");
  ssa_out_u64(o, a->colls_incomplete);
  /* how members were matched: by their metadata (comm, seq), or by order on an NCCL stream */
  ssa_out_str(o, ",\"matched_by_stream_order\":");
  ssa_out_u64(o, a->colls_inferred);
  ssa_out_str(o, ",\"refused_stream_order\":");
  ssa_out_u64(o, a->colls_refused);
  ssa_out_str(o, ",\"summary\":[");
  for (size_t i = 0; i < a->ncoll_summaries; i++) {
    const ssa_coll_summary *s = &a->coll_summaries[i];
    ssa_out_printf(o, "%s{\"op\":\"%s\",\"group\":", i ? "," : "",
                   stepscope_collective_op_name(s->op));
    ssa_out_json_string(o, ssa_name(a, s->group));
    ssa_out_printf(o, ",\"bytes\":%llu,\"count\":%llu,\"transfer_total_ns\":",
                   (unsigned long long)s->bytes, (unsigned long long)s->count);
    ssa_out_i64(o, s->transfer_total);
    ssa_out_field_double(o, "transfer_mean_ns", ratio(s->transfer_total, (int64_t)s->count));
    ssa_out_field_i64(o, "transfer_min_ns", s->transfer_min);
    ssa_out_field_i64(o, "transfer_max_ns", s->transfer_max);
    ssa_out_field_double(o, "skew_mean_ns", ratio(s->skew_total, (int64_t)s->count));
    ssa_out_field_i64(o, "skew_max_ns", s->skew_max);
    ssa_out_field_i64(o, "wait_total_ns", s->wait_total);
    ssa_out_field_double(o, "algbw_gbps", s->algbw);
    ssa_out_field_double(o, "busbw_gbps", s->busbw);
    ssa_out_char(o, '}');
  }
  ssa_out_char(o, ']');
  ssa_report_json_culprits(a, o);
  ssa_out_str(o, ",\"instances\":[");
  for (size_t i = 0; i < a->ncolls; i++) {
    const ssa_coll_instance *c = &a->colls[i];
    /* the report's largest part (2.3 M instances at 16,384 ranks): written without printf */
    ssa_out_str(o, i ? ",{\"op\":\"" : "{\"op\":\"");
    ssa_out_str(o, stepscope_collective_op_name(c->op));
    ssa_out_str(o, "\",\"group\":");
    ssa_out_json_string(o, ssa_name(a, c->group));
    ssa_out_str(o, ",\"comm_id\":\"");
    ssa_out_hex64(o, c->comm_id);
    ssa_out_str(o, "\",\"seq\":");
    ssa_out_u64(o, c->seq);
    ssa_out_field_u64(o, "bytes", c->bytes);
    ssa_out_field_u64(o, "comm_size", c->comm_size);
    ssa_out_field_u64(o, "present", c->present);
    ssa_out_field_bool(o, "p2p", c->flags & STEPSCOPE_COLL_F_P2P);
    ssa_out_field_bool(o, "pipeline", c->flags & STEPSCOPE_COLL_F_PIPELINE);
    ssa_out_field_i64(o, "start_ns", c->first_start_rel);
    ssa_out_field_i64(o, "end_ns", c->end_rel);
    ssa_out_field_i64(o, "skew_ns", c->skew);
    ssa_out_field_i64(o, "transfer_ns", c->transfer);
    ssa_out_field_i64(o, "max_wait_ns", c->max_wait);
    ssa_out_field_i64(o, "total_wait_ns", c->total_wait);
    ssa_out_field_i64(o, "schedule_wait_ns", c->schedule_wait);
    ssa_out_field_i64(o, "caused_wait_ns", c->caused_wait);
    ssa_out_field_bool(o, "complete", c->complete);
    ssa_out_field_i64(o, "last_rank", c->last_rank);
    ssa_out_field_double(o, "algbw_gbps", c->algbw);
    ssa_out_field_double(o, "busbw_gbps", c->busbw);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "]}");
}

/* kernels */
static void json_kernels(const ssa_analysis *a, ssa_out *o) {
  ssa_out_str(o, ",\"kernels\":{\"total_ns\":");
  ssa_out_i64(o, a->kernel_time_total);
  ssa_out_str(o, ",\"rows\":[");
  for (size_t i = 0; i < a->nkernels; i++) {
    const ssa_kernel_row *k = &a->kernels[i];
    ssa_out_str(o, i ? ",{\"name\":" : "{\"name\":");
    ssa_out_json_string(o, ssa_name(a, k->name));
    ssa_out_printf(o, ",\"count\":%llu,\"total_ns\":", (unsigned long long)k->count);
    ssa_out_i64(o, k->total);
    ssa_out_field_double(o, "mean_ns", ratio(k->total, (int64_t)k->count));
    ssa_out_field_i64(o, "min_ns", k->min);
    ssa_out_field_i64(o, "max_ns", k->max);
    ssa_out_field_double(o, "share", ratio(k->total, a->kernel_time_total));
    ssa_out_field_bool(o, "comm", k->comm);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "]}");
}

/* mixture of experts: expert load per step (moe_load.c), null without moe.load marks */
static void json_moe(const ssa_analysis *a, ssa_out *o) {
  ssa_out_str(o, ",\"moe\":");
  if (!a->nmoe_steps) {
    ssa_out_str(o, "null");
  } else {
    ssa_out_printf(o, "{\"experts\":%d,\"ep\":%d,\"expert_imbalance_mean\":", a->moe_experts,
                   a->moe_ep);
    ssa_out_double(o, a->moe_expert_imbalance_mean);
    ssa_out_field_double(o, "ep_rank_imbalance_mean", a->moe_rank_imbalance_mean);
    ssa_out_str(o, ",\"tokens_per_expert\":[");
    for (int e = 0; e < a->moe_experts; e++)
      ssa_out_printf(o, "%s%lld", e ? "," : "", (long long)a->moe_expert_tokens[e]);
    ssa_out_str(o, "],\"steps\":[");
    for (size_t i = 0; i < a->nmoe_steps; i++) {
      const ssa_moe_step *s = &a->moe_steps[i];
      ssa_out_printf(o, "%s{\"step\":%lld,\"tokens\":%lld,\"expert_imbalance\":", i ? "," : "",
                     (long long)s->step, (long long)s->tokens);
      ssa_out_double(o, s->expert_imbalance);
      ssa_out_field_double(o, "ep_rank_imbalance", s->rank_imbalance);
      ssa_out_printf(o,
                     ",\"layer\":%d,\"edp_rank\":%d,\"busiest_expert\":%d,"
                     "\"busiest_expert_tokens\":%lld,\"mean_expert_tokens\":",
                     s->layer, s->edp_rank, s->busiest_expert, (long long)s->busiest_expert_tokens);
      ssa_out_double(o, s->mean_expert_tokens);
      ssa_out_printf(o, ",\"busiest_ep_rank\":%d,\"busiest_rank\":%d,\"a2a_wait_ns\":",
                     s->busiest_ep_rank, s->busiest_rank);
      ssa_out_i64(o, s->a2a_wait);
      ssa_out_printf(o,
                     ",\"a2a_wait_caused_by_rank\":%d,\"a2a_wait_caused_ns\":", s->a2a_caused_rank);
      ssa_out_i64(o, s->a2a_caused_rank >= 0 ? s->a2a_caused : 0);
      /* the step's load per expert and per EP rank (expert e on EP rank e / (E / ep)),
       * summed over its MoE layers and EP groups */
      const int64_t *st = a->moe_step_expert_tokens + i * (size_t)a->moe_experts;
      ssa_out_str(o, ",\"tokens_per_expert\":[");
      for (int e = 0; e < a->moe_experts; e++)
        ssa_out_printf(o, "%s%lld", e ? "," : "", (long long)st[e]);
      ssa_out_str(o, "],\"tokens_per_ep_rank\":[");
      int per_rank = a->moe_ep > 0 ? a->moe_experts / a->moe_ep : a->moe_experts;
      for (int q = 0; q < a->moe_ep; q++) {
        int64_t t = 0;
        for (int e = q * per_rank; e < (q + 1) * per_rank; e++)
          t += st[e];
        ssa_out_printf(o, "%s%lld", q ? "," : "", (long long)t);
      }
      ssa_out_str(o, "]}");
    }
    ssa_out_str(o, "]}");
  }
}

/* warnings: run, ranks (also per rank above), analysis */
static void json_warnings(const ssa_analysis *a, ssa_out *o) {
  const ssa_run *run = a->run;
  ssa_out_str(o, ",\"warnings\":[");
  int any = 0;
  for (size_t i = 0; i < run->nwarnings; i++) {
    if (any++) ssa_out_char(o, ',');
    ssa_out_json_string(o, run->warnings[i]);
  }
  for (size_t i = 0; i < run->nranks; i++)
    for (size_t w = 0; w < run->ranks[i].nwarnings; w++) {
      if (any++) ssa_out_char(o, ',');
      ssa_out_json_string(o, run->ranks[i].warnings[w]);
    }
  for (size_t i = 0; i < a->nwarnings; i++) {
    if (any++) ssa_out_char(o, ',');
    ssa_out_json_string(o, a->warnings[i]);
  }
  ssa_out_str(o, "]}\n");
}

int ssa_report_json(const ssa_analysis *a, ssa_out *o) {
  ssa_out_str(o, "{\"schema_version\":1,\"generator\":\"stepscope analyze " STEPSCOPE_VERSION_STRING
                 "\"");
  json_run(a, o);
  json_mfu(a, o);
  json_op_mfu(a, o);
  json_memory(a, o);
  json_alignment(a, o);
  json_ranks(a, o);
  json_collectives(a, o);
  json_kernels(a, o);
  json_moe(a, o);
  ssa_report_json_critical_path(a, o);
  json_warnings(a, o);
  return o->error;
}
