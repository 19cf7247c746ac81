/*
 * perfetto_writer.h — the packet stream of the Perfetto export (perfetto_export.c says what the
 * file holds and why it is laid out so): the field numbers of the .proto messages it writes, the
 * writer's state, its packet sequences with their interned strings and incremental clock
 * (perfetto_writer.c), the tracks of one rank (perfetto_rank.c) and the table of collective
 * instances whose flows cross ranks (perfetto_export.c). Internal to the export floor.
 */
#ifndef PERFETTO_WRITER_H
#define PERFETTO_WRITER_H

#include <stdint.h>

#include "pb_encode.h"
#include "ssa_export.h"

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

/* ---- interned strings ---- */
enum { SP_CATEGORY, SP_NAME, SP_DEBUG, SP_STRING, SP_N };
enum { SRC_CONST, SRC_RANK, SRC_COMM };

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

/* A string field, always valid UTF-8 as in the JSON export: each invalid
 * sequence (its maximal subpart) becomes U+FFFD. */
void pf_text(pb_buf *b, uint32_t field, const char *s);

/* The iid of a string of `space` on the sequence, queued for the packet
 * when new. For SRC_CONST `value` is a K_ constant, for SRC_RANK a string
 * id of rank r, for SRC_COMM a communicator id (written in hex). */
uint64_t pf_intern(pf_writer *w, pf_seq *s, uint32_t space, uint32_t src, uint64_t value,
                   const ssa_rank *r);
void pf_tab_free(intern_tab *t);

/* A new sequence whose events go to `track` by default. */
void pf_seq_init(pf_writer *w, pf_seq *s, uint64_t track);
/* Before the lookups of an event: starts the sequence, or starts it over
 * when its tables are full. */
void pf_event_prepare(pf_writer *w, pf_seq *s);
/* Opens the packet of an event at time t (relative ns) with the queued
 * interned data, and its TrackEvent; close with pf_event_close. */
void pf_event_open(pf_writer *w, pf_seq *s, int64_t t, int type);
void pf_event_close(pf_writer *w);
void pf_debug_uint(pb_buf *b, uint64_t name_iid, uint64_t v);
void pf_debug_string(pb_buf *b, uint64_t name_iid, uint64_t str_iid);
/* A counter event of value v at time t. */
void pf_counter_value(pf_writer *w, pf_seq *q, int64_t t, double v);

/* Track descriptors; each returns the track's uuid. A named track under a process, in the
 * process' explicit order (a counter track when counter_unit >= 0: 0 none, else its unit). */
uint64_t pf_named_track(pf_writer *w, uint64_t parent, const char *name, int64_t order,
                        int counter_unit);
/* A thread track: Perfetto puts it under its process by pid (no parent). */
uint64_t pf_thread_track(pf_writer *w, int pid, long tid, const char *name, int64_t order);
/* A process ("rank R (host, GPU d)"). */
uint64_t pf_process_track(pf_writer *w, const char *label, int pid);

/* The count of members with an op of collective instance (comm_id, seq), NULL when it has
 * none (perfetto_export.c); its place in the table gives the instance's flow id. */
uint32_t *pf_coll_slot(pf_writer *w, uint64_t comm_id, uint64_t seq, int insert);

/* One rank's process and tracks (perfetto_rank.c): its host threads' and streams' slices with
 * their launch flows, derived tracks, steps and counters. tid_base and flow_base: the JSON
 * export's thread ids and the flow ids of the rank's ops start past these. */
int pf_export_rank(pf_writer *w, const ssa_rank_result *rr, long tid_base, uint64_t flow_base);
/* export --replay: per written rank a process "replay: EDITS (rank R)" holding its ops at
 * their replayed times, a track per lane (perfetto_rank.c, replay_slices.c). */
int pf_export_replay(pf_writer *w);

#endif
