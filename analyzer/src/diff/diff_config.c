/*
 * diff_config.c — what differs between the two runs of `stepscope diff` besides their
 * timings: the configuration each trace carries (the header's configuration JSON of the
 * first rank of each side's first run: the trainer writes its whole configuration there) and
 * the FLOPs per step its metadata declares. A diff of two different configurations says so
 * and lists the members that differ; a FLOPs count that changed while the configuration did
 * not (a new producer, another FLOPs convention) makes the MFUs incomparable: MFU is then not
 * compared, and the diff says why, instead of calling the new count's MFU worse or better.
 * docs/diff.md "Configuration".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc_json_skim.h"
#include "ssa_diff.h"

/* The configuration JSON of an analysis's first rank; NULL when none (a Kineto trace). */
static const char *config_of(const ssa_analysis *a) {
  if (!a->nranks) return NULL;
  const char *c = a->ranks[0].rank->config_json;
  c = c ? sc_json_ws(c) : NULL;
  return c && *c == '{' ? c : NULL;
}

/* Appends one difference; 0, or -1 when the list is full. */
static int add(ssa_diff *d, const char *key, size_t klen, const char *va, size_t la, const char *vb,
               size_t lb) {
  if (d->nconfig_diffs >= SSA_DIFF_MAX_CONFIG_DIFFS) return -1;
  ssa_diff_config_diff *x = &d->config_diffs[d->nconfig_diffs++];
  snprintf(x->key, sizeof x->key, "%.*s", (int)klen, key);
  snprintf(x->a, sizeof x->a, "%.*s", (int)la, va);
  snprintf(x->b, sizeof x->b, "%.*s", (int)lb, vb);
  return 0;
}

/* The value text of member `key` in object `obj` ([*v, *v + *len)); 0 when absent. */
static int member(const char *obj, const char *key, size_t klen, const char **v, size_t *len) {
  const char *p = sc_json_member(obj, key, klen);
  const char *e = p ? sc_json_skip_value(p) : NULL;
  if (!e) return 0;
  *v = p;
  *len = (size_t)(e - p);
  return 1;
}

/* The top-level members of `from` that differ from `other`: from A's side, those B lacks or
 * holds differently; from B's side, only those A lacks (the rest A's side found). 0, or -1
 * when `from` is malformed. */
static int compare_members(ssa_diff *d, const char *from, const char *other, int from_is_a) {
  const char *p = sc_json_ws(from + 1);
  while (*p == '"') {
    const char *key = p + 1, *after = sc_json_skip_string(p);
    if (!after) return -1;
    size_t klen = (size_t)(after - 1 - key);
    p = sc_json_ws(after);
    if (*p != ':') return -1;
    const char *v = sc_json_ws(p + 1), *e = sc_json_skip_value(v);
    if (!e) return -1;
    const char *ov;
    size_t olen;
    int there = member(other, key, klen, &ov, &olen);
    size_t vlen = (size_t)(e - v);
    if (from_is_a && (!there || olen != vlen || memcmp(ov, v, vlen)))
      add(d, key, klen, v, vlen, there ? ov : "(absent)", there ? olen : 8);
    else if (!from_is_a && !there)
      add(d, key, klen, "(absent)", 8, v, vlen);
    p = sc_json_ws(e);
    if (*p == ',') p = sc_json_ws(p + 1);
  }
  return *p == '}' ? 0 : -1;
}

void ssa_diff_configs(ssa_diff *d) {
  const char *ca = config_of(d->a), *cb = config_of(d->b);
  d->config_known = ca && cb;
  d->nconfig_diffs = 0;
  if (d->config_known &&
      (compare_members(d, ca, cb, 1) || compare_members(d, cb, ca, 0))) { /* malformed */
    d->config_known = 0;
    d->nconfig_diffs = 0;
  }
  double fa = d->a->model_flops_per_step, fb = d->b->model_flops_per_step;
  d->flops_a = fa;
  d->flops_b = fb;
  d->flops_differ = !isnan(fa) && !isnan(fb) && fabs(fa - fb) > 1e-9 * fmax(fabs(fa), fabs(fb));
  /* the same configuration (or none to compare) and another FLOPs count: the count's
   * convention changed, and the two MFUs measure different things */
  d->mfu_incomparable = d->flops_differ && !d->nconfig_diffs;
  if (d->mfu_incomparable) {
    ssa_diff_metric *m = &d->m[SSA_DM_MFU];
    m->comparable = 0;
    m->verdict = SSA_DV_UNKNOWN;
    m->noise = 0;
    m->noise_reason = SSA_DN_NONE;
    m->abs_change = m->rel_change = NAN;
  }
}

void ssa_diff_config_text(const ssa_diff *d, char *buf, size_t n) {
  size_t len = (size_t)snprintf(buf, n, "the configurations differ:");
  for (size_t i = 0; i < d->nconfig_diffs && len < n; i++) {
    const ssa_diff_config_diff *x = &d->config_diffs[i];
    len += (size_t)snprintf(buf + len, n - len, "%s %s %s -> %s", i ? "," : "", x->key, x->a, x->b);
  }
  if (d->nconfig_diffs >= SSA_DIFF_MAX_CONFIG_DIFFS && len < n)
    snprintf(buf + len, n - len, ", ...");
}
