/*
 * kineto_fast.c — see kineto_fast.h: one Kineto event object parsed whole,
 * straight over the buffer, into a kevent.
 *
 * Why: the token-by-token reader (json_stream.c driven by kineto_reader.c's
 * read_event) pays for its generality on every token: a call per token,
 * the grammar state and the token kept in the stream, numbers and strings
 * handed out through it, key lookups by text. A Kineto trace is hundreds of
 * thousands of small objects of one shape ({"ph": "X", "cat": ..., "name":
 * ..., "pid": ..., "tid": ..., "ts": ..., "dur": ..., "args": {...}}), and
 * on real traces that per-token cost was most of the import (perf on HTA's
 * df_index_resolver trace: 73 % of the CPU in the tokenizer, ~550 cycles an
 * event). Here one event is one pass of a pointer over the bytes, with the
 * grammar in the control flow and nothing stored but the kevent's fields.
 *
 * Strictness is kept by taking less, not by checking less: everything
 * this reader accepts is valid JSON (checked here: the grammar, the string
 * bodies, the numbers) that the general reader would turn into the same
 * kevent, and anything else makes it give up (NULL) before the caller has
 * consumed a byte. The caller then reads that event token by token, with
 * its messages and byte offsets. What it gives up on: a string with an
 * escape, a control character or a non-ASCII byte; a value of a kind that
 * a key does not usually have (a quoted number, a fractional id, a pid
 * that is an object); `ts`/`dur` with an exponent, more than 3 decimals or
 * 20 digits; nesting deeper than FAST_DEPTH;
 * and an event that reaches the end of the buffered bytes. The fuzz target
 * fuzz_kineto imports every input both ways and requires the same result.
 *
 * The field semantics mirror read_event and read_args in kineto_reader.c
 * (members in document order, a repeated key overwrites, the same early
 * exits for unimported categories and non-complete events); the decisions
 * themselves (which key, which category, what may be skipped) are shared
 * through kineto_event.h.
 */
#include "kineto_fast.h"

#include <stddef.h>
#include <string.h>

#include "json_scan.h"

#define FAST_DEPTH 32 /* deeper values are left to the general reader */

typedef const unsigned char *cp;

/* After the opening quote: the closing quote of a plain string body (no
 * escape, control or non-ASCII byte) that ends before e; NULL otherwise.
 * The key form scans short keys byte by byte (json_scan.h). */
static inline cp string_end(cp p, cp e) {
  cp q = scan_special((unsigned char *)p, (unsigned char *)e);
  return q < e && *q == '"' ? q : NULL;
}

static inline cp key_end(cp p, cp e) {
  cp q = scan_key((unsigned char *)p, (unsigned char *)e);
  return q < e && *q == '"' ? q : NULL;
}

/* The integer part of a number at p, without its sign, as JSON writes it
 * (no leading zero): its digits accumulated in *v (wrapping past 19 digits:
 * callers count them) and its end; NULL when p does not start one. */
static inline cp int_part(cp p, cp e, uint64_t *v) {
  uint64_t x = 0;
  if (*p == '0')
    p++;
  else if (*p >= '1' && *p <= '9')
    while (p < e && scan_is_digit(*p))
      x = x * 10 + (uint64_t)(*p++ - '0');
  else
    return NULL;
  *v = x;
  return p;
}

/* A number that is a plain unsigned integer of at most 19 digits (so exact
 * in 64 bits): its value and its end. NULL for any other form, or when it
 * may go on past e. */
static inline cp uint_value(cp p, cp e, uint64_t *out) {
  cp s = p;
  if (!(p = int_part(p, e, out))) return NULL;
  if (p >= e || p - s > 19 || scan_is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E') return NULL;
  return p;
}

/* `ts` / `dur`: a decimal number of microseconds, as integer nanoseconds,
 * when it has no exponent, at most 3 decimals and at most 19 digits, and
 * the result fits in int64 (js_tok_scaled gives the same value then). */
static inline cp ns_value(cp p, cp e, int64_t *out) {
  int neg = *p == '-';
  if (neg && ++p >= e) return NULL;
  cp s = p;
  uint64_t m;
  if (!(p = int_part(p, e, &m))) return NULL;
  ptrdiff_t digits = p - s, frac = 0;
  if (p < e && *p == '.') {
    cp f = ++p;
    while (p < e && scan_is_digit(*p))
      m = m * 10 + (uint64_t)(*p++ - '0');
    frac = p - f;
    if (frac == 0) return NULL;
    digits += frac;
  }
  if (p >= e || digits > 19 || frac > 3 || scan_is_digit(*p) || *p == 'e' || *p == 'E') return NULL;
  for (ptrdiff_t i = frac; i < 3; i++) {
    if (m > UINT64_MAX / 10) return NULL;
    m *= 10;
  }
  if (m > (uint64_t)INT64_MAX) return NULL;
  *out = neg ? -(int64_t)m : (int64_t)m;
  return p;
}

/* ---- structure ---- */

/* Inside a container that ends with `close`, p just past its opening
 * bracket (after = 0) or just past one of its elements (after = 1): the
 * next element's first byte, with *closed = 0, or the byte after `close`,
 * with *closed = 1; NULL when neither is there before e. */
__attribute__((always_inline)) static inline cp next_in(cp p, cp e, int after, unsigned char close,
                                                        int *closed) {
  p = skip_blank(p, e);
  if (p >= e) return NULL;
  *closed = *p == close;
  if (*closed) return p + 1;
  if (after) {
    if (*p != ',') return NULL;
    p = skip_blank(p + 1, e);
    if (p >= e) return NULL;
  }
  return p;
}

/* Just past a key's closing quote: the ':' and the blanks around it; the
 * value's first byte, or NULL. */
__attribute__((always_inline)) static inline cp after_key(cp p, cp e) {
  p = skip_blank(p, e);
  if (p >= e || *p != ':') return NULL;
  p = skip_blank(p + 1, e);
  return p < e ? p : NULL;
}

static cp skip_value(cp p, cp e, int depth);

/* An object's members, checked and skipped, from just past its '{' (after
 * = 0) or just past one of its values (after = 1): the byte after its '}'. */
static cp skip_members(cp p, cp e, int depth, int after) {
  int closed;
  for (; (p = next_in(p, e, after, '}', &closed)) && !closed; after = 1) {
    cp q;
    if (*p != '"' || !(q = string_end(p + 1, e)) || !(p = after_key(q + 1, e)) ||
        !(p = skip_value(p, e, depth)))
      return NULL;
  }
  return p;
}

/* Any value starting at p (< e), checked and skipped: its end. */
static cp skip_value(cp p, cp e, int depth) {
  cp q;
  int closed;
  switch (*p) {
  case '"': q = string_end(p + 1, e); return q ? q + 1 : NULL;
  case '{': return depth < FAST_DEPTH ? skip_members(p + 1, e, depth + 1, 0) : NULL;
  case '[':
    if (depth >= FAST_DEPTH) return NULL;
    p++;
    for (int after = 0; (p = next_in(p, e, after, ']', &closed)) && !closed; after = 1)
      if (!(p = skip_value(p, e, depth + 1))) return NULL;
    return p;
  case 't': return e - p > 4 && !memcmp(p, "true", 4) ? p + 4 : NULL;
  case 'f': return e - p > 5 && !memcmp(p, "false", 5) ? p + 5 : NULL;
  case 'n': return e - p > 4 && !memcmp(p, "null", 4) ? p + 4 : NULL;
  default: return number_end(p, e);
  }
}

/* ---- the args ---- */

/* grid / block: an array of plain unsigned integers, the first three kept
 * (capped at UINT32_MAX) as read_u32_triple keeps them. */
static cp u32_triple(cp p, cp e, uint32_t out[3]) {
  int closed;
  if (*p != '[') return NULL;
  p++;
  for (int i = 0; (p = next_in(p, e, i > 0, ']', &closed)) && !closed; i++) {
    uint64_t v;
    if (!(p = uint_value(p, e, &v))) return NULL;
    if (i < 3) out[i] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
  }
  return p;
}

/* "Process Group Ranks": a string ("[0, 1, 2, 3]") or an array of plain
 * integers, kept as read_args keeps them. */
static cp member_list(kevent *ev, cp p, cp e) {
  int closed;
  ev->pg_ranks[0] = 0;
  if (*p == '"') {
    cp q = string_end(p + 1, e);
    if (!q) return NULL;
    kevent_ranks_append(ev, (const char *)p + 1, (size_t)(q - p - 1));
    return q + 1;
  }
  if (*p != '[') return NULL;
  p++;
  for (int after = 0; (p = next_in(p, e, after, ']', &closed)) && !closed; after = 1) {
    uint64_t v;
    cp s = p;
    if (!(p = uint_value(p, e, &v))) return NULL;
    kevent_ranks_append(ev, (const char *)s, (size_t)(p - s));
  }
  return p;
}

/* A plain string value copied into dst (cap bytes, cut to fit). */
static cp short_string(cp p, cp e, char *dst, size_t cap) {
  cp q;
  if (*p != '"' || !(q = string_end(p + 1, e))) return NULL;
  copy_tok(dst, cap, (const char *)p + 1, (size_t)(q - p - 1));
  return q + 1;
}

/* A CPU op's input value (p at its first byte) appended to ev->inputs as compact JSON, as
 * kineto_reader.c's put_inputs writes it: arrays, plain strings (their bytes as they are),
 * numbers (their text), true, false, null; an object sets inputs_cut and is skipped. */
static cp inputs_value(kevent *ev, cp p, cp e, int depth) {
  cp q;
  int closed;
  switch (*p) {
  case '"':
    if (!(q = string_end(p + 1, e))) return NULL;
    kevent_inputs_put(ev, (const char *)p, (size_t)(q + 1 - p));
    return q + 1;
  case '{': ev->inputs_cut = 1; return skip_value(p, e, depth);
  case '[':
    if (depth >= FAST_DEPTH) return NULL;
    kevent_inputs_put(ev, "[", 1);
    p++;
    for (int after = 0; (p = next_in(p, e, after, ']', &closed)) && !closed; after = 1) {
      if (after) kevent_inputs_put(ev, ",", 1);
      if (!(p = inputs_value(ev, p, e, depth + 1))) return NULL;
    }
    if (p) kevent_inputs_put(ev, "]", 1);
    return p;
  default:
    if (!(q = skip_value(p, e, depth))) return NULL;
    kevent_inputs_put(ev, (const char *)p, (size_t)(q - p));
    return q;
  }
}

/* The args object (p at its '{'), as read_args reads it. */
static cp read_args(kevent *ev, cp p, cp e) {
  int closed;
  p++;
  for (int after = 0; (p = next_in(p, e, after, '}', &closed)) && !closed; after = 1) {
    cp ks = p + 1, ke;
    if (*p != '"' || !(ke = string_end(ks, e)) ||
        !(p = after_key(ke + 1, e))) /* args keys: often long */
      return NULL;
    uint64_t u;
    const kafield *f = &kargs_field[args_key((const char *)ks, (size_t)(ke - ks))];
    switch (f->fill) {
    case KA_SKIP: p = skip_value(p, e, 2); break;
    case KA_TRIPLE: p = u32_triple(p, e, kevent_triple(ev, f)); break;
    case KA_TEXT: p = short_string(p, e, kevent_text(ev, f), KSHORT); break;
    case KA_RANKS: p = member_list(ev, p, e); break;
    case KA_INPUTS:
      if (!inputs_wanted(ev)) {
        p = skip_value(p, e, 2);
        break;
      }
      kevent_inputs_key(ev, (const char *)ks, (size_t)(ke - ks));
      p = inputs_value(ev, p, e, 2);
      break;
    default:
      if ((p = uint_value(p, e, &u))) kevent_set_u64(ev, f, u);
      break;
    }
    if (!p) return NULL;
  }
  return p;
}

/* ---- the event ---- */

/* Kineto writes an event's keys in one order: ph, cat, name, pid, tid, ts,
 * dur, args. The key expected next is checked by comparing the bytes at p
 * with its quoted text (a few word compares) instead of scanning for the
 * closing quote and looking the text up: the key when it is there (its
 * text then ends at p + key_len[key]), else 0 (scanned and looked up). */
static const unsigned char key_after[] = {
    [E_NONE] = E_NONE, [E_PH] = E_CAT, [E_CAT] = E_NAME, [E_NAME] = E_PID,  [E_PID] = E_TID,
    [E_TID] = E_TS,    [E_TS] = E_DUR, [E_DUR] = E_ARGS, [E_ARGS] = E_NONE,
};
static const unsigned char key_len[] = {
    [E_NONE] = 0, [E_PH] = 4, [E_CAT] = 5, [E_NAME] = 6, [E_PID] = 5,
    [E_TID] = 5,  [E_TS] = 4, [E_DUR] = 5, [E_ARGS] = 6,
};

#define IS(text) (e - p > (ptrdiff_t)sizeof text && !memcmp(p, text, sizeof text - 1))
static inline int expected_key(cp p, cp e, int expect) {
  switch (expect) {
  case E_PH: return IS("\"ph\"") ? E_PH : 0;
  case E_CAT: return IS("\"cat\"") ? E_CAT : 0;
  case E_NAME: return IS("\"name\"") ? E_NAME : 0;
  case E_PID: return IS("\"pid\"") ? E_PID : 0;
  case E_TID: return IS("\"tid\"") ? E_TID : 0;
  case E_TS: return IS("\"ts\"") ? E_TS : 0;
  case E_DUR: return IS("\"dur\"") ? E_DUR : 0;
  case E_ARGS: return IS("\"args\"") ? E_ARGS : 0;
  default: return 0;
  }
}

/* The same for keys out of that order (metadata events begin with "name",
 * flows put "cat" after "ts"): the key told by its first letter, then
 * compared whole; 0 for any other key (scanned and looked up). */
static inline int known_key(cp p, cp e) {
  if (e - p < 2) return 0;
  switch (p[1]) {
  case 'p': return IS("\"ph\"") ? E_PH : IS("\"pid\"") ? E_PID : 0;
  case 'c': return IS("\"cat\"") ? E_CAT : 0;
  case 'n': return IS("\"name\"") ? E_NAME : 0;
  case 't': return IS("\"tid\"") ? E_TID : IS("\"ts\"") ? E_TS : 0;
  case 'd': return IS("\"dur\"") ? E_DUR : 0;
  case 'a': return IS("\"args\"") ? E_ARGS : 0;
  default: return 0;
  }
}
#undef IS

/* The rest of an event that is skipped (p just past one of its values):
 * matched against the template learned for `key` when there is one, else
 * checked member by member and learned (skip_template.c). */
static cp skip_known(ssa_skip_templates *t, unsigned key, cp p, cp e) {
  cp q;
  if (t && (q = ssa_skip_template_match(t, key, p, e))) return q;
  q = skip_members(p, e, 1, 1);
  if (t && q) ssa_skip_template_learn(t, key, p, q);
  return q;
}

/* A template key for events named name[0..n) (the name came before the
 * part skipped: metadata events, whose rests differ by name): the length
 * and the first and last 8 bytes mixed (names that share them share a
 * template, which costs only misses); never a key of an event without a
 * name (< 0x200). */
static unsigned name_key_of(const char *name, size_t n) {
  uint64_t a = 0, b = 0;
  memcpy(&a, name, n < 8 ? n : 8);
  if (n > 8) memcpy(&b, name + n - 8, 8);
  uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ull) ^ n) * 0xff51afd7ed558ccdull;
  return (unsigned)(h >> 40) | 0x1000000u;
}

const unsigned char *ssa_kineto_fast_event(kevent *ev, const unsigned char *p,
                                           const unsigned char *e, uint64_t *truncated_names,
                                           ssa_skip_templates *templates) {
  if (p >= e || *p != '{') return NULL;
  kevent_clear(ev);
  uint64_t truncated = 0;
  const char *name = NULL; /* the name's text in the buffer, name_n bytes */
  size_t name_n = 0;
  int closed, expect = E_PH;
  p++;
  for (int after = 0; (p = next_in(p, e, after, '}', &closed)) && !closed; after = 1) {
    cp q;
    int key = expected_key(p, e, expect);
    if (!key) key = known_key(p, e);
    if (key) {
      p += key_len[key];
    } else {
      cp ks = p + 1, ke;
      if (*p != '"' || !(ke = key_end(ks, e))) return NULL;
      key = event_key((const char *)ks, (size_t)(ke - ks));
      p = ke + 1;
    }
    expect = key_after[key];
    if (!(p = after_key(p, e))) return NULL;
    switch (key) {
    case E_PH:
    case E_CAT:
    case E_NAME: {
      if (*p != '"' || !(q = string_end(p + 1, e))) return NULL;
      const char *s = (const char *)p + 1;
      size_t n = (size_t)(q - p - 1);
      if (key == E_PH) {
        if (ev->keep_memory && n == 1 && *s == 'i') return NULL; /* kineto_reader.c reads it */
        if (n == 1) { /* "X", "M", "f"...: no call to memcpy */
          ev->ph[0] = *s;
          ev->ph[1] = 0;
        } else {
          copy_tok(ev->ph, sizeof ev->ph, s, n);
        }
      } else if (key == E_CAT) {
        ev->cat = cat_of(s, n);
        if (ev->cat == KC_OTHER) copy_tok(ev->cat_text, sizeof ev->cat_text, s, n);
      } else { /* kept in the buffer; copied at the end if the event needs it */
        if (n >= sizeof ev->name) truncated++;
        name = s;
        name_n = n;
      }
      p = q + 1;
      break;
    }
    case E_TS:
      if (!(p = ns_value(p, e, &ev->ts))) return NULL;
      ev->has_ts = 1;
      break;
    case E_DUR:
      if (!(p = ns_value(p, e, &ev->dur))) return NULL;
      ev->has_dur = 1;
      break;
    case E_PID:
    case E_TID: {
      uint64_t id;
      if (*p == '"') { /* "Spans", "PyTorch Profiler": hashed as tok_id does */
        if (!(q = string_end(p + 1, e))) return NULL;
        id = sc_fnv1a(SC_FNV1A_INIT, (const char *)p + 1, (size_t)(q - p - 1));
        if (key == E_TID)
          copy_tok(ev->tid_name, sizeof ev->tid_name, (const char *)p + 1, (size_t)(q - p - 1));
        p = q + 1;
      } else if (!(p = uint_value(p, e, &id))) {
        return NULL;
      }
      if (key == E_PID)
        ev->pid = id;
      else
        ev->tid = id;
      break;
    }
    case E_ARGS:
      if (*p != '{') return NULL;
      p = args_unused_named(ev, name, name_n) ? skip_value(p, e, 1) : read_args(ev, p, e);
      break;
    default: p = skip_value(p, e, 1); break;
    }
    if (!p) return NULL;
    if ((key == E_CAT && skip_unimported(ev)) || (key == E_PH && skip_after_ph(ev, name, name_n))) {
      /* the rest, checked, not read; keyed by ph (and whether the
       * category decided it), so flows "s" and "f" each have their own */
      unsigned kind = (unsigned char)ev->ph[0] | (key == E_CAT ? 0x100u : 0u);
      p = skip_known(templates, name ? name_key_of(name, name_n) ^ kind : kind, p, e);
      break;
    }
  }
  if (!p) return NULL;
  /* the name, unless the event is not a complete one: then its conversion
   * only counts it (metadata events come name first: two thirds of HTA's
   * mtia trace) */
  if (name && !skip_after_ph(ev, name, name_n)) {
    copy_tok(ev->name, sizeof ev->name, name, name_n);
    ev->name_len = name_n < sizeof ev->name ? name_n : sizeof ev->name - 1;
  }
  *truncated_names += truncated;
  return p;
}
