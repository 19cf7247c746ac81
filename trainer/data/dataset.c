/*
 * dataset.c — opening training data and drawing deterministic, shardable batches.
 *
 * Opening (stepscope_dataset_open) turns every source into one array of int tokens:
 * the built-in corpus or a text file through a tokenizer (bytes, or BPE learned from
 * that same text), or a token file as stored (token_file.c).
 *
 * Sampling is stateless (the scheme is documented in dataset.h): sequence number q of
 * the run maps to (epoch, index) = (q / K, q mod K) over K chunks of T tokens; the
 * epoch's key, derived from the seed, picks a shift of the chunk grid and a pseudo-
 * random permutation of the chunks. The permutation is a 4-round Feistel network on
 * the smallest even number of bits covering K, with "cycle walking" (re-encrypt until
 * the value falls below K): a bijection on 0..K-1 computed in O(1) memory, so no
 * shuffled index array is ever stored and any rank can compute any sequence.
 */
#include "dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_error.h"
#include "data_hash.h"

struct stepscope_dataset {
  int *tokens;
  size_t count;
  int vocab;
  stepscope_tokenizer *tokenizer; /* NULL for token files */
  char description[512];
};

const char *stepscope_data_strerror(int code) {
  switch (code) {
  case STEPSCOPE_DATA_OK: return "ok";
  case STEPSCOPE_DATA_EINVAL: return "invalid argument";
  case STEPSCOPE_DATA_EIO: return "input/output error";
  case STEPSCOPE_DATA_EFORMAT: return "bad data format";
  case STEPSCOPE_DATA_ENOMEM: return "out of memory";
  default: return "unknown error";
  }
}

/* Reads a whole file into memory. */
static int read_file(const char *path, unsigned char **data_out, size_t *len_out, char *err,
                     size_t err_size) {
  *data_out = NULL;
  *len_out = 0;
  FILE *f = fopen(path, "rb");
  if (!f) {
    data_set_error(err, err_size, "%s: cannot open: %s", path, strerror(errno));
    return STEPSCOPE_DATA_EIO;
  }
  size_t cap = 1 << 16, len = 0;
  unsigned char *data = malloc(cap);
  if (!data) {
    fclose(f);
    data_set_error(err, err_size, "%s: out of memory", path);
    return STEPSCOPE_DATA_ENOMEM;
  }
  for (;;) {
    if (len == cap) {
      unsigned char *bigger = cap <= SIZE_MAX / 2 ? realloc(data, cap * 2) : NULL;
      if (!bigger) {
        free(data);
        fclose(f);
        data_set_error(err, err_size, "%s: out of memory after %zu bytes", path, len);
        return STEPSCOPE_DATA_ENOMEM;
      }
      data = bigger;
      cap *= 2;
    }
    size_t got = fread(data + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  int failed = ferror(f);
  fclose(f);
  if (failed) {
    free(data);
    data_set_error(err, err_size, "%s: read error", path);
    return STEPSCOPE_DATA_EIO;
  }
  *data_out = data;
  *len_out = len;
  return STEPSCOPE_DATA_OK;
}

static int tokenize_text(stepscope_dataset *ds, const stepscope_dataset_options *opt,
                         const unsigned char *text, size_t len, const char *source, char *err,
                         size_t err_size) {
  int status = opt->tokenizer == STEPSCOPE_TOKENIZER_KIND_BPE
                   ? stepscope_tokenizer_train_bpe(&ds->tokenizer, text, len, opt->bpe_merges)
                   : stepscope_tokenizer_create_byte(&ds->tokenizer);
  if (status == STEPSCOPE_TOKENIZER_OK)
    status = stepscope_tokenizer_encode(ds->tokenizer, text, len, &ds->tokens, &ds->count);
  if (status != STEPSCOPE_TOKENIZER_OK) {
    data_set_error(err, err_size, "%s: tokenizer failed (%s)", source,
                   status == STEPSCOPE_TOKENIZER_ENOMEM ? "out of memory" : "invalid argument");
    return status == STEPSCOPE_TOKENIZER_ENOMEM ? STEPSCOPE_DATA_ENOMEM : STEPSCOPE_DATA_EINVAL;
  }
  ds->vocab = stepscope_tokenizer_vocab_size(ds->tokenizer);
  if (opt->tokenizer == STEPSCOPE_TOKENIZER_KIND_BPE)
    snprintf(ds->description, sizeof ds->description,
             "%s: %zu bytes, BPE tokenizer (%d merges), %zu tokens, vocab %d", source, len,
             stepscope_tokenizer_merge_count(ds->tokenizer), ds->count, ds->vocab);
  else
    snprintf(ds->description, sizeof ds->description,
             "%s: %zu bytes, byte tokenizer, %zu tokens, vocab %d", source, len, ds->count,
             ds->vocab);
  return STEPSCOPE_DATA_OK;
}

int stepscope_dataset_open(stepscope_dataset **out, const stepscope_dataset_options *options,
                           char *err, size_t err_size) {
  *out = NULL;
  stepscope_dataset_options defaults = {NULL, STEPSCOPE_TOKENIZER_KIND_BYTE, 0};
  const stepscope_dataset_options *opt = options ? options : &defaults;
  if (opt->tokenizer != STEPSCOPE_TOKENIZER_KIND_BYTE &&
      opt->tokenizer != STEPSCOPE_TOKENIZER_KIND_BPE) {
    data_set_error(err, err_size, "unknown tokenizer kind %d", (int)opt->tokenizer);
    return STEPSCOPE_DATA_EINVAL;
  }
  if (opt->tokenizer == STEPSCOPE_TOKENIZER_KIND_BPE &&
      (opt->bpe_merges < 1 || opt->bpe_merges > STEPSCOPE_TOKENIZER_MAX_MERGES)) {
    data_set_error(err, err_size, "BPE merges must be between 1 and %d, not %d",
                   STEPSCOPE_TOKENIZER_MAX_MERGES, opt->bpe_merges);
    return STEPSCOPE_DATA_EINVAL;
  }
  stepscope_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) {
    data_set_error(err, err_size, "out of memory");
    return STEPSCOPE_DATA_ENOMEM;
  }

  int status;
  if (!opt->path || !opt->path[0]) {
    status = tokenize_text(ds, opt, (const unsigned char *)stepscope_builtin_corpus,
                           stepscope_builtin_corpus_length, "built-in corpus", err, err_size);
  } else {
    int is_token_file = 0;
    status = stepscope_token_file_read(opt->path, &ds->tokens, &ds->count, &ds->vocab,
                                       &is_token_file, err, err_size);
    if (is_token_file) {
      if (status == STEPSCOPE_DATA_OK)
        snprintf(ds->description, sizeof ds->description, "token file %s: %zu tokens, vocab %d",
                 opt->path, ds->count, ds->vocab);
    } else if (status != STEPSCOPE_DATA_EIO) {
      unsigned char *text;
      size_t len;
      status = read_file(opt->path, &text, &len, err, err_size);
      if (status == STEPSCOPE_DATA_OK) {
        char source[400];
        snprintf(source, sizeof source, "text file %s", opt->path);
        status = tokenize_text(ds, opt, text, len, source, err, err_size);
        free(text);
      }
    }
  }
  if (status == STEPSCOPE_DATA_OK && ds->count < 2) {
    data_set_error(err, err_size,
                   "%s: only %zu tokens; at least 2 are needed (one input and its target)",
                   opt->path && opt->path[0] ? opt->path : "built-in corpus", ds->count);
    status = STEPSCOPE_DATA_EFORMAT;
  }
  if (status != STEPSCOPE_DATA_OK) {
    stepscope_dataset_close(ds);
    return status;
  }
  *out = ds;
  return STEPSCOPE_DATA_OK;
}

void stepscope_dataset_close(stepscope_dataset *ds) {
  if (!ds) return;
  free(ds->tokens);
  stepscope_tokenizer_free(ds->tokenizer);
  free(ds);
}

int stepscope_dataset_vocab_size(const stepscope_dataset *ds) {
  return ds->vocab;
}

size_t stepscope_dataset_token_count(const stepscope_dataset *ds) {
  return ds->count;
}

const int *stepscope_dataset_tokens(const stepscope_dataset *ds) {
  return ds->tokens;
}

const stepscope_tokenizer *stepscope_dataset_tokenizer(const stepscope_dataset *ds) {
  return ds->tokenizer;
}

const char *stepscope_dataset_describe(const stepscope_dataset *ds) {
  return ds->description;
}

size_t stepscope_dataset_max_seq_len(const stepscope_dataset *ds) {
  return ds->count - 1;
}

/* A keyed bijection on 0..n-1 (Feistel network + cycle walking). */
static uint64_t permute_index(uint64_t index, uint64_t n, uint64_t key) {
  if (n <= 1) return 0;
  int bits = 2;
  while (bits < 64 && ((uint64_t)1 << bits) < n)
    bits += 2; /* even, so the two halves have equal width */
  int half = bits / 2;
  uint64_t mask = ((uint64_t)1 << half) - 1;
  uint64_t x = index;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; round++) {
      uint64_t next_right = left ^ (data_hash_pair(key + round, right) & mask);
      left = right;
      right = next_right;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

/* Offset of the first token of run-wide sequence number q. */
static size_t sequence_start(const stepscope_dataset *ds, uint64_t seed, uint64_t q, size_t T) {
  size_t n = ds->count;
  size_t shifts = T < n - T ? T : n - T; /* >= 1 because n >= T + 1 */
  uint64_t chunks = (n - shifts) / T;    /* >= 1 */
  uint64_t epoch = q / chunks, index = q % chunks;
  uint64_t epoch_key = data_hash_pair(seed, epoch);
  size_t shift = (size_t)(data_hash_mix(epoch_key ^ 0x5348494654ull) % shifts);
  return shift + (size_t)permute_index(index, chunks, epoch_key) * T;
}

int stepscope_dataset_read_sequences(const stepscope_dataset *ds, uint64_t seed, uint64_t step,
                                     int global_batch, int first, int count, int T, int *inputs,
                                     int *targets) {
  if (!ds || !inputs || !targets || T < 1 || global_batch < 1 || first < 0 || count < 0 ||
      count > global_batch - first || (size_t)T > ds->count - 1)
    return STEPSCOPE_DATA_EINVAL;
  for (int b = 0; b < count; b++) {
    uint64_t q = step * (uint64_t)global_batch + (uint64_t)(first + b);
    const int *window = ds->tokens + sequence_start(ds, seed, q, (size_t)T);
    memcpy(inputs + (size_t)b * T, window, sizeof(int) * (size_t)T);
    memcpy(targets + (size_t)b * T, window + 1, sizeof(int) * (size_t)T);
  }
  return STEPSCOPE_DATA_OK;
}

int stepscope_data_cursor_init(stepscope_data_cursor *cursor, uint64_t seed, int shard_index,
                               int shard_count) {
  if (!cursor || shard_count < 1 || shard_index < 0 || shard_index >= shard_count)
    return STEPSCOPE_DATA_EINVAL;
  cursor->seed = seed;
  cursor->step = 0;
  cursor->shard_index = shard_index;
  cursor->shard_count = shard_count;
  return STEPSCOPE_DATA_OK;
}

int stepscope_dataset_next_batch(const stepscope_dataset *ds, stepscope_data_cursor *cursor,
                                 int *inputs, int *targets, int B, int T) {
  if (!cursor || B < 1 || cursor->shard_count < 1 || cursor->shard_index < 0 ||
      cursor->shard_index >= cursor->shard_count || B > INT32_MAX / cursor->shard_count)
    return STEPSCOPE_DATA_EINVAL;
  int status =
      stepscope_dataset_read_sequences(ds, cursor->seed, cursor->step, B * cursor->shard_count,
                                       cursor->shard_index * B, B, T, inputs, targets);
  if (status == STEPSCOPE_DATA_OK) cursor->step++;
  return status;
}
