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
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pb_encode.h"
#include "ssa_expert_tags.h"
#include "ssa_lanes.h"
#include "ssa_track_names.h"
#include "ssa_export.h"
#include "critical_path.h"
#include "sc_hash.h"
#include "sc_json.h"

/* ---- field numbers (the .proto files under perfetto/trace) ---- */
enum {
  F_TRACE_PACKET = 1,
  /* TracePacket */
  TP_TIMESTAMP = 8,
  TP_SEQ_ID = 10,
  TP_TRACK_EVENT = 11,
  TP_INTERNED = 12,
  TP_SEQ_FLAGS = 13,
  TP_CLOCK_SNAPSHOT = 6,
  TP_CLOCK_ID = 58,
  TP_DEFAULTS = 59,
  TP_TRACK_DESCRIPTOR = 60,
  TP_FIRST_ON_SEQ = 87,
  /* TrackEvent */
  TE_CATEGORY_IIDS = 3,
  TE_DEBUG = 4,
  TE_TYPE = 9,
  TE_NAME_IID = 10,
  TE_TRACK_UUID = 11,
  TE_NAME = 23,
  TE_COUNTER = 30,
  TE_DOUBLE_COUNTER = 44,
  TE_FLOW_IDS_VARINT = 36,
  TE_TERMINATING_FLOWS_VARINT = 42,
  TE_CORRELATION = 52,
  /* DebugAnnotation */
  DA_NAME_IID = 1,
  DA_UINT = 3,
  DA_INT = 4,
  DA_DOUBLE = 5,
  DA_STRING_IID = 17,
  /* InternedData */
  ID_CATEGORIES = 1,
  ID_NAMES = 2,
  ID_DEBUG_NAMES = 3,
  ID_STRINGS = 29,
  /* TrackDescriptor */
  TD_UUID = 1,
  TD_NAME = 2,
  TD_PROCESS = 3,
  TD_THREAD = 4,
  TD_PARENT = 5,
  TD_COUNTER = 8,
  TD_CHILD_ORDERING = 11,
  TD_SIBLING_RANK = 12,
  /* ClockSnapshot / Clock */
  CS_CLOCKS = 1,
  CK_ID = 1,
  CK_TIMESTAMP = 2,
  CK_INCREMENTAL = 3,
  /* TracePacketDefaults / TrackEventDefaults */
  PD_CLOCK_ID = 58,
  PD_TRACK_EVENT = 11,
  TD_DEFAULT_TRACK = 11
};
enum { TYPE_BEGIN = 1, TYPE_END = 2, TYPE_COUNTER = 4 };
enum { SEQ_CLEARED = 1 };
enum { CLOCK_BOOTTIME = 6, CLOCK_SEQ = 64 };
enum { ORDER_EXPLICIT = 3 };
enum { UNIT_BYTES = 3 };

/* A string field, always valid UTF-8 as in the JSON export: each invalid
 * sequence (its maximal subpart) becomes U+FFFD. */
static void pb_text(pb_buf *b, uint32_t field, const char *s) {
  const char *p = s;
  size_t bad;
  while (*p) {
    size_t k =
        (unsigned char)*p < 0x80 ? 1 : sc_utf8_sequence((const unsigned char *)p, SIZE_MAX, &bad);
    if (!k) break;
    p += k;
  }
  if (!*p) { /* all valid: as is */
    pb_bytes(b, field, s, (size_t)(p - s));
    return;
  }
  /* the cleaned length first, then the bytes */
  size_t n = 0;
  for (p = s; *p;) {
    size_t k =
        (unsigned char)*p < 0x80 ? 1 : sc_utf8_sequence((const unsigned char *)p, SIZE_MAX, &bad);
    if (k)
      n += k, p += k;
    else
      n += 3, p += bad;
  }
  if (pb_reserve(b, 15 + n)) return;
  pb_put_varint(b, ((uint64_t)field << 3) | PB_LEN);
  pb_put_varint(b, n);
  for (p = s; *p;) {
    size_t k =
        (unsigned char)*p < 0x80 ? 1 : sc_utf8_sequence((const unsigned char *)p, SIZE_MAX, &bad);
    if (k) {
      memcpy(b->p + b->len, p, k);
      b->len += k;
      p += k;
    } else {
      memcpy(b->p + b->len, "\xEF\xBF\xBD", 3);
      b->len += 3;
      p += bad;
    }
  }
}

/* ---- interned strings ---- */
enum { SP_CATEGORY, SP_NAME, SP_DEBUG, SP_STRING, SP_N };
enum { SRC_CONST, SRC_RANK, SRC_COMM };
static const uint32_t space_field[SP_N] = {ID_CATEGORIES, ID_NAMES, ID_DEBUG_NAMES, ID_STRINGS};

/* constant strings (SRC_CONST keys index this table) */
enum {
  K_COMPUTE,
  K_COMM,
  K_MEMCPY,
  K_MEMSET,
  K_HOST,
  K_DERIVED, /* categories, by ssa_class - 1 first */
  K_API,
  K_OP,
  K_EXPOSED,
  K_IDLE,
  K_BUBBLE,
  K_BYTES,
  K_COLLECTIVE,
  K_COMM_ID,
  K_SEQ,
  K_COLL_BYTES,
  K_GROUP,
  K_DOMAIN,
  K_PAYLOAD,
  K_INFO,
  K_STEP,
  K_ALL_TO_ALL, /* second categories, in ssa_expert_tag's order */
  K_MOE_DISPATCH,
  K_MOE_COMBINE,
  K_IDLE_CAUSE0,                           /* + ssa idle cause */
  K_COLL_OP0 = K_IDLE_CAUSE0 + SSA_IDLE_N, /* + collective op */
  K_N = K_COLL_OP0 + 64
};

static const char *const_name(uint32_t k, char *buf, size_t n) {
  static const char *const names[K_IDLE_CAUSE0] = {
      "compute",    "comm",    "memcpy",       "memset",     "host",         "derived",
      "api",        "op",      "exposed comm", "idle",       "bubble",       "bytes",
      "collective", "comm_id", "seq",          "coll_bytes", "group",        "domain",
      "payload",    "info",    "step",         "all_to_all", "moe_dispatch", "moe_combine"};
  if (k < K_IDLE_CAUSE0) return names[k];
  if (k < K_COLL_OP0) return ssa_idle_cause_names[k - K_IDLE_CAUSE0];
  snprintf(buf, n, "%s", stepscope_collective_op_name(k - K_COLL_OP0));
  return buf;
}

typedef struct intern_slot {
  uint64_t key; /* 0 = empty */
  uint64_t value;
  uint32_t iid;
} intern_slot;

typedef struct intern_tab {
  intern_slot *slots;
  uint32_t cap, count;
  uint32_t next_iid[SP_N];
} intern_tab;

/* ---- one packet sequence: one track (and its extra lanes) ---- */
typedef struct pf_seq {
  uint32_t id;
  uint64_t track;      /* default track uuid */
  int64_t last;        /* the incremental clock's value */
  int started;         /* a state packet was written */
  int cleared_pending; /* the next packet must start over */
  intern_tab tab;
} pf_seq;

/* an interned entry waiting to be written with the packet that uses it */
typedef struct pending {
  uint32_t space, iid;
  const char *str;
  char buf[24];
} pending;

typedef struct pf_writer {
  const ssa_analysis *a;
  ssa_out o;
  pb_buf b;
  uint32_t next_seq;
  uint64_t next_uuid;
  long next_tid;
  uint32_t intern_limit;
  pending pend[16];
  int npend;
  uint64_t packets, slices, flows;
  int failed;         /* STEPSCOPE_E_NOMEM */
  uint64_t total_ops; /* flow ids of collectives start past these */
  /* collective instances: (comm_id, seq) -> members with an op */
  uint64_t *coll_keys; /* pairs, 0/0 = empty */
  uint32_t *coll_count;
  size_t coll_cap;
  uint64_t *process_of; /* per rank index: its process track, 0 if not written */
} pf_writer;

static void drain(pf_writer *w) {
  if (w->b.failed) w->failed = 1;
  if (w->b.len >= (256u << 10)) {
    ssa_out_write(&w->o, (const char *)w->b.p, w->b.len);
    w->b.len = 0;
  }
}

static void tab_free(intern_tab *t) {
  free(t->slots);
  memset(t, 0, sizeof *t);
}

static void tab_clear(intern_tab *t) {
  if (t->slots) memset(t->slots, 0, t->cap * sizeof *t->slots);
  t->count = 0;
  memset(t->next_iid, 0, sizeof t->next_iid);
}

static intern_slot *tab_find(intern_tab *t, uint64_t key, uint64_t value, int *fresh) {
  if ((t->count + 1) * 2 > t->cap) {
    uint32_t cap = t->cap ? t->cap * 2 : 64;
    intern_slot *n = calloc(cap, sizeof *n);
    if (!n) return NULL;
    for (uint32_t i = 0; i < t->cap; i++) {
      intern_slot *s = &t->slots[i];
      if (!s->key) continue;
      uint32_t h = (uint32_t)sc_mix64(s->key ^ sc_mix64(s->value)) & (cap - 1);
      while (n[h].key)
        h = (h + 1) & (cap - 1);
      n[h] = *s;
    }
    free(t->slots);
    t->slots = n;
    t->cap = cap;
  }
  uint32_t h = (uint32_t)sc_mix64(key ^ sc_mix64(value)) & (t->cap - 1);
  while (t->slots[h].key) {
    if (t->slots[h].key == key && t->slots[h].value == value) {
      *fresh = 0;
      return &t->slots[h];
    }
    h = (h + 1) & (t->cap - 1);
  }
  *fresh = 1;
  t->count++;
  t->slots[h].key = key;
  t->slots[h].value = value;
  return &t->slots[h];
}

/* The iid of a string of `space` on the sequence, queued for the packet
 * when new. For SRC_CONST `value` is a K_ constant, for SRC_RANK a string
 * id of rank r, for SRC_COMM a communicator id (written in hex). */
static uint64_t intern(pf_writer *w, pf_seq *s, uint32_t space, uint32_t src, uint64_t value,
                       const ssa_rank *r) {
  int fresh;
  intern_slot *slot = tab_find(&s->tab, 1 + ((uint64_t)space << 8 | src), value, &fresh);
  if (!slot) {
    w->failed = 1;
    return 0;
  }
  if (!fresh) return slot->iid;
  slot->iid = ++s->tab.next_iid[space];
  if (w->npend == (int)(sizeof w->pend / sizeof w->pend[0])) { /* never: events need fewer */
    w->failed = 1;
    return slot->iid;
  }
  pending *p = &w->pend[w->npend++];
  p->space = space;
  p->iid = slot->iid;
  if (src == SRC_CONST)
    p->str = const_name((uint32_t)value, p->buf, sizeof p->buf);
  else if (src == SRC_RANK)
    p->str = ssa_rank_str(r, (uint32_t)value);
  else {
    snprintf(p->buf, sizeof p->buf, "%016llx", (unsigned long long)value);
    p->str = p->buf;
  }
  return slot->iid;
}

/* Writes the sequence's state packet: cleared incremental state, the
 * incremental clock at its current value, the defaults. */
static void state_packet(pf_writer *w, pf_seq *s) {
  pb_buf *b = &w->b;
  tab_clear(&s->tab);
  pb_begin(b, F_TRACE_PACKET);
  pb_uint(b, TP_SEQ_ID, s->id);
  pb_uint(b, TP_SEQ_FLAGS, SEQ_CLEARED);
  if (!s->started) pb_uint(b, TP_FIRST_ON_SEQ, 1);
  pb_begin(b, TP_CLOCK_SNAPSHOT);
  pb_begin(b, CS_CLOCKS);
  pb_uint(b, CK_ID, CLOCK_SEQ);
  pb_uint(b, CK_TIMESTAMP, (uint64_t)s->last);
  pb_uint(b, CK_INCREMENTAL, 1);
  pb_end(b);
  pb_begin(b, CS_CLOCKS);
  pb_uint(b, CK_ID, CLOCK_BOOTTIME);
  pb_uint(b, CK_TIMESTAMP, (uint64_t)s->last);
  pb_end(b);
  pb_end(b);
  pb_begin(b, TP_DEFAULTS);
  pb_uint(b, PD_CLOCK_ID, CLOCK_SEQ);
  pb_begin(b, PD_TRACK_EVENT);
  pb_uint(b, TD_DEFAULT_TRACK, s->track);
  pb_end(b);
  pb_end(b);
  pb_end(b);
  s->started = 1;
  s->cleared_pending = 0;
  w->packets++;
  drain(w);
}

static void seq_init(pf_writer *w, pf_seq *s, uint64_t track) {
  memset(s, 0, sizeof *s);
  s->id = w->next_seq++;
  s->track = track;
}

/* Before the lookups of an event: starts the sequence, or starts it over
 * when its tables are full. */
static void event_prepare(pf_writer *w, pf_seq *s) {
  w->npend = 0;
  if (!s->started || s->tab.count + 16 > w->intern_limit) state_packet(w, s);
}

/* Opens the packet of an event at time t (relative ns) with the queued
 * interned data, and its TrackEvent; close with event_close. */
static void event_open(pf_writer *w, pf_seq *s, int64_t t, int type) {
  pb_buf *b = &w->b;
  if (t < 0) t = 0; /* before the run origin: not expected */
  pb_begin(b, F_TRACE_PACKET);
  pb_uint(b, TP_SEQ_ID, s->id);
  if (t >= s->last) {
    pb_uint(b, TP_TIMESTAMP, (uint64_t)(t - s->last));
    s->last = t;
  } else { /* out of order: absolute, on the clock the sequence's is defined against */
    pb_uint(b, TP_TIMESTAMP, (uint64_t)t);
    pb_uint(b, TP_CLOCK_ID, CLOCK_BOOTTIME);
  }
  if (w->npend) {
    pb_begin(b, TP_INTERNED);
    for (int i = 0; i < w->npend; i++) {
      pb_begin(b, space_field[w->pend[i].space]);
      pb_uint(b, 1, w->pend[i].iid);
      pb_text(b, 2, w->pend[i].str);
      pb_end(b);
    }
    pb_end(b);
    w->npend = 0;
  }
  pb_begin(b, TP_TRACK_EVENT);
  pb_uint(b, TE_TYPE, (uint64_t)type);
}

static void event_close(pf_writer *w) {
  pb_end(&w->b);
  pb_end(&w->b);
  w->packets++;
  drain(w);
}

static void debug_uint(pb_buf *b, uint64_t name_iid, uint64_t v) {
  pb_begin(b, TE_DEBUG);
  pb_uint(b, DA_NAME_IID, name_iid);
  pb_uint(b, DA_UINT, v);
  pb_end(b);
}

static void debug_string(pb_buf *b, uint64_t name_iid, uint64_t str_iid) {
  pb_begin(b, TE_DEBUG);
  pb_uint(b, DA_NAME_IID, name_iid);
  pb_uint(b, DA_STRING_IID, str_iid);
  pb_end(b);
}

/* ---- track descriptors ---- */
/* Begins the descriptor of a new track; returns the track's uuid. */
static uint64_t descriptor_begin(pf_writer *w) {
  uint64_t uuid = w->next_uuid++;
  pb_begin(&w->b, F_TRACE_PACKET);
  pb_begin(&w->b, TP_TRACK_DESCRIPTOR);
  pb_uint(&w->b, TD_UUID, uuid);
  return uuid;
}

static void descriptor_end(pf_writer *w) {
  pb_end(&w->b);
  pb_end(&w->b);
  w->packets++;
  drain(w);
}

/* A named track under a process, in the process' explicit order. */
static uint64_t named_track(pf_writer *w, uint64_t parent, const char *name, int64_t order,
                            int counter_unit) {
  uint64_t uuid = descriptor_begin(w);
  pb_uint(&w->b, TD_PARENT, parent);
  pb_text(&w->b, TD_NAME, name);
  pb_int(&w->b, TD_SIBLING_RANK, order);
  if (counter_unit >= 0) {
    pb_begin(&w->b, TD_COUNTER);
    if (counter_unit > 0) pb_uint(&w->b, 3, (uint64_t)counter_unit);
    pb_end(&w->b);
  }
  descriptor_end(w);
  return uuid;
}

/* A thread track: Perfetto puts it under its process by pid (no parent). */
static uint64_t thread_track(pf_writer *w, int pid, long tid, const char *name, int64_t order) {
  uint64_t uuid = descriptor_begin(w);
  pb_int(&w->b, TD_SIBLING_RANK, order);
  pb_begin(&w->b, TD_THREAD);
  pb_int(&w->b, 1, pid);
  pb_int(&w->b, 2, tid);
  pb_text(&w->b, 5, name);
  pb_end(&w->b);
  descriptor_end(w);
  return uuid;
}

/* ---- collective instances ---- */
static uint32_t *coll_slot(pf_writer *w, uint64_t comm_id, uint64_t seq, int insert) {
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
      uint32_t *cnt = coll_slot(w, r->colls[c].comm_id, r->colls[c].seq, 1);
      if (*cnt < UINT32_MAX) (*cnt)++;
    }
  }
  return 0;
}

/* ---- one rank ---- */
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
  event_prepare(w, &lo->seq);
  event_open(w, &lo->seq, ssa_rel_time(w->a->run, lo->r, end), TYPE_END);
  if (sub) pb_uint(&w->b, TE_TRACK_UUID, sub_track(lo, sub));
  event_close(w);
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
        named_track(w, lo->process, name, (host ? 2000 : 0) + (int64_t)lo->lane * 64 + k, -1);
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
  event_prepare(w, q);
  uint64_t cat = intern(w, q, SP_CATEGORY, SRC_CONST, K_DERIVED, NULL);
  uint64_t nm = intern(w, q, SP_NAME, SRC_CONST, name, NULL);
  event_open(w, q, ssa_rel_time(run, d->r, s), TYPE_BEGIN);
  pb_uint(&w->b, TE_NAME_IID, nm);
  pb_uint(&w->b, TE_CATEGORY_IIDS, cat);
  event_close(w);
  event_prepare(w, q);
  event_open(w, q, ssa_rel_time(run, d->r, e), TYPE_END);
  event_close(w);
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
  return intern(w, q, SP_CATEGORY, SRC_CONST, K_ALL_TO_ALL + (uint32_t)(t - SSA_EXPERT_ALL_TO_ALL),
                NULL);
}

/* An op's interned name: its own, or memcpy, memset, op (ssa_op_slice_name). */
static uint64_t op_name(pf_writer *w, pf_seq *q, const ssa_rank *r, const ssa_op *p) {
  if (p->name && ssa_rank_str(r, p->name)[0]) return intern(w, q, SP_NAME, SRC_RANK, p->name, r);
  return intern(w, q, SP_NAME, SRC_CONST,
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
  event_prepare(w, q);
  if (sl->kind == SSA_SLICE_RANGE) {
    const ssa_range *g = &r->ranges[sl->index];
    uint64_t nm = intern(w, q, SP_NAME, SRC_RANK, g->name, r);
    uint64_t cat = intern(w, q, SP_CATEGORY, SRC_CONST, K_HOST, NULL);
    uint64_t cat2 = second_category(w, q, ssa_range_expert_tag(ssa_rank_str(r, g->name)));
    /* an empty domain (Kineto ranges have none) is left out */
    int has_domain = ssa_rank_str(r, g->domain)[0] != 0;
    uint64_t dn = has_domain ? intern(w, q, SP_DEBUG, SRC_CONST, K_DOMAIN, NULL) : 0;
    uint64_t dv = has_domain ? intern(w, q, SP_STRING, SRC_RANK, g->domain, r) : 0;
    uint64_t pn = g->payload_kind ? intern(w, q, SP_DEBUG, SRC_CONST, K_PAYLOAD, NULL) : 0;
    uint64_t in = g->args ? intern(w, q, SP_DEBUG, SRC_CONST, K_INFO, NULL) : 0;
    uint64_t iv = g->args ? intern(w, q, SP_STRING, SRC_RANK, g->args, r) : 0;
    event_open(w, q, ssa_rel_time(run, r, g->start), TYPE_BEGIN);
    if (sub) pb_uint(b, TE_TRACK_UUID, sub_track(lo, sub));
    pb_uint(b, TE_NAME_IID, nm);
    pb_uint(b, TE_CATEGORY_IIDS, cat);
    if (cat2) pb_uint(b, TE_CATEGORY_IIDS, cat2);
    if (has_domain) debug_string(b, dn, dv);
    if (g->payload_kind) debug_uint(b, pn, g->payload);
    if (g->args) debug_string(b, in, iv);
    event_close(w);
  } else if (sl->kind == SSA_SLICE_API) {
    const ssa_api *p = &r->apis[sl->index];
    uint64_t nm = p->name ? intern(w, q, SP_NAME, SRC_RANK, p->name, r)
                          : intern(w, q, SP_NAME, SRC_CONST, K_API, NULL);
    uint64_t cat = intern(w, q, SP_CATEGORY, SRC_CONST, K_HOST, NULL);
    event_open(w, q, ssa_rel_time(run, r, p->start), TYPE_BEGIN);
    if (sub) pb_uint(b, TE_TRACK_UUID, sub_track(lo, sub));
    pb_uint(b, TE_NAME_IID, nm);
    pb_uint(b, TE_CATEGORY_IIDS, cat);
    if (p->corr) pb_uint(b, TE_CORRELATION, p->corr);
    if (ll->first)
      for (uint32_t j = ll->first[sl->index]; j < ll->first[sl->index + 1]; j++) {
        pb_uint(b, TE_FLOW_IDS_VARINT, flow_base + ll->ops[j] + 1);
        w->flows++;
      }
    event_close(w);
  } else {
    const ssa_op *p = &r->ops[sl->index];
    uint32_t cls = p->cls >= SSA_CLS_COMPUTE && p->cls <= SSA_CLS_MEMSET ? p->cls - 1u : K_COMPUTE;
    uint64_t nm = op_name(w, q, r, p);
    uint64_t cat = intern(w, q, SP_CATEGORY, SRC_CONST, cls, NULL);
    uint64_t cat2 = second_category(w, q, ssa_op_expert_tag(r, p));
    uint64_t bn = p->bytes ? intern(w, q, SP_DEBUG, SRC_CONST, K_BYTES, NULL) : 0;
    const ssa_coll *c = p->coll != SSA_NONE && p->coll < r->ncolls ? &r->colls[p->coll] : NULL;
    uint64_t cn = 0, cv = 0, in = 0, iv = 0, sn = 0, bn2 = 0, gn = 0, gv = 0;
    uint32_t *members = NULL;
    if (c) {
      cn = intern(w, q, SP_DEBUG, SRC_CONST, K_COLLECTIVE, NULL);
      cv = intern(w, q, SP_STRING, SRC_CONST, K_COLL_OP0 + (c->op < 64 ? c->op : 0), NULL);
      in = intern(w, q, SP_DEBUG, SRC_CONST, K_COMM_ID, NULL);
      iv = intern(w, q, SP_STRING, SRC_COMM, c->comm_id, r);
      sn = intern(w, q, SP_DEBUG, SRC_CONST, K_SEQ, NULL);
      bn2 = intern(w, q, SP_DEBUG, SRC_CONST, K_COLL_BYTES, NULL);
      gn = intern(w, q, SP_DEBUG, SRC_CONST, K_GROUP, NULL);
      gv = intern(w, q, SP_STRING, SRC_RANK, c->name, r);
      members = coll_slot(w, c->comm_id, c->seq, 0);
    }
    event_open(w, q, ssa_rel_time(run, r, p->start), TYPE_BEGIN);
    if (sub) pb_uint(b, TE_TRACK_UUID, sub_track(lo, sub));
    pb_uint(b, TE_NAME_IID, nm);
    pb_uint(b, TE_CATEGORY_IIDS, cat);
    if (cat2) pb_uint(b, TE_CATEGORY_IIDS, cat2);
    if (p->corr) pb_uint(b, TE_CORRELATION, p->corr);
    if (p->bytes) debug_uint(b, bn, p->bytes);
    if (c) {
      debug_string(b, cn, cv);
      debug_string(b, in, iv);
      debug_uint(b, sn, c->seq);
      debug_uint(b, bn2, c->bytes);
      debug_string(b, gn, gv);
      if (members && *members >= 2) {
        pb_uint(b, TE_FLOW_IDS_VARINT, w->total_ops + 1 + (uint64_t)(members - w->coll_count));
        w->flows++;
      }
    }
    if (p->launch != SSA_NONE && p->launch < r->napis)
      pb_uint(b, TE_TERMINATING_FLOWS_VARINT, flow_base + sl->index + 1);
    event_close(w);
  }
  w->slices++;
}

static void counter_value(pf_writer *w, pf_seq *q, int64_t t, double v) {
  event_prepare(w, q);
  event_open(w, q, t, TYPE_COUNTER);
  if (v == floor(v) && fabs(v) < 9007199254740992.0)
    pb_int(&w->b, TE_COUNTER, (int64_t)v);
  else
    pb_double(&w->b, TE_DOUBLE_COUNTER, v);
  event_close(w);
}

static int cmp_window_start(const void *pa, const void *pb, void *arg) {
  const ssa_window *w = arg, *a = &w[*(const uint32_t *)pa], *b = &w[*(const uint32_t *)pb];
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return a->end < b->end ? -1
                         : a->end > b->end; /* an empty window first: written before the next */
}

/* The track descriptor of a process ("rank R (host, GPU d)"); returns its uuid. */
static uint64_t write_process(pf_writer *w, const char *label, int pid) {
  uint64_t process = descriptor_begin(w);
  pb_uint(&w->b, TD_CHILD_ORDERING, ORDER_EXPLICIT);
  pb_begin(&w->b, TD_PROCESS);
  pb_int(&w->b, 1, pid);
  pb_text(&w->b, 6, label);
  pb_end(&w->b);
  descriptor_end(w);
  return process;
}

static int export_rank(pf_writer *w, const ssa_rank_result *rr, long tid_base, uint64_t flow_base) {
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
  uint64_t process = write_process(w, label, pid);
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
    uint64_t uuid = r->lanes[l].kind == SSA_LANE_HOST
                        ? thread_track(w, pid, tid_base + l + 1, lo->label, 2000 + (int64_t)l * 64)
                        : named_track(w, process, lo->label, (int64_t)l * 64, -1);
    seq_init(w, &lo->seq, uuid);
  }
  static const char *const dn[D_N] = {"exposed comm", "idle", "bubble", "steps"};
  for (int k = 0; k < D_N; k++) {
    if (k == D_BUBBLE && !rr->pipeline) continue;
    seq_init(w, &d.seq[k], named_track(w, process, dn[k], 1000 + k, -1));
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
    event_prepare(w, q);
    uint64_t cat = intern(w, q, SP_CATEGORY, SRC_CONST, K_DERIVED, NULL);
    uint64_t sn = intern(w, q, SP_DEBUG, SRC_CONST, K_STEP, NULL);
    char name[32];
    snprintf(name, sizeof name, "step %lld", (long long)win->step);
    event_open(w, q, ssa_rel_time(run, r, win->start), TYPE_BEGIN);
    pb_text(&w->b, TE_NAME, name);
    pb_uint(&w->b, TE_CATEGORY_IIDS, cat);
    pb_begin(&w->b, TE_DEBUG);
    pb_uint(&w->b, DA_NAME_IID, sn);
    pb_int(&w->b, DA_INT, win->step);
    pb_end(&w->b);
    event_close(w);
    event_prepare(w, q);
    event_open(w, q, ssa_rel_time(run, r, win->end), TYPE_END);
    event_close(w);
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
      seq_init(w, &cseq[k],
               named_track(w, process, nm[0] ? nm : "counter", 1100 + (int64_t)k,
                           bytes ? UNIT_BYTES : 0));
      cname[ncnames++] = c->name;
    }
    counter_value(w, &cseq[k], ssa_rel_time(run, r, c->time), c->value);
  }
  if (rr->nsteps) {
    pf_seq q;
    seq_init(w, &q, named_track(w, process, "overlap ratio", 1099, 0));
    for (size_t s = 0; s < rr->nsteps && !w->failed; s++) {
      const ssa_window *win = &rr->windows[s];
      if (win->comm > 0)
        counter_value(w, &q, ssa_rel_time(run, r, win->start),
                      (double)win->overlap / (double)win->comm);
    }
    tab_free(&q.tab);
  }
  rc = w->failed ? STEPSCOPE_E_NOMEM : 0;
out:
  for (uint32_t l = 0; lanes && l < r->nlanes; l++) {
    ssa_lanes_free(&lanes[l].lanes);
    free(lanes[l].extra);
    tab_free(&lanes[l].seq.tab);
  }
  free(lanes);
  for (int k = 0; k < D_N; k++)
    tab_free(&d.seq[k].tab);
  for (size_t k = 0; k < ncnames; k++)
    tab_free(&cseq[k].tab);
  free(cseq);
  free(cname);
  free(order);
  free(ll.first);
  free(ll.ops);
  return rc;
}

typedef struct path_track {
  pf_writer *w;
  pf_seq seq;
} path_track;

static void path_piece(void *ctx, const ssa_cp_segment *s, int64_t step, int64_t from, int64_t to) {
  path_track *p = ctx;
  pf_writer *w = p->w;
  char label[64];
  event_prepare(w, &p->seq);
  uint64_t cat = intern(w, &p->seq, SP_CATEGORY, SRC_CONST, K_DERIVED, NULL);
  uint64_t sn = intern(w, &p->seq, SP_DEBUG, SRC_CONST, K_STEP, NULL);
  event_open(w, &p->seq, from, TYPE_BEGIN);
  pb_text(&w->b, TE_NAME, ssa_cp_segment_label(w->a, s, label, sizeof label));
  pb_uint(&w->b, TE_CATEGORY_IIDS, cat);
  pb_begin(&w->b, TE_DEBUG);
  pb_uint(&w->b, DA_NAME_IID, sn);
  pb_int(&w->b, DA_INT, step);
  pb_end(&w->b);
  event_close(w);
  event_prepare(w, &p->seq);
  event_open(w, &p->seq, to, TYPE_END);
  event_close(w);
  w->slices++;
}

/* The critical path's track under every written rank's process. */
static int export_critical_path(pf_writer *w) {
  const ssa_analysis *a = w->a;
  for (size_t i = 0; a->critical_path && i < a->nranks && !w->failed; i++) {
    if (!w->process_of[i]) continue;
    path_track p = {.w = w};
    seq_init(w, &p.seq, named_track(w, w->process_of[i], "critical path", 1004, -1));
    int rc = ssa_cp_track(a->critical_path, (uint32_t)i, path_piece, &p);
    tab_free(&p.seq.tab);
    if (rc) return rc;
  }
  return w->failed ? STEPSCOPE_E_NOMEM : 0;
}

/* One lane's replayed ops, v[0, n), under the replay process. */
static void replay_lane(pf_writer *w, uint64_t process, const ssa_rank *r,
                        const ssa_replay_slice *v, size_t n) {
  lane_out lo = {.w = w, .process = process, .r = r, .lane = r->ops[v[0].op].lane};
  ssa_lane_label(r, &r->lanes[lo.lane], lo.label, sizeof lo.label);
  seq_init(w, &lo.seq, named_track(w, process, lo.label, (int64_t)lo.lane * 64, -1));
  ssa_lanes_init(&lo.lanes);
  lo.lanes.on_close = on_close;
  lo.lanes.ctx = &lo;
  for (size_t k = 0; k < n && !w->failed; k++) {
    uint32_t sub = place(&lo, v[k].start, v[k].end);
    event_prepare(w, &lo.seq);
    uint64_t nm = op_name(w, &lo.seq, r, &r->ops[v[k].op]);
    uint64_t cat = intern(w, &lo.seq, SP_CATEGORY, SRC_CONST, K_DERIVED, NULL);
    event_open(w, &lo.seq, ssa_rel_time(w->a->run, r, v[k].start), TYPE_BEGIN);
    if (sub) pb_uint(&w->b, TE_TRACK_UUID, sub_track(&lo, sub));
    pb_uint(&w->b, TE_NAME_IID, nm);
    pb_uint(&w->b, TE_CATEGORY_IIDS, cat);
    event_close(w);
    w->slices++;
  }
  ssa_lanes_finish(&lo.lanes);
  ssa_lanes_free(&lo.lanes);
  free(lo.extra);
  tab_free(&lo.seq.tab);
}

/* export --replay: per written rank a process "replay: EDITS (rank R)" holding its ops at
 * their replayed times, a track per lane (replay_slices.c). */
static int export_replay(pf_writer *w) {
  const ssa_analysis *a = w->a;
  for (size_t i = 0; a->opt.export_replay && i < a->nranks && !w->failed; i++) {
    const ssa_rank *r = a->ranks[i].rank;
    ssa_replay_slice *v;
    size_t n;
    if (!w->process_of[i]) continue;
    if (ssa_replay_slices(a, i, &v, &n)) return STEPSCOPE_E_NOMEM;
    char label[600];
    ssa_replay_process_label(a, r, label, sizeof label);
    uint64_t process = write_process(w, label, ssa_replay_pid(a, r));
    for (size_t b = 0, e; b < n && !w->failed; b = e) {
      for (e = b; e < n && r->ops[v[e].op].lane == r->ops[v[b].op].lane;)
        e++;
      replay_lane(w, process, r, v + b, e - b);
    }
    free(v);
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
    rc = export_rank(&w, rr, base, flow_base);
  }
  if (!rc) rc = export_critical_path(&w);
  if (!rc) rc = export_replay(&w);
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
