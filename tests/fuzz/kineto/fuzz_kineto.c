/*
 * fuzz_kineto.c — fuzz target for the Kineto importer (json_stream.c +
 * kineto_reader.c, kineto_mapper.c): every input is imported into a rank from memory, and
 * what the importer made of it goes through the full analysis and every
 * output (tests/fuzz/fuzz_analyse.h). Every input is imported a second time with
 * the bytes handed over in small reads (1 to 13 bytes, from the input's
 * size), so tokens cross the tokenizer's buffer refills everywhere, and a
 * third time from memory with the events' fast path off
 * (ssa_import_options.fast_off: every event token by token; the first import
 * takes kineto_fast.c wherever it can, the small reads hardly ever). All
 * imports must agree (same outcome, same error message, same records and
 * strings) or the target aborts. Two more imports keep the CPU ops' input args
 * the module and the memory events (op_inputs, op_modules, op_memory: `stepscope ops`) and the
 * threads' names (thread_names: `stepscope export`), fast path on and off: they must agree with
 * each other (the args' text and the lanes' names included) and succeed or fail as the first.
 * Built two ways:
 *   - with STEPSCOPE_LIBFUZZER: LLVMFuzzerTestOneInput for libFuzzer;
 *   - without: linked with the shared replay driver (tests/fuzz/fuzz_replay.c),
 *     which runs every file of the directories given on the command line
 *     (the seed corpus and the committed regressions), used by the
 *     fuzz_kineto.replay test in every build.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_analyse.h"
#include "kineto_source.h"
#include "ssa_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The same records from both imports (before finishing). */
static int same_rank(const ssa_rank *a, const ssa_rank *b) {
  if (a->nops != b->nops || a->napis != b->napis || a->nranges != b->nranges ||
      a->ncolls != b->ncolls || a->nwarnings != b->nwarnings || a->rank != b->rank)
    return 0;
  for (size_t i = 0; i < a->nops; i++) {
    const ssa_op *x = &a->ops[i], *y = &b->ops[i];
    if (x->start != y->start || x->end != y->end || x->corr != y->corr || x->bytes != y->bytes ||
        x->lane != y->lane || x->kind != y->kind ||
        strcmp(ssa_rank_str(a, x->name), ssa_rank_str(b, y->name)))
      return 0;
  }
  for (size_t i = 0; i < a->napis; i++) {
    const ssa_api *x = &a->apis[i], *y = &b->apis[i];
    if (x->start != y->start || x->end != y->end || x->corr != y->corr || x->lane != y->lane ||
        strcmp(ssa_rank_str(a, x->name), ssa_rank_str(b, y->name)))
      return 0;
  }
  for (size_t i = 0; i < a->nranges; i++)
    if (a->ranges[i].start != b->ranges[i].start || a->ranges[i].end != b->ranges[i].end ||
        a->ranges[i].lane != b->ranges[i].lane ||
        strcmp(ssa_rank_str(a, a->ranges[i].name), ssa_rank_str(b, b->ranges[i].name)) ||
        strcmp(ssa_rank_str(a, a->ranges[i].args), ssa_rank_str(b, b->ranges[i].args)))
      return 0;
  if (a->nlanes != b->nlanes) return 0;
  for (uint32_t i = 0; i < a->nlanes; i++)
    if (a->lanes[i].id != b->lanes[i].id || a->lanes[i].kind != b->lanes[i].kind ||
        strcmp(ssa_rank_str(a, a->lanes[i].name), ssa_rank_str(b, b->lanes[i].name)))
      return 0;
  for (size_t i = 0; i < a->ncolls; i++)
    if (a->colls[i].comm_id != b->colls[i].comm_id || a->colls[i].seq != b->colls[i].seq ||
        a->colls[i].bytes != b->colls[i].bytes)
      return 0;
  for (size_t i = 0; i < a->nwarnings; i++)
    if (strcmp(a->warnings[i], b->warnings[i])) return 0;
  return 1;
}

/* The CPU ops' input args and the threads' names kept (op_inputs, thread_names), read whole where
 * the fast path can and token by token: the same records and args' text, and the outcome of the
 * import without them (rc). */
static void check_op_inputs(const uint8_t *data, size_t size, int rc) {
  ssa_rank a, b;
  if (ssa_rank_init(&a)) return;
  if (ssa_rank_init(&b)) {
    ssa_rank_free(&a);
    return;
  }
  stepscope_error ea, eb;
  ssa_import_options fast = {.op_inputs = 1, .op_modules = 1, .op_memory = 1, .thread_names = 1},
                     slow = {.op_inputs = 1,
                             .op_modules = 1,
                             .op_memory = 1,
                             .thread_names = 1,
                             .fast_off = 1};
  int ra = ssa_kineto_load_memory_opts(data, size, "fuzz.json", &fast, &a, &ea);
  int rb = ssa_kineto_load_memory_opts(data, size, "fuzz.json", &slow, &b, &eb);
  if ((ra != 0) != (rc != 0) || (ra != 0) != (rb != 0) ||
      (ra != 0 && strcmp(ea.message, eb.message)) || (ra == 0 && !same_rank(&a, &b))) {
    fprintf(stderr, "op inputs: the fast path changed the import:\n  %s\n  %s\n",
            ra ? ea.message : "ok", rb ? eb.message : "ok");
    abort();
  }
  ssa_rank_free(&a);
  ssa_rank_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ssa_rank *r = calloc(2, sizeof *r);
  if (!r) return 0;
  if (ssa_rank_init(&r[0]) || ssa_rank_init(&r[1])) { /* out of memory: nothing to test */
    ssa_rank_free(&r[0]);
    ssa_rank_free(&r[1]);
    free(r);
    return 0;
  }
  stepscope_error err, err2, err3;
  int rc = ssa_kineto_load_memory(data, size, "fuzz.json", &r[0], &err);
  int rc2 = ssa_kineto_load_memory_chunked(data, size, 1 + size % 13, "fuzz.json", &r[1], &err2);
  if ((rc != 0) != (rc2 != 0)) abort();
  if (rc != 0) {
    if (!err.message[0]) abort(); /* every failure must say why */
    if (strcmp(err.message, err2.message)) {
      fprintf(stderr, "error depends on read sizes:\n  %s\n  %s\n", err.message, err2.message);
      abort();
    }
  } else if (!same_rank(&r[0], &r[1])) {
    fprintf(stderr, "import depends on read sizes\n");
    abort();
  }
  /* the same document with every event read token by token */
  ssa_rank_free(&r[1]);
  if (ssa_rank_init(&r[1])) {
    ssa_rank_free(&r[0]);
    free(r);
    return 0;
  }
  ssa_import_options token_by_token = {.fast_off = 1};
  int rc3 = ssa_kineto_load_memory_opts(data, size, "fuzz.json", &token_by_token, &r[1], &err3);
  if ((rc != 0) != (rc3 != 0) || (rc != 0 && strcmp(err.message, err3.message)) ||
      (rc == 0 && !same_rank(&r[0], &r[1]))) {
    fprintf(stderr, "the events' fast path changed the import:\n  %s\n  %s\n",
            rc ? err.message : "ok", rc3 ? err3.message : "ok");
    abort();
  }
  check_op_inputs(data, size, rc);
  if (rc == 0) {
    ssa_rank_free(&r[1]);
    fuzz_analyse_ranks(r, 1); /* takes r */
    return 0;
  }
  ssa_rank_free(&r[0]);
  ssa_rank_free(&r[1]);
  free(r);
  return 0;
}
