/*
 * moe_load.c — expert load imbalance of mixture-of-experts layers, per step, from the
 * trainer's `moe.load` marks (docs/trace-format.md "Mixture of experts").
 *
 * Each rank writes, per step and MoE layer, the assignments its own tokens routed to every
 * global expert. Experts are sharded over an EP group (edp_rank names the group; expert e
 * lives on EP rank e / (E / ep)), so an expert's load in a step and layer is the sum over
 * its EP group's ranks (TP ranks repeat the same routing: only tp_rank 0 is counted).
 * For every (step, layer, EP group):
 *   expert imbalance  = max over experts of their load / mean load
 *   EP-rank imbalance = max over EP ranks of the load of their experts / mean
 * (1.0 is perfect balance; with top-k routing the mean is tokens x K / E). A step reports
 * the worst (layer, group) of each and where the expert imbalance peaked; the run reports
 * the mean over the selected steps of those worsts and the load of every expert summed over
 * the selected steps, layers and groups; each step also keeps the load of every expert summed
 * over its layers and groups (the viewer's steps x experts map).
 * Beside the load, each step reports the waits of its all-to-alls (collectives of group `ep`
 * whose first member started in the step's window: from its start to the next step's) and the
 * rank whose late arrivals caused most of them (collectives.c's straggler rule), next to the
 * global rank of the busiest EP rank: when they agree, the imbalance made the others wait.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

#define MOE_MAX_EXPERTS 1024

typedef struct load_group {
  int64_t step;
  int layer, edp;
  int E, ep;
  int64_t *tokens; /* [E] */
  int *rank_of;    /* [ep] global rank of each EP rank (-1 unknown) */
} load_group;

static int step_selected(const ssa_analysis *a, int64_t step) {
  if (a->nsteps == 0) return !a->opt.has_step_filter;
  for (size_t i = 0; i < a->nsteps; i++)
    if (a->steps[i].step == step) return 1;
  return 0;
}

/* The integers of the JSON array value of "tokens_per_expert" in args (at most max). */
static int parse_tokens(const char *args, int64_t *out, int max) {
  const char *p = strstr(args, "\"tokens_per_expert\":[");
  if (!p) return -1;
  p += strlen("\"tokens_per_expert\":[");
  int n = 0;
  while (*p && *p != ']') {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || n >= max || v < 0) return -1;
    out[n++] = v;
    p = end;
    while (*p == ' ' || *p == ',')
      p++;
  }
  return *p == ']' ? n : -1;
}

static int cmp_group(const void *pa, const void *pb) {
  const load_group *a = pa, *b = pb;
  if (a->step != b->step) return a->step < b->step ? -1 : 1;
  if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
  return a->edp < b->edp ? -1 : a->edp > b->edp;
}

/* The waits of each MoE step's `ep` all-to-alls and who caused them. */
static int a2a_waits(ssa_analysis *a) {
  if (!a->nmoe_steps || !a->nsteps) return 0;
  size_t nr = a->nranks;
  int64_t *caused = calloc(nr ? nr : 1, sizeof *caused);
  int *rank_no = malloc((nr ? nr : 1) * sizeof *rank_no);
  if (!caused || !rank_no) {
    free(caused);
    free(rank_no);
    return STEPSCOPE_E_NOMEM;
  }
  for (size_t i = 0; i < nr; i++)
    rank_no[i] = a->ranks[i].rank->rank;
  for (size_t k = 0; k < a->nmoe_steps; k++) {
    ssa_moe_step *s = &a->moe_steps[k];
    size_t w = 0;
    while (w < a->nsteps && a->steps[w].step != s->step)
      w++;
    if (w == a->nsteps) continue;
    int64_t lo = a->steps[w].start_rel;
    int64_t hi = w + 1 < a->nsteps ? a->steps[w + 1].start_rel : a->steps[w].end_rel;
    memset(caused, 0, nr * sizeof *caused);
    for (size_t c = 0; c < a->ncolls; c++) {
      const ssa_coll_instance *in = &a->colls[c];
      if (!in->complete || in->first_start_rel < lo || in->first_start_rel >= hi ||
          strcmp(ssa_name(a, in->group), "ep") != 0)
        continue;
      s->a2a_wait += in->total_wait;
      for (size_t i = 0; i < nr; i++)
        if (rank_no[i] == in->last_rank) caused[i] += in->caused_wait;
    }
    for (size_t i = 0; i < nr; i++)
      if (caused[i] > 0 && (s->a2a_caused_rank < 0 || caused[i] > s->a2a_caused)) {
        s->a2a_caused = caused[i];
        s->a2a_caused_rank = rank_no[i];
      }
  }
  free(caused);
  free(rank_no);
  return 0;
}

int ssa_moe_load(ssa_analysis *a) {
  load_group *g = NULL;
  size_t ng = 0, cap = 0;
  int64_t *tmp = malloc(MOE_MAX_EXPERTS * sizeof *tmp);
  int rc = 0, bad = 0;
  if (!tmp) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < a->nranks && rc == 0; i++) {
    const ssa_rank *r = a->ranks[i].rank;
    for (size_t k = 0; k < r->nmoe_marks; k++) {
      const char *args = ssa_rank_str(r, r->moe_marks[k].args);
      double step, layer, E, ep, edp = 0, tp = 0, ep_rank = -1;
      if (!ssa_json_number(args, "step", &step) || !ssa_json_number(args, "layer", &layer) ||
          !ssa_json_number(args, "experts", &E) || !ssa_json_number(args, "ep", &ep) || E < 1 ||
          E > MOE_MAX_EXPERTS || ep < 1 || fmod(E, ep) != 0) {
        bad++;
        continue;
      }
      ssa_json_number(args, "edp_rank", &edp);
      ssa_json_number(args, "tp_rank", &tp);
      ssa_json_number(args, "ep_rank", &ep_rank);
      if (tp != 0 || !step_selected(a, (int64_t)step)) continue;
      int n = parse_tokens(args, tmp, MOE_MAX_EXPERTS);
      if (n != (int)E) {
        bad++;
        continue;
      }
      load_group key = {(int64_t)step, (int)layer, (int)edp, (int)E, (int)ep, NULL, NULL};
      load_group *x = NULL;
      for (size_t j = ng; j-- > 0;) /* marks of one rank arrive in step order: search back */
        if (cmp_group(&g[j], &key) == 0) {
          x = &g[j];
          break;
        }
      if (x && (x->E != key.E || x->ep != key.ep)) {
        bad++;
        continue;
      }
      if (!x) {
        if (ssa_grow((void **)&g, &cap, ng + 1, sizeof *g)) {
          rc = STEPSCOPE_E_NOMEM;
          break;
        }
        x = &g[ng++];
        *x = key;
        x->tokens = calloc((size_t)key.E, sizeof *x->tokens);
        x->rank_of = malloc((size_t)key.ep * sizeof *x->rank_of);
        if (!x->tokens || !x->rank_of) {
          rc = STEPSCOPE_E_NOMEM;
          break;
        }
        for (int q = 0; q < key.ep; q++)
          x->rank_of[q] = -1;
      }
      if (ep_rank >= 0 && ep_rank < x->ep) x->rank_of[(int)ep_rank] = r->rank;
      for (int e = 0; e < n; e++)
        x->tokens[e] += tmp[e];
    }
  }
  free(tmp);
  if (bad) ssa_analysis_warn(a, "%d moe.load mark(s) could not be read and were left out", bad);
  if (rc == 0 && ng > 0) {
    qsort(g, ng, sizeof *g, cmp_group);
    a->moe_experts = g[0].E;
    a->moe_ep = g[0].ep;
    a->moe_expert_tokens = calloc((size_t)a->moe_experts, sizeof *a->moe_expert_tokens);
    /* at most one step per group */
    a->moe_step_expert_tokens =
        calloc(ng * (size_t)a->moe_experts, sizeof *a->moe_step_expert_tokens);
    if (!a->moe_expert_tokens || !a->moe_step_expert_tokens) rc = STEPSCOPE_E_NOMEM;
    size_t scap = 0;
    double sum_e = 0, sum_r = 0;
    for (size_t b = 0; rc == 0 && b < ng;) {
      size_t e = b;
      while (e < ng && g[e].step == g[b].step)
        e++;
      if (ssa_grow((void **)&a->moe_steps, &scap, a->nmoe_steps + 1, sizeof *a->moe_steps)) {
        rc = STEPSCOPE_E_NOMEM;
        break;
      }
      int64_t *step_tokens = a->moe_step_expert_tokens + a->nmoe_steps * (size_t)a->moe_experts;
      ssa_moe_step *s = &a->moe_steps[a->nmoe_steps++];
      memset(s, 0, sizeof *s);
      s->step = g[b].step;
      s->layer = s->busiest_expert = s->busiest_ep_rank = s->edp_rank = -1;
      s->busiest_rank = s->a2a_caused_rank = -1;
      for (size_t x = b; x < e; x++) {
        const load_group *lg = &g[x];
        int64_t total = 0, emax = -1, rmax = -1;
        int ebest = 0, rbest = 0, El = lg->E / lg->ep;
        for (int k = 0; k < lg->E; k++) {
          total += lg->tokens[k];
          if (lg->tokens[k] > emax) {
            emax = lg->tokens[k];
            ebest = k;
          }
          if (lg->E == a->moe_experts) {
            a->moe_expert_tokens[k] += lg->tokens[k];
            step_tokens[k] += lg->tokens[k];
          }
        }
        for (int q = 0; q < lg->ep; q++) {
          int64_t rl = 0;
          for (int k = q * El; k < (q + 1) * El; k++)
            rl += lg->tokens[k];
          if (rl > rmax) {
            rmax = rl;
            rbest = q;
          }
        }
        s->tokens += total;
        if (total <= 0) continue;
        double ei = (double)emax / ((double)total / lg->E);
        double ri = (double)rmax / ((double)total / lg->ep);
        if (ei > s->expert_imbalance) {
          s->expert_imbalance = ei;
          s->layer = lg->layer;
          s->edp_rank = lg->edp;
          s->busiest_expert = ebest;
          s->busiest_expert_tokens = emax;
          s->mean_expert_tokens = (double)total / lg->E;
        }
        if (ri > s->rank_imbalance) {
          s->rank_imbalance = ri;
          s->busiest_ep_rank = rbest;
          s->busiest_rank = lg->rank_of[rbest];
        }
      }
      sum_e += s->expert_imbalance;
      sum_r += s->rank_imbalance;
      b = e;
    }
    if (a->nmoe_steps) {
      a->moe_expert_imbalance_mean = sum_e / (double)a->nmoe_steps;
      a->moe_rank_imbalance_mean = sum_r / (double)a->nmoe_steps;
    }
  }
  for (size_t i = 0; i < ng; i++) {
    free(g[i].tokens);
    free(g[i].rank_of);
  }
  free(g);
  if (rc == 0) rc = a2a_waits(a);
  return rc;
}
