/*
 * write_hostile_run.c — writes the small runs of the hardening tests
 * (test_hardening.sh): traces that a damaged disk or an attacker could
 * hand to stepscope. One mode per run:
 *   escape DIR   1 rank whose kernel name and hostname hold terminal escapes
 *   badutf8 DIR  1 rank whose hostname and kernel name hold bytes that are not UTF-8
 *   c1nan DIR    1 rank whose hostname and kernel name hold C1 controls as UTF-8 (U+009B
 *                CSI, U+009D OSC) and DEL, and whose counters are NaN and -infinity
 *   metadata DIR 1 rank whose trainer metadata holds absurd numbers (2^31 - 1 stages, 1e12)
 *   stages100 DIR  the same with a schedule of 100 stages (valid, beyond the simulation's 64)
 *   frames DIR   1 rank of 10 frames of 20 kernels after the header frame
 *                (kernel_000..kernel_199, each a new string, except that
 *                the first kernel of a frame is named like the last one of
 *                the frame before), for the tests that damage one frame
 *   world DIR    1 rank whose header declares world size 2^31 - 1
 *   bigtime DIR  1 rank whose kernels lie near 2^63 ns
 *   memory DIR   2 ranks: rank 0 holds only its header, rank 1 the memory
 *                metadata and MEMORY records
 *   layout1 DIR, layout2 DIR   1 rank each with a long layout metadata that
 *                differs in tp and pp (for `diff`'s layout note)
 *
 * usage: write_hostile_run MODE DIR
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "stepscope.h"

static const char *hostname = "node-a";

static stepscope_writer *open_rank(const char *dir, int rank, int world, size_t frame_bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/rank-%05d.trace.zst", dir, rank);
  stepscope_header h = {.rank = rank,
                        .world_size = world,
                        .pid = 100 + rank,
                        .clock_domain = STEPSCOPE_CLOCK_MONOTONIC,
                        .start_ns = 1000,
                        .hostname = hostname,
                        .producer = "write_hostile_run",
                        .device_name = "cpu",
                        .config_json = "{}"};
  stepscope_writer_options opt = {.frame_bytes = frame_bytes, .flush_interval_ms = 1000000};
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, &opt, &err);
  if (!w) fprintf(stderr, "%s\n", err.message);
  return w;
}

static int close_rank(stepscope_writer *w) {
  stepscope_error err;
  if (stepscope_writer_close(w, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  return 0;
}

static void step(stepscope_writer *w, uint32_t name, uint64_t start, uint64_t end, uint64_t n) {
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_RANGE;
  r.u.range.start_ns = start, r.u.range.end_ns = end;
  r.u.range.name = name, r.u.range.domain = stepscope_intern(w, "stepscope");
  r.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64, r.u.range.payload = n;
  stepscope_write(w, &r);
}

static void kernel(stepscope_writer *w, uint32_t name, uint64_t start, uint64_t end,
                   uint64_t corr) {
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_KERNEL;
  r.u.kernel.start_ns = start, r.u.kernel.end_ns = end;
  r.u.kernel.correlation_id = corr, r.u.kernel.name = name, r.u.kernel.stream = 7;
  stepscope_write(w, &r);
}

static int write_escape(const char *dir) {
  hostname = "node\x1b]0;title\x07-a";
  stepscope_writer *w = open_rank(dir, 0, 1, 0);
  if (!w) return 1;
  uint32_t evil = stepscope_intern(w, "gemm\x1b]0;pwned\x07\x1b[2J\nFAKE LINE\r\x7f\x9b"
                                      "31m");
  step(w, stepscope_intern(w, "step"), 10000, 90000, 0);
  for (int i = 0; i < 10; i++)
    kernel(w, evil, 10000 + i * 5000u, 13000 + i * 5000u, 0);
  return close_rank(w);
}

/* Bytes that are not UTF-8 in the header's host name and a kernel name (0xff 0xfe, a cut
 * 3-byte sequence): every JSON output must still be valid UTF-8 (U+FFFD in their place). */
static int write_badutf8(const char *dir) {
  hostname = "node\xff\xfe-a";
  stepscope_writer *w = open_rank(dir, 0, 1, 0);
  if (!w) return 1;
  uint32_t bad = stepscope_intern(w, "gemm\xe2\x82-\xc0\xafx");
  step(w, stepscope_intern(w, "step"), 10000, 90000, 0);
  for (int i = 0; i < 10; i++)
    kernel(w, bad, 10000 + i * 5000u, 13000 + i * 5000u, 0);
  return close_rank(w);
}

/* C1 controls are valid UTF-8 (U+0080..U+009F): a terminal may still obey them (U+009B is CSI,
 * U+009D OSC); and doubles that JSON cannot spell (NaN, -inf). */
static int write_c1_nan(const char *dir) {
  hostname = "node\xc2\x9d"
             "0;title\x07-a";
  stepscope_writer *w = open_rank(dir, 0, 1, 0);
  if (!w) return 1;
  uint32_t evil = stepscope_intern(w, "gemm\xc2\x9b"
                                      "2J\x7f\xc2\x9b"
                                      "31m");
  step(w, stepscope_intern(w, "step"), 10000, 90000, 0);
  kernel(w, evil, 10000, 13000, 0);
  const double values[2] = {0.0 / 0.0, -1.0 / 0.0};
  for (int i = 0; i < 2; i++) {
    stepscope_record r;
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_COUNTER;
    r.u.counter.time_ns = 20000 + (uint64_t)i;
    r.u.counter.name = stepscope_intern(w, "power");
    r.u.counter.value = values[i];
    stepscope_write(w, &r);
  }
  return close_rank(w);
}

static int write_frames(const char *dir) {
  stepscope_writer *w = open_rank(dir, 0, 1, 512);
  if (!w) return 1;
  uint32_t s = stepscope_intern(w, "step");
  for (int n = 0; n < 4; n++)
    step(w, s, 10000 + n * 250000u, 10000 + (n + 1) * 250000u - 1, (uint64_t)n);
  uint32_t ids[200];
  for (int i = 0; i < 200; i++) {
    char name[64];
    snprintf(name, sizeof name, "kernel_%03d", i);
    /* the first kernel of each frame is named like the last of the frame
     * before: its string lives there */
    ids[i] = i % 20 == 0 && i > 0 ? ids[i - 1] : stepscope_intern(w, name);
    kernel(w, ids[i], 10000 + i * 5000u, 12000 + i * 5000u, 0);
    if (i % 20 == 19) stepscope_writer_flush(w, NULL);
  }
  return close_rank(w);
}

static int write_world(const char *dir) {
  stepscope_writer *w = open_rank(dir, 0, INT32_MAX, 0);
  if (!w) return 1;
  uint32_t k = stepscope_intern(w, "gemm");
  step(w, stepscope_intern(w, "step"), 10000, 90000, 0);
  for (int i = 0; i < 10; i++)
    kernel(w, k, 10000 + i * 5000u, 13000 + i * 5000u, 0);
  return close_rank(w);
}

static int write_bigtime(const char *dir) {
  stepscope_writer *w = open_rank(dir, 0, 1, 0);
  if (!w) return 1;
  uint32_t k = stepscope_intern(w, "gemm");
  uint64_t top = UINT64_C(1) << 63;
  step(w, stepscope_intern(w, "step"), 10000, top + 90000, 0);
  kernel(w, k, 10000, 20000, 0);
  kernel(w, k, top - 50000, top - 40000, 0);
  kernel(w, k, top + 10000, top + 20000, 0);
  kernel(w, k, UINT64_MAX - 100, UINT64_MAX - 10, 0);
  return close_rank(w);
}

static int write_memory(const char *dir) {
  stepscope_writer *w = open_rank(dir, 0, 2, 0);
  if (!w || close_rank(w)) return 1;
  w = open_rank(dir, 1, 2, 0);
  if (!w) return 1;
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_METADATA;
  r.u.metadata.key = "memory";
  r.u.metadata.value_json = "{\"predicted\":{\"parameters\":1000,\"gradients\":1000,"
                            "\"optimizer\":2000,\"activations\":4000,\"total\":8000},"
                            "\"measured_peak_bytes\":9000}";
  stepscope_write(w, &r);
  step(w, stepscope_intern(w, "step"), 10000, 90000, 0);
  kernel(w, stepscope_intern(w, "gemm"), 20000, 30000, 0);
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_MEMORY;
  r.u.memory.time_ns = 25000, r.u.memory.bytes = 9000, r.u.memory.in_use_bytes = 9000;
  stepscope_write(w, &r);
  return close_rank(w);
}

static int write_layout(const char *dir, int variant) {
  stepscope_writer *w = open_rank(dir, 0, 4, 0);
  if (!w) return 1;
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_METADATA;
  r.u.metadata.key = "layout";
  r.u.metadata.value_json =
      variant == 1 ? "{\"rank\":0,\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"cp_rank\":0,"
                     "\"world\":4,\"dp\":1,\"tp\":2,\"pp\":2,\"cp\":1}"
                   : "{\"rank\":0,\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"cp_rank\":0,"
                     "\"world\":4,\"dp\":1,\"tp\":1,\"pp\":4,\"cp\":1}";
  stepscope_write(w, &r);
  step(w, stepscope_intern(w, "step"), 10000, 90000, 0);
  kernel(w, stepscope_intern(w, "gemm"), 20000, 30000, 0);
  return close_rank(w);
}

/* Trainer metadata with absurd numbers (issue 34): a schedule of 2^31 - 1 stages (read past
 * an allocation sized for 64), 1e12 micro-batches, a world of 1e12 and an infinite chunk
 * count; every reader must drop them with a warning instead of casting them to int. */
static int write_absurd_metadata(const char *dir, int stages100) {
  stepscope_writer *w = open_rank(dir, 0, 1, 0);
  if (!w) return 1;
  static const char *const meta[][2] = {
      {"layout", "{\"rank\":0,\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"cp_rank\":0,"
                 "\"world\":1e12,\"dp\":1,\"tp\":1,\"pp\":2,\"cp\":1}"},
      {"schedule", "{\"name\":\"1f1b\",\"stages\":2147483647,\"microbatches\":1e12,"
                   "\"virtual_stages\":1e999,\"bubble_theory\":7}"},
      {"flops", "{\"model_flops_per_step\":1e9,\"hardware_flops_per_step\":1e9,"
                "\"tokens_per_step\":64,\"peak_flops_per_device\":1e12,\"world\":1e12}"}};
  for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
    stepscope_record r;
    memset(&r, 0, sizeof r);
    r.kind = STEPSCOPE_REC_METADATA;
    r.u.metadata.key = meta[i][0];
    r.u.metadata.value_json = meta[i][1];
    if (stages100 && i == 1) /* a plausible count the bubble simulation does not take (> 64) */
      r.u.metadata.value_json = "{\"name\":\"1f1b\",\"stages\":100,\"microbatches\":4}";
    stepscope_write(w, &r);
  }
  uint32_t s = stepscope_intern(w, "step");
  for (int n = 0; n < 3; n++) {
    step(w, s, 10000 + n * 100000u, 10000 + (n + 1) * 100000u - 1, (uint64_t)n);
    kernel(w, stepscope_intern(w, "gemm"), 20000 + n * 100000u, 60000 + n * 100000u, 0);
  }
  return close_rank(w);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: write_hostile_run "
                    "escape|badutf8|c1nan|frames|world|bigtime|memory|layout1|layout2|metadata|"
                    "stages100 DIR\n");
    return 2;
  }
  const char *mode = argv[1], *dir = argv[2];
  mkdir(dir, 0755);
  if (!strcmp(mode, "escape")) return write_escape(dir);
  if (!strcmp(mode, "badutf8")) return write_badutf8(dir);
  if (!strcmp(mode, "c1nan")) return write_c1_nan(dir);
  if (!strcmp(mode, "frames")) return write_frames(dir);
  if (!strcmp(mode, "world")) return write_world(dir);
  if (!strcmp(mode, "bigtime")) return write_bigtime(dir);
  if (!strcmp(mode, "memory")) return write_memory(dir);
  if (!strcmp(mode, "layout1")) return write_layout(dir, 1);
  if (!strcmp(mode, "layout2")) return write_layout(dir, 2);
  if (!strcmp(mode, "metadata")) return write_absurd_metadata(dir, 0);
  if (!strcmp(mode, "stages100")) return write_absurd_metadata(dir, 1);
  fprintf(stderr, "write_hostile_run: unknown mode %s\n", mode);
  return 2;
}
