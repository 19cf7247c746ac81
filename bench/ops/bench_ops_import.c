/*
 * bench_ops_import.c — what importing the PyTorch ops' input shapes and module stacks costs
 * (issue 33 §4: at most 30 % over the import without them): each Kineto file given is
 * imported REPS times, in turn without them (the import of `stepscope export`), with the
 * shapes (ssa_import_options.op_inputs: `stepscope analyze`, `stepscope ops`) and with the
 * shapes and the modules (op_modules: `stepscope ops --by module`), the importer's other
 * switches at their defaults (fast path, split, gzip mode). Prints per file the median CPU
 * time (all threads) of each and the ratios to the first, the CPU ops that kept inputs, the
 * module ranges, and the string bytes the rank holds (inputs are interned: repeated shapes
 * are stored once).
 *
 * usage: bench_ops_import [--reps N] FILE...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kineto_source.h"
#include "ssa_import.h"

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct one_import {
  double cpu;
  size_t ranges, with_inputs, string_bytes;
} one_import;

#define MODES 3 /* nothing more, shapes, shapes and modules */

static int import_once(const char *path, int mode, one_import *out) {
  ssa_import_options opt;
  memset(&opt, 0, sizeof opt);
  opt.op_inputs = mode >= 1;
  opt.op_modules = mode >= 2;
  ssa_rank r;
  stepscope_error err;
  memset(&err, 0, sizeof err);
  if (ssa_rank_init(&r)) return -1;
  double c0 = cpu_s();
  int rc = ssa_kineto_source_load_opts(path, &opt, &r, &err);
  out->cpu = cpu_s() - c0;
  out->ranges = r.nranges;
  out->with_inputs = 0;
  for (size_t i = 0; i < r.nranges; i++)
    out->with_inputs += r.ranges[i].args != 0;
  out->string_bytes = r.strings.bytes_len;
  if (rc) fprintf(stderr, "bench_ops_import: %s\n", err.message);
  ssa_rank_free(&r);
  return rc;
}

int main(int argc, char **argv) {
  int reps = 7, first = 1;
  if (argc > 2 && !strcmp(argv[1], "--reps")) {
    reps = atoi(argv[2]);
    first = 3;
  }
  if (first >= argc || reps < 1) {
    fprintf(stderr, "usage: bench_ops_import [--reps N] FILE...\n");
    return 2;
  }
  printf("%-56s %9s %9s %7s %9s %7s %9s %8s %14s\n", "file", "cpu ms", "+shapes", "ratio",
         "+modules", "ratio", "w/shapes", "ranges+", "strings KB");
  double *cpu[MODES];
  for (int m = 0; m < MODES; m++)
    if (!(cpu[m] = calloc((size_t)reps, sizeof(double)))) return 1;
  int status = 0;
  for (int f = first; f < argc; f++) {
    one_import x[MODES];
    memset(x, 0, sizeof x);
    for (int i = 0; i < reps; i++) /* in turn, so that drift hits each alike */
      for (int m = 0; m < MODES; m++) {
        if (import_once(argv[f], m, &x[m])) {
          status = 1;
          goto next;
        }
        cpu[m][i] = x[m].cpu;
      }
    for (int m = 0; m < MODES; m++)
      qsort(cpu[m], (size_t)reps, sizeof(double), cmp_double);
    const char *name = strlen(argv[f]) > 56 ? argv[f] + strlen(argv[f]) - 56 : argv[f];
    double c0 = cpu[0][reps / 2], c1 = cpu[1][reps / 2], c2 = cpu[2][reps / 2];
    printf("%-56s %9.2f %9.2f %7.3f %9.2f %7.3f %9zu %8zu %6zu->%6zu\n", name, 1e3 * c0, 1e3 * c1,
           c0 > 0 ? c1 / c0 : 0.0, 1e3 * c2, c0 > 0 ? c2 / c0 : 0.0, x[1].with_inputs,
           x[2].ranges - x[1].ranges, x[0].string_bytes / 1024, x[2].string_bytes / 1024);
  next:;
  }
  return status;
}
