/*
 * plan_sweep.c — the planner's sweep (ssa_plan.h: plan_enumerate, plan_sweep): every layout of
 * a job the framework can run and the filter allows, predicted and ranked best first.
 *
 * The layouts are enumerated in one fixed order (TP, PP, CP, micro-batches, schedule, virtual
 * stages, ZeRO, recomputation, SP, hybrid sharding, expert layouts) and predicted in batches of
 * PLAN_SWEEP_BATCH on a pool of threads (ssa_parallel_for): plan_predict reads the job and
 * writes only its own result, so the layouts of a batch are independent. Each batch's results
 * are kept in the enumeration order, so the ranked list is the same whatever the number of
 * threads (the sort breaks ties the same way on the same input). A large job's sweep (a 235B
 * mixture of experts on 256 GPUs: 1.5 million candidates, 490,000 of them runnable) takes 10 s
 * on one core of the development machine; the batches bound the memory beside the results and
 * let the caller report progress.
 */
#include "ssa_plan.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_io.h"

/* Layouts predicted together: large enough to keep the threads busy, small enough that the
 * batch (layouts, results, flags) stays a few tens of MB. */
#define PLAN_SWEEP_BATCH 16384

typedef struct sweep {
  const plan_job *job;
  const plan_sweep_options *opt;
  size_t workers;
  long total;         /* layouts the enumeration yields (the counting pass); -1 while counting */
  long counted;       /* during the counting pass */
  long predicted;     /* layouts predicted so far */
  mm_layout *pending; /* this batch's layouts */
  plan_result *res;   /* and their predictions */
  int *ok;            /* 1 predicted, 0 refused */
  long npending;
  /* the refusal of the last refused layout in enumeration order (plan_enumerate's why_none) */
  pthread_mutex_t lock;
  long last_refused; /* its index in the batch, -1: none in this batch */
  char why[256];
  /* the ranked results */
  plan_result *v;
  long n, cap;
  int failed; /* out of memory */
} sweep;

static int keep(sweep *s, const plan_result *r) {
  if (s->n == s->cap) {
    long cap = s->cap ? 2 * s->cap : 1024;
    plan_result *v = realloc(s->v, (size_t)cap * sizeof *v);
    if (!v) return -1;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = *r;
  return 0;
}

static void predict_one(void *ctx, size_t i) {
  sweep *s = ctx;
  char err[256];
  s->ok[i] = plan_predict(s->job, &s->pending[i], &s->res[i], err, sizeof err) == 0;
  if (!s->ok[i]) {
    pthread_mutex_lock(&s->lock);
    if ((long)i > s->last_refused) {
      s->last_refused = (long)i;
      snprintf(s->why, sizeof s->why, "%s", err);
    }
    pthread_mutex_unlock(&s->lock);
  }
}

/* Predicts the pending batch and keeps its results in order. */
static void flush(sweep *s, char *why_none, size_t why_size) {
  if (!s->npending || s->failed) return;
  s->last_refused = -1;
  ssa_parallel_for((size_t)s->npending, s->workers, predict_one, s);
  for (long i = 0; i < s->npending && !s->failed; i++)
    if (s->ok[i] && keep(s, &s->res[i]) != 0) s->failed = 1;
  if (s->last_refused >= 0 && why_none && why_size) snprintf(why_none, why_size, "%s", s->why);
  s->predicted += s->npending;
  s->npending = 0;
  if (s->opt && s->opt->progress) s->opt->progress(s->opt->ctx, s->predicted, s->total);
}

/* One layout of the enumeration: counted, or queued for prediction. */
static void emit(sweep *s, const mm_layout *l, char *why_none, size_t why_size) {
  if (s->total < 0) {
    s->counted++;
    return;
  }
  if (s->failed) return;
  s->pending[s->npending++] = *l;
  if (s->npending == PLAN_SWEEP_BATCH) flush(s, why_none, why_size);
}

static int cmp_results(const void *pa, const void *pb) {
  const plan_result *a = pa, *b = pb;
  if (a->fits != b->fits) return b->fits - a->fits;
  if (a->fits) {
    if (a->tokens_per_s != b->tokens_per_s) return a->tokens_per_s > b->tokens_per_s ? -1 : 1;
    return a->memory_total < b->memory_total ? -1 : a->memory_total > b->memory_total;
  }
  if (a->memory_total != b->memory_total) return a->memory_total < b->memory_total ? -1 : 1;
  return a->tokens_per_s > b->tokens_per_s ? -1 : a->tokens_per_s < b->tokens_per_s;
}

static int allowed(int want, int v) {
  return want < 0 || want == v;
}

/* The recomputations the sweep offers (rc, the mm_recompute; modules, what a selective one
 * recomputes), at most 5: none, selective (the attention core, or the job's --recompute-modules;
 * not under Composer, which checkpoints whole blocks), full, as the filter allows; and where the
 * recomputation is free, for a Megatron-Core mixture of experts without --recompute-modules, the
 * module sets Megatron-MoE-ModelZoo's Qwen3 recipes run (best_practice/qwen3: `moe_act layernorm`
 * at 4K, `layernorm moe` at long context). */
static int recompute_choices(const plan_job *job, const plan_filter *f, int rc[5], int modules[5]) {
  int n = 0;
  for (int r = 0; r < 3; r++)
    if (allowed(f->recompute, r) &&
        !(job->composer && r == MM_RECOMPUTE_SELECTIVE && f->recompute < 0)) {
      rc[n] = r;
      modules[n++] = r == MM_RECOMPUTE_SELECTIVE ? job->model.recompute_modules : 0;
    }
  if (f->recompute < 0 && job->model.framework == MM_FW_MEGATRON && job->model.experts > 0 &&
      job->model.moe_every == 1 && !job->model.recompute_modules) {
    rc[n] = MM_RECOMPUTE_SELECTIVE;
    modules[n++] = MM_RC_LAYERNORM | MM_RC_MOE_ACT;
    rc[n] = MM_RECOMPUTE_SELECTIVE;
    modules[n++] = MM_RC_LAYERNORM | MM_RC_MOE;
  }
  return n;
}

/* Layout l with every expert layout the filter allows (none without experts): the experts cut
 * over TP with EP degrees dividing dp and E, and under Megatron with TP and SP also whole on a
 * rank (expert TP 1) with EP degrees dividing tp x cp x dp and E. */
static void emit_expert_layouts(sweep *s, const plan_filter *f, mm_layout l, char *why_none,
                                size_t why_size) {
  const mm_layout *m = &s->job->model;
  int whole_ok = m->experts > 0 && m->framework == MM_FW_MEGATRON && l.tp > 1 && l.sp;
  for (int whole = 0; whole <= whole_ok; whole++) {
    if (m->experts > 0 && !allowed(f->expert_tp, whole ? 1 : l.tp)) continue;
    l.expert_tp = whole ? 1 : 0;
    int ranks = m->experts <= 0 ? 1 : whole ? l.tp * l.cp * l.dp : l.dp;
    for (int ep = 1; ep <= ranks; ep++) {
      if (m->experts > 0 && (ranks % ep || m->experts % ep || !allowed(f->ep, ep))) continue;
      l.ep = ep;
      emit(s, &l, why_none, why_size);
    }
  }
}

/* Every layout of the job the filter allows, in the sweep's order, to emit. */
static void enumerate(sweep *s, const plan_filter *f, char *why_none, size_t why_size) {
  const plan_job *job = s->job;
  const mm_layout *m = &job->model;
  int N = job->gpus;
  int rcs[5], rc_modules[5], nrc = recompute_choices(job, f, rcs, rc_modules);
  for (int tp = 1; tp <= N; tp++) {
    if (N % tp || !allowed(f->tp, tp) || m->heads % tp || m->hidden % tp) continue;
    for (int pp = 1; pp <= N / tp; pp++) {
      /* the trainer's stages are even; a framework's may differ by a block (mm_stage_layers) */
      int uneven_ok = m->framework != MM_FW_STEPSCOPE && pp <= m->layers;
      if ((N / tp) % pp || !allowed(f->pp, pp) || (m->layers % pp && !uneven_ok)) continue;
      for (int cp = 1; cp <= N / (tp * pp); cp++) {
        if ((N / (tp * pp)) % cp || !allowed(f->cp, cp) || (cp > 1 && m->seq % (2 * cp))) continue;
        int dp = N / (tp * pp * cp);
        if (!allowed(f->dp, dp) || job->global_batch % dp) continue;
        int per_dp = job->global_batch / dp;
        for (int M = 1; M <= per_dp; M++) {
          if (per_dp % M || !allowed(f->microbatches, M)) continue;
          for (int sched = 0; sched < 3; sched++) {
            if (pp == 1 && sched != MM_SCHED_1F1B) continue; /* one stage: no schedule to choose */
            if (f->schedule >= 0 && pp > 1 && f->schedule != sched) continue;
            /* the sweep's interleaving stops at PLAN_MAX_VIRTUAL_STAGES chunks a rank; a
             * --virtual-stages the user names is predicted however many it is */
            int vmax = f->virtual_stages > PLAN_MAX_VIRTUAL_STAGES ? f->virtual_stages
                                                                   : PLAN_MAX_VIRTUAL_STAGES;
            for (int v = sched == MM_SCHED_INTERLEAVED ? 2 : 1;
                 v <= (sched == MM_SCHED_INTERLEAVED ? vmax : 1); v++) {
              if (!allowed(f->virtual_stages, v) && sched == MM_SCHED_INTERLEAVED) continue;
              if (sched == MM_SCHED_INTERLEAVED && M % pp) continue;
              mm_layout chunks = *m; /* the layers must lay out on pp x v model chunks */
              chunks.pp = pp;
              chunks.schedule = (mm_schedule)sched;
              chunks.virtual_stages = v;
              if (sched == MM_SCHED_INTERLEAVED && !mm_stages_valid(&chunks)) continue;
              for (int zero = 0; zero <= 3; zero++) {
                if (!allowed(f->zero, zero) || (zero && dp * cp == 1) ||
                    (zero >= 2 && sched == MM_SCHED_INTERLEAVED && m->framework == MM_FW_STEPSCOPE))
                  continue;
                for (int c = 0; c < nrc; c++) {
                  for (int sp = 0; sp <= (tp > 1); sp++) {
                    if (!allowed(f->sp, sp) && tp > 1) continue;
                    mm_layout l = *m;
                    l.dp = dp;
                    l.tp = tp;
                    l.pp = pp;
                    l.cp = cp;
                    l.sp = sp;
                    l.schedule = (mm_schedule)sched;
                    l.virtual_stages = v;
                    l.microbatches = M;
                    l.micro_batch = per_dp / M;
                    l.zero = zero;
                    l.recompute = (mm_recompute)rcs[c];
                    l.recompute_modules = rc_modules[c];
                    l.bucket_mb = m->bucket_mb > 0 ? m->bucket_mb : 1;
                    /* FSDP's hybrid sharding: the states sharded over the DP group's
                     * members in a node (or the --shard-group named), replicated across */
                    l.shard_group = 0;
                    int group =
                        f->shard_group > 0 ? f->shard_group : plan_dp_members_in_node(job, &l);
                    int hybrid = m->framework == MM_FW_FSDP && zero >= 2 && group > 1 &&
                                 group < dp * cp && (dp * cp) % group == 0;
                    for (int h = 0; h <= hybrid; h++) {
                      l.shard_group = h ? group : 0;
                      if (f->shard_group >= 0 && f->shard_group != l.shard_group) {
                        if (why_none && why_size && f->shard_group > 0)
                          snprintf(why_none, why_size,
                                   "--shard-group %d: hybrid sharding needs --zero 2 or 3 and a "
                                   "DP x CP group it divides, larger than it",
                                   f->shard_group);
                        continue;
                      }
                      emit_expert_layouts(s, f, l, why_none, why_size);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

long plan_sweep(const plan_job *job, const plan_filter *f, const plan_sweep_options *opt,
                plan_result **out, char *why_none, size_t why_size) {
  sweep s = {.job = job, .opt = opt, .total = -1};
  if (why_none && why_size) why_none[0] = '\0';
  *out = NULL;
  /* Composer has data parallelism alone: its sweep is the degrees it runs (a degree the user
   * names is still enumerated, and refused with the reason, plan_predict) */
  plan_filter narrowed = *f;
  if (job->composer) {
    if (narrowed.tp < 0) narrowed.tp = 1;
    if (narrowed.pp < 0) narrowed.pp = 1;
    if (narrowed.cp < 0) narrowed.cp = 1;
    f = &narrowed;
  }
  enumerate(&s, f, NULL, 0); /* counting: the total, for progress and the pool's size */
  s.total = s.counted;
  s.workers = ssa_workers((size_t)(s.total < PLAN_SWEEP_BATCH ? s.total : PLAN_SWEEP_BATCH),
                          opt ? opt->threads : 1);
  long batch = s.total < PLAN_SWEEP_BATCH ? s.total : PLAN_SWEEP_BATCH;
  if (batch > 0) {
    s.pending = malloc((size_t)batch * sizeof *s.pending);
    s.res = malloc((size_t)batch * sizeof *s.res);
    s.ok = malloc((size_t)batch * sizeof *s.ok);
    s.failed = !s.pending || !s.res || !s.ok;
  }
  pthread_mutex_init(&s.lock, NULL);
  enumerate(&s, f, why_none, why_size);
  flush(&s, why_none, why_size);
  pthread_mutex_destroy(&s.lock);
  free(s.pending);
  free(s.res);
  free(s.ok);
  if (s.failed) {
    free(s.v);
    if (why_none && why_size) snprintf(why_none, why_size, "out of memory");
    return -1;
  }
  if (s.n) qsort(s.v, (size_t)s.n, sizeof *s.v, cmp_results);
  *out = s.v;
  return s.n;
}

long plan_enumerate(const plan_job *job, const plan_filter *f, plan_result **out, char *why_none,
                    size_t why_size) {
  return plan_sweep(job, f, NULL, out, why_none, why_size);
}
