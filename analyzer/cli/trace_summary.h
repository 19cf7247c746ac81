/*
 * trace_summary.h — one pass over a trace file that counts records per kind,
 * finds the time span and the dropped-record notices, and keeps the header
 * and warnings: what `stepscope info` prints. Files are scanned in parallel.
 */
#ifndef STEPSCOPE_TRACE_SUMMARY_H
#define STEPSCOPE_TRACE_SUMMARY_H

#include <stdint.h>

#include "ssa_import.h"
#include "stepscope.h"

typedef struct trace_summary {
  const char *path;
  int ok;                  /* header read; counts below are valid (maybe partial) */
  stepscope_error error;   /* error.code != 0: reading stopped there */
  stepscope_header header; /* strings copied (owned) */
  uint64_t counts[STEPSCOPE_REC_KIND_MAX];
  uint64_t records, unknown;
  uint64_t first_ns, last_ns; /* trace clock; first_ns > last_ns when no timed record */
  uint64_t dropped;           /* sum of DROPPED notices */
  int close_state;            /* stepscope_close_state: closed by its writer or not */
  int close_signal;           /* the signal, for STEPSCOPE_CLOSE_SIGNAL */
  uint64_t file_bytes;
  uint64_t damaged_regions, damaged_bytes; /* skipped damage: records lost */
  const char *duplicate_of;                /* set by `info`: an earlier file holds the same rank */
  char **warnings;
  size_t nwarnings;
  char **metadata_keys; /* distinct metadata keys, in order of appearance */
  size_t nmetadata;
} trace_summary;

/* Scans `n` files with up to `threads` threads (0: number of cores); file i
 * is a Kineto trace when kineto[i] is nonzero (run_discovery.c decides; NULL:
 * all are stepscope traces), each read with the importers' options `import`
 * (cli_env.h: the Kineto switches and the decompression limits). Shows
 * progress on stderr when it is a terminal. Results in out[0..n). */
void trace_summary_scan(const char *const *paths, const unsigned char *kineto, size_t n,
                        unsigned threads, const ssa_import_options *import, trace_summary *out);

void trace_summary_free(trace_summary *s);

#endif
