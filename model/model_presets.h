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

#endif /* STEPSCOPE_TRAINER_MODEL_PRESETS_H */
