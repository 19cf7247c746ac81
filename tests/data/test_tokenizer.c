/*
 * test_tokenizer.c — tokenizer tests (data.tokenizer): pre-tokenization of a known
 * sentence, byte tokenizer round trip over all 256 byte values, BPE training on the
 * built-in corpus (vocabulary size, compression, determinism, every token decodes to
 * the bytes of its merge), lossless round trip of seen and unseen text (binary bytes,
 * UTF-8, runs longer than a piece), early stop on text with no repeated pair, and
 * argument errors.
 */
#include <stdlib.h>
#include <string.h>

#include "data_check.h"
#include "dataset.h"
#include "tokenizer.h"

int data_check_failures = 0;

static void check_round_trip(const stepscope_tokenizer *tok, const unsigned char *text, size_t len,
                             const char *what) {
  int *tokens = NULL;
  size_t count = 0;
  int status = stepscope_tokenizer_encode(tok, text, len, &tokens, &count);
  CHECK(status == STEPSCOPE_TOKENIZER_OK, "%s: encode failed (%d)", what, status);
  if (status != STEPSCOPE_TOKENIZER_OK) return;
  CHECK(count <= len, "%s: %zu tokens for %zu bytes", what, count, len);
  for (size_t i = 0; i < count; i++)
    CHECK(tokens[i] >= 0 && tokens[i] < stepscope_tokenizer_vocab_size(tok), "%s: token %zu = %d",
          what, i, tokens[i]);
  unsigned char *back = NULL;
  size_t back_len = 0;
  status = stepscope_tokenizer_decode(tok, tokens, count, &back, &back_len);
  CHECK(status == STEPSCOPE_TOKENIZER_OK, "%s: decode failed (%d)", what, status);
  if (status == STEPSCOPE_TOKENIZER_OK) {
    CHECK(back_len == len && memcmp(back, text, len) == 0,
          "%s: round trip changed the text (%zu -> %zu bytes)", what, len, back_len);
    free(back);
  }
  free(tokens);
}

static void test_pieces(void) {
  const char *text = "Hello world  foo,bar\n\nbaz...  ";
  const char *want[] = {"Hello", " world", " ", " foo", ",", "bar", "\n\n", "baz", "...", "  "};
  size_t pos = 0, len = strlen(text), k = 0;
  while (pos < len && k < sizeof want / sizeof want[0]) {
    size_t n = stepscope_tokenizer_piece_length((const unsigned char *)text + pos, len - pos);
    CHECK(n == strlen(want[k]) && memcmp(text + pos, want[k], n) == 0,
          "piece %zu is '%.*s', want '%s'", k, (int)n, text + pos, want[k]);
    pos += n;
    k++;
  }
  CHECK(pos == len && k == sizeof want / sizeof want[0], "pieces: ended at byte %zu piece %zu", pos,
        k);
  unsigned char long_word[100];
  memset(long_word, 'a', sizeof long_word);
  CHECK(stepscope_tokenizer_piece_length(long_word, sizeof long_word) == 64,
        "pieces are capped at 64 bytes");
  CHECK(stepscope_tokenizer_piece_length(long_word, 0) == 0, "empty text has no piece");
}

static void test_byte(void) {
  stepscope_tokenizer *tok = NULL;
  CHECK(stepscope_tokenizer_create_byte(&tok) == STEPSCOPE_TOKENIZER_OK && tok,
        "create byte tokenizer");
  if (!tok) return;
  CHECK(stepscope_tokenizer_vocab_size(tok) == 256, "byte vocab is %d",
        stepscope_tokenizer_vocab_size(tok));
  unsigned char all[512];
  for (int i = 0; i < 512; i++)
    all[i] = (unsigned char)(i * 7 + 3);
  int *tokens;
  size_t count;
  CHECK(stepscope_tokenizer_encode(tok, all, sizeof all, &tokens, &count) == 0 &&
            count == sizeof all,
        "byte encoding is one token per byte");
  for (size_t i = 0; i < count; i++)
    CHECK(tokens[i] == all[i], "byte token %zu is %d, want %d", i, tokens[i], all[i]);
  free(tokens);
  check_round_trip(tok, all, sizeof all, "byte tokenizer, all byte values");
  int bad = 256;
  unsigned char *text;
  size_t len;
  CHECK(stepscope_tokenizer_decode(tok, &bad, 1, &text, &len) == STEPSCOPE_TOKENIZER_EINVAL,
        "decoding token 256 with the byte tokenizer is rejected");
  stepscope_tokenizer_free(tok);
}

static void test_bpe(void) {
  const unsigned char *corpus = (const unsigned char *)stepscope_builtin_corpus;
  size_t corpus_len = stepscope_builtin_corpus_length;
  stepscope_tokenizer *tok = NULL, *again = NULL;
  CHECK(stepscope_tokenizer_train_bpe(&tok, corpus, corpus_len, 300) == STEPSCOPE_TOKENIZER_OK &&
            tok,
        "train 300 merges");
  CHECK(stepscope_tokenizer_train_bpe(&again, corpus, corpus_len, 300) == STEPSCOPE_TOKENIZER_OK &&
            again,
        "train again");
  if (!tok || !again) return;
  CHECK(stepscope_tokenizer_vocab_size(tok) == 256 + 300,
        "vocab %d, want 556 (the corpus has enough pairs)", stepscope_tokenizer_vocab_size(tok));

  /* each learned token is the concatenation of two earlier tokens and decodes to
   * 2+ bytes; training twice gives the same tokens */
  for (int t = 256; t < stepscope_tokenizer_vocab_size(tok); t++) {
    const unsigned char *a, *b;
    size_t la, lb;
    stepscope_tokenizer_token_bytes(tok, t, &a, &la);
    stepscope_tokenizer_token_bytes(again, t, &b, &lb);
    CHECK(la >= 2, "token %d has %zu bytes", t, la);
    CHECK(la == lb && memcmp(a, b, la) == 0, "token %d differs between two trainings", t);
  }

  int *tokens;
  size_t count;
  CHECK(stepscope_tokenizer_encode(tok, corpus, corpus_len, &tokens, &count) == 0, "encode corpus");
  printf("BPE 300 merges: corpus %zu bytes -> %zu tokens (%.2f bytes/token)\n", corpus_len, count,
         (double)corpus_len / (double)count);
  CHECK(count * 2 < corpus_len, "BPE should at least halve the corpus: %zu tokens for %zu bytes",
        count, corpus_len);
  free(tokens);

  /* the most frequent word of the corpus becomes one token */
  const unsigned char the[] = " the";
  CHECK(stepscope_tokenizer_encode(tok, the, 4, &tokens, &count) == 0 && count == 1,
        "' the' is %zu tokens", count);
  free(tokens);

  check_round_trip(tok, corpus, corpus_len, "BPE, built-in corpus");
  const char *unseen =
      "Zebras quietly jump over 12345 lazy dogs -- caf\xc3\xa9, na\xc3\xafve!\t\r\n   end  ";
  check_round_trip(tok, (const unsigned char *)unseen, strlen(unseen), "BPE, unseen text");
  unsigned char binary[1000];
  for (int i = 0; i < 1000; i++)
    binary[i] = (unsigned char)((i * 131) ^ (i >> 3));
  check_round_trip(tok, binary, sizeof binary, "BPE, binary bytes");
  unsigned char runs[300];
  memset(runs, ' ', 150);
  memset(runs + 150, 'e', 150);
  check_round_trip(tok, runs, sizeof runs, "BPE, runs longer than a piece");
  check_round_trip(tok, runs, 0, "BPE, empty text");

  stepscope_tokenizer_free(tok);
  stepscope_tokenizer_free(again);
}

static void test_bpe_edges(void) {
  stepscope_tokenizer *tok = NULL;
  const unsigned char text[] = "abcdefg";
  CHECK(stepscope_tokenizer_train_bpe(&tok, text, 7, 10) == STEPSCOPE_TOKENIZER_OK && tok,
        "train on 7 bytes");
  if (tok) {
    CHECK(stepscope_tokenizer_merge_count(tok) == 0, "no pair occurs twice, yet %d merges",
          stepscope_tokenizer_merge_count(tok));
    stepscope_tokenizer_free(tok);
  }
  /* "aaaa aaaa": (a,a) is learned first, then (aa,aa) */
  const unsigned char aaaa[] = "aaaa aaaa aaaa";
  tok = NULL;
  CHECK(stepscope_tokenizer_train_bpe(&tok, aaaa, sizeof aaaa - 1, 2) == 0 && tok, "train on aaaa");
  if (tok) {
    const unsigned char *b;
    size_t l;
    stepscope_tokenizer_token_bytes(tok, 256, &b, &l);
    CHECK(l == 2 && memcmp(b, "aa", 2) == 0, "first merge is 'aa', got '%.*s'", (int)l, b);
    stepscope_tokenizer_token_bytes(tok, 257, &b, &l);
    CHECK(l == 4 && memcmp(b, "aaaa", 4) == 0, "second merge is 'aaaa', got '%.*s'", (int)l, b);
    stepscope_tokenizer_free(tok);
  }
  tok = NULL;
  CHECK(stepscope_tokenizer_train_bpe(&tok, text, 7, -1) == STEPSCOPE_TOKENIZER_EINVAL && !tok,
        "negative merge count is rejected");
  CHECK(stepscope_tokenizer_train_bpe(&tok, text, 7, STEPSCOPE_TOKENIZER_MAX_MERGES + 1) ==
            STEPSCOPE_TOKENIZER_EINVAL,
        "too many merges are rejected");
}

int main(void) {
  test_pieces();
  test_byte();
  test_bpe();
  test_bpe_edges();
  printf("%s (%d failed checks)\n", data_check_failures ? "FAIL" : "PASS", data_check_failures);
  return data_check_failures ? 1 : 0;
}
