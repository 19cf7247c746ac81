/*
 * diff_layout.c — whether two analysed runs can be compared rank by rank: the same world,
 * the same analysed ranks and, where both declare it, the same parallel layout (decoded
 * trainer metadata, member by member). When they cannot, the diff compares aggregates only
 * and says why in one short note naming what differs; a --repeat run must have its side's
 * layout. Also the small rank lookups the diff's other files share.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ssa_diff.h"

const ssa_rank_result *ssa_diff_find_rank(const ssa_analysis *a, int rank) {
  /* the run's ranks are sorted by rank number (ssa_run_assemble): the first with it */
  size_t lo = 0, hi = a->nranks;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a->ranks[mid].rank->rank < rank)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < a->nranks && a->ranks[lo].rank->rank == rank ? &a->ranks[lo] : NULL;
}

int ssa_diff_selected(const ssa_analysis *a, const ssa_rank_result *rr) {
  return a->opt.rank < 0 || rr->rank->rank == a->opt.rank;
}

int ssa_diff_world(const ssa_analysis *a) {
  int w = 0;
  for (size_t i = 0; i < a->nranks; i++)
    if (a->ranks[i].rank->world_size > w) w = a->ranks[i].rank->world_size;
  return w ? w : (int)a->nranks;
}

/* The layout members a difference is described by (the grid's sizes), in this order. */
#define LAYOUT_SIZE(field)                                                                         \
  { #field, offsetof(ssa_meta_layout, field) }
static const struct {
  const char *name;
  size_t offset;
} layout_sizes[] = {LAYOUT_SIZE(world),
                    LAYOUT_SIZE(dp),
                    LAYOUT_SIZE(tp),
                    LAYOUT_SIZE(pp),
                    LAYOUT_SIZE(cp),
                    LAYOUT_SIZE(ep),
                    LAYOUT_SIZE(virtual_stages),
                    LAYOUT_SIZE(microbatches),
                    LAYOUT_SIZE(zero)};
#undef LAYOUT_SIZE

static double layout_member(const ssa_meta_layout *l, size_t offset) {
  return *(const double *)((const char *)l + offset);
}

/* Two numbers of decoded metadata are the same (both absent counts as the same). */
static int same_number(double x, double y) {
  return (isnan(x) && isnan(y)) || x == y;
}

/* Whether two decoded layouts differ in any member. */
static int layouts_differ(const ssa_meta_layout *la, const ssa_meta_layout *lb) {
#define DIFFERS(field, path, lo, hi) || !same_number(la->field, lb->field)
  return 0 TM_LAYOUT_NUMBERS(DIFFERS);
#undef DIFFERS
}

/* "parallel layout differs (rank R: dp 2 vs 4, pp 2 vs 1): ..." from the
 * members of the layout metadata that differ; never a JSON text cut in the
 * middle (the whole layouts do not fit in the note). */
static void describe_layout_change(char *note, size_t cap, int rank, const ssa_meta_layout *la,
                                   const ssa_meta_layout *lb) {
  char list[160] = "";
  size_t len = 0;
  for (size_t k = 0; k < sizeof layout_sizes / sizeof layout_sizes[0]; k++) {
    double va = layout_member(la, layout_sizes[k].offset);
    double vb = layout_member(lb, layout_sizes[k].offset);
    int ha = !isnan(va), hb = !isnan(vb);
    if (ha == hb && (!ha || va == vb)) continue;
    char item[64], xa[24], xb[24];
    snprintf(xa, sizeof xa, ha ? "%g" : "-", va);
    snprintf(xb, sizeof xb, hb ? "%g" : "-", vb);
    int n =
        snprintf(item, sizeof item, "%s%s %s vs %s", len ? ", " : "", layout_sizes[k].name, xa, xb);
    if (n < 0 || len + (size_t)n + 5 >= sizeof list) {
      if (len + 5 < sizeof list) len += (size_t)snprintf(list + len, sizeof list - len, ", ...");
      break;
    }
    memcpy(list + len, item, (size_t)n + 1);
    len += (size_t)n;
  }
  snprintf(note, cap, "parallel layout differs (rank %d: %s)", rank,
           len ? list : "the layout metadata differs");
}

int ssa_diff_repeat_fits(const ssa_analysis *first, const ssa_analysis *rep, int side,
                         const char *first_path, const char *rep_path, char *msg, size_t cap) {
  char note[256];
  if (ssa_diff_same_layout(first, rep, note, sizeof note)) return 1;
  snprintf(msg, cap, "stepscope diff: --repeat-%c %s is not a run of %s's configuration: %s",
           side ? 'b' : 'a', rep_path, first_path, note);
  return 0;
}

int ssa_diff_same_layout(const ssa_analysis *a, const ssa_analysis *b, char *note, size_t cap) {
  int wa = ssa_diff_world(a), wb = ssa_diff_world(b);
  if (wa != wb) {
    snprintf(note, cap, "world size differs (%d vs %d)", wa, wb);
    return 0;
  }
  size_t na = 0, nb = 0;
  for (size_t i = 0; i < a->nranks; i++)
    na += ssa_diff_selected(a, &a->ranks[i]);
  for (size_t i = 0; i < b->nranks; i++)
    nb += ssa_diff_selected(b, &b->ranks[i]);
  if (na != nb) {
    snprintf(note, cap, "different ranks were analysed (%zu vs %zu)", na, nb);
    return 0;
  }
  for (size_t i = 0; i < a->nranks; i++) {
    if (!ssa_diff_selected(a, &a->ranks[i])) continue;
    const ssa_rank_result *o = ssa_diff_find_rank(b, a->ranks[i].rank->rank);
    if (!o || !ssa_diff_selected(b, o)) {
      snprintf(note, cap, "rank %d is only in run A", a->ranks[i].rank->rank);
      return 0;
    }
    const ssa_meta_layout *la = &a->ranks[i].rank->tmeta.layout;
    const ssa_meta_layout *lb = &o->rank->tmeta.layout;
    if (la->present && lb->present && layouts_differ(la, lb)) {
      describe_layout_change(note, cap, a->ranks[i].rank->rank, la, lb);
      return 0;
    }
  }
  return 1;
}
