/*
 * test_inflate_pipe.c — the gzip pipe of the Kineto importer
 * (analyzer/src/io/inflate_pipe.c) on gzip files written here byte by byte
 * (header fields by hand, deflate data from zlib, trailer by hand), so
 * that every framing case is built exactly:
 *   round_trip   sizes 0..2 MB, ring geometries from 2 x 1 byte to
 *                4 x 256 KiB, read sizes 1..64 KiB: the bytes come back
 *                exactly and the read ends with 0; a file that is not gzip
 *                or empty is an error
 *   members      three members with FEXTRA, FNAME, FCOMMENT, FHCRC, an empty
 *                member; trailing bytes that are not a member are ignored,
 *                a trailing 0x1f that starts no member is an error
 *   truncated    the file cut at every length (small) or at sampled ones:
 *                an error after a prefix of the data, never a hang; a cut
 *                at a member boundary is a shorter good file
 *   corrupt      CRC-32 or ISIZE flipped, a bad header CRC, reserved flags,
 *                an unknown method, deflate bytes flipped: errors
 *   early_stop   the consumer reads a little and closes while the producer
 *                is blocked on a full ring or still inflating: close
 *                returns 0 and joins (run under TSan by the tsan build)
 * Usage: test_inflate_pipe [SCRATCH_DIR]. Exit 0 when every check passes.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "inflate_pipe.h"

static int failures;
#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                        \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static const char *scratch;

/* ---- building gzip files ---- */

typedef struct bytes {
  unsigned char *p;
  size_t n, cap;
} bytes;

static void put(bytes *b, const void *src, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  if (n) memcpy(b->p + b->n, src, n);
  b->n += n;
}

static void put8(bytes *b, unsigned v) {
  unsigned char c = (unsigned char)v;
  put(b, &c, 1);
}

static void put32(bytes *b, uint32_t v) {
  for (int i = 0; i < 4; i++)
    put8(b, (v >> (8 * i)) & 0xff);
}

enum { F_HCRC = 2, F_EXTRA = 4, F_NAME = 8, F_COMMENT = 16 };

/* Appends one gzip member holding data[0..n) with the header fields
 * `flags` asks for. */
static void put_member(bytes *b, const unsigned char *data, size_t n, int flags) {
  size_t start = b->n;
  unsigned char head[10] = {0x1f, 0x8b, 8, (unsigned char)flags, 1, 2, 3, 4, 0, 3};
  put(b, head, sizeof head);
  if (flags & F_EXTRA) {
    put8(b, 5);
    put8(b, 0);
    put(b, "AB\3\0x", 5);
  }
  if (flags & F_NAME) put(b, "trace.json", 11);
  if (flags & F_COMMENT) put(b, "a comment", 10);
  if (flags & F_HCRC) {
    uint32_t h = (uint32_t)crc32(0, b->p + start, (uInt)(b->n - start));
    put8(b, h & 0xff);
    put8(b, (h >> 8) & 0xff);
  }
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
  size_t bound = deflateBound(&z, (uLong)n) + 16;
  unsigned char *out = malloc(bound);
  if (!out) abort();
  z.next_in = (unsigned char *)data;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)bound;
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) abort();
  put(b, out, bound - z.avail_out);
  deflateEnd(&z);
  free(out);
  put32(b, (uint32_t)crc32(0, data, (uInt)n));
  put32(b, (uint32_t)n);
}

/* JSON-like text, compressible but not trivially */
static unsigned char *make_text(size_t n, unsigned seed) {
  unsigned char *t = malloc(n ? n : 1);
  if (!t) abort();
  uint64_t x = seed * 2654435761u + 1;
  static const char *words[] = {"{\"ph\":\"X\",", "\"cat\":\"kernel\",", "\"ts\":", "1700000000",
                                "\"name\":\"",    "void gemm<128>",      "\"},\n",  "\"dur\":"};
  size_t i = 0;
  while (i < n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const char *w = words[(x >> 33) % 8];
    size_t m = strlen(w);
    if ((x >> 20) % 5 == 0) { /* some noise */
      char num[24];
      m = (size_t)snprintf(num, sizeof num, "%llu.%03u,", (unsigned long long)(x >> 40),
                           (unsigned)(x % 1000));
      for (size_t k = 0; k < m && i < n; k++)
        t[i++] = (unsigned char)num[k];
      continue;
    }
    for (size_t k = 0; k < m && i < n; k++)
      t[i++] = (unsigned char)w[k];
  }
  return t;
}

static int write_file(const char *name, const unsigned char *p, size_t n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", scratch, name);
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  if (n) fwrite(p, 1, n, f);
  fclose(f);
  return open(path, O_RDONLY);
}

/* ---- reading through the pipe ---- */

typedef struct result {
  unsigned char *data;
  size_t n;
  int read_failed; /* a read returned -1 */
  int close_rc;
  char msg[128];
} result;

static result pipe_all(const unsigned char *file, size_t len, size_t chunk, int nchunks,
                       size_t read_size) {
  result r;
  memset(&r, 0, sizeof r);
  int fd = write_file("pipe.gz", file, len);
  CHECK(fd >= 0);
  if (fd < 0) return r;
  ssa_inflate_pipe *p = ssa_inflate_pipe_open(fd, chunk, nchunks, UINT64_MAX);
  CHECK(p != NULL);
  if (!p) {
    close(fd);
    return r;
  }
  size_t cap = 1 << 16;
  r.data = malloc(cap);
  for (;;) {
    if (r.n + read_size > cap) {
      cap = (r.n + read_size) * 2;
      r.data = realloc(r.data, cap);
      if (!r.data) abort();
    }
    long got = ssa_inflate_pipe_read(p, r.data + r.n, read_size);
    if (got < 0) {
      r.read_failed = 1;
      /* it stays failed */
      CHECK(ssa_inflate_pipe_read(p, r.data + r.n, read_size) == -1);
      break;
    }
    if (got == 0) {
      CHECK(ssa_inflate_pipe_read(p, r.data + r.n, read_size) == 0);
      break;
    }
    CHECK((size_t)got <= read_size);
    r.n += (size_t)got;
  }
  r.close_rc = ssa_inflate_pipe_close(p, r.msg, sizeof r.msg);
  close(fd);
  return r;
}

static int good(const result *r, const unsigned char *want, size_t n) {
  return !r->read_failed && r->close_rc == 0 && r->n == n &&
         (n == 0 || memcmp(r->data, want, n) == 0) && r->msg[0] == 0;
}

static int failed_after_prefix(const result *r, const unsigned char *want, size_t n) {
  return r->read_failed && r->close_rc == -1 && r->msg[0] && r->n <= n &&
         (r->n == 0 || memcmp(r->data, want, r->n) == 0);
}

/* ---- tests ---- */

static void test_round_trip(void) {
  static const size_t sizes[] = {0, 1, 100, 65536, 300000, 2u << 20};
  static const struct {
    size_t chunk;
    int n;
  } rings[] = {{1, 2}, {7, 3}, {4096, 2}, {SSA_PIPE_CHUNK, SSA_PIPE_NCHUNKS}};
  static const size_t reads[] = {1, 13, 65536};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    unsigned char *text = make_text(sizes[s], (unsigned)s);
    bytes gz = {0};
    put_member(&gz, text, sizes[s], 0);
    for (size_t g = 0; g < sizeof rings / sizeof *rings; g++)
      for (size_t k = 0; k < sizeof reads / sizeof *reads; k++) {
        /* byte-sized rings and reads only on the smaller texts (each
         * chunk handed over is a wake-up of the other thread) */
        if ((rings[g].chunk < 64 && sizes[s] > 65536) || (reads[k] < 64 && sizes[s] > 300000))
          continue;
        result r = pipe_all(gz.p, gz.n, rings[g].chunk, rings[g].n, reads[k]);
        if (!good(&r, text, sizes[s])) {
          fprintf(stderr, "round trip %zu bytes, ring %d x %zu, reads of %zu: got %zu, %s\n",
                  sizes[s], rings[g].n, rings[g].chunk, reads[k], r.n, r.msg);
          failures++;
        }
        free(r.data);
      }
    free(gz.p);
    free(text);
  }
  /* not gzip at all, and an empty file: errors, not empty documents */
  result r = pipe_all((const unsigned char *)"{}", 2, 64, 2, 100);
  CHECK(r.read_failed && r.n == 0 && strstr(r.msg, "incorrect header check"));
  free(r.data);
  r = pipe_all((const unsigned char *)"", 0, 64, 2, 100);
  CHECK(r.read_failed && r.n == 0 && strstr(r.msg, "unexpected end of file"));
  free(r.data);
  CHECK(ssa_inflate_pipe_open(-1, 0, 4, UINT64_MAX) == NULL);  /* no chunk */
  CHECK(ssa_inflate_pipe_open(-1, 16, 1, UINT64_MAX) == NULL); /* one chunk */
}

static void test_members(void) {
  size_t n = 200000;
  unsigned char *text = make_text(n, 7);
  bytes gz = {0};
  put_member(&gz, text, 50000, F_EXTRA | F_NAME);
  put_member(&gz, text + 50000, 0, F_HCRC); /* an empty member */
  put_member(&gz, text + 50000, 100000, F_COMMENT | F_HCRC);
  put_member(&gz, text + 150000, 50000, F_EXTRA | F_NAME | F_COMMENT | F_HCRC);
  result r = pipe_all(gz.p, gz.n, 4096, 3, 1000);
  CHECK(good(&r, text, n));
  free(r.data);
  /* trailing bytes that do not start a member end the input, as gzread */
  size_t len = gz.n;
  put(&gz, "\0\0\0\0junk", 8);
  r = pipe_all(gz.p, gz.n, SSA_PIPE_CHUNK, SSA_PIPE_NCHUNKS, 65536);
  CHECK(good(&r, text, n));
  free(r.data);
  /* a 0x1f that starts no member is an error, after all the data */
  gz.n = len;
  put(&gz, "\x1f\x00", 2);
  r = pipe_all(gz.p, gz.n, SSA_PIPE_CHUNK, SSA_PIPE_NCHUNKS, 65536);
  CHECK(failed_after_prefix(&r, text, n) && r.n == n);
  CHECK(strstr(r.msg, "incorrect header check") != NULL);
  free(r.data);
  /* a lone 0x1f at the end: a header cut short */
  gz.n = len;
  put(&gz, "\x1f", 1);
  r = pipe_all(gz.p, gz.n, SSA_PIPE_CHUNK, SSA_PIPE_NCHUNKS, 65536);
  CHECK(failed_after_prefix(&r, text, n) && r.n == n);
  CHECK(strstr(r.msg, "unexpected end of file") != NULL);
  free(r.data);
  free(gz.p);
  free(text);
}

static void test_truncated(void) {
  /* small: every length; two members so that one cut is a member boundary */
  unsigned char *text = make_text(3000, 3);
  bytes gz = {0};
  put_member(&gz, text, 1000, F_NAME | F_HCRC);
  size_t boundary = gz.n;
  put_member(&gz, text + 1000, 2000, 0);
  int bad = 0;
  for (size_t cut = 0; cut < gz.n; cut++) {
    result r = pipe_all(gz.p, cut, 64, 2, 100);
    int ok = cut == boundary ? good(&r, text, 1000) : failed_after_prefix(&r, text, 3000);
    if (!ok) {
      fprintf(stderr, "cut at %zu of %zu: got %zu bytes, read_failed %d, msg '%s'\n", cut, gz.n,
              r.n, r.read_failed, r.msg);
      bad++;
    }
    free(r.data);
  }
  CHECK(bad == 0);
  free(gz.p);
  free(text);
  /* large: sampled lengths, the default ring */
  size_t n = 3u << 20;
  text = make_text(n, 4);
  gz = (bytes){0};
  put_member(&gz, text, n, 0);
  for (size_t cut = 1; cut < gz.n; cut += gz.n / 7 + 1) {
    result r = pipe_all(gz.p, cut, SSA_PIPE_CHUNK, SSA_PIPE_NCHUNKS, 256u << 10);
    CHECK(failed_after_prefix(&r, text, n));
    free(r.data);
  }
  result r = pipe_all(gz.p, gz.n - 1, SSA_PIPE_CHUNK, SSA_PIPE_NCHUNKS, 256u << 10);
  CHECK(failed_after_prefix(&r, text, n));
  free(r.data);
  free(gz.p);
  free(text);
}

static void test_corrupt(void) {
  size_t n = 500000;
  unsigned char *text = make_text(n, 5);
  bytes gz = {0};
  put_member(&gz, text, n, F_HCRC);
  /* the trailer: CRC-32 (the 8th byte from the end), ISIZE (the 4th) */
  for (int back = 8; back >= 4; back -= 4) {
    gz.p[gz.n - (size_t)back] ^= 1;
    result r = pipe_all(gz.p, gz.n, SSA_PIPE_CHUNK, SSA_PIPE_NCHUNKS, 65536);
    CHECK(failed_after_prefix(&r, text, n));
    CHECK(strstr(r.msg, "check") != NULL);
    free(r.data);
    gz.p[gz.n - (size_t)back] ^= 1;
  }
  /* header: its CRC (bytes 10 and 11), the method, a reserved flag */
  static const struct {
    size_t at;
    unsigned char x;
    const char *msg;
  } heads[] = {{10, 0x40, "header crc mismatch"},
               {2, 0x01, "unknown compression method"},
               {3, 0x80, "unknown header flags set"},
               {1, 0x01, "incorrect header check"}};
  for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) {
    gz.p[heads[i].at] ^= heads[i].x;
    result r = pipe_all(gz.p, gz.n, SSA_PIPE_CHUNK, SSA_PIPE_NCHUNKS, 65536);
    CHECK(r.read_failed && r.close_rc == -1 && r.n == 0);
    if (!strstr(r.msg, heads[i].msg)) {
      fprintf(stderr, "header byte %zu: '%s', expected '%s'\n", heads[i].at, r.msg, heads[i].msg);
      failures++;
    }
    free(r.data);
    gz.p[heads[i].at] ^= heads[i].x;
  }
  /* deflate data: flipped bits are an error (a bad block, or else the
   * CRC), never a hang or a crash */
  int bad = 0;
  for (size_t at = 12; at + 9 < gz.n; at += (gz.n - 20) / 25 + 1) {
    gz.p[at] ^= 0x5a;
    result r = pipe_all(gz.p, gz.n, 4096, 2, 65536);
    if (!(r.read_failed && r.close_rc == -1 && r.msg[0])) {
      fprintf(stderr, "flipped byte %zu: not an error\n", at);
      bad++;
    }
    free(r.data);
    gz.p[at] ^= 0x5a;
  }
  CHECK(bad == 0);
  free(gz.p);
  free(text);
}

static void test_early_stop(void) {
  size_t n = 1u << 20;
  unsigned char *text = make_text(n, 6);
  bytes gz = {0};
  put_member(&gz, text, n, 0);
  int fd = write_file("stop.gz", gz.p, gz.n);
  CHECK(fd >= 0);
  unsigned char buf[4096];
  for (int round = 0; round < 60 && fd >= 0; round++) {
    /* tiny rings: the producer is blocked on a full ring most of the time;
     * the default ring: it is still inflating when close comes */
    size_t chunk = round % 3 == 0 ? 16 : round % 3 == 1 ? 4096 : SSA_PIPE_CHUNK;
    ssa_inflate_pipe *p = ssa_inflate_pipe_open(fd, chunk, 2 + round % 3, UINT64_MAX);
    CHECK(p != NULL);
    if (!p) break;
    size_t want = (size_t)(round * 997) % 20000, got = 0;
    while (got < want) {
      long m = ssa_inflate_pipe_read(p, buf, want - got < sizeof buf ? want - got : sizeof buf);
      CHECK(m > 0);
      if (m <= 0) break;
      CHECK(memcmp(buf, text + got, (size_t)m) == 0);
      got += (size_t)m;
    }
    char msg[128] = "x";
    CHECK(ssa_inflate_pipe_close(p, msg, sizeof msg) == 0);
    CHECK(msg[0] == 0);
  }
  /* a damaged file whose consumer stops before the damage: no error */
  gz.p[gz.n - 8] ^= 1;
  if (fd >= 0) close(fd);
  fd = write_file("stop_bad.gz", gz.p, gz.n);
  CHECK(fd >= 0);
  if (fd >= 0) {
    ssa_inflate_pipe *p = ssa_inflate_pipe_open(fd, 4096, 2, UINT64_MAX);
    CHECK(p != NULL);
    if (p) {
      CHECK(ssa_inflate_pipe_read(p, buf, 100) == 100);
      CHECK(ssa_inflate_pipe_close(p, NULL, 0) == 0);
    }
    close(fd);
  }
  free(gz.p);
  free(text);
}

int main(int argc, char **argv) {
  scratch = argc > 1 ? argv[1] : "/tmp";
  test_round_trip();
  test_members();
  test_truncated();
  test_corrupt();
  test_early_stop();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("inflate_pipe: all checks passed\n");
  return 0;
}
