/*
 * bench_critical_path.c — the cost of the critical path (docs/metrics.md "Critical path"):
 * loads and analyses a run, then walks every step's critical path again, alone, and prints
 * its time per event (ops + host calls) against the load + analysis, and the path's size.
 *
 * usage: bench_critical_path RUN [REPEATS] [sums]
 * sums: the path kept as sums only (ssa_options.path_sums_only: what `stepscope analyze` asks).
 * A large run: stepscope-gen DIR --ranks 4 --lanes 4 --steps 20 --ops 50000 (8 M records).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "critical_path.h"
#include "ssa_import.h"
#include "ssa_metrics.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_critical_path RUN [REPEATS] [sums]\n");
    return 2;
  }
  int repeats = argc > 2 ? atoi(argv[2]) : 3;
  ssa_options opt;
  ssa_options_default(&opt);
  opt.path_sums_only = argc > 3 && !strcmp(argv[3], "sums");
  ssa_run run = {0};
  ssa_analysis a;
  stepscope_error err = {0};
  ssa_load_options lo = {0};
  double t0 = now_s();
  if (ssa_run_load(&run, argv[1], &lo, &err) || ssa_analyze(&run, &opt, &a, &err)) {
    fprintf(stderr, "bench_critical_path: %s\n", err.message);
    return 1;
  }
  double t1 = now_s();
  uint64_t events = 0;
  for (size_t i = 0; i < run.nranks; i++)
    events += run.ranks[i].nops + run.ranks[i].napis;
  double best = 1e300;
  for (int k = 0; k < repeats; k++) {
    ssa_critical_path_free(a.critical_path);
    a.critical_path = NULL;
    double c0 = now_s();
    if (ssa_find_critical_paths(&a)) return 1;
    double c = now_s() - c0;
    if (c < best) best = c;
  }
  struct utsname u;
  uname(&u);
  const ssa_critical_path *cp = a.critical_path;
  printf("machine: %s %s\n", u.nodename, u.machine);
  printf("run: %zu ranks, %llu events (ops + host calls), %zu steps\n", run.nranks,
         (unsigned long long)events, cp->nsteps);
  printf("load + analysis: %.3f s; critical path alone: %.3f s (best of %d) = %.1f ns/event, "
         "%.1f %% of load + analysis\n",
         t1 - t0, best, repeats, 1e9 * best / (double)(events ? events : 1),
         100 * best / (t1 - t0));
  printf("path: %zu pieces, %llu steps whose length differs from the step time\n", cp->nsegs,
         (unsigned long long)cp->mismatched_steps);
  ssa_analysis_free(&a);
  ssa_run_free(&run);
  return 0;
}
