/*
 * comm_families.c — the built-in table of communication families
 * (comm_families.h; documented row by row in docs/kineto-import.md
 * "Communication families").
 *
 * Why POSIX regular expressions (regcomp/regexec from libc) and not globs:
 * users give their own rules as regular expressions (`--comm-kernel REGEX`,
 * as the issue asks), and the built-in rows are written in the same language,
 * so that any row can be copied into a user rule and tried. Extended syntax
 * (ERE) gives alternation and anchors, which the rows need (`^nccl(Dev|
 * SymkDev)?Kernel_`); libc has it, so no dependency. The patterns are
 * compiled once per process; a rank tests each distinct name once
 * (rank_finish.c caches the answer per string id), and only the function part
 * of the name (up to its template or argument list, usually well under 100
 * bytes of a demangled name that can be kilobytes long) is searched. The
 * answers are also kept per function part for the whole process (family_cache
 * below): every rank of a run names the same kernels, and testing a handful of
 * names against the rows cost more than reading a small rank file.
 */
#include "comm_families.h"

#include <pthread.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "sc_hash.h"

#include "stepscope.h"

#define FROM_NAME (-1)
#define K         SSA_COMM_SCOPE_KERNEL
#define H         SSA_COMM_SCOPE_HOST

/* A name "starts" at the beginning or after a character that cannot be part
 * of an identifier (demangled names begin with "void "). */
#define START "(^|[^A-Za-z0-9_])"

const ssa_comm_family ssa_comm_families[] = {
    {"nccl", "NCCL and RCCL kernels (ncclKernel_*, ncclDevKernel_*, ncclSymkDevKernel_*)",
     START "nccl(Dev|SymkDev)?Kernel_", 0, K, FROM_NAME},
    {"deepep",
     "DeepEP expert-parallel kernels (deep_ep:: or dpsk::ep:: namespaces intranode, internode, "
     "internode_ll: notify_dispatch, dispatch, cached_notify, combine, ...; the layout kernel "
     "get_dispatch_layout computes locally and stays compute)",
     START "(deep_ep|dpsk::ep)::(intranode|internode|internode_ll)::", 0, K, FROM_NAME},
    {"symm_mem",
     "PyTorch symmetric-memory collectives (multimem_*, one_shot_all_reduce*, "
     "two_shot_all_reduce*)",
     START "(multimem_[A-Za-z0-9_]+|one_shot_all_reduce|two_shot_all_reduce)", 0, K, FROM_NAME},
    {"custom_allreduce", "vLLM/SGLang custom all-reduce (cross_device_reduce_1stage/2stage)",
     START "cross_device_reduce_[12]stage", 0, K, SSA_COMM_KIND_ALL_REDUCE},
    {"nvshmem", "NVSHMEM kernels (nvshmem*, nvshmemi_*, nvshmemx_*)", START "nvshmem", 0, K,
     FROM_NAME},
    {"msccl", "MSCCL and MSCCL++ kernels (msccl*, mscclpp::*)", START "msccl", 0, K, FROM_NAME},
    {"hccl", "Huawei HCCL (hccl*, hcom_*; any case), kernels or host ranges", "^(hccl|hcom)", 1,
     K | H, FROM_NAME},
    {"oneccl", "Intel oneCCL (ccl_*, *oneccl*; any case), kernels or host ranges", "(^ccl_|oneccl)",
     1, K | H, FROM_NAME},
    {"gloo", "gloo collectives on the host (gloo:all_reduce, ...)", "^gloo:", 0, H, FROM_NAME},
    {"c10d", "PyTorch c10d collective ops on the host (c10d::allreduce_, ...)", "^c10d::", 0, H,
     FROM_NAME},
    {"nccl_host", "PyTorch's host ranges around NCCL calls (nccl:all_reduce, ...)", "^nccl:", 0, H,
     FROM_NAME},
    {"record_param_comms", "PyTorch's record_param_comms host range around a collective call",
     "^record_param_comms$", 0, H, FROM_NAME},
};
const int ssa_comm_nfamilies = (int)(sizeof ssa_comm_families / sizeof ssa_comm_families[0]);

_Static_assert(sizeof ssa_comm_families / sizeof ssa_comm_families[0] <= SSA_COMM_FAMILY_MAX,
               "raise SSA_COMM_FAMILY_MAX");

static regex_t compiled[sizeof ssa_comm_families / sizeof ssa_comm_families[0]];
static int compile_failed;
static pthread_once_t compile_once = PTHREAD_ONCE_INIT;

static void compile_all(void) {
  for (int i = 0; i < ssa_comm_nfamilies; i++) {
    int flags = REG_EXTENDED | REG_NOSUB | (ssa_comm_families[i].icase ? REG_ICASE : 0);
    if (regcomp(&compiled[i], ssa_comm_families[i].pattern, flags) != 0) compile_failed = 1;
  }
}

void ssa_comm_function_part(const char *name, char *out, size_t n) {
  static const char anon[] = "(anonymous namespace)";
  size_t k = 0;
  if (n == 0) return;
  for (const char *p = name; *p && k + 1 < n;) {
    if (*p == '(' && !strncmp(p, anon, sizeof anon - 1)) {
      for (size_t j = 0; j < sizeof anon - 1 && k + 1 < n; j++)
        out[k++] = p[j];
      p += sizeof anon - 1;
      continue;
    }
    if ((*p == '<' || *p == '(') && k > 0) break; /* a leading '(' is kept: not a list */
    out[k++] = *p++;
  }
  out[k] = 0;
}

/* The family of each (function part, scope) already tested in this process: an open-addressing
 * table filled up to half its slots (then the rows are simply searched again), under a lock
 * (ranks are loaded in parallel). 1,024 ranks x 1,000 events: the regular expressions were
 * 16 % of the instructions of loading and analysing the run, for the same six names on every
 * rank. The function parts are copies the process keeps (reachable until it exits). */
#define FAMILY_CACHE_SLOTS 1024
typedef struct family_answer {
  char *fn; /* NULL: an empty slot */
  int scope, family;
} family_answer;
static family_answer family_cache[FAMILY_CACHE_SLOTS];
static size_t family_cache_used;
static pthread_mutex_t family_cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The slot of (fn, scope): its answer, or the empty slot where it belongs. Under the lock. */
static family_answer *family_slot(const char *fn, int scope) {
  uint64_t h = sc_fnv1a(sc_fnv1a_str(SC_FNV1A_INIT, fn), &scope, sizeof scope);
  size_t k = (size_t)h & (FAMILY_CACHE_SLOTS - 1);
  while (family_cache[k].fn && (family_cache[k].scope != scope || strcmp(family_cache[k].fn, fn)))
    k = (k + 1) & (FAMILY_CACHE_SLOTS - 1);
  return &family_cache[k];
}

static int search_families(const char *fn, int scope) {
  for (int i = 0; i < ssa_comm_nfamilies; i++) {
    if (!(ssa_comm_families[i].scope & scope)) continue;
    if (regexec(&compiled[i], fn, 0, NULL, 0) == 0) return i;
  }
  return -1;
}

int ssa_comm_family_of(const char *name, int scope) {
  pthread_once(&compile_once, compile_all);
  if (compile_failed) return -2;
  char fn[512];
  ssa_comm_function_part(name, fn, sizeof fn);
  pthread_mutex_lock(&family_cache_lock);
  family_answer *a = family_slot(fn, scope);
  int family = a->fn ? a->family : -2;
  pthread_mutex_unlock(&family_cache_lock);
  if (family != -2) return family;
  family = search_families(fn, scope);
  pthread_mutex_lock(&family_cache_lock);
  a = family_slot(fn, scope); /* another thread may have filled it meanwhile */
  if (!a->fn && 2 * (family_cache_used + 1) <= FAMILY_CACHE_SLOTS && (a->fn = strdup(fn))) {
    a->scope = scope, a->family = family;
    family_cache_used++;
  }
  pthread_mutex_unlock(&family_cache_lock);
  return family;
}

ssa_comm_kind ssa_comm_kind_of_name(const char *name) {
  char fn[512], s[512];
  ssa_comm_function_part(name, fn, sizeof fn);
  size_t n = 0;
  for (const char *p = fn; *p && n + 1 < sizeof s; p++) {
    char c = *p;
    if (c == '_' || c == ':' || c == ' ' || c == '-') continue;
    s[n++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
  }
  s[n] = 0;
  static const struct {
    const char *word;
    ssa_comm_kind kind;
  } words[] = {
      {"reducescatter", SSA_COMM_KIND_REDUCE_SCATTER},
      {"allreduce", SSA_COMM_KIND_ALL_REDUCE},
      {"allgather", SSA_COMM_KIND_ALL_GATHER},
      {"alltoall", SSA_COMM_KIND_ALL_TO_ALL},
      {"dispatch", SSA_COMM_KIND_DISPATCH},
      {"combine", SSA_COMM_KIND_COMBINE},
      {"broadcast", SSA_COMM_KIND_BROADCAST},
      {"bcast", SSA_COMM_KIND_BROADCAST},
      {"barrier", SSA_COMM_KIND_BARRIER},
      {"sendrecv", SSA_COMM_KIND_SEND_RECV},
      {"send", SSA_COMM_KIND_SEND},
      {"recv", SSA_COMM_KIND_RECV},
      {"reduce", SSA_COMM_KIND_REDUCE},
  };
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (strstr(s, words[i].word)) return words[i].kind;
  return SSA_COMM_KIND_UNKNOWN;
}

ssa_comm_kind ssa_comm_kind_of_collective(uint32_t op) {
  switch (op) {
  case STEPSCOPE_COLL_ALLREDUCE: return SSA_COMM_KIND_ALL_REDUCE;
  case STEPSCOPE_COLL_REDUCESCATTER: return SSA_COMM_KIND_REDUCE_SCATTER;
  case STEPSCOPE_COLL_ALLGATHER: return SSA_COMM_KIND_ALL_GATHER;
  case STEPSCOPE_COLL_BROADCAST: return SSA_COMM_KIND_BROADCAST;
  case STEPSCOPE_COLL_REDUCE: return SSA_COMM_KIND_REDUCE;
  case STEPSCOPE_COLL_ALLTOALL: return SSA_COMM_KIND_ALL_TO_ALL;
  case STEPSCOPE_COLL_SEND: return SSA_COMM_KIND_SEND;
  case STEPSCOPE_COLL_RECV: return SSA_COMM_KIND_RECV;
  case STEPSCOPE_COLL_BARRIER: return SSA_COMM_KIND_BARRIER;
  default: return SSA_COMM_KIND_UNKNOWN;
  }
}

const char *ssa_comm_kind_name(int kind) {
  static const char *const names[SSA_COMM_KIND_N] = {"unknown",
                                                     "all_reduce",
                                                     "all_gather",
                                                     "reduce_scatter",
                                                     "all_to_all",
                                                     "all_to_all_dispatch",
                                                     "all_to_all_combine",
                                                     "send_recv",
                                                     "send",
                                                     "recv",
                                                     "broadcast",
                                                     "reduce",
                                                     "barrier"};
  return kind >= 0 && kind < SSA_COMM_KIND_N ? names[kind] : "unknown";
}
