/*
 * check_trace_run.c — validates a run directory written by stepscope-train.
 *
 * usage: check_trace_run RUN_DIR WORLD STEPS [--p2p] [--cp N]
 * Reads every rank-NNNNN.trace.zst with the library reader and checks: the
 * header (rank, world size, configuration JSON); the metadata keys layout,
 * schedule, flops and memory; one `step` range per step with its number as
 * payload; forward and backward ranges; HOST_OP records of the compute and
 * communication categories, each joined by its correlation id to a
 * HOST_ENQUEUE API record; COLLECTIVE records. Across ranks every collective
 * (comm_id, seq) is seen by exactly comm_size ranks, and every point-to-point
 * (comm_id, seq) by exactly two (the send and its receive). With --cp N (context
 * parallelism): the layout metadata says "cp":N and every rank has transfers of
 * the group "cp", all point-to-point and none marked PIPELINE (ring attention's
 * transfers are communication that may overlap compute, not pipeline bubbles).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepscope.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL: ");                                                                            \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

typedef struct coll_key {
  uint64_t comm_id, seq;
  uint32_t size, flags, op;
  int seen;
} coll_key;

static coll_key *colls;
static size_t ncolls, capcolls;

static void note_collective(const stepscope_collective *c) {
  for (size_t i = 0; i < ncolls; i++)
    if (colls[i].comm_id == c->comm_id && colls[i].seq == c->seq &&
        ((c->flags & STEPSCOPE_COLL_F_P2P) || colls[i].op == c->op)) {
      colls[i].seen++;
      return;
    }
  if (ncolls == capcolls) {
    capcolls = capcolls ? 2 * capcolls : 1024;
    colls = realloc(colls, capcolls * sizeof *colls);
    if (!colls) exit(2);
  }
  colls[ncolls++] = (coll_key){c->comm_id, c->seq, c->comm_size, c->flags, c->op, 1};
}

int main(int argc, char **argv) {
  int want_p2p = 0, want_cp = 0;
  for (int i = 4; i < argc; i++) {
    if (!strcmp(argv[i], "--p2p"))
      want_p2p = 1;
    else if (!strcmp(argv[i], "--cp") && i + 1 < argc)
      want_cp = atoi(argv[++i]);
    else
      want_cp = -1;
  }
  if (argc < 4 || want_cp < 0) {
    fprintf(stderr, "usage: check_trace_run RUN_DIR WORLD STEPS [--p2p] [--cp N]\n");
    return 2;
  }
  int world = atoi(argv[2]), steps = atoi(argv[3]);
  uint64_t sends = 0, recvs = 0;
  for (int r = 0; r < world; r++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/rank-%05d.trace.zst", argv[1], r);
    stepscope_error e;
    stepscope_reader *rd = stepscope_reader_open(path, &e);
    if (!rd) {
      CHECK(0, "%s: %s", path, e.message);
      continue;
    }
    const stepscope_header *h = stepscope_reader_header(rd);
    CHECK(h->rank == r && h->world_size == world, "%s: header rank %d world %d", path, h->rank,
          h->world_size);
    CHECK(h->config_json && strstr(h->config_json, "\"dp\""), "%s: no config JSON", path);
    int meta_layout = 0, meta_sched = 0, meta_flops = 0, meta_mem = 0;
    int step_seen[1024] = {0};
    int nsteps = 0, nfwd = 0, nbwd = 0, ncompute = 0, ncomm = 0, ncoll = 0;
    int cp_layout = 0, cp_p2p = 0, cp_other = 0;
    uint64_t *enq = NULL, *ops = NULL;
    size_t nenq = 0, nops = 0;
    stepscope_record rec;
    int rc;
    while ((rc = stepscope_reader_next(rd, &rec, &e)) == 1) {
      switch (rec.kind) {
      case STEPSCOPE_REC_METADATA:
        meta_layout |= !strcmp(rec.u.metadata.key, "layout");
        if (want_cp && !strcmp(rec.u.metadata.key, "layout")) {
          char want[32];
          snprintf(want, sizeof want, "\"cp\":%d,", want_cp);
          cp_layout = strstr(rec.u.metadata.value_json, want) != NULL &&
                      strstr(rec.u.metadata.value_json, "\"cp_rank\":") != NULL;
        }
        meta_sched |= !strcmp(rec.u.metadata.key, "schedule");
        meta_flops |= !strcmp(rec.u.metadata.key, "flops");
        meta_mem |= !strcmp(rec.u.metadata.key, "memory");
        break;
      case STEPSCOPE_REC_RANGE: {
        const char *name = stepscope_reader_string(rd, rec.u.range.name);
        if (!name) break;
        if (!strcmp(name, "step")) {
          CHECK(rec.u.range.payload_kind == STEPSCOPE_PAYLOAD_UINT64 && rec.u.range.payload < 1024,
                "%s: step range payload", path);
          if (rec.u.range.payload < 1024 && !step_seen[rec.u.range.payload]++) nsteps++;
        }
        nfwd += !strcmp(name, "forward");
        nbwd += !strcmp(name, "backward");
        break;
      }
      case STEPSCOPE_REC_HOST_OP:
        ncompute += rec.u.host_op.category == STEPSCOPE_CAT_COMPUTE;
        ncomm += rec.u.host_op.category == STEPSCOPE_CAT_COMM;
        ops = realloc(ops, (nops + 1) * sizeof *ops);
        ops[nops++] = rec.u.host_op.correlation_id;
        break;
      case STEPSCOPE_REC_API:
        if (rec.u.api.api_kind == STEPSCOPE_API_HOST_ENQUEUE) {
          enq = realloc(enq, (nenq + 1) * sizeof *enq);
          enq[nenq++] = rec.u.api.correlation_id;
        }
        break;
      case STEPSCOPE_REC_COLLECTIVE:
        ncoll++;
        CHECK(rec.u.collective.comm_id != 0 && rec.u.collective.comm_size >= 1,
              "%s: collective without communicator", path);
        note_collective(&rec.u.collective);
        if (want_cp) {
          const char *g = stepscope_reader_string(rd, rec.u.collective.name);
          unsigned f = rec.u.collective.flags;
          if (g && !strcmp(g, "cp")) {
            if ((f & STEPSCOPE_COLL_F_P2P) && !(f & STEPSCOPE_COLL_F_PIPELINE))
              cp_p2p++;
            else
              cp_other++;
          }
        }
        sends += rec.u.collective.op == STEPSCOPE_COLL_SEND;
        recvs += rec.u.collective.op == STEPSCOPE_COLL_RECV;
        break;
      }
    }
    CHECK(rc == 0, "%s: read error %s", path, e.message);
    CHECK(meta_layout && meta_sched && meta_flops && meta_mem,
          "%s: metadata layout %d schedule %d flops %d memory %d", path, meta_layout, meta_sched,
          meta_flops, meta_mem);
    CHECK(nsteps == steps, "%s: %d step ranges, expected %d", path, nsteps, steps);
    CHECK(nfwd > 0 && nbwd > 0, "%s: forward %d backward %d ranges", path, nfwd, nbwd);
    CHECK(ncompute > 0 && ncomm > 0, "%s: host ops compute %d comm %d", path, ncompute, ncomm);
    CHECK(ncoll > 0, "%s: no collectives", path);
    if (want_cp) {
      CHECK(cp_layout, "%s: the layout metadata does not say \"cp\":%d", path, want_cp);
      CHECK(cp_p2p > 0 && cp_other == 0,
            "%s: %d cp transfers (p2p, not pipeline), %d other cp records", path, cp_p2p, cp_other);
    }
    /* every executed op has its enqueue record */
    size_t unmatched = 0;
    for (size_t i = 0; i < nops; i++) {
      int found = 0;
      for (size_t j = 0; j < nenq && !found; j++)
        found = enq[j] == ops[i];
      unmatched += !found;
    }
    CHECK(unmatched == 0, "%s: %zu of %zu host ops have no HOST_ENQUEUE record", path, unmatched,
          nops);
    printf("rank %d: %d steps, %d forward, %d backward, %d compute ops, %d comm ops, %d "
           "collectives\n",
           r, nsteps, nfwd, nbwd, ncompute, ncomm, ncoll);
    free(enq);
    free(ops);
    stepscope_reader_close(rd);
  }
  size_t partial = 0;
  for (size_t i = 0; i < ncolls; i++) {
    uint32_t want = (colls[i].flags & STEPSCOPE_COLL_F_P2P) ? 2 : colls[i].size;
    if ((uint32_t)colls[i].seen != want) partial++;
  }
  CHECK(partial == 0, "%zu of %zu collectives/transfers are not seen by all members", partial,
        ncolls);
  CHECK(sends == recvs && (sends > 0) == want_p2p, "%" PRIu64 " sends vs %" PRIu64 " receives",
        sends, recvs);
  free(colls);
  if (failures) {
    printf("%d failures\n", failures);
    return 1;
  }
  printf("OK\n");
  return 0;
}
