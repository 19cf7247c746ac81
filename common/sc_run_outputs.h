/*
 * sc_run_outputs.h — stepscope's outputs that are derived from a run directory's rank
 * files and lie beside them (an export, a report, a viewer page): how to tell them from
 * anything else there, so that writing a new run over an old one (`stepscope-train
 * --trace DIR --force`, `stepscope record --force`) removes the results of the old one
 * instead of leaving them to be served as the new run's.
 *
 * Told by their first bytes (and their name's ending), never by name alone, so a user's
 * file of the same name, a PyTorch trace or a symbolic link is never taken for one:
 *   *.json          an export ({"traceEvents":[ then {"ph":"M" on the next line, as the
 *                   exporter begins), a report ("generator":"stepscope ...), a
 *                   comparison ("kind":"stepscope.diff...) in the first bytes
 *   *.json.gz,      gzip as the exporter's writer makes it: zlib at its fastest level,
 *   *.pftrace.gz    no name, no time, Unix (RFC 1952 header 1f 8b 08 00 00000000 04 03;
 *                   Python's gzip, PyTorch's, says OS 255 and sets the time)
 *   *.pftrace       a Perfetto export: its first packet describes the track "rank N (...)"
 *   *.html          a page of `stepscope view --html` (the viewer's own first comment)
 * A prediction of `stepscope plan --json` is not derived from the run (it is an input of
 * `stepscope diff RUN PREDICTION`): it is kept.
 */
#ifndef SC_RUN_OUTPUTS_H
#define SC_RUN_OUTPUTS_H

#include <stddef.h>

/* What the regular file `path` is when it is such an output ("export", "report",
 * "comparison", "Perfetto export", "viewer page"), else NULL (also for a symbolic link
 * or a file that cannot be read). */
const char *sc_derived_output_kind(const char *path);

/* Removes every such output directly in `dir`. Their names go to `removed`, separated by
 * ", " (cut with "..." when they do not fit). Returns how many were removed; those that
 * could not be removed are named in `failed` the same way. */
size_t sc_remove_derived_outputs(const char *dir, char *removed, size_t removed_len, char *failed,
                                 size_t failed_len);

#endif
