/*
 * model_presets.c — the preset table (model_presets.h): GPT-2's published shapes (12/24/36/48
 * layers of 768/1024/1280/1600 wide, 50257 tokens, 1024 positions) and `tiny`, a two-layer
 * model small enough for the tests.
 */
#include "model_presets.h"

#include <string.h>

static const mp_preset presets[] = {
    {"tiny", 2, 64, 4, 64, 0, 1024}, /* 1024 positions, like GPT-2 */
    {"gpt2-124m", 12, 768, 12, 1024, 50257, 1024},
    {"gpt2-350m", 24, 1024, 16, 1024, 50257, 1024},
    {"gpt2-774m", 36, 1280, 20, 1024, 50257, 1024},
    {"gpt2-1.5b", 48, 1600, 25, 1024, 50257, 1024},
};

const mp_preset *mp_preset_find(const char *name) {
  for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++)
    if (!strcmp(presets[i].name, name)) return &presets[i];
  return NULL;
}

const char *mp_preset_names(void) {
  return "tiny, gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1.5b";
}

/* The last field is no_dropout: Llama 3, Mixtral, Qwen3 and GPT-OSS are trained without dropout
 * (their released configs, and Megatron-Bridge's bridges and Megatron-MoE-ModelZoo's configs
 * set hidden and attention dropout 0); GPT-3 keeps Megatron's default 0.1.
 * GPT-3's 1.3B (24 heads of 128 on 2048) is left out: its table's heads do not divide its
 * width. GPT-3 13B's table gives d_model 5140 beside 40 heads of d_head 128: 40 x 128 = 5120,
 * the width taken here (5140 is not divisible by 40, so no layout could run it). */
static const mp_plan_preset plan_presets[] = {
    {"gpt3-125m", 12, 768, 12, 0, 0, 50257, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"gpt3-350m", 24, 1024, 16, 0, 0, 50257, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"gpt3-760m", 24, 1536, 16, 0, 0, 50257, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"gpt3-2.7b", 32, 2560, 32, 0, 0, 50257, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"gpt3-6.7b", 32, 4096, 32, 0, 0, 50257, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"gpt3-13b", 40, 5120, 40, 0, 0, 50257, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"gpt3-175b", 96, 12288, 96, 0, 0, 50257, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1},
    {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1},
    {"llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1},
    {"mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096, 1, 1, 1, 8, 2, 0, 0, 0, 0, 1},
    {"mixtral-8x22b", 56, 6144, 48, 8, 16384, 32000, 4096, 1, 1, 1, 8, 2, 0, 0, 0, 0, 1},
    /* Qwen3's heads are 128 wide whatever the hidden size; every block a mixture of 128
     * experts, 8 a token (its dense ffn, unused, kept for --moe-every) */
    {"qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 151936, 4096, 1, 1, 1, 128, 8, 128, 768, 0, 0, 1},
    {"qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 151936, 4096, 1, 1, 1, 128, 8, 128, 1536, 0, 0, 1},
    /* GPT-OSS 120B: 64 heads of 64 on 2880, 128 experts of 2880 (a gated MLP with a clamped
     * activation: three matrices), 4 a token, layers 1, 3, ... over a window of 128 positions
     * and 2, 4, ... over the whole sequence (Megatron-Bridge's gpt_oss_bridge.py; biases and
     * attention sinks left out: a few parameters a block) */
    {"gpt-oss-120b", 36, 2880, 64, 8, 2880, 201088, 4096, 1, 1, 1, 128, 4, 64, 2880, 128, 2, 1},
};

const mp_plan_preset *mp_plan_preset_find(const char *name) {
  for (size_t i = 0; name && i < sizeof plan_presets / sizeof plan_presets[0]; i++)
    if (!strcmp(plan_presets[i].name, name)) return &plan_presets[i];
  return NULL;
}

const char *mp_plan_preset_names(void) {
  return "gpt3-125m, gpt3-350m, gpt3-760m, gpt3-2.7b, gpt3-6.7b, gpt3-13b, gpt3-175b, "
         "llama3-8b, llama3-70b, llama3-405b, mixtral-8x7b, mixtral-8x22b, qwen3-30b-a3b, "
         "qwen3-235b-a22b, gpt-oss-120b";
}
