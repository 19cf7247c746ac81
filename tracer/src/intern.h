/*
 * intern.h — the writer's string table: maps strings to dense ids 1, 2, 3...
 * in the order they were first seen. Not thread-safe; the writer holds its
 * intern mutex around calls.
 */
#ifndef STEPSCOPE_INTERN_H
#define STEPSCOPE_INTERN_H

#include <stddef.h>
#include <stdint.h>

typedef struct intern_table intern_table;

intern_table *intern_create(void);
void intern_destroy(intern_table *t);

/* Returns the id of `s[0..len)`, adding it if new (*is_new = 1). Returns 0
 * when memory runs out or the table is full (2^31 strings). */
uint32_t intern_get_or_add(intern_table *t, const char *s, size_t len, int *is_new);

uint32_t intern_count(const intern_table *t);

#endif
