/*
 * replay_edits.c — the --what-if EDIT grammar of `stepscope replay` (docs/replay.md):
 *
 *   EDIT     = SELECTOR ":" ACTION  |  ACTION            (no selector: every node)
 *   SELECTOR = PART { "," PART }                         (every part must match)
 *   PART     = name=REGEX | range=REGEX | kind=compute|comm|copy|host | coll=OP | group=ID
 *            | rank=N | stage=N
 *   ACTION   = scale=F | drop | gaps=F | no-gaps | delay=MS | no-delay | overlap
 *
 * Parsing turns the text into an ssa_replay_edit (or a message that says what is wrong), and
 * ssa_replay_edit_selects says whether an edit takes a given op or host call (range= with
 * the help of the rank's matching ranges merged into spans, ssa_replay_spans_build).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

const char ssa_replay_edit_grammar[] =
    "EDIT is [SELECTOR:]ACTION; SELECTOR is PART[,PART...], every part must match:\n"
    "  name=REGEX    op or call name (POSIX extended regex; no ',' or ':' in it)\n"
    "  range=REGEX   launched (a call: made) inside a traced range of that name, e.g.\n"
    "                the trainer's 'range=^recompute$', a PyTorch record_function\n"
    "  kind=K        compute, comm, copy or host (host: the host's calls)\n"
    "  coll=OP       the op's collective: all_reduce, reduce_scatter, all_gather,\n"
    "                broadcast, reduce, all_to_all, send, recv, barrier\n"
    "  group=ID      the collective's communicator id (as in analyze --json)\n"
    "  rank=N        trace rank N            stage=N   pipeline stage N (pp_rank)\n"
    "ACTION:\n"
    "  scale=F       the selected durations x F (F >= 0)     drop   the same as scale=0\n"
    "  gaps=F        the host gaps before the selected nodes x F   no-gaps   gaps=0\n"
    "  delay=MS      the trainer's --debug-delay on the selected ranks set to MS\n"
    "  no-delay      delay=0\n"
    "  overlap       nothing waits for the selected communication (its event waits and\n"
    "                host synchronisations are dropped): it overlaps what follows\n";

static int fail(char *msg, size_t n, const char *fmt, const char *what) {
  snprintf(msg, n, fmt, what);
  return -1;
}

/* A non-negative decimal number (strtod) of the whole text, or -1. */
static int parse_factor(const char *v, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (end == v || *end || errno || !isfinite(d) || d < 0) return -1;
  *out = d;
  return 0;
}

static int parse_index(const char *v, int *out) {
  char *end;
  errno = 0;
  long l = strtol(v, &end, 10);
  if (end == v || *end || errno || l < 0 || l > 1 << 24) return -1;
  *out = (int)l;
  return 0;
}

static int parse_kind(const char *v) {
  static const char *const kinds[] = {"compute", "comm", "copy", "host"};
  static const int values[] = {SSA_CP_COMPUTE, SSA_CP_COMM, SSA_CP_COPY, SSA_CP_HOST};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (!strcmp(v, kinds[i])) return values[i];
  return -1;
}

static int parse_coll_op(const char *v) {
  for (uint32_t op = STEPSCOPE_COLL_ALLREDUCE; op <= STEPSCOPE_COLL_BARRIER; op++)
    if (!strcmp(v, stepscope_collective_op_name(op))) return (int)op;
  return -1;
}

/* A name= or range= part's regex into *re (*has set). */
static int parse_regex(const char *key, const char *v, regex_t *re, int *has, char *msg, size_t n) {
  if (*has) {
    snprintf(msg, n, "%s= given twice", key);
    return -1;
  }
  int rc = regcomp(re, v, REG_EXTENDED | REG_NOSUB);
  if (rc) {
    char why[128];
    regerror(rc, re, why, sizeof why);
    snprintf(msg, n, "%s=%s is not a regular expression: %s", key, v, why);
    return -1;
  }
  *has = 1;
  return 0;
}

/* One selector part "key=value" (part is writable). */
static int parse_part(char *part, ssa_replay_edit *e, char *msg, size_t n) {
  char *v = strchr(part, '=');
  if (!v)
    return fail(msg, n,
                "'%s' is no selector part (name=, range=, kind=, coll=, group=, rank=, stage=)",
                part);
  *v++ = 0;
  if (!strcmp(part, "name")) {
    return parse_regex("name", v, &e->name, &e->has_name, msg, n);
  } else if (!strcmp(part, "range")) {
    return parse_regex("range", v, &e->range, &e->has_range, msg, n);
  } else if (!strcmp(part, "kind")) {
    if ((e->kind = parse_kind(v)) < 0)
      return fail(msg, n, "kind=%s: expected compute, comm, copy or host", v);
  } else if (!strcmp(part, "coll")) {
    if ((e->coll_op = parse_coll_op(v)) < 0)
      return fail(msg, n,
                  "coll=%s: expected all_reduce, reduce_scatter, all_gather, broadcast, reduce, "
                  "all_to_all, send, recv or barrier",
                  v);
  } else if (!strcmp(part, "group")) {
    char *end;
    errno = 0;
    e->group = strtoull(v, &end, 0);
    if (end == v || *end || errno) return fail(msg, n, "group=%s: expected a communicator id", v);
    e->has_group = 1;
  } else if (!strcmp(part, "rank")) {
    if (parse_index(v, &e->rank)) return fail(msg, n, "rank=%s: expected a rank number", v);
  } else if (!strcmp(part, "stage")) {
    if (parse_index(v, &e->stage)) return fail(msg, n, "stage=%s: expected a stage number", v);
  } else {
    return fail(msg, n, "unknown selector '%s' (name, range, kind, coll, group, rank, stage)",
                part);
  }
  return 0;
}

static int parse_action(const char *a, ssa_replay_edit *e, char *msg, size_t n) {
  static const struct {
    const char *word;
    int action;
    double factor; /* NAN: the action takes a value after '=' */
  } actions[] = {
      {"scale", SSA_REPLAY_SCALE, NAN},   {"drop", SSA_REPLAY_SCALE, 0},
      {"gaps", SSA_REPLAY_GAPS, NAN},     {"no-gaps", SSA_REPLAY_GAPS, 0},
      {"delay", SSA_REPLAY_DELAY, NAN},   {"no-delay", SSA_REPLAY_DELAY, 0},
      {"overlap", SSA_REPLAY_OVERLAP, 1},
  };
  const char *eq = strchr(a, '=');
  size_t len = eq ? (size_t)(eq - a) : strlen(a);
  for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
    if (strlen(actions[i].word) != len || strncmp(a, actions[i].word, len)) continue;
    e->action = actions[i].action;
    if (isnan(actions[i].factor) != (eq != NULL))
      return fail(msg, n, eq ? "%s takes no value" : "%s needs a value (e.g. scale=0.5)",
                  actions[i].word);
    if (!eq) {
      e->factor = actions[i].factor;
      return 0;
    }
    if (parse_factor(eq + 1, &e->factor)) return fail(msg, n, "%s: expected a number >= 0", a);
    return 0;
  }
  return fail(msg, n,
              "unknown action '%s' (scale=F, drop, gaps=F, no-gaps, delay=MS, no-delay, overlap)",
              a);
}

int ssa_replay_edit_parse(const char *text, ssa_replay_edit *e, char *msg, size_t n) {
  memset(e, 0, sizeof *e);
  e->kind = e->coll_op = e->rank = e->stage = -1;
  char *copy = strdup(text);
  if (!copy) return fail(msg, n, "out of memory%s", "");
  char *action = strrchr(copy, ':'), *selector = NULL;
  if (action) {
    *action++ = 0;
    selector = copy;
  } else {
    action = copy;
  }
  int rc = 0;
  for (char *part = selector, *next; part && rc == 0; part = next) {
    next = strchr(part, ',');
    if (next) *next++ = 0;
    rc = parse_part(part, e, msg, n);
  }
  if (rc == 0) rc = parse_action(action, e, msg, n);
  if (rc == 0 && e->action == SSA_REPLAY_OVERLAP && e->kind >= 0 && e->kind != SSA_CP_COMM)
    rc = fail(msg, n, "overlap applies to communication, not kind=%s", ssa_cp_kind_names[e->kind]);
  if (rc == 0 && e->action == SSA_REPLAY_DELAY &&
      (e->has_name || e->has_range || e->kind >= 0 || e->coll_op >= 0 || e->has_group))
    rc = fail(msg, n, "delay selects ranks only (rank=, stage=)%s", "");
  free(copy);
  if (rc) ssa_replay_edit_free(e);
  return rc;
}

void ssa_replay_edit_free(ssa_replay_edit *e) {
  if (e->has_name) regfree(&e->name);
  if (e->has_range) regfree(&e->range);
  e->has_name = e->has_range = 0;
}

static int cmp_span(const void *pa, const void *pb) {
  const ssa_replay_span *a = pa, *b = pb;
  if (a->lane != b->lane) return a->lane < b->lane ? -1 : 1;
  return a->start < b->start ? -1 : a->start > b->start;
}

int ssa_replay_spans_build(const ssa_replay_edit *e, const ssa_rank *r, ssa_replay_spans *out) {
  memset(out, 0, sizeof *out);
  if (!e->has_range || r->nranges == 0) return 0;
  out->v = malloc(r->nranges * sizeof *out->v);
  if (!out->v) return -1;
  for (size_t i = 0; i < r->nranges; i++) {
    const ssa_range *g = &r->ranges[i];
    if (regexec(&e->range, ssa_rank_str(r, g->name), 0, NULL, 0) == 0)
      out->v[out->n++] = (ssa_replay_span){g->start, g->end, g->lane};
  }
  qsort(out->v, out->n, sizeof *out->v, cmp_span);
  size_t k = 0; /* merge the overlapping ones of a lane */
  for (size_t i = 0; i < out->n; i++) {
    ssa_replay_span *last = k ? &out->v[k - 1] : NULL;
    if (last && last->lane == out->v[i].lane && out->v[i].start <= last->end) {
      if (out->v[i].end > last->end) last->end = out->v[i].end;
    } else {
      out->v[k++] = out->v[i];
    }
  }
  out->n = k;
  out->nlanes = r->nlanes;
  out->lane_first = malloc((r->nlanes + 1u) * sizeof *out->lane_first);
  if (!out->lane_first) {
    ssa_replay_spans_free(out);
    return -1;
  }
  for (uint32_t l = 0, i = 0; l <= r->nlanes; l++) {
    while (i < out->n && out->v[i].lane < l)
      i++;
    out->lane_first[l] = i;
  }
  return 0;
}

void ssa_replay_spans_free(ssa_replay_spans *s) {
  free(s->v);
  free(s->lane_first);
  memset(s, 0, sizeof *s);
}

/* Whether time t on host-thread lane `lane` lies inside one of the spans. */
static int in_spans(const ssa_replay_spans *s, uint16_t lane, int64_t t) {
  if (!s->lane_first || lane >= s->nlanes) return 0;
  const ssa_replay_span *v = s->v + s->lane_first[lane];
  size_t k = ssa_count_at_most(v, s->lane_first[lane + 1] - s->lane_first[lane], sizeof *v, t);
  return k > 0 && v[k - 1].end >= t;
}

/* Where a node was issued: its launch call's thread and start, or its own. */
static int in_range(const ssa_rank *r, const ssa_op *o, size_t index,
                    const ssa_replay_spans *spans) {
  if (!spans) return 0;
  const ssa_api *call = !o                                              ? &r->apis[index]
                        : o->launch != SSA_NONE && o->launch < r->napis ? &r->apis[o->launch]
                                                                        : NULL;
  return call ? in_spans(spans, call->lane, call->start) : in_spans(spans, o->lane, o->start);
}

int ssa_replay_edit_selects(const ssa_replay_edit *e, const ssa_rank *r, int is_api, size_t index,
                            const ssa_replay_spans *spans) {
  if (e->rank >= 0 && r->rank != e->rank) return 0;
  if (e->stage >= 0 && ssa_meta_or(r->tmeta.layout.pp_rank, -1) != e->stage) return 0;
  const ssa_op *o = is_api ? NULL : &r->ops[index];
  if (e->kind >= 0) {
    int kind = !o                          ? SSA_CP_HOST
               : o->cls == SSA_CLS_COMPUTE ? SSA_CP_COMPUTE
               : o->cls == SSA_CLS_COMM    ? SSA_CP_COMM
                                           : SSA_CP_COPY;
    if (kind != e->kind) return 0;
  }
  if (e->coll_op >= 0 || e->has_group) {
    if (!o || o->coll == SSA_NONE || o->coll >= r->ncolls) return 0;
    const ssa_coll *c = &r->colls[o->coll];
    if (e->coll_op >= 0 && c->op != (uint32_t)e->coll_op) return 0;
    if (e->has_group && c->comm_id != e->group) return 0;
  }
  if (e->has_name) {
    const char *name = ssa_rank_str(r, o ? o->name : r->apis[index].name);
    if (regexec(&e->name, name, 0, NULL, 0) != 0) return 0;
  }
  if (e->has_range && !in_range(r, o, index, spans)) return 0;
  return 1;
}
