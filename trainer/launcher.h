/*
 * launcher.h — starting the rank processes of a run on this machine.
 *
 * `launcher_run` creates the job's shared segment, forks one process per rank
 * (each runs train_rank_run; --world 1 runs in this process), and supervises them: a rank that
 * exits with an error or is killed, or whose heartbeat stops for longer than the watchdog, makes
 * the launcher stop the others and return non-zero after naming the rank and the cause on stderr.
 */
#ifndef STEPSCOPE_TRAINER_LAUNCHER_H
#define STEPSCOPE_TRAINER_LAUNCHER_H

#include "config.h"

/* Runs a validated configuration with cfg->world rank processes. Returns the
 * process exit status (0 or 1). */
int launcher_run(const train_config *cfg);

/* Runs this process as one rank of a job started by an outside launcher
 * (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_PORT). Returns the exit status. */
int launcher_run_external(const train_config *cfg, int rank, int local_rank);

#endif /* STEPSCOPE_TRAINER_LAUNCHER_H */
