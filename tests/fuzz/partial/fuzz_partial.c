/*
 * fuzz_partial.c — fuzz target for the reader of partial analyses (analyzer/cli/partial_read.c,
 * docs/partial-format.md), which `stepscope merge` runs on whatever files it is given, and of
 * the cross files of a second map round (same file, "Cross inputs"; an input that starts with
 * their magic), which `analyze --cross` reads. A read that fails must say why; a read that
 * succeeds must write back the very same bytes (partial_write.c: the formats have one spelling
 * of each file). Built two ways:
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

/* The bytes w writes (the format's one spelling) equal data[size]: else abort. */
static void check_written_back(const uint8_t *data, size_t size, int (*w)(const void *, ssa_out *),
                               const void *what) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  ssa_out o;
  if (!mem || ssa_out_open_file(&o, mem)) abort();
  if (w(what, &o) || ssa_out_close(&o) || fclose(mem)) abort();
  if (len != size || memcmp(text, data, size)) abort(); /* not read as written */
  free(text);
}

static int write_partial(const void *p, ssa_out *o) {
  return ssa_partial_write(p, o);
}

/* A cross file written back from its ranks made dense, as the map step takes them (only for
 * record counts a rank can hold here: the dense arrays are 8 bytes per record). */
static int write_cross(const void *v, ssa_out *o) {
  const ssa_cross_part *p = v;
  size_t n = p->nranks ? p->nranks : 1;
  ssa_rank_cross *x = calloc(n, sizeof *x);
  uint64_t *files = calloc(n, sizeof *files);
  int *ranks = calloc(n, sizeof *ranks);
  if (!x || !files || !ranks) abort();
  for (size_t i = 0; i < p->nranks; i++) {
    if (ssa_cross_densify(&p->ranks[i], &x[i])) abort();
    files[i] = p->ranks[i].file_index;
    ranks[i] = p->ranks[i].rank;
  }
  int rc = ssa_cross_write(p, x, files, ranks, p->nranks, o);
  for (size_t i = 0; i < p->nranks; i++)
    ssa_rank_cross_free(&x[i]);
  free(x);
  free(files);
  free(ranks);
  return rc;
}

static void fuzz_cross(const uint8_t *data, size_t size) {
  ssa_cross_part p;
  char why[600] = "";
  if (ssa_cross_read(data, size, &p, why, sizeof why)) {
    if (!why[0]) abort(); /* a failed read says why */
  } else {
    int small = 1;
    for (size_t i = 0; i < p.nranks; i++)
      small &= p.ranks[i].ncolls <= ((uint64_t)1 << 20);
    if (small) check_written_back(data, size, write_cross, &p);
  }
  ssa_cross_part_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size >= 8 && !memcmp(data, SSA_CROSS_MAGIC, 8)) { /* a cross file (partial.h) */
    fuzz_cross(data, size);
    return 0;
  }
  ssa_partial p;
  char why[600] = "";
  int rc = ssa_partial_read(data, size, NULL, &p, why, sizeof why);
  if (rc) {
    if (!why[0]) abort(); /* a failed read says why */
    ssa_partial_free(&p);
    return 0;
  }
  check_written_back(data, size, write_partial, &p);
  ssa_partial_free(&p);
  return 0;
}
