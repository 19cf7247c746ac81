/*
 * test_diff_noise.c — the diff's noise test (analyzer/src/diff/diff_verdict.c,
 * docs/diff.md "Noise test") on runs with exact, controlled noise.
 *
 * Runs are written by the ground-truth generator (tests/gen) and go through
 * the library path `stepscope diff` uses (ssa_run_load, ssa_analyze,
 * ssa_diff_runs). One rank, one GPU stream; every step k has a host range
 * [S_k, S_k+1) and, on the device:
 *   prep  [S_k + Q, + a)                 launched at S_k
 *   (the host loads the next batch for L: the device waits, host_wait)
 *   fwd   [.., + f)                      launched when the host is done
 *   (stall G: bwd was launched with fwd, the device sits idle with work
 *    queued — what a machine shared with other processes shows)
 *   bwd   [.., + b) ending where the next step's prep starts.
 * So the step windows are unambiguous: the device span of a step's work and
 * the iteration period are the same (up to one Q on the last step), under
 * either definition of a step window. Step time = a + L + Q + f + G + b.
 *
 * Noise is a deterministic pseudo-random jitter on f and b (uniform, ± a
 * given fraction), a linear within-run drift, or preemption: some launches
 * of every kernel stretched (mean up, shortest launch unchanged).
 *
 * Also the --fail-on parser on 200000 mutated specs (random edits of valid
 * ones; run under the sanitizer build): every spec is either accepted with
 * 1..9 rules or refused with a message, never read past its end.
 *
 * Repeated runs (--repeat-a/-b): series and generated runs whose levels
 * differ from run to run by more than their steps scatter.
 *
 * Medians: the diff's median step time is analyze's (one definition, even step counts).
 *
 * Configuration: a FLOPs count that changed under the same configuration leaves MFU out;
 * another configuration is listed member by member.
 *
 * Machine load: runs whose `machine` metadata says the load average was far apart (the
 * third load sign) get no verdict, and the gate is undecided, not passed.
 *
 * The median's 95 % interval (diff against a prediction) against exact binomial values.
 *
 * usage: test_diff_noise CASE   (unknown, aa, regression, loader, load, machine, median,
 * median_interval, config, series, repeats, gate_parse)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ssa_diff.h"
#include "stepscope_gen.h"
#include "ssa_import.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL line %d: ", __LINE__);                                                 \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

#define Q  GEN_Q
#define MS 1000000ll

typedef struct shape {
  int steps;
  int64_t a, L, f, b, G; /* ns, multiples of Q */
  double jitter;         /* f and b: uniform in [1 - jitter, 1 + jitter] */
  double drift;          /* f and b grow linearly by this fraction over the run */
  double stretch;        /* every 3rd step: every kernel takes (1 + stretch) x as long */
  double late;           /* the last quarter of the steps: f and b (1 + late) x as long */
  double level;          /* f and b (1 + level) x as long in every step */
  int stall_some;        /* the stall G only in every 3rd step (k % 3 == 0) */
  double load;           /* > 0: the machine's 1-minute load average (`machine` metadata) */
  double flops;          /* > 0: model FLOPs per step (`flops` metadata, peak 1e12) */
  const char *config;    /* the header's configuration JSON, or NULL */
  uint64_t seed;
} shape;

static uint64_t rng_next(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 11;
}

/* uniform in [-1, 1] */
static double rng_sym(uint64_t *s) {
  return (double)rng_next(s) / (double)(1ull << 53) * 2.0 - 1.0;
}

static int64_t quant(double ns) {
  return (int64_t)llround(ns / Q) * Q;
}

static int add_kernel(gen_run *g, const char *name, int64_t launch, int64_t s, int64_t e) {
  gen_op o;
  memset(&o, 0, sizeof o);
  o.rank = 0;
  o.lane = 0;
  o.s = s;
  o.e = e;
  o.cls = GEN_COMPUTE;
  o.has_launch = 1;
  o.launch_s = launch;
  o.launch_e = launch + Q;
  o.name = name;
  return gen_add_op(g, &o) < 0;
}

/* Builds the run of `sh`. */
static int build(gen_run *g, const shape *sh) {
  gen_init(g, 1);
  g->ranks[0].clock_offset = 1000000000ll;
  g->config_json = sh->config;
  if (sh->flops > 0) {
    g->with_flops = 1;
    g->model_flops = g->hardware_flops = sh->flops;
    g->peak_flops = 1e12;
  }
  if (sh->load > 0) {
    g->with_machine = 1;
    g->machine_cpus = 2;
    g->machine_load_start = g->machine_load_end = sh->load;
  }
  uint64_t rs = sh->seed * 2654435761ull + 12345;
  int64_t t = 10 * MS;
  for (int k = 0; k < sh->steps; k++) {
    double grow = sh->steps > 1 ? 1.0 + sh->drift * (double)k / (double)(sh->steps - 1) : 1.0;
    double st = sh->stretch > 0 && k % 3 == 1 ? 1.0 + sh->stretch : 1.0;
    grow *= 1.0 + sh->level + (4 * k >= 3 * sh->steps ? sh->late : 0.0);
    int64_t a = quant((double)sh->a * st);
    int64_t f = quant((double)sh->f * grow * (1.0 + sh->jitter * rng_sym(&rs)) * st);
    int64_t b = quant((double)sh->b * grow * (1.0 + sh->jitter * rng_sym(&rs)) * st);
    int64_t prep_s = t + Q, prep_e = prep_s + a;
    int64_t fwd_launch = prep_e + sh->L;
    int64_t fwd_s = fwd_launch + Q, fwd_e = fwd_s + f;
    int64_t bwd_s = fwd_e + (sh->stall_some && k % 3 ? 0 : sh->G), bwd_e = bwd_s + b;
    int64_t next = bwd_e - Q;
    if (add_kernel(g, "prep", t, prep_s, prep_e) ||
        add_kernel(g, "fwd", fwd_launch, fwd_s, fwd_e) ||
        add_kernel(g, "bwd", fwd_launch + Q, bwd_s, bwd_e) || gen_add_step(g, 0, k, t, next) < 0)
      return -1;
    t = next;
  }
  return 0;
}

typedef struct loaded {
  ssa_run run;
  ssa_analysis an;
  int ok;
} loaded;

static int load(const shape *sh, loaded *l) {
  memset(l, 0, sizeof *l);
  gen_run g;
  if (build(&g, sh)) {
    fprintf(stderr, "generator out of memory\n");
    return -1;
  }
  char dir[] = "/tmp/ssa-diffnoise-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    gen_free(&g);
    return -1;
  }
  char err[600];
  int rc = gen_write(&g, dir, err, sizeof err);
  gen_free(&g);
  stepscope_error e;
  memset(&e, 0, sizeof e);
  ssa_load_options lo = {.threads = 1, .progress = 0};
  if (!rc && ssa_run_load(&l->run, dir, &lo, &e) == 0) {
    ssa_options opt;
    ssa_options_default(&opt);
    opt.threads = 1;
    if (ssa_analyze(&l->run, &opt, &l->an, &e) == 0)
      l->ok = 1;
    else
      ssa_run_free(&l->run);
  }
  char p[600];
  snprintf(p, sizeof p, "%s/rank-%05d.trace.zst", dir, 0);
  unlink(p);
  rmdir(dir);
  if (!l->ok) fprintf(stderr, "load/analyze failed: %s %s\n", err, e.message);
  return l->ok ? 0 : -1;
}

static void unload(loaded *l) {
  if (!l->ok) return;
  ssa_analysis_free(&l->an);
  ssa_run_free(&l->run);
}

/* Diffs the runs of two shapes with a between-run floor (run_noise, a fraction; 0: none,
 * NaN: the default for one run per side); calls fn(diff, ctx). */
static void with_diff_floor(const shape *sa, const shape *sb, double run_noise,
                            void (*fn)(const ssa_diff *, void *), void *ctx) {
  loaded la, lb;
  if (load(sa, &la)) {
    failures++;
    return;
  }
  if (load(sb, &lb)) {
    unload(&la);
    failures++;
    return;
  }
  ssa_diff d;
  const ssa_analysis *a = &la.an, *b = &lb.an;
  if (ssa_diff_runs_repeated(&a, 1, &b, 1, "A", "B", run_noise, 0, &d)) {
    failures++;
  } else {
    fn(&d, ctx);
    ssa_diff_free(&d);
  }
  unload(&la);
  unload(&lb);
}

/* The same without a between-run floor: the step statistics alone (tests 1-2, 4-7). */
static void with_diff(const shape *sa, const shape *sb, void (*fn)(const ssa_diff *, void *),
                      void *ctx) {
  with_diff_floor(sa, sb, 0, fn, ctx);
}

static shape base_shape(void) {
  shape s;
  memset(&s, 0, sizeof s);
  s.steps = 16;
  s.a = 200 * Q;
  s.L = 0;
  s.f = 3 * MS;
  s.b = 5 * MS;
  s.seed = 1;
  return s;
}

static const char *word(const ssa_diff *d, int k) {
  return ssa_diff_verdict_word(&d->m[k], k);
}

/* ---------------------------------------------------------------- cases */

static void expect_unknown(const ssa_diff *d, void *ctx) {
  (void)ctx;
  CHECK(d->m[SSA_DM_STEP_TIME].verdict == SSA_DV_UNKNOWN, "step_time with %zu/%zu steps: %s",
        d->a->nsteps, d->b->nsteps, word(d, SSA_DM_STEP_TIME));
  CHECK(d->m[SSA_DM_STEP_TIME].noise_reason == SSA_DN_TOO_FEW, "reason too few");
  CHECK(fabs(d->m[SSA_DM_STEP_TIME].rel_change - 0.5) < 0.01, "the change is still reported: %.3f",
        d->m[SSA_DM_STEP_TIME].rel_change);
  for (int k = 0; k < SSA_DM_N; k++)
    CHECK(d->m[k].verdict != SSA_DV_REAL, "%s is %s with %zu/%zu steps", ssa_diff_metric_names[k],
          word(d, k), d->a->nsteps, d->b->nsteps);
}

static void case_unknown(void) {
  /* B 50 % slower, no noise at all: still nothing can be said with one or
   * two steps per side, or one step against many */
  static const int sizes[][2] = {{1, 1}, {2, 2}, {1, 20}, {2, 3}, {3, 3}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    shape a = base_shape(), b = base_shape();
    a.steps = sizes[i][0];
    b.steps = sizes[i][1];
    b.f = a.f * 3 / 2;
    b.b = a.b * 3 / 2;
    b.a = a.a * 3 / 2;
    b.L = a.L;
    with_diff(&a, &b, expect_unknown, NULL);
  }
}

typedef struct aa_count {
  int real[SSA_DM_N];
  int pairs;
} aa_count;

static void count_real(const ssa_diff *d, void *ctx) {
  aa_count *c = ctx;
  c->pairs++;
  for (int k = 0; k < SSA_DM_N; k++)
    c->real[k] += d->m[k].verdict == SSA_DV_REAL;
}

static void case_aa(void) {
  /* identical configurations measured twice with 10 % step-to-step jitter,
   * with and without a within-run drift of 15 %, and preemption in both;
   * and with between-run drift: the machine slowed down by 30 % for the
   * last quarter of run A and ran 10 % slower through run B (1 % jitter).
   * Never better/WORSE. */
  aa_count c;
  memset(&c, 0, sizeof c);
  for (int pair = 0; pair < 40; pair++) {
    shape a = base_shape(), b = base_shape();
    a.jitter = b.jitter = 0.10;
    a.seed = (uint64_t)(2 * pair + 1);
    b.seed = (uint64_t)(2 * pair + 2);
    if (pair % 4 == 1) a.drift = b.drift = 0.15;
    if (pair % 4 == 2) a.stretch = b.stretch = 0.8;
    if (pair % 4 == 3) {
      a.jitter = b.jitter = 0.01;
      a.late = 0.30;
      b.level = 0.10;
    }
    with_diff(&a, &b, count_real, &c);
  }
  CHECK(c.pairs == 40, "pairs compared: %d", c.pairs);
  for (int k = 0; k < SSA_DM_N; k++)
    CHECK(c.real[k] == 0, "A/A: %s called better/WORSE in %d of %d pairs", ssa_diff_metric_names[k],
          c.real[k], c.pairs);
}

static void expect_worse_step(const ssa_diff *d, void *ctx) {
  double want = *(const double *)ctx;
  const ssa_diff_metric *m = &d->m[SSA_DM_STEP_TIME];
  CHECK(m->verdict == SSA_DV_REAL && !strcmp(word(d, SSA_DM_STEP_TIME), "WORSE"),
        "step_time +%.1f %%: %s (reason %d, p %.4f, load %d)", want * 100,
        word(d, SSA_DM_STEP_TIME), m->noise_reason, m->p_value, d->load_differs);
  CHECK(fabs(m->rel_change - want) < 0.01 * want + 0.002,
        "step_time change %.4f, expected about %.4f", m->rel_change, want);
}

static void expect_noise_step(const ssa_diff *d, void *ctx) {
  int reason = *(const int *)ctx;
  const ssa_diff_metric *m = &d->m[SSA_DM_STEP_TIME];
  CHECK(m->verdict == SSA_DV_NOISE && (reason < 0 || m->noise_reason == reason),
        "step_time %+.2f %%: %s, reason %d (want %d)", m->rel_change * 100,
        word(d, SSA_DM_STEP_TIME), m->noise_reason, reason);
}

static void case_regression(void) {
  /* a genuine change, +50 % on every kernel, 2 % jitter: WORSE */
  shape a = base_shape(), b = base_shape();
  a.jitter = b.jitter = 0.02;
  b.seed = 7;
  b.a = a.a * 3 / 2;
  b.f = a.f * 3 / 2;
  b.b = a.b * 3 / 2;
  double want = 0.5;
  with_diff(&a, &b, expect_worse_step, &want);
  /* +3 % with 0.5 % jitter on 20 steps: small but real, WORSE */
  a = base_shape();
  b = base_shape();
  a.steps = b.steps = 20;
  a.jitter = b.jitter = 0.005;
  b.seed = 9;
  b.f = a.f + quant(0.03 * (double)(a.a + a.f + a.b + Q));
  want = 0.03;
  with_diff(&a, &b, expect_worse_step, &want);
  /* +0.5 %, no jitter: below the minimum effect, noise */
  a = base_shape();
  b = base_shape();
  b.f = a.f + 42 * Q; /* 0.5 % of 8.201 ms */
  int reason = SSA_DN_MIN_EFFECT;
  with_diff(&a, &b, expect_noise_step, &reason);
  /* +5 % under 20 % jitter on 16 steps: within the step-to-step scatter */
  a = base_shape();
  b = base_shape();
  a.jitter = b.jitter = 0.20;
  b.seed = 3;
  b.f = a.f + quant(0.05 * 8.2 * MS);
  reason = -1;
  with_diff(&a, &b, expect_noise_step, &reason);
}

static void expect_loader(const ssa_diff *d, void *ctx) {
  (void)ctx;
  const ssa_diff_metric *m = &d->m[SSA_DM_STEP_TIME];
  /* step = a + L + Q + f + b: 0.2 + 4 + 0.001 + 3 + 5 -> 0.2 + 1 + 0.001 + 3 + 5 ms */
  double a_ms = 0.2 + 4 + 0.001 + 3 + 5, b_ms = a_ms - 3;
  CHECK(!strcmp(word(d, SSA_DM_STEP_TIME), "better"), "loader: step_time %s",
        word(d, SSA_DM_STEP_TIME));
  /* the same jitter pattern in both runs: the medians are 3 ms apart exactly */
  CHECK(fabs(m->abs_change + 3e6) <= Q, "loader: step time change %.0f ns, expected -3 ms",
        m->abs_change);
  CHECK(fabs(m->a.median - a_ms * 1e6) < 0.01 * a_ms * 1e6,
        "loader: step time A %.0f ns, expected about %.0f", m->a.median, a_ms * 1e6);
  CHECK(fabs(m->rel_change - (b_ms - a_ms) / a_ms) < 0.005,
        "loader: step change %.4f, expected about %.4f", m->rel_change, (b_ms - a_ms) / a_ms);
  const ssa_diff_metric *idle = &d->m[SSA_DM_IDLE];
  CHECK(!strcmp(word(d, SSA_DM_IDLE), "better") && fabs(idle->abs_change + 3e6) <= Q,
        "loader: idle %s, change %.0f ns (expected -3 ms)", word(d, SSA_DM_IDLE), idle->abs_change);
  CHECK(d->m[SSA_DM_COMPUTE].verdict == SSA_DV_SAME, "loader: compute %s", word(d, SSA_DM_COMPUTE));
}

static void case_loader(void) {
  /* only the host's batch loading changes (4 ms -> 1 ms): the device waits
   * for the host inside each step; same kernels, same jitter pattern */
  shape a = base_shape(), b = base_shape();
  a.jitter = b.jitter = 0.01;
  a.seed = b.seed = 5;
  a.L = 4 * MS;
  b.L = 1 * MS;
  with_diff(&a, &b, expect_loader, NULL);
}

static void expect_load(const ssa_diff *d, void *ctx) {
  (void)ctx;
  CHECK(d->load_differs, "load differs (queued idle %.3f vs %.3f, stretch %.2f)", d->queued_idle_a,
        d->queued_idle_b, d->kernel_stretch);
  for (int k = 0; k < SSA_DM_N; k++)
    CHECK(d->m[k].verdict != SSA_DV_REAL, "busy machine: %s is %s", ssa_diff_metric_names[k],
          word(d, k));
  CHECK(d->m[SSA_DM_STEP_TIME].noise_reason == SSA_DN_LOAD, "reason: load");
  int said = 0;
  for (size_t i = 0; i < d->nfindings; i++)
    said |= strstr(d->findings[i], "busier during one run") != NULL;
  CHECK(said, "a finding says why");
}

static void case_load(void) {
  /* A/A where run B shared the machine: the device idles 6 ms a step with
   * work queued (step +75 %), or 20 ms in every 3rd step only, or every 3rd
   * step's kernels are preempted to 3x (mean up, shortest launch unchanged).
   * All are between-run drift. */
  shape a = base_shape(), b = base_shape();
  a.jitter = b.jitter = 0.02;
  b.seed = 2;
  b.G = 6 * MS;
  with_diff(&a, &b, expect_load, NULL);
  /* stalls in a third of B's steps only (20 ms each): B's median step and
   * median queued idle are A's, its upper quartile is not */
  b.G = 20 * MS;
  b.stall_some = 1;
  with_diff(&a, &b, expect_load, NULL);
  b.G = 0;
  b.stall_some = 0;
  b.stretch = 2.0;
  with_diff(&a, &b, expect_load, NULL);
}

typedef struct machine_case {
  int want_differs;
  double want_change; /* the step-time change the run's shapes imply */
} machine_case;

static void expect_machine(const ssa_diff *d, void *ctx) {
  const machine_case *c = ctx;
  const ssa_diff_metric *m = &d->m[SSA_DM_STEP_TIME];
  CHECK(d->machine_differs == c->want_differs && d->load_differs == c->want_differs,
        "machine load %.1f vs %.1f on %.0f CPUs: differs %d (want %d)", d->machine_load_a,
        d->machine_load_b, d->machine_cpus, d->machine_differs, c->want_differs);
  CHECK(fabs(m->rel_change - c->want_change) < 0.02, "step time change %.3f, want %.3f",
        m->rel_change, c->want_change);
  /* a +50 % step time past a +3 % threshold: FAIL when judged, undecided when the load differs */
  ssa_gate g;
  char err[128];
  CHECK(ssa_gate_parse("step_time:+3%", &g, err, sizeof err) == 0, "gate parse");
  ssa_gate_outcome out[1];
  ssa_gate_result r = ssa_gate_check(d, &g, out);
  if (c->want_differs) {
    CHECK(m->verdict == SSA_DV_NOISE && m->noise_reason == SSA_DN_LOAD,
          "load differs: step_time %s, reason %d", word(d, SSA_DM_STEP_TIME), m->noise_reason);
    CHECK(r.outcome == SSA_GATE_UNDECIDED && out[0].status == SSA_GATE_UNDECIDED,
          "gate undecided when the load differs: outcome %d", r.outcome);
    int said = 0;
    for (size_t i = 0; i < d->nfindings; i++)
      said |= strstr(d->findings[i], "load average was 1.0 in A and 6.0 in B (2 CPUs)") != NULL;
    CHECK(said, "a finding names both loads");
  } else {
    CHECK(!strcmp(word(d, SSA_DM_STEP_TIME), "WORSE"), "equal load: step_time %s (reason %d)",
          word(d, SSA_DM_STEP_TIME), m->noise_reason);
    CHECK(r.outcome == SSA_GATE_FAIL, "gate fails on a real +50 %%: outcome %d", r.outcome);
  }
}

static void case_machine(void) {
  /* B 50 % slower, 2 % jitter. A at load 1.0, B at 6.0 on 2 CPUs: 2.5 threads per CPU apart,
   * no queued idle and no stretched kernels in the trace: only the metadata shows it */
  shape a = base_shape(), b = base_shape();
  a.jitter = b.jitter = 0.02;
  b.seed = 4;
  b.a = a.a * 3 / 2;
  b.f = a.f * 3 / 2;
  b.b = a.b * 3 / 2;
  a.load = 1.0;
  b.load = 6.0;
  machine_case differs = {1, 0.5};
  with_diff_floor(&a, &b, NAN, expect_machine, &differs);
  /* the same loads (1.0 and 1.8: 0.4 per CPU apart): judged, WORSE */
  b.load = 1.8;
  machine_case same = {0, 0.5};
  with_diff_floor(&a, &b, NAN, expect_machine, &same);
}

typedef struct config_case {
  int mfu_compared;
  const char *listed; /* the configuration text wanted, NULL: none */
} config_case;

static void expect_config(const ssa_diff *d, void *ctx) {
  const config_case *c = ctx;
  const ssa_diff_metric *mfu = &d->m[SSA_DM_MFU];
  CHECK(d->mfu_incomparable == !c->mfu_compared && mfu->comparable == c->mfu_compared,
        "MFU compared %d (want %d), verdict %s", mfu->comparable, c->mfu_compared,
        word(d, SSA_DM_MFU));
  CHECK(d->m[SSA_DM_STEP_TIME].verdict == SSA_DV_SAME, "the same step times: %s",
        word(d, SSA_DM_STEP_TIME));
  char text[600];
  ssa_diff_config_text(d, text, sizeof text);
  CHECK(c->listed ? d->nconfig_diffs && !strcmp(text, c->listed) : !d->nconfig_diffs,
        "configuration differences: %zu, '%s' (want '%s')", d->nconfig_diffs, text,
        c->listed ? c->listed : "none");
  int said = 0;
  for (size_t i = 0; i < d->nfindings; i++)
    said |= c->mfu_compared ? c->listed && strstr(d->findings[i], c->listed) != NULL
                            : strstr(d->findings[i], "MFU not compared: the FLOPs per step differ "
                                                     "(A 1e+09, B 6.8e+08)") != NULL;
  CHECK(said, "a finding says so");
}

static void case_config(void) {
  /* the same configuration and step times, the FLOPs count 32 % lower in B (another
   * convention): MFU is not compared (it was 'WORSE -32 %') */
  shape a = base_shape(), b = base_shape();
  a.flops = 1e9;
  b.flops = 0.68e9;
  a.config = b.config = "{\"model\":\"tiny\",\"hidden\":64,\"layers\":2}";
  config_case same = {0, NULL};
  with_diff(&a, &b, expect_config, &same);
  /* no configuration recorded: the same, MFU not compared */
  a.config = b.config = NULL;
  with_diff(&a, &b, expect_config, &same);
  /* another configuration: listed (a changed member, one only in A, one only in B), and MFU
   * compared (different work) */
  a.config = "{\"model\":\"tiny\",\"hidden\":64,\"layers\":2,\"seq\":64}";
  b.config = "{\"model\":\"tiny\",\"hidden\":72,\"layers\":2,\"experts\":4}";
  config_case other = {1, "the configurations differ: hidden 64 -> 72, seq 64 -> (absent), "
                          "experts (absent) -> 4"};
  with_diff(&a, &b, expect_config, &other);
}

static void expect_same_median(const ssa_diff *d, void *ctx) {
  (void)ctx;
  const ssa_diff_metric *m = &d->m[SSA_DM_STEP_TIME];
  for (int side = 0; side < 2; side++) {
    const ssa_analysis *an = side ? d->b : d->a;
    const ssa_diff_stat *st = side ? &m->b : &m->a;
    /* analyze's step time and the diff's median are one number, the lower middle step */
    CHECK(st->median == (double)an->step_time_median,
          "%zu steps: diff median %.0f, analyze's step time %lld", an->nsteps, st->median,
          (long long)an->step_time_median);
    int64_t t[64];
    size_t n = 0;
    for (size_t i = 0; i < an->nsteps && n < 64; i++)
      t[n++] = an->steps[i].time;
    qsort(t, n, sizeof *t, ssa_cmp_i64);
    CHECK(n && an->step_time_median == t[(n - 1) / 2] && (n % 2 || t[n / 2 - 1] != t[n / 2]),
          "%zu steps: the lower middle of distinct times", n);
  }
}

/* The median's order-statistic interval (median_interval.c) against the exact binomial
 * values (computed with Python's math.comb): n = 5 has none at 95 %; n = 6, 7: [x_(1), x_(n)];
 * n = 9: j = 2 (0.9609375); n = 12: j = 3 (0.96142578125); n = 1000: j = 469 (0.9537088);
 * 200,000 steps finish (the tail is summed once, linearly). */
static void case_median_interval(void) {
  static const struct {
    size_t n, j;
    double conf;
  } want[] = {{6, 1, 0.96875},
              {7, 1, 0.984375},
              {9, 2, 0.9609375},
              {12, 3, 0.96142578125},
              {1000, 469, 0.9537088026395019}};
  size_t big = 200000;
  double *v = malloc(big * sizeof *v), lo, hi, conf;
  if (!v) {
    CHECK(0, "out of memory");
    return;
  }
  for (size_t i = 0; i < 5; i++)
    v[i] = (double)(5 - i);
  CHECK(ssa_median_interval(v, 5, 0.95, &lo, &hi, &conf) == -1, "5 steps: no 95 %% interval");
  CHECK(ssa_median_interval(v, 0, 0.95, &lo, &hi, &conf) == -1, "no steps: no interval");
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    size_t n = want[k].n;
    for (size_t i = 0; i < n; i++) /* 1..n, shuffled: the interval sorts */
      v[i] = (double)((i * 7919) % n + 1);
    int rc = ssa_median_interval(v, n, 0.95, &lo, &hi, &conf);
    CHECK(rc == 0 && lo == (double)want[k].j && hi == (double)(n + 1 - want[k].j) &&
              fabs(conf - want[k].conf) < 1e-9,
          "n %zu: [%g, %g] at %.10f, want [%zu, %zu] at %.10f", n, lo, hi, conf, want[k].j,
          n + 1 - want[k].j, want[k].conf);
  }
  for (size_t i = 0; i < big; i++)
    v[i] = (double)(big - i);
  CHECK(ssa_median_interval(v, big, 0.95, &lo, &hi, &conf) == 0 && lo < hi && conf >= 0.95 &&
            conf < 0.951,
        "200000 steps: [%g, %g] at %f", lo, hi, conf);
  free(v);
}

static void case_median(void) {
  /* even and odd step counts, 20 % jitter: every step time differs */
  static const int counts[] = {4, 6, 7, 16};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    shape a = base_shape(), b = base_shape();
    a.steps = b.steps = counts[i];
    a.jitter = b.jitter = 0.2;
    a.seed = 11 + i;
    b.seed = 21 + i;
    with_diff(&a, &b, expect_same_median, NULL);
  }
}

/* The statistics on plain series. */
static void case_series(void) {
  /* exact Mann-Whitney p-values: complete separation of 4 and 4 is 2/70;
   * of 3 and 5 is 2/56; identical samples 1 */
  double a4[] = {1, 2, 3, 4}, b4[] = {5, 6, 7, 8};
  CHECK(fabs(ssa_diff_mann_whitney(a4, 4, b4, 4) - 2.0 / 70) < 1e-12, "p 4/4 = %.6f",
        ssa_diff_mann_whitney(a4, 4, b4, 4));
  double b5x[] = {5, 6, 7, 8, 9};
  CHECK(fabs(ssa_diff_mann_whitney(a4, 3, b5x, 5) - 2.0 / 56) < 1e-12, "p 3/5");
  CHECK(fabs(ssa_diff_mann_whitney(a4, 4, a4, 4) - 1.0) < 1e-12, "p same");
  /* ties within each side (zero jitter): still 2/70 */
  double t4[] = {3, 3, 3, 3}, u4[] = {4, 4, 4, 4};
  CHECK(fabs(ssa_diff_mann_whitney(t4, 4, u4, 4) - 2.0 / 70) < 1e-12, "p ties");
  /* U = 1 of 4x4 (one inversion): two-sided 4/70 */
  double a5[] = {1, 2, 3, 6}, b5[] = {4.5, 7, 8, 9};
  CHECK(fabs(ssa_diff_mann_whitney(a5, 4, b5, 4) - 4.0 / 70) < 1e-12, "p one inversion = %.6f",
        ssa_diff_mann_whitney(a5, 4, b5, 4));
  /* normal approximation beyond the exact limit agrees with the exact one near it */
  double x[80], y[80];
  for (int i = 0; i < 80; i++) {
    x[i] = i;
    y[i] = i + 3.5;
  }
  double pe = ssa_diff_mann_whitney(x, 12, y, 12), pn = ssa_diff_mann_whitney(x, 13, y, 13);
  CHECK(fabs(pe - pn) < 0.3 * pe, "p exact (12/12) %.4f, normal (13/13) %.4f", pe, pn);
  CHECK(ssa_diff_min_p(3, 3) >= SSA_DIFF_ALPHA && ssa_diff_min_p(3, 5) < SSA_DIFF_ALPHA, "min p");
  /* drift: the last quarter of A moved by 30 %; B sits 10 % above A's
   * usual level with no scatter: beyond A's IQR, within A's own drift */
  double va[16], vb[16];
  for (int i = 0; i < 16; i++) {
    va[i] = i < 12 ? 100 : 130;
    vb[i] = 110;
  }
  ssa_diff_metric m;
  CHECK(ssa_diff_compare_series(va, 16, vb, 16, SSA_DM_STEP_TIME, NAN, 0, NAN, &m) == 0, "compare");
  CHECK(m.verdict == SSA_DV_NOISE && m.noise_reason == SSA_DN_DRIFT,
        "drift: verdict %d reason %d (drift %.1f)", m.verdict, m.noise_reason, m.a.drift);
  /* the same with a flat A: real */
  for (int i = 12; i < 16; i++)
    va[i] = 100;
  CHECK(ssa_diff_compare_series(va, 16, vb, 16, SSA_DM_STEP_TIME, NAN, 0, NAN, &m) == 0 &&
            m.verdict == SSA_DV_REAL,
        "flat A: verdict %d reason %d", m.verdict, m.noise_reason);
  /* iid noise: the false-positive rate of the whole test on A/A series of
   * 16 steps (uniform jitter), over 4000 pairs, stays under 1 % */
  uint64_t rs = 99;
  int real = 0;
  for (int pair = 0; pair < 4000; pair++) {
    for (int i = 0; i < 16; i++) {
      va[i] = 100 * (1 + 0.1 * rng_sym(&rs));
      vb[i] = 100 * (1 + 0.1 * rng_sym(&rs));
    }
    ssa_diff_compare_series(va, 16, vb, 16, SSA_DM_STEP_TIME, NAN, 0, NAN, &m);
    real += m.verdict == SSA_DV_REAL;
  }
  printf("iid A/A series (16 steps, +-10 %%): %d of 4000 pairs called real\n", real);
  CHECK(real < 40, "iid A/A false positives %d of 4000", real);
}

/* Series of `runs` runs of 16 steps each: run r's level is 100 x (1 +
 * offset_r) x (1 + shift), offset_r uniform in [-between, between]; steps
 * jitter uniformly by +-1 % around it. */
static void repeated_series(double *v, size_t *seg, int runs, double between, double shift,
                            uint64_t *rs) {
  for (int r = 0; r < runs; r++) {
    double level = 100 * (1 + between * rng_sym(rs)) * (1 + shift);
    for (int i = 0; i < 16; i++)
      v[r * 16 + i] = level * (1 + 0.01 * rng_sym(rs));
    seg[r] = 16;
  }
}

/* Of 2000 comparisons with `runs` runs per side, whose runs' levels scatter uniformly by
 * +-between_a (A) and +-between_b (B), B shifted by `shift`: the share called real, and the
 * share a gate `step_time:+5%` would fail (real and more than 5 % slower). */
typedef struct real_rate {
  double real, gate_fail;
} real_rate;

static real_rate repeated_real_rate(int runs, double between_a, double between_b, double shift,
                                    uint64_t seed, unsigned flags) {
  double va[64], vb[64];
  size_t sa[4], sb[4];
  uint64_t rs = seed;
  int real = 0, fail = 0;
  for (int pair = 0; pair < 2000; pair++) {
    repeated_series(va, sa, runs, between_a, 0, &rs);
    repeated_series(vb, sb, runs, between_b, shift, &rs);
    ssa_diff_metric m;
    if (ssa_diff_compare_runs(va, sa, (size_t)runs, vb, sb, (size_t)runs, SSA_DM_STEP_TIME, NAN,
                              flags, NAN, &m))
      return (real_rate){NAN, NAN};
    real += m.verdict == SSA_DV_REAL;
    fail += m.verdict == SSA_DV_REAL && m.rel_change > 0.05;
  }
  return (real_rate){real / 2000.0, fail / 2000.0};
}

typedef struct level_run {
  double levels[2][3]; /* [side][run]: each run's level (shape.level) */
  int runs;
  double want;      /* expected step-time change of B (0: an A/A, must be noise) */
  double run_noise; /* the between-run floor given (NaN: not given) */
} level_run;

/* The between-run family correction (diff_runs.c), recomputed here from the raw p-values: with
 * nothing declared, Holm over every tested metric; with step_time declared (a gate on it),
 * step_time alone at its raw p and Holm over the rest. */
static void check_family(const ssa_diff *d, const ssa_analysis *an[2][3], int runs) {
  for (int declared = 0; declared < 2; declared++) {
    ssa_diff e;
    const ssa_diff *x = d;
    if (declared) {
      if (ssa_diff_runs_repeated(an[0], (size_t)runs, an[1], (size_t)runs, "A", "B", NAN,
                                 1u << SSA_DM_STEP_TIME, &e)) {
        CHECK(0, "repeated diff with a declared metric failed");
        return;
      }
      x = &e;
    }
    double p[SSA_DM_N];
    int ks[SSA_DM_N], n = 0;
    for (int k = 0; k < SSA_DM_N; k++) {
      const ssa_diff_metric *m = &x->m[k];
      if (!m->comparable || isnan(m->run_p_value)) continue;
      if (declared && k == SSA_DM_STEP_TIME) {
        CHECK(m->run_p_adjusted == m->run_p_value, "declared step_time: adjusted %g raw %g",
              m->run_p_adjusted, m->run_p_value);
        continue;
      }
      p[n] = m->run_p_value;
      ks[n++] = k;
    }
    for (int i = 0; i < n; i++) { /* Holm: rank i (0-based) of n, adjusted = max over j <= i */
      double adj = 0;
      for (int j = 0; j < n; j++) {
        int rank_j = 0;
        for (int l = 0; l < n; l++)
          rank_j += p[l] < p[j] || (p[l] == p[j] && l < j);
        int rank_i = 0;
        for (int l = 0; l < n; l++)
          rank_i += p[l] < p[i] || (p[l] == p[i] && l < i);
        if (rank_j <= rank_i) adj = fmax(adj, fmin(1.0, p[j] * (n - rank_j)));
      }
      const ssa_diff_metric *m = &x->m[ks[i]];
      CHECK(fabs(m->run_p_adjusted - adj) <= 1e-12 * adj, "%s: Holm %g, diff says %g",
            ssa_diff_metric_names[ks[i]], adj, m->run_p_adjusted);
      CHECK(m->run_p_adjusted < SSA_DIFF_ALPHA || m->verdict != SSA_DV_REAL,
            "%s called real with adjusted p %g", ssa_diff_metric_names[ks[i]], m->run_p_adjusted);
    }
    if (declared) ssa_diff_free(&e);
  }
}

/* Loads side A's and side B's runs with the levels of lr and diffs them as
 * repeated runs; checks the step-time verdict. */
static void check_levels(const level_run *lr) {
  loaded l[2][3];
  const ssa_analysis *an[2][3];
  int ok = 1;
  memset(l, 0, sizeof l);
  for (int side = 0; side < 2; side++)
    for (int r = 0; r < lr->runs; r++) {
      shape sh = base_shape();
      sh.jitter = 0.005;
      sh.seed = (uint64_t)(10 * side + r + 1);
      sh.level = lr->levels[side][r];
      if (load(&sh, &l[side][r])) ok = 0;
      an[side][r] = &l[side][r].an;
    }
  ssa_diff d;
  if (ok && ssa_diff_runs_repeated(an[0], (size_t)lr->runs, an[1], (size_t)lr->runs, "A", "B",
                                   lr->run_noise, 0, &d) == 0) {
    const ssa_diff_metric *m = &d.m[SSA_DM_STEP_TIME];
    if (lr->runs > 1) check_family(&d, an, lr->runs);
    int floor_reason = lr->runs == 1 ? SSA_DN_RUN_NOISE : SSA_DN_BETWEEN_RUNS;
    if (lr->want == 0)
      CHECK(m->verdict != SSA_DV_REAL && m->noise_reason == floor_reason,
            "A/A with %d runs per side: step_time %+.1f %% %s (reason %d, gap %.0f, ranges %.0f "
            "%.0f)",
            lr->runs, m->rel_change * 100, word(&d, SSA_DM_STEP_TIME), m->noise_reason, m->run_gap,
            m->a.between, m->b.between);
    else
      CHECK(m->verdict == SSA_DV_REAL && fabs(m->rel_change - lr->want) < 0.3 * lr->want,
            "real %+.0f %% with %d runs per side: %s %+.1f %% (reason %d)", lr->want * 100,
            lr->runs, word(&d, SSA_DM_STEP_TIME), m->rel_change * 100, m->noise_reason);
    CHECK(d.nruns_a == (size_t)lr->runs && m->a.runs == (size_t)lr->runs &&
              m->a.n == (size_t)(16 * lr->runs),
          "runs %zu, run medians %zu, values %zu", d.nruns_a, m->a.runs, m->a.n);
    ssa_diff_free(&d);
  } else {
    CHECK(0, "repeated diff failed");
  }
  for (int side = 0; side < 2; side++)
    for (int r = 0; r < lr->runs; r++)
      unload(&l[side][r]);
}

static void case_repeats(void) {
  /* the t distribution's tail against reference values (scipy.stats.t.sf x 2) */
  static const struct {
    double t, df, p;
  } ref[] = {{2.5, 3, 0.08770664700806556},
             {0.3, 1, 0.8144528418445154},
             {40, 7, 1.5902179984850364e-09},
             {1.0, 30, 0.3253086154260302}};
  for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
    double p = ssa_student_t_p(ref[i].t, ref[i].df);
    CHECK(fabs(p - ref[i].p) < 1e-9 * ref[i].p + 1e-15, "t %.1f df %.0f: p %.17g, want %.17g",
          ref[i].t, ref[i].df, p, ref[i].p);
  }
  /* exact: A's runs sit at 100, 101, 102 and B's at 105, 106, 107 (4 equal
   * steps each): the t-test of their logarithms, 4 degrees of freedom, p = 0.0036 (scipy's
   * ttest_ind of np.log of the medians): real; the nearest runs are 3 apart. At 101.5, 102.5,
   * 103.5, p = 0.14: noise, although B's nearest run lies beyond A's farthest (gap -0.5: they
   * interleave). */
  double va[12], vb[12];
  size_t seg[3] = {4, 4, 4};
  for (int i = 0; i < 12; i++) {
    va[i] = 100 + i / 4;
    vb[i] = 105 + i / 4;
  }
  ssa_diff_metric m;
  CHECK(ssa_diff_compare_runs(va, seg, 3, vb, seg, 3, SSA_DM_STEP_TIME, NAN, 0, NAN, &m) == 0,
        "compare runs");
  CHECK(m.a.runs == 3 && m.a.between == 2 && m.b.between == 2 && m.run_gap == 3 &&
            m.a.run_median[2] == 102,
        "runs %zu, between %.2f %.2f, gap %.2f", m.a.runs, m.a.between, m.b.between, m.run_gap);
  CHECK(fabs(m.run_p_value - 0.0036109002405716674) < 1e-12, "t-test p %.17g", m.run_p_value);
  CHECK(m.verdict == SSA_DV_REAL, "p 0.0036: verdict %d reason %d", m.verdict, m.noise_reason);
  for (int i = 0; i < 12; i++)
    vb[i] = 101.5 + (i / 4);
  CHECK(ssa_diff_compare_runs(va, seg, 3, vb, seg, 3, SSA_DM_STEP_TIME, NAN, 0, NAN, &m) == 0,
        "compare runs");
  CHECK(m.verdict == SSA_DV_NOISE && m.noise_reason == SSA_DN_BETWEEN_RUNS &&
            fabs(m.run_p_value - 0.14007649846733736) < 1e-12 && m.run_gap == -0.5,
        "p 0.14: verdict %d reason %d p %.17g gap %.2f", m.verdict, m.noise_reason, m.run_p_value,
        m.run_gap);
  /* a decrease: the gap is measured downwards */
  for (int i = 0; i < 12; i++)
    vb[i] = 95 + i / 4;
  ssa_diff_compare_runs(va, seg, 3, vb, seg, 3, SSA_DM_STEP_TIME, NAN, 0, NAN, &m);
  CHECK(m.verdict == SSA_DV_REAL && m.run_gap == 3, "decrease: verdict %d gap %.2f", m.verdict,
        m.run_gap);
  /* a gate metric (SSA_DIFF_GATE_METRIC): the test asks one-sided whether it got worse. Run
   * medians 102, 103, 104 against 100, 101, 102: two-sided p = 0.0705 (scipy ttest_ind of the
   * logarithms), one-sided 0.0352. Undeclared: noise; declared: real. The same distance the
   * better way (98, 99, 100) stays two-sided, so noise either way. */
  for (int i = 0; i < 12; i++)
    vb[i] = 102 + i / 4;
  ssa_diff_compare_runs(va, seg, 3, vb, seg, 3, SSA_DM_STEP_TIME, NAN, 0, NAN, &m);
  CHECK(m.verdict == SSA_DV_NOISE && m.noise_reason == SSA_DN_BETWEEN_RUNS && !m.run_one_sided &&
            fabs(m.run_p_value - 0.07049963539389996) < 1e-12,
        "undeclared, worse, p 0.07: verdict %d reason %d p %.17g", m.verdict, m.noise_reason,
        m.run_p_value);
  ssa_diff_compare_runs(va, seg, 3, vb, seg, 3, SSA_DM_STEP_TIME, NAN, SSA_DIFF_GATE_METRIC, NAN,
                        &m);
  CHECK(m.verdict == SSA_DV_REAL && m.run_one_sided &&
            fabs(m.run_p_value - 0.03524981769694998) < 1e-12,
        "gate metric, worse, one-sided p 0.035: verdict %d reason %d p %.17g", m.verdict,
        m.noise_reason, m.run_p_value);
  for (int i = 0; i < 12; i++)
    vb[i] = 98 + i / 4;
  ssa_diff_compare_runs(va, seg, 3, vb, seg, 3, SSA_DM_STEP_TIME, NAN, SSA_DIFF_GATE_METRIC, NAN,
                        &m);
  CHECK(m.verdict == SSA_DV_NOISE && !m.run_one_sided && m.run_p_value > 0.05,
        "gate metric, better, p %.3g: verdict %d one-sided %d", m.run_p_value, m.verdict,
        m.run_one_sided);
  /* a run median of 0 (no exposed communication in one run): the raw medians are tested */
  {
    const double za[3] = {0, 1, 2}, zb[3] = {5, 6, 7};
    double p = ssa_diff_runs_t_test(za, 3, zb, 3, NULL);
    CHECK(fabs(p - 0.0036022326091040033) < 1e-12, "raw t-test with a zero median: p %.17g", p);
  }
  /* the family correction on given p-values: Holm over the undeclared metrics (sorted
   * 0.004 0.01 0.02 0.03 -> x4 x3 x2 x1, running maximum: 0.016 0.03 0.04 0.04), Bonferroni
   * over the declared (two: x2) */
  {
    ssa_diff fam;
    memset(&fam, 0, sizeof fam);
    static const struct {
      int k;
      double p;
      int declared;
      double want;
    } fp[] = {{SSA_DM_COMPUTE, 0.02, 0, 0.04},   {SSA_DM_COMM, 0.004, 0, 0.016},
              {SSA_DM_IDLE, 0.03, 0, 0.04},      {SSA_DM_EXPOSED_COMM, 0.01, 0, 0.03},
              {SSA_DM_STEP_TIME, 0.02, 1, 0.04}, {SSA_DM_MFU, 0.03, 1, 0.06}};
    unsigned declared = 0;
    for (size_t i = 0; i < sizeof fp / sizeof fp[0]; i++) {
      ssa_diff_metric *x = &fam.m[fp[i].k];
      x->comparable = 1;
      x->run_p_value = fp[i].p;
      x->verdict = SSA_DV_REAL;
      if (fp[i].declared) declared |= 1u << fp[i].k;
    }
    for (int k = 0; k < SSA_DM_N; k++)
      if (!fam.m[k].comparable) fam.m[k].run_p_value = NAN;
    ssa_diff_between_runs_family(&fam, declared);
    for (size_t i = 0; i < sizeof fp / sizeof fp[0]; i++) {
      const ssa_diff_metric *x = &fam.m[fp[i].k];
      CHECK(fabs(x->run_p_adjusted - fp[i].want) < 1e-15, "%s: adjusted %.17g, want %g",
            ssa_diff_metric_names[fp[i].k], x->run_p_adjusted, fp[i].want);
      int real = fp[i].want < SSA_DIFF_ALPHA;
      CHECK((x->verdict == SSA_DV_REAL) == real && (real || x->noise_reason == SSA_DN_BETWEEN_RUNS),
            "%s: verdict %d reason %d", ssa_diff_metric_names[fp[i].k], x->verdict,
            x->noise_reason);
    }
  }
  /* one run per side: no between-run test, no gap */
  size_t one = 12;
  ssa_diff_compare_runs(va, &one, 1, vb, &one, 1, SSA_DM_STEP_TIME, NAN, 0, NAN, &m);
  CHECK(isnan(m.run_gap) && isnan(m.run_p_value) && isnan(m.a.between) && m.a.runs == 1,
        "one run: gap %.2f p %.2f", m.run_gap, m.run_p_value);

  /* generated: runs differ by up to +-4 % (uniform), steps by +-1 %. The t-test holds its
   * level (5 %, two-sided) up to the Monte Carlo error and the uniform distribution's
   * departure from normal; a gate at +5 % almost never fails an A/A pair. */
  real_rate one_run = repeated_real_rate(1, 0.04, 0.04, 0, 5, 0),
            two = repeated_real_rate(2, 0.04, 0.04, 0, 6, 0),
            three = repeated_real_rate(3, 0.04, 0.04, 0, 7, 0),
            power = repeated_real_rate(3, 0.04, 0.04, 0.15, 8, 0);
  /* runs that scatter +-12 %: an A/A pair (both sides alike) and a +20 % regression whose
   * runs scatter 4x as much as A's (seen on the CPU trainer with an injected delay) */
  real_rate aa_wide = repeated_real_rate(3, 0.12, 0.12, 0, 9, 0),
            wide = repeated_real_rate(3, 0.03, 0.12, 0.20, 10, 0);
  printf(
      "A/A, runs +-4 %% apart, steps +-1 %%: called real in %.1f %% with 1 run per side, %.1f "
      "%% with 2, %.1f %% with 3 (a gate at +5 %% fails %.1f %%); a +15 %% change with 3 runs: "
      "%.1f %%\nruns +-12 %% apart: A/A real %.1f %% (gate fails %.1f %%); B's runs +-12 %%, A's "
      "+-3 %%: +20 %% found %.1f %%\n",
      one_run.real * 100, two.real * 100, three.real * 100, three.gate_fail * 100, power.real * 100,
      aa_wide.real * 100, aa_wide.gate_fail * 100, wide.real * 100);
  CHECK(one_run.real > 0.3, "one run per side cannot see run-to-run differences: %.3f",
        one_run.real);
  CHECK(two.real < 0.08 && three.real < 0.08 && aa_wide.real < 0.08,
        "A/A with repeats called real: %.3f (2 runs), %.3f (3 runs), %.3f (runs +-12 %%)", two.real,
        three.real, aa_wide.real);
  CHECK(three.gate_fail < 0.01 && aa_wide.gate_fail < 0.05, "A/A gate failures %.3f, %.3f",
        three.gate_fail, aa_wide.gate_fail);
  CHECK(power.real > 0.95 && wide.real > 0.7,
        "+15 %% with 3 runs detected in %.3f; +20 %% with B "
        "wider %.3f",
        power.real, wide.real);
  /* a gate on step time (SSA_DIFF_GATE_METRIC: one-sided toward worse), runs +-12 % apart on
   * both sides: an A/A pair fails the gate at most at the test's level (5 %, before the +5 %
   * threshold), and a +15 % regression is found more often than by the two-sided test on the
   * same draws */
  real_rate gate_aa = repeated_real_rate(3, 0.12, 0.12, 0, 11, SSA_DIFF_GATE_METRIC),
            gate_15 = repeated_real_rate(3, 0.12, 0.12, 0.15, 12, SSA_DIFF_GATE_METRIC),
            both_15 = repeated_real_rate(3, 0.12, 0.12, 0.15, 12, 0);
  printf("gate metric, runs +-12 %% apart: A/A gate fails %.1f %%; +15 %% fails the gate %.1f %% "
         "(two-sided test: %.1f %%)\n",
         gate_aa.gate_fail * 100, gate_15.gate_fail * 100, both_15.gate_fail * 100);
  CHECK(gate_aa.gate_fail < 0.06 && gate_15.gate_fail > both_15.gate_fail + 0.03,
        "gate metric: A/A fails %.3f; +15 %% found %.3f one-sided, %.3f two-sided",
        gate_aa.gate_fail, gate_15.gate_fail, both_15.gate_fail);

  /* end to end (generated traces, ssa_diff_runs_repeated): run levels move
   * by up to 4 %; one run per side without a floor (--run-noise 0) calls B's +4 % WORSE,
   * three runs do not */
  level_run aa1 = {{{0}, {0.04}}, 1, 0.04, 0};
  check_levels(&aa1);
  /* the same with the default between-run floor (30 %): noise, reason run_noise; a +50 %
   * change is beyond it; a floor of 3 % given calls the +4 % WORSE again */
  level_run aa1_floor = {{{0}, {0.04}}, 1, 0, NAN};
  check_levels(&aa1_floor);
  level_run real1_floor = {{{0}, {0.5}}, 1, 0.5, NAN};
  check_levels(&real1_floor);
  level_run aa1_given = {{{0}, {0.04}}, 1, 0.04, 0.03};
  check_levels(&aa1_given);
  level_run aa3 = {{{0, 0.03, -0.01}, {0.04, 0.0, 0.02}}, 3, 0, NAN};
  check_levels(&aa3);
  level_run real3 = {{{0, 0.03, -0.01}, {0.24, 0.20, 0.22}}, 3, 0.22, NAN};
  check_levels(&real3);
}

static void case_gate_parse(void) {
  static const char *const valid[] = {"step_time:+3%,exposed_comm:+10%,mfu:-2%,bubble:+2pt",
                                      "idle:+1.5ms, overlap:-5pt",
                                      "comm:+1s,exposed_mem:+10ns,compute:2us"};
  static const char alphabet[] = "stepimu_:+-%.,0123456789 ptmsnx\t";
  uint64_t rs = 7;
  size_t accepted = 0;
  for (int i = 0; i < 200000; i++) {
    char buf[96];
    const char *v = valid[rng_next(&rs) % 3];
    size_t n = strlen(v);
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, v, n);
    int edits = 1 + (int)(rng_next(&rs) % 4);
    for (int e = 0; e < edits; e++) {
      size_t at = n ? rng_next(&rs) % n : 0;
      int op = (int)(rng_next(&rs) % 3);
      char c = alphabet[rng_next(&rs) % (sizeof alphabet - 1)];
      if (op == 0 && n)
        buf[at] = c; /* replace */
      else if (op == 1 && n)
        memmove(buf + at, buf + at + 1, n-- - at - 1); /* delete */
      else if (n + 1 < sizeof buf) {                   /* insert */
        memmove(buf + at + 1, buf + at, n - at);
        buf[at] = c;
        n++;
      }
    }
    buf[n] = 0;
    /* an exact-size heap copy, so that the sanitizer sees any read past the end */
    char *spec = malloc(n + 1);
    if (!spec) return;
    memcpy(spec, buf, n + 1);
    ssa_gate g;
    char err[256] = "";
    int rc = ssa_gate_parse(spec, &g, err, sizeof err);
    if (rc == 0) {
      accepted++;
      CHECK(g.n >= 1 && g.n <= SSA_DM_N, "spec '%s': %zu rules", spec, g.n);
      for (size_t r = 0; r < g.n; r++)
        CHECK(g.rules[r].threshold >= 0 && isfinite(g.rules[r].threshold), "spec '%s': threshold",
              spec);
    } else {
      CHECK(rc == -1 && strstr(err, "--fail-on") != NULL, "spec '%s': rc %d, message '%s'", spec,
            rc, err);
    }
    free(spec);
    if (failures > 20) return;
  }
  printf("mutated --fail-on specs: %zu of 200000 accepted\n", accepted);
  CHECK(accepted > 1000 && accepted < 190000, "both outcomes exercised (%zu accepted)", accepted);
}

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "all";
  int all = !strcmp(c, "all");
  if (all || !strcmp(c, "unknown")) case_unknown();
  if (all || !strcmp(c, "aa")) case_aa();
  if (all || !strcmp(c, "regression")) case_regression();
  if (all || !strcmp(c, "loader")) case_loader();
  if (all || !strcmp(c, "load")) case_load();
  if (all || !strcmp(c, "machine")) case_machine();
  if (all || !strcmp(c, "median")) case_median();
  if (all || !strcmp(c, "median_interval")) case_median_interval();
  if (all || !strcmp(c, "config")) case_config();
  if (all || !strcmp(c, "series")) case_series();
  if (all || !strcmp(c, "repeats")) case_repeats();
  if (all || !strcmp(c, "gate_parse")) case_gate_parse();
  if (failures) fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
