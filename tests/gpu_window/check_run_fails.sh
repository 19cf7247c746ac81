#!/bin/bash
# check_run_fails.sh STEPSCOPE SAMPLE_RUN — the window's run assertions (scripts/gpu/check_run.py)
# can fail: on the committed 4-rank CPU sample (shared-memory collectives, no GPU kernels,
# streams named by the trainer) the right rank count passes, and each assertion that the
# sample cannot meet fails: a wrong rank count, --kernels (no kernel records), --collectives
# (no NCCL kernel to match), and a run directory with one rank file missing.
set -u
stepscope=$1; sample=$2
check=$(dirname "$0")/../../scripts/gpu/check_run.py
fail=0
expect() { # expect RC ARGS...
  local want=$1; shift
  python3 "$check" "$stepscope" "$@" > /tmp/check_run.$$ 2>&1; local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAILED: check_run.py $* exited $rc, expected $want"; cat /tmp/check_run.$$; fail=1
  fi
}
expect 0 "$sample" --ranks 4
expect 1 "$sample" --ranks 3
expect 1 "$sample" --ranks 4 --kernels
expect 1 "$sample" --ranks 4 --collectives
tmp=$(mktemp -d)
cp "$sample"/rank-0000[012].trace.zst "$tmp/"
expect 1 "$tmp" --ranks 4
rm -rf "$tmp" /tmp/check_run.$$
exit $fail
