/*
 * comm_rules.h — the user's classification rules (`--comm-kernel REGEX`,
 * `--compute-kernel REGEX`, the environment variables
 * STEPSCOPE_COMM_KERNELS and STEPSCOPE_COMPUTE_KERNELS) and the order in
 * which every source of classification is applied to an op
 * (docs/kineto-import.md "Communication families"):
 *
 *   1. a user --compute-kernel rule that matches the op's name: compute;
 *   2. a user --comm-kernel rule that matches: communication;
 *   3. evidence: a collective record linked to the op (NCCL metadata, our
 *      tracer's records) or a host op's category: communication;
 *   4. a built-in family (comm_families.h): communication;
 *   5. otherwise compute (copies and memsets stay copies).
 *
 * User rules win over everything because the user said so (an NCCL kernel
 * that is really a local reduction, a home-grown all-to-all); --compute-kernel
 * wins over --comm-kernel so that an exception can be carved out of a broad
 * rule. A rule is a POSIX extended regular expression searched anywhere in
 * the op's whole name (anchor with ^ and $), case-sensitive. Within one class
 * the first rule given that matches is credited in the report.
 *
 * Rules are compiled when added; matching is thread-safe (the loader
 * classifies ranks in parallel).
 */
#ifndef SSA_COMM_RULES_H
#define SSA_COMM_RULES_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "comm_families.h"

#define SSA_COMM_ENV    "STEPSCOPE_COMM_KERNELS"
#define SSA_COMPUTE_ENV "STEPSCOPE_COMPUTE_KERNELS"

typedef struct ssa_comm_rule {
  char *pattern;      /* as given */
  int comm;           /* 1: --comm-kernel, 0: --compute-kernel */
  const char *origin; /* "command line" or the environment variable's name */
  regex_t re;
} ssa_comm_rule;

typedef struct ssa_comm_rules {
  ssa_comm_rule *rule;
  size_t n, cap;
} ssa_comm_rules;

/* Adds one rule. 0, or -1 with the reason in why (regerror's text, or "out
 * of memory"). An empty pattern is refused (it would match every op). */
int ssa_comm_rules_add(ssa_comm_rules *rules, const char *pattern, int comm, const char *origin,
                       char *why, size_t whylen);

/* Adds the ';'-separated patterns of `list` (empty items are skipped). 0, or
 * -1 with *bad pointing at a malloc'ed copy of the first bad pattern (free
 * it) and the reason in why. */
int ssa_comm_rules_add_list(ssa_comm_rules *rules, const char *list, int comm, const char *origin,
                            char **bad, char *why, size_t whylen);

void ssa_comm_rules_free(ssa_comm_rules *rules);

/* The rule that decides `name`: the first compute rule that matches, else
 * the first comm rule that matches; its index, or -1 when none does. rules
 * may be NULL. */
int ssa_comm_rules_match(const ssa_comm_rules *rules, const char *name);

/* "--comm-kernel" or "--compute-kernel". */
const char *ssa_comm_rule_option(const ssa_comm_rule *rule);

/* How a rank's ops were classified (filled by ssa_rank_finish; over every op
 * of the trace, not only the analysed window). time_ns sums op durations. */
typedef struct ssa_class_count {
  uint64_t ops;
  int64_t time_ns;
} ssa_class_count;

typedef struct ssa_comm_tally {
  ssa_class_count evidence;                    /* comm by collective record or host category */
  ssa_class_count family[SSA_COMM_FAMILY_MAX]; /* comm by built-in family */
  ssa_class_count *user;                       /* per user rule (rules->n), NULL if none */
  size_t nuser;
  ssa_class_count kind[SSA_COMM_KIND_N]; /* every comm op by op kind */
} ssa_comm_tally;

void ssa_class_count_add(ssa_class_count *c, int64_t start, int64_t end);

#endif
