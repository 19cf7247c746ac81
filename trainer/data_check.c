/*
 * data_check.c — checks --data and --vocab before anything starts
 * (data_check.h), so that a wrong file is a configuration error (exit 2)
 * instead of a silent mis-training or a failure in every rank.
 *
 * A --data file is a token file (SSTOKENS header or llm.c's .bin magic) or
 * text. Text is tokenized byte by byte (or with BPE), which accepts any
 * bytes, so a binary file handed over by mistake would train without a
 * word: a file whose first 64 KiB hold a NUL byte, or more than 10 %
 * control characters other than tab, newline, carriage return, form feed
 * and escape, is refused as not text.
 *
 * --vocab must cover the data's vocabulary: a token file's header gives it;
 * text (and the built-in corpus) has at least the 256 byte tokens (exactly
 * 256 without BPE; with BPE the merges it learns add more, checked by the
 * ranks once they are learned).
 */
#include "data_check.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SAMPLE_BYTES (64 * 1024)
#define LLMC_MAGIC   20240520u
#define LLMC_VOCAB   50257

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int data_check(const train_config *c, char *err, size_t n) {
  long data_vocab = 256; /* text and the built-in corpus: the byte tokens, at least */
  const char *what = c->bpe_merges > 0 ? "at least the 256 byte tokens of its text"
                                       : "the 256 byte tokens of its text";
  if (c->data[0]) {
    FILE *f = fopen(c->data, "rb");
    if (!f) {
      snprintf(err, n, "--data %s: cannot read the file", c->data);
      return -1;
    }
    static unsigned char buf[SAMPLE_BYTES];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (got >= 16 && memcmp(buf, "SSTOKENS", 8) == 0) {
      data_vocab = le32(buf + 12);
      what = "the vocabulary in its token-file header";
    } else if (got >= 4 && le32(buf) == LLMC_MAGIC) {
      data_vocab = LLMC_VOCAB;
      what = "llm.c's GPT-2 vocabulary";
    } else {
      size_t control = 0;
      for (size_t i = 0; i < got; i++) {
        unsigned char b = buf[i];
        if (b == 0) {
          snprintf(err, n,
                   "--data %s: not a text file (a NUL byte at offset %zu) and not a "
                   "token file (SSTOKENS or llm.c .bin header); give UTF-8 text or a "
                   "token file",
                   c->data, i);
          return -1;
        }
        if (b < 0x20 && b != '\t' && b != '\n' && b != '\r' && b != '\f' && b != 0x1b) control++;
      }
      if (got && control * 10 > got) {
        snprintf(err, n,
                 "--data %s: not a text file (%zu of its first %zu bytes are control "
                 "characters) and not a token file; give UTF-8 text or a token file",
                 c->data, control, got);
        return -1;
      }
    }
  }
  if (c->vocab_given && c->vocab < data_vocab) {
    snprintf(err, n, "--vocab %d is smaller than the data's vocabulary (%s: %ld)", c->vocab, what,
             data_vocab);
    return -1;
  }
  return 0;
}
