#!/bin/bash
# job_lifetime.sh — no rank and no shared segment outlives its job.
#
# usage: job_lifetime.sh TRAINER CASE
#   launcher_sigkill  SIGKILL to the `--world 2` launcher: its ranks die too
#                     (PR_SET_PDEATHSIG) and /dev/shm keeps no segment
#   launcher_sigpipe  the same for a launcher killed by SIGPIPE (`| head`)
#   starting_sigkill  SIGKILL to the launcher while its ranks start (they wait
#                     3 s before joining the job: --debug-delay R:start:3000):
#                     the ranks die and nothing is left in /dev/shm (issue 34
#                     defect 8: an 80 MiB segment was, 10 of 10 times)
#   starting_sigterm  the same with SIGTERM (the launcher stops its ranks)
#   external_stale    under an outside launcher, a job killed before all its
#                     ranks attached leaves its segment; the next job on the
#                     same key, whose rank 1 starts first, must not join it
#   external_killed   under an outside launcher, SIGKILL of rank 1: rank 0
#                     stops within seconds (not the 60 s watchdog), naming it
set -u
train=$1 case=$2
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
fail=0
check() { # description, command...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; fi
}
gone() { ! kill -0 "$1" 2>/dev/null; }
wait_gone() { # pid, seconds: 0 when the process is gone in time
  local i=0
  while [ $i -lt $(($2 * 10)) ]; do gone "$1" && return 0; sleep 0.1; i=$((i + 1)); done
  return 1
}
children() { pgrep -P "$1" | tr '\n' ' '; }

launcher_dies() { # signal
  "$train" --backend cpu --world 2 --steps 100000 --quiet >/dev/null 2>&1 &
  local pid=$! kids="" i=0
  while [ $i -lt 100 ]; do # the ranks are up and have attached the segment
    kids=$(children $pid)
    [ "$(echo $kids | wc -w)" -eq 2 ] && [ ! -e "$shm/stepscope-job$pid.shm" ] && break
    sleep 0.1; i=$((i + 1))
  done
  sleep 0.5
  echo "launcher $pid, ranks $kids"
  kill -"$1" $pid
  wait $pid 2>/dev/null
  for k in $kids; do
    check "rank pid $k died with its launcher (SIG$1)" wait_gone "$k" 10
  done
  check "no segment left behind (SIG$1)" test ! -e "$shm/stepscope-job$pid.shm"
  for k in $kids; do kill -9 "$k" 2>/dev/null; done
}

launcher_dies_starting() { # signal
  "$train" --backend cpu --world 2 --steps 3 --quiet --debug-delay 0:start:3000 \
    --debug-delay 1:start:3000 >/dev/null 2>&1 &
  local pid=$! kids="" i=0
  while [ $i -lt 100 ]; do # both ranks forked (they now wait before joining)
    kids=$(children $pid)
    [ "$(echo $kids | wc -w)" -eq 2 ] && break
    sleep 0.1; i=$((i + 1))
  done
  sleep 0.5
  echo "launcher $pid, ranks $kids (starting)"
  kill -"$1" $pid
  wait $pid 2>/dev/null
  for k in $kids; do
    check "rank pid $k died with its launcher (SIG$1)" wait_gone "$k" 10
  done
  # the segment's name, or its temporary name while it was being created
  local left="" f
  for f in "$shm/stepscope-job$pid.shm"*; do [ -e "$f" ] && left="$left ${f##*/}"; done
  check "no segment of the job left behind in $shm (SIG$1): $left" test -z "$left"
  for k in $kids; do kill -9 "$k" 2>/dev/null; done
  rm -f "$shm/stepscope-job$pid.shm"
}

rank() { # rank job-id extra-args...: one rank under an outside launcher, in the background
  local r=$1 job=$2; shift 2
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 \
    STEPSCOPE_JOB_ID=$job "$train" --backend cpu --world 2 --quiet "$@" &
}

case $case in
launcher_sigkill) launcher_dies KILL ;;
launcher_sigpipe) launcher_dies PIPE ;;
starting_sigkill) launcher_dies_starting KILL ;;
starting_sigterm) launcher_dies_starting TERM ;;
external_stale)
  job="stale$$"
  # job A: only rank 0 starts; it creates the segment and waits for rank 1; SIGKILL
  rank 0 $job --steps 3 --watchdog-s 30 2>/dev/null
  a=$!
  i=0; while [ $i -lt 100 ] && [ ! -e "$shm/stepscope-$job.shm" ]; do sleep 0.1; i=$((i + 1)); done
  sleep 0.3
  kill -9 $a; wait $a 2>/dev/null
  check "job A left its segment (the setup of this test)" test -e "$shm/stepscope-$job.shm"
  # job B on the same key: rank 1 first (it finds A's segment), rank 0 later
  err=$(mktemp)
  rank 1 $job --steps 3 --watchdog-s 10 2>"$err"
  b1=$!
  sleep 1
  rank 0 $job --steps 3 --watchdog-s 10 2>/dev/null
  b0=$!
  wait $b0; s0=$?
  wait $b1; s1=$?
  cat "$err"; rm -f "$err"
  check "job B's rank 0 succeeded (exit $s0)" test $s0 -eq 0
  check "job B's rank 1 did not join job A's segment (exit $s1)" test $s1 -eq 0
  check "no segment left behind" test ! -e "$shm/stepscope-$job.shm"
  rm -f "$shm/stepscope-$job.shm"
  ;;
external_killed)
  job="killed$$"
  err=$(mktemp)
  rank 0 $job --steps 100000 2>"$err"
  r0=$!
  rank 1 $job --steps 100000 2>/dev/null
  r1=$!
  sleep 2
  kill -9 $r1
  start=$(date +%s)
  check "rank 0 stopped within 15 s of rank 1's death (watchdog 60 s)" wait_gone $r0 15
  echo "rank 0 stopped after about $(($(date +%s) - start)) s"
  cat "$err"
  check "rank 0 names the dead rank and its pid" grep -q "rank 1 (pid $r1) is no longer running" "$err"
  kill -9 $r0 2>/dev/null
  rm -f "$err" "$shm/stepscope-$job.shm"
  ;;
*) echo "unknown case $case"; exit 2 ;;
esac
exit $fail
