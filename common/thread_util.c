/*
 * thread_util.c — sc_thread.h: a helper thread started with the stop signals blocked.
 */
#include "sc_thread.h"

#include <signal.h>

int sc_thread_start_unsignalled(pthread_t *thread, const pthread_attr_t *attr,
                                void *(*start)(void *), void *arg) {
  /* a new thread inherits its creator's signal mask */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  int rc = pthread_create(thread, attr, start, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}
