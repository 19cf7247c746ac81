/*
 * kineto_host.h — what a Kineto trace cannot show, handled after the file is
 * read (kineto_host.c): the categories of events that were not imported,
 * events with absurd times, and traces without device activity, whose host
 * timeline is analysed instead (docs/kineto-import.md "No device activity").
 */
#ifndef KINETO_HOST_H
#define KINETO_HOST_H

#include <stdint.h>

#include "ssa_model.h"

#define SSA_KINETO_UNIMPORTED_MAX 8
#define SSA_KINETO_FAR_NS         (86400ll * 1000000000ll) /* a day */

/* Categories of complete ("X") events the importer does not import, with
 * their counts (the first SSA_KINETO_UNIMPORTED_MAX names; `more` counts
 * the events of further ones). Host-only bookkeeping categories (`Trace`,
 * `python_function`) are not counted. */
typedef struct ssa_kineto_unimported {
  char name[SSA_KINETO_UNIMPORTED_MAX][48];
  uint64_t count[SSA_KINETO_UNIMPORTED_MAX];
  int n, last;
  uint64_t more;
} ssa_kineto_unimported;

void ssa_kineto_unimported_add(ssa_kineto_unimported *u, const char *category);

/* Removes the ops, API calls, ranges and collective records that start or
 * end more than `far_ns` from the median start time of the rank's events
 * (only looked for when the events span more than far_ns). Returns how
 * many ops, API calls and ranges were removed. */
uint64_t ssa_kineto_drop_far_times(ssa_rank *r, int64_t far_ns);

/* The earliest start of the rank's ops, API calls and ranges (0 if none). */
int64_t ssa_kineto_first_time(const ssa_rank *r);

/* For a rank without device ops: warns once (naming the unimported
 * categories) and turns its host timeline into ops on CPU lanes, one per
 * host thread: top-level `cpu_op` events are compute, host collectives
 * (the host-scope built-in families of comm_families.h — `gloo:*`,
 * `c10d::*`, `nccl:*`, `record_param_comms`, ... — and the user's
 * --comm-kernel rules in r->comm_rules, as `cpu_op` or `user_annotation`, at
 * any depth) are communication; a range a --compute-kernel rule names is
 * compute whatever its domain. 0 or a status. */
int ssa_kineto_host_timeline(ssa_rank *r, const char *file_name, const ssa_kineto_unimported *u);

#endif
