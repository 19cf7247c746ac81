/*
 * view_size.c — whether the export view would run for a run is over --max-size, told before
 * anything loads the run's events, so that a run too large for a timeline is read once (by
 * `analyze --low-memory`, for its heatmap) instead of twice (first by an `export` that loads
 * every event only to refuse them).
 *
 * The count is the one `stepscope info` makes: each rank file's records by kind, one streaming
 * pass per file on every core, no model built (trace_summary.c). The export's events are its
 * ops, API calls, collectives and ranges (ssa_export_events), which the loader makes one per
 * kernel, memcpy, memset or host-op record, API record, collective record and range record.
 * Only what that count tells exactly is decided here: a run of stepscope rank traces (a
 * PyTorch trace's events are told only by parsing it), every file read whole (no damage, no
 * error), one file per rank (the loader keeps one of a duplicated rank), and an export of
 * every rank (--ranks chooses from the analysis). Anything else is left to the export, as
 * before: it loads the run and refuses it itself.
 */
#include "view.h"

#include <stdlib.h>
#include <string.h>

#include "export_ranks.h"
#include "ssa_export.h"
#include "ssa_import.h"
#include "ssa_io.h"
#include "trace_summary.h"

/* The export's events in a rank file's records (ssa_export_events' ops + API calls +
 * collectives + ranges). */
static uint64_t export_events(const trace_summary *t) {
  static const int kinds[] = {STEPSCOPE_REC_KERNEL,  STEPSCOPE_REC_MEMCPY, STEPSCOPE_REC_MEMSET,
                              STEPSCOPE_REC_HOST_OP, STEPSCOPE_REC_API,    STEPSCOPE_REC_COLLECTIVE,
                              STEPSCOPE_REC_RANGE};
  uint64_t n = 0;
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
    n += t->counts[kinds[k]];
  return n;
}

/* The export's --max-size among view's export arguments (its default when not given); 0 when
 * the export chooses ranks (--ranks): its size is not the run's then. */
static uint64_t export_limit(const char *const *args) {
  uint64_t limit = CLI_EXPORT_MAX_BYTES;
  for (size_t k = 0; args && args[k] && args[k + 1]; k += 2) {
    if (!strcmp(args[k], "--ranks")) return 0;
    if (!strcmp(args[k], "--max-size") && cli_parse_size(args[k + 1], &limit) != 0) return 0;
  }
  return limit;
}

/* Sums the export's events of the files; 0 when the count is not exact (a damaged or
 * unreadable file, a rank held by two files). */
static int count_events(const trace_summary *t, size_t n, uint64_t *events) {
  *events = 0;
  int64_t *ranks = malloc((n ? n : 1) * sizeof *ranks);
  int exact = ranks != NULL;
  for (size_t i = 0; exact && i < n; i++) {
    exact = t[i].ok && !t[i].error.code && !t[i].damaged_regions;
    ranks[i] = t[i].header.rank;
    *events += export_events(&t[i]);
  }
  if (exact && n > 1) qsort(ranks, n, sizeof *ranks, ssa_cmp_i64);
  for (size_t i = 1; exact && i < n; i++)
    exact = ranks[i] != ranks[i - 1];
  free(ranks);
  return exact;
}

int view_export_refused(const view_run *run, char *why, size_t len) {
  uint64_t limit = export_limit(run->export_args);
  if (!limit || run->pytorch || !run->source[0]) return 0;
  ssa_run_files found;
  stepscope_error err;
  memset(&err, 0, sizeof err);
  if (ssa_run_discover(run->source, &run->inflate, &found, &err) != 0) return 0;
  const char **paths = malloc((found.nfiles ? found.nfiles : 1) * sizeof *paths);
  size_t n = 0;
  int exact = paths != NULL;
  for (size_t i = 0; exact && i < found.nfiles; i++) {
    if (found.files[i].kind == SSA_FILE_KINETO) exact = 0;
    if (found.files[i].kind == SSA_FILE_TRACE) paths[n++] = found.files[i].path;
  }
  trace_summary *t = exact && n ? calloc(n, sizeof *t) : NULL;
  uint64_t events = 0;
  if (t) {
    ssa_import_options import;
    memset(&import, 0, sizeof import);
    import.inflate = run->inflate;
    trace_summary_scan(paths, NULL, n, 0, &import, t);
    exact = count_events(t, n, &events);
    for (size_t i = 0; i < n; i++)
      trace_summary_free(&t[i]);
  }
  free(t);
  free(paths);
  ssa_run_files_free(&found);
  uint64_t estimate = events * SSA_EXPORT_JSON_BYTES_PER_EVENT;
  if (!exact || !n || estimate <= limit) return 0;
  cli_output_size_refusal(why, len, "view", "JSON", n, events, estimate, limit, NULL);
  return 1;
}
