/*
 * test_rank_summary.c — the cross-rank steps on the ranks' summaries alone (rank_summary.c,
 * docs/scale.md): for generated runs of several layouts (random runs with clock spread,
 * missing members, CPU-backend and mixed ranks, uneven all-to-alls, collectives found by
 * name only; 1F1B and AFAB pipelines; `--scale` runs of TP x PP x DP with stragglers, lockstep
 * and with waits on late sends), the
 * run is analysed as `analyze` does; then the analysis runs again in its phases, per-rank
 * steps (summary; metrics and pipeline items; bubble transfers) with the ranks' events and
 * cross-rank steps (pipeline waits; collective matching; kernel table and the bubble's schedule
 * simulation; the culprit walk's rounds, whose questions the ranks answer in between; the
 * critical path's rounds, each answering rank's events put back only for its answers through
 * ssa_options.rank_events) with every rank's ops, collective records, API calls, ranges and
 * strings taken away. Both must give the same instances, summaries, late arrivals, per-rank
 * collective counts and waits, per-record wait ends and transfers, kernel rows, windows
 * (bubble causes included), culprit rows and verdict, critical path (every segment, step and
 * summary field; names as strings), and warnings. Each summary's records are also checked
 * against the rank's records and ops. Clock alignment runs again from the ranks' alignment
 * inputs alone (ssa_rank_align_input) and must give the loader's offsets, origin and warnings.
 * Last, every rank's events are dropped (ssa_rank_drop_events): the JSON report must not
 * change, the events must be gone, and the alignment from the kept inputs must give the same
 * offsets.
 *
 * usage: test_rank_summary CASE        (random | pipeline | scale | scale_waits | all)
 *        test_rank_summary --run DIR   (a run written by another tool: the trainer's)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "critical_path.h"
#include "ssa_import.h"
#include "ssa_metrics.h"
#include "ssa_report.h"
#include "stepscope_gen.h"

static int failures;
static const char *cur_case;
static size_t simulated_windows; /* pipeline windows whose bubble the schedule split */
static size_t culprit_rows;      /* culprit rows the cases had */

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      if (failures < 40) {                                                                         \
        fprintf(stderr, "FAIL %s: ", cur_case);                                                    \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
      }                                                                                            \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* Each summary record is its rank's record with the executing op's times. */
static void check_summary_records(const ssa_analysis *a) {
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank *r = a->ranks[i].rank;
    const ssa_rank_summary *s = &a->ranks[i].summary;
    CHECK(s->ncolls == r->ncolls, "rank %d: %zu summary records, %zu records", r->rank, s->ncolls,
          r->ncolls);
    CHECK(s->rank == r->rank && s->offset_ns == r->offset_ns, "rank %d: identity", r->rank);
    CHECK(s->pipeline_stage == ssa_rank_pipeline_stage(r), "rank %d: stage", r->rank);
    for (size_t j = 0; j < s->ncolls && j < r->ncolls; j++) {
      const ssa_coll *c = &r->colls[j];
      const ssa_coll_rec *x = &s->colls[j];
      int64_t start = c->op_index != SSA_NONE ? r->ops[c->op_index].start : c->start;
      int64_t end = c->op_index != SSA_NONE ? r->ops[c->op_index].end : c->end;
      CHECK(x->comm_id == c->comm_id && x->seq == c->seq && x->bytes == c->bytes &&
                x->op == c->op && x->flags == c->flags && x->comm_rank == c->comm_rank &&
                x->comm_size == c->comm_size && x->start == start && x->end == end &&
                !strcmp(ssa_strtab_get(&s->names, x->name), ssa_rank_str(r, c->name)),
            "rank %d record %zu differs from its summary", r->rank, j);
    }
  }
}

static int same_i64s(const int64_t *x, const int64_t *y, size_t n) {
  if (!x || !y) return x == y;
  return memcmp(x, y, n * sizeof *x) == 0;
}

/* Takes one rank's events and strings away (a copy of the rank kept elsewhere). */
static void hide_rank_events(ssa_rank *r) {
  r->ops = NULL;
  r->nops = 0;
  r->colls = NULL;
  r->ncolls = 0;
  r->apis = NULL;
  r->napis = 0;
  r->ranges = NULL;
  r->nranges = 0;
  r->anchors = NULL;
  r->nanchors = 0;
  r->syncs = NULL;
  r->nsyncs = 0;
  r->counters = NULL;
  r->ncounters = 0;
  ssa_strtab_init(&r->strings);
}

/* Takes every rank's events and strings away (into `saved`), or puts them back: what a
 * cross-rank step reads while they are away must be in the summaries. */
static void hide_events(ssa_run *run, ssa_rank *saved) {
  memcpy(saved, run->ranks, run->nranks * sizeof *saved);
  for (size_t i = 0; i < run->nranks; i++)
    hide_rank_events(&run->ranks[i]);
}

static void restore_events(ssa_run *run, const ssa_rank *saved) {
  memcpy(run->ranks, saved, run->nranks * sizeof *saved);
}

/* The analysis' hook for a per-rank pass (ssa_options.rank_events) while every rank's events
 * are away: the rank's events back for the pass, then away again. */
typedef struct hidden_run {
  ssa_run *run;
  const ssa_rank *saved;
} hidden_run;

static int show_one_rank(void *ctx, size_t i, int purpose) {
  hidden_run *h = ctx;
  (void)purpose;
  h->run->ranks[i] = h->saved[i];
  return 0;
}

static void hide_one_rank(void *ctx, size_t i) {
  hidden_run *h = ctx;
  hide_rank_events(&h->run->ranks[i]);
}

static size_t cp_steps_across_ranks; /* steps whose critical path ran on 2+ ranks */

/* The critical path walked in rounds with every rank's events away but the answering rank's
 * (ssa_find_critical_paths through the hook): equal to `ref`'s, names compared as strings. */
static void check_critical_path(const ssa_analysis *b, const ssa_analysis *ref) {
  const ssa_critical_path *x = b->critical_path, *y = ref->critical_path;
  CHECK(x && y && x->nsteps == y->nsteps && x->nsegs == y->nsegs && x->nranks == y->nranks,
        "critical path: steps or segments differ (%zu, %zu segments)", x ? x->nsegs : 0,
        y ? y->nsegs : 0);
  if (!x || !y || x->nsteps != y->nsteps || x->nsegs != y->nsegs || x->nranks != y->nranks) return;
  for (size_t i = 0; i < x->nsteps; i++) {
    const ssa_cp_step *p = &x->steps[i], *q = &y->steps[i];
    size_t on = 0;
    for (size_t r = 0; r < x->nranks; r++) {
      CHECK(p->by_rank[r] == q->by_rank[r], "path step %zu: time on rank index %zu", i, r);
      on += q->by_rank[r] != 0;
    }
    cp_steps_across_ranks += on > 1;
    CHECK(p->nseg == q->nseg, "path step %zu: %zu segments, %zu", i, p->nseg, q->nseg);
    for (size_t k = 0; k < p->nseg && k < q->nseg; k++) {
      const ssa_cp_segment *u = &p->segs[k], *w = &q->segs[k];
      CHECK(!strcmp(ssa_name(b, u->name), ssa_name(ref, w->name)) && u->start_rel == w->start_rel &&
                u->end_rel == w->end_rel && u->rank_idx == w->rank_idx && u->kind == w->kind &&
                u->cause == w->cause && u->edge == w->edge && u->is_api == w->is_api,
            "path step %zu: segment %zu differs", i, k);
    }
    CHECK(p->ntop == q->ntop, "path step %zu: top ops", i);
    for (size_t t = 0; t < q->ntop && t < p->ntop; t++)
      CHECK(!strcmp(ssa_name(b, p->top[t].name), ssa_name(ref, q->top[t].name)) &&
                p->top[t].rank_idx == q->top[t].rank_idx && p->top[t].kind == q->top[t].kind &&
                p->top[t].time == q->top[t].time && p->top[t].count == q->top[t].count,
            "path step %zu: top op %zu", i, t);
    CHECK(
        p->step == q->step && p->step_time == q->step_time && p->length == q->length &&
            p->start_rel == q->start_rel && p->end_rel == q->end_rel &&
            p->end_rank_idx == q->end_rank_idx && p->in_medians == q->in_medians &&
            !memcmp(p->kind, q->kind, sizeof p->kind) &&
            !memcmp(p->idle_cause, q->idle_cause, sizeof p->idle_cause) &&
            p->host_untraced == q->host_untraced && p->nseg == q->nseg && p->clipped == q->clipped,
        "path step %zu differs (length %lld, %lld)", i, (long long)p->length, (long long)q->length);
  }
  for (size_t r = 0; r < x->nranks; r++)
    CHECK(x->total_by_rank[r] == y->total_by_rank[r], "path total on rank index %zu", r);
  CHECK(x->ntop == y->ntop, "path top ops: %zu, %zu", x->ntop, y->ntop);
  for (size_t t = 0; t < x->ntop && t < y->ntop; t++)
    CHECK(!strcmp(ssa_name(b, x->top[t].name), ssa_name(ref, y->top[t].name)) &&
              x->top[t].rank_idx == y->top[t].rank_idx && x->top[t].time == y->top[t].time &&
              x->top[t].count == y->top[t].count,
          "path top op %zu differs", t);
  CHECK(x->steady == y->steady && x->median_step == y->median_step &&
            x->median_length == y->median_length && x->median_step_time == y->median_step_time &&
            !memcmp(x->median_kind, y->median_kind, sizeof x->median_kind) &&
            !memcmp(x->median_idle_cause, y->median_idle_cause, sizeof x->median_idle_cause) &&
            x->total_length == y->total_length &&
            !memcmp(x->total_kind, y->total_kind, sizeof x->total_kind) &&
            !memcmp(x->total_idle_cause, y->total_idle_cause, sizeof x->total_idle_cause) &&
            x->total_host_untraced == y->total_host_untraced &&
            x->mismatched_steps == y->mismatched_steps,
        "critical path summary differs");
}

/* Runs one per-rank step on every rank (events present); the first error. */
static int per_rank(ssa_analysis *b, int (*step)(ssa_analysis *b, ssa_rank_result *rr)) {
  for (size_t i = 0; i < b->nranks; i++) {
    int rc = step(b, &b->ranks[i]);
    if (rc) return rc;
  }
  return 0;
}

static int summarize(ssa_analysis *b, ssa_rank_result *rr) {
  (void)b;
  return ssa_rank_summarize(rr->rank, &rr->summary);
}

static int metrics(ssa_analysis *b, ssa_rank_result *rr) {
  int rc = ssa_analyze_rank(b, rr);
  if (rc == 0 && rr->pipeline && rr->stage >= 0) rc = ssa_rank_pipeline_items(b, rr);
  return rc;
}

static int transfers(ssa_analysis *b, ssa_rank_result *rr) {
  (void)b;
  return rr->pipeline ? ssa_rank_bubble_transfers(rr) : 0;
}

/* The analysis again in its phases, each cross-rank step with the ranks' events and strings
 * taken away; compared with `ref` (ssa_analyze's). */
static void check_cross_rank_on_summaries(ssa_run *run, const ssa_analysis *ref) {
  ssa_analysis b;
  memset(&b, 0, sizeof b);
  b.run = run;
  b.opt = ref->opt;
  b.launch_gap_ns = ref->launch_gap_ns;
  ssa_strtab_init(&b.names);
  CHECK(ssa_strtab_intern(&b.names, "x", 1) != 0, "intern");
  b.nranks = ref->nranks;
  b.ranks = calloc(b.nranks, sizeof *b.ranks);
  ssa_rank *saved = malloc(run->nranks * sizeof *saved);
  if (!b.ranks || !saved) {
    CHECK(0, "out of memory");
    free(b.ranks);
    free(saved);
    ssa_strtab_free(&b.names);
    return;
  }
  for (size_t i = 0; i < b.nranks; i++) {
    b.ranks[i].rank = &run->ranks[i];
    b.ranks[i].rank_index = i;
    b.ranks[i].stage = -1;
  }
  int rc = per_rank(&b, summarize);
  if (rc == 0) {
    hide_events(run, saved);
    rc = ssa_find_pipeline_waits(&b);
    restore_events(run, saved);
  }
  if (rc == 0) rc = per_rank(&b, metrics);
  if (rc == 0) {
    hide_events(run, saved);
    rc = ssa_match_collectives(&b);
    restore_events(run, saved);
  }
  if (rc == 0) rc = per_rank(&b, transfers);
  if (rc == 0) rc = ssa_read_run_metadata(&b); /* the ranks' metadata: the schedule */
  if (rc == 0) {
    hide_events(run, saved);
    rc = ssa_build_kernel_table(&b);
    if (rc == 0) rc = ssa_bubble_causes(&b);
    restore_events(run, saved);
  }
  /* the late upstream's sources: cross-rank steps on summaries, the ranks' waits and answers
   * with their events, in rounds */
  ssa_upstream *up = NULL;
  if (rc == 0) {
    hide_events(run, saved);
    rc = ssa_upstream_begin(&b, &up);
    restore_events(run, saved);
  }
  for (size_t i = 0; rc == 0 && up && i < b.nranks; i++)
    rc = ssa_upstream_rank_waits(up, i);
  for (size_t asked = 1; rc == 0 && up && asked;) {
    hide_events(run, saved);
    rc = ssa_upstream_round(up, &asked);
    restore_events(run, saved);
    for (size_t i = 0; rc == 0 && asked && i < b.nranks; i++)
      rc = ssa_upstream_rank_answers(up, i);
  }
  if (rc == 0 && up) {
    hide_events(run, saved);
    rc = ssa_upstream_name_sources(up);
    restore_events(run, saved);
  }
  ssa_upstream_free(up);
  /* the culprit walk: rounds of a walk without events, then the ranks' answers with them */
  ssa_phase_requests q;
  memset(&q, 0, sizeof q);
  for (size_t unanswered = 1; rc == 0 && unanswered;) {
    hide_events(run, saved);
    rc = ssa_culprit_walk(&b, &q, &unanswered);
    restore_events(run, saved);
    for (size_t i = 0; rc == 0 && unanswered && i < b.nranks; i++)
      rc = ssa_rank_phase_answers(&b, i, &q);
  }
  ssa_phase_requests_free(&q);
  /* the critical path: rounds of questions, each asked rank's events back for its answers */
  if (rc == 0) {
    hidden_run h = {run, saved};
    ssa_rank_events hook = {show_one_rank, hide_one_rank, &h};
    b.opt.rank_events = &hook;
    hide_events(run, saved);
    rc = ssa_find_critical_paths(&b);
    restore_events(run, saved);
    b.opt.rank_events = ref->opt.rank_events;
    if (rc == 0) check_critical_path(&b, ref);
  }
  free(saved);
  CHECK(rc == 0, "cross-rank steps on summaries: %s", stepscope_status_name(rc));

  CHECK(b.ncolls == ref->ncolls, "%zu instances on summaries, %zu from the run", b.ncolls,
        ref->ncolls);
  for (size_t k = 0; k < b.ncolls && k < ref->ncolls; k++) {
    ssa_coll_instance x = b.colls[k], y = ref->colls[k];
    CHECK(!strcmp(ssa_name(&b, x.group), ssa_name(ref, y.group)), "instance %zu group", k);
    x.group = y.group = 0;
    CHECK(!memcmp(&x, &y, sizeof x), "instance %zu (comm %llx seq %llu) differs", k,
          (unsigned long long)y.comm_id, (unsigned long long)y.seq);
  }
  CHECK(b.ncoll_summaries == ref->ncoll_summaries, "%zu summaries, %zu", b.ncoll_summaries,
        ref->ncoll_summaries);
  for (size_t k = 0; k < b.ncoll_summaries && k < ref->ncoll_summaries; k++)
    CHECK(!memcmp(&b.coll_summaries[k], &ref->coll_summaries[k], sizeof b.coll_summaries[k]),
          "summary row %zu differs", k);
  CHECK(b.nlates == ref->nlates, "%zu late arrivals, %zu", b.nlates, ref->nlates);
  for (size_t k = 0; k < b.nlates && k < ref->nlates; k++)
    CHECK(!memcmp(&b.lates[k], &ref->lates[k], sizeof b.lates[k]), "late arrival %zu differs", k);
  CHECK(b.colls_incomplete == ref->colls_incomplete && b.colls_inferred == ref->colls_inferred &&
            b.colls_refused == ref->colls_refused,
        "incomplete/inferred/refused counts");
  for (size_t i = 0; i < b.nranks; i++) {
    const ssa_rank_result *x = &b.ranks[i], *y = &ref->ranks[i];
    size_t n = x->summary.ncolls;
    CHECK(x->stage_of_waits == y->stage_of_waits && x->coll_count == y->coll_count &&
              x->coll_wait == y->coll_wait && x->coll_caused == y->coll_caused &&
              x->coll_last == y->coll_last && x->coll_schedule_wait == y->coll_schedule_wait,
          "rank index %zu: collective counts or waits differ", i);
    CHECK(same_i64s(x->coll_wait_end, y->coll_wait_end, n), "rank index %zu: wait ends", i);
    CHECK(same_i64s(x->coll_transfer, y->coll_transfer, n), "rank index %zu: transfers", i);
    CHECK(x->nsteps == y->nsteps && !memcmp(&x->totals, &y->totals, sizeof x->totals),
          "rank index %zu: totals window differs", i);
    for (size_t k = 0; k < y->nsteps; k++)
      simulated_windows += y->windows[k].schedule_idle >= 0;
    for (size_t k = 0; k < x->nsteps && k < y->nsteps; k++)
      CHECK(!memcmp(&x->windows[k], &y->windows[k], sizeof x->windows[k]),
            "rank index %zu: window of step %lld differs (bubble causes %lld %lld)", i,
            (long long)y->windows[k].step, (long long)x->windows[k].bubble_cause[0],
            (long long)y->windows[k].bubble_cause[0]);
  }
  CHECK(b.nkernels == ref->nkernels && b.kernel_time_total == ref->kernel_time_total,
        "%zu kernel rows, %zu", b.nkernels, ref->nkernels);
  for (size_t k = 0; k < b.nkernels && k < ref->nkernels; k++) {
    ssa_kernel_row x = b.kernels[k], y = ref->kernels[k];
    CHECK(!strcmp(ssa_name(&b, x.name), ssa_name(ref, y.name)), "kernel row %zu name", k);
    x.name = y.name = 0;
    CHECK(!memcmp(&x, &y, sizeof x), "kernel row %zu differs", k);
  }
  size_t nw = 0; /* the matching's warnings are the first of the reference's after the ranks' */
  for (size_t k = 0; k < ref->nwarnings && nw < b.nwarnings; k++)
    if (!strcmp(ref->warnings[k], b.warnings[nw])) nw++;
  CHECK(nw == b.nwarnings, "%zu of %zu warnings found in the reference", nw, b.nwarnings);
  if (b.ncolls == 0 && ref->ncolls == 0) CHECK(0, "the case has no collective instance");
  if (b.nkernels == 0 && ref->nkernels == 0) CHECK(0, "the case has no kernel");
  CHECK(b.nculprits == ref->nculprits && b.culprit_steps_total == ref->culprit_steps_total,
        "%zu culprit rows (%llu steps walked), %zu (%llu)", b.nculprits,
        (unsigned long long)b.culprit_steps_total, ref->nculprits,
        (unsigned long long)ref->culprit_steps_total);
  for (size_t k = 0; k < b.nculprits && k < ref->nculprits; k++) {
    const ssa_culprit *x = &b.culprits[k], *y = &ref->culprits[k];
    CHECK(x->rank == y->rank && x->phase == y->phase && x->caused == y->caused &&
              x->excess == y->excess && x->steps == y->steps && x->instances == y->instances &&
              x->via_victim == y->via_victim && x->beyond_noise == y->beyond_noise,
          "culprit row %zu differs", k);
  }
  const ssa_culprit_verdict *vx = &b.culprit_verdict, *vy = &ref->culprit_verdict;
  CHECK(vx->status == vy->status && vx->steps == vy->steps && vx->rank == vy->rank &&
            vx->phase == vy->phase && vx->steps_late == vy->steps_late &&
            vx->effect_median == vy->effect_median && vx->effect_max == vy->effect_max &&
            vx->caused == vy->caused && vx->phase_excess == vy->phase_excess &&
            vx->threshold_ns == vy->threshold_ns,
        "culprit verdict differs");
  culprit_rows += ref->nculprits;
  ssa_analysis_free(&b);
}

/* Clock alignment again from the ranks' alignment inputs alone (events, anchors and strings
 * taken away), on a copy of the run's alignment state; compared with the loader's. */
static void check_alignment_on_inputs(ssa_run *run) {
  size_t n = run->nranks;
  ssa_rank_align *in = calloc(n ? n : 1, sizeof *in);
  int64_t *offsets = malloc((n ? n : 1) * sizeof *offsets),
          *got = malloc((n ? n : 1) * sizeof *got);
  ssa_rank *saved = malloc((n ? n : 1) * sizeof *saved);
  int rc = in && offsets && got && saved ? 0 : STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < n && rc == 0; i++) {
    rc = ssa_rank_align_input(&run->ranks[i], &in[i]);
    offsets[i] = run->ranks[i].offset_ns;
    run->ranks[i].offset_ns = 0x5eed; /* set again by the alignment */
  }
  ssa_run b = {.ranks = run->ranks, .nranks = n};
  if (rc == 0) {
    hide_events(run, saved);
    rc = ssa_run_align_inputs(&b, in);
    for (size_t i = 0; i < n; i++)
      got[i] = run->ranks[i].offset_ns;
    restore_events(run, saved);
  }
  CHECK(rc == 0, "alignment on inputs: %s", stepscope_status_name(rc));
  for (size_t i = 0; rc == 0 && i < n; i++)
    CHECK(b.anchor_offset[i] == run->anchor_offset[i] &&
              b.refine_offset[i] == run->refine_offset[i] &&
              b.refine_samples[i] == run->refine_samples[i] && got[i] == offsets[i],
          "rank index %zu: alignment differs (offset %lld, %lld)", i, (long long)got[i],
          (long long)offsets[i]);
  CHECK(rc || (b.origin == run->origin && b.refined == run->refined &&
               b.reference_rank == run->reference_rank),
        "origin, refinement or reference rank differs");
  size_t nw = 0; /* its warnings, in order, among the loader's */
  for (size_t k = 0; k < run->nwarnings && nw < b.nwarnings; k++)
    if (!strcmp(run->warnings[k], b.warnings[nw])) nw++;
  CHECK(nw == b.nwarnings, "%zu of %zu alignment warnings found in the run's", nw, b.nwarnings);
  for (size_t i = 0; offsets && i < n; i++)
    run->ranks[i].offset_ns = offsets[i];
  for (size_t i = 0; in && i < n; i++)
    ssa_rank_align_free(&in[i]);
  for (size_t k = 0; k < b.nwarnings; k++)
    free(b.warnings[k]);
  free(b.warnings);
  free(b.anchor_offset);
  free(b.refine_offset);
  free(b.refine_samples);
  free(in);
  free(offsets);
  free(got);
  free(saved);
}

/* The JSON report of `a` in a malloc'd string (NULL on failure). */
static char *json_report(const ssa_analysis *a) {
  FILE *f = tmpfile();
  if (!f) return NULL;
  ssa_out o;
  char *text = NULL;
  if (ssa_out_open_file(&o, f) == 0 && ssa_report_json(a, &o) == 0 && ssa_out_close(&o) == 0) {
    long n = ftell(f);
    text = n >= 0 ? calloc((size_t)n + 1, 1) : NULL;
    rewind(f);
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n) {
      free(text);
      text = NULL;
    }
  }
  fclose(f);
  return text;
}

/* Drops every rank's events after the analysis: the report reads only the shells, and the
 * alignment from the kept inputs gives the loader's offsets. */
static void check_report_after_drop(ssa_run *run, const ssa_analysis *a) {
  char *before = json_report(a);
  CHECK(before != NULL, "JSON report before dropping");
  size_t n = run->nranks, had_ops = 0;
  int64_t *offsets = malloc((n ? n : 1) * sizeof *offsets);
  for (size_t i = 0; i < n; i++) {
    ssa_rank *r = &run->ranks[i];
    had_ops += r->nops > 0;
    if (offsets) offsets[i] = r->offset_ns;
    CHECK(ssa_rank_drop_events(r) == 0, "rank %d: drop", r->rank);
    CHECK(r->events_dropped && !r->ops && !r->apis && !r->ranges && !r->colls && !r->ncolls &&
              !r->nranges && !r->napis && r->align_input,
          "rank %d: events still there after dropping", r->rank);
    r->offset_ns = 0x5eed; /* set again by the alignment */
  }
  CHECK(had_ops > 0, "the case has no op");
  ssa_run b = {.ranks = run->ranks, .nranks = n};
  CHECK(ssa_run_align(&b) == 0, "alignment from the kept inputs");
  for (size_t i = 0; offsets && i < n; i++)
    CHECK(run->ranks[i].offset_ns == offsets[i], "rank index %zu: offset after dropping", i);
  CHECK(b.origin == run->origin, "origin after dropping");
  for (size_t k = 0; k < b.nwarnings; k++)
    free(b.warnings[k]);
  free(b.warnings);
  free(b.anchor_offset);
  free(b.refine_offset);
  free(b.refine_samples);
  char *after = json_report(a);
  CHECK(after && before && !strcmp(before, after), "the JSON report changed after dropping events");
  free(before);
  free(after);
  free(offsets);
}

static void check_dir(const char *name, const char *dir) {
  cur_case = name;
  ssa_run run;
  stepscope_error e;
  ssa_load_options lo = {.threads = 2, .progress = 0};
  if (ssa_run_load(&run, dir, &lo, &e)) {
    CHECK(0, "load: %s", e.message);
    return;
  }
  check_alignment_on_inputs(&run);
  ssa_analysis an;
  ssa_options opt;
  ssa_options_default(&opt);
  opt.threads = 2;
  if (ssa_analyze(&run, &opt, &an, &e)) {
    CHECK(0, "analyze: %s", e.message);
  } else {
    check_summary_records(&an);
    check_cross_rank_on_summaries(&run, &an);
    check_report_after_drop(&run, &an);
    ssa_analysis_free(&an);
  }
  ssa_run_free(&run);
}

static void remove_dir(const char *dir) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static void check_built(const char *name, gen_run *g) {
  char dir[] = "/tmp/ssa-summary-XXXXXX";
  char err[600];
  cur_case = name;
  if (!mkdtemp(dir)) {
    CHECK(0, "mkdtemp");
  } else if (gen_write(g, dir, err, sizeof err)) {
    CHECK(0, "write: %s", err);
  } else
    check_dir(name, dir);
  gen_free(g);
  remove_dir(dir);
}

static void check_scenario(const char *name, const gen_scenario *sc) {
  gen_run g;
  cur_case = name;
  if (gen_build(&g, sc)) {
    CHECK(0, "gen_build");
    return;
  }
  check_built(name, &g);
}

static void random_cases(void) {
  static const struct {
    const char *name;
    int pipeline, missing_member, cpu_backend, alltoall, name_only_nccl;
  } cases[] = {
      {"random.plain", 0, 0, 0, 0, 0},    {"random.pipeline", 1, 0, 0, 0, 0},
      {"random.missing", 0, 1, 0, 0, 0},  {"random.cpu_mixed", 0, 0, 2, 0, 0},
      {"random.alltoall", 0, 0, 0, 1, 0}, {"random.name_only", 0, 0, 0, 0, 1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (uint64_t seed = 1; seed <= 3; seed++) {
      gen_scenario sc;
      gen_scenario_default(&sc);
      sc.seed = seed * 7919 + c;
      sc.nranks = 4;
      sc.nsteps = 3;
      sc.comm = 6;
      sc.clock_spread = 3000000;
      sc.anchor_error = 20000; /* the alignment refines by collectives */
      sc.pipeline = cases[c].pipeline;
      sc.missing_member = cases[c].missing_member;
      sc.cpu_backend = cases[c].cpu_backend;
      sc.alltoall = cases[c].alltoall;
      sc.name_only_nccl = cases[c].name_only_nccl;
      check_scenario(cases[c].name, &sc);
    }
}

static void pipeline_cases(void) {
  for (int schedule = 1; schedule <= 2; schedule++)
    for (int nranks = 2; nranks <= 4; nranks += 2) {
      gen_scenario sc;
      gen_scenario_default(&sc);
      sc.seed = (uint64_t)(schedule * 31 + nranks);
      sc.nranks = nranks;
      sc.nsteps = 3;
      sc.pipeline_schedule = schedule;
      check_scenario(schedule == 1 ? "pipeline.1f1b" : "pipeline.afab", &sc);
    }
}

/* A `--scale` run of TP 2 x PP 4 x DP 4 with stragglers: lockstep slots, or (waits) each
 * stage's timeline from the schedule's dependencies, its receives waiting on late sends
 * (gen_scale_waits.c: the late upstream's chains and the culprit walk's chase). */
static void scale_case(const char *name, int waits, int one_f_one_b) {
  cur_case = name;
  char dir[] = "/tmp/ssa-summary-XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(0, "mkdtemp");
    return;
  }
  gen_scale s;
  gen_scale_default(&s);
  s.nranks = 32;
  s.events_per_rank = 1500;
  s.nsteps = 4;
  s.tp = 2;
  s.pp = 4;
  s.microbatches = 4;
  s.stragglers = 2;
  s.waits = waits;
  s.one_f_one_b = one_f_one_b;
  char err[600];
  uint64_t events = 0;
  if (gen_scale_layout(&s) || gen_scale_write(&s, dir, &events, err, sizeof err))
    CHECK(0, "scale run: %s", err);
  else
    check_dir(name, dir);
  remove_dir(dir);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--run")) {
    check_dir(argv[2], argv[2]);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
  }
  const char *which = argc > 1 ? argv[1] : "all";
  int all = !strcmp(which, "all");
  if (all || !strcmp(which, "random")) random_cases();
  if (all || !strcmp(which, "pipeline")) {
    pipeline_cases();
    cur_case = "pipeline";
    CHECK(simulated_windows > 0, "no window's bubble was split by the schedule");
  }
  if (all || !strcmp(which, "scale")) {
    scale_case("scale", 0, 0);
    cur_case = "scale";
    CHECK(culprit_rows > 0, "no culprit row: the walk was not exercised");
  }
  if (all || !strcmp(which, "scale_waits")) {
    size_t rows = culprit_rows, across = cp_steps_across_ranks;
    scale_case("scale.waits_afab", 1, 0);
    scale_case("scale.waits_1f1b", 1, 1);
    cur_case = "scale_waits";
    CHECK(culprit_rows > rows, "no culprit row: the walk was not exercised");
    CHECK(cp_steps_across_ranks > across, "no step's critical path crossed ranks");
  }
  if (all || !strcmp(which, "pipeline")) {
    cur_case = "pipeline";
    CHECK(cp_steps_across_ranks > 0, "no step's critical path crossed ranks: no jump tested");
  }
  if (failures) fprintf(stderr, "%d failures\n", failures);
  return failures ? 1 : 0;
}
