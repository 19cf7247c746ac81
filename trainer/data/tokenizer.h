/*
 * tokenizer.h — byte-level tokenizers for stepscope-train's data loader.
 *
 * Two kinds, one type:
 *   - byte: every byte is a token, vocabulary 256. Nothing to learn, lossless for
 *     any input, and the default: tiny models learn byte statistics within steps.
 *   - BPE: byte-pair encoding learned from the training text. Starting from the 256
 *     byte tokens, training repeatedly finds the most frequent adjacent pair of
 *     tokens and gives it a new id (256, 257, ...), up to a requested number of
 *     merges. Like GPT-2, the text is first cut into pieces (a word with its leading
 *     space, a run of spaces, a run of punctuation) and merges never cross piece
 *     boundaries, so training counts pairs over distinct pieces weighted by how often
 *     each occurs — fast even on megabytes of text. Ties between equally frequent
 *     pairs go to the smaller (left, right) id pair, so training is deterministic.
 *     Encoding applies, within each piece, the earliest-learned applicable merge
 *     until none applies (the standard BPE rule); decoding concatenates each token's
 *     bytes. decode(encode(text)) == text for every byte string.
 * A byte tokenizer is a BPE tokenizer with zero merges; both are this one type.
 *
 * Errors are values: functions return STEPSCOPE_TOKENIZER_OK (0) or a negative code;
 * nothing here exits or prints.
 */
#ifndef STEPSCOPE_TRAINER_DATA_TOKENIZER_H
#define STEPSCOPE_TRAINER_DATA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  STEPSCOPE_TOKENIZER_OK = 0,
  STEPSCOPE_TOKENIZER_EINVAL =
      -1, /* bad argument (e.g. negative merge count, token out of range) */
  STEPSCOPE_TOKENIZER_ENOMEM = -2, /* an allocation failed */
};

/* The most merges a tokenizer can hold: token ids stay below 65536, so token files
 * can store them as uint16. */
#define STEPSCOPE_TOKENIZER_MAX_MERGES (65536 - 256)

typedef struct stepscope_tokenizer stepscope_tokenizer;

/* The byte tokenizer (vocabulary 256). */
int stepscope_tokenizer_create_byte(stepscope_tokenizer **out);

/* Learns up to `merges` BPE merges from text[0..len-1] (0 <= merges <=
 * STEPSCOPE_TOKENIZER_MAX_MERGES). Stops early when no pair occurs twice, so the
 * vocabulary may be smaller than 256 + merges: ask stepscope_tokenizer_vocab_size. */
int stepscope_tokenizer_train_bpe(stepscope_tokenizer **out, const unsigned char *text, size_t len,
                                  int merges);

void stepscope_tokenizer_free(stepscope_tokenizer *tok);

/* 256 + number of merges learned. */
int stepscope_tokenizer_vocab_size(const stepscope_tokenizer *tok);

/* Number of merges learned (0 for the byte tokenizer). */
int stepscope_tokenizer_merge_count(const stepscope_tokenizer *tok);

/* Encodes text[0..len-1]. On success *tokens_out is a malloc'ed array the caller
 * frees and *count_out its length (<= len). */
int stepscope_tokenizer_encode(const stepscope_tokenizer *tok, const unsigned char *text,
                               size_t len, int **tokens_out, size_t *count_out);

/* The bytes of one token: *bytes_out points into the tokenizer (valid until it is
 * freed), *len_out its length. Returns STEPSCOPE_TOKENIZER_EINVAL for an id outside
 * the vocabulary. */
int stepscope_tokenizer_token_bytes(const stepscope_tokenizer *tok, int token,
                                    const unsigned char **bytes_out, size_t *len_out);

/* Decodes tokens into a malloc'ed byte buffer (not NUL-terminated; one spare byte is
 * allocated and set to 0 so it may be printed as a string). */
int stepscope_tokenizer_decode(const stepscope_tokenizer *tok, const int *tokens, size_t count,
                               unsigned char **text_out, size_t *len_out);

/* Pre-tokenization, exposed for tests: the length of the piece that starts at
 * text[0] (1 <= result <= len, at most 64 bytes; 0 only when len == 0). */
size_t stepscope_tokenizer_piece_length(const unsigned char *text, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* STEPSCOPE_TRAINER_DATA_TOKENIZER_H */
