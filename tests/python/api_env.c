/*
 * api_env.c — the C API reads the importer's switches from the environment as the command
 * does (analyzer/cli/cli_env.c): analyses RUN through ss_api_analyze, so that the test can
 * set STEPSCOPE_KINETO_FAST_TRACE and look for the importer's line on stderr.
 * usage: api_env RUN (exit 0 when the analysis succeeded)
 */
#include <stdio.h>

#include "stepscope_api.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: api_env RUN\n");
    return 2;
  }
  char *json = NULL, *err = NULL;
  int rc = ss_api_analyze(argv[1], 0, NULL, &json, &err);
  if (rc) fprintf(stderr, "api_env: %s\n", err ? err : "?");
  ss_api_free(json);
  ss_api_free(err);
  return rc;
}
