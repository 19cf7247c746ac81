/*
 * fuzz_partial.c — fuzz target for the reader of partial analyses (analyzer/cli/partial_read.c,
 * docs/partial-format.md), which `stepscope merge` runs on whatever files it is given. A read
 * that fails must say why; a read that succeeds must write back the very same bytes
 * (partial_write.c: the format has one spelling of each partial). Built two ways:
 *   - with STEPSCOPE_LIBFUZZER: LLVMFuzzerTestOneInput for libFuzzer;
 *   - without: linked with the shared replay driver (tests/fuzz/fuzz_replay.c) over the files
 *     of the directories on its command line (the committed seeds), run by the
 *     fuzz_partial.replay test in every build.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partial.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ssa_partial p;
  char why[600] = "";
  int rc = ssa_partial_read(data, size, NULL, &p, why, sizeof why);
  if (rc) {
    if (!why[0]) abort(); /* a failed read says why */
    ssa_partial_free(&p);
    return 0;
  }
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  ssa_out o;
  if (!mem || ssa_out_open_file(&o, mem)) abort();
  if (ssa_partial_write(&p, &o) || ssa_out_close(&o) || fclose(mem)) abort();
  if (len != size || memcmp(text, data, size)) abort(); /* not read as written */
  free(text);
  ssa_partial_free(&p);
  return 0;
}
