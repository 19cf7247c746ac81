/*
 * perfetto_export.c — `stepscope export RUN -o run.pftrace`: the run as a
 * native Perfetto trace (protobuf TracePacket / TrackEvent, SPEC §5), with
 * the content of the Chrome-JSON export (chrome_export.c) and more, written
 * as a stream of packets (pb_encode.h) in bounded memory.
 *
 * Layout:
 * - a process track per rank (pid = rank + 1, named "rank R (host, GPU d)"),
 *   under it a track per GPU/CPU stream, a thread track per host thread
 *   (synthetic tids, unique in the file, as in the JSON), the derived tracks
 *   "exposed comm", "idle" (slices named by idle cause: host_wait,
 *   launch_gap, sync_wait, other, data_loading), "bubble" (pipeline ranks),
 *   "steps", a counter track per counter name of the trace (memory...) and
 *   an "overlap ratio" counter (overlap / comm of each step, at its start);
 *   after every rank, a "critical path" track under each rank's process: the pieces of
 *   the steps' critical paths on that rank (docs/metrics.md "Critical path"); with export
 *   --replay, last, a process per rank "replay: EDITS (rank R)" with a track per lane: the
 *   rank's ops at their replayed times (replay_slices.c), category "derived".
 *   Slices that overlap without nesting go to extra tracks "... (lane N)"
 *   (ssa_lanes.h), described when first used.
 * - times: the JSON's (aligned, relative to the run origin, in ns).
 * - flows: launch call -> op, and one flow per collective instance through
 *   its members' ops on every rank, written only when at least two members
 *   have an op. Ids are dense so that they are short varints: a launch flow
 *   is the op's index in the whole run (ranks in order) + 1, a collective's
 *   is past every op's (the total op count + 1 + its slot in the table of
 *   instances). They go in TrackEvent.flow_ids_old / terminating_flow_ids_old
 *   (fields 36 and 42, varints): the proto marks them deprecated only in
 *   favour of fixed64 twins that are cheaper for the C++ SDK to patch in
 *   place; trace processor reads either with the same meaning
 *   (track_event_event_importer.h), and the varints save 5-7 bytes a flow end.
 *
 * Size: every track is its own packet sequence (trusted_packet_sequence_id),
 * written in time order, so
 * - the sequence's first packet (SEQ_INCREMENTAL_STATE_CLEARED) sets
 *   TracePacketDefaults: the track uuid (events carry none, except on extra
 *   lanes) and clock 64, an incremental clock defined by a ClockSnapshot
 *   against BOOTTIME: each packet's timestamp is the delta from the previous
 *   one of the sequence (1-3 bytes instead of 5-8). A time earlier than the
 *   sequence's last one (not expected) is written absolute on BOOTTIME.
 * - event names, categories, debug-annotation names and repeated string
 *   values are interned per sequence (InternedData in the packet that first
 *   uses them); a sequence whose table passes the limit starts over with
 *   SEQ_INCREMENTAL_STATE_CLEARED (defaults, clock and empty tables again).
 *   The limit is 16384 entries (ssa_perfetto_options.intern_limit overrides it:
 *   a test knob, which the command fills from STEPSCOPE_PFTRACE_INTERN_LIMIT).
 * - correlation ids use TrackEvent.correlation_id, categories category_iids;
 *   only the arguments a slice has are written (an empty NVTX domain is
 *   left out, where the JSON writes "domain":"").
 * Packets do not set SEQ_NEEDS_INCREMENTAL_STATE: the file has no loss, so
 * nothing needs dropping (it saves two bytes a packet).
 *
 * Memory: the model (already loaded) plus, per rank, the launch lists of its
 * API calls (4 bytes per call and per launched op), the lane stacks, and
 * one intern table per open sequence; the output buffer is drained after
 * every packet past 256 KiB.
 *
 * Files: this one (the collective instances, the critical path's tracks, the entry),
 * perfetto_writer.c (packets, sequences, interning, track descriptors) and perfetto_rank.c
 * (one rank's tracks, and its replay process).
 */
#include <stdlib.h>
#include <string.h>

#include "perfetto_writer.h"
#include "critical_path.h"
#include "sc_hash.h"

/* ---- collective instances ---- */
uint32_t *pf_coll_slot(pf_writer *w, uint64_t comm_id, uint64_t seq, int insert) {
  if (!w->coll_cap) return NULL;
  size_t h = (size_t)sc_mix64(comm_id ^ sc_mix64(seq)) & (w->coll_cap - 1);
  for (;;) {
    uint64_t *k = &w->coll_keys[2 * h];
    if (w->coll_count[h] && k[0] == comm_id && k[1] == seq) return &w->coll_count[h];
    if (!w->coll_count[h]) {
      if (!insert) return NULL;
      k[0] = comm_id;
      k[1] = seq;
      return &w->coll_count[h];
    }
    h = (h + 1) & (w->coll_cap - 1);
  }
}

/* Counts, per (communicator, sequence number), the members that have an op
 * on the selected ranks. */
static int count_collectives(pf_writer *w) {
  const ssa_analysis *a = w->a;
  size_t n = 0;
  for (size_t i = 0; i < a->nranks; i++)
    if (ssa_export_selects(a, i)) n += a->ranks[i].rank->ncolls;
  if (!n) return 0;
  size_t cap = 16;
  while (cap < 2 * n)
    cap *= 2;
  w->coll_keys = calloc(2 * cap, sizeof *w->coll_keys);
  w->coll_count = calloc(cap, sizeof *w->coll_count);
  if (!w->coll_keys || !w->coll_count) return STEPSCOPE_E_NOMEM;
  w->coll_cap = cap;
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank *r = a->ranks[i].rank;
    if (!ssa_export_selects(a, i)) continue;
    for (size_t c = 0; c < r->ncolls; c++) {
      if (r->colls[c].op_index == SSA_NONE) continue;
      uint32_t *cnt = pf_coll_slot(w, r->colls[c].comm_id, r->colls[c].seq, 1);
      if (*cnt < UINT32_MAX) (*cnt)++;
    }
  }
  return 0;
}

typedef struct path_track {
  pf_writer *w;
  pf_seq seq;
} path_track;

static void path_piece(void *ctx, const ssa_cp_segment *s, int64_t step, int64_t from, int64_t to) {
  path_track *p = ctx;
  pf_writer *w = p->w;
  char label[64];
  pf_event_prepare(w, &p->seq);
  uint64_t cat = pf_intern(w, &p->seq, SP_CATEGORY, SRC_CONST, K_DERIVED, NULL);
  uint64_t sn = pf_intern(w, &p->seq, SP_DEBUG, SRC_CONST, K_STEP, NULL);
  pf_event_open(w, &p->seq, from, TYPE_BEGIN);
  pf_text(&w->b, TE_NAME, ssa_cp_segment_label(w->a, s, label, sizeof label));
  pb_uint(&w->b, TE_CATEGORY_IIDS, cat);
  pb_begin(&w->b, TE_DEBUG);
  pb_uint(&w->b, DA_NAME_IID, sn);
  pb_int(&w->b, DA_INT, step);
  pb_end(&w->b);
  pf_event_close(w);
  pf_event_prepare(w, &p->seq);
  pf_event_open(w, &p->seq, to, TYPE_END);
  pf_event_close(w);
  w->slices++;
}

/* The critical path's track under every written rank's process. */
static int export_critical_path(pf_writer *w) {
  const ssa_analysis *a = w->a;
  for (size_t i = 0; a->critical_path && i < a->nranks && !w->failed; i++) {
    if (!w->process_of[i]) continue;
    path_track p = {.w = w};
    pf_seq_init(w, &p.seq, pf_named_track(w, w->process_of[i], "critical path", 1004, -1));
    int rc = ssa_cp_track(a->critical_path, (uint32_t)i, path_piece, &p);
    pf_tab_free(&p.seq.tab);
    if (rc) return rc;
  }
  return w->failed ? STEPSCOPE_E_NOMEM : 0;
}

int ssa_export_perfetto(const ssa_analysis *a, const char *path, ssa_export_stats *stats,
                        stepscope_error *err) {
  return ssa_export_perfetto_opts(a, path, NULL, stats, err);
}

int ssa_export_perfetto_opts(const ssa_analysis *a, const char *path,
                             const ssa_perfetto_options *opt, ssa_export_stats *stats,
                             stepscope_error *err) {
  pf_writer w;
  memset(&w, 0, sizeof w);
  w.a = a;
  w.next_seq = 1;
  w.next_uuid = 1;
  w.intern_limit = 16384;
  if (opt && opt->intern_limit >= 32) w.intern_limit = (uint32_t)opt->intern_limit;
  int rc = ssa_out_open(&w.o, path);
  if (rc) {
    if (err) {
      err->code = rc;
      snprintf(err->message, sizeof err->message, "%s", w.o.why);
    }
    return rc;
  }
  pb_init(&w.b);
  for (size_t i = 0; i < a->nranks; i++)
    w.total_ops += a->ranks[i].rank->nops;
  rc = count_collectives(&w);
  w.process_of = calloc(a->nranks ? a->nranks : 1, sizeof *w.process_of);
  if (!rc && !w.process_of) rc = STEPSCOPE_E_NOMEM;
  long tid_base = 0;
  uint64_t op_base = 0;
  for (size_t i = 0; !rc && i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    long base = tid_base;
    uint64_t flow_base = op_base;
    tid_base += (long)rr->rank->nlanes + 4; /* the JSON export's tids */
    op_base += rr->rank->nops;
    if (!ssa_export_selects(a, i)) continue;
    rc = pf_export_rank(&w, rr, base, flow_base);
  }
  if (!rc) rc = export_critical_path(&w);
  if (!rc) rc = pf_export_replay(&w);
  if (!rc && (w.failed || w.b.failed)) rc = STEPSCOPE_E_NOMEM;
  if (!rc)
    ssa_out_write(&w.o, (const char *)w.b.p, w.b.len);
  else if (!w.o.error)
    w.o.error = rc; /* the partial file is removed, not renamed into place */
  pb_free(&w.b);
  free(w.coll_keys);
  free(w.coll_count);
  free(w.process_of);
  ssa_out_flush(&w.o);
  uint64_t bytes = w.o.bytes;
  int crc = ssa_out_close(&w.o);
  if (stats) {
    stats->events = w.packets;
    stats->bytes = bytes;
    stats->slices = w.slices;
    stats->flows = w.flows;
  }
  if (!rc) rc = crc;
  if (rc && err) {
    err->code = rc;
    if (crc)
      snprintf(err->message, sizeof err->message, "%s", w.o.why);
    else
      snprintf(err->message, sizeof err->message, "out of memory writing %s", path);
  }
  return rc;
}
