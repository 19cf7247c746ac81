/*
 * partial_read.c — reads a partial analysis (partial.h; docs/partial-format.md) written by
 * partial_write.c. Every read is bounded by the bytes left, every count is checked against
 * them before anything is allocated, every string id against its table: a damaged,
 * truncated or foreign file is a format error that says where, never a crash or a huge
 * allocation (tests/fuzz/fuzz_partial.c feeds it arbitrary bytes).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partial.h"

typedef struct cursor {
  const unsigned char *p;
  size_t left;
  int bad, nomem;
  char *why;
  size_t cap;
} cursor;

/* Marks the cursor bad with the first reason (later ones are consequences). */
static void fail(cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(cursor *c, const char *fmt, ...) {
  if (c->bad) return;
  c->bad = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, c->cap, fmt, ap);
  va_end(ap);
}

static const unsigned char *take(cursor *c, size_t n, const char *what) {
  if (c->bad) return NULL;
  if (n > c->left) {
    fail(c, "truncated in %s", what);
    return NULL;
  }
  const unsigned char *p = c->p;
  c->p += n;
  c->left -= n;
  return p;
}

/* An unsigned little-endian number of `size` bytes (4 or 8). */
static uint64_t get_le(cursor *c, size_t size, const char *what) {
  const unsigned char *b = take(c, size, what);
  uint64_t v = 0;
  for (size_t i = size; b && i-- > 0;)
    v = v << 8 | b[i];
  return v;
}

static uint64_t get_u64(cursor *c, const char *what) {
  return get_le(c, 8, what);
}

static uint32_t get_u32(cursor *c, const char *what) {
  return (uint32_t)get_le(c, 4, what);
}

static int get_int(cursor *c, const char *what) {
  return (int)get_u32(c, what);
}

static double get_f64(cursor *c, const char *what) {
  uint64_t u = get_u64(c, what);
  double v;
  memcpy(&v, &u, sizeof v);
  return v;
}

/* A count of items of at least `min_bytes` each: never more than the bytes left hold. */
static size_t get_count(cursor *c, size_t min_bytes, const char *what) {
  uint64_t n = get_u64(c, what);
  if (!c->bad && n > c->left / (min_bytes ? min_bytes : 1)) {
    fail(c, "%s: count %llu is more than the partial holds", what, (unsigned long long)n);
    return 0;
  }
  return c->bad ? 0 : (size_t)n;
}

/* A count of what the partial does not hold (a shell's ops and anchors: the report prints
 * them; the merge reads the events again from the rank file): nothing is allocated for it and
 * the bytes left do not bound it, only the model's 32-bit indices of a rank's events do. */
static size_t get_kept_count(cursor *c, const char *what) {
  uint64_t n = get_u64(c, what);
  if (!c->bad && n >= UINT32_MAX) {
    fail(c, "%s: count %llu is more than a rank can hold", what, (unsigned long long)n);
    return 0;
  }
  return c->bad ? 0 : (size_t)n;
}

static void *alloc(cursor *c, size_t n, size_t size) {
  if (c->bad) return NULL;
  void *v = calloc(n ? n : 1, size);
  if (!v) {
    c->nomem = 1;
    fail(c, "out of memory");
  }
  return v;
}

/* A string (malloc'ed), NULL for a NULL one; `nul_ok` 0: NULL is a format error. */
static char *get_str(cursor *c, int nul_ok, const char *what) {
  uint32_t n = get_u32(c, what);
  if (c->bad) return NULL;
  if (n == PARTIAL_NULL) {
    if (!nul_ok) fail(c, "%s: missing", what);
    return NULL;
  }
  const unsigned char *b = take(c, n, what);
  if (!b) return NULL;
  if (memchr(b, 0, n)) {
    fail(c, "%s: a NUL inside a string", what);
    return NULL;
  }
  char *s = alloc(c, (size_t)n + 1, 1);
  if (s) memcpy(s, b, n);
  return s;
}

static void get_strtab(cursor *c, ssa_strtab *t, const char *what) {
  ssa_strtab_init(t);
  uint32_t count = get_u32(c, what);
  if (!c->bad && (count == 0 || count - 1 > c->left / 4)) fail(c, "%s: bad string count", what);
  for (uint32_t id = 1; id < count && !c->bad; id++) {
    char *s = get_str(c, 0, what);
    if (!s) break;
    uint32_t got = ssa_strtab_intern(t, s, strlen(s));
    free(s);
    if (got == 0 && !c->bad) {
      c->nomem = 1;
      fail(c, "out of memory");
    } else if (got != id)
      fail(c, "%s: string %u repeats an earlier one", what, id);
  }
}

#define GET_META_FIELD(field, path, lo, hi) m->field = get_f64(c, "metadata");
static void get_layout(cursor *c, ssa_meta_layout *m) {
  m->present = get_int(c, "metadata");
  TM_LAYOUT_NUMBERS(GET_META_FIELD)
}

static void get_tmeta(cursor *c, ssa_trainer_meta *t) {
  get_layout(c, &t->layout);
  {
    ssa_meta_schedule *m = &t->schedule;
    m->present = get_int(c, "metadata");
    m->has_name = get_int(c, "metadata");
    const unsigned char *name = take(c, sizeof m->name, "metadata");
    if (name && !memchr(name, 0, sizeof m->name)) fail(c, "metadata: schedule name unterminated");
    if (name && !c->bad) memcpy(m->name, name, sizeof m->name);
    TM_SCHEDULE_NUMBERS(GET_META_FIELD)
  }
  {
    ssa_meta_flops *m = &t->flops;
    m->present = get_int(c, "metadata");
    TM_FLOPS_NUMBERS(GET_META_FIELD)
  }
  {
    ssa_meta_memory *m = &t->memory;
    m->present = get_int(c, "metadata");
    TM_MEMORY_NUMBERS(GET_META_FIELD)
  }
  {
    ssa_meta_machine *m = &t->machine;
    m->present = get_int(c, "metadata");
    TM_MACHINE_NUMBERS(GET_META_FIELD)
  }
}
#undef GET_META_FIELD

static void get_counts(cursor *c, ssa_class_count *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    v[i].ops = get_u64(c, "tally");
    v[i].time_ns = (int64_t)get_u64(c, "tally");
  }
}

/* The lanes and marks of a shell, their string ids checked. */
static void get_lanes_and_marks(cursor *c, ssa_rank *r) {
  uint32_t nlanes = get_u32(c, "lanes");
  if (!c->bad && nlanes > c->left / 20)
    fail(c, "lanes: count %u is more than the partial holds", nlanes);
  if ((r->lanes = alloc(c, nlanes, sizeof *r->lanes))) r->nlanes = r->lanes_cap = nlanes;
  for (uint32_t i = 0; i < r->nlanes && !c->bad; i++) {
    ssa_lane *l = &r->lanes[i];
    l->id = get_u64(c, "lanes");
    l->name = get_u32(c, "lanes");
    l->device = get_u32(c, "lanes");
    uint32_t bits = get_u32(c, "lanes");
    l->kind = (uint8_t)bits;
    l->declared = (uint8_t)(bits >> 8);
    l->by_name = (uint8_t)(bits >> 16);
    if (bits >> 24) fail(c, "lanes: lane %u: bad kind bits", i);
    if (l->name >= r->strings.count && l->name)
      fail(c, "lanes: lane %u names string %u", i, l->name);
  }
  r->nops = get_kept_count(c, "ops");
  r->nanchors = get_kept_count(c, "anchors");
  size_t nmeta = get_count(c, 8, "metadata");
  if ((r->meta = alloc(c, nmeta, sizeof *r->meta))) r->nmeta = r->meta_cap = nmeta;
  for (size_t i = 0; i < r->nmeta && !c->bad; i++) {
    r->meta[i].key = get_str(c, 1, "metadata");
    r->meta[i].value = get_str(c, 1, "metadata");
  }
  size_t nmarks = get_count(c, 12, "marks");
  if ((r->moe_marks = alloc(c, nmarks, sizeof *r->moe_marks)))
    r->nmoe_marks = r->moe_marks_cap = nmarks;
  for (size_t i = 0; i < r->nmoe_marks && !c->bad; i++) {
    r->moe_marks[i].time = (int64_t)get_u64(c, "marks");
    r->moe_marks[i].args = get_u32(c, "marks");
    if (r->moe_marks[i].args >= r->strings.count) fail(c, "marks: a mark names no string");
  }
}

static void get_shell(cursor *c, ssa_rank *r, char **read_path, ssa_file_stamp *stamp,
                      const ssa_comm_rules *rules, uint64_t nfiles) {
  r->rank = get_int(c, "rank");
  r->world_size = get_int(c, "rank");
  r->local_rank = get_int(c, "rank");
  r->pid = (int64_t)get_u64(c, "rank");
  r->clock_domain = get_u32(c, "rank");
  r->header_start = (int64_t)get_u64(c, "rank");
  r->path = get_str(c, 0, "rank path");
  *read_path = get_str(c, 0, "rank path");
  stamp->size = get_u64(c, "rank file");
  stamp->mtime_ns = (int64_t)get_u64(c, "rank file");
  r->hostname = get_str(c, 1, "hostname");
  r->device_name = get_str(c, 1, "device");
  r->producer = get_str(c, 1, "producer");
  r->config_json = get_str(c, 1, "config");
  get_strtab(c, &r->strings, "rank strings");
  get_lanes_and_marks(c, r);
  uint64_t *counts[] = {&r->marks,           &r->memory_events,     &r->overheads,
                        &r->unknown_records, &r->memory_peak_bytes, &r->records,
                        &r->damaged_regions, &r->damaged_bytes,     &r->file_bytes,
                        &r->joined_ops,      &r->comm_by_evidence,  &r->comm_by_name};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    *counts[i] = get_u64(c, "counts");
  for (size_t i = 0; i < 8; i++)
    r->dropped[i] = get_u64(c, "counts");
  size_t nwarn = get_count(c, 4, "warnings");
  if ((r->warnings = alloc(c, nwarn, sizeof *r->warnings))) r->nwarnings = r->warnings_cap = nwarn;
  for (size_t i = 0; i < r->nwarnings && !c->bad; i++)
    r->warnings[i] = get_str(c, 0, "warnings");
  get_tmeta(c, &r->tmeta);
  get_counts(c, &r->tally.evidence, 1);
  get_counts(c, r->tally.family, SSA_COMM_FAMILY_MAX);
  get_counts(c, r->tally.kind, SSA_COMM_KIND_N);
  size_t nuser = get_count(c, 16, "tally");
  if (!c->bad && nuser != (rules ? rules->n : 0))
    fail(c,
         "rank %d was classified with %zu rule(s) of --comm-kernel/--compute-kernel, the merge "
         "has %zu: give merge the options the partial was made with",
         r->rank, nuser, rules ? rules->n : 0);
  if (nuser && (r->tally.user = alloc(c, nuser, sizeof *r->tally.user))) r->tally.nuser = nuser;
  get_counts(c, r->tally.user, r->tally.nuser);
  r->comm_rules = rules;
  r->offset_ns = (int64_t)get_u64(c, "rank");
  int *flags[] = {&r->finished,     &r->has_trace_stop, &r->host_timeline, &r->close_state,
                  &r->close_signal, &r->failed,         &r->source_index};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    *flags[i] = get_int(c, "rank");
  r->trace_stop = (int64_t)get_u64(c, "rank");
  r->last_time = (int64_t)get_u64(c, "rank"); /* its note of an unclosed trace reads it */
  r->has_last_time = 1;
  char *error = get_str(c, 0, "rank error");
  if (error && strlen(error) >= sizeof r->error) fail(c, "rank error: too long");
  if (error && !c->bad) memcpy(r->error, error, strlen(error) + 1);
  free(error);
  r->file_index = (size_t)get_u64(c, "rank");
  if (!c->bad && r->file_index >= nfiles) fail(c, "rank %d: file index out of range", r->rank);
  r->events_dropped = 1;
}

static void get_align(cursor *c, ssa_rank *r) {
  ssa_rank_align *a = alloc(c, 1, sizeof *a);
  if (!a) return;
  r->align_input = a;
  a->rank = get_int(c, "alignment");
  a->has_offset = get_int(c, "alignment");
  a->anchor_offset = (int64_t)get_u64(c, "alignment");
  a->any_event = get_int(c, "alignment");
  a->first_event = (int64_t)get_u64(c, "alignment");
  size_t n = get_count(c, 24, "alignment");
  if (n && (a->ends = alloc(c, n, sizeof *a->ends))) a->nends = n;
  for (size_t i = 0; i < a->nends && !c->bad; i++) {
    a->ends[i].comm_id = get_u64(c, "alignment");
    a->ends[i].seq = get_u64(c, "alignment");
    a->ends[i].end = (int64_t)get_u64(c, "alignment");
  }
  if (!c->bad && a->rank != r->rank)
    fail(c, "rank %d: its alignment input is another rank's", r->rank);
}

static void get_summary(cursor *c, const ssa_rank *r, ssa_rank_summary *s) {
  s->rank = get_int(c, "summary");
  s->pipeline_stage = get_int(c, "summary");
  for (int i = 0; i < 3; i++)
    s->layout[i] = get_int(c, "summary");
  get_layout(c, &s->meta_layout);
  get_strtab(c, &s->names, "summary strings");
  size_t n = get_count(c, 60, "collective records");
  if (n && (s->colls = alloc(c, n, sizeof *s->colls))) s->ncolls = n;
  for (size_t i = 0; i < s->ncolls && !c->bad; i++) {
    ssa_coll_rec *x = &s->colls[i];
    x->comm_id = get_u64(c, "collective records");
    x->seq = get_u64(c, "collective records");
    x->bytes = get_u64(c, "collective records");
    x->start = (int64_t)get_u64(c, "collective records");
    x->end = (int64_t)get_u64(c, "collective records");
    x->op = get_u32(c, "collective records");
    x->flags = get_u32(c, "collective records");
    x->comm_rank = get_u32(c, "collective records");
    x->comm_size = get_u32(c, "collective records");
    x->name = get_u32(c, "collective records");
    if (!c->bad && x->name >= s->names.count && x->name)
      fail(c, "rank %d: a collective record names no string", r->rank);
  }
  if (!c->bad && s->rank != r->rank) fail(c, "rank %d: its summary is another rank's", r->rank);
  if (!c->bad && (s->pipeline_stage < -1 || s->pipeline_stage >= 1000000000))
    fail(c, "rank %d: pipeline stage out of range", r->rank);
}

static int64_t get_i64(cursor *c, const char *what) {
  return (int64_t)get_u64(c, what);
}

static void get_i64s(cursor *c, int64_t *v, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    v[i] = get_i64(c, what);
}

/* A flag of the format: 0 or 1. */
static int get_flag(cursor *c, const char *what) {
  uint32_t v = get_u32(c, what);
  if (!c->bad && v > 1) fail(c, "%s: a flag of %u", what, v);
  return (int)v;
}

/* A window, in put_window's order (partial_write.c). */
static void get_window(cursor *c, ssa_window *w) {
  const char *what = "rank results: window";
  int64_t *head[] = {&w->step, &w->start, &w->end};
  for (size_t i = 0; i < 3; i++)
    *head[i] = get_i64(c, what);
  w->projected = get_int(c, what);
  w->device_latency = get_i64(c, what);
  w->cut = get_int(c, what);
  w->stub = get_int(c, what);
  int64_t *sums[] = {
      &w->span,    &w->busy,         &w->idle,        &w->compute, &w->comm,
      &w->overlap, &w->exposed_comm, &w->exposed_mem, &w->bubble,  &w->pipeline_comm_only};
  for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++)
    *sums[i] = get_i64(c, what);
  get_i64s(c, w->idle_cause, SSA_IDLE_N, what);
  w->has_bubble_causes = get_int(c, what);
  get_i64s(c, w->bubble_cause, SSA_BUBBLE_N, what);
  int *late[] = {&w->imbalance_stage, &w->late_from_rank, &w->late_from_phase};
  for (size_t i = 0; i < 3; i++)
    *late[i] = get_int(c, what);
  int64_t *sched[] = {&w->late_from_ns, &w->schedule_idle, &w->schedule_idle_balanced};
  for (size_t i = 0; i < 3; i++)
    *sched[i] = get_i64(c, what);
  w->launch.count = get_u64(c, what);
  int64_t *delays[] = {&w->launch.min, &w->launch.p50, &w->launch.p90, &w->launch.p99,
                       &w->launch.max};
  for (size_t i = 0; i < 5; i++)
    *delays[i] = get_i64(c, what);
  w->launch.mean = get_f64(c, what);
  w->cpu_bound = get_int(c, what);
}

/* The op groups of a rank's results, their names checked against the summary's. */
static void get_op_groups(cursor *c, const ssa_rank_summary *s, ssa_rank_ops *ops) {
  ops->made = get_flag(c, "rank results: op groups");
  if (!ops->made) return;
  size_t n = get_count(c, 32, "rank results: op groups");
  if ((ops->groups = alloc(c, n, sizeof *ops->groups))) ops->ngroups = n;
  for (size_t i = 0; i < ops->ngroups && !c->bad; i++) {
    ssa_op_group *g = &ops->groups[i];
    g->name = get_u32(c, "rank results: op groups");
    g->inputs = get_u32(c, "rank results: op groups");
    uint64_t *counts[] = {&g->count, &g->kernels};
    for (size_t k = 0; k < 2; k++)
      *counts[k] = get_u64(c, "rank results: op groups");
    g->time_ns = get_i64(c, "rank results: op groups");
    if (!c->bad && (g->name >= s->names.count || g->inputs >= s->names.count))
      fail(c, "rank results: op group %zu names no string", i);
  }
  ops->host_time = get_int(c, "rank results: op groups");
  ops->unattributed_ns = get_i64(c, "rank results: op groups");
  ops->ops_without_inputs = get_u64(c, "rank results: op groups");
}

/* What a pipeline rank's results made in a second map round add (put_crossed): the inputs'
 * hashes, the pipeline items and the late upstream's waits, their steps and passes checked. */
static void get_crossed(cursor *c, const ssa_rank *r, ssa_rank_local *l) {
  const char *what = "rank results: crossed";
  l->waits_hash = get_u64(c, what);
  l->transfers_hash = get_u64(c, what);
  size_t n = get_count(c, 44, "rank results: pipeline items");
  if ((l->items = alloc(c, n, sizeof *l->items))) l->nitems = n;
  for (size_t i = 0; i < l->nitems && !c->bad; i++) {
    ssa_pipeline_item *it = &l->items[i];
    int64_t v[3];
    get_i64s(c, v, 3, what);
    *it = (ssa_pipeline_item){.start = v[0], .end = v[1], .dur = v[2]};
    it->pass = get_int(c, what);
    it->mb = get_int(c, what);
    it->chunk = get_int(c, what);
    uint64_t step = get_u64(c, what);
    it->step = (size_t)step;
    if (!c->bad && (it->pass < 0 || it->pass > 2 || it->mb < 0 || it->mb > 1000000 ||
                    it->chunk < 0 || it->chunk > 1000 || step >= l->result.nsteps))
      fail(c, "rank %d: pipeline item %zu out of range", r->rank, i);
  }
  n = get_count(c, 28, "rank results: upstream waits");
  if ((l->waits = alloc(c, n, sizeof *l->waits))) l->nwaits = n;
  for (size_t i = 0; i < l->nwaits && !c->bad; i++) {
    uint64_t window = get_u64(c, what);
    l->waits[i].window = (size_t)window;
    l->waits[i].t0 = get_i64(c, what);
    l->waits[i].t1 = get_i64(c, what);
    l->waits[i].sender = get_u32(c, what); /* a rank index: the merge checks it */
    if (!c->bad && window >= l->result.nsteps)
      fail(c, "rank %d: an upstream wait in no step", r->rank);
  }
}

/* A rank's metrics made where it was loaded (ssa_rank_local): steps, windows, lanes, kernel
 * statistics, op groups, warnings, every count and index checked; or, not made, the bounds of
 * its totals window. */
/* A rank's culprit walk answers, packed (docs/partial-format.md "Span answers"): kept packed,
 * checked by unpacking them once. */
static void get_span_answers(cursor *c, const ssa_rank *r, ssa_packed_answers *p) {
  size_t n = get_count(c, 0, "rank results: span answers");
  size_t nbytes = get_count(c, 1, "rank results: span answers");
  const unsigned char *bytes = take(c, nbytes, "rank results: span answers");
  if (c->bad || nbytes == 0) {
    if (!c->bad && n) fail(c, "rank %d: span answers without their bytes", r->rank);
    return;
  }
  if ((p->bytes = alloc(c, nbytes, 1))) {
    memcpy(p->bytes, bytes, nbytes);
    p->nbytes = nbytes;
    p->n = n;
  }
  ssa_span_answer *v = NULL;
  ssa_packed_answers again = {0}; /* packed again: the format has one spelling of them */
  int rc = c->bad ? 0 : ssa_span_answers_unpack(p, &v);
  if (rc == 0 && v) rc = ssa_span_answers_pack(v, n, &again);
  if (rc == 0 && v && (again.nbytes != nbytes || memcmp(again.bytes, bytes, nbytes) != 0))
    rc = STEPSCOPE_E_FORMAT;
  free(v);
  ssa_packed_answers_free(&again);
  c->nomem |= rc == STEPSCOPE_E_NOMEM;
  if (rc == STEPSCOPE_E_NOMEM) fail(c, "out of memory");
  if (rc == STEPSCOPE_E_FORMAT)
    fail(c, "rank %d: span answers not %zu sorted answers in their packed spelling", r->rank, n);
}

static void get_local(cursor *c, const ssa_rank *r, const ssa_rank_summary *s, ssa_rank_local *l) {
  uint32_t made = get_u32(c, "rank results");
  if (!c->bad && made > 2) fail(c, "rank results: made %u", made);
  if (made == 0) {
    l->totals_start = get_i64(c, "rank results: bounds");
    l->totals_end = get_i64(c, "rank results: bounds");
  }
  if (made == 0 || c->bad) return;
  l->made = 1;
  l->crossed = made == 2; /* a pipeline rank's, of a second map round */
  if (s->pipeline_stage >= 0 && !l->crossed)
    fail(c, "rank %d: results of a pipeline rank", r->rank);
  if (s->pipeline_stage < 0 && l->crossed)
    fail(c, "rank %d: a second round's results of a rank in no pipeline", r->rank);
  size_t nsteps = get_count(c, 72 + 300, "rank results: steps");
  l->result.steps = alloc(c, nsteps, sizeof *l->result.steps);
  l->result.windows = alloc(c, nsteps, sizeof *l->result.windows);
  if (l->result.steps && l->result.windows) l->result.nsteps = nsteps;
  for (size_t i = 0; i < l->result.nsteps && !c->bad; i++) {
    ssa_step *st = &l->result.steps[i];
    int64_t v[7];
    get_i64s(c, v, 7, "rank results: steps");
    *st = (ssa_step){v[0], v[1], v[2], v[3], v[4], v[5], v[6], 0, 0, 0};
    st->projected = get_int(c, "rank results: steps");
    st->cut = get_int(c, "rank results: steps");
    st->launched = get_u64(c, "rank results: steps");
  }
  get_window(c, &l->result.totals);
  for (size_t i = 0; i < l->result.nsteps && !c->bad; i++)
    get_window(c, &l->result.windows[i]);
  size_t nlanes = get_count(c, 12 + 8 * SSA_IDLE_N, "rank results: lanes");
  if ((l->result.lanes = alloc(c, nlanes, sizeof *l->result.lanes))) l->result.nlanes = nlanes;
  for (size_t i = 0; i < l->result.nlanes && !c->bad; i++) {
    l->result.lanes[i].lane = get_u32(c, "rank results: lanes");
    l->result.lanes[i].busy = get_i64(c, "rank results: lanes");
    get_i64s(c, l->result.lanes[i].idle_cause, SSA_IDLE_N, "rank results: lanes");
    if (!c->bad && l->result.lanes[i].lane >= r->nlanes)
      fail(c, "rank %d: results of lane %u, which it lacks", r->rank, l->result.lanes[i].lane);
  }
  size_t nk = get_count(c, 40, "rank results: kernels");
  if ((l->result.kstats = alloc(c, nk, sizeof *l->result.kstats))) l->result.nkstats = nk;
  for (size_t i = 0; i < l->result.nkstats && !c->bad; i++) {
    ssa_rank_kstat *k = &l->result.kstats[i];
    k->name = get_u32(c, "rank results: kernels");
    k->comm = get_u32(c, "rank results: kernels");
    k->count = get_u64(c, "rank results: kernels");
    int64_t *times[] = {&k->total, &k->min, &k->max};
    for (size_t t = 0; t < 3; t++)
      *times[t] = get_i64(c, "rank results: kernels");
    if (!c->bad && k->name >= s->names.count) fail(c, "rank %d: a kernel names no string", r->rank);
  }
  l->result.pipeline = get_flag(c, "rank results");
  l->result.stage = get_int(c, "rank results");
  l->result.bubble_theory = get_f64(c, "rank results");
  if (!c->bad && l->result.pipeline && !l->crossed)
    fail(c, "rank %d: results of a pipeline rank", r->rank);
  get_op_groups(c, s, &l->result.ops);
  size_t nwarn = get_count(c, 4, "rank results: warnings");
  if ((l->warnings = alloc(c, nwarn, sizeof *l->warnings))) l->nwarnings = nwarn;
  for (size_t i = 0; i < l->nwarnings && !c->bad; i++)
    l->warnings[i] = get_str(c, 0, "rank results: warnings");
  get_span_answers(c, r, &l->result.span_answers);
  if (l->crossed) get_crossed(c, r, l);
}

/* The classification rules the part was loaded with, which must be the merge's (`rules`, NULL:
 * none), in order: they classified every shell's ops and the carried metrics' kernels, and the
 * merge cannot classify again without reading every rank. */
static void get_rules(cursor *c, const ssa_comm_rules *rules) {
  size_t n = get_count(c, 8, "options: rules"), have = rules ? rules->n : 0;
  if (!c->bad && n != have)
    fail(c,
         "made with %zu rule(s) of --comm-kernel/--compute-kernel, the merge has %zu: give "
         "merge the options the partial was made with",
         n, have);
  for (size_t i = 0; i < n && !c->bad; i++) {
    int comm = get_flag(c, "options: rules");
    char *pattern = get_str(c, 0, "options: rules");
    const ssa_comm_rule *mine = &rules->rule[i];
    if (!c->bad && (comm != mine->comm || strcmp(pattern, mine->pattern)))
      fail(c,
           "rule %zu was %s '%s' when the partial was made, the merge's is %s '%s': give merge "
           "the options the partial was made with",
           i + 1, comm ? "--comm-kernel" : "--compute-kernel", pattern,
           mine->comm ? "--comm-kernel" : "--compute-kernel", mine->pattern);
    free(pattern);
  }
}

/* The options the ranks' results were made with (ssa_rank_local_options_equal) and the rules
 * their ops were classified with (the merge's, checked). */
static void get_options(cursor *c, ssa_partial *p, const ssa_comm_rules *rules) {
  ssa_options *o = &p->made_with;
  ssa_options_default(o);
  o->has_step_filter = get_flag(c, "options");
  o->step_first = get_i64(c, "options");
  o->step_last = get_i64(c, "options");
  p->step_range_name = get_str(c, 1, "options");
  o->step_range_name = p->step_range_name;
  o->launch_gap_ns = get_i64(c, "options");
  o->rank = get_int(c, "options");
  if (!c->bad && (o->launch_gap_ns <= 0 || o->rank < -1))
    fail(c, "options: launch gap %lld, rank %d", (long long)o->launch_gap_ns, o->rank);
  get_rules(c, rules);
  o->comm_rules = rules;
}

static void get_header(cursor *c, ssa_partial *p, const ssa_comm_rules *rules) {
  const unsigned char *magic = take(c, 8, "header");
  if (magic && memcmp(magic, SSA_PARTIAL_MAGIC, 8)) {
    fail(c, "not a stepscope partial (no magic)");
    return;
  }
  uint32_t version = get_u32(c, "header");
  if (!c->bad && version != SSA_PARTIAL_VERSION) {
    fail(c, "partial format version %u, this stepscope reads version %u", version,
         SSA_PARTIAL_VERSION);
    return;
  }
  if (!c->bad && get_u32(c, "header") != PARTIAL_SHAPE)
    fail(c, "made by a stepscope with other communication tallies: make it again");
  if (!c->bad && get_u32(c, "header") != PARTIAL_RESULT_SHAPE)
    fail(c, "made by a stepscope with other idle or bubble causes: make it again");
  p->dir = get_str(c, 0, "run directory");
  p->run_id = get_u64(c, "header");
  p->nfiles = get_u64(c, "header");
  p->part_index = get_int(c, "header");
  p->part_count = get_int(c, "header");
  if (!c->bad && (p->part_count < 1 || p->part_index < 0 || p->part_index >= p->part_count ||
                  p->nfiles < (uint64_t)p->part_count))
    fail(c, "part %d of %d over %llu files is no part", p->part_index, p->part_count,
         (unsigned long long)p->nfiles);
  get_options(c, p, rules);
}

int ssa_partial_read(const unsigned char *bytes, size_t n, const ssa_comm_rules *rules,
                     ssa_partial *p, char *why, size_t cap) {
  memset(p, 0, sizeof *p);
  cursor c = {bytes, n, 0, 0, why, cap};
  if (n < 16 || memcmp(bytes + n - 8, PARTIAL_END, 8)) {
    if (n >= 8 && memcmp(bytes, SSA_PARTIAL_MAGIC, 8) == 0)
      fail(&c, "truncated (no end mark): the partial was not written to its end");
    else
      fail(&c, "not a stepscope partial (no magic)");
    return STEPSCOPE_E_FORMAT;
  }
  c.left -= 8;
  get_header(&c, p, rules);
  size_t nwarn = get_count(&c, 4, "warnings");
  if ((p->warnings = alloc(&c, nwarn, sizeof *p->warnings))) p->nwarnings = nwarn;
  for (size_t i = 0; i < p->nwarnings && !c.bad; i++)
    p->warnings[i] = get_str(&c, 0, "warnings");
  size_t nranks = get_count(&c, 200, "ranks");
  p->ranks = alloc(&c, nranks, sizeof *p->ranks);
  p->summaries = alloc(&c, nranks, sizeof *p->summaries);
  p->read_paths = alloc(&c, nranks, sizeof *p->read_paths);
  p->stamps = alloc(&c, nranks, sizeof *p->stamps);
  p->locals = alloc(&c, nranks, sizeof *p->locals);
  if (p->ranks && p->summaries && p->read_paths && p->stamps && p->locals) p->nranks = nranks;
  for (size_t i = 0; i < p->nranks && !c.bad; i++) {
    get_shell(&c, &p->ranks[i], &p->read_paths[i], &p->stamps[i], rules, p->nfiles);
    get_align(&c, &p->ranks[i]);
    get_summary(&c, &p->ranks[i], &p->summaries[i]);
    get_local(&c, &p->ranks[i], &p->summaries[i], &p->locals[i]);
  }
  if (!c.bad && c.left) fail(&c, "%zu bytes after the last rank", c.left);
  if (!c.bad) return 0;
  return c.nomem ? STEPSCOPE_E_NOMEM : STEPSCOPE_E_FORMAT;
}

void ssa_partial_free(ssa_partial *p) {
  free(p->dir);
  ssa_text_list_free(p->warnings, p->nwarnings);
  for (size_t i = 0; i < p->nranks; i++) {
    ssa_rank_free(&p->ranks[i]);
    ssa_rank_summary_free(&p->summaries[i]);
    ssa_rank_local_free(&p->locals[i]);
    free(p->read_paths[i]);
  }
  free(p->locals);
  free(p->step_range_name);
  free(p->ranks);
  free(p->summaries);
  free(p->read_paths);
  free(p->stamps);
  memset(p, 0, sizeof *p);
}

/* A per-record array as put_sparse wrote it: present or not, then its records, strictly
 * increasing and below ncolls, each with a value other than `none`. A rank without records has
 * no array to be present (the writer's dense array of none is absent): refused, so that a read
 * file is the one spelling the writer gives it. */
static void get_sparse(cursor *c, uint64_t ncolls, int64_t none, int *present, ssa_cross_value **v,
                       size_t *n, const char *what) {
  *present = get_flag(c, what);
  if (!*present || c->bad) return;
  if (ncolls == 0) {
    fail(c, "%s: present for a rank without records", what);
    return;
  }
  size_t k = get_count(c, 12, what);
  if ((*v = alloc(c, k, sizeof **v))) *n = k;
  for (size_t i = 0; i < *n && !c->bad; i++) {
    (*v)[i].record = get_u32(c, what);
    (*v)[i].v = get_i64(c, what);
    if (!c->bad && ((*v)[i].record >= ncolls || (i && (*v)[i].record <= (*v)[i - 1].record) ||
                    (*v)[i].v == none))
      fail(c, "%s: record %u out of order or range", what, (*v)[i].record);
  }
}

static void get_cross_rank(cursor *c, const ssa_cross_part *p, ssa_cross_rank_in *x) {
  x->file_index = get_u64(c, "cross rank");
  x->rank = get_int(c, "cross rank");
  x->ncolls = get_kept_count(c, "cross rank: records");
  x->rel_shift = get_i64(c, "cross rank");
  if (!c->bad && (x->file_index >= p->nfiles || x->rank < 0))
    fail(c, "cross rank: file %llu, rank %d", (unsigned long long)x->file_index, x->rank);
  get_sparse(c, x->ncolls, INT64_MIN, &x->has_wait_end, &x->wait_end, &x->nwait_end,
             "cross rank: wait ends");
  get_sparse(c, x->ncolls, -1, &x->has_transfer, &x->transfer, &x->ntransfer,
             "cross rank: transfers");
  size_t n = get_count(c, 16, "cross rank: sends");
  if ((x->sends = alloc(c, n, sizeof *x->sends))) x->nsends = n;
  for (size_t i = 0; i < x->nsends && !c->bad; i++) {
    ssa_partner_send *s = &x->sends[i];
    s->record = get_u32(c, "cross rank: sends");
    s->sender = get_u32(c, "cross rank: sends"); /* a rank index: its hash is the merge's check */
    s->at = get_i64(c, "cross rank: sends");
    if (!c->bad && (s->record >= x->ncolls || (i && s->record <= s[-1].record)))
      fail(c, "cross rank %d: send of record %u out of order or range", x->rank, s->record);
  }
}

int ssa_cross_read(const unsigned char *bytes, size_t n, ssa_cross_part *p, char *why, size_t cap) {
  memset(p, 0, sizeof *p);
  cursor c = {bytes, n, 0, 0, why, cap};
  if (n < 16 || memcmp(bytes + n - 8, CROSS_END, 8) || memcmp(bytes, SSA_CROSS_MAGIC, 8)) {
    fail(&c, n >= 8 && !memcmp(bytes, SSA_CROSS_MAGIC, 8)
                 ? "truncated (no end mark): the cross file was not written to its end"
                 : "not a stepscope cross file (no magic)");
    return STEPSCOPE_E_FORMAT;
  }
  c.left -= 8;
  take(&c, 8, "header");
  uint32_t version = get_u32(&c, "header");
  if (!c.bad && version != SSA_CROSS_VERSION)
    fail(&c, "cross file format version %u, this stepscope reads version %u", version,
         SSA_CROSS_VERSION);
  p->run_id = get_u64(&c, "header");
  p->nfiles = get_u64(&c, "header");
  p->part_index = get_int(&c, "header");
  p->part_count = get_int(&c, "header");
  if (!c.bad && (p->part_count < 1 || p->part_index < 0 || p->part_index >= p->part_count))
    fail(&c, "part %d of %d is no part", p->part_index, p->part_count);
  size_t nranks = get_count(&c, 48, "cross ranks");
  if ((p->ranks = alloc(&c, nranks, sizeof *p->ranks))) p->nranks = nranks;
  for (size_t i = 0; i < p->nranks && !c.bad; i++) {
    get_cross_rank(&c, p, &p->ranks[i]);
    if (!c.bad && i && p->ranks[i].file_index <= p->ranks[i - 1].file_index)
      fail(&c, "cross ranks out of file order");
  }
  if (!c.bad && c.left) fail(&c, "%zu bytes after the last rank", c.left);
  if (!c.bad) return 0;
  return c.nomem ? STEPSCOPE_E_NOMEM : STEPSCOPE_E_FORMAT;
}

void ssa_cross_part_free(ssa_cross_part *p) {
  for (size_t i = 0; p->ranks && i < p->nranks; i++) {
    free(p->ranks[i].wait_end);
    free(p->ranks[i].transfer);
    free(p->ranks[i].sends);
  }
  free(p->ranks);
  memset(p, 0, sizeof *p);
}

/* A sparse array as a dense one of n, `none` where it holds nothing (*out NULL: absent). */
static int densify(int present, const ssa_cross_value *v, size_t nv, size_t n, int64_t none,
                   int64_t **out) {
  *out = NULL;
  if (!present || n == 0) return 0;
  if (!(*out = malloc(n * sizeof **out))) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < n; i++)
    (*out)[i] = none;
  for (size_t i = 0; i < nv; i++)
    (*out)[v[i].record] = v[i].v;
  return 0;
}

int ssa_cross_densify(const ssa_cross_rank_in *in, ssa_rank_cross *out) {
  memset(out, 0, sizeof *out);
  *out = (ssa_rank_cross){.made = 1, .ncolls = (size_t)in->ncolls, .rel_shift = in->rel_shift};
  int rc = densify(in->has_wait_end, in->wait_end, in->nwait_end, out->ncolls, INT64_MIN,
                   &out->wait_end);
  if (rc == 0)
    rc = densify(in->has_transfer, in->transfer, in->ntransfer, out->ncolls, -1, &out->transfer);
  if (rc == 0 && in->nsends && !(out->sends = malloc(in->nsends * sizeof *out->sends)))
    rc = STEPSCOPE_E_NOMEM;
  if (rc == 0 && in->nsends) {
    memcpy(out->sends, in->sends, in->nsends * sizeof *out->sends);
    out->nsends = in->nsends;
  }
  return rc;
}
