/*
 * token_file.c — reading and writing pre-tokenized data (format in dataset.h).
 *
 * Two formats are read: stepscope's own ("SSTOKENS" header, uint16 or uint32
 * tokens, explicit vocabulary size) and llm.c's (.bin files: 256 int32 header words,
 * magic 20240520, uint16 GPT-2 tokens). All integers are little-endian and decoded
 * byte by byte, so the code is independent of the host's byte order. Every header
 * field and every token is validated: a truncated file, an unknown version, a token
 * outside the vocabulary are format errors with a message, never a crash.
 * Writing goes to "<path>.tmp" first and is renamed into place, so readers never see
 * a half-written file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_error.h"
#include "dataset.h"

#define SSTOKENS_MAGIC       "SSTOKENS"
#define SSTOKENS_HEADER_SIZE 32
#define LLMC_MAGIC           20240520u
#define LLMC_HEADER_SIZE     (256 * 4)
#define LLMC_VOCAB           50257

static uint32_t read_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t read_u64(const unsigned char *p) {
  return (uint64_t)read_u32(p) | (uint64_t)read_u32(p + 4) << 32;
}

static void write_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static void write_u64(unsigned char *p, uint64_t v) {
  write_u32(p, (uint32_t)v);
  write_u32(p + 4, (uint32_t)(v >> 32));
}

/* Reads `count` tokens of `width` bytes into a new int array, checking each < vocab. */
static int read_token_payload(FILE *f, const char *path, size_t count, int width, int vocab,
                              int **tokens_out, char *err, size_t err_size) {
  /* check the size before allocating, so a corrupt count cannot ask for terabytes */
  long here = ftell(f);
  if (here < 0 || fseek(f, 0, SEEK_END) != 0) {
    data_set_error(err, err_size, "%s: cannot seek: %s", path, strerror(errno));
    return STEPSCOPE_DATA_EIO;
  }
  long end = ftell(f);
  if (end < 0 || fseek(f, here, SEEK_SET) != 0) {
    data_set_error(err, err_size, "%s: cannot seek: %s", path, strerror(errno));
    return STEPSCOPE_DATA_EIO;
  }
  uint64_t available = (uint64_t)(end - here) / (uint64_t)width;
  if ((uint64_t)count > available) {
    data_set_error(err, err_size, "%s: truncated: header promises %zu tokens, file holds %llu",
                   path, count, (unsigned long long)available);
    return STEPSCOPE_DATA_EFORMAT;
  }
  int *tokens = malloc(sizeof *tokens * (count ? count : 1));
  if (!tokens) {
    data_set_error(err, err_size, "%s: out of memory for %zu tokens", path, count);
    return STEPSCOPE_DATA_ENOMEM;
  }
  unsigned char buf[1 << 14];
  size_t per_chunk = sizeof buf / (size_t)width, done = 0;
  while (done < count) {
    size_t want = count - done < per_chunk ? count - done : per_chunk;
    if (fread(buf, (size_t)width, want, f) != want) {
      data_set_error(err, err_size,
                     "%s: truncated: header promises %zu tokens, file ends after %zu", path, count,
                     done);
      free(tokens);
      return STEPSCOPE_DATA_EFORMAT;
    }
    for (size_t i = 0; i < want; i++) {
      uint32_t v =
          width == 2 ? (uint32_t)buf[2 * i] | (uint32_t)buf[2 * i + 1] << 8 : read_u32(buf + 4 * i);
      if (v >= (uint32_t)vocab) {
        data_set_error(err, err_size, "%s: token %zu is %u, outside the vocabulary of %d", path,
                       done + i, v, vocab);
        free(tokens);
        return STEPSCOPE_DATA_EFORMAT;
      }
      tokens[done + i] = (int)v;
    }
    done += want;
  }
  *tokens_out = tokens;
  return STEPSCOPE_DATA_OK;
}

int stepscope_token_file_read(const char *path, int **tokens_out, size_t *count_out, int *vocab_out,
                              int *is_token_file, char *err, size_t err_size) {
  *tokens_out = NULL;
  *count_out = 0;
  *vocab_out = 0;
  if (is_token_file) *is_token_file = 0;
  FILE *f = fopen(path, "rb");
  if (!f) {
    data_set_error(err, err_size, "%s: cannot open: %s", path, strerror(errno));
    return STEPSCOPE_DATA_EIO;
  }
  unsigned char header[LLMC_HEADER_SIZE];
  size_t got = fread(header, 1, SSTOKENS_HEADER_SIZE, f);
  int status;
  if (got >= 8 && memcmp(header, SSTOKENS_MAGIC, 8) == 0) {
    if (is_token_file) *is_token_file = 1;
    if (got < SSTOKENS_HEADER_SIZE) {
      data_set_error(err, err_size, "%s: truncated token file header (%zu of %d bytes)", path, got,
                     SSTOKENS_HEADER_SIZE);
      status = STEPSCOPE_DATA_EFORMAT;
      goto out;
    }
    uint32_t version = read_u32(header + 8), vocab = read_u32(header + 12),
             width = read_u32(header + 16);
    uint64_t count = read_u64(header + 24);
    if (version != 1) {
      data_set_error(err, err_size, "%s: token file version %u is not supported (expected 1)", path,
                     version);
      status = STEPSCOPE_DATA_EFORMAT;
    } else if (width != 2 && width != 4) {
      data_set_error(err, err_size, "%s: %u bytes per token is not supported (2 or 4)", path,
                     width);
      status = STEPSCOPE_DATA_EFORMAT;
    } else if (vocab < 1 || vocab > (uint32_t)INT32_MAX || (width == 2 && vocab > 65536)) {
      data_set_error(err, err_size, "%s: vocabulary size %u is invalid for %u-byte tokens", path,
                     vocab, width);
      status = STEPSCOPE_DATA_EFORMAT;
    } else if (count > SIZE_MAX / sizeof(int) || count > ((uint64_t)1 << 40)) {
      data_set_error(err, err_size, "%s: token count %llu is implausible", path,
                     (unsigned long long)count);
      status = STEPSCOPE_DATA_EFORMAT;
    } else {
      status = read_token_payload(f, path, (size_t)count, (int)width, (int)vocab, tokens_out, err,
                                  err_size);
      if (status == STEPSCOPE_DATA_OK) {
        *count_out = (size_t)count;
        *vocab_out = (int)vocab;
      }
    }
    goto out;
  }
  if (got >= 4 && read_u32(header) == LLMC_MAGIC) {
    if (is_token_file) *is_token_file = 1;
    got += fread(header + got, 1, LLMC_HEADER_SIZE - got, f);
    if (got < LLMC_HEADER_SIZE) {
      data_set_error(err, err_size, "%s: truncated llm.c token file header (%zu of %d bytes)", path,
                     got, LLMC_HEADER_SIZE);
      status = STEPSCOPE_DATA_EFORMAT;
      goto out;
    }
    uint32_t version = read_u32(header + 4), count = read_u32(header + 8);
    if (version != 1) {
      data_set_error(err, err_size, "%s: llm.c token file version %u is not supported (expected 1)",
                     path, version);
      status = STEPSCOPE_DATA_EFORMAT;
      goto out;
    }
    status = read_token_payload(f, path, count, 2, LLMC_VOCAB, tokens_out, err, err_size);
    if (status == STEPSCOPE_DATA_OK) {
      *count_out = count;
      *vocab_out = LLMC_VOCAB;
    }
    goto out;
  }
  data_set_error(err, err_size, "%s: not a token file (no SSTOKENS or llm.c magic)", path);
  status = STEPSCOPE_DATA_EFORMAT;
out:
  fclose(f);
  return status;
}

int stepscope_token_file_write(const char *path, const int *tokens, size_t count, int vocab_size,
                               char *err, size_t err_size) {
  if (!path || vocab_size < 1 || (!tokens && count)) {
    data_set_error(err, err_size, "token file write: invalid arguments");
    return STEPSCOPE_DATA_EINVAL;
  }
  for (size_t i = 0; i < count; i++) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size) {
      data_set_error(err, err_size, "%s: token %zu is %d, outside the vocabulary of %d", path, i,
                     tokens[i], vocab_size);
      return STEPSCOPE_DATA_EINVAL;
    }
  }
  int width = vocab_size <= 65536 ? 2 : 4;
  size_t tmp_len = strlen(path) + 5;
  char *tmp = malloc(tmp_len);
  if (!tmp) {
    data_set_error(err, err_size, "%s: out of memory", path);
    return STEPSCOPE_DATA_ENOMEM;
  }
  snprintf(tmp, tmp_len, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    data_set_error(err, err_size, "%s: cannot create: %s", tmp, strerror(errno));
    free(tmp);
    return STEPSCOPE_DATA_EIO;
  }
  unsigned char header[SSTOKENS_HEADER_SIZE] = {0};
  memcpy(header, SSTOKENS_MAGIC, 8);
  write_u32(header + 8, 1);
  write_u32(header + 12, (uint32_t)vocab_size);
  write_u32(header + 16, (uint32_t)width);
  write_u64(header + 24, count);
  int ok = fwrite(header, 1, sizeof header, f) == sizeof header;
  unsigned char buf[1 << 14];
  size_t per_chunk = sizeof buf / (size_t)width;
  for (size_t done = 0; ok && done < count;) {
    size_t n = count - done < per_chunk ? count - done : per_chunk;
    for (size_t i = 0; i < n; i++) {
      uint32_t v = (uint32_t)tokens[done + i];
      if (width == 2) {
        buf[2 * i] = (unsigned char)v;
        buf[2 * i + 1] = (unsigned char)(v >> 8);
      } else {
        write_u32(buf + 4 * i, v);
      }
    }
    ok = fwrite(buf, (size_t)width, n, f) == n;
    done += n;
  }
  if (fclose(f) != 0) ok = 0;
  if (!ok || rename(tmp, path) != 0) {
    data_set_error(err, err_size, "%s: write failed: %s", path, strerror(errno));
    remove(tmp);
    free(tmp);
    return STEPSCOPE_DATA_EIO;
  }
  free(tmp);
  return STEPSCOPE_DATA_OK;
}
