/*
 * culprit_questions.h — the culprit walk's table of questions (ssa_phase_requests,
 * ssa_metrics.h): finding a question, adding a walk's new ones (culprit_questions.c).
 */
#ifndef CULPRIT_QUESTIONS_H
#define CULPRIT_QUESTIONS_H

#include "ssa_metrics.h"

/* The question like key in q's table (rank rank_idx's rows), or NULL. */
const ssa_phase_request *ssa_phase_request_find(const ssa_phase_requests *q, uint32_t rank_idx,
                                                const ssa_phase_request *key);
/* Adds q's pending questions (of ranks below nranks) that its table lacks to the table, keeping
 * it sorted and unique, and finds where each rank's questions begin; empties the pending list.
 * 0 or STEPSCOPE_E_NOMEM. */
int ssa_phase_requests_merge_pending(ssa_phase_requests *q, size_t nranks);

#endif
