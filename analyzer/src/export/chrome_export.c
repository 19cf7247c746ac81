/*
 * chrome_export.c — `stepscope export`: the run as Chrome Trace Event JSON
 * (SPEC §5) for Perfetto and the bundled viewer, written as a stream through
 * ssa_out (never the whole document in memory).
 *
 * Layout of the file:
 *   {"traceEvents":[ metadata events, then per rank: host ranges, host API
 *   calls, device ops, launch->op flows, derived slices, counters ],
 *    "displayTimeUnit":"ns", "metadata":{"stepscope":{...}}}
 * - pid = rank + 1 (never 0), named "rank R (host, GPU d)" with
 *   process_sort_index R; every lane (GPU/CPU stream, host thread) and each
 *   derived track gets its own tid, unique in the whole file, named
 *   ("stream 7 (compute)", "thread 1234", "exposed comm"...).
 * - ts/dur in microseconds "%.3f" relative to the run origin after clock
 *   alignment (the JSON report's origin), so nanoseconds survive.
 * - device ops carry args.category in {compute, comm, memcpy, memset} and
 *   their ids (correlation, collective comm/seq/op, bytes); host events
 *   carry "host"; derived slices carry "derived". `cat` is the same, with a
 *   second, comma-separated category (Chrome's convention) for the phases of
 *   expert parallelism: "comm,all_to_all" on all-to-all collectives and on
 *   communication kernels named as all-to-all/dispatch/combine (DeepEP),
 *   "host,moe_dispatch" / "host,moe_combine" on the trainer's dispatch and
 *   combine ranges.
 * - events of one tid are emitted by start time, longer first, so parents
 *   come before children; slices on one tid nest: one that overlaps a slice
 *   without nesting in it goes to an extra lane of its track (ssa_lanes.h),
 *   a tid of its own named "stream 7 (compute) (lane 2)", numbered after
 *   every rank's own tids and named where first used.
 * - flows: "s" on the launch call, "f" (binding point "e") on the op, with
 *   id = rank * 2^36 + op index + 1 (namespaced per rank).
 * - derived tracks over the analysed window: "exposed comm" (comm not under
 *   compute), "idle" (no activity), "bubble" (pipeline ranks only: no compute
 *   and no non-pipeline comm), "steps" (the step windows).
 * - a "critical path" track per rank, after everything else (tids past every other): the
 *   pieces of the steps' critical paths on that rank (docs/metrics.md "Critical path").
 * - with export --replay, last, a process per rank "replay: EDITS (rank R)" (pids past every
 *   rank's) with a track per lane: the rank's ops at their replayed times (replay_slices.c),
 *   category "derived", args kind and shift_ns (replayed - traced start).
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_expert_tags.h"
#include "ssa_lanes.h"
#include "ssa_track_names.h"
#include "ssa_export.h"
#include "critical_path.h"
#include "sc_try.h"

typedef struct exporter {
  const ssa_analysis *a;
  ssa_out *o;
  uint64_t events;
  int first;
  long next_extra_tid; /* tids of extra lanes (ssa_lanes.h) */
} exporter;

static void begin_event(exporter *x) {
  if (!x->first) ssa_out_str(x->o, ",\n");
  x->first = 0;
  x->events++;
}

static void meta_event(exporter *x, const char *what, int pid, long tid, const char *name,
                       int64_t sort_index) {
  ssa_out *o = x->o;
  begin_event(x);
  ssa_out_printf(o, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%ld,\"name\":\"%s\",\"args\":{", pid, tid,
                 what);
  if (name) {
    ssa_out_str(o, "\"name\":");
    ssa_out_json_string(o, name);
  } else {
    ssa_out_str(o, "\"sort_index\":");
    ssa_out_i64(o, sort_index);
  }
  ssa_out_str(o, "}}");
}

static void x_head(exporter *x, int pid, long tid, int64_t ts, int64_t dur) {
  ssa_out *o = x->o;
  begin_event(x);
  ssa_out_str(o, "{\"ph\":\"X\",\"pid\":");
  ssa_out_i64(o, pid);
  ssa_out_str(o, ",\"tid\":");
  ssa_out_i64(o, tid);
  ssa_out_str(o, ",\"ts\":");
  ssa_out_us(o, ts);
  ssa_out_str(o, ",\"dur\":");
  ssa_out_us(o, dur);
}

static const char *cls_name(uint8_t cls) {
  switch (cls) {
  case SSA_CLS_COMM: return "comm";
  case SSA_CLS_MEMCPY: return "memcpy";
  case SSA_CLS_MEMSET: return "memset";
  default: return "compute";
  }
}

/* ",all_to_all"... for a second category (ssa_expert_tags.h), "" for none */
static const char *second_cat(char *buf, size_t n, ssa_expert_tag t) {
  if (t == SSA_EXPERT_NONE) return "";
  snprintf(buf, n, ",%s", ssa_expert_tag_name(t));
  return buf;
}

typedef struct derived_ctx {
  exporter *x;
  const ssa_rank *r;
  int pid;
  long tid_exposed, tid_idle, tid_bubble;
  int pipeline;
  int64_t open_s[3], open_e[3]; /* pending slice per track, merged when contiguous */
} derived_ctx;

static void flush_derived(derived_ctx *d, int k) {
  static const char *const names[3] = {"exposed comm", "idle", "bubble"};
  long tids[3] = {d->tid_exposed, d->tid_idle, d->tid_bubble};
  if (d->open_e[k] <= d->open_s[k]) return;
  const ssa_run *run = d->x->a->run;
  x_head(d->x, d->pid, tids[k], ssa_rel_time(run, d->r, d->open_s[k]), d->open_e[k] - d->open_s[k]);
  ssa_out_printf(d->x->o,
                 ",\"name\":\"%s\",\"cat\":\"derived\",\"args\":{\"category\":\"derived\"}}",
                 names[k]);
  d->open_s[k] = d->open_e[k] = 0;
}

static void on_segment(void *ctx, int64_t s, int64_t e, unsigned mask) {
  derived_ctx *d = ctx;
  int on[3] = {(mask & 2) && !(mask & 1), !(mask & 7), d->pipeline && !(mask & 9)};
  for (int k = 0; k < 3; k++) {
    if (!on[k]) continue;
    if (d->open_e[k] > d->open_s[k] && d->open_e[k] == s) {
      d->open_e[k] = e;
    } else {
      flush_derived(d, k);
      d->open_s[k] = s;
      d->open_e[k] = e;
    }
  }
}

/* The tids of a rank's lanes and their extra lanes (ssa_lanes.h): lane l is
 * tid_base + l + 1; its extra lane k gets a tid from the exporter's counter
 * of tids after every rank's own, named when first used. */
typedef struct rank_tracks {
  exporter *x;
  const ssa_rank *r;
  int pid;
  long tid_base;
  ssa_lanes *lanes; /* one per rank lane */
  long **extra;     /* per rank lane: tids of lanes 1.. */
  uint32_t *nextra;
  /* API calls placed on extra lanes (rare), in index order: their flows
   * start there */
  size_t *moved_api;
  long *moved_tid;
  size_t nmoved, moved_cap;
  int failed;
} rank_tracks;

static void note_moved_api(rank_tracks *t, size_t api, long tid) {
  if (t->nmoved == t->moved_cap) {
    size_t cap = t->moved_cap ? t->moved_cap * 2 : 16;
    size_t *a = realloc(t->moved_api, cap * sizeof *a);
    if (!a) {
      t->failed = 1;
      return;
    }
    t->moved_api = a;
    long *b = realloc(t->moved_tid, cap * sizeof *b);
    if (!b) {
      t->failed = 1;
      return;
    }
    t->moved_tid = b;
    t->moved_cap = cap;
  }
  t->moved_api[t->nmoved] = api;
  t->moved_tid[t->nmoved++] = tid;
}

/* The tid an API call was placed on. */
static long api_tid(const rank_tracks *t, size_t api) {
  size_t lo = 0, hi = t->nmoved;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->moved_api[mid] < api)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < t->nmoved && t->moved_api[lo] == api) return t->moved_tid[lo];
  return t->tid_base + t->r->apis[api].lane + 1;
}

static long slice_tid(rank_tracks *t, const ssa_slice *sl) {
  int k = ssa_lanes_place(&t->lanes[sl->lane], sl->start, sl->end);
  if (k <= 0) {
    if (k < 0) t->failed = 1;
    return t->tid_base + sl->lane + 1;
  }
  uint32_t idx = (uint32_t)k - 1;
  if (idx >= t->nextra[sl->lane]) { /* a new extra lane: name it first */
    long *n = realloc(t->extra[sl->lane], (idx + 1) * sizeof *n);
    if (!n) {
      t->failed = 1;
      return t->tid_base + sl->lane + 1;
    }
    t->extra[sl->lane] = n;
    exporter *x = t->x;
    n[idx] = x->next_extra_tid++;
    t->nextra[sl->lane] = idx + 1;
    char label[512], named[600];
    const ssa_lane *lane = &t->r->lanes[sl->lane];
    ssa_lane_label(t->r, lane, label, sizeof label);
    snprintf(named, sizeof named, "%s (lane %d)", label, k + 1);
    meta_event(x, "thread_name", t->pid, n[idx], named, 0);
    meta_event(x, "thread_sort_index", t->pid, n[idx], NULL,
               (lane->kind == SSA_LANE_HOST ? 2000 : 0) + (int64_t)sl->lane * 64 + k);
  }
  return t->extra[sl->lane][idx];
}

/* The derived tracks of a rank: exposed communication, idle time by cause and the pipeline
 * bubble (the analysis' coverage pass again, streamed), then one slice per step. */
static void export_derived_tracks(exporter *x, const ssa_rank_result *rr, int pid,
                                  long tid_derived) {
  const ssa_run *run = x->a->run;
  const ssa_rank *r = rr->rank;
  ssa_out *o = x->o;
  derived_ctx d = {.x = x,
                   .r = r,
                   .pid = pid,
                   .tid_exposed = tid_derived,
                   .tid_idle = tid_derived + 1,
                   .tid_bubble = tid_derived + 2,
                   .pipeline = rr->pipeline};
  ssa_cover_replay(rr, on_segment, &d); /* the analysis' coverage pass again, streamed */
  for (int k = 0; k < 3; k++)
    flush_derived(&d, k);
  for (size_t s = 0; s < rr->nsteps; s++) {
    const ssa_window *w = &rr->windows[s];
    x_head(x, pid, tid_derived + 3, ssa_rel_time(run, r, w->start), w->end - w->start);
    ssa_out_str(o, ",\"name\":\"step ");
    ssa_out_i64(o, w->step);
    ssa_out_str(o, "\",\"cat\":\"derived\",\"args\":{\"category\":\"derived\",\"step\":");
    ssa_out_i64(o, w->step);
    ssa_out_str(o, "}}");
  }
}

/* A rank's counter records as counter events. */
static void export_counters(exporter *x, const ssa_rank *r, int pid) {
  const ssa_run *run = x->a->run;
  ssa_out *o = x->o;
  for (size_t i = 0; i < r->ncounters; i++) {
    const ssa_counter *c = &r->counters[i];
    begin_event(x);
    ssa_out_printf(o, "{\"ph\":\"C\",\"pid\":%d,\"ts\":", pid);
    ssa_out_us(o, ssa_rel_time(run, r, c->time));
    ssa_out_str(o, ",\"name\":");
    ssa_out_json_string(o, ssa_rank_str(r, c->name));
    ssa_out_str(o, ",\"cat\":\"counter\",\"args\":{\"value\":");
    ssa_out_double(o, c->value);
    ssa_out_str(o, "}}");
  }
}

static void export_rank(exporter *x, const ssa_rank_result *rr, long tid_base) {
  const ssa_analysis *a = x->a;
  const ssa_run *run = a->run;
  const ssa_rank *r = rr->rank;
  ssa_out *o = x->o;
  int pid = r->rank + 1;
  long tid_derived = tid_base + (long)r->nlanes + 1;
  rank_tracks t = {.x = x, .r = r, .pid = pid, .tid_base = tid_base};
  uint32_t nl = r->nlanes ? r->nlanes : 1;
  t.lanes = calloc(nl, sizeof *t.lanes);
  t.extra = calloc(nl, sizeof *t.extra);
  t.nextra = calloc(nl, sizeof *t.nextra);
  if (!t.lanes || !t.extra || !t.nextra) t.failed = 1;
  for (uint32_t l = 0; t.lanes && l < r->nlanes; l++)
    ssa_lanes_init(&t.lanes[l]);
  /* host ranges, host API calls and device ops in start order, each on its
   * lane's tid or, where it overlaps a slice without nesting, on an extra one */
  uint64_t flow_base = ((uint64_t)(uint32_t)r->rank << 36);
  ssa_slice_iter it;
  ssa_slice sl;
  ssa_slice_iter_init(&it, r);
  while (!t.failed && ssa_slice_next(&it, &sl)) {
    long tid = slice_tid(&t, &sl);
    if (sl.kind == SSA_SLICE_RANGE) {
      const ssa_range *g = &r->ranges[sl.index];
      x_head(x, pid, tid, ssa_rel_time(run, r, g->start), g->end - g->start);
      ssa_out_str(o, ",\"name\":");
      ssa_out_json_string(o, ssa_rank_str(r, g->name));
      char tag[32];
      ssa_out_printf(o, ",\"cat\":\"host%s\",\"args\":{\"category\":\"host\",\"domain\":",
                     second_cat(tag, sizeof tag, ssa_range_expert_tag(ssa_rank_str(r, g->name))));
      ssa_out_json_string(o, ssa_rank_str(r, g->domain));
      if (g->payload_kind) {
        ssa_out_str(o, ",\"payload\":");
        ssa_out_u64(o, g->payload);
      }
      if (g->args) {
        ssa_out_str(o, ",\"info\":");
        ssa_out_json_string(o, ssa_rank_str(r, g->args));
      }
      ssa_out_str(o, "}}");
      continue;
    }
    if (sl.kind == SSA_SLICE_API) {
      const ssa_api *p = &r->apis[sl.index];
      if (tid != tid_base + p->lane + 1) note_moved_api(&t, sl.index, tid);
      x_head(x, pid, tid, ssa_rel_time(run, r, p->start), p->end - p->start);
      ssa_out_str(o, ",\"name\":");
      ssa_out_json_string(o, p->name ? ssa_rank_str(r, p->name) : "api");
      ssa_out_str(o, ",\"cat\":\"host\",\"args\":{\"category\":\"host\",\"correlation\":");
      ssa_out_u64(o, p->corr);
      ssa_out_str(o, "}}");
      continue;
    }
    size_t i = sl.index;
    const ssa_op *p = &r->ops[i];
    const char *cat = cls_name(p->cls);
    int64_t ts = ssa_rel_time(run, r, p->start);
    x_head(x, pid, tid, ts, p->end - p->start);
    ssa_out_str(o, ",\"name\":");
    ssa_out_json_string(o, ssa_op_slice_name(r, p));
    char tag[32];
    ssa_out_printf(o, ",\"cat\":\"%s%s\",\"args\":{\"category\":\"%s\",\"correlation\":", cat,
                   second_cat(tag, sizeof tag, ssa_op_expert_tag(r, p)), cat);
    ssa_out_u64(o, p->corr);
    if (p->bytes) {
      ssa_out_str(o, ",\"bytes\":");
      ssa_out_u64(o, p->bytes);
    }
    if (p->coll != SSA_NONE) {
      const ssa_coll *c = &r->colls[p->coll];
      ssa_out_printf(o,
                     ",\"collective\":\"%s\",\"comm_id\":\"%016llx\",\"seq\":%llu,\"coll_bytes\":%"
                     "llu,\"group\":",
                     stepscope_collective_op_name(c->op), (unsigned long long)c->comm_id,
                     (unsigned long long)c->seq, (unsigned long long)c->bytes);
      ssa_out_json_string(o, ssa_rank_str(r, c->name));
    }
    ssa_out_str(o, "}}");
    if (p->launch != SSA_NONE) {
      /* on the tid where its launch call was placed (placed already when it
       * starts no later than the op, as launches do) */
      const ssa_api *l = &r->apis[p->launch];
      uint64_t id = flow_base + i + 1;
      begin_event(x);
      ssa_out_printf(o, "{\"ph\":\"s\",\"pid\":%d,\"tid\":%ld,\"ts\":", pid,
                     api_tid(&t, p->launch));
      ssa_out_us(o, ssa_rel_time(run, r, l->start));
      ssa_out_str(o, ",\"id\":");
      ssa_out_u64(o, id);
      ssa_out_str(o, ",\"name\":\"launch\",\"cat\":\"launch\"}");
      begin_event(x);
      ssa_out_printf(o, "{\"ph\":\"f\",\"bp\":\"e\",\"pid\":%d,\"tid\":%ld,\"ts\":", pid, tid);
      ssa_out_us(o, ts);
      ssa_out_str(o, ",\"id\":");
      ssa_out_u64(o, id);
      ssa_out_str(o, ",\"name\":\"launch\",\"cat\":\"launch\"}");
    }
  }
  if (t.failed && !o->error) o->error = STEPSCOPE_E_NOMEM; /* the partial file is removed */
  for (uint32_t l = 0; t.lanes && l < r->nlanes; l++)
    ssa_lanes_free(&t.lanes[l]);
  for (uint32_t l = 0; t.extra && l < r->nlanes; l++)
    free(t.extra[l]);
  free(t.lanes);
  free(t.extra);
  free(t.nextra);
  free(t.moved_api);
  free(t.moved_tid);
  export_derived_tracks(x, rr, pid, tid_derived);
  export_counters(x, r, pid);
}

typedef struct path_track {
  exporter *x;
  int pid;
  long tid;
} path_track;

static void path_piece(void *ctx, const ssa_cp_segment *s, int64_t step, int64_t from, int64_t to) {
  path_track *p = ctx;
  char label[64];
  x_head(p->x, p->pid, p->tid, from, to - from);
  ssa_out_str(p->x->o, ",\"name\":");
  ssa_out_json_string(p->x->o, ssa_cp_segment_label(p->x->a, s, label, sizeof label));
  ssa_out_printf(p->x->o,
                 ",\"cat\":\"derived\",\"args\":{\"category\":\"derived\",\"kind\":\"%s\","
                 "\"step\":%lld}}",
                 ssa_cp_kind_names[s->kind], (long long)step);
}

/* The critical path's track on every selected rank that it crosses. */
static int export_critical_path(exporter *x) {
  const ssa_analysis *a = x->a;
  if (!a->critical_path) return 0;
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank *r = a->ranks[i].rank;
    if (!ssa_export_selects(a, i)) continue;
    path_track p = {x, r->rank + 1, x->next_extra_tid++};
    meta_event(x, "thread_name", p.pid, p.tid, "critical path", 0);
    meta_event(x, "thread_sort_index", p.pid, p.tid, NULL, 1004);
    SC_TRY(ssa_cp_track(a->critical_path, (uint32_t)i, path_piece, &p));
  }
  return 0;
}

/* The tid of sub-lane k of a replay lane, named when first used. */
static long replay_tid(exporter *x, int pid, const ssa_rank *r, uint32_t lane, long **tids,
                       uint32_t *ntids, uint32_t k) {
  if (k >= *ntids) {
    long *n = realloc(*tids, (k + 1) * sizeof *n);
    if (!n) return -1;
    *tids = n;
    for (; *ntids <= k; (*ntids)++) {
      char label[512], named[600];
      ssa_lane_label(r, &r->lanes[lane], label, sizeof label);
      if (*ntids) snprintf(named, sizeof named, "%s (lane %u)", label, *ntids + 1);
      n[*ntids] = x->next_extra_tid++;
      meta_event(x, "thread_name", pid, n[*ntids], *ntids ? named : label, 0);
      meta_event(x, "thread_sort_index", pid, n[*ntids], NULL, (int64_t)lane * 64 + *ntids);
    }
  }
  return (*tids)[k];
}

/* export --replay: per written rank a process with its ops at their replayed times, one
 * track per lane (extra lanes where replayed ops overlap without nesting). */
static int export_replay(exporter *x) {
  const ssa_analysis *a = x->a;
  for (size_t i = 0; a->opt.export_replay && i < a->nranks; i++) {
    const ssa_rank *r = a->ranks[i].rank;
    ssa_replay_slice *v;
    size_t n;
    if (!ssa_export_selects(a, i)) continue;
    if (ssa_replay_slices(a, i, &v, &n)) return -1;
    int pid = ssa_replay_pid(a, r), failed = 0;
    char label[600];
    ssa_replay_process_label(a, r, label, sizeof label);
    meta_event(x, "process_name", pid, 0, label, 0);
    meta_event(x, "process_sort_index", pid, 0, NULL, pid);
    for (size_t b = 0, e; b < n && !failed; b = e) {
      uint32_t lane = r->ops[v[b].op].lane, ntids = 0;
      long *tids = NULL;
      ssa_lanes lanes;
      ssa_lanes_init(&lanes);
      for (e = b; e < n && r->ops[v[e].op].lane == lane && !failed; e++) {
        int k = ssa_lanes_place(&lanes, v[e].start, v[e].end);
        long tid = k < 0 ? -1 : replay_tid(x, pid, r, lane, &tids, &ntids, (uint32_t)k);
        if (tid < 0) {
          failed = 1;
          break;
        }
        const ssa_op *o = &r->ops[v[e].op];
        x_head(x, pid, tid, ssa_rel_time(a->run, r, v[e].start), v[e].end - v[e].start);
        ssa_out_str(x->o, ",\"name\":");
        ssa_out_json_string(x->o, ssa_op_slice_name(r, o));
        ssa_out_printf(x->o,
                       ",\"cat\":\"derived\",\"args\":{\"category\":\"derived\",\"kind\":\"%s\","
                       "\"shift_ns\":",
                       cls_name(o->cls));
        ssa_out_i64(x->o, v[e].start - o->start);
        ssa_out_str(x->o, "}}");
      }
      ssa_lanes_free(&lanes);
      free(tids);
    }
    free(v);
    if (failed) return -1;
  }
  return 0;
}

int ssa_export_chrome(const ssa_analysis *a, const char *path, ssa_export_stats *stats,
                      stepscope_error *err) {
  ssa_out o;
  int rc = ssa_out_open(&o, path);
  if (rc) {
    if (err) {
      err->code = rc;
      snprintf(err->message, sizeof err->message, "%s", o.why);
    }
    return rc;
  }
  exporter x = {a, &o, 0, 1, 0};
  ssa_out_str(&o, "{\"traceEvents\":[\n");
  long *tid_base = calloc(a->nranks ? a->nranks : 1, sizeof *tid_base);
  if (!tid_base) {
    o.error = STEPSCOPE_E_NOMEM; /* the partial file is removed, not renamed into place */
    ssa_out_close(&o);
    return STEPSCOPE_E_NOMEM;
  }
  long next_tid = 1;
  for (size_t i = 0; i < a->nranks; i++) {
    tid_base[i] = next_tid - 1;
    next_tid += (long)a->ranks[i].rank->nlanes + 4;
  }
  x.next_extra_tid = next_tid;
  /* metadata first */
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    const ssa_rank *r = rr->rank;
    if (!ssa_export_selects(a, i)) continue;
    int pid = r->rank + 1;
    char label[512];
    ssa_rank_track_label(r, label, sizeof label);
    meta_event(&x, "process_name", pid, 0, label, 0);
    meta_event(&x, "process_sort_index", pid, 0, NULL, r->rank);
    for (uint32_t l = 0; l < r->nlanes; l++) {
      ssa_lane_label(r, &r->lanes[l], label, sizeof label);
      long tid = tid_base[i] + l + 1;
      meta_event(&x, "thread_name", pid, tid, label, 0);
      /* device streams first, then derived tracks, then host threads */
      meta_event(&x, "thread_sort_index", pid, tid, NULL,
                 r->lanes[l].kind == SSA_LANE_HOST ? 2000 + l : l);
    }
    static const char *const dn[4] = {"exposed comm", "idle", "bubble", "steps"};
    for (int k = 0; k < 4; k++) {
      long tid = tid_base[i] + (long)r->nlanes + 1 + k;
      meta_event(&x, "thread_name", pid, tid, dn[k], 0);
      meta_event(&x, "thread_sort_index", pid, tid, NULL, 1000 + k);
    }
  }
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    if (!ssa_export_selects(a, i)) continue;
    export_rank(&x, rr, tid_base[i]);
  }
  free(tid_base);
  if (export_critical_path(&x) != 0 || export_replay(&x) != 0) o.error = STEPSCOPE_E_NOMEM;
  ssa_out_str(&o, "\n],\"displayTimeUnit\":\"ns\",\"metadata\":{\"stepscope\":{\"exporter\":"
                  "\"stepscope export " STEPSCOPE_VERSION_STRING "\",\"origin_ns\":");
  ssa_out_i64(&o, a->run->origin);
  ssa_out_str(&o, ",\"ranks\":[");
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank *r = a->ranks[i].rank;
    ssa_out_printf(&o, "%s{\"rank\":%d,\"pid\":%d,\"offset_ns\":", i ? "," : "", r->rank,
                   r->rank + 1);
    ssa_out_i64(&o, r->offset_ns - a->ranks[0].rank->offset_ns);
    ssa_out_char(&o, '}');
  }
  ssa_out_str(&o, "]}}}\n");
  ssa_out_flush(&o);
  uint64_t bytes = o.bytes;
  rc = ssa_out_close(&o);
  if (stats) {
    stats->events = x.events;
    stats->bytes = bytes;
  }
  if (rc && err) {
    err->code = rc;
    snprintf(err->message, sizeof err->message, "%s", o.why);
  }
  return rc;
}
