/*
 * data_check.h — --data must be text or a token file, and --vocab must cover
 * its vocabulary (data_check.c).
 */
#ifndef STEPSCOPE_TRAINER_DATA_CHECK_H
#define STEPSCOPE_TRAINER_DATA_CHECK_H

#include <stddef.h>

#include "config.h"

/* 0, or -1 with a message: a --data file that is neither text nor a token
 * file, or a --vocab smaller than the data's vocabulary. */
int data_check(const train_config *c, char *err, size_t n);

#endif
