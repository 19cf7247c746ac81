/*
 * launcher.c — forks and supervises the rank processes (see launcher.h).
 *
 * How it works: the parent creates the shared segment as an anonymous file
 * (comm_shm_create_anonymous: a memfd, named in messages after /dev/shm's
 * stepscope-job<pid>.shm) and forks the ranks, which inherit it open, before
 * it has any thread. With --world 1 the one rank runs in this process. Each child sets RANK,
 * WORLD_SIZE and LOCAL_RANK (so the tracer names its file) and runs
 * train_rank_run. The parent polls: waitpid(WNOHANG) for deaths, and every
 * rank's heartbeat in the segment (refreshed at each step and after every
 * operation a stream completes) for hangs. On the first failure it reports
 * "rank R: <cause>", marks the job aborted (so blocked collectives fail at
 * once) and, when that rank exited with an error of its own, gives the
 * survivors a few seconds to exit by themselves, naming each that fails too
 * (their own errors are printed whole: a rank whose checkpoint shard is
 * corrupt says so even when a peer failed first); then it sends SIGTERM to
 * those left, SIGKILL two seconds later, and returns 1.
 * SIGINT or SIGTERM to the launcher stops the ranks the same way. A launcher
 * that dies otherwise (SIGKILL, SIGPIPE of `| head`) takes its ranks with it:
 * each rank asks for SIGTERM at its parent's death (PR_SET_PDEATHSIG, then
 * checks that the parent had not died already). The segment has no name in
 * any directory, so nothing can be left in /dev/shm whenever the job dies,
 * even while its ranks are starting: its memory goes with the last process
 * holding it. (Before issue 34 it was a file, unlinked by the last rank to
 * attach: a launcher killed before that left 80 MiB behind.)
 * Communication waits inside ranks time out at twice the watchdog, so a hang
 * is reported by the watchdog, naming a silent rank that is not itself
 * waiting for its peers (or, in a deadlock, the one silent the longest).
 */
#include "launcher.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "train.h"

static volatile sig_atomic_t g_interrupted;

static void on_interrupt(int sig) {
  g_interrupted = sig;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void segment_path(char *buf, size_t n, const char *key) {
  struct stat st;
  const char *dir = "/dev/shm";
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK) != 0) {
    dir = getenv("TMPDIR");
    if (!dir || !dir[0]) dir = "/tmp";
  }
  snprintf(buf, n, "%s/stepscope-%s.shm", dir, key);
}

/* Says how rank r ended, when it failed (exit status not 0, or a signal); `then` ends the
 * line (what the launcher does next). */
static void report_failure(int r, pid_t pid, int st, const char *then) {
  if (WIFSIGNALED(st))
    fprintf(stderr, "stepscope-train: rank %d (pid %d) was killed by signal %d (%s)%s\n", r,
            (int)pid, WTERMSIG(st), strsignal(WTERMSIG(st)), then);
  else if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
    fprintf(stderr, "stepscope-train: rank %d (pid %d) exited with status %d%s\n", r, (int)pid,
            WEXITSTATUS(st), then);
}

/* Reaps the ranks that have exited; with `report`, names those that failed. How many live. */
static int reap_exited(pid_t *pids, int *alive, int n, int report) {
  int left = 0;
  for (int r = 0; r < n; r++) {
    if (!alive[r]) continue;
    int st;
    if (waitpid(pids[r], &st, WNOHANG) != pids[r]) {
      left++;
      continue;
    }
    alive[r] = 0;
    if (report) report_failure(r, pids[r], st, "");
  }
  return left;
}

/* Stops the living ranks (the job is already aborted). For `grace_s` they may exit on their
 * own, each failing one named (an aborted job fails their waits within milliseconds, and a
 * rank that failed too prints its own error: its message must not be cut off by our
 * SIGTERM); then SIGTERM (their traces are flushed), and SIGKILL two seconds later. */
static void stop_all(pid_t *pids, int *alive, int n, double grace_s) {
  for (double until = mono_s() + grace_s; reap_exited(pids, alive, n, 1) > 0;) {
    if (mono_s() > until) break;
    usleep(20000);
  }
  for (int r = 0; r < n; r++)
    if (alive[r]) kill(pids[r], SIGTERM);
  for (double until = mono_s() + 2.0; reap_exited(pids, alive, n, 0) > 0;) {
    if (mono_s() > until) break;
    usleep(20000);
  }
  for (int r = 0; r < n; r++)
    if (alive[r]) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], NULL, 0);
      alive[r] = 0;
    }
}

/* Marks the job aborted with the reason fmt... (so blocked collectives fail at once) and
 * stops ranks 0..n-1 (stop_all, with grace_s). Returns 1, the run's failure. */
static int abort_job(comm_job *job, pid_t *pids, int *alive, int n, double grace_s, const char *fmt,
                     ...) __attribute__((format(printf, 6, 7)));
static int abort_job(comm_job *job, pid_t *pids, int *alive, int n, double grace_s, const char *fmt,
                     ...) {
  char why[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  comm_job_abort(job, why);
  stop_all(pids, alive, n, grace_s);
  return 1;
}

/* The child side of fork for rank r: the launcher's own signal handlers back, death with the
 * launcher, the rank's environment, then the rank's whole run. Does not return. */
static void run_rank_child(const train_config *cfg, int r, const char *path, int fd,
                           pid_t launcher_pid, const struct sigaction *old_int,
                           const struct sigaction *old_term) {
  int n = cfg->world;
  sigaction(SIGINT, old_int, NULL);
  sigaction(SIGTERM, old_term, NULL);
  /* die with the launcher, however it dies (SIGKILL, SIGPIPE...): SIGTERM,
   * so the rank's trace is flushed; and if it died before this line */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != launcher_pid) _exit(1);
  char v[32];
  snprintf(v, sizeof v, "%d", r);
  setenv("RANK", v, 1);
  setenv("LOCAL_RANK", v, 1);
  snprintf(v, sizeof v, "%d", n);
  setenv("WORLD_SIZE", v, 1);
  setenv("LOCAL_WORLD_SIZE", v, 1); /* every rank is on this machine */
  rank_env env = {.rank = r,
                  .world = n,
                  .local_rank = r,
                  .shm_path = path,
                  .shm_fd = fd,
                  .comm_timeout_s = 2 * cfg->watchdog_s};
  int rc = train_rank_run(cfg, &env);
  fflush(stdout);
  fflush(stderr);
  _exit(rc);
}

/* Forks the world's ranks (pids, alive). 0, or 1 when a fork failed, after aborting the
 * job and stopping the ranks already started. */
static int fork_ranks(const train_config *cfg, const char *path, int fd, comm_job *job, pid_t *pids,
                      int *alive, const struct sigaction *old_int,
                      const struct sigaction *old_term) {
  int n = cfg->world;
  pid_t launcher_pid = getpid();
  for (int r = 0; r < n; r++) {
    pid_t p = fork();
    if (p < 0) {
      fprintf(stderr, "stepscope-train: fork for rank %d failed: %s\n", r, strerror(errno));
      return abort_job(job, pids, alive, r, 0, "the launcher could not start every rank");
    }
    if (p == 0) run_rank_child(cfg, r, path, fd, launcher_pid, old_int, old_term);
    pids[r] = p;
    alive[r] = 1;
  }
  return 0;
}

/* The grace a failed rank's peers get to exit on their own (stop_all). */
#define PEER_GRACE_S 5.0

/* Reaps the ranks that have exited (*left counts the living). 1 when one failed, after
 * reporting it, aborting the job and stopping the others; else 0. A rank that exited with
 * an error has printed it, and its peers may have errors of their own (each rank checks
 * its own checkpoint shard, say): they get PEER_GRACE_S to print them and exit. One
 * killed by a signal said nothing: the others are stopped at once. */
static int reap_ranks(comm_job *job, pid_t *pids, int *alive, int n, int *left) {
  for (int r = 0; r < n; r++) {
    if (!alive[r]) continue;
    int st;
    pid_t p = waitpid(pids[r], &st, WNOHANG);
    if (p != pids[r]) continue;
    alive[r] = 0;
    (*left)--;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
    report_failure(r, pids[r], st, "; stopping the other ranks");
    return abort_job(job, pids, alive, n, WIFEXITED(st) ? PEER_GRACE_S : 0, "rank %d failed", r);
  }
  return 0;
}

/* The watchdog: once some rank has been silent too long, blame the least recently active
 * rank that is not itself waiting for peers (the others wait for it); if every rank waits
 * (a deadlock), the one silent the longest. 1 when it blamed one, after reporting every
 * rank's progress, aborting the job and stopping all ranks; else 0. */
static int check_watchdog(const train_config *cfg, comm_job *job, pid_t *pids, int *alive, int n) {
  uint64_t now = (uint64_t)(mono_s() * 1e9), oldest = UINT64_MAX;
  int who = -1, who_busy = -1;
  uint64_t oldest_busy = UINT64_MAX;
  for (int r = 0; r < n; r++) {
    if (!alive[r]) continue;
    uint64_t hb = comm_job_heartbeat_of(job, r);
    if (hb < oldest) {
      oldest = hb;
      who = r;
    }
    if (comm_job_waiting_of(job, r) == 0 && hb < oldest_busy) {
      oldest_busy = hb;
      who_busy = r;
    }
  }
  if (who >= 0 && oldest != 0 && now > oldest && (double)(now - oldest) / 1e9 > cfg->watchdog_s) {
    if (who_busy >= 0) who = who_busy;
    uint64_t hb = comm_job_heartbeat_of(job, who);
    fprintf(stderr,
            "stepscope-train: rank %d (pid %d) hung: no progress for %.1f s "
            "(--watchdog-s %g); stopping all ranks\n",
            who, (int)pids[who], now > hb ? (double)(now - hb) / 1e9 : 0.0, cfg->watchdog_s);
    for (int r = 0; r < n; r++) {
      if (!alive[r]) continue;
      hb = comm_job_heartbeat_of(job, r);
      fprintf(stderr, "stepscope-train:   rank %d: last progress %.1f s ago, %s\n", r,
              now > hb ? (double)(now - hb) / 1e9 : 0.0,
              comm_job_waiting_of(job, r) ? "waiting for peers" : "not waiting for peers");
    }
    return abort_job(job, pids, alive, n, 0, "watchdog: rank %d hung", who);
  }
  return 0;
}

/* Watches the ranks until all have exited: SIGINT/SIGTERM to the launcher, deaths, hangs.
 * 0 when every rank exited with 0; 1 after stopping them all on the first failure. */
static int watch_ranks(const train_config *cfg, comm_job *job, pid_t *pids, int *alive) {
  int n = cfg->world, left = n;
  while (left > 0) {
    if (g_interrupted) {
      fprintf(stderr, "stepscope-train: interrupted (signal %d); stopping all ranks\n",
              (int)g_interrupted);
      return abort_job(job, pids, alive, n, 0, "the launcher was interrupted");
    }
    if (reap_ranks(job, pids, alive, n, &left) != 0) return 1;
    if (check_watchdog(cfg, job, pids, alive, n) != 0) return 1;
    usleep(20000);
  }
  return 0;
}

int launcher_run(const train_config *cfg) {
  int n = cfg->world;
  char key[64], path[600], err[512];
  snprintf(key, sizeof key, "%s%d", n > 1 ? "job" : "single", (int)getpid());
  segment_path(path, sizeof path, key); /* a name for messages, and the CUDA rendezvous's */
  int fd = comm_shm_create_anonymous(path, n, err, sizeof err);
  if (fd < 0) {
    fprintf(stderr, "stepscope-train: %s\n", err);
    return 1;
  }
  if (n == 1) { /* one rank: trains in this process */
    rank_env env = {
        .rank = 0, .world = 1, .shm_path = path, .shm_fd = fd, .comm_timeout_s = cfg->watchdog_s};
    int rc = train_rank_run(cfg, &env);
    close(fd);
    return rc;
  }
  comm_job_options jo = {.world = n,
                         .path = path,
                         .fd = fd,
                         .timeout_s = cfg->watchdog_s,
                         .observer = 1}; /* the launcher's view, for heartbeats */
  comm_job *job = comm_job_open(&jo, err, sizeof err);
  pid_t *pids = calloc((size_t)n, sizeof(pid_t));
  int *alive = calloc((size_t)n, sizeof(int));
  if (!job || !pids || !alive) {
    fprintf(stderr, "stepscope-train: %s\n", job ? "out of memory" : err);
    free(pids);
    free(alive);
    comm_job_close(job);
    close(fd);
    return 1;
  }
  fflush(stdout);
  fflush(stderr);
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  int status = fork_ranks(cfg, path, fd, job, pids, alive, &old_int, &old_term);
  if (status == 0) status = watch_ranks(cfg, job, pids, alive);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  comm_job_close(job);
  close(fd);
  free(pids);
  free(alive);
  return status;
}

int launcher_run_external(const train_config *cfg, int rank, int local_rank) {
  const char *port = getenv("MASTER_PORT");
  const char *job = getenv("STEPSCOPE_JOB_ID");
  char key[128], path[600];
  snprintf(key, sizeof key, "%s", job && job[0] ? job : port && port[0] ? port : "default");
  segment_path(path, sizeof path, key);
  if (rank == 0) unlink(path); /* a stale segment from an earlier job with the same key */
  /* ranks start together: a segment created well before this process is stale */
  rank_env env = {.rank = rank,
                  .world = cfg->world,
                  .local_rank = local_rank,
                  .shm_path = path,
                  .shm_fd = -1,
                  .create_shm = rank == 0,
                  .remove_shm = rank == 0,
                  .comm_timeout_s = cfg->watchdog_s,
                  .shm_not_before = (long long)time(NULL) - 30};
  return train_rank_run(cfg, &env);
}
