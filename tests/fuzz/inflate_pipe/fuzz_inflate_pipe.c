/*
 * fuzz_inflate_pipe.c — differential fuzz target for the gzip pipe of the
 * Kineto importer (analyzer/src/io/inflate_pipe.c): every input is taken as a
 * gzip file, read through the pipe (its ring geometry and read size chosen
 * from the input's size, so chunk hand-overs fall everywhere) and through
 * zlib's own gzip decoder (inflate with windowBits 15 + 16, members read in
 * turn while the next byte is 0x1f, as the streaming reader of
 * kineto_source.c does). Both must agree: the same bytes and success, or
 * both an error with the same bytes as far as both went (a decoder may
 * stop a little earlier or later on damage); otherwise the target aborts.
 * One known difference is allowed: ISA-L's inflate accepts a dynamic block
 * whose Huffman code lengths form an incomplete code, which zlib refuses
 * ("invalid literal/lengths set", "invalid distances set", "invalid code
 * lengths set"); found by this target (seed isal_incomplete_code.gz). Then
 * the pipe may succeed where zlib fails, but only with output that passed
 * the member's CRC-32 and ISIZE checks, which the pipe always makes. The file
 * is a memfd, so nothing touches the disk. Built two ways:
 *   - with STEPSCOPE_LIBFUZZER: LLVMFuzzerTestOneInput for libFuzzer;
 *   - without: linked with the shared replay driver (tests/fuzz/fuzz_replay.c)
 *     over the files of the directories given (the seeds), used by the
 *     fuzz_inflate_pipe.replay test in every build.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "inflate_pipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUT_MAX (8u << 20) /* inflated bytes compared at most */

typedef struct out {
  unsigned char *p;
  size_t n;
  int ok;             /* read to the end without error */
  int code_set_error; /* zlib refused a Huffman code set (ISA-L may accept it) */
} out;

/* zlib's messages for a dynamic block whose code lengths do not form a
 * complete prefix code (inflate.c, inftrees.c) */
static int is_code_set_error(const char *msg) {
  return msg && (!strcmp(msg, "invalid literal/lengths set") ||
                 !strcmp(msg, "invalid distances set") || !strcmp(msg, "invalid code lengths set"));
}

/* zlib's reading of the file: members while the next byte is 0x1f */
static out with_zlib(const uint8_t *data, size_t size) {
  out o = {malloc(OUT_MAX), 0, 0, 0};
  if (!o.p) abort();
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 15 + 16) != Z_OK) abort();
  z.next_in = (unsigned char *)data;
  z.avail_in = (uInt)size;
  for (;;) {
    if (z.avail_in == 0) break; /* cut inside a member */
    z.next_out = o.p + o.n;
    z.avail_out = (uInt)(OUT_MAX - o.n);
    int zr = inflate(&z, Z_NO_FLUSH);
    o.n = OUT_MAX - z.avail_out;
    if (zr == Z_STREAM_END) {
      if (z.avail_in > 0 && z.next_in[0] == 0x1f && inflateReset(&z) == Z_OK) continue;
      o.ok = 1;
      break;
    }
    if (zr != Z_OK || z.avail_out == 0) { /* an error, or too long to compare */
      o.code_set_error = zr == Z_DATA_ERROR && is_code_set_error(z.msg);
      break;
    }
  }
  inflateEnd(&z);
  return o;
}

static out with_pipe(int fd, size_t size, int *too_long) {
  out o = {malloc(OUT_MAX), 0, 0, 0};
  if (!o.p) abort();
  size_t chunk = 1 + size % 4099;
  int nchunks = 2 + (int)(size % 3);
  size_t read_size = 1 + (size / 7) % 70000;
  ssa_inflate_pipe *p = ssa_inflate_pipe_open(fd, chunk, nchunks, UINT64_MAX);
  if (!p) abort();
  *too_long = 0;
  for (;;) {
    if (o.n + read_size > OUT_MAX) {
      *too_long = 1; /* the consumer stops early: close must still join */
      break;
    }
    long got = ssa_inflate_pipe_read(p, o.p + o.n, read_size);
    if (got < 0) break;
    if (got == 0) {
      o.ok = 1;
      break;
    }
    o.n += (size_t)got;
  }
  char msg[128];
  int rc = ssa_inflate_pipe_close(p, msg, sizeof msg);
  if ((rc != 0) != (!o.ok && !*too_long) || (rc != 0 && !msg[0])) abort();
  return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || data[0] != 0x1f || data[1] != 0x8b) return 0; /* the importer pipes gzip only */
  int fd = memfd_create("fuzz.gz", MFD_CLOEXEC);
  if (fd < 0) abort();
  if (write(fd, data, size) != (ssize_t)size) abort();
  int too_long;
  out a = with_zlib(data, size), b = with_pipe(fd, size, &too_long);
  close(fd);
  if (!too_long && a.n < OUT_MAX) {
#ifdef STEPSCOPE_HAVE_ISAL
    int isal_lenient = !a.ok && b.ok && a.code_set_error;
#else
    int isal_lenient = 0;
#endif
    if (a.ok != b.ok && !isal_lenient) abort();
    if (a.ok && (a.n != b.n || memcmp(a.p, b.p, a.n))) abort();
    /* both failed: the bytes before the damage are the same (a decoder
     * may emit a few more or fewer around it) */
    if (!a.ok && !isal_lenient && memcmp(a.p, b.p, a.n < b.n ? a.n : b.n)) abort();
  }
  free(a.p);
  free(b.p);
  return 0;
}
