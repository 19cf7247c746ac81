/*
 * train_data.h — what the training loop needs from the data: the vocabulary
 * size and, for a step, the token and target ids of any range of that step's
 * global batch.
 *
 * How it works: a thin adapter over the data loader in trainer/data/ (text or
 * token files, or the built-in corpus). Batches are a pure function of
 * (seed, step, sequence index), so every parallel layout trains on exactly the
 * same sequences: DP rank r takes its contiguous share of the global batch.
 */
#ifndef STEPSCOPE_TRAINER_TRAIN_DATA_H
#define STEPSCOPE_TRAINER_TRAIN_DATA_H

#include <stddef.h>

typedef struct train_data train_data;

/* path NULL or "": the built-in corpus; bpe_merges 0: byte tokenizer, else BPE
 * learned from the text. Returns NULL with a message on error. */
train_data *train_data_open(const char *path, int bpe_merges, int seq, unsigned long long seed,
                            int batch, char *err, size_t errlen);
void train_data_close(train_data *d);
int train_data_vocab(const train_data *d);
/* A short description ("built-in corpus, 12345 tokens, byte vocabulary"). */
const char *train_data_describe(const train_data *d);
/* Sequences [first, first+count) of the global batch of `step`: tokens and the
 * next-token targets, [count*seq] each. Returns 0, or -1 with a message. */
int train_data_batch(train_data *d, int step, int first, int count, int *tokens, int *targets,
                     char *err, size_t errlen);

#endif /* STEPSCOPE_TRAINER_TRAIN_DATA_H */
