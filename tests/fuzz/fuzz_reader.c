/*
 * fuzz_reader.c — libFuzzer target for the trace reader: any byte string is
 * given to the reader as a file; every record is read, its strings resolved
 * and formatted as JSON. The reader must return data or an error, never
 * crash, hang or read out of bounds (ASan + UBSan watch).
 *
 * Built with -fsanitize=fuzzer when STEPSCOPE_FUZZ is ON (clang). Otherwise
 * the same file is built with a small main() that replays corpus files, so the
 * regression corpus runs in every build.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stepscope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("fuzz-trace", 0);
  if (fd < 0) return 0;
  size_t off = 0;
  while (off < size) {
    ssize_t k = write(fd, data + off, size - off);
    if (k <= 0) break;
    off += (size_t)k;
  }
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
  close(fd);
  return 0;
}

#ifndef STEPSCOPE_LIBFUZZER
static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
  size_t got = buf ? fread(buf, 1, (size_t)len, f) : 0;
  fclose(f);
  if (!buf) return -1;
  LLVMFuzzerTestOneInput(buf, got);
  free(buf);
  return 0;
}

/* Replays every file given, or every file of every directory given. */
int main(int argc, char **argv) {
  int files = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "fuzz_reader: %s: not found\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      files += replay_file(argv[i]) == 0;
      continue;
    }
    DIR *d = opendir(argv[i]);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char p[4096];
      snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
      files += replay_file(p) == 0;
    }
    if (d) closedir(d);
  }
  printf("replayed %d inputs without a crash\n", files);
  return files > 0 ? 0 : 1;
}
#endif
