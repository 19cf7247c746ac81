/*
 * write_memory_run.c — writes a one-rank run whose trace holds MEMORY records with known
 * answers (issue 33 §3: the tracer's CUDA memory records and the CPU trainer's feed the same
 * memory-over-time analysis as Kineto's "[memory]" events), for memory_records.sh.
 *
 * usage: write_memory_run DIR
 * Two steps, [1000, 2000) and [2000, 3000) ns; on CUDA device 0: alloc A 100 B (t 1100, in use
 * 100), alloc B 300 (1200, 400), free A (1300, 300), alloc C 50 at A's address (2100, 350),
 * free B (2200, 50); on CUDA device 1: alloc D 7 (1500, 7); on the host (device 0xffffffff):
 * alloc E 64 (1050, 64), free E (2500, 0). memory_records.sh holds the answers.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "stepscope.h"

static void step(stepscope_writer *w, uint64_t start, uint64_t end, uint64_t n) {
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_RANGE;
  r.u.range.start_ns = start, r.u.range.end_ns = end;
  r.u.range.name = stepscope_intern(w, "step");
  r.u.range.domain = stepscope_intern(w, "stepscope");
  r.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64, r.u.range.payload = n;
  stepscope_write(w, &r);
}

static void memory(stepscope_writer *w, uint64_t t, uint32_t device, uint64_t addr, uint64_t bytes,
                   uint64_t in_use, uint32_t kind) {
  stepscope_record r;
  memset(&r, 0, sizeof r);
  r.kind = STEPSCOPE_REC_MEMORY;
  r.u.memory.time_ns = t, r.u.memory.device = device, r.u.memory.address = addr;
  r.u.memory.bytes = bytes, r.u.memory.in_use_bytes = in_use, r.u.memory.memory_kind = kind;
  stepscope_write(w, &r);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: write_memory_run DIR\n");
    return 2;
  }
  mkdir(argv[1], 0755);
  char path[4096];
  snprintf(path, sizeof path, "%s/rank-00000.trace.zst", argv[1]);
  stepscope_header h = {.rank = 0,
                        .world_size = 1,
                        .pid = 100,
                        .clock_domain = STEPSCOPE_CLOCK_MONOTONIC,
                        .start_ns = 1000,
                        .hostname = "node-a",
                        .producer = "write_memory_run",
                        .device_name = "NVIDIA H100 80GB HBM3",
                        .config_json = "{}"};
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, NULL, &err);
  if (!w) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  const uint32_t host = UINT32_MAX;
  const uint32_t alloc = STEPSCOPE_MEM_ALLOC, release = STEPSCOPE_MEM_FREE;
  step(w, 1000, 2000, 0);
  step(w, 2000, 3000, 1);
  memory(w, 1050, host, 0x9000, 64, 64, alloc);
  memory(w, 1100, 0, 0x1000, 100, 100, alloc);
  memory(w, 1200, 0, 0x2000, 300, 400, alloc);
  memory(w, 1300, 0, 0x1000, 100, 300, release);
  memory(w, 1500, 1, 0x1000, 7, 7, alloc);
  memory(w, 2100, 0, 0x1000, 50, 350, alloc);
  memory(w, 2200, 0, 0x2000, 300, 50, release);
  memory(w, 2500, host, 0x9000, 64, 0, release);
  if (stepscope_writer_close(w, &err) != 0) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  return 0;
}
