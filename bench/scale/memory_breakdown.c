/*
 * memory_breakdown.c — where the analysis's memory per event goes (issue 35, docs/scale.md):
 * loads a run as `stepscope analyze` does (one thread), sums the elements of each array the
 * loaded ranks hold (ops, API calls, collectives, ranges, ...), analyses it and sums the
 * analysis's own arrays (the ranks' summaries, per-rank windows, lanes and kernel stats, the
 * per-collective-record arrays of pipeline ranks, the collective instances, late arrivals,
 * culprits, kernel table), and prints each in bytes and bytes per event next to the peak RSS
 * after loading and after the analysis.
 *
 * usage: memory_breakdown RUN
 */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "ssa_import.h"
#include "ssa_metrics.h"

static double peak_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

/* Prints one array (count x element size) and returns its bytes. */
static uint64_t row(const char *what, size_t count, size_t elem, uint64_t events) {
  uint64_t bytes = (uint64_t)count * elem;
  printf("  %-44s %12zu x %4zu B = %8.1f MiB  %6.2f B/event\n", what, count, elem,
         (double)bytes / (1 << 20), events ? (double)bytes / (double)events : 0.0);
  return bytes;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: memory_breakdown RUN\n");
    return 2;
  }
  ssa_run run;
  ssa_load_options lo = {.threads = 1, .progress = 0};
  stepscope_error err;
  memset(&err, 0, sizeof err);
  if (ssa_run_load(&run, argv[1], &lo, &err)) {
    fprintf(stderr, "memory_breakdown: %s\n", err.message);
    return 1;
  }
  double rss_loaded = peak_mib();
  uint64_t events = 0;
  size_t held[7] = {0};
  for (size_t i = 0; i < run.nranks; i++) {
    const ssa_rank *r = &run.ranks[i];
    events += r->nops + r->napis + r->ncolls + r->nranges + r->nsyncs + r->ncounters;
    size_t have[7] = {r->nops, r->napis, r->ncolls, r->nranges, r->nsyncs, r->ncounters, r->nlanes};
    for (int k = 0; k < 7; k++)
      held[k] += have[k];
  }
  const char *names[7] = {"ops (kernels, copies, host ops)",
                          "API calls (launches)",
                          "collective records",
                          "ranges (steps, host)",
                          "syncs",
                          "counters",
                          "lanes"};
  size_t sizes[7] = {sizeof(ssa_op),   sizeof(ssa_api),     sizeof(ssa_coll), sizeof(ssa_range),
                     sizeof(ssa_sync), sizeof(ssa_counter), sizeof(ssa_lane)};
  printf("%s: %zu ranks, %llu events\n", argv[1], run.nranks, (unsigned long long)events);
  /* counts, not capacities: the arrays grow by doubling, and the pages of a capacity never
   * written are never resident (an array's tail past its count costs address space only) */
  printf("loaded ranks (elements held, resident):\n");
  uint64_t loaded = 0;
  for (int k = 0; k < 7; k++)
    loaded += row(names[k], held[k], sizes[k], events);
  loaded += row("the rank structs", run.nranks, sizeof(ssa_rank), events);
  printf("  %-44s %31.1f MiB  %6.2f B/event (peak RSS after loading: %.1f MiB = %.2f B/event)\n",
         "sum", (double)loaded / (1 << 20), (double)loaded / (double)events, rss_loaded,
         rss_loaded * (1 << 20) / (double)events);

  ssa_options opt;
  ssa_options_default(&opt);
  opt.threads = 1;
  ssa_analysis a;
  if (ssa_analyze(&run, &opt, &a, &err)) {
    fprintf(stderr, "memory_breakdown: %s\n", err.message);
    ssa_run_free(&run);
    return 1;
  }
  double rss_analysed = peak_mib();
  size_t windows = 0, lanes = 0, kstats = 0, per_coll = 0, summary_colls = 0, summary_names = 0;
  for (size_t i = 0; i < a.nranks; i++) {
    windows += a.ranks[i].nsteps;
    lanes += a.ranks[i].nlanes;
    kstats += a.ranks[i].nkstats;
    summary_colls += a.ranks[i].summary.ncolls;
    summary_names += a.ranks[i].summary.names.bytes_cap +
                     a.ranks[i].summary.names.cap * sizeof(uint32_t) +
                     a.ranks[i].summary.names.nslots * sizeof(uint32_t);
    per_coll += (a.ranks[i].coll_transfer ? a.ranks[i].rank->ncolls : 0) +
                (a.ranks[i].coll_wait_end ? a.ranks[i].rank->ncolls : 0);
  }
  printf("analysis:\n");
  uint64_t an = 0;
  an += row("rank results", a.nranks, sizeof(ssa_rank_result), events);
  an += row("rank summaries: collective records", summary_colls, sizeof(ssa_coll_rec), events);
  an += row("rank summaries: name tables (bytes)", summary_names, 1, events);
  an += row("step windows (ranks x steps)", windows, sizeof(ssa_window), events);
  an += row("steps found (ranks x steps)", windows, sizeof(ssa_step), events);
  an += row("lane idle tables", lanes, sizeof(ssa_lane_idle), events);
  an += row("kernel stats per rank", kstats, sizeof(ssa_rank_kstat), events);
  an += row("per collective record (pipeline ranks)", per_coll, 8, events);
  an += row("collective instances", a.ncolls, sizeof(ssa_coll_instance), events);
  an += row("late arrivals", a.nlates, sizeof(ssa_late), events);
  an += row("culprit rows", a.nculprits, sizeof(ssa_culprit), events);
  an += row("kernel table", a.nkernels, sizeof(ssa_kernel_row), events);
  size_t members = 0;
  for (size_t i = 0; i < run.nranks; i++)
    members += run.ranks[i].ncolls;
  row("collective members (transient, sorted twice)", members, sizeof(ssa_coll_member), events);
  printf("  %-44s %31.1f MiB  %6.2f B/event (peak RSS after the analysis: %.1f MiB = %.2f "
         "B/event)\n",
         "sum (without the transient members)", (double)an / (1 << 20), (double)an / (double)events,
         rss_analysed, rss_analysed * (1 << 20) / (double)events);
  ssa_analysis_free(&a);
  ssa_run_free(&run);
  return 0;
}
