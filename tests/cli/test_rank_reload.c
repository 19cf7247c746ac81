/*
 * test_rank_reload.c — the bounded analysis reads each rank's file again for every per-rank
 * pass (analyzer/cli/rank_reload.c; `analyze --low-memory`, `merge`), the critical path's
 * rounds included: a file that changed or went away since the load must be an error that
 * names it, never a rank analysed from other events than the ones its summary and the other
 * ranks' collective records were made from (the rounds index a rank's records by the
 * summary's numbers).
 *
 * usage: test_rank_reload RUN OTHER — RUN and OTHER are generated runs of two ranks whose
 * rank 0 files differ (RUN's files are changed in place).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rank_reload.h"

static int failures;

static void check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  failures += !ok;
}

static int copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
  char buf[65536];
  size_t n;
  int rc = in && out ? 0 : -1;
  while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) rc = -1;
  if (in) fclose(in);
  if (out && fclose(out)) rc = -1;
  return rc;
}

/* The rank index of the run's rank `rank`, or -1. */
static int index_of(const ssa_run *run, int rank) {
  for (size_t i = 0; i < run->nranks; i++)
    if (run->ranks[i].rank == rank) return (int)i;
  return -1;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_rank_reload RUN OTHER\n");
    return 2;
  }
  const char *dir = argv[1], *other = argv[2];
  ssa_run run;
  ssa_load_options lo = {.threads = 1, .drop_events = 1};
  ssa_import_options import;
  memset(&import, 0, sizeof import);
  stepscope_error err;
  memset(&err, 0, sizeof err);
  if (ssa_run_load_import(&run, dir, &lo, NULL, &import, &err) != 0) {
    fprintf(stderr, "cannot load %s: %s\n", dir, err.message);
    return 1;
  }
  ssa_run_rereader x;
  if (ssa_run_rereader_init(&x, &run, &import) != 0) return 1;
  int r0 = index_of(&run, 0), r1 = index_of(&run, 1);
  check(r0 >= 0 && r1 >= 0 && run.ranks[r0].events_dropped, "the run loaded bounded, 2 ranks");
  if (r0 < 0 || r1 < 0) return 1;
  size_t nops = run.ranks[r0].nops;

  /* unchanged: read again, its events there, then its shell back */
  int rc = x.events.load(x.events.ctx, (size_t)r0, SSA_READ_METRICS);
  check(rc == 0 && !x.failed && run.ranks[r0].ops && run.ranks[r0].nops == nops,
        "an unchanged file is read again with its events");
  if (rc == 0) x.events.drop(x.events.ctx, (size_t)r0);
  check(run.ranks[r0].events_dropped && !run.ranks[r0].ops, "and its shell is back after the pass");

  /* rewritten since the load: refused, named */
  char path[4096], from[4096];
  snprintf(path, sizeof path, "%s/rank-00000.trace.zst", dir);
  snprintf(from, sizeof from, "%s/rank-00000.trace.zst", other);
  check(copy_file(from, path) == 0, "rank 0's file replaced by another run's");
  rc = x.events.load(x.events.ctx, (size_t)r0, SSA_READ_METRICS);
  check(rc != 0, "a rank file that changed since the load is an error");
  check(x.failed && strstr(x.error, "rank-00000.trace.zst changed since it was loaded") != NULL,
        "whose words name the file and say it changed");
  printf("  (%s)\n", x.error);
  x.events.drop(x.events.ctx, (size_t)r0);
  check(run.ranks[r0].events_dropped && run.ranks[r0].nops == nops,
        "the shell stays as it was after the refusal");

  /* gone since the load: an error (the first failure's words are kept) */
  snprintf(path, sizeof path, "%s/rank-00001.trace.zst", dir);
  check(unlink(path) == 0, "rank 1's file removed");
  rc = x.events.load(x.events.ctx, (size_t)r1, SSA_READ_METRICS);
  check(rc != 0, "a rank file that is gone is an error");
  x.events.drop(x.events.ctx, (size_t)r1);
  check(run.ranks[r1].events_dropped, "its shell stays");

  ssa_run_rereader_free(&x);
  ssa_run_free(&run);
  printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
