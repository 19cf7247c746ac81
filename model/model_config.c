/*
 * model_config.c — layout words and the configuration reader (model_config.h).
 */
#include "model_config.h"

#include <stdio.h>
#include <string.h>

static const char *const schedule_names[] = {"afab", "1f1b", "interleaved"};
static const char *const recompute_names[] = {"none", "selective", "full"};
static const char *const recompute_module_names[MM_RC_MODULES] = {"core_attn", "layernorm", "mlp",
                                                                  "moe_act", "moe"};

const char *mm_recompute_module_name(int k) {
  return k >= 0 && k < MM_RC_MODULES ? recompute_module_names[k] : "?";
}

void mm_recompute_modules_text(int bits, const char *sep, char *buf, size_t size) {
  size_t used = 0;
  if (size) buf[0] = 0;
  for (int k = 0; k < MM_RC_MODULES && used < size; k++)
    if (bits & (1 << k))
      used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? sep : "",
                               recompute_module_names[k]);
}

void mm_recompute_text(mm_recompute r, int modules, char *buf, size_t size) {
  if (r != MM_RECOMPUTE_SELECTIVE || !modules) {
    snprintf(buf, size, "%s", mm_recompute_name(r));
    return;
  }
  char names[80];
  mm_recompute_modules_text(modules, "+", names, sizeof names);
  snprintf(buf, size, "selective(%s)", names);
}

const char *mm_schedule_name(mm_schedule s) {
  return (unsigned)s < 3 ? schedule_names[s] : "?";
}

const char *mm_recompute_name(mm_recompute r) {
  return (unsigned)r < 3 ? recompute_names[r] : "?";
}

int mm_schedule_from_name(const char *name, mm_schedule *out) {
  for (int i = 0; name && i < 3; i++)
    if (!strcmp(name, schedule_names[i])) {
      *out = (mm_schedule)i;
      return 0;
    }
  return -1;
}

int mm_recompute_from_name(const char *name, mm_recompute *out) {
  for (int i = 0; name && i < 3; i++)
    if (!strcmp(name, recompute_names[i])) {
      *out = (mm_recompute)i;
      return 0;
    }
  return -1;
}

static int int_of(const mm_config_reader *r, const char *key, int fallback) {
  double v;
  return r->number(r->ctx, key, &v) && v >= -2e9 && v <= 2e9 ? (int)v : fallback;
}

int mm_layout_from_config(const mm_config_reader *r, mm_layout *l, char *err, size_t errlen) {
  memset(l, 0, sizeof *l);
  l->layers = int_of(r, "layers", 0);
  l->hidden = int_of(r, "hidden", 0);
  l->heads = int_of(r, "heads", 0);
  l->seq = int_of(r, "seq", 0);
  l->max_seq = int_of(r, "max_seq", 1024);
  l->vocab = int_of(r, "vocab", 0);
  l->dp = int_of(r, "dp", 1);
  l->tp = int_of(r, "tp", 1);
  l->pp = int_of(r, "pp", 1);
  l->cp = int_of(r, "cp", 1);
  l->zero = int_of(r, "zero", 0);
  l->microbatches = int_of(r, "microbatches", 1);
  l->micro_batch = int_of(r, "micro_batch", 1);
  l->virtual_stages = int_of(r, "virtual_stages", 1);
  double mb;
  l->bucket_mb = r->number(r->ctx, "bucket_mb", &mb) ? mb : 1;
  char s[32] = "";
  l->schedule = MM_SCHED_1F1B;
  if (r->string(r->ctx, "schedule", s, sizeof s)) mm_schedule_from_name(s, &l->schedule);
  l->recompute = MM_RECOMPUTE_NONE;
  if (r->string(r->ctx, "recompute", s, sizeof s)) mm_recompute_from_name(s, &l->recompute);
  int sp = 0;
  l->sp = r->boolean(r->ctx, "sp", &sp) && sp;
  s[0] = '\0';
  r->string(r->ctx, "activations", s, sizeof s);
  l->act_bytes = !strcmp(s, "bf16") ? 2 : 4;
  s[0] = '\0';
  r->string(r->ctx, "gemm_weights", s, sizeof s);
  l->gemm_weights_bf16 = !strcmp(s, "bf16") && l->zero < 3; /* ZeRO-3 refuses it */
  /* mixture of experts (absent: dense) */
  l->experts = int_of(r, "experts", 0);
  l->top_k = int_of(r, "top_k", 2);
  l->moe_every = int_of(r, "moe_every", 1);
  l->ep = int_of(r, "ep", 1);
  if (l->layers < 1 || l->hidden < 1 || l->heads < 1 || l->seq < 1 || l->vocab < 1) {
    snprintf(err, errlen,
             "the run's configuration does not describe the model (layers, "
             "hidden, heads, seq, vocab): is it a stepscope-train run?");
    return -1;
  }
  return 0;
}
