/*
 * trace_closed.c — says which ranks' traces were not closed by their writer.
 *
 * A trace of format 1.1 or later ends with an END record when its writer
 * closed it (docs/trace-format.md). A rank whose file was read to its end
 * without one crashed or was killed: what its tracer still buffered is
 * lost, so its data stops early. After clock alignment, each such rank gets
 * a run warning saying how long before the run's last record its trace
 * ends, e.g.
 *
 *   rank 1's trace was not closed (crash or kill?); it ends 0.98 s before
 *   the run's last record
 *
 * A rank closed on a terminating signal (flushed, nothing lost) gets a
 * milder note naming the signal. Files older than 1.1 say nothing either
 * way and get nothing.
 */
#include <signal.h>
#include <string.h>

#include "ssa_model.h"

int64_t ssa_rank_last_time(const ssa_rank *r) {
  int64_t t = INT64_MIN;
#define LATEST(arr, n, field)                                                                      \
  for (size_t i = 0; i < (n); i++)                                                                 \
    if ((arr)[i].field > t) t = (arr)[i].field;
  LATEST(r->ops, r->nops, end)
  LATEST(r->apis, r->napis, end)
  LATEST(r->ranges, r->nranges, end)
  LATEST(r->colls, r->ncolls, end)
  LATEST(r->syncs, r->nsyncs, end)
  LATEST(r->counters, r->ncounters, time)
#undef LATEST
  return t;
}

/* The latest aligned time of a rank's timed data into *t: 1, or 0 when it has none, or -1 when
 * it is not known (its events were dropped without the time kept: rank_drop.c and the partial
 * reader both keep it, so no shell of this build lacks it). */
static int last_event(const ssa_rank *r, int64_t *t) {
  if (r->events_dropped && !r->has_last_time) return -1;
  int64_t last = r->events_dropped ? r->last_time : ssa_rank_last_time(r);
  if (last == INT64_MIN) return 0;
  *t = last + r->offset_ns;
  return 1;
}

void ssa_run_note_unclosed(ssa_run *run) {
  int64_t run_last = INT64_MIN;
  int unclosed = 0; /* the run's last record is needed only then (a pass over every record) */
  int run_last_known = 1;
  for (size_t i = 0; i < run->nranks; i++)
    unclosed |= run->ranks[i].close_state == STEPSCOPE_CLOSE_MISSING;
  for (size_t i = 0; unclosed && i < run->nranks; i++) {
    int64_t t = INT64_MIN;
    int has = last_event(&run->ranks[i], &t);
    if (has < 0) run_last_known = 0;
    if (has > 0 && t > run_last) run_last = t;
  }
  for (size_t i = 0; i < run->nranks; i++) {
    const ssa_rank *r = &run->ranks[i];
    if (r->close_state == STEPSCOPE_CLOSE_SIGNAL) {
      const char *name = r->close_signal == SIGTERM  ? "SIGTERM"
                         : r->close_signal == SIGINT ? "SIGINT"
                         : r->close_signal == SIGHUP ? "SIGHUP"
                                                     : "a signal";
      ssa_run_warn(run, "rank %d was stopped by %s (signal %d); its trace was flushed and closed",
                   r->rank, name, r->close_signal);
      continue;
    }
    if (r->close_state != STEPSCOPE_CLOSE_MISSING) continue;
    int64_t t = INT64_MIN;
    int has = last_event(r, &t);
    if (has < 0 || !run_last_known) /* how early it ends is not known */
      ssa_run_warn(run, "rank %d's trace was not closed (crash or kill?)", r->rank);
    else if (has == 0 || run_last == INT64_MIN)
      ssa_run_warn(run,
                   "rank %d's trace was not closed (crash or kill?); it holds no timed records",
                   r->rank);
    else
      ssa_run_warn(run,
                   "rank %d's trace was not closed (crash or kill?); it ends %.2f s before the "
                   "run's last record",
                   r->rank, (double)(run_last - t) / 1e9);
  }
}
