#!/bin/sh
# trace_dir.sh — `stepscope-train --trace DIR` does not write over an earlier
# run: a directory holding rank files is refused (exit 2, naming one) unless
# --force, which also removes the earlier run's ranks beyond this world, so
# `info` sees one run. Under an outside launcher, ranks starting together
# into a fresh directory do not refuse each other's files.
set -u
train=$1 stepscope=$2 launch=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; fi
}
run="$tmp/run"
"$train" --backend cpu --world 2 --steps 2 --quiet --trace "$run" >/dev/null
check "a first run writes two ranks" test -e "$run/rank-00001.trace.zst"
"$train" --backend cpu --world 1 --steps 2 --quiet --trace "$run" >/dev/null 2>"$tmp/err"
rc=$?
cat "$tmp/err"
check "a second run into it is refused with exit 2 (got $rc)" test $rc -eq 2
check "the refusal names the directory and --force" grep -q "already holds traces.*--force" "$tmp/err"
"$train" --backend cpu --world 1 --steps 2 --quiet --trace "$run" --force >/dev/null
check "--force writes over it" test $? -eq 0
check "--force removed the earlier run's rank 1" test ! -e "$run/rank-00001.trace.zst"
out=$("$stepscope" info "$run")
check "info sees one run of world 1" sh -c 'echo "$1" | grep -q "1 trace file, world size 1,"' _ "$out"
ext="$tmp/ext"
sh "$launch" 2 "$train" --backend cpu --world 2 --steps 2 --quiet --trace "$ext" >/dev/null
check "ranks of an outside launcher start together into a fresh directory" test $? -eq 0
check "both ranks' files are there" test -e "$ext/rank-00001.trace.zst"
exit $fail
