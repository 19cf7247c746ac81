/*
 * main.c — the stepscope-train command: parse, validate, then run.
 *
 * How it decides how to run: under an outside launcher (RANK and WORLD_SIZE in
 * the environment) this process is one rank; otherwise the built-in launcher
 * runs --world N ranks (--world 1 in this process). The configuration is
 * validated before any process, thread or buffer exists (a --trace directory
 * holding an earlier run's traces is refused unless --force); exit status 2
 * means a bad configuration or usage, 1 a run-time failure, 0 success.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "config.h"
#include "data_check.h"
#include "launcher.h"
#include "sc_text.h"
#include "trace_dir.h"
#include "train.h"

/* 0 when what was printed on stdout (--help, --check-config) reached it; else 1, said. */
static int stdout_written(void) {
  if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
  fprintf(stderr, "stepscope-train: cannot write the standard output: %s\n", strerror(errno));
  return 1;
}

/* A message on stderr, terminal-safe (sc_text.h): it may echo an argument as typed, and an
 * argument can hold control characters (an ESC that would drive the terminal). */
static void say(const char *what, const char *text) {
  char safe[2048];
  fprintf(stderr, "stepscope-train: %s%s\n", what, sc_text_echo(text, safe, sizeof safe));
}

int main(int argc, char **argv) {
  train_config cfg;
  char err[512];
  int rc = config_parse(&cfg, argc, argv, err, sizeof err);
  if (rc == 1) return stdout_written();
  if (rc != 0) {
    say("", err);
    return 2;
  }
  /* the options, then the checkpoints on disk against --resume, then the data */
  if (config_validate(&cfg, err, sizeof err) != 0 ||
      (cfg.checkpoint_dir[0] && ckpt_check_config(&cfg, err, sizeof err) != 0) ||
      data_check(&cfg, err, sizeof err) != 0) {
    say("invalid configuration: ", err);
    return 2;
  }
  if (cfg.check_config) { /* scripts check their layouts on machines without a GPU */
    char *json = config_to_json(&cfg);
    printf("%s\n", json ? json : "{}");
    free(json);
    return json ? stdout_written() : 1;
  }
  const char *rank_s = getenv("RANK"), *world_s = getenv("WORLD_SIZE");
  /* --trace over an earlier run: refused unless --force (`stepscope record`
   * checked its run directory itself: STEPSCOPE_RUN_DIR) */
  const char *record_dir = getenv("STEPSCOPE_RUN_DIR");
  char note[1600] = "";
  if (cfg.trace[0] && !(record_dir && *record_dir) &&
      (trace_dir_check(cfg.trace, cfg.world, rank_s && world_s ? atoi(rank_s) : -1, cfg.force, note,
                       sizeof note, err, sizeof err) != 0 ||
       trace_dir_prepare(cfg.trace, err, sizeof err) != 0)) {
    say("", err);
    return 2;
  }
  if (cfg.trace[0] && note[0]) say("note: ", note);
  if (rank_s && world_s) {
    int rank = atoi(rank_s);
    const char *lr = getenv("LOCAL_RANK");
    if (rank < 0 || rank >= cfg.world) {
      snprintf(err, sizeof err, "RANK=%s is outside WORLD_SIZE=%s", rank_s, world_s);
      say("", err);
      return 2;
    }
    if (atoi(world_s) != cfg.world) {
      snprintf(err, sizeof err, "--world %d differs from WORLD_SIZE=%s", cfg.world, world_s);
      say("invalid configuration: ", err);
      return 2;
    }
    return launcher_run_external(&cfg, rank, lr ? atoi(lr) : rank);
  }
  return launcher_run(&cfg);
}
