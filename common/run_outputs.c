/*
 * run_outputs.c — sc_run_outputs.h: tells stepscope's derived outputs in a run directory
 * by their first bytes, and removes them when a new run is written over the old one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sc_run_outputs.h"

#define HEAD_BYTES 512

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int has(const unsigned char *h, size_t n, const char *needle) {
  return memmem(h, n, needle, strlen(needle)) != NULL;
}

static int starts(const unsigned char *h, size_t n, const char *prefix) {
  size_t m = strlen(prefix);
  return n >= m && memcmp(h, prefix, m) == 0;
}

/* The JSON outputs of export, analyze and diff, by how their writers begin them. */
static const char *json_kind(const unsigned char *h, size_t n) {
  if (starts(h, n, "{\"traceEvents\":[\n{\"ph\":\"M\"")) return "export";
  if (!starts(h, n, "{\"schema_version\":")) return NULL;
  if (has(h, n, "\"generator\":\"stepscope analyze ")) return "report";
  if (has(h, n, "\"kind\":\"stepscope.diff")) return "comparison";
  return NULL; /* a plan (a prediction: an input, not derived) or another version's */
}

/* A Perfetto export: the first packet (field 1 of Trace) is the first rank's process
 * track, named "rank N (host, device)". */
static const char *pftrace_kind(const unsigned char *h, size_t n) {
  size_t first = n < 64 ? n : 64;
  const unsigned char *r = memmem(h, first, "rank ", 5);
  if (!starts(h, n, "\x0a") || !r) return NULL;
  const unsigned char *p = r + 5, *end = h + first;
  if (p >= end || *p < '0' || *p > '9') return NULL;
  while (p < end && *p >= '0' && *p <= '9')
    p++;
  return end - p >= 2 && p[0] == ' ' && p[1] == '(' ? "Perfetto export" : NULL;
}

const char *sc_derived_output_kind(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  int json = ends_with(base, ".json"),
      gz = ends_with(base, ".json.gz") || ends_with(base, ".pftrace.gz"),
      pftrace = ends_with(base, ".pftrace"), html = ends_with(base, ".html");
  if (!json && !gz && !pftrace && !html) return NULL;
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) return NULL; /* links are not ours */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return NULL;
  unsigned char h[HEAD_BYTES];
  ssize_t got = pread(fd, h, sizeof h, 0);
  close(fd);
  if (got <= 0) return NULL;
  size_t n = (size_t)got;
  if (json) return json_kind(h, n);
  if (gz) { /* the header holds NUL bytes: compared by length, not as a string */
    static const unsigned char zlib_fast[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 3};
    return n >= sizeof zlib_fast && memcmp(h, zlib_fast, sizeof zlib_fast) == 0 ? "export" : NULL;
  }
  if (pftrace) return pftrace_kind(h, n);
  return starts(h, n, "<!DOCTYPE html>") && has(h, n, "the stepscope viewer's page") ? "viewer page"
                                                                                     : NULL;
}

/* Appends `name` to the list in buf ("a, b"); when the rest would not fit, ends it with
 * "..." (every addition leaves room for that). */
static void list_add(char *buf, size_t len, const char *name) {
  if (!buf || len < 8) return;
  size_t used = strlen(buf);
  if (used >= 3 && strcmp(buf + used - 3, "...") == 0) return; /* full */
  const char *sep = used ? ", " : "";
  if (used + strlen(sep) + strlen(name) + 5 < len)
    snprintf(buf + used, len - used, "%s%s", sep, name);
  else
    snprintf(buf + used, len - used, "%s...", sep);
}

size_t sc_remove_derived_outputs(const char *dir, char *removed, size_t removed_len, char *failed,
                                 size_t failed_len) {
  if (removed && removed_len) removed[0] = '\0';
  if (failed && failed_len) failed[0] = '\0';
  DIR *d = opendir(dir);
  if (!d) return 0;
  size_t count = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char path[4096];
    if (e->d_name[0] == '.' ||
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
        !sc_derived_output_kind(path))
      continue;
    if (unlink(path) == 0) {
      list_add(removed, removed_len, e->d_name);
      count++;
    } else if (errno != ENOENT) {
      list_add(failed, failed_len, e->d_name);
    }
  }
  closedir(d);
  return count;
}
