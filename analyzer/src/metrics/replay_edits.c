/*
 * replay_edits.c — the --what-if EDIT grammar of `stepscope replay` (docs/replay.md):
 *
 *   EDIT     = SELECTOR ":" ACTION  |  ACTION            (no selector: every node)
 *   SELECTOR = PART { "," PART }                         (every part must match)
 *   PART     = name=REGEX | kind=compute|comm|copy|host | coll=OP | group=ID | rank=N | stage=N
 *   ACTION   = scale=F | drop | gaps=F | no-gaps | delay=MS | no-delay | overlap
 *
 * Parsing turns the text into an ssa_replay_edit (or a message that says what is wrong), and
 * ssa_replay_edit_selects says whether an edit takes a given op or host call.
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

/* One selector part "key=value" (part is writable). */
static int parse_part(char *part, ssa_replay_edit *e, char *msg, size_t n) {
  char *v = strchr(part, '=');
  if (!v)
    return fail(msg, n, "'%s' is no selector part (name=, kind=, coll=, group=, rank=, stage=)",
                part);
  *v++ = 0;
  if (!strcmp(part, "name")) {
    if (e->has_name) return fail(msg, n, "name= given twice%s", "");
    int rc = regcomp(&e->name, v, REG_EXTENDED | REG_NOSUB);
    if (rc) {
      char why[128];
      regerror(rc, &e->name, why, sizeof why);
      snprintf(msg, n, "name=%s is not a regular expression: %s", v, why);
      return -1;
    }
    e->has_name = 1;
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
    return fail(msg, n, "unknown selector '%s' (name, kind, coll, group, rank, stage)", part);
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
      (e->has_name || e->kind >= 0 || e->coll_op >= 0 || e->has_group))
    rc = fail(msg, n, "delay selects ranks only (rank=, stage=)%s", "");
  free(copy);
  if (rc) ssa_replay_edit_free(e);
  return rc;
}

void ssa_replay_edit_free(ssa_replay_edit *e) {
  if (e->has_name) regfree(&e->name);
  e->has_name = 0;
}

int ssa_replay_edit_selects(const ssa_replay_edit *e, const ssa_rank *r, int is_api, size_t index) {
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
  return 1;
}
