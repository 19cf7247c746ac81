/*
 * test_token_file.c — token files (data.token_file): write/read round trips with
 * uint16 and uint32 storage, a dataset opened from a token file, a hand-built llm.c
 * file, and rejection (with a message, no crash) of truncated headers and payloads,
 * unknown versions and widths, and out-of-vocabulary tokens; a missing file is an
 * I/O error and a plain text file opens as text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_check.h"
#include "dataset.h"

int data_check_failures = 0;

static char dir[] = "/tmp/stepscope-data-test-XXXXXX";

static void path_in_dir(char *out, size_t size, const char *name) {
  snprintf(out, size, "%s/%s", dir, name);
}

static void write_bytes(const char *path, const unsigned char *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, len, f) != len) {
    printf("cannot write %s\n", path);
    exit(1);
  }
  fclose(f);
}

static void test_round_trip(int vocab, size_t count) {
  char path[256], err[256] = "";
  path_in_dir(path, sizeof path, "round.tok");
  int *tokens = malloc(sizeof *tokens * count);
  if (!tokens) exit(1);
  for (size_t i = 0; i < count; i++)
    tokens[i] = (int)((i * 2654435761u) % (unsigned)vocab);
  CHECK(stepscope_token_file_write(path, tokens, count, vocab, err, sizeof err) ==
            STEPSCOPE_DATA_OK,
        "write: %s", err);
  int *back = NULL, back_vocab = 0, is_tok = 0;
  size_t back_count = 0;
  int status =
      stepscope_token_file_read(path, &back, &back_count, &back_vocab, &is_tok, err, sizeof err);
  CHECK(status == STEPSCOPE_DATA_OK && is_tok, "read: %s", err);
  CHECK(back_count == count && back_vocab == vocab, "read %zu tokens vocab %d, wrote %zu vocab %d",
        back_count, back_vocab, count, vocab);
  if (back && back_count == count)
    CHECK(memcmp(back, tokens, count * sizeof *tokens) == 0,
          "tokens differ after a round trip (vocab %d)", vocab);
  free(back);

  /* the dataset reads the same file */
  stepscope_dataset *ds = NULL;
  stepscope_dataset_options opt = {path, STEPSCOPE_TOKENIZER_KIND_BYTE, 0};
  status = stepscope_dataset_open(&ds, &opt, err, sizeof err);
  CHECK(status == STEPSCOPE_DATA_OK, "dataset open: %s", err);
  if (ds) {
    CHECK(stepscope_dataset_vocab_size(ds) == vocab && stepscope_dataset_token_count(ds) == count,
          "dataset vocab %d count %zu", stepscope_dataset_vocab_size(ds),
          stepscope_dataset_token_count(ds));
    CHECK(stepscope_dataset_tokenizer(ds) == NULL, "token files have no tokenizer");
    CHECK(memcmp(stepscope_dataset_tokens(ds), tokens, count * sizeof *tokens) == 0,
          "dataset tokens differ");
    printf("%s\n", stepscope_dataset_describe(ds));
    stepscope_dataset_close(ds);
  }
  free(tokens);
}

/* Writes a 32-byte SSTOKENS header with the given fields and then payload bytes. */
static void write_header_file(const char *path, uint32_t version, uint32_t vocab, uint32_t width,
                              uint64_t count, const unsigned char *payload, size_t payload_len,
                              size_t header_len) {
  unsigned char buf[4096] = {0};
  memcpy(buf, "SSTOKENS", 8);
  for (int i = 0; i < 4; i++) {
    buf[8 + i] = (unsigned char)(version >> (8 * i));
    buf[12 + i] = (unsigned char)(vocab >> (8 * i));
    buf[16 + i] = (unsigned char)(width >> (8 * i));
  }
  for (int i = 0; i < 8; i++)
    buf[24 + i] = (unsigned char)(count >> (8 * i));
  memcpy(buf + 32, payload, payload_len);
  write_bytes(path, buf, header_len < 32 ? header_len : 32 + payload_len);
}

static void expect_format_error(const char *path, const char *what) {
  char err[256] = "";
  int *tokens = NULL, vocab = 0, is_tok = 0;
  size_t count = 0;
  int status = stepscope_token_file_read(path, &tokens, &count, &vocab, &is_tok, err, sizeof err);
  CHECK(status == STEPSCOPE_DATA_EFORMAT && tokens == NULL, "%s: status %d", what, status);
  CHECK(is_tok, "%s: the magic matched, so it is a (bad) token file", what);
  CHECK(err[0] != 0, "%s: no error message", what);
  printf("rejected %s: %s\n", what, err);
  /* and the dataset refuses it too instead of reading it as text */
  stepscope_dataset *ds = NULL;
  stepscope_dataset_options opt = {path, STEPSCOPE_TOKENIZER_KIND_BYTE, 0};
  CHECK(stepscope_dataset_open(&ds, &opt, err, sizeof err) == STEPSCOPE_DATA_EFORMAT && !ds,
        "%s: dataset open must fail", what);
}

static void test_corrupt(void) {
  char path[256];
  path_in_dir(path, sizeof path, "bad.tok");
  unsigned char payload[8] = {1, 0, 2, 0, 3, 0, 4, 0};
  write_header_file(path, 1, 10, 2, 4, payload, 8, 20);
  expect_format_error(path, "truncated header");
  write_header_file(path, 1, 10, 2, 5, payload, 8, 64);
  expect_format_error(path, "payload shorter than the count");
  write_header_file(path, 1, 10, 2, (uint64_t)1 << 39, payload, 8, 64);
  expect_format_error(path, "absurd token count");
  write_header_file(path, 2, 10, 2, 4, payload, 8, 64);
  expect_format_error(path, "unknown version");
  write_header_file(path, 1, 10, 3, 2, payload, 6, 64);
  expect_format_error(path, "3-byte tokens");
  write_header_file(path, 1, 4, 2, 4, payload, 8, 64);
  expect_format_error(path, "token 4 with vocabulary 4");
  write_header_file(path, 1, 70000, 2, 4, payload, 8, 64);
  expect_format_error(path, "vocabulary too large for uint16");
  write_header_file(path, 1, 10, 2, 4, payload, 8, 64);
  int *tokens = NULL, vocab = 0;
  size_t count = 0;
  CHECK(stepscope_token_file_read(path, &tokens, &count, &vocab, NULL, NULL, 0) ==
                STEPSCOPE_DATA_OK &&
            count == 4 && tokens && tokens[3] == 4,
        "the valid variant of the same file reads");
  free(tokens);

  char err[256];
  int bad_tokens[2] = {1, 10};
  CHECK(stepscope_token_file_write(path, bad_tokens, 2, 10, err, sizeof err) ==
            STEPSCOPE_DATA_EINVAL,
        "writing a token outside the vocabulary is refused");
}

static void test_llmc(void) {
  char path[256], err[256] = "";
  path_in_dir(path, sizeof path, "llmc.bin");
  unsigned char buf[1024 + 6] = {0};
  uint32_t header[3] = {20240520u, 1, 3};
  for (int h = 0; h < 3; h++)
    for (int i = 0; i < 4; i++)
      buf[4 * h + i] = (unsigned char)(header[h] >> (8 * i));
  uint16_t toks[3] = {50256, 464, 0};
  for (int t = 0; t < 3; t++) {
    buf[1024 + 2 * t] = (unsigned char)toks[t];
    buf[1024 + 2 * t + 1] = (unsigned char)(toks[t] >> 8);
  }
  write_bytes(path, buf, sizeof buf);
  int *tokens = NULL, vocab = 0, is_tok = 0;
  size_t count = 0;
  int status = stepscope_token_file_read(path, &tokens, &count, &vocab, &is_tok, err, sizeof err);
  CHECK(status == STEPSCOPE_DATA_OK && is_tok && count == 3 && vocab == 50257, "llm.c file: %s",
        err);
  if (tokens)
    CHECK(tokens[0] == 50256 && tokens[1] == 464 && tokens[2] == 0, "llm.c tokens %d %d %d",
          tokens[0], tokens[1], tokens[2]);
  free(tokens);
  write_bytes(path, buf, 100);
  expect_format_error(path, "truncated llm.c header");
}

static void test_missing_and_text(void) {
  char path[256], err[256] = "";
  path_in_dir(path, sizeof path, "does-not-exist");
  stepscope_dataset *ds = NULL;
  stepscope_dataset_options opt = {path, STEPSCOPE_TOKENIZER_KIND_BYTE, 0};
  CHECK(stepscope_dataset_open(&ds, &opt, err, sizeof err) == STEPSCOPE_DATA_EIO && !ds,
        "missing file is EIO");
  CHECK(strstr(err, "does-not-exist") != NULL, "message names the file: %s", err);

  path_in_dir(path, sizeof path, "text.txt");
  const char *text = "SSTOKEN is not quite the magic; this is text.\n";
  write_bytes(path, (const unsigned char *)text, strlen(text));
  CHECK(stepscope_dataset_open(&ds, &opt, err, sizeof err) == STEPSCOPE_DATA_OK && ds,
        "text file opens: %s", err);
  if (ds) {
    CHECK(stepscope_dataset_token_count(ds) == strlen(text) &&
              stepscope_dataset_vocab_size(ds) == 256,
          "text file is byte-tokenized");
    CHECK(stepscope_dataset_tokens(ds)[0] == 'S', "first token is the first byte");
    stepscope_dataset_close(ds);
  }
  path_in_dir(path, sizeof path, "one.txt");
  write_bytes(path, (const unsigned char *)"x", 1);
  CHECK(stepscope_dataset_open(&ds, &opt, err, sizeof err) == STEPSCOPE_DATA_EFORMAT && !ds,
        "a one-token text cannot make a sequence");
}

int main(void) {
  if (!mkdtemp(dir)) {
    printf("cannot create a temporary directory\n");
    return 1;
  }
  test_round_trip(256, 1000);
  test_round_trip(65536, 5000);
  test_round_trip(70000, 3000);
  test_corrupt();
  test_llmc();
  test_missing_and_text();
  const char *names[] = {"round.tok", "bad.tok", "llmc.bin", "text.txt", "one.txt"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char path[256];
    path_in_dir(path, sizeof path, names[i]);
    unlink(path);
  }
  rmdir(dir);
  printf("%s (%d failed checks)\n", data_check_failures ? "FAIL" : "PASS", data_check_failures);
  return data_check_failures ? 1 : 0;
}
