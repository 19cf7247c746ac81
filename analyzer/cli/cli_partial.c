/*
 * cli_partial.c — partial analyses for the commands and the C API (docs/scale.md
 * "Partials"): `analyze RUN --part K/N --partial OUT` loads part K of the run's rank files as
 * the bounded mode does (each rank's shell, alignment input and summary; no events kept) and
 * writes them (partial_write.c); `merge PARTIALS...` reads every part of one run, checks that
 * they are all there once and from the same run, assembles the run from them (sorted, ranks
 * checked, clocks aligned: ssa_run_assemble) and analyses it in the bounded mode, so the
 * report is byte for byte `analyze --low-memory`'s of the whole run.
 */
#include "cli_partial.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_env.h"
#include "partial.h"

/* The identity of the run at `path`: its rank files' names in discovery order. */
static int run_identity(const char *path, const cli_loaded *l, uint64_t *id, uint64_t *nfiles,
                        char *msg, size_t cap) {
  ssa_run_files found;
  stepscope_error err;
  memset(&err, 0, sizeof err);
  if (ssa_run_discover(path, &l->import.inflate, &found, &err)) {
    snprintf(msg, cap, "%s", err.message);
    return 1;
  }
  const char **names = calloc(found.nfiles ? found.nfiles : 1, sizeof *names);
  size_t n = 0;
  for (size_t i = 0; names && i < found.nfiles; i++)
    if (ssa_file_kind_is_rank(found.files[i].kind)) names[n++] = found.files[i].name;
  if (names) *id = ssa_partial_run_id(names, n);
  *nfiles = n;
  free(names);
  ssa_run_files_free(&found);
  if (!names) snprintf(msg, cap, "out of memory");
  return names ? 0 : 1;
}

/* Maps the regular file at `path` read-only: 0 (*bytes NULL when it is empty), or 1 with the
 * reason (`what` names the kind of file). */
static int map_file(const char *path, const char *what, void **bytes, size_t *n, char *msg,
                    size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  *bytes = NULL;
  if (fd < 0) {
    snprintf(msg, cap, "%s: cannot open it (%s)", path, strerror(errno));
    return 1;
  }
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    snprintf(msg, cap, "%s: not a regular file (a %s is one)", path, what);
    close(fd);
    return 1;
  }
  *n = (size_t)st.st_size;
  void *b = *n ? mmap(NULL, *n, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (b == MAP_FAILED) {
    snprintf(msg, cap, "%s: cannot map it", path);
    return 1;
  }
  *bytes = b;
  return 0;
}

/* Reads the cross file at `path`, which must be made for part K of N. 0, or 1 with the
 * reason. */
static int read_cross(const char *path, int part_index, int part_count, ssa_cross_part *cross,
                      char *msg, size_t cap) {
  void *bytes;
  size_t n = 0;
  if (map_file(path, "cross file", &bytes, &n, msg, cap)) return 1;
  char why[600];
  int rc = ssa_cross_read(bytes ? bytes : "", n, cross, why, sizeof why);
  if (bytes) munmap(bytes, n);
  if (rc)
    snprintf(msg, cap, "%s: %s", path, why);
  else if (cross->part_index != part_index || cross->part_count != part_count) {
    snprintf(msg, cap, "%s is made for part %d of %d, not %d of %d", path, cross->part_index,
             cross->part_count, part_index, part_count);
    rc = 1;
  }
  return rc ? 1 : 0;
}

int cli_write_partial(const char *command, const char *path, const ssa_options *opt, int part_index,
                      int part_count, const char *cross_path, const char *out_path, char *msg_out,
                      size_t cap) {
  cli_loaded l;
  char msg[1200] = "";
  ssa_cross_part cross;
  memset(&cross, 0, sizeof cross);
  memset(&l, 0, sizeof l);
  int rc = 0;
  if (cross_path && read_cross(cross_path, part_index, part_count, &cross, msg, sizeof msg)) rc = 1;
  if (rc == 0)
    rc = cli_load_part(command, path, opt, part_index, part_count, cross_path ? &cross : NULL,
                       cross_path, &l, msg_out, cap);
  ssa_partial p;
  memset(&p, 0, sizeof p);
  if (rc == 0 && run_identity(path, &l, &p.run_id, &p.nfiles, msg, sizeof msg)) rc = 1;
  if (rc == 0 && cross_path && (cross.run_id != p.run_id || cross.nfiles != p.nfiles)) {
    snprintf(msg, sizeof msg, "%s is made from another run's partials (not %s's %llu rank files)",
             cross_path, path, (unsigned long long)p.nfiles);
    rc = 1;
  }
  ssa_cross_part_free(&cross);
  if (rc == 0) {
    size_t first = ssa_part_first_file((size_t)p.nfiles, part_index, part_count);
    p.dir = l.run.dir;
    p.part_index = part_index;
    p.part_count = part_count;
    p.warnings = l.run.warnings;
    p.nwarnings = l.run.nwarnings;
    p.ranks = l.run.ranks;
    p.summaries = l.summaries;
    p.locals = l.locals;
    p.made_with = *opt;
    p.nranks = l.run.nranks;
    p.read_paths = calloc(p.nranks ? p.nranks : 1, sizeof *p.read_paths);
    p.stamps = calloc(p.nranks ? p.nranks : 1, sizeof *p.stamps);
    for (size_t i = 0; p.read_paths && p.stamps && i < p.nranks; i++) {
      l.run.ranks[i].file_index += first; /* the run's index, not the part's */
      p.read_paths[i] = realpath(l.run.ranks[i].path, NULL);
      if (!p.read_paths[i] || ssa_file_stamp_of(p.read_paths[i], &p.stamps[i])) rc = 1;
    }
    if (!p.read_paths || !p.stamps || rc)
      snprintf(msg, sizeof msg, "cannot resolve the rank files' paths");
    ssa_out o;
    if (!msg[0] && ssa_out_open(&o, out_path) == 0) {
      if (ssa_partial_write(&p, &o) || ssa_out_close(&o))
        snprintf(msg, sizeof msg, "%s: %s", out_path, o.why[0] ? o.why : "cannot write");
    } else if (!msg[0])
      snprintf(msg, sizeof msg, "%s: %s", out_path, o.why);
    for (size_t i = 0; p.read_paths && i < p.nranks; i++)
      free(p.read_paths[i]);
    free(p.read_paths);
    free(p.stamps);
  }
  if (msg[0]) {
    snprintf(msg_out, cap, "stepscope %s: %s", command, msg);
    rc = 1;
  }
  cli_loaded_free(&l);
  return rc;
}

/* Reads the partial at `path` (mapped, not copied) into *part. 0, or 1 with the reason. */
static int read_part(const char *path, const ssa_comm_rules *rules, ssa_partial *part, char *msg,
                     size_t cap) {
  void *bytes;
  size_t n = 0;
  if (map_file(path, "partial", &bytes, &n, msg, cap)) return 1;
  char why[600];
  int rc = ssa_partial_read(bytes ? bytes : "", n, rules, part, why, sizeof why);
  if (bytes) munmap(bytes, n);
  if (rc) snprintf(msg, cap, "%s: %s", path, why);
  return rc ? 1 : 0;
}

/* Reads the partials and checks they are every part of one run, once each. */
static int read_parts(char *const *paths, size_t n, const ssa_options *opt, ssa_partial *parts,
                      char *msg, size_t cap) {
  for (size_t i = 0; i < n; i++) {
    if (read_part(paths[i], opt->comm_rules, &parts[i], msg, cap)) return 1;
    const ssa_partial *a = &parts[0], *b = &parts[i];
    if (b->run_id != a->run_id || b->nfiles != a->nfiles || strcmp(b->dir, a->dir)) {
      snprintf(msg, cap, "%s is a part of another run than %s (run %s, %llu rank files)", paths[i],
               paths[0], b->dir, (unsigned long long)b->nfiles);
      return 1;
    }
    if (b->part_count != a->part_count) {
      snprintf(msg, cap, "%s is part %d of %d, %s part %d of %d: the parts must come from one cut",
               paths[i], b->part_index, b->part_count, paths[0], a->part_index, a->part_count);
      return 1;
    }
    for (size_t j = 0; j < i; j++)
      if (parts[j].part_index == b->part_index) {
        snprintf(msg, cap, "%s and %s are both part %d of %d", paths[j], paths[i], b->part_index,
                 b->part_count);
        return 1;
      }
  }
  if ((size_t)parts[0].part_count != n) {
    size_t k = 0;
    for (int want = 0; want < parts[0].part_count; want++) {
      int seen = 0;
      for (size_t j = 0; j < n; j++)
        seen |= parts[j].part_index == want;
      if (!seen) {
        k = (size_t)want;
        break;
      }
    }
    snprintf(msg, cap, "part %zu of %d is missing (%zu partials given)", k, parts[0].part_count, n);
    return 1;
  }
  return 0;
}

/* Moves the parts' shells, summaries, results and warnings into l, in file order, and
 * assembles the run as the loader would have. A part's ranks' results made with other
 * options than the merge's are left out: the merge reads those ranks for their metrics. */
static int assemble(ssa_partial *parts, size_t n, const ssa_options *opt, cli_loaded *l, char *msg,
                    size_t cap) {
  ssa_partial **by_part = calloc(n, sizeof *by_part);
  size_t nranks = 0, nfiles = (size_t)parts[0].nfiles;
  for (size_t i = 0; by_part && i < n; i++) {
    by_part[parts[i].part_index] = &parts[i];
    nranks += parts[i].nranks;
  }
  ssa_run *run = &l->run;
  ssa_rank_summary *by_file = calloc(nfiles, sizeof *by_file);
  ssa_rank_local *locals_by_file = calloc(nfiles, sizeof *locals_by_file);
  run->ranks = calloc(nranks ? nranks : 1, sizeof *run->ranks);
  run->dir = strdup(parts[0].dir);
  l->read_paths = calloc(nfiles, sizeof *l->read_paths);
  int rc = !by_part || !by_file || !locals_by_file || !run->ranks || !run->dir || !l->read_paths,
      refused = 0;
  if (!rc) l->nread_paths = nfiles;
  for (size_t k = 0; !rc && k < n; k++) {
    ssa_partial *p = by_part[k];
    int same_options = ssa_rank_local_options_equal(&p->made_with, opt);
    for (size_t w = 0; w < p->nwarnings && !rc; w++)
      rc = ssa_run_warn(run, "%s", p->warnings[w]) != 0;
    for (size_t i = 0; i < p->nranks && !rc; i++) {
      size_t f = p->ranks[i].file_index;
      ssa_file_stamp now; /* one that is gone is refused when the merge needs to read it */
      const char *changed =
          ssa_file_stamp_of(p->read_paths[i], &now) == 0 &&
                  (now.size != p->stamps[i].size || now.mtime_ns != p->stamps[i].mtime_ns)
              ? "changed since its partial was made"
              : NULL;
      if (l->read_paths[f] || changed) {
        if (changed)
          snprintf(msg, cap, "rank file %s %s (make the partial again)", p->read_paths[i], changed);
        else
          snprintf(msg, cap, "rank file %zu is in two parts", f);
        refused = rc = 1;
        break;
      }
      run->ranks[run->nranks++] = p->ranks[i];
      memset(&p->ranks[i], 0, sizeof p->ranks[i]);
      by_file[f] = p->summaries[i];
      memset(&p->summaries[i], 0, sizeof p->summaries[i]);
      if (same_options) {
        locals_by_file[f] = p->locals[i];
        memset(&p->locals[i], 0, sizeof p->locals[i]);
      }
      l->read_paths[f] = p->read_paths[i];
      p->read_paths[i] = NULL;
    }
  }
  free(by_part);
  stepscope_error err;
  memset(&err, 0, sizeof err);
  if (!rc && ssa_run_assemble(run, &err)) {
    snprintf(msg, cap, "%s", err.message);
    rc = 1;
  } else if (rc && !refused)
    snprintf(msg, cap, "out of memory");
  if (cli_summaries_by_rank(rc ? NULL : run, by_file, locals_by_file, nfiles, &l->summaries,
                            &l->locals) &&
      !rc) {
    snprintf(msg, cap, "out of memory");
    rc = 1;
  }
  return rc;
}

/* The run's identity and cut as its partials give them, and whether every part was made with
 * the merge's options (its ranks' results then taken). */
typedef struct parts_identity {
  uint64_t run_id, nfiles;
  int part_count, same_options;
} parts_identity;

/* Reads the n partials and assembles the run from them into l (msg[cap]: why not). */
static int open_parts(char *const *paths, size_t n, const ssa_options *opt, cli_loaded *l,
                      parts_identity *id, char *msg, size_t cap) {
  memset(l, 0, sizeof *l);
  l->have_run = 1;
  ssa_partial *parts = calloc(n ? n : 1, sizeof *parts);
  int rc = !parts;
  if (rc) snprintf(msg, cap, "out of memory");
  if (!rc) rc = read_parts(paths, n, opt, parts, msg, cap);
  if (!rc) {
    *id = (parts_identity){parts[0].run_id, parts[0].nfiles, parts[0].part_count, 1};
    for (size_t i = 0; i < n; i++)
      id->same_options &= ssa_rank_local_options_equal(&parts[i].made_with, opt);
    rc = assemble(parts, n, opt, l, msg, cap);
  }
  for (size_t i = 0; parts && i < n; i++)
    ssa_partial_free(&parts[i]);
  free(parts);
  return rc;
}

int cli_open_partials(const char *command, char *const *paths, size_t n, const ssa_options *opt,
                      cli_loaded *l, char *msg_out, size_t cap) {
  char msg[1400] = "";
  parts_identity id;
  if (open_parts(paths, n, opt, l, &id, msg, sizeof msg)) {
    snprintf(msg_out, cap, "stepscope %s: %s", command, msg);
    return 1;
  }
  cli_env env; /* the merge reads the rank files again with the importer's switches */
  cli_env_read(&env);
  env.import.op_inputs = 1; /* as `analyze` loads */
  l->import = env.import;
  return cli_analyse_loaded(command, NULL, opt, CLI_OP_INPUTS | CLI_LOW_MEMORY, l, msg_out, cap);
}

/* Writes part k's cross file in dir: the inputs x of the run's ranks whose files are in it. */
static int write_cross_part(const char *dir, const parts_identity *id, int k, const ssa_run *run,
                            const ssa_rank_cross *x, char *msg, size_t cap) {
  size_t first = ssa_part_first_file((size_t)id->nfiles, k, id->part_count),
         end = ssa_part_first_file((size_t)id->nfiles, k + 1, id->part_count), n = end - first;
  ssa_rank_cross *xs = calloc(n ? n : 1, sizeof *xs); /* shallow, by file */
  uint64_t *files = calloc(n ? n : 1, sizeof *files);
  int *ranks = calloc(n ? n : 1, sizeof *ranks);
  int rc = !xs || !files || !ranks;
  for (size_t i = 0; !rc && i < run->nranks; i++) {
    size_t f = run->ranks[i].file_index;
    if (f < first || f >= end) continue;
    xs[f - first] = x[i];
    files[f - first] = f;
    ranks[f - first] = run->ranks[i].rank;
  }
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/cross-%d-of-%d.ssx", dir, k, id->part_count);
  ssa_cross_part head = {id->run_id, id->nfiles, k, id->part_count, NULL, 0};
  ssa_out o;
  if (rc)
    snprintf(msg, cap, "out of memory");
  else if (ssa_out_open(&o, path)) {
    snprintf(msg, cap, "%.700s: %.600s", path, o.why);
    rc = 1;
  } else if (ssa_cross_write(&head, xs, files, ranks, n, &o) || ssa_out_close(&o)) {
    snprintf(msg, cap, "%.700s: %.600s", path, o.why[0] ? o.why : "cannot write");
    rc = 1;
  }
  free(xs);
  free(files);
  free(ranks);
  return rc;
}

int cli_write_cross(const char *command, char *const *paths, size_t n, const ssa_options *opt,
                    const char *dir, char *msg_out, size_t cap) {
  char msg[1400] = "";
  cli_loaded l;
  parts_identity id;
  ssa_rank_cross *x = NULL;
  int rc = open_parts(paths, n, opt, &l, &id, msg, sizeof msg);
  if (rc == 0 && !id.same_options) {
    snprintf(msg, sizeof msg,
             "--cross-out needs the options the partials were made with (--steps, --step-range, "
             "--launch-gap-us, --rank)");
    rc = 1;
  }
  struct stat st;
  if (rc == 0 && mkdir(dir, 0777) && errno != EEXIST) {
    snprintf(msg, sizeof msg, "%s: cannot make the directory (%s)", dir, strerror(errno));
    rc = 1;
  } else if (rc == 0 && (stat(dir, &st) || !S_ISDIR(st.st_mode))) {
    snprintf(msg, sizeof msg, "%s is not a directory (--cross-out DIR: the cross files go in it)",
             dir);
    rc = 1;
  }
  ssa_options with = *opt;
  with.summaries = l.summaries;
  with.rank_locals = l.locals;
  if (rc == 0 && ssa_cross_inputs(&l.run, &with, &x)) {
    snprintf(msg, sizeof msg, "out of memory");
    rc = 1;
  }
  for (int k = 0; rc == 0 && k < id.part_count; k++)
    rc = write_cross_part(dir, &id, k, &l.run, x, msg, sizeof msg);
  for (size_t i = 0; x && i < l.run.nranks; i++)
    ssa_rank_cross_free(&x[i]);
  free(x);
  cli_loaded_free(&l);
  if (rc) snprintf(msg_out, cap, "stepscope %s: %s", command, msg);
  return rc;
}
