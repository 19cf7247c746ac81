/*
 * data_check.h — tiny assertion helpers for the data loader tests (tests/data/):
 * CHECK(cond, fmt, ...) prints a FAIL line with the location and counts a failure;
 * each test program exits non-zero when any check failed.
 */
#ifndef STEPSCOPE_TESTS_DATA_CHECK_H
#define STEPSCOPE_TESTS_DATA_CHECK_H

#include <stdio.h>

extern int data_check_failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                       \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      data_check_failures++;                                                                       \
    }                                                                                              \
  } while (0)

#endif
