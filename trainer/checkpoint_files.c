/*
 * checkpoint_files.c — the file-system side of checkpoints: CRC-32 (slicing by 8), writes
 * and reads that retry short transfers, fsync of a directory, mkdir -p, the names of step
 * directories and shard files, the list of a checkpoint directory's steps (which are
 * complete: their manifest exists), the latest complete one, and pruning old ones.
 *
 * Why a file of its own: none of it knows what a shard or a manifest holds; checkpoint.c
 * (shards) and checkpoint_manifest.c (the manifest) build on it (checkpoint_internal.h).
 */
#include "checkpoint_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ckpt_errf(char *err, size_t n, const char *fmt, ...) {
  if (err && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ---- CRC-32 -------------------------------------------------------------------------- */

/* Table-driven, eight bytes per step ("slicing by 8"): table[k][b] is the CRC
 * contribution of byte b followed by k zero bytes, so eight lookups replace
 * eight dependent single-byte steps (several times faster on large shards). */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[0][i] = c;
  }
  for (int k = 1; k < 8; k++)
    for (uint32_t i = 0; i < 256; i++)
      crc_table[k][i] = crc_table[0][crc_table[k - 1][i] & 0xffu] ^ (crc_table[k - 1][i] >> 8);
}

uint32_t ckpt_crc32(uint32_t crc, const void *buf, size_t len) {
  pthread_once(&crc_once, crc_init);
  const unsigned char *p = buf;
  crc = ~crc;
  for (; len >= 8; p += 8, len -= 8) {
    /* the bytes are combined explicitly, so the result does not depend on alignment
     * or on the host's byte order */
    uint32_t lo =
        crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    crc = crc_table[7][lo & 0xffu] ^ crc_table[6][(lo >> 8) & 0xffu] ^
          crc_table[5][(lo >> 16) & 0xffu] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
          crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
  }
  for (; len > 0; p++, len--)
    crc = crc_table[0][(crc ^ *p) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

/* ---- files ---------------------------------------------------------------------------- */

/* 0, -1 with errno, or 1 at a premature end of file */
int ckpt_read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) return 1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* Makes the directory's entries (a rename, a new file or subdirectory) durable. */
int ckpt_fsync_dir(const char *dir, char *err, size_t n) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return ckpt_errf(err, n, "checkpoint: %s: cannot open the directory: %s", dir, strerror(errno));
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  if (rc != 0 && e != EINVAL && e != EROFS) /* some filesystems cannot sync directories */
    return ckpt_errf(err, n, "checkpoint: %s: fsync of the directory failed: %s", dir, strerror(e));
  return 0;
}

/* mkdir -p; each created level's parent is fsync'd so the new entry is durable. */
int ckpt_mkdir_p(const char *path, char *err, size_t n) {
  char buf[1024];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
    return ckpt_errf(err, n, "checkpoint: %s: path too long", path);
  size_t len = strlen(buf);
  for (size_t i = 1; i <= len; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char saved = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0755) == 0) {
      char parent[1024];
      snprintf(parent, sizeof parent, "%s", buf);
      char *slash = strrchr(parent, '/');
      if (slash == parent)
        slash[1] = '\0';
      else if (slash)
        *slash = '\0';
      else
        snprintf(parent, sizeof parent, ".");
      if (ckpt_fsync_dir(parent, err, n) != 0) return -1;
    } else if (errno != EEXIST) {
      return ckpt_errf(err, n, "checkpoint: cannot create %s: %s", buf, strerror(errno));
    } else {
      struct stat st;
      if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return ckpt_errf(err, n, "checkpoint: %s exists and is not a directory", buf);
    }
    buf[i] = saved;
  }
  return 0;
}

void ckpt_step_dir_path(char *buf, size_t n, const char *dir, long long step) {
  snprintf(buf, n, "%s/step-%08lld", dir, step);
}

void ckpt_shard_name(char *buf, size_t n, int rank) {
  snprintf(buf, n, "rank-%05d.ckpt", rank);
}

/* ---- the checkpoint directory -------------------------------------------------------- */

typedef struct step_entry {
  long long step;
  int complete;
} step_entry;

static int cmp_entry(const void *a, const void *b) {
  long long x = ((const step_entry *)a)->step, y = ((const step_entry *)b)->step;
  return x < y ? -1 : x > y;
}

/* "step-" followed by digits only */
static int parse_step_name(const char *name, long long *step) {
  if (strncmp(name, "step-", 5) != 0 || !name[5]) return 0;
  long long v = 0;
  for (const char *p = name + 5; *p; p++) {
    if (*p < '0' || *p > '9' || v > 100000000000LL) return 0;
    v = v * 10 + (*p - '0');
  }
  *step = v;
  return 1;
}

/* The step-* subdirectories of dir, sorted by step; a missing dir has none. */
static int list_steps(const char *dir, step_entry **out, int *count, char *err, size_t n) {
  *out = NULL;
  *count = 0;
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return 0;
    return ckpt_errf(err, n, "checkpoint: %s: cannot read the directory: %s", dir, strerror(errno));
  }
  step_entry *v = NULL;
  int len = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    long long step;
    if (!parse_step_name(de->d_name, &step)) continue;
    if (len == cap) {
      int ncap = cap ? 2 * cap : 16;
      step_entry *nv = realloc(v, (size_t)ncap * sizeof *nv);
      if (!nv) {
        free(v);
        closedir(d);
        return ckpt_errf(err, n, "checkpoint: out of memory listing %s", dir);
      }
      v = nv;
      cap = ncap;
    }
    char path[1200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/" MANIFEST_NAME, dir, de->d_name);
    v[len].step = step;
    v[len].complete = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    len++;
  }
  closedir(d);
  if (len > 1) qsort(v, (size_t)len, sizeof *v, cmp_entry);
  *out = v;
  *count = len;
  return 0;
}

int ckpt_latest_complete(const char *dir, long long *step, char *err, size_t n) {
  step_entry *v;
  int count;
  if (list_steps(dir, &v, &count, err, n) != 0) return -1;
  int found = 0;
  for (int i = count - 1; i >= 0 && !found; i--)
    if (v[i].complete) {
      *step = v[i].step;
      found = 1;
    }
  free(v);
  return found;
}

/* Removes one checkpoint directory: the manifest first (so a crash midway
 * leaves an incomplete checkpoint, never a complete one missing a shard).
 * `die_midway`: testing, SIGKILL once the manifest is gone. */
static int remove_checkpoint(const char *dir, long long step, int die_midway, char *err, size_t n) {
  char sd[1024], path[1400];
  ckpt_step_dir_path(sd, sizeof sd, dir, step);
  snprintf(path, sizeof path, "%s/" MANIFEST_NAME, sd);
  if (unlink(path) != 0 && errno != ENOENT)
    return ckpt_errf(err, n, "checkpoint: cannot remove %s: %s", path, strerror(errno));
  if (ckpt_fsync_dir(sd, err, n) != 0) return -1;
  if (die_midway) ckpt_debug_die();
  DIR *d = opendir(sd);
  if (!d) return ckpt_errf(err, n, "checkpoint: cannot read %s: %s", sd, strerror(errno));
  struct dirent *de;
  int rc = 0;
  while ((de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", sd, de->d_name);
    if (unlink(path) != 0 && errno != ENOENT) {
      rc = ckpt_errf(err, n, "checkpoint: cannot remove %s: %s", path, strerror(errno));
      break;
    }
  }
  closedir(d);
  if (rc != 0) return -1;
  if (rmdir(sd) != 0 && errno != ENOENT)
    return ckpt_errf(err, n, "checkpoint: cannot remove %s: %s", sd, strerror(errno));
  return 0;
}

/* Keeps the newest `keep` complete checkpoints; drops older complete ones and
 * incomplete ones older than the newest complete one (debris of a crash).
 * Incomplete ones newer than it may be being written and are left alone. */
int ckpt_prune(const char *dir, int keep, int die_midway, char *err, size_t n) {
  step_entry *v;
  int count;
  if (list_steps(dir, &v, &count, err, n) != 0) return -1;
  long long newest = -1;
  int seen = 0, rc = 0, removed = 0;
  for (int i = count - 1; i >= 0 && rc == 0; i--) {
    if (v[i].complete) {
      if (newest < 0) newest = v[i].step;
      if (++seen <= keep) continue;
    } else if (newest < 0) {
      continue;
    }
    rc = remove_checkpoint(dir, v[i].step, die_midway, err, n);
    removed++;
  }
  free(v);
  if (rc == 0 && removed) rc = ckpt_fsync_dir(dir, err, n);
  return rc;
}
