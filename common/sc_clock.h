/*
 * sc_clock.h — seconds on the monotonic clock, for the elapsed times the CLI
 * measures and reports (how long an export took, when a progress line is due,
 * how long a connection has waited). Never a date: the monotonic clock does not
 * jump with the wall clock. One place instead of the same timespec arithmetic
 * in every caller.
 */
#ifndef SC_CLOCK_H
#define SC_CLOCK_H

#include <time.h>

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC); differences are
 * elapsed times, to the nanosecond for any uptime a machine reaches. */
static inline double sc_monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
