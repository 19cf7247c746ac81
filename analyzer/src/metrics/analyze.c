/*
 * analyze.c — runs the whole analysis of a loaded run: each rank's summary
 * (rank_summary.c), the pipeline waits, the per-rank metrics (breakdown.c) on
 * a pool of threads, one task per rank, then the cross-rank
 * parts in order: collectives and stragglers, the kernel table, run
 * metadata (step times, MFU/HFU, memory, schedule). Owns the analysis
 * result and its warnings (thread-safe: workers may warn).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "critical_path.h"
#include "rank_local.h"
#include "ssa_metrics.h"
#include "ssa_ops.h"

static pthread_mutex_t warn_lock = PTHREAD_MUTEX_INITIALIZER;

const char *const ssa_read_purpose_names[SSA_READ_N] = {
    "the per-rank metrics",       "the step numbers of the --steps message",
    "the bubble's transfers",     "the op groups of MFU from the ops' FLOPs",
    "the late upstream's rounds", "the culprit walk's rounds",
    "the critical path's rounds", "the ranges of --step-range"};

void ssa_options_default(ssa_options *o) {
  memset(o, 0, sizeof *o);
  o->rank = -1;
  o->launch_gap_ns = SSA_DEFAULT_LAUNCH_GAP_NS;
  o->top_n = 20;
}

int64_t ssa_options_launch_gap_ns(const ssa_options *o) {
  return o->launch_gap_ns > 0 ? o->launch_gap_ns : SSA_DEFAULT_LAUNCH_GAP_NS;
}

int ssa_analysis_warn(ssa_analysis *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&warn_lock); /* ranks are analysed in parallel */
  int rc = ssa_text_list_vadd(&a->warnings, &a->nwarnings, &a->warnings_cap, 700, fmt, ap);
  pthread_mutex_unlock(&warn_lock);
  va_end(ap);
  return rc;
}

int ssa_with_rank_events(ssa_analysis *a, size_t i,
                         int (*pass)(ssa_analysis *a, size_t i, void *arg), void *arg) {
  const ssa_rank_events *ev = a->opt.rank_events;
  if (!ev) return pass(a, i, arg);
  int rc = ev->load(ev->ctx, i, a->reading_for);
  if (rc == 0) rc = pass(a, i, arg);
  ev->drop(ev->ctx, i);
  return rc;
}

static int summarize(ssa_analysis *a, size_t i, void *unused) {
  (void)unused;
  return ssa_rank_summarize(a->ranks[i].rank, &a->ranks[i].summary);
}

/* One rank's summary, what the cross-rank pass reads of it (a job of ssa_parallel_for): made
 * at load (the bounded mode) and taken, else made here. */
static void summarize_rank(void *ctx, size_t i) {
  ssa_analysis *a = ctx;
  ssa_rank_result *rr = &a->ranks[i];
  if (a->opt.summaries) {
    rr->summary = a->opt.summaries[i];
    rr->summary.offset_ns = rr->rank->offset_ns; /* aligned after it was made */
    memset(&a->opt.summaries[i], 0, sizeof a->opt.summaries[i]);
  } else
    rr->error = ssa_with_rank_events(a, i, summarize, NULL);
}

/* The first error a job left on a rank, 0 when none did. */
static int first_rank_error(const ssa_analysis *a) {
  for (size_t i = 0; i < a->nranks; i++)
    if (a->ranks[i].error) return a->ranks[i].error;
  return 0;
}

static int metrics(ssa_analysis *a, size_t i, void *op_groups_wanted) {
  ssa_rank_result *rr = &a->ranks[i];
  if (ssa_analyze_rank(a, rr) == 0 && rr->pipeline && rr->stage >= 0)
    rr->error = ssa_rank_pipeline_items(a, rr);
  /* MFU from the ops' FLOPs will need the rank's op groups: made while its events are here */
  if (rr->error == 0 && *(const int *)op_groups_wanted && ssa_op_table_counts(a, i))
    rr->error = ssa_rank_op_groups(a, rr);
  return rr->error;
}

/* The per-rank metrics pass's jobs: the analysis, and whether the op groups are wanted. */
typedef struct metrics_job {
  ssa_analysis *a;
  int op_groups_wanted;
} metrics_job;

/* Whether rank i's results made where it was loaded are what its metrics pass would make
 * here: made, with the op groups if wanted, and (a pipeline rank's, of a second map round)
 * from the same pipeline waits as this analysis'. */
static int local_fits(const metrics_job *job, size_t i, const ssa_rank_local *l) {
  const ssa_rank_result *rr = &job->a->ranks[i];
  return l->made &&
         (!job->op_groups_wanted || l->result.ops.made || !ssa_op_table_counts(job->a, i)) &&
         (!l->crossed ||
          l->waits_hash ==
              ssa_cross_waits_hash(rr->stage_of_waits, rr->summary.ncolls, rr->coll_wait_end));
}

/* One rank's metrics (a job of ssa_parallel_for): made where it was loaded (a merge's
 * partial) and taken, else made from its events. */
static void analyze_rank(void *ctx, size_t i) {
  metrics_job *job = ctx;
  ssa_rank_local *local = job->a->opt.rank_locals ? &job->a->opt.rank_locals[i] : NULL;
  int rc;
  if (local && local_fits(job, i, local))
    rc = ssa_rank_local_take(job->a, &job->a->ranks[i], local, job->op_groups_wanted);
  else {
    if (local) ssa_rank_local_free(local); /* not this analysis' (nor its transfers) */
    rc = ssa_with_rank_events(job->a, i, metrics, &job->op_groups_wanted);
  }
  if (rc && !job->a->ranks[i].error) job->a->ranks[i].error = rc;
}

static int bubble_transfers(ssa_analysis *a, size_t i, void *upstream) {
  int rc = ssa_rank_bubble_transfers(&a->ranks[i]);
  return rc || !upstream ? rc : ssa_upstream_rank_waits(upstream, i);
}

/* The pass after the matching's jobs: the analysis and the late upstream's state. */
typedef struct transfers_job {
  ssa_analysis *a;
  ssa_upstream *upstream;
} transfers_job;

/* Whether pipeline rank i's results taken from a second map round hold the transfers this
 * analysis would measure: made from the same clock, transfers and matched sends, and waits on
 * ranks of this run (a damaged partial's are read again, not followed) (*fits). */
static int carried_transfers_fit(const transfers_job *job, size_t i, const ssa_rank_local *l,
                                 int *fits) {
  const ssa_rank_result *rr = &job->a->ranks[i];
  ssa_partner_send *sends = NULL;
  size_t n = 0;
  if (job->upstream && ssa_upstream_partner_sends(job->upstream, i, &sends, &n))
    return STEPSCOPE_E_NOMEM;
  *fits = l->transfers_hash == ssa_cross_transfers_hash(rr->summary.offset_ns - job->a->run->origin,
                                                        &rr->summary, rr->coll_transfer, sends, n);
  free(sends);
  for (size_t k = 0; k < l->nwaits && *fits; k++)
    *fits = l->waits[k].sender < job->a->nranks;
  return 0;
}

/* One pipeline rank's bubble transfers, once the matching gave each record's transfer, and
 * its receives that waited on a late send (a job of ssa_parallel_for): taken with its results
 * from a second map round when they fit, else measured from its events. */
static void measure_bubble_transfers(void *ctx, size_t i) {
  transfers_job *job = ctx;
  ssa_rank_result *rr = &job->a->ranks[i];
  ssa_rank_local *l = job->a->opt.rank_locals ? &job->a->opt.rank_locals[i] : NULL;
  int fits = 0;
  if (!rr->pipeline) return;
  if (l && l->crossed && (rr->error = carried_transfers_fit(job, i, l, &fits)) != 0) return;
  if (!fits)
    rr->error = ssa_with_rank_events(job->a, i, bubble_transfers, job->upstream);
  else if (job->upstream) /* its windows hold the transfers since its metrics were taken */
    ssa_upstream_take_waits(job->upstream, i, &l->waits, &l->nwaits);
}

/* The steps of rank i, numbered lo..hi (a pass, for the message of a --steps that keeps
 * nothing). */
static int step_numbers(ssa_analysis *a, size_t i, void *unused) {
  (void)unused;
  ssa_step *all = NULL;
  size_t n = 0;
  if (ssa_find_steps(a->ranks[i].rank, a->opt.step_range_name, &all, &n) == 0)
    for (size_t s = 0; s < n; s++) {
      if (all[s].number < a->step_lo) a->step_lo = all[s].number;
      if (all[s].number > a->step_hi) a->step_hi = all[s].number;
    }
  free(all);
  return 0;
}

static int has_step_range(ssa_analysis *a, size_t i, void *found) {
  *(int *)found = ssa_rank_has_range(a->ranks[i].rank, a->opt.step_range_name);
  return 0;
}

/* Whether a rank of the run has a range named --step-range's name. A rank's ranges go with
 * its events in the bounded mode, its string table stays: only a rank whose strings hold the
 * name is read again to look, and the first one that has the range ends the search. */
static int run_has_step_range(ssa_analysis *a, int *found) {
  *found = 0;
  a->reading_for = SSA_READ_STEP_RANGE;
  int rc = 0;
  for (size_t i = 0; i < a->nranks && !*found && rc == 0; i++)
    if (ssa_rank_string_id(a->ranks[i].rank, a->opt.step_range_name))
      rc = ssa_with_rank_events(a, i, has_step_range, found);
  return rc;
}

int ssa_analysis_begin(ssa_analysis *a, const ssa_run *run, const ssa_options *opt) {
  memset(a, 0, sizeof *a);
  a->run = run;
  if (opt)
    a->opt = *opt;
  else
    ssa_options_default(&a->opt);
  a->launch_gap_ns = ssa_options_launch_gap_ns(&a->opt);
  if (a->opt.top_n <= 0) a->opt.top_n = 20;
  ssa_strtab_init(&a->names);
  if (ssa_strtab_intern(&a->names, "x", 1) == 0) return STEPSCOPE_E_NOMEM;
  a->nranks = run->nranks;
  a->ranks = calloc(run->nranks ? run->nranks : 1, sizeof *a->ranks);
  if (!a->ranks) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < run->nranks; i++) {
    a->ranks[i].rank = &run->ranks[i];
    a->ranks[i].rank_index = i;
    a->ranks[i].stage = -1;
  }
  return 0;
}

int ssa_analyze(const ssa_run *run, const ssa_options *opt, ssa_analysis *a, stepscope_error *err) {
  transfers_job tj = {a, NULL}; /* the late upstream's state from the matching on */
  int rc = ssa_analysis_begin(a, run, opt);
  if (rc) goto fail;
  int has_range = 1;
  if (a->opt.step_range_name && (rc = run_has_step_range(a, &has_range)) != 0) goto fail;
  if (!has_range) {
    rc = STEPSCOPE_E_ARGUMENT; /* asked for, not there: never a silent fall-back */
    if (err) {
      err->code = rc;
      snprintf(err->message, sizeof err->message,
               "--step-range '%s' names no range of this run (without it, steps come from "
               "'step' ranges of domain stepscope, else ProfilerStep#N)",
               a->opt.step_range_name);
    }
    return rc;
  }
  size_t workers = ssa_workers(a->nranks, a->opt.threads);
  ssa_parallel_for(a->nranks, workers, summarize_rank, a);
  if ((rc = first_rank_error(a)) != 0) goto fail;
  if ((rc = ssa_find_pipeline_waits(a)) != 0) goto fail;
  metrics_job job = {a, isnan(ssa_metadata_model_flops(a))};
  a->reading_for = SSA_READ_METRICS;
  ssa_parallel_for(a->nranks, workers, analyze_rank, &job);
  if ((rc = first_rank_error(a)) != 0) goto fail;
  if (a->opt.rank >= 0) {
    int found = 0;
    for (size_t i = 0; i < a->nranks; i++)
      found |= a->ranks[i].rank->rank == a->opt.rank;
    if (!found) {
      rc = STEPSCOPE_E_ARGUMENT;
      if (err) {
        err->code = rc;
        snprintf(err->message, sizeof err->message, "rank %d is not in the run", a->opt.rank);
      }
      return rc;
    }
  }
  if (a->opt.has_step_filter) {
    /* a selection that keeps nothing is an error, not a report of nothing */
    int any = 0;
    a->step_lo = INT64_MAX;
    a->step_hi = INT64_MIN;
    a->reading_for = SSA_READ_STEP_NUMBERS;
    for (size_t i = 0; i < a->nranks; i++) {
      any |= a->ranks[i].nsteps > 0;
      if (!any) ssa_with_rank_events(a, i, step_numbers, NULL);
    }
    int64_t lo = a->step_lo, hi = a->step_hi;
    if (!any) {
      rc = STEPSCOPE_E_ARGUMENT;
      if (err) {
        err->code = rc;
        if (lo <= hi)
          snprintf(err->message, sizeof err->message,
                   "--steps %lld:%lld matches no step (the run's steps are %lld..%lld)",
                   (long long)a->opt.step_first, (long long)a->opt.step_last, (long long)lo,
                   (long long)hi);
        else
          snprintf(err->message, sizeof err->message,
                   "--steps %lld:%lld matches no step (the run has no step ranges)",
                   (long long)a->opt.step_first, (long long)a->opt.step_last);
      }
      return rc;
    }
  }
  if ((rc = ssa_match_collectives(a)) != 0) goto fail;
  if ((rc = ssa_upstream_begin(a, &tj.upstream)) != 0) goto fail;
  a->reading_for = SSA_READ_TRANSFERS;
  ssa_parallel_for(a->nranks, workers, measure_bubble_transfers, &tj);
  if ((rc = first_rank_error(a)) != 0) goto fail;
  if ((rc = ssa_build_kernel_table(a)) != 0) goto fail;
  if ((rc = ssa_read_run_metadata(a)) != 0) goto fail;
  a->op_mfu.mfu = NAN; /* from the ops' FLOPs when the metadata has none (PyTorch traces) */
  a->reading_for = SSA_READ_OP_GROUPS;
  if (isnan(a->model_flops_per_step) && (rc = ssa_op_flops_mfu_of(a)) != 0) goto fail;
  if ((rc = ssa_bubble_causes(a)) != 0) goto fail; /* needs the schedule */
  a->reading_for = SSA_READ_LATE_UPSTREAM;
  if ((rc = ssa_late_upstream_sources(tj.upstream)) != 0) goto fail;
  ssa_upstream_free(tj.upstream);
  tj.upstream = NULL;
  /* judged against the step times; pipelines read the bubble's causes */
  a->reading_for = SSA_READ_CULPRITS;
  if ((rc = ssa_find_culprits(a)) != 0) goto fail;
  if ((rc = ssa_moe_load(a)) != 0) goto fail;
  /* in rounds: only the ranks asked are read (the bounded mode) */
  a->reading_for = SSA_READ_CRITICAL_PATH;
  if ((rc = ssa_find_critical_paths(a)) != 0) goto fail;
  return 0;
fail:
  ssa_upstream_free(tj.upstream);
  if (err) {
    err->code = rc;
    if (rc == STEPSCOPE_E_NOMEM) {
      uint64_t events = 0;
      for (size_t i = 0; i < run->nranks; i++)
        events +=
            run->ranks[i].nops + run->ranks[i].napis + run->ranks[i].ncolls + run->ranks[i].nranges;
      ssa_out_of_memory_message(err->message, sizeof err->message, "analysing the run", run->nranks,
                                events, 0);
    } else
      snprintf(err->message, sizeof err->message, "analysis failed: %s", stepscope_status_name(rc));
  }
  return rc;
}

int ssa_run_has_rank(const ssa_run *run, int rank) {
  for (size_t i = 0; i < run->nranks; i++)
    if (run->ranks[i].rank == rank) return 1;
  return 0;
}

void ssa_rank_result_free(ssa_rank_result *rr) {
  ssa_rank_summary_free(&rr->summary);
  free(rr->steps);
  free(rr->windows);
  free(rr->lanes);
  free(rr->kstats);
  free(rr->coll_wait_end);
  free(rr->coll_transfer);
  free(rr->ops.groups);
  ssa_packed_answers_free(&rr->span_answers);
  memset(rr, 0, sizeof *rr);
}

void ssa_analysis_free(ssa_analysis *a) {
  for (size_t i = 0; i < a->nranks; i++)
    ssa_rank_result_free(&a->ranks[i]);
  free(a->ranks);
  ssa_critical_path_free(a->critical_path);
  ssa_strtab_free(&a->names);
  free(a->kernels);
  free(a->colls);
  free(a->kept_members);
  free(a->coll_summaries);
  free(a->lates);
  free(a->culprits);
  free(a->steps);
  free(a->moe_steps);
  free(a->moe_expert_tokens);
  free(a->moe_step_expert_tokens);
  ssa_text_list_free(a->warnings, a->nwarnings);
  memset(a, 0, sizeof *a);
}
