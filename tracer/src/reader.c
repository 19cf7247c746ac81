/*
 * reader.c — streams records out of a trace file.
 *
 * The file is a sequence of independent zstd frames. The reader feeds the
 * file through one ZSTD_DCtx from an input buffer of READER_INPUT_CAP bytes
 * and collects the decompressed bytes of the current frame; only when zstd
 * reports the frame complete (its checksum verified) are its records
 * decoded, one per stepscope_reader_next call. So memory is bounded by one
 * frame (MAX_FRAME_CONTENT) plus the interned strings, whatever the file
 * size.
 *
 * Speed. Before each frame the input buffer is topped up (unread bytes moved
 * to its start) when less than half of it is left, and the frame buffer is
 * sized from the content size in the frame header. So a frame normally lies
 * whole in the input with room for all of its content, and zstd decodes it
 * in one pass straight into the frame buffer, with no window buffer and no
 * copy; larger frames still stream. The context and both buffers come from
 * a per-thread cache (reader_cache.h), so opening many small files does not
 * create a zstd context or allocate buffers each time.
 *
 * Validation. Every length, varint, string id and the header are checked by
 * the codec; a frame larger than MAX_FRAME_CONTENT, a zstd error, a bad
 * record or a missing header is an error naming the file, the byte offset of
 * the frame in the file and what was expected. End of file inside a frame is
 * a truncation: that frame is dropped with a warning and reading ends
 * normally. After an error the reader stays in the error state; records
 * returned before stay valid.
 *
 * Damage. Frames are independent (the time and correlation deltas restart
 * in each), so once the header is read a damaged frame costs only its own
 * records: a frame that zstd rejects (bad checksum, bad block, too large)
 * is skipped, the reader searches the following bytes for the next zstd
 * frame magic and goes on from there; a frame whose content holds a bad
 * record keeps the records before it and drops the rest. A frame that runs
 * to the end of the file is a truncated last frame only when no frame magic
 * follows its start: otherwise it is a false start (a crafted header, or
 * damage reading as one) whose blocks swallowed the frames after it, and
 * reading resumes at the next magic; so it does after a skippable frame,
 * which the writer never writes and whose size could jump over frames
 * (trace-format.md §1). Each damaged region becomes one
 * warning (offsets, bytes), and a last warning sums up what was lost.
 * Strings are defined once per file (docs/trace-format.md §3), so strings
 * defined in a skipped frame are gone: after damage, ids
 * not defined are accepted and read as "?<id>" (stepscope_reader_string),
 * and the next STRING record may jump over the lost ids.
 * Bombs. A frame is bounded (MAX_FRAME_CONTENT), and so is the whole file:
 * the bytes all frames inflate to (damaged ones included) are counted, and
 * past stepscope_inflate_limit of the file's size (stepscope.h: a ratio, a
 * floor and a ceiling, from the options) reading stops with
 * STEPSCOPE_E_LIMIT, so a small file of repeated 64 MiB frames of zeros is
 * refused in a fraction of a second instead of keeping the reader busy.
 * Closed or not. The END record a writer puts last when it closes the file
 * is consumed here (like BLOCK records) and kept for
 * stepscope_reader_close_state: once the whole file is read, a file of
 * format 1.1 or later without one was not closed (crash or kill).
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "error.h"
#include "reader_cache.h"
#include "record_codec.h"
#include "sc_grow.h"
#include "stepscope.h"
#include "string_arena.h"

#define MAX_FRAME_CONTENT   (64u << 20)
#define MAX_STRINGS         (1u << 28)
#define WINDOW_LOG_MAX      26 /* the writer's frames need far less; bounds decoder memory */
#define MAX_WARNINGS        64
#define MAX_LOST_STRING_IDS (1u << 22) /* string ids all damage together may skip */
#define PLACEHOLDERS        8

struct stepscope_reader {
  char *path;
  int fd;
  uint64_t file_size;
  ZSTD_DCtx *dctx; /* from res, like in and frame */
  reader_resources res;

  uint8_t *in; /* compressed input (READER_INPUT_CAP bytes) */
  size_t in_len, in_pos;
  uint64_t in_file_offset; /* file offset of in[0] */
  int eof;

  uint8_t *frame; /* decompressed content of the current frame */
  size_t frame_len, frame_cap, frame_pos;
  uint64_t frame_offset; /* file offset where the current frame starts */
  int frame_ready;       /* frame complete: records may be decoded from it */
  codec_state state;

  stepscope_header header;
  char **strings; /* index = id; strings[0] unused */
  uint32_t nstrings;
  size_t strings_cap;
  string_arena arena; /* strings and metadata values */

  char *warnings[MAX_WARNINGS + 1]; /* the last slot: the summary of damage */
  size_t nwarnings;
  uint64_t unknown;
  int at_end;             /* next_record returned 0: the whole file was read */
  stepscope_end end;      /* the END record, if one was read (reason 0: none) */
  stepscope_error sticky; /* code != 0 once an error happened */
  int done;

  /* damage (see the header comment) */
  int damaged;                             /* a frame was skipped: undefined string ids allowed */
  int header_frame_checksum;               /* the header frame's checksum flag (1, 0, -1 unknown) */
  int in_damage;                           /* searching or skipping: damage_start..here is lost */
  uint64_t damage_start;                   /* file offset where the current damaged region began */
  char damage_why[160];                    /* what was wrong at its start */
  uint64_t damaged_regions, damaged_bytes; /* bytes: of the file (estimated for frame tails) */
  uint32_t lost_string_ids;           /* ids skipped by STRING records after damage (bounded) */
  char placeholder[PLACEHOLDERS][16]; /* "?<id>" answers of stepscope_reader_string */
  unsigned next_placeholder;

  stepscope_inflate_limits inflate; /* the decompression limits (see the header comment) */
  uint64_t inflated;                /* bytes all frames inflated to so far */
};

static void add_warning(stepscope_reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_warning(stepscope_reader *r, const char *fmt, ...) {
  if (r->nwarnings >= MAX_WARNINGS && !(r->done && r->nwarnings == MAX_WARNINGS)) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char *w = strdup(buf);
  if (w) r->warnings[r->nwarnings++] = w;
}

/* Stores a NUL-terminated copy in the reader's arena (strings, metadata). */
static const char *arena_store(void *ctx, const char *data, size_t len) {
  return string_arena_store(&((stepscope_reader *)ctx)->arena, data, len);
}

/* Moves the unread input to the start of the buffer and reads until the
 * buffer is full or the file ends. 0 ok, 1 nothing more to read (end of
 * file), <0 error. */
static int fill_input(stepscope_reader *r, stepscope_error *err) {
  if (r->in_pos > 0) {
    size_t left = r->in_len - r->in_pos;
    if (left) memmove(r->in, r->in + r->in_pos, left);
    r->in_file_offset += r->in_pos;
    r->in_len = left;
    r->in_pos = 0;
  }
  size_t before = r->in_len;
  while (!r->eof && r->in_len < READER_INPUT_CAP) {
    ssize_t k = read(r->fd, r->in + r->in_len, READER_INPUT_CAP - r->in_len);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      uint64_t at = r->in_file_offset + r->in_len;
      error_set(err, STEPSCOPE_E_IO, at, "%s: offset %llu: read failed: %s", r->path,
                (unsigned long long)at, strerror(errno));
      return STEPSCOPE_E_IO;
    }
    if (k == 0) r->eof = 1;
    r->in_len += (size_t)k;
  }
  return r->in_len == before ? 1 : 0;
}

/* Makes the frame buffer hold at least `cap` bytes (its content is not kept). */
static int reserve_frame(stepscope_reader *r, size_t cap) {
  if (r->frame_cap >= cap) return 0;
  free(r->frame);
  r->frame = malloc(cap);
  r->frame_cap = r->frame ? cap : 0;
  return r->frame ? 0 : -1;
}

/* Ends the damaged region (if any) at file offset `to`: one warning. */
static void end_damage(stepscope_reader *r, uint64_t to) {
  if (!r->in_damage) return;
  r->in_damage = 0;
  uint64_t n = to > r->damage_start ? to - r->damage_start : 0;
  r->damaged_regions++;
  r->damaged_bytes += n;
  add_warning(r,
              "%s: offset %llu: damaged data (%s); %llu bytes skipped, their records are lost; "
              "reading %s",
              r->path, (unsigned long long)r->damage_start, r->damage_why, (unsigned long long)n,
              to >= r->file_size ? "ended there (no later frame)" : "resumed at the next frame");
}

/* A bad record at byte `at` of the current (intact) frame: the rest of the
 * frame is dropped; its share of the frame's file bytes counts as lost. */
static void drop_frame_tail(stepscope_reader *r, size_t at) {
  uint64_t frame_bytes = r->in_file_offset + r->in_pos - r->frame_offset;
  r->damaged = 1;
  r->damaged_regions++;
  if (r->frame_len)
    r->damaged_bytes +=
        (uint64_t)((double)frame_bytes * (double)(r->frame_len - at) / (double)r->frame_len);
  r->frame_pos = r->frame_len;
}

/* The frame at r->frame_offset is damaged: starts (or extends) a damaged
 * region and positions the input at the next zstd frame magic after it.
 * 1: positioned, 0: none before the end of the file, <0: read error. */
static int resync(stepscope_reader *r, const char *why, stepscope_error *err) {
  static const uint8_t magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  if (!r->in_damage) {
    r->in_damage = 1;
    r->damage_start = r->frame_offset;
    snprintf(r->damage_why, sizeof r->damage_why, "%s", why);
  }
  r->damaged = 1;
  ZSTD_DCtx_reset(r->dctx, ZSTD_reset_session_only);
  r->frame_len = r->frame_pos = 0;
  r->frame_ready = 0;
  uint64_t from = r->frame_offset + 1;
  if (from >= r->in_file_offset && from <= r->in_file_offset + r->in_len) {
    r->in_pos = (size_t)(from - r->in_file_offset);
  } else { /* the frame streamed past the buffer: read again from there */
    if (lseek(r->fd, (off_t)from, SEEK_SET) < 0) {
      error_set(err, STEPSCOPE_E_IO, from, "%s: offset %llu: seek failed: %s", r->path,
                (unsigned long long)from, strerror(errno));
      return STEPSCOPE_E_IO;
    }
    r->in_file_offset = from;
    r->in_len = r->in_pos = 0;
    r->eof = 0;
  }
  for (;;) {
    size_t left = r->in_len - r->in_pos;
    const uint8_t *hit = left >= 4 ? memmem(r->in + r->in_pos, left, magic, 4) : NULL;
    if (hit) {
      r->in_pos = (size_t)(hit - r->in);
      return 1;
    }
    if (left > 3) r->in_pos = r->in_len - 3; /* the magic may straddle the refill */
    int rc = r->eof ? 1 : fill_input(r, err);
    if (rc < 0) return rc;
    if (rc == 1) {
      end_damage(r, r->file_size);
      r->in_pos = r->in_len;
      return 0;
    }
  }
}

/* The content-checksum flag of the zstd frame starting at `p`: 1 or 0, or -1
 * for a skippable frame, something not zstd, or fewer than 5 bytes (zstd
 * decides those). A frame whose flag is clear is not checked by zstd, so a
 * flipped bit that clears it would let the rest of the frame's damage go
 * unseen: once the header frame had a checksum (this implementation's
 * writer checksums every frame, trace-format.md §1), a later frame without
 * one is damage. A header frame without one (another writer) is accepted
 * and sets no expectation. RFC 8878 §3.1.1.1: the 4-byte little-endian magic
 * 0xFD2FB528, then the frame header descriptor whose bit 2 is
 * Content_Checksum_flag; zstd's own header parser (ZSTD_getFrameHeader) is
 * in its static-linking-only API, so the two bytes are read here. */
static int frame_checksum_flag(const uint8_t *p, size_t n) {
  if (n < 5) return -1;
  uint32_t magic =
      (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  if (magic != ZSTD_MAGICNUMBER) return -1;
  return (p[4] & 0x04) != 0;
}

/* Whether a skippable frame (RFC 8878 §3.1.2: magic 0x184D2A50..5F) starts at `p`. */
static int skippable_frame(const uint8_t *p, size_t n) {
  if (n < 4) return 0;
  uint32_t magic =
      (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  return (magic & 0xFFFFFFF0u) == ZSTD_MAGIC_SKIPPABLE_START;
}

/* Whether the file inflated past its limit (then err is filled). The compressed size is
 * what was read of the file when that is more than its size at open (a file still
 * growing). */
static int inflated_too_much(stepscope_reader *r, stepscope_error *err) {
  uint64_t compressed = r->in_file_offset + r->in_len;
  if (compressed < r->file_size) compressed = r->file_size;
  if (r->inflated <= stepscope_inflate_limit(&r->inflate, compressed)) return 0;
  stepscope_inflate_limit_error(err, r->path, &r->inflate, compressed);
  if (err) err->offset = r->frame_offset;
  return 1;
}

/* Whether the zstd frame magic occurs in the file at or after offset `from`
 * (read with pread: the input buffer is left as it is). */
static int magic_in_file(const stepscope_reader *r, uint64_t from) {
  static const uint8_t magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  uint8_t buf[1 << 16];
  for (;;) {
    ssize_t k = pread(r->fd, buf, sizeof buf, (off_t)from);
    if (k < 0 && errno == EINTR) continue;
    if (k < 4) return 0;
    if (memmem(buf, (size_t)k, magic, 4)) return 1;
    from += (uint64_t)k - 3; /* the magic may straddle two reads */
  }
}

/* The file ended (started: inside a frame). A frame that runs to the end of
 * the file is a truncated last frame, or a false frame start (crafted, or
 * damage that happens to read as a frame magic) whose blocks swallowed the
 * frames after it: when a frame magic follows its start, it is damage and
 * reading resumes there. 1: resumed, 0: the end, <0: error. */
static int end_of_file(stepscope_reader *r, int started, stepscope_error *err) {
  if (started && r->header.format_major && (r->in_damage || magic_in_file(r, r->frame_offset + 1)))
    return resync(r, "a frame that runs to the end of the file (a false frame start?)", err);
  if (r->in_damage) { /* the region runs to the end (with any last partial frame) */
    end_damage(r, r->file_size);
    return 0;
  }
  if (started && (r->frame_len > 0 || r->in_file_offset + r->in_len > r->frame_offset)) {
    add_warning(
        r,
        "%s: offset %llu: truncated: the last frame is incomplete (%llu bytes); it was "
        "ignored",
        r->path, (unsigned long long)r->frame_offset,
        (unsigned long long)(r->file_size > r->frame_offset ? r->file_size - r->frame_offset : 0));
  }
  return 0;
}

/* Decompresses the next complete frame into r->frame. Returns 1 when a frame
 * is ready, 0 at the (clean or truncated) end, <0 on error. */
static int next_frame(stepscope_reader *r, stepscope_error *err) {
  r->frame_len = r->frame_pos = 0;
  r->frame_ready = 0;
  r->state = (codec_state){0, 0};
  int started = 0;
  for (;;) {
    if (!started && !r->eof && r->in_len - r->in_pos < READER_INPUT_CAP / 2) {
      int rc = fill_input(r, err); /* top up, so that the frame is likely whole */
      if (rc < 0) return rc;
    }
    if (r->in_pos == r->in_len) {
      int rc = r->eof ? 1 : fill_input(r, err);
      if (rc < 0) return rc;
      if (rc == 1) {
        rc = end_of_file(r, started, err);
        if (rc <= 0) return rc;
        started = 0; /* resumed after a frame that ran to the end */
        continue;
      }
    }
    if (!started) {
      r->frame_offset = r->in_file_offset + r->in_pos;
      started = 1;
      int checksum = frame_checksum_flag(r->in + r->in_pos, r->in_len - r->in_pos);
      if (!r->header.format_major) {
        r->header_frame_checksum = checksum;
      } else if ((checksum == 0 && r->header_frame_checksum == 1) ||
                 skippable_frame(r->in + r->in_pos, r->in_len - r->in_pos)) {
        /* the writer checksums every frame: this frame's flag was damaged; and it
         * writes no skippable frame, whose size could jump over the frames after it */
        int rc = resync(r,
                        checksum == 0 ? "a zstd frame without a content checksum"
                                      : "a skippable frame (the writer writes none)",
                        err);
        if (rc <= 0) return rc;
        started = 0;
        continue;
      }
      /* room for the whole content, so that zstd can decode in one pass */
      unsigned long long size = ZSTD_getFrameContentSize(r->in + r->in_pos, r->in_len - r->in_pos);
      if (size <= MAX_FRAME_CONTENT &&
          reserve_frame(r, (size_t)size + ZSTD_DStreamOutSize()) != 0) {
        error_set(err, STEPSCOPE_E_NOMEM, r->frame_offset, "%s: offset %llu: out of memory",
                  r->path, (unsigned long long)r->frame_offset);
        return STEPSCOPE_E_NOMEM;
      }
    }
    if (r->frame_cap - r->frame_len < ZSTD_DStreamOutSize()) {
      size_t cap = r->frame_cap ? r->frame_cap * 2 : 2 * ZSTD_DStreamOutSize();
      if (cap > MAX_FRAME_CONTENT + ZSTD_DStreamOutSize() && r->header.format_major) {
        int rc = resync(r, "a frame larger than 64 MiB of records", err);
        if (rc <= 0) return rc;
        started = 0;
        continue;
      }
      if (cap > MAX_FRAME_CONTENT + ZSTD_DStreamOutSize()) {
        error_set(err, STEPSCOPE_E_LIMIT, r->frame_offset,
                  "%s: offset %llu: expected a frame of at most %u bytes of records, found a "
                  "larger one",
                  r->path, (unsigned long long)r->frame_offset, MAX_FRAME_CONTENT);
        return STEPSCOPE_E_LIMIT;
      }
      uint8_t *f = realloc(r->frame, cap);
      if (!f) {
        error_set(err, STEPSCOPE_E_NOMEM, r->frame_offset, "%s: offset %llu: out of memory",
                  r->path, (unsigned long long)r->frame_offset);
        return STEPSCOPE_E_NOMEM;
      }
      r->frame = f;
      r->frame_cap = cap;
    }
    ZSTD_inBuffer in = {r->in, r->in_len, r->in_pos};
    ZSTD_outBuffer out = {r->frame, r->frame_cap, r->frame_len};
    size_t ret = ZSTD_decompressStream(r->dctx, &out, &in);
    r->inflated += out.pos - r->frame_len;
    r->in_pos = in.pos;
    r->frame_len = out.pos;
    if (inflated_too_much(r, err)) return STEPSCOPE_E_LIMIT;
    if (ZSTD_isError(ret) && r->header.format_major) { /* after the header: skip it */
      char why[128];
      snprintf(why, sizeof why, "not a valid zstd frame: %s", ZSTD_getErrorName(ret));
      int rc = resync(r, why, err);
      if (rc <= 0) return rc;
      started = 0;
      continue;
    }
    if (ZSTD_isError(ret)) {
      error_set(err, STEPSCOPE_E_FORMAT, r->frame_offset,
                "%s: offset %llu: expected a valid zstd frame: %s", r->path,
                (unsigned long long)r->frame_offset, ZSTD_getErrorName(ret));
      return STEPSCOPE_E_FORMAT;
    }
    if (r->frame_len > MAX_FRAME_CONTENT) {
      if (r->header.format_major) {
        int rc = resync(r, "a frame larger than 64 MiB of records", err);
        if (rc <= 0) return rc;
        started = 0;
        continue;
      }
      error_set(err, STEPSCOPE_E_LIMIT, r->frame_offset,
                "%s: offset %llu: expected a frame of at most %u bytes of records", r->path,
                (unsigned long long)r->frame_offset, MAX_FRAME_CONTENT);
      return STEPSCOPE_E_LIMIT;
    }
    if (ret == 0) { /* frame complete and checksum verified */
      end_damage(r, r->frame_offset);
      if (r->frame_len == 0) { /* e.g. a skippable frame: nothing to read */
        started = 0;
        continue;
      }
      r->frame_ready = 1;
      return 1;
    }
  }
}

static int add_string(stepscope_reader *r, const stepscope_string *s, stepscope_error *err) {
  uint32_t lost = 0; /* ids of strings defined in skipped frames */
  if (r->damaged && s->id > r->nstrings + 1 &&
      s->id - r->nstrings - 1 <= MAX_LOST_STRING_IDS - r->lost_string_ids && s->id < MAX_STRINGS)
    lost = s->id - r->nstrings - 1;
  r->lost_string_ids += lost;
  if (s->id != r->nstrings + 1 + lost) {
    error_set(err, STEPSCOPE_E_FORMAT, r->frame_offset,
              "%s: frame at offset %llu: expected string id %u next, found %u", r->path,
              (unsigned long long)r->frame_offset, r->nstrings + 1, s->id);
    return STEPSCOPE_E_FORMAT;
  }
  if (r->nstrings + 1 >= MAX_STRINGS) {
    error_set(err, STEPSCOPE_E_LIMIT, r->frame_offset, "%s: more than %u strings", r->path,
              MAX_STRINGS);
    return STEPSCOPE_E_LIMIT;
  }
  if (r->nstrings + 2 + lost > r->strings_cap) {
    char **n = sc_grow(r->strings, &r->strings_cap, r->nstrings + 2 + lost, sizeof *n, 1024);
    if (!n) goto nomem;
    r->strings = n;
  }
  const char *copy = arena_store(r, s->data, s->length);
  if (!copy) goto nomem;
  while (lost--)
    r->strings[++r->nstrings] = NULL; /* read as "?<id>" */
  r->strings[++r->nstrings] = (char *)copy;
  return 0;
nomem:
  error_set(err, STEPSCOPE_E_NOMEM, r->frame_offset, "%s: out of memory for strings", r->path);
  return STEPSCOPE_E_NOMEM;
}

/* Decodes the next record of the current frame, moving to the next frame as
 * needed. 1 record, 0 end, <0 error. */
static int next_record(stepscope_reader *r, stepscope_record *rec, stepscope_error *err) {
  for (;;) {
    if (!r->frame_ready || r->frame_pos >= r->frame_len) {
      int rc = next_frame(r, err);
      if (rc == 0) r->at_end = 1;
      if (rc <= 0) return rc;
    }
    const uint8_t *p = r->frame + r->frame_pos;
    const uint8_t *end = r->frame + r->frame_len;
    char why[256];
    stepscope_header hdr_scratch;
    uint32_t max_id = r->damaged ? MAX_STRINGS - 1 : r->nstrings; /* lost ids: "?<id>" */
    codec_result cr = codec_decode(&r->state, &p, end, max_id, rec, &hdr_scratch, arena_store, r,
                                   why, sizeof why);
    size_t at = r->frame_pos;
    r->frame_pos = (size_t)(p - r->frame);
    switch (cr) {
    case CODEC_ERROR:
      if (r->header.format_major) { /* keep the records before it, drop the rest */
        add_warning(r,
                    "%s: frame at offset %llu, record at byte %zu: expected %s; the rest of the "
                    "frame (%zu bytes of records) was skipped",
                    r->path, (unsigned long long)r->frame_offset, at, why, r->frame_len - at);
        drop_frame_tail(r, at);
        continue;
      }
      error_set(err, STEPSCOPE_E_FORMAT, r->frame_offset,
                "%s: frame at offset %llu, record at byte %zu: expected %s", r->path,
                (unsigned long long)r->frame_offset, at, why);
      return STEPSCOPE_E_FORMAT;
    case CODEC_SKIPPED: r->unknown++; continue;
    case CODEC_BLOCK: continue;
    case CODEC_RECORD:
      if (rec->kind == STEPSCOPE_REC_HEADER) {
        if (r->header.format_major == 0) { /* the first header is the file's */
          r->header = hdr_scratch;
          return 1;
        }
        error_set(err, STEPSCOPE_E_FORMAT, r->frame_offset,
                  "%s: frame at offset %llu, record at byte %zu: expected one header per file, "
                  "found a second",
                  r->path, (unsigned long long)r->frame_offset, at);
        return STEPSCOPE_E_FORMAT;
      }
      if (r->header.format_major == 0) {
        error_set(err, STEPSCOPE_E_FORMAT, r->frame_offset,
                  "%s: frame at offset %llu: expected the header record first, found a %s record",
                  r->path, (unsigned long long)r->frame_offset,
                  stepscope_record_kind_name(rec->kind));
        return STEPSCOPE_E_FORMAT;
      }
      if (rec->kind == STEPSCOPE_REC_END) { /* the clean-close marker: consumed, like BLOCK */
        r->end = rec->u.end;
        continue;
      }
      if (rec->kind == STEPSCOPE_REC_STRING) {
        int rc = add_string(r, &rec->u.string, err);
        if (rc == STEPSCOPE_E_FORMAT && r->header.format_major) { /* as a bad record */
          add_warning(r, "%s; the rest of the frame was skipped",
                      err ? err->message : "bad string");
          drop_frame_tail(r, at);
          continue;
        }
        if (rc) return rc;
        rec->u.string.data = r->strings[rec->u.string.id];
      }
      return 1;
    }
  }
}

stepscope_reader *stepscope_reader_open(const char *path, stepscope_error *err) {
  return stepscope_reader_open_opts(path, NULL, err);
}

stepscope_reader *stepscope_reader_open_opts(const char *path, const stepscope_reader_options *opt,
                                             stepscope_error *err) {
  if (!path) {
    error_set(err, STEPSCOPE_E_ARGUMENT, 0, "stepscope_reader_open: no path");
    return NULL;
  }
  stepscope_reader *r = calloc(1, sizeof *r);
  if (!r) {
    error_set(err, STEPSCOPE_E_NOMEM, 0, "%s: out of memory", path);
    return NULL;
  }
  r->fd = -1;
  if (opt) r->inflate = opt->inflate;
  r->path = strdup(path);
  if (!r->path || reader_resources_take(&r->res, WINDOW_LOG_MAX) != 0) {
    error_set(err, STEPSCOPE_E_NOMEM, 0, "%s: out of memory", path);
    stepscope_reader_close(r);
    return NULL;
  }
  r->dctx = r->res.dctx;
  r->in = r->res.in;
  r->frame = r->res.frame;
  r->frame_cap = r->res.frame_cap;
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; anything but a
   * regular file is refused before the first read (a FIFO, a device or a
   * socket would block it forever). */
  r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (r->fd < 0 || fstat(r->fd, &st) != 0) {
    error_set(err, STEPSCOPE_E_IO, 0, "%s: cannot open: %s", path, strerror(errno));
    stepscope_reader_close(r);
    return NULL;
  }
  if (S_ISDIR(st.st_mode)) {
    error_set(err, STEPSCOPE_E_ARGUMENT, 0, "%s: is a directory, expected a trace file", path);
    stepscope_reader_close(r);
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    error_set(err, STEPSCOPE_E_ARGUMENT, 0,
              "%s: is not a regular file (a FIFO, device or socket), expected a trace file", path);
    stepscope_reader_close(r);
    return NULL;
  }
  int fl = fcntl(r->fd, F_GETFL);
  if (fl >= 0) fcntl(r->fd, F_SETFL, fl & ~O_NONBLOCK);
  r->file_size = (uint64_t)st.st_size;
  stepscope_record rec;
  int rc = next_record(r, &rec, err);
  if (rc == 0) {
    error_set(err, STEPSCOPE_E_FORMAT, 0,
              "%s: offset 0: expected a stepscope trace (a zstd frame with a header record), "
              "found %s",
              path, r->file_size == 0 ? "an empty file" : "no complete frame");
    rc = STEPSCOPE_E_FORMAT;
  }
  if (rc < 0) {
    if (err && rc == STEPSCOPE_E_FORMAT && r->frame_offset == 0 && !r->frame_ready) {
      /* Not even a first zstd frame: most likely not a trace at all. */
      char inner[sizeof err->message];
      snprintf(inner, sizeof inner, "%s", err->message);
      error_set(err, STEPSCOPE_E_FORMAT, 0, "%s (is this a stepscope trace file?)", inner);
    }
    stepscope_reader_close(r);
    return NULL;
  }
  if (r->header.format_major > STEPSCOPE_FORMAT_MAJOR) {
    error_set(err, STEPSCOPE_E_VERSION, 0,
              "%s: format version %u.%u is newer than this reader (%d.%d): upgrade stepscope", path,
              r->header.format_major, r->header.format_minor, STEPSCOPE_FORMAT_MAJOR,
              STEPSCOPE_FORMAT_MINOR);
    stepscope_reader_close(r);
    return NULL;
  }
  /* Header strings are never NULL for readers. */
  const char **fields[] = {
      &r->header.hostname,     &r->header.producer,       &r->header.device_name,
      &r->header.device_json,  &r->header.driver_version, &r->header.cuda_version,
      &r->header.nccl_version, &r->header.cupti_version,  &r->header.config_json};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (!*fields[i]) *fields[i] = "";
  return r;
}

const stepscope_header *stepscope_reader_header(const stepscope_reader *r) {
  return r ? &r->header : NULL;
}

int stepscope_reader_next(stepscope_reader *r, stepscope_record *rec, stepscope_error *err) {
  if (!r || !rec) return STEPSCOPE_E_ARGUMENT;
  if (r->sticky.code) {
    if (err) *err = r->sticky;
    return r->sticky.code;
  }
  if (r->done) return 0;
  int rc = next_record(r, rec, &r->sticky);
  if (rc < 0) {
    if (err) *err = r->sticky;
    return rc;
  }
  r->sticky.code = 0;
  if (rc == 0) {
    r->done = 1;
    if (r->damaged_regions)
      add_warning(r,
                  "%s: %llu damaged region%s skipped (%llu of %llu bytes, %.1f %% of the file): "
                  "their records are lost%s",
                  r->path, (unsigned long long)r->damaged_regions,
                  r->damaged_regions == 1 ? "" : "s", (unsigned long long)r->damaged_bytes,
                  (unsigned long long)r->file_size,
                  r->file_size ? 100.0 * (double)r->damaged_bytes / (double)r->file_size : 0.0,
                  r->damaged ? "; names defined there show as ?<id>" : "");
  }
  return rc;
}

const char *stepscope_reader_string(const stepscope_reader *r, uint32_t id) {
  if (!r || id == 0) return NULL;
  if (id <= r->nstrings && r->strings[id]) return r->strings[id];
  if (!r->damaged) return NULL;
  /* a string lost with a damaged frame: "?<id>", from a small ring so that a
   * few answers stay valid together (the reader is used by one thread) */
  stepscope_reader *m = (stepscope_reader *)r;
  char *p = m->placeholder[m->next_placeholder++ % PLACEHOLDERS];
  snprintf(p, sizeof m->placeholder[0], "?%u", id);
  return p;
}

size_t stepscope_reader_warning_count(const stepscope_reader *r) {
  return r ? r->nwarnings : 0;
}

const char *stepscope_reader_warning(const stepscope_reader *r, size_t i) {
  return r && i < r->nwarnings ? r->warnings[i] : NULL;
}

int stepscope_reader_close_state(const stepscope_reader *r, int *signal_out) {
  if (signal_out) *signal_out = 0;
  if (!r) return STEPSCOPE_CLOSE_UNKNOWN;
  if (r->end.reason == STEPSCOPE_END_SIGNAL) {
    if (signal_out) *signal_out = (int)r->end.signal;
    return STEPSCOPE_CLOSE_SIGNAL;
  }
  if (r->end.reason) return STEPSCOPE_CLOSE_CLEAN; /* closed (reasons added later read as closed) */
  /* files written before END records existed say nothing either way */
  if (!r->at_end || (r->header.format_major == 1 && r->header.format_minor < 1))
    return STEPSCOPE_CLOSE_UNKNOWN;
  return STEPSCOPE_CLOSE_MISSING;
}

uint64_t stepscope_reader_unknown_records(const stepscope_reader *r) {
  return r ? r->unknown : 0;
}

uint64_t stepscope_reader_damaged_regions(const stepscope_reader *r) {
  return r ? r->damaged_regions : 0;
}

uint64_t stepscope_reader_damaged_bytes(const stepscope_reader *r) {
  return r ? r->damaged_bytes : 0;
}

uint64_t stepscope_reader_offset(const stepscope_reader *r) {
  return r ? r->in_file_offset + r->in_pos : 0;
}

uint64_t stepscope_reader_file_size(const stepscope_reader *r) {
  return r ? r->file_size : 0;
}

void stepscope_reader_close(stepscope_reader *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  r->res.frame = r->frame; /* it may have been reallocated */
  r->res.frame_cap = r->frame_cap;
  reader_resources_give(&r->res);
  free(r->strings);
  string_arena_free(&r->arena);
  for (size_t i = 0; i < r->nwarnings; i++)
    free(r->warnings[i]);
  free(r->path);
  free(r);
}
