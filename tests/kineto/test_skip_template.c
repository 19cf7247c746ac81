/*
 * test_skip_template.c — the skip templates of the Kineto fast path
 * (analyzer/src/import/kineto/skip_template.c): a rest of an event object matches the
 * template of its kind only when it is valid JSON, and then ends where the
 * object ends; rests that differ only in their numbers do match.
 *
 * Hand-written cases (the numbers' forms: "0", leading zeros, signs,
 * fractions, exponents; value strings of any plain text, keys as they are,
 * strings with an escape, a control or a non-ASCII byte; the end of the
 * buffer; the learning rules), then random rests learned and matched
 * against random edits of themselves, every answer checked with the
 * general tokenizer (json_stream.c) on the whole object.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_stream.h"
#include "kineto_check.h"
#include "skip_template.h"

#define HEAD "{\"ph\": \"s\""

/* Whether HEAD + rest[0..n) is exactly one valid JSON value. */
static int valid_object(const char *rest, size_t n) {
  size_t hl = strlen(HEAD);
  char *doc = malloc(hl + n + 1);
  memcpy(doc, HEAD, hl);
  memcpy(doc + hl, rest, n);
  js_stream js;
  int ok = 0;
  if (js_init_buffer(&js, doc, hl + n) == 0) {
    js_kind k;
    while ((k = js_next(&js)) != JS_EOF && k != JS_ERROR) {
    }
    ok = k == JS_EOF;
    js_free(&js);
  }
  free(doc);
  return ok;
}

/* The template for key 's' after learning `learned`, tried on `text`
 * (cut at `avail` bytes when > 0): the length it matched, or -1. */
static long try_match(ssa_skip_templates *t, const char *text, size_t avail) {
  size_t n = avail ? avail : strlen(text);
  const unsigned char *p = (const unsigned char *)text;
  const unsigned char *q = ssa_skip_template_match(t, 's', p, p + n);
  return q ? (long)(q - p) : -1;
}

/* The template for `key` tried on the whole of `text`: as try_match. */
static long try_key(ssa_skip_templates *t, unsigned key, const char *text) {
  const unsigned char *p = (const unsigned char *)text;
  const unsigned char *q = ssa_skip_template_match(t, key, p, p + strlen(text));
  return q ? (long)(q - p) : -1;
}

/* The whole of `text` matches. */
#define CHECK_FULL(t, text) CHECK_EQ(try_match((t), (text), 0), (long)strlen(text))

static void learn(ssa_skip_templates *t, unsigned key, const char *text) {
  CHECK(valid_object(text, strlen(text)));
  ssa_skip_template_learn(t, key, (const unsigned char *)text,
                          (const unsigned char *)text + strlen(text));
}

static const char FLOW[] =
    ", \"id\": 73689, \"pid\": 783658, \"tid\": 783658, \"ts\": 1669783687389292.123,\n"
    "    \"cat\": \"ac2g\", \"name\": \"ac2g\"\n  }";

static void hand_cases(void) {
  ssa_skip_templates t;
  ssa_skip_templates_init(&t);
  CHECK_EQ(try_match(&t, FLOW, 0), -1); /* nothing learned */
  learn(&t, 's', FLOW);
  CHECK_FULL(&t, FLOW);
  /* the same with other numbers, valid */
  static const char *same[] = {
      ", \"id\": 0, \"pid\": 1, \"tid\": 99999999999, \"ts\": 5.000,\n    \"cat\": \"ac2g\", "
      "\"name\": \"ac2g\"\n  }",
      ", \"id\": -5, \"pid\": -0, \"tid\": 7, \"ts\": -12.0,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": 10, \"pid\": 20, \"tid\": 30, \"ts\": 0.0001,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  }",
      /* value strings: any plain text */
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"\", \"name\": \"a longer "
      "name: 12, {}[]\"\n  }",
  };
  for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
    CHECK_FULL(&t, same[i]);
    CHECK(valid_object(same[i], strlen(same[i])));
  }
  /* invalid numbers, or another shape: no match */
  static const char *other[] = {
      ", \"id\": 012, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": 00, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": -, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": --1, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5.,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5.1e3,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5.-1,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"ac2g\", \"nome\": "
      "\"ac2g\"\n  }",
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"ac\\\"g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"ac\tg\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"ac\xc3\xa9g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": 7, \"name\": \"ac2g\"\n  }",
      ", \"id\": \"1\", \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  }",
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\"\n  ]",
      ", \"id\": 1, \"pid\": 1, \"tid\": 1, \"ts\": 5.1,\n    \"cat\": \"ac2g\", \"name\": "
      "\"ac2g\" \n  }",
  };
  for (size_t i = 0; i < sizeof other / sizeof *other; i++)
    CHECK_EQ(try_match(&t, other[i], 0), -1);
  /* the buffer ends inside the rest: no match, whatever was cut */
  for (size_t cut = 1; cut < strlen(FLOW); cut++)
    CHECK_EQ(try_match(&t, FLOW, cut), -1);
  /* a longer buffer: the match ends at the object's '}' */
  char longer[sizeof FLOW + 8];
  snprintf(longer, sizeof longer, "%s,\n  {", FLOW);
  CHECK_EQ(try_match(&t, longer, 0), (long)strlen(FLOW));

  /* exponents: their digits may have leading zeros, their sign is literal */
  ssa_skip_templates x;
  ssa_skip_templates_init(&x);
  learn(&x, 's', ", \"v\": 1.5e-07, \"w\": 2E+3, \"u\": 4e9}");
  CHECK_FULL(&x, ", \"v\": 22.25e-10, \"w\": 0E+03, \"u\": -4e0}");
  CHECK_EQ(try_match(&x, ", \"v\": 2.25e+10, \"w\": 0E+03, \"u\": -4e0}", 0), -1);
  CHECK_EQ(try_match(&x, ", \"v\": 2.25e-, \"w\": 0E+03, \"u\": -4e0}", 0), -1);
  CHECK_EQ(try_match(&x, ", \"v\": 2.25e-1, \"w\": 0E+03, \"u\": -4e}", 0), -1);

  /* nested values; digits inside strings are text, not numbers */
  ssa_skip_templates n;
  ssa_skip_templates_init(&n);
  learn(&n, 's',
        ", \"args\": {\"a\": [1, -2, 3.5, [0]], \"b\": \"x1\", \"c\": true, \"d\": null}}");
  CHECK_FULL(&n,
             ", \"args\": {\"a\": [7, 8, -3.25, [90]], \"b\": \"x1\", \"c\": true, \"d\": null}}");
  CHECK_FULL(&n,
             ", \"args\": {\"a\": [7, 8, -3.25, [90]], \"b\": \"x2\", \"c\": true, \"d\": null}}");
  CHECK_EQ(
      try_match(
          &n, ", \"args\": {\"a\": [7, 8, -3.25, [90]], \"b2\": \"x1\", \"c\": true, \"d\": null}}",
          0),
      -1);
  CHECK_EQ(
      try_match(
          &n,
          ", \"args\": {\"a\": [7, 8, -3.25, [\"90\"]], \"b\": \"x1\", \"c\": true, \"d\": null}}",
          0),
      -1);
  CHECK_EQ(
      try_match(&n,
                ", \"args\": {\"a\": [7, 8, -3.25, [90]], \"b\": \"x1\", \"c\": true, \"d\": nul}}",
                0),
      -1);

  /* another key has no template; a template that keeps missing is not
   * learned again, and one too long is not learned at all */
  CHECK_EQ(try_key(&t, 'f', FLOW), -1);
  ssa_skip_templates m;
  ssa_skip_templates_init(&m);
  learn(&m, 's', ", \"a\": 1}");
  for (int i = 0; i < 12; i++) { /* other keys each time */
    char text[64];
    snprintf(text, sizeof text, ", \"b%c\": 1}", 'a' + i);
    CHECK_EQ(try_match(&m, text, 0), -1);
    learn(&m, 's', text);
  }
  CHECK_EQ(try_match(&m, ", \"bl\": 1}", 0), -1); /* the last text learned, had it still been */
  CHECK_FULL(&m, ", \"bh\": 1}");                 /* the last one learned before it stopped */
  /* a slot's template that matches more than it misses is kept against
   * another key's text; one that does not is replaced */
  ssa_skip_templates k;
  ssa_skip_templates_init(&k);
  unsigned same_slot = 's' + SSA_SKIP_TEMPLATES; /* another key, the same slot */
  learn(&k, 's', FLOW);
  for (int i = 0; i < 3; i++)
    CHECK_FULL(&k, FLOW);
  learn(&k, same_slot, ", \"x\": 1}");
  CHECK_FULL(&k, FLOW);
  CHECK_EQ(try_key(&k, same_slot, ", \"x\": 2}"), -1);
  ssa_skip_templates_init(&k);
  learn(&k, 's', FLOW);
  learn(&k, same_slot, ", \"x\": 1}");
  CHECK_EQ(try_key(&k, same_slot, ", \"x\": 2}"), 9);
  CHECK_EQ(try_match(&k, FLOW, 0), -1);

  ssa_skip_templates l;
  ssa_skip_templates_init(&l);
  char big[SSA_SKIP_TEMPLATE_TEXT + 64];
  int len = snprintf(big, sizeof big, ", \"name\": \"");
  while (len < SSA_SKIP_TEMPLATE_TEXT)
    big[len++] = 'x';
  snprintf(big + len, sizeof big - (size_t)len, "\"}");
  learn(&l, 's', big);
  CHECK_EQ(try_match(&l, big, 0), -1);
  learn(&l, 's', FLOW); /* and a text too long to learn leaves the template there */
  learn(&l, 's', big);
  CHECK_FULL(&l, FLOW);
}

/* ---- random rests and random edits ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (unsigned)(rng % n);
}

typedef struct {
  char s[2048];
  size_t n;
} buf;

static void put(buf *b, const char *s) {
  size_t k = strlen(s);
  if (b->n + k < sizeof b->s) {
    memcpy(b->s + b->n, s, k);
    b->n += k;
  }
  b->s[b->n] = 0;
}

static void blanks(buf *b) {
  static const char *w[] = {"", "", " ", "\n    ", "\t", "\r\n  "};
  put(b, w[rnd(6)]);
}

static void number(buf *b) {
  char t[64];
  /* the draws one per statement: the order of a call's arguments is the
   * compiler's, and the test should see the same rests with any */
  const char *sign = rnd(4) == 0 ? "-" : "";
  unsigned form = rnd(5), u1 = rnd(1000000), u2 = rnd(1000), u3 = rnd(2), u4 = rnd(40);
  switch (form) {
  case 0: snprintf(t, sizeof t, "%s0", sign); break;
  case 1: snprintf(t, sizeof t, "%s%u", sign, 1 + u1); break;
  case 2: snprintf(t, sizeof t, "%s%u.%03u", sign, u1 % 100000, u2); break;
  case 3:
    snprintf(t, sizeof t, "%s%u.%ue%s%02u", sign, u1 % 10, u2 % 100, u3 ? "-" : "+", u4);
    break;
  default: snprintf(t, sizeof t, "%s%llu", sign, 1000000000000000ull + u1); break;
  }
  put(b, t);
}

static void value(buf *b, int depth) {
  static const char *words[] = {"\"ac2g\"", "\"\"", "\"x1 2\"",  "true",
                                "false",    "null", "\"cpu_op\""};
  unsigned k = rnd(depth < 2 ? 6 : 4);
  if (k == 0 || k == 1) {
    number(b);
  } else if (k == 2 || k == 3) {
    put(b, words[rnd(7)]);
  } else if (k == 4) {
    put(b, "[");
    unsigned m = rnd(4);
    for (unsigned i = 0; i < m; i++) {
      if (i) put(b, ",");
      blanks(b);
      value(b, depth + 1);
    }
    put(b, "]");
  } else {
    put(b, "{");
    unsigned m = rnd(3);
    for (unsigned i = 0; i < m; i++) {
      put(b, i ? ", " : "");
      put(b, rnd(2) ? "\"k\": " : "\"Ev Idx\":");
      value(b, depth + 1);
    }
    put(b, "}");
  }
}

/* A rest: members after a value, then the object's '}'. */
static void rest(buf *b) {
  static const char *keys[] = {"\"id\"",   "\"pid\"", "\"ts\"", "\"cat\"",
                               "\"args\"", "\"bp\"",  "\"s2\""};
  b->n = 0;
  b->s[0] = 0;
  unsigned m = rnd(6);
  for (unsigned i = 0; i < m; i++) {
    put(b, ",");
    blanks(b);
    put(b, keys[rnd(7)]);
    put(b, rnd(3) ? ": " : ":");
    value(b, 0);
  }
  blanks(b);
  put(b, "}");
}

/* A random edit of b: a digit run outside strings rewritten (to a valid or
 * invalid form), a value string's text rewritten, or a byte changed or
 * removed; 1 when the edit keeps it valid by construction (a digit run
 * that remains a valid piece of its number, a value string of plain text). */
static int edit(buf *b) {
  unsigned what = rnd(5);
  if (what == 0 && b->n > 0) { /* a byte changed */
    static const char bytes[] = "0123456789-+.eE \",:{}[]\nxtn";
    b->s[rnd((unsigned)b->n)] = bytes[rnd(sizeof bytes - 1)];
    return 0;
  }
  if (what == 1 && b->n > 0) { /* a byte removed */
    size_t at = rnd((unsigned)b->n);
    memmove(b->s + at, b->s + at + 1, b->n - at);
    b->n--;
    return 0;
  }
  if (what == 2) { /* a value string's text rewritten: plain text, so still valid */
    size_t starts[64], ends[64], nstr = 0;
    for (size_t i = 0; i < b->n && nstr < 64; i++) {
      if (b->s[i] != '"') continue;
      size_t close = i + 1;
      while (close < b->n && b->s[close] != '"')
        close++;
      size_t after = close + 1;
      while (after < b->n && (b->s[after] == ' ' || b->s[after] == '\n' || b->s[after] == '\r' ||
                              b->s[after] == '\t'))
        after++;
      if (after < b->n && b->s[after] != ':') {
        starts[nstr] = i + 1;
        ends[nstr++] = close;
      }
      i = close;
    }
    if (nstr > 0) {
      unsigned k = rnd((unsigned)nstr), len = rnd(12);
      char text[16];
      for (unsigned i = 0; i < len; i++)
        text[i] = "ab 1,:{}[]xyz"[rnd(13)];
      size_t at = starts[k], end = ends[k];
      if (b->n - (end - at) + len >= sizeof b->s) return 0;
      memmove(b->s + at + len, b->s + end, b->n - end + 1);
      memcpy(b->s + at, text, len);
      b->n = b->n - (end - at) + len;
      return 1;
    }
  }
  /* a digit run outside strings rewritten */
  size_t runs[64], nruns = 0;
  int in_string = 0;
  for (size_t i = 0; i < b->n && nruns < 64; i++) {
    if (b->s[i] == '"')
      in_string = !in_string;
    else if (!in_string && b->s[i] >= '0' && b->s[i] <= '9' &&
             (i == 0 || b->s[i - 1] < '0' || b->s[i - 1] > '9'))
      runs[nruns++] = i;
  }
  if (nruns == 0) return 1;
  size_t at = runs[rnd((unsigned)nruns)], end = at;
  while (end < b->n && b->s[end] >= '0' && b->s[end] <= '9')
    end++;
  char prev = at > 0 ? b->s[at - 1] : 0;
  int int_part = prev != '.' && prev != 'e' && prev != 'E' && prev != '+' &&
                 !(prev == '-' && at > 1 && (b->s[at - 2] == 'e' || b->s[at - 2] == 'E'));
  char digits[32];
  int valid;
  switch (rnd(4)) {
  case 0:
    snprintf(digits, sizeof digits, "%u", 1 + rnd(99999));
    valid = 1;
    break;
  case 1:
    snprintf(digits, sizeof digits, "0");
    valid = 1;
    break;
  case 2:
    snprintf(digits, sizeof digits, "0%u", rnd(100));
    valid = !int_part;
    break;
  default:
    digits[0] = 0;
    valid = 0;
    break;
  }
  size_t k = strlen(digits);
  if (b->n - (end - at) + k >= sizeof b->s) return 0;
  memmove(b->s + at + k, b->s + end, b->n - end + 1);
  memcpy(b->s + at, digits, k);
  b->n = b->n - (end - at) + k;
  return valid;
}

static void random_cases(void) {
  unsigned matched = 0, valid_edits = 0, answered = 0;
  for (int round = 0; round < 20000; round++) {
    ssa_skip_templates t;
    ssa_skip_templates_init(&t);
    buf a, c;
    rest(&a);
    if (!valid_object(a.s, a.n)) {
      fprintf(stderr, "generated rest not valid: %s\n", a.s);
      failures++;
      continue;
    }
    ssa_skip_template_learn(&t, 's', (const unsigned char *)a.s, (const unsigned char *)a.s + a.n);
    c = a;
    int keeps_valid = 1;
    for (unsigned e = rnd(3); e > 0; e--)
      keeps_valid &= edit(&c);
    const unsigned char *p = (const unsigned char *)c.s;
    const unsigned char *q = ssa_skip_template_match(&t, 's', p, p + c.n);
    if (q) {
      matched++;
      if (!valid_object(c.s, (size_t)(q - p)) || q != p + c.n) {
        fprintf(stderr,
                "matched what is not the whole valid rest (%ld of %zu bytes): learned %s, got %s\n",
                (long)(q - p), c.n, a.s, c.s);
        failures++;
      }
    }
    if (keeps_valid) {
      valid_edits++;
      if (!q) {
        fprintf(stderr,
                "a rest that differs only in valid numbers did not match: learned %s, got %s\n",
                a.s, c.s);
        failures++;
      }
    }
    answered++;
  }
  printf(
      "random rests: %u tried, %u matched, %u edits valid by construction (all of them matched)\n",
      answered, matched, valid_edits);
  CHECK(matched > 5000 && valid_edits > 5000);
}

int main(void) {
  hand_cases();
  random_cases();
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  else
    printf("skip templates: all checks passed\n");
  return failures ? 1 : 0;
}
