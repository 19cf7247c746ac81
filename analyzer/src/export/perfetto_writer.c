/*
 * perfetto_writer.c — the packet stream of the Perfetto export (perfetto_writer.h): packet
 * sequences with their state packets (cleared incremental state, the incremental clock, the
 * defaults), strings interned per sequence, events with their timestamps as deltas on the
 * sequence's clock, debug annotations, counter values and track descriptors. The output buffer
 * is drained after every packet past 256 KiB. perfetto_export.c describes the layout and why.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_writer.h"
#include "sc_hash.h"
#include "sc_json.h"

void pf_text(pb_buf *b, uint32_t field, const char *s) {
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

/* the InternedData field of each space */
static const uint32_t space_field[SP_N] = {ID_CATEGORIES, ID_NAMES, ID_DEBUG_NAMES, ID_STRINGS};

/* The text of constant string k (a K_ constant). */
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

static void drain(pf_writer *w) {
  if (w->b.failed) w->failed = 1;
  if (w->b.len >= (256u << 10)) {
    ssa_out_write(&w->o, (const char *)w->b.p, w->b.len);
    w->b.len = 0;
  }
}

void pf_tab_free(intern_tab *t) {
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

uint64_t pf_intern(pf_writer *w, pf_seq *s, uint32_t space, uint32_t src, uint64_t value,
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

void pf_seq_init(pf_writer *w, pf_seq *s, uint64_t track) {
  memset(s, 0, sizeof *s);
  s->id = w->next_seq++;
  s->track = track;
}

void pf_event_prepare(pf_writer *w, pf_seq *s) {
  w->npend = 0;
  if (!s->started || s->tab.count + 16 > w->intern_limit) state_packet(w, s);
}

void pf_event_open(pf_writer *w, pf_seq *s, int64_t t, int type) {
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
      pf_text(b, 2, w->pend[i].str);
      pb_end(b);
    }
    pb_end(b);
    w->npend = 0;
  }
  pb_begin(b, TP_TRACK_EVENT);
  pb_uint(b, TE_TYPE, (uint64_t)type);
}

void pf_event_close(pf_writer *w) {
  pb_end(&w->b);
  pb_end(&w->b);
  w->packets++;
  drain(w);
}

void pf_debug_uint(pb_buf *b, uint64_t name_iid, uint64_t v) {
  pb_begin(b, TE_DEBUG);
  pb_uint(b, DA_NAME_IID, name_iid);
  pb_uint(b, DA_UINT, v);
  pb_end(b);
}

void pf_debug_string(pb_buf *b, uint64_t name_iid, uint64_t str_iid) {
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

uint64_t pf_named_track(pf_writer *w, uint64_t parent, const char *name, int64_t order,
                        int counter_unit) {
  uint64_t uuid = descriptor_begin(w);
  pb_uint(&w->b, TD_PARENT, parent);
  pf_text(&w->b, TD_NAME, name);
  pb_int(&w->b, TD_SIBLING_RANK, order);
  if (counter_unit >= 0) {
    pb_begin(&w->b, TD_COUNTER);
    if (counter_unit > 0) pb_uint(&w->b, 3, (uint64_t)counter_unit);
    pb_end(&w->b);
  }
  descriptor_end(w);
  return uuid;
}

uint64_t pf_thread_track(pf_writer *w, int pid, long tid, const char *name, int64_t order) {
  uint64_t uuid = descriptor_begin(w);
  pb_int(&w->b, TD_SIBLING_RANK, order);
  pb_begin(&w->b, TD_THREAD);
  pb_int(&w->b, 1, pid);
  pb_int(&w->b, 2, tid);
  pf_text(&w->b, 5, name);
  pb_end(&w->b);
  descriptor_end(w);
  return uuid;
}

uint64_t pf_process_track(pf_writer *w, const char *label, int pid) {
  uint64_t process = descriptor_begin(w);
  pb_uint(&w->b, TD_CHILD_ORDERING, ORDER_EXPLICIT);
  pb_begin(&w->b, TD_PROCESS);
  pb_int(&w->b, 1, pid);
  pf_text(&w->b, 6, label);
  pb_end(&w->b);
  descriptor_end(w);
  return process;
}

void pf_counter_value(pf_writer *w, pf_seq *q, int64_t t, double v) {
  pf_event_prepare(w, q);
  pf_event_open(w, q, t, TYPE_COUNTER);
  if (v == floor(v) && fabs(v) < 9007199254740992.0)
    pb_int(&w->b, TE_COUNTER, (int64_t)v);
  else
    pb_double(&w->b, TE_DOUBLE_COUNTER, v);
  pf_event_close(w);
}
