/*
 * checkpoint_internal.h — internal to the checkpoint code and nothing else: what its three
 * files share. checkpoint.c (shards: saving and loading, agreement between ranks),
 * checkpoint_files.c (CRC-32, file and directory helpers, the step directories, pruning)
 * and checkpoint_manifest.c (manifest.json: writing it, reading it back, comparing it with
 * the configuration, and the --resume check before a run starts). checkpoint.h is the
 * public side.
 */
#ifndef STEPSCOPE_TRAINER_CHECKPOINT_INTERNAL_H
#define STEPSCOPE_TRAINER_CHECKPOINT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"

#define CKPT_VERSION       1
#define MANIFEST_NAME      "manifest.json"
#define MANIFEST_MAX_BYTES (1u << 20)
#define MAX_WORLD          64

/* One shard as the manifest lists it. */
typedef struct shard_info {
  long long bytes;
  uint32_t crc;
} shard_info;

typedef struct manifest {
  long long version, step;
  long long world, dp, tp, pp, zero;
  long long layers, hidden, heads, vocab, max_seq;
  unsigned long long seed;
  long long steps, warmup;
  double lr, min_lr_ratio;
  double bucket_mb;         /* 0 when the manifest predates it; ZeRO-2/3 shards are cut by bucket */
  long long virtual_stages; /* model chunks per rank; 1 when the manifest predates it */
  long long experts, top_k, moe_every, ep; /* 0 experts (dense) when it predates them */
  shard_info shard[MAX_WORLD];
  char file[MAX_WORLD][32];
} manifest;

/* ---- checkpoint_files.c ------------------------------------------------------------------- */

/* Writes the message into err (when err and n) and returns -1. */
int ckpt_errf(char *err, size_t n, const char *fmt, ...);
/* All n bytes, retrying short reads: 0, -1 with errno set, or 1 at a premature end of file
 * (writes go through sc_write_all, common/sc_file.h). */
int ckpt_read_all(int fd, void *buf, size_t n);
/* fsync of a directory (after a rename in it): 0 or -1 with a message. */
int ckpt_fsync_dir(const char *dir, char *err, size_t n);
/* mkdir -p: 0 or -1 with a message. */
int ckpt_mkdir_p(const char *path, char *err, size_t n);
/* dir/step-NNNNNNNN, and a rank's shard file name rank-NNNNN.ckpt. */
void ckpt_step_dir_path(char *buf, size_t n, const char *dir, long long step);
void ckpt_shard_name(char *buf, size_t n, int rank);
/* Keeps the newest `keep` complete checkpoints of dir, removing the rest (die_midway: the
 * --debug-die-in-checkpoint prune point). 0 or -1 with a message. */
int ckpt_prune(const char *dir, int keep, int die_midway, char *err, size_t n);

/* ---- checkpoint_manifest.c ---------------------------------------------------------------- */

/* manifest.json of the checkpoint of `step` (malloc'd; NULL when out of memory). */
char *ckpt_manifest_text(const train_config *c, long long step, const shard_info *shards);
/* Reads and parses a manifest: 0, or -1 with a message naming the file. */
int ckpt_manifest_read(const char *path, manifest *m, char *err, size_t n);
/* Whether the manifest fits the configuration: 0, or -1 with a message naming the option
 * that differs (--vocab only when check_vocab). */
int ckpt_manifest_compare(const manifest *m, const train_config *c, int check_vocab,
                          const char *path, char *err, size_t n);

/* ---- checkpoint.c ------------------------------------------------------------------------- */

/* --debug-die-in-checkpoint: kills this process (SIGKILL) after flushing its output. */
void ckpt_debug_die(void);

#endif /* STEPSCOPE_TRAINER_CHECKPOINT_INTERNAL_H */
