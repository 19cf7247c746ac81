/*
 * text_list.c — growing lists of formatted messages: the warnings of a rank, a run and an
 * analysis, and a diff's findings, all kept the same way (a strdup'd line per message, cut
 * at the list's own length limit) by one function instead of one copy per list.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_io.h"
#include "stepscope.h"

int ssa_text_list_vadd(char ***list, size_t *n, size_t *cap, size_t max_len, const char *fmt,
                       va_list ap) {
  char buf[1024];
  if (max_len > sizeof buf) max_len = sizeof buf;
  vsnprintf(buf, max_len, fmt, ap);
  if (ssa_grow((void **)list, cap, *n + 1, sizeof(char *))) return STEPSCOPE_E_NOMEM;
  char *s = strdup(buf);
  if (!s) return STEPSCOPE_E_NOMEM;
  (*list)[(*n)++] = s;
  return 0;
}

void ssa_text_list_free(char **list, size_t n) {
  for (size_t i = 0; list && i < n; i++)
    free(list[i]);
  free(list);
}
