/*
 * rank_cross.c — the cross-rank inputs of pipeline ranks' per-rank passes (rank_cross.h;
 * docs/scale.md "A second map round"): a merge of a run's partials runs the cross-rank steps
 * of ssa_analyze that read no rank's events (pipeline waits, collective matching, the pipeline
 * transfers' partners) and hands each pipeline rank what its metrics and bubble transfers read
 * of other ranks; a second map round makes that rank's results from them where its file is.
 * The hashes let the final merge check that its own inputs are those the results were made
 * with (else it reads the rank, as without the second round).
 */
#include <stdlib.h>
#include <string.h>

#include "rank_cross.h"
#include "rank_local.h"

/* FNV-1a 64 over v's 8 little-endian bytes. */
static uint64_t hash_word(uint64_t h, uint64_t v) {
  for (int b = 0; b < 8; b++, v >>= 8)
    h = (h ^ (v & 0xff)) * 1099511628211ull;
  return h;
}

#define HASH_SEED 1469598103934665603ull

/* A per-record array, NULL hashed apart from any array. */
static uint64_t hash_records(uint64_t h, size_t n, const int64_t *v) {
  h = hash_word(h, v != NULL);
  for (size_t i = 0; v && i < n; i++)
    h = hash_word(h, (uint64_t)v[i]);
  return h;
}

uint64_t ssa_cross_waits_hash(int stage, size_t ncolls, const int64_t *wait_end) {
  uint64_t h = hash_word(hash_word(HASH_SEED, (uint64_t)(int64_t)stage), ncolls);
  return hash_records(h, ncolls, wait_end);
}

/* Whether the bubble's transfers read record j's transfer: a pipeline transfer's record
 * (ssa_op_is_pipeline_comm of the op that executed it). */
static int transfer_read(const ssa_rank_summary *s, size_t j) {
  return (s->colls[j].flags & STEPSCOPE_COLL_F_PIPELINE) != 0;
}

uint64_t ssa_cross_transfers_hash(int64_t rel_shift, const ssa_rank_summary *s,
                                  const int64_t *transfer, const ssa_partner_send *sends,
                                  size_t nsends) {
  uint64_t h =
      hash_word(hash_word(hash_word(HASH_SEED, (uint64_t)rel_shift), s->ncolls), transfer != NULL);
  for (size_t j = 0; transfer && j < s->ncolls; j++)
    h = hash_word(h, (uint64_t)(transfer_read(s, j) ? transfer[j] : -1));
  h = hash_word(h, nsends);
  for (size_t i = 0; i < nsends; i++)
    h = hash_word(hash_word(hash_word(h, sends[i].record), sends[i].sender), (uint64_t)sends[i].at);
  return h;
}

void ssa_rank_cross_free(ssa_rank_cross *x) {
  free(x->wait_end);
  free(x->transfer);
  free(x->sends);
  memset(x, 0, sizeof *x);
}

/* Rank i's inputs from the analysis' cross-rank steps (its arrays moved into *x). */
static int take_inputs(ssa_analysis *a, const ssa_upstream *u, size_t i, ssa_rank_cross *x) {
  ssa_rank_result *rr = &a->ranks[i];
  *x = (ssa_rank_cross){.made = 1,
                        .ncolls = rr->summary.ncolls,
                        .rel_shift = rr->summary.offset_ns - a->run->origin,
                        .wait_end = rr->coll_wait_end,
                        .transfer = rr->coll_transfer};
  rr->coll_wait_end = rr->coll_transfer = NULL;
  for (size_t j = 0; x->transfer && j < x->ncolls; j++)
    if (!transfer_read(&rr->summary, j)) x->transfer[j] = -1; /* not sent: the bubble reads none */
  return u ? ssa_upstream_partner_sends(u, i, &x->sends, &x->nsends) : 0;
}

int ssa_cross_inputs(const ssa_run *run, const ssa_options *opt, ssa_rank_cross **out) {
  *out = NULL;
  if (!opt->summaries || !opt->rank_locals) return STEPSCOPE_E_ARGUMENT;
  ssa_analysis a;
  ssa_upstream *u = NULL;
  int rc = ssa_analysis_begin(&a, run, opt);
  ssa_rank_cross *x = calloc(run->nranks ? run->nranks : 1, sizeof *x);
  if (rc == 0 && !x) rc = STEPSCOPE_E_NOMEM;
  for (size_t i = 0; rc == 0 && i < a.nranks; i++) {
    ssa_rank_result *rr = &a.ranks[i];
    const ssa_rank_local *l = &opt->rank_locals[i];
    rr->summary = opt->summaries[i]; /* borrowed: given back below */
    rr->summary.offset_ns = run->ranks[i].offset_ns;
    /* what the matching reads of the metrics: the totals window's bounds, the pipeline flag */
    rr->totals.start = l->made ? l->result.totals.start : l->totals_start;
    rr->totals.end = l->made ? l->result.totals.end : l->totals_end;
    rr->pipeline = l->made ? l->result.pipeline : rr->summary.pipeline_stage >= 0;
  }
  if (rc == 0) rc = ssa_find_pipeline_waits(&a);
  if (rc == 0) rc = ssa_match_collectives(&a);
  if (rc == 0) rc = ssa_upstream_begin(&a, &u);
  for (size_t i = 0; rc == 0 && i < a.nranks; i++)
    if (a.ranks[i].stage_of_waits >= 0) rc = take_inputs(&a, u, i, &x[i]);
  ssa_upstream_free(u);
  for (size_t i = 0; i < a.nranks; i++)
    memset(&a.ranks[i].summary, 0, sizeof a.ranks[i].summary);
  ssa_analysis_free(&a);
  for (size_t i = 0; rc && x && i < run->nranks; i++)
    ssa_rank_cross_free(&x[i]);
  if (rc)
    free(x);
  else
    *out = x;
  return rc;
}
