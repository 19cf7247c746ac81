/*
 * out_writer.c — the buffered writer of ssa_io.h. A 1 MiB buffer is filled
 * by hand-formatted numbers and escaped strings and handed to fwrite or
 * gzwrite (level 1: fast, since exports are large) when full.
 *
 * Strings from traces are untrusted bytes: JSON string literals and raw
 * text written through ssa_out_utf8 are always valid UTF-8 — each invalid
 * sequence (its maximal subpart) becomes U+FFFD, so reports and exports
 * parse in strict JSON readers and Perfetto.
 *
 * Files are written to "<dir>/.<name>.tmp-XXXXXX" and renamed into place by
 * ssa_out_close (see ssa_io.h), or removed by temp_files.c when the process is
 * killed first; inputs registered with
 * ssa_out_protect_input (device, inode) are never opened for writing.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "ssa_io.h"
#include "stepscope.h"
#include "sc_hash.h"
#include "sc_json.h"

#define OUT_BUF (1u << 20)

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* ---- inputs that must not be written over */

typedef struct file_id {
  dev_t dev;
  ino_t ino;
} file_id;
static pthread_mutex_t inputs_lock = PTHREAD_MUTEX_INITIALIZER;
static file_id *inputs;
static size_t ninputs, inputs_cap;

void ssa_out_protect_input(const char *path) {
  struct stat st;
  if (path && stat(path, &st) == 0) ssa_out_protect_file(&st);
}

void ssa_out_protect_file(const struct stat *st) {
  pthread_mutex_lock(&inputs_lock);
  if (ninputs == inputs_cap) {
    size_t cap = inputs_cap ? inputs_cap * 2 : 64;
    file_id *n = realloc(inputs, cap * sizeof *n);
    if (n) inputs = n, inputs_cap = cap;
  }
  if (ninputs < inputs_cap) inputs[ninputs++] = (file_id){st->st_dev, st->st_ino};
  pthread_mutex_unlock(&inputs_lock);
}

int ssa_out_check_target(const char *path, char *why, size_t n) {
  struct stat st;
  if (!path || strcmp(path, "-") == 0 || stat(path, &st) != 0) return 0;
  int hit = 0;
  pthread_mutex_lock(&inputs_lock);
  for (size_t i = 0; i < ninputs && !hit; i++)
    hit = inputs[i].dev == st.st_dev && inputs[i].ino == st.st_ino;
  pthread_mutex_unlock(&inputs_lock);
  if (!hit) return 0;
  if (why && n)
    snprintf(why, n,
             "%s is one of this command's inputs (the same file): refusing to write over it", path);
  return STEPSCOPE_E_ARGUMENT;
}

/* ---- opening and closing */

int ssa_out_open_file(ssa_out *o, FILE *f) {
  memset(o, 0, sizeof *o);
  o->buf = malloc(OUT_BUF);
  if (!o->buf) return STEPSCOPE_E_NOMEM;
  o->cap = OUT_BUF;
  o->file = f;
  return 0;
}

/* Creates the temporary file beside `path`: its fd, or -1 (errno set). */
static int open_temporary(ssa_out *o, const char *path) {
  const char *slash = strrchr(path, '/');
  size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
  const char *base = slash ? slash + 1 : path;
  size_t len = dirlen + strlen(base) + 16;
  o->tmp_path = malloc(len);
  o->final_path = strdup(path);
  if (!o->tmp_path || !o->final_path) {
    errno = ENOMEM;
    return -1;
  }
  snprintf(o->tmp_path, len, "%.*s.%s.tmp-XXXXXX", (int)dirlen, path, base);
  int slot;
  int fd = ssa_temp_create(o->tmp_path, O_CLOEXEC, &slot); /* removed if the process is killed */
  if (fd < 0) return -1;
  o->temp_slot = slot + 1;
  mode_t mask = umask(0); /* as fopen would create it: 0666 less the umask */
  umask(mask);
  if (fchmod(fd, 0666 & ~mask) != 0) { /* not fatal: the file stays private */
  }
  return fd;
}

static void drop_paths(ssa_out *o) {
  if (o->temp_slot) ssa_temp_forget(o->temp_slot - 1); /* renamed or removed by now */
  o->temp_slot = 0;
  free(o->tmp_path);
  free(o->final_path);
  o->tmp_path = o->final_path = NULL;
}

int ssa_out_open(ssa_out *o, const char *path) {
  if (strcmp(path, "-") == 0) return ssa_out_open_file(o, stdout);
  memset(o, 0, sizeof *o);
  int rc = ssa_out_check_target(path, o->why, sizeof o->why);
  if (rc) return rc;
  struct stat st;
  int direct = stat(path, &st) == 0 && !S_ISREG(st.st_mode); /* /dev/null, a pipe */
  int fd = direct ? open(path, O_WRONLY | O_CLOEXEC) : open_temporary(o, path);
  if (direct && !(o->final_path = strdup(path))) {
    if (fd >= 0) close(fd);
    fd = -1;
    errno = ENOMEM;
  }
  if (fd < 0) {
    snprintf(o->why, sizeof o->why, "cannot write %s: %s", path, strerror(errno));
    if (o->tmp_path && errno != ENOMEM) unlink(o->tmp_path);
    drop_paths(o);
    return errno == ENOMEM ? STEPSCOPE_E_NOMEM : STEPSCOPE_E_IO;
  }
  o->buf = malloc(OUT_BUF);
  if (ends_with(path, ".gz")) {
    o->gz = o->buf ? gzdopen(fd, "wb1") : NULL;
    if (o->gz) gzbuffer(o->gz, 1u << 18);
  } else {
    o->file = o->buf ? fdopen(fd, "wb") : NULL;
    o->owns_file = 1;
  }
  if (!o->gz && !o->file) {
    close(fd);
    if (o->tmp_path) unlink(o->tmp_path);
    drop_paths(o);
    free(o->buf);
    o->buf = NULL;
    snprintf(o->why, sizeof o->why, "cannot write %s: out of memory", path);
    return STEPSCOPE_E_NOMEM;
  }
  o->cap = OUT_BUF;
  return 0;
}

void ssa_out_flush(ssa_out *o) {
  if (o->len == 0) return;
  if (!o->error) {
    if (o->gz) {
      if (gzwrite(o->gz, o->buf, (unsigned)o->len) != (int)o->len) o->error = STEPSCOPE_E_IO;
    } else if (fwrite(o->buf, 1, o->len, o->file) != o->len) {
      o->error = STEPSCOPE_E_IO;
    }
    if (o->error) o->flush_errno = errno;
  }
  o->bytes += o->len;
  o->len = 0;
}

int ssa_out_close(ssa_out *o) {
  ssa_out_flush(o);
  int err_no = o->flush_errno;
  if (o->gz) {
    if (gzclose(o->gz) != Z_OK && !o->error) o->error = STEPSCOPE_E_IO, err_no = errno;
  } else if (o->file) {
    if (fflush(o->file) != 0 && !o->error) o->error = STEPSCOPE_E_IO, err_no = errno;
    if (o->tmp_path && !o->error && fsync(fileno(o->file)) != 0 && errno != EINVAL)
      o->error = STEPSCOPE_E_IO, err_no = errno;
    if (o->owns_file && fclose(o->file) != 0 && !o->error)
      o->error = STEPSCOPE_E_IO, err_no = errno;
  }
  if (o->tmp_path) {
    if (!o->error && rename(o->tmp_path, o->final_path) != 0)
      o->error = STEPSCOPE_E_IO, err_no = errno;
    if (o->error) unlink(o->tmp_path); /* the final name keeps what it had */
  }
  if (o->error)
    snprintf(o->why, sizeof o->why, "write error on %s%s%s",
             o->final_path ? o->final_path : "output", err_no ? ": " : "",
             err_no ? strerror(err_no) : "");
  drop_paths(o);
  free(o->buf);
  free(o->doubles);
  o->buf = NULL;
  o->doubles = NULL;
  o->gz = NULL;
  o->file = NULL;
  return o->error;
}

void ssa_out_write(ssa_out *o, const char *s, size_t n) {
  while (n > 0) {
    if (o->len == o->cap) ssa_out_flush(o);
    size_t k = o->cap - o->len;
    if (k > n) k = n;
    memcpy(o->buf + o->len, s, k);
    o->len += k;
    s += k;
    n -= k;
  }
}

void ssa_out_str(ssa_out *o, const char *s) {
  ssa_out_write(o, s, strlen(s));
}

void ssa_out_printf(ssa_out *o, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    ssa_out_write(o, tmp, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    o->error = STEPSCOPE_E_NOMEM;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  ssa_out_write(o, big, (size_t)n);
  free(big);
}

void ssa_out_u64(ssa_out *o, uint64_t v) {
  char tmp[24];
  int i = 24;
  do {
    tmp[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  ssa_out_write(o, tmp + i, (size_t)(24 - i));
}

void ssa_out_i64(ssa_out *o, int64_t v) {
  if (v < 0) {
    ssa_out_char(o, '-');
    ssa_out_u64(o, (uint64_t)0 - (uint64_t)v);
  } else {
    ssa_out_u64(o, (uint64_t)v);
  }
}

void ssa_out_us(ssa_out *o, int64_t ns) {
  uint64_t u;
  if (ns < 0) {
    ssa_out_char(o, '-');
    u = (uint64_t)0 - (uint64_t)ns;
  } else {
    u = (uint64_t)ns;
  }
  ssa_out_u64(o, u / 1000);
  unsigned f = (unsigned)(u % 1000);
  char tmp[4] = {'.', (char)('0' + f / 100), (char)('0' + f / 10 % 10), (char)('0' + f % 10)};
  ssa_out_write(o, tmp, 4);
}

void ssa_out_hex64(ssa_out *o, uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  char tmp[16];
  for (int i = 15; i >= 0; i--, v >>= 4)
    tmp[i] = digits[v & 15];
  ssa_out_write(o, tmp, sizeof tmp);
}

/* The "%.9g" text of recently written doubles, by their bits: a direct-mapped
 * table, an entry replaced when another value maps to it. */
#define DOUBLE_MEMO_N 1024
struct ssa_out_double_memo {
  uint64_t bits[DOUBLE_MEMO_N];
  unsigned char len[DOUBLE_MEMO_N]; /* 0: empty */
  char text[DOUBLE_MEMO_N][24];
};

void ssa_out_double(ssa_out *o, double v) {
  if (v != v || v > 1e308 || v < -1e308) {
    ssa_out_str(o, "null");
    return;
  }
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  if (!o->doubles) o->doubles = calloc(1, sizeof *o->doubles); /* NULL: no memo, same text */
  struct ssa_out_double_memo *m = o->doubles;
  size_t slot = (size_t)(sc_mix64(bits) % DOUBLE_MEMO_N);
  if (m && m->len[slot] && m->bits[slot] == bits) {
    ssa_out_write(o, m->text[slot], m->len[slot]);
    return;
  }
  char tmp[40];
  int n = snprintf(tmp, sizeof tmp, "%.9g", v);
  ssa_out_write(o, tmp, (size_t)n);
  if (m && n > 0 && (size_t)n < sizeof m->text[slot]) {
    m->bits[slot] = bits;
    m->len[slot] = (unsigned char)n;
    memcpy(m->text[slot], tmp, (size_t)n);
  }
}

/* Length of the well-formed UTF-8 sequence at p (Unicode Table 3-7: no
 * overlong forms, no surrogates, nothing above U+10FFFF), or 0 if it is not
 * one; then *bad is the length of its maximal subpart (the bytes that one
 * U+FFFD replaces, as Unicode and the WHATWG decoder do). p is
 * NUL-terminated, and NUL is never a continuation byte, so reads stop there. */

void ssa_out_utf8(ssa_out *o, const char *s) {
  const unsigned char *p = (const unsigned char *)s, *run = p;
  while (*p) {
    if (*p < 0x80) {
      p++;
      continue;
    }
    size_t bad,
        n = sc_utf8_sequence(p, SIZE_MAX, &bad); /* NUL-terminated: the NUL ends any sequence */
    if (n) {
      p += n;
      continue;
    }
    ssa_out_write(o, (const char *)run, (size_t)(p - run));
    ssa_out_write(o, "\xEF\xBF\xBD", 3);
    p += bad;
    run = p;
  }
  ssa_out_write(o, (const char *)run, (size_t)(p - run));
}

static void put_out(void *ctx, const char *bytes, size_t n) {
  ssa_out_write(ctx, bytes, n);
}

void ssa_out_json_string(ssa_out *o, const char *s) {
  sc_json_string(s, s ? strlen(s) : 0, 0, put_out, o);
}
