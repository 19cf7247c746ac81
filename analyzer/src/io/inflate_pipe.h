/*
 * inflate_pipe.h — a gzip file inflated on a second thread while the caller
 * consumes the JSON text, for the Kineto importer (kineto_source.c).
 *
 * Why: reading a gzip trace on one core costs inflate + parse (+, for the
 * whole-buffer inflate of gzip_whole.c, the kernel zeroing tens of MB of
 * fresh pages). With a producer thread that inflates into a small ring of
 * reused chunk buffers and the tokenizer consuming them on the calling
 * thread, the wall time approaches max(inflate, parse) and the memory stays
 * bounded (the ring, a 256 KiB input buffer and zlib's window), whatever
 * the file's size.
 *
 * The producer decodes the gzip framing itself (RFC 1952: header fields,
 * concatenated members, CRC-32 and ISIZE of each member checked) around
 * zlib's raw inflate; after a member, a next member is read when the next
 * byte is 0x1f, anything else ends the input (as gzread and the streaming
 * reader of kineto_source.c do). A corrupt or truncated file is an error
 * reported after every byte inflated before the damage has been handed
 * over, with zlib's wording ("unexpected end of file", "incorrect data
 * check", "invalid block type", ...).
 *
 * The text is bounded: past `max_out` inflated bytes (the caller's
 * decompression limit, stepscope_inflate_limit) the producer stops with an
 * error that ssa_inflate_pipe_close reports as SSA_PIPE_OVER_LIMIT, so a
 * decompression bomb costs no more than `max_out` bytes of text.
 *
 * Use: ssa_inflate_pipe_open, then ssa_inflate_pipe_read (a js_read_fn)
 * until it returns 0 (the end, every member checked) or -1 (an error,
 * message from ssa_inflate_pipe_close), then ssa_inflate_pipe_close, which
 * stops the producer whenever the consumer gives up early, joins it and
 * frees everything. One consumer thread per pipe.
 */
#ifndef INFLATE_PIPE_H
#define INFLATE_PIPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ssa_inflate_pipe ssa_inflate_pipe;

/* Ring geometry used by the importer (measured, docs/kineto-import.md). */
#define SSA_PIPE_CHUNK   ((size_t)256 << 10)
#define SSA_PIPE_NCHUNKS 4

/* What ssa_inflate_pipe_close returns when the text went past `max_out`. */
#define SSA_PIPE_OVER_LIMIT (-2)

/* Starts inflating the gzip file open on `fd` (read with pread from offset
 * 0: the file position is not used) into `nchunks` (>= 2) buffers of
 * `chunk` (>= 1) bytes, at most `max_out` bytes in all (UINT64_MAX: no
 * bound). NULL when the memory or the thread cannot be had (nothing left
 * behind: read the file another way). */
ssa_inflate_pipe *ssa_inflate_pipe_open(int fd, size_t chunk, int nchunks, uint64_t max_out);

/* A js_read_fn: copies up to n inflated bytes into buf, waiting for the
 * producer as needed; n bytes unless the input ends. The count, 0 at the
 * end of the last member (all checked), or -1 on an error (after every
 * good byte was returned). */
long ssa_inflate_pipe_read(void *pipe, void *buf, size_t n);

/* Linear mode, for the split import (kineto_split.c): the text is written
 * into the caller's buffer `buf` of `cap` bytes (a multiple of `chunk`),
 * chunk after chunk, never reused; more text than fits is an error ("more
 * inflated text than the buffer holds"). The bytes are not read with
 * ssa_inflate_pipe_read but waited for with ssa_inflate_pipe_wait, from any
 * number of threads. */
ssa_inflate_pipe *ssa_inflate_pipe_open_linear(int fd, unsigned char *buf, size_t cap, size_t chunk,
                                               uint64_t max_out);
/* Linear mode: waits until more than `have` bytes are written and returns
 * how many are; `have` when the text ended there (all checked), -1 on an
 * error (every good byte written before it was returned first). */
long ssa_inflate_pipe_wait(ssa_inflate_pipe *p, size_t have);

/* Stops the producer if it is still running, joins it, frees the pipe.
 * -1 when ssa_inflate_pipe_read (or _wait) returned -1, with the error in
 * msg (SSA_PIPE_OVER_LIMIT when that error was the text passing max_out); else 0
 * (msg empty), whether the input was read to its end or the consumer gave
 * up first: an error the producer met after that would depend on timing,
 * so it is not reported. */
int ssa_inflate_pipe_close(ssa_inflate_pipe *pipe, char *msg, size_t cap);

#endif
