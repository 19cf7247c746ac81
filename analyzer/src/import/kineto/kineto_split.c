/*
 * kineto_split.c — the two-thread split import of one Kineto document (see
 * kineto_split.h): the helper thread that fills the document's buffer and
 * tokenizes its second half, the grow hook that lets the calling thread
 * follow it, and (at the end of the file) the importer's side of it: the
 * work the helper runs (the events read by kineto_reader.c, stored in a
 * compact form instead of mapped) and the handoff where the caller maps the
 * stored events in order. A file of its own because it is the one part of
 * the importer that runs on two threads: everything that crosses between
 * them is here, the reader and the mapper (kineto_import.h) run on either
 * thread unchanged.
 *
 * Synchronisation: how far the text is written is published under a
 * mutex (the pipe's for gzip, this one's for a plain file) and waited for
 * with its condition variable (wait_filled), so every byte is written
 * before a thread that waited for it reads it. The split point and the
 * flags are under this mutex. The caller's tokenizer sees at most `lo`
 * bytes (a little before the fraction of the expected length) until the
 * point is chosen at or after the fraction, then at most the point until
 * the split is over (finished or abandoned, both after the helper's work
 * has ended): the helper reads only from the point on, the caller's
 * tokenizer writes only before it.
 *
 * The buffer is an anonymous mapping with huge pages asked for (madvise);
 * only the pages written cost memory. A plain file gets its size when
 * opened; a gzip file twice the bound on texts inflated whole
 * (gzip_whole.h) or more, since its trailer's ISIZE is only the last
 * member's length mod 2^32. A text that does not fit (a plain file that
 * grew while read, a gzip text past that room) is an error here where the
 * sequential path would read on: the one difference between the two.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "kineto_split.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gzip_whole.h"
#include "inflate_pipe.h"
#include "kineto_import.h"
#include "sc_clock.h"

#define FILL_CHUNK   ((size_t)1 << 20) /* bytes published at a time */
#define LO_MARGIN    ((size_t)4096)    /* see ssa_split_open */
#define POINT_SEARCH ((size_t)8 << 20) /* how far past `lo` a split point is looked for */

struct ssa_split {
  int fd, gzip;
  ssa_inflate_pipe *pipe; /* gzip: inflating straight into doc (linear mode) */
  unsigned char *doc;
  size_t cap, map_len;
  size_t lo; /* visible before the point is chosen */
  ssa_split_work work;
  void *arg;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu */
  size_t filled; /* plain: bytes read so far */
  int fill_done, fill_error;
  int point_known;
  size_t point; /* SIZE_MAX: no split */
  int work_done;
  int finished; /* the caller is past the split (finished or abandoned) */
  char msg[128];
  /* the caller's thread only */
  size_t main_point;
  int used, abandoned, error_seen;
  /* the helper's thread only: where its reader is */
  size_t read_pos;
  atomic_int cancel;
  /* ssa_import_options.split_trace: said on close; when things happened (ms after open) */
  int trace;
  double t0, t_point, t_work_done, t_at_point, t_finished;
};

static double now_ms(void) {
  return 1e3 * sc_monotonic_s();
}

static atomic_int active_splits;
static atomic_int loader_threads = 1;

/* `at`: the point asked for (ssa_import_options.split_at), taken when in (0, 1) */
static double split_fraction(int gzip, double ratio, size_t size, double at) {
  if (at > 0.0 && at < 1.0) return at;
  /* measured (perf stat -r 7, 2 cores): the helper's part takes longer per
   * byte (it starts when the text gets to the point, copies it into its
   * own buffer, stores every event) and the caller converts the stored
   * events afterwards; 0.5 / 0.6 / 0.7 / 0.8 of the text before the
   * point: hta mtia_rank_0.json.gz 77 / 68 / 61-64 / 66 ms, the same text
   * plain 67 / 61 / 66 (0.6 / 0.7 / 0.8), tracelens xdit_flux.1
   * capture_trace_rank_0.json.gz 39 / 36 / 32-33 / 30 ms, plain 27 / 25 /
   * 29 ms (0.6 / 0.7 / 0.8). Again with events read whole (kineto_fast.c)
   * and the helper in place (2026-11-28, 12 runs each, min wall, 0.65 /
   * 0.7 / 0.75 / 0.8): mtia 43.2 / 45.1 / 47.7 / 50.5 ms, df_index_resolver
   * 30.4 / 28.7 / 28.2 / 29.2, vLLM graph_capture 17.5 / 15.8 / 15.9 /
   * 15.2, trace_diff control 21.2 / 19.7 / 19.9 / 20.5, negative_queue 16.0
   * / 15.5 / 16.1 / 16.7: still 0.7. A point placed from the caller's
   * progress when the text reaches 0.6 (half the rest each, plus 0.05) was
   * tried and was slower on three of seven traces, no faster on the rest:
   * the helper, sharing a core with the inflater, goes slower per byte.
   * Then (names kept in the buffer, 12 runs each, min / median wall, 0.7
   * vs 0.75): 0.75 as fast or faster on the 10 other gzip traces measured,
   * whose text is 13-21 times their compressed size (negative_queue 15.7 /
   * 16.2 vs 15.4 / 15.9 ms, nccl_data 7.9 / 8.2 vs 7.2 / 7.8, b200 7.4 /
   * 7.5 vs 7.1 / 7.3, owlv2 25.4 / 25.9 vs 24.4 / 24.9, df_index_resolver
   * 27.5 / 28.3 vs 27.0 / 27.3, ...), while mtia, 29 times, wants 0.65
   * (37.4 / 39.2 at 0.65, 39.6 / 40.5 at 0.7, 42.6 / 43.6 at 0.75): text that
   * inflates faster reaches the point sooner, so the helper can take more.
   * And texts under 20 MiB want 0.8 (15 runs each, min / median, 0.75 vs
   * 0.8): b200 (14 MB) 6.48 / 7.12 vs 6.23 / 6.62 ms, nccl_data (9.8 MB)
   * 6.70 / 7.52 vs 6.57 / 7.07, ns_resolution (15 MB) 9.90 / 10.57 vs 9.73 /
   * 10.14, sglang bs_32 (17 MB) 8.73 / 9.54 vs 8.32 / 9.14; larger ones
   * 0.75 (negative_queue, 26 MB: 15.38 / 15.64 vs 15.50 / 15.95;
   * df_index_resolver, 54 MB: 26.53 / 27.96 vs 27.55 / 29.15): the helper's
   * start costs the same whatever the size. With skip templates
   * (skip_template.c, 2026-11-28; 10 runs each, min wall, 0.7 / 0.75 /
   * 0.8 / 0.85): 0.8 became faster than 0.75 on most of the 20 other gzip
   * traces (df_index_resolver 26.3 / 24.6 / 23.4 / 23.1 ms, h100 owlv2
   * 24.6 / 23.9 / 22.8 / 22.6) but not on HTA's trace_diff and
   * negative_queue traces (control 17.8 / 16.8 / 16.9 / 17.7, test 16.5 /
   * 15.7 / 16.0 / 16.5, negative_queue 13.9 / 12.8 / 13.1 / 13.7), the ones
   * closest to the goal of docs/hta-comparison.md: 0.75 kept. And mtia,
   * whose second half is 300 thousand metadata events that the templates
   * made cheap, wants the helper to take almost half (14 runs, min /
   * median, 0.5 / 0.55 / 0.6 / 0.65: 33.9 / 35.5, 31.5 / 32.8, 32.7 /
   * 33.8, 33.7 / 34.3 ms): 0.55. An adaptive point (the caller's position
   * over the text's when the text reached a third of its length, read by
   * the helper) was measured too: it moved between 0.4 and 0.98 over three
   * runs of one trace, no signal to place a point with. */
  if (gzip) return ratio >= 24.0 ? 0.55 : size < ((size_t)20 << 20) ? 0.8 : 0.75;
  return 0.7;
}

int ssa_split_wanted(uint64_t len, ssa_split_mode mode) {
  if (mode == SSA_SPLIT_ON) return 1;
  if (mode == SSA_SPLIT_OFF) return 0;
  if (len < SSA_SPLIT_MIN) return 0;
  cpu_set_t set;
  int cores = 1;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  int loaders = atomic_load(&loader_threads), splits = atomic_load(&active_splits) + 1;
  return cores >= 2 * (loaders > splits ? loaders : splits);
}

void ssa_split_loaders(int n) {
  atomic_store(&loader_threads, n > 1 ? n : 1);
}

unsigned char *ssa_split_doc(const ssa_split *sp) {
  return sp->doc;
}
size_t ssa_split_cap(const ssa_split *sp) {
  return sp->cap;
}
size_t ssa_split_point(const ssa_split *sp) {
  return sp->main_point;
}
int ssa_split_cancelled(const ssa_split *sp) {
  return atomic_load_explicit(&((ssa_split *)sp)->cancel, memory_order_relaxed);
}

/* Waits until more than `have` bytes of text are written: their count, or
 * `have` at the end of the text, or -1 on an error. Any thread. */
static long wait_filled(ssa_split *sp, size_t have) {
  if (sp->gzip) return ssa_inflate_pipe_wait(sp->pipe, have);
  pthread_mutex_lock(&sp->mu);
  while (sp->filled <= have && !sp->fill_done)
    pthread_cond_wait(&sp->cv, &sp->mu);
  long r = sp->filled > have ? (long)sp->filled : sp->fill_error ? -1 : (long)have;
  pthread_mutex_unlock(&sp->mu);
  return r;
}

static long pread_retry(int fd, void *buf, size_t n, size_t off) {
  for (;;) {
    ssize_t got = pread(fd, buf, n, (off_t)off);
    if (got >= 0 || errno != EINTR) return (long)got;
  }
}

/* Plain file: reads the whole text into doc, publishing as it goes. */
static void fill_plain(ssa_split *sp) {
  size_t have = 0;
  int failed = 0;
  for (;;) {
    if (ssa_split_cancelled(sp)) break;
    size_t n = sp->cap - have;
    if (n > FILL_CHUNK) n = FILL_CHUNK;
    unsigned char one;
    long got =
        n ? pread_retry(sp->fd, sp->doc + have, n, have) : pread_retry(sp->fd, &one, 1, have);
    if (got < 0) {
      snprintf(sp->msg, sizeof sp->msg, "%s", strerror(errno));
      failed = 1;
      break;
    }
    if (got == 0) break;
    if (n == 0) {
      snprintf(sp->msg, sizeof sp->msg, "more text than the file's size when opened (%zu bytes)",
               sp->cap);
      failed = 1;
      break;
    }
    have += (size_t)got;
    pthread_mutex_lock(&sp->mu);
    sp->filled = have;
    pthread_cond_broadcast(&sp->cv);
    pthread_mutex_unlock(&sp->mu);
  }
  pthread_mutex_lock(&sp->mu);
  sp->fill_done = 1;
  sp->fill_error = failed;
  pthread_cond_broadcast(&sp->cv);
  pthread_mutex_unlock(&sp->mu);
}

static int is_blank_byte(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Whether the '{' at j (> 0) may open an element of an array of objects:
 * it follows a newline and blanks (Kineto writes one event per line, and a
 * raw newline is never inside a JSON string), or, on one line (a trace
 * written again by json.dump: TraceLens' xdit and sglang traces), a ','
 * that follows a '}' (an object's end, then the next: "}, {" or "},{"),
 * blanks allowed between. Only a likely place: the caller still checks what
 * is really there when it arrives (a string holding "}, {" makes it read on
 * alone). */
static int opens_element(const unsigned char *doc, size_t j) {
  size_t i = j;
  int newline = 0;
  while (i > 0 && is_blank_byte(doc[i - 1]))
    newline |= doc[--i] == '\n';
  if (newline) return 1;
  if (i == 0 || doc[--i] != ',') return 0;
  while (i > 0 && is_blank_byte(doc[i - 1]))
    i--;
  return i > 0 && doc[i - 1] == '}';
}

/* The first '{' at or after `from` that may open an element of an array
 * of objects (opens_element), before from + POINT_SEARCH, following the
 * text as it is written; SIZE_MAX when there is none. */
static size_t find_point(ssa_split *sp, size_t from) {
  size_t stop = from + POINT_SEARCH, i = from, avail = from;
  for (;;) {
    if (ssa_split_cancelled(sp) || i >= stop) return SIZE_MAX;
    if (i >= avail) {
      long f = wait_filled(sp, avail);
      if (f < 0 || (size_t)f <= avail) return SIZE_MAX; /* the end, or an error */
      avail = (size_t)f;
      continue;
    }
    const unsigned char *b = memchr(sp->doc + i, '{', avail - i);
    if (!b) {
      i = avail;
      continue;
    }
    size_t j = (size_t)(b - sp->doc);
    if (j > 0 && opens_element(sp->doc, j)) return j;
    i = j + 1;
  }
}

long ssa_split_follow(void *ctx, size_t visible) {
  ssa_split *sp = ctx;
  if (ssa_split_cancelled(sp)) return (long)visible; /* the end, as far as the work goes */
  long f = wait_filled(sp, visible);
  if (f < 0) return -1;
  sp->read_pos = (size_t)f;
  return f;
}

static void *helper(void *arg) {
  ssa_split *sp = arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  if (!sp->gzip) fill_plain(sp);
  size_t point = find_point(sp, sp->lo + LO_MARGIN);
  pthread_mutex_lock(&sp->mu);
  sp->t_point = now_ms() - sp->t0;
  sp->point = point;
  sp->point_known = 1;
  pthread_cond_broadcast(&sp->cv);
  pthread_mutex_unlock(&sp->mu);
  if (point != SIZE_MAX && !ssa_split_cancelled(sp)) {
    sp->read_pos = point;
    sp->work(sp->arg, sp, sp->doc, point);
  }
  pthread_mutex_lock(&sp->mu);
  sp->t_work_done = now_ms() - sp->t0;
  sp->work_done = 1;
  pthread_cond_broadcast(&sp->cv);
  pthread_mutex_unlock(&sp->mu);
  return NULL;
}

ssa_split *ssa_split_open(int fd, int gzip, size_t size, const ssa_import_options *opt,
                          ssa_split_work work, void *arg) {
  if (size == 0) return NULL;
  ssa_split *sp = calloc(1, sizeof *sp);
  if (!sp) return NULL;
  sp->fd = fd;
  sp->gzip = gzip;
  /* gzip: the trailer's ISIZE only says how large the text probably is
   * (several members, a truncated or damaged file): room for twice the
   * bound on texts inflated whole is reserved, only the pages written
   * cost memory, and a text that still does not fit is the one case that
   * differs from the sequential path (an error). Whole chunks for the pipe. */
  sp->cap = gzip ? (2 * ssa_gzip_whole_bound() / SSA_PIPE_CHUNK + 1) * SSA_PIPE_CHUNK : size;
  if (gzip && sp->cap < size + 2 * SSA_PIPE_CHUNK)
    sp->cap = (size / SSA_PIPE_CHUNK + 2) * SSA_PIPE_CHUNK;
  /* a little before the fraction, so that the caller's view never ends in
   * the blanks just before the point (it would then meet the point inside
   * the tokenizer, not between two events, and abandon the split) */
  struct stat st;
  int stat_ok = fstat(fd, &st) == 0;
  double ratio = stat_ok && st.st_size > 0 ? (double)size / (double)st.st_size : 0.0;
  sp->lo = (size_t)((double)size * split_fraction(gzip, ratio, size, opt->split_at));
  sp->lo = sp->lo > LO_MARGIN ? sp->lo - LO_MARGIN : 0;
  sp->trace = opt->split_trace;
  sp->work = work;
  sp->arg = arg;
  sp->point = sp->main_point = SIZE_MAX;
  atomic_init(&sp->cancel, 0);
  sp->t0 = now_ms();
  void *m = mmap(NULL, sp->cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (m == MAP_FAILED) {
    free(sp);
    return NULL;
  }
  sp->doc = m;
  /* huge pages where the system gives them on request: a few hundred
   * faults fewer per 10 MB of text (measured: 17 thousand faults, 12 % of
   * the samples, on a 54 MB text with 4 KiB pages) */
  madvise(m, sp->cap, MADV_HUGEPAGE);
  pthread_mutex_init(&sp->mu, NULL);
  pthread_cond_init(&sp->cv, NULL);
  if (gzip &&
      !(sp->pipe = ssa_inflate_pipe_open_linear(
            fd, sp->doc, sp->cap, SSA_PIPE_CHUNK,
            stat_ok ? stepscope_inflate_limit(&opt->inflate, (uint64_t)st.st_size) : UINT64_MAX)))
    goto fail;
  if (pthread_create(&sp->th, NULL, helper, sp) != 0) {
    if (sp->pipe) ssa_inflate_pipe_close(sp->pipe, NULL, 0);
    goto fail;
  }
  atomic_fetch_add(&active_splits, 1);
  return sp;
fail:
  pthread_mutex_destroy(&sp->mu);
  pthread_cond_destroy(&sp->cv);
  munmap(m, sp->cap);
  free(sp);
  return NULL;
}

long ssa_split_grow(void *ctx, size_t visible) {
  ssa_split *sp = ctx;
  for (;;) {
    pthread_mutex_lock(&sp->mu);
    int known = sp->point_known, finished = sp->finished;
    size_t point = sp->point;
    pthread_mutex_unlock(&sp->mu);
    size_t limit = finished || (known && point == SIZE_MAX) ? SIZE_MAX : known ? point : sp->lo;
    if (visible >= limit) {
      pthread_mutex_lock(&sp->mu);
      if (known) {
        /* at the split point in another state than the one expected: the
         * helper's work is not used; the rest is read here */
        atomic_store(&sp->cancel, 1);
        while (!sp->work_done)
          pthread_cond_wait(&sp->cv, &sp->mu);
        sp->finished = 1;
        sp->abandoned = 1;
        sp->main_point = SIZE_MAX;
      } else {
        while (!sp->point_known)
          pthread_cond_wait(&sp->cv, &sp->mu);
      }
      pthread_mutex_unlock(&sp->mu);
      continue;
    }
    long f = wait_filled(sp, visible);
    if (f < 0) {
      sp->error_seen = 1;
      return -1;
    }
    if ((size_t)f <= visible) return (long)visible;
    if ((size_t)f >= limit) {
      f = (long)limit;
      if (known) sp->main_point = point;
    }
    return f;
  }
}

size_t ssa_split_finish(ssa_split *sp) {
  sp->t_at_point = now_ms() - sp->t0;
  pthread_mutex_lock(&sp->mu);
  while (!sp->work_done)
    pthread_cond_wait(&sp->cv, &sp->mu);
  sp->finished = 1;
  sp->main_point = SIZE_MAX;
  size_t v = sp->read_pos; /* the helper's reader had these bytes */
  pthread_mutex_unlock(&sp->mu);
  sp->t_finished = now_ms() - sp->t0; /* the helper's reader had these bytes */
  return v;
}

void ssa_split_used(ssa_split *sp) {
  sp->used = 1;
}

int ssa_split_close(ssa_split *sp, char *msg, size_t cap) {
  atomic_store(&sp->cancel, 1);
  pthread_join(sp->th, NULL);
  const char *verdict = sp->used ? "used" : sp->abandoned ? "abandoned" : "alone";
  if (sp->trace)
    fprintf(stderr,
            "kineto split: %s (point %zu, lo %zu; ms: point chosen %.1f, caller at it %.1f, helper "
            "done %.1f, "
            "handed over %.1f, closed %.1f)\n",
            verdict, sp->point_known ? sp->point : SIZE_MAX, sp->lo, sp->t_point, sp->t_at_point,
            sp->t_work_done, sp->t_finished, now_ms() - sp->t0);
  char m[128] = "";
  int pipe_rc = sp->pipe ? ssa_inflate_pipe_close(sp->pipe, m, sizeof m) : 0;
  int failed = sp->error_seen;
  if (msg && cap) snprintf(msg, cap, "%s", !failed ? "" : sp->gzip ? m : sp->msg);
  pthread_mutex_destroy(&sp->mu);
  pthread_cond_destroy(&sp->cv);
  munmap(sp->doc, sp->cap);
  atomic_fetch_sub(&active_splits, 1);
  free(sp);
  return !failed ? 0 : pipe_rc == SSA_PIPE_OVER_LIMIT ? SSA_PIPE_OVER_LIMIT : -1;
}

/* ---- one document on two threads (kineto_split.h) ----
 *
 * The helper's import (split_work) reads the events from the split point
 * with the same read_event as the caller's, into a kimport of its own whose
 * `store` is set: each event is then appended to an arena in a compact form
 * (ssa_kineto_split_store: the numbers, the name and category text, the NCCL fields
 * only when there are some) instead of being converted. The caller, at the
 * split point inside the events array (ssa_kineto_split_handoff), converts them in
 * order with ssa_kineto_convert, so records, names and collectives come in the
 * sequential order, and resumes at the ']' where the helper stopped.
 * Events that ssa_kineto_convert only counts (only_counted: ph other than "X",
 * i.e. flows, instants, metadata, two thirds of some traces; Python
 * functions, nine tenths of vLLM's capture traces) are counted by the
 * helper instead of stored. */

typedef struct ksplit_out {
  unsigned char *arena;
  size_t len, cap;
  int ok;       /* the helper reached the array's ']' with no error */
  int depth;    /* the events array's depth it assumed */
  uint64_t end; /* document offset of that ']' */
  uint64_t truncated_names, bad_utf8, first_bad_utf8;
  uint64_t events_whole, events_by_token;
  uint64_t only_counted; /* events ssa_kineto_convert only counts (only_counted): not stored */
  int fast;              /* the helper reads events whole when it can (the caller's switch) */
  int keep_inputs;       /* CPU ops' input args kept (the caller's op_inputs) */
  int keep_modules;      /* module events imported (the caller's op_modules) */
  int keep_names;        /* thread_name events kept (the caller's thread_names) */
} ksplit_out;

enum {
  KS_TS = 1,
  KS_DUR = 2,
  KS_CORR = 4,
  KS_STREAM = 8,
  KS_DEVICE = 16,
  KS_BYTES = 32,
  KS_EXT = 64,
  KS_NCCL = 128,
  KS_WAIT_STREAM = 256,
  KS_WAIT_CORR = 512
};

typedef struct ksrec {
  int64_t ts, dur;
  uint64_t pid, tid, corr, stream, device, bytes, ext_id, wait_stream, wait_corr;
  uint32_t grid[3], block[3];
  uint32_t name_len;
  uint32_t inputs_len; /* a CPU op's inputs text that follows (kevent.inputs; 0 none) */
  uint16_t flags;
  uint8_t cat, cat_text_len, tid_name_len, arg_name_len;
  char ph[4];
} ksrec;

/* The fields copied as they are between a kevent and its stored form, in
 * one list each for ssa_kineto_split_store and split_load (X-macros): the numbers, the
 * has_ flags (one bit each in ksrec.flags) and, for NCCL metadata, the
 * numbers, flags and short texts of ksnccl. */
#define KSREC_NUMBERS(X)                                                                           \
  X(ts)                                                                                            \
  X(dur) X(pid) X(tid) X(corr) X(stream) X(device) X(bytes) X(ext_id) X(wait_stream) X(wait_corr)
/* laid out by hand: clang-format 14 moves these lists on every run */
// clang-format off
#define KSREC_FLAGS(X)                                                                             \
  X(has_ts, KS_TS) X(has_dur, KS_DUR) X(has_corr, KS_CORR) X(has_stream, KS_STREAM)                \
  X(has_device, KS_DEVICE) X(has_bytes, KS_BYTES) X(has_ext_id, KS_EXT)                           \
  X(has_wait_stream, KS_WAIT_STREAM) X(has_wait_corr, KS_WAIT_CORR)
#define KSNCCL_SCALARS(X)                                                                          \
  X(in_nelems) X(out_nelems) X(group_size) X(seq) X(rank_arg)                                     \
  X(has_in) X(has_out) X(has_group_size) X(has_seq) X(has_rank_arg)
// clang-format on
#define KSNCCL_TEXTS(X) X(coll_name) X(dtype) X(pg_name) X(pg_desc)

typedef struct ksnccl {
  uint64_t in_nelems, out_nelems, group_size, seq, rank_arg;
  uint8_t has_in, has_out, has_group_size, has_seq, has_rank_arg;
  char coll_name[KSHORT], dtype[KSHORT], pg_name[KSHORT], pg_desc[KSHORT];
  uint32_t ranks_len;
} ksnccl;

static int split_put(ksplit_out *o, const void *p, size_t n) {
  if (o->len + n > o->cap) {
    size_t cap = o->cap ? o->cap : (size_t)1 << 20;
    while (cap < o->len + n)
      cap *= 2;
    unsigned char *a = realloc(o->arena, cap);
    if (!a) return -1;
    o->arena = a;
    o->cap = cap;
  }
  memcpy(o->arena + o->len, p, n);
  o->len += n;
  return 0;
}

int ssa_kineto_split_store(kimport *k) {
  const kevent *ev = &k->ev;
  ksplit_out *o = k->store;
  if (only_counted(ev)) { /* all ssa_kineto_convert does with them: count */
    o->only_counted++;
    return 0;
  }
  ksrec h;
  memset(&h, 0, sizeof h);
#define PUT(f)           h.f = ev->f;
#define PUT_FLAG(f, bit) h.flags |= ev->f ? bit : 0;
  KSREC_NUMBERS(PUT)
  KSREC_FLAGS(PUT_FLAG)
#undef PUT_FLAG
#undef PUT
  memcpy(h.grid, ev->grid, sizeof h.grid);
  memcpy(h.block, ev->block, sizeof h.block);
  h.name_len = (uint32_t)ev->name_len;
  int nccl = ev->coll_name[0] || ev->dtype[0] || ev->pg_name[0] || ev->pg_desc[0] ||
             ev->pg_ranks[0] || ev->has_in || ev->has_out || ev->has_group_size || ev->has_seq ||
             ev->has_rank_arg;
  if (nccl) h.flags |= KS_NCCL;
  h.cat = (uint8_t)ev->cat;
  h.cat_text_len = (uint8_t)strlen(ev->cat_text);
  h.tid_name_len = (uint8_t)strlen(ev->tid_name); /* < KSHORT: fits */
  h.arg_name_len = (uint8_t)strlen(ev->arg_name);
  memcpy(h.ph, ev->ph, sizeof h.ph);
  size_t ranks_len = nccl ? strlen(ev->pg_ranks) : 0;
  h.inputs_len = ev->inputs_cut ? 0 : (uint32_t)ev->inputs_len; /* cut: the mapper keeps none */
  if (split_put(o, &h, sizeof h) || split_put(o, ev->name, h.name_len) ||
      split_put(o, ev->cat_text, h.cat_text_len) || split_put(o, ev->tid_name, h.tid_name_len) ||
      split_put(o, ev->arg_name, h.arg_name_len) || split_put(o, ev->inputs, h.inputs_len))
    return STEPSCOPE_E_NOMEM;
  if (nccl) {
    ksnccl n;
    memset(&n, 0, sizeof n);
#define PUT(f)      n.f = ev->f;
#define PUT_TEXT(f) memcpy(n.f, ev->f, sizeof n.f);
    KSNCCL_SCALARS(PUT)
    KSNCCL_TEXTS(PUT_TEXT)
#undef PUT_TEXT
#undef PUT
    n.ranks_len = (uint32_t)ranks_len;
    if (split_put(o, &n, sizeof n) || split_put(o, ev->pg_ranks, ranks_len))
      return STEPSCOPE_E_NOMEM;
  }
  static const unsigned char zero[8];
  return split_put(o, zero, (8 - o->len % 8) % 8) ? STEPSCOPE_E_NOMEM : 0;
}

/* The stored event at `p` into k->ev; returns the next one. */
static const unsigned char *split_load(kimport *k, const unsigned char *p) {
  kevent *ev = &k->ev;
  const unsigned char *start = p;
  ksrec h;
  memcpy(&h, p, sizeof h);
  p += sizeof h;
#define GET(f)           ev->f = h.f;
#define GET_FLAG(f, bit) ev->f = (h.flags & bit) != 0;
  KSREC_NUMBERS(GET)
  KSREC_FLAGS(GET_FLAG)
#undef GET_FLAG
#undef GET
  memcpy(ev->grid, h.grid, sizeof ev->grid);
  memcpy(ev->block, h.block, sizeof ev->block);
  ev->cat = h.cat;
  memcpy(ev->ph, h.ph, sizeof ev->ph);
  ev->name_len = h.name_len;
  memcpy(ev->name, p, h.name_len);
  ev->name[h.name_len] = 0;
  p += h.name_len;
  memcpy(ev->cat_text, p, h.cat_text_len);
  ev->cat_text[h.cat_text_len] = 0;
  p += h.cat_text_len;
  memcpy(ev->tid_name, p, h.tid_name_len);
  ev->tid_name[h.tid_name_len] = 0;
  p += h.tid_name_len;
  memcpy(ev->arg_name, p, h.arg_name_len);
  ev->arg_name[h.arg_name_len] = 0;
  p += h.arg_name_len;
  memcpy(ev->inputs, p, h.inputs_len); /* < KINPUTS: it fitted in the helper's kevent */
  ev->inputs_len = h.inputs_len;
  ev->inputs_cut = 0;
  p += h.inputs_len;
  if (h.flags & KS_NCCL) {
    ksnccl n;
    memcpy(&n, p, sizeof n);
    p += sizeof n;
#define GET(f)      ev->f = n.f;
#define GET_TEXT(f) memcpy(ev->f, n.f, sizeof ev->f);
    KSNCCL_SCALARS(GET)
    KSNCCL_TEXTS(GET_TEXT)
#undef GET_TEXT
#undef GET
    memcpy(ev->pg_ranks, p, n.ranks_len);
    ev->pg_ranks[n.ranks_len] = 0;
    p += n.ranks_len;
  } else {
    ev->coll_name[0] = ev->dtype[0] = ev->pg_name[0] = ev->pg_desc[0] = ev->pg_ranks[0] = 0;
    ev->has_in = ev->has_out = ev->has_group_size = ev->has_seq = ev->has_rank_arg = 0;
    ev->in_nelems = ev->out_nelems = ev->group_size = ev->seq = ev->rank_arg = 0;
  }
  size_t used = (size_t)(p - start);
  return start + used + (8 - used % 8) % 8;
}

/* The helper's work: the events from `at` to the ']' that closes their
 * array, stored in the ksplit_out `arg`. */
static void split_work(void *arg, ssa_split *sp, const unsigned char *doc, size_t at) {
  ksplit_out *o = arg;
  /* the events array is at depth 2 in the object form, 1 in the array
   * form (the first byte that is not blank says which: the caller never
   * writes to it) */
  size_t i = 0;
  while (i < at && (doc[i] == ' ' || doc[i] == '\n' || doc[i] == '\r' || doc[i] == '\t'))
    i++;
  if (i >= at || (doc[i] != '{' && doc[i] != '[')) return;
  int depth = doc[i] == '{' ? 2 : 1;
  kimport *w = calloc(1, sizeof *w);
  if (!w) return;
  /* in place from `at` over the document's buffer, which is not written
   * (the caller reads it again when it abandons the split) */
  if (js_init_buffer_grow(&w->js, (void *)doc, ssa_split_cap(sp), at, ssa_split_follow, sp)) {
    free(w);
    return;
  }
  js_set_readonly(&w->js);
  js_enter_array_in_place(&w->js, at, depth);
  w->name = "";
  w->store = o;
  w->fast = o->fast;
  w->ev.keep_inputs = o->keep_inputs;
  w->ev.keep_modules = o->keep_modules;
  w->ev.keep_names = o->keep_names;
  for (uint64_t n = 0;; n++) {
    if ((n & 255) == 0 && ssa_split_cancelled(sp)) break;
    js_kind t;
    if (ssa_kineto_next_element(w, &t)) break;
    if (t == JS_END_ARRAY) {
      o->ok = w->js.depth == depth - 1;
      o->end = w->js.tok_offset;
      break;
    }
  }
  o->depth = depth;
  o->truncated_names = w->truncated_names;
  o->events_whole = w->events_whole;
  o->events_by_token = w->events_by_token;
  o->bad_utf8 = w->js.bad_utf8;
  o->first_bad_utf8 = w->js.first_bad_utf8_offset;
  js_free(&w->js);
  free(w);
}

/* After an event, with the caller's view ending at the split point: when
 * only a ',' and blanks lie before it inside the events array, the helper's
 * events are converted here and the tokenizer goes on at their ']'. */
int ssa_kineto_split_handoff(kimport *k) {
  k->fast_next = NULL; /* the stream may go on elsewhere */
  if (!js_at_array_gap(&k->js)) return 0;
  size_t visible = ssa_split_finish(k->split);
  const ksplit_out *o = k->split_res;
  if (!o->ok || o->depth != js_depth(&k->js)) return 0; /* read sequentially from here */
  for (const unsigned char *p = o->arena, *e = o->arena + o->len; p < e;) {
    p = split_load(k, p);
    int rc = ssa_kineto_convert(k);
    if (rc) return rc;
  }
  k->truncated_names += o->truncated_names;
  k->events += o->only_counted;
  k->ignored += o->only_counted;
  k->events_whole += o->events_whole;
  k->events_by_token += o->events_by_token;
  if (o->bad_utf8) {
    if (!k->js.bad_utf8) k->js.first_bad_utf8_offset = o->first_bad_utf8;
    k->js.bad_utf8 += o->bad_utf8;
  }
  js_resume_at(&k->js, o->end, visible);
  ssa_split_used(k->split);
  return 0;
}

/* Imports the file on `fd` (plain, or gzip with `size` bytes of text per its
 * trailer) through the split: 1 and the import's status in *rc_out, or 0
 * when the helper cannot be had (read the file another way). */
int ssa_kineto_import_split(int fd, int gzip, size_t size, const char *path,
                            const ssa_import_options *opt, ssa_rank *r, stepscope_error *err,
                            int *rc_out) {
  ksplit_out *o = calloc(1, sizeof *o);
  if (!o) return 0;
  o->fast = !opt->fast_off;
  o->keep_inputs = opt->op_inputs;
  o->keep_modules = opt->op_modules;
  o->keep_names = opt->thread_names;
  ssa_split *sp = ssa_split_open(fd, gzip, size, opt, split_work, o);
  if (!sp) {
    free(o);
    return 0;
  }
  int rc = ssa_kineto_import(NULL, NULL, NULL, 0, sp, o, path, opt, r, err);
  char msg[128];
  int closed = ssa_split_close(sp, msg, sizeof msg);
  struct stat st;
  if (closed == SSA_PIPE_OVER_LIMIT && err && fstat(fd, &st) == 0) {
    stepscope_inflate_limit_error(err, path, &opt->inflate, (uint64_t)st.st_size);
    rc = err->code;
  } else if (closed && err) {
    char m[sizeof err->message];
    if (gzip)
      snprintf(m, sizeof m,
               "%s: gzip data is corrupt or truncated (%s) near byte %llu of the JSON text", path,
               msg, (unsigned long long)err->offset);
    else
      snprintf(m, sizeof m, "%s: read error (%s) near byte %llu", path, msg,
               (unsigned long long)err->offset);
    snprintf(err->message, sizeof err->message, "%s", m);
    err->code = gzip ? STEPSCOPE_E_FORMAT : STEPSCOPE_E_IO;
    rc = err->code;
  }
  free(o->arena);
  free(o);
  *rc_out = rc;
  return 1;
}
