/*
 * checkpoint.h — saving and resuming a training run (--checkpoint-dir,
 * --checkpoint-every, --checkpoint-keep, --resume).
 *
 * What it is for: a run stopped at any moment (preempted, a rank killed, the
 * machine lost) continues from its last complete checkpoint and computes the
 * same losses it would have computed without the interruption.
 *
 * Layout on disk (DIR is --checkpoint-dir):
 *   DIR/step-00000010/rank-00000.ckpt   one shard per rank
 *   DIR/step-00000010/rank-00001.ckpt
 *   DIR/step-00000010/manifest.json     written last, by rank 0
 * A shard holds a small header (magic, format version, completed steps, seed,
 * the layout and model shape it was written by, sizes) followed by the rank's
 * flat parameter buffer and its AdamW moments (only its 1/dp slice under
 * ZeRO-1, its bucket pieces under ZeRO-2/3; ZeRO-3 gathers its parameters bucket by bucket to write
 * them). A rank of an interleaved pipeline holds V model chunks: its shard goes
 * on, for each chunk 1 .. V-1, with three 64-bit words (the chunk's parameter
 * count, optimizer state size and offset) and that chunk's parameters and
 * moments; one-chunk shards are unchanged. The manifest records the configuration, the layout, the
 * step, the data and learning-rate schedule positions and, per shard, its size and CRC32.
 *
 * Atomicity: every file is written as NAME.tmp, fsync'd, renamed to NAME and
 * its directory fsync'd. All ranks then agree (one all-reduce over the world)
 * that every shard is durable; only then does rank 0 write the manifest the
 * same way, and a second all-reduce tells everyone it is. A checkpoint is
 * *complete* exactly when its manifest exists, so a crash at any point leaves
 * the previous complete checkpoint untouched and the new one either complete
 * or ignored. After a complete checkpoint rank 0 removes all but the newest
 * --checkpoint-keep complete ones (and incomplete ones older than the newest).
 *
 * What resuming restores: parameters, AdamW moments and the step. Everything
 * else that evolves is a pure function of (configuration, step): the data
 * order (train_data_batch is keyed by seed and step), AdamW's bias correction
 * (step + 1) and the learning rate (lr_at(step)); so the resumed losses are
 * bitwise those of an uninterrupted run. The seed therefore must not change;
 * neither may the model shape, the world/dp/tp/pp grid, --virtual-stages or the
 * ZeRO stage (the shards are cut by them), nor --bucket-mb under ZeRO-2/3. A different
 * --steps, --warmup or --lr is
 * allowed (it changes the schedule from then on) and noted on stderr.
 *
 * Device memory is reached only through the device API (copies in chunks via
 * a host staging buffer), so both backends work; all functions are
 * collective over the world except ckpt_check_config.
 */
#ifndef STEPSCOPE_TRAINER_CHECKPOINT_H
#define STEPSCOPE_TRAINER_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "device.h"
#include "model.h"

/* One more model chunk of an interleaved pipeline rank (chunks 1 .. V-1): its flat
 * parameters and AdamW moments (the whole chunk, or its ZeRO-1 slice at state_offset). */
typedef struct ckpt_chunk {
  float *param; /* NULL: streamed, as ckpt_rank_state.param (its chunk index: 1 + j) */
  size_t param_floats;
  float *adam_m, *adam_v;
  size_t state_floats;
  size_t state_offset;
} ckpt_chunk;

/* What one rank saves and restores (device pointers), and how to reach it. */
typedef struct ckpt_rank_state {
  dev_device *dev;
  const dev_ops *ops;
  dev_stream *stream; /* copies and the agreement all-reduces run here */
  comm *world;        /* every rank */
  const train_config *cfg;
  const model_grid *grid;
  float *param; /* the stage's flat parameters (padded); NULL: param_read/param_write */
  size_t param_floats;
  /* ZeRO-3 and sharded master weights (param NULL): no buffer holds the stage's parameters;
   * param_read puts model chunk `chunk`'s flat floats [at, at + n) into host memory (chunk 0
   * this one, 1 .. nmore those of `more` without a param buffer; collective over the gradient
   * group: ckpt_save reads in ascending order and then calls param_finish, so that every member
   * makes the same collectives whatever happens to its file), param_write takes this rank's
   * pieces of them from host memory. 0, or -1 when the device failed. */
  void *param_ctx;
  int (*param_read)(void *ctx, int chunk, size_t at, size_t n, float *host);
  void (*param_finish)(void *ctx);
  int (*param_write)(void *ctx, int chunk, size_t at, size_t n, const float *host);
  float *adam_m, *adam_v; /* AdamW moments: the whole buffer, the ZeRO-1 slice or
                           * the ZeRO-2/3 pieces */
  size_t state_floats;
  size_t state_offset;    /* where the moments begin in the flat buffer */
  const ckpt_chunk *more; /* interleaved: chunks 1 .. V-1 (NULL, 0 otherwise) */
  int nmore;
} ckpt_rank_state;

/* Writes the checkpoint of `step` completed steps into
 * cfg->checkpoint_dir/step-NNNNNNNN/ and prunes old ones (see above). Every
 * stream of the rank must be idle. On return 0 the checkpoint is complete and
 * durable on every rank. Returns -1 with a message on any failure (every rank
 * fails together). `bytes_out` (may be NULL): this rank's shard size. */
int ckpt_save(const ckpt_rank_state *s, int step, size_t *bytes_out, char *err, size_t errlen);

/* Loads the latest complete checkpoint of cfg->checkpoint_dir (the one rank 0
 * finds) into the rank's buffers after validating it against the
 * configuration and the manifest's size and checksum of the shard; sets
 * *step_out to the completed steps. `note` receives "" or a remark for the
 * user (the learning-rate schedule options differ from the saved run's).
 * Returns 0, or -1 with a message naming the file (every rank fails
 * together). */
int ckpt_load_latest(const ckpt_rank_state *s, int *step_out, char *note, size_t notelen, char *err,
                     size_t errlen);

/* Called by main after config_validate, before anything starts, when --checkpoint-dir
 * is given (its message is an invalid configuration: exit status 2). With --resume: a complete
 * checkpoint must exist and its manifest must match the configuration (message naming the option
 * that differs);
 * --vocab is compared only when given (else at load time). Without --resume:
 * the directory must hold no complete checkpoint (refusing to mix runs).
 * Returns 0 or -1 with a message. */
int ckpt_check_config(const train_config *cfg, char *err, size_t errlen);

/* The latest complete checkpoint in dir: returns 1 and its step, 0 when there
 * is none, -1 with a message on an unreadable directory. */
int ckpt_latest_complete(const char *dir, long long *step, char *err, size_t errlen);

/* Reads the parameter section of one shard file (for tools and tests that
 * compare runs): *params (malloc'd, the caller frees) gets the shard's flat
 * parameter buffer of *count floats (its stage and TP slice, padded; an
 * interleaved rank's chunks one after the other); *grid
 * (may be NULL) the header's world, dp, tp, pp and this shard's ranks (cp is
 * not in the header: cp = world / (dp x tp x pp)). Returns 0, or -1 with a
 * message naming the file. */
int ckpt_read_shard_params(const char *path, float **params, size_t *count, model_grid *grid,
                           char *err, size_t errlen);

/* CRC-32 (IEEE 802.3, as zlib's crc32): start with crc 0. */
uint32_t ckpt_crc32(uint32_t crc, const void *buf, size_t len);

#endif /* STEPSCOPE_TRAINER_CHECKPOINT_H */
