/*
 * tokenizer_internal.h — internal to trainer/data: how the BPE trainer (bpe_train.c)
 * hands its learned merges to the tokenizer (tokenizer.c).
 */
#ifndef STEPSCOPE_TRAINER_DATA_TOKENIZER_INTERNAL_H
#define STEPSCOPE_TRAINER_DATA_TOKENIZER_INTERNAL_H

#include <stdint.h>

#include "tokenizer.h"

/* Builds a tokenizer from merges[i] = {left, right} (merge i creates token 256 + i;
 * left/right < 256 + i). Copies the array. */
int tokenizer_from_merges(stepscope_tokenizer **out, const int32_t (*merges)[2], int merge_count);

#endif
