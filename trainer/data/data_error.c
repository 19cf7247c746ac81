/*
 * data_error.c — the loader's error messages into the caller's buffer (data_error.h).
 */
#include "data_error.h"

#include <stdarg.h>
#include <stdio.h>

void data_set_error(char *err, size_t err_size, const char *fmt, ...) {
  if (!err || err_size == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_size, fmt, ap);
  va_end(ap);
}
