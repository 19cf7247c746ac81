/*
 * run_dir.c — what a run directory is: one trace file per rank, named
 * rank-NNNNN.trace.zst, and nothing else required. Tools list the files
 * with stepscope_run_files instead of knowing the naming themselves.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "sc_grow.h"
#include "stepscope.h"

static int is_trace_name(const char *name) {
  size_t n = strlen(name);
  static const char prefix[] = "rank-", suffix[] = ".trace.zst";
  return n > sizeof prefix - 1 + sizeof suffix - 1 &&
         strncmp(name, prefix, sizeof prefix - 1) == 0 &&
         strcmp(name + n - (sizeof suffix - 1), suffix) == 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void stepscope_run_files_free(char **paths, size_t count) {
  if (!paths) return;
  for (size_t i = 0; i < count; i++)
    free(paths[i]);
  free(paths);
}

int stepscope_run_files(const char *dir, char ***paths, size_t *count, stepscope_error *err) {
  *paths = NULL;
  *count = 0;
  DIR *d = opendir(dir);
  if (!d) {
    error_set(err, STEPSCOPE_E_IO, 0, "%s: cannot open run directory: %s", dir, strerror(errno));
    return STEPSCOPE_E_IO;
  }
  char **list = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d))) {
    if (!is_trace_name(e->d_name)) continue;
    if (n == cap) {
      char **nl = sc_grow(list, &cap, n + 1, sizeof *nl, 64);
      if (!nl) {
        rc = STEPSCOPE_E_NOMEM;
        break;
      }
      list = nl;
    }
    size_t len = strlen(dir) + 1 + strlen(e->d_name) + 1;
    char *path = malloc(len);
    if (!path) {
      rc = STEPSCOPE_E_NOMEM;
      break;
    }
    snprintf(path, len, "%s/%s", dir, e->d_name);
    list[n++] = path;
  }
  closedir(d);
  if (rc) {
    stepscope_run_files_free(list, n);
    error_set(err, rc, 0, "%s: out of memory listing files", dir);
    return rc;
  }
  if (n) qsort(list, n, sizeof *list, cmp_str);
  *paths = list;
  *count = n;
  return 0;
}
