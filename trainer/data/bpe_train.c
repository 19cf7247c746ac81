/*
 * bpe_train.c — learning BPE merges from text (stepscope_tokenizer_train_bpe).
 *
 * 1. Pre-tokenize the text into pieces (stepscope_tokenizer_piece_length) and count
 *    how often each distinct piece occurs. English text has few distinct pieces (words
 *    with their leading space), so the rest works on a short list of (symbols, count).
 * 2. Repeat for each merge: count every adjacent symbol pair over the distinct pieces,
 *    weighted by their counts; take the most frequent pair (ties: smallest (left,
 *    right), so the result does not depend on hash order); stop if it occurs fewer
 *    than twice; otherwise give it the next id and replace its non-overlapping
 *    occurrences, left to right, in every piece.
 * Each merge costs one pass over the distinct pieces' symbols: simple, and fast
 * enough for the few hundred to few thousand merges a small model wants. Only the
 * first BPE_TRAIN_MAX_BYTES of the text are used for training (the whole text is
 * still encoded with the result).
 */
#include <stdlib.h>
#include <string.h>

#include "data_hash.h"
#include "sc_grow.h"
#include "tokenizer.h"
#include "tokenizer_internal.h"

#define BPE_TRAIN_MAX_BYTES ((size_t)8 << 20)
#define EMPTY_KEY           UINT64_MAX

typedef struct {
  size_t text_offset; /* first occurrence in the text (for comparing pieces) */
  uint32_t start;     /* first symbol in the symbol pool */
  uint32_t len;       /* current number of symbols */
  uint64_t count;     /* occurrences in the text */
} bpe_word;

typedef struct {
  bpe_word *words;
  size_t word_count, word_cap;
  size_t *slots; /* hash table of word index + 1 (0 = empty) */
  size_t slot_cap;
} word_table;

static uint64_t bytes_hash(const unsigned char *p, size_t len) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a, then mixed */
  for (size_t i = 0; i < len; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return data_hash_mix(h ^ len);
}

/* The slot of piece text[offset .. offset+len-1] in a table of cap slots (a power of two):
 * the word that holds it, or the empty slot where it goes (linear probing). */
static size_t find_slot(const word_table *wt, const size_t *slots, size_t cap,
                        const unsigned char *text, size_t offset, size_t len) {
  const unsigned char *piece = text + offset;
  size_t i = bytes_hash(piece, len) & (cap - 1);
  for (; slots[i]; i = (i + 1) & (cap - 1)) {
    const bpe_word *word = &wt->words[slots[i] - 1];
    if (word->len == len && memcmp(text + word->text_offset, piece, len) == 0) break;
  }
  return i;
}

static int word_table_grow(word_table *wt, const unsigned char *text) {
  size_t cap = wt->slot_cap ? wt->slot_cap * 2 : 1024;
  size_t *slots = calloc(cap, sizeof *slots);
  if (!slots) return -1;
  for (size_t w = 0; w < wt->word_count; w++) /* distinct pieces: each finds an empty slot */
    slots[find_slot(wt, slots, cap, text, wt->words[w].text_offset, wt->words[w].len)] = w + 1;
  free(wt->slots);
  wt->slots = slots;
  wt->slot_cap = cap;
  return 0;
}

/* Counts one occurrence of piece text[offset .. offset+len-1]. */
static int word_table_add(word_table *wt, const unsigned char *text, size_t offset, size_t len) {
  if ((wt->word_count + 1) * 2 > wt->slot_cap && word_table_grow(wt, text) != 0) return -1;
  size_t i = find_slot(wt, wt->slots, wt->slot_cap, text, offset, len);
  if (wt->slots[i]) {
    wt->words[wt->slots[i] - 1].count++;
    return 0;
  }
  if (wt->word_count == wt->word_cap) {
    bpe_word *words = sc_grow(wt->words, &wt->word_cap, wt->word_count + 1, sizeof *words, 1024);
    if (!words) return -1;
    wt->words = words;
  }
  wt->words[wt->word_count] = (bpe_word){offset, 0, (uint32_t)len, 1};
  wt->slots[i] = ++wt->word_count;
  return 0;
}

int stepscope_tokenizer_train_bpe(stepscope_tokenizer **out, const unsigned char *text, size_t len,
                                  int merges) {
  *out = NULL;
  if (merges < 0 || merges > STEPSCOPE_TOKENIZER_MAX_MERGES || (!text && len))
    return STEPSCOPE_TOKENIZER_EINVAL;
  if (len > BPE_TRAIN_MAX_BYTES) len = BPE_TRAIN_MAX_BYTES;

  int status = STEPSCOPE_TOKENIZER_ENOMEM;
  word_table wt = {0};
  int32_t *symbols = NULL;
  uint64_t *pair_keys = NULL, *pair_counts = NULL;
  int32_t(*learned)[2] = malloc(sizeof *learned * (size_t)(merges ? merges : 1));
  if (!learned) goto done;

  for (size_t pos = 0; pos < len;) {
    size_t piece = stepscope_tokenizer_piece_length(text + pos, len - pos);
    if (word_table_add(&wt, text, pos, piece) != 0) goto done;
    pos += piece;
  }

  /* the symbol pool: each distinct piece's bytes, merged in place as we go */
  size_t total = 0;
  for (size_t w = 0; w < wt.word_count; w++)
    total += wt.words[w].len;
  symbols = malloc(sizeof *symbols * (total ? total : 1));
  if (!symbols) goto done;
  size_t at = 0;
  for (size_t w = 0; w < wt.word_count; w++) {
    bpe_word *word = &wt.words[w];
    word->start = (uint32_t)at;
    for (uint32_t i = 0; i < word->len; i++)
      symbols[at++] = text[word->text_offset + i];
  }

  /* pair table: at most `total` distinct pairs, load factor <= 1/2 */
  size_t pair_cap = 16;
  while (pair_cap < total * 2)
    pair_cap *= 2;
  pair_keys = malloc(sizeof *pair_keys * pair_cap);
  pair_counts = malloc(sizeof *pair_counts * pair_cap);
  if (!pair_keys || !pair_counts) goto done;

  int learned_count = 0;
  for (; learned_count < merges; learned_count++) {
    for (size_t i = 0; i < pair_cap; i++)
      pair_keys[i] = EMPTY_KEY;
    for (size_t w = 0; w < wt.word_count; w++) {
      const bpe_word *word = &wt.words[w];
      const int32_t *s = symbols + word->start;
      for (uint32_t i = 0; i + 1 < word->len; i++) {
        uint64_t key = ((uint64_t)(uint32_t)s[i] << 32) | (uint32_t)s[i + 1];
        size_t slot = data_hash_mix(key) & (pair_cap - 1);
        while (pair_keys[slot] != EMPTY_KEY && pair_keys[slot] != key)
          slot = (slot + 1) & (pair_cap - 1);
        if (pair_keys[slot] == EMPTY_KEY) {
          pair_keys[slot] = key;
          pair_counts[slot] = 0;
        }
        pair_counts[slot] += word->count;
      }
    }
    uint64_t best_key = EMPTY_KEY, best_count = 0;
    for (size_t i = 0; i < pair_cap; i++) {
      if (pair_keys[i] == EMPTY_KEY) continue;
      if (pair_counts[i] > best_count ||
          (pair_counts[i] == best_count && pair_keys[i] < best_key)) {
        best_count = pair_counts[i];
        best_key = pair_keys[i];
      }
    }
    if (best_count < 2) break;
    int32_t left = (int32_t)(best_key >> 32), right = (int32_t)(best_key & 0xFFFFFFFFu);
    int32_t merged = 256 + learned_count;
    learned[learned_count][0] = left;
    learned[learned_count][1] = right;
    for (size_t w = 0; w < wt.word_count; w++) {
      bpe_word *word = &wt.words[w];
      int32_t *s = symbols + word->start;
      uint32_t dst = 0;
      for (uint32_t i = 0; i < word->len;) {
        if (i + 1 < word->len && s[i] == left && s[i + 1] == right) {
          s[dst++] = merged;
          i += 2;
        } else {
          s[dst++] = s[i++];
        }
      }
      word->len = dst;
    }
  }
  status = tokenizer_from_merges(out, (const int32_t(*)[2])learned, learned_count);

done:
  free(learned);
  free(symbols);
  free(pair_keys);
  free(pair_counts);
  free(wt.words);
  free(wt.slots);
  return status;
}
