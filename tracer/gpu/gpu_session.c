/*
 * gpu_session.c — starts and ends the process-wide trace in injected mode.
 *
 * `stepscope record` exports STEPSCOPE_RUN_DIR (where rank files go) and
 * STEPSCOPE_RECORD_PID (the pid of the command it runs as its child). A
 * process traces when it has a rank in its environment (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID,
 * PMI_RANK), or when it is the recorded command itself; other descendants without a rank (a
 * compiler worker, a data-loader helper) are left alone so that they cannot
 * overwrite rank 0's file. The first GPU source to need the trace starts it
 * (under a mutex); an atexit handler flushes CUPTI and stops it, only in the
 * process that started it (a fork()ed child inherits the state but not the
 * file).
 *
 * A linked program (one that calls stepscope_start itself, like
 * stepscope-train --trace) run under `stepscope record`: if the program
 * exports its stepscope_* symbols (linked with ENABLE_EXPORTS /
 * -rdynamic), the dynamic linker binds this library's stepscope_* calls to
 * the program's own copy, so there is one process-wide trace. We then do not
 * start a second one in $STEPSCOPE_RUN_DIR: the program starts it (in
 * $STEPSCOPE_RUN_DIR if its tracer honours that, else in its own directory)
 * and every GPU source writes into it once it runs. A program that links
 * libstepscope statically without exporting it cannot be seen from here:
 * two traces result (see docs/gpu-tracer.md).
 */
#include "gpu_session.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

sgpu_hooks sgpu_hook_table;

static pthread_mutex_t session_lock = PTHREAD_MUTEX_INITIALIZER;
static int session_tried;   /* a start was attempted (success or not) */
static pid_t session_owner; /* pid that started the trace, 0 if we did not */
#define MAX_FLUSHES 4
static void (*session_flushes[MAX_FLUSHES])(void);
static size_t n_flushes;

void sgpu_warn_once(int *once_flag, const char *source, const char *fmt, ...) {
  if (__atomic_exchange_n(once_flag, 1, __ATOMIC_RELAXED)) return;
  char message[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  fprintf(stderr, "stepscope: %s: %s\n", source, message);
}

void sgpu_emit_dropped(uint64_t count, stepscope_drop_source source) {
  stepscope_record r = {.kind = STEPSCOPE_REC_DROPPED};
  r.u.dropped.time_ns = stepscope_now_ns();
  r.u.dropped.count = count;
  r.u.dropped.source = source;
  stepscope_emit(&r);
}

void sgpu_session_add_flush(void (*flush)(void)) {
  pthread_mutex_lock(&session_lock);
  int known = 0;
  for (size_t i = 0; i < n_flushes; i++)
    known |= session_flushes[i] == flush;
  if (!known && n_flushes < MAX_FLUSHES) session_flushes[n_flushes++] = flush;
  pthread_mutex_unlock(&session_lock);
}

static int env_has_rank(void) {
  static const char *const names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *v = getenv(names[i]);
    if (v && *v) return 1;
  }
  return 0;
}

static int is_recorded_process(void) {
  const char *root = getenv("STEPSCOPE_RECORD_PID");
  if (!root || !*root) return 1; /* not launched by record: trust the caller */
  return (pid_t)strtol(root, NULL, 10) == getpid();
}

static void session_at_exit(void) {
  void (*flushes[MAX_FLUSHES])(void);
  size_t n;
  int owned;
  pthread_mutex_lock(&session_lock);
  owned = session_owner != 0 && session_owner == getpid();
  n = n_flushes;
  memcpy(flushes, session_flushes, sizeof flushes);
  pthread_mutex_unlock(&session_lock);
  if (!owned) return;
  for (size_t i = 0; i < n; i++)
    flushes[i]();
  stepscope_stop();
}

int sgpu_session_linked_program(void) {
  static int cached = -1;
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v < 0) {
    void *main_program = dlopen(NULL, RTLD_NOW);
    v = main_program && dlsym(main_program, "stepscope_start") != NULL;
    if (main_program) dlclose(main_program);
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  }
  return v;
}

int sgpu_session_ensure(void) {
  if (stepscope_active()) return 1;
  const char *run_dir = getenv("STEPSCOPE_RUN_DIR");
  if (!run_dir || !*run_dir) return 0;         /* linked mode, nothing started: stay quiet */
  if (sgpu_session_linked_program()) return 0; /* the program starts the one trace itself */

  int active = 0;
  pthread_mutex_lock(&session_lock);
  if (stepscope_active()) {
    active = 1;
  } else if (!session_tried) {
    session_tried = 1;
    if (env_has_rank() || is_recorded_process()) {
      stepscope_start_options opt;
      memset(&opt, 0, sizeof opt);
      opt.run_dir = run_dir;
      opt.rank = -1;
      opt.world_size = -1;
      opt.local_rank = -1;
      opt.producer = "stepscope record " STEPSCOPE_VERSION_STRING;
      opt.device_name = getenv("STEPSCOPE_DEVICE_NAME") ? getenv("STEPSCOPE_DEVICE_NAME") : "cuda";
      opt.config_json = getenv("STEPSCOPE_CONFIG_JSON");
      opt.clock_domain = STEPSCOPE_CLOCK_MONOTONIC;
      stepscope_error err;
      memset(&err, 0, sizeof err);
      if (stepscope_start(&opt, &err) == 0) {
        session_owner = getpid();
        atexit(session_at_exit);
        active = 1;
      } else {
        static int warned;
        sgpu_warn_once(&warned, "record", "cannot start the trace in %s: %s; not tracing", run_dir,
                       err.message[0] ? err.message : stepscope_status_name(err.code));
      }
    }
  }
  pthread_mutex_unlock(&session_lock);
  return active;
}
