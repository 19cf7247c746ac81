/*
 * skip_template.c — see skip_template.h: the rest of a skipped event object
 * checked by comparison with the last one of its kind.
 *
 * Why: the Kineto reader skips most of some events unread, but must still
 * check that what it skips is valid JSON (kineto_fast.c: strictness is
 * kept by taking less, not by checking less). Flow events ("ph": "s"/"f",
 * a quarter to a third of the events of HTA's traces) are skipped after
 * their "ph", and their rest — `, "id": 73689, "pid": 783658, "tid":
 * 783658, "ts": 1669783687389292,\n    "cat": "ac2g", "name": "ac2g"\n  }`
 * — differs from one flow to the next only in its numbers; the rest of a
 * python_function event (nine tenths of vLLM's capture traces), skipped
 * after its "cat", only in its numbers and its name. Tokenizing them cost
 * ~50 ns a flow (measured: skipping flows unchecked made the one-thread
 * import of df_index_resolver 10 % faster) and more than half the CPU of
 * vLLM's graph_capture trace, most of it in branches on where each token
 * ends.
 *
 * How: a rest that the tokenizer has checked (skip_members) is kept as a
 * template: its bytes, cut at every run of digits outside strings and at
 * every value string (a string not followed by ':'; keys stay in the
 * bytes). A later rest matches when it has the same bytes in between and
 * - where the template had a number's integer part (a run not after '.',
 *   'e' or 'E', nor after the sign of an exponent): an optional '-', then
 *   "0" or a digit 1-9 and more digits;
 * - where it had a fraction's or an exponent's digits: one digit or more;
 * - where it had a value string: a string without escape, control or
 *   non-ASCII byte (what the fast path takes anywhere; the one learned is
 *   compared whole first, the cheap case of flows).
 * That text is valid JSON with the same structure: it is the checked text
 * with some numbers and value strings replaced by other valid ones (a
 * number's pieces stay pieces of a number, and every run ends where the
 * template's next literal byte, never a digit, matches). Anything else is
 * no match; the caller then tokenizes and learns the new rest. A template
 * whose key keeps missing (rests of one kind with other keys) stops being
 * relearned, so it costs one failed comparison.
 *
 * Correctness does not depend on which template is tried: the key only
 * picks a likely one.
 */
#include "skip_template.h"

#include <string.h>

#include "json_scan.h"

enum { THEN_END = 0, THEN_INT, THEN_DIGITS, THEN_STRING };

void ssa_skip_templates_init(ssa_skip_templates *t) {
  for (int i = 0; i < SSA_SKIP_TEMPLATES; i++) {
    t->slot[i].key = 0;
    t->slot[i].hits = t->slot[i].misses = 0;
    t->slot[i].nsegs = 0;
  }
}

static inline uint64_t load64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline uint32_t load32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* Whether a[0..n) == b[0..n), reading only those bytes. */
static inline int same_bytes(const unsigned char *a, const unsigned char *b, size_t n) {
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8)
      if (load64(a + i) != load64(b + i)) return 0;
    return load64(a + n - 8) == load64(b + n - 8);
  }
  if (n >= 4) return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

static inline int is_digit(unsigned c) {
  return c - '0' < 10u;
}

const unsigned char *ssa_skip_template_match(ssa_skip_templates *ts, unsigned key,
                                             const unsigned char *p, const unsigned char *e) {
  ssa_skip_template *t = &ts->slot[key & (SSA_SKIP_TEMPLATES - 1)];
  if (t->key != key || t->nsegs == 0) return NULL;
  for (unsigned i = 0; i < t->nsegs; i++) {
    const ssa_skip_seg *s = &t->seg[i];
    if ((size_t)(e - p) < s->len || !same_bytes(p, t->text + s->off, s->len)) goto miss;
    p += s->len;
    if (s->then == THEN_END) {
      t->hits++;
      return p;
    }
    if (s->then == THEN_STRING) { /* the string learned, quotes and all, or any plain string */
      size_t quoted = (size_t)s->slen + 2;
      if ((size_t)(e - p) >= quoted && same_bytes(p, t->text + s->off + s->len, quoted)) {
        p += quoted;
        continue;
      }
      const unsigned char *q;
      if (p >= e || *p != '"' ||
          (q = scan_special((unsigned char *)p + 1, (unsigned char *)e)) >= e || *q != '"')
        goto miss;
      p = q + 1;
      continue;
    }
    if (s->then == THEN_INT && p < e && *p == '-') p++;
    if (p >= e || !is_digit(*p)) goto miss;
    if (s->then == THEN_INT && *p == '0') {
      p++; /* a digit after it fails the next literal, which is no digit */
    } else {
      while (p < e && is_digit(*p))
        p++;
    }
  }
miss:
  t->misses++;
  return NULL;
}

void ssa_skip_template_learn(ssa_skip_templates *ts, unsigned key, const unsigned char *p,
                             const unsigned char *end) {
  ssa_skip_template *t = &ts->slot[key & (SSA_SKIP_TEMPLATES - 1)];
  size_t n = (size_t)(end - p);
  int fits = n > 0 && n <= SSA_SKIP_TEMPLATE_TEXT && end[-1] == '}';
  if (t->key != key) {
    if (t->nsegs && t->hits > t->misses) {
      t->misses++; /* another kind's, and useful: kept until it is not */
      return;
    }
    if (!fits) return;
    t->key = key;
    t->hits = t->misses = 0;
  } else if (t->misses > 8 && t->misses > t->hits) {
    return; /* it keeps missing: the rests of this kind differ in more than numbers */
  } else if (!fits) {
    t->misses++; /* too long to learn: the template there is kept, the miss counted */
    return;
  }
  t->nsegs = 0;
  t->misses++; /* undone once learned: a text with too many numbers counts as a miss */
  memcpy(t->text, p, n);
  const unsigned char *x = t->text;
  unsigned nsegs = 0;
  size_t lit = 0; /* where the current literal began */
  for (size_t i = 0; i < n; i++) {
    unsigned c = x[i];
    if (c ==
        '"') { /* a string (no escapes in a checked text): a key stays literal, a value is any */
      size_t close = i + 1;
      while (close < n && x[close] != '"')
        close++;
      if (close >= n) return;
      size_t after = close + 1;
      while (after < n &&
             (x[after] == ' ' || x[after] == '\n' || x[after] == '\r' || x[after] == '\t'))
        after++;
      if (after >= n || x[after] != ':') {
        if (nsegs + 1 >= SSA_SKIP_TEMPLATE_SEGS) return;
        t->seg[nsegs++] = (ssa_skip_seg){(uint16_t)lit, (uint16_t)(i - lit),
                                         (uint16_t)(close - i - 1), THEN_STRING};
        lit = close + 1;
      }
      i = close;
      continue;
    }
    if (!is_digit(c)) continue;
    if (i == 0) return; /* a rest starts with ',', '}' or a blank */
    size_t run = i;
    while (i < n && is_digit(x[i]))
      i++;
    unsigned prev = x[run - 1];
    int exponent_sign =
        (prev == '+' || prev == '-') && run >= 2 && (x[run - 2] == 'e' || x[run - 2] == 'E');
    uint8_t then =
        prev == '.' || prev == 'e' || prev == 'E' || exponent_sign ? THEN_DIGITS : THEN_INT;
    size_t lit_end =
        then == THEN_INT && prev == '-' ? run - 1 : run; /* the sign is the match's to take */
    if (nsegs + 1 >= SSA_SKIP_TEMPLATE_SEGS) return;
    t->seg[nsegs++] = (ssa_skip_seg){(uint16_t)lit, (uint16_t)(lit_end - lit), 0, then};
    lit = i;
    i--; /* x[i] is the byte after the run: the loop looks at it next */
  }
  t->seg[nsegs++] = (ssa_skip_seg){(uint16_t)lit, (uint16_t)(n - lit), 0, THEN_END};
  t->misses--;
  t->nsegs = (uint16_t)nsegs;
}
