/*
 * view.h — the parts of `stepscope view` (internal to the command).
 *
 *   view_run.c    what a run is for the viewer: its directory, its trace export
 *                 and report, generated on demand by `stepscope export/analyze`
 *   view_validate.c  whether an export or report found in a run is whole
 *   view_paths.c  request-path decoding and the checks that keep requests inside
 *                 the viewer's assets and the run directories
 *   view_http.c   the small read-only HTTP/1.1 server (GET and HEAD only)
 *   view_html.c   `--html`: one self-contained page with the viewer and the data
 *   cmd_view.c    the command line
 */
#ifndef STEPSCOPE_VIEW_H
#define STEPSCOPE_VIEW_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#include "stepscope.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* The most bytes a browser holds in one string (Chromium: about 512 MiB): a report is parsed as
 * one, so a larger one cannot be shown. */
#define VIEW_STRING_MAX (512ull << 20)
/* A heatmap page (a run without a timeline) opens in a few seconds at 16,384 ranks: a report
 * over this is left out of it (the browser parses a report whole, at roughly 100-200 MB/s; that
 * run's report is about 1 GB), the heatmap carrying its per-rank steps and verdict. */
#define VIEW_HEATMAP_REPORT_MAX (64ull << 20)

typedef struct view_run {
  char id[4];             /* "a" (the run) or "b" (the --compare run) */
  char name[256];         /* shown in the page: the directory's base name */
  char dir[PATH_MAX];     /* real path of the run directory */
  char gen_dir[PATH_MAX]; /* where generated files went ("" when none) */
  char trace_name[256];   /* file name of the export ("" when none) */
  char report_name[256];  /* file name of the report ("" when none) */
  char diff_name[64];     /* run "b": the `stepscope diff A B --json` file ("" when none) */
  char modules_name[64];  /* a PyTorch run's `stepscope ops --by module --json` file and */
  char memory_name[64];   /* its `ops --memory --json` file ("" when none; both generated) */
  char heatmap_name[64];  /* the `stepscope analyze --heatmap` file, always generated ("" when
                             none): the ranks x steps heatmap, the page's view of a run whose
                             timeline is too large */
  char source[PATH_MAX];  /* what `export`/`analyze`/`diff` read: the run directory, the
                             one rank file given, or "" when there are no rank traces */
  int pytorch;            /* source holds PyTorch profiler (Kineto) traces */
  int quiet;              /* no progress lines; of the generated commands' output, only
                             what they say about data lost (DATA LOST lines) */
  stepscope_inflate_limits inflate; /* how far a gzip export or trace may inflate */
  int trace_generated;              /* trace_name / report_name lie in gen_dir, not in dir */
  int report_generated;
  int export_failed;              /* view ran `stepscope export` and it refused (over --max-size)
                                     or failed: the page has no timeline */
  char export_why[600];           /* what the export said when it failed (its last line) */
  char missing[512];              /* human-readable list of what is missing */
  char notes[1024];               /* what was generated, or why not */
  const char *const *export_args; /* more arguments of the `export` it runs (--ranks,
                                     --max-size), NULL-terminated; NULL: none */
} view_run;

/* The signal (SIGTERM, SIGHUP, SIGINT) that asked view to stop while it was
 * generating a run's files (0: none): the command being run is stopped, its
 * files are removed, and view then dies of the same signal. */
extern volatile sig_atomic_t view_stop_signal;
void view_catch_stop_signals(void);
/* Removes the runs' generated files and, when a stop signal came, dies of it. */
void view_runs_close_all(view_run *runs, int nruns);

/* Opens RUN (a run directory, a stepscope export, or one rank file): finds or
 * generates the export and the report. quiet: no progress lines on stderr.
 * inflate: the decompression limits (cli_env.h; NULL: the defaults), which the
 * commands view runs take from the same environment. export_args: more arguments of the
 * export it generates (NULL-terminated, or NULL); with `ranks` set (view --ranks) an export
 * found in RUN (of every rank) is not used: it is generated for those ranks.
 * Returns 0, or -1 with a message in err when RUN is unusable. */
int view_run_open(view_run *run, const char *id, const char *arg, const char *self_exe, int quiet,
                  const stepscope_inflate_limits *inflate, const char *const *export_args,
                  int ranks, char *err, size_t errlen);

/* Whether the export view would run for the run (its export_args: --max-size, --ranks) is
 * over --max-size, told from its rank files' record counts before any event is loaded
 * (view_size.c): 1 with the refusal, as the export words it, in why[len]; 0 when it fits or
 * the count cannot tell exactly (the export then decides, as it always does). */
int view_export_refused(const view_run *run, char *why, size_t len);

/* Run b of a comparison: writes `stepscope diff A B --json` into b's generated files
 * (the Compare view shows its findings and verdicts); notes why when it cannot. */
void view_run_diff(view_run *b, const view_run *a, const char *self_exe);

/* Whether an export (is_report 0) or a report (1) at path is whole; if not,
 * 0 with the reason in why ("is empty ...", "is not valid JSON ..."). A gzip
 * export is inflated to its end, at most to the limit `inflate` gives it. */
int view_file_is_whole(const char *path, int is_report, const stepscope_inflate_limits *inflate,
                       char *why, size_t n);
/* Removes generated files. */
void view_run_close(view_run *run);

/* The files a run gives the page, by kind: the export, the report, the diff (run b), a
 * PyTorch run's module tree and memory timeline, the heatmap. view_file_kinds names them in
 * the page (data-ID-KIND elements, /api/runs keys). */
enum { VIEW_TRACE, VIEW_REPORT, VIEW_DIFF, VIEW_MODULES, VIEW_MEMORY, VIEW_HEATMAP, VIEW_NFILES };
extern const char *const view_file_kinds[VIEW_NFILES];
/* The run's file of that kind ("" when none). */
const char *view_run_file_name(const view_run *run, int kind);
/* Whether that file lies in the generated files rather than the run directory. */
int view_run_file_generated(const view_run *run, int kind);

/* Decodes a request target's path: strips the query, percent-decodes, and
 * refuses (returns -1) anything that is not an absolute path of printable
 * characters without "..", "." or empty segments, backslashes or NUL. */
int view_path_decode(const char *target, char *out, size_t outlen);

/* 1 when name is one safe file-name segment ([A-Za-z0-9._-], not starting with '.'). */
int view_name_is_safe(const char *name);

/* Resolves dir/name and checks that the real path is a regular file inside the
 * real directory dir (a symbolic link is refused, never followed). 0 or -1. */
int view_file_inside(const char *dir, const char *name, char *resolved, size_t len);

/* Finds a run's file by name: in the run directory, then in its generated files. */
int view_run_file(const view_run *run, const char *name, char *resolved, size_t len);

/* Serves until SIGINT/SIGTERM/SIGHUP. Prints the URL on out. Returns 0 or 1 (error on stderr). */
int view_serve(view_run *runs, int nruns, const char *bind_addr, int port, FILE *out);

/* Writes the self-contained page (a .json.gz export is inflated into it).
 * Returns 0 with one line saying what was written (files used, ranks and step
 * time from the report) in summary, or -1 with a message in err. */
int view_write_html(const view_run *runs, int nruns, const char *path, char *summary,
                    size_t summary_len, char *err, size_t errlen);

/* Whether the page's data (the exports and reports it would inline, uncompressed; a .gz
 * export counts as unknown) fits `limit` bytes (0: no limit): 0, or -1 with the refusal in
 * err (the size, and --ranks / --max-size). Chromium holds at most ~512 MiB in one string:
 * a page over that opens empty. */
int view_html_check_size(const view_run *runs, int nruns, uint64_t limit, char *err, size_t errlen);

/* Leaves a run's report out of the page when a heatmap stands in for it and it is over `limit`
 * bytes (0: no limit): the report alone (whole_page 0: a served report is parsed as one string),
 * or the page's data with it (1: an --html page). Says so in the run's notes. */
void view_fit_reports(view_run *runs, int nruns, uint64_t limit, int whole_page);

/* Adds a note to the run's notes (shown in the page), terminal-safe. */
void view_run_note(view_run *run, const char *text);

/* The JSON listing of runs served at /api/runs (malloc'ed; NULL on allocation failure). */
char *view_runs_json(const view_run *runs, int nruns, int for_inline);

#endif
