/*
 * export_selection.c — which ranks an export writes and how big it will be, before writing
 * it: `--rank R` or the set of `--ranks` (ssa_options.export_ranks), and the expected size
 * from the selected ranks' events at the bytes per event the two formats take (measured on
 * generated and trainer runs: the JSON about 300 bytes per event, the Perfetto protobuf about
 * 60), so that a command can refuse an output too large to open before it writes gigabytes.
 */
#include "ssa_export.h"

int ssa_export_selects(const ssa_analysis *a, size_t rank_idx) {
  if (a->opt.rank >= 0 && a->ranks[rank_idx].rank->rank != a->opt.rank) return 0;
  return !a->opt.export_ranks || a->opt.export_ranks[rank_idx];
}

uint64_t ssa_export_events(const ssa_analysis *a) {
  uint64_t n = 0;
  for (size_t i = 0; i < a->nranks; i++) {
    if (!ssa_export_selects(a, i)) continue;
    const ssa_rank *r = a->ranks[i].rank;
    n += r->nops + r->napis + r->ncolls + r->nranges + (a->opt.export_replay ? r->nops : 0);
  }
  return n;
}

uint64_t ssa_export_estimate_bytes(const ssa_analysis *a, int perfetto) {
  return ssa_export_events(a) *
         (perfetto ? SSA_EXPORT_PFTRACE_BYTES_PER_EVENT : SSA_EXPORT_JSON_BYTES_PER_EVENT);
}
