/*
 * partial.h — a partial analysis (docs/scale.md "Partials"): what `stepscope analyze RUN
 * --part K/N --partial OUT` keeps of one block of a run's rank files so that `stepscope
 * merge` can assemble the whole run without loading any rank's events at once: per rank its
 * shell (identity, metadata, lanes, strings, marks, counts, warnings: what ssa_rank_drop_events
 * keeps), its clock alignment input, its summary and, for a rank in no pipeline, the results
 * of its metrics pass (ssa_rank_local) with the options that shaped them; per part the loader's
 * warnings (skipped files) and the run's identity (directory, rank files, their count). The format
 * is docs/partial-format.md: little-endian, versioned, every count checked against the bytes left
 * when read (partial_read.c), so a damaged or truncated partial is an error, never a crash.
 */
#ifndef SSA_PARTIAL_FORMAT_H
#define SSA_PARTIAL_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "ssa_metrics.h"
#include "rank_local.h"

#define SSA_PARTIAL_MAGIC   "SSPART\r\n" /* 8 bytes; \r\n catches a text-mode copy */
#define SSA_PARTIAL_VERSION 7u
#define PARTIAL_END         "SSPARTOK"  /* the last 8 bytes: a cut partial lacks them */
#define PARTIAL_NULL        0xffffffffu /* the length of a NULL string */
/* What the version's field counts depend on (the tally's families and kinds): another build
 * with other counts refuses the partial instead of misreading it. */
#define PARTIAL_SHAPE ((uint32_t)SSA_COMM_FAMILY_MAX << 16 | (uint32_t)SSA_COMM_KIND_N)
/* The same for the per-rank results (phases of a span answer, idle and bubble causes). */
#define PARTIAL_RESULT_SHAPE                                                                       \
  ((uint32_t)SSA_PHASE_N << 16 | (uint32_t)SSA_IDLE_N << 8 | (uint32_t)SSA_BUBBLE_N)

/* A rank file's size and modification time: the merge reads the file again and refuses one
 * that changed since its partial was made. */
typedef struct ssa_file_stamp {
  uint64_t size;
  int64_t mtime_ns;
} ssa_file_stamp;

/* The stamp of the file at `path`: 0, or -1 (errno) when it cannot be stat'ed. */
int ssa_file_stamp_of(const char *path, ssa_file_stamp *out);

/* One part of a run, in memory (read or about to be written). */
typedef struct ssa_partial {
  char *dir;       /* the run as named to `analyze` (the report prints it) */
  uint64_t run_id; /* FNV-1a over the run's rank file names, in discovery order */
  uint64_t nfiles; /* rank files of the whole run */
  int part_index, part_count;
  char **warnings; /* the loader's, in file order (a skipped file) */
  size_t nwarnings;
  ssa_rank *ranks;             /* shells (events dropped), in file order; file_index is the run's */
  ssa_rank_summary *summaries; /* per rank, made before its events were dropped */
  ssa_rank_local *locals;      /* per rank: its metrics when it is in no pipeline (else not made) */
  /* the options the locals were made with (ssa_rank_local_options_equal): steps, step range,
   * launch gap, rank; step_range_name is owned (NULL: none) */
  ssa_options made_with;
  char *step_range_name;
  char **read_paths;      /* per rank: where merge reads the file again (absolute) */
  ssa_file_stamp *stamps; /* per rank: its file as the partial saw it */
  size_t nranks;
} ssa_partial;

/* The run identity of the files listed for `path` (0 or a status with err). */
uint64_t ssa_partial_run_id(const char *const *names, size_t n);

/* Writes p (partial_write.c) to o. 0 or a status. */
struct ssa_out;
int ssa_partial_write(const ssa_partial *p, struct ssa_out *o);

/* Reads a partial from bytes[n] (partial_read.c): 0, or STEPSCOPE_E_FORMAT with the reason
 * in why[cap] (bad magic, another version, a truncated or inconsistent part), or
 * STEPSCOPE_E_NOMEM. `rules`: the merge's classification rules (the partial's must be the
 * same, in order, and the shells' tallies count them). Free with ssa_partial_free either way. */
int ssa_partial_read(const unsigned char *bytes, size_t n, const ssa_comm_rules *rules,
                     ssa_partial *p, char *why, size_t cap);

void ssa_partial_free(ssa_partial *p);

/* The cross-rank inputs of one part's pipeline ranks (docs/partial-format.md "Cross inputs"):
 * `merge PARTIALS... --cross-out DIR` writes one file per part, which `analyze --part K/N
 * --partial OUT --cross FILE` (the second map round) reads to make those ranks' results. */
#define SSA_CROSS_MAGIC   "SSCROS\r\n"
#define SSA_CROSS_VERSION 1u
#define CROSS_END         "SSCROSOK"

/* A record's value of a per-record array that is not the array's "none". */
typedef struct ssa_cross_value {
  uint32_t record;
  int64_t v;
} ssa_cross_value;

/* One pipeline rank's inputs as the file holds them: the arrays sparse (ssa_cross_densify). */
typedef struct ssa_cross_rank_in {
  uint64_t file_index; /* the run's */
  int rank;
  uint64_t ncolls; /* its summary's collective records: checked against the map's */
  int64_t rel_shift;
  int has_wait_end, has_transfer;       /* else NULL arrays */
  ssa_cross_value *wait_end, *transfer; /* the records not INT64_MIN, not -1, by record */
  size_t nwait_end, ntransfer;
  ssa_partner_send *sends; /* by record */
  size_t nsends;
} ssa_cross_rank_in;

typedef struct ssa_cross_part {
  uint64_t run_id, nfiles; /* the run's identity, as its partials' */
  int part_index, part_count;
  ssa_cross_rank_in *ranks; /* in file order */
  size_t nranks;
} ssa_cross_part;

/* Writes part p's header and the inputs x[i] of its ranks (file_index[i], rank[i]; those
 * x[i].made only) to o (partial_write.c). 0 or a status. */
int ssa_cross_write(const ssa_cross_part *p, const ssa_rank_cross *x, const uint64_t *file_index,
                    const int *rank, size_t n, struct ssa_out *o);
/* Reads a cross file (partial_read.c), as ssa_partial_read reads a partial. */
int ssa_cross_read(const unsigned char *bytes, size_t n, ssa_cross_part *p, char *why, size_t cap);
void ssa_cross_part_free(ssa_cross_part *p);
/* A rank's inputs as the map step's passes take them (dense arrays of in->ncolls). 0 or
 * STEPSCOPE_E_NOMEM; free with ssa_rank_cross_free. */
int ssa_cross_densify(const ssa_cross_rank_in *in, ssa_rank_cross *out);

#endif
