/*
 * tokenizer.c — the tokenizer type: construction from a merge list, encoding,
 * decoding and GPT-2-style pre-tokenization (see tokenizer.h for the rules).
 *
 * Representation. Merge i joins tokens (left, right) into token 256 + i. For decoding,
 * each token's byte string is stored once in an arena (offset + length per token);
 * a token's bytes are its left part's followed by its right part's. For encoding, an
 * open-addressing hash table maps the pair (left, right) to its merge rank i.
 *
 * Encoding a piece: start from its bytes; repeatedly find the adjacent pair with the
 * lowest merge rank and replace all its non-overlapping occurrences, left to right,
 * by the merged token; stop when no adjacent pair is a known merge. This replays the
 * training order, so text seen in training encodes exactly as training merged it.
 */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "data_hash.h"
#include "tokenizer_internal.h"

#define PIECE_MAX 64
#define EMPTY_KEY UINT64_MAX

struct stepscope_tokenizer {
  int merge_count;
  int32_t (*merges)[2];
  uint32_t *offset;     /* [vocab] start of each token's bytes in `bytes` */
  uint16_t *length;     /* [vocab] */
  unsigned char *bytes; /* arena */
  uint64_t *map_keys;   /* pair -> rank table, capacity map_cap (power of two) */
  int32_t *map_ranks;
  size_t map_cap;
};

static uint64_t pair_key(int left, int right) {
  return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
}

static int lookup_rank(const stepscope_tokenizer *tok, int left, int right) {
  if (tok->map_cap == 0) return -1;
  uint64_t key = pair_key(left, right);
  size_t mask = tok->map_cap - 1;
  for (size_t i = data_hash_mix(key) & mask;; i = (i + 1) & mask) {
    if (tok->map_keys[i] == key) return tok->map_ranks[i];
    if (tok->map_keys[i] == EMPTY_KEY) return -1;
  }
}

void stepscope_tokenizer_free(stepscope_tokenizer *tok) {
  if (!tok) return;
  free(tok->merges);
  free(tok->offset);
  free(tok->length);
  free(tok->bytes);
  free(tok->map_keys);
  free(tok->map_ranks);
  free(tok);
}

int tokenizer_from_merges(stepscope_tokenizer **out, const int32_t (*merges)[2], int merge_count) {
  *out = NULL;
  if (merge_count < 0 || merge_count > STEPSCOPE_TOKENIZER_MAX_MERGES)
    return STEPSCOPE_TOKENIZER_EINVAL;
  for (int i = 0; i < merge_count; i++)
    if (merges[i][0] < 0 || merges[i][1] < 0 || merges[i][0] >= 256 + i || merges[i][1] >= 256 + i)
      return STEPSCOPE_TOKENIZER_EINVAL;

  int vocab = 256 + merge_count;
  stepscope_tokenizer *tok = calloc(1, sizeof *tok);
  if (!tok) return STEPSCOPE_TOKENIZER_ENOMEM;
  tok->merge_count = merge_count;
  tok->merges = malloc(sizeof *tok->merges * (size_t)(merge_count ? merge_count : 1));
  tok->offset = malloc(sizeof *tok->offset * (size_t)vocab);
  tok->length = malloc(sizeof *tok->length * (size_t)vocab);
  if (!tok->merges || !tok->offset || !tok->length) {
    stepscope_tokenizer_free(tok);
    return STEPSCOPE_TOKENIZER_ENOMEM;
  }
  if (merge_count) memcpy(tok->merges, merges, sizeof *tok->merges * (size_t)merge_count);

  /* token lengths first, to size the arena */
  size_t total = 256;
  for (int t = 0; t < 256; t++)
    tok->length[t] = 1;
  for (int i = 0; i < merge_count; i++) {
    size_t len = (size_t)tok->length[merges[i][0]] + tok->length[merges[i][1]];
    if (len > UINT16_MAX) {
      stepscope_tokenizer_free(tok);
      return STEPSCOPE_TOKENIZER_EINVAL;
    }
    tok->length[256 + i] = (uint16_t)len;
    total += len;
  }
  if (total > UINT32_MAX) {
    stepscope_tokenizer_free(tok);
    return STEPSCOPE_TOKENIZER_EINVAL;
  }
  tok->bytes = malloc(total);
  if (!tok->bytes) {
    stepscope_tokenizer_free(tok);
    return STEPSCOPE_TOKENIZER_ENOMEM;
  }
  size_t pos = 0;
  for (int t = 0; t < 256; t++) {
    tok->offset[t] = (uint32_t)pos;
    tok->bytes[pos++] = (unsigned char)t;
  }
  for (int i = 0; i < merge_count; i++) {
    int l = merges[i][0], r = merges[i][1];
    tok->offset[256 + i] = (uint32_t)pos;
    memcpy(tok->bytes + pos, tok->bytes + tok->offset[l], tok->length[l]);
    pos += tok->length[l];
    memcpy(tok->bytes + pos, tok->bytes + tok->offset[r], tok->length[r]);
    pos += tok->length[r];
  }

  /* pair -> rank table at load factor <= 1/2 */
  if (merge_count) {
    size_t cap = 16;
    while (cap < (size_t)merge_count * 2)
      cap *= 2;
    tok->map_cap = cap;
    tok->map_keys = malloc(sizeof *tok->map_keys * cap);
    tok->map_ranks = malloc(sizeof *tok->map_ranks * cap);
    if (!tok->map_keys || !tok->map_ranks) {
      stepscope_tokenizer_free(tok);
      return STEPSCOPE_TOKENIZER_ENOMEM;
    }
    for (size_t i = 0; i < cap; i++)
      tok->map_keys[i] = EMPTY_KEY;
    for (int r = 0; r < merge_count; r++) {
      uint64_t key = pair_key(merges[r][0], merges[r][1]);
      size_t i = data_hash_mix(key) & (cap - 1);
      while (tok->map_keys[i] != EMPTY_KEY && tok->map_keys[i] != key)
        i = (i + 1) & (cap - 1);
      if (tok->map_keys[i] == EMPTY_KEY) { /* a repeated pair keeps its first rank */
        tok->map_keys[i] = key;
        tok->map_ranks[i] = r;
      }
    }
  }
  *out = tok;
  return STEPSCOPE_TOKENIZER_OK;
}

int stepscope_tokenizer_create_byte(stepscope_tokenizer **out) {
  return tokenizer_from_merges(out, NULL, 0);
}

int stepscope_tokenizer_vocab_size(const stepscope_tokenizer *tok) {
  return 256 + tok->merge_count;
}

int stepscope_tokenizer_merge_count(const stepscope_tokenizer *tok) {
  return tok->merge_count;
}

/* Character classes of the pre-tokenizer. Bytes >= 128 (UTF-8) count as letters so
 * that accented words stay whole. */
enum { CLASS_WORD, CLASS_SPACE, CLASS_PUNCT };

static int byte_class(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 128)
    return CLASS_WORD;
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') return CLASS_SPACE;
  return CLASS_PUNCT;
}

size_t stepscope_tokenizer_piece_length(const unsigned char *text, size_t len) {
  if (len == 0) return 0;
  size_t limit = len < PIECE_MAX ? len : PIECE_MAX;
  size_t i = 0;
  int cls = byte_class(text[0]);
  if (text[0] == ' ' && len > 1 && byte_class(text[1]) != CLASS_SPACE) {
    /* " word" or " ,;": a single space joins the run that follows it */
    cls = byte_class(text[1]);
    i = 1;
  } else if (cls == CLASS_SPACE) {
    while (i < limit && byte_class(text[i]) == CLASS_SPACE)
      i++;
    /* leave a final ' ' to the word after the run (GPT-2's \s+(?!\S)) */
    if (i > 1 && i < len && text[i - 1] == ' ' && byte_class(text[i]) != CLASS_SPACE) i--;
    return i;
  }
  while (i < limit && byte_class(text[i]) == cls)
    i++;
  return i;
}

/* Encodes one piece (<= PIECE_MAX bytes) into out; returns the token count. */
static size_t encode_piece(const stepscope_tokenizer *tok, const unsigned char *piece, size_t len,
                           int *out) {
  int sym[PIECE_MAX] = {0};
  size_t n = len;
  for (size_t i = 0; i < n; i++)
    sym[i] = piece[i];
  while (n > 1 && tok->merge_count > 0) {
    int best_rank = -1;
    for (size_t i = 0; i + 1 < n; i++) {
      int r = lookup_rank(tok, sym[i], sym[i + 1]);
      if (r >= 0 && (best_rank < 0 || r < best_rank)) best_rank = r;
    }
    if (best_rank < 0) break;
    int left = tok->merges[best_rank][0], right = tok->merges[best_rank][1];
    size_t w = 0;
    for (size_t i = 0; i < n;) {
      if (i + 1 < n && sym[i] == left && sym[i + 1] == right) {
        sym[w++] = 256 + best_rank;
        i += 2;
      } else {
        sym[w++] = sym[i++];
      }
    }
    n = w;
  }
  for (size_t i = 0; i < n; i++)
    out[i] = sym[i];
  return n;
}

int stepscope_tokenizer_encode(const stepscope_tokenizer *tok, const unsigned char *text,
                               size_t len, int **tokens_out, size_t *count_out) {
  *tokens_out = NULL;
  *count_out = 0;
  int *tokens = malloc(sizeof *tokens * (len ? len : 1));
  if (!tokens) return STEPSCOPE_TOKENIZER_ENOMEM;
  size_t count = 0;
  for (size_t pos = 0; pos < len;) {
    size_t piece = stepscope_tokenizer_piece_length(text + pos, len - pos);
    count += encode_piece(tok, text + pos, piece, tokens + count);
    pos += piece;
  }
  /* shrink to fit; keeping the larger block is fine if realloc fails */
  int *shrunk = realloc(tokens, sizeof *tokens * (count ? count : 1));
  *tokens_out = shrunk ? shrunk : tokens;
  *count_out = count;
  return STEPSCOPE_TOKENIZER_OK;
}

int stepscope_tokenizer_token_bytes(const stepscope_tokenizer *tok, int token,
                                    const unsigned char **bytes_out, size_t *len_out) {
  if (token < 0 || token >= 256 + tok->merge_count) return STEPSCOPE_TOKENIZER_EINVAL;
  *bytes_out = tok->bytes + tok->offset[token];
  *len_out = tok->length[token];
  return STEPSCOPE_TOKENIZER_OK;
}

int stepscope_tokenizer_decode(const stepscope_tokenizer *tok, const int *tokens, size_t count,
                               unsigned char **text_out, size_t *len_out) {
  *text_out = NULL;
  *len_out = 0;
  size_t total = 0;
  for (size_t i = 0; i < count; i++) {
    if (tokens[i] < 0 || tokens[i] >= 256 + tok->merge_count) return STEPSCOPE_TOKENIZER_EINVAL;
    total += tok->length[tokens[i]];
  }
  unsigned char *text = malloc(total + 1);
  if (!text) return STEPSCOPE_TOKENIZER_ENOMEM;
  size_t pos = 0;
  for (size_t i = 0; i < count; i++) {
    memcpy(text + pos, tok->bytes + tok->offset[tokens[i]], tok->length[tokens[i]]);
    pos += tok->length[tokens[i]];
  }
  text[pos] = 0;
  *text_out = text;
  *len_out = pos;
  return STEPSCOPE_TOKENIZER_OK;
}
