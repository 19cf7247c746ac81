/*
 * test_comm_families.c — every kind of communication counts
 * (docs/kineto-import.md "Communication families"):
 *
 *   names        the built-in table on real kernel names (DeepEP as DeepSeek's
 *                trace spells it, NCCL, symmetric memory, NVSHMEM, MSCCL++,
 *                HCCL, oneCCL, host collectives) and on look-alikes that must
 *                stay compute (DeepEP's layout kernel, a c10d kernel that is
 *                not a collective); the op kind each name tells; the NCCL row
 *                agrees with ssa_is_nccl_kernel_name; user rules' precedence
 *   deepep_like  DeepEP dispatch/combine kernels under compute: comm counted,
 *                mostly hidden, the layout kernel compute, per-kind counts
 *   symm_mem     PyTorch symmetric-memory all-reduce and all-gather kernels
 *   gloo_cpu     a CPU-only trace: gloo:all_reduce, c10d::allreduce_ and a
 *                nested record_param_comms are communication by family
 *   rules        user rules: a custom kernel made communication, NCCL kernels
 *                (by name and with NCCL metadata) forced to compute,
 *                --compute-kernel winning over --comm-kernel, a rule that
 *                matches nothing counted as 0
 *
 * Traces: tests/kineto/traces/comm (written for this test; every number
 * below is worked out by hand from them, in µs, checked in ns).
 * Usage: test_comm_families TRACES_DIR. Exit 0 when every check passes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

#include "kineto_check.h"

static int family(const char *id) {
  for (int i = 0; i < ssa_comm_nfamilies; i++)
    if (!strcmp(ssa_comm_families[i].id, id)) return i;
  fprintf(stderr, "no family %s\n", id);
  failures++;
  return -3;
}

static void test_names(void) {
  static const struct {
    const char *name;
    int scope;
    const char *family; /* NULL: none */
    int kind;
  } cases[] = {
      /* DeepEP as DeepSeek's published training trace names it, and upstream */
      {"void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*, "
       "bool const*)",
       SSA_COMM_SCOPE_KERNEL, "deepep", SSA_COMM_KIND_COMBINE},
      {"void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, long*, int)",
       SSA_COMM_SCOPE_KERNEL, "deepep", SSA_COMM_KIND_DISPATCH},
      {"void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*, float*, "
       "dpsk::ep::internode::SourceMeta*)",
       SSA_COMM_SCOPE_KERNEL, "deepep", SSA_COMM_KIND_DISPATCH},
      {"void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*)",
       SSA_COMM_SCOPE_KERNEL, "deepep", SSA_COMM_KIND_UNKNOWN},
      {"void deep_ep::internode_ll::dispatch<false, 3, 7168>(void*, float*, int*)",
       SSA_COMM_SCOPE_KERNEL, "deepep", SSA_COMM_KIND_DISPATCH},
      {"void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int)",
       SSA_COMM_SCOPE_KERNEL, "deepep", SSA_COMM_KIND_COMBINE},
      /* DeepEP's layout kernel computes locally */
      {"void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*)",
       SSA_COMM_SCOPE_KERNEL, NULL, 0},
      {"void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)",
       SSA_COMM_SCOPE_KERNEL, NULL, 0},
      /* NCCL / RCCL */
      {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
       SSA_COMM_SCOPE_KERNEL, "nccl", SSA_COMM_KIND_ALL_REDUCE},
      {"ncclKernel_ReduceScatter_RING_LL_Sum_bfloat16(ncclWorkElem)", SSA_COMM_SCOPE_KERNEL, "nccl",
       SSA_COMM_KIND_REDUCE_SCATTER},
      {"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", SSA_COMM_SCOPE_KERNEL, "nccl",
       SSA_COMM_KIND_SEND_RECV},
      {"ncclSymkDevKernel_AllGather_LL(ncclSymkDevWorkArgs4K)", SSA_COMM_SCOPE_KERNEL, "nccl",
       SSA_COMM_KIND_ALL_GATHER},
      {"ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", SSA_COMM_SCOPE_KERNEL,
       "nccl", SSA_COMM_KIND_BROADCAST},
      {"ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
       SSA_COMM_SCOPE_KERNEL, "nccl", SSA_COMM_KIND_REDUCE},
      {"myncclKernel_copy", SSA_COMM_SCOPE_KERNEL, NULL, 0},
      /* PyTorch symmetric memory */
      {"void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16, "
       "8>(c10::BFloat16*, "
       "unsigned long)",
       SSA_COMM_SCOPE_KERNEL, "symm_mem", SSA_COMM_KIND_ALL_REDUCE},
      {"void (anonymous namespace)::one_shot_all_reduce_kernel<float, 16, 8>(float**, float*)",
       SSA_COMM_SCOPE_KERNEL, "symm_mem", SSA_COMM_KIND_ALL_REDUCE},
      {"void c10d::symmetric_memory::two_shot_all_reduce_kernel_inplace<float, 16, 8>(float**)",
       SSA_COMM_SCOPE_KERNEL, "symm_mem", SSA_COMM_KIND_ALL_REDUCE},
      {"void c10d::symmetric_memory::multimem_all_gather_kernel<16>(char*, char*)",
       SSA_COMM_SCOPE_KERNEL, "symm_mem", SSA_COMM_KIND_ALL_GATHER},
      {"void vllm::cross_device_reduce_1stage<c10::BFloat16, 8>(vllm::RankData*)",
       SSA_COMM_SCOPE_KERNEL, "custom_allreduce", SSA_COMM_KIND_ALL_REDUCE},
      /* NVSHMEM, MSCCL++, vendor libraries */
      {"void nvshmemi_alltoall_allpush_kernel<int>(int*, int const*)", SSA_COMM_SCOPE_KERNEL,
       "nvshmem", SSA_COMM_KIND_ALL_TO_ALL},
      {"nvshmemx_barrier_all_on_stream_kernel", SSA_COMM_SCOPE_KERNEL, "nvshmem",
       SSA_COMM_KIND_BARRIER},
      {"void mscclpp::allreduce7<float>(float*, mscclpp::DeviceHandle<mscclpp::SmChannel>*)",
       SSA_COMM_SCOPE_KERNEL, "msccl", SSA_COMM_KIND_ALL_REDUCE},
      {"hcom_allReduce__123_1", SSA_COMM_SCOPE_HOST, "hccl", SSA_COMM_KIND_ALL_REDUCE},
      {"hccl:all_gather", SSA_COMM_SCOPE_KERNEL, "hccl", SSA_COMM_KIND_ALL_GATHER},
      {"oneccl_bindings_for_pytorch::allreduce", SSA_COMM_SCOPE_HOST, "oneccl",
       SSA_COMM_KIND_ALL_REDUCE},
      {"ccl_kernel_reduce_scatter", SSA_COMM_SCOPE_KERNEL, "oneccl", SSA_COMM_KIND_REDUCE_SCATTER},
      /* host collectives: only on the host */
      {"gloo:all_reduce", SSA_COMM_SCOPE_HOST, "gloo", SSA_COMM_KIND_ALL_REDUCE},
      {"gloo:broadcast", SSA_COMM_SCOPE_HOST, "gloo", SSA_COMM_KIND_BROADCAST},
      {"gloo:all_reduce", SSA_COMM_SCOPE_KERNEL, NULL, 0},
      {"c10d::allreduce_", SSA_COMM_SCOPE_HOST, "c10d", SSA_COMM_KIND_ALL_REDUCE},
      {"c10d::_allgather_base_", SSA_COMM_SCOPE_HOST, "c10d", SSA_COMM_KIND_ALL_GATHER},
      {"void c10d::detail::some_local_kernel<float>(float*)", SSA_COMM_SCOPE_KERNEL, NULL, 0},
      {"nccl:all_reduce", SSA_COMM_SCOPE_HOST, "nccl_host", SSA_COMM_KIND_ALL_REDUCE},
      {"record_param_comms", SSA_COMM_SCOPE_HOST, "record_param_comms", SSA_COMM_KIND_UNKNOWN},
      {"aten::mm", SSA_COMM_SCOPE_HOST, NULL, 0},
      {"void cutlass::device_kernel<flash::FlashAttnBwd<flash::CollectiveMainloopBwd<2>>>(Params)",
       SSA_COMM_SCOPE_KERNEL, NULL, 0},
  };
  /* twice: the second pass gets the answers the process cached by function part and scope
   * (comm_families.c; "gloo:all_reduce" is asked in both scopes) */
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      int f = ssa_comm_family_of(cases[i].name, cases[i].scope);
      int want = cases[i].family ? family(cases[i].family) : -1;
      if (f != want) {
        fprintf(stderr, "family of '%s' = %s, expected %s\n", cases[i].name,
                f >= 0 ? ssa_comm_families[f].id : "none",
                cases[i].family ? cases[i].family : "none");
        failures++;
      }
      if (!cases[i].family) continue;
      int k = ssa_comm_families[f >= 0 ? f : 0].kind;
      if (k < 0) k = ssa_comm_kind_of_name(cases[i].name);
      if (k != cases[i].kind) {
        fprintf(stderr, "kind of '%s' = %s, expected %s\n", cases[i].name, ssa_comm_kind_name(k),
                ssa_comm_kind_name(cases[i].kind));
        failures++;
      }
      /* the NCCL row is the loader's NCCL name test */
      if (cases[i].scope == SSA_COMM_SCOPE_KERNEL && strncmp(cases[i].name, "void", 4))
        CHECK_EQ(f == family("nccl"), ssa_is_nccl_kernel_name(cases[i].name));
    }
  char fn[64];
  ssa_comm_function_part("void (anonymous namespace)::f<int>(int)", fn, sizeof fn);
  CHECK(!strcmp(fn, "void (anonymous namespace)::f"));
  ssa_comm_function_part("(anonymous namespace)::g(int)", fn, sizeof fn);
  CHECK(!strcmp(fn, "(anonymous namespace)::g"));
  ssa_comm_function_part("plain", fn, 3);
  CHECK(!strcmp(fn, "pl"));

  /* user rules: compute wins over comm, the first of a class is credited */
  ssa_comm_rules rules;
  memset(&rules, 0, sizeof rules);
  char why[256], *bad = NULL;
  CHECK_EQ(ssa_comm_rules_add(&rules, "nccl", 1, "command line", why, sizeof why), 0);
  CHECK_EQ(ssa_comm_rules_add(&rules, "Kernel_AllGather", 0, "command line", why, sizeof why), 0);
  CHECK_EQ(ssa_comm_rules_add_list(&rules, ";my_a2a;;^ncclDev;", 1, "STEPSCOPE_COMM_KERNELS", &bad,
                                   why, sizeof why),
           0);
  CHECK_EQ(rules.n, 4);
  CHECK_EQ(ssa_comm_rules_match(&rules, "ncclDevKernel_AllGather_RING_LL"), 1);
  CHECK_EQ(ssa_comm_rules_match(&rules, "ncclDevKernel_AllReduce_RING_LL"), 0);
  CHECK_EQ(ssa_comm_rules_match(&rules, "void my_a2a_kernel<1>()"), 2);
  CHECK_EQ(ssa_comm_rules_match(&rules, "gemm"), -1);
  CHECK_EQ(ssa_comm_rules_match(NULL, "gemm"), -1);
  CHECK(!strcmp(rules.rule[3].origin, "STEPSCOPE_COMM_KERNELS"));
  CHECK_EQ(ssa_comm_rules_add(&rules, "a((", 1, "command line", why, sizeof why), -1);
  CHECK(why[0] != 0);
  CHECK_EQ(ssa_comm_rules_add(&rules, "", 1, "command line", why, sizeof why), -1);
  CHECK_EQ(ssa_comm_rules_add_list(&rules, "ok;bad[x;never", 0, "STEPSCOPE_COMPUTE_KERNELS", &bad,
                                   why, sizeof why),
           -1);
  CHECK(bad && !strcmp(bad, "bad[x"));
  free(bad);
  CHECK_EQ(rules.n, 5); /* "ok" was added before the bad one */
  ssa_comm_rules_free(&rules);
}

static void check_window(const ssa_window *w, int64_t span, int64_t compute, int64_t comm,
                         int64_t overlap, int64_t idle, int line) {
  if (w->span != span || w->compute != compute || w->comm != comm || w->overlap != overlap ||
      w->exposed_comm != comm - overlap || w->idle != idle ||
      w->compute + w->exposed_comm + w->exposed_mem + w->idle != w->span) {
    fprintf(
        stderr,
        "line %d: span %lld compute %lld comm %lld overlap %lld exposed %lld idle %lld; expected "
        "%lld %lld %lld %lld %lld %lld\n",
        line, (long long)w->span, (long long)w->compute, (long long)w->comm, (long long)w->overlap,
        (long long)w->exposed_comm, (long long)w->idle, (long long)span, (long long)compute,
        (long long)comm, (long long)overlap, (long long)(comm - overlap), (long long)idle);
    failures++;
  }
}

/* One step [0,1000) µs. Stream 7: layout [50,60), gemm_fwd [100,400),
 * gemm_bwd [450,900). Stream 20 (DeepEP): notify_dispatch [110,130),
 * dispatch [130,330), combine [500,880), cached_notify_combine [880,920).
 * Compute = 10 + 300 + 450 = 760; comm = [110,330) + [500,920) = 640;
 * overlap = 220 + [500,900) 400 = 620; exposed 20; busy = 10 + 300 + 470
 * = 780, idle 220. Before the family table: comm 0. */
static void test_deepep(const char *dir) {
  loaded l;
  if (load_trace(dir, "deepep_like.json", NULL, &l)) return;
  const ssa_rank_result *rr = &l.an.ranks[0];
  const ssa_rank *r = rr->rank;
  CHECK_EQ(rr->nsteps, 1);
  check_window(&rr->totals, 1000000, 760000, 640000, 620000, 220000, __LINE__);
  check_window(&rr->windows[0], 1000000, 760000, 640000, 620000, 220000, __LINE__);
  int f = family("deepep");
  CHECK_EQ(r->tally.family[f].ops, 4);
  CHECK_EQ(r->tally.family[f].time_ns, 640000);
  CHECK_EQ(r->comm_by_name, 4);
  CHECK_EQ(r->tally.evidence.ops, 0);
  CHECK_EQ(r->tally.kind[SSA_COMM_KIND_DISPATCH].ops, 2);
  CHECK_EQ(r->tally.kind[SSA_COMM_KIND_DISPATCH].time_ns, 220000);
  CHECK_EQ(r->tally.kind[SSA_COMM_KIND_COMBINE].ops, 2);
  CHECK_EQ(r->tally.kind[SSA_COMM_KIND_COMBINE].time_ns, 420000);
  /* the kernel table marks them */
  int comm_rows = 0;
  for (size_t k = 0; k < l.an.nkernels; k++)
    comm_rows += l.an.kernels[k].comm != 0;
  CHECK_EQ(comm_rows, 4);
  unload(&l);
}

/* No steps: the window is [0,290) µs. Stream 7: add [0,100), one_shot
 * all-reduce [100,150), mul [150,250), two_shot all-reduce [250,290);
 * stream 21: multimem all-gather [200,260). Compute 200; comm = 50 +
 * [200,290) 90 = 140; overlap [200,250) = 50; idle 0. */
static void test_symm_mem(const char *dir) {
  loaded l;
  if (load_trace(dir, "symm_mem.json", NULL, &l)) return;
  const ssa_rank *r = l.an.ranks[0].rank;
  check_window(&l.an.ranks[0].totals, 290000, 200000, 140000, 50000, 0, __LINE__);
  int f = family("symm_mem");
  CHECK_EQ(r->tally.family[f].ops, 3);
  CHECK_EQ(r->tally.family[f].time_ns, 150000);
  CHECK_EQ(r->tally.kind[SSA_COMM_KIND_ALL_REDUCE].ops, 2);
  CHECK_EQ(r->tally.kind[SSA_COMM_KIND_ALL_REDUCE].time_ns, 90000);
  CHECK_EQ(r->tally.kind[SSA_COMM_KIND_ALL_GATHER].ops, 1);
  unload(&l);
}

/* CPU only, step [0,1000) µs. Thread 1: aten::linear [0,400) (holding
 * addmm), c10d::allreduce_ [400,420) holding record_param_comms [402,418),
 * aten::mm [500,800); thread 9: gloo:all_reduce [410,700). Compute 700;
 * comm = [400,700) = 300; overlap [500,700) = 200; exposed 100; idle 200. */
static void test_gloo(const char *dir) {
  loaded l;
  if (load_trace(dir, "gloo_cpu.json", NULL, &l)) return;
  const ssa_rank *r = l.an.ranks[0].rank;
  CHECK(r->host_timeline);
  check_window(&l.an.ranks[0].totals, 1000000, 700000, 300000, 200000, 200000, __LINE__);
  CHECK_EQ(r->tally.family[family("gloo")].ops, 1);
  CHECK_EQ(r->tally.family[family("gloo")].time_ns, 290000);
  CHECK_EQ(r->tally.family[family("c10d")].ops, 1);
  CHECK_EQ(r->tally.family[family("record_param_comms")].ops, 1);
  CHECK_EQ(r->tally.family[family("record_param_comms")].time_ns, 16000);
  CHECK_EQ(r->tally.kind[SSA_COMM_KIND_ALL_REDUCE].ops, 2);
  CHECK_EQ(r->tally.kind[SSA_COMM_KIND_ALL_REDUCE].time_ns, 310000);
  CHECK_EQ(r->tally.kind[SSA_COMM_KIND_UNKNOWN].ops, 1);
  CHECK_EQ(r->tally.evidence.ops, 0);
  unload(&l);

  /* a user rule decides on the host too: the gloo range made compute */
  ssa_comm_rules rules;
  memset(&rules, 0, sizeof rules);
  char why[128];
  CHECK_EQ(ssa_comm_rules_add(&rules, "^gloo:", 0, "command line", why, sizeof why), 0);
  if (load_trace(dir, "gloo_cpu.json", &rules, &l) == 0) {
    /* compute = [0,400) + gloo [410,700) + [500,800) = 400 + 390; comm =
     * [400,420) = 20, overlap [410,420) = 10 */
    check_window(&l.an.ranks[0].totals, 1000000, 790000, 20000, 10000, 200000, __LINE__);
    CHECK_EQ(l.an.ranks[0].rank->tally.user[0].ops, 1);
    unload(&l);
  }
  ssa_comm_rules_free(&rules);
}

/* No steps: window [0,300) µs. Stream 7: gemm [0,150), gemm2 [220,300);
 * stream 20: my_custom_alltoall_kernel [0,100), NCCL all-reduce by name
 * [100,200), NCCL all-gather with metadata [200,250).
 *   built-in: comm [100,250) = 150, compute [0,150) + [220,300) = 230,
 *             overlap 50 + 30 = 80;
 *   --comm-kernel my_custom --compute-kernel ncclDevKernel: comm 100,
 *             compute 300, overlap 100;
 *   --comm-kernel ncclDev --compute-kernel AllGather (compute wins):
 *             comm [100,200) = 100, compute [0,150) + [200,300) = 250,
 *             overlap 50;
 *   --comm-kernel my_custom --comm-kernel nothing_matches: comm [0,250),
 *             compute 230, overlap 150 + 30 = 180. */
static void test_rules(const char *dir) {
  loaded l;
  if (load_trace(dir, "rules.json", NULL, &l) == 0) {
    const ssa_rank *r = l.an.ranks[0].rank;
    check_window(&l.an.ranks[0].totals, 300000, 230000, 150000, 80000, 0, __LINE__);
    CHECK_EQ(r->tally.evidence.ops, 1);
    CHECK_EQ(r->tally.evidence.time_ns, 50000);
    CHECK_EQ(r->tally.family[family("nccl")].ops, 1);
    CHECK_EQ(r->tally.kind[SSA_COMM_KIND_ALL_GATHER].ops, 1);
    CHECK_EQ(r->tally.kind[SSA_COMM_KIND_ALL_REDUCE].ops, 1);
    CHECK_EQ(r->tally.nuser, 0);
    unload(&l);
  }
  ssa_comm_rules rules;
  char why[128];
  memset(&rules, 0, sizeof rules);
  CHECK_EQ(ssa_comm_rules_add(&rules, "my_custom", 1, "command line", why, sizeof why), 0);
  CHECK_EQ(ssa_comm_rules_add(&rules, "ncclDevKernel", 0, "command line", why, sizeof why), 0);
  if (load_trace(dir, "rules.json", &rules, &l) == 0) {
    const ssa_rank *r = l.an.ranks[0].rank;
    check_window(&l.an.ranks[0].totals, 300000, 300000, 100000, 100000, 0, __LINE__);
    CHECK_EQ(r->tally.nuser, 2);
    CHECK_EQ(r->tally.user[0].ops, 1);
    CHECK_EQ(r->tally.user[0].time_ns, 100000);
    CHECK_EQ(r->tally.user[1].ops, 2);
    CHECK_EQ(r->tally.user[1].time_ns, 150000);
    CHECK_EQ(r->tally.evidence.ops, 0);
    CHECK_EQ(r->tally.family[family("nccl")].ops, 0);
    CHECK_EQ(r->tally.kind[SSA_COMM_KIND_ALL_TO_ALL].ops, 1);
    /* the all-gather's record is still matched (its op is compute now) */
    CHECK_EQ(l.an.ncolls, 1);
    unload(&l);
  }
  ssa_comm_rules_free(&rules);
  CHECK_EQ(ssa_comm_rules_add(&rules, "ncclDev", 1, "command line", why, sizeof why), 0);
  CHECK_EQ(ssa_comm_rules_add(&rules, "AllGather", 0, "command line", why, sizeof why), 0);
  if (load_trace(dir, "rules.json", &rules, &l) == 0) {
    const ssa_rank *r = l.an.ranks[0].rank;
    check_window(&l.an.ranks[0].totals, 300000, 250000, 100000, 50000, 0, __LINE__);
    CHECK_EQ(r->tally.user[0].ops, 1);
    CHECK_EQ(r->tally.user[1].ops, 1);
    unload(&l);
  }
  ssa_comm_rules_free(&rules);
  CHECK_EQ(ssa_comm_rules_add(&rules, "my_custom", 1, "command line", why, sizeof why), 0);
  CHECK_EQ(ssa_comm_rules_add(&rules, "nothing_matches", 1, "command line", why, sizeof why), 0);
  if (load_trace(dir, "rules.json", &rules, &l) == 0) {
    const ssa_rank *r = l.an.ranks[0].rank;
    check_window(&l.an.ranks[0].totals, 300000, 230000, 250000, 180000, 0, __LINE__);
    CHECK_EQ(r->tally.user[0].ops, 1);
    CHECK_EQ(r->tally.user[1].ops, 0);
    CHECK_EQ(r->tally.evidence.ops, 1);
    CHECK_EQ(r->tally.family[family("nccl")].ops, 1);
    unload(&l);
  }
  ssa_comm_rules_free(&rules);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_comm_families TRACES_DIR\n");
    return 2;
  }
  test_names();
  test_deepep(argv[1]);
  test_symm_mem(argv[1]);
  test_gloo(argv[1]);
  test_rules(argv[1]);
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("comm families: all checks passed\n");
  return 0;
}
