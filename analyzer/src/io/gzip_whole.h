/*
 * gzip_whole.h — decompresses a gzip file of moderate size in one piece with
 * libdeflate, for the Kineto importer (kineto_source.c).
 *
 * Why: on real gzip Kineto traces, zlib's streaming inflate (and its CRC-32)
 * took about a third of `stepscope analyze`; libdeflate inflates the same
 * data about three times faster, but only whole-buffer to whole-buffer. So a
 * file is decompressed whole only when the size its gzip trailer states
 * (ISIZE) is at most a bound the caller gives; anything else (a larger file,
 * several gzip members, a size that wrapped past 4 GiB, corrupt data) is
 * declined and the caller streams the file with zlib as before, with bounded
 * memory and its precise error messages. A build with ISA-L reads gzip
 * through a second thread instead (inflate_pipe.h), which measured faster;
 * this path is then used only when asked for (STEPSCOPE_KINETO_GZIP=whole)
 * or when the thread cannot be had. See docs/kineto-import.md.
 */
#ifndef GZIP_WHOLE_H
#define GZIP_WHOLE_H

#include <stddef.h>
#include <stdint.h>

/* Upper bound on the decompressed size of a file decompressed whole:
 * 512 MiB (real traces of 4 MB of gzip hold 60-90 MB of JSON). */
#define SSA_GZIP_WHOLE_MAX ((size_t)512 << 20)

/* The bound used by default: SSA_GZIP_WHOLE_MAX, lowered to an eighth of
 * the physical memory shared by one file per core (the loader reads one
 * file per core at a time), so that whole buffers never take more than an
 * eighth of the machine. */
size_t ssa_gzip_whole_bound(void);

/* Decompresses the gzip file open on `fd` (`file_size` bytes, read with
 * pread: the file position is not moved) into a new buffer of *len bytes,
 * when it is one gzip member whose ISIZE is at most `max_out` and whose
 * data and CRC-32 check. 1 then (free *out with ssa_gzip_whole_free), 0 when
 * declined (nothing allocated: stream the file instead). */
int ssa_gzip_whole(int fd, uint64_t file_size, size_t max_out, unsigned char **out, size_t *len);

void ssa_gzip_whole_free(unsigned char *buf, size_t len);

#endif
