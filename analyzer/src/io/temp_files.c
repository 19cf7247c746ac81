/*
 * temp_files.c — removes the output writer's temporary files when the
 * process is killed by SIGTERM, SIGHUP or SIGINT (issue 34 defect 11:
 * `export` killed mid-write left its ".trace.json.tmp-XXXXXX" behind).
 *
 * How it works: ssa_out_open (out_writer.c) creates each temporary file with
 * ssa_temp_create, which records its path in a fixed table of static slots, and ssa_out_close
 * forgets it once it is renamed or removed. The first recorded file installs one handler for the
 * three signals, each only where its disposition is still the default (a
 * command's own handler, such as view's server loop, is left alone). The
 * handler does only what is async-signal-safe: it unlinks the paths of the
 * slots in use and re-raises the signal with the default disposition
 * (SA_RESETHAND), so the process still dies of it and its exit status says so.
 * A path is written before its slot is marked in use and the slot is cleared
 * before the path is reused, so the handler never reads a half-written path.
 */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ssa_io.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

#define TEMP_SLOTS 16

static char temp_paths[TEMP_SLOTS][PATH_MAX];
static volatile sig_atomic_t temp_in_use[TEMP_SLOTS];
static pthread_mutex_t temp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static const int cleanup_signals[] = {SIGTERM, SIGHUP, SIGINT};

static void remove_temporaries(int sig) {
  for (int i = 0; i < TEMP_SLOTS; i++)
    if (temp_in_use[i]) unlink(temp_paths[i]);
  raise(sig); /* the default action now (SA_RESETHAND): delivered when this returns */
}

static void install_handler(void) {
  for (size_t i = 0; i < sizeof cleanup_signals / sizeof cleanup_signals[0]; i++) {
    struct sigaction old, act;
    if (sigaction(cleanup_signals[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO))
      continue;
    memset(&act, 0, sizeof act);
    act.sa_handler = remove_temporaries;
    act.sa_flags = SA_RESETHAND;
    sigfillset(&act.sa_mask); /* no other handler runs meanwhile */
    sigaction(cleanup_signals[i], &act, NULL);
  }
}

static int record(const char *path) {
  size_t n = strlen(path);
  if (n >= PATH_MAX) return -1;
  pthread_once(&handler_once, install_handler);
  pthread_mutex_lock(&temp_lock);
  int slot = -1;
  for (int i = 0; i < TEMP_SLOTS && slot < 0; i++)
    if (!temp_in_use[i]) slot = i;
  if (slot >= 0) {
    memcpy(temp_paths[slot], path, n + 1);
    temp_in_use[slot] = 1;
  }
  pthread_mutex_unlock(&temp_lock);
  return slot;
}

/* The file is created and recorded with the three signals blocked, and the handler is
 * installed before: a signal that arrives in between (once the file exists but before its
 * path is in a slot) waits until the path is recorded, instead of killing the process with
 * the file left behind (cli.signals saw that window). */
int ssa_temp_create(char *path_template, int flags, int *slot) {
  pthread_once(&handler_once, install_handler);
  sigset_t block, old;
  sigemptyset(&block);
  for (size_t i = 0; i < sizeof cleanup_signals / sizeof cleanup_signals[0]; i++)
    sigaddset(&block, cleanup_signals[i]);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  int fd = mkostemp(path_template, flags);
  *slot = fd >= 0 ? record(path_template) : -1;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return fd;
}

void ssa_temp_forget(int slot) {
  if (slot < 0 || slot >= TEMP_SLOTS) return;
  pthread_mutex_lock(&temp_lock);
  temp_in_use[slot] = 0;
  pthread_mutex_unlock(&temp_lock);
}
