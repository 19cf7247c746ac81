/*
 * gzip_whole.c — see gzip_whole.h: a gzip file of moderate size inflated in
 * one piece with libdeflate (Debian libdeflate-dev).
 *
 * Measured on real gzip Kineto traces (docs/hta-comparison.md): zlib 1.2.13
 * streaming into a 256 KiB buffer inflates about 1 GB/s of JSON, a third of
 * it in its CRC-32; libdeflate 1.14 whole-buffer about 3 GB/s, CRC-32
 * included. zlib-ng, which streams at a similar speed, is not packaged in
 * Debian bookworm. So the gzip layer is: libdeflate for a file whose
 * decompressed size is known and moderate (this file), zlib streaming for
 * everything else (kineto_source.c), memory bounded either way.
 *
 * The output buffer is an anonymous mapping with transparent huge pages
 * requested: faulting in tens of MB in 4 KiB pages cost as much as a tenth
 * of the inflate time.
 */
#include "gzip_whole.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef STEPSCOPE_HAVE_LIBDEFLATE
#include <libdeflate.h>

static int pread_all(int fd, unsigned char *buf, size_t n, uint64_t off) {
  while (n > 0) {
    ssize_t got = pread(fd, buf, n, (off_t)off);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    buf += got;
    n -= (size_t)got;
    off += (uint64_t)got;
  }
  return 0;
}

static unsigned char *map_out(size_t len) {
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
  madvise(p, len, MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
  return p;
}

#endif

size_t ssa_gzip_whole_bound(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE),
       cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (pages <= 0 || page <= 0) return SSA_GZIP_WHOLE_MAX;
  if (cores < 1) cores = 1;
  uint64_t share = (uint64_t)pages * (uint64_t)page / 8 / (uint64_t)cores;
  return share < SSA_GZIP_WHOLE_MAX ? (size_t)share : SSA_GZIP_WHOLE_MAX;
}

void ssa_gzip_whole_free(unsigned char *buf, size_t len) {
  if (buf) munmap(buf, len);
}

#ifdef STEPSCOPE_HAVE_LIBDEFLATE
int ssa_gzip_whole(int fd, uint64_t file_size, size_t max_out, unsigned char **out, size_t *len) {
  *out = NULL;
  *len = 0;
  /* header (10 bytes) + trailer (8): anything shorter is for the streaming
   * reader to report */
  if (file_size < 18 || file_size > SIZE_MAX / 2) return 0;
  unsigned char trailer[4];
  if (pread_all(fd, trailer, 4, file_size - 4)) return 0;
  size_t isize = (size_t)trailer[0] | (size_t)trailer[1] << 8 | (size_t)trailer[2] << 16 |
                 (size_t)trailer[3] << 24;
  if (isize == 0 || isize > max_out) return 0;
  unsigned char *in = malloc((size_t)file_size);
  if (!in) return 0;
  unsigned char *buf = NULL;
  int ok = 0;
  if (pread_all(fd, in, (size_t)file_size, 0) == 0 && (buf = map_out(isize)) != NULL) {
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    size_t used_in = 0, got = 0;
    /* one member that fills the buffer exactly and ends the file: else a
     * wrapped ISIZE, several members or trailing bytes, left to zlib */
    ok = d &&
         libdeflate_gzip_decompress_ex(d, in, (size_t)file_size, buf, isize, &used_in, &got) ==
             LIBDEFLATE_SUCCESS &&
         used_in == file_size && got == isize;
    if (d) libdeflate_free_decompressor(d);
  }
  free(in);
  if (!ok) {
    ssa_gzip_whole_free(buf, isize);
    return 0;
  }
  *out = buf;
  *len = isize;
  return 1;
}
#else
/* built without libdeflate: every gzip file is streamed with zlib */
int ssa_gzip_whole(int fd, uint64_t file_size, size_t max_out, unsigned char **out, size_t *len) {
  (void)fd;
  (void)file_size;
  (void)max_out;
  *out = NULL;
  *len = 0;
  return 0;
}
#endif
