/*
 * signal_flush.c — a trace that survives SIGTERM, SIGINT and SIGHUP.
 *
 * A launcher stops the surviving ranks of a failed job with SIGTERM, a user
 * presses Ctrl-C: without help the process dies with up to a flush interval
 * of records still in the writer's buffers. Flushing needs locks and malloc,
 * which a signal handler must not touch, so the work is handed off:
 *
 *   handler (any thread)                 signal thread (blocks these signals)
 *   write(request pipe, sig)  ────────►  read() wakes; the tracer flushes
 *   poll(done pipe, 2 s)      ◄────────  write(done pipe)
 *   chain: re-raise with the default action, or call the program's handler
 *
 * Only write, poll, read, sigaction, raise and errno are used in the
 * handler: all async-signal-safe. The wait is bounded (2 s) so that a flush
 * that cannot finish (the interrupted thread held a lock the flush needs)
 * never keeps a process from dying; the loss is then what the periodic
 * flush had not written yet.
 *
 * Chaining. The action each signal had before the tracer installed its
 * handler is kept. Default (terminate): the trace is closed for good, with
 * an END record naming the signal, the default action is restored and the
 * signal raised again, so the process still dies of it (exit status and
 * core behaviour unchanged). A handler of the program: the trace is flushed,
 * not closed, and that handler is called (with siginfo when it asked for
 * it). Ignored signals are left alone: no handler is installed for them.
 *
 * Fork. The signal thread does not exist in a forked child; the handler
 * checks the pid it was started for and, in a child that has not started
 * a trace of its own, only chains.
 */
#include "signal_flush.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 2000

static const int handled_signals[] = {SIGTERM, SIGINT, SIGHUP};
#define NHANDLED (sizeof handled_signals / sizeof handled_signals[0])

static struct sigaction g_previous[NHANDLED];
static int g_installed[NHANDLED];
static int g_request[2] = {-1, -1}, g_done[2] = {-1, -1};
static signal_flush_work g_work;
static atomic_int g_thread_pid; /* the process whose signal thread runs (0: none) */
static pthread_mutex_t g_install_mu = PTHREAD_MUTEX_INITIALIZER;

static int slot_of(int sig) {
  for (size_t i = 0; i < NHANDLED; i++)
    if (handled_signals[i] == sig) return (int)i;
  return -1;
}

static int previous_is_default(int slot) {
  return !(g_previous[slot].sa_flags & SA_SIGINFO) && g_previous[slot].sa_handler == SIG_DFL;
}

static void *signal_thread_main(void *arg) {
  (void)arg;
  for (;;) {
    int req;
    ssize_t n = read(g_request[0], &req, sizeof req);
    if (n < 0 && errno == EINTR) continue;
    if (n != (ssize_t)sizeof req) return NULL; /* the pipe is gone */
    int sig = req & 0xff, final = (req >> 8) & 1;
    if (g_work) g_work(sig, final);
    char done = 1;
    while (write(g_done[1], &done, 1) < 0 && errno == EINTR) {
    }
  }
}

static void on_signal(int sig, siginfo_t *info, void *ctx) {
  int saved_errno = errno;
  int slot = slot_of(sig);
  if (slot < 0) return;
  int final = previous_is_default(slot);
  if (atomic_load(&g_thread_pid) == (int)getpid()) {
    int req = sig | final << 8;
    if (write(g_request[1], &req, sizeof req) == (ssize_t)sizeof req) {
      struct pollfd pfd = {g_done[0], POLLIN, 0};
      int left = WAIT_MS;
      for (;;) { /* EINTR: another signal interrupted the wait; wait again (bounded) */
        int rc = poll(&pfd, 1, left);
        if (rc > 0) {
          char c;
          (void)!read(g_done[0], &c, 1);
          break;
        }
        if (rc == 0 || errno != EINTR) break;
        left = left > 100 ? left - 100 : 0; /* EINTR is rare: an approximate budget */
        if (left == 0) break;
      }
    }
  }
  const struct sigaction *prev = &g_previous[slot];
  if (final) { /* the signal ends the process, as it would have without the tracer */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig); /* pending until this handler returns (the signal is blocked in it) */
  } else if (prev->sa_flags & SA_SIGINFO) {
    if (prev->sa_sigaction) prev->sa_sigaction(sig, info, ctx);
  } else if (prev->sa_handler != SIG_IGN && prev->sa_handler != SIG_DFL) {
    prev->sa_handler(sig);
  }
  errno = saved_errno;
}

static int make_pipe(int p[2]) {
  if (p[0] >= 0) {
    close(p[0]);
    close(p[1]);
  }
  if (pipe(p) != 0) {
    p[0] = p[1] = -1;
    return -1;
  }
  for (int i = 0; i < 2; i++)
    fcntl(p[i], F_SETFD, FD_CLOEXEC);
  return 0;
}

int signal_flush_install(signal_flush_work work) {
  const char *env = getenv("STEPSCOPE_SIGNALS");
  if (env && strcmp(env, "0") == 0) return 0;
  pthread_mutex_lock(&g_install_mu);
  int rc = 0;
  if (atomic_load(&g_thread_pid) != (int)getpid()) {
    g_work = work;
    /* a child of a process that had the thread: fresh pipes, a fresh thread */
    if (make_pipe(g_request) != 0 || make_pipe(g_done) != 0) {
      rc = -1;
      goto out;
    }
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < NHANDLED; i++)
      sigaddset(&block, handled_signals[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old); /* inherited by the thread */
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int created = pthread_create(&t, &attr, signal_thread_main, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (created != 0) {
      rc = -1;
      goto out;
    }
    atomic_store(&g_thread_pid, (int)getpid());
  }
  for (size_t i = 0; i < NHANDLED; i++) {
    if (g_installed[i]) continue; /* kept across fork: installed once per program */
    struct sigaction prev;
    if (sigaction(handled_signals[i], NULL, &prev) != 0) continue;
    if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_IGN) continue; /* left alone */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask); /* the three block each other while one is handled */
    for (size_t j = 0; j < NHANDLED; j++)
      sigaddset(&sa.sa_mask, handled_signals[j]);
    g_previous[i] = prev;
    g_installed[i] = 1;
    sigaction(handled_signals[i], &sa, NULL);
  }
out:
  pthread_mutex_unlock(&g_install_mu);
  return rc;
}
