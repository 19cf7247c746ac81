/*
 * view_run.c — what one run is for the viewer.
 *
 * A run is a directory, or one file of it: a stepscope export (whose directory
 * is used for the report), or one rank trace. What the directory holds is
 * decided by run_discovery.c, as for every other command: the viewer needs the
 * Chrome-trace export (`stepscope export`'s, told by its marker, preferably
 * trace.json) and the JSON report (preferably report.json). When only the raw
 * per-rank traces are there (rank-*.trace.zst, or PyTorch profiler traces of
 * any name run_discovery.c accepts — a Kineto trace.json.gz among them), the
 * missing files are produced by running this same executable's `export` and
 * `analyze --json` commands into a private temporary directory (the run
 * directory is never written). An export or report of the directory that is
 * older than its newest rank file was made from an earlier run (a run written
 * over with --force): it is not used but regenerated the same way, with a note.
 * When that is not possible, `missing` and `notes` say what is absent and why,
 * and the page shows it.
 */
#include "view.h"

#include "cli_print.h"
#include "ssa_import.h"
#include "ssa_io.h"
#include "sc_json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Appends `text` to a list of notes ("a; b"), terminal-safe: the notes are also printed. */
static void append(char *buf, size_t len, const char *text) {
  size_t n = strlen(buf);
  if (n && n + 2 < len) {
    buf[n++] = ';';
    buf[n++] = ' ';
    buf[n] = '\0';
  }
  if (n < len) sc_text_safe(text, buf + n, len - n);
}

/* Copies src into dst[cap], truncating; no format-truncation games. */
static void copy_text(char *dst, size_t cap, const char *src) {
  size_t l = strlen(src);
  if (l >= cap) l = cap - 1;
  memcpy(dst, src, l);
  dst[l] = '\0';
}

/* `path` relative to the directory `from` (both absolute real paths): "b/c",
 * "../d" or ".". What view generates names its inputs so: the page never carries
 * where the run lies on this machine (issue 34 defect 11), only the run's name. */
static void relative_to(const char *from, const char *path, char *out, size_t n) {
  size_t i = 0, common = 0, used = 0;
  for (; from[i] && from[i] == path[i]; i++)
    if (from[i] == '/') common = i;
  if (!from[i] && (path[i] == '/' || !path[i])) common = i; /* from holds path */
  out[0] = '\0';
  for (const char *p = from + common; *p; p++) /* one ".." per component of from left */
    if (*p == '/' && p[1] && used + 4 < n) used += (size_t)snprintf(out + used, n - used, "../");
  const char *rest = path + common + (path[common] == '/');
  if (!*rest && used) out[--used] = '\0'; /* "../" -> ".." */
  snprintf(out + used, n - used, "%s", *rest || used ? rest : ".");
}

/* The directory a run's generated commands run in: its directory's parent, so
 * that the run is named by its base name. */
static void run_parent(const view_run *run, char *out, size_t n) {
  copy_text(out, n, run->dir);
  char *slash = strrchr(out, '/');
  if (slash) slash[slash == out] = '\0'; /* "/a/b" -> "/a", "/a" -> "/" */
}

/* Whether this DATA LOST text was shown already (by an earlier command of this
 * view: export, analyze and diff each say it); remembers it when not. */
static int loss_said(const char *text) {
  static char said[4096];
  static size_t used;
  if (strstr(said, text)) return 1;
  size_t n = strlen(text);
  if (used + n + 2 < sizeof said) {
    memcpy(said + used, text, n);
    said[used + n] = '\n'; /* one per line: a text never matches across two */
    used += n + 1;
    said[used] = '\0';
  }
  return 0;
}

/* Prints the log's lines on stderr: all of them (`all`), or only what a
 * command says about data lost with a damaged trace (as `analyze` prints it
 * first), each once, with the run's name (who; NULL: not one run's). Keeps its
 * last non-empty line, terminal-safe, in last[n] (NULL: not kept). */
static void pass_log_on(const char *log, int all, const char *who, char *last, size_t n) {
  FILE *f = fopen(log, "r");
  char line[1024];
  while (f && fgets(line, sizeof line, f)) {
    size_t end = strcspn(line, "\n");
    if (last && end) {
      char newline = line[end];
      line[end] = '\0';
      sc_text_safe(line, last, n);
      line[end] = newline;
    }
    char *loss = strstr(line, "DATA LOST: ");
    size_t len = loss ? strcspn(loss, "\n") : 0;
    char after = loss ? loss[len] : 0; /* the newline, put back for `all` */
    if (loss) loss[len] = '\0';
    int said = loss && loss_said(loss);
    if (all) {
      if (loss) loss[len] = after;
      fputs(line, stderr);
    } else if (loss && !said) {
      cli_print(stderr, "stepscope view: %s%s%s\n", who ? who : "", who ? ": " : "", loss);
    }
  }
  if (f) fclose(f);
  unlink(log);
}

/* Runs `self_exe argv...` in the directory cwd, returns its exit status (or -1).
 * Its stdout (a text report, when there is one) and stderr go to two logs in the
 * private directory; then, on stderr (our stdout carries the URL): both logs when
 * it failed; when it succeeded, its stderr (quiet, view --html: only its DATA
 * LOST lines), and the DATA LOST lines of its stdout, unless said before. The last line
 * it wrote on stderr goes to said[n] (NULL: not kept). */
static int run_self(const view_run *run, const char *self_exe, const char *cwd, char *const argv[],
                    char *said, size_t n) {
  char out_log[PATH_MAX + 32], err_log[PATH_MAX + 32];
  snprintf(out_log, sizeof out_log, "%s/%s.out.log", run->gen_dir, argv[1]);
  snprintf(err_log, sizeof err_log, "%s/%s.err.log", run->gen_dir, argv[1]);
  if (view_stop_signal) return -1; /* asked to stop: nothing more is started */
  int outfd = open(out_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int errfd = open(err_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  pid_t pid = outfd >= 0 && errfd >= 0 ? fork() : -1;
  if (pid == 0) {
    dup2(outfd, 1);
    dup2(errfd, 2);
    if (chdir(cwd) == 0) execv(self_exe, argv);
    _exit(127);
  }
  if (outfd >= 0) close(outfd);
  if (errfd >= 0) close(errfd);
  int status = 0, rc = -1, stopped = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      pid = -1;
    else if (view_stop_signal && !stopped) /* it removes its temporary files and ends */
      stopped = kill(pid, SIGTERM) == 0;
  }
  if (pid > 0) rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const char *who = strcmp(argv[1], "diff") ? run->name : NULL;
  pass_log_on(err_log, rc != 0 || !run->quiet, who, said, n);
  pass_log_on(out_log, rc != 0, who, NULL, 0);
  return rc;
}

volatile sig_atomic_t view_stop_signal = 0;

static void on_stop_signal(int sig) {
  view_stop_signal = sig;
}

void view_catch_stop_signals(void) {
  static const int sigs[] = {SIGTERM, SIGHUP, SIGINT};
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = on_stop_signal; /* no SA_RESTART: waitpid returns EINTR */
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction(sigs[i], &act, NULL);
}

void view_runs_close_all(view_run *runs, int nruns) {
  for (int k = 0; k < nruns; k++)
    view_run_close(&runs[k]);
  if (view_stop_signal) {
    signal(view_stop_signal, SIG_DFL);
    raise(view_stop_signal);
  }
}

static int ensure_gen_dir(view_run *run) {
  if (run->gen_dir[0]) return 0;
  const char *tmp = getenv("TMPDIR");
  snprintf(run->gen_dir, sizeof run->gen_dir, "%s/stepscope-view-XXXXXX",
           tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(run->gen_dir)) {
    run->gen_dir[0] = '\0';
    return -1;
  }
  char real[PATH_MAX];
  if (realpath(run->gen_dir, real)) copy_text(run->gen_dir, sizeof run->gen_dir, real);
  return 0;
}

/* `stepscope analyze` of the run into the generated files: the report (want_report) and always
 * the heatmap; in bounded memory when the run's timeline was refused. */
static void analyze_into(view_run *run, const char *self_exe, const char *cwd, char *source,
                         int want_report) {
  char report[PATH_MAX + 32], heatmap[PATH_MAX + 32], msg[256];
  snprintf(report, sizeof report, "%s/report.json", run->gen_dir);
  snprintf(heatmap, sizeof heatmap, "%s/heatmap.json", run->gen_dir);
  /* its text report goes to a log: only its DATA LOST line is shown. A run whose timeline
   * was refused (thousands of ranks) is analysed in bounded memory (--low-memory, docs/scale.md:
   * the heatmap's data is all there; the report names what it leaves out) */
  char *argv[10] = {(char *)"stepscope", (char *)"analyze", source, (char *)"--heatmap", heatmap};
  int n = 5, low_memory = run->export_failed;
  if (low_memory) argv[n++] = (char *)"--low-memory";
  if (want_report) {
    argv[n++] = (char *)"--json";
    argv[n++] = report;
  }
  argv[n] = NULL;
  if (!run->quiet) cli_print(stderr, "stepscope view: analyzing %s ...\n", run->source);
  int rc = run_self(run, self_exe, cwd, argv, NULL, 0);
  if (rc == 0) {
    snprintf(run->heatmap_name, sizeof run->heatmap_name, "heatmap.json");
    if (want_report) {
      snprintf(run->report_name, sizeof run->report_name, "report.json");
      run->report_generated = 1;
    }
    snprintf(msg, sizeof msg, "%s generated by `stepscope analyze%s`",
             want_report ? "report.json and heatmap.json" : "heatmap.json",
             low_memory ? " --low-memory" : "");
    append(run->notes, sizeof run->notes, msg);
  } else {
    snprintf(msg, sizeof msg, "`stepscope analyze%s --heatmap` failed (exit %d)",
             want_report ? " --json" : "", rc);
    append(run->notes, sizeof run->notes, msg);
  }
}

static void generate(view_run *run, const char *self_exe, int want_trace, int want_report) {
  char out[PATH_MAX + 32], msg[256], cwd[PATH_MAX], source[PATH_MAX];
  run_parent(run, cwd, sizeof cwd);
  relative_to(cwd, run->source, source, sizeof source);
  if (ensure_gen_dir(run) != 0) {
    append(run->notes, sizeof run->notes, "could not create a temporary directory for the export");
    return;
  }
  if (want_trace && view_export_refused(run, run->export_why, sizeof run->export_why)) {
    /* over --max-size by its rank files' counts: no export loads it only to refuse it */
    cli_print(stderr, "%s\n", run->export_why);
    append(run->notes, sizeof run->notes,
           "no `stepscope export`: over --max-size by the rank files' record counts");
    run->export_failed = 1;
  } else if (want_trace) {
    snprintf(out, sizeof out, "%s/trace.json", run->gen_dir);
    /* --memory: a PyTorch trace's memory events (profile_memory=True) become counter tracks
     * of the timeline (nothing changes for a trace without them) */
    char *argv[16] = {(char *)"stepscope", (char *)"export", source, (char *)"-o", out,
                      (char *)"--memory"};
    for (int k = 0, n = 6; run->export_args && run->export_args[k] && n < 15; k++)
      argv[n++] = (char *)run->export_args[k];
    if (!run->quiet) cli_print(stderr, "stepscope view: exporting %s ...\n", run->source);
    int rc = run_self(run, self_exe, cwd, argv, run->export_why, sizeof run->export_why);
    if (rc == 0) {
      snprintf(run->trace_name, sizeof run->trace_name, "trace.json");
      run->trace_generated = 1;
      append(run->notes, sizeof run->notes, "trace.json generated by `stepscope export`");
    } else {
      snprintf(msg, sizeof msg, "`stepscope export` failed (exit %d)", rc);
      append(run->notes, sizeof run->notes, msg);
      run->export_failed = 1;
    }
  }
  /* the heatmap comes with the report; without a timeline it is what the page shows */
  if ((want_report || run->export_failed) && !view_stop_signal)
    analyze_into(run, self_exe, cwd, source, want_report);
}

/* A PyTorch run's module tree and memory timeline, for the Summary: `stepscope ops --by
 * module` and `ops --memory` as JSON into the generated files (each reads the run again, with
 * its module or memory events); a note when one fails. */
static void generate_op_tables(view_run *run, const char *self_exe) {
  static const struct {
    const char *option, *value, *file;
  } tables[2] = {{"--by", "module", "modules.json"}, {"--memory", NULL, "memory.json"}};
  char *names[2] = {run->modules_name, run->memory_name};
  char out[PATH_MAX + 32], msg[128], cwd[PATH_MAX], source[PATH_MAX];
  run_parent(run, cwd, sizeof cwd);
  relative_to(cwd, run->source, source, sizeof source);
  if (ensure_gen_dir(run) != 0) return;
  if (!run->quiet)
    cli_print(stderr, "stepscope view: reading the modules and memory of %s ...\n", run->source);
  for (int k = 0; k < 2 && !view_stop_signal; k++) {
    snprintf(out, sizeof out, "%s/%s", run->gen_dir, tables[k].file);
    char *argv[] = {(char *)"stepscope",     (char *)"ops", source,
                    (char *)"--json",        out,           (char *)tables[k].option,
                    (char *)tables[k].value, NULL};
    int rc = run_self(run, self_exe, cwd, argv, NULL, 0);
    char what[48];
    snprintf(what, sizeof what, "`stepscope ops %s%s%s`", tables[k].option,
             tables[k].value ? " " : "", tables[k].value ? tables[k].value : "");
    if (rc == 0) {
      copy_text(names[k], sizeof run->modules_name, tables[k].file);
      snprintf(msg, sizeof msg, "%s generated by %s", tables[k].file, what);
    } else {
      snprintf(msg, sizeof msg, "%s --json failed (exit %d)", what, rc);
    }
    append(run->notes, sizeof run->notes, msg);
  }
}

static int earlier(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* The newest rank file of the run (its modification time and name); 0 when it has none. */
static int newest_rank(const ssa_run_files *found, struct timespec *when, char *name, size_t n) {
  int any = 0;
  for (size_t i = 0; i < found->nfiles; i++) {
    const ssa_found_file *f = &found->files[i];
    struct stat st;
    if (!ssa_file_kind_is_rank(f->kind) || stat(f->path, &st) != 0) continue;
    if (any && !earlier(when, &st.st_mtim)) continue;
    *when = st.st_mtim;
    copy_text(name, n, f->name);
    any = 1;
  }
  return any;
}

/* Whether the directory's file `name` was last written before `when`. */
static int older_than(const view_run *run, const char *name, const struct timespec *when) {
  char path[PATH_MAX];
  struct stat st;
  if (view_file_inside(run->dir, name, path, sizeof path) != 0 || stat(path, &st) != 0) return 0;
  return earlier(&st.st_mtim, when);
}

/* Notes a file of the run directory that is not used, and why, once. */
static void note_unused(view_run *run, const char *name, const char *why) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s in the run directory %s: not used", name, why);
  append(run->notes, sizeof run->notes, msg);
  if (!run->quiet) cli_print(stderr, "stepscope view: %s: %s\n", run->dir, msg);
}

/* Whether the directory's file `name` can be shown: not a symbolic link (never
 * followed: it may lead anywhere, /etc/passwd included), a regular file, whole
 * (is_report: a report, else an export). 0 with the reason in why when not. */
static int dir_file_usable(const view_run *run, const char *name, int is_report, char *why,
                           size_t n) {
  char path[PATH_MAX + 260];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", run->dir, name);
  if (lstat(path, &st) != 0) {
    snprintf(why, n, "cannot be read (%s)", strerror(errno));
    return 0;
  }
  if (S_ISLNK(st.st_mode)) {
    snprintf(why, n, "is a symbolic link (never followed)");
    return 0;
  }
  if (view_file_inside(run->dir, name, path, sizeof path) != 0) {
    snprintf(why, n, "is not a regular file of the directory");
    return 0;
  }
  return view_file_is_whole(path, is_report, &run->inflate, why, n);
}

int view_run_open(view_run *run, const char *id, const char *arg, const char *self_exe, int quiet,
                  const stepscope_inflate_limits *inflate, const char *const *export_args,
                  int ranks, char *err, size_t errlen) {
  memset(run, 0, sizeof *run);
  snprintf(run->id, sizeof run->id, "%s", id);
  run->quiet = quiet;
  run->export_args = export_args;
  if (inflate) run->inflate = *inflate;
  char real[PATH_MAX];
  struct stat st;
  if (!realpath(arg, real) || stat(real, &st) != 0) {
    snprintf(err, errlen, "%s: %s", arg, strerror(errno));
    return -1;
  }
  const char *file = NULL;
  ssa_file_kind file_kind = SSA_FILE_SKIPPED;
  char file_why[200] = "";
  if (S_ISDIR(st.st_mode)) {
    copy_text(run->dir, sizeof run->dir, real);
  } else if (S_ISREG(st.st_mode)) {
    int gz;
    file_kind = ssa_classify_file(real, 1, &run->inflate, &gz, file_why, sizeof file_why);
    char *slash = strrchr(real, '/');
    file = slash + 1;
    if (!view_name_is_safe(file) && !ssa_file_kind_is_rank(file_kind)) {
      snprintf(err, errlen, "%s: unusual file name; give the run directory instead", arg);
      return -1;
    }
    if (file_kind == SSA_FILE_SKIPPED) {
      snprintf(err, errlen, "%s: %s; give a run directory, a rank trace or a stepscope export", arg,
               file_why);
      return -1;
    }
    if (ssa_file_kind_is_rank(file_kind)) copy_text(run->source, sizeof run->source, real);
    *slash = '\0';
    copy_text(run->dir, sizeof run->dir, real[0] ? real : "/");
  } else {
    snprintf(err, errlen, "%s: not a directory or a file", arg);
    return -1;
  }
  const char *base = strrchr(run->dir, '/'); /* the name is printed: terminal-safe */
  sc_text_safe(base && base[1] ? base + 1 : run->dir, run->name, sizeof run->name);

  /* what the directory holds: run_discovery.c, the same judgement as every command */
  ssa_run_files found;
  stepscope_error derr;
  memset(&derr, 0, sizeof derr);
  if (ssa_run_discover(run->dir, &run->inflate, &found, &derr) != 0) {
    snprintf(err, errlen, "%s", derr.message);
    return -1;
  }
  for (size_t i = 0; i < found.nfiles; i++) /* what the page is made from: never written over */
    if (ssa_file_kind_is_rank(found.files[i].kind)) ssa_out_protect_input(found.files[i].path);
  for (size_t i = 0; i < found.nfiles && !file; i++)
    run->pytorch |= found.files[i].kind == SSA_FILE_KINETO;
  run->pytorch |= file_kind == SSA_FILE_KINETO;
  if (!file && found.nranks) copy_text(run->source, sizeof run->source, run->dir);
  if (file && file_kind == SSA_FILE_EXPORT)
    copy_text(run->trace_name, sizeof run->trace_name, file);
  if (file && file_kind == SSA_FILE_REPORT)
    copy_text(run->report_name, sizeof run->report_name, file);
  if (!file || !ssa_file_kind_is_rank(file_kind)) {
    /* one rank file given: its export and report are generated from it alone,
     * never taken from the directory (they may cover other ranks) */
    const ssa_found_file *e = ssa_run_files_find(&found, SSA_FILE_EXPORT, "trace.json");
    const ssa_found_file *r = ssa_run_files_find(&found, SSA_FILE_REPORT, "report.json");
    if (!run->trace_name[0] && e && view_name_is_safe(e->name))
      copy_text(run->trace_name, sizeof run->trace_name, e->name);
    if (!run->report_name[0] && r && view_name_is_safe(r->name))
      copy_text(run->report_name, sizeof run->report_name, r->name);
    if (!file) /* a file named like an export or a report that is not one: say so */
      for (size_t i = 0; i < found.nfiles; i++) {
        const ssa_found_file *f = &found.files[i];
        struct stat link;
        if (strcmp(f->name, "trace.json") && strcmp(f->name, "trace.json.gz") &&
            strcmp(f->name, "report.json"))
          continue;
        if (lstat(f->path, &link) == 0 && S_ISLNK(link.st_mode) &&
            !ssa_file_kind_is_rank(f->kind)) {
          if (f->kind == SSA_FILE_SKIPPED) /* else dropped below, with this note */
            note_unused(run, f->name, "is a symbolic link (never followed)");
        } else if (f->kind == SSA_FILE_KINETO && !run->trace_name[0]) {
          char msg[300];
          snprintf(msg, sizeof msg, "%s is a PyTorch profiler trace (%s): read as a rank", f->name,
                   f->why);
          append(run->notes, sizeof run->notes, msg);
        } else if (f->kind == SSA_FILE_SKIPPED) {
          note_unused(run, f->name, f->why);
        }
      }
    /* made before the newest rank file (an earlier run's, written over with --force):
     * regenerated from the ranks (below). run->source is set here only for a directory */
    struct timespec ranks_at = {0, 0};
    char newest[256], stale[400];
    if (run->source[0] && newest_rank(&found, &ranks_at, newest, sizeof newest)) {
      char *names[2] = {run->trace_name, run->report_name};
      for (int k = 0; k < 2; k++) {
        if (!names[k][0] || !older_than(run, names[k], &ranks_at)) continue;
        snprintf(stale, sizeof stale,
                 "is older than the rank file %s, so it may describe an earlier run", newest);
        note_unused(run, names[k], stale);
        names[k][0] = '\0';
      }
    }
  }
  ssa_run_files_free(&found);
  /* what was found must be a plain file of the directory and whole: a symbolic
   * link, a cut export or an empty report is dropped (and regenerated below when
   * the raw traces are there) */
  char why[160];
  char *names[2] = {run->trace_name, run->report_name};
  for (int k = 0; k < 2; k++) {
    if (!names[k][0] || dir_file_usable(run, names[k], k, why, sizeof why)) continue;
    if (k == 0 && file && file_kind == SSA_FILE_EXPORT) {
      snprintf(err, errlen, "%s %s", arg, why);
      return -1;
    }
    note_unused(run, names[k], why);
    names[k][0] = '\0';
  }

  if (ranks && run->trace_name[0] && run->source[0]) { /* an export of every rank */
    note_unused(run, run->trace_name, "holds every rank: --ranks asks for some");
    run->trace_name[0] = '\0';
  }
  if ((!run->trace_name[0] || !run->report_name[0]) && run->source[0]) {
    if (self_exe) generate(run, self_exe, !run->trace_name[0], !run->report_name[0]);
  }
  if (run->pytorch && run->source[0] && self_exe && !view_stop_signal)
    generate_op_tables(run, self_exe);
  if (!run->trace_name[0])
    append(run->missing, sizeof run->missing,
           "trace.json (run `stepscope export RUN -o RUN/trace.json`)");
  if (!run->report_name[0])
    append(run->missing, sizeof run->missing,
           "report.json (run `stepscope analyze RUN --json RUN/report.json`)");
  if (!run->trace_name[0] && !run->report_name[0]) {
    snprintf(err, errlen, "%s: no stepscope export (trace.json[.gz]) or report (report.json)%s%s",
             arg,
             run->notes[0] ? ": "
                           : ", and no rank traces to make them from (rank-*.trace.zst, or PyTorch "
                             "profiler traces *.json[.gz])",
             run->notes);
    view_run_close(run);
    return -1;
  }
  return 0;
}

void view_run_diff(view_run *b, const view_run *a, const char *self_exe) {
  if (!self_exe || !a->source[0] || !b->source[0]) {
    append(b->notes, sizeof b->notes, "no `stepscope diff` (it needs both runs' rank traces)");
    return;
  }
  if (ensure_gen_dir(b) != 0) return;
  char out[PATH_MAX + 32], adir[PATH_MAX], bdir[PATH_MAX], msg[128], cwd[PATH_MAX];
  snprintf(out, sizeof out, "%s/diff.json", b->gen_dir);
  run_parent(a, cwd, sizeof cwd);
  relative_to(cwd, a->source, adir, sizeof adir);
  relative_to(cwd, b->source, bdir, sizeof bdir);
  char *argv[] = {(char *)"stepscope",
                  (char *)"diff",
                  adir,
                  bdir,
                  (char *)"--json",
                  out,
                  (char *)"--quiet",
                  NULL};
  if (!b->quiet)
    cli_print(stderr, "stepscope view: comparing %s with %s ...\n", a->source, b->source);
  int rc = run_self(b, self_exe, cwd, argv, NULL, 0);
  if (rc == 0) {
    snprintf(b->diff_name, sizeof b->diff_name, "diff.json");
  } else {
    snprintf(msg, sizeof msg, "`stepscope diff --json` failed (exit %d)", rc);
    append(b->notes, sizeof b->notes, msg);
  }
}

void view_run_note(view_run *run, const char *text) {
  append(run->notes, sizeof run->notes, text);
}

const char *const view_file_kinds[VIEW_NFILES] = {"trace",   "report", "diff",
                                                  "modules", "memory", "heatmap"};

const char *view_run_file_name(const view_run *run, int kind) {
  switch (kind) {
  case VIEW_TRACE: return run->trace_name;
  case VIEW_REPORT: return run->report_name;
  case VIEW_DIFF: return run->diff_name;
  case VIEW_MODULES: return run->modules_name;
  case VIEW_MEMORY: return run->memory_name;
  default: return run->heatmap_name;
  }
}

int view_run_file_generated(const view_run *run, int kind) {
  switch (kind) {
  case VIEW_TRACE: return run->trace_generated;
  case VIEW_REPORT: return run->report_generated;
  default: return view_run_file_name(run, kind)[0] != '\0'; /* the others: always */
  }
}

void view_run_close(view_run *run) {
  if (!run->gen_dir[0]) return;
  DIR *d = opendir(run->gen_dir);
  if (d) {
    struct dirent *e;
    char path[PATH_MAX + 260];
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      snprintf(path, sizeof path, "%s/%s", run->gen_dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(run->gen_dir);
  run->gen_dir[0] = '\0';
}

/* ---- JSON listing */

typedef struct strbuf {
  char *p;
  size_t n, cap;
  int failed;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t len) {
  if (b->failed) return;
  if (b->n + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 1024;
    while (cap < b->n + len + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->failed = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = '\0';
}
static void sb_str(strbuf *b, const char *s) {
  sb_put(b, s, strlen(s));
}
static void sb_bytes(void *ctx, const char *bytes, size_t n) {
  sb_put(ctx, bytes, n);
}
/* HTML-safe: the literal is written into a page's <script> */
static void sb_json_string(strbuf *b, const char *s) {
  sc_json_string(s, strlen(s), SC_JSON_HTML_SAFE, sb_bytes, b);
}
static void sb_list(strbuf *b, const char *semi) {
  sb_str(b, "[");
  char tmp[1024];
  snprintf(tmp, sizeof tmp, "%s", semi);
  int first = 1;
  for (char *save = NULL, *tok = strtok_r(tmp, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
    while (*tok == ' ')
      tok++;
    if (!first) sb_str(b, ",");
    sb_json_string(b, tok);
    first = 0;
  }
  sb_str(b, "]");
}

char *view_runs_json(const view_run *runs, int nruns, int for_inline) {
  strbuf b = {0};
  sb_str(&b, "{\"runs\":[");
  for (int i = 0; i < nruns; i++) {
    const view_run *r = &runs[i];
    char ref[600];
    if (i) sb_str(&b, ",");
    sb_str(&b, "{\"id\":");
    sb_json_string(&b, r->id);
    sb_str(&b, ",\"name\":");
    sb_json_string(&b, r->name);
    for (int k = 0; k < VIEW_NFILES; k++) { /* "trace": "data-a-trace" or "run/a/trace.json" */
      const char *file = view_run_file_name(r, k);
      snprintf(ref, sizeof ref, ",\"%s\":", view_file_kinds[k]);
      sb_str(&b, ref);
      if (!file[0]) {
        sb_str(&b, "null");
        continue;
      }
      if (for_inline)
        snprintf(ref, sizeof ref, "data-%s-%s", r->id, view_file_kinds[k]);
      else
        snprintf(ref, sizeof ref, "run/%s/%s", r->id, file);
      sb_json_string(&b, ref);
    }
    sb_str(&b, ",\"no_timeline\":"); /* why the export view ran failed, or null */
    if (r->export_failed)
      sb_json_string(&b, r->export_why[0] ? r->export_why : "`stepscope export` failed");
    else
      sb_str(&b, "null");
    sb_str(&b, ",\"missing\":");
    sb_list(&b, r->missing);
    sb_str(&b, ",\"notes\":");
    sb_list(&b, r->notes);
    sb_str(&b, "}");
  }
  sb_str(&b, "]}");
  if (b.failed) {
    free(b.p);
    return NULL;
  }
  return b.p;
}
