/*
 * dataset.h — the training data of stepscope-train: where tokens come from and how
 * every rank gets its part of each batch.
 *
 * Sources (stepscope_dataset_open):
 *   - no path: a built-in English corpus (a few KB of public-domain text, see
 *     builtin_corpus.c) on which a tiny model's loss visibly falls within steps;
 *   - a token file (recognized by its magic, format below);
 *   - any other file is text, tokenized with the byte tokenizer (vocabulary 256) or a
 *     BPE tokenizer learned from that same text with a given number of merges.
 *
 * Token file format (little-endian), written by stepscope_token_file_write:
 *     offset  size  field
 *     0       8     magic "SSTOKENS"
 *     8       4     uint32 version = 1
 *     12      4     uint32 vocab_size (every token is < vocab_size)
 *     16      4     uint32 bytes per token: 2 (uint16) or 4 (uint32)
 *     20      4     uint32 reserved, 0
 *     24      8     uint64 token count n
 *     32      n*w   the tokens
 * The llm.c format is also read: a 256 x int32 header with magic 20240520, version 1,
 * header[2] = token count, then uint16 GPT-2 tokens (vocabulary 50257).
 *
 * Batches. A sequence is a window of T+1 consecutive tokens: inputs are its first T,
 * targets its last T (the next token at every position). The token stream is cut
 * into K = floor((n - s) / T) chunks at offsets shift + k*T, where s = min(T, n - T)
 * is the number of possible shifts; every epoch draws a new shift in [0, s) and
 * a new permutation of the K chunks, both from the seed, so each epoch visits every
 * chunk exactly once, in a seeded random order, with boundaries that move between
 * epochs.
 *
 * Sequence number q (counting from 0 over the whole run) is chunk perm_epoch(q mod K)
 * of epoch floor(q / K). Optimizer step `step` with a global batch of G sequences uses
 * q = step*G .. step*G + G - 1. A data-parallel rank r of D, taking B = G/D of them,
 * gets q = step*G + r*B .. step*G + r*B + B - 1. So:
 *   - everything is a pure function of (dataset, seed, step, global batch): runs are
 *     reproducible and no rank communicates about data;
 *   - the D ranks' batches are disjoint and their concatenation in rank order is
 *     exactly the batch a world-1 run with B = G sees at the same step.
 * Gradient accumulation is the caller's: with M micro-batches of b sequences a rank
 * asks for B = M*b rows per step and uses rows m*b .. m*b + b - 1 for micro-batch m.
 *
 * Errors are values: functions return STEPSCOPE_DATA_OK (0) or a negative code and,
 * where an `err` buffer is given, a message naming the file and the problem. Nothing
 * here exits or prints.
 */
#ifndef STEPSCOPE_TRAINER_DATA_DATASET_H
#define STEPSCOPE_TRAINER_DATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  STEPSCOPE_DATA_OK = 0,
  STEPSCOPE_DATA_EINVAL = -1,  /* bad argument (shape, shard, option; T > max_seq_len) */
  STEPSCOPE_DATA_EIO = -2,     /* file cannot be opened or read / written */
  STEPSCOPE_DATA_EFORMAT = -3, /* token file malformed, or data too short (fewer than 2 tokens) */
  STEPSCOPE_DATA_ENOMEM = -4,  /* an allocation failed */
};

/* Short name of an error code ("invalid argument", ...). */
const char *stepscope_data_strerror(int code);

typedef enum {
  STEPSCOPE_TOKENIZER_KIND_BYTE = 0, /* vocabulary 256 */
  STEPSCOPE_TOKENIZER_KIND_BPE = 1,  /* BPE learned from the text, bpe_merges merges */
} stepscope_tokenizer_kind;

typedef struct {
  const char *path; /* text or token file; NULL or "" = built-in corpus */
  stepscope_tokenizer_kind
      tokenizer;  /* for text and the built-in corpus; ignored for token files */
  int bpe_merges; /* merges for KIND_BPE: 1 .. STEPSCOPE_TOKENIZER_MAX_MERGES */
} stepscope_dataset_options;

typedef struct stepscope_dataset stepscope_dataset;

/* Opens the data described by options (NULL options = built-in corpus, bytes). */
int stepscope_dataset_open(stepscope_dataset **out, const stepscope_dataset_options *options,
                           char *err, size_t err_size);
void stepscope_dataset_close(stepscope_dataset *ds);

/* Every token is < vocab size: 256 for bytes, 256 + merges for BPE, the header's
 * value for token files. */
int stepscope_dataset_vocab_size(const stepscope_dataset *ds);
size_t stepscope_dataset_token_count(const stepscope_dataset *ds);
const int *stepscope_dataset_tokens(const stepscope_dataset *ds);
/* The tokenizer used for text (to decode samples), NULL for token files. */
const stepscope_tokenizer *stepscope_dataset_tokenizer(const stepscope_dataset *ds);
/* One line for logs and run metadata, e.g.
 * "built-in corpus: 6512 bytes, byte tokenizer, 6512 tokens, vocab 256". */
const char *stepscope_dataset_describe(const stepscope_dataset *ds);

/* Largest T for which batches can be drawn (token count - 1). */
size_t stepscope_dataset_max_seq_len(const stepscope_dataset *ds);

/* Sequences first .. first+count-1 of optimizer step `step` with global batch size
 * global_batch (0 <= first, first + count <= global_batch), each of T tokens, into
 * inputs[count*T] and targets[count*T] (row-major, one row per sequence). */
int stepscope_dataset_read_sequences(const stepscope_dataset *ds, uint64_t seed, uint64_t step,
                                     int global_batch, int first, int count, int T, int *inputs,
                                     int *targets);

/* The iterator most callers want: one call per optimizer step. */
typedef struct {
  uint64_t seed;   /* same on every rank */
  uint64_t step;   /* next optimizer step to read; starts at 0, advanced by next_batch */
  int shard_index; /* this rank's data-parallel rank */
  int shard_count; /* number of data-parallel ranks (1 for world 1) */
} stepscope_data_cursor;

/* Sets *cursor to step 0 of the given seed and shard; EINVAL for a bad shard. */
int stepscope_data_cursor_init(stepscope_data_cursor *cursor, uint64_t seed, int shard_index,
                               int shard_count);

/* Fills inputs/targets [B,T] with this shard's B sequences of step cursor->step,
 * whose global batch is B * shard_count, then advances cursor->step by one. */
int stepscope_dataset_next_batch(const stepscope_dataset *ds, stepscope_data_cursor *cursor,
                                 int *inputs, int *targets, int B, int T);

/* Writes tokens[0..count-1] (each < vocab_size) as a token file; uint16 storage when
 * vocab_size <= 65536, else uint32. The file is written to path + ".tmp" and renamed. */
int stepscope_token_file_write(const char *path, const int *tokens, size_t count, int vocab_size,
                               char *err, size_t err_size);

/* Reads a token file (either format above). *tokens_out is malloc'ed (caller frees).
 * Returns STEPSCOPE_DATA_EFORMAT with a message when path exists but is not a valid
 * token file; *is_token_file (may be NULL) tells whether the magic matched. */
int stepscope_token_file_read(const char *path, int **tokens_out, size_t *count_out, int *vocab_out,
                              int *is_token_file, char *err, size_t err_size);

/* The built-in corpus (NUL-terminated; the length excludes the NUL). */
extern const char stepscope_builtin_corpus[];
extern const size_t stepscope_builtin_corpus_length;

#ifdef __cplusplus
}
#endif

#endif /* STEPSCOPE_TRAINER_DATA_DATASET_H */
