/*
 * inflate_pipe.c — see inflate_pipe.h: a producer thread inflates a gzip
 * file into a ring of chunk buffers that the calling thread consumes.
 *
 * How: the ring is `nchunks` buffers of `chunk` bytes; slots
 * [head, head + count) (mod nchunks) are published, full of inflated bytes.
 * The producer fills the slot after them (it owns it until it publishes
 * it) and waits while the ring is full; the consumer copies out of slot
 * `head` (it owns it until it hands it back) and waits while the ring is
 * empty. One mutex and two condition variables guard head, count, the
 * lengths and the flags; the bytes themselves are only touched by the
 * slot's owner, the mutex ordering the hand-overs. The chunks are reused,
 * so they stay in cache and no page is faulted in after the first round.
 *
 * The producer counts what it inflates; past the caller's max_out it stops
 * as on a decoding error (over_limit set, so that close tells the two apart).
 *
 * The producer reads the file with pread (EINTR retried) into a 256 KiB
 * input buffer, parses each member's gzip header (RFC 1952: FEXTRA, FNAME,
 * FCOMMENT, FHCRC checked) and inflates the member's deflate data with one
 * of two decoders, chosen when built: ISA-L's isal_inflate (Debian
 * libisal-dev; 3 times zlib's speed on real traces, docs/hta-comparison.md),
 * which also reads and checks the member's trailer (ISAL_GZIP_NO_HDR_VER:
 * CRC-32 and ISIZE); or zlib's raw inflate (windowBits -15), the trailer then checked here:
 * CRC-32 (libdeflate_crc32 when the build has libdeflate, several times
 * faster than zlib's crc32) and ISIZE (the length mod 2^32). Both decoders
 * are called with whatever input is left, even none at the end of the file,
 * until they make no progress, so a member that ends exactly at the end of
 * the file is never taken for a truncated one. When it fails it publishes
 * what it had inflated, then the error; the consumer returns the good bytes
 * first and -1 after them. The producer checks a stop flag while it waits
 * for a free slot and after every inflate call, so a consumer that gives up
 * early (a JSON error) is never left waiting in close; every path of the
 * producer ends in `done`, so it is always joinable. The producer blocks
 * every signal: handlers run on the caller's threads.
 *
 * ISA-L's inflate is more lenient than zlib's in one known way: it accepts a
 * dynamic block whose code lengths form an incomplete prefix code, which
 * zlib refuses as "invalid literal/lengths set" (found by
 * tests/fuzz/inflate_pipe). No compressor writes such a block; what the pipe
 * hands over from one still passed the member's CRC-32 and ISIZE checks.
 */
#include "inflate_pipe.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#ifdef STEPSCOPE_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#ifdef STEPSCOPE_HAVE_LIBDEFLATE
#include <libdeflate.h>
static uint32_t crc_update(uint32_t crc, const unsigned char *p, size_t n) {
  return libdeflate_crc32(crc, p, n);
}
#else
static uint32_t crc_update(uint32_t crc, const unsigned char *p, size_t n) {
  while (n > 0) { /* zlib's crc32 takes a uInt length */
    uInt m = n > (1u << 30) ? (1u << 30) : (uInt)n;
    crc = (uint32_t)crc32(crc, p, m);
    p += m;
    n -= m;
  }
  return crc;
}
#endif

#define ZIN_CAP (256u << 10)

struct ssa_inflate_pipe {
  int fd;
  size_t chunk;
  int nchunks;
  unsigned char **bufs;
  size_t *lens;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t can_read, can_write;
  /* guarded by mu */
  int head, count;  /* published slots */
  int done;         /* the producer has published its last slot */
  int linear;       /* the slots are consecutive windows of the caller's buffer */
  size_t published; /* bytes published so far (linear) */
  int failed;       /* ... and it ended on an error (msg) */
  int over_limit;   /* ... which was the text passing max_out */
  int stop;         /* the consumer asks the producer to stop */
  char msg[128];
  /* the producer's own */
  uint64_t max_out, inflated; /* the bound on the text, and the text so far */
  uint64_t file_off;
  unsigned char *zin;
  size_t zin_pos, zin_len;
  int zin_eof;
#ifdef STEPSCOPE_HAVE_ISAL
  struct inflate_state *isal;
#else
  z_stream z;
  int z_ready;
  uint32_t crc, isize; /* of the member so far */
#endif
  int slot; /* the slot being filled, or -1 */
  size_t fill;
  /* the consumer's own */
  int holding; /* it holds slot head */
  size_t cur_pos;
  int outcome; /* 0 running, 1 end returned, 2 error returned */
};

/* ---- producer ---- */

static int fail(ssa_inflate_pipe *p, const char *what) {
  pthread_mutex_lock(&p->mu);
  snprintf(p->msg, sizeof p->msg, "%s", what);
  p->failed = 1;
  pthread_mutex_unlock(&p->mu);
  return -1;
}

/* Refills the input buffer when it is empty; 0, or -1 on a read error. */
static int refill(ssa_inflate_pipe *p) {
  if (p->zin_pos < p->zin_len || p->zin_eof) return 0;
  ssize_t got;
  do
    got = pread(p->fd, p->zin, ZIN_CAP, (off_t)p->file_off);
  while (got < 0 && errno == EINTR);
  if (got < 0) return fail(p, strerror(errno));
  p->file_off += (uint64_t)got;
  p->zin_pos = 0;
  p->zin_len = (size_t)got;
  if (got == 0) p->zin_eof = 1;
  return 0;
}

/* The next input byte, -1 at the end of the file, -2 on a read error. */
static int next_byte(ssa_inflate_pipe *p) {
  if (refill(p)) return -2;
  if (p->zin_pos == p->zin_len) return -1;
  return p->zin[p->zin_pos++];
}

/* A header byte (folded into the header's CRC); -1 (reported) at the end. */
static int header_byte(ssa_inflate_pipe *p, uint32_t *hcrc) {
  int c = next_byte(p);
  if (c == -1) fail(p, "unexpected end of file");
  if (c < 0) return -1;
  unsigned char b = (unsigned char)c;
  *hcrc = crc_update(*hcrc, &b, 1);
  return c;
}

/* Reads one member's header (the first byte, 0x1f, already read). */
static int read_header(ssa_inflate_pipe *p) {
  uint32_t hcrc = crc_update(0, (const unsigned char *)"\x1f", 1);
  int c = header_byte(p, &hcrc);
  if (c < 0) return -1;
  if (c != 0x8b) return fail(p, "incorrect header check");
  if ((c = header_byte(p, &hcrc)) < 0) return -1;
  if (c != 8) return fail(p, "unknown compression method");
  int flags = header_byte(p, &hcrc);
  if (flags < 0) return -1;
  if (flags & 0xe0) return fail(p, "unknown header flags set");
  for (int i = 0; i < 6; i++) /* MTIME, XFL, OS */
    if (header_byte(p, &hcrc) < 0) return -1;
  if (flags & 4) { /* FEXTRA */
    int lo = header_byte(p, &hcrc), hi = lo < 0 ? -1 : header_byte(p, &hcrc);
    if (hi < 0) return -1;
    for (long n = lo | hi << 8; n > 0; n--)
      if (header_byte(p, &hcrc) < 0) return -1;
  }
  for (int f = 8; f <= 16; f <<= 1) /* FNAME, FCOMMENT: zero-terminated */
    if (flags & f) {
      do
        c = header_byte(p, &hcrc);
      while (c > 0);
      if (c < 0) return -1;
    }
  if (flags & 2) { /* FHCRC: the low 16 bits of the header's CRC-32 */
    uint32_t want = hcrc & 0xffff;
    int lo = next_byte(p), hi = lo < 0 ? lo : next_byte(p);
    if (hi == -1) return fail(p, "unexpected end of file");
    if (hi < 0) return -1;
    if ((uint32_t)(lo | hi << 8) != want) return fail(p, "header crc mismatch");
  }
  return 0;
}

/* Publishes the slot being filled, if any bytes are in it. */
static void publish(ssa_inflate_pipe *p) {
  if (p->slot < 0 || p->fill == 0) return;
  pthread_mutex_lock(&p->mu);
  p->lens[p->slot] = p->fill;
  p->count++;
  p->published += p->fill;
  if (p->linear)
    pthread_cond_broadcast(&p->can_read);
  else
    pthread_cond_signal(&p->can_read);
  pthread_mutex_unlock(&p->mu);
  p->slot = -1;
  p->fill = 0;
}

/* Takes a free slot to fill; -1 when the consumer asked to stop. */
static int take_slot(ssa_inflate_pipe *p) {
  pthread_mutex_lock(&p->mu);
  if (p->linear && p->count == p->nchunks && !p->stop) {
    /* linear: the caller's buffer is full and there is more text */
    snprintf(p->msg, sizeof p->msg, "more inflated text than the buffer holds");
    p->failed = 1;
    pthread_mutex_unlock(&p->mu);
    return -1;
  }
  while (p->count == p->nchunks && !p->stop)
    pthread_cond_wait(&p->can_write, &p->mu);
  int stop = p->stop;
  if (!stop) p->slot = (p->head + p->count) % p->nchunks;
  pthread_mutex_unlock(&p->mu);
  p->fill = 0;
  return stop ? -1 : 0;
}

static int stopped(ssa_inflate_pipe *p) {
  pthread_mutex_lock(&p->mu);
  int s = p->stop;
  pthread_mutex_unlock(&p->mu);
  return s;
}

/* One call of the decoder on the input buffer into the slot being filled:
 * 1 at the end of the member's deflate data (with ISA-L: of its trailer,
 * checked), 0 to go on, -1 on an error (reported). `made` and `used` say
 * what it produced and consumed. */
#ifdef STEPSCOPE_HAVE_ISAL
static int decode_step(ssa_inflate_pipe *p, unsigned char *out, size_t room, size_t *made,
                       size_t *used) {
  struct inflate_state *st = p->isal;
  st->next_in = p->zin + p->zin_pos;
  st->avail_in = (uint32_t)(p->zin_len - p->zin_pos);
  st->next_out = out;
  st->avail_out = (uint32_t)room;
  int rc = isal_inflate(st);
  *made = room - st->avail_out;
  *used = (p->zin_len - p->zin_pos) - st->avail_in;
  switch (rc) {
  case ISAL_DECOMP_OK: return st->block_state == ISAL_BLOCK_FINISH;
  case ISAL_INCORRECT_CHECKSUM: return fail(p, "incorrect data or length check");
  case ISAL_INVALID_BLOCK: return fail(p, "invalid deflate block");
  case ISAL_INVALID_SYMBOL: return fail(p, "invalid deflate symbol");
  case ISAL_INVALID_LOOKBACK: return fail(p, "invalid distance too far back");
  default: return fail(p, "inflate failed");
  }
}
#else
static int decode_step(ssa_inflate_pipe *p, unsigned char *out, size_t room, size_t *made,
                       size_t *used) {
  p->z.next_in = p->zin + p->zin_pos;
  p->z.avail_in = (uInt)(p->zin_len - p->zin_pos);
  p->z.next_out = out;
  p->z.avail_out = (uInt)room;
  int zr = inflate(&p->z, Z_NO_FLUSH);
  *made = room - p->z.avail_out;
  *used = (p->zin_len - p->zin_pos) - p->z.avail_in;
  p->crc = crc_update(p->crc, out, *made);
  p->isize += (uint32_t)*made;
  if (zr == Z_STREAM_END) return 1;
  if (zr == Z_OK || zr == Z_BUF_ERROR) return 0;
  return fail(p, p->z.msg ? p->z.msg : "inflate failed");
}
#endif

/* Inflates one member's deflate data and checks its trailer. */
static int inflate_member(ssa_inflate_pipe *p) {
#ifdef STEPSCOPE_HAVE_ISAL
  isal_inflate_reset(p->isal);
  p->isal->crc_flag = ISAL_GZIP_NO_HDR_VER; /* ISA-L checks the trailer */
#else
  if (inflateReset(&p->z) != Z_OK) return fail(p, "inflate failed");
  p->crc = 0;
  p->isize = 0;
#endif
  for (;;) {
    if (p->slot < 0 && take_slot(p)) return -1;
    if (refill(p)) return -1;
    size_t room = p->chunk - p->fill, made, used;
    if (room > (1u << 30)) room = 1u << 30;
    int end = decode_step(p, p->bufs[p->slot] + p->fill, room, &made, &used);
    p->zin_pos += used;
    p->fill += made;
    if (p->fill == p->chunk) publish(p);
    if (end < 0) return -1;
    if ((p->inflated += made) > p->max_out) {
      fail(p, "inflated past the limit");
      pthread_mutex_lock(&p->mu);
      p->over_limit = 1;
      pthread_mutex_unlock(&p->mu);
      return -1;
    }
    if (end) break;
    /* no progress and nothing more to read: the file ends inside the member */
    if (made == 0 && used == 0 && p->zin_eof) return fail(p, "unexpected end of file");
    if (stopped(p)) return -1;
  }
#ifndef STEPSCOPE_HAVE_ISAL
  /* trailer: CRC-32 and ISIZE, little-endian */
  uint32_t want[2] = {0, 0};
  for (int i = 0; i < 8; i++) {
    int c = next_byte(p);
    if (c == -1) return fail(p, "unexpected end of file");
    if (c < 0) return -1;
    want[i / 4] |= (uint32_t)c << (8 * (i % 4));
  }
  if (want[0] != p->crc) return fail(p, "incorrect data check");
  if (want[1] != p->isize) return fail(p, "incorrect length check");
#endif
  return 0;
}

static void *produce(void *arg) {
  ssa_inflate_pipe *p = arg;
  int c = next_byte(p);
  if (c == -1)
    fail(p, "unexpected end of file");
  else if (c >= 0 && c != 0x1f)
    fail(p, "incorrect header check"); /* not gzip at all */
  /* members follow one another while the next byte is 0x1f */
  while (c == 0x1f) {
    if (read_header(p) || inflate_member(p)) break;
    c = next_byte(p);
  }
  publish(p);
  pthread_mutex_lock(&p->mu);
  p->done = 1;
  pthread_cond_broadcast(&p->can_read);
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* ---- consumer ---- */

long ssa_inflate_pipe_read(void *ctx, void *buf, size_t n) {
  ssa_inflate_pipe *p = ctx;
  unsigned char *dst = buf;
  size_t got = 0;
  if (p->outcome) return p->outcome == 1 ? 0 : -1;
  while (got < n) {
    if (!p->holding) {
      pthread_mutex_lock(&p->mu);
      while (p->count == 0 && !p->done)
        pthread_cond_wait(&p->can_read, &p->mu);
      int have = p->count > 0, failed = p->failed;
      pthread_mutex_unlock(&p->mu);
      if (!have) { /* the producer is done and everything was handed over */
        if (got) return (long)got;
        p->outcome = failed ? 2 : 1;
        return failed ? -1 : 0;
      }
      p->holding = 1;
      p->cur_pos = 0;
    }
    size_t len = p->lens[p->head], m = len - p->cur_pos;
    if (m > n - got) m = n - got;
    memcpy(dst + got, p->bufs[p->head] + p->cur_pos, m);
    got += m;
    p->cur_pos += m;
    if (p->cur_pos == len) { /* hand the slot back */
      pthread_mutex_lock(&p->mu);
      p->head = (p->head + 1) % p->nchunks;
      p->count--;
      pthread_cond_signal(&p->can_write);
      pthread_mutex_unlock(&p->mu);
      p->holding = 0;
    }
  }
  return (long)got;
}

/* ---- life cycle ---- */

static void destroy(ssa_inflate_pipe *p) {
  if (p->bufs && !p->linear)
    for (int i = 0; i < p->nchunks; i++)
      free(p->bufs[i]);
  free(p->bufs);
  free(p->lens);
  free(p->zin);
#ifdef STEPSCOPE_HAVE_ISAL
  free(p->isal);
#else
  if (p->z_ready) inflateEnd(&p->z);
#endif
  free(p);
}

static ssa_inflate_pipe *open_pipe(int fd, size_t chunk, int nchunks, unsigned char *linear,
                                   uint64_t max_out) {
  if (chunk == 0 || nchunks < (linear ? 1 : 2)) return NULL;
  ssa_inflate_pipe *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->fd = fd;
  p->max_out = max_out;
  p->linear = linear != NULL;
  p->chunk = chunk;
  p->nchunks = nchunks;
  p->slot = -1;
  p->bufs = calloc((size_t)nchunks, sizeof *p->bufs);
  p->lens = calloc((size_t)nchunks, sizeof *p->lens);
  p->zin = malloc(ZIN_CAP);
  int ok = p->bufs && p->lens && p->zin;
  for (int i = 0; ok && i < nchunks; i++)
    ok = (p->bufs[i] = linear ? linear + (size_t)i * chunk : malloc(chunk)) != NULL;
#ifdef STEPSCOPE_HAVE_ISAL
  if (ok && (p->isal = malloc(sizeof *p->isal)) != NULL) isal_inflate_init(p->isal);
  ok = ok && p->isal;
#else
  ok = ok && inflateInit2(&p->z, -15) == Z_OK;
  p->z_ready = ok;
#endif
  if (!ok) {
    destroy(p);
    return NULL;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->can_read, NULL);
  pthread_cond_init(&p->can_write, NULL);
  /* the producer starts with every signal blocked */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&p->thread, NULL, produce, p);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&p->can_write);
    pthread_cond_destroy(&p->can_read);
    pthread_mutex_destroy(&p->mu);
    destroy(p);
    return NULL;
  }
  return p;
}

ssa_inflate_pipe *ssa_inflate_pipe_open(int fd, size_t chunk, int nchunks, uint64_t max_out) {
  return open_pipe(fd, chunk, nchunks, NULL, max_out);
}

ssa_inflate_pipe *ssa_inflate_pipe_open_linear(int fd, unsigned char *buf, size_t cap, size_t chunk,
                                               uint64_t max_out) {
  if (chunk == 0 || cap % chunk || cap / chunk > INT_MAX) return NULL;
  return open_pipe(fd, chunk, (int)(cap / chunk), buf, max_out);
}

long ssa_inflate_pipe_wait(ssa_inflate_pipe *p, size_t have) {
  pthread_mutex_lock(&p->mu);
  while (p->published <= have && !p->done)
    pthread_cond_wait(&p->can_read, &p->mu);
  long r = p->published > have ? (long)p->published : p->failed ? -1 : (long)have;
  if (r < 0)
    p->outcome = 2;
  else if (p->published <= have)
    p->outcome = 1;
  pthread_mutex_unlock(&p->mu);
  return r;
}

int ssa_inflate_pipe_close(ssa_inflate_pipe *p, char *msg, size_t cap) {
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->can_write);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  /* only an error the consumer was handed counts: one the producer met
   * after the consumer gave up would depend on timing */
  int rc = p->outcome == 2 ? (p->over_limit ? SSA_PIPE_OVER_LIMIT : -1) : 0;
  if (msg && cap) snprintf(msg, cap, "%s", rc ? p->msg : "");
  pthread_cond_destroy(&p->can_write);
  pthread_cond_destroy(&p->can_read);
  pthread_mutex_destroy(&p->mu);
  destroy(p);
  return rc;
}
