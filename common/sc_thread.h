/*
 * sc_thread.h — starting a helper thread that never takes the stop signals (SIGINT, SIGTERM,
 * SIGHUP), so that they reach the thread that handles them: the analyzer's viewer server
 * (its accepting thread must be interrupted) and the tracer's background flusher (a
 * signal handler of the traced program may wait for a flush that needs the flusher).
 */
#ifndef SC_THREAD_H
#define SC_THREAD_H

#include <pthread.h>

/* pthread_create with SIGINT, SIGTERM and SIGHUP blocked in the new thread (the caller's
 * signal mask is restored before returning); pthread_create's result. */
int sc_thread_start_unsignalled(pthread_t *thread, const pthread_attr_t *attr,
                                void *(*start)(void *), void *arg);

#endif
