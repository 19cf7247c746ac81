/*
 * writer.c — appends records to a trace file from many threads.
 *
 * Hot path. Each (thread, writer) pair owns a `thread_buffer`: a byte buffer
 * that only that thread appends to, guarded by a per-buffer spin flag that is
 * uncontended except for the instant the flusher swaps the buffer out. There
 * is no global lock on the append path; a thread-local cache finds the
 * buffer without touching shared state. A buffer starts with a BLOCK record,
 * which resets the delta state, so every buffer is a self-contained block.
 *
 * Frames. A full buffer is handed to the `full` queue. When the queue holds
 * `frame_bytes`, about that much of it is compressed into a frame: by the
 * background thread when there is one, so appending threads never compress,
 * unless the queue falls 2 frames behind (then producers help). Every
 * `flush_interval_ms` (background thread), on stepscope_writer_flush and on
 * close, a frame takes everything: it also steals every thread's current
 * buffer. A frame takes the pending STRING records (strings interned so far
 * but not yet written) after its blocks, and compresses strings + blocks into
 * one independent, checksummed zstd frame with a known content size, written
 * with one write() call. Because blocks are taken before the pending strings,
 * every string a record refers to is defined in the same frame or an earlier
 * one. Written buffers are kept for reuse (up to the queue's usual backlog),
 * so steady appending does not page-fault fresh memory.
 *
 * Closing while others append. Closing marks every thread buffer closed
 * under its spin flag as it steals it (so an append in flight finishes
 * first and lands in the last frame), waits for full buffers that were taken
 * out before that, and writes the last frame. Later appends find no room in
 * their (stolen) buffer, take the slow path and see `closed`: no-ops. The
 * hot path pays nothing for this. writer_retire (writer_internal.h) keeps
 * the closed writer's shell alive for threads that may still hold it; the
 * public stepscope_writer_close frees it.
 *
 * Crash safety. A process killed at any instant leaves a file of complete
 * frames plus at most one partial frame, which readers drop with a warning.
 * Each thread's records are written in the order it appended them, so what
 * survives of a thread is a prefix of what it appended (close_frame).
 * What was still in buffers (at most about flush_interval_ms of activity,
 * 200 ms by default) is lost. Closing writes a last frame ending with an END
 * record, so a reader tells a closed file from one whose process died.
 *
 * Write failures (a full disk). The first failed write prints one warning
 * on stderr; from then on frames are dropped and their records counted,
 * quietly, and the program goes on. Closing returns the error with a
 * message; the linked tracer does not repeat the warning.
 *
 * Lock order: frame_mu -> registry_mu -> a buffer's spin flag; full_mu and
 * intern_mu are leaves. An appending thread never holds its spin flag while
 * taking a mutex.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "error.h"
#include "intern.h"
#include "record_codec.h"
#include "stepscope.h"
#include "varint.h"
#include "writer_internal.h"
#include "sc_file.h"
#include "sc_thread.h"

#define DEFAULT_FRAME_BYTES (4u << 20)
/* A process killed with SIGKILL loses what its buffers held since the last
 * frame: at most about DEFAULT_FLUSH_MS plus one wake-up period of the
 * background thread (a quarter of it), plus the frame being written
 * (measured by bench/kill/run_kill_trials.py). */
#define DEFAULT_FLUSH_MS 200u
#define DEFAULT_LEVEL    (-5)
#define BUFFER_BYTES     (256u << 10)
#define TLS_CACHE_WAYS   4
/* Written buffers kept for reuse, so that appending does not page-fault
 * fresh memory: enough for the frame queue's backlog (two frames before
 * producers help, plus the frame being compressed) at the default frame
 * size. Only buffers that were once needed are kept. */
#define SPARE_BUFFERS 48

typedef struct byte_buf {
  uint8_t *data;
  size_t len, cap;
} byte_buf;

typedef struct thread_buffer {
  atomic_flag busy;
  int closed;   /* set (under `busy`) when the writer closes: appends are no-ops */
  byte_buf buf; /* when allocated, starts with a BLOCK record */
  codec_state state;
  uint64_t thread;
  uint64_t records; /* appended through this buffer (under `busy`) */
  /* Per-thread order (see close_frame): 1 from the moment a full buffer of this thread is
   * swapped out (under `busy`) until it is in the frame queue; and the queue position
   * (full_block.seq) of the last buffer it queued. */
  atomic_int handing_off;
  atomic_uint_fast64_t last_queued;
  struct thread_buffer *next; /* registry list */
} thread_buffer;

typedef struct full_block {
  byte_buf buf;
  uint64_t seq; /* its place in the frame queue, from 1 (stolen buffers: 0) */
  struct full_block *next;
} full_block;

struct stepscope_writer {
  uint64_t generation; /* unique per writer, keys the thread-local cache */
  int fd;
  char *path;
  stepscope_writer_options opt;

  pthread_mutex_t registry_mu;
  thread_buffer *buffers;
  atomic_int closed;             /* set once, under registry_mu, by writer_retire */
  atomic_int handoffs_in_flight; /* full buffers taken out under a flag, not yet queued */

  pthread_mutex_t full_mu;
  full_block *full_head, *full_tail;
  size_t full_bytes;
  uint64_t queue_seq;            /* full blocks ever queued */
  uint8_t *spare[SPARE_BUFFERS]; /* written buffers kept for reuse (guarded by full_mu) */
  unsigned nspare;

  pthread_mutex_t intern_mu;
  intern_table *strings;
  byte_buf pending_strings; /* encoded STRING records not yet in a frame */

  pthread_mutex_t frame_mu;
  ZSTD_CCtx *cctx;
  byte_buf out;
  _Atomic uint64_t last_frame_ns;
  int io_failed;        /* after a write error, further frames are dropped and counted */
  int io_errno;         /* the first failed write's errno */
  atomic_int on_signal; /* a flush or close for a signal: waits on threads are bounded */

  atomic_uint_fast64_t dropped;
  atomic_uint_fast64_t bytes_written;

  /* background thread */
  pthread_t flusher;
  int flusher_running;
  pthread_mutex_t wake_mu;
  pthread_cond_t wake_cv;
  int stopping;
  int frame_wanted; /* a producer filled a frame's worth: close it now */
  void (*tick_fn)(void *);
  void *tick_arg;
  unsigned tick_ms;
  uint64_t last_tick_ns;
};

static atomic_uint_fast64_t next_generation = 1;

typedef struct tls_entry {
  uint64_t generation;
  thread_buffer *tb;
} tls_entry;
static _Thread_local tls_entry tls_cache[TLS_CACHE_WAYS];
static _Thread_local unsigned tls_victim;

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int buf_reserve(byte_buf *b, size_t extra) {
  if (b->cap - b->len >= extra) return 0;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap - b->len < extra)
    cap *= 2;
  uint8_t *d = realloc(b->data, cap);
  if (!d) return -1;
  b->data = d;
  b->cap = cap;
  return 0;
}

/* Compresses `pieces` as one frame and writes it. Called with frame_mu held. */
static int write_frame(stepscope_writer *w, const byte_buf *const *pieces, size_t npieces,
                       stepscope_error *err) {
  size_t total = 0;
  for (size_t i = 0; i < npieces; i++)
    total += pieces[i]->len;
  if (total == 0) return 0;
  if (w->io_failed) {
    error_set(err, STEPSCOPE_E_IO, atomic_load(&w->bytes_written),
              "%s: writing failed earlier (%s); the records after that were dropped", w->path,
              strerror(w->io_errno));
    return STEPSCOPE_E_IO;
  }
  w->out.len = 0;
  if (buf_reserve(&w->out, ZSTD_compressBound(total))) {
    error_set(err, STEPSCOPE_E_NOMEM, 0, "%s: out of memory for a %zu-byte frame", w->path, total);
    return STEPSCOPE_E_NOMEM;
  }
  ZSTD_CCtx_reset(w->cctx, ZSTD_reset_session_only);
  ZSTD_CCtx_setPledgedSrcSize(w->cctx, total);
  ZSTD_outBuffer out = {w->out.data, w->out.cap, 0};
  for (size_t i = 0; i < npieces; i++) {
    ZSTD_inBuffer in = {pieces[i]->data, pieces[i]->len, 0};
    int last = i + 1 == npieces;
    for (;;) {
      size_t r = ZSTD_compressStream2(w->cctx, &out, &in, last ? ZSTD_e_end : ZSTD_e_continue);
      if (ZSTD_isError(r)) {
        error_set(err, STEPSCOPE_E_COMPRESS, 0, "%s: zstd: %s", w->path, ZSTD_getErrorName(r));
        return STEPSCOPE_E_COMPRESS;
      }
      if (last ? r == 0 : in.pos == in.size) break;
    }
  }
  if (sc_write_all(w->fd, out.dst, out.pos)) {
    int e = errno;
    error_set(err, STEPSCOPE_E_IO, atomic_load(&w->bytes_written), "%s: write failed: %s", w->path,
              strerror(e));
    w->io_failed = 1;
    w->io_errno = e;
    /* the one warning: the background thread's failures have no caller to tell */
    fprintf(stderr,
            "stepscope: writing the trace %s failed: %s; the program goes on, and the trace "
            "keeps only what was written before (later records are counted as dropped)\n",
            w->path, strerror(e));
    return STEPSCOPE_E_IO;
  }
  atomic_fetch_add(&w->bytes_written, out.pos);
  w->last_frame_ns = mono_ns();
  return 0;
}

/* Frees a buffer's bytes and leaves it empty. */
static void buf_release(byte_buf *b) {
  free(b->data);
  *b = (byte_buf){0};
}

/* Keeps a written buffer of the standard size for reuse, or frees it. */
static void recycle_buffer(stepscope_writer *w, byte_buf *b) {
  if (b->cap == BUFFER_BYTES) {
    pthread_mutex_lock(&w->full_mu);
    if (w->nspare < SPARE_BUFFERS && !atomic_load_explicit(&w->closed, memory_order_relaxed)) {
      w->spare[w->nspare++] = b->data;
      b->data = NULL;
    }
    pthread_mutex_unlock(&w->full_mu);
  }
  buf_release(b);
}

/* A buffer of `cap` bytes: a recycled one when it is of the standard size. */
static int take_buffer(stepscope_writer *w, byte_buf *b, size_t cap) {
  uint8_t *data = NULL;
  if (cap == BUFFER_BYTES) {
    pthread_mutex_lock(&w->full_mu);
    if (w->nspare) data = w->spare[--w->nspare];
    pthread_mutex_unlock(&w->full_mu);
  }
  if (!data) data = malloc(cap);
  if (!data) return -1;
  *b = (byte_buf){data, 0, cap};
  return 0;
}

/* Counts records in an encoded block (for the dropped count on failure). */
static uint64_t count_records(const byte_buf *b) {
  uint64_t n = 0;
  const uint8_t *p = b->data, *end = b->data + b->len;
  while (p < end) {
    uint64_t tag, v;
    if (!(p = varint_get(p, end, &tag))) break;
    if ((tag & 1) && !(p = varint_get(p, end, &v))) break;
    if (!(p = varint_get(p, end, &v)) || v > (uint64_t)(end - p)) break;
    p += v;
    if ((tag >> 1) != STEPSCOPE_REC_BLOCK) n++;
  }
  return n;
}

/* Spins on a thread buffer's flag from the frame-closing side. The owner
 * holds it for one append; if it was preempted while holding it, the CPU
 * is given up instead of spinning for a whole time slice. */
static void lock_buffer_patiently(thread_buffer *tb) {
  unsigned spins = 0;
  while (atomic_flag_test_and_set_explicit(&tb->busy, memory_order_acquire))
    if (++spins % 64 == 0) sched_yield();
}

/* The same with a deadline, for flushes on a signal: the thread holding the
 * flag may be the one the signal interrupted, waiting for this very flush.
 * Returns 0 when locked, -1 when the deadline passed. */
static int lock_buffer_until(thread_buffer *tb, uint64_t deadline_ns) {
  unsigned spins = 0;
  while (atomic_flag_test_and_set_explicit(&tb->busy, memory_order_acquire))
    if (++spins % 64 == 0) {
      if (mono_ns() > deadline_ns) return -1;
      sched_yield();
    }
  return 0;
}

typedef enum frame_mode {
  FRAME_QUEUED, /* about frame_bytes of the queued full buffers (size-triggered) */
  FRAME_ALL,  /* everything appended so far, threads' current buffers too (in order: close_frame) */
  FRAME_FINAL /* FRAME_ALL, and the writer closes: later appends are no-ops */
} frame_mode;

/* Closes a frame. FRAME_QUEUED compresses about frame_bytes of the queue,
 * so frames stay near their nominal size however far behind the queue is.
 * FRAME_ALL and FRAME_FINAL also steal every thread's current buffer; at
 * FRAME_FINAL each buffer is marked closed as it is stolen, and the frame
 * waits for full buffers that appending threads took out before that. */
static int close_frame(stepscope_writer *w, frame_mode mode, stepscope_error *err) {
  pthread_mutex_lock(&w->frame_mu);
  /* on a signal, a thread stuck in the handler mid-append is given 100 ms,
   * then its current buffer stays behind (lost if the process dies) */
  uint64_t deadline = atomic_load(&w->on_signal) ? mono_ns() + 100000000ull : 0;
  if (w->fd < 0) { /* retired */
    pthread_mutex_unlock(&w->frame_mu);
    return STEPSCOPE_E_STATE;
  }
  int final = mode == FRAME_FINAL;

  /* 1. Steal each thread's current buffer (a fresh one starts a new block).
   *
   * A thread's records must reach the file in the order it appended them: a
   * process killed between two frames must leave a gap-free prefix of each
   * thread's records, not its newer ones without older ones. The frame puts
   * the queue's blocks before the stolen buffers, so it takes only what was
   * queued before the stealing began (`snapshot`): a thread's buffer filled
   * and queued meanwhile is newer than the one stolen from it and waits for
   * the next frame. A thread whose older buffer is still on its way to the
   * queue (handing_off), or reached it after the snapshot, keeps its current
   * buffer for a later frame, behind that one. The final frame takes
   * everything: no buffer is swapped out after it stole a thread's, and it
   * waits for those on their way. */
  full_block *stolen = NULL;
  uint64_t snapshot = UINT64_MAX;
  if (mode == FRAME_ALL) {
    pthread_mutex_lock(&w->full_mu);
    snapshot = w->queue_seq;
    pthread_mutex_unlock(&w->full_mu);
  }
  if (mode != FRAME_QUEUED) {
    pthread_mutex_lock(&w->registry_mu);
    if (final) atomic_store(&w->closed, 1);
    for (thread_buffer *tb = w->buffers; tb; tb = tb->next) {
      if (!deadline)
        lock_buffer_patiently(tb);
      else if (lock_buffer_until(tb, deadline) != 0)
        continue;
      if (!final && (atomic_load_explicit(&tb->handing_off, memory_order_acquire) ||
                     atomic_load_explicit(&tb->last_queued, memory_order_relaxed) > snapshot)) {
        atomic_flag_clear_explicit(&tb->busy, memory_order_release);
        continue;
      }
      if (tb->buf.len > 0) {
        full_block *fb = malloc(sizeof *fb);
        if (fb) {
          fb->buf = tb->buf;
          fb->seq = 0;
          fb->next = stolen;
          stolen = fb;
          tb->buf = (byte_buf){0};
        }
        /* on allocation failure the data stays in the buffer for the next
         * frame; at the final frame it is counted as dropped below */
      }
      if (final) {
        if (tb->buf.data) {
          atomic_fetch_add(&w->dropped, count_records(&tb->buf));
          buf_release(&tb->buf);
        }
        tb->closed = 1;
      }
      atomic_flag_clear_explicit(&tb->busy, memory_order_release);
    }
    pthread_mutex_unlock(&w->registry_mu);
    if (final) /* appends that took a full buffer out before they saw `closed` */
      while (atomic_load(&w->handoffs_in_flight) > 0 && (!deadline || mono_ns() < deadline))
        sched_yield();
  }

  /* 2. Take the full list: all of it, what was queued before the snapshot, or about a
   * frame's worth. */
  pthread_mutex_lock(&w->full_mu);
  full_block *full = w->full_head;
  if (mode != FRAME_FINAL) {
    size_t taken = 0, limit = mode == FRAME_QUEUED ? w->opt.frame_bytes : SIZE_MAX;
    full_block *last = NULL;
    for (full_block *b = full; b && taken < limit && b->seq <= snapshot; b = b->next) {
      taken += b->buf.len;
      last = b;
    }
    if (!last) full = NULL;
    if (last) {
      w->full_head = last->next;
      if (!w->full_head) w->full_tail = NULL;
      last->next = NULL;
    }
    w->full_bytes -= taken;
  } else {
    w->full_head = w->full_tail = NULL;
    w->full_bytes = 0;
  }
  pthread_mutex_unlock(&w->full_mu);

  /* 3. Take the pending strings (after the blocks: see the file comment). */
  pthread_mutex_lock(&w->intern_mu);
  byte_buf strings = w->pending_strings;
  w->pending_strings = (byte_buf){0};
  pthread_mutex_unlock(&w->intern_mu);

  size_t n = 1;
  for (full_block *b = full; b; b = b->next)
    n++;
  for (full_block *b = stolen; b; b = b->next)
    n++;
  const byte_buf **pieces = malloc(n * sizeof *pieces);
  int rc = 0;
  if (!pieces) {
    error_set(err, STEPSCOPE_E_NOMEM, 0, "%s: out of memory closing a frame", w->path);
    rc = STEPSCOPE_E_NOMEM;
  } else {
    size_t k = 0;
    pieces[k++] = &strings;
    for (full_block *b = full; b; b = b->next)
      pieces[k++] = &b->buf;
    for (full_block *b = stolen; b; b = b->next)
      pieces[k++] = &b->buf;
    rc = write_frame(w, pieces, k, err);
  }
  if (rc) { /* what could not be written is counted, never silently lost */
    uint64_t lost = 0;
    for (full_block *b = full; b; b = b->next)
      lost += count_records(&b->buf);
    for (full_block *b = stolen; b; b = b->next)
      lost += count_records(&b->buf);
    atomic_fetch_add(&w->dropped, lost);
  }
  free(pieces);
  free(strings.data);
  for (full_block *lists[2] = {full, stolen}, **l = lists; l < lists + 2; l++) {
    full_block *b = *l;
    while (b) {
      full_block *next = b->next;
      recycle_buffer(w, &b->buf);
      free(b);
      b = next;
    }
  }
  pthread_mutex_unlock(&w->frame_mu);
  return rc;
}

static void *flusher_main(void *arg) {
  stepscope_writer *w = arg;
  /* woken 4 times per interval, so a frame is at most a quarter late */
  unsigned period = w->opt.flush_interval_ms / 4 < 200 ? w->opt.flush_interval_ms / 4 : 200;
  if (period == 0) period = 1;
  pthread_mutex_lock(&w->wake_mu);
  while (!w->stopping) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)period * 1000000ull;
    ts.tv_sec += (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    if (!w->frame_wanted) pthread_cond_timedwait(&w->wake_cv, &w->wake_mu, &ts);
    if (w->stopping) break;
    int wanted = w->frame_wanted;
    w->frame_wanted = 0;
    uint64_t now = mono_ns();
    void (*tick_fn)(void *) = NULL; /* the tick is set under wake_mu, maybe after we started */
    void *tick_arg = w->tick_arg;
    if (w->tick_fn && now - w->last_tick_ns >= (uint64_t)w->tick_ms * 1000000ull) {
      w->last_tick_ns = now;
      tick_fn = w->tick_fn;
    }
    pthread_mutex_unlock(&w->wake_mu);
    while (wanted) { /* as many frames as the queue holds */
      if (close_frame(w, FRAME_QUEUED, NULL) == STEPSCOPE_E_STATE) break;
      pthread_mutex_lock(&w->full_mu);
      wanted = w->full_bytes >= w->opt.frame_bytes;
      pthread_mutex_unlock(&w->full_mu);
    }
    if (tick_fn) tick_fn(tick_arg);
    if (now - w->last_frame_ns >= (uint64_t)w->opt.flush_interval_ms * 1000000ull)
      close_frame(w, FRAME_ALL, NULL);
    pthread_mutex_lock(&w->wake_mu);
  }
  pthread_mutex_unlock(&w->wake_mu);
  return NULL;
}

void writer_set_tick(stepscope_writer *w, void (*fn)(void *), void *arg, unsigned interval_ms) {
  pthread_mutex_lock(&w->wake_mu); /* the background thread is already running */
  w->tick_fn = fn;
  w->tick_arg = arg;
  w->tick_ms = interval_ms ? interval_ms : 1000;
  w->last_tick_ns = mono_ns();
  pthread_mutex_unlock(&w->wake_mu);
}

static void writer_free(stepscope_writer *w) {
  for (thread_buffer *tb = w->buffers; tb;) {
    thread_buffer *next = tb->next;
    free(tb->buf.data);
    free(tb);
    tb = next;
  }
  for (full_block *b = w->full_head; b;) {
    full_block *next = b->next;
    free(b->buf.data);
    free(b);
    b = next;
  }
  intern_destroy(w->strings);
  free(w->pending_strings.data);
  free(w->out.data);
  for (unsigned i = 0; i < w->nspare; i++)
    free(w->spare[i]);
  ZSTD_freeCCtx(w->cctx);
  pthread_mutex_destroy(&w->registry_mu);
  pthread_mutex_destroy(&w->full_mu);
  pthread_mutex_destroy(&w->intern_mu);
  pthread_mutex_destroy(&w->frame_mu);
  pthread_mutex_destroy(&w->wake_mu);
  pthread_cond_destroy(&w->wake_cv);
  free(w->path);
  free(w);
}

stepscope_writer *stepscope_writer_open(const char *path, const stepscope_header *header,
                                        const stepscope_writer_options *opt, stepscope_error *err) {
  if (!path || !header) {
    error_set(err, STEPSCOPE_E_ARGUMENT, 0, "stepscope_writer_open: path and header are required");
    return NULL;
  }
  stepscope_writer *w = calloc(1, sizeof *w);
  if (!w) {
    error_set(err, STEPSCOPE_E_NOMEM, 0, "%s: out of memory", path);
    return NULL;
  }
  w->fd = -1;
  pthread_mutex_init(&w->registry_mu, NULL);
  pthread_mutex_init(&w->full_mu, NULL);
  pthread_mutex_init(&w->intern_mu, NULL);
  pthread_mutex_init(&w->frame_mu, NULL);
  pthread_mutex_init(&w->wake_mu, NULL);
  pthread_cond_init(&w->wake_cv, NULL);
  w->generation = atomic_fetch_add(&next_generation, 1);
  if (opt) w->opt = *opt;
  if (!w->opt.frame_bytes) w->opt.frame_bytes = DEFAULT_FRAME_BYTES;
  if (!w->opt.flush_interval_ms) w->opt.flush_interval_ms = DEFAULT_FLUSH_MS;
  /* zstd's fast mode, acceleration 5: about 1.7 times faster than level 1 on
   * trace records for 5.5 instead of 4.6 bytes per kernel record (measured
   * in bench/writer/RESULTS.md). */
  if (!w->opt.compression_level) w->opt.compression_level = DEFAULT_LEVEL;
  w->path = strdup(path);
  w->strings = intern_create();
  w->cctx = ZSTD_createCCtx();
  if (!w->path || !w->strings || !w->cctx) {
    error_set(err, STEPSCOPE_E_NOMEM, 0, "%s: out of memory", path);
    writer_free(w);
    return NULL;
  }
  ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, w->opt.compression_level);
  ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1);

  w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd < 0) {
    error_set(err, STEPSCOPE_E_IO, 0, "%s: cannot create: %s", path, strerror(errno));
    writer_free(w);
    return NULL;
  }
  /* The header is a frame of its own, written now: a process killed at once
   * still leaves a file that says whose it is. */
  stepscope_header h = *header;
  h.format_major = STEPSCOPE_FORMAT_MAJOR;
  h.format_minor = STEPSCOPE_FORMAT_MINOR;
  byte_buf hb = {0};
  int rc = STEPSCOPE_E_NOMEM;
  size_t need = codec_header_max_size(&h);
  if (need > CODEC_MAX_RECORD) {
    error_set(err, STEPSCOPE_E_LIMIT, 0, "%s: header of %zu bytes exceeds the %u-byte limit", path,
              need, CODEC_MAX_RECORD);
    rc = STEPSCOPE_E_LIMIT;
  } else if (buf_reserve(&hb, need) == 0) {
    hb.len = (size_t)(codec_encode_header(hb.data, &h) - hb.data);
    const byte_buf *pieces[1] = {&hb};
    pthread_mutex_lock(&w->frame_mu);
    rc = write_frame(w, pieces, 1, err);
    pthread_mutex_unlock(&w->frame_mu);
  } else {
    error_set(err, STEPSCOPE_E_NOMEM, 0, "%s: out of memory", path);
  }
  free(hb.data);
  if (rc) {
    close(w->fd);
    writer_free(w);
    return NULL;
  }
  if (w->opt.background_flush) {
    /* The background thread never runs a signal handler of the linked
     * tracer (which waits for a flush that may need this thread). */
    if (sc_thread_start_unsignalled(&w->flusher, NULL, flusher_main, w) == 0)
      w->flusher_running = 1;
  }
  return w;
}

uint32_t stepscope_intern_n(stepscope_writer *w, const char *s, size_t len) {
  if (!w || !s || len > CODEC_MAX_RECORD - CODEC_STRING_OVERHEAD) return 0;
  pthread_mutex_lock(&w->intern_mu);
  if (!w->strings) { /* retired */
    pthread_mutex_unlock(&w->intern_mu);
    return 0;
  }
  int is_new = 0;
  uint32_t id = intern_get_or_add(w->strings, s, len, &is_new);
  if (id && is_new) {
    if (buf_reserve(&w->pending_strings, CODEC_STRING_OVERHEAD + len) == 0) {
      byte_buf *b = &w->pending_strings;
      b->len = (size_t)(codec_encode_string(b->data + b->len, id, s, len) - b->data);
    } else {
      id = 0; /* the id stays reserved but unusable; callers see failure */
    }
  }
  pthread_mutex_unlock(&w->intern_mu);
  return id;
}

uint32_t stepscope_intern(stepscope_writer *w, const char *s) {
  return s ? stepscope_intern_n(w, s, strlen(s)) : 0;
}

/* The calling thread's buffer in `w`: a thread-local cache hit, or a new
 * buffer registered with the writer (NULL when out of memory or closed). */
__attribute__((noinline)) static thread_buffer *thread_buffer_register(stepscope_writer *w) {
  thread_buffer *tb = calloc(1, sizeof *tb);
  if (!tb) return NULL;
  atomic_flag_clear(&tb->busy);
  tb->thread = stepscope_thread_id();
  pthread_mutex_lock(&w->registry_mu);
  if (atomic_load_explicit(&w->closed, memory_order_relaxed)) {
    pthread_mutex_unlock(&w->registry_mu);
    free(tb);
    return NULL;
  }
  tb->next = w->buffers;
  w->buffers = tb;
  pthread_mutex_unlock(&w->registry_mu);
  unsigned slot = tls_victim++ % TLS_CACHE_WAYS;
  tls_cache[slot] = (tls_entry){w->generation, tb};
  return tb;
}

static inline thread_buffer *thread_buffer_for(stepscope_writer *w) {
  for (unsigned i = 0; i < TLS_CACHE_WAYS; i++)
    if (tls_cache[i].generation == w->generation) return tls_cache[i].tb;
  return thread_buffer_register(w);
}

/* Hands a full buffer to the frame queue, and ends its being in flight
 * (handoffs_in_flight) before anything that may wait for a closing writer;
 * closes a frame when enough is queued. */
static void hand_off(stepscope_writer *w, thread_buffer *tb, byte_buf full) {
  full_block *fb = malloc(sizeof *fb);
  if (!fb) {
    atomic_fetch_add(&w->dropped, count_records(&full));
    free(full.data);
    atomic_store_explicit(&tb->handing_off, 0, memory_order_release);
    atomic_fetch_sub(&w->handoffs_in_flight, 1);
    return;
  }
  fb->buf = full;
  fb->next = NULL;
  pthread_mutex_lock(&w->full_mu);
  fb->seq = ++w->queue_seq;
  atomic_store_explicit(&tb->last_queued, fb->seq, memory_order_relaxed);
  if (w->full_tail)
    w->full_tail->next = fb;
  else
    w->full_head = fb;
  w->full_tail = fb;
  w->full_bytes += full.len;
  int close_now = w->full_bytes >= w->opt.frame_bytes;
  /* Backpressure: if the background thread falls behind, producers help. */
  int help = w->full_bytes >= 2 * w->opt.frame_bytes;
  pthread_mutex_unlock(&w->full_mu);
  atomic_store_explicit(&tb->handing_off, 0, memory_order_release); /* queued */
  atomic_fetch_sub(&w->handoffs_in_flight, 1); /* queued: a closing frame will find it */
  if (!close_now) return;
  if (w->flusher_running && !help) { /* compression happens off the appending thread */
    pthread_mutex_lock(&w->wake_mu);
    w->frame_wanted = 1;
    pthread_cond_signal(&w->wake_cv);
    pthread_mutex_unlock(&w->wake_mu);
  } else {
    close_frame(w, FRAME_QUEUED, NULL);
  }
}

#define BLOCK_MAX (2 * VARINT_MAX + 2) /* a BLOCK record's encoded size, at most */

/* The append that does not fit the thread's buffer (or finds none): a fresh
 * buffer, which starts with a BLOCK record, replaces it, and the full one
 * goes to the frame queue. Also where a closed writer refuses the record. */
__attribute__((noinline)) static int write_slow(stepscope_writer *w, thread_buffer *tb,
                                                const stepscope_record *rec, size_t need) {
  if (atomic_load_explicit(&w->closed, memory_order_relaxed)) return STEPSCOPE_E_STATE;
  /* The fresh buffer is prepared before taking the spin flag (it may lock). */
  byte_buf fresh = {0};
  size_t cap = need + BLOCK_MAX > BUFFER_BYTES ? need + BLOCK_MAX : BUFFER_BYTES;
  if (take_buffer(w, &fresh, cap) != 0) {
    atomic_fetch_add_explicit(&w->dropped, 1, memory_order_relaxed);
    return STEPSCOPE_E_NOMEM;
  }
  while (atomic_flag_test_and_set_explicit(&tb->busy, memory_order_acquire)) {
  }
  if (tb->closed) {
    atomic_flag_clear_explicit(&tb->busy, memory_order_release);
    free(fresh.data);
    return STEPSCOPE_E_STATE;
  }
  byte_buf full = {0};
  if (tb->buf.cap - tb->buf.len < need) { /* still full (or stolen meanwhile): swap */
    full = tb->buf;
    tb->buf = fresh;
    fresh = (byte_buf){0};
    tb->buf.len = (size_t)(codec_encode_block(&tb->state, tb->buf.data, tb->thread) - tb->buf.data);
    /* until it is queued, the full buffer is in flight: a closing writer waits */
    if (full.len) {
      atomic_store_explicit(&tb->handing_off, 1, memory_order_relaxed);
      atomic_fetch_add(&w->handoffs_in_flight, 1);
    }
  }
  uint8_t *p = codec_encode(&tb->state, tb->buf.data + tb->buf.len, rec);
  tb->buf.len = (size_t)(p - tb->buf.data);
  tb->records++;
  atomic_flag_clear_explicit(&tb->busy, memory_order_release);
  if (fresh.data) recycle_buffer(w, &fresh); /* the flusher swapped ours out meanwhile */
  if (full.len) {
    hand_off(w, tb, full);
  } else if (full.data) {
    recycle_buffer(w, &full);
  }
  return 0;
}

int stepscope_write(stepscope_writer *w, const stepscope_record *rec) {
  if (!w || !rec) return STEPSCOPE_E_ARGUMENT;
  size_t need = codec_bound(rec);
  if (need == 0 || need > CODEC_MAX_RECORD) {
    atomic_fetch_add_explicit(&w->dropped, 1, memory_order_relaxed);
    return need == 0 ? STEPSCOPE_E_ARGUMENT : STEPSCOPE_E_LIMIT;
  }
  thread_buffer *tb = thread_buffer_for(w);
  if (!tb) {
    if (atomic_load_explicit(&w->closed, memory_order_relaxed)) return STEPSCOPE_E_STATE;
    atomic_fetch_add_explicit(&w->dropped, 1, memory_order_relaxed);
    return STEPSCOPE_E_NOMEM;
  }
  /* The hot path: room in the thread's own buffer. A buffer that was stolen
   * by a frame, or cleared by closing, has no room, so a closed writer's
   * refusal costs nothing here. */
  while (atomic_flag_test_and_set_explicit(&tb->busy, memory_order_acquire)) {
  }
  if (tb->buf.cap - tb->buf.len >= need) {
    uint8_t *p = codec_encode(&tb->state, tb->buf.data + tb->buf.len, rec);
    tb->buf.len = (size_t)(p - tb->buf.data);
    tb->records++;
    atomic_flag_clear_explicit(&tb->busy, memory_order_release);
    return 0;
  }
  atomic_flag_clear_explicit(&tb->busy, memory_order_release);
  return write_slow(w, tb, rec, need);
}

int stepscope_writer_flush(stepscope_writer *w, stepscope_error *err) {
  if (!w) return STEPSCOPE_E_ARGUMENT;
  return close_frame(w, FRAME_ALL, err);
}

/* Writes the last frame: a DROPPED record saying how much this writer lost
 * (if anything), then the END record that marks the file closed. */
static int write_end_frame(stepscope_writer *w, uint32_t reason, int sig, stepscope_error *err) {
  uint8_t bytes[BLOCK_MAX + 2 * CODEC_FIXED_MAX];
  codec_state st = {0, 0};
  uint8_t *p = codec_encode_block(&st, bytes, stepscope_thread_id());
  uint64_t dropped = atomic_load(&w->dropped);
  if (dropped) {
    stepscope_record d = {.kind = STEPSCOPE_REC_DROPPED};
    d.u.dropped.time_ns = mono_ns();
    d.u.dropped.count = dropped;
    d.u.dropped.source = STEPSCOPE_DROP_WRITER;
    p = codec_encode(&st, p, &d);
  }
  stepscope_record end = {.kind = STEPSCOPE_REC_END};
  end.u.end.reason = reason;
  end.u.end.signal = (uint32_t)sig;
  p = codec_encode(&st, p, &end);
  byte_buf b = {bytes, (size_t)(p - bytes), sizeof bytes};
  const byte_buf *pieces[1] = {&b};
  pthread_mutex_lock(&w->frame_mu);
  int rc = write_frame(w, pieces, 1, err);
  pthread_mutex_unlock(&w->frame_mu);
  return rc;
}

int writer_retire(stepscope_writer *w, stepscope_error *err) {
  return writer_retire_reason(w, STEPSCOPE_END_CLOSED, 0, err);
}

int writer_retire_reason(stepscope_writer *w, uint32_t reason, int sig, stepscope_error *err) {
  if (!w) return STEPSCOPE_E_ARGUMENT;
  if (reason == STEPSCOPE_END_SIGNAL) atomic_store(&w->on_signal, 1);
  if (w->flusher_running) {
    pthread_mutex_lock(&w->wake_mu);
    w->stopping = 1;
    pthread_cond_signal(&w->wake_cv);
    pthread_mutex_unlock(&w->wake_mu);
    pthread_join(w->flusher, NULL);
  }
  int rc = close_frame(w, FRAME_FINAL, err);
  if (rc == 0) rc = write_end_frame(w, reason, sig, err);
  pthread_mutex_lock(&w->frame_mu);
  if (w->fd >= 0 && close(w->fd) != 0 && rc == 0) {
    error_set(err, STEPSCOPE_E_IO, 0, "%s: close failed: %s", w->path, strerror(errno));
    rc = STEPSCOPE_E_IO;
  }
  w->fd = -1;
  ZSTD_freeCCtx(w->cctx);
  w->cctx = NULL;
  buf_release(&w->out);
  pthread_mutex_unlock(&w->frame_mu);
  pthread_mutex_lock(&w->intern_mu);
  intern_destroy(w->strings);
  w->strings = NULL;
  buf_release(&w->pending_strings);
  pthread_mutex_unlock(&w->intern_mu);
  pthread_mutex_lock(&w->full_mu);
  for (unsigned i = 0; i < w->nspare; i++)
    free(w->spare[i]);
  w->nspare = 0;
  pthread_mutex_unlock(&w->full_mu);
  return rc;
}

int writer_flush_on_signal(stepscope_writer *w) {
  atomic_store(&w->on_signal, 1);
  int rc = close_frame(w, FRAME_ALL, NULL);
  atomic_store(&w->on_signal, 0);
  return rc;
}

int writer_io_failed(stepscope_writer *w) {
  pthread_mutex_lock(&w->frame_mu);
  int failed = w->io_failed;
  pthread_mutex_unlock(&w->frame_mu);
  return failed;
}

int stepscope_writer_close(stepscope_writer *w, stepscope_error *err) {
  if (!w) return STEPSCOPE_E_ARGUMENT;
  int rc = writer_retire(w, err);
  writer_free(w);
  return rc;
}

uint64_t stepscope_writer_dropped(const stepscope_writer *w) {
  return w ? atomic_load(&((stepscope_writer *)w)->dropped) : 0;
}
uint64_t stepscope_writer_bytes_written(const stepscope_writer *w) {
  return w ? atomic_load(&((stepscope_writer *)w)->bytes_written) : 0;
}
uint64_t stepscope_writer_records(const stepscope_writer *w) {
  if (!w) return 0;
  stepscope_writer *mw = (stepscope_writer *)w;
  uint64_t n = 0;
  pthread_mutex_lock(&mw->registry_mu);
  for (thread_buffer *tb = mw->buffers; tb; tb = tb->next) {
    while (atomic_flag_test_and_set_explicit(&tb->busy, memory_order_acquire)) {
    }
    n += tb->records;
    atomic_flag_clear_explicit(&tb->busy, memory_order_release);
  }
  pthread_mutex_unlock(&mw->registry_mu);
  return n;
}
