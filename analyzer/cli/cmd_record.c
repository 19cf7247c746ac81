/*
 * cmd_record.c — `stepscope record -o RUN [options] -- COMMAND...`: traces
 * any CUDA program (PyTorch under torchrun included) without code changes.
 *
 * It prepares the environment, runs the command as its child and waits:
 *   CUDA_INJECTION64_PATH  libstepscope_inject.so: CUDA calls its
 *                          InitializeInjection at cuInit (CUPTI activity)
 *   NVTX_INJECTION64_PATH  the same library: NVTX ranges, marks, payloads
 *   NCCL_PROFILER_PLUGIN   the same library's path: NCCL's profiler plugin
 *   STEPSCOPE_RUN_DIR      absolute run directory; each traced process
 *                          writes rank-%05d.trace.zst there, its rank taken
 *                          from RANK / OMPI_COMM_WORLD_RANK / SLURM_PROCID /
 *                          PMI_RANK (0 for a lone process)
 *   STEPSCOPE_RECORD_PID   the command's pid: descendants without a rank
 *                          are not traced
 *   STEPSCOPE_CONFIG_JSON  {"command": [...]} for the trace header
 * A variable already set to another library (another profiler) is left as it
 * is, with a warning: that source steps aside. The injection library is found
 * next to the executable (build tree: ../tracer/gpu/, install: ../lib/), or
 * given with --inject-lib. The run directory is created; one that already
 * holds traces is refused unless --force. Under --force the earlier run's
 * derived outputs there (export, report, viewer page: sc_run_outputs.h) are
 * removed before the command runs, and its rank files that the command did
 * not rewrite are removed after it, once it has written rank files of its own
 * (so that the directory holds one run; `view` would otherwise show the old
 * one's); a note names what went.
 *
 * Why a child and not exec(): when the command ends, record says what it
 * got (how many rank files, their ranks and size, any file that cannot be
 * read, e.g. a rank killed before its first flush) or, when nothing was
 * written, why that usually happens. A command that never touches CUDA,
 * NVTX or NCCL would otherwise leave an empty directory and no word. The
 * command's exit status is passed through, and a command killed by a signal
 * makes record die of the same signal, so shells and launchers see what they
 * would have seen without record. Like system(), record ignores SIGINT and
 * SIGQUIT while it waits (the terminal sends them to the command too) and
 * forwards SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 sent to it alone (a job
 * scheduler's) to the command. A failed exec is reported through a
 * close-on-exec pipe, so "not found" is still exit 127 with no summary.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_print.h"
#include "option_table.h"
#include "stepscope.h"
#include "sc_file.h"
#include "sc_json.h"
#include "sc_run_outputs.h"

#define INJECT_LIB_NAME "libstepscope_inject.so"

int cmd_record(int argc, char **argv);

typedef struct record_args {
  const char *run, *lib_arg;
  int no_cuda, no_nvtx, no_nccl, force, quiet;
} record_args;

#define A(f) offsetof(record_args, f)
static const cli_option record_options[] = {
    {CLI_STRING, "--output", "-o", "RUN", "run directory (created)", A(run), NULL, 0, 0, NULL},
    {CLI_STRING, "--inject-lib", NULL, "PATH",
     "the injection library (default: found next to stepscope)", A(lib_arg), NULL, 0, 0, NULL},
    {CLI_FLAG, "--no-cuda", NULL, NULL, "do not inject into CUDA (no kernels, copies, API calls)",
     A(no_cuda), NULL, 0, 0, NULL},
    {CLI_FLAG, "--no-nvtx", NULL, NULL, "do not capture NVTX", A(no_nvtx), NULL, 0, 0, NULL},
    {CLI_FLAG, "--no-nccl", NULL, NULL, "do not load the NCCL profiler plugin", A(no_nccl), NULL, 0,
     0, NULL},
    {CLI_FLAG, "--force", NULL, NULL,
     "write into a run directory holding traces (the earlier run's exports, reports and "
     "pages there, and its rank files COMMAND does not rewrite, are removed)",
     A(force), NULL, 0, 0, NULL},
    {CLI_FLAG, "--quiet", "-q", NULL, "no summary of the rank files written when COMMAND ends",
     A(quiet), NULL, 0, 0, NULL},
};

/* "--" or the first word that is not an option starts COMMAND, which is
 * passed on untouched; an option without its value is an unknown option. */
static const cli_table record_table = {
    .command = "record",
    .head = "usage: stepscope record -o RUN [options] -- COMMAND [ARGS...]\n"
            "\n"
            "Runs COMMAND with the stepscope tracer injected: CUDA activity (CUPTI), NVTX ranges\n"
            "and NCCL collectives of every process go to RUN/rank-NNNNN.trace.zst, one file per\n"
            "rank (rank from RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMI_RANK). Works with\n"
            "launchers: stepscope record -o run -- torchrun --nproc-per-node 2 train.py\n"
            "\n",
    CLI_ROWS(record_options),
    .column = 23,
    .flags = CLI_STOP_AT_ARG | CLI_MISSING_IS_UNKNOWN,
    .tail = "  -h, --help           this help\n"
            "\n"
            "When COMMAND ends, record prints (on stderr) the rank files written, their size,\n"
            "and any that cannot be read. Signals: Ctrl-C reaches COMMAND directly; SIGTERM,\n"
            "SIGHUP, SIGUSR1 and SIGUSR2 sent to record are passed on to COMMAND.\n"
            "\n"
            "Exit status: COMMAND's own (record dies of the same signal if COMMAND did);\n"
            "2 usage error; 1 set-up error; 127 COMMAND not found; 126 COMMAND not runnable.\n"};

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Finds libstepscope_inject.so next to our executable. */
static int find_inject_lib(char *out, size_t size) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return -1;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash) return -1;
  *slash = '\0';
  static const char *const candidates[] = {
      "%s/" INJECT_LIB_NAME, "%s/../tracer/gpu/" INJECT_LIB_NAME, "%s/../lib/" INJECT_LIB_NAME,
      "%s/../lib/stepscope/" INJECT_LIB_NAME, "%s/../lib64/" INJECT_LIB_NAME};
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, candidates[i], exe);
    if (file_exists(path) && realpath(path, out) && strlen(out) < size) return 0;
  }
  return -1;
}

static int holds_traces(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int found = 0;
  struct dirent *e;
  while (!found && (e = readdir(d)))
    found = strncmp(e->d_name, "rank-", 5) == 0 && strstr(e->d_name, ".trace.zst") != NULL;
  closedir(d);
  return found;
}

/* Sets `name` to `value` unless it is already set to something else. */
static void set_injection_var(const char *name, const char *value) {
  const char *old = getenv(name);
  if (old && *old && strcmp(old, value) != 0) {
    cli_print(stderr,
              "stepscope record: %s is already set to %s (another profiler?); leaving it, "
              "that source is not traced\n",
              name, old);
    return;
  }
  setenv(name, value, 1);
}

/* {"command":["a","b"]} with JSON escaping; NULL on allocation failure. */
static char *command_json(char **cmd) {
  size_t cap = 32;
  for (char **a = cmd; *a; a++)
    cap += 6 * strlen(*a) + 4;
  char *json = malloc(cap), *p = json;
  if (!json) return NULL;
  p += sprintf(p, "{\"command\":[");
  for (char **a = cmd; *a; a++) {
    if (a != cmd) *p++ = ',';
    size_t at = (size_t)(p - json);
    sc_json_string_buf(json, cap, &at, *a, 0); /* fits: cap holds 6 bytes per byte */
    p = json + at;
  }
  strcpy(p, "]}");
  return json;
}

/* Where the signals we forward go (the command's pid once it runs). */
static volatile sig_atomic_t command_pid;

static void forward_signal(int sig) {
  if (command_pid > 0) kill((pid_t)command_pid, sig);
}

/* Runs `command` as a child with STEPSCOPE_RECORD_PID set to its own pid and
 * waits for it, forwarding signals (see the top of the file). 0 with the
 * wait status in *status; 126/127 when it could not be run (said why); 1 when
 * no child could be made. */
static int run_command(char **command, int *status) {
  int report[2]; /* exec failure: the child writes its errno here */
  if (pipe2(report, O_CLOEXEC) != 0) {
    cli_print(stderr, "stepscope record: cannot create a pipe: %s\n", strerror(errno));
    return 1;
  }
  fflush(NULL);
  struct sigaction ignore = {0}, forward = {0}, old_int, old_quit;
  ignore.sa_handler = SIG_IGN;
  forward.sa_handler = forward_signal;
  sigemptyset(&ignore.sa_mask);
  sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  pid_t pid = fork();
  if (pid < 0) {
    cli_print(stderr, "stepscope record: cannot start %s: %s\n", command[0], strerror(errno));
    return 1;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    char self[32];
    snprintf(self, sizeof self, "%ld", (long)getpid());
    setenv("STEPSCOPE_RECORD_PID", self, 1);
    close(report[0]);
    execvp(command[0], command);
    int e = errno;
    ssize_t unused = write(report[1], &e, sizeof e);
    (void)unused;
    _exit(e == ENOENT ? 127 : 126);
  }
  command_pid = pid;
  static const int forwarded[] = {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
  for (size_t k = 0; k < sizeof forwarded / sizeof forwarded[0]; k++)
    sigaction(forwarded[k], &forward, NULL);
  close(report[1]);
  int exec_errno = 0;
  ssize_t got;
  do
    got = read(report[0], &exec_errno, sizeof exec_errno);
  while (got < 0 && errno == EINTR);
  close(report[0]);
  pid_t w;
  do
    w = waitpid(pid, status, 0);
  while (w < 0 && errno == EINTR);
  if (got == (ssize_t)sizeof exec_errno) {
    cli_print(stderr, "stepscope record: cannot run %s: %s\n", command[0], strerror(exec_errno));
    return exec_errno == ENOENT ? 127 : 126;
  }
  if (w < 0) {
    cli_print(stderr, "stepscope record: lost track of %s: %s\n", command[0], strerror(errno));
    return 1;
  }
  return 0;
}

/* Exits the way the command did: its exit code, or death by its signal. */
static int pass_status_on(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    fflush(NULL);
    signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    raise(sig);
    return 128 + sig; /* a signal that does not terminate (cannot happen here) */
  }
  return 1;
}

/* What a rank file looked like before the command ran (--force into a run
 * directory that already holds traces): a file that still looks the same
 * afterwards was not written by this command. Compared by identity, size and
 * modification time, not by clocks (file times are coarser than ours). */
typedef struct file_snapshot {
  char **paths;
  struct stat *st;
  size_t count;
} file_snapshot;

static void snapshot_take(const char *run, file_snapshot *snap) {
  stepscope_error err;
  memset(snap, 0, sizeof *snap);
  if (stepscope_run_files(run, &snap->paths, &snap->count, &err) != 0 || snap->count == 0) return;
  snap->st = calloc(snap->count, sizeof *snap->st);
  if (!snap->st) return;
  for (size_t k = 0; k < snap->count; k++)
    if (stat(snap->paths[k], &snap->st[k]) != 0) snap->st[k].st_ino = 0;
}

static int snapshot_unchanged(const file_snapshot *snap, const char *path, const struct stat *now) {
  if (!snap->st) return 0;
  for (size_t k = 0; k < snap->count; k++) {
    if (strcmp(snap->paths[k], path) != 0) continue;
    const struct stat *was = &snap->st[k];
    return was->st_ino == now->st_ino && was->st_dev == now->st_dev &&
           was->st_size == now->st_size && was->st_mtim.tv_sec == now->st_mtim.tv_sec &&
           was->st_mtim.tv_nsec == now->st_mtim.tv_nsec;
  }
  return 0;
}

static void snapshot_free(file_snapshot *snap) {
  stepscope_run_files_free(snap->paths, snap->count);
  free(snap->st);
}

/* --force: the earlier run's rank files that the command left as they were are removed
 * once it has written rank files of its own (the directory then holds one run); when it
 * wrote none, the earlier run stays whole. Says what it removed. */
static void remove_stale_ranks(const char *run, const file_snapshot *before) {
  stepscope_error err;
  char **paths = NULL;
  size_t count = 0, written = 0, removed = 0;
  if (stepscope_run_files(run, &paths, &count, &err) != 0) return;
  unsigned char *stale = calloc(count ? count : 1, 1);
  for (size_t k = 0; stale && k < count; k++) {
    struct stat st;
    if (stat(paths[k], &st) != 0) continue;
    if (snapshot_unchanged(before, paths[k], &st))
      stale[k] = 1;
    else
      written++;
  }
  for (size_t k = 0; stale && written && k < count; k++)
    removed += stale[k] && unlink(paths[k]) == 0;
  if (removed)
    fprintf(stderr,
            "stepscope record: --force: removed %zu rank file%s of the earlier run that the "
            "command did not write\n",
            removed, removed == 1 ? "" : "s");
  free(stale);
  stepscope_run_files_free(paths, count);
}

/* Prints what the command wrote to the run directory: rank files, their ranks
 * and total size, and every file that cannot be opened as a trace (a rank
 * killed before its first flush, a disk that filled). Files the command left
 * as they were in `before` (an earlier run's, under --force) are only
 * counted. Only each file's first frame is read. */
static void summarize_run(const char *run, const char *command, const file_snapshot *before) {
  stepscope_error err;
  char **paths = NULL;
  size_t count = 0;
  if (stepscope_run_files(run, &paths, &count, &err) != 0) {
    cli_print(stderr, "stepscope record: cannot list %s: %s\n", run, err.message);
    return;
  }
  uint64_t bytes = 0;
  size_t readable = 0, stale = 0;
  int32_t lo = INT32_MAX, hi = INT32_MIN;
  for (size_t k = 0; k < count; k++) {
    struct stat st;
    if (stat(paths[k], &st) != 0) continue;
    if (snapshot_unchanged(before, paths[k], &st)) {
      stale++;
      continue;
    }
    bytes += (uint64_t)st.st_size;
    stepscope_reader *r = stepscope_reader_open(paths[k], &err);
    if (!r) {
      cli_print(stderr, "stepscope record: warning: %s\n", err.message);
      continue;
    }
    int32_t rank = (int32_t)stepscope_reader_header(r)->rank;
    lo = rank < lo ? rank : lo;
    hi = rank > hi ? rank : hi;
    readable++;
    stepscope_reader_close(r);
  }
  char ranks[64] = "";
  if (readable) {
    if (lo == hi)
      snprintf(ranks, sizeof ranks, ", rank %d", (int)lo);
    else
      snprintf(ranks, sizeof ranks, ", ranks %d-%d", (int)lo, (int)hi);
  }
  size_t written = count - stale;
  if (written == 0) {
    cli_print(stderr,
              "stepscope record: no trace was written to %s. A process is traced once it calls\n"
              "  CUDA, NVTX or NCCL, if it has a rank variable (RANK, OMPI_COMM_WORLD_RANK,\n"
              "  SLURM_PROCID, PMI_RANK) or is %s itself; did it use the GPU?\n",
              run, command);
    stepscope_run_files_free(paths, count);
    return;
  }
  cli_print(stderr, "stepscope record: %zu trace file%s written to %s (%.*f %s%s)", written,
            written == 1 ? "" : "s", run, bytes < 1000000 ? 0 : 1,
            bytes < 1000000 ? (double)bytes / 1e3 : (double)bytes / 1e6,
            bytes < 1000000 ? "kB" : "MB", ranks);
  if (readable < written) cli_print(stderr, "; %zu cannot be read (above)", written - readable);
  if (stale)
    cli_print(stderr, "; %zu older file%s left from an earlier run", stale, stale == 1 ? "" : "s");
  cli_print(stderr, "\n  next: stepscope analyze %s\n", run);
  stepscope_run_files_free(paths, count);
}

int cmd_record(int argc, char **argv) {
  record_args x;
  memset(&x, 0, sizeof x);
  int i = argc;
  int parsed = cli_parse(&record_table, argc, argv, &x, &i);
  if (parsed != CLI_PARSED) return parsed;
  const char *run = x.run;
  if (!run || i >= argc) {
    cli_print(stderr, "stepscope record: %s\n", !run ? "-o RUN is required" : "no command given");
    cli_usage(stderr, &record_table);
    return 2;
  }
  char **command = &argv[i];

  char lib[PATH_MAX];
  if (x.lib_arg) {
    if (!realpath(x.lib_arg, lib) || !file_exists(lib)) {
      cli_print(stderr, "stepscope record: injection library %s: %s\n", x.lib_arg,
                strerror(errno ? errno : ENOENT));
      return 1;
    }
  } else if (find_inject_lib(lib, sizeof lib) != 0) {
    cli_print(stderr,
              "stepscope record: cannot find %s next to this executable; build it with "
              "`cmake --build build --target stepscope_inject` (it needs the CUDA toolkit's "
              "CUPTI to trace CUDA), or give its path with --inject-lib PATH\n",
              INJECT_LIB_NAME);
    return 1;
  }
  if (sc_mkdir_p(run, 0777) != 0) {
    cli_print(stderr, "stepscope record: cannot create run directory %s: %s\n", run,
              strerror(errno));
    return 1;
  }
  if (holds_traces(run) && !x.force) {
    cli_print(stderr,
              "stepscope record: %s already holds traces; use another directory or --force\n", run);
    return 1;
  }
  char run_abs[PATH_MAX];
  if (!realpath(run, run_abs)) {
    cli_print(stderr, "stepscope record: %s: %s\n", run, strerror(errno));
    return 1;
  }
  if (!x.no_cuda) set_injection_var("CUDA_INJECTION64_PATH", lib);
  if (!x.no_nvtx) set_injection_var("NVTX_INJECTION64_PATH", lib);
  if (!x.no_nccl) set_injection_var("NCCL_PROFILER_PLUGIN", lib);
  setenv("STEPSCOPE_RUN_DIR", run_abs, 1);
  char *config = command_json(command);
  if (config) {
    setenv("STEPSCOPE_CONFIG_JSON", config, 1);
    free(config);
  }
  if (x.force) {
    char removed[600], failed[600];
    if (sc_remove_derived_outputs(run_abs, removed, sizeof removed, failed, sizeof failed))
      cli_print(stderr,
                "stepscope record: --force: removed the earlier run's derived outputs %s (stale "
                "now)\n",
                removed);
    if (failed[0])
      cli_print(stderr, "stepscope record: --force: could not remove %s (stale)\n", failed);
  }
  file_snapshot before = {0};
  if (!x.quiet || x.force) snapshot_take(run_abs, &before);
  int status;
  int rc = run_command(command, &status);
  if (rc == 0 && x.force) remove_stale_ranks(run_abs, &before);
  if (rc == 0 && !x.quiet) summarize_run(run_abs, command[0], &before);
  snapshot_free(&before);
  return rc ? rc /* could not start it (said why) */ : pass_status_on(status);
}
