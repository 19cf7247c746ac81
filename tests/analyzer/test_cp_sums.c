/*
 * test_cp_sums.c — the critical path kept as sums only (ssa_options.path_sums_only, what
 * `stepscope analyze` asks for) against the path kept a segment at a time (what the exports
 * draw), on real runs: each run is analysed both ways and
 *
 *   - every sum, median, top op and count of the two paths is equal, and so are the analysis'
 *     names (the sums-only walk interns the path's names in the same order);
 *   - the kept segments, summed here one by one, give the steps' sums: time by kind, idle
 *     cause and rank, the untraced host time, the length and the segment count; and the
 *     step's top ops are the first of the segments' path time by (name, rank, kind);
 *   - the exports' track refuses a sums-only path (STEPSCOPE_E_STATE) instead of drawing
 *     nothing.
 *
 * usage: test_cp_sums RUN...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "critical_path.h"
#include "ssa_import.h"
#include "ssa_metrics.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static int same_tops(const ssa_cp_top *x, size_t nx, const ssa_cp_top *y, size_t ny) {
  if (nx != ny) return 0;
  for (size_t i = 0; i < nx; i++)
    if (x[i].name != y[i].name || x[i].rank_idx != y[i].rank_idx || x[i].kind != y[i].kind ||
        x[i].time != y[i].time || x[i].count != y[i].count)
      return 0;
  return 1;
}

/* Path time by (name, rank, kind), most first (ties: by name, rank, kind), as the step's top
 * ops are defined (docs/metrics.md), made here from the segments by a plain sort. */
static int cmp_top(const void *pa, const void *pb) {
  const ssa_cp_top *a = pa, *b = pb;
  if (a->time != b->time) return a->time > b->time ? -1 : 1;
  if (a->name != b->name) return a->name < b->name ? -1 : 1;
  if (a->rank_idx != b->rank_idx) return a->rank_idx < b->rank_idx ? -1 : 1;
  return (a->kind > b->kind) - (a->kind < b->kind);
}

/* The step's sums and top ops, from its kept segments. */
static void check_step_from_segments(const char *run, size_t nranks, const ssa_cp_step *st) {
  int64_t length = 0, kind[SSA_CP_KIND_N] = {0}, cause[SSA_CP_IDLE_N] = {0}, untraced = 0;
  int64_t *by_rank = calloc(nranks ? nranks : 1, sizeof *by_rank);
  ssa_cp_top *tops = calloc(st->nseg ? st->nseg : 1, sizeof *tops);
  size_t ntops = 0;
  if (!by_rank || !tops) {
    CHECK(0, "out of memory");
    free(by_rank);
    free(tops);
    return;
  }
  for (size_t k = 0; k < st->nseg; k++) {
    const ssa_cp_segment *s = &st->segs[k];
    int64_t d = s->end_rel - s->start_rel;
    length += d;
    kind[s->kind] += d;
    if (s->kind == SSA_CP_IDLE) cause[s->cause] += d;
    if (s->kind == SSA_CP_HOST && s->cause) untraced += d;
    by_rank[s->rank_idx] += d;
    if (s->kind == SSA_CP_IDLE) continue;
    size_t t = 0;
    while (t < ntops &&
           (tops[t].name != s->name || tops[t].rank_idx != s->rank_idx || tops[t].kind != s->kind))
      t++;
    if (t == ntops) tops[ntops++] = (ssa_cp_top){s->name, s->rank_idx, s->kind, 0, 0};
    tops[t].time += d;
    tops[t].count++;
  }
  qsort(tops, ntops, sizeof *tops, cmp_top);
  CHECK(length == st->length, "%s step %lld: length %lld, segments %lld", run, (long long)st->step,
        (long long)st->length, (long long)length);
  CHECK(!memcmp(kind, st->kind, sizeof kind), "%s step %lld: time by kind", run,
        (long long)st->step);
  CHECK(!memcmp(cause, st->idle_cause, sizeof cause), "%s step %lld: idle by cause", run,
        (long long)st->step);
  CHECK(untraced == st->host_untraced, "%s step %lld: untraced host time", run,
        (long long)st->step);
  CHECK(!memcmp(by_rank, st->by_rank, nranks * sizeof *by_rank), "%s step %lld: time by rank", run,
        (long long)st->step);
  CHECK(same_tops(tops, ntops < SSA_CP_TOP_STEP ? ntops : SSA_CP_TOP_STEP, st->top, st->ntop),
        "%s step %lld: top ops (%zu from the segments, %zu)", run, (long long)st->step, ntops,
        st->ntop);
  free(by_rank);
  free(tops);
}

static void no_emit(void *ctx, const ssa_cp_segment *s, int64_t step, int64_t from, int64_t to) {
  (void)s, (void)step, (void)from, (void)to;
  ++*(size_t *)ctx;
}

/* The two analyses' paths: kept (x) and sums only (y). */
static void check_paths(const char *run, const ssa_analysis *ax, const ssa_analysis *ay) {
  const ssa_critical_path *x = ax->critical_path, *y = ay->critical_path;
  CHECK(x && y, "%s: no critical path", run);
  if (!x || !y) return;
  CHECK(!x->sums_only && y->sums_only, "%s: the options were not followed", run);
  CHECK(x->nsteps == y->nsteps && x->nranks == y->nranks && x->nsegs == y->nsegs,
        "%s: %zu/%zu steps, %zu/%zu segments", run, x->nsteps, y->nsteps, x->nsegs, y->nsegs);
  if (x->nsteps != y->nsteps || x->nranks != y->nranks) return;
  CHECK(ax->names.count == ay->names.count, "%s: %zu names, %zu", run, (size_t)ax->names.count,
        (size_t)ay->names.count);
  CHECK(x->steady == y->steady && x->median_step == y->median_step &&
            x->median_length == y->median_length && x->median_step_time == y->median_step_time &&
            !memcmp(x->median_kind, y->median_kind, sizeof x->median_kind) &&
            !memcmp(x->median_idle_cause, y->median_idle_cause, sizeof x->median_idle_cause) &&
            x->total_length == y->total_length &&
            !memcmp(x->total_kind, y->total_kind, sizeof x->total_kind) &&
            !memcmp(x->total_idle_cause, y->total_idle_cause, sizeof x->total_idle_cause) &&
            x->total_host_untraced == y->total_host_untraced &&
            x->mismatched_steps == y->mismatched_steps,
        "%s: the run's summary differs", run);
  CHECK(!memcmp(x->total_by_rank, y->total_by_rank, x->nranks * sizeof *x->total_by_rank),
        "%s: the run's time by rank differs", run);
  CHECK(same_tops(x->top, x->ntop, y->top, y->ntop), "%s: the run's top ops differ", run);
  size_t kept = 0;
  for (size_t i = 0; i < x->nsteps; i++) {
    const ssa_cp_step *p = &x->steps[i], *q = &y->steps[i];
    CHECK(p->step == q->step && p->end_rank_idx == q->end_rank_idx && p->length == q->length &&
              p->start_rel == q->start_rel && p->end_rel == q->end_rel &&
              !memcmp(p->kind, q->kind, sizeof p->kind) &&
              !memcmp(p->idle_cause, q->idle_cause, sizeof p->idle_cause) &&
              p->host_untraced == q->host_untraced && p->nseg == q->nseg &&
              p->clipped == q->clipped,
          "%s step %lld: the sums differ (%zu/%zu segments)", run, (long long)p->step, p->nseg,
          q->nseg);
    CHECK(!memcmp(p->by_rank, q->by_rank, x->nranks * sizeof *p->by_rank),
          "%s step %lld: the time by rank differs", run, (long long)p->step);
    CHECK(same_tops(p->top, p->ntop, q->top, q->ntop), "%s step %lld: the top ops differ", run,
          (long long)p->step);
    CHECK(q->segs == NULL, "%s step %lld: segments kept", run, (long long)p->step);
    check_step_from_segments(run, x->nranks, p);
    kept += p->nseg;
  }
  CHECK(kept > 0, "%s: an empty path proves nothing", run);
  size_t emitted = 0;
  for (uint32_t r = 0; r < y->nranks; r++)
    CHECK(ssa_cp_track(y, r, no_emit, &emitted) == STEPSCOPE_E_STATE,
          "%s: a track of a sums-only path", run);
  CHECK(emitted == 0, "%s: %zu pieces drawn from a sums-only path", run, emitted);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_cp_sums RUN...\n");
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    ssa_run run = {0};
    ssa_load_options lo = {0};
    stepscope_error err = {0};
    if (ssa_run_load(&run, argv[i], &lo, &err)) {
      fprintf(stderr, "FAIL %s: %s\n", argv[i], err.message);
      return 1;
    }
    ssa_analysis kept, sums;
    ssa_options opt;
    ssa_options_default(&opt);
    int rc = ssa_analyze(&run, &opt, &kept, &err);
    opt.path_sums_only = 1;
    if (rc == 0) rc = ssa_analyze(&run, &opt, &sums, &err);
    CHECK(rc == 0, "%s: %s", argv[i], err.message);
    if (rc == 0) {
      check_paths(argv[i], &kept, &sums);
      ssa_analysis_free(&kept);
      ssa_analysis_free(&sums);
    }
    ssa_run_free(&run);
  }
  if (failures) fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
