/*
 * view_paths.c — keeps every request of `stepscope view` inside what it may serve.
 *
 * How it works: the request target is decoded once (query dropped, %XX decoded)
 * and then judged on the decoded bytes, so encoded tricks such as %2e%2e or %2f
 * are seen for what they are. Any "..", "." or empty segment, backslash, control
 * byte or NUL refuses the request outright — it is never "normalised". Run files
 * are single name segments of a restricted alphabet, and the resolved real path
 * must still lie inside the run directory's real path and be a regular file; a
 * symbolic link is never followed (one swapped in while serving is refused too).
 */
#include "view.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int view_path_decode(const char *target, char *out, size_t outlen) {
  size_t n = 0;
  if (target[0] != '/') return -1; /* absolute-form and authority-form are refused */
  for (const char *p = target; *p && *p != '?' && *p != '#'; p++) {
    char c = *p;
    if (c == '%') {
      int hi = hex_value(p[1]), lo = hi < 0 ? -1 : hex_value(p[2]);
      if (hi < 0 || lo < 0) return -1;
      c = (char)(hi * 16 + lo);
      p += 2;
    }
    if ((unsigned char)c < 0x20 || c == 0x7f || c == '\\') return -1;
    if (n + 1 >= outlen) return -1;
    out[n++] = c;
  }
  out[n] = '\0';
  /* judge every segment */
  const char *seg = out + 1;
  for (;;) {
    const char *end = strchr(seg, '/');
    size_t len = end ? (size_t)(end - seg) : strlen(seg);
    if (len == 0 && end) return -1;                            /* "//" */
    if (len == 1 && seg[0] == '.') return -1;                  /* "/./" */
    if (len == 2 && seg[0] == '.' && seg[1] == '.') return -1; /* "/../" */
    if (!end) break;
    seg = end + 1;
  }
  return 0;
}

int view_name_is_safe(const char *name) {
  if (!name[0] || name[0] == '.' || strlen(name) > 200) return 0;
  for (const char *p = name; *p; p++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

int view_file_inside(const char *dir, const char *name, char *resolved, size_t len) {
  char joined[PATH_MAX], real[PATH_MAX];
  if (!dir[0] || !view_name_is_safe(name)) return -1;
  int w = snprintf(joined, sizeof joined, "%s/%s", dir, name);
  if (w < 0 || (size_t)w >= sizeof joined) return -1;
  struct stat st;
  if (lstat(joined, &st) != 0 || S_ISLNK(st.st_mode)) return -1; /* links: never followed */
  if (!realpath(joined, real)) return -1;
  size_t dl = strlen(dir);
  if (strncmp(real, dir, dl) != 0 || real[dl] != '/') return -1; /* left the directory */
  if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  if (strlen(real) + 1 > len) return -1;
  memcpy(resolved, real, strlen(real) + 1);
  return 0;
}

int view_run_file(const view_run *run, const char *name, char *resolved, size_t len) {
  int generated = 0;
  for (int k = 0; k < VIEW_NFILES; k++)
    generated |= view_run_file_generated(run, k) && !strcmp(name, view_run_file_name(run, k));
  if (!generated && view_file_inside(run->dir, name, resolved, len) == 0) return 0;
  if (run->gen_dir[0] && view_file_inside(run->gen_dir, name, resolved, len) == 0) return 0;
  errno = ENOENT;
  return -1;
}
