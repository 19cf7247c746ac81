/*
 * train_data.c — the training loop's view of the data (train_data.h), over the
 * data loader of trainer/data/ (dataset.h).
 *
 * How it works: opens the dataset (text with the byte tokenizer, a token file,
 * or the built-in corpus) and answers batch requests with
 * stepscope_dataset_read_sequences, which is a pure function of (seed, step,
 * global batch, sequence index): DP ranks and micro-batches just ask for their
 * rows, and every parallel layout sees the same global batch.
 */
#include "train_data.h"

#include <stdio.h>
#include <stdlib.h>

#include "dataset.h"

struct train_data {
  stepscope_dataset *ds;
  unsigned long long seed;
  int seq, batch;
};

train_data *train_data_open(const char *path, int bpe_merges, int seq, unsigned long long seed,
                            int batch, char *err, size_t errlen) {
  train_data *d = calloc(1, sizeof *d);
  if (!d) {
    snprintf(err, errlen, "out of memory opening the data");
    return NULL;
  }
  stepscope_dataset_options opt = {
      path, bpe_merges > 0 ? STEPSCOPE_TOKENIZER_KIND_BPE : STEPSCOPE_TOKENIZER_KIND_BYTE,
      bpe_merges};
  char e[512];
  e[0] = 0;
  int rc = stepscope_dataset_open(&d->ds, &opt, e, sizeof e);
  if (rc != STEPSCOPE_DATA_OK) {
    snprintf(err, errlen, "--data %s: %s", path && path[0] ? path : "(built-in corpus)",
             e[0] ? e : stepscope_data_strerror(rc));
    free(d);
    return NULL;
  }
  if ((size_t)seq > stepscope_dataset_max_seq_len(d->ds)) {
    snprintf(err, errlen, "--seq %d is longer than the data allows (%zu tokens)", seq,
             stepscope_dataset_max_seq_len(d->ds));
    stepscope_dataset_close(d->ds);
    free(d);
    return NULL;
  }
  d->seed = seed;
  d->seq = seq;
  d->batch = batch;
  return d;
}

void train_data_close(train_data *d) {
  if (!d) return;
  stepscope_dataset_close(d->ds);
  free(d);
}

int train_data_vocab(const train_data *d) {
  return stepscope_dataset_vocab_size(d->ds);
}

const char *train_data_describe(const train_data *d) {
  return stepscope_dataset_describe(d->ds);
}

int train_data_batch(train_data *d, int step, int first, int count, int *tokens, int *targets,
                     char *err, size_t errlen) {
  int rc = stepscope_dataset_read_sequences(d->ds, d->seed, (uint64_t)step, d->batch, first, count,
                                            d->seq, tokens, targets);
  if (rc != STEPSCOPE_DATA_OK) {
    snprintf(err, errlen, "reading sequences %d..%d of step %d: %s", first, first + count - 1, step,
             stepscope_data_strerror(rc));
    return -1;
  }
  return 0;
}
