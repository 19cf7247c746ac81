/*
 * op_report.c — see ssa_op_report.h: the op table in words (one line an op and shape, the
 * roofline's verdict last), as JSON (every number, the inputs as the trace gave them) and as
 * CSV (one header line, one line a row; text fields quoted).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ssa_op_report.h"

static double mfu_of(const ssa_op_report *r, ssa_peak_dtype *dt) {
  return ssa_op_table_mfu(r->table, r->ceilings, dt);
}

static void text_ceilings(const ssa_op_report *r, ssa_out *o) {
  const ssa_ceilings *c = r->ceilings;
  if (!c->bandwidth && !c->flops[SSA_PEAK_BF16] && !c->flops[SSA_PEAK_FP32]) {
    if (r->table->host_time) /* a CPU's ceilings are measured, never taken from a table */
      ssa_out_str(o, "ceilings: a CPU's are not known (measure them with bench_cpu_peaks and give "
                     "them with --peak fp32=...G,bw=...G; docs/ops.md \"CPU ceilings\"): no % of "
                     "peak, no bound\n");
    else
      ssa_out_str(o, "ceilings: unknown device (give them with --peak bf16=...T,bw=...T): no % of "
                     "peak, no bound\n");
    return;
  }
  ssa_out_printf(o, "ceilings (%s%s):", c->device[0] ? c->device : "given",
                 c->given ? ", with --peak" : ", datasheet");
  for (int d = 0; d < SSA_PEAK_N; d++)
    if (c->flops[d] > 0) ssa_out_printf(o, " %s %.1f", ssa_peak_dtype_names[d], c->flops[d] / 1e12);
  ssa_out_printf(o, " TFLOP/s, memory %.2f TB/s\n", c->bandwidth / 1e12);
}

void ssa_op_report_text(const void *report, ssa_out *o) {
  const ssa_op_report *r = report;
  const ssa_op_table *t = r->table;
  char safe[512];
  ssa_out_printf(o, "stepscope ops: %s\n", sc_text_safe(r->run_path, safe, sizeof safe));
  ssa_out_printf(o, "device: %s\n",
                 t->device_name[0] ? sc_text_safe(t->device_name, safe, sizeof safe)
                                   : "(not named in the trace)");
  text_ceilings(r, o);
  ssa_out_printf(o, "times: %s, %d rank(s)\n\n",
                 t->host_time ? "each op's own CPU time (no device activity in the trace)"
                              : "device time of the kernels each op launched",
                 t->ranks);
  ssa_out_printf(o, "%-44s %-34s %7s %11s %9s %9s %8s %6s %s\n", "op", "shapes", "count",
                 "time (us)", "TFLOP/s", "GB/s", "FLOP/B", "%peak", "bound");
  size_t shown = r->top && r->top < t->nrows ? r->top : t->nrows;
  for (size_t i = 0; i < shown; i++) {
    const ssa_op_row *row = &t->rows[i];
    ssa_op_rates x;
    ssa_op_rates_of(row, r->ceilings, &x);
    char name[64], shape[160];
    sc_text_safe(row->name, name, sizeof name);
    snprintf(shape, sizeof shape, "%s", row->shape[0] ? row->shape : "-");
    ssa_out_printf(o, "%-44s %-34s %7llu %11.1f ", name, shape, (unsigned long long)row->count,
                   (double)row->time_ns / 1e3);
    if (row->family == SSA_OPF_NONE)
      ssa_out_str(o, "        -         -        -      -  (no model)\n");
    else if (x.bound[0])
      ssa_out_printf(o, "%9.3f %9.1f %8.2f %6.1f %s\n", x.flops_per_s / 1e12, x.bytes_per_s / 1e9,
                     x.intensity, x.pct_of_peak, x.bound);
    else
      ssa_out_printf(o, "%9.3f %9.1f %8.2f %6s -\n", x.flops_per_s / 1e12, x.bytes_per_s / 1e9,
                     x.intensity, "-");
  }
  if (shown < t->nrows)
    ssa_out_printf(o, "... %zu more rows (--top 0 for all, --json or --csv for every number)\n",
                   t->nrows - shown);
  ssa_out_printf(o, "\ntime with a model: %.1f %% of %.3f ms; FLOPs: %.4g\n",
                 t->time_total ? 100.0 * (double)t->time_modelled / (double)t->time_total : 0.0,
                 (double)t->time_total / 1e6, t->flops_total);
  if (t->unattributed_ns)
    ssa_out_printf(o, "device time with no CPU op around its launch: %.3f ms\n",
                   (double)t->unattributed_ns / 1e6);
  if (t->ops_without_inputs)
    ssa_out_printf(o, "%llu op instances carry no input shapes (profile with record_shapes=True)\n",
                   (unsigned long long)t->ops_without_inputs);
  ssa_peak_dtype dt;
  double mfu = mfu_of(r, &dt);
  if (!isnan(mfu))
    ssa_out_printf(o, "MFU from op FLOPs: %.1f %% (%s peak, %.3f ms of steps x %d rank(s))\n",
                   100 * mfu, ssa_peak_dtype_names[dt], (double)t->span_ns / 1e6, t->ranks);
  else
    ssa_out_str(o, "MFU from op FLOPs: not known (no steps, no FLOPs or no peak for the device)\n");
}

/* The opening of each JSON document: which command wrote it, of which run, and (host_time
 * >= 0) what its times are: "cpu_op" (a CPU-only trace's op times) or "device". */
static void json_head(ssa_out *o, const char *generator, const char *run_path, int host_time) {
  ssa_out_str(o, "{\"generator\":");
  ssa_out_json_string(o, generator);
  ssa_out_field_string(o, "run", run_path);
  if (host_time >= 0) ssa_out_field_string(o, "time", host_time ? "cpu_op" : "device");
}

/* A JSON number written whole (FLOPs and bytes are integers up to 2^53: exact), or null. */
static void exact_field(ssa_out *o, const char *name, double v) {
  ssa_out_key(o, name);
  if (isfinite(v))
    ssa_out_printf(o, "%.17g", v);
  else
    ssa_out_str(o, "null");
}

static void json_row(const ssa_op_row *row, const ssa_ceilings *c, ssa_out *o) {
  ssa_op_rates x;
  ssa_op_rates_of(row, c, &x);
  int m = row->family != SSA_OPF_NONE;
  ssa_out_str(o, "{\"op\":");
  ssa_out_json_string(o, row->name);
  ssa_out_field_string(o, "shapes", row->shape);
  ssa_out_key(o, "inputs");
  if (row->inputs[0] && ssa_json_valid(row->inputs))
    ssa_out_utf8(o, row->inputs);
  else
    ssa_out_str(o, "null");
  ssa_out_key(o, "family");
  if (m)
    ssa_out_json_string(o, ssa_op_family_names[row->family]);
  else
    ssa_out_str(o, "null");
  ssa_out_key(o, "dtype");
  if (m)
    ssa_out_json_string(o, ssa_peak_dtype_names[row->dtype]);
  else
    ssa_out_str(o, "null");
  ssa_out_field_u64(o, "count", row->count);
  ssa_out_field_u64(o, "kernels", row->kernels);
  ssa_out_field_i64(o, "time_ns", row->time_ns);
  exact_field(o, "flops", m ? row->flops : NAN);
  exact_field(o, "bytes", m ? row->bytes : NAN);
  ssa_out_field_double(o, "tflops_per_s", m ? x.flops_per_s / 1e12 : NAN);
  ssa_out_field_double(o, "gb_per_s", m ? x.bytes_per_s / 1e9 : NAN);
  ssa_out_field_double(o, "intensity", m ? x.intensity : NAN);
  ssa_out_field_double(o, "pct_of_peak", x.bound[0] ? x.pct_of_peak : NAN);
  ssa_out_key(o, "bound");
  if (x.bound[0])
    ssa_out_json_string(o, x.bound);
  else
    ssa_out_str(o, "null");
  ssa_out_str(o, "}");
}

void ssa_op_report_json(const void *report, ssa_out *o) {
  const ssa_op_report *r = report;
  const ssa_op_table *t = r->table;
  const ssa_ceilings *c = r->ceilings;
  json_head(o, "stepscope ops", r->run_path, t->host_time);
  ssa_out_field_string(o, "device", t->device_name);
  ssa_out_str(o, ",\"ceilings\":{\"source\":");
  ssa_out_json_string(o, c->given ? "given" : c->device[0] ? "datasheet" : "unknown");
  ssa_out_field_string(o, "device", c->device);
  for (int d = 0; d < SSA_PEAK_N; d++) {
    char key[24];
    snprintf(key, sizeof key, "%s_flops_per_s", ssa_peak_dtype_names[d]);
    ssa_out_field_double(o, key, c->flops[d] > 0 ? c->flops[d] : NAN);
  }
  ssa_out_field_double(o, "bytes_per_s", c->bandwidth > 0 ? c->bandwidth : NAN);
  ssa_out_str(o, "}");
  ssa_out_field_i64(o, "ranks", t->ranks);
  ssa_out_field_i64(o, "time_total_ns", t->time_total);
  ssa_out_field_i64(o, "time_modelled_ns", t->time_modelled);
  ssa_out_field_i64(o, "unattributed_ns", t->unattributed_ns);
  ssa_out_field_u64(o, "ops_without_inputs", t->ops_without_inputs);
  exact_field(o, "flops_total", t->flops_total);
  ssa_out_field_i64(o, "steps_time_ns", t->span_ns);
  ssa_peak_dtype dt;
  double mfu = mfu_of(r, &dt);
  ssa_out_field_double(o, "mfu_from_op_flops", mfu);
  ssa_out_field_string(o, "mfu_peak_dtype", isnan(mfu) ? "" : ssa_peak_dtype_names[dt]);
  ssa_out_str(o, ",\"rows\":[");
  for (size_t i = 0; i < t->nrows; i++) {
    if (i) ssa_out_char(o, ',');
    json_row(&t->rows[i], c, o);
  }
  ssa_out_str(o, "]}\n");
}

/* A CSV text field: quoted, quotes doubled. */
static void csv_text(ssa_out *o, const char *s) {
  ssa_out_char(o, '"');
  for (; *s; s++) {
    if (*s == '"') ssa_out_char(o, '"');
    ssa_out_char(o, *s);
  }
  ssa_out_char(o, '"');
}

static void csv_number(ssa_out *o, double v) {
  if (!isnan(v)) ssa_out_printf(o, "%.17g", v);
}

void ssa_op_report_csv(const void *report, ssa_out *o) {
  const ssa_op_report *r = report;
  const ssa_op_table *t = r->table;
  ssa_out_str(o, "op,shapes,family,dtype,count,kernels,time_ns,flops,bytes,tflops_per_s,gb_per_s,"
                 "intensity,pct_of_peak,bound\n");
  for (size_t i = 0; i < t->nrows; i++) {
    const ssa_op_row *row = &t->rows[i];
    ssa_op_rates x;
    ssa_op_rates_of(row, r->ceilings, &x);
    int m = row->family != SSA_OPF_NONE;
    csv_text(o, row->name);
    ssa_out_char(o, ',');
    csv_text(o, row->shape);
    ssa_out_printf(o, ",%s,%s,%llu,%llu,%lld,", m ? ssa_op_family_names[row->family] : "",
                   m ? ssa_peak_dtype_names[row->dtype] : "", (unsigned long long)row->count,
                   (unsigned long long)row->kernels, (long long)row->time_ns);
    csv_number(o, m ? row->flops : NAN);
    ssa_out_char(o, ',');
    csv_number(o, m ? row->bytes : NAN);
    ssa_out_char(o, ',');
    csv_number(o, m ? x.flops_per_s / 1e12 : NAN);
    ssa_out_char(o, ',');
    csv_number(o, m ? x.bytes_per_s / 1e9 : NAN);
    ssa_out_char(o, ',');
    csv_number(o, m ? x.intensity : NAN);
    ssa_out_char(o, ',');
    csv_number(o, x.bound[0] ? x.pct_of_peak : NAN);
    ssa_out_printf(o, ",%s\n", x.bound);
  }
}

/* ---- modules ---- */

void ssa_module_report_text(const void *report, ssa_out *o) {
  const ssa_module_report *r = report;
  const ssa_module_table *t = r->table;
  char safe[512];
  ssa_out_printf(o, "stepscope ops --by module: %s\n",
                 sc_text_safe(r->run_path, safe, sizeof safe));
  ssa_out_printf(o, "times: %s, a module's including its children's\n\n",
                 t->host_time ? "its ops' own CPU time (no device activity in the trace)"
                              : "device time of the kernels its ops launched");
  if (!t->modules_seen)
    ssa_out_str(o, "no module events in the trace (profile with with_modules=True)\n\n");
  ssa_out_printf(o, "%-52s %7s %12s %12s %7s %10s\n", "module", "calls", "time (us)", "self (us)",
                 "share", "GFLOP");
  for (size_t i = 0; i < t->nrows; i++) {
    const ssa_module_row *m = &t->rows[i];
    const char *leaf = strrchr(m->path, '/');
    char name[128];
    snprintf(name, sizeof name, "%*s%s", 2 * m->depth, "", leaf ? leaf + 1 : m->path);
    ssa_out_printf(
        o, "%-52s %7llu %12.1f %12.1f %6.1f%% %10.4g\n", sc_text_safe(name, safe, sizeof safe),
        (unsigned long long)m->calls, (double)m->time_ns / 1e3, (double)m->self_ns / 1e3,
        t->time_total ? 100.0 * (double)m->time_ns / (double)t->time_total : 0.0, m->flops / 1e9);
  }
  ssa_out_printf(o, "%-52s %7s %12.1f %12.1f %6.1f%% %10.4g\n",
                 "(no module: backward, optimizer, loss...)", "-", (double)t->no_module_ns / 1e3,
                 (double)t->no_module_ns / 1e3,
                 t->time_total ? 100.0 * (double)t->no_module_ns / (double)t->time_total : 0.0,
                 t->no_module_flops / 1e9);
  ssa_out_printf(o, "\ntotal: %.3f ms (the op table's), %.4g FLOPs\n", (double)t->time_total / 1e6,
                 t->flops_total);
}

void ssa_module_report_json(const void *report, ssa_out *o) {
  const ssa_module_report *r = report;
  const ssa_module_table *t = r->table;
  json_head(o, "stepscope ops --by module", r->run_path, t->host_time);
  ssa_out_field_u64(o, "module_events", t->modules_seen);
  ssa_out_field_i64(o, "time_total_ns", t->time_total);
  ssa_out_field_i64(o, "no_module_ns", t->no_module_ns);
  exact_field(o, "flops_total", t->flops_total);
  exact_field(o, "no_module_flops", t->no_module_flops);
  ssa_out_str(o, ",\"rows\":[");
  for (size_t i = 0; i < t->nrows; i++) {
    const ssa_module_row *m = &t->rows[i];
    ssa_out_str(o, i ? ",{\"module\":" : "{\"module\":");
    ssa_out_json_string(o, m->path);
    ssa_out_field_i64(o, "depth", m->depth);
    ssa_out_field_u64(o, "calls", m->calls);
    ssa_out_field_i64(o, "time_ns", m->time_ns);
    ssa_out_field_i64(o, "self_ns", m->self_ns);
    exact_field(o, "flops", m->flops);
    exact_field(o, "self_flops", m->self_flops);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "]}\n");
}

void ssa_module_report_csv(const void *report, ssa_out *o) {
  const ssa_module_report *r = report;
  const ssa_module_table *t = r->table;
  ssa_out_str(o, "module,depth,calls,time_ns,self_ns,flops,self_flops\n");
  for (size_t i = 0; i < t->nrows; i++) {
    const ssa_module_row *m = &t->rows[i];
    csv_text(o, m->path);
    ssa_out_printf(o, ",%d,%llu,%lld,%lld,", m->depth, (unsigned long long)m->calls,
                   (long long)m->time_ns, (long long)m->self_ns);
    csv_number(o, m->flops);
    ssa_out_char(o, ',');
    csv_number(o, m->self_flops);
    ssa_out_char(o, '\n');
  }
}

/* ---- memory over time ---- */

static const char *device_words(const ssa_mem_device *d, char *buf, size_t n) {
  if (d->device_type == 0)
    snprintf(buf, n, "cpu");
  else if (d->device_type == 1)
    snprintf(buf, n, "cuda:%d", d->device_id);
  else
    snprintf(buf, n, "device type %d:%d", d->device_type, d->device_id);
  return buf;
}

void ssa_mem_report_text(const void *report, ssa_out *o) {
  const ssa_mem_report *r = report;
  const ssa_mem_table *t = r->table;
  char safe[512], dev[48];
  ssa_out_printf(o, "stepscope ops --memory: %s\n", sc_text_safe(r->run_path, safe, sizeof safe));
  if (!t->n)
    ssa_out_str(o, "no memory events in the trace (profile with profile_memory=True; stepscope "
                   "traces: MEMORY records)\n");
  for (size_t i = 0; i < t->n; i++) {
    const ssa_mem_device *d = &t->devices[i];
    ssa_out_printf(o, "\nrank %d, %s: %llu events; peak allocated %.3f MB at %.3f ms", d->rank,
                   device_words(d, dev, sizeof dev), (unsigned long long)d->events,
                   (double)d->peak_allocated / 1e6,
                   (double)ssa_rel_time(r->run, d->rank_ptr, d->peak_time) / 1e6);
    if (d->peak_reserved)
      ssa_out_printf(o, ", reserved peak %.3f MB", (double)d->peak_reserved / 1e6);
    ssa_out_char(o, '\n');
    for (size_t s = 0; s < d->nsteps; s++)
      ssa_out_printf(o, "  step %lld: peak %.3f MB\n", (long long)d->step_number[s],
                     (double)d->step_peak[s] / 1e6);
    ssa_out_printf(o,
                   "  live at the peak: %llu allocations made in the trace, %.3f MB (%.3f MB "
                   "allocated before it began); the largest:\n",
                   (unsigned long long)d->live_count, (double)d->live_bytes / 1e6,
                   (double)(d->peak_allocated - d->live_bytes) / 1e6);
    for (size_t k = 0; k < d->ntop; k++)
      ssa_out_printf(o, "    %12.3f KB  %-40s allocated at %.3f ms\n",
                     (double)d->top[k].bytes / 1e3,
                     d->top[k].op[0] ? sc_text_safe(d->top[k].op, safe, sizeof safe) : "(no op)",
                     (double)ssa_rel_time(r->run, d->rank_ptr, d->top[k].time) / 1e6);
  }
}

/* A device's events as three columns: time (ns from the run's start), allocated and reserved
 * bytes after each. */
static void mem_series_json(const ssa_mem_report *r, const ssa_mem_device *d, ssa_out *o) {
  const ssa_alloc *a = d->rank_ptr->allocs;
  static const char *const names[3] = {"time_ns", "allocated_bytes", "reserved_bytes"};
  ssa_out_str(o, ",\"series\":{");
  for (int c = 0; c < 3; c++) {
    ssa_out_printf(o, "%s\"%s\":[", c ? "," : "", names[c]);
    for (uint64_t i = 0; i < d->events; i++) {
      const ssa_alloc *e = &a[d->series[i]];
      if (i) ssa_out_char(o, ',');
      ssa_out_i64(o, c == 0   ? ssa_rel_time(r->run, d->rank_ptr, e->time)
                     : c == 1 ? e->allocated
                              : e->reserved);
    }
    ssa_out_char(o, ']');
  }
  ssa_out_char(o, '}');
}

void ssa_mem_report_json(const void *report, ssa_out *o) {
  const ssa_mem_report *r = report;
  const ssa_mem_table *t = r->table;
  char dev[48];
  json_head(o, "stepscope ops --memory", r->run_path, -1);
  ssa_out_str(o, ",\"devices\":[");
  for (size_t i = 0; i < t->n; i++) {
    const ssa_mem_device *d = &t->devices[i];
    ssa_out_str(o, i ? ",{\"rank\":" : "{\"rank\":");
    ssa_out_i64(o, d->rank);
    ssa_out_field_string(o, "device", device_words(d, dev, sizeof dev));
    ssa_out_field_u64(o, "events", d->events);
    ssa_out_field_i64(o, "peak_allocated_bytes", d->peak_allocated);
    ssa_out_field_i64(o, "peak_time_ns", ssa_rel_time(r->run, d->rank_ptr, d->peak_time));
    ssa_out_field_i64(o, "peak_reserved_bytes", d->peak_reserved);
    ssa_out_str(o, ",\"steps\":[");
    for (size_t s = 0; s < d->nsteps; s++) {
      ssa_out_printf(o, "%s{\"step\":%lld,\"peak_allocated_bytes\":%lld}", s ? "," : "",
                     (long long)d->step_number[s], (long long)d->step_peak[s]);
    }
    ssa_out_str(o, "],\"live_at_peak\":{\"count\":");
    ssa_out_u64(o, d->live_count);
    ssa_out_field_i64(o, "bytes", d->live_bytes);
    ssa_out_field_i64(o, "bytes_before_trace", d->peak_allocated - d->live_bytes);
    ssa_out_str(o, ",\"largest\":[");
    for (size_t k = 0; k < d->ntop; k++) {
      ssa_out_str(o, k ? ",{\"bytes\":" : "{\"bytes\":");
      ssa_out_i64(o, d->top[k].bytes);
      ssa_out_field_string(o, "op", d->top[k].op);
      ssa_out_field_i64(o, "time_ns", ssa_rel_time(r->run, d->rank_ptr, d->top[k].time));
      ssa_out_char(o, '}');
    }
    ssa_out_str(o, "]}");
    if (r->series) mem_series_json(r, d, o);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "]}\n");
}
