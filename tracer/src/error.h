/*
 * error.h — filling a stepscope_error: one formatter for every module of the
 * library, so messages all read "FILE: offset N: expected X, found Y".
 */
#ifndef STEPSCOPE_ERROR_H
#define STEPSCOPE_ERROR_H

#include <stdint.h>

#include "stepscope.h"

/* Sets err (if not NULL) to code, offset and the formatted message. */
void error_set(stepscope_error *err, int code, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
