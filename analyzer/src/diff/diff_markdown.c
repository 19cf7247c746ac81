/*
 * diff_markdown.c — the short Markdown summary of a diff for a CI comment
 * (`stepscope diff --markdown FILE`, docs/diff.md): the gate's outcome, the
 * headline verdicts (a threshold exceeded by a change within noise is "undecided", never
 * "pass"), the top causes (kernels, collectives and ranks or
 * pipeline stages that moved), the findings, and the command to reproduce.
 * Names from traces are written inside code spans with backticks and pipes
 * neutralised, so a kernel name cannot break the table or the comment.
 */
#include <math.h>
#include <string.h>

#include "ssa_diff.h"

static void fmt_value(char *buf, size_t n, int k, int known, double v) {
  if (!known || isnan(v))
    snprintf(buf, n, "-");
  else if (ssa_diff_metric_is_time[k])
    ssa_fmt_time(buf, n, v);
  else
    snprintf(buf, n, "%.1f %%", v * 100.0);
}

/* `s` as a code span, at most max bytes of it, safe in a table cell. */
static void code(ssa_out *o, const char *s, size_t max) {
  char buf[256];
  size_t j = 0;
  for (size_t i = 0; s && s[i] && j + 4 < sizeof buf; i++) {
    if (i == max) {
      memcpy(buf + j, "...", 3);
      j += 3;
      break;
    }
    char c = s[i];
    if (c == '`') c = '\'';
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    if (c == '|') buf[j++] = '\\';
    buf[j++] = c;
  }
  buf[j] = 0;
  ssa_out_char(o, '`');
  ssa_out_utf8(o, buf);
  ssa_out_char(o, '`');
}

static const ssa_gate_rule *rule_for(const ssa_gate *g, int k, size_t *idx) {
  for (size_t i = 0; g && i < g->n; i++)
    if (g->rules[i].metric == k) {
      *idx = i;
      return &g->rules[i];
    }
  return NULL;
}

static int stage_of(const ssa_analysis *a, int rank) {
  for (size_t i = 0; i < a->nranks; i++)
    if (a->ranks[i].rank->rank == rank) return a->ranks[i].pipeline ? a->ranks[i].stage : -1;
  return -1;
}

/* Up to 3 ranks whose own step span changed most (really), largest first. */
static void top_ranks(const ssa_diff *d, size_t *idx, size_t *n) {
  *n = 0;
  for (int pick = 0; pick < 3; pick++) {
    double best = 0;
    size_t best_i = 0;
    int found = 0;
    for (size_t i = 0; i < d->nranks; i++) {
      const ssa_diff_metric *m = &d->ranks[i].m[SSA_DM_STEP_TIME];
      int taken = 0;
      for (size_t j = 0; j < *n; j++)
        taken |= idx[j] == i;
      if (taken || m->verdict != SSA_DV_REAL || fabs(m->abs_change) <= best) continue;
      best = fabs(m->abs_change);
      best_i = i;
      found = 1;
    }
    if (!found) break;
    idx[(*n)++] = best_i;
  }
}

/* "Top causes": the kernels and collectives whose time per step changed by 1 % of A's step
 * or more, then the ranks whose step span moved (one line when every rank moved alike). */
static void write_top_causes(const ssa_diff *d, ssa_out *o) {
  int header = 0;
#define CAUSES()                                                                                   \
  do {                                                                                             \
    if (!header) ssa_out_str(o, "\n**Largest changes within the parts**\n");                       \
    header = 1;                                                                                    \
  } while (0)
  for (size_t i = 0; i < d->nkernels && i < 3 && ssa_diff_kernel_moved(d, &d->kernels[i]); i++) {
    const ssa_diff_kernel *k = &d->kernels[i];
    char ta[32], tb[32];
    ssa_fmt_time(ta, sizeof ta, k->in_a ? k->time_a : 0);
    ssa_fmt_time(tb, sizeof tb, k->in_b ? k->time_b : 0);
    CAUSES();
    ssa_out_printf(o, "- %s kernel ", k->comm ? "communication" : "compute");
    code(o, k->name, 80);
    ssa_out_printf(o, ": %s → %s per step per rank%s\n", ta, tb,
                   !k->in_a   ? " (new in B)"
                   : !k->in_b ? " (gone in B)"
                              : "");
  }
  for (size_t i = 0; i < d->ncolls && i < 2 && ssa_diff_coll_moved(d, &d->colls[i]); i++) {
    const ssa_diff_coll *c = &d->colls[i];
    ssa_diff_coll_text t;
    ssa_diff_coll_describe(c, &t);
    CAUSES();
    ssa_out_printf(o, "- collective %s of %llu bytes in group ", t.op,
                   (unsigned long long)c->bytes);
    code(o, t.group, 60);
    if (!c->in_a || !c->in_b)
      ssa_out_str(o, !c->in_a ? ": new in B\n" : ": gone in B\n");
    else
      ssa_out_printf(o, ": transfer %s → %s, waits of all ranks %s → %s per step\n", t.transfer_a,
                     t.transfer_b, t.wait_a, t.wait_b);
  }
  size_t idx[3], nr, nreal = 0;
  double lo = INFINITY, hi = 0;
  top_ranks(d, idx, &nr);
  for (size_t i = 0; i < d->nranks; i++) {
    const ssa_diff_metric *m = &d->ranks[i].m[SSA_DM_STEP_TIME];
    if (m->verdict != SSA_DV_REAL) continue;
    nreal++;
    lo = fmin(lo, m->abs_change);
    hi = fmax(hi, m->abs_change);
  }
  if (nreal > 1 && nreal == d->nranks && lo * hi > 0 &&
      (hi - lo) <= 0.1 * fmax(fabs(lo), fabs(hi))) {
    /* every rank moved alike: one line, not the same line per rank */
    const ssa_diff_metric *m = &d->ranks[idx[0]].m[SSA_DM_STEP_TIME];
    char ta[32], tb[32];
    ssa_fmt_time(ta, sizeof ta, m->a.median);
    ssa_fmt_time(tb, sizeof tb, m->b.median);
    CAUSES();
    ssa_out_printf(o, "- every rank alike (%zu ranks): step span %s → %s (%+.1f %%)\n", nreal, ta,
                   tb, m->rel_change * 100.0);
    nr = 0;
  }
  for (size_t i = 0; i < nr; i++) {
    const ssa_diff_rank *r = &d->ranks[idx[i]];
    const ssa_diff_metric *m = &r->m[SSA_DM_STEP_TIME];
    char ta[32], tb[32];
    ssa_fmt_time(ta, sizeof ta, m->a.median);
    ssa_fmt_time(tb, sizeof tb, m->b.median);
    int stage = stage_of(d->a, r->rank);
    CAUSES();
    ssa_out_printf(o, "- rank %d", r->rank);
    if (stage >= 0) ssa_out_printf(o, " (pipeline stage %d)", stage);
    ssa_out_printf(o, ": step span %s → %s (%+.1f %%)\n", ta, tb, m->rel_change * 100.0);
  }
#undef CAUSES
}

/* The title: the gate's outcome, what an undecided one counts as, and how many thresholds
 * were crossed or cannot be judged. */
static void write_title(const ssa_gate *g, const ssa_gate_result *r, ssa_out *o) {
  if (!g || !g->n) {
    ssa_out_str(o, "### stepscope diff\n\n");
    return;
  }
  static const char *const words[] = {"pass", "FAIL", "undecided"};
  ssa_out_printf(o, "### stepscope diff: %s", words[r->outcome]);
  if (r->counts_as != r->outcome)
    ssa_out_printf(o, ", counted as %s (--undecided %s)", words[r->counts_as],
                   r->counts_as == SSA_GATE_FAIL ? "fail" : "pass");
  ssa_out_printf(o, " (%zu of %zu thresholds crossed", r->failed, r->n);
  if (r->undecided)
    ssa_out_printf(o, "; %zu exceeded by a change that cannot be told from noise", r->undecided);
  ssa_out_str(o, ")\n\n");
}

int ssa_diff_report_markdown(const ssa_diff *d, const ssa_gate *g, const ssa_gate_outcome *out,
                             const ssa_gate_result *result, const char *command, ssa_out *o) {
  write_title(g, result, o);
  ssa_out_str(o, "A: ");
  code(o, d->path_a ? d->path_a : "A", 120);
  ssa_out_printf(o, " (%zu ranks, %zu steps", d->a->nranks, d->a->nsteps);
  if (d->nruns_a > 1) ssa_out_printf(o, "; %zu runs", d->nruns_a);
  ssa_out_str(o, ") → B: ");
  code(o, d->path_b ? d->path_b : "B", 120);
  ssa_out_printf(o, " (%zu ranks, %zu steps", d->b->nranks, d->b->nsteps);
  if (d->nruns_b > 1) ssa_out_printf(o, "; %zu runs", d->nruns_b);
  ssa_out_str(o, ")\n\n");
  char floor[200];
  ssa_diff_floor_text(d, floor, sizeof floor);
  ssa_out_str(o, "Noise floor: ");
  ssa_out_utf8(o, floor);
  ssa_out_str(o, ".\n\n");
  if (d->load_differs) {
    ssa_out_printf(
        o,
        "> **No verdicts:** the machine was busier during one run (devices idle with work queued "
        "%.1f %% of a step in A, %.1f %% in B",
        d->queued_idle_a * 100.0, d->queued_idle_b * 100.0);
    if (d->machine_differs)
      ssa_out_printf(o, "; load average %.1f in A, %.1f in B on %.0f CPUs", d->machine_load_a,
                     d->machine_load_b, d->machine_cpus);
    ssa_out_str(o, "). Measure both runs on a quiet machine.\n\n");
  }
  if (!d->same_layout) {
    ssa_out_str(o, "> ");
    ssa_out_utf8(o, d->layout_note);
    ssa_out_str(o, "\n\n");
  }
  if (d->nconfig_diffs) { /* names and values from the traces: code spans */
    ssa_out_str(o, "> **Not the same configuration:** ");
    for (size_t i = 0; i < d->nconfig_diffs; i++) {
      const ssa_diff_config_diff *x = &d->config_diffs[i];
      if (i) ssa_out_str(o, ", ");
      code(o, x->key, 48);
      ssa_out_str(o, " ");
      code(o, x->a, 64);
      ssa_out_str(o, " → ");
      code(o, x->b, 64);
    }
    ssa_out_str(o, "\n\n");
  }
  if (d->mfu_incomparable)
    ssa_out_printf(o,
                   "> **MFU not compared:** FLOPs per step %.4g in A, %.4g in B under the same "
                   "configuration (another FLOPs count or convention).\n\n",
                   d->flops_a, d->flops_b);
  ssa_out_printf(o, "| metric | A | B | change | verdict |%s\n|---|---:|---:|---:|---|%s\n",
                 g && g->n ? " gate |" : "", g && g->n ? "---|" : "");
  for (int k = 0; k < SSA_DM_N; k++) {
    const ssa_diff_metric *m = &d->m[k];
    size_t ri = 0;
    const ssa_gate_rule *r = rule_for(g, k, &ri);
    if (!m->comparable && !r) continue;
    char va[32], vb[32], ch[48] = "-";
    fmt_value(va, sizeof va, k, m->a.known, m->a.median);
    fmt_value(vb, sizeof vb, k, m->b.known, m->b.median);
    if (m->comparable) {
      if (!ssa_diff_metric_is_time[k])
        snprintf(ch, sizeof ch, "%+.1f pt", m->abs_change * 100.0);
      else if (!isnan(m->rel_change))
        snprintf(ch, sizeof ch, "%+.1f %%", m->rel_change * 100.0);
      else
        ssa_fmt_time(ch, sizeof ch, m->abs_change);
    }
    const char *v = ssa_diff_verdict_word(m, k);
    ssa_out_printf(o, "| %s | %s | %s | %s | %s%s%s |", ssa_diff_metric_names[k], va, vb, ch,
                   !strcmp(v, "WORSE") ? "**" : "", m->comparable ? v : "not measured",
                   !strcmp(v, "WORSE") ? "**" : "");
    if (g && g->n) {
      if (r) {
        char t[32];
        ssa_gate_rule_text(r, t, sizeof t);
        int st = out[ri].status;
        const char *em = st == SSA_GATE_FAIL || st == SSA_GATE_UNDECIDED ? "**" : "";
        ssa_out_printf(o, " %s%s%s (%s) |", em, ssa_gate_status_names[st], em, t);
      } else {
        ssa_out_str(o, " |");
      }
    }
    ssa_out_char(o, '\n');
  }
  ssa_diff_decomp_markdown(d, o);
  write_top_causes(d, o);
  if (d->nfindings) {
    ssa_out_str(o, "\n**Findings**\n");
    for (size_t i = 0; i < d->nfindings; i++) {
      ssa_out_str(o, "- ");
      ssa_out_utf8(o, d->findings[i]);
      ssa_out_char(o, '\n');
    }
  }
  if (command) {
    ssa_out_str(o, "\n**Reproduce**\n```sh\n");
    ssa_out_utf8(o, command);
    ssa_out_str(o, "\n```\n");
  }
  return o->error ? STEPSCOPE_E_IO : 0;
}
