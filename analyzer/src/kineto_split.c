/*
 * kineto_split.c — see kineto_split.h: the helper thread that fills the
 * document's buffer and tokenizes its second half, and the grow hook that
 * lets the calling thread follow it.
 *
 * Synchronisation: one mutex and one condition variable guard `filled`
 * (bytes written), the split point and the flags; the bytes themselves are
 * written by the helper before it publishes them under the mutex, and read
 * by the caller only after it has seen them published (the grow hook takes
 * the mutex), so the mutex orders every hand-over. The caller's tokenizer
 * sees at most `lo` bytes (a fraction of the expected length) until the
 * point is chosen at or after `lo`, then at most the point until the split
 * is over (finished or abandoned): the helper's work reads only from the
 * point on, the caller's tokenizer writes only before it, and after
 * ssa_split_finish or an abandon the helper's work has ended.
 *
 * The buffer is an anonymous private mapping of the expected length (the
 * plain file's size, the gzip trailer's ISIZE): pages are faulted in as the
 * text is written. Text beyond it (a file that grew, gzip members before
 * the last one) is an error ("more text than expected"), the one case where
 * this path does not read what the sequential one would.
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
#include <unistd.h>

#include "inflate_pipe.h"

#define FILL_CHUNK ((size_t)1 << 20)  /* bytes published at a time */
#define LO_MARGIN ((size_t)4096)     /* see ssa_split_open */
#define POINT_SEARCH ((size_t)8 << 20) /* how far past `lo` a split point is looked for */

struct ssa_split {
  int fd, gzip;
  ssa_inflate_pipe *pipe;
  unsigned char *doc;
  size_t cap;
  size_t lo;                 /* visible before the point is chosen */
  ssa_split_work work;
  void *arg;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu */
  size_t filled;
  int fill_done, fill_error;
  int point_known;
  size_t point;              /* SIZE_MAX: no split */
  int work_done;
  int finished;              /* the caller is past the split (finished or abandoned) */
  int error_seen;            /* the grow hook returned -1 */
  char msg[128];
  /* the caller's thread only */
  size_t main_point;
  int used, abandoned;
  atomic_int cancel;
};

static atomic_int active_splits;
static atomic_ulong count_used, count_abandoned, count_alone;

static double split_fraction(int gzip) {
  const char *v = getenv("STEPSCOPE_KINETO_SPLIT_AT");
  if (v) {
    double f = atof(v);
    if (f > 0.0 && f < 1.0) return f;
  }
  return gzip ? 0.55 : 0.5;
}

int ssa_split_wanted(uint64_t len) {
  const char *v = getenv("STEPSCOPE_KINETO_SPLIT");
  if (v && !strcmp(v, "on")) return 1;
  if (v && !strcmp(v, "off")) return 0;
  if (len < SSA_SPLIT_MIN) return 0;
  cpu_set_t set;
  int cores = 1;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  return cores >= 2 && atomic_load(&active_splits) == 0;
}

unsigned char *ssa_split_doc(const ssa_split *sp) { return sp->doc; }
size_t ssa_split_cap(const ssa_split *sp) { return sp->cap; }
size_t ssa_split_point(const ssa_split *sp) { return sp->main_point; }
int ssa_split_cancelled(const ssa_split *sp) {
  return atomic_load_explicit(&((ssa_split *)sp)->cancel, memory_order_relaxed);
}

static void publish(ssa_split *sp, size_t filled) {
  pthread_mutex_lock(&sp->mu);
  sp->filled = filled;
  pthread_cond_broadcast(&sp->cv);
  pthread_mutex_unlock(&sp->mu);
}

static long pread_retry(int fd, void *buf, size_t n, size_t off) {
  for (;;) {
    ssize_t got = pread(fd, buf, n, (off_t)off);
    if (got >= 0 || errno != EINTR) return (long)got;
  }
}

/* Reads the whole text into doc, publishing as it goes. 0, or -1 (msg). */
static int fill(ssa_split *sp, size_t *out) {
  size_t have = 0;
  for (;;) {
    if (ssa_split_cancelled(sp)) break;
    size_t n = sp->cap - have;
    if (n > FILL_CHUNK) n = FILL_CHUNK;
    unsigned char one;
    long got = n == 0    ? (sp->gzip ? ssa_inflate_pipe_read(sp->pipe, &one, 1) : pread_retry(sp->fd, &one, 1, have))
               : sp->gzip ? ssa_inflate_pipe_read(sp->pipe, sp->doc + have, n)
                          : pread_retry(sp->fd, sp->doc + have, n, have);
    if (got < 0) {
      if (!sp->gzip) snprintf(sp->msg, sizeof sp->msg, "%s", strerror(errno));
      *out = have;
      return -1;
    }
    if (got == 0) break;
    if (n == 0) {
      snprintf(sp->msg, sizeof sp->msg, "more text than expected (%zu bytes)", sp->cap);
      *out = have;
      return -1;
    }
    have += (size_t)got;
    publish(sp, have);
  }
  *out = have;
  return 0;
}

/* The first '{' that follows a newline and blanks at or after lo, before
 * lo + POINT_SEARCH; SIZE_MAX when there is none. */
static size_t find_point(const unsigned char *doc, size_t len, size_t lo) {
  size_t end = len - lo > POINT_SEARCH ? lo + POINT_SEARCH : len;
  for (size_t i = lo; i < end; i++) {
    const unsigned char *nl = memchr(doc + i, '\n', end - i);
    if (!nl) break;
    size_t j = (size_t)(nl - doc) + 1;
    while (j < len && (doc[j] == ' ' || doc[j] == '\t' || doc[j] == '\r')) j++;
    if (j < len && doc[j] == '{') return j;
    i = j - 1;
  }
  return SIZE_MAX;
}

static void *helper(void *arg) {
  ssa_split *sp = arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  size_t have = 0;
  int rc = fill(sp, &have);
  if (sp->gzip) {
    char m[128];
    if (ssa_inflate_pipe_close(sp->pipe, m, sizeof m) && rc == 0) {
      rc = -1;
      snprintf(sp->msg, sizeof sp->msg, "%s", m);
    } else if (rc && m[0]) {
      snprintf(sp->msg, sizeof sp->msg, "%s", m);
    }
    sp->pipe = NULL;
  }
  size_t point = rc == 0 && have > sp->lo + LO_MARGIN && !ssa_split_cancelled(sp) ? find_point(sp->doc, have, sp->lo + LO_MARGIN) : SIZE_MAX;
  pthread_mutex_lock(&sp->mu);
  sp->filled = have;
  sp->fill_done = 1;
  sp->fill_error = rc != 0;
  sp->point = point;
  sp->point_known = 1;
  pthread_cond_broadcast(&sp->cv);
  pthread_mutex_unlock(&sp->mu);
  if (point != SIZE_MAX && !ssa_split_cancelled(sp)) sp->work(sp->arg, sp, sp->doc, have, point);
  pthread_mutex_lock(&sp->mu);
  sp->work_done = 1;
  pthread_cond_broadcast(&sp->cv);
  pthread_mutex_unlock(&sp->mu);
  return NULL;
}

ssa_split *ssa_split_open(int fd, int gzip, size_t size, ssa_split_work work, void *arg) {
  if (size == 0) return NULL;
  ssa_split *sp = calloc(1, sizeof *sp);
  if (!sp) return NULL;
  sp->fd = fd;
  sp->gzip = gzip;
  sp->cap = size;
  /* a little before the fraction, so that the caller's view never ends in
   * the blanks just before the point (it would then meet the point inside
   * the tokenizer, not between two events, and abandon the split) */
  sp->lo = (size_t)((double)size * split_fraction(gzip));
  sp->lo = sp->lo > LO_MARGIN ? sp->lo - LO_MARGIN : 0;
  sp->work = work;
  sp->arg = arg;
  sp->point = sp->main_point = SIZE_MAX;
  atomic_init(&sp->cancel, 0);
  void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    free(sp);
    return NULL;
  }
  sp->doc = m;
  if (gzip && !(sp->pipe = ssa_inflate_pipe_open(fd, SSA_PIPE_CHUNK, SSA_PIPE_NCHUNKS))) {
    munmap(m, size);
    free(sp);
    return NULL;
  }
  pthread_mutex_init(&sp->mu, NULL);
  pthread_cond_init(&sp->cv, NULL);
  if (pthread_create(&sp->th, NULL, helper, sp) != 0) {
    if (sp->pipe) ssa_inflate_pipe_close(sp->pipe, NULL, 0);
    pthread_mutex_destroy(&sp->mu);
    pthread_cond_destroy(&sp->cv);
    munmap(m, size);
    free(sp);
    return NULL;
  }
  atomic_fetch_add(&active_splits, 1);
  return sp;
}

long ssa_split_grow(void *ctx, size_t visible) {
  ssa_split *sp = ctx;
  long ret;
  pthread_mutex_lock(&sp->mu);
  for (;;) {
    size_t limit = sp->filled;
    int splitting = !sp->finished && sp->point_known && sp->point != SIZE_MAX;
    if (!sp->finished && !sp->point_known && limit > sp->lo) limit = sp->lo;
    if (splitting && limit > sp->point) limit = sp->point;
    if (limit > visible) {
      if (splitting && limit == sp->point) sp->main_point = sp->point;
      ret = (long)limit;
      break;
    }
    if (splitting && visible == sp->point) {
      /* at the split point in another state than the one expected: the
       * helper's work is not used; the rest is read here */
      atomic_store(&sp->cancel, 1);
      while (!sp->work_done) pthread_cond_wait(&sp->cv, &sp->mu);
      sp->finished = 1;
      sp->abandoned = 1;
      sp->main_point = SIZE_MAX;
      continue;
    }
    if (sp->fill_done && sp->point_known && visible >= sp->filled) {
      if (sp->fill_error) {
        sp->error_seen = 1;
        ret = -1;
      } else {
        ret = (long)visible;
      }
      break;
    }
    pthread_cond_wait(&sp->cv, &sp->mu);
  }
  pthread_mutex_unlock(&sp->mu);
  return ret;
}

size_t ssa_split_finish(ssa_split *sp) {
  pthread_mutex_lock(&sp->mu);
  while (!sp->work_done) pthread_cond_wait(&sp->cv, &sp->mu);
  sp->finished = 1;
  sp->main_point = SIZE_MAX;
  size_t v = sp->filled;
  pthread_mutex_unlock(&sp->mu);
  return v;
}

void ssa_split_used(ssa_split *sp) { sp->used = 1; }

ssa_split_counts ssa_split_counts_get(void) {
  ssa_split_counts c = {atomic_load(&count_used), atomic_load(&count_abandoned), atomic_load(&count_alone)};
  return c;
}

int ssa_split_close(ssa_split *sp, char *msg, size_t cap) {
  atomic_store(&sp->cancel, 1);
  pthread_join(sp->th, NULL);
  const char *verdict = sp->used ? "used" : sp->abandoned ? "abandoned" : "alone";
  atomic_fetch_add(sp->used ? &count_used : sp->abandoned ? &count_abandoned : &count_alone, 1);
  if (getenv("STEPSCOPE_KINETO_SPLIT_TRACE"))
    fprintf(stderr, "kineto split: %s (point %zu of %zu bytes)\n", verdict,
            sp->point_known ? sp->point : SIZE_MAX, sp->filled);
  int failed = sp->error_seen;
  if (msg && cap) snprintf(msg, cap, "%s", failed ? sp->msg : "");
  pthread_mutex_destroy(&sp->mu);
  pthread_cond_destroy(&sp->cv);
  munmap(sp->doc, sp->cap);
  atomic_fetch_sub(&active_splits, 1);
  free(sp);
  return failed ? -1 : 0;
}
