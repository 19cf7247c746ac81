/*
 * fuzz_replay.c — the replay driver shared by the fuzz targets' `*_replay`
 * builds (every folder of tests/fuzz): without
 * libFuzzer, a target is an ordinary program whose main() is this one. It
 * hands every file given, and every file of every directory given (names
 * starting with '.' skipped), whole to LLVMFuzzerTestOneInput, in the order
 * readdir gives them. A path that does not exist or a file that cannot be
 * read is an error (a moved seed directory must not pass as "nothing to
 * replay"); so is replaying nothing. Exit 0 when every input was replayed
 * without the target aborting.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The whole file in a malloc'd buffer (read to its end, whatever stat said). */
static uint8_t *read_whole(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0, got;
  uint8_t *buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
      }
      buf = nb;
      cap *= 2;
    }
  }
  if (buf && ferror(f)) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = n;
  return buf;
}

static int replay_file(const char *name, const char *path) {
  size_t len;
  uint8_t *buf = read_whole(path, &len);
  if (!buf) {
    fprintf(stderr, "%s: %s: %s\n", name, path, strerror(errno ? errno : EIO));
    return -1;
  }
  LLVMFuzzerTestOneInput(buf, len);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  size_t files = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "%s: %s: not found\n", name, argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (replay_file(name, argv[i])) return 1;
      files++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) {
      fprintf(stderr, "%s: %s: %s\n", name, argv[i], strerror(errno));
      return 1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (replay_file(name, path)) {
        closedir(d);
        return 1;
      }
      files++;
    }
    closedir(d);
  }
  printf("%s: replayed %zu inputs\n", name, files);
  return files ? 0 : 1;
}
