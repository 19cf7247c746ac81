/*
 * trace_dir.c — refuses a --trace directory that already holds traces
 * (trace_dir.h), as `stepscope record` refuses its run directory.
 *
 * Writing a run over an earlier one truncates the rank files both have and
 * leaves the others: a world-4 run followed by a world-2 run gives a
 * directory whose ranks disagree. So a directory holding any
 * rank-*.trace.zst is refused unless --force (then the earlier rank files
 * this run will not write are removed, so the directory holds one run, and
 * so are the earlier run's derived outputs — export, report, viewer page,
 * told by content: common/sc_run_outputs.h — which `stepscope view` would
 * otherwise serve as this run's; a note names what went).
 *
 * Under an outside launcher the ranks start at once and create their files
 * while the others check, so each rank looks only at what no rank of this
 * job creates before it checks: its own file, and (rank 0) files of ranks
 * beyond the world.
 *
 * A --trace that cannot be written (a file of that name, a read-only
 * directory) is refused before training too (trace_dir_prepare): the tracer
 * would only find out at its start, and a run that was asked for a trace
 * must not end without one.
 */
#include "trace_dir.h"

#include "sc_file.h"
#include "sc_run_outputs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The rank of a rank-NNNNN.trace.zst name, or -1. */
static int rank_of(const char *name) {
  int rank, len = 0;
  if (sscanf(name, "rank-%d.trace.zst%n", &rank, &len) == 1 && len > 0 && name[len] == '\0' &&
      rank >= 0)
    return rank;
  return -1;
}

/* --force: what was removed, for the note (empty when nothing was). */
static void force_note(char *note, size_t note_len, const char *dir, int world, int ranks_removed,
                       size_t outputs_removed, const char *outputs, const char *outputs_failed) {
  char ranks[96] = "", rest[1200] = "";
  if (ranks_removed)
    snprintf(ranks, sizeof ranks, "%d rank file%s of ranks beyond --world %d", ranks_removed,
             ranks_removed == 1 ? "" : "s", world);
  if (outputs_removed)
    snprintf(rest, sizeof rest, "%sthe earlier run's derived output%s %s (stale now)",
             ranks_removed ? " and " : "", outputs_removed == 1 ? "" : "s", outputs);
  note[0] = '\0';
  if (ranks_removed || outputs_removed)
    snprintf(note, note_len, "--force: removed from %s %s%s", dir, ranks, rest);
  if (outputs_failed[0]) {
    size_t used = strlen(note);
    snprintf(note + used, note_len - used, "%scould not remove %s (stale)", used ? "; " : "",
             outputs_failed);
  }
}

int trace_dir_check(const char *dir, int world, int rank, int force, char *note, size_t note_len,
                    char *err, size_t n) {
  if (note_len) note[0] = '\0';
  DIR *d = opendir(dir);
  if (!d) return 0; /* created later, empty */
  int found = -1, count = 0, ranks_removed = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int r = rank_of(e->d_name);
    if (r < 0) continue;
    if (rank >= 0 && r != rank && !(rank == 0 && r >= world))
      continue; /* another rank of this job may be writing it right now */
    if (force) {
      if (r >= world) { /* an earlier, larger run's rank: not this run's */
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ranks_removed += unlink(path) == 0;
      }
      continue;
    }
    if (found < 0) found = r;
    count++;
  }
  closedir(d);
  if (force && rank <= 0) { /* the whole job, or its rank 0 */
    char outputs[600], failed[600];
    size_t removed = sc_remove_derived_outputs(dir, outputs, sizeof outputs, failed, sizeof failed);
    force_note(note, note_len, dir, world, ranks_removed, removed, outputs, failed);
  }
  if (count == 0) return 0;
  snprintf(err, n,
           "--trace %s already holds traces (rank-%05d.trace.zst%s); use another directory, "
           "or --force to write over them",
           dir, found, count > 1 ? " and others" : "");
  return -1;
}

int trace_dir_prepare(const char *dir, char *err, size_t n) {
  struct stat st;
  if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
    snprintf(err, n, "--trace %s: exists and is not a directory", dir);
    return -1;
  }
  if (sc_mkdir_p(dir, 0755) != 0) {
    snprintf(err, n, "--trace %s: cannot create the directory: %s", dir, strerror(errno));
    return -1;
  }
  if (access(dir, W_OK | X_OK) != 0) {
    snprintf(err, n, "--trace %s: cannot write into it: %s", dir, strerror(errno));
    return -1;
  }
  return 0;
}
