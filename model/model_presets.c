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
