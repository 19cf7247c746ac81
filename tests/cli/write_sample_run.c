/*
 * write_sample_run.c — writes a small 3-rank run with known contents for the
 * command-line tests: per rank 100 kernels, 100 launch API records, 2 step
 * ranges, 4 collectives, metadata, a dropped-records notice of 5 on rank 1,
 * and rank 2's file cut in the middle of its last frame.
 *
 * usage: write_sample_run DIR
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stepscope.h"

static int write_rank(const char *dir, int rank) {
  char path[4096];
  snprintf(path, sizeof path, "%s/rank-%05d.trace.zst", dir, rank);
  stepscope_header h = {.rank = rank,
                        .world_size = 3,
                        .local_rank = rank,
                        .pid = 100 + rank,
                        .clock_domain = STEPSCOPE_CLOCK_MONOTONIC,
                        .start_ns = 1000,
                        .hostname = "node-a",
                        .producer = "write_sample_run",
                        .device_name = "cpu",
                        .config_json = "{\"dp\":3}"};
  stepscope_writer_options opt = {.frame_bytes = 1024};
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, &opt, &err);
  if (!w) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  uint32_t gemm = stepscope_intern(w, "gemm \"tn\"");
  uint32_t launch = stepscope_intern(w, "cudaLaunchKernel");
  uint32_t step = stepscope_intern(w, "step"), domain = stepscope_intern(w, "stepscope");
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_METADATA;
  r.u.metadata.key = "layout";
  r.u.metadata.value_json = "{\"world\":3,\"dp\":3}";
  stepscope_write(w, &r);
  for (int s = 0; s < 2; s++) {
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_RANGE;
    r.u.range.start_ns = 10000 + (uint64_t)s * 100000;
    r.u.range.end_ns = r.u.range.start_ns + 99000;
    r.u.range.name = step, r.u.range.domain = domain;
    r.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64, r.u.range.payload = (uint64_t)s;
    stepscope_write(w, &r);
  }
  for (int i = 0; i < 100; i++) {
    uint64_t t = 10000 + (uint64_t)i * 2000;
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_API;
    r.u.api.start_ns = t, r.u.api.end_ns = t + 300, r.u.api.correlation_id = (uint64_t)i + 1;
    r.u.api.name = launch, r.u.api.api_kind = STEPSCOPE_API_RUNTIME;
    stepscope_write(w, &r);
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_KERNEL;
    r.u.kernel.start_ns = t + 500, r.u.kernel.end_ns = t + 1500;
    r.u.kernel.correlation_id = (uint64_t)i + 1, r.u.kernel.name = gemm, r.u.kernel.stream = 7;
    stepscope_write(w, &r);
  }
  for (int i = 0; i < 4; i++) {
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_COLLECTIVE;
    r.u.collective.start_ns = 50000 + (uint64_t)i * 40000,
    r.u.collective.end_ns = r.u.collective.start_ns + 5000;
    r.u.collective.comm_id = 0xd0d0, r.u.collective.seq = (uint64_t)i,
    r.u.collective.op = STEPSCOPE_COLL_ALLREDUCE;
    r.u.collective.bytes = 1 << 20, r.u.collective.comm_size = 3,
    r.u.collective.comm_rank = (uint32_t)rank;
    stepscope_write(w, &r);
  }
  if (rank == 1) {
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_DROPPED;
    r.u.dropped.time_ns = 300000, r.u.dropped.count = 5, r.u.dropped.source = STEPSCOPE_DROP_CUPTI;
    stepscope_write(w, &r);
  }
  /* the records' last frame ends here; closing adds the END record's frame */
  if (stepscope_writer_flush(w, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  uint64_t records_end = stepscope_writer_bytes_written(w);
  if (stepscope_writer_close(w, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  /* rank 2: cut the records' last frame short, a crash mid-write (so the
   * END record is gone too: the file was not closed) */
  if (rank == 2 && truncate(path, (off_t)records_end - 10) != 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: write_sample_run DIR\n");
    return 2;
  }
  mkdir(argv[1], 0755);
  for (int rank = 0; rank < 3; rank++)
    if (write_rank(argv[1], rank)) return 1;
  return 0;
}
