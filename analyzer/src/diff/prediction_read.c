/*
 * prediction_read.c — reads what `stepscope plan --json` wrote (docs/plan.md, "JSON"), so that
 * `stepscope diff RUN PREDICTION.json` can set a run against it (ssa_diff.h), and tells
 * such a file apart from a run by its content.
 *
 * It pulls tokens from the project's streaming JSON tokenizer (json_stream.c: the grammar is
 * checked as it reads, errors name the byte offset), so a malformed file is refused with a
 * reason and an enumeration of many thousand layouts is read without a tree. Unknown keys
 * are skipped (fields are only ever added within schema_version 1).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ssa_diff.h"
#include "json_stream.h"
#include "model_config.h"

typedef struct file_ctx {
  int fd;
} file_ctx;

static long file_read(void *ctx, void *buf, size_t n) {
  file_ctx *f = ctx;
  for (;;) {
    ssize_t got = read(f->fd, buf, n);
    if (got >= 0) return (long)got;
    if (errno != EINTR) return -1;
  }
}

/* Opens `path` as a regular file and starts a tokenizer on it. 0, or -1 (err says why).
 * O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused (reads of a
 * regular file ignore the flag). */
static int open_json(const char *path, file_ctx *f, js_stream *js, char *err, size_t errlen) {
  f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f->fd < 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "%s: not a regular file", path);
    close(f->fd);
    return -1;
  }
  if (js_init(js, file_read, f)) {
    snprintf(err, errlen, "out of memory");
    close(f->fd);
    return -1;
  }
  return 0;
}

static void close_json(file_ctx *f, js_stream *js) {
  js_free(js);
  close(f->fd);
}

static int is_plan_key(const char *k) {
  static const char *const keys[] = {"schema_version", "kind",    "job",    "device",
                                     "calibration",    "assumed", "layouts"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!strcmp(k, keys[i])) return 1;
  return 0;
}

int ssa_prediction_sniff(const char *path) {
  file_ctx f;
  js_stream js;
  char err[64];
  if (open_json(path, &f, &js, err, sizeof err)) return 0;
  int verdict = 0, specific = 0;
  if (js_next(&js) == JS_BEGIN_OBJECT) {
    for (;;) {
      js_kind t = js_next_member(&js);
      if (t != JS_KEY) { /* the end, or an error: the keys so far decide */
        verdict = specific;
        break;
      }
      if (!is_plan_key(js.tok)) break; /* another kind of JSON */
      if (!strcmp(js.tok, "kind")) {
        js_kind v = js_next(&js);
        if (v == JS_STRING) { /* says what it is */
          verdict = !strcmp(js.tok, "stepscope.plan");
          break;
        }
        specific = 1;
        if (v == JS_ERROR || js_skip_rest(&js, v)) {
          verdict = 1;
          break;
        }
        continue;
      }
      specific |= strcmp(js.tok, "schema_version") != 0;
      if (js_skip(&js)) {
        verdict = specific;
        break;
      }
    }
  }
  close_json(&f, &js);
  return verdict;
}

/* ---- reading ------------------------------------------------------------------------- */

typedef struct reader {
  js_stream js;
  char *err;
  size_t errlen;
} reader;

static int fail(reader *r, const char *what) {
  if (r->js.failed)
    snprintf(r->err, r->errlen, "%s (at byte %llu)", r->js.error,
             (unsigned long long)r->js.error_offset);
  else
    snprintf(r->err, r->errlen, "%s", what);
  return -1;
}

/* A number field at `offset` in the struct at `base`: double or int. */
typedef struct field {
  const char *key;
  size_t offset;
  char type; /* 'd' double, 'i' int, 's' string (size in `size`), 'b' bool as int */
  size_t size;
} field;

/* Reads the value that follows into the matching field (the value's first token is `v`). */
static int read_field(reader *r, const field *fl, void *base, js_kind v) {
  char *at = (char *)base + fl->offset;
  switch (fl->type) {
  case 'd':
  case 'i': {
    double x = NAN;
    if (v == JS_NUMBER)
      x = strtod(r->js.tok, NULL);
    else if (v != JS_NULL)
      return js_skip_rest(&r->js, v);
    if (fl->type == 'd') {
      memcpy(at, &x, sizeof x); /* the field at its offsetof: copied, not cast */
    } else if (isfinite(x) && fabs(x) < 2e9) {
      int i = (int)x;
      memcpy(at, &i, sizeof i);
    }
    return 0;
  }
  case 's':
    if (v == JS_STRING)
      snprintf(at, fl->size, "%s", r->js.tok);
    else
      return js_skip_rest(&r->js, v);
    return 0;
  case 'b':
    if (v != JS_TRUE && v != JS_FALSE) return js_skip_rest(&r->js, v);
    int b = v == JS_TRUE;
    memcpy(at, &b, sizeof b);
    return 0;
  }
  return 0;
}

/* Reads an object whose JS_BEGIN_OBJECT was just returned into `base` by `fields`; other
 * keys are skipped. */
static int read_object(reader *r, const field *fields, size_t n, void *base) {
  for (;;) {
    js_kind t = js_next_member(&r->js);
    if (t == JS_END_OBJECT) return 0;
    if (t != JS_KEY) return fail(r, "malformed object");
    const field *fl = NULL;
    for (size_t i = 0; i < n; i++)
      if (!strcmp(r->js.tok, fields[i].key)) fl = &fields[i];
    if (!fl) {
      if (js_skip(&r->js)) return fail(r, "malformed value");
      continue;
    }
    js_kind v = js_next(&r->js);
    if (v == JS_ERROR || read_field(r, fl, base, v)) return fail(r, "malformed value");
  }
}

#define F(type, key, member, t)                                                                    \
  { key, offsetof(type, member), t, sizeof(((type *)0)->member) }

static const field job_fields[] = {
    F(ssa_prediction, "layers", layers, 'i'),
    F(ssa_prediction, "hidden", hidden, 'i'),
    F(ssa_prediction, "heads", heads, 'i'),
    F(ssa_prediction, "vocab", vocab, 'i'),
    F(ssa_prediction, "ffn", ffn, 'i'),
    F(ssa_prediction, "seq", seq, 'i'),
    F(ssa_prediction, "max_seq", max_seq, 'i'),
    F(ssa_prediction, "gpus", gpus, 'i'),
    F(ssa_prediction, "gpus_per_node", gpus_per_node, 'i'),
    F(ssa_prediction, "global_batch", global_batch, 'i'),
};
static const field device_fields[] = {
    F(ssa_prediction, "name", device, 's'),
    F(ssa_prediction, "peak_flops", peak_flops, 'd'),
    F(ssa_prediction, "runtime_baseline_bytes", runtime_baseline_bytes, 'd'),
};
static const field calibration_fields[] = {
    F(ssa_prediction, "source", calibration_source, 's'),
    F(ssa_prediction, "measured_step_s", calibration_measured_step_s, 'd'),
};

/* The "layout" object's fields go through a staging struct (strings for the enums). */
typedef struct layout_text {
  int dp, tp, pp, cp, sp, zero, microbatches, micro_batch, virtual_stages, ep, shard_group;
  double bucket_mb;
  char name[160], schedule[32], recompute[32];
} layout_text;

static const field layout_fields[] = {
    F(layout_text, "name", name, 's'),
    F(layout_text, "dp", dp, 'i'),
    F(layout_text, "tp", tp, 'i'),
    F(layout_text, "pp", pp, 'i'),
    F(layout_text, "cp", cp, 'i'),
    F(layout_text, "sp", sp, 'b'),
    F(layout_text, "zero", zero, 'i'),
    F(layout_text, "recompute", recompute, 's'),
    F(layout_text, "microbatches", microbatches, 'i'),
    F(layout_text, "micro_batch", micro_batch, 'i'),
    F(layout_text, "schedule", schedule, 's'),
    F(layout_text, "virtual_stages", virtual_stages, 'i'),
    F(layout_text, "bucket_mb", bucket_mb, 'd'),
    F(layout_text, "ep", ep, 'i'),
    F(layout_text, "shard_group", shard_group, 'i'),
};
static const field memory_fields[] = {
    F(ssa_pred_layout, "parameters", mem_parameters, 'd'),
    F(ssa_pred_layout, "gradients", mem_gradients, 'd'),
    F(ssa_pred_layout, "optimizer", mem_optimizer, 'd'),
    F(ssa_pred_layout, "activations", mem_activations, 'd'),
    F(ssa_pred_layout, "other", mem_other, 'd'),
    F(ssa_pred_layout, "runtime_baseline", mem_runtime_baseline, 'd'),
    F(ssa_pred_layout, "total", mem_total, 'd'),
};
static const field breakdown_fields[] = {
    F(ssa_pred_layout, "compute", compute_s, 'd'),
    F(ssa_pred_layout, "bubble", bubble_s, 'd'),
    F(ssa_pred_layout, "tp", tp_s, 'd'),
    F(ssa_pred_layout, "cp", cp_s, 'd'),
    F(ssa_pred_layout, "pp", pp_s, 'd'),
    F(ssa_pred_layout, "grad_sync", grad_sync_s, 'd'),
    F(ssa_pred_layout, "host", host_s, 'd'),
    F(ssa_pred_layout, "wait", wait_s, 'd'),
    F(ssa_pred_layout, "ep", ep_s, 'd'),
};
static const field result_fields[] = {
    F(ssa_pred_layout, "memory_stage", memory_stage, 'i'),
    F(ssa_pred_layout, "fits", fits, 'b'),
    F(ssa_pred_layout, "step_time_s", step_time_s, 'd'),
    F(ssa_pred_layout, "tokens_per_s", tokens_per_s, 'd'),
    F(ssa_pred_layout, "mfu", mfu, 'd'),
    F(ssa_pred_layout, "bubble_theory", bubble_theory, 'd'),
    F(ssa_pred_layout, "binding", binding, 's'),
};
#undef F

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void layout_init(ssa_pred_layout *l) {
  memset(l, 0, sizeof *l);
  l->mem_parameters = l->mem_gradients = l->mem_optimizer = l->mem_activations = NAN;
  l->mem_other = l->mem_runtime_baseline = l->mem_total = NAN;
  l->step_time_s = l->tokens_per_s = l->mfu = l->bubble_theory = NAN;
  l->compute_s = l->bubble_s = l->tp_s = l->cp_s = l->pp_s = l->grad_sync_s = l->host_s = NAN;
  l->memory_stage = -1;
}

/* One element of "layouts" (its JS_BEGIN_OBJECT just returned). */
static int read_layout(reader *r, ssa_pred_layout *out, size_t index) {
  layout_init(out);
  layout_text lt;
  memset(&lt, 0, sizeof lt);
  int have_layout = 0;
  for (;;) {
    js_kind t = js_next_member(&r->js);
    if (t == JS_END_OBJECT) break;
    if (t != JS_KEY) return fail(r, "malformed layout");
    int which = !strcmp(r->js.tok, "layout")         ? 1
                : !strcmp(r->js.tok, "memory_bytes") ? 2
                : !strcmp(r->js.tok, "breakdown_s")  ? 3
                                                     : 0;
    if (which) {
      if (js_next(&r->js) != JS_BEGIN_OBJECT)
        return fail(r, "a layout's layout, memory_bytes and breakdown_s are objects");
      int rc = which == 1   ? read_object(r, layout_fields, N(layout_fields), &lt)
               : which == 2 ? read_object(r, memory_fields, N(memory_fields), out)
                            : read_object(r, breakdown_fields, N(breakdown_fields), out);
      if (rc) return -1;
      have_layout |= which == 1;
      continue;
    }
    const field *fl = NULL;
    for (size_t i = 0; i < N(result_fields); i++)
      if (!strcmp(r->js.tok, result_fields[i].key)) fl = &result_fields[i];
    if (!fl) {
      if (js_skip(&r->js)) return fail(r, "malformed value");
      continue;
    }
    js_kind v = js_next(&r->js);
    if (v == JS_ERROR || read_field(r, fl, out, v)) return fail(r, "malformed value");
  }
  mm_layout *l = &out->layout;
  l->dp = lt.dp;
  l->tp = lt.tp;
  l->pp = lt.pp;
  l->cp = lt.cp;
  l->sp = lt.sp;
  l->zero = lt.zero;
  l->microbatches = lt.microbatches;
  l->micro_batch = lt.micro_batch;
  l->virtual_stages = lt.virtual_stages > 0 ? lt.virtual_stages : 1;
  l->bucket_mb = lt.bucket_mb;
  l->ep = lt.ep > 0 ? lt.ep : 1;                            /* absent: a plan without experts */
  l->shard_group = lt.shard_group > 0 ? lt.shard_group : 0; /* absent: full sharding */
  l->schedule = MM_SCHED_1F1B;                              /* also for "none" (one stage) */
  mm_schedule_from_name(lt.schedule, &l->schedule);
  l->recompute = MM_RECOMPUTE_NONE;
  mm_recompute_from_name(lt.recompute, &l->recompute);
  snprintf(out->name, sizeof out->name, "%s", lt.name);
  if (!have_layout || l->dp < 1 || l->tp < 1 || l->pp < 1 || l->cp < 1 || l->microbatches < 1 ||
      l->micro_batch < 1 || !isfinite(out->step_time_s)) {
    snprintf(r->err, r->errlen,
             "layouts[%zu] lacks its layout (dp, tp, pp, cp, microbatches, micro_batch) or "
             "step_time_s",
             index);
    return -1;
  }
  return 0;
}

static int read_layouts(reader *r, ssa_prediction *p) {
  size_t cap = 0;
  for (;;) {
    js_kind t = js_next(&r->js);
    if (t == JS_END_ARRAY) return 0;
    if (t != JS_BEGIN_OBJECT) return fail(r, "\"layouts\" holds objects");
    if (p->nlayouts == cap) {
      size_t ncap = cap ? 2 * cap : 16;
      ssa_pred_layout *v = realloc(p->layouts, ncap * sizeof *v);
      if (!v) return fail(r, "out of memory");
      p->layouts = v;
      cap = ncap;
    }
    if (read_layout(r, &p->layouts[p->nlayouts], p->nlayouts)) return -1;
    p->nlayouts++;
  }
}

int ssa_prediction_load(const char *path, ssa_prediction *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  p->peak_flops = p->runtime_baseline_bytes = p->calibration_measured_step_s = NAN;
  if (errlen) err[0] = '\0';
  file_ctx f;
  reader r;
  r.err = err;
  r.errlen = errlen;
  if (open_json(path, &f, &r.js, err, errlen)) return -1;
  int rc = -1;
  double schema = NAN;
  int have_layouts = 0, have_job = 0;
  char kind[64] = "";
  if (js_next(&r.js) != JS_BEGIN_OBJECT) {
    fail(&r, "not a JSON object");
    goto out;
  }
  for (;;) {
    js_kind t = js_next_member(&r.js);
    if (t == JS_END_OBJECT) break;
    if (t != JS_KEY) {
      fail(&r, "malformed JSON");
      goto out;
    }
    char key[32];
    snprintf(key, sizeof key, "%s", r.js.tok);
    js_kind v = js_next(&r.js);
    if (v == JS_ERROR) {
      fail(&r, "malformed JSON");
      goto out;
    }
    int bad = 0;
    if (!strcmp(key, "schema_version")) {
      if (v == JS_NUMBER)
        schema = strtod(r.js.tok, NULL);
      else
        bad = js_skip_rest(&r.js, v);
    } else if (!strcmp(key, "kind")) {
      if (v == JS_STRING)
        snprintf(kind, sizeof kind, "%s", r.js.tok);
      else
        bad = js_skip_rest(&r.js, v);
    } else if (!strcmp(key, "job") && v == JS_BEGIN_OBJECT) {
      bad = read_object(&r, job_fields, N(job_fields), p);
      have_job = 1;
    } else if (!strcmp(key, "device") && v == JS_BEGIN_OBJECT) {
      bad = read_object(&r, device_fields, N(device_fields), p);
    } else if (!strcmp(key, "calibration") && v == JS_BEGIN_OBJECT) {
      bad = read_object(&r, calibration_fields, N(calibration_fields), p);
      p->calibrated = 1;
    } else if (!strcmp(key, "layouts") && v == JS_BEGIN_ARRAY) {
      bad = read_layouts(&r, p);
      have_layouts = 1;
    } else {
      bad = js_skip_rest(&r.js, v);
    }
    if (bad) {
      if (!err[0] || r.js.failed) fail(&r, "malformed JSON");
      goto out;
    }
  }
  if (js_next(&r.js) != JS_EOF) {
    fail(&r, "text after the JSON object");
    goto out;
  }
  if (kind[0] && strcmp(kind, "stepscope.plan")) {
    snprintf(err, errlen, "its kind is \"%s\", not a plan (stepscope.plan)", kind);
    goto out;
  }
  if (schema != 1) {
    snprintf(err, errlen, "schema_version %s: this stepscope reads plans of schema_version 1",
             isnan(schema) ? "missing" : "is not 1");
    goto out;
  }
  if (!have_job || !have_layouts || p->nlayouts == 0) {
    snprintf(err, errlen, "no %s: write it with `stepscope plan ... --json FILE`",
             !have_job ? "\"job\"" : "layouts");
    goto out;
  }
  rc = 0;
out:
  close_json(&f, &r.js);
  if (rc) ssa_prediction_free(p);
  return rc;
}

void ssa_prediction_free(ssa_prediction *p) {
  free(p->layouts);
  p->layouts = NULL;
  p->nlayouts = 0;
}
