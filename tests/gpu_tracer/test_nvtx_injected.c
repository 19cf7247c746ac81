/*
 * test_nvtx_injected.c — NVTX capture by injection, as `stepscope record`
 * does it: runs gpu_tracer_nvtx_app (a plain NVTX program, no stepscope
 * code) with NVTX_INJECTION64_PATH=libstepscope_inject.so and
 * STEPSCOPE_RUN_DIR set, then checks the rank file it wrote.
 * Usage: test_gpu_tracer_nvtx_injected APP INJECT_LIB
 */
#include <sys/wait.h>
#include <unistd.h>

#include "nvtx_checks.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s APP INJECT_LIB\n", argv[0]);
    return 2;
  }
  const char *dir = make_temp_dir("nvtxinj");
  pid_t pid = fork();
  if (pid == 0) {
    setenv("NVTX_INJECTION64_PATH", argv[2], 1);
    setenv("STEPSCOPE_RUN_DIR", dir, 1);
    unsetenv("RANK");
    unsetenv("STEPSCOPE_RECORD_PID");
    execl(argv[1], argv[1], (char *)NULL);
    perror("execl");
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char path[600];
  snprintf(path, sizeof path, "%s/rank-00000.trace.zst", dir);
  check_nvtx_trace(path);
  if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);
  return check_failures ? 1 : 0;
}
