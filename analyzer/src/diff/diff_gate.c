/*
 * diff_gate.c — parses `--fail-on` thresholds strictly and checks them
 * against a diff (ssa_diff.h, docs/diff.md "Regression gate"). Every
 * token is METRIC:[SIGN]NUMBER UNIT; anything else is refused with the
 * token named, so that a typo never turns the gate off silently. Each
 * threshold passes, fails (a real change past it) or is undecided (a change
 * past it that the noise test cannot call real); so is the gate.
 */
#include "ssa_diff.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const ssa_gate_status_names[] = {"pass", "FAIL", "undecided", "not measured"};

unsigned ssa_gate_metrics(const ssa_gate *g) {
  unsigned mask = 0;
  for (size_t i = 0; i < g->n; i++)
    mask |= 1u << g->rules[i].metric;
  return mask;
}

static int metric_of(const char *name, size_t n) {
  for (int k = 0; k < SSA_DM_N; k++)
    if (strlen(ssa_diff_metric_names[k]) == n && !strncmp(ssa_diff_metric_names[k], name, n))
      return k;
  if (n == 7 && !strncmp(name, "overlap", 7)) return SSA_DM_OVERLAP_RATIO;
  if (n == 6 && !strncmp(name, "bubble", 6)) return SSA_DM_BUBBLE_RATIO;
  return -1;
}

static int fail(char *err, size_t errlen, const char *tok, size_t toklen, const char *why) {
  snprintf(err, errlen, "bad --fail-on token '%.*s': %s", (int)(toklen > 60 ? 60 : toklen), tok,
           why);
  return -1;
}

/* One token [s, s + n), spaces trimmed. */
static int parse_token(const char *s, size_t n, ssa_gate *g, char *err, size_t errlen) {
  const char *colon = memchr(s, ':', n);
  if (!colon) return fail(err, errlen, s, n, "want METRIC:THRESHOLD, e.g. step_time:+3%");
  int k = metric_of(s, (size_t)(colon - s));
  if (k < 0)
    return fail(err, errlen, s, n,
                "unknown metric (step_time, compute, comm, exposed_comm, overlap, exposed_mem, "
                "idle, bubble, mfu)");
  for (size_t i = 0; i < g->n; i++)
    if (g->rules[i].metric == k) return fail(err, errlen, s, n, "metric given twice");
  const char *p = colon + 1, *end = s + n;
  int sign = 0;
  if (p < end && (*p == '+' || *p == '-')) sign = *p++ == '+' ? 1 : -1;
  /* NUMBER: digits, optionally '.' and digits */
  const char *num = p;
  while (p < end && isdigit((unsigned char)*p))
    p++;
  if (p == num) return fail(err, errlen, s, n, "want a number after ':' (and an optional + or -)");
  if (p < end && *p == '.') {
    p++;
    const char *frac = p;
    while (p < end && isdigit((unsigned char)*p))
      p++;
    if (p == frac) return fail(err, errlen, s, n, "want digits after '.'");
  }
  char numbuf[40];
  if ((size_t)(p - num) >= sizeof numbuf) return fail(err, errlen, s, n, "number too long");
  memcpy(numbuf, num, (size_t)(p - num));
  numbuf[p - num] = 0;
  double v = strtod(numbuf, NULL);
  size_t ulen = (size_t)(end - p);
  int unit;
  double scale = 1;
  if (ulen == 1 && *p == '%')
    unit = SSA_GATE_PERCENT;
  else if (ulen == 2 && !strncmp(p, "pt", 2))
    unit = SSA_GATE_POINTS;
  else if (ulen == 2 && !strncmp(p, "ns", 2))
    unit = SSA_GATE_TIME;
  else if (ulen == 2 && !strncmp(p, "us", 2))
    unit = SSA_GATE_TIME, scale = 1e3;
  else if (ulen == 2 && !strncmp(p, "ms", 2))
    unit = SSA_GATE_TIME, scale = 1e6;
  else if (ulen == 1 && *p == 's')
    unit = SSA_GATE_TIME, scale = 1e9;
  else
    return fail(err, errlen, s, n,
                "want a unit: % (relative), pt (points of a ratio), or ns, us, ms, s");
  if (unit == SSA_GATE_TIME && !ssa_diff_metric_is_time[k])
    return fail(err, errlen, s, n, "a time unit on a ratio metric (use % or pt)");
  if (unit == SSA_GATE_POINTS && ssa_diff_metric_is_time[k])
    return fail(err, errlen, s, n,
                "pt (points) is for ratio metrics (overlap, bubble, mfu); use % or a time");
  int bad = -ssa_diff_metric_better[k]; /* +1: rising is bad */
  if (sign && sign != bad)
    return fail(err, errlen, s, n,
                bad > 0 ? "this metric is worse when it rises: the threshold's sign must be +"
                        : "this metric is worse when it falls: the threshold's sign must be -");
  if (g->n >= SSA_DM_N) return fail(err, errlen, s, n, "too many thresholds");
  ssa_gate_rule *r = &g->rules[g->n++];
  r->metric = k;
  r->unit = unit;
  r->threshold = v * scale;
  snprintf(r->text, sizeof r->text, "%.*s", (int)n, s);
  return 0;
}

int ssa_gate_parse(const char *spec, ssa_gate *g, char *err, size_t errlen) {
  memset(g, 0, sizeof *g);
  g->undecided_as = SSA_GATE_UNDECIDED;
  if (!spec || !*spec) {
    snprintf(err, errlen, "--fail-on needs at least one METRIC:THRESHOLD");
    return -1;
  }
  const char *s = spec;
  for (;;) {
    const char *comma = strchr(s, ',');
    const char *e = comma ? comma : s + strlen(s);
    const char *a = s, *b = e;
    while (a < b && isspace((unsigned char)*a))
      a++;
    while (b > a && isspace((unsigned char)b[-1]))
      b--;
    if (a == b) {
      snprintf(err, errlen,
               "bad --fail-on '%s': empty threshold (two commas, or a comma at an end)", spec);
      return -1;
    }
    for (const char *c = a; c < b; c++)
      if (isspace((unsigned char)*c))
        return fail(err, errlen, a, (size_t)(b - a), "spaces inside a threshold");
    if (parse_token(a, (size_t)(b - a), g, err, errlen)) return -1;
    if (!comma) break;
    s = comma + 1;
  }
  return 0;
}

void ssa_gate_rule_text(const ssa_gate_rule *r, char *buf, size_t n) {
  char sign = ssa_diff_metric_better[r->metric] < 0 ? '+' : '-';
  if (r->unit == SSA_GATE_PERCENT)
    snprintf(buf, n, "%c%g%%", sign, r->threshold);
  else if (r->unit == SSA_GATE_POINTS)
    snprintf(buf, n, "%c%gpt", sign, r->threshold);
  else if (r->threshold >= 1e9)
    snprintf(buf, n, "%c%gs", sign, r->threshold / 1e9);
  else if (r->threshold >= 1e6)
    snprintf(buf, n, "%c%gms", sign, r->threshold / 1e6);
  else if (r->threshold >= 1e3)
    snprintf(buf, n, "%c%gus", sign, r->threshold / 1e3);
  else
    snprintf(buf, n, "%c%gns", sign, r->threshold);
}

int ssa_gate_parse_undecided(const char *word, int *undecided_as, char *err, size_t errlen) {
  if (!strcmp(word, "pass"))
    *undecided_as = SSA_GATE_PASS;
  else if (!strcmp(word, "fail"))
    *undecided_as = SSA_GATE_FAIL;
  else {
    snprintf(err, errlen, "bad --undecided '%.60s': want pass or fail", word);
    return -1;
  }
  return 0;
}

ssa_gate_result ssa_gate_check(const ssa_diff *d, const ssa_gate *g, ssa_gate_outcome *out) {
  ssa_gate_result res = {0, 0, g->n, SSA_GATE_PASS, SSA_GATE_PASS};
  for (size_t i = 0; i < g->n; i++) {
    const ssa_gate_rule *r = &g->rules[i];
    const ssa_diff_metric *m = &d->m[r->metric];
    int bad = -ssa_diff_metric_better[r->metric];
    ssa_gate_outcome *o = &out[i];
    o->moved = NAN;
    if (!m->comparable) {
      o->status = SSA_GATE_UNMEASURED;
      continue;
    }
    if (r->unit == SSA_GATE_PERCENT)
      o->moved = bad * m->rel_change * 100.0;
    else if (r->unit == SSA_GATE_POINTS)
      o->moved = bad * m->abs_change * 100.0;
    else
      o->moved = bad * m->abs_change;
    /* a relative threshold on a metric that was 0 in A: any rise crosses it */
    if (r->unit == SSA_GATE_PERCENT && isnan(m->rel_change) && m->abs_change != 0)
      o->moved = bad * m->abs_change > 0 ? INFINITY : -INFINITY;
    if (!(o->moved > r->threshold))
      o->status = SSA_GATE_PASS;
    else if (m->verdict == SSA_DV_REAL)
      o->status = SSA_GATE_FAIL;
    else /* noise, unknown, or withheld for load: the change cannot be judged */
      o->status = SSA_GATE_UNDECIDED;
    res.failed += o->status == SSA_GATE_FAIL;
    res.undecided += o->status == SSA_GATE_UNDECIDED;
  }
  res.outcome = res.failed ? SSA_GATE_FAIL : res.undecided ? SSA_GATE_UNDECIDED : SSA_GATE_PASS;
  res.counts_as = res.outcome == SSA_GATE_UNDECIDED ? g->undecided_as : res.outcome;
  return res;
}
