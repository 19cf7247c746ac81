/*
 * report_text.c — the readable report of `stepscope analyze RUN`: a
 * headline first (step time, MFU, overlap, exposed communication, bubble
 * versus theory, top idle causes, worst straggler), then per-rank and
 * per-step tables, top kernels and collectives, plain-words findings where
 * the numbers are clear, and the warnings. Every number comes from the same
 * analysis as the JSON report.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_ops.h"
#include "ssa_report.h"

static const char *fmt_ns(int64_t ns, char *buf, size_t n) {
  return ssa_fmt_time(buf, n, (double)ns); /* exact: below 1 us it prints an integer */
}

static double pct(int64_t a, int64_t b) {
  return b > 0 ? 100.0 * (double)a / (double)b : 0.0;
}

static int selected(const ssa_analysis *a, const ssa_rank_result *rr) {
  return a->opt.rank < 0 || rr->rank->rank == a->opt.rank;
}

/* Prints what one tally (one rank's, or the sum over ranks) classified. */
static void print_tally(FILE *f, const char *who, const ssa_comm_tally *t,
                        const ssa_comm_rules *rules) {
  char b1[32], pat[80], label[160], safe[200];
  if (t->evidence.ops)
    fprintf(f, "%6s  %-52s %8llu %12s\n", who, "collective record (NCCL metadata, tracer)",
            (unsigned long long)t->evidence.ops, fmt_ns(t->evidence.time_ns, b1, sizeof b1));
  for (int k = 0; k < ssa_comm_nfamilies; k++) {
    if (!t->family[k].ops) continue;
    snprintf(label, sizeof label, "built-in family %s", ssa_comm_families[k].id);
    fprintf(f, "%6s  %-52s %8llu %12s\n", who, label, (unsigned long long)t->family[k].ops,
            fmt_ns(t->family[k].time_ns, b1, sizeof b1));
  }
  for (size_t u = 0; u < t->nuser && rules && u < rules->n; u++) {
    const ssa_comm_rule *r = &rules->rule[u];
    snprintf(pat, sizeof pat, "%s", sc_text_safe(r->pattern, safe, sizeof safe));
    snprintf(label, sizeof label, "%s '%s'%s",
             strcmp(r->origin, "command line") ? r->origin : ssa_comm_rule_option(r), pat,
             r->comm ? "" : " (compute)");
    fprintf(f, "%6s  %-52s %8llu %12s\n", who, label, (unsigned long long)t->user[u].ops,
            fmt_ns(t->user[u].time_ns, b1, sizeof b1));
  }
  int any = 0;
  for (int i = 1; i <= SSA_COMM_KIND_N; i++) {
    int k = i % SSA_COMM_KIND_N; /* unknown last */
    if (!t->kind[k].ops) continue;
    fprintf(f, "%s %s %llu (%s)",
            any ? "," : "        communication by op kind:", ssa_comm_kind_name(k),
            (unsigned long long)t->kind[k].ops, fmt_ns(t->kind[k].time_ns, b1, sizeof b1));
    any = 1;
  }
  if (any) fprintf(f, "\n");
}

static void tally_add(ssa_comm_tally *sum, const ssa_comm_tally *t) {
#define ADD(x, y)                                                                                  \
  do {                                                                                             \
    (x).ops += (y).ops;                                                                            \
    (x).time_ns += (y).time_ns;                                                                    \
  } while (0)
  ADD(sum->evidence, t->evidence);
  for (int k = 0; k < SSA_COMM_FAMILY_MAX; k++)
    ADD(sum->family[k], t->family[k]);
  for (int k = 0; k < SSA_COMM_KIND_N; k++)
    ADD(sum->kind[k], t->kind[k]);
  for (size_t u = 0; u < t->nuser && u < sum->nuser; u++)
    ADD(sum->user[u], t->user[u]);
#undef ADD
}

/* "== communication: what classified it ==": per rank (the sum over ranks
 * when more than 16 are reported), the ops each source classified over the
 * whole trace — evidence, each built-in family, each user rule — and the
 * communication by op kind (docs/kineto-import.md "Communication
 * families"). Left out when nothing was communication and there are no
 * user rules. */
static void print_classification(const ssa_analysis *a, FILE *f, size_t nsel) {
  const ssa_comm_rules *rules = NULL;
  int show = 0;
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank *r = a->ranks[i].rank;
    if (!selected(a, &a->ranks[i])) continue;
    if (r->tally.nuser) {
      rules = r->comm_rules;
      show = 1;
    }
    for (int k = 0; k < SSA_COMM_KIND_N; k++)
      show |= r->tally.kind[k].ops > 0;
  }
  if (!show) return;
  fprintf(f, "\n== communication: what classified it (ops over the whole trace) ==\n");
  fprintf(f, "%6s  %-52s %8s %12s\n", "rank", "rule", "ops", "time");
  if (nsel <= 16) {
    for (size_t i = 0; i < a->nranks; i++) {
      if (!selected(a, &a->ranks[i])) continue;
      char who[16];
      snprintf(who, sizeof who, "%d", a->ranks[i].rank->rank);
      print_tally(f, who, &a->ranks[i].rank->tally, a->ranks[i].rank->comm_rules);
    }
    return;
  }
  ssa_comm_tally sum;
  memset(&sum, 0, sizeof sum);
  ssa_class_count user[64];
  memset(user, 0, sizeof user);
  sum.user = user;
  sum.nuser = rules ? (rules->n < 64 ? rules->n : 64) : 0;
  for (size_t i = 0; i < a->nranks; i++)
    if (selected(a, &a->ranks[i])) tally_add(&sum, &a->ranks[i].rank->tally);
  print_tally(f, "all", &sum, rules);
  fprintf(f,
          "        (summed over %zu ranks; per rank in analyze --json, ranks[].classification)\n",
          nsel);
}

/* What several sections read: the selected ranks' totals summed. */
typedef struct text_totals {
  int64_t span, compute, comm, overlap, xcomm, xmem, idle, bubble;
  int64_t pipe_comm; /* exposed comm that is pipeline waiting (inside the bubble) */
  int64_t causes[SSA_IDLE_N];
  size_t nsel, npipe; /* selected ranks, and those in a pipeline */
} text_totals;

static void sum_totals(const ssa_analysis *a, text_totals *t) {
  memset(t, 0, sizeof *t);
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    if (!selected(a, rr)) continue;
    t->nsel++;
    const ssa_window *w = &rr->totals;
    t->span += w->span;
    t->compute += w->compute;
    t->comm += w->comm;
    t->overlap += w->overlap;
    t->xcomm += w->exposed_comm;
    t->xmem += w->exposed_mem;
    t->idle += w->idle;
    if (rr->pipeline) {
      t->bubble += w->bubble;
      t->pipe_comm += w->pipeline_comm_only;
      t->npipe++;
    }
    for (int k = 0; k < SSA_IDLE_N; k++)
      t->causes[k] += w->idle_cause[k];
  }
}

/* The other ranks beyond noise after the culprit: those it cannot be told apart from (tied),
 * then the rest, and how many more the stragglers table has. */
static void print_culprit_also(const ssa_culprit_verdict *v, FILE *f) {
  char b1[32], b2[32];
  size_t shown = v->nalso < SSA_CULPRIT_ALSO ? v->nalso : SSA_CULPRIT_ALSO;
  for (int tied = 1; tied >= 0; tied--) {
    size_t n = 0;
    for (size_t k = 0; k < shown; k++) {
      const ssa_culprit_also *c = &v->also[k];
      if (c->tied != tied) continue;
      if (n++ == 0)
        fprintf(f, tied ? "; tied with " : "; also beyond noise: ");
      else
        fprintf(f, ", ");
      fprintf(f, "rank %d (%llu steps, median %s a step, others waited %s for it)", c->rank,
              (unsigned long long)c->steps_late, fmt_ns(c->effect_median, b1, sizeof b1),
              fmt_ns(c->caused, b2, sizeof b2));
    }
    if (tied && n)
      fprintf(f, ": as many steps late, medians closer than %s, so the run cannot tell %s apart",
              fmt_ns(v->threshold_ns, b1, sizeof b1), n > 1 ? "them" : "the two");
  }
  if (v->nalso > shown)
    fprintf(f, "; and %llu more rank(s) beyond noise (the stragglers table)",
            (unsigned long long)(v->nalso - shown));
}

/* The straggler verdict (culprit_verdict.c) as one sentence, every part from its one record;
 * nothing when no rank arrived late beyond the schedule. */
static void print_culprit_verdict(const ssa_analysis *a, const char *prefix, FILE *f) {
  const ssa_culprit_verdict *v = &a->culprit_verdict;
  char b1[32], b2[32], b3[32];
  const char *phase = v->phase >= 0 ? ssa_phase_names[v->phase] : "an unknown phase";
  switch (v->status) {
  case SSA_CULPRIT_FOUND:
    fprintf(f,
            "%sculprit beyond noise: rank %d, late in %s; a peer waited more than %s for it in "
            "%llu of %llu steps (median %s a step); others waited %s for it in all",
            prefix, v->rank, phase, fmt_ns(v->threshold_ns, b1, sizeof b1),
            (unsigned long long)v->steps_late, (unsigned long long)v->steps,
            fmt_ns(v->effect_median, b2, sizeof b2), fmt_ns(v->caused, b3, sizeof b3));
    if (v->phase_via_victim)
      fprintf(f, " (in %llu step(s) through a rank of its pipeline that it held up)",
              (unsigned long long)v->phase_via_victim);
    print_culprit_also(v, f);
    break;
  case SSA_CULPRIT_WITHIN_NOISE:
    fprintf(f,
            "%sno culprit beyond noise: the largest candidate, rank %d (late in %s), made a peer "
            "wait more than %s (the threshold: 3 x the step time's noise, at least 10 %% of a "
            "step) in %llu of %llu steps, %llu needed",
            prefix, v->rank, phase, fmt_ns(v->threshold_ns, b1, sizeof b1),
            (unsigned long long)v->steps_late, (unsigned long long)v->steps,
            (unsigned long long)v->steps_needed);
    break;
  case SSA_CULPRIT_UNDECIDED:
    fprintf(f,
            "%sculprit undecided: %llu step(s) are too few to measure the step time's noise (3 "
            "needed); the largest candidate is rank %d (late in %s), others waited %s for it",
            prefix, (unsigned long long)v->steps, v->rank, phase, fmt_ns(v->caused, b1, sizeof b1));
    break;
  default: return;
  }
  fprintf(f, "\n");
}

/* The headline: step time, MFU, overlap, time split, bubble, idle causes, worst straggler. */
static void print_headline(const ssa_analysis *a, const text_totals *tot, FILE *f) {
  const ssa_run *run = a->run;
  int64_t span = tot->span;
  int64_t compute = tot->compute;
  int64_t comm = tot->comm;
  int64_t overlap = tot->overlap;
  int64_t xcomm = tot->xcomm;
  int64_t xmem = tot->xmem;
  int64_t idle = tot->idle;
  int64_t bubble = tot->bubble;
  int64_t pipe_comm = tot->pipe_comm;
  const int64_t *causes = tot->causes;
  size_t npipe = tot->npipe;
  char b1[32];
  char safe[1024];
  fprintf(f, "stepscope analyze: %s\n", sc_text_safe(run->dir, safe, sizeof safe));
  fprintf(f, "ranks loaded: %zu, steps analysed: %zu\n", run->nranks, a->nsteps);
  ssa_run_print_losses(run, f, "");
  fprintf(f, "\n");
  fprintf(f, "== headline ==\n");
  if (a->step_time_median >= 0) {
    fprintf(f, "step time (iteration period, median, slowest rank): %s\n",
            fmt_ns(a->step_time_median, b1, sizeof b1));
    if (a->device_latency_median >= 0)
      fprintf(f, "device latency of a step (first to last op it launched, median): %s\n",
              fmt_ns(a->device_latency_median, b1, sizeof b1));
    for (size_t i = 0; i < a->nsteps; i++)
      if (a->steps[i].stub)
        fprintf(f,
                "note: step %lld launched no device work (%s of host time only: a stub step at "
                "the trace's end)%s\n",
                (long long)a->steps[i].step, fmt_ns(a->steps[i].time, b1, sizeof b1),
                a->steps[i].in_medians ? "" : "; left out of the medians");
  } else
    fprintf(f, "step time: no steps found\n");
  if (!isnan(a->mfu))
    fprintf(f, "MFU %.1f %%   HFU %.1f %%\n", 100 * a->mfu, 100 * a->hfu);
  else if (!isnan(a->model_flops_per_step))
    fprintf(f, "MFU: not reported (the FLOPs or peak metadata is incomplete or implausible: see "
               "the warnings)\n");
  else if (a->op_mfu.known && !isnan(a->op_mfu.mfu))
    fprintf(f, "MFU from op FLOPs: %.1f %% (%s peak; `stepscope ops` lists the ops)\n",
            100 * a->op_mfu.mfu, ssa_peak_dtype_names[a->op_mfu.dtype]);
  else if (a->op_mfu.known)
    fprintf(f, "MFU: no FLOPs metadata; the ops' FLOPs are %.4g, %s\n", a->op_mfu.flops,
            a->op_mfu.peak <= 0 ? "the device's peak is unknown (`stepscope ops --peak` gives it)"
                                : "but no step times them (`stepscope ops` lists the ops)");
  else
    fprintf(f, "MFU: no FLOPs metadata\n");
  if (comm > 0 && pipe_comm > 0)
    fprintf(
        f,
        "comm/compute overlap: %.1f %% of communication hidden; exposed comm %.1f %% of the time "
        "(%.1f %% outside the pipeline bubble)\n",
        pct(overlap, comm), pct(xcomm, span), pct(xcomm - pipe_comm, span));
  else if (comm > 0)
    fprintf(
        f,
        "comm/compute overlap: %.1f %% of communication hidden; exposed comm %.1f %% of the time\n",
        pct(overlap, comm), pct(xcomm, span));
  else {
    int host = 0;
    for (size_t i = 0; i < a->nranks; i++)
      host |= selected(a, &a->ranks[i]) && a->ranks[i].rank->host_timeline;
    fprintf(f,
            "communication: none %s (no collective metadata, no op of a built-in communication "
            "family; --comm-kernel REGEX names others)\n",
            host ? "on the host timeline" : "on the device");
  }
  fprintf(
      f,
      "time split: compute %.1f %%, exposed comm %.1f %%, exposed copies %.1f %%, idle %.1f %%\n",
      pct(compute, span), pct(xcomm, span), pct(xmem, span), pct(idle, span));
  if (npipe) {
    int64_t pspan = 0;
    for (size_t i = 0; i < a->nranks; i++)
      if (selected(a, &a->ranks[i]) && a->ranks[i].pipeline) pspan += a->ranks[i].totals.span;
    fprintf(f, "pipeline bubble: %.1f %% measured vs %.1f %% theory (%s, p=%d, m=%d)\n",
            pct(bubble, pspan), 100 * a->bubble_theory,
            a->schedule_name[0] ? sc_text_safe(a->schedule_name, safe, sizeof safe) : "?",
            a->schedule_stages, a->schedule_microbatches);
  }
  if (idle > 0) {
    fprintf(f, "idle causes:");
    int order[SSA_IDLE_N];
    for (int k = 0; k < SSA_IDLE_N; k++)
      order[k] = k;
    for (int i = 0; i < SSA_IDLE_N; i++)
      for (int j = i + 1; j < SSA_IDLE_N; j++)
        if (causes[order[j]] > causes[order[i]]) {
          int t = order[i];
          order[i] = order[j];
          order[j] = t;
        }
    for (int k = 0; k < SSA_IDLE_N; k++)
      if (causes[order[k]] > 0)
        fprintf(f, " %s %.1f %%", ssa_idle_cause_names[order[k]], pct(causes[order[k]], idle));
    fprintf(f, " (of idle time)\n");
  }
  if (a->colls_incomplete > a->colls_refused)
    fprintf(f,
            "collectives: %llu incomplete instances (a member missing from the traces) left out of "
            "the statistics\n",
            (unsigned long long)(a->colls_incomplete - a->colls_refused));
  if (a->colls_inferred || a->colls_refused)
    fprintf(f,
            "collectives: the trace carries no collective metadata; %llu instances matched across "
            "ranks by their order on each NCCL stream, %llu refused (the ranks disagree: see the "
            "warnings)\n",
            (unsigned long long)a->colls_inferred, (unsigned long long)a->colls_refused);
  print_culprit_verdict(a, "", f);
}

/* Per rank: the analysed window's split, then how ops were classified. */
static void print_per_rank(const ssa_analysis *a, const text_totals *tot, FILE *f) {
  size_t nsel = tot->nsel;
  char b1[32];
  fprintf(f, "\n== per rank (analysed window) ==\n");
  fprintf(f, "%5s %12s %8s %8s %8s %8s %8s %8s %8s\n", "rank", "span", "compute", "comm", "overlap",
          "exp.comm", "exp.mem", "idle", "bubble");
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    if (!selected(a, rr)) continue;
    const ssa_window *w = &rr->totals;
    fprintf(f, "%5d %12s %7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%% ", rr->rank->rank,
            fmt_ns(w->span, b1, sizeof b1), pct(w->compute, w->span), pct(w->comm, w->span),
            pct(w->overlap, w->span), pct(w->exposed_comm, w->span), pct(w->exposed_mem, w->span),
            pct(w->idle, w->span));
    if (rr->pipeline)
      fprintf(f, "%7.1f%%\n", pct(w->bubble, w->span));
    else
      fprintf(f, "%8s\n", "-");
  }
  print_classification(a, f, nsel);
}

/* Whom each stage waited for beyond the schedule (late_upstream.c). */
static void print_late_sources(const ssa_analysis *a, FILE *f) {
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    const ssa_window *w = &rr->totals;
    char b[32];
    if (!selected(a, rr) || !rr->pipeline || !w->has_bubble_causes || w->late_from_rank < 0)
      continue;
    fprintf(f, "  late upstream of rank %d: rank %d's %s (%s of its waiting on late sends)\n",
            rr->rank->rank, w->late_from_rank, ssa_phase_names[w->late_from_phase],
            fmt_ns(w->late_from_ns, b, sizeof b));
  }
}

/* Pipeline bubble by cause, per stage. */
static void print_bubble_by_cause(const ssa_analysis *a, const text_totals *tot, FILE *f) {
  size_t npipe = tot->npipe;
  if (npipe) {
    fprintf(f, "\n== pipeline bubble by cause (per stage; %% of the rank's span) ==\n");
    fprintf(f, "%5s %5s %8s %9s %13s %9s %9s %9s %9s\n", "rank", "stage", "bubble", "schedule",
            "imbalance(of)", "transfer", "late up", "host", "unattr.");
    for (size_t i = 0; i < a->nranks; i++) {
      const ssa_rank_result *rr = &a->ranks[i];
      const ssa_window *w = &rr->totals;
      if (!selected(a, rr) || !rr->pipeline) continue;
      fprintf(f, "%5d %5d %7.1f%%", rr->rank->rank, rr->stage, pct(w->bubble, w->span));
      if (!w->has_bubble_causes) {
        fprintf(f, "  (causes not measured)\n");
        continue;
      }
      for (int k = 0; k < SSA_BUBBLE_N; k++) {
        if (k == SSA_BUBBLE_IMBALANCE) {
          char of[16] = "";
          if (w->imbalance_stage >= 0) snprintf(of, sizeof of, "(%d)", w->imbalance_stage);
          fprintf(f, " %7.1f%%%-5s", pct(w->bubble_cause[k], w->span), of);
        } else {
          fprintf(f, " %8.1f%%", pct(w->bubble_cause[k], w->span));
        }
      }
      fprintf(f, "\n");
    }
    print_late_sources(a, f);
  }
}

/* Per step and rank. */
static void print_per_step(const ssa_analysis *a, const text_totals *tot, FILE *f) {
  char b1[32], b2[32], b3[32], b4[32], b5[32];
  fprintf(f, "\n== per step ==\n");
  fprintf(f, "%6s %5s %12s %12s %10s %10s %10s %10s %6s\n", "step", "rank", "span", "dev.latency",
          "compute", "exp.comm", "idle", "launch p50", "cpu");
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    if (!selected(a, rr)) continue;
    for (size_t s = 0; s < rr->nsteps; s++) {
      const ssa_window *w = &rr->windows[s];
      char b6[32];
      fprintf(f, "%6lld %5d %12s %12s %10s %10s %10s %10s %6s\n", (long long)w->step,
              rr->rank->rank, fmt_ns(w->span, b1, sizeof b1),
              w->device_latency >= 0 ? fmt_ns(w->device_latency, b6, sizeof b6) : "-",
              fmt_ns(w->compute, b2, sizeof b2), fmt_ns(w->exposed_comm, b3, sizeof b3),
              fmt_ns(w->idle, b4, sizeof b4),
              w->launch.count ? fmt_ns(w->launch.p50, b5, sizeof b5) : "-",
              w->cut         ? "cut"
              : w->stub      ? "stub"
              : w->cpu_bound ? "BOUND"
                             : "");
    }
  }
}

/* The top kernels by total time. */
static void print_top_kernels(const ssa_analysis *a, const text_totals *tot, FILE *f) {
  char b1[32], b2[32];
  char safe[1024];
  fprintf(f, "\n== top kernels ==\n");
  fprintf(f, "%8s %12s %12s %7s  %s\n", "count", "total", "mean", "share", "name");
  for (size_t i = 0; i < a->nkernels && i < (size_t)a->opt.top_n; i++) {
    const ssa_kernel_row *k = &a->kernels[i];
    fprintf(f, "%8llu %12s %12s %6.1f%%  %s\n", (unsigned long long)k->count,
            fmt_ns(k->total, b1, sizeof b1),
            fmt_ns(k->count ? k->total / (int64_t)k->count : 0, b2, sizeof b2),
            pct(k->total, a->kernel_time_total), sc_text_safe(ssa_name(a, k->name), safe, 81));
  }
}

/* Stragglers beyond the schedule: culprit phase vs peers in the same step, and the test that
 * tells a culprit from noise. */
static void print_stragglers(const ssa_analysis *a, const text_totals *tot, FILE *f) {
  char b1[32], b2[32];
  const ssa_culprit_verdict *v = &a->culprit_verdict;
  if (!a->nculprits) return;
  fprintf(f, "\n== stragglers beyond the schedule (culprit phase vs peers in the same step) ==\n");
  fprintf(f, "%5s %-11s %14s %14s %6s %10s %7s %s\n", "rank", "phase", "caused wait",
          "phase excess", "steps", "instances", "victim", "beyond noise");
  for (size_t i = 0; i < a->nculprits && i < (size_t)a->opt.top_n; i++) {
    const ssa_culprit *c = &a->culprits[i];
    fprintf(f, "%5d %-11s %14s %14s %6llu %10llu %7llu %s\n", c->rank, ssa_phase_names[c->phase],
            fmt_ns(c->caused, b1, sizeof b1), fmt_ns(c->excess, b2, sizeof b2),
            (unsigned long long)c->steps, (unsigned long long)c->instances,
            (unsigned long long)c->via_victim,
            v->status == SSA_CULPRIT_UNDECIDED ? "undecided"
            : c->beyond_noise                  ? "yes"
                                               : "no");
  }
  fprintf(f,
          "(beyond noise: a peer waited more than %s for the rank, beyond the schedule, in at "
          "least %llu of the %llu judged steps; %s = max(3 x the step time's noise %s, 10 %% of "
          "the median step); victim: steps charged through a rank of its pipeline it held up)\n",
          fmt_ns(v->threshold_ns, b1, sizeof b1), (unsigned long long)v->steps_needed,
          (unsigned long long)v->steps, fmt_ns(v->threshold_ns, b1, sizeof b1),
          fmt_ns(v->noise_ns, b2, sizeof b2));
}

/* Collectives by op and group. */
static void print_collectives(const ssa_analysis *a, const text_totals *tot, FILE *f) {
  char b1[32], b2[32];
  char safe[1024];
  if (a->ncoll_summaries) {
    fprintf(f, "\n== collectives ==\n");
    if (a->colls_incomplete > a->colls_refused)
      fprintf(f,
              "(%llu incomplete instances, with a member missing from the traces, are left out)\n",
              (unsigned long long)(a->colls_incomplete - a->colls_refused));
    if (a->colls_inferred)
      fprintf(f, "(%llu instances matched by their order on NCCL streams: no metadata)\n",
              (unsigned long long)a->colls_inferred);
    fprintf(f, "%-15s %-6s %12s %6s %12s %12s %10s %10s\n", "op", "group", "bytes", "count",
            "transfer", "skew max", "algbw", "busbw");
    for (size_t i = 0; i < a->ncoll_summaries && i < (size_t)a->opt.top_n; i++) {
      const ssa_coll_summary *s = &a->coll_summaries[i];
      fprintf(f, "%-15s %-6s %12llu %6llu %12s %12s %7.2f GB/s %6.2f GB/s\n",
              stepscope_collective_op_name(s->op),
              sc_text_safe(ssa_name(a, s->group), safe, sizeof safe), (unsigned long long)s->bytes,
              (unsigned long long)s->count,
              fmt_ns(s->count ? s->transfer_total / (int64_t)s->count : 0, b1, sizeof b1),
              fmt_ns(s->skew_max, b2, sizeof b2), s->algbw, s->busbw);
    }
  }
}

/* Expert load of mixture-of-experts runs. */
static void print_expert_load(const ssa_analysis *a, const text_totals *tot, FILE *f) {
  if (a->nmoe_steps) {
    fprintf(f, "\n== expert load (mixture of experts: %d experts, EP %d) ==\n", a->moe_experts,
            a->moe_ep);
    fprintf(f, "max/mean tokens per expert, per EP rank (1.00 = balanced; the worst MoE layer and "
               "EP group of each step)\n");
    fprintf(f, "%6s %10s %8s %6s %15s %8s %12s %12s %9s\n", "step", "tokens", "expert", "layer",
            "busiest expert", "EP rank", "busiest rank", "a2a wait", "caused by");
    for (size_t i = 0; i < a->nmoe_steps && i < (size_t)a->opt.top_n; i++) {
      const ssa_moe_step *s = &a->moe_steps[i];
      char w[32], who[16] = "-", rk[16] = "-";
      if (s->a2a_caused_rank >= 0) snprintf(who, sizeof who, "rank %d", s->a2a_caused_rank);
      if (s->busiest_rank >= 0) snprintf(rk, sizeof rk, "rank %d", s->busiest_rank);
      fprintf(f, "%6lld %10lld %8.2f %6d %8d (%4lld) %8.2f %12s %12s %9s\n", (long long)s->step,
              (long long)s->tokens, s->expert_imbalance, s->layer, s->busiest_expert,
              (long long)s->busiest_expert_tokens, s->rank_imbalance, rk,
              fmt_ns(s->a2a_wait, w, sizeof w), who);
    }
    fprintf(f, "mean over %zu steps: expert %.2f, EP rank %.2f\n", a->nmoe_steps,
            a->moe_expert_imbalance_mean, a->moe_rank_imbalance_mean);
  }
}

/* The device idle this much of the time, with no finding naming why, is a finding itself. */
#define IDLE_FINDING_PCT 50.0

/* Findings: what stands out, each only past its threshold. */
static void print_findings(const ssa_analysis *a, const text_totals *tot, FILE *f) {
  int64_t span = tot->span;
  int64_t comm = tot->comm;
  int64_t overlap = tot->overlap;
  int64_t xcomm = tot->xcomm;
  int64_t bubble = tot->bubble;
  int64_t pipe_comm = tot->pipe_comm;
  const int64_t *causes = tot->causes;
  size_t nsel = tot->nsel;
  size_t npipe = tot->npipe;
  fprintf(f, "\n== findings ==\n");
  int findings = 0;
  if (comm > 0 && pct(xcomm - pipe_comm, span) >= 5.0) {
    fprintf(f,
            "- exposed communication is %.1f %% of the time outside the pipeline bubble (%.1f %% "
            "of communication is not hidden under compute)\n",
            pct(xcomm - pipe_comm, span), 100.0 - pct(overlap, comm));
    findings++;
  }
  int idle_said = 0; /* a finding above named why the device idles */
  if (pct(causes[SSA_IDLE_DATA_LOADING], span) >= 10.0) {
    fprintf(f,
            "- the device waits for data loading %.1f %% of the time (data_loading): the job is "
            "input bound\n",
            pct(causes[SSA_IDLE_DATA_LOADING], span));
    findings++;
    idle_said = 1;
  }
  if (pct(causes[SSA_IDLE_HOST_WAIT], span) >= 10.0) {
    fprintf(f,
            "- the device waits for the CPU %.1f %% of the time (host_wait): the job is CPU/launch "
            "bound\n",
            pct(causes[SSA_IDLE_HOST_WAIT], span));
    findings++;
    idle_said = 1;
  }
  if (!idle_said && pct(tot->idle, span) >= IDLE_FINDING_PCT) {
    /* idle most of the time for a reason none of the findings above names: said, never
     * "nothing stands out" (a step that is all idle is the most striking thing there is) */
    int top = 0;
    for (int k = 1; k < SSA_IDLE_N; k++)
      if (causes[k] > causes[top]) top = k;
    fprintf(f, "- the device is idle %.1f %% of the time, mostly %s (%.1f %% of idle)",
            pct(tot->idle, span), ssa_idle_cause_names[top], pct(causes[top], tot->idle));
    if (a->device_latency_median >= 0 && a->device_latency_median < a->step_time_median / 2) {
      /* the steps launch little: their device work is a short part of them */
      char b1[32], b2[32];
      fprintf(f, ": a step's device work spans %s of its %s",
              fmt_ns(a->device_latency_median, b1, sizeof b1),
              fmt_ns(a->step_time_median, b2, sizeof b2));
    }
    if (top == SSA_IDLE_OTHER)
      fprintf(f, "; the time goes to the host, or to work the trace does not show");
    fprintf(f, "\n");
    findings++;
  }
  if (npipe && !isnan(a->bubble_theory)) {
    int64_t pspan = 0;
    for (size_t i = 0; i < a->nranks; i++)
      if (selected(a, &a->ranks[i]) && a->ranks[i].pipeline) pspan += a->ranks[i].totals.span;
    double excess = pct(bubble, pspan) - 100 * a->bubble_theory;
    if (excess >= 5.0) {
      fprintf(f, "- the pipeline bubble exceeds the schedule's theory by %.1f points", excess);
      /* the largest cause beyond the schedule's fill and drain, over the pipeline ranks */
      int64_t by[SSA_BUBBLE_N] = {0};
      int stage_votes[64] = {0}, any = 0;
      for (size_t i = 0; i < a->nranks; i++) {
        const ssa_rank_result *rr = &a->ranks[i];
        if (!selected(a, rr) || !rr->pipeline || !rr->totals.has_bubble_causes) continue;
        for (int k = 0; k < SSA_BUBBLE_N; k++)
          by[k] += rr->totals.bubble_cause[k];
        if (rr->totals.imbalance_stage >= 0 && rr->totals.imbalance_stage < 64)
          stage_votes[rr->totals.imbalance_stage]++;
        any = 1;
      }
      int best = -1;
      for (int k = 0; k < SSA_BUBBLE_N; k++)
        if (k != SSA_BUBBLE_SCHEDULE && by[k] > 0 && (best < 0 || by[k] > by[best])) best = k;
      if (any && best >= 0) {
        static const char *const words[SSA_BUBBLE_N] = {
            "the schedule",      "stage imbalance",
            "p2p transfer time", "waiting on a late upstream rank beyond the schedule",
            "host/launch gaps",  "waiting that could not be attributed"};
        fprintf(
            f, "; the largest cause beyond the schedule is %s (%.1f %% of the pipeline ranks' time",
            words[best], pct(by[best], pspan));
        if (best == SSA_BUBBLE_IMBALANCE) {
          int st = 0;
          for (int k = 1; k < 64; k++)
            if (stage_votes[k] > stage_votes[st]) st = k;
          fprintf(f, ", stage %d the slowest", st);
        }
        fprintf(f, ")");
      }
      fprintf(f, "\n");
      findings++;
    }
  }
  if (a->culprit_verdict.status == SSA_CULPRIT_FOUND) {
    print_culprit_verdict(a, "- ", f);
    findings++;
  }
  {
    size_t nhost = 0, nnone = 0;
    for (size_t i = 0; i < a->nranks; i++) {
      if (!selected(a, &a->ranks[i])) continue;
      nhost += a->ranks[i].rank->host_timeline != 0;
      nnone += a->ranks[i].rank->nops == 0;
    }
    if (nhost) {
      fprintf(f,
              "- %zu of %zu ranks have no device activity in the trace: their numbers are the "
              "host's timeline "
              "(CPU ops as compute, host collectives as communication; see the warnings)\n",
              nhost, nsel);
      findings++;
    }
    if (nnone) {
      fprintf(f,
              "- %zu of %zu ranks have no activity at all in the trace: nothing to measure there "
              "(see the warnings)\n",
              nnone, nsel);
      findings++;
    }
  }
  if (!findings) fprintf(f, "- nothing stands out\n");
}

/* The warnings of the run, its ranks and the analysis. */
static void print_warnings(const ssa_analysis *a, const text_totals *tot, FILE *f) {
  const ssa_run *run = a->run;
  char safe[1024];
  size_t nw = run->nwarnings + a->nwarnings;
  for (size_t i = 0; i < run->nranks; i++)
    nw += run->ranks[i].nwarnings;
  if (nw) {
    fprintf(f, "\n== warnings (%zu) ==\n", nw);
    for (size_t i = 0; i < run->nwarnings; i++)
      fprintf(f, "- %s\n", sc_text_safe(run->warnings[i], safe, sizeof safe));
    for (size_t i = 0; i < run->nranks; i++)
      for (size_t w = 0; w < run->ranks[i].nwarnings; w++)
        fprintf(f, "- %s\n", sc_text_safe(run->ranks[i].warnings[w], safe, sizeof safe));
    for (size_t i = 0; i < a->nwarnings; i++)
      fprintf(f, "- %s\n", sc_text_safe(a->warnings[i], safe, sizeof safe));
  }
}

int ssa_report_text(const ssa_analysis *a, FILE *f) {
  text_totals tot;
  sum_totals(a, &tot);
  print_headline(a, &tot, f);
  print_per_rank(a, &tot, f);
  print_bubble_by_cause(a, &tot, f);
  print_per_step(a, &tot, f);
  print_top_kernels(a, &tot, f);
  print_stragglers(a, &tot, f);
  print_collectives(a, &tot, f);
  print_expert_load(a, &tot, f);
  ssa_report_text_critical_path(a, f);
  print_findings(a, &tot, f);
  print_warnings(a, &tot, f);
  return ferror(f) ? STEPSCOPE_E_IO : 0;
}
