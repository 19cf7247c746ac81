/*
 * signal_flush.h — flushes the linked tracer's trace when SIGTERM, SIGINT or
 * SIGHUP arrives, then lets the signal do what it would have done (see
 * signal_flush.c). Internal to libstepscope.
 */
#ifndef STEPSCOPE_SIGNAL_FLUSH_H
#define STEPSCOPE_SIGNAL_FLUSH_H

/* What the tracer does for a signal, on the tracer's own signal thread (not
 * in the handler): close the trace for good (`final`: the signal will end
 * the process) or flush it (the program handles the signal itself). */
typedef void (*signal_flush_work)(int sig, int final);

/* Installs the handlers and starts the signal thread, once per process
 * (again in a forked child, where the thread does not exist). Leaves a
 * signal the program ignores alone; does nothing when the environment sets
 * STEPSCOPE_SIGNALS=0. Returns 0, or -1 when the thread or its pipes could
 * not be created (the trace then simply is not flushed on signals). */
int signal_flush_install(signal_flush_work work);

#endif
