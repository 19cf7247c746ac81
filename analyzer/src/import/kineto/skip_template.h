/*
 * skip_template.h — the learned shape of the part of an event object that
 * the Kineto reader skips, so that the next event of that shape is checked
 * by comparing bytes instead of being tokenized. See skip_template.c.
 */
#ifndef SKIP_TEMPLATE_H
#define SKIP_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#define SSA_SKIP_TEMPLATE_TEXT 768 /* longer texts are not learned */
#define SSA_SKIP_TEMPLATE_SEGS 64  /* nor texts with more numbers than this */
#define SSA_SKIP_TEMPLATES     64  /* slots, by key & 63 */

/* One literal run of the text, then what must follow it: a number's
 * integer part, a run of digits (a fraction or an exponent), a value
 * string (the one learned, slen bytes between its quotes, right after the
 * literal in the text), or nothing (the end: the literal ends with the
 * object's '}'). */
typedef struct {
  uint16_t off, len, slen;
  uint8_t then;
} ssa_skip_seg;

typedef struct {
  unsigned key; /* what it was learned for (0: empty) */
  uint32_t hits, misses;
  uint16_t nsegs;
  ssa_skip_seg seg[SSA_SKIP_TEMPLATE_SEGS];
  unsigned char text[SSA_SKIP_TEMPLATE_TEXT];
} ssa_skip_template;

typedef struct {
  ssa_skip_template slot[SSA_SKIP_TEMPLATES];
} ssa_skip_templates;

/* All empty. */
void ssa_skip_templates_init(ssa_skip_templates *t);

/* When the bytes at p (before e) are the template learned for `key` with
 * other numbers or value strings in it: the byte after the template's end,
 * else NULL. Only valid JSON with the same structure matches (see
 * skip_template.c). */
const unsigned char *ssa_skip_template_match(ssa_skip_templates *t, unsigned key,
                                             const unsigned char *p, const unsigned char *e);

/* Learns [p, end) for `key`: text the caller has checked to be valid JSON
 * that ends with a '}' — the rest of an object (its members, then its '}')
 * or a whole object — with no escape, control or non-ASCII byte in its
 * strings. A slot whose template of another key hits more than it misses
 * is kept (this try counts as one of its misses); a text too long to learn
 * leaves the slot as it is. */
void ssa_skip_template_learn(ssa_skip_templates *t, unsigned key, const unsigned char *p,
                             const unsigned char *end);

#endif
