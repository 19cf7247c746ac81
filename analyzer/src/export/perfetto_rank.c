/*
 * perfetto_rank.c — one rank in the Perfetto export (perfetto_export.c describes the layout):
 * its process track, a track per GPU/CPU stream and a thread track per host thread holding its
 * host ranges, API calls and ops (launch flows from call to op, collective flows through the
 * instance's members), extra tracks "... (lane N)" for slices that overlap without nesting
 * (ssa_lanes.h), the derived tracks "exposed comm", "idle", "bubble" and "steps", and its
 * counters with the "overlap ratio" of each step; and, with export --replay, its replay
 * process: its ops at their replayed times, a track per lane (replay_slices.c).
 */
#include <stdlib.h>
#include <string.h>

#include "perfetto_writer.h"
#include "ssa_expert_tags.h"
#include "ssa_lanes.h"
#include "ssa_track_names.h"

/* ---- a stream's or host thread's track, and its extra lanes ---- */
typedef struct lane_out {
  pf_writer *w;
  pf_seq seq;
  ssa_lanes lanes;
  uint64_t *extra; /* track uuids of the extra lanes */
  uint32_t nextra;
  uint64_t process;
  const ssa_rank *r;
  uint32_t lane;
  char label[256];
} lane_out;

static uint64_t sub_track(lane_out *lo, uint32_t sub) {
  return sub == 0 ? lo->seq.track : lo->extra[sub - 1];
}

static void on_close(void *ctx, uint32_t sub, int64_t end) {
  lane_out *lo = ctx;
  pf_writer *w = lo->w;
  pf_event_prepare(w, &lo->seq);
  pf_event_open(w, &lo->seq, ssa_rel_time(w->a->run, lo->r, end), TYPE_END);
  if (sub) pb_uint(&w->b, TE_TRACK_UUID, sub_track(lo, sub));
  pf_event_close(w);
}

/* Places a slice; returns its lane (0: the track itself) after describing a
 * new extra lane. */
static uint32_t place(lane_out *lo, int64_t s, int64_t e) {
  pf_writer *w = lo->w;
  int k = ssa_lanes_place(&lo->lanes, s, e);
  if (k < 0) {
    w->failed = 1;
    return 0;
  }
  if (k > 0 && (uint32_t)k > lo->nextra) {
    uint64_t *n = realloc(lo->extra, (size_t)k * sizeof *n);
    if (!n) {
      w->failed = 1;
      return 0;
    }
    lo->extra = n;
    char name[300];
    snprintf(name, sizeof name, "%s (lane %d)", lo->label, k + 1);
    int host = lo->r->lanes[lo->lane].kind == SSA_LANE_HOST;
    lo->extra[k - 1] =
        pf_named_track(w, lo->process, name, (host ? 2000 : 0) + (int64_t)lo->lane * 64 + k, -1);
    lo->nextra = (uint32_t)k;
  }
  return (uint32_t)k;
}

/* derived tracks, fed by the coverage pass and the idle gaps */
enum { D_EXPOSED, D_IDLE, D_BUBBLE, D_STEPS, D_N };
typedef struct derived_out {
  pf_writer *w;
  const ssa_rank *r;
  pf_seq seq[D_N];
  int pipeline;
  int64_t open_s[D_N], open_e[D_N];
  uint32_t open_name[D_N];
} derived_out;

static void derived_slice(derived_out *d, int k, int64_t s, int64_t e, uint32_t name) {
  pf_writer *w = d->w;
  const ssa_run *run = w->a->run;
  pf_seq *q = &d->seq[k];
  pf_event_prepare(w, q);
  uint64_t cat = pf_intern(w, q, SP_CATEGORY, SRC_CONST, K_DERIVED, NULL);
  uint64_t nm = pf_intern(w, q, SP_NAME, SRC_CONST, name, NULL);
  pf_event_open(w, q, ssa_rel_time(run, d->r, s), TYPE_BEGIN);
  pb_uint(&w->b, TE_NAME_IID, nm);
  pb_uint(&w->b, TE_CATEGORY_IIDS, cat);
  pf_event_close(w);
  pf_event_prepare(w, q);
  pf_event_open(w, q, ssa_rel_time(run, d->r, e), TYPE_END);
  pf_event_close(w);
  w->slices++;
}

static void flush_derived(derived_out *d, int k) {
  if (d->open_e[k] > d->open_s[k]) derived_slice(d, k, d->open_s[k], d->open_e[k], d->open_name[k]);
  d->open_s[k] = d->open_e[k] = 0;
}

/* a piece of track k named `name`: merged with the open one when contiguous */
static void derived_piece(derived_out *d, int k, int64_t s, int64_t e, uint32_t name) {
  if (d->open_e[k] > d->open_s[k] && d->open_e[k] == s && d->open_name[k] == name) {
    d->open_e[k] = e;
    return;
  }
  flush_derived(d, k);
  d->open_s[k] = s;
  d->open_e[k] = e;
  d->open_name[k] = name;
}

static void on_segment(void *ctx, int64_t s, int64_t e, unsigned mask) {
  derived_out *d = ctx;
  if ((mask & 2) && !(mask & 1)) derived_piece(d, D_EXPOSED, s, e, K_EXPOSED);
  if (d->pipeline && !(mask & 9)) derived_piece(d, D_BUBBLE, s, e, K_BUBBLE);
}

static void on_idle(void *ctx, int64_t s, int64_t e, uint32_t cause) {
  derived_out *d = ctx;
  derived_piece(d, D_IDLE, s, e, K_IDLE_CAUSE0 + cause);
}

/* The ops each API call launched, as lists (CSR) by call index. */
typedef struct launch_lists {
  uint32_t *first; /* napis + 1 */
  uint32_t *ops;
} launch_lists;

static int build_launch_lists(const ssa_rank *r, launch_lists *ll) {
  ll->first = calloc(r->napis + 1, sizeof *ll->first);
  if (!ll->first) return STEPSCOPE_E_NOMEM;
  size_t n = 0;
  for (size_t i = 0; i < r->nops; i++)
    if (r->ops[i].launch != SSA_NONE && r->ops[i].launch < r->napis)
      ll->first[r->ops[i].launch + 1]++, n++;
  for (size_t i = 0; i < r->napis; i++)
    ll->first[i + 1] += ll->first[i];
  ll->ops = malloc((n ? n : 1) * sizeof *ll->ops);
  uint32_t *fill = malloc((r->napis ? r->napis : 1) * sizeof *fill);
  if (!ll->ops || !fill) {
    free(fill);
    return STEPSCOPE_E_NOMEM;
  }
  memcpy(fill, ll->first, r->napis * sizeof *fill);
  for (size_t i = 0; i < r->nops; i++)
    if (r->ops[i].launch != SSA_NONE && r->ops[i].launch < r->napis)
      ll->ops[fill[r->ops[i].launch]++] = (uint32_t)i;
  free(fill);
  return 0;
}

/* The interned id of a second category (ssa_expert_tags.h: the JSON
 * export's "comm,all_to_all", "host,moe_dispatch"...), 0 for none. */
static uint64_t second_category(pf_writer *w, pf_seq *q, ssa_expert_tag t) {
  if (t == SSA_EXPERT_NONE) return 0;
  return pf_intern(w, q, SP_CATEGORY, SRC_CONST,
                   K_ALL_TO_ALL + (uint32_t)(t - SSA_EXPERT_ALL_TO_ALL), NULL);
}

/* An op's interned name: its own, or memcpy, memset, op (ssa_op_slice_name). */
static uint64_t op_name(pf_writer *w, pf_seq *q, const ssa_rank *r, const ssa_op *p) {
  if (p->name && ssa_rank_str(r, p->name)[0]) return pf_intern(w, q, SP_NAME, SRC_RANK, p->name, r);
  return pf_intern(w, q, SP_NAME, SRC_CONST,
                   p->kind == SSA_OP_MEMCPY   ? K_MEMCPY
                   : p->kind == SSA_OP_MEMSET ? K_MEMSET
                                              : K_OP,
                   NULL);
}

static void write_slice(pf_writer *w, lane_out *lo, const ssa_slice *sl, const launch_lists *ll,
                        uint64_t flow_base) {
  const ssa_rank *r = lo->r;
  const ssa_run *run = w->a->run;
  pf_seq *q = &lo->seq;
  pb_buf *b = &w->b;
  uint32_t sub = place(lo, sl->start, sl->end);
  pf_event_prepare(w, q);
  if (sl->kind == SSA_SLICE_RANGE) {
    const ssa_range *g = &r->ranges[sl->index];
    uint64_t nm = pf_intern(w, q, SP_NAME, SRC_RANK, g->name, r);
    uint64_t cat = pf_intern(w, q, SP_CATEGORY, SRC_CONST, K_HOST, NULL);
    uint64_t cat2 = second_category(w, q, ssa_range_expert_tag(ssa_rank_str(r, g->name)));
    /* an empty domain (Kineto ranges have none) is left out */
    int has_domain = ssa_rank_str(r, g->domain)[0] != 0;
    uint64_t dn = has_domain ? pf_intern(w, q, SP_DEBUG, SRC_CONST, K_DOMAIN, NULL) : 0;
    uint64_t dv = has_domain ? pf_intern(w, q, SP_STRING, SRC_RANK, g->domain, r) : 0;
    uint64_t pn = g->payload_kind ? pf_intern(w, q, SP_DEBUG, SRC_CONST, K_PAYLOAD, NULL) : 0;
    uint64_t in = g->args ? pf_intern(w, q, SP_DEBUG, SRC_CONST, K_INFO, NULL) : 0;
    uint64_t iv = g->args ? pf_intern(w, q, SP_STRING, SRC_RANK, g->args, r) : 0;
    pf_event_open(w, q, ssa_rel_time(run, r, g->start), TYPE_BEGIN);
    if (sub) pb_uint(b, TE_TRACK_UUID, sub_track(lo, sub));
    pb_uint(b, TE_NAME_IID, nm);
    pb_uint(b, TE_CATEGORY_IIDS, cat);
    if (cat2) pb_uint(b, TE_CATEGORY_IIDS, cat2);
    if (has_domain) pf_debug_string(b, dn, dv);
    if (g->payload_kind) pf_debug_uint(b, pn, g->payload);
    if (g->args) pf_debug_string(b, in, iv);
    pf_event_close(w);
  } else if (sl->kind == SSA_SLICE_API) {
    const ssa_api *p = &r->apis[sl->index];
    uint64_t nm = p->name ? pf_intern(w, q, SP_NAME, SRC_RANK, p->name, r)
                          : pf_intern(w, q, SP_NAME, SRC_CONST, K_API, NULL);
    uint64_t cat = pf_intern(w, q, SP_CATEGORY, SRC_CONST, K_HOST, NULL);
    pf_event_open(w, q, ssa_rel_time(run, r, p->start), TYPE_BEGIN);
    if (sub) pb_uint(b, TE_TRACK_UUID, sub_track(lo, sub));
    pb_uint(b, TE_NAME_IID, nm);
    pb_uint(b, TE_CATEGORY_IIDS, cat);
    if (p->corr) pb_uint(b, TE_CORRELATION, p->corr);
    if (ll->first)
      for (uint32_t j = ll->first[sl->index]; j < ll->first[sl->index + 1]; j++) {
        pb_uint(b, TE_FLOW_IDS_VARINT, flow_base + ll->ops[j] + 1);
        w->flows++;
      }
    pf_event_close(w);
  } else {
    const ssa_op *p = &r->ops[sl->index];
    uint32_t cls = p->cls >= SSA_CLS_COMPUTE && p->cls <= SSA_CLS_MEMSET ? p->cls - 1u : K_COMPUTE;
    uint64_t nm = op_name(w, q, r, p);
    uint64_t cat = pf_intern(w, q, SP_CATEGORY, SRC_CONST, cls, NULL);
    uint64_t cat2 = second_category(w, q, ssa_op_expert_tag(r, p));
    uint64_t bn = p->bytes ? pf_intern(w, q, SP_DEBUG, SRC_CONST, K_BYTES, NULL) : 0;
    const ssa_coll *c = p->coll != SSA_NONE && p->coll < r->ncolls ? &r->colls[p->coll] : NULL;
    uint64_t cn = 0, cv = 0, in = 0, iv = 0, sn = 0, bn2 = 0, gn = 0, gv = 0;
    uint32_t *members = NULL;
    if (c) {
      cn = pf_intern(w, q, SP_DEBUG, SRC_CONST, K_COLLECTIVE, NULL);
      cv = pf_intern(w, q, SP_STRING, SRC_CONST, K_COLL_OP0 + (c->op < 64 ? c->op : 0), NULL);
      in = pf_intern(w, q, SP_DEBUG, SRC_CONST, K_COMM_ID, NULL);
      iv = pf_intern(w, q, SP_STRING, SRC_COMM, c->comm_id, r);
      sn = pf_intern(w, q, SP_DEBUG, SRC_CONST, K_SEQ, NULL);
      bn2 = pf_intern(w, q, SP_DEBUG, SRC_CONST, K_COLL_BYTES, NULL);
      gn = pf_intern(w, q, SP_DEBUG, SRC_CONST, K_GROUP, NULL);
      gv = pf_intern(w, q, SP_STRING, SRC_RANK, c->name, r);
      members = pf_coll_slot(w, c->comm_id, c->seq, 0);
    }
    pf_event_open(w, q, ssa_rel_time(run, r, p->start), TYPE_BEGIN);
    if (sub) pb_uint(b, TE_TRACK_UUID, sub_track(lo, sub));
    pb_uint(b, TE_NAME_IID, nm);
    pb_uint(b, TE_CATEGORY_IIDS, cat);
    if (cat2) pb_uint(b, TE_CATEGORY_IIDS, cat2);
    if (p->corr) pb_uint(b, TE_CORRELATION, p->corr);
    if (p->bytes) pf_debug_uint(b, bn, p->bytes);
    if (c) {
      pf_debug_string(b, cn, cv);
      pf_debug_string(b, in, iv);
      pf_debug_uint(b, sn, c->seq);
      pf_debug_uint(b, bn2, c->bytes);
      pf_debug_string(b, gn, gv);
      if (members && *members >= 2) {
        pb_uint(b, TE_FLOW_IDS_VARINT, w->total_ops + 1 + (uint64_t)(members - w->coll_count));
        w->flows++;
      }
    }
    if (p->launch != SSA_NONE && p->launch < r->napis)
      pb_uint(b, TE_TERMINATING_FLOWS_VARINT, flow_base + sl->index + 1);
    pf_event_close(w);
  }
  w->slices++;
}

/* ---- the rank ---- */

static int cmp_window_start(const void *pa, const void *pb, void *arg) {
  const ssa_window *w = arg, *a = &w[*(const uint32_t *)pa], *b = &w[*(const uint32_t *)pb];
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return a->end < b->end ? -1
                         : a->end > b->end; /* an empty window first: written before the next */
}

int pf_export_rank(pf_writer *w, const ssa_rank_result *rr, long tid_base, uint64_t flow_base) {
  const ssa_analysis *a = w->a;
  const ssa_run *run = a->run;
  const ssa_rank *r = rr->rank;
  int pid = r->rank + 1;
  int rc = STEPSCOPE_E_NOMEM;
  lane_out *lanes = NULL;
  launch_lists ll = {NULL, NULL};
  pf_seq *cseq = NULL;
  uint32_t *cname = NULL;
  size_t ncnames = 0;
  uint32_t *order = NULL;
  derived_out d;
  memset(&d, 0, sizeof d);

  /* the process and its tracks */
  char label[512];
  ssa_rank_track_label(r, label, sizeof label);
  uint64_t process = pf_process_track(w, label, pid);
  w->process_of[rr->rank_index] = process;

  lanes = calloc(r->nlanes ? r->nlanes : 1, sizeof *lanes);
  if (!lanes) goto out;
  for (uint32_t l = 0; l < r->nlanes; l++) {
    lane_out *lo = &lanes[l];
    lo->w = w;
    lo->r = r;
    lo->lane = l;
    lo->process = process;
    ssa_lanes_init(&lo->lanes);
    lo->lanes.on_close = on_close;
    lo->lanes.ctx = lo;
    ssa_lane_label(r, &r->lanes[l], lo->label, sizeof lo->label);
    uint64_t uuid =
        r->lanes[l].kind == SSA_LANE_HOST
            ? pf_thread_track(w, pid, tid_base + l + 1, lo->label, 2000 + (int64_t)l * 64)
            : pf_named_track(w, process, lo->label, (int64_t)l * 64, -1);
    pf_seq_init(w, &lo->seq, uuid);
  }
  static const char *const dn[D_N] = {"exposed comm", "idle", "bubble", "steps"};
  for (int k = 0; k < D_N; k++) {
    if (k == D_BUBBLE && !rr->pipeline) continue;
    pf_seq_init(w, &d.seq[k], pf_named_track(w, process, dn[k], 1000 + k, -1));
  }
  d.w = w;
  d.r = r;
  d.pipeline = rr->pipeline;

  /* host ranges, API calls and ops */
  if (r->napis && build_launch_lists(r, &ll)) goto out;
  ssa_slice_iter it;
  ssa_slice sl;
  ssa_slice_iter_init(&it, r);
  while (!w->failed && ssa_slice_next(&it, &sl))
    write_slice(w, &lanes[sl.lane], &sl, &ll, flow_base);
  for (uint32_t l = 0; l < r->nlanes; l++)
    ssa_lanes_finish(&lanes[l].lanes);

  /* overlays: exposed comm and bubble from the analysis' coverage pass,
   * idle by cause from its gap classification, the step windows */
  ssa_cover_replay(rr, on_segment, &d);
  if (rr->totals.end > rr->totals.start && ssa_device_idle_gaps(a, rr, on_idle, &d)) goto out;
  for (int k = 0; k < D_STEPS; k++)
    flush_derived(&d, k);
  /* step windows partition the timeline (never overlap) but come by step
   * number: written by time, each ended before the next begins */
  order = malloc((rr->nsteps ? rr->nsteps : 1) * sizeof *order);
  if (!order) goto out;
  for (size_t s = 0; s < rr->nsteps; s++)
    order[s] = (uint32_t)s;
  qsort_r(order, rr->nsteps, sizeof *order, cmp_window_start, rr->windows);
  for (size_t s = 0; s < rr->nsteps && !w->failed; s++) {
    const ssa_window *win = &rr->windows[order[s]];
    pf_seq *q = &d.seq[D_STEPS];
    pf_event_prepare(w, q);
    uint64_t cat = pf_intern(w, q, SP_CATEGORY, SRC_CONST, K_DERIVED, NULL);
    uint64_t sn = pf_intern(w, q, SP_DEBUG, SRC_CONST, K_STEP, NULL);
    char name[32];
    snprintf(name, sizeof name, "step %lld", (long long)win->step);
    pf_event_open(w, q, ssa_rel_time(run, r, win->start), TYPE_BEGIN);
    pf_text(&w->b, TE_NAME, name);
    pb_uint(&w->b, TE_CATEGORY_IIDS, cat);
    pb_begin(&w->b, TE_DEBUG);
    pb_uint(&w->b, DA_NAME_IID, sn);
    pb_int(&w->b, DA_INT, win->step);
    pb_end(&w->b);
    pf_event_close(w);
    pf_event_prepare(w, q);
    pf_event_open(w, q, ssa_rel_time(run, r, win->end), TYPE_END);
    pf_event_close(w);
    w->slices++;
  }

  /* counters: one track per name, and the overlap ratio of each step */
  cseq = calloc(r->ncounters ? r->ncounters : 1, sizeof *cseq);
  cname = calloc(r->ncounters ? r->ncounters : 1, sizeof *cname);
  if (!cseq || !cname) goto out;
  for (size_t i = 0; i < r->ncounters && !w->failed; i++) {
    const ssa_counter *c = &r->counters[i];
    size_t k = 0;
    while (k < ncnames && cname[k] != c->name)
      k++;
    if (k == ncnames) {
      const char *nm = ssa_rank_str(r, c->name);
      int bytes = strstr(nm, "bytes") || strstr(nm, "memory");
      pf_seq_init(w, &cseq[k],
                  pf_named_track(w, process, nm[0] ? nm : "counter", 1100 + (int64_t)k,
                                 bytes ? UNIT_BYTES : 0));
      cname[ncnames++] = c->name;
    }
    pf_counter_value(w, &cseq[k], ssa_rel_time(run, r, c->time), c->value);
  }
  if (rr->nsteps) {
    pf_seq q;
    pf_seq_init(w, &q, pf_named_track(w, process, "overlap ratio", 1099, 0));
    for (size_t s = 0; s < rr->nsteps && !w->failed; s++) {
      const ssa_window *win = &rr->windows[s];
      if (win->comm > 0)
        pf_counter_value(w, &q, ssa_rel_time(run, r, win->start),
                         (double)win->overlap / (double)win->comm);
    }
    pf_tab_free(&q.tab);
  }
  rc = w->failed ? STEPSCOPE_E_NOMEM : 0;
out:
  for (uint32_t l = 0; lanes && l < r->nlanes; l++) {
    ssa_lanes_free(&lanes[l].lanes);
    free(lanes[l].extra);
    pf_tab_free(&lanes[l].seq.tab);
  }
  free(lanes);
  for (int k = 0; k < D_N; k++)
    pf_tab_free(&d.seq[k].tab);
  for (size_t k = 0; k < ncnames; k++)
    pf_tab_free(&cseq[k].tab);
  free(cseq);
  free(cname);
  free(order);
  free(ll.first);
  free(ll.ops);
  return rc;
}

/* ---- the replay process ---- */

/* One lane's replayed ops, v[0, n), under the replay process. */
static void replay_lane(pf_writer *w, uint64_t process, const ssa_rank *r,
                        const ssa_replay_slice *v, size_t n) {
  lane_out lo = {.w = w, .process = process, .r = r, .lane = r->ops[v[0].op].lane};
  ssa_lane_label(r, &r->lanes[lo.lane], lo.label, sizeof lo.label);
  pf_seq_init(w, &lo.seq, pf_named_track(w, process, lo.label, (int64_t)lo.lane * 64, -1));
  ssa_lanes_init(&lo.lanes);
  lo.lanes.on_close = on_close;
  lo.lanes.ctx = &lo;
  for (size_t k = 0; k < n && !w->failed; k++) {
    uint32_t sub = place(&lo, v[k].start, v[k].end);
    pf_event_prepare(w, &lo.seq);
    uint64_t nm = op_name(w, &lo.seq, r, &r->ops[v[k].op]);
    uint64_t cat = pf_intern(w, &lo.seq, SP_CATEGORY, SRC_CONST, K_DERIVED, NULL);
    pf_event_open(w, &lo.seq, ssa_rel_time(w->a->run, r, v[k].start), TYPE_BEGIN);
    if (sub) pb_uint(&w->b, TE_TRACK_UUID, sub_track(&lo, sub));
    pb_uint(&w->b, TE_NAME_IID, nm);
    pb_uint(&w->b, TE_CATEGORY_IIDS, cat);
    pf_event_close(w);
    w->slices++;
  }
  ssa_lanes_finish(&lo.lanes);
  ssa_lanes_free(&lo.lanes);
  free(lo.extra);
  pf_tab_free(&lo.seq.tab);
}

int pf_export_replay(pf_writer *w) {
  const ssa_analysis *a = w->a;
  for (size_t i = 0; a->opt.export_replay && i < a->nranks && !w->failed; i++) {
    const ssa_rank *r = a->ranks[i].rank;
    ssa_replay_slice *v;
    size_t n;
    if (!w->process_of[i]) continue;
    if (ssa_replay_slices(a, i, &v, &n)) return STEPSCOPE_E_NOMEM;
    char label[600];
    ssa_replay_process_label(a, r, label, sizeof label);
    uint64_t process = pf_process_track(w, label, ssa_replay_pid(a, r));
    for (size_t b = 0, e; b < n && !w->failed; b = e) {
      for (e = b; e < n && r->ops[v[e].op].lane == r->ops[v[b].op].lane;)
        e++;
      replay_lane(w, process, r, v + b, e - b);
    }
    free(v);
  }
  return w->failed ? STEPSCOPE_E_NOMEM : 0;
}
