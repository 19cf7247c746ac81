/*
 * sc_file.h — file utilities every wing needs alike: create a directory with its parents,
 * write a whole buffer to a descriptor (retrying short writes and EINTR). The atomic
 * write-then-rename of outputs lives with the analyzer's output stream (ssa_io.h) and the
 * checkpoint writer (trainer/), whose durability rules differ (the checkpoint fsyncs every
 * directory it creates).
 */
#ifndef SC_FILE_H
#define SC_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* Creates `path` and its missing parents with `mode`; 0 when it is a directory afterwards
 * (whether it existed or not), -1 with errno set otherwise (ENAMETOOLONG past PATH_MAX,
 * ENOTDIR when it exists and is not a directory). */
int sc_mkdir_p(const char *path, mode_t mode);

/* Writes all n bytes to fd, retrying short writes and EINTR; 0, or -1 with errno set. */
int sc_write_all(int fd, const void *buf, size_t n);

#endif
