/*
 * expert_tags.c — see ssa_expert_tags.h: which ops and host ranges the
 * exports tag as phases of expert parallelism.
 */
#include <string.h>

#include "comm_families.h"
#include "ssa_expert_tags.h"

const char *ssa_expert_tag_name(ssa_expert_tag t) {
  switch (t) {
  case SSA_EXPERT_ALL_TO_ALL: return "all_to_all";
  case SSA_EXPERT_MOE_DISPATCH: return "moe_dispatch";
  case SSA_EXPERT_MOE_COMBINE: return "moe_combine";
  default: return NULL;
  }
}

ssa_expert_tag ssa_op_expert_tag(const ssa_rank *r, const ssa_op *p) {
  if (p->coll != SSA_NONE)
    return p->coll < r->ncolls && r->colls[p->coll].op == STEPSCOPE_COLL_ALLTOALL
               ? SSA_EXPERT_ALL_TO_ALL
               : SSA_EXPERT_NONE;
  if (p->cls != SSA_CLS_COMM || !p->name) return SSA_EXPERT_NONE;
  ssa_comm_kind k = ssa_comm_kind_of_name(ssa_rank_str(r, p->name));
  return k == SSA_COMM_KIND_ALL_TO_ALL || k == SSA_COMM_KIND_DISPATCH || k == SSA_COMM_KIND_COMBINE
             ? SSA_EXPERT_ALL_TO_ALL
             : SSA_EXPERT_NONE;
}

ssa_expert_tag ssa_range_expert_tag(const char *name) {
  if (!strncmp(name, "moe.dispatch", 12) && (name[12] == 0 || name[12] == '.'))
    return SSA_EXPERT_MOE_DISPATCH;
  if (!strncmp(name, "moe.combine", 11) && (name[11] == 0 || name[11] == '.'))
    return SSA_EXPERT_MOE_COMBINE;
  return SSA_EXPERT_NONE;
}
