/*
 * test_linked.c — the process-wide API: start/stop, rank from the
 * environment, streams, nested ranges, steps, marks, counters, metadata and
 * clock anchors all land in rank-NNNNN.trace.zst; calls while stopped are
 * no-ops; starting twice is refused.
 */
#include <sys/stat.h>

#include "test_util.h"

int main(void) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/stepscope-linked-%ld/run",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
  stepscope_range_push("ignored", NULL); /* not started: no-op */
  stepscope_range_pop();
  CHECK(!stepscope_active());
  setenv("RANK", "2", 1);
  setenv("WORLD_SIZE", "8", 1);
  stepscope_start_options opt = {.run_dir = dir,
                                 .rank = -1,
                                 .world_size = -1,
                                 .local_rank = -1,
                                 .producer = "test_linked",
                                 .config_json = "{\"dp\":8}"};
  stepscope_error err;
  CHECK_MSG(stepscope_start(&opt, &err) == 0, "%s", err.message);
  CHECK(stepscope_active());
  CHECK(stepscope_start(&opt, &err) == STEPSCOPE_E_STATE);
  char expect_path[600];
  snprintf(expect_path, sizeof expect_path, "%s/rank-00002.trace.zst", dir);
  CHECK(stepscope_current_path() && !strcmp(stepscope_current_path(), expect_path));
  stepscope_stream_declare(1, STEPSCOPE_STREAM_CPU, 0, "compute");
  stepscope_metadata_set("layout", "{\"world\":8,\"dp\":8}");
  for (uint64_t s = 0; s < 3; s++) {
    stepscope_step_begin(s);
    stepscope_range_push("forward", "{\"microbatch\":0,\"stage\":0}");
    stepscope_mark_now("checkpoint", NULL);
    stepscope_range_pop();
    stepscope_counter_now("loss", 0, 3.5 - (double)s);
    stepscope_op op = stepscope_op_begin(1, STEPSCOPE_CAT_COMPUTE, "matmul", "{\"m\":64}");
    stepscope_op_end(&op, 4096, 1000000 + s);
    stepscope_step_end();
  }
  CHECK(stepscope_stop() == 0);
  CHECK(!stepscope_active());
  stepscope_range_pop(); /* stopped: no-op */

  stepscope_reader *r = stepscope_reader_open(expect_path, &err);
  CHECK_MSG(r != NULL, "%s", err.message);
  if (!r) return 1;
  const stepscope_header *h = stepscope_reader_header(r);
  CHECK(h->rank == 2 && h->world_size == 8 && !strcmp(h->producer, "test_linked"));
  CHECK(!strcmp(h->config_json, "{\"dp\":8}") && h->clock_domain == STEPSCOPE_CLOCK_MONOTONIC);
  stepscope_record rec;
  int ops = 0, steps = 0, forwards = 0, marks = 0, counters = 0, anchors = 0, meta = 0, streams = 0;
  int machine = 0; /* the tracer's `machine` metadata: at start, and with the end's load at stop */
  uint64_t step_start[3] = {0}, step_end[3] = {0};
  while (stepscope_reader_next(r, &rec, &err) == 1) {
    switch (rec.kind) {
    case STEPSCOPE_REC_RANGE: {
      const char *name = stepscope_reader_string(r, rec.u.range.name);
      CHECK(!strcmp(stepscope_reader_string(r, rec.u.range.domain), "stepscope"));
      CHECK(rec.u.range.end_ns >= rec.u.range.start_ns);
      if (!strcmp(name, "step")) {
        CHECK(rec.u.range.payload_kind == STEPSCOPE_PAYLOAD_UINT64 && rec.u.range.payload < 3);
        if (rec.u.range.payload < 3) {
          step_start[rec.u.range.payload] = rec.u.range.start_ns;
          step_end[rec.u.range.payload] = rec.u.range.end_ns;
        }
        steps++;
      } else if (!strcmp(name, "forward")) {
        CHECK(!strcmp(stepscope_reader_string(r, rec.u.range.args),
                      "{\"microbatch\":0,\"stage\":0}"));
        forwards++;
      }
      break;
    }
    case STEPSCOPE_REC_MARK: marks++; break;
    case STEPSCOPE_REC_HOST_OP:
      CHECK(rec.u.host_op.stream == 1 && rec.u.host_op.category == STEPSCOPE_CAT_COMPUTE);
      CHECK(!strcmp(stepscope_reader_string(r, rec.u.host_op.name), "matmul"));
      CHECK(!strcmp(stepscope_reader_string(r, rec.u.host_op.args), "{\"m\":64}"));
      CHECK(rec.u.host_op.bytes == 4096 && rec.u.host_op.flops >= 1000000);
      CHECK(rec.u.host_op.end_ns >= rec.u.host_op.start_ns);
      ops++;
      break;
    case STEPSCOPE_REC_COUNTER: counters++; break;
    case STEPSCOPE_REC_CLOCK_ANCHOR:
      CHECK(rec.u.clock_anchor.realtime_ns > 1600000000ull * 1000000000ull);
      anchors++;
      break;
    case STEPSCOPE_REC_METADATA:
      if (!strcmp(rec.u.metadata.key, "machine")) {
        const char *v = rec.u.metadata.value_json;
        CHECK(!strncmp(v, "{\"cpus\":", 8) && strstr(v, "\"load_1m_start\":") != NULL);
        CHECK((strstr(v, "\"load_1m_end\":") != NULL) == (machine == 1)); /* the second: at stop */
        machine++;
        break;
      }
      CHECK(!strcmp(rec.u.metadata.key, "layout"));
      meta++;
      break;
    case STEPSCOPE_REC_STREAM:
      CHECK(!strcmp(stepscope_reader_string(r, rec.u.stream.name), "compute"));
      streams++;
      break;
    }
  }
  CHECK(ops == 3);
  CHECK(steps == 3 && forwards == 3 && marks == 3 && counters == 3 && meta == 1 && streams == 1);
  CHECK(machine == 2);
  CHECK(anchors >= 2); /* at start and at stop */
  for (int s = 1; s < 3; s++)
    CHECK(step_start[s] >= step_end[s - 1]);
  stepscope_reader_close(r);
  unlink(expect_path);
  if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
  return test_failures ? 1 : 0;
}
