/*
 * fuzz_reader.c — libFuzzer target for the trace reader: any byte string is
 * given to the reader as a file; every record is read, its strings resolved
 * and formatted as JSON; then the file is loaded as a rank of a run and
 * the full analysis and every output run on it (fuzz_analyse.h). The reader
 * and the analysis must return data or an error, never crash, hang or read
 * out of bounds (ASan + UBSan watch).
 *
 * Two ways in, chosen by the first byte: odd, the rest of the input is the
 * decompressed content of a frame that follows a valid header frame (the
 * target compresses it), so mutations reach the record decoder instead of
 * dying at the zstd checksum; even, the input is the file as it is.
 *
 * Built with -fsanitize=fuzzer when STEPSCOPE_FUZZ is ON (clang). Otherwise
 * the same file is linked with the shared replay driver (fuzz_replay.c), so the
 * regression corpus runs in every build.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zstd.h>

#include "fuzz_analyse.h"
#include "record_codec.h"
#include "stepscope.h"
#include "ssa_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void write_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    ssize_t k = write(fd, b, n);
    if (k <= 0) return;
    b += k;
    n -= (size_t)k;
  }
}

/* A valid header frame, then `content` compressed as one frame. */
static void write_framed(int fd, const uint8_t *content, size_t len) {
  stepscope_header h = {.rank = 1, .world_size = 2, .hostname = "fuzz", .device_name = "cpu"};
  h.format_major = STEPSCOPE_FORMAT_MAJOR;
  uint8_t hb[1024];
  size_t hl = (size_t)(codec_encode_header(hb, &h) - hb);
  size_t cap = ZSTD_compressBound(len > hl ? len : hl);
  uint8_t *cb = malloc(cap);
  if (!cb) return;
  size_t c = ZSTD_compress(cb, cap, hb, hl, 1);
  if (!ZSTD_isError(c)) write_all(fd, cb, c);
  c = ZSTD_compress(cb, cap, content, len, 1);
  if (!ZSTD_isError(c)) write_all(fd, cb, c);
  free(cb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("fuzz-trace", 0);
  if (fd < 0) return 0;
  if (size > 0 && (data[0] & 1))
    write_framed(fd, data + 1, size - 1);
  else
    write_all(fd, data, size);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  stepscope_error err;
  stepscope_reader *r = stepscope_reader_open(path, &err);
  if (r) {
    char json[4096];
    stepscope_header_to_json(stepscope_reader_header(r), json, sizeof json);
    stepscope_record rec;
    uint64_t n = 0;
    while (stepscope_reader_next(r, &rec, &err) == 1 && n++ < 1000000)
      stepscope_record_to_json(&rec, r, json, sizeof json);
    for (size_t i = 0; i < stepscope_reader_warning_count(r); i++)
      if (!stepscope_reader_warning(r, i)) abort();
    stepscope_reader_close(r);
  } else if (err.message[0] == '\0') {
    abort(); /* every failure must say why */
  }
  if (r) { /* the same file through the analyzer's loader, then analysed */
    ssa_rank *rank = calloc(1, sizeof *rank);
    if (rank && ssa_rank_init(rank) == 0 && ssa_trace_source_load(path, NULL, rank, &err) == 0) {
      fuzz_analyse_ranks(rank, 1);
    } else if (rank) {
      ssa_rank_free(rank);
      free(rank);
    }
  }
  close(fd);
  return 0;
}
