/*
 * bench_rewrite.c — how small real traces come out at a given zstd level.
 *
 * Reads a trace file (any producer: the trainer, the GPU tracer) with the
 * public reader and writes its records again through the writer, once per
 * zstd level given, into temporary files: first all records, then, for each
 * record kind that makes up at least 5 % of the file, that kind alone (with
 * the strings), so that "bytes per kernel record" (SPEC §6) can be read off
 * real traces and not only the synthetic mix of bench_writer. String ids are
 * mapped through a table, so the rewritten files are valid traces.
 *
 * usage: bench_rewrite TRACE [LEVEL...]   (levels default to 1 and -5; 0 = the writer's default)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stepscope.h"

typedef struct loaded {
  stepscope_record *recs; /* STRING records are kept as such, in order */
  size_t n, cap;
  char **strings; /* by old id (1-based), owned copies */
  size_t nstrings;
  stepscope_header header;
  size_t per_kind[STEPSCOPE_REC_KIND_MAX];
} loaded;

static char *dup_string(const char *s) {
  char *c = strdup(s ? s : "");
  if (!c) {
    fprintf(stderr, "bench_rewrite: out of memory\n");
    exit(1);
  }
  return c;
}

static void load(const char *path, loaded *l) {
  stepscope_error err;
  stepscope_reader *r = stepscope_reader_open(path, &err);
  if (!r) {
    fprintf(stderr, "bench_rewrite: %s\n", err.message);
    exit(1);
  }
  memset(l, 0, sizeof *l);
  const stepscope_header *h = stepscope_reader_header(r);
  l->header = *h; /* strings copied below */
  const char **fields[] = {
      &l->header.hostname,     &l->header.producer,       &l->header.device_name,
      &l->header.device_json,  &l->header.driver_version, &l->header.cuda_version,
      &l->header.nccl_version, &l->header.cupti_version,  &l->header.config_json};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    *fields[i] = dup_string(*fields[i]);
  stepscope_record rec;
  int rc;
  while ((rc = stepscope_reader_next(r, &rec, &err)) == 1) {
    if (rec.kind == STEPSCOPE_REC_STRING) {
      l->strings = realloc(l->strings, (l->nstrings + 2) * sizeof *l->strings);
      if (!l->strings) exit(1);
      l->strings[++l->nstrings] = dup_string(stepscope_reader_string(r, rec.u.string.id));
      continue;
    }
    if (rec.kind == STEPSCOPE_REC_METADATA) {
      rec.u.metadata.key = dup_string(rec.u.metadata.key);
      rec.u.metadata.value_json = dup_string(rec.u.metadata.value_json);
    }
    if (l->n == l->cap) {
      l->cap = l->cap ? 2 * l->cap : 4096;
      l->recs = realloc(l->recs, l->cap * sizeof *l->recs);
      if (!l->recs) exit(1);
    }
    l->recs[l->n++] = rec;
    if (rec.kind < STEPSCOPE_REC_KIND_MAX) l->per_kind[rec.kind]++;
  }
  if (rc < 0) {
    fprintf(stderr, "bench_rewrite: %s\n", err.message);
    exit(1);
  }
  stepscope_reader_close(r);
}

/* Rewrites the string-id fields of `rec` through `map` (old id -> new id). */
static void remap(stepscope_record *rec, const uint32_t *map) {
#define M(field) (field) = map[(field)]
  switch (rec->kind) {
  case STEPSCOPE_REC_KERNEL: M(rec->u.kernel.name); break;
  case STEPSCOPE_REC_API: M(rec->u.api.name); break;
  case STEPSCOPE_REC_RANGE:
    M(rec->u.range.name), M(rec->u.range.domain), M(rec->u.range.args);
    break;
  case STEPSCOPE_REC_MARK: M(rec->u.mark.name), M(rec->u.mark.domain), M(rec->u.mark.args); break;
  case STEPSCOPE_REC_COLLECTIVE:
    M(rec->u.collective.algorithm), M(rec->u.collective.protocol), M(rec->u.collective.name);
    break;
  case STEPSCOPE_REC_HOST_OP: M(rec->u.host_op.name), M(rec->u.host_op.args); break;
  case STEPSCOPE_REC_COUNTER: M(rec->u.counter.name); break;
  case STEPSCOPE_REC_OVERHEAD: M(rec->u.overhead.name); break;
  case STEPSCOPE_REC_STREAM: M(rec->u.stream.name); break;
  default: break;
  }
#undef M
}

static uint64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Writes the records of `kind` (0: all) at `level`; returns the file size. */
static uint64_t rewrite(const loaded *l, uint32_t kind, int level, const char *out) {
  stepscope_writer_options opt = {.compression_level = level};
  stepscope_error err;
  stepscope_writer *w = stepscope_writer_open(out, &l->header, &opt, &err);
  if (!w) {
    fprintf(stderr, "bench_rewrite: %s\n", err.message);
    exit(1);
  }
  uint32_t *map = calloc(l->nstrings + 1, sizeof *map);
  if (!map) exit(1);
  for (size_t i = 1; i <= l->nstrings; i++)
    map[i] = stepscope_intern(w, l->strings[i]);
  for (size_t i = 0; i < l->n; i++) {
    if (kind && l->recs[i].kind != kind) continue;
    stepscope_record rec = l->recs[i];
    remap(&rec, map);
    stepscope_write(w, &rec);
  }
  free(map);
  if (stepscope_writer_close(w, &err) != 0) {
    fprintf(stderr, "bench_rewrite: %s\n", err.message);
    exit(1);
  }
  uint64_t size = file_size(out);
  unlink(out);
  return size;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_rewrite TRACE [LEVEL...]\n");
    return 2;
  }
  loaded l;
  load(argv[1], &l);
  int default_levels[] = {1, -5};
  int nlevels = argc > 2 ? argc - 2 : 2;
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char out[512];
  snprintf(out, sizeof out, "%s/bench_rewrite_%ld.trace.zst", dir, (long)getpid());
  printf("%s: %zu records, %zu strings, %llu bytes as written by %s\n", argv[1], l.n, l.nstrings,
         (unsigned long long)file_size(argv[1]), l.header.producer);
  for (int i = 0; i < nlevels; i++) {
    int level = argc > 2 ? atoi(argv[2 + i]) : default_levels[i];
    uint64_t all = rewrite(&l, 0, level, out);
    printf("level %d: all records %.2f bytes/record", level, (double)all / (double)l.n);
    for (uint32_t k = 1; k < STEPSCOPE_REC_KIND_MAX; k++) {
      if (l.per_kind[k] * 20 < l.n) continue;
      uint64_t only = rewrite(&l, k, level, out);
      printf("; %s alone %.2f bytes/record (%zu)", stepscope_record_kind_name(k),
             (double)only / (double)l.per_kind[k], l.per_kind[k]);
    }
    printf("\n");
  }
  return 0;
}
