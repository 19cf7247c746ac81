/*
 * test_batches.c — batch sampling (data.batches): targets are inputs shifted by one;
 * same seed gives the same batches and another seed others; a world-1 batch equals
 * the concatenation of 2 and 4 data-parallel shards in rank order, step after step;
 * an epoch visits every chunk exactly once on one shifted grid, and the next epoch
 * uses another order; limits (T = max, T too large, bad shards) behave as documented.
 *
 * A token file whose token i is i (vocabulary 65536) makes every window's first input
 * token equal to its offset, so coverage can be checked exactly.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_check.h"
#include "dataset.h"

int data_check_failures = 0;

enum { T = 16, N_TOKENS = 5000 };

static stepscope_dataset *open_identity_dataset(char *path, size_t path_size) {
  char dir[] = "/tmp/stepscope-batches-XXXXXX";
  if (!mkdtemp(dir)) return NULL;
  snprintf(path, path_size, "%s/identity.tok", dir);
  int *tokens = malloc(sizeof *tokens * N_TOKENS);
  if (!tokens) return NULL;
  for (int i = 0; i < N_TOKENS; i++)
    tokens[i] = i;
  char err[256] = "";
  stepscope_dataset *ds = NULL;
  stepscope_dataset_options opt = {path, STEPSCOPE_TOKENIZER_KIND_BYTE, 0};
  if (stepscope_token_file_write(path, tokens, N_TOKENS, 65536, err, sizeof err) != 0 ||
      stepscope_dataset_open(&ds, &opt, err, sizeof err) != 0)
    printf("setup failed: %s\n", err);
  free(tokens);
  return ds;
}

static void test_shapes_and_determinism(const stepscope_dataset *ds) {
  enum { B = 8 };
  int in_a[B * T], tg_a[B * T], in_b[B * T], tg_b[B * T];
  stepscope_data_cursor a, b, c;
  stepscope_data_cursor_init(&a, 42, 0, 1);
  stepscope_data_cursor_init(&b, 42, 0, 1);
  stepscope_data_cursor_init(&c, 43, 0, 1);
  const int *tokens = stepscope_dataset_tokens(ds);
  int differs = 0;
  for (int step = 0; step < 5; step++) {
    CHECK(stepscope_dataset_next_batch(ds, &a, in_a, tg_a, B, T) == 0, "batch a");
    CHECK(stepscope_dataset_next_batch(ds, &b, in_b, tg_b, B, T) == 0, "batch b");
    CHECK(memcmp(in_a, in_b, sizeof in_a) == 0 && memcmp(tg_a, tg_b, sizeof tg_a) == 0,
          "same seed, step %d: batches differ", step);
    CHECK(stepscope_dataset_next_batch(ds, &c, in_b, tg_b, B, T) == 0, "batch c");
    differs |= memcmp(in_a, in_b, sizeof in_a) != 0;
    for (int r = 0; r < B; r++) {
      int start = in_a[r * T];
      CHECK(start >= 0 && start + T < N_TOKENS, "window at %d leaves the data", start);
      for (int t = 0; t < T; t++) {
        CHECK(in_a[r * T + t] == tokens[start + t], "inputs are consecutive tokens");
        CHECK(tg_a[r * T + t] == tokens[start + t + 1], "targets are the next tokens");
      }
    }
  }
  CHECK(a.step == 5, "the cursor advanced to step %llu", (unsigned long long)a.step);
  CHECK(differs, "seeds 42 and 43 gave identical batches");
}

static void test_data_parallel(const stepscope_dataset *ds) {
  enum { G = 8 };
  int world_in[G * T] = {0}, world_tg[G * T] = {0}, shard_in[G * T] = {0}, shard_tg[G * T] = {0};
  for (int shards = 2; shards <= 4; shards *= 2) {
    int B = G / shards;
    stepscope_data_cursor world, cursors[4];
    stepscope_data_cursor_init(&world, 7, 0, 1);
    for (int r = 0; r < shards; r++)
      stepscope_data_cursor_init(&cursors[r], 7, r, shards);
    for (int step = 0; step < 6; step++) {
      stepscope_dataset_next_batch(ds, &world, world_in, world_tg, G, T);
      for (int r = 0; r < shards; r++)
        CHECK(stepscope_dataset_next_batch(ds, &cursors[r], shard_in + r * B * T,
                                           shard_tg + r * B * T, B, T) == 0,
              "shard batch");
      CHECK(memcmp(world_in, shard_in, sizeof world_in) == 0 &&
                memcmp(world_tg, shard_tg, sizeof world_tg) == 0,
            "step %d: world-1 batch != concatenation of %d shards", step, shards);
      /* shards are disjoint: no window appears twice in one global batch */
      for (int i = 0; i < G; i++)
        for (int j = i + 1; j < G; j++)
          CHECK(shard_in[i * T] != shard_in[j * T],
                "step %d: sequences %d and %d are the same window", step, i, j);
    }
  }
}

static void test_epochs(const stepscope_dataset *ds) {
  /* n = 5000, T = 16: 16 possible shifts, K = (5000 - 16) / 16 = 311 chunks */
  enum { K = (N_TOKENS - T) / T, G = 4 };
  static int seen[N_TOKENS];
  int in[G * T], tg[G * T], first_epoch_order[K], second_epoch_order[K];
  int q = 0, shift = -1;
  stepscope_data_cursor cursor;
  stepscope_data_cursor_init(&cursor, 99, 0, 1);
  /* read just over two epochs; record each window's chunk */
  for (int step = 0; q < 2 * K; step++) {
    stepscope_dataset_next_batch(ds, &cursor, in, tg, G, T);
    for (int r = 0; r < G && q < 2 * K; r++, q++) {
      int start = in[r * T];
      if (q == 0 || q == K) shift = start % T;
      CHECK(start % T == shift, "sequence %d at %d is off the epoch's grid (shift %d)", q, start,
            shift);
      int chunk = (start - shift) / T;
      CHECK(chunk >= 0 && chunk < K, "chunk %d out of range", chunk);
      if (q < K) {
        CHECK(seen[start] == 0, "epoch 1 visits window %d twice", start);
        seen[start] = 1;
        first_epoch_order[q] = chunk;
      } else {
        second_epoch_order[q - K] = chunk;
      }
    }
  }
  int distinct = 0;
  for (int i = 0; i < N_TOKENS; i++)
    distinct += seen[i];
  CHECK(distinct == K, "epoch 1 visited %d distinct windows, want %d", distinct, K);
  CHECK(memcmp(first_epoch_order, second_epoch_order, sizeof first_epoch_order) != 0,
        "two epochs in the same order");
}

static void test_limits(const stepscope_dataset *ds) {
  size_t max_t = stepscope_dataset_max_seq_len(ds);
  CHECK(max_t == N_TOKENS - 1, "max T %zu", max_t);
  int *in = malloc(sizeof(int) * (max_t + 1)), *tg = malloc(sizeof(int) * (max_t + 1));
  if (!in || !tg) exit(1);
  CHECK(stepscope_dataset_read_sequences(ds, 1, 3, 1, 0, 1, (int)max_t, in, tg) == 0 &&
            in[0] == 0 && tg[max_t - 1] == N_TOKENS - 1,
        "T = max reads the whole data");
  CHECK(stepscope_dataset_read_sequences(ds, 1, 0, 1, 0, 1, (int)max_t + 1, in, tg) ==
            STEPSCOPE_DATA_EINVAL,
        "T > max is rejected");
  CHECK(stepscope_dataset_read_sequences(ds, 1, 0, 4, 2, 3, 8, in, tg) == STEPSCOPE_DATA_EINVAL,
        "first + count > global batch is rejected");
  CHECK(stepscope_dataset_read_sequences(ds, 1, 0, 4, 0, 1, 0, in, tg) == STEPSCOPE_DATA_EINVAL,
        "T = 0 is rejected");
  stepscope_data_cursor cursor;
  CHECK(stepscope_data_cursor_init(&cursor, 1, 2, 2) == STEPSCOPE_DATA_EINVAL,
        "shard 2 of 2 is rejected");
  CHECK(stepscope_data_cursor_init(&cursor, 1, -1, 2) == STEPSCOPE_DATA_EINVAL,
        "shard -1 is rejected");
  CHECK(stepscope_data_cursor_init(&cursor, 1, 0, 0) == STEPSCOPE_DATA_EINVAL,
        "0 shards are rejected");
  stepscope_data_cursor_init(&cursor, 1, 1, 4);
  CHECK(stepscope_dataset_next_batch(ds, &cursor, in, tg, 0x40000000, 1) == STEPSCOPE_DATA_EINVAL,
        "a global batch that overflows int is rejected");
  CHECK(cursor.step == 0, "a failed call does not advance the cursor");
  free(in);
  free(tg);
}

static void test_builtin(void) {
  stepscope_dataset *ds = NULL;
  char err[256] = "";
  CHECK(stepscope_dataset_open(&ds, NULL, err, sizeof err) == 0 && ds, "open built-in corpus: %s",
        err);
  if (!ds) return;
  CHECK(stepscope_dataset_vocab_size(ds) == 256, "built-in corpus with bytes has vocab 256");
  CHECK(stepscope_builtin_corpus_length >= 4000 && stepscope_builtin_corpus_length <= 16384,
        "the corpus is a few KB (%zu bytes)", stepscope_builtin_corpus_length);
  CHECK(strlen(stepscope_builtin_corpus) == stepscope_builtin_corpus_length, "corpus length");
  for (size_t i = 0; i < stepscope_builtin_corpus_length; i++) {
    unsigned char ch = (unsigned char)stepscope_builtin_corpus[i];
    if (!((ch >= 32 && ch < 127) || ch == '\n')) {
      CHECK(0, "corpus byte %zu is %d (not printable ASCII)", i, ch);
      break;
    }
  }
  printf("%s\n", stepscope_dataset_describe(ds));
  stepscope_dataset_close(ds);

  stepscope_dataset_options bpe = {NULL, STEPSCOPE_TOKENIZER_KIND_BPE, 256};
  CHECK(stepscope_dataset_open(&ds, &bpe, err, sizeof err) == 0 && ds,
        "built-in corpus with BPE: %s", err);
  if (ds) {
    CHECK(stepscope_dataset_vocab_size(ds) == 512, "BPE 256 merges: vocab %d",
          stepscope_dataset_vocab_size(ds));
    printf("%s\n", stepscope_dataset_describe(ds));
    stepscope_dataset_close(ds);
  }
  stepscope_dataset_options bad = {NULL, STEPSCOPE_TOKENIZER_KIND_BPE, 0};
  CHECK(stepscope_dataset_open(&ds, &bad, err, sizeof err) == STEPSCOPE_DATA_EINVAL && !ds,
        "BPE with 0 merges");
}

int main(void) {
  char path[256];
  stepscope_dataset *ds = open_identity_dataset(path, sizeof path);
  CHECK(ds != NULL, "identity dataset");
  if (ds) {
    test_shapes_and_determinism(ds);
    test_data_parallel(ds);
    test_epochs(ds);
    test_limits(ds);
    stepscope_dataset_close(ds);
    unlink(path);
    *strrchr(path, '/') = 0;
    rmdir(path);
  }
  test_builtin();
  printf("%s (%d failed checks)\n", data_check_failures ? "FAIL" : "PASS", data_check_failures);
  return data_check_failures ? 1 : 0;
}
