/*
 * compare_params.c — compares the parameters of two checkpoints of the same model
 * written by different layouts that cut the model the same way (same dp, tp, pp),
 * e.g. a context-parallel run against the same grid without CP.
 *
 * usage: compare_params BASE_STEP_DIR CANDIDATE_STEP_DIR MAX_ABS_DIFF
 * For every shard of the candidate (rank-NNNNN.ckpt), the base shard holding the
 * same (dp_rank, pp_rank, tp_rank) is found by reading the headers; their flat
 * parameter buffers must agree element by element within MAX_ABS_DIFF (the longer
 * one's extra padding must be zero). CP replicas all compare against the same
 * base shard, so they must also agree with each other. Prints the worst
 * difference per shard; exits 0 when all agree, 1 otherwise, 2 on bad input.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

typedef struct shard {
  float *p;
  size_t n;
  model_grid g;
} shard;

/* Reads every rank-NNNNN.ckpt of dir (ranks 0.. until one is missing). */
static int read_all_shards(const char *dir, shard **out, int *count) {
  *out = NULL;
  *count = 0;
  for (int r = 0;; r++) {
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/rank-%05d.ckpt", dir, r);
    FILE *f = fopen(path, "rb");
    if (!f) break;
    fclose(f);
    shard *grown = realloc(*out, sizeof(shard) * (size_t)(r + 1));
    if (!grown) return -1;
    *out = grown;
    if (ckpt_read_shard_params(path, &grown[r].p, &grown[r].n, &grown[r].g, err, sizeof err) != 0) {
      fprintf(stderr, "compare_params: %s\n", err);
      return -1;
    }
    *count = r + 1;
  }
  if (*count == 0) fprintf(stderr, "compare_params: no shards in %s\n", dir);
  return *count ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: compare_params BASE_STEP_DIR CANDIDATE_STEP_DIR MAX_ABS_DIFF\n");
    return 2;
  }
  double tol = atof(argv[3]);
  shard *base, *cand;
  int nb, nc;
  if (read_all_shards(argv[1], &base, &nb) != 0 || read_all_shards(argv[2], &cand, &nc) != 0)
    return 2;
  int bad = 0;
  for (int r = 0; r < nc; r++) {
    const model_grid *g = &cand[r].g;
    const shard *b = NULL;
    for (int k = 0; k < nb && !b; k++) {
      const model_grid *h = &base[k].g;
      if (h->dp == g->dp && h->tp == g->tp && h->pp == g->pp && h->dp_rank == g->dp_rank &&
          h->tp_rank == g->tp_rank && h->pp_rank == g->pp_rank)
        b = &base[k];
    }
    if (!b) {
      printf("rank %d (dp %d/%d, pp %d/%d, tp %d/%d): no base shard with that place\n", r,
             g->dp_rank, g->dp, g->pp_rank, g->pp, g->tp_rank, g->tp);
      bad = 1;
      continue;
    }
    size_t n = b->n < cand[r].n ? b->n : cand[r].n, worst_at = 0;
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
      double d = fabs((double)b->p[i] - cand[r].p[i]);
      if (!(d <= worst)) { /* also catches NaN */
        worst = d;
        worst_at = i;
      }
      if (fabs(b->p[i]) > scale) scale = fabs(b->p[i]);
    }
    const shard *longer = b->n > cand[r].n ? b : &cand[r];
    for (size_t i = n; i < longer->n; i++)
      if (longer->p[i] != 0.0f) worst = INFINITY;
    int ok = worst <= tol;
    printf("rank %d (cp %d-way replica of dp %d, pp %d, tp %d): %zu parameters, max |diff| "
           "%.3g at %zu (largest |w| %.3g) %s\n",
           r, g->cp, g->dp_rank, g->pp_rank, g->tp_rank, n, worst, worst_at, scale,
           ok ? "ok" : "DIFFERENT");
    bad |= !ok;
  }
  for (int k = 0; k < nb; k++)
    free(base[k].p);
  for (int k = 0; k < nc; k++)
    free(cand[k].p);
  free(base);
  free(cand);
  return bad;
}
