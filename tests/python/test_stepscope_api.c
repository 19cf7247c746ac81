/*
 * test_stepscope_api.c — the C API of libstepscope_analyzer.so
 * (analyzer/api/stepscope_api.h) called from C, as a binding calls it: the
 * report and diff are JSON documents of the right kind, the op table is
 * well-formed and holds as many ops per rank as the report counts, options
 * are applied (--steps, --rank filter the op table) and bad input returns
 * the command's exit code with its message. Runs in the sanitizer build too
 * (the Python tests cannot load an ASan library), so it also checks that the
 * API's paths leak nothing.
 *
 * usage: test_stepscope_api RUN   (a run directory with at least 2 ranks
 *                                  and 3 steps, e.g. a stepscope-gen run)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepscope_api.h"

static int failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* Sum of the ranks' "ops": N fields in a report (those followed by
 * "ops_joined_to_launch"; other objects have "ops" fields too). */
static long long sum_ops(const char *json) {
  long long n = 0;
  for (const char *p = json; (p = strstr(p, "\"ops\":")) != NULL; p += 6) {
    char *end;
    long long v = strtoll(p + 6, &end, 10);
    if (!strncmp(end, ",\"ops_joined_to_launch\"", 23)) n += v;
  }
  return n;
}

static const ss_api_ops_header *header_of(const void *t) {
  return t;
}

static const int32_t *rank_column(const void *t) {
  return (const int32_t *)((const char *)t + header_of(t)->column_offset[SS_OPS_RANK]);
}

static const int64_t *column64(const void *t, int c) {
  return (const int64_t *)((const char *)t + header_of(t)->column_offset[c]);
}

static void check_table(const void *t, size_t size) {
  const ss_api_ops_header *h = header_of(t);
  CHECK(memcmp(h->magic, SS_API_OPS_MAGIC, 8) == 0);
  CHECK(h->header_bytes == sizeof *h);
  CHECK(h->ncolumns == SS_OPS_NCOLUMNS);
  for (int c = 0; c < SS_OPS_NCOLUMNS; c++) {
    CHECK(h->column_offset[c] % 8 == 0);
    CHECK(h->column_offset[c] + h->nops <= size);
  }
  CHECK(h->strings_offset + h->strings_bytes <= size);
  /* nstrings NUL-terminated strings, the first empty */
  const char *s = (const char *)t + h->strings_offset;
  uint64_t nul = 0;
  for (uint64_t i = 0; i < h->strings_bytes; i++)
    nul += s[i] == 0;
  CHECK(nul == h->nstrings);
  CHECK(h->nstrings == 0 || s[0] == 0);
  const int32_t *name = (const int32_t *)((const char *)t + h->column_offset[SS_OPS_NAME]);
  const int64_t *start = column64(t, SS_OPS_START_NS), *end = column64(t, SS_OPS_END_NS);
  for (uint64_t i = 0; i < h->nops; i++) {
    CHECK(name[i] >= 0 && (uint64_t)name[i] < h->nstrings);
    CHECK(end[i] >= start[i]);
    if (failures > 20) break;
  }
}

/* rc and the message in *errp (read after the call: arguments are evaluated
 * in no fixed order, so the message is passed by address). */
static void expect_error(int rc, int want, char **errp, const char *fragment) {
  char *err = *errp;
  *errp = NULL;
  CHECK(rc == want);
  CHECK(err != NULL && strstr(err, fragment) != NULL);
  if (err && !strstr(err, fragment)) fprintf(stderr, "  message: %s (want '%s')\n", err, fragment);
  ss_api_free(err);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_stepscope_api RUN\n");
    return 2;
  }
  const char *run = argv[1];
  CHECK(ss_api_version() == SS_API_VERSION);

  /* analyze: the report, with and without options */
  char *json = NULL, *err = NULL;
  CHECK(ss_api_analyze(run, 0, NULL, &json, &err) == 0);
  CHECK(err == NULL);
  CHECK(json && strstr(json, "\"schema_version\":") && strstr(json, "\"ranks\":"));
  long long report_ops = json ? sum_ops(json) : -1;
  ss_api_free(json);
  const char *steps[] = {"--steps", "1:2", "--top", "3", "--threads", "1"};
  CHECK(ss_api_analyze(run, 6, steps, &json, &err) == 0);
  CHECK(json && strstr(json, "\"step\":1,") && !strstr(json, "\"step\":0,"));
  ss_api_free(json);

  const char *bad_steps[] = {"--steps", "x"};
  /* the op table of `stepscope ops` (a stepscope trace has no PyTorch ops: no rows) */
  CHECK(ss_api_op_perf(run, 0, NULL, "bf16=500T,bw=2T", &json, &err) == 0);
  CHECK(json && strstr(json, "\"generator\":\"stepscope ops\"") &&
        strstr(json, "\"bf16_flops_per_s\":5e+14") && strstr(json, "\"rows\":["));
  ss_api_free(json);
  expect_error(ss_api_op_perf(run, 0, NULL, "bf16=fast", &json, &err), 2, &err, "--peak");
  expect_error(ss_api_op_perf(run, 2, bad_steps, NULL, &json, &err), 2, &err, "bad --steps 'x'");
  /* its module tree and memory timeline (a stepscope trace has neither: empty tables) */
  CHECK(ss_api_op_modules(run, 0, NULL, &json, &err) == 0);
  CHECK(json && strstr(json, "\"generator\":\"stepscope ops --by module\"") &&
        strstr(json, "\"module_events\":0,") && strstr(json, "\"rows\":[]"));
  ss_api_free(json);
  CHECK(ss_api_op_memory(run, 0, NULL, 1, &json, &err) == 0);
  CHECK(json && strstr(json, "\"generator\":\"stepscope ops --memory\"") &&
        strstr(json, "\"devices\":[]"));
  ss_api_free(json);
  expect_error(ss_api_op_modules(run, 2, bad_steps, &json, &err), 2, &err, "bad --steps 'x'");
  expect_error(ss_api_op_memory(NULL, 0, NULL, 0, &json, &err), 2, &err, "no run given");

  /* analyze: errors are values with the command's codes and messages */
  json = (char *)1;
  expect_error(ss_api_analyze(run, 2, bad_steps, &json, &err), 2, &err, "bad --steps 'x'");
  CHECK(json == NULL);
  const char *no_value[] = {"--steps"};
  expect_error(ss_api_analyze(run, 1, no_value, &json, &err), 2, &err, "--steps needs a value");
  const char *unknown[] = {"--quiet", "1"};
  expect_error(ss_api_analyze(run, 2, unknown, &json, &err), 2, &err, "unknown option --quiet");
  const char *unknown_last[] = {"--bogus"}; /* last on the line: unknown, not "needs a value" */
  expect_error(ss_api_analyze(run, 1, unknown_last, &json, &err), 2, &err,
               "unknown option --bogus");
  const char *negative[] = {"--steps", "-1:5"}; /* step numbers are 0 or more, and fit */
  expect_error(ss_api_analyze(run, 2, negative, &json, &err), 2, &err, "bad --steps '-1:5'");
  const char *huge[] = {"--steps", "1:99999999999999999999"};
  expect_error(ss_api_analyze(run, 2, huge, &json, &err), 2, &err, "bad --steps '1:9999");
  const char *no_range[] = {"--step-range", "bogus"}; /* never a silent fall-back */
  expect_error(ss_api_analyze(run, 2, no_range, &json, &err), 1, &err,
               "--step-range 'bogus' names no range");
  const char *rank99[] = {"--rank", "99"};
  expect_error(ss_api_analyze(run, 2, rank99, &json, &err), 2, &err, "rank");
  const char *bad_rule[] = {"--comm-kernel", "("};
  expect_error(ss_api_analyze(run, 2, bad_rule, &json, &err), 2, &err, "bad --comm-kernel '('");
  const char *rule[] = {"--comm-kernel", ".*", "--compute-kernel", "x"};
  CHECK(ss_api_analyze(run, 4, rule, &json, &err) == 0); /* rules live for the call only */
  CHECK(json && strstr(json, "\"user_rules\":[{"));
  ss_api_free(json);
  CHECK(ss_api_analyze(run, 0, NULL, &json, &err) == 0);
  CHECK(json && strstr(json, "\"user_rules\":[]"));
  ss_api_free(json);
  const char *far[] = {"--steps", "1000:2000"};
  expect_error(ss_api_analyze(run, 2, far, &json, &err), 1, &err, "matches no step");
  expect_error(ss_api_analyze("/nonexistent/run", 0, NULL, &json, &err), 1, &err,
               "/nonexistent/run");
  expect_error(ss_api_analyze(NULL, 0, NULL, &json, &err), 2, &err, "no run");

  /* diff: the diff document; options for run B */
  CHECK(ss_api_diff(run, run, 0, NULL, &json, &err) == 0);
  CHECK(json && strstr(json, "\"kind\":\"stepscope.diff\""));
  ss_api_free(json);
  const char *steps_b[] = {"--steps-b", "0:1"};
  CHECK(ss_api_diff(run, run, 2, steps_b, &json, &err) == 0);
  ss_api_free(json);
  const char *bad_b[] = {"--steps-b", "z"};
  expect_error(ss_api_diff(run, run, 2, bad_b, &json, &err), 2, &err, "bad --steps-b 'z'");
  expect_error(ss_api_diff(run, "/nonexistent/b", 0, NULL, &json, &err), 1, &err, "/nonexistent/b");

  /* ops: every op, as many as the report counts; filters */
  void *table = NULL;
  size_t size = 0, all_size = 0;
  CHECK(ss_api_ops(run, 0, NULL, &table, &size, &err) == 0);
  CHECK(table != NULL && size >= sizeof(ss_api_ops_header));
  uint64_t all = 0;
  int ranks_seen[2] = {0, 0};
  if (table) {
    check_table(table, size);
    all = header_of(table)->nops;
    CHECK((long long)all == report_ops);
    const int32_t *rank = rank_column(table);
    for (uint64_t i = 0; i < all; i++)
      if (rank[i] >= 0 && rank[i] < 2) ranks_seen[rank[i]] = 1;
    for (uint64_t i = 1; i < all; i++)
      CHECK(rank[i] >= rank[i - 1]); /* ordered by rank */
    ss_api_free(table);
  }
  CHECK(ranks_seen[0] && ranks_seen[1]);
  const char *one_rank[] = {"--rank", "1"};
  CHECK(ss_api_ops(run, 2, one_rank, &table, &size, &err) == 0);
  if (table) {
    check_table(table, size);
    const int32_t *rank = rank_column(table);
    uint64_t n = header_of(table)->nops;
    CHECK(n > 0 && n < all);
    for (uint64_t i = 0; i < n; i++)
      CHECK(rank[i] == 1);
    ss_api_free(table);
  }
  const char *two_steps[] = {"--steps", "1:2"};
  CHECK(ss_api_ops(run, 2, two_steps, &table, &size, &err) == 0);
  if (table) {
    check_table(table, size);
    const int64_t *step = column64(table, SS_OPS_STEP);
    uint64_t n = header_of(table)->nops;
    CHECK(n > 0 && n < all);
    for (uint64_t i = 0; i < n; i++)
      CHECK(step[i] == 1 || step[i] == 2);
    ss_api_free(table);
  }
  const char *rank42[] = {"--rank", "42"};
  expect_error(ss_api_ops(run, 2, rank42, &table, &size, &err), 2, &err, "rank 42");
  CHECK(table == NULL && size == 0);
  expect_error(ss_api_ops(run, 2, bad_steps, &table, &size, &err), 2, &err, "bad --steps 'x'");

  /* the three-call form: the same table, written into the caller's memory */
  ss_api_ops_handle *h = NULL;
  CHECK(ss_api_ops_open(run, 0, NULL, &h, &size, &err) == 0);
  if (h) {
    CHECK(ss_api_ops(run, 0, NULL, &table, &all_size, &err) == 0);
    CHECK(all_size == size);
    char *mine = malloc(size + 16);
    CHECK(mine != NULL);
    if (mine && table) {
      expect_error(ss_api_ops_write(h, mine, size - 1, &err), 2, &err, "the table needs");
      CHECK(ss_api_ops_write(h, mine, size + 16, &err) == 0);
      CHECK(memcmp(mine, table, size) == 0);
      memset(mine, 0xff, size);
      CHECK(ss_api_ops_write(h, mine, size, &err) == 0); /* a handle writes again */
      CHECK(memcmp(mine, table, size) == 0);
    }
    free(mine);
    ss_api_free(table);
    ss_api_ops_close(h);
  }
  ss_api_ops_close(NULL);
  h = (ss_api_ops_handle *)1;
  expect_error(ss_api_ops_open(run, 2, rank42, &h, &size, &err), 2, &err, "rank 42");
  CHECK(h == NULL);

  if (failures)
    fprintf(stderr, "%d checks failed\n", failures);
  else
    printf("stepscope C API: all checks passed (%llu ops)\n", (unsigned long long)all);
  return failures ? 1 : 0;
}
