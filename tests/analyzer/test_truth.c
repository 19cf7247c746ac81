/*
 * test_truth.c — the analyzer against ground truth: for each generated case
 * (tests/gen), the run is written in stepscope's format, loaded and analysed
 * through the public library path (ssa_run_load + ssa_analyze), and every
 * SPEC §4 metric is compared for exact equality with the generator's
 * brute-force expectation: step windows, span/busy/idle/compute/comm/
 * overlap/exposed comm/exposed mem/bubble, idle causes per device and per
 * stream, launch-delay statistics, collectives (skew, transfer, waits,
 * algbw, busbw, stragglers, incomplete instances), clock offsets, step time
 * and MFU/HFU. Closed accounting is checked on every window.
 *
 * usage: test_truth CASE   (CASE names a group of scenarios; "all" runs all)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ssa_metrics.h"
#include "ssa_report.h"
#include "stepscope_gen.h"
#include "ssa_import.h"

static int failures;
static const char *cur_case;

#define CHECK_EQ(what, got, want)                                                                  \
  do {                                                                                             \
    long long g_ = (long long)(got), w_ = (long long)(want);                                       \
    if (g_ != w_) {                                                                                \
      if (failures < 40)                                                                           \
        fprintf(stderr, "FAIL %s: %s = %lld, expected %lld\n", cur_case, what, g_, w_);            \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

#define CHECK_NEAR(what, got, want)                                                                \
  do {                                                                                             \
    double g_ = (got), w_ = (want);                                                                \
    if (!(fabs(g_ - w_) <= 1e-9 * fabs(w_) + 1e-12)) {                                             \
      if (failures < 40)                                                                           \
        fprintf(stderr, "FAIL %s: %s = %.12g, expected %.12g\n", cur_case, what, g_, w_);          \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static void check_window(const ssa_analysis *a, const ssa_rank_result *rr, const ssa_window *w,
                         const gen_window *e, int64_t origin, const char *label) {
  char n[160];
#define W(field, want)                                                                             \
  do {                                                                                             \
    snprintf(n, sizeof n, "rank %d %s " #field, rr->rank->rank, label);                            \
    CHECK_EQ(n, w->field, want);                                                                   \
  } while (0)
  snprintf(n, sizeof n, "rank %d %s start_rel", rr->rank->rank, label);
  CHECK_EQ(n, ssa_rel_time(a->run, rr->rank, w->start), e->start - origin);
  snprintf(n, sizeof n, "rank %d %s end_rel", rr->rank->rank, label);
  CHECK_EQ(n, ssa_rel_time(a->run, rr->rank, w->end), e->end - origin);
  W(span, e->span);
  W(busy, e->busy);
  W(idle, e->idle);
  W(compute, e->compute);
  W(comm, e->comm);
  W(overlap, e->overlap);
  W(exposed_comm, e->exposed_comm);
  W(exposed_mem, e->exposed_mem);
  W(bubble, e->bubble);
  if (e->step >= 0) W(projected, e->projected);
  if (e->step >= 0) W(device_latency, e->device_latency);
  if (e->step >= 0) W(cut, e->cut);
  for (int k = 0; k < SSA_IDLE_N; k++) {
    snprintf(n, sizeof n, "rank %d %s idle %s", rr->rank->rank, label, ssa_idle_cause_names[k]);
    CHECK_EQ(n, w->idle_cause[k], e->idle_cause[k]);
  }
  if (rr->pipeline) { /* bubble causes: measured, and split by the simulated schedule */
    snprintf(n, sizeof n, "rank %d %s bubble causes measured", rr->rank->rank, label);
    CHECK_EQ(n, w->has_bubble_causes, 1);
    int64_t sum = 0;
    for (int k = 0; k < SSA_BUBBLE_N; k++) {
      snprintf(n, sizeof n, "rank %d %s bubble %s", rr->rank->rank, label,
               ssa_bubble_cause_names[k]);
      CHECK_EQ(n, w->bubble_cause[k], e->bubble_cause[k]);
      sum += w->bubble_cause[k];
    }
    snprintf(n, sizeof n, "rank %d %s bubble causes sum", rr->rank->rank, label);
    CHECK_EQ(n, sum, w->bubble);
    W(imbalance_stage, e->imbalance_stage);
  }
  W(launch.count, e->launches);
  if (e->launches) {
    W(launch.min, e->delay_min);
    W(launch.p50, e->delay_p50);
    W(launch.p90, e->delay_p90);
    W(launch.p99, e->delay_p99);
    W(launch.max, e->delay_max);
  }
#undef W
  /* closed accounting, and the idle causes sum to idle */
  snprintf(n, sizeof n, "rank %d %s closed accounting", rr->rank->rank, label);
  CHECK_EQ(n, w->compute + w->exposed_comm + w->exposed_mem + w->idle, w->span);
  int64_t sum = 0;
  for (int k = 0; k < SSA_IDLE_N; k++)
    sum += w->idle_cause[k];
  snprintf(n, sizeof n, "rank %d %s idle causes sum", rr->rank->rank, label);
  CHECK_EQ(n, sum, w->idle);
}

static void compare(const gen_run *g, const gen_expect *x, const ssa_analysis *a) {
  char n[160];
  CHECK_EQ("ranks loaded", a->nranks, x->nranks);
  if ((int)a->nranks != x->nranks) return;
  for (int k = 0; k < x->nranks; k++) {
    const gen_rank_expect *e = &x->ranks[k];
    const ssa_rank_result *rr = &a->ranks[k];
    CHECK_EQ("rank number", rr->rank->rank, e->rank);
    snprintf(n, sizeof n, "rank %d steps", e->rank);
    CHECK_EQ(n, rr->nsteps, e->nsteps);
    snprintf(n, sizeof n, "rank %d clock offset vs reference", e->rank);
    CHECK_EQ(n, rr->rank->offset_ns - a->ranks[0].rank->offset_ns, x->offset_rel[e->rank]);
    if (e->nsteps) check_window(a, rr, &rr->totals, &e->totals, x->origin, "totals");
    for (size_t s = 0; s < e->nsteps && s < rr->nsteps; s++) {
      char label[32];
      snprintf(label, sizeof label, "step %lld", (long long)e->steps[s].step);
      snprintf(n, sizeof n, "rank %d step number", e->rank);
      CHECK_EQ(n, rr->windows[s].step, e->steps[s].step);
      check_window(a, rr, &rr->windows[s], &e->steps[s], x->origin, label);
    }
    /* per-stream idle */
    for (int l = 0; l < g->ranks[e->rank].nlanes && e->nsteps; l++) {
      const ssa_lane_idle *li = NULL;
      for (size_t q = 0; q < rr->nlanes; q++)
        if (rr->rank->lanes[rr->lanes[q].lane].id == 7 + (uint64_t)l) li = &rr->lanes[q];
      snprintf(n, sizeof n, "rank %d stream %d present", e->rank, l);
      CHECK_EQ(n, li != NULL, 1);
      if (!li) continue;
      snprintf(n, sizeof n, "rank %d stream %d busy", e->rank, l);
      CHECK_EQ(n, li->busy, e->lane_busy[l]);
      for (int c = 0; c < SSA_IDLE_N; c++) {
        snprintf(n, sizeof n, "rank %d stream %d idle %s", e->rank, l, ssa_idle_cause_names[c]);
        CHECK_EQ(n, li->idle_cause[c], e->lane_idle[l][c]);
      }
    }
    snprintf(n, sizeof n, "rank %d collective count", e->rank);
    CHECK_EQ(n, rr->coll_count, e->coll_count);
    snprintf(n, sizeof n, "rank %d collective wait", e->rank);
    CHECK_EQ(n, rr->coll_wait, e->coll_wait);
    snprintf(n, sizeof n, "rank %d caused wait", e->rank);
    CHECK_EQ(n, rr->coll_caused, e->coll_caused);
    snprintf(n, sizeof n, "rank %d arrived last", e->rank);
    CHECK_EQ(n, rr->coll_last, e->coll_last);
  }
  CHECK_EQ("collective instances", a->ncolls, x->ncolls);
  CHECK_EQ("incomplete collectives", a->colls_incomplete, x->colls_incomplete);
  for (size_t c = 0; c < x->ncolls; c++) {
    const gen_coll_expect *e = &x->colls[c];
    const ssa_coll_instance *in = NULL;
    for (size_t i = 0; i < a->ncolls; i++)
      if (a->colls[i].comm_id == e->comm_id && a->colls[i].seq == e->seq) in = &a->colls[i];
    snprintf(n, sizeof n, "collective %llx/%llu found", (unsigned long long)e->comm_id,
             (unsigned long long)e->seq);
    CHECK_EQ(n, in != NULL, 1);
    if (!in) continue;
#define C(field, want)                                                                             \
  do {                                                                                             \
    snprintf(n, sizeof n, "collective seq %llu " #field, (unsigned long long)e->seq);              \
    CHECK_EQ(n, in->field, want);                                                                  \
  } while (0)
    C(present, e->present);
    C(comm_size, e->comm_size);
    C(first_start_rel, e->first_start);
    C(skew, e->skew);
    C(transfer, e->transfer);
    C(total_wait, e->total_wait);
    C(max_wait, e->max_wait);
    C(last_rank, e->last_rank);
#undef C
    snprintf(n, sizeof n, "collective seq %llu algbw", (unsigned long long)e->seq);
    CHECK_NEAR(n, in->algbw, e->algbw);
    snprintf(n, sizeof n, "collective seq %llu busbw", (unsigned long long)e->seq);
    CHECK_NEAR(n, in->busbw, e->busbw);
  }
  CHECK_EQ("step time median", a->step_time_median, x->step_time_median);
  CHECK_EQ("device latency median", a->device_latency_median, x->device_latency_median);
  /* the windows of a rank partition its timeline: in time order, each one
   * ends where the next begins */
  for (size_t k = 0; k < a->nranks; k++) {
    const ssa_rank_result *rr = &a->ranks[k];
    for (size_t i = 0; i < rr->nsteps; i++) {
      const ssa_window *w = &rr->windows[i];
      size_t after = 0, ends_at_next = 0;
      for (size_t j = 0; j < rr->nsteps; j++) {
        const ssa_window *q = &rr->windows[j];
        if (j == i) continue;
        if (q->start < w->end && w->start < q->end) CHECK_EQ("step windows overlap", 1, 0);
        if (q->start >= w->end) after++;
        if (q->start == w->end) ends_at_next++;
      }
      snprintf(n, sizeof n, "rank %d step %lld ends where a later window begins", rr->rank->rank,
               (long long)w->step);
      if (after) CHECK_EQ(n, ends_at_next > 0, 1);
    }
  }
  if (g->with_flops) {
    CHECK_NEAR("mfu", a->mfu, x->mfu);
    CHECK_NEAR("hfu", a->hfu, x->hfu);
  }
  /* kernel table: every kernel/host op starting in its rank's window is counted once */
  uint64_t want = 0, got = 0;
  for (size_t i = 0; i < g->nops; i++) {
    const gen_op *o = &g->ops[i];
    if (o->cls == GEN_MEMCPY || o->cls == GEN_MEMSET) {
      if (!g->ranks[o->rank].cpu_backend) continue;
    }
    for (int k = 0; k < x->nranks; k++)
      if (x->ranks[k].rank == o->rank && x->ranks[k].nsteps && o->s >= x->ranks[k].totals.start &&
          o->s < x->ranks[k].totals.end)
        want++;
  }
  int64_t total = 0;
  for (size_t i = 0; i < a->nkernels; i++) {
    got += a->kernels[i].count;
    total += a->kernels[i].total;
    if (i && a->kernels[i].total > a->kernels[i - 1].total) CHECK_EQ("kernel table sorted", 0, 1);
  }
  CHECK_EQ("kernel table count", got, want);
  CHECK_EQ("kernel table total", total, a->kernel_time_total);
}

/* Checks of what an iteration scenario means, beyond the exact truth. */
typedef void (*iter_check)(const gen_iter *it, const gen_run *g, const ssa_analysis *a);

static int run_built(const char *name, gen_run *g, uint64_t seed, const gen_iter *it,
                     iter_check check) {
  cur_case = name;
  int before = failures;
  char dir[] = "/tmp/ssa-truth-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    gen_free(g);
    return ++failures;
  }
  char err[600];
  if (gen_write(g, dir, err, sizeof err)) {
    fprintf(stderr, "FAIL %s: write: %s\n", name, err);
    failures++;
  } else {
    gen_expect x;
    gen_expect_compute(g, &x);
    ssa_run run;
    stepscope_error e;
    ssa_load_options lo = {.threads = 2, .progress = 0};
    if (ssa_run_load(&run, dir, &lo, &e)) {
      fprintf(stderr, "FAIL %s: load: %s\n", name, e.message);
      failures++;
    } else {
      ssa_analysis an;
      ssa_options opt;
      ssa_options_default(&opt);
      if (ssa_analyze(&run, &opt, &an, &e)) {
        fprintf(stderr, "FAIL %s: analyze: %s\n", name, e.message);
        failures++;
      } else {
        if (check) check(it, g, &an); /* first: its messages are the telling ones */
        compare(g, &x, &an);
        /* the JSON report must be writable */
        char path[600];
        snprintf(path, sizeof path, "%s/report.json", dir);
        ssa_out o;
        if (ssa_out_open(&o, path) == 0) {
          ssa_report_json(&an, &o);
          CHECK_EQ("json report written", ssa_out_close(&o), 0);
        }
        FILE *devnull = fopen("/dev/null", "w");
        if (devnull) {
          CHECK_EQ("text report", ssa_report_text(&an, devnull), 0);
          fclose(devnull);
        }
        unlink(path);
      }
      ssa_analysis_free(&an);
    }
    ssa_run_free(&run);
    gen_expect_free(&x);
  }
  for (int r = 0; r < g->nranks; r++) {
    char p[600];
    snprintf(p, sizeof p, "%s/rank-%05d.trace.zst", dir, r);
    unlink(p);
  }
  rmdir(dir);
  gen_free(g);
  printf("%-28s seed %-3llu %s\n", name, (unsigned long long)seed,
         failures == before ? "ok" : "FAILED");
  return failures - before;
}

static int run_case(const char *name, const gen_scenario *sc) {
  gen_run g;
  if (gen_build(&g, sc)) {
    cur_case = name;
    fprintf(stderr, "FAIL %s: generator out of memory\n", name);
    return ++failures;
  }
  return run_built(name, &g, sc->seed, NULL, NULL);
}

/* ---- iteration scenarios: what a step's time means ---- */

/* The host iteration period of rank 0 between steps k and k + 1. */
static int64_t host_period(const gen_run *g, int64_t k) {
  int64_t a = -1, b = -1;
  for (size_t i = 0; i < g->nsteps; i++)
    if (g->steps[i].rank == 0) {
      if (g->steps[i].number == k) a = g->steps[i].s;
      if (g->steps[i].number == k + 1) b = g->steps[i].s;
    }
  return b - a;
}

/* Data loading bound: the step time is the host's iteration period, and
 * the device's wait for the loader is inside every step, as data_loading. */
static void check_loading(const gen_iter *it, const gen_run *g, const ssa_analysis *a) {
  CHECK_EQ("loading: step time = host iteration period", a->step_time_median, host_period(g, 2));
  CHECK_EQ("loading: device latency = one step's kernels", a->device_latency_median,
           it->device_work_ns);
  const ssa_rank_result *rr = &a->ranks[0];
  for (size_t s = 0; s < rr->nsteps; s++)
    CHECK_EQ("loading: the loader's time is data_loading in the step",
             rr->windows[s].idle_cause[SSA_IDLE_DATA_LOADING], it->load_ns);
}

/* Device bound with the host ahead: the step time is the device's period
 * (one step's kernels back to back), not the longer host-range or
 * launch-to-completion span. */
static void check_ahead(const gen_iter *it, const gen_run *g, const ssa_analysis *a) {
  (void)g;
  CHECK_EQ("ahead: step time = device period", a->step_time_median, it->device_work_ns);
  if (it->prefetch) /* the batch copy runs early: the work a step launched spans more */
    CHECK_EQ("ahead: device latency > step time", a->device_latency_median > a->step_time_median,
             1);
  const ssa_rank_result *rr = &a->ranks[0];
  for (size_t s = 1; s + 1 < rr->nsteps; s++) {
    CHECK_EQ("ahead: steady-state window = device period", rr->windows[s].span, it->device_work_ns);
    CHECK_EQ("ahead: steady-state window has no idle", rr->windows[s].idle, 0);
  }
}

static void check_graphs(const gen_iter *it, const gen_run *g, const ssa_analysis *a) {
  check_ahead(it, g, a);
  const ssa_rank_result *rr = &a->ranks[0];
  for (size_t s = 0; s < rr->nsteps; s++) {
    CHECK_EQ("graphs: every replayed kernel (and the copy) belongs to its step",
             rr->steps[s].launched, (uint64_t)it->kernels + (it->prefetch ? 1 : 0));
  }
}

/* The last step is cut by the trace's end (its later kernels are missing,
 * its range ends where the trace stops): its window ends there, shorter
 * than a period; the median step time stays the period of whole steps. */
static void check_cut(const gen_iter *it, const gen_run *g, const ssa_analysis *a) {
  (void)it;
  const ssa_rank_result *rr = &a->ranks[0];
  const ssa_window *last = &rr->windows[rr->nsteps - 1];
  int64_t stop = 0;
  for (size_t i = 0; i < g->nsteps; i++)
    if (g->steps[i].rank == 0 && g->steps[i].number == (int64_t)rr->nsteps - 1)
      stop = g->steps[i].e;
  CHECK_EQ("cut: the last window ends at the trace's end",
           ssa_rel_time(a->run, rr->rank, last->end) -
               ssa_rel_time(a->run, rr->rank, rr->windows[0].start),
           stop - g->steps[0].s);
  CHECK_EQ("cut: the last window is shorter than a period", last->span < a->step_time_median, 1);
  CHECK_EQ("cut: the step time is that of the whole steps", a->step_time_median, host_period(g, 1));
}

static void iter_case(const char *which, int all, const char *label, gen_iter *it,
                      iter_check check) {
  if (!all && strcmp(which, label)) return;
  gen_run g;
  if (gen_iter_build(&g, it)) {
    cur_case = label;
    fprintf(stderr, "FAIL %s: generator out of memory\n", label);
    failures++;
    return;
  }
  run_built(label, &g, 0, it, check);
}

static void iter_cases(const char *which) {
  int all = !strcmp(which, "all");
  gen_iter it;
  gen_iter_default(&it);
  it.load_ns = 300 * GEN_Q;
  iter_case(which, all, "iter_loading", &it, check_loading);
  gen_iter_default(&it);
  it.load_ns = 300 * GEN_Q;
  it.nranks = 2;
  it.comm = 1;
  iter_case(which, all, "iter_loading_comm", &it, NULL);
  for (int h = 1; h <= 3; h++) {
    char label[32];
    snprintf(label, sizeof label, "iter_ahead_%d", h);
    gen_iter_default(&it);
    it.host_ahead = h;
    it.nsteps = 8;
    it.load_ns = 10 * GEN_Q;
    it.prefetch = 1;
    iter_case(which, all, label, &it, check_ahead);
  }
  gen_iter_default(&it);
  it.host_ahead = 2;
  it.nranks = 2;
  it.comm = 1;
  it.nsteps = 8;
  iter_case(which, all, "iter_ahead_comm", &it, NULL);
  gen_iter_default(&it);
  it.graphs = 1;
  it.host_ahead = 2;
  it.nsteps = 8;
  it.prefetch = 1;
  iter_case(which, all, "iter_graphs", &it, check_graphs);
  gen_iter_default(&it);
  it.cut_last = 1;
  it.load_ns = 50 * GEN_Q;
  iter_case(which, all, "iter_cut_last", &it, check_cut);
  gen_iter_default(&it);
  it.cut_last = 1;
  it.host_ahead = 1;
  it.nranks = 2;
  it.comm = 1;
  iter_case(which, all, "iter_cut_last_comm", &it, NULL);
}

static void cases(const char *which) {
  gen_scenario sc;
  int all = !strcmp(which, "all");
#define CASE(label, setup)                                                                         \
  if (all || !strcmp(which, label)) {                                                              \
    for (uint64_t seed = 1; seed <= 4; seed++) {                                                   \
      gen_scenario_default(&sc);                                                                   \
      sc.seed = seed;                                                                              \
      setup;                                                                                       \
      run_case(label, &sc);                                                                        \
    }                                                                                              \
  }
  CASE("basic", (void)0);
  CASE("many_streams_nested", {
    sc.nranks = 3;
    sc.nlanes = 5;
    sc.overlap_same_lane = 1;
    sc.ops_per_step = 16;
  });
  CASE("no_comm", {
    sc.comm = 0;
    sc.nlanes = 3;
  });
  CASE("only_comm", {
    sc.compute = 0;
    sc.nranks = 3;
  });
  CASE("clocks_seconds_apart", {
    sc.nranks = 4;
    sc.clock_spread = 5000000000ll;
    sc.anchor_error = 50000;
  });
  CASE("missing_member", {
    sc.nranks = 4;
    sc.missing_member = 1;
    sc.nsteps = 4;
    sc.anchor_error = 3000;
  });
  CASE("empty_rank", {
    sc.nranks = 3;
    sc.empty_rank = 1;
  });
  CASE("cpu_backend", {
    sc.cpu_backend = 1;
    sc.nranks = 3;
    sc.copies = 1;
    sc.anchor_error = 2000;
  });
  CASE("mixed_backends", {
    sc.cpu_backend = 2;
    sc.nranks = 4;
    sc.name_only_nccl = 1;
  });
  CASE("pipeline", {
    sc.nranks = 4;
    sc.pipeline = 1;
    sc.flops = 1;
  });
  CASE("copies_syncs", {
    sc.copies = 1;
    sc.syncs = 1;
    sc.nlanes = 3;
    sc.ops_per_step = 12;
  });
  CASE("single_lane", {
    sc.nlanes = 1;
    sc.nranks = 2;
    sc.syncs = 1;
    sc.flops = 1;
  });
  CASE("overlapping_steps", {
    sc.nranks = 2;
    sc.nsteps = 5;
    sc.overlap_steps = 1;
    sc.syncs = 1;
  });
  CASE("nested_steps", {
    sc.nranks = 3;
    sc.nsteps = 4;
    sc.overlap_steps = 2;
    sc.copies = 1;
    sc.flops = 1;
  });
  CASE("pipeline_1f1b", {
    sc.nranks = 3;
    sc.pipeline_schedule = 1;
    sc.nsteps = 3;
  });
  CASE("pipeline_afab_cpu", {
    sc.nranks = 2;
    sc.pipeline_schedule = 2;
    sc.nsteps = 2;
    sc.cpu_backend = 1;
  });
  CASE("pipeline_1f1b_pp4", {
    sc.nranks = 4;
    sc.pipeline_schedule = 1;
    sc.nsteps = 2;
    sc.cpu_backend = 2;
  });
  CASE("alltoall_uneven", {
    sc.nranks = 4;
    sc.alltoall = 1;
  });
  CASE("alltoall_uneven_cpu", {
    sc.nranks = 3;
    sc.alltoall = 1;
    sc.cpu_backend = 1;
    sc.missing_member = 1;
  });
#undef CASE
  iter_cases(which);
}

int main(int argc, char **argv) {
  cases(argc > 1 ? argv[1] : "all");
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  return 0;
}
