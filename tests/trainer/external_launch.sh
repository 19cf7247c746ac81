#!/bin/sh
# external_launch.sh — a minimal torchrun stand-in for tests.
#
# usage: external_launch.sh N COMMAND [ARGS...]
# Starts N copies of COMMAND with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
# MASTER_PORT and a unique STEPSCOPE_JOB_ID in the environment, waits for all,
# and exits 1 if any failed.
set -u
n=$1
shift
job="test$$"
pids=""
r=0
while [ "$r" -lt "$n" ]; do
  RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
    STEPSCOPE_JOB_ID=$job "$@" &
  pids="$pids $!"
  r=$((r + 1))
done
status=0
for p in $pids; do
  wait "$p" || status=1
done
exit $status
