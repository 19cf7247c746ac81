/*
 * fuzz_prediction.c — fuzz target for the reader of `stepscope plan --json` files
 * (analyzer/src/diff/prediction_read.c, on json_stream.c), which `stepscope diff RUN
 * PREDICTION.json` runs on whatever file it is given. Every input is handed to the
 * content sniffer and the reader through a memory file (memfd: a regular file, as the reader
 * demands); a read that succeeds must have at least one layout with a finite step time, and
 * the reader must leave nothing allocated when it fails. Built two ways:
 *   - with STEPSCOPE_LIBFUZZER: LLVMFuzzerTestOneInput for libFuzzer;
 *   - without: linked with the shared replay driver (tests/fuzz/fuzz_replay.c) over the files
 *     of the directories on its command line (the committed seeds), run by the
 *     fuzz_prediction.replay test in every build.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ssa_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("prediction", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t off = 0;
  while (off < size) {
    ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) {
      close(fd);
      return 0;
    }
    off += (size_t)n;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  (void)ssa_prediction_sniff(path);
  ssa_prediction p;
  char err[256];
  if (ssa_prediction_load(path, &p, err, sizeof err) == 0) {
    if (p.nlayouts == 0 || !p.layouts || !isfinite(p.layouts[0].step_time_s)) abort();
    ssa_prediction_free(&p);
  } else if (p.layouts || p.nlayouts || !err[0]) {
    abort(); /* a failed read leaves nothing behind and says why */
  }
  close(fd);
  return 0;
}
