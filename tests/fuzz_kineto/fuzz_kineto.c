/*
 * fuzz_kineto.c — fuzz target for the Kineto importer (json_stream.c +
 * kineto_source.c): every input is imported into a rank from memory and the
 * rank is finished (sort, join, classify), so the model sees whatever the
 * importer made of it. (Running the full analysis here is left out until
 * kernel_table.c / clock_align.c stop passing NULL to qsort for empty
 * arrays, which UBSan reports.) Built two ways:
 *   - with STEPSCOPE_LIBFUZZER: LLVMFuzzerTestOneInput for libFuzzer;
 *   - without: a replay driver that runs every file of the directories
 *     given on the command line (the seed corpus and the committed
 *     regressions), used by the fuzz_kineto.replay test in every build.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kineto_source.h"
#include "ssa_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ssa_rank *r = calloc(1, sizeof *r);
  if (!r || ssa_rank_init(r)) {
    free(r);
    return 0;
  }
  stepscope_error err;
  if (ssa_kineto_load_memory(data, size, "fuzz.json", r, &err) != 0) {
    if (!err.message[0]) abort(); /* every failure must say why */
    ssa_rank_free(r);
    free(r);
    return 0;
  }
  ssa_rank_finish(r);
  ssa_rank_free(r);
  free(r);
  return 0;
}

#ifndef STEPSCOPE_LIBFUZZER
static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap * 2);
      if (!nb) { free(buf); buf = NULL; break; }
      buf = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) return -1;
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  size_t files = 0;
  for (int i = 1; i < argc; i++) {
    DIR *d = opendir(argv[i]);
    if (!d) {
      if (replay_file(argv[i]) == 0) files++;
      continue;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (replay_file(path) == 0) files++;
    }
    closedir(d);
  }
  printf("fuzz_kineto: replayed %zu inputs\n", files);
  return files ? 0 : 1;
}
#endif
