/*
 * diff_report.c — the outputs of `stepscope diff`: a readable text report
 * and the versioned JSON document (schema in docs/diff.md). Both print the
 * same ssa_diff; times in JSON are integer nanoseconds (medians and
 * quantiles rounded to the nearest ns), ratios plain numbers, unknown values
 * null.
 */
#include <math.h>
#include <string.h>

#include "ssa_diff.h"
#include "ssa_io.h"

/* ---------------------------------------------------------------- text */

/* "2.1 %": how far one side's runs lie apart, relative to its step time; "-" unknown. */
static void between_pct(char *buf, size_t n, const ssa_diff_stat *s) {
  if (isnan(s->between) || !(s->median > 0))
    snprintf(buf, n, "-");
  else
    snprintf(buf, n, "%.1f %%", s->between / s->median * 100.0);
}

void ssa_diff_floor_text(const ssa_diff *d, char *buf, size_t n) {
  const ssa_diff_metric *st = &d->m[SSA_DM_STEP_TIME];
  char ra[24], rb[24], given[64] = "";
  between_pct(ra, sizeof ra, &st->a);
  between_pct(rb, sizeof rb, &st->b);
  if (d->run_noise_source == SSA_DIFF_FLOOR_GIVEN)
    snprintf(given, sizeof given,
             isnan(d->run_noise) ? "no run-to-run floor (--run-noise 0)"
                                 : "run-to-run floor %g %% (--run-noise)",
             d->run_noise * 100.0);
  if (d->run_noise_source == SSA_DIFF_FLOOR_DEFAULT)
    snprintf(buf, n,
             "run-to-run floor %g %%: the default for one run per side; --run-noise PCT sets it, "
             "--repeat-a/-b measure it",
             d->run_noise * 100.0);
  else if (d->nruns_a > 1 || d->nruns_b > 1)
    snprintf(buf, n,
             "run-to-run noise measured from %zu + %zu runs (step time: A's runs %s apart, "
             "B's %s)%s%s",
             d->nruns_a, d->nruns_b, ra, rb, given[0] ? "; " : "", given);
  else
    snprintf(buf, n, "%s, one run per side", given);
}

static void tfmt(char *buf, size_t n, int is_time, int known, double v) {
  if (!known || isnan(v)) {
    snprintf(buf, n, "-");
    return;
  }
  if (!is_time) {
    snprintf(buf, n, "%.1f%%", v * 100.0);
    return;
  }
  ssa_fmt_time(buf, n, v);
}

static void tchange(char *buf, size_t n, int is_time, const ssa_diff_metric *m) {
  if (!m->comparable) {
    snprintf(buf, n, "-");
    return;
  }
  char v[32];
  tfmt(v, sizeof v, is_time, 1, m->abs_change);
  if (is_time) {
    if (isnan(m->rel_change))
      snprintf(buf, n, "%s%s", m->abs_change > 0 ? "+" : "", v);
    else
      snprintf(buf, n, "%s%s (%+.1f%%)", m->abs_change > 0 ? "+" : "", v, m->rel_change * 100.0);
  } else {
    snprintf(buf, n, "%+.1f pt", m->abs_change * 100.0);
  }
}

/* The text report's head: the runs, the noise floor used, and the notes on what differs
 * between them (layout, configuration, FLOPs, machine load). */
static void text_head(const ssa_diff *d, FILE *f) {
  char safe[1024], safe2[1024]; /* trace strings and paths, terminal-safe (text_escape.c) */
  fprintf(f, "stepscope diff\n  A: %s (%zu ranks, %zu steps",
          sc_text_safe(d->path_a ? d->path_a : "A", safe, sizeof safe), d->a->nranks, d->a->nsteps);
  if (d->nruns_a > 1)
    fprintf(f, "; %zu runs, %zu steps in all", d->nruns_a, d->m[SSA_DM_STEP_TIME].a.n);
  fprintf(f, ")\n  B: %s (%zu ranks, %zu steps",
          sc_text_safe(d->path_b ? d->path_b : "B", safe2, sizeof safe2), d->b->nranks,
          d->b->nsteps);
  if (d->nruns_b > 1)
    fprintf(f, "; %zu runs, %zu steps in all", d->nruns_b, d->m[SSA_DM_STEP_TIME].b.n);
  fprintf(f, ")\n");
  char floor[200];
  ssa_diff_floor_text(d, floor, sizeof floor);
  fprintf(f, "  noise floor: %s\n", floor);
  if (!d->same_layout) fprintf(f, "  note: %s\n", d->layout_note);
  if (d->nconfig_diffs) {
    char what[1200];
    ssa_diff_config_text(d, what, sizeof what);
    fprintf(f, "  note: %s\n", sc_text_safe(what, safe, sizeof safe));
  }
  if (d->mfu_incomparable)
    fprintf(f,
            "  note: MFU not compared: FLOPs per step %.4g in A, %.4g in B under the same "
            "configuration (another FLOPs count or convention)\n",
            d->flops_a, d->flops_b);
  if (!isnan(d->machine_load_a) || !isnan(d->machine_load_b)) {
    char la[16] = "-", lb[16] = "-";
    if (!isnan(d->machine_load_a)) snprintf(la, sizeof la, "%.1f", d->machine_load_a);
    if (!isnan(d->machine_load_b)) snprintf(lb, sizeof lb, "%.1f", d->machine_load_b);
    fprintf(f, "  machine load (1-minute average, from the traces): A %s, B %s on %.0f CPUs%s\n",
            la, lb, d->machine_cpus, d->machine_differs ? ": differs" : "");
  }
}

int ssa_diff_report_text(const ssa_diff *d, FILE *f) {
  char safe[1024]; /* trace strings, terminal-safe (text_escape.c) */
  text_head(d, f);
  if (d->load_differs)
    fprintf(f,
            "  note: load differs (devices idle with work queued %.1f%% of a step in A, %.1f%% in "
            "B; kernel stretch "
            "B/A %.2fx%s): no verdicts\n",
            d->queued_idle_a * 100.0, d->queued_idle_b * 100.0, d->kernel_stretch,
            d->machine_differs ? "; machine load average differs" : "");
  fprintf(f, "\n== headline (median over steps; spread = IQR, or max-min under 4 steps; noise "
             "test: docs/diff.md) ==\n");
  fprintf(f, "%-14s %12s %12s %22s %11s %11s  %s\n", "metric", "A", "B", "change", "spread A",
          "spread B", "verdict");
  for (int k = 0; k < SSA_DM_N; k++) {
    const ssa_diff_metric *m = &d->m[k];
    int t = ssa_diff_metric_is_time[k];
    char a[32], b[32], c[48], sa[32], sb[32];
    tfmt(a, sizeof a, t, m->a.known, m->a.median);
    tfmt(b, sizeof b, t, m->b.known, m->b.median);
    tchange(c, sizeof c, t, m);
    tfmt(sa, sizeof sa, t, m->a.known, m->a.spread);
    tfmt(sb, sizeof sb, t, m->b.known, m->b.spread);
    char v[48];
    if (m->comparable && m->verdict == SSA_DV_NOISE && m->noise_reason != SSA_DN_NONE)
      snprintf(v, sizeof v, "noise (%s)", ssa_diff_noise_reason_names[m->noise_reason]);
    else
      snprintf(v, sizeof v, "%s", ssa_diff_verdict_word(m, k));
    fprintf(f, "%-14s %12s %12s %22s %11s %11s  %s\n", ssa_diff_metric_names[k], a, b, c, sa, sb,
            v);
  }
  if (d->nruns_a > 1 || d->nruns_b > 1) {
    fprintf(
        f, "\n== between runs (each run's median; range = how far one side's runs lie apart) ==\n");
    fprintf(f, "%-14s %12s %12s %12s %10s %10s\n", "metric", "range A", "range B", "gap A->B",
            "t-test p", "adjusted");
    for (int k = 0; k < SSA_DM_N; k++) {
      const ssa_diff_metric *m = &d->m[k];
      if (!m->comparable) continue;
      int t = ssa_diff_metric_is_time[k];
      char ra[32], rb[32], g[32];
      tfmt(ra, sizeof ra, t, !isnan(m->a.between), m->a.between);
      tfmt(rb, sizeof rb, t, !isnan(m->b.between), m->b.between);
      tfmt(g, sizeof g, t, !isnan(m->run_gap), m->run_gap);
      char p[32] = "-", adj[32] = "-";
      if (!isnan(m->run_p_value))
        snprintf(p, sizeof p, "%.3g%s", m->run_p_value, m->run_one_sided ? " 1s" : "");
      if (!isnan(m->run_p_adjusted)) snprintf(adj, sizeof adj, "%.3g", m->run_p_adjusted);
      fprintf(f, "%-14s %12s %12s %12s %10s %10s\n", ssa_diff_metric_names[k], ra, rb, g, p, adj);
    }
    fprintf(f,
            "  (gap: distance between the nearest runs of A and B, negative when they interleave;\n"
            "   t-test p: the runs' medians of A against B's, two-sided, or one-sided (1s) for a\n"
            "   gate's metric that got worse; adjusted: for the metrics judged together (the\n"
            "   gate's by Bonferroni, the others by Holm); below %.2f the change is beyond the\n"
            "   between-run variation)\n",
            SSA_DIFF_ALPHA);
  }
  ssa_diff_decomp_text(d, f);
  fprintf(f, "\n== findings ==\n");
  for (size_t i = 0; i < d->nfindings; i++)
    fprintf(f, "- %s\n", sc_text_safe(d->findings[i], safe, sizeof safe));
  if (d->same_layout && d->nranks) {
    fprintf(f, "\n== per rank (median over steps: A -> B) ==\n");
    fprintf(f, "%5s %24s %24s %24s %16s\n", "rank", "step span", "exposed comm", "idle", "overlap");
    for (size_t i = 0; i < d->nranks; i++) {
      const ssa_diff_rank *r = &d->ranks[i];
      char cell[4][64];
      static const int ks[4] = {SSA_DM_STEP_TIME, SSA_DM_EXPOSED_COMM, SSA_DM_IDLE,
                                SSA_DM_OVERLAP_RATIO};
      for (int j = 0; j < 4; j++) {
        const ssa_diff_metric *m = &r->m[ks[j]];
        int t = ssa_diff_metric_is_time[ks[j]];
        char a[24], b[24];
        tfmt(a, sizeof a, t, m->a.known, m->a.median);
        tfmt(b, sizeof b, t, m->b.known, m->b.median);
        snprintf(cell[j], sizeof cell[j], "%s -> %s%s", a, b,
                 m->comparable && m->verdict != SSA_DV_REAL ? "~" : "");
      }
      fprintf(f, "%5d %24s %24s %24s %16s\n", r->rank, cell[0], cell[1], cell[2], cell[3]);
    }
    fprintf(f, "  (~ = within that rank's step-to-step noise)\n");
  }
  if (d->nsteps) {
    fprintf(f, "\n== steps (paired by order) ==\n%6s %6s %12s %6s %12s\n", "index", "A", "time",
            "B", "time");
    for (size_t i = 0; i < d->nsteps; i++) {
      const ssa_diff_step *s = &d->steps[i];
      char ta[32], tb[32];
      tfmt(ta, sizeof ta, 1, s->time_a >= 0, (double)s->time_a);
      tfmt(tb, sizeof tb, 1, s->time_b >= 0, (double)s->time_b);
      char na[24] = "-", nb[24] = "-";
      if (s->time_a >= 0) snprintf(na, sizeof na, "%lld", (long long)s->step_a);
      if (s->time_b >= 0) snprintf(nb, sizeof nb, "%lld", (long long)s->step_b);
      fprintf(f, "%6zu %6s %12s %6s %12s\n", s->index, na, ta, nb, tb);
    }
  }
  if (d->nkernels) {
    fprintf(f, "\n== kernels (time per step per rank, largest changes) ==\n%12s %12s %12s  %s\n",
            "A", "B", "change", "name");
    for (size_t i = 0; i < d->nkernels && i < 15; i++) {
      const ssa_diff_kernel *k = &d->kernels[i];
      char a[32], b[32], c[32];
      tfmt(a, sizeof a, 1, k->in_a, k->time_a);
      tfmt(b, sizeof b, 1, k->in_b, k->time_b);
      tfmt(c, sizeof c, 1, 1, k->time_b - k->time_a);
      fprintf(f, "%12s %12s %12s  %s\n", a, b, c, sc_text_safe(k->name, safe, 71));
    }
  }
  if (d->ncolls) {
    fprintf(f, "\n== collectives (matched by op, group, bytes) ==\n");
    fprintf(f, "%-14s %-12s %12s %13s %21s %21s\n", "op", "group", "bytes", "count/step",
            "transfer A -> B", "wait/step A -> B");
    for (size_t i = 0; i < d->ncolls && i < 15; i++) {
      const ssa_diff_coll *c = &d->colls[i];
      char ta[24], tb[24], wa[24], wb[24], cnt[32];
      tfmt(ta, sizeof ta, 1, c->in_a, c->transfer_a);
      tfmt(tb, sizeof tb, 1, c->in_b, c->transfer_b);
      tfmt(wa, sizeof wa, 1, c->in_a, c->wait_a);
      tfmt(wb, sizeof wb, 1, c->in_b, c->wait_b);
      snprintf(cnt, sizeof cnt, "%.1f->%.1f", c->count_a, c->count_b);
      const char *op = stepscope_collective_op_name(c->op);
      char tr[64], wt[64];
      snprintf(tr, sizeof tr, "%s -> %s", ta, tb);
      snprintf(wt, sizeof wt, "%s -> %s", wa, wb);
      fprintf(f, "%-14s %-12s %12llu %13s %21s %21s\n", op ? op : "?",
              sc_text_safe(c->group, safe, 13), (unsigned long long)c->bytes, cnt, tr, wt);
    }
  }
  return ferror(f) ? STEPSCOPE_E_IO : 0;
}

/* ---------------------------------------------------------------- JSON */

#define KEY(o, k) ssa_out_str((o), "\"" k "\":")

static void jnum(ssa_out *o, int is_time, double v) {
  if (isnan(v) || isinf(v))
    ssa_out_str(o, "null");
  else if (is_time)
    ssa_out_i64(o, (int64_t)llround(v));
  else
    ssa_out_double(o, v);
}

/* `,"name":` and jnum's value. */
static void jfield(ssa_out *o, const char *name, int is_time, double v) {
  ssa_out_key(o, name);
  jnum(o, is_time, v);
}

static void jstat(ssa_out *o, int is_time, const ssa_diff_stat *s) {
  if (!s->known) {
    ssa_out_str(o, "null");
    return;
  }
  ssa_out_str(o, "{\"median\":");
  jnum(o, is_time, s->median);
  jfield(o, "p25", is_time, s->p25);
  jfield(o, "p75", is_time, s->p75);
  jfield(o, "min", is_time, s->min);
  jfield(o, "max", is_time, s->max);
  jfield(o, "spread", is_time, s->spread);
  jfield(o, "drift", is_time, s->drift);
  ssa_out_field_u64(o, "values", s->n);
  ssa_out_field_u64(o, "runs", s->runs);
  ssa_out_str(o, ",\"run_medians\":[");
  for (size_t i = 0; i < s->runs; i++) {
    if (i) ssa_out_char(o, ',');
    jnum(o, is_time, s->run_median[i]);
  }
  ssa_out_str(o, "],\"between_runs\":");
  jnum(o, is_time, s->between);
  ssa_out_char(o, '}');
}

static void jmetric(ssa_out *o, int k, const ssa_diff_metric *m) {
  int t = ssa_diff_metric_is_time[k];
  ssa_out_printf(o, "\"%s\":{\"unit\":\"%s\",\"better\":\"%s\",\"a\":", ssa_diff_metric_names[k],
                 t ? "ns" : "ratio", ssa_diff_metric_better[k] > 0 ? "higher" : "lower");
  jstat(o, t, &m->a);
  ssa_out_str(o, ",\"b\":");
  jstat(o, t, &m->b);
  ssa_out_str(o, ",\"abs_change\":");
  jnum(o, t, m->comparable ? m->abs_change : NAN);
  ssa_out_str(o, ",\"rel_change\":");
  jnum(o, 0, m->comparable ? m->rel_change : NAN);
  ssa_out_str(o, ",\"noise\":");
  ssa_out_str(o, !m->comparable || m->verdict == SSA_DV_UNKNOWN ? "null"
                 : m->noise                                     ? "true"
                                                                : "false");
  static const char *const words[] = {"unknown", "same", "noise", "better", "worse"};
  int w = m->verdict == SSA_DV_REAL
              ? ((m->abs_change > 0 ? 1 : -1) == ssa_diff_metric_better[k] ? 3 : 4)
              : m->verdict;
  ssa_out_str(o, ",\"verdict\":");
  if (m->comparable)
    ssa_out_json_string(o, words[w]);
  else
    ssa_out_str(o, "null");
  ssa_out_str(o, ",\"why\":");
  if (m->comparable && m->noise_reason != SSA_DN_NONE)
    ssa_out_json_string(o, ssa_diff_noise_reason_names[m->noise_reason]);
  else
    ssa_out_str(o, "null");
  ssa_out_str(o, ",\"p_value\":");
  jnum(o, 0, m->p_value);
  ssa_out_str(o, ",\"min_effect\":");
  jnum(o, t, m->min_effect);
  ssa_out_str(o, ",\"run_gap\":");
  jnum(o, t, m->run_gap);
  ssa_out_str(o, ",\"run_p_value\":");
  jnum(o, 0, m->run_p_value);
  ssa_out_str(o, ",\"run_p_adjusted\":");
  jnum(o, 0, m->run_p_adjusted);
  ssa_out_str(o, m->run_one_sided ? ",\"run_one_sided\":true" : ",\"run_one_sided\":false");
  ssa_out_str(o, ",\"run_floor\":");
  jnum(o, t, m->run_floor);
  ssa_out_char(o, '}');
}

static void jrun(ssa_out *o, const char *path, const ssa_analysis *a, int world, size_t runs) {
  ssa_out_str(o, "{\"path\":");
  ssa_out_json_string(o, path);
  ssa_out_field_i64(o, "world", world);
  ssa_out_field_u64(o, "ranks", a->nranks);
  ssa_out_field_u64(o, "steps", a->nsteps);
  ssa_out_field_u64(o, "runs", runs);
  ssa_out_char(o, '}');
}

/* One run's side of a step, a kernel row or a collective row: null when it has none. */
static void jstep_side(ssa_out *o, int64_t step, int64_t time) {
  if (time < 0)
    ssa_out_str(o, "null");
  else
    ssa_out_printf(o, "{\"step\":%lld,\"time_ns\":%lld}", (long long)step, (long long)time);
}

/* Opens a kernel or collective row's side with its count per step; writes null and
 * returns 0 when the row is not in that run. */
static int jside_open(ssa_out *o, int in, double count) {
  if (!in) {
    ssa_out_str(o, "null");
    return 0;
  }
  ssa_out_str(o, "{\"count_per_step\":");
  ssa_out_double(o, count);
  return 1;
}

static void jkernel_side(ssa_out *o, int in, double count, double time, double mean) {
  if (!jside_open(o, in, count)) return;
  jfield(o, "time_per_step_ns", 1, time);
  jfield(o, "mean_ns", 1, mean);
  ssa_out_char(o, '}');
}

static void jcoll_side(ssa_out *o, int in, double count, double transfer, double busbw,
                       double wait) {
  if (!jside_open(o, in, count)) return;
  jfield(o, "transfer_mean_ns", 1, transfer);
  jfield(o, "busbw_gbps", 0, busbw);
  jfield(o, "wait_per_step_ns", 1, wait);
  ssa_out_char(o, '}');
}

/* "load": the signs that the two runs shared their machines differently. */
static void jload(ssa_out *o, const ssa_diff *d) {
  ssa_out_str(o, ",\"load\":{\"queued_idle_a\":");
  jnum(o, 0, d->queued_idle_a);
  ssa_out_str(o, ",\"queued_idle_b\":");
  jnum(o, 0, d->queued_idle_b);
  ssa_out_str(o, ",\"queued_idle_a_p75\":");
  jnum(o, 0, d->queued_idle_a_p75);
  ssa_out_str(o, ",\"queued_idle_b_p75\":");
  jnum(o, 0, d->queued_idle_b_p75);
  ssa_out_str(o, ",\"kernel_stretch\":");
  jnum(o, 0, d->kernel_stretch);
  ssa_out_printf(o, ",\"stretch_kernels\":%zu", d->stretch_kernels);
  ssa_out_str(o, ",\"machine_a\":");
  jnum(o, 0, d->machine_load_a);
  ssa_out_str(o, ",\"machine_b\":");
  jnum(o, 0, d->machine_load_b);
  ssa_out_str(o, ",\"cpus\":");
  jnum(o, 0, d->machine_cpus);
  ssa_out_str(o, d->machine_differs ? ",\"machine_differs\":true" : ",\"machine_differs\":false");
  ssa_out_str(o, d->load_differs ? ",\"differs\":true}" : ",\"differs\":false}");
}

/* "run_noise" (the between-run floor used) and "configuration" (what differs between the runs). */
static void jnoise_config(ssa_out *o, const ssa_diff *d) {
  static const char *const sources[] = {"measured", "given", "default"};
  ssa_out_printf(o, ",\"run_noise\":{\"source\":\"%s\",\"floor\":", sources[d->run_noise_source]);
  jnum(o, 0, d->run_noise);
  ssa_out_str(o, "}");
  ssa_out_str(o, ",\"configuration\":{\"known\":");
  ssa_out_str(o, d->config_known ? "true" : "false");
  ssa_out_str(o, ",\"differences\":[");
  for (size_t i = 0; i < d->nconfig_diffs; i++) {
    const ssa_diff_config_diff *x = &d->config_diffs[i];
    if (i) ssa_out_char(o, ',');
    ssa_out_str(o, "{\"key\":");
    ssa_out_json_string(o, x->key);
    ssa_out_str(o, ",\"a\":");
    ssa_out_json_string(o, x->a);
    ssa_out_str(o, ",\"b\":");
    ssa_out_json_string(o, x->b);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "],\"model_flops_per_step_a\":");
  jnum(o, 0, d->flops_a);
  ssa_out_str(o, ",\"model_flops_per_step_b\":");
  jnum(o, 0, d->flops_b);
  ssa_out_str(o, d->mfu_incomparable ? ",\"mfu_compared\":false}" : ",\"mfu_compared\":true}");
}

int ssa_diff_report_json(const ssa_diff *d, ssa_out *o) {
  ssa_out_printf(
      o, "{\"schema_version\":%d,\"kind\":\"stepscope.diff\",\"a\":", SSA_DIFF_SCHEMA_VERSION);
  jrun(o, d->path_a, d->a, d->world_a, d->nruns_a);
  ssa_out_str(o, ",\"b\":");
  jrun(o, d->path_b, d->b, d->world_b, d->nruns_b);
  ssa_out_str(o, ",\"same_layout\":");
  ssa_out_str(o, d->same_layout ? "true" : "false");
  ssa_out_str(o, ",\"layout_note\":");
  if (d->same_layout)
    ssa_out_str(o, "null");
  else
    ssa_out_json_string(o, d->layout_note);
  jload(o, d);
  ssa_diff_decomp_json(d, o);
  jnoise_config(o, d);
  ssa_out_str(o, ",\"headline\":{");
  for (int k = 0; k < SSA_DM_N; k++) {
    if (k) ssa_out_char(o, ',');
    jmetric(o, k, &d->m[k]);
  }
  ssa_out_str(o, "},\"ranks\":[");
  for (size_t i = 0; i < d->nranks; i++) {
    const ssa_diff_rank *r = &d->ranks[i];
    if (i) ssa_out_char(o, ',');
    ssa_out_printf(o, "{\"rank\":%d,\"in_a\":%s,\"in_b\":%s,\"metrics\":{", r->rank,
                   r->in_a ? "true" : "false", r->in_b ? "true" : "false");
    int first = 1;
    for (int k = 0; k < SSA_DM_N; k++) {
      if (k == SSA_DM_MFU) continue;
      if (!first) ssa_out_char(o, ',');
      first = 0;
      jmetric(o, k, &r->m[k]);
    }
    ssa_out_str(o, "},\"coll_wait_ns\":{\"a\":");
    ssa_out_i64(o, r->coll_wait_a);
    ssa_out_str(o, ",\"b\":");
    if (r->in_b)
      ssa_out_i64(o, r->coll_wait_b);
    else
      ssa_out_str(o, "null");
    ssa_out_str(o, "}}");
  }
  ssa_out_str(o, "],\"steps\":[");
  for (size_t i = 0; i < d->nsteps; i++) {
    const ssa_diff_step *s = &d->steps[i];
    if (i) ssa_out_char(o, ',');
    ssa_out_printf(o, "{\"index\":%zu", s->index);
    ssa_out_key(o, "a");
    jstep_side(o, s->step_a, s->time_a);
    ssa_out_key(o, "b");
    jstep_side(o, s->step_b, s->time_b);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "],\"kernels\":[");
  for (size_t i = 0; i < d->nkernels; i++) {
    const ssa_diff_kernel *k = &d->kernels[i];
    if (i) ssa_out_char(o, ',');
    ssa_out_str(o, "{\"name\":");
    ssa_out_json_string(o, k->name);
    ssa_out_field_bool(o, "comm", k->comm);
    ssa_out_key(o, "a");
    jkernel_side(o, k->in_a, k->count_a, k->time_a, k->mean_a);
    ssa_out_key(o, "b");
    jkernel_side(o, k->in_b, k->count_b, k->time_b, k->mean_b);
    jfield(o, "time_change_per_step_ns", 1, k->time_b - k->time_a);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "],\"collectives\":[");
  for (size_t i = 0; i < d->ncolls; i++) {
    const ssa_diff_coll *c = &d->colls[i];
    if (i) ssa_out_char(o, ',');
    const char *op = stepscope_collective_op_name(c->op);
    ssa_out_str(o, "{\"op\":");
    ssa_out_json_string(o, op ? op : "unknown");
    ssa_out_field_string(o, "group", c->group);
    ssa_out_field_u64(o, "bytes", c->bytes);
    ssa_out_key(o, "a");
    jcoll_side(o, c->in_a, c->count_a, c->transfer_a, c->busbw_a, c->wait_a);
    ssa_out_key(o, "b");
    jcoll_side(o, c->in_b, c->count_b, c->transfer_b, c->busbw_b, c->wait_b);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "],\"findings\":");
  ssa_out_json_strings(o, d->findings, d->nfindings);
  ssa_out_str(o, "}\n");
  return o->error ? STEPSCOPE_E_IO : 0;
}
