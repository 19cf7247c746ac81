/*
 * export_ranks.c — see export_ranks.h: --ranks and --max-size of `export` and `view`.
 */
#include "export_ranks.h"

#include <stdlib.h>
#include <string.h>

#include "cli_print.h"
#include "ssa_export.h"
#include "ssa_io.h"

int cli_parse_size(const char *v, uint64_t *bytes) {
  char *end;
  double x = strtod(v, &end);
  if (end == v || x < 0) return -1;
  double mul = 1;
  switch (*end) {
  case 'K':
  case 'k':
    mul = 1024.0;
    end++;
    break;
  case 'M':
  case 'm':
    mul = 1024.0 * 1024;
    end++;
    break;
  case 'G':
  case 'g':
    mul = 1024.0 * 1024 * 1024;
    end++;
    break;
  case 'T':
  case 't':
    mul = 1024.0 * 1024 * 1024 * 1024;
    end++;
    break;
  default: break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end || x * mul > 1.8e19) return -1;
  *bytes = (uint64_t)(x * mul);
  return 0;
}

/* A --max-size value into *bytes: 0, or 2 with the message printed. */
static int max_size_value(const char *command, const char *v, uint64_t *bytes) {
  if (cli_parse_size(v, bytes) == 0) return 0;
  cli_print(stderr,
            "stepscope %s: bad --max-size '%s' (want bytes, e.g. 500M or 4G; 0: no limit)\n",
            command, v);
  return 2;
}

/* Calls visit(lo, hi) for each item of a list "0-7,12"; -1 on a malformed item. */
static int each_range(const char *spec, void (*visit)(long, long, void *), void *ctx) {
  const char *p = spec;
  if (!*p) return -1;
  while (*p) {
    char *end;
    long lo = strtol(p, &end, 10), hi = lo;
    if (end == p || lo < 0) return -1;
    p = end;
    if (*p == '-') {
      hi = strtol(p + 1, &end, 10);
      if (end == p + 1 || hi < lo) return -1;
      p = end;
    }
    if (*p == ',' && p[1])
      p++;
    else if (*p)
      return -1;
    if (visit) visit(lo, hi, ctx);
  }
  return 0;
}

/* Checks a --ranks value ("auto", or rank numbers and ranges "0-7,12"): 0, or 2 with the
 * message printed. */
static int check_ranks_spec(const char *command, const char *spec) {
  if (!strcmp(spec, "auto") || each_range(spec, NULL, NULL) == 0) return 0;
  cli_print(stderr,
            "stepscope %s: bad --ranks '%s' (want rank numbers and ranges like 0-7,12, or auto)\n",
            command, spec);
  return 2;
}

/* The cli_export_limits of row o (CLI_EXPORT_LIMIT_ROWS) in the command's struct. */
static cli_export_limits *limits_of(const cli_option *o, void *cmd) {
  return (cli_export_limits *)((char *)cmd + o->offset);
}

int cli_ranks_option(const cli_option *o, const char *v, void *cmd) {
  cli_export_limits *l = limits_of(o, cmd);
  l->ranks = v;
  return check_ranks_spec(l->command, v);
}

int cli_max_size_option(const cli_option *o, const char *v, void *cmd) {
  cli_export_limits *l = limits_of(o, cmd);
  l->max_size = v;
  return max_size_value(l->command, v, &l->max_bytes);
}

typedef struct pick {
  const ssa_analysis *a;
  unsigned char *sel;
  long missing; /* a listed rank the run lacks, -1 none */
} pick;

static void mark_rank(pick *p, long rank) {
  for (size_t i = 0; i < p->a->nranks; i++)
    if (p->a->ranks[i].rank->rank == rank) {
      p->sel[i] = 1;
      return;
    }
  if (p->missing < 0) p->missing = rank;
}

static void visit_range(long lo, long hi, void *ctx) {
  pick *p = ctx;
  /* a range marks what the run has of it; a single rank must be there */
  if (lo == hi) {
    mark_rank(p, lo);
    return;
  }
  for (size_t i = 0; i < p->a->nranks; i++) {
    int r = p->a->ranks[i].rank->rank;
    if (r >= lo && r <= hi) p->sel[i] = 1;
  }
}

/* Marks the n rank indexes with the highest (most = 1) or lowest key. */
static void mark_extremes(const ssa_analysis *a, unsigned char *sel, const int64_t *key, int most,
                          int n) {
  unsigned char *taken = calloc(a->nranks ? a->nranks : 1, 1);
  for (int k = 0; taken && k < n; k++) {
    size_t best = a->nranks;
    for (size_t i = 0; i < a->nranks; i++)
      if (!taken[i] && key[i] != INT64_MIN &&
          (best == a->nranks || (most ? key[i] > key[best] : key[i] < key[best])))
        best = i;
    if (best == a->nranks) break;
    taken[best] = sel[best] = 1;
  }
  free(taken);
}

static int choose_auto(const ssa_analysis *a, pick *p) {
  int64_t *key = malloc((a->nranks ? a->nranks : 1) * sizeof *key);
  if (!key) return 1;
  mark_rank(p, 0);
  if (a->culprit_verdict.rank >= 0) mark_rank(p, a->culprit_verdict.rank);
  for (size_t i = 0, n = 0; i < a->nculprits && n < 4; i++, n++)
    mark_rank(p, a->culprits[i].rank);
  for (size_t i = 0; i < a->nranks; i++)
    key[i] = a->ranks[i].coll_caused > 0 ? a->ranks[i].coll_caused : INT64_MIN;
  mark_extremes(a, p->sel, key, 1, 4); /* the stragglers */
  for (size_t i = 0; i < a->nranks; i++)
    key[i] = a->ranks[i].totals.compute;
  mark_extremes(a, p->sel, key, 1, 2); /* slowest */
  mark_extremes(a, p->sel, key, 0, 2); /* fastest */
  free(key);
  p->missing = -1; /* rank 0 or a verdict's rank may be absent: nothing was asked for */
  return 0;
}

int cli_choose_ranks(const char *command, const char *spec, const ssa_analysis *a,
                     unsigned char **sel) {
  *sel = NULL;
  if (!spec) return 0;
  pick p = {a, calloc(a->nranks ? a->nranks : 1, 1), -1};
  if (!p.sel) {
    cli_print(stderr, "stepscope %s: out of memory choosing --ranks\n", command);
    return 1;
  }
  int rc = !strcmp(spec, "auto") ? choose_auto(a, &p) : each_range(spec, visit_range, &p);
  if (rc) {
    free(p.sel);
    cli_print(stderr, "stepscope %s: out of memory choosing --ranks\n", command);
    return 1;
  }
  size_t n = 0;
  for (size_t i = 0; i < a->nranks; i++)
    n += p.sel[i];
  if (p.missing >= 0 || n == 0) {
    if (p.missing >= 0)
      cli_print(stderr, "stepscope %s: --ranks %s: rank %ld is not in the run\n", command, spec,
                p.missing);
    else
      cli_print(stderr, "stepscope %s: --ranks %s: no rank of the run is in the list\n", command,
                spec);
    free(p.sel);
    return 2;
  }
  *sel = p.sel;
  return 0;
}

void cli_output_size_refusal(char *buf, size_t len, const char *command, const char *what,
                             size_t nranks, uint64_t events, uint64_t estimate, uint64_t limit,
                             const char *spec) {
  char b1[32], b2[32];
  snprintf(buf, len,
           "stepscope %s: the %s of %zu rank%s (%llu events) would be about %s, over the limit "
           "of %s (--max-size): few viewers open that (Perfetto's UI gives up near 1-2 GB, "
           "Chromium holds at most ~512 MiB in one string). Choose ranks with --ranks (e.g. "
           "--ranks 0-7,12), or --ranks auto for the ones the analysis points at (culprit, "
           "stragglers, slowest, fastest, rank 0)%s, or raise --max-size (0: no limit)",
           command, what, nranks, nranks == 1 ? "" : "s", (unsigned long long)events,
           ssa_fmt_bytes(b1, sizeof b1, estimate), ssa_fmt_bytes(b2, sizeof b2, limit),
           spec ? "; fewer ranks than now" : "");
}

int cli_check_output_size(const char *command, const char *what, uint64_t estimate, uint64_t limit,
                          const ssa_analysis *a, const char *spec) {
  if (!limit || estimate <= limit) return 0;
  size_t n = 0;
  for (size_t i = 0; i < a->nranks; i++)
    n += ssa_export_selects(a, i);
  char refusal[1024];
  cli_output_size_refusal(refusal, sizeof refusal, command, what, n, ssa_export_events(a), estimate,
                          limit, spec);
  cli_print(stderr, "%s\n", refusal);
  return 1;
}
