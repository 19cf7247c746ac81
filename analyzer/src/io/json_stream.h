/*
 * json_stream.h — a streaming (pull) JSON tokenizer with bounded memory, for
 * importing documents far larger than memory (a 1 GB Kineto trace).
 *
 * The caller supplies a read callback; the tokenizer keeps one input buffer
 * and one token buffer, never a tree. Each call to js_next() returns the next
 * token of the document: structural tokens, object keys (JS_KEY), strings,
 * numbers (their validated text, converted on demand by the helpers below),
 * true / false / null. The token text (tok, len) stays valid only until the
 * next call: a plain string is handed out in place, inside the input buffer.
 * The grammar is checked as it goes (a stack of open containers, one bit
 * each, up to JS_MAX_DEPTH), so a malformed document yields JS_ERROR with a
 * message naming the byte offset, never a crash.
 *
 * Strings are decoded (escapes, \uXXXX with surrogate pairs) into UTF-8.
 * Invalid UTF-8 in the input and unpaired surrogates are replaced by U+FFFD
 * and counted (js->bad_utf8, js->first_bad_utf8_offset): a trace with one
 * garbled kernel name is still worth reading. Strings and numbers longer than
 * JS_MAX_TOKEN are an error. js_skip() skips the value that follows, however
 * deep, without storing it (strings and numbers are checked, not copied);
 * callers should use it for every value they do not need.
 */
#ifndef JSON_STREAM_H
#define JSON_STREAM_H

#include <stddef.h>
#include <stdint.h>

#define JS_MAX_DEPTH 512
#define JS_MAX_TOKEN (4u << 20) /* 4 MiB: longer strings or numbers are an error */

typedef enum js_kind {
  JS_EOF = 0, /* end of the document (after the single top-level value) */
  JS_BEGIN_OBJECT,
  JS_END_OBJECT,
  JS_BEGIN_ARRAY,
  JS_END_ARRAY,
  JS_KEY,    /* an object key: text in tok/len */
  JS_STRING, /* a string value: text in tok/len (NUL-terminated) */
  JS_NUMBER, /* a number: its JSON text in tok/len */
  JS_TRUE,
  JS_FALSE,
  JS_NULL,
  JS_ERROR /* message in js->error, offset in js->error_offset */
} js_kind;

/* Reads up to n bytes into buf; returns the count (0 at end) or -1 on error. */
typedef long (*js_read_fn)(void *ctx, void *buf, size_t n);

typedef struct js_stream {
  js_read_fn read;
  void *ctx;
  unsigned char *in; /* input buffer */
  size_t in_len, in_pos, in_cap;
  uint64_t in_base; /* document offset of in[0] */
  int in_eof;
  int read_error; /* the read callback failed */
  char *tok;      /* current token text (NUL-terminated): in `in` or `buf` */
  size_t len;
  char *buf; /* token buffer, for tokens that cannot be handed out in place */
  size_t buf_cap;
  /* the current JS_NUMBER when it is plain (no exponent, at most 19 digits):
   * its digits as an integer and the count after the point */
  int num_plain, num_neg, num_frac;
  uint64_t num_mant;
  size_t saved_at;     /* private: 1 + position of a byte replaced by a NUL, or 0 */
  unsigned char saved; /* private: that byte */
  uint64_t tok_offset; /* document offset where the current token starts */
  /* grammar state */
  uint8_t stack[JS_MAX_DEPTH / 8]; /* bit set: object, clear: array */
  int depth;
  int state;         /* private: what may come next */
  int done;          /* the top-level value is complete */
  uint64_t bad_utf8; /* replaced invalid sequences */
  uint64_t first_bad_utf8_offset;
  int failed;
  uint64_t error_offset;
  char error[160];
  int in_borrowed; /* private: `in` is the caller's (js_init_buffer) */
  int in_readonly; /* private: `in` is never written (js_set_readonly) */
  /* private (js_init_buffer_grow): makes more of the caller's buffer visible */
  long (*grow)(void *ctx, size_t visible);
} js_stream;

/* 0, or -1 when the buffers cannot be allocated. */
int js_init(js_stream *js, js_read_fn read, void *ctx);
void js_free(js_stream *js);
/* Tokenizes a whole document already in memory, in place: no read callback,
 * no input buffer of its own. The tokenizer writes into `doc` (it hands
 * strings and numbers out in place by putting a NUL after them, and puts the
 * byte back afterwards), so `doc` must be writable and must outlive the
 * stream; js_free leaves it to the caller. 0, or -1 out of memory. */
int js_init_buffer(js_stream *js, void *doc, size_t len);

/* ---- one document on two threads (kineto_split.c) ---- */

/* Like js_init_buffer over `cap` bytes of which only the first `visible`
 * are there yet: when the tokenizer needs bytes past the visible ones it
 * calls grow(ctx, visible), which returns the count visible now (more than
 * before), the same count when the document ends there, or -1 on a read
 * error (then "read error" as with a read callback). Visible bytes never
 * move, so tokens handed out in place stay valid. 0, or -1 out of memory. */
int js_init_buffer_grow(js_stream *js, void *doc, size_t cap, size_t visible,
                        long (*grow)(void *ctx, size_t visible), void *ctx);
/* On a stream just made by js_init: its input is taken to start at
 * document offset `base`, inside `depth` (>= 1) open containers whose
 * innermost is an array (the others objects), where a value must come (as
 * after a ',' in that array). Offsets in messages are the document's. */
void js_enter_array(js_stream *js, uint64_t base, int depth);
/* The same on a js_init_buffer_grow stream over a whole document, read in
 * place: reading starts at byte `at` of it (made visible if it was not). */
void js_enter_array_in_place(js_stream *js, size_t at, int depth);
/* The input buffer is never written: strings and numbers are copied into
 * the token buffer instead of being handed out in place (for a buffer that
 * another thread may read after this one: kineto_split.c's helper). */
void js_set_readonly(js_stream *js);
/* ---- whole values parsed over the buffer (kineto_fast.c) ---- */

/* Inside an array, before its next element (after its '[' or after an
 * element): consumes the ',' and the blanks before the element as js_next
 * would, then, when the element's first byte is buffered, returns 1 with *p
 * at it and *e at the end of the buffered bytes. 0 otherwise (at the
 * array's end, at the end of input, not in an array, after an error): then
 * js_next goes on as usual. The bytes in [*p, *e) may be read, not written,
 * until the next call on the stream. */
int js_array_peek(js_stream *js, const unsigned char **p, const unsigned char **e);
/* After js_array_peek returned 1: the caller has read one whole element,
 * valid JSON, that ends just before `end` (<= *e); the stream goes on after
 * it, as if js_next had read it. */
void js_array_took(js_stream *js, const unsigned char *end);

/* Right after a value inside an array: whether every visible byte left is
 * blank but for one ',' (so the next token starts where the visible bytes
 * end). */
int js_at_array_gap(const js_stream *js);
/* On a js_init_buffer_grow stream right after a value inside an array:
 * goes on at document offset `at` (the bytes before it taken as read) with
 * `visible` bytes visible, in the same state (a ',' or the array's ']'
 * must come). */
void js_resume_at(js_stream *js, uint64_t at, size_t visible);

/* The next token. After JS_ERROR every call returns JS_ERROR. */
js_kind js_next(js_stream *js);

/* Inside an object, after its JS_BEGIN_OBJECT or after one of its values:
 * the next key (JS_KEY, text in tok/len) with the ':' that follows it
 * consumed, so that the next call reads its value; or JS_END_OBJECT. The
 * same tokens and errors as js_next, with less work per member. */
js_kind js_next_member(js_stream *js);

/* Skips the value whose first token is `first` (already returned by
 * js_next); for scalars this does nothing. 0, or -1 on error. */
int js_skip_rest(js_stream *js, js_kind first);
/* Reads and skips the next value. 0, or -1 on error. */
int js_skip(js_stream *js);
/* Inside an object, right after its JS_BEGIN_OBJECT or after one of its
 * values: skips its remaining members and its closing '}' (checked as
 * js_skip checks). 0, or -1 on error. */
int js_skip_object_rest(js_stream *js);

/* Current depth of open containers. */
static inline int js_depth(const js_stream *js) {
  return js->depth;
}

/* ---- number conversions (on the validated text of a JS_NUMBER; json_numbers.c) ---- */

/* An integer that fits in uint64 (no sign, no fraction, no exponent unless
 * it still denotes an exact integer). 1 on success, 0 otherwise. */
int js_number_u64(const char *text, uint64_t *out);
/* Same for int64. */
int js_number_i64(const char *text, int64_t *out);
/* The decimal `text` multiplied by 10^shift, rounded half away from zero to
 * an int64, computed exactly from the digits (no binary floating point):
 * js_number_scaled("1700000000123.4567", 3) = 1700000000123457. 1 on
 * success, 0 when the result does not fit in int64. */
int js_number_scaled(const char *text, int shift, int64_t *out);
/* js_number_u64 and js_number_scaled on the current JS_NUMBER token, from
 * the digits accumulated while it was read when it is plain (fast). */
int js_tok_u64(const js_stream *js, uint64_t *out);
int js_tok_scaled(const js_stream *js, int shift, int64_t *out);

#endif
