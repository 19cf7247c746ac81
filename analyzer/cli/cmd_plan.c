/*
 * cmd_plan.c — `stepscope plan`: which layout for this model on N devices, and how much
 * memory and time will it take (analyzer/src/plan/ssa_plan.h; docs/plan.md).
 *
 * Parses the model, the job and the layout options, optionally calibrates on a measured
 * run (--from RUN; the model and job then default to the run's), and either predicts one
 * layout (every layout option given, or --what-if on the run's layout) or enumerates them
 * all and prints a ranked table; --json and --csv write every layout. Exit codes: 0 ok,
 * 1 the run could not be read or no layout is possible, 2 usage error.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_config.h"
#include "model_presets.h"
#include "ssa_plan.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: stepscope plan [MODEL] --gpus N --global-batch B [options]\n"
          "Predicts per-device memory (by component) and step time, tokens/s and MFU of every\n"
          "parallel layout of a GPT model on N devices (the Ultra-Scale Playbook's calculators\n"
          "for stepscope-train's layouts), ranked best first with the constraint that binds.\n"
          "\n"
          "model (as stepscope-train takes it):\n"
          "  --model NAME          tiny, gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1.5b\n"
          "  --layers N --hidden C --heads H --vocab V   (override or replace the preset)\n"
          "  --seq T               sequence length [preset's; 1024 for gpt2-*]\n"
          "  --ffn F               MLP width [4 x hidden]\n"
          "  --max-seq N           position table rows [1024]\n"
          "  --experts E --top-k K --moe-every N   mixture of experts (stepscope-train's;\n"
          "                        layouts then also vary --ep, FLOPs count active parameters)\n"
          "job:\n"
          "  --gpus N              devices [the run's world with --from]\n"
          "  --gpus-per-node G     devices per node (groups inside a node use its links) [8]\n"
          "  --global-batch B      sequences per optimizer step [the run's with --from]\n"
          "  --device D            %s [h100-sxm; the run's device with --from]\n"
          "  --device-memory-gib X memory per device instead of the table's\n"
          "  --cores N             cpu: the cores the ranks of a node share (their rate is\n"
          "                        min(1, cores / ranks) of a core's) [this machine's, assumed]\n"
          "  --no-overlap          gradient all-reduce not overlapped with backward\n"
          "layout (each fixes that choice; all of them: predict one layout):\n"
          "  --dp --tp --pp --cp N, --sp | --no-sp, --zero 0..3,\n"
          "  --recompute none|selective|full, --microbatches M,\n"
          "  --schedule afab|1f1b|interleaved, --virtual-stages V, --bucket-mb MB [1],\n"
          "  --ep N (with --experts: expert parallelism carved out of dp)\n"
          "calibration:\n"
          "  --from RUN            a traced stepscope-train run: achieved FLOP rate, measured\n"
          "                        bandwidths and latency, host overhead, bubble excess, memory\n"
          "                        baseline (otherwise the device table's values are assumed)\n"
          "  --what-if K=V,...     with --from: the run's layout changed (keys: dp tp pp cp sp\n"
          "                        zero recompute microbatches schedule virtual_stages\n"
          "                        global_batch), predicted beside what the run measured\n"
          "output:\n"
          "  --top N               rows of the table [20]\n"
          "  --json FILE           every layout as JSON (docs/plan.md); '-' = stdout\n"
          "  --csv FILE            every layout as CSV; '-' = stdout\n"
          "  --threads N           threads for loading --from RUN [all cores]\n",
          plan_device_names());
}

static int parse_int(const char *opt, const char *v, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || errno || *end || end == v || x < lo || x > hi) {
    fprintf(stderr, "stepscope plan: %s needs an integer in [%d, %d], got '%s'\n", opt, lo, hi,
            v ? v : "");
    return -1;
  }
  *out = (int)x;
  return 0;
}

static int parse_double(const char *opt, const char *v, double lo, double *out) {
  char *end;
  errno = 0;
  double x = v ? strtod(v, &end) : 0;
  if (!v || errno || *end || end == v || !(x >= lo)) {
    fprintf(stderr, "stepscope plan: %s needs a number >= %g, got '%s'\n", opt, lo, v ? v : "");
    return -1;
  }
  *out = x;
  return 0;
}

static int parse_schedule(const char *v, int *out) {
  mm_schedule k;
  if (mm_schedule_from_name(v, &k) != 0) {
    fprintf(stderr, "stepscope plan: --schedule takes afab, 1f1b or interleaved, not '%s'\n",
            v ? v : "");
    return -1;
  }
  *out = (int)k;
  return 0;
}

static int parse_recompute(const char *v, int *out) {
  mm_recompute k;
  if (mm_recompute_from_name(v, &k) != 0) {
    fprintf(stderr, "stepscope plan: --recompute takes none, selective or full, not '%s'\n",
            v ? v : "");
    return -1;
  }
  *out = (int)k;
  return 0;
}

/* Applies one --what-if KEY=VALUE to a layout (and the job's global batch). */
static int apply_what_if(char *kv, mm_layout *l, int *global_batch) {
  char *eq = strchr(kv, '=');
  if (!eq) {
    fprintf(stderr, "stepscope plan: --what-if: '%s' is not KEY=VALUE\n", kv);
    return -1;
  }
  *eq = '\0';
  const char *k = kv, *v = eq + 1;
  int x;
  if (!strcmp(k, "schedule")) return parse_schedule(v, &x) ? -1 : (l->schedule = (mm_schedule)x, 0);
  if (!strcmp(k, "recompute"))
    return parse_recompute(v, &x) ? -1 : (l->recompute = (mm_recompute)x, 0);
  if (!strcmp(k, "sp")) {
    if (strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "true") && strcmp(v, "false")) {
      fprintf(stderr, "stepscope plan: --what-if sp takes 0/1/true/false, not '%s'\n", v);
      return -1;
    }
    l->sp = !strcmp(v, "1") || !strcmp(v, "true");
    return 0;
  }
  struct {
    const char *key;
    int *field;
    int lo, hi;
  } ints[] = {{"dp", &l->dp, 1, 1 << 20},
              {"tp", &l->tp, 1, 1 << 12},
              {"pp", &l->pp, 1, 1 << 12},
              {"cp", &l->cp, 1, 1 << 12},
              {"zero", &l->zero, 0, 3},
              {"microbatches", &l->microbatches, 1, 1 << 16},
              {"virtual_stages", &l->virtual_stages, 1, 64},
              {"global_batch", global_batch, 1, 1 << 24}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    if (!strcmp(k, ints[i].key)) {
      char name[64];
      snprintf(name, sizeof name, "--what-if %s", k);
      return parse_int(name, v, ints[i].lo, ints[i].hi, ints[i].field);
    }
  fprintf(stderr, "stepscope plan: --what-if: unknown key '%s'\n", k);
  return -1;
}

static FILE *open_out(const char *path) {
  if (!strcmp(path, "-")) return stdout;
  FILE *f = fopen(path, "w");
  if (!f) fprintf(stderr, "stepscope plan: cannot write %s: %s\n", path, strerror(errno));
  return f;
}

static int close_out(FILE *f, const char *path) {
  if (f == stdout) return fflush(f) ? -1 : 0;
  if (fclose(f) != 0) {
    fprintf(stderr, "stepscope plan: writing %s failed: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

int cmd_plan(int argc, char **argv) {
  plan_job job;
  memset(&job, 0, sizeof job);
  job.overlap = 1;
  job.gpus_per_node = 8;
  plan_filter f;
  plan_filter_any(&f);
  const char *model = NULL, *device = NULL, *from = NULL, *json_path = NULL, *csv_path = NULL;
  char *what_if = NULL;
  int layers = 0, hidden = 0, heads = 0, vocab = 0, seq = 0, ffn = 0, max_seq = 0;
  int experts = -1, top_k = 2, moe_every = 1;
  int top = 20, threads = 0;
  double mem_gib = 0, bucket_mb = 1;
  int cores = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int rc = 0, consumed = 1;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--model")) {
      model = v;
    } else if (!strcmp(a, "--layers")) {
      rc = parse_int(a, v, 1, 100000, &layers);
    } else if (!strcmp(a, "--hidden")) {
      rc = parse_int(a, v, 1, 1 << 20, &hidden);
    } else if (!strcmp(a, "--heads")) {
      rc = parse_int(a, v, 1, 1 << 16, &heads);
    } else if (!strcmp(a, "--vocab")) {
      rc = parse_int(a, v, 1, 1 << 24, &vocab);
    } else if (!strcmp(a, "--seq")) {
      rc = parse_int(a, v, 1, 1 << 24, &seq);
    } else if (!strcmp(a, "--ffn")) {
      rc = parse_int(a, v, 1, 1 << 24, &ffn);
    } else if (!strcmp(a, "--max-seq")) {
      rc = parse_int(a, v, 1, 1 << 24, &max_seq);
    } else if (!strcmp(a, "--experts")) {
      rc = parse_int(a, v, 0, 1024, &experts);
    } else if (!strcmp(a, "--top-k")) {
      rc = parse_int(a, v, 1, 1024, &top_k);
    } else if (!strcmp(a, "--moe-every")) {
      rc = parse_int(a, v, 1, 100000, &moe_every);
    } else if (!strcmp(a, "--ep")) {
      rc = parse_int(a, v, 1, 1 << 12, &f.ep);
    } else if (!strcmp(a, "--gpus")) {
      rc = parse_int(a, v, 1, 1 << 20, &job.gpus);
    } else if (!strcmp(a, "--gpus-per-node")) {
      rc = parse_int(a, v, 1, 1 << 16, &job.gpus_per_node);
    } else if (!strcmp(a, "--global-batch")) {
      rc = parse_int(a, v, 1, 1 << 24, &job.global_batch);
    } else if (!strcmp(a, "--device")) {
      device = v;
    } else if (!strcmp(a, "--device-memory-gib")) {
      rc = parse_double(a, v, 0.001, &mem_gib);
    } else if (!strcmp(a, "--cores")) {
      rc = parse_int(a, v, 1, 1 << 20, &cores);
    } else if (!strcmp(a, "--no-overlap")) {
      job.overlap = 0;
      consumed = 0;
    } else if (!strcmp(a, "--dp")) {
      rc = parse_int(a, v, 1, 1 << 20, &f.dp);
    } else if (!strcmp(a, "--tp")) {
      rc = parse_int(a, v, 1, 1 << 12, &f.tp);
    } else if (!strcmp(a, "--pp")) {
      rc = parse_int(a, v, 1, 1 << 12, &f.pp);
    } else if (!strcmp(a, "--cp")) {
      rc = parse_int(a, v, 1, 1 << 12, &f.cp);
    } else if (!strcmp(a, "--sp")) {
      f.sp = 1;
      consumed = 0;
    } else if (!strcmp(a, "--no-sp")) {
      f.sp = 0;
      consumed = 0;
    } else if (!strcmp(a, "--zero")) {
      rc = parse_int(a, v, 0, 3, &f.zero);
    } else if (!strcmp(a, "--recompute")) {
      rc = parse_recompute(v, &f.recompute);
    } else if (!strcmp(a, "--microbatches")) {
      rc = parse_int(a, v, 1, 1 << 16, &f.microbatches);
    } else if (!strcmp(a, "--schedule")) {
      rc = parse_schedule(v, &f.schedule);
    } else if (!strcmp(a, "--virtual-stages")) {
      rc = parse_int(a, v, 2, 64, &f.virtual_stages);
    } else if (!strcmp(a, "--bucket-mb")) {
      rc = parse_double(a, v, 0.0001, &bucket_mb);
    } else if (!strcmp(a, "--from")) {
      from = v;
    } else if (!strcmp(a, "--what-if")) {
      what_if = v ? strdup(v) : NULL;
    } else if (!strcmp(a, "--top")) {
      rc = parse_int(a, v, 1, INT_MAX, &top);
    } else if (!strcmp(a, "--json")) {
      json_path = v;
    } else if (!strcmp(a, "--csv")) {
      csv_path = v;
    } else if (!strcmp(a, "--threads")) {
      rc = parse_int(a, v, 0, 4096, &threads);
    } else {
      fprintf(stderr, "stepscope plan: unknown option '%s' (see --help)\n", a);
      free(what_if);
      return 2;
    }
    if (rc) {
      free(what_if);
      return 2;
    }
    if (consumed) {
      if (!v) {
        fprintf(stderr, "stepscope plan: %s needs a value\n", a);
        free(what_if);
        return 2;
      }
      i++;
    }
  }
  int status = 2;
  plan_result *results = NULL;
  mm_layout *m = &job.model;
  memset(m, 0, sizeof *m);
  m->max_seq = 1024;
  m->bucket_mb = bucket_mb;
  if (from) {
    char err[512];
    if (plan_calibrate_from_run(from, threads, &job.cal, err, sizeof err) != 0) {
      fprintf(stderr, "stepscope plan: --from %s: %s\n", from, err);
      status = 1;
      goto done;
    }
    const mm_layout *c = &job.cal.layout;
    m->layers = c->layers;
    m->hidden = c->hidden;
    m->heads = c->heads;
    m->vocab = c->vocab;
    m->seq = c->seq;
    m->max_seq = c->max_seq;
    m->experts = c->experts;
    m->top_k = c->top_k;
    m->moe_every = c->moe_every;
    m->bucket_mb = c->bucket_mb;
    if (!job.gpus) job.gpus = c->dp * c->tp * c->pp * c->cp;
    if (!job.global_batch) job.global_batch = c->dp * c->microbatches * c->micro_batch;
    if (!device) device = plan_device_kind_of_name(job.cal.device_name);
  }
  if (model) {
    const mp_preset *p = mp_preset_find(model);
    if (!p) {
      fprintf(stderr,
              "stepscope plan: unknown --model '%s' (%s; or give --layers --hidden "
              "--heads --vocab)\n",
              model, mp_preset_names());
      goto done;
    }
    m->layers = p->layers;
    m->hidden = p->hidden;
    m->heads = p->heads;
    m->seq = p->seq;
    m->vocab = p->vocab > 0 ? p->vocab : MP_BUILTIN_CORPUS_VOCAB; /* tiny: the trainer's
                                                                      built-in corpus */
    m->max_seq = p->max_seq;
  }
  if (layers) m->layers = layers;
  if (hidden) m->hidden = hidden;
  if (heads) m->heads = heads;
  if (vocab) m->vocab = vocab;
  if (seq) m->seq = seq;
  if (ffn) m->ffn = ffn;
  if (max_seq) m->max_seq = max_seq;
  if (experts >= 0) {
    m->experts = experts;
    m->top_k = top_k;
    m->moe_every = moe_every;
  }
  if (m->experts > 0 && (m->top_k > m->experts || m->moe_every > (m->layers ? m->layers : 1))) {
    fprintf(stderr,
            "stepscope plan: --top-k %d must be at most --experts %d and --moe-every "
            "%d at most the layers\n",
            m->top_k, m->experts, m->moe_every);
    goto done;
  }
  if (m->experts <= 0 && f.ep > 1) {
    fprintf(stderr, "stepscope plan: --ep %d needs --experts\n", f.ep);
    goto done;
  }
  if (!m->layers || !m->hidden || !m->heads || !m->vocab || !m->seq) {
    fprintf(stderr, "stepscope plan: describe the model: --model NAME, or --layers --hidden "
                    "--heads --vocab --seq (or --from RUN)\n");
    goto done;
  }
  if (m->seq > m->max_seq) {
    fprintf(stderr, "stepscope plan: --seq %d exceeds the %d positions (--max-seq)\n", m->seq,
            m->max_seq);
    goto done;
  }
  if (!job.gpus || !job.global_batch) {
    fprintf(stderr, "stepscope plan: give --gpus N and --global-batch B (or --from RUN)\n");
    goto done;
  }
  if (!device) device = "h100-sxm";
  const plan_device *d = plan_device_find(device);
  if (!d) {
    fprintf(stderr, "stepscope plan: unknown --device '%s' (%s)\n", device, plan_device_names());
    goto done;
  }
  job.dev = *d;
  if (mem_gib > 0) job.dev.memory_bytes = mem_gib * (double)(1u << 30);
  if (!strcmp(job.dev.name, "cpu")) {
    /* the trainer's traces do not record the machine's cores: --cores, else this
     * machine's (assumed to be the one the ranks ran or will run on) */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    job.dev.cores = cores > 0 ? cores : online > 0 ? (int)online : 1;
    job.dev.cores_assumed = cores <= 0;
  }
  plan_calibration_fit_host(&job);

  char err[256];
  if (what_if) {
    if (!from) {
      fprintf(stderr, "stepscope plan: --what-if changes a measured run's layout: give "
                      "--from RUN\n");
      goto done;
    }
    mm_layout l = job.cal.layout;
    for (char *save = NULL, *kv = strtok_r(what_if, ",", &save); kv;
         kv = strtok_r(NULL, ",", &save))
      if (apply_what_if(kv, &l, &job.global_batch) != 0) goto done;
    job.gpus = l.dp * l.tp * l.pp * l.cp;
    if (l.schedule != MM_SCHED_INTERLEAVED)
      l.virtual_stages = 1;
    else if (l.virtual_stages < 2)
      l.virtual_stages = 2;
    if (job.global_batch % (l.dp * l.microbatches)) {
      fprintf(stderr,
              "stepscope plan: --what-if: global batch %d is not divisible by dp %d "
              "x micro-batches %d\n",
              job.global_batch, l.dp, l.microbatches);
      status = 1;
      goto done;
    }
    l.micro_batch = job.global_batch / (l.dp * l.microbatches);
    results = calloc(2, sizeof *results);
    if (!results || plan_predict(&job, &l, &results[0], err, sizeof err) != 0) {
      fprintf(stderr, "stepscope plan: --what-if: the trainer cannot run this layout: %s\n",
              results ? err : "out of memory");
      status = 1;
      goto done;
    }
    /* the measured run's own layout through the same model, for the comparison */
    plan_job base = job;
    base.gpus = job.cal.layout.dp * job.cal.layout.tp * job.cal.layout.pp * job.cal.layout.cp;
    base.global_batch =
        job.cal.layout.dp * job.cal.layout.microbatches * job.cal.layout.micro_batch;
    int have_base = plan_predict(&base, &job.cal.layout, &results[1], err, sizeof err) == 0;
    char a[128], b[128];
    plan_layout_name(&job.cal.layout, a, sizeof a);
    plan_layout_name(&results[0].layout, b, sizeof b);
    printf("measured run %s: %s, step %.4g s", from, a, job.cal.measured_step_s);
    if (have_base) printf(" (the model gives %.4g s for it)", results[1].step_s);
    printf("\nwhat if %s:\n", b);
    plan_print_table(stdout, &job, results, 1, 1);
    if (json_path) {
      FILE *o = open_out(json_path);
      if (!o || plan_write_json(o, &job, results, 1) != 0 || close_out(o, json_path) != 0) {
        status = 1;
        goto done;
      }
    }
    status = 0;
    goto done;
  }

  int single = f.dp > 0 && f.tp > 0 && f.pp > 0 && f.cp > 0 && f.zero >= 0 && f.recompute >= 0 &&
               f.microbatches > 0 && (f.pp == 1 || f.schedule >= 0);
  long n;
  if (single) {
    mm_layout l = *m;
    l.dp = f.dp;
    l.tp = f.tp;
    l.pp = f.pp;
    l.cp = f.cp;
    l.sp = f.sp > 0;
    l.zero = f.zero;
    l.recompute = (mm_recompute)f.recompute;
    l.microbatches = f.microbatches;
    l.schedule = f.pp == 1 ? MM_SCHED_1F1B : (mm_schedule)f.schedule;
    l.virtual_stages =
        l.schedule == MM_SCHED_INTERLEAVED ? (f.virtual_stages > 0 ? f.virtual_stages : 2) : 1;
    l.ep = m->experts > 0 && f.ep > 0 ? f.ep : 1; /* --ep, else no expert parallelism */
    if (m->experts > 0 && (l.dp % l.ep || m->experts % l.ep)) {
      fprintf(stderr, "stepscope plan: --ep %d must divide --dp %d and the %d experts\n", l.ep,
              l.dp, m->experts);
      status = 1;
      goto done;
    }
    if (job.global_batch % (l.dp * l.microbatches)) {
      fprintf(stderr,
              "stepscope plan: the global batch %d is not divisible by dp %d x "
              "micro-batches %d\n",
              job.global_batch, l.dp, l.microbatches);
      status = 1;
      goto done;
    }
    l.micro_batch = job.global_batch / (l.dp * l.microbatches);
    results = calloc(1, sizeof *results);
    if (!results || plan_predict(&job, &l, results, err, sizeof err) != 0) {
      fprintf(stderr, "stepscope plan: this layout cannot run: %s\n",
              results ? err : "out of memory");
      status = 1;
      goto done;
    }
    n = 1;
  } else {
    n = plan_enumerate(&job, &f, &results, err, sizeof err);
    if (n < 0) {
      fprintf(stderr, "stepscope plan: %s\n", err);
      status = 1;
      goto done;
    }
    if (n == 0) {
      fprintf(stderr,
              "stepscope plan: no layout of this model runs on %d devices with a "
              "global batch of %d%s%s\n",
              job.gpus, job.global_batch, err[0] ? " (last reason: " : "", err[0] ? err : "");
      if (err[0]) fprintf(stderr, ")\n");
      status = 1;
      goto done;
    }
  }
  int to_stdout = (json_path && !strcmp(json_path, "-")) || (csv_path && !strcmp(csv_path, "-"));
  if (!to_stdout) {
    plan_print_table(stdout, &job, results, n, top);
    if (results[0].fits == 0)
      printf("\nnothing fits in %.0f GiB per device: more devices, ZeRO, recomputation or "
             "smaller micro-batches (the table lists the smallest first)\n",
             job.dev.memory_bytes / (double)(1u << 30));
  }
  status = 0;
  if (json_path) {
    FILE *o = open_out(json_path);
    if (!o || plan_write_json(o, &job, results, n) != 0 || close_out(o, json_path) != 0) status = 1;
  }
  if (csv_path) {
    FILE *o = open_out(csv_path);
    if (!o || plan_write_csv(o, results, n) != 0 || close_out(o, csv_path) != 0) status = 1;
  }
done:
  free(results);
  free(what_if);
  return status;
}
