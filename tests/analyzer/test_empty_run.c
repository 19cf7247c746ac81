/*
 * test_empty_run.c — a run of no ranks built through the C API (ssa_run_from_ranks with no
 * rank array, as a generator or a caller with nothing to give may do): it assembles without
 * error into an empty run. The sanitizer build (ASan + UBSan, .ci/run) is what checks the
 * path: before run.c guarded it, sorting the run's NULL rank array of 0 elements was UBSan's
 * "null pointer passed as argument 1" (qsort's base is declared never null).
 */
#include <stdio.h>
#include <string.h>

#include "ssa_model.h"

int main(void) {
  ssa_run run;
  memset(&run, 0, sizeof run);
  stepscope_error err;
  memset(&err, 0, sizeof err);
  int rc = ssa_run_from_ranks(&run, NULL, 0, &err);
  int failures = 0;
  if (rc != 0) {
    fprintf(stderr, "FAILED: ssa_run_from_ranks of no ranks: %d (%s)\n", rc, err.message);
    failures++;
  }
  if (run.nranks != 0) {
    fprintf(stderr, "FAILED: an empty run has %zu ranks\n", run.nranks);
    failures++;
  }
  ssa_run_free(&run);
  return failures ? 1 : 0;
}
