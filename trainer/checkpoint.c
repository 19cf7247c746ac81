/*
 * checkpoint.c — atomic, sharded checkpoints of a training run (see checkpoint.h
 * for the layout on disk, the protocol and what is restored).
 *
 * How it works:
 *   - Saving: each rank copies its parameters and AdamW moments from the device
 *     through a host staging buffer (a few MiB at a time), computing a CRC32 as
 *     it writes rank-NNNNN.ckpt.tmp; fsync, rename, fsync the directory. One
 *     all-reduce over the world then carries, per rank, a failure flag, the
 *     shard's size and its CRC (each rank fills its own row of a world x 3
 *     array of doubles; sizes below 2^53 and CRCs are exact in a double), so
 *     every rank knows whether all shards are durable and rank 0 knows every
 *     size and checksum. Rank 0 writes manifest.json (again .tmp, fsync,
 *     rename, fsync) and prunes old checkpoints; a second all-reduce reports
 *     its outcome, so every rank succeeds or fails together.
 *   - Loading: rank 0 picks the latest complete checkpoint and an all-reduce
 *     tells the others (so a directory that changes under us cannot split the
 *     ranks); every rank reads the manifest, checks it against its
 *     configuration, checks its shard's size, streams it to the device
 *     computing the CRC, and only then trusts the header; a final all-reduce
 *     makes every rank fail if one did.
 *   - The manifest is JSON, written and read back (by a small skimmer that walks
 *     objects and arrays without building a tree: it only needs a few numbers and
 *     strings, and must not crash on a damaged file) in checkpoint_manifest.c.
 * Library code: errors are returned as messages naming the file; the only
 * deliberate process exit is the hidden --debug-die-in-checkpoint testing aid.
 *
 * This file holds the shards (layout, saving, loading) and the agreement between ranks;
 * manifest.json and the --resume check are in checkpoint_manifest.c, CRC-32, files,
 * directories and pruning in checkpoint_files.c (checkpoint_internal.h: what they share).
 */
#include "checkpoint_internal.h"
#include "sc_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_MAGIC    "SSCKPT\r\n" /* 8 bytes; \r\n catches text-mode mangling */
#define STAGING_BYTES ((size_t)4 << 20)

/* shard header: the magic, then these 64-bit words (native byte order) */
enum {
  H_VERSION,
  H_STEP,
  H_SEED,
  H_RANK,
  H_WORLD,
  H_DP,
  H_TP,
  H_PP,
  H_DP_RANK,
  H_TP_RANK,
  H_PP_RANK,
  H_ZERO,
  H_LAYERS,
  H_HIDDEN,
  H_HEADS,
  H_VOCAB,
  H_MAX_SEQ,
  H_PARAM_FLOATS,
  H_STATE_FLOATS,
  H_STATE_OFFSET,
  H_WORDS
};
#define HEADER_BYTES (8 + 8 * (size_t)H_WORDS)

/* ---- agreement between ranks ------------------------------------------------------------ */

/* Sums `count` doubles over the world, in place, through a device buffer. */
static int world_sum(const ckpt_rank_state *s, double *host, size_t count, char *err, size_t n) {
  double *d = s->ops->alloc(s->dev, count * sizeof(double));
  if (!d) return ckpt_errf(err, n, "checkpoint: out of device memory");
  s->ops->copy_to_device(s->stream, d, host, count * sizeof(double));
  comm_allreduce(s->world, s->stream, d, count, COMM_FLOAT64);
  s->ops->copy_to_host(s->stream, host, d, count * sizeof(double));
  int rc = s->ops->stream_synchronize(s->stream);
  s->ops->free(s->dev, d);
  if (rc != 0)
    return ckpt_errf(err, n, "checkpoint: agreement between ranks failed: %s",
                     dev_last_error(s->dev));
  return 0;
}

/* ---- shards ------------------------------------------------------------------------------- */

/* A shard after its header is a list of segments: device floats, or (before each extra
 * chunk of an interleaved rank) CHUNK_WORDS 64-bit words describing that chunk. */
#define CHUNK_WORDS 3
typedef struct segment {
  float *dev; /* NULL: the host words below, unless `io` */
  int io;     /* the parameters through ckpt_rank_state.param_read / param_write */
  size_t floats;
  uint64_t words[CHUNK_WORDS];
  int chunk; /* io: the model chunk whose parameters these are */
} segment;

static int segment_count(const ckpt_rank_state *s) {
  return 3 + 4 * s->nmore;
}

/* Fills seg[segment_count(s)]. */
static void segments_of(const ckpt_rank_state *s, segment *seg) {
  seg[0] = (segment){s->param, !s->param, s->param_floats, {0}, 0};
  seg[1] = (segment){s->adam_m, 0, s->state_floats, {0}, 0};
  seg[2] = (segment){s->adam_v, 0, s->state_floats, {0}, 0};
  for (int j = 0; j < s->nmore; j++) {
    const ckpt_chunk *ch = &s->more[j];
    segment *g = seg + 3 + 4 * j;
    g[0] = (segment){NULL, 0, 0, {ch->param_floats, ch->state_floats, ch->state_offset}, 1 + j};
    g[1] = (segment){ch->param, !ch->param, ch->param_floats, {0}, 1 + j};
    g[2] = (segment){ch->adam_m, 0, ch->state_floats, {0}, 1 + j};
    g[3] = (segment){ch->adam_v, 0, ch->state_floats, {0}, 1 + j};
  }
}

static void header_of(const ckpt_rank_state *s, long long step, unsigned char *out) {
  const train_config *c = s->cfg;
  const model_grid *g = s->grid;
  uint64_t h[H_WORDS];
  h[H_VERSION] = CKPT_VERSION;
  h[H_STEP] = (uint64_t)step;
  h[H_SEED] = c->seed;
  h[H_RANK] = (uint64_t)g->rank;
  h[H_WORLD] = (uint64_t)g->world;
  h[H_DP] = (uint64_t)g->dp;
  h[H_TP] = (uint64_t)g->tp;
  h[H_PP] = (uint64_t)g->pp;
  h[H_DP_RANK] = (uint64_t)g->dp_rank;
  h[H_TP_RANK] = (uint64_t)g->tp_rank;
  h[H_PP_RANK] = (uint64_t)g->pp_rank;
  h[H_ZERO] = (uint64_t)c->zero;
  h[H_LAYERS] = (uint64_t)c->layers;
  h[H_HIDDEN] = (uint64_t)c->hidden;
  h[H_HEADS] = (uint64_t)c->heads;
  h[H_VOCAB] = (uint64_t)c->vocab;
  h[H_MAX_SEQ] = (uint64_t)c->max_seq;
  h[H_PARAM_FLOATS] = s->param_floats;
  h[H_STATE_FLOATS] = s->state_floats;
  h[H_STATE_OFFSET] = s->state_offset;
  memcpy(out, CKPT_MAGIC, 8);
  memcpy(out + 8, h, sizeof h);
}

static size_t shard_bytes_of(const ckpt_rank_state *s) {
  size_t bytes = HEADER_BYTES + 4 * (s->param_floats + 2 * s->state_floats);
  for (int j = 0; j < s->nmore; j++)
    bytes += 8 * CHUNK_WORDS + 4 * (s->more[j].param_floats + 2 * s->more[j].state_floats);
  return bytes;
}

static int debug_die_here(const train_config *c, int rank, long long step, int point) {
  return c->debug_ckpt_die_point == point && c->debug_ckpt_die_rank == rank &&
         c->debug_ckpt_die_step == step;
}

void ckpt_debug_die(void) {
  fflush(stdout);
  fflush(stderr);
  raise(SIGKILL);
}

int ckpt_read_shard_params(const char *path, float **params, size_t *count, model_grid *grid,
                           char *err, size_t n) {
  *params = NULL;
  *count = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ckpt_errf(err, n, "checkpoint: cannot open %s: %s", path, strerror(errno));
  unsigned char header[HEADER_BYTES];
  uint64_t h[H_WORDS];
  struct stat st;
  if (fstat(fd, &st) != 0 || ckpt_read_all(fd, header, sizeof header) != 0 ||
      memcmp(header, CKPT_MAGIC, 8) != 0) {
    close(fd);
    return ckpt_errf(err, n, "checkpoint: %s is not a stepscope checkpoint shard", path);
  }
  memcpy(h, header + 8, sizeof h);
  size_t floats = (size_t)h[H_PARAM_FLOATS];
  if (h[H_VERSION] != CKPT_VERSION || h[H_PARAM_FLOATS] > ((uint64_t)1 << 40) ||
      h[H_STATE_FLOATS] > ((uint64_t)1 << 40) ||
      (uint64_t)st.st_size < HEADER_BYTES + 4 * (uint64_t)floats) {
    close(fd);
    return ckpt_errf(err, n, "checkpoint: %s: unsupported version or truncated shard", path);
  }
  float *p = malloc(floats ? floats * 4 : 4);
  if (!p) {
    close(fd);
    return ckpt_errf(err, n, "checkpoint: out of memory reading %s", path);
  }
  if (ckpt_read_all(fd, p, floats * 4) != 0) {
    free(p);
    close(fd);
    return ckpt_errf(err, n, "checkpoint: cannot read %s", path);
  }
  /* an interleaved rank's further chunks: their parameters follow chunk 0's */
  uint64_t at = HEADER_BYTES + 4 * ((uint64_t)floats + 2 * h[H_STATE_FLOATS]);
  while (at < (uint64_t)st.st_size) {
    uint64_t w[CHUNK_WORDS];
    uint64_t left = (uint64_t)st.st_size - at;
    if (left < sizeof w || pread(fd, w, sizeof w, (off_t)at) != (ssize_t)sizeof w ||
        w[0] > ((uint64_t)1 << 40) || w[1] > ((uint64_t)1 << 40) ||
        left - sizeof w < 4 * (w[0] + 2 * w[1])) {
      free(p);
      close(fd);
      return ckpt_errf(err, n, "checkpoint: %s: a model chunk's section is truncated", path);
    }
    float *grown = realloc(p, (floats + w[0]) * 4 + 4);
    if (!grown) {
      free(p);
      close(fd);
      return ckpt_errf(err, n, "checkpoint: out of memory reading %s", path);
    }
    p = grown;
    if (lseek(fd, (off_t)(at + sizeof w), SEEK_SET) < 0 ||
        ckpt_read_all(fd, p + floats, w[0] * 4) != 0) {
      free(p);
      close(fd);
      return ckpt_errf(err, n, "checkpoint: cannot read %s", path);
    }
    floats += (size_t)w[0];
    at += sizeof w + 4 * (w[0] + 2 * w[1]);
  }
  close(fd);
  if (grid) {
    memset(grid, 0, sizeof *grid);
    grid->world = (int)h[H_WORLD];
    grid->rank = (int)h[H_RANK];
    grid->dp = (int)h[H_DP];
    grid->tp = (int)h[H_TP];
    grid->pp = (int)h[H_PP];
    grid->dp_rank = (int)h[H_DP_RANK];
    grid->tp_rank = (int)h[H_TP_RANK];
    grid->pp_rank = (int)h[H_PP_RANK];
    long denom = (long)grid->dp * grid->tp * grid->pp;
    grid->cp = denom > 0 ? (int)(grid->world / denom) : 1;
  }
  *params = p;
  *count = floats;
  return 0;
}

/* Writes this rank's shard atomically into the step directory sd. */
static int write_shard(const ckpt_rank_state *s, const char *sd, long long step, shard_info *out,
                       char *err, size_t n) {
  char name[32], path[1200], tmp[1300];
  ckpt_shard_name(name, sizeof name, s->grid->rank);
  snprintf(path, sizeof path, "%s/%s", sd, name);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  unsigned char header[HEADER_BYTES];
  header_of(s, step, header);
  char *staging = malloc(STAGING_BYTES);
  if (!staging) return ckpt_errf(err, n, "checkpoint: out of memory for the staging buffer");
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    free(staging);
    return ckpt_errf(err, n, "checkpoint: cannot create %s: %s", tmp, strerror(errno));
  }
  int rc = 0;
  uint32_t crc = ckpt_crc32(0, header, sizeof header);
  if (sc_write_all(fd, header, sizeof header) != 0)
    rc = ckpt_errf(err, n, "checkpoint: writing %s failed: %s", tmp, strerror(errno));
  int nseg = segment_count(s);
  segment *seg = malloc((size_t)nseg * sizeof *seg);
  if (!seg && rc == 0) rc = ckpt_errf(err, n, "checkpoint: out of memory");
  if (seg) segments_of(s, seg);
  size_t total = shard_bytes_of(s) - HEADER_BYTES, done = 0;
  for (int k = 0; k < nseg && rc == 0; k++) {
    if (!seg[k].dev && !seg[k].io) { /* an extra chunk's description */
      crc = ckpt_crc32(crc, seg[k].words, sizeof seg[k].words);
      if (sc_write_all(fd, seg[k].words, sizeof seg[k].words) != 0)
        rc = ckpt_errf(err, n, "checkpoint: writing %s failed: %s", tmp, strerror(errno));
      done += sizeof seg[k].words;
      continue;
    }
    for (size_t at = 0; at < seg[k].floats && rc == 0;) {
      size_t cnt = seg[k].floats - at;
      if (cnt > STAGING_BYTES / 4) cnt = STAGING_BYTES / 4;
      int bad;
      if (seg[k].io) {
        bad = s->param_read(s->param_ctx, seg[k].chunk, at, cnt, (float *)(void *)staging);
      } else {
        s->ops->copy_to_host(s->stream, staging, seg[k].dev + at, cnt * 4);
        bad = s->ops->stream_synchronize(s->stream) != 0;
      }
      if (bad) {
        rc = ckpt_errf(err, n, "checkpoint: copying to the host for %s failed: %s", tmp,
                       dev_last_error(s->dev));
        break;
      }
      crc = ckpt_crc32(crc, staging, cnt * 4);
      if (sc_write_all(fd, staging, cnt * 4) != 0) {
        rc = ckpt_errf(err, n, "checkpoint: writing %s failed: %s", tmp, strerror(errno));
        break;
      }
      at += cnt;
      done += cnt * 4;
      if (2 * done >= total && debug_die_here(s->cfg, s->grid->rank, step, 1))
        ckpt_debug_die(); /* testing: killed halfway through the shard */
    }
  }
  free(seg);
  free(staging);
  if (rc == 0 && fsync(fd) != 0)
    rc = ckpt_errf(err, n, "checkpoint: fsync of %s failed: %s", tmp, strerror(errno));
  if (close(fd) != 0 && rc == 0)
    rc = ckpt_errf(err, n, "checkpoint: closing %s failed: %s", tmp, strerror(errno));
  if (rc == 0 && rename(tmp, path) != 0)
    rc = ckpt_errf(err, n, "checkpoint: renaming %s failed: %s", tmp, strerror(errno));
  if (rc == 0) rc = ckpt_fsync_dir(sd, err, n);
  if (rc != 0) {
    unlink(tmp);
    return -1;
  }
  out->bytes = (long long)shard_bytes_of(s);
  out->crc = crc;
  return 0;
}

static int write_manifest(const ckpt_rank_state *s, const char *sd, long long step,
                          const shard_info *shards, char *err, size_t n) {
  char path[1200], tmp[1300];
  snprintf(path, sizeof path, "%s/" MANIFEST_NAME, sd);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  char *text = ckpt_manifest_text(s->cfg, step, shards);
  if (!text) return ckpt_errf(err, n, "checkpoint: out of memory writing %s", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    free(text);
    return ckpt_errf(err, n, "checkpoint: cannot create %s: %s", tmp, strerror(errno));
  }
  int rc = 0;
  if (sc_write_all(fd, text, strlen(text)) != 0)
    rc = ckpt_errf(err, n, "checkpoint: writing %s failed: %s", tmp, strerror(errno));
  free(text);
  if (rc == 0 && fsync(fd) != 0)
    rc = ckpt_errf(err, n, "checkpoint: fsync of %s failed: %s", tmp, strerror(errno));
  if (close(fd) != 0 && rc == 0)
    rc = ckpt_errf(err, n, "checkpoint: closing %s failed: %s", tmp, strerror(errno));
  if (rc == 0 && debug_die_here(s->cfg, s->grid->rank, step, 2))
    ckpt_debug_die(); /* testing: killed with every shard durable, before the manifest exists */
  if (rc == 0 && rename(tmp, path) != 0)
    rc = ckpt_errf(err, n, "checkpoint: renaming %s failed: %s", tmp, strerror(errno));
  if (rc == 0) rc = ckpt_fsync_dir(sd, err, n);
  if (rc != 0) unlink(tmp);
  return rc;
}

int ckpt_save(const ckpt_rank_state *s, int step, size_t *bytes_out, char *err, size_t n) {
  const train_config *c = s->cfg;
  int world = s->grid->world, rank = s->grid->rank;
  if (world > MAX_WORLD) return ckpt_errf(err, n, "checkpoint: at most %d ranks", MAX_WORLD);
  char sd[1024];
  ckpt_step_dir_path(sd, sizeof sd, c->checkpoint_dir, step);
  shard_info mine = {0, 0};
  char my_err[768] = "";
  int rc = ckpt_mkdir_p(sd, my_err, sizeof my_err);
  if (rc == 0) rc = write_shard(s, sd, step, &mine, my_err, sizeof my_err);
  if (s->param_finish) s->param_finish(s->param_ctx); /* the collectives a failure skipped */
  /* every rank's [failed, bytes, crc] in its own row */
  double *rows = calloc((size_t)world * 3, sizeof(double));
  if (!rows) return ckpt_errf(err, n, "checkpoint: out of memory");
  rows[3 * rank] = rc != 0;
  rows[3 * rank + 1] = (double)mine.bytes;
  rows[3 * rank + 2] = (double)mine.crc;
  if (world_sum(s, rows, (size_t)world * 3, err, n) != 0) {
    free(rows);
    return -1;
  }
  int failed = 0, first_failed = -1;
  shard_info shards[MAX_WORLD] = {{0, 0}};
  for (int r = 0; r < world; r++) {
    if (rows[3 * r] != 0 && first_failed < 0) first_failed = r;
    failed += rows[3 * r] != 0;
    shards[r].bytes = (long long)rows[3 * r + 1];
    shards[r].crc = (uint32_t)rows[3 * r + 2];
  }
  free(rows);
  if (rc != 0) return ckpt_errf(err, n, "%s", my_err);
  if (failed)
    return ckpt_errf(err, n,
                     "checkpoint of step %d: %d rank(s) could not write their shard "
                     "(rank %d first; see its message)",
                     step, failed, first_failed);
  /* every shard is durable: rank 0 completes the checkpoint and prunes */
  double outcome = 0;
  if (rank == 0) {
    rc = write_manifest(s, sd, step, shards, my_err, sizeof my_err);
    if (rc == 0)
      rc = ckpt_prune(c->checkpoint_dir, c->checkpoint_keep, debug_die_here(c, 0, step, 3), my_err,
                      sizeof my_err);
    outcome = rc != 0;
  }
  if (world_sum(s, &outcome, 1, err, n) != 0) return -1;
  if (rc != 0) return ckpt_errf(err, n, "%s", my_err);
  if (outcome != 0)
    return ckpt_errf(err, n,
                     "checkpoint of step %d: rank 0 could not complete it (see its "
                     "message)",
                     step);
  if (bytes_out) *bytes_out = (size_t)mine.bytes;
  return 0;
}

/* ---- loading ------------------------------------------------------------------------------- */

static int read_shard(const ckpt_rank_state *s, const char *sd, const manifest *m, char *err,
                      size_t n) {
  int rank = s->grid->rank;
  char name[32], path[1200];
  ckpt_shard_name(name, sizeof name, rank);
  if (strcmp(m->file[rank], name) != 0)
    return ckpt_errf(err, n,
                     "checkpoint: %s/" MANIFEST_NAME ": rank %d's shard is named \"%s\", "
                     "expected \"%s\"",
                     sd, rank, m->file[rank], name);
  snprintf(path, sizeof path, "%s/%s", sd, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ckpt_errf(err, n, "checkpoint: cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return ckpt_errf(err, n, "checkpoint: cannot stat %s: %s", path, strerror(errno));
  }
  if ((long long)st.st_size != m->shard[rank].bytes) {
    close(fd);
    return ckpt_errf(err, n,
                     "checkpoint: %s is %lld bytes, but the manifest says %lld (truncated or "
                     "replaced)",
                     path, (long long)st.st_size, m->shard[rank].bytes);
  }
  if ((size_t)st.st_size != shard_bytes_of(s)) {
    close(fd);
    return ckpt_errf(err, n,
                     "checkpoint: %s is %lld bytes, but rank %d's parameters and optimizer state "
                     "take %zu: it was written by a different configuration",
                     path, (long long)st.st_size, rank, shard_bytes_of(s));
  }
  unsigned char header[HEADER_BYTES];
  char *staging = malloc(STAGING_BYTES);
  if (!staging) {
    close(fd);
    return ckpt_errf(err, n, "checkpoint: out of memory for the staging buffer");
  }
  int rc = ckpt_read_all(fd, header, sizeof header) == 0
               ? 0
               : ckpt_errf(err, n, "checkpoint: cannot read %s", path);
  uint32_t crc = ckpt_crc32(0, header, sizeof header);
  int nseg = segment_count(s);
  segment *seg = malloc((size_t)nseg * sizeof *seg);
  if (!seg && rc == 0) rc = ckpt_errf(err, n, "checkpoint: out of memory");
  if (seg) segments_of(s, seg);
  for (int k = 0; k < nseg && rc == 0; k++) {
    if (!seg[k].dev && !seg[k].io) { /* an extra chunk's description: must be this rank's */
      uint64_t got[CHUNK_WORDS];
      if (ckpt_read_all(fd, got, sizeof got) != 0) {
        rc = ckpt_errf(err, n, "checkpoint: cannot read %s", path);
        break;
      }
      crc = ckpt_crc32(crc, got, sizeof got);
      if (memcmp(got, seg[k].words, sizeof got) != 0)
        rc = ckpt_errf(err, n,
                       "checkpoint: %s: model chunk %d holds %llu parameters and %llu optimizer "
                       "values at %llu, expected %llu, %llu at %llu for rank %d of this run",
                       path, 1 + (k - 3) / 4, (unsigned long long)got[0],
                       (unsigned long long)got[1], (unsigned long long)got[2],
                       (unsigned long long)seg[k].words[0], (unsigned long long)seg[k].words[1],
                       (unsigned long long)seg[k].words[2], rank);
      continue;
    }
    for (size_t at = 0; at < seg[k].floats;) {
      size_t cnt = seg[k].floats - at;
      if (cnt > STAGING_BYTES / 4) cnt = STAGING_BYTES / 4;
      if (ckpt_read_all(fd, staging, cnt * 4) != 0) {
        rc = ckpt_errf(err, n, "checkpoint: cannot read %s", path);
        break;
      }
      crc = ckpt_crc32(crc, staging, cnt * 4);
      int bad;
      if (seg[k].io) {
        bad = s->param_write(s->param_ctx, seg[k].chunk, at, cnt,
                             (const float *)(const void *)staging);
      } else {
        s->ops->copy_to_device(s->stream, seg[k].dev + at, staging, cnt * 4);
        bad = s->ops->stream_synchronize(s->stream) != 0; /* before reusing staging */
      }
      if (bad) {
        rc = ckpt_errf(err, n, "checkpoint: copying %s to the device failed: %s", path,
                       dev_last_error(s->dev));
        break;
      }
      at += cnt;
    }
  }
  free(seg);
  free(staging);
  close(fd);
  if (rc != 0) return -1;
  if (crc != m->shard[rank].crc)
    return ckpt_errf(err, n,
                     "checkpoint: %s is corrupted: its CRC32 is %08x, the manifest says %08x", path,
                     (unsigned)crc, (unsigned)m->shard[rank].crc);
  /* the bytes are those that were written: now the header can be trusted */
  unsigned char want[HEADER_BYTES];
  header_of(s, m->step, want);
  if (memcmp(header, CKPT_MAGIC, 8) != 0)
    return ckpt_errf(err, n, "checkpoint: %s: not a stepscope checkpoint shard", path);
  uint64_t got_h[H_WORDS], want_h[H_WORDS];
  memcpy(got_h, header + 8, sizeof got_h);
  memcpy(want_h, want + 8, sizeof want_h);
  static const char *const field[H_WORDS] = {"format version",
                                             "step",
                                             "seed",
                                             "rank",
                                             "world",
                                             "dp",
                                             "tp",
                                             "pp",
                                             "dp rank",
                                             "tp rank",
                                             "pp rank",
                                             "zero",
                                             "layers",
                                             "hidden",
                                             "heads",
                                             "vocab",
                                             "positions",
                                             "parameter count",
                                             "optimizer state size",
                                             "optimizer state offset"};
  for (int i = 0; i < H_WORDS; i++)
    if (got_h[i] != want_h[i])
      return ckpt_errf(
          err, n, "checkpoint: %s: its %s is %llu, expected %llu for rank %d of this run", path,
          field[i], (unsigned long long)got_h[i], (unsigned long long)want_h[i], rank);
  return 0;
}

int ckpt_load_latest(const ckpt_rank_state *s, int *step_out, char *note, size_t notelen, char *err,
                     size_t n) {
  const train_config *c = s->cfg;
  int rank = s->grid->rank;
  if (note && notelen) note[0] = '\0';
  char my_err[768] = "";
  int rc = 0;
  /* rank 0 chooses; the others follow (step + 1 summed over the world; 0: none) */
  double chosen = 0;
  if (rank == 0) {
    long long step;
    int found = ckpt_latest_complete(c->checkpoint_dir, &step, my_err, sizeof my_err);
    if (found == 0)
      snprintf(my_err, sizeof my_err, "--resume: no complete checkpoint in --checkpoint-dir %s",
               c->checkpoint_dir);
    chosen = found == 1 ? (double)step + 1 : 0;
  }
  if (world_sum(s, &chosen, 1, err, n) != 0) return -1;
  if (chosen < 1) {
    if (rank == 0) return ckpt_errf(err, n, "%s", my_err);
    return ckpt_errf(err, n, "checkpoint: rank 0 found no checkpoint to resume from");
  }
  long long step = (long long)chosen - 1;
  char sd[1024], mpath[1200];
  ckpt_step_dir_path(sd, sizeof sd, c->checkpoint_dir, step);
  snprintf(mpath, sizeof mpath, "%s/" MANIFEST_NAME, sd);
  manifest *m = malloc(sizeof *m);
  if (!m) {
    snprintf(my_err, sizeof my_err, "checkpoint: out of memory");
    rc = -1;
  }
  if (rc == 0) rc = ckpt_manifest_read(mpath, m, my_err, sizeof my_err);
  if (rc == 0 && m->step != step)
    rc = ckpt_errf(my_err, sizeof my_err, "checkpoint: %s says step %lld, its directory %lld",
                   mpath, m->step, step);
  if (rc == 0) rc = ckpt_manifest_compare(m, c, 1, mpath, my_err, sizeof my_err);
  if (rc == 0 && step > 2147483647LL)
    rc = ckpt_errf(my_err, sizeof my_err, "checkpoint: %s: step %lld is out of range", mpath, step);
  if (rc == 0) rc = read_shard(s, sd, m, my_err, sizeof my_err);
  if (rc == 0 && note && notelen &&
      (m->steps != c->steps || m->warmup != c->warmup || m->lr != c->lr ||
       m->min_lr_ratio != c->min_lr_ratio))
    snprintf(note, notelen,
             "the learning-rate schedule differs from the checkpointed run's (--steps %lld, "
             "--warmup %lld, --lr %g, --min-lr-ratio %g); it follows this run's options from "
             "step %lld",
             m->steps, m->warmup, m->lr, m->min_lr_ratio, step);
  free(m);
  /* every rank's failure flag in its own slot */
  int world = s->grid->world;
  double *failed = calloc((size_t)world, sizeof(double));
  if (!failed) return ckpt_errf(err, n, "checkpoint: out of memory");
  failed[rank] = rc != 0;
  if (world_sum(s, failed, (size_t)world, err, n) != 0) {
    free(failed);
    return -1;
  }
  int first = -1;
  for (int r = world - 1; r >= 0; r--)
    if (failed[r] != 0) first = r;
  free(failed);
  if (rc != 0) return ckpt_errf(err, n, "%s", my_err);
  if (first >= 0)
    return ckpt_errf(err, n, "checkpoint: rank %d could not resume (see its message)", first);
  *step_out = (int)step;
  return 0;
}
