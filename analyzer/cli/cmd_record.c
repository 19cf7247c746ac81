/*
 * cmd_record.c — `stepscope record -o RUN [options] -- COMMAND...`: traces
 * any CUDA program (PyTorch under torchrun included) without code changes.
 *
 * It only prepares the environment and exec()s the command, so the command
 * keeps record's pid, its exit status and its signals:
 *   CUDA_INJECTION64_PATH  libstepscope_inject.so: CUDA calls its
 *                          InitializeInjection at cuInit (CUPTI activity)
 *   NVTX_INJECTION64_PATH  the same library: NVTX ranges, marks, payloads
 *   NCCL_PROFILER_PLUGIN   the same library's path: NCCL's profiler plugin
 *   STEPSCOPE_RUN_DIR      absolute run directory; each traced process
 *                          writes rank-%05d.trace.zst there, its rank taken
 *                          from RANK / OMPI_COMM_WORLD_RANK / SLURM_PROCID /
 *                          PMI_RANK (0 for a lone process)
 *   STEPSCOPE_RECORD_PID   our pid: descendants without a rank are not traced
 *   STEPSCOPE_CONFIG_JSON  {"command": [...]} for the trace header
 * A variable already set to another library (another profiler) is left as it
 * is, with a warning: that source steps aside. The injection library is found
 * next to the executable (build tree: ../tracer/gpu/, install: ../lib/), or
 * given with --inject-lib. The run directory is created; one that already
 * holds traces is refused unless --force.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INJECT_LIB_NAME "libstepscope_inject.so"

int cmd_record(int argc, char **argv);

static void usage(FILE *out) {
  fprintf(out,
          "usage: stepscope record -o RUN [options] -- COMMAND [ARGS...]\n"
          "\n"
          "Runs COMMAND with the stepscope tracer injected: CUDA activity (CUPTI), NVTX ranges\n"
          "and NCCL collectives of every process go to RUN/rank-NNNNN.trace.zst, one file per\n"
          "rank (rank from RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMI_RANK). Works with\n"
          "launchers: stepscope record -o run -- torchrun --nproc-per-node 2 train.py\n"
          "\n"
          "  -o, --output RUN     run directory (created)\n"
          "  --inject-lib PATH    the injection library (default: found next to stepscope)\n"
          "  --no-cuda            do not inject into CUDA (no kernels, copies, API calls)\n"
          "  --no-nvtx            do not capture NVTX\n"
          "  --no-nccl            do not load the NCCL profiler plugin\n"
          "  --force              write into a run directory that already holds traces\n"
          "  -h, --help           this help\n"
          "\n"
          "Exit status: COMMAND's own; 2 usage error; 1 set-up error; 127 COMMAND not found.\n");
}

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

static int mkdir_p(const char *path) {
  char buf[PATH_MAX];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
  struct stat st;
  return stat(buf, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
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
    fprintf(stderr, "stepscope record: %s is already set to %s (another profiler?); leaving it, "
                    "that source is not traced\n", name, old);
    return;
  }
  setenv(name, value, 1);
}

/* {"command":["a","b"]} with JSON escaping; NULL on allocation failure. */
static char *command_json(char **cmd) {
  size_t cap = 32;
  for (char **a = cmd; *a; a++) cap += 6 * strlen(*a) + 4;
  char *json = malloc(cap), *p = json;
  if (!json) return NULL;
  p += sprintf(p, "{\"command\":[");
  for (char **a = cmd; *a; a++) {
    if (a != cmd) *p++ = ',';
    *p++ = '"';
    for (const unsigned char *c = (const unsigned char *)*a; *c; c++) {
      if (*c == '"' || *c == '\\') { *p++ = '\\'; *p++ = (char)*c; }
      else if (*c < 0x20) p += sprintf(p, "\\u%04x", *c);
      else *p++ = (char)*c;
    }
    *p++ = '"';
  }
  strcpy(p, "]}");
  return json;
}

int cmd_record(int argc, char **argv) {
  const char *run = NULL, *lib_arg = NULL;
  int no_cuda = 0, no_nvtx = 0, no_nccl = 0, force = 0, i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) { i++; break; }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { usage(stdout); return 0; }
    if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && i + 1 < argc) run = argv[++i];
    else if (strcmp(a, "--inject-lib") == 0 && i + 1 < argc) lib_arg = argv[++i];
    else if (strcmp(a, "--no-cuda") == 0) no_cuda = 1;
    else if (strcmp(a, "--no-nvtx") == 0) no_nvtx = 1;
    else if (strcmp(a, "--no-nccl") == 0) no_nccl = 1;
    else if (strcmp(a, "--force") == 0) force = 1;
    else if (a[0] == '-') { fprintf(stderr, "stepscope record: unknown option %s\n", a); usage(stderr); return 2; }
    else break; /* the command starts here (no "--") */
  }
  if (!run || i >= argc) {
    fprintf(stderr, "stepscope record: %s\n", !run ? "-o RUN is required" : "no command given");
    usage(stderr);
    return 2;
  }
  char **command = &argv[i];

  char lib[PATH_MAX];
  if (lib_arg) {
    if (!realpath(lib_arg, lib) || !file_exists(lib)) {
      fprintf(stderr, "stepscope record: injection library %s: %s\n", lib_arg, strerror(errno ? errno : ENOENT));
      return 1;
    }
  } else if (find_inject_lib(lib, sizeof lib) != 0) {
    fprintf(stderr, "stepscope record: cannot find %s next to this executable; use --inject-lib\n",
            INJECT_LIB_NAME);
    return 1;
  }
  if (mkdir_p(run) != 0) {
    fprintf(stderr, "stepscope record: cannot create run directory %s: %s\n", run, strerror(errno));
    return 1;
  }
  if (holds_traces(run) && !force) {
    fprintf(stderr, "stepscope record: %s already holds traces; use another directory or --force\n", run);
    return 1;
  }
  char run_abs[PATH_MAX];
  if (!realpath(run, run_abs)) {
    fprintf(stderr, "stepscope record: %s: %s\n", run, strerror(errno));
    return 1;
  }
  if (!no_cuda) set_injection_var("CUDA_INJECTION64_PATH", lib);
  if (!no_nvtx) set_injection_var("NVTX_INJECTION64_PATH", lib);
  if (!no_nccl) set_injection_var("NCCL_PROFILER_PLUGIN", lib);
  setenv("STEPSCOPE_RUN_DIR", run_abs, 1);
  char pid[32];
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  setenv("STEPSCOPE_RECORD_PID", pid, 1);
  char *config = command_json(command);
  if (config) {
    setenv("STEPSCOPE_CONFIG_JSON", config, 1);
    free(config);
  }
  fflush(NULL);
  execvp(command[0], command);
  fprintf(stderr, "stepscope record: cannot run %s: %s\n", command[0], strerror(errno));
  return errno == ENOENT ? 127 : 126;
}
