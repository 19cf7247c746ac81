/*
 * kineto_source.c — the file source of the Kineto importer: which way a
 * file's bytes reach the reader (plain, gzip inflated whole, through a
 * pipe, streamed, or split over two threads), bytes in memory, and the entry
 * points of kineto_source.h. A file of its own because it knows only bytes
 * and files: what the text says is the reader's (kineto_reader.c) and what
 * the events become the mapper's (kineto_mapper.c); see kineto_import.h and
 * docs/kineto-import.md.
 */
#include "kineto_source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "gzip_whole.h"
#include "inflate_pipe.h"
#include "kineto_import.h"
#include "kineto_split.h"

static const ssa_import_options defaults; /* all zero: the defaults */

static int import(js_read_fn read, void *ctx, void *doc, size_t doc_len, const char *name,
                  const ssa_import_options *opt, ssa_rank *r, stepscope_error *err) {
  return ssa_kineto_import(read, ctx, doc, doc_len, NULL, NULL, name, opt, r, err);
}

/* ---- file and memory readers ---- */

/* A file, plain or gzip (told by its first two bytes, whatever its name).
 * Plain files are read() straight into the tokenizer's buffer; gzip data is
 * inflated straight into it from a 256 KiB buffer of compressed bytes, so
 * each byte is copied once. Concatenated gzip members are read in turn;
 * anything else after a member ends the input (as gzread does). Past
 * `inflate_limit` inflated bytes (stepscope_inflate_limit of the file's size)
 * the input fails: a decompression bomb is not read to its end. */
#define ZIN_CAP (256u << 10)

typedef struct file_ctx {
  int fd;
  int gzip;
  unsigned char *zin;        /* compressed input; for a plain file, its first bytes */
  size_t pend_pos, pend_len; /* plain: first bytes not yet handed over */
  int zin_eof;               /* no more bytes in the file */
  z_stream z;
  int z_ready, z_end;
  uint64_t inflated, inflate_limit;
  int failed, over_limit;
  char msg[128];
} file_ctx;

static long read_retry(int fd, void *buf, size_t n) {
  for (;;) {
    ssize_t got = read(fd, buf, n);
    if (got >= 0 || errno != EINTR) return (long)got;
  }
}

static long file_fail(file_ctx *f, const char *what) {
  snprintf(f->msg, sizeof f->msg, "%s", what);
  f->failed = 1;
  return -1;
}

/* Refills zin when it is empty; 0, or -1 on a read error. */
static int file_fill_zin(file_ctx *f) {
  if (f->z.avail_in > 0 || f->zin_eof) return 0;
  long got = read_retry(f->fd, f->zin, ZIN_CAP);
  if (got < 0) return (int)file_fail(f, strerror(errno));
  if (got == 0) f->zin_eof = 1;
  f->z.next_in = f->zin;
  f->z.avail_in = (uInt)got;
  return 0;
}

static long file_read(void *ctx, void *buf, size_t n) {
  file_ctx *f = ctx;
  if (n > (1u << 30)) n = 1u << 30;
  if (!f->gzip) {
    if (f->pend_pos < f->pend_len) {
      size_t m = f->pend_len - f->pend_pos;
      if (m > n) m = n;
      memcpy(buf, f->zin + f->pend_pos, m);
      f->pend_pos += m;
      return (long)m;
    }
    long got = read_retry(f->fd, buf, n);
    return got < 0 ? file_fail(f, strerror(errno)) : got;
  }
  if (f->z_end) return 0;
  f->z.next_out = buf;
  f->z.avail_out = (uInt)n;
  while (f->z.avail_out > 0) {
    if (file_fill_zin(f)) return -1;
    if (f->z.avail_in == 0) {
      if (f->z.avail_out < n) break; /* hand over what we have; fail on the next call */
      return file_fail(f, "unexpected end of file");
    }
    int zr = inflate(&f->z, Z_NO_FLUSH);
    if (zr == Z_STREAM_END) {
      /* another gzip member may follow */
      if (file_fill_zin(f)) return -1;
      if (f->z.avail_in > 0 && f->z.next_in[0] == 0x1f && inflateReset(&f->z) == Z_OK) continue;
      f->z_end = 1;
      break;
    }
    if (zr != Z_OK && zr != Z_BUF_ERROR)
      return file_fail(f, f->z.msg ? f->z.msg : "inflate failed");
  }
  f->inflated += n - f->z.avail_out;
  if (f->inflated > f->inflate_limit) {
    f->over_limit = 1;
    return file_fail(f, "inflated past the limit");
  }
  return (long)(n - f->z.avail_out);
}

typedef struct mem_ctx {
  const unsigned char *p;
  size_t n, pos;
  size_t chunk; /* most bytes per read */
} mem_ctx;

static long mem_read(void *ctx, void *buf, size_t n) {
  mem_ctx *m = ctx;
  size_t left = m->n - m->pos;
  if (n > left) n = left;
  if (n > m->chunk) n = m->chunk;
  memcpy(buf, m->p + m->pos, n);
  m->pos += n;
  return (long)n;
}

/* The whole document tokenized in place (as a gzip file inflated whole is),
 * on a private copy: the fuzz target compares this path with the chunked
 * streaming one. */
int ssa_kineto_load_memory(const void *data, size_t size, const char *name, ssa_rank *r,
                           stepscope_error *err) {
  return ssa_kineto_load_memory_opts(data, size, name, NULL, r, err);
}

int ssa_kineto_load_memory_opts(const void *data, size_t size, const char *name,
                                const ssa_import_options *opt, ssa_rank *r, stepscope_error *err) {
  if (err) memset(err, 0, sizeof *err);
  unsigned char *copy = malloc(size ? size : 1);
  if (!opt) opt = &defaults;
  if (!copy) {
    mem_ctx m = {data, size, 0, SIZE_MAX};
    return import(mem_read, &m, NULL, 0, name, opt, r, err);
  }
  if (size) memcpy(copy, data, size);
  int rc = import(NULL, NULL, copy, size, name, opt, r, err);
  free(copy);
  return rc;
}

int ssa_kineto_load_memory_chunked(const void *data, size_t size, size_t chunk, const char *name,
                                   ssa_rank *r, stepscope_error *err) {
  mem_ctx m = {data, size, 0, chunk ? chunk : 1};
  if (err) memset(err, 0, sizeof *err);
  return import(mem_read, &m, NULL, 0, name, &defaults, r, err);
}

/* ---- which way a gzip file is read ----
 *
 * whole:  inflated in one piece with libdeflate (gzip_whole.c), then
 *         tokenized in place; one thread.
 * pipe:   inflated on a second thread (ISA-L, else zlib) into a small ring
 *         of buffers while this thread tokenizes (inflate_pipe.c).
 * stream: inflated with zlib on this thread as the tokenizer reads.
 * The automatic choice, from measurements on 21 real gzip traces of
 * 0.75-4 MB (docs/hta-comparison.md, "Reading gzip"): with ISA-L, the pipe,
 * always: its median wall time was 0.64-0.77 of the whole buffer's where the
 * second core was free, and 0.87-0.96 on one core (taskset), where its CPU
 * time is lower too (ISA-L streams 1.5-1.9 times faster than libdeflate
 * inflates whole with the page faults of its 15-90 MB buffer); 6 files
 * loaded 2 at a time on 2 cores (run_load.c), a pipe thread each: 0.20 s
 * against 0.23 s, less CPU, so no thread budget across files. With zlib in the pipe, the
 * pipe was 1.06-1.29 times slower on one core and slower on most files with
 * two: the whole buffer then, when the file is small enough
 * (ssa_gzip_whole_bound), else the stream. */
#ifdef STEPSCOPE_HAVE_ISAL
#define GZIP_AUTO_PIPE 1
#else
#define GZIP_AUTO_PIPE 0
#endif

static int load_file(const char *path, int mode, size_t whole_max, const ssa_import_options *opt,
                     ssa_rank *r, stepscope_error *err);

int ssa_kineto_source_load_opts(const char *path, const ssa_import_options *opt, ssa_rank *r,
                                stepscope_error *err) {
  if (!opt) opt = &defaults;
  return load_file(path, (int)opt->gzip, ssa_gzip_whole_bound(), opt, r, err);
}

int ssa_kineto_source_load(const char *path, ssa_rank *r, stepscope_error *err) {
  return ssa_kineto_source_load_opts(path, NULL, r, err);
}

int ssa_kineto_source_load_whole_max(const char *path, size_t whole_max, ssa_rank *r,
                                     stepscope_error *err) {
  return load_file(path, whole_max ? SSA_GZIP_WHOLE : SSA_GZIP_STREAM, whole_max, &defaults, r,
                   err);
}

int ssa_kineto_source_load_gzip(const char *path, ssa_gzip_mode mode, ssa_rank *r,
                                stepscope_error *err) {
  return load_file(path, (int)mode, ssa_gzip_whole_bound(), &defaults, r, err);
}

/* Imports the gzip file on `fd` (`size` bytes) through a pipe: 1 and the import's status
 * in *rc_out, or 0 when the pipe cannot be had (read the file another way). */
static int import_piped(int fd, uint64_t size, const char *path, const ssa_import_options *opt,
                        ssa_rank *r, stepscope_error *err, int *rc_out) {
  ssa_inflate_pipe *p = ssa_inflate_pipe_open(fd, SSA_PIPE_CHUNK, SSA_PIPE_NCHUNKS,
                                              stepscope_inflate_limit(&opt->inflate, size));
  if (!p) return 0;
  int rc = import(ssa_inflate_pipe_read, p, NULL, 0, path, opt, r, err);
  char msg[128];
  int closed = ssa_inflate_pipe_close(p, msg, sizeof msg);
  if (closed == SSA_PIPE_OVER_LIMIT && err) {
    stepscope_inflate_limit_error(err, path, &opt->inflate, size);
    rc = err->code;
  } else if (closed && err) {
    /* say what failed rather than "read error" */
    char m[sizeof err->message];
    snprintf(m, sizeof m,
             "%s: gzip data is corrupt or truncated (%s) near byte %llu of the JSON text", path,
             msg, (unsigned long long)err->offset);
    snprintf(err->message, sizeof err->message, "%s", m);
    err->code = STEPSCOPE_E_FORMAT;
    rc = err->code;
  }
  *rc_out = rc;
  return 1;
}

/* The text length a gzip file's trailer states (ISIZE, the last member's
 * length mod 2^32): 1, or 0 when it cannot be read or is 0. */
static int gzip_isize(int fd, uint64_t file_size, size_t *out) {
  unsigned char t[4];
  if (file_size < 18 || pread(fd, t, 4, (off_t)(file_size - 4)) != 4) return 0;
  *out = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
  return *out != 0;
}

static int load_file(const char *path, int mode, size_t whole_max, const ssa_import_options *opt,
                     ssa_rank *r, stepscope_error *err) {
  if (err) memset(err, 0, sizeof *err);
  int rc = 0;
  file_ctx f;
  memset(&f, 0, sizeof f);
  /* O_NONBLOCK, then fstat: a FIFO (or device, socket) is refused at once
   * instead of blocking the open or the first read forever. */
  f.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  int not_regular = f.fd >= 0 && (fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode));
  if (f.fd >= 0 && !not_regular) fcntl(f.fd, F_SETFL, fcntl(f.fd, F_GETFL) & ~O_NONBLOCK);
  f.zin = malloc(ZIN_CAP);
  if (f.fd < 0 || not_regular || !f.zin) {
    rc = f.fd < 0 ? STEPSCOPE_E_IO : not_regular ? STEPSCOPE_E_ARGUMENT : STEPSCOPE_E_NOMEM;
    if (err) {
      err->code = rc;
      snprintf(err->message, sizeof err->message, "%s: %s", path,
               f.fd < 0      ? "cannot open"
               : not_regular ? "is not a regular file (a FIFO, device or socket?), expected a "
                               "Kineto trace"
                             : "out of memory");
    }
    goto done;
  }
  posix_fadvise(f.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  /* the most a gzip file may inflate to; the whole-buffer and split ways, whose buffers
   * the trailer's ISIZE sizes, are taken only below it */
  uint64_t limit = stepscope_inflate_limit(&opt->inflate, (uint64_t)st.st_size);
  f.inflate_limit = limit;
  /* the first bytes say whether it is gzip */
  long got = read_retry(f.fd, f.zin, ZIN_CAP);
  if (got < 0) {
    rc = STEPSCOPE_E_IO;
    if (err) {
      err->code = rc;
      snprintf(err->message, sizeof err->message, "%s: cannot read (%s)", path, strerror(errno));
    }
    goto done;
  } else if (got >= 2 && f.zin[0] == 0x1f && f.zin[1] == 0x8b) {
    /* large enough: tokenized on two threads (kineto_split.h), its text
     * pulled through the same pipe */
    size_t isize;
    if ((mode == SSA_GZIP_PIPE || mode == SSA_GZIP_AUTO) &&
        gzip_isize(f.fd, (uint64_t)st.st_size, &isize) && isize <= ssa_gzip_whole_bound() &&
        isize <= limit && !opt->op_memory && ssa_split_wanted(isize, opt->split) &&
        ssa_kineto_import_split(f.fd, 1, isize, path, opt, r, err, &rc))
      goto done;
    if ((mode == SSA_GZIP_PIPE || (mode == SSA_GZIP_AUTO && GZIP_AUTO_PIPE)) &&
        import_piped(f.fd, (uint64_t)st.st_size, path, opt, r, err, &rc))
      goto done;
    /* moderate and well-formed: inflated whole with libdeflate, which is
     * three times faster (gzip_whole.h); else streamed with zlib below */
    unsigned char *doc;
    size_t doc_len;
    if (mode != SSA_GZIP_STREAM &&
        ssa_gzip_whole(f.fd, (uint64_t)st.st_size, whole_max < limit ? whole_max : (size_t)limit,
                       &doc, &doc_len)) {
      rc = import(NULL, NULL, doc, doc_len, path, opt, r, err);
      ssa_gzip_whole_free(doc, doc_len);
      goto done;
    }
    f.gzip = 1;
    f.z.next_in = f.zin;
    f.z.avail_in = (uInt)got;
    if (inflateInit2(&f.z, 15 + 32) != Z_OK)
      rc = STEPSCOPE_E_NOMEM;
    else
      f.z_ready = 1;
  } else if ((uint64_t)st.st_size <= ssa_gzip_whole_bound() && !opt->op_memory &&
             ssa_split_wanted((uint64_t)st.st_size, opt->split) &&
             ssa_kineto_import_split(f.fd, 0, (size_t)st.st_size, path, opt, r, err, &rc)) {
    goto done;
  } else {
    f.pend_len = (size_t)got;
    f.zin_eof = got == 0;
  }
  if (rc == 0) {
    rc = import(file_read, &f, NULL, 0, path, opt, r, err);
    if (f.over_limit && err) {
      stepscope_inflate_limit_error(err, path, &opt->inflate, (uint64_t)st.st_size);
      rc = err->code;
    } else if (f.failed && err) {
      /* say what failed rather than "read error" */
      char m[sizeof err->message];
      if (f.gzip)
        snprintf(m, sizeof m,
                 "%s: gzip data is corrupt or truncated (%s) near byte %llu of the JSON text", path,
                 f.msg, (unsigned long long)err->offset);
      else
        snprintf(m, sizeof m, "%s: read error (%s) near byte %llu", path, f.msg,
                 (unsigned long long)err->offset);
      snprintf(err->message, sizeof err->message, "%s", m);
      err->code = f.gzip ? STEPSCOPE_E_FORMAT : STEPSCOPE_E_IO;
      rc = err->code;
    }
  } else if (rc == STEPSCOPE_E_NOMEM && err) {
    err->code = rc;
    snprintf(err->message, sizeof err->message, "%s: out of memory for gzip", path);
  }
done:
  if (f.z_ready) inflateEnd(&f.z);
  if (f.fd >= 0) close(f.fd);
  free(f.zin);
  return rc;
}
