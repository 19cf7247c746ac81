/*
 * model_presets.h — the named GPT-2 shapes that stepscope-train (`--model NAME`) and the
 * planner (`stepscope plan --model NAME`) both take: one table, so that a name means the
 * same model to both (part of the stepscope_model_math library, which depends on nothing but
 * the C library).
 */
#ifndef STEPSCOPE_TRAINER_MODEL_PRESETS_H
#define STEPSCOPE_TRAINER_MODEL_PRESETS_H

typedef struct mp_preset {
  const char *name;
  int layers, hidden, heads, seq;
  int vocab;   /* 0: the data's vocabulary (tiny trains on whatever it is given) */
  int max_seq; /* position table rows */
} mp_preset;

/* The vocabulary of the trainer's built-in corpus (bytes), which tiny uses by default. */
#define MP_BUILTIN_CORPUS_VOCAB 256

/* The preset of that name, or NULL. */
const mp_preset *mp_preset_find(const char *name);

/* "tiny, gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1.5b", for messages and --help. */
const char *mp_preset_names(void);

/* Models as real jobs train them, for the planner only (the trainer has no GQA, gated MLP,
 * RoPE or untied head, so `stepscope-train --model` does not take these names): the GPT-3
 * family (Brown et al. 2020, Table 2.1), Llama 3 (Llama 3 Herd of Models, Table 3; vocabulary
 * 128,256 as released), Mixtral 8x7B (Jiang et al. 2024, Table 1). */
typedef struct mp_plan_preset {
  const char *name;
  int layers, hidden, heads, kv_heads, ffn, vocab, seq;
  int gated_mlp, rope, untied;
  int experts, top_k;    /* every block a mixture of experts when experts > 0 */
  int head_dim, moe_ffn; /* 0: hidden / heads, ffn */
  /* sliding-window attention: the window and the full-attention period (Megatron-Core's
   * window_size and window_attn_skip_freq; 0: none) */
  int window, full_attention_every;
  int no_dropout; /* trained without dropout (their released configs: probability 0) */
} mp_plan_preset;

/* The planner-only preset of that name, or NULL. */
const mp_plan_preset *mp_plan_preset_find(const char *name);

/* Their names, comma-separated, for messages and --help. */
const char *mp_plan_preset_names(void);

#endif /* STEPSCOPE_TRAINER_MODEL_PRESETS_H */
