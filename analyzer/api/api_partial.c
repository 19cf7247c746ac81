/*
 * api_partial.c — the C API of partial analyses (stepscope_api.h; docs/scale.md "Partials"):
 * ss_api_analyze_partial writes one part of a run as `stepscope analyze RUN --part K/N
 * --partial OUT` does (ss_api_analyze_partial_cross: with `--cross FILE`, a second map round),
 * ss_api_merge_cross writes the cross files as `stepscope merge --cross-out DIR` does,
 * ss_api_merge returns the report of every part's partial as `stepscope merge --json -` does
 * (cli_partial.c does the work).
 */
#include <stdio.h>

#include "api_internal.h"
#include "cli_partial.h"
#include "stepscope_api.h"

API_EXPORT int ss_api_analyze_partial_cross(const char *run_path, int part_index, int part_count,
                                            const char *cross_path, const char *out_path, int argc,
                                            const char *const *argv, char **err_out) {
  api_options ao;
  if (err_out) *err_out = NULL;
  int rc = api_parse_options("analyze", argc, argv, 0u, &ao, err_out);
  if (rc) return rc;
  char msg[1400];
  if (!run_path || !*run_path || !out_path || !*out_path)
    rc = api_fail(err_out, 2, "stepscope analyze: no run or no partial given");
  else if (part_count < 1 || part_index < 0 || part_index >= part_count)
    rc = api_fail(err_out, 2, "stepscope analyze: bad part %d of %d", part_index, part_count);
  else if (cli_write_partial("analyze", run_path, &ao.opt, part_index, part_count,
                             cross_path && *cross_path ? cross_path : NULL, out_path, msg,
                             sizeof msg))
    rc = api_fail(err_out, 1, "%s", msg);
  api_options_free(&ao);
  return rc;
}

API_EXPORT int ss_api_analyze_partial(const char *run_path, int part_index, int part_count,
                                      const char *out_path, int argc, const char *const *argv,
                                      char **err_out) {
  return ss_api_analyze_partial_cross(run_path, part_index, part_count, NULL, out_path, argc, argv,
                                      err_out);
}

API_EXPORT int ss_api_merge_cross(int npaths, const char *const *paths, const char *dir, int argc,
                                  const char *const *argv, char **err_out) {
  api_options ao;
  if (err_out) *err_out = NULL;
  int rc = api_parse_options("merge", argc, argv, ALLOW_RANK, &ao, err_out);
  if (rc) return rc;
  char msg[1400];
  if (npaths < 1 || !paths || !dir || !*dir)
    rc = api_fail(err_out, 2, "stepscope merge: no partial or no --cross-out directory given");
  else if (cli_write_cross("merge", (char *const *)paths, (size_t)npaths, &ao.opt, dir, msg,
                           sizeof msg))
    rc = api_fail(err_out, 1, "%s", msg);
  api_options_free(&ao);
  return rc;
}

API_EXPORT int ss_api_merge(int npaths, const char *const *paths, int argc, const char *const *argv,
                            char **json_out, char **err_out) {
  api_options ao;
  int rc = api_begin_json_call("merge", "report", json_out, err_out, argc, argv,
                               ALLOW_RANK | ALLOW_TOP, &ao);
  if (rc) return rc;
  if (npaths < 1 || !paths) {
    api_options_free(&ao);
    return api_fail(err_out, 2, "stepscope merge: no partial given");
  }
  cli_loaded l;
  char msg[1400];
  int failed = cli_open_partials("merge", (char *const *)paths, (size_t)npaths, &ao.opt, &l, msg,
                                 sizeof msg);
  if (failed)
    rc = api_fail(err_out, failed, "%s", msg);
  else
    rc = api_json_to_memory("merge", api_write_report, &l.an, json_out, err_out);
  cli_loaded_free(&l);
  api_options_free(&ao);
  return rc;
}
