/*
 * view_validate.c — whether a trace export or a report that `stepscope view`
 * finds in a run directory is whole. A full disk or a killed writer (before
 * outputs were written under a temporary name and renamed) could leave a
 * truncated trace.json or an empty report.json; serving them would show a
 * broken page as if the run were valid. A report (small) must be exactly one
 * JSON value; a trace export (possibly gigabytes) must start with '{' or '['
 * and end with the matching '}' or ']' after its last event, and a .gz one
 * must decompress to its end without error, within its decompression limit
 * (stepscope.h: a bomb is not inflated to its end). view_run.c regenerates
 * what fails, or says what is wrong.
 */
#include "view.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "ssa_io.h"

#define REPORT_MAX (256u << 20)

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* First and last non-blank bytes of a plain file. */
static int plain_ends(const char *path, int *first, int *last) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  int c;
  while ((c = fgetc(f)) != EOF && isspace(c)) {
  }
  *first = c;
  *last = EOF;
  if (c != EOF) {
    char buf[4096];
    long back = 0;
    if (fseek(f, 0, SEEK_END) == 0) {
      long size = ftell(f);
      while (back < size && *last == EOF) {
        long chunk = size - back > (long)sizeof buf ? (long)sizeof buf : size - back;
        if (fseek(f, size - back - chunk, SEEK_SET) != 0 ||
            fread(buf, 1, (size_t)chunk, f) != (size_t)chunk)
          break;
        for (long i = chunk - 1; i >= 0 && *last == EOF; i--)
          if (!isspace((unsigned char)buf[i])) *last = (unsigned char)buf[i];
        back += chunk;
      }
    }
  }
  fclose(f);
  return 0;
}

/* The same for a gzip file, decompressed to its end; -1 when it is damaged,
 * -2 when it inflates past `limit` bytes. */
static int gzip_ends(const char *path, uint64_t limit, int *first, int *last) {
  gzFile g = gzopen(path, "rb");
  if (!g) return -1;
  char *buf = malloc(1 << 16);
  *first = *last = EOF;
  int n, ok = buf != NULL;
  uint64_t inflated = 0;
  while (ok && (n = gzread(g, buf, 1 << 16)) > 0) {
    if ((inflated += (uint64_t)n) > limit) break;
    for (int i = 0; i < n; i++) {
      unsigned char c = (unsigned char)buf[i];
      if (isspace(c)) continue;
      if (*first == EOF) *first = c;
      *last = c;
    }
  }
  int err = 0;
  gzerror(g, &err);
  if (err != Z_OK && err != Z_STREAM_END) ok = 0; /* truncated or corrupt */
  gzclose(g);
  free(buf);
  return inflated > limit ? -2 : ok ? 0 : -1;
}

int view_file_is_whole(const char *path, int is_report, const stepscope_inflate_limits *inflate,
                       char *why, size_t n) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(why, n, "cannot be read");
    return 0;
  }
  if (st.st_size == 0) {
    snprintf(why, n, "is empty (a write cut short?)");
    return 0;
  }
  if (is_report) {
    if ((unsigned long long)st.st_size > REPORT_MAX) {
      snprintf(why, n, "is larger than a report can be");
      return 0;
    }
    FILE *f = fopen(path, "rb");
    char *text = malloc((size_t)st.st_size + 1);
    size_t got = f && text ? fread(text, 1, (size_t)st.st_size, f) : 0;
    if (f) fclose(f);
    int ok = text && got == (size_t)st.st_size;
    if (ok) {
      text[got] = '\0';
      ok = strlen(text) == got && ssa_json_valid(text);
    }
    free(text);
    if (!ok) snprintf(why, n, "is not valid JSON (truncated?)");
    return ok;
  }
  int first, last;
  int rc =
      ends_with(path, ".gz")
          ? gzip_ends(path, stepscope_inflate_limit(inflate, (uint64_t)st.st_size), &first, &last)
          : plain_ends(path, &first, &last);
  if (rc == -2) {
    snprintf(why, n, "inflates past its decompression limit (a bomb? STEPSCOPE_INFLATE_RATIO)");
    return 0;
  }
  if (rc != 0) {
    snprintf(why, n, "is damaged or truncated (gzip)");
    return 0;
  }
  if (!((first == '{' && last == '}') || (first == '[' && last == ']'))) {
    snprintf(why, n, "does not end where a trace export ends (truncated?)");
    return 0;
  }
  return 1;
}
