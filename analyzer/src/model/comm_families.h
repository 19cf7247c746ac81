/*
 * comm_families.h — the built-in table of communication families: which
 * kernels (and, for traces without device activity, which host ranges) are
 * communication although no collective record says so, and what kind of
 * collective each one is where the name tells (docs/kineto-import.md
 * "Communication families").
 *
 * A family is a row of comm_families.c: a POSIX extended regular expression
 * matched (searched, not anchored unless the pattern says so) against the
 * *function part* of the name — the name up to its template or argument
 * list, so that `void dpsk::ep::internode::combine<false, 8, ...>(int4*, ...)`
 * is matched as `void dpsk::ep::internode::combine` — and the scope it applies
 * to (GPU kernels, host ranges or both). The first matching row wins.
 *
 * The op kind of a matched op comes from its function part (`AllReduce`,
 * `all_reduce`, `dispatch`, `combine`, `SendRecv`... see
 * ssa_comm_kind_of_name), or is fixed by the row.
 *
 * The patterns are compiled once per process (pthread_once) and never freed;
 * matching is thread-safe.
 */
#ifndef SSA_COMM_FAMILIES_H
#define SSA_COMM_FAMILIES_H

#include <stddef.h>
#include <stdint.h>

/* What a communication op does, where it can be known. */
typedef enum ssa_comm_kind {
  SSA_COMM_KIND_UNKNOWN = 0,
  SSA_COMM_KIND_ALL_REDUCE,
  SSA_COMM_KIND_ALL_GATHER,
  SSA_COMM_KIND_REDUCE_SCATTER,
  SSA_COMM_KIND_ALL_TO_ALL,
  SSA_COMM_KIND_DISPATCH, /* all-to-all dispatch of MoE tokens (DeepEP) */
  SSA_COMM_KIND_COMBINE,  /* all-to-all combine of MoE tokens (DeepEP) */
  SSA_COMM_KIND_SEND_RECV,
  SSA_COMM_KIND_SEND,
  SSA_COMM_KIND_RECV,
  SSA_COMM_KIND_BROADCAST,
  SSA_COMM_KIND_REDUCE,
  SSA_COMM_KIND_BARRIER,
  SSA_COMM_KIND_N
} ssa_comm_kind;

/* Where a family applies. */
enum {
  SSA_COMM_SCOPE_KERNEL = 1, /* GPU kernels */
  SSA_COMM_SCOPE_HOST = 2    /* host ranges of a trace without device activity */
};

#define SSA_COMM_FAMILY_MAX 16 /* capacity of per-family counters */

typedef struct ssa_comm_family {
  const char *id;          /* short name used in reports, e.g. "deepep" */
  const char *description; /* what it is, for the docs and --help */
  const char *pattern;     /* POSIX ERE over the function part of the name */
  int icase;               /* match ignoring case */
  int scope;               /* SSA_COMM_SCOPE_* bits */
  int kind;                /* ssa_comm_kind, or -1: from the name */
} ssa_comm_family;

/* The table, in matching order. */
extern const ssa_comm_family ssa_comm_families[];
extern const int ssa_comm_nfamilies;

/* Index of the first family of `scope` whose pattern matches `name`, or -1.
 * -2 if the built-in patterns could not be compiled (a bug; never happens
 * with glibc). */
int ssa_comm_family_of(const char *name, int scope);

/* The op kind of a communication op named `name` (keywords of its function
 * part, case, `_`, `:` and spaces ignored): reduce_scatter, all_reduce,
 * all_gather, all_to_all, dispatch, combine, broadcast/bcast, barrier,
 * sendrecv, send, recv, reduce; else unknown. */
ssa_comm_kind ssa_comm_kind_of_name(const char *name);

/* The op kind of a collective record's op (stepscope_collective_op). */
ssa_comm_kind ssa_comm_kind_of_collective(uint32_t op);

/* "all_reduce", "all_to_all_dispatch", ... "unknown". */
const char *ssa_comm_kind_name(int kind);

/* Copies the function part of `name` into out (at most n - 1 bytes):
 * everything up to the first '<' or '(' that is not part of
 * "(anonymous namespace)". */
void ssa_comm_function_part(const char *name, char *out, size_t n);

#endif
