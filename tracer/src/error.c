/*
 * error.c — see error.h.
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

void error_set(stepscope_error *err, int code, uint64_t offset, const char *fmt, ...) {
  if (!err) return;
  err->code = code;
  err->offset = offset;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
}
