/*
 * rank_summary.c — a rank reduced to what the cross-rank pass reads (docs/scale.md "The
 * design"): its number, clock offset, pipeline stage and layout, and per collective record the
 * instance it belongs to (comm_id, seq), what it moved, its communicator's name and the
 * start and end of the op that executed it (the record's own times when it has none). The
 * collective matching and the pipeline waits read these instead of the rank's ops and
 * records, so that a rank's events can be freed once it is summarised and its own metrics
 * are done. The per-rank pass adds its kernel names (breakdown.c) and pipeline items
 * (bubble_causes.c).
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

int ssa_rank_summarize(const ssa_rank *r, ssa_rank_summary *s) {
  memset(s, 0, sizeof *s);
  s->rank = r->rank;
  s->offset_ns = r->offset_ns;
  s->pipeline_stage = ssa_rank_pipeline_stage(r);
  const ssa_meta_layout *layout = &r->tmeta.layout;
  s->meta_layout = *layout;
  s->layout[0] = (int)ssa_meta_or(layout->dp_rank, 0);
  s->layout[1] = (int)ssa_meta_or(layout->cp_rank, 0);
  s->layout[2] = (int)ssa_meta_or(layout->tp_rank, 0);
  ssa_strtab_init(&s->names);
  if (r->ncolls == 0) return 0;
  s->colls = malloc(r->ncolls * sizeof *s->colls);
  if (!s->colls) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < r->ncolls; i++) {
    const ssa_coll *c = &r->colls[i];
    const ssa_op *o = c->op_index != SSA_NONE ? &r->ops[c->op_index] : NULL;
    const char *name = ssa_rank_str(r, c->name);
    size_t len = strlen(name);
    uint32_t id = ssa_strtab_intern(&s->names, name, len);
    if (len && id == 0) {
      ssa_rank_summary_free(s);
      return STEPSCOPE_E_NOMEM;
    }
    s->colls[i] = (ssa_coll_rec){.comm_id = c->comm_id,
                                 .seq = c->seq,
                                 .bytes = c->bytes,
                                 .start = o ? o->start : c->start,
                                 .end = o ? o->end : c->end,
                                 .op = c->op,
                                 .flags = c->flags | (o ? 0 : SSA_COLL_REC_F_NO_OP),
                                 .comm_rank = c->comm_rank,
                                 .comm_size = c->comm_size,
                                 .name = id};
  }
  s->ncolls = r->ncolls;
  return 0;
}

void ssa_rank_summary_free(ssa_rank_summary *s) {
  free(s->colls);
  free(s->items);
  ssa_strtab_free(&s->names);
  memset(s, 0, sizeof *s);
}

int ssa_summary_coll_members(const ssa_analysis *a, ssa_coll_member **out, size_t *n) {
  size_t count = 0;
  for (size_t i = 0; i < a->nranks; i++)
    count += a->ranks[i].summary.ncolls;
  *out = NULL;
  *n = 0;
  if (count == 0) return 0;
  ssa_coll_member *m = malloc(count * sizeof *m);
  if (!m) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_summary *s = &a->ranks[i].summary;
    for (size_t j = 0; j < s->ncolls; j++)
      m[(*n)++] = (ssa_coll_member){s->colls[j].comm_id, s->colls[j].seq, (uint32_t)i, (uint32_t)j};
  }
  ssa_sort_coll_members(m, count);
  *out = m;
  return 0;
}

int ssa_take_coll_members(ssa_analysis *a, ssa_coll_member **out, size_t *n) {
  if (!a->kept_members) return ssa_summary_coll_members(a, out, n);
  *out = a->kept_members;
  *n = a->nkept_members;
  a->kept_members = NULL;
  a->nkept_members = 0;
  return 0;
}
