/*
 * make_seeds.c — writes the fuzzer's seed corpus: small but complete trace
 * files that exercise every record kind, interned strings, several frames and
 * a truncated tail, so fuzzing starts from valid structure.
 */
#include <stdio.h>
#include <string.h>

#include "record_codec.h"
#include "stepscope.h"

static void write_seed(const char *dir, int variant) {
  char path[4096];
  snprintf(path, sizeof path, "%s/seed-%02d.trace.zst", dir, variant);
  stepscope_header h = {.rank = variant,
                        .world_size = 8,
                        .pid = 1,
                        .hostname = "h",
                        .device_name = "cpu",
                        .config_json = "{\"seed\":1}"};
  stepscope_writer_options opt = {.frame_bytes = (size_t)(variant + 1) * 300};
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(path, &h, &opt, &err);
  if (!w) {
    fprintf(stderr, "%s\n", err.message);
    return;
  }
  uint32_t name = stepscope_intern(w, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  uint32_t gemm = stepscope_intern(w, "sm90_xmma_gemm_bf16bf16_bf16f32");
  for (uint32_t kind = STEPSCOPE_REC_METADATA; kind <= STEPSCOPE_REC_OVERHEAD; kind++) {
    for (int i = 0; i < 3 + variant; i++) {
      stepscope_record rec;
      memset(&rec, 0, sizeof rec);
      rec.kind = kind;
      uint64_t t = 1000000 + (uint64_t)i * 5000;
      switch (kind) {
      case STEPSCOPE_REC_METADATA: { /* the trainer's metadata, as it writes it (issue 34) */
        static const char *const meta[][2] = {
            {"layout", "{\"world\":4,\"dp\":2,\"tp\":1,\"pp\":2,\"cp\":1,\"rank\":0,"
                       "\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"cp_rank\":0}"},
            {"schedule", "{\"name\":\"1f1b\",\"stages\":2,\"microbatches\":4,"
                         "\"virtual_stages\":1,\"bubble_theory\":0.200000}"},
            {"flops", "{\"model_flops_per_step\":1.2e+09,\"hardware_flops_per_step\":1.6e+09,"
                      "\"total_params\":124000,\"active_params\":124000,\"tokens_per_step\":512,"
                      "\"peak_flops_per_device\":1e+12,\"world\":4}"},
            {"memory", "{\"predicted\":{\"parameters\":1000,\"gradients\":1000,"
                       "\"optimizer\":2000,\"activations\":500,\"other\":0,\"steady\":4500,"
                       "\"total\":4500},\"zero\":0,\"measured_peak_bytes\":4600,"
                       "\"runtime_baseline_bytes\":100}"},
            {"layout", "{\"dp\":2}"}};
        rec.u.metadata.key = meta[(i + variant) % 5][0];
        rec.u.metadata.value_json = meta[(i + variant) % 5][1];
        break;
      }
      case STEPSCOPE_REC_STREAM: rec.u.stream.stream = 7, rec.u.stream.name = gemm; break;
      case STEPSCOPE_REC_KERNEL:
        rec.u.kernel.start_ns = t, rec.u.kernel.end_ns = t + 900,
        rec.u.kernel.name = i % 2 ? name : gemm;
        rec.u.kernel.correlation_id = 100 + (uint64_t)i, rec.u.kernel.grid[0] = 132;
        break;
      case STEPSCOPE_REC_RANGE:
        rec.u.range.start_ns = t, rec.u.range.end_ns = t + 4000, rec.u.range.name = name;
        rec.u.range.payload_kind = STEPSCOPE_PAYLOAD_UINT64, rec.u.range.payload = (uint64_t)i;
        break;
      case STEPSCOPE_REC_COLLECTIVE:
        rec.u.collective.start_ns = t, rec.u.collective.end_ns = t + 100;
        rec.u.collective.comm_id = 0xabcdef, rec.u.collective.seq = (uint64_t)i;
        rec.u.collective.op = STEPSCOPE_COLL_ALLREDUCE, rec.u.collective.bytes = 1 << 20;
        rec.u.collective.algorithm = name;
        break;
      case STEPSCOPE_REC_COUNTER: rec.u.counter.time_ns = t, rec.u.counter.value = 1.5; break;
      default: rec.u.kernel.start_ns = t, rec.u.kernel.end_ns = t + 10; break; /* time first */
      }
      if (kind == STEPSCOPE_REC_CLOCK_ANCHOR) rec.u.clock_anchor.realtime_ns = t;
      if (kind == STEPSCOPE_REC_HEADER || kind == STEPSCOPE_REC_BLOCK ||
          kind == STEPSCOPE_REC_STRING)
        continue;
      if (!stepscope_record_kind_name(kind)) continue;
      stepscope_write(w, &rec);
    }
  }
  stepscope_writer_close(w, &err);
  if (variant == 3) { /* a truncated copy */
    FILE *f = fopen(path, "rb");
    char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/seed-truncated.trace.zst", dir);
    f = fopen(path, "wb");
    if (f) {
      fwrite(buf, 1, n > 40 ? n - 17 : n, f);
      fclose(f);
    }
  }
}

/* A seed for the target's framed mode (odd first byte): the decompressed
 * content of a frame — strings, a block, one record of each timed kind. */
static void write_framed_seed(const char *dir) {
  static uint8_t buf[8192];
  uint8_t *p = buf;
  *p++ = 1;
  p = codec_encode_string(p, 1, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 40);
  p = codec_encode_string(p, 2, "step", 4);
  codec_state st = {0, 0};
  p = codec_encode_block(&st, p, 42);
  for (uint32_t kind = STEPSCOPE_REC_KERNEL; kind <= STEPSCOPE_REC_EXTERNAL_CORRELATION; kind++) {
    stepscope_record rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = kind;
    rec.u.kernel.start_ns = 1000 + kind * 10;
    rec.u.kernel.end_ns = rec.u.kernel.start_ns + 5;
    if (kind == STEPSCOPE_REC_KERNEL) rec.u.kernel.name = 1, rec.u.kernel.correlation_id = 7;
    if (kind == STEPSCOPE_REC_RANGE) rec.u.range.name = 2, rec.u.range.payload = 3;
    if (codec_max_size(&rec) == 0) continue;
    p = codec_encode(&st, p, &rec);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/seed-framed-records", dir);
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(buf, 1, (size_t)(p - buf), f);
    fclose(f);
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  for (int v = 0; v < 6; v++)
    write_seed(argv[1], v);
  write_framed_seed(argv[1]);
  return 0;
}
