/*
 * partial_write.c — writes a partial analysis (partial.h; the format: docs/partial-format.md):
 * the header, the options, the part's warnings, then each rank's shell, alignment input,
 * summary and (a rank in no pipeline) the results of its metrics pass, field
 * by field in little-endian (no struct is written whole: no padding bytes, the same bytes on
 * every build).
 */
#include <string.h>
#include <sys/stat.h>

#include "partial.h"
#include "ssa_io.h"

/* v as `size` bytes (4 or 8), little-endian. */
static void put_le(ssa_out *o, uint64_t v, size_t size) {
  unsigned char b[8];
  for (size_t i = 0; i < size; i++)
    b[i] = (unsigned char)(v >> (8 * i));
  ssa_out_write(o, (const char *)b, size);
}

static void put_u32(ssa_out *o, uint32_t v) {
  put_le(o, v, 4);
}

static void put_u64(ssa_out *o, uint64_t v) {
  put_le(o, v, 8);
}

static void put_u32s(ssa_out *o, const uint32_t *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    put_u32(o, v[i]);
}

static void put_i64(ssa_out *o, int64_t v) {
  put_u64(o, (uint64_t)v);
}

static void put_f64(ssa_out *o, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  put_u64(o, u);
}

/* A string, or NULL (length PARTIAL_NULL). */
static void put_str(ssa_out *o, const char *s) {
  if (!s) {
    put_u32(o, PARTIAL_NULL);
    return;
  }
  size_t n = strlen(s);
  put_u32(o, (uint32_t)n);
  ssa_out_write(o, s, n);
}

/* A string table: its count, then the strings of ids 1.. in order (interned again in that
 * order, they get the same ids). */
static void put_strtab(ssa_out *o, const ssa_strtab *t) {
  uint32_t count = t->count ? t->count : 1;
  put_u32(o, count);
  for (uint32_t id = 1; id < count; id++)
    put_str(o, ssa_strtab_get(t, id));
}

#define PUT_META_FIELD(field, path, lo, hi) put_f64(o, m->field);
static void put_layout(ssa_out *o, const ssa_meta_layout *m) {
  put_u32(o, (uint32_t)m->present);
  TM_LAYOUT_NUMBERS(PUT_META_FIELD)
}

static void put_tmeta(ssa_out *o, const ssa_trainer_meta *t) {
  put_layout(o, &t->layout);
  {
    const ssa_meta_schedule *m = &t->schedule;
    put_u32(o, (uint32_t)m->present);
    put_u32(o, (uint32_t)m->has_name);
    ssa_out_write(o, m->name, sizeof m->name);
    TM_SCHEDULE_NUMBERS(PUT_META_FIELD)
  }
  {
    const ssa_meta_flops *m = &t->flops;
    put_u32(o, (uint32_t)m->present);
    TM_FLOPS_NUMBERS(PUT_META_FIELD)
  }
  {
    const ssa_meta_memory *m = &t->memory;
    put_u32(o, (uint32_t)m->present);
    TM_MEMORY_NUMBERS(PUT_META_FIELD)
  }
  {
    const ssa_meta_machine *m = &t->machine;
    put_u32(o, (uint32_t)m->present);
    TM_MACHINE_NUMBERS(PUT_META_FIELD)
  }
}
#undef PUT_META_FIELD

static void put_counts(ssa_out *o, const ssa_class_count *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    put_u64(o, c[i].ops);
    put_i64(o, c[i].time_ns);
  }
}

static void put_shell(ssa_out *o, const ssa_rank *r, const char *read_path,
                      const ssa_file_stamp *stamp) {
  put_u32(o, (uint32_t)r->rank);
  put_u32(o, (uint32_t)r->world_size);
  put_u32(o, (uint32_t)r->local_rank);
  put_i64(o, r->pid);
  put_u32(o, r->clock_domain);
  put_i64(o, r->header_start);
  put_str(o, r->path);
  put_str(o, read_path);
  put_u64(o, stamp->size);
  put_i64(o, stamp->mtime_ns);
  put_str(o, r->hostname);
  put_str(o, r->device_name);
  put_str(o, r->producer);
  put_str(o, r->config_json);
  put_strtab(o, &r->strings);
  put_u32(o, r->nlanes);
  for (uint32_t i = 0; i < r->nlanes; i++) {
    const ssa_lane *l = &r->lanes[i];
    put_u64(o, l->id);
    put_u32(o, l->name);
    put_u32(o, l->device);
    put_u32(o, (uint32_t)l->kind | (uint32_t)l->declared << 8 | (uint32_t)l->by_name << 16);
  }
  put_u64(o, r->nops);
  put_u64(o, r->nanchors);
  put_u64(o, r->nmeta);
  for (size_t i = 0; i < r->nmeta; i++) {
    put_str(o, r->meta[i].key);
    put_str(o, r->meta[i].value);
  }
  put_u64(o, r->nmoe_marks);
  for (size_t i = 0; i < r->nmoe_marks; i++) {
    put_i64(o, r->moe_marks[i].time);
    put_u32(o, r->moe_marks[i].args);
  }
  const uint64_t counts[] = {r->marks,           r->memory_events,     r->overheads,
                             r->unknown_records, r->memory_peak_bytes, r->records,
                             r->damaged_regions, r->damaged_bytes,     r->file_bytes,
                             r->joined_ops,      r->comm_by_evidence,  r->comm_by_name};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    put_u64(o, counts[i]);
  for (size_t i = 0; i < 8; i++)
    put_u64(o, r->dropped[i]);
  put_u64(o, r->nwarnings);
  for (size_t i = 0; i < r->nwarnings; i++)
    put_str(o, r->warnings[i]);
  put_tmeta(o, &r->tmeta);
  put_counts(o, &r->tally.evidence, 1);
  put_counts(o, r->tally.family, SSA_COMM_FAMILY_MAX);
  put_counts(o, r->tally.kind, SSA_COMM_KIND_N);
  put_u64(o, r->tally.nuser);
  put_counts(o, r->tally.user, r->tally.nuser);
  put_i64(o, r->offset_ns);
  const int flags[] = {r->finished,     r->has_trace_stop, r->host_timeline, r->close_state,
                       r->close_signal, r->failed,         r->source_index};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    put_u32(o, (uint32_t)flags[i]);
  put_i64(o, r->trace_stop);
  /* a shell keeps its latest trace time (rank_drop.c); ranks with their events compute it */
  put_i64(o, r->events_dropped ? r->last_time : ssa_rank_last_time(r));
  put_str(o, r->error);
  put_u64(o, r->file_index);
}

static void put_align(ssa_out *o, const ssa_rank_align *a) {
  put_u32(o, (uint32_t)a->rank);
  put_u32(o, (uint32_t)a->has_offset);
  put_i64(o, a->anchor_offset);
  put_u32(o, (uint32_t)a->any_event);
  put_i64(o, a->first_event);
  put_u64(o, a->nends);
  for (size_t i = 0; i < a->nends; i++) {
    put_u64(o, a->ends[i].comm_id);
    put_u64(o, a->ends[i].seq);
    put_i64(o, a->ends[i].end);
  }
}

static void put_summary(ssa_out *o, const ssa_rank_summary *s) {
  put_u32(o, (uint32_t)s->rank);
  put_u32(o, (uint32_t)s->pipeline_stage);
  for (int i = 0; i < 3; i++)
    put_u32(o, (uint32_t)s->layout[i]);
  put_layout(o, &s->meta_layout);
  put_strtab(o, &s->names);
  put_u64(o, s->ncolls);
  for (size_t i = 0; i < s->ncolls; i++) {
    const ssa_coll_rec *c = &s->colls[i];
    const uint64_t words[] = {c->comm_id, c->seq, c->bytes, (uint64_t)c->start, (uint64_t)c->end};
    for (size_t w = 0; w < 5; w++)
      put_u64(o, words[w]);
    put_u32s(o, (const uint32_t[]){c->op, c->flags, c->comm_rank, c->comm_size, c->name}, 5);
  }
}

static void put_i64s(ssa_out *o, const int64_t *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    put_i64(o, v[i]);
}

static void put_window(ssa_out *o, const ssa_window *w) {
  put_i64s(o, (const int64_t[]){w->step, w->start, w->end}, 3);
  put_u32(o, (uint32_t)w->projected);
  put_i64(o, w->device_latency);
  put_u32(o, (uint32_t)w->cut);
  put_u32(o, (uint32_t)w->stub);
  put_i64s(o,
           (const int64_t[]){w->span, w->busy, w->idle, w->compute, w->comm, w->overlap,
                             w->exposed_comm, w->exposed_mem, w->bubble, w->pipeline_comm_only},
           10);
  put_i64s(o, w->idle_cause, SSA_IDLE_N);
  put_u32(o, (uint32_t)w->has_bubble_causes);
  put_i64s(o, w->bubble_cause, SSA_BUBBLE_N);
  put_u32(o, (uint32_t)w->imbalance_stage);
  put_u32(o, (uint32_t)w->late_from_rank);
  put_u32(o, (uint32_t)w->late_from_phase);
  put_i64s(o, (const int64_t[]){w->late_from_ns, w->schedule_idle, w->schedule_idle_balanced}, 3);
  put_u64(o, w->launch.count);
  put_i64s(
      o,
      (const int64_t[]){w->launch.min, w->launch.p50, w->launch.p90, w->launch.p99, w->launch.max},
      5);
  put_f64(o, w->launch.mean);
  put_u32(o, (uint32_t)w->cpu_bound);
}

/* What a pipeline rank's results made in a second map round add: the hashes of the
 * cross-rank inputs they were made with, the summary's pipeline items, the late upstream's
 * waits. */
static void put_crossed(ssa_out *o, const ssa_rank_local *l) {
  put_u64(o, l->waits_hash);
  put_u64(o, l->transfers_hash);
  put_u64(o, l->nitems);
  for (size_t i = 0; i < l->nitems; i++) {
    const ssa_pipeline_item *it = &l->items[i];
    put_i64s(o, (const int64_t[]){it->start, it->end, it->dur}, 3);
    put_u32s(o, (const uint32_t[]){(uint32_t)it->pass, (uint32_t)it->mb, (uint32_t)it->chunk}, 3);
    put_u64(o, it->step);
  }
  put_u64(o, l->nwaits);
  for (size_t i = 0; i < l->nwaits; i++) {
    put_u64(o, l->waits[i].window);
    put_i64s(o, (const int64_t[]){l->waits[i].t0, l->waits[i].t1}, 2);
    put_u32(o, l->waits[i].sender);
  }
}

/* A rank's metrics made where it was loaded (ssa_rank_local), or "not made" and the bounds
 * of its totals window. */
static void put_local(ssa_out *o, const ssa_rank_local *l) {
  put_u32(o, !l->made ? 0u : l->crossed ? 2u : 1u);
  if (!l->made) {
    put_i64s(o, (const int64_t[]){l->totals_start, l->totals_end}, 2);
    return;
  }
  put_u64(o, l->result.nsteps);
  for (size_t i = 0; i < l->result.nsteps; i++) {
    const ssa_step *s = &l->result.steps[i];
    put_i64s(o,
             (const int64_t[]){s->number, s->range_start, s->range_end, s->start, s->end,
                               s->dev_start, s->dev_end},
             7);
    put_u32(o, (uint32_t)s->projected);
    put_u32(o, (uint32_t)s->cut);
    put_u64(o, s->launched);
  }
  put_window(o, &l->result.totals);
  for (size_t i = 0; i < l->result.nsteps; i++)
    put_window(o, &l->result.windows[i]);
  put_u64(o, l->result.nlanes);
  for (size_t i = 0; i < l->result.nlanes; i++) {
    put_u32(o, l->result.lanes[i].lane);
    put_i64(o, l->result.lanes[i].busy);
    put_i64s(o, l->result.lanes[i].idle_cause, SSA_IDLE_N);
  }
  put_u64(o, l->result.nkstats);
  for (size_t i = 0; i < l->result.nkstats; i++) {
    const ssa_rank_kstat *k = &l->result.kstats[i];
    put_u32s(o, (const uint32_t[]){k->name, k->comm}, 2);
    put_u64(o, k->count);
    put_i64s(o, (const int64_t[]){k->total, k->min, k->max}, 3);
  }
  put_u32(o, (uint32_t)l->result.pipeline);
  put_u32(o, (uint32_t)l->result.stage);
  put_f64(o, l->result.bubble_theory);
  put_u32(o, (uint32_t)l->result.ops.made);
  if (l->result.ops.made) {
    put_u64(o, l->result.ops.ngroups);
    for (size_t i = 0; i < l->result.ops.ngroups; i++) {
      const ssa_op_group *g = &l->result.ops.groups[i];
      put_u32s(o, (const uint32_t[]){g->name, g->inputs}, 2);
      put_u64(o, g->count);
      put_u64(o, g->kernels);
      put_i64(o, g->time_ns);
    }
    put_u32(o, (uint32_t)l->result.ops.host_time);
    put_i64(o, l->result.ops.unattributed_ns);
    put_u64(o, l->result.ops.ops_without_inputs);
  }
  put_u64(o, l->nwarnings);
  for (size_t i = 0; i < l->nwarnings; i++)
    put_str(o, l->warnings[i]);
  put_u64(o, l->result.span_answers.n); /* packed (span_answers.c) */
  put_u64(o, l->result.span_answers.nbytes);
  ssa_out_write(o, (const char *)l->result.span_answers.bytes, l->result.span_answers.nbytes);
  if (l->crossed) put_crossed(o, l);
}

/* The options that shaped the ranks' metrics (ssa_rank_local_options_equal) and the
 * classification rules their ops were loaded with. */
static void put_options(ssa_out *o, const ssa_options *opt) {
  put_u32(o, (uint32_t)opt->has_step_filter);
  put_i64(o, opt->step_first);
  put_i64(o, opt->step_last);
  put_str(o, opt->step_range_name);
  put_i64(o, ssa_options_launch_gap_ns(opt));
  put_u32(o, (uint32_t)(opt->rank < 0 ? -1 : opt->rank));
  const ssa_comm_rules *rules = opt->comm_rules; /* they classified every shell's ops */
  put_u64(o, rules ? rules->n : 0);
  for (size_t i = 0; rules && i < rules->n; i++) {
    put_u32(o, (uint32_t)rules->rule[i].comm);
    put_str(o, rules->rule[i].pattern);
  }
}

int ssa_partial_write(const ssa_partial *p, ssa_out *o) {
  ssa_out_write(o, SSA_PARTIAL_MAGIC, 8);
  put_u32(o, SSA_PARTIAL_VERSION);
  put_u32(o, PARTIAL_SHAPE);
  put_u32(o, PARTIAL_RESULT_SHAPE);
  put_str(o, p->dir);
  put_u64(o, p->run_id);
  put_u64(o, p->nfiles);
  put_u32(o, (uint32_t)p->part_index);
  put_u32(o, (uint32_t)p->part_count);
  put_options(o, &p->made_with);
  put_u64(o, p->nwarnings);
  for (size_t i = 0; i < p->nwarnings; i++)
    put_str(o, p->warnings[i]);
  put_u64(o, p->nranks);
  for (size_t i = 0; i < p->nranks; i++) {
    const ssa_rank *r = &p->ranks[i];
    put_shell(o, r, p->read_paths[i], &p->stamps[i]);
    if (!r->align_input) return STEPSCOPE_E_ARGUMENT; /* a shell always has one */
    put_align(o, r->align_input);
    put_summary(o, &p->summaries[i]);
    static const ssa_rank_local none;
    put_local(o, p->locals ? &p->locals[i] : &none);
  }
  ssa_out_write(o, PARTIAL_END, 8);
  return o->error ? STEPSCOPE_E_IO : 0;
}

/* A per-record array (NULL: absent) as its records that are not `none`. */
static void put_sparse(ssa_out *o, const int64_t *v, size_t n, int64_t none) {
  put_u32(o, v != NULL);
  if (!v) return;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += v[i] != none;
  put_u64(o, k);
  for (size_t i = 0; i < n; i++)
    if (v[i] != none) {
      put_u32(o, (uint32_t)i);
      put_i64(o, v[i]);
    }
}

int ssa_cross_write(const ssa_cross_part *p, const ssa_rank_cross *x, const uint64_t *file_index,
                    const int *rank, size_t n, ssa_out *o) {
  ssa_out_write(o, SSA_CROSS_MAGIC, 8);
  put_u32(o, SSA_CROSS_VERSION);
  put_u64(o, p->run_id);
  put_u64(o, p->nfiles);
  put_u32s(o, (const uint32_t[]){(uint32_t)p->part_index, (uint32_t)p->part_count}, 2);
  size_t made = 0;
  for (size_t i = 0; i < n; i++)
    made += x[i].made != 0;
  put_u64(o, made);
  for (size_t i = 0; i < n; i++) {
    if (!x[i].made) continue;
    put_u64(o, file_index[i]);
    put_u32(o, (uint32_t)rank[i]);
    put_u64(o, x[i].ncolls);
    put_i64(o, x[i].rel_shift);
    put_sparse(o, x[i].wait_end, x[i].ncolls, INT64_MIN);
    put_sparse(o, x[i].transfer, x[i].ncolls, -1);
    put_u64(o, x[i].nsends);
    for (size_t k = 0; k < x[i].nsends; k++) {
      put_u32s(o, (const uint32_t[]){x[i].sends[k].record, x[i].sends[k].sender}, 2);
      put_i64(o, x[i].sends[k].at);
    }
  }
  ssa_out_write(o, CROSS_END, 8);
  return o->error ? STEPSCOPE_E_IO : 0;
}

uint64_t ssa_partial_run_id(const char *const *names, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    for (const unsigned char *s = (const unsigned char *)names[i];; s++) {
      h = (h ^ *s) * 1099511628211ull; /* the NUL too: "ab","c" differs from "a","bc" */
      if (!*s) break;
    }
  return h;
}

int ssa_file_stamp_of(const char *path, ssa_file_stamp *out) {
  struct stat st;
  if (stat(path, &st)) return -1;
  out->size = (uint64_t)st.st_size;
  out->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  return 0;
}
