/*
 * test_checkpoint.c — unit tests of trainer/checkpoint.c that need no training
 * run: the CRC-32 against its standard check value, which step directories
 * count as complete checkpoints, and the manifest reader behind --resume's
 * validation: a valid manifest is accepted, one differing in an option is
 * rejected naming it, and every truncation and many single-byte damages of a
 * manifest are rejected (or accepted) without a crash — run under ASan/UBSan
 * in the sanitizer build. (Resuming itself is tested end to end by
 * checkpoint.sh.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "config.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static const char *valid_manifest =
    "{\"format\":\"stepscope-checkpoint\",\"version\":1,\"step\":6,\n"
    " \"layout\":{\"world\":2,\"dp\":2,\"tp\":1,\"pp\":1,\"zero\":1},\n"
    " \"model\":{\"layers\":4,\"hidden\":32,\"heads\":4,\"vocab\":256,\"max_seq\":1024},\n"
    " \"data\":{\"seed\":7,\"next_step\":6,\"batch\":8,\"seq\":16},\n"
    " \"schedule\":{\"next_step\":6,\"steps\":6,\"warmup\":0,\"lr\":0.001,\"min_lr_ratio\":0.1},\n"
    " \"config\":{\"model\":\"tiny\",\"nested\":[1,{\"a\":\"}]\\\"\"}]},\n"
    " \"shards\":[\n"
    "  {\"rank\":0,\"file\":\"rank-00000.ckpt\",\"bytes\":734888,\"crc32\":\"0a1b2c3d\"},\n"
    "  {\"rank\":1,\"file\":\"rank-00001.ckpt\",\"bytes\":734888,\"crc32\":\"ffffffff\"}]}\n";

static void write_file(const char *path, const char *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    exit(2);
  }
  fwrite(data, 1, n, f);
  fclose(f);
}

static void make_config(train_config *cfg, const char *dir, const char *extra) {
  char *argv[64];
  int argc = 0;
  static char buf[1024];
  snprintf(buf, sizeof buf,
           "x --world 2 --dp 2 --zero 1 --layers 4 --hidden 32 --heads 4 --seq 16 --seed 7 "
           "--vocab 256 --checkpoint-dir %s --resume %s",
           dir, extra);
  for (char *tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " "))
    argv[argc++] = tok;
  argv[argc] = NULL;
  char err[512];
  if (config_parse(cfg, argc, argv, err, sizeof err) != 0) {
    printf("config_parse: %s\n", err);
    exit(2);
  }
}

int main(void) {
  /* CRC-32 check value (as zlib's crc32) and incremental use */
  CHECK(ckpt_crc32(0, "123456789", 9) == 0xCBF43926u, "crc32 check value: %08x",
        (unsigned)ckpt_crc32(0, "123456789", 9));
  CHECK(ckpt_crc32(ckpt_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u, "incremental crc32");
  CHECK(ckpt_crc32(0, "", 0) == 0, "empty crc32");
  /* the eight-bytes-at-a-time path equals a bitwise reference at every length and offset */
  {
    unsigned char data[300];
    for (size_t i = 0; i < sizeof data; i++)
      data[i] = (unsigned char)(i * 131u + 7u);
    int bad = 0;
    for (size_t off = 0; off < 9; off++)
      for (size_t len = 0; off + len <= sizeof data; len += 7) {
        uint32_t ref = 0xffffffffu;
        for (size_t i = 0; i < len; i++) {
          ref ^= data[off + i];
          for (int k = 0; k < 8; k++)
            ref = (ref & 1) ? 0xEDB88320u ^ (ref >> 1) : ref >> 1;
        }
        bad += ckpt_crc32(0, data + off, len) != ~ref;
      }
    CHECK(bad == 0, "%d crc32 mismatches against the bitwise reference", bad);
  }

  /* thousands of small manifest rewrites: in memory (tmpfs) when there is one, so
   * that other jobs' disk traffic cannot slow the test down */
  char root[64];
  snprintf(root, sizeof root, "%s/ss-ckpt-unit.XXXXXX",
           access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 2;
  }
  char path[512], err[1024];
  long long step = -1;

  /* a missing directory has no checkpoint; incomplete and foreign entries do not count */
  snprintf(path, sizeof path, "%s/none", root);
  CHECK(ckpt_latest_complete(path, &step, err, sizeof err) == 0, "missing directory");
  const char *dirs[] = {"step-00000003", "step-00000009", "step-00000012", "step-x", "stepper"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
    mkdir(path, 0755);
  }
  CHECK(ckpt_latest_complete(root, &step, err, sizeof err) == 0, "no manifest yet");
  snprintf(path, sizeof path, "%s/step-00000003/manifest.json", root);
  write_file(path, valid_manifest, strlen(valid_manifest));
  snprintf(path, sizeof path, "%s/step-00000009/manifest.json", root);
  write_file(path, valid_manifest, strlen(valid_manifest));
  snprintf(path, sizeof path, "%s/step-x/manifest.json", root);
  write_file(path, valid_manifest, strlen(valid_manifest));
  /* step 12 has only a temporary manifest: incomplete */
  snprintf(path, sizeof path, "%s/step-00000012/manifest.json.tmp", root);
  write_file(path, valid_manifest, strlen(valid_manifest));
  CHECK(ckpt_latest_complete(root, &step, err, sizeof err) == 1 && step == 9,
        "latest complete: step %lld", step);

  /* --resume validation against the latest (step 9) manifest */
  train_config cfg;
  make_config(&cfg, root, "");
  CHECK(ckpt_check_config(&cfg, err, sizeof err) == 0, "valid manifest rejected: %s", err);
  make_config(&cfg, root, "--heads 2");
  CHECK(ckpt_check_config(&cfg, err, sizeof err) != 0 && strstr(err, "--heads 2 differs"),
        "--heads: %s", err);
  make_config(&cfg, root, "--pp 2 --dp 1");
  CHECK(ckpt_check_config(&cfg, err, sizeof err) != 0 && strstr(err, "--pp 2 differs"), "--pp: %s",
        err);
  make_config(&cfg, root, "--seed 99");
  CHECK(ckpt_check_config(&cfg, err, sizeof err) != 0 && strstr(err, "--seed 99 differs"),
        "--seed: %s", err);

  /* every truncation: no crash; those cutting into the shards array are rejected */
  make_config(&cfg, root, "");
  snprintf(path, sizeof path, "%s/step-00000009/manifest.json", root);
  size_t len = strlen(valid_manifest);
  size_t shards_end = (size_t)(strrchr(valid_manifest, ']') - valid_manifest);
  int accepted_short = 0;
  for (size_t cut = 0; cut < len; cut++) {
    write_file(path, valid_manifest, cut);
    int rc = ckpt_check_config(&cfg, err, sizeof err);
    if (cut <= shards_end && rc == 0) accepted_short++;
    if (rc != 0)
      CHECK(strstr(err, "manifest.json") != NULL, "message does not name the file: %s", err);
  }
  CHECK(accepted_short == 0, "%d truncated manifests accepted", accepted_short);

  /* single-byte damage everywhere: no crash (the sanitizer build checks memory) */
  char *copy = malloc(len + 1);
  const char repl[] = {'\0', '"', '{', '}', '[', ']', ',', ':', '\\', '9', 'x', ' '};
  int rejected = 0;
  for (size_t at = 0; copy && at < len; at++) {
    for (size_t k = 0; k < sizeof repl; k++) {
      memcpy(copy, valid_manifest, len + 1);
      copy[at] = repl[k];
      write_file(path, copy, len);
      rejected += ckpt_check_config(&cfg, err, sizeof err) != 0;
    }
  }
  free(copy);
  CHECK(rejected > 0, "no damaged manifest was rejected");
  printf("manifest damage: %d of %zu variants rejected\n", rejected, len * sizeof repl);

  /* a shard entry missing for a rank */
  const char *missing =
      "{\"format\":\"stepscope-checkpoint\",\"version\":1,\"step\":6,"
      "\"layout\":{\"world\":2,\"dp\":2,\"tp\":1,\"pp\":1,\"zero\":1},"
      "\"model\":{\"layers\":4,\"hidden\":32,\"heads\":4,\"vocab\":256,\"max_seq\":1024},"
      "\"data\":{\"seed\":7},\"schedule\":{\"steps\":6,\"warmup\":0,\"lr\":0.001,"
      "\"min_lr_ratio\":0.1},"
      "\"shards\":[{\"rank\":0,\"file\":\"rank-00000.ckpt\",\"bytes\":1,\"crc32\":\"00000000\"}]}";
  write_file(path, missing, strlen(missing));
  CHECK(ckpt_check_config(&cfg, err, sizeof err) != 0 && strstr(err, "no shard for rank 1"),
        "missing shard: %s", err);

  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) printf("warning: could not remove %s\n", root);
  if (failures) {
    printf("%d failure(s)\n", failures);
    return 1;
  }
  printf("OK\n");
  return 0;
}
