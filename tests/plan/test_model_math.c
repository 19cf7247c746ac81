/*
 * test_model_math.c — the model arithmetic the trainer and the planner share
 * (model/model_presets.c, model_flops.c, model_config.c; the stepscope_model_math library),
 * checked from both sides:
 *   - presets: GPT-2's published shapes, and the trainer's `--model NAME` resolves to them;
 *   - FLOPs per step by hand for a small model, equal to what the trainer writes in its
 *     "flops" metadata (train_model_flops_per_step) and to the planner's MFU numerator;
 *   - the configuration round trip: the trainer's config_to_json read back by the planner
 *     (plan_layout_of_config) gives the trainer's own layout, for DP, TP+SP, PP
 *     AFAB/1F1B/interleaved, CP, ZeRO and recomputation; and the layout words both ways.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "model_config.h"
#include "model_flops.h"
#include "model_presets.h"
#include "ssa_plan.h"
#include "train.h"

static int failures;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* Parses a trainer command line (words separated by spaces) into cfg; 0 on success. */
static int trainer_config(const char *line, train_config *cfg) {
  char buf[512];
  snprintf(buf, sizeof buf, "stepscope-train %s", line);
  char *argv[64];
  int argc = 0;
  for (char *save = NULL, *w = strtok_r(buf, " ", &save); w && argc < 63;
       w = strtok_r(NULL, " ", &save))
    argv[argc++] = w;
  argv[argc] = NULL;
  char err[256];
  if (config_parse(cfg, argc, argv, err, sizeof err) != 0 ||
      config_validate(cfg, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", line, err);
    return -1;
  }
  return 0;
}

static void presets(void) {
  static const struct {
    const char *name;
    int layers, hidden, heads, seq, vocab;
  } gpt2[] = {{"gpt2-124m", 12, 768, 12, 1024, 50257},
              {"gpt2-350m", 24, 1024, 16, 1024, 50257},
              {"gpt2-774m", 36, 1280, 20, 1024, 50257},
              {"gpt2-1.5b", 48, 1600, 25, 1024, 50257}};
  for (size_t i = 0; i < sizeof gpt2 / sizeof gpt2[0]; i++) {
    const mp_preset *p = mp_preset_find(gpt2[i].name);
    CHECK(p && p->layers == gpt2[i].layers && p->hidden == gpt2[i].hidden &&
          p->heads == gpt2[i].heads && p->seq == gpt2[i].seq && p->vocab == gpt2[i].vocab &&
          p->max_seq == 1024);
    char line[128];
    snprintf(line, sizeof line, "--model %s --steps 1", gpt2[i].name);
    train_config c;
    CHECK(trainer_config(line, &c) == 0);
    CHECK(c.layers == gpt2[i].layers && c.hidden == gpt2[i].hidden && c.heads == gpt2[i].heads &&
          c.seq == gpt2[i].seq && c.vocab == gpt2[i].vocab && c.max_seq == 1024);
  }
  const mp_preset *tiny = mp_preset_find("tiny");
  CHECK(tiny && tiny->layers == 2 && tiny->hidden == 64 && tiny->heads == 4 && tiny->seq == 64 &&
        tiny->vocab == 0);
  CHECK(mp_preset_find("gpt3") == NULL && mp_preset_find(NULL) == NULL);
  CHECK(strstr(mp_preset_names(), "gpt2-1.5b") != NULL);
}

static void flops(void) {
  /* L=2, C=64, V=256, T=32, 2 sequences (64 tokens):
   * parameters without the position table 256*64 + 2*(12*64^2 + 13*64) + 2*64 = 116480;
   * model 6*116480*64 + 12*2*64*32*64 = 44728320 + 3145728 = 47874048;
   * full recomputation adds 2*99968*64 + 4*2*64*32*64 = 12795904 + 1048576 = 13844480,
   * selective 4*2*64*32*64 = 1048576 (none with CP: ring attention keeps no matrix). */
  mm_layout s;
  memset(&s, 0, sizeof s);
  s.layers = 2;
  s.hidden = 64;
  s.heads = 4;
  s.vocab = 256;
  s.max_seq = 1024;
  s.seq = 32;
  s.cp = 1;
  CHECK(mf_flop_params(&s) == 116480.0);
  CHECK(mf_model_flops_per_step(&s, 2) == 47874048.0);
  CHECK(mf_hardware_flops_per_step(&s, 2) == 47874048.0);
  s.recompute = MM_RECOMPUTE_FULL;
  CHECK(mf_hardware_flops_per_step(&s, 2) == 47874048.0 + 13844480.0);
  s.recompute = MM_RECOMPUTE_SELECTIVE;
  CHECK(mf_hardware_flops_per_step(&s, 2) == 47874048.0 + 1048576.0);
  s.cp = 2;
  CHECK(mf_hardware_flops_per_step(&s, 2) == 47874048.0);

  /* the trainer's metadata counts the same */
  train_config c;
  CHECK(trainer_config("--layers 2 --hidden 64 --heads 4 --seq 32 --vocab 256 --batch 2 "
                       "--recompute full --steps 1",
                       &c) == 0);
  CHECK(train_model_flops_per_step(&c) == 47874048.0);
  CHECK(train_hardware_flops_per_step(&c) == 47874048.0 + 13844480.0);

  /* the planner's MFU has the same numerator */
  plan_job job;
  memset(&job, 0, sizeof job);
  job.model = s;
  job.model.cp = 0;
  job.model.recompute = MM_RECOMPUTE_NONE;
  job.gpus = 2;
  job.gpus_per_node = 8;
  job.global_batch = 2;
  job.dev = *plan_device_find("cpu");
  job.overlap = 1;
  mm_layout l = job.model;
  l.dp = 2;
  l.tp = l.pp = l.cp = 1;
  l.microbatches = 1;
  l.micro_batch = 1;
  l.virtual_stages = 1;
  l.schedule = MM_SCHED_1F1B;
  plan_result r;
  char err[256];
  CHECK(plan_predict(&job, &l, &r, err, sizeof err) == 0);
  double numerator = r.mfu * r.step_s * job.dev.peak_flops * job.gpus;
  CHECK(fabs(numerator - 47874048.0) < 1e-6 * 47874048.0);
}

/* The trainer's configuration, through its JSON, back into a layout. */
static void config_roundtrip(void) {
  /* (tiny's vocabulary is the data's, known once the data is read: given here) */
  static const char *const lines[] = {
      "--world 4 --dp 4 --zero 1 --bucket-mb 0.5 --vocab 256",
      "--world 4 --dp 2 --tp 2 --sp --recompute selective --vocab 256",
      "--world 4 --dp 2 --pp 2 --schedule afab --microbatches 4 --vocab 256",
      "--world 4 --pp 4 --layers 4 --schedule 1f1b --microbatches 8 --recompute full --vocab 256",
      ("--world 4 --dp 2 --pp 2 --layers 4 --schedule interleaved --virtual-stages 2 "
       "--microbatches 4 --vocab 300"),
      "--world 4 --dp 2 --cp 2 --zero 2 --batch 4 --vocab 256 --activations bf16",
      "--world 2 --dp 2 --zero 3 --model gpt2-124m --seq 128 --batch 2",
  };
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
    train_config c;
    if (trainer_config(lines[i], &c) != 0) {
      CHECK(!"trainer configuration");
      continue;
    }
    if (i == 3 && c.recompute != RECOMPUTE_FULL) CHECK(!"--recompute full parsed");
    char *json = config_to_json(&c);
    CHECK(json != NULL);
    if (!json) continue;
    mm_layout l;
    char err[256];
    int rc = plan_layout_of_config(json, &l, err, sizeof err);
    CHECK(rc == 0);
    if (rc == 0) {
      int ok = l.layers == c.layers && l.hidden == c.hidden && l.heads == c.heads &&
               l.seq == c.seq && l.max_seq == c.max_seq && l.vocab == c.vocab && l.dp == c.dp &&
               l.tp == c.tp && l.pp == c.pp && l.cp == c.cp && l.sp == c.sp && l.zero == c.zero &&
               (int)l.schedule == (int)c.schedule && l.virtual_stages == c.virtual_stages &&
               (int)l.recompute == (int)c.recompute && l.microbatches == c.microbatches &&
               l.micro_batch == config_micro_batch(&c) && l.bucket_mb == c.bucket_mb &&
               l.act_bytes == (strcmp(c.activations, "bf16") ? 4 : 2);
      if (!ok) fprintf(stderr, "config round trip differs for '%s': %s\n", lines[i], json);
      CHECK(ok);
    }
    free(json);
  }
  mm_layout l;
  char err[256];
  CHECK(plan_layout_of_config("{\"dp\":2}", &l, err, sizeof err) == -1 &&
        strstr(err, "does not describe the model") != NULL);
  for (int k = 0; k < 3; k++) {
    mm_schedule s;
    mm_recompute r;
    CHECK(mm_schedule_from_name(mm_schedule_name((mm_schedule)k), &s) == 0 && (int)s == k);
    CHECK(mm_recompute_from_name(mm_recompute_name((mm_recompute)k), &r) == 0 && (int)r == k);
  }
  mm_schedule s;
  CHECK(mm_schedule_from_name("gpipe", &s) == -1 && mm_schedule_from_name(NULL, &s) == -1);
}

int main(void) {
  presets();
  flops();
  config_roundtrip();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("model math: presets, FLOPs and the configuration round trip agree\n");
  return 0;
}
