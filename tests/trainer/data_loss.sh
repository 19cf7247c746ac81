#!/bin/sh
# data_loss.sh — the trainer never loses what it was asked to write in silence
# (issue 34 defect 9): each case must fail with its exit status and a message.
#
# usage: data_loss.sh TRAINER CASE
#   log_full         --log /dev/full: exit 1, "--log /dev/full: cannot write"
#   stdout_full      stdout on /dev/full: exit 1, "cannot write the standard output"
#   diverged         --lr 1e30 (finite, accepted) makes the loss NaN at step 1: exit 1
#                    naming the step, no "final loss"; the --log holds only JSON lines
#                    (no -nan), one per finished step
#   diverged_world2  the same with two pipeline ranks: both stop, exit 1
#   trace_on_file    --trace naming a regular file: exit 2 before training, the file kept
#   trace_unwritable --trace under /proc (cannot be created): exit 2; and, when not run
#                    as root, a read-only directory: exit 2
set -u
train=$1 case=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ss-dataloss.XXXXXX") || exit 1
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
common="--backend cpu --steps 4 --seq 16 --batch 2"
fail=0
check() { # description, command...
  what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; fi
}
# expect STATUS REGEX ARGS...: runs the trainer (stdout to $tmp/out unless $out is set),
# checks its exit status and that stderr matches REGEX
expect() {
  want=$1 regex=$2; shift 2
  # shellcheck disable=SC2086
  timeout 120 "$train" $common "$@" >"${out:-$tmp/out}" 2>"$tmp/err"
  got=$?
  cat "$tmp/err"
  check "exit status $got, expected $want" test "$got" -eq "$want"
  check "stderr matches /$regex/" grep -Eq -- "$regex" "$tmp/err"
}

case $case in
log_full)
  expect 1 "--log /dev/full: cannot write: No space left on device" --log /dev/full ;;
stdout_full)
  out=/dev/full expect 1 "cannot write the standard output: No space left on device" ;;
diverged | diverged_world2)
  grid=""
  [ "$case" = diverged_world2 ] && grid="--world 2 --pp 2 --layers 2 --microbatches 2"
  # shellcheck disable=SC2086
  expect 1 "rank [01]: error: step 1: the loss is NaN .*training diverged.*--lr" \
    --lr 1e30 --log "$tmp/log.jsonl" $grid
  cat "$tmp/out"
  check "no final loss is printed" sh -c "! grep -q 'final loss' '$tmp/out'"
  check "step 0 was logged" grep -q '^{"step":0,' "$tmp/log.jsonl"
  check "nothing but JSON numbers in the log (no nan, inf)" sh -c "! grep -Eiq 'nan|inf' '$tmp/log.jsonl'"
  check "one line per finished step" test "$(wc -l <"$tmp/log.jsonl")" -eq 1
  if [ "$case" = diverged_world2 ]; then
    check "both ranks say why they stopped" grep -q "rank 1: error: step 1: the loss is NaN" "$tmp/err"
  fi
  ;;
trace_on_file)
  echo keep >"$tmp/file"
  expect 2 "--trace .*/file: exists and is not a directory" --trace "$tmp/file"
  check "the file is untouched" test "$(cat "$tmp/file")" = keep
  check "nothing was trained" sh -c "! grep -q '^step' '$tmp/out'"
  ;;
trace_unwritable)
  expect 2 "--trace /proc/stepscope-no/run: cannot create the directory" \
    --trace /proc/stepscope-no/run
  if [ "$(id -u)" -ne 0 ]; then # root writes into read-only directories
    mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
    expect 2 "--trace .*/ro: cannot write into it: Permission denied" --trace "$tmp/ro"
  fi
  ;;
*) echo "unknown case $case"; exit 2 ;;
esac
[ $fail -eq 0 ] && echo "OK: $case"
exit $fail
