/*
 * data_error.h — internal to trainer/data: how the loader's functions fill the caller's
 * error buffer (dataset.c, token_file.c).
 */
#ifndef STEPSCOPE_TRAINER_DATA_DATA_ERROR_H
#define STEPSCOPE_TRAINER_DATA_DATA_ERROR_H

#include <stddef.h>

/* Formats a message into err[err_size]; does nothing when err is NULL or err_size is 0
 * (callers may ask for no message). */
void data_set_error(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
