/*
 * test_coll_member_sort.c — ssa_sort_coll_members (coll_member_sort.c) against qsort with
 * ssa_cmp_coll_member: members built rank by rank, record by record (as the analysis builds
 * them) from a few to thousands of communicators with random 64-bit ids (0 and UINT64_MAX
 * among them), sequence numbers dense, strided, sparse or spanning all 64 bits, repeated
 * (comm_id, seq) pairs within a rank and across ranks; then the same members shuffled (not in
 * build order: the qsort fallback), and the sizes 0, 1 and 2. The order must be qsort's
 * exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_model.h"

static int failures;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_u64(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* A sequence number of shape: 0 dense, 1 strided by 64, 2 sparse, 3 any 64-bit value. */
static uint64_t make_seq(int shape, uint64_t i) {
  switch (shape) {
  case 0: return 100 + i + next_u64() % 3;
  case 1: return 512 + 64 * i;
  case 2: return next_u64() % 1000000;
  default: return next_u64();
  }
}

static void check_against_qsort(ssa_coll_member *m, size_t n, const char *what) {
  ssa_coll_member *want = malloc((n ? n : 1) * sizeof *want);
  if (!want) abort();
  if (n) memcpy(want, m, n * sizeof *m); /* m may be NULL when n is 0 */
  qsort(want, n, sizeof *want, ssa_cmp_coll_member);
  ssa_sort_coll_members(m, n);
  for (size_t i = 0; i < n; i++)
    if (memcmp(&m[i], &want[i], sizeof *m)) {
      if (failures < 20)
        fprintf(
            stderr,
            "FAIL %s (n %zu): member %zu is (%llu, %llu, %u, %u), qsort has (%llu, %llu, %u, %u)\n",
            what, n, i, (unsigned long long)m[i].comm_id, (unsigned long long)m[i].seq,
            m[i].rank_idx, m[i].coll_idx, (unsigned long long)want[i].comm_id,
            (unsigned long long)want[i].seq, want[i].rank_idx, want[i].coll_idx);
      failures++;
      break;
    }
  free(want);
}

/* ranks ranks of up to per_rank records each over ncomms communicators. */
static void sort_case(size_t ranks, size_t per_rank, size_t ncomms, int shape) {
  uint64_t *comms = malloc(ncomms * sizeof *comms);
  ssa_coll_member *m = malloc(ranks * per_rank * sizeof *m);
  if (!comms || !m) abort();
  for (size_t c = 0; c < ncomms; c++)
    comms[c] = c == 0 ? 0 : c == 1 ? UINT64_MAX : next_u64();
  size_t n = 0;
  for (size_t r = 0; r < ranks; r++) {
    size_t count = per_rank - next_u64() % (per_rank / 4 + 1);
    for (size_t j = 0; j < count; j++)
      m[n++] = (ssa_coll_member){comms[next_u64() % ncomms], make_seq(shape, j / 2), (uint32_t)r,
                                 (uint32_t)j};
  }
  char what[96];
  snprintf(what, sizeof what, "build order, %zu ranks, %zu comms, shape %d", ranks, ncomms, shape);
  ssa_coll_member *shuffled = malloc((n ? n : 1) * sizeof *shuffled);
  if (!shuffled) abort();
  memcpy(shuffled, m, n * sizeof *m);
  check_against_qsort(m, n, what);
  for (size_t i = n; i > 1; i--) {
    size_t k = next_u64() % i;
    ssa_coll_member t = shuffled[i - 1];
    shuffled[i - 1] = shuffled[k];
    shuffled[k] = t;
  }
  snprintf(what, sizeof what, "shuffled, %zu ranks, %zu comms, shape %d", ranks, ncomms, shape);
  check_against_qsort(shuffled, n, what);
  free(shuffled);
  free(comms);
  free(m);
}

int main(void) {
  check_against_qsort(NULL, 0, "empty");
  ssa_coll_member one = {5, 7, 0, 0};
  check_against_qsort(&one, 1, "one");
  ssa_coll_member two[2] = {{9, 1, 0, 0}, {3, 2, 0, 1}};
  check_against_qsort(two, 2, "two");
  for (int shape = 0; shape < 4; shape++) {
    sort_case(8, 40, 3, shape);
    sort_case(64, 200, 17, shape);
    sort_case(1024, 60, 2000, shape);
    sort_case(300, 400, 1, shape);
  }
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("coll member sort: all cases equal to qsort\n");
  return 0;
}
