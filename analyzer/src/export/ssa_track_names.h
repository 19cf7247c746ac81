/*
 * ssa_track_names.h — the names both exports (Chrome JSON and Perfetto) give a
 * rank's process and its lanes' tracks (track_names.c), so that the two
 * traces read the same in a viewer.
 */
#ifndef SSA_TRACK_NAMES_H
#define SSA_TRACK_NAMES_H

#include <stddef.h>

#include "ssa_model.h"

/* "rank R (host, GPU d)" for a rank with a GPU lane (d: the first GPU lane's
 * device), else "rank R (host, cpu)". */
void ssa_rank_track_label(const ssa_rank *r, char *buf, size_t n);

/* "thread N", "cpu stream N" or "stream N" by the lane's kind, with the
 * lane's own name in parentheses when it has one. */
void ssa_lane_label(const ssa_rank *r, const ssa_lane *l, char *buf, size_t n);

#endif
