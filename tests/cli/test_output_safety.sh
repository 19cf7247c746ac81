#!/usr/bin/env bash
# Every output file of every command goes through the one atomic, input-protected
# writer (issue 34 defect 3): `view --html` and `plan --json/--csv` pointed at one of
# the run's rank traces refuse, say why and exit 1, and the trace is intact; plan's
# outputs on a full device (/dev/full) exit 1 with a message; a plan output that
# cannot be written whole leaves the earlier file as it was and no temporary file.
# usage: test_output_safety.sh STEPSCOPE SAMPLE_RUN
set -u
stepscope=$1 sample=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; else echo "ok: $what"; fi
}
fresh() { rm -rf "$tmp/run"; cp -r "$sample" "$tmp/run"; }
trace=rank-00000.trace.zst
fresh
sum=$(md5sum <"$tmp/run/$trace")

# ---- view --html onto a rank trace of the run it shows
timeout 120 "$stepscope" view "$tmp/run" --html "$tmp/run/$trace" >/dev/null 2>"$tmp/err"; rc=$?
check "view --html RUN/$trace exits 1 (rc $rc)" test $rc -eq 1
check "and says why" grep -q "$trace is one of this command's inputs" "$tmp/err"
check "and the trace is intact" test "$(md5sum <"$tmp/run/$trace")" = "$sum"

# ---- plan --from RUN --json/--csv onto a rank trace
for opt in --json --csv; do
  fresh
  "$stepscope" plan --from "$tmp/run" $opt "$tmp/run/$trace" >/dev/null 2>"$tmp/err"; rc=$?
  check "plan --from RUN $opt RUN/$trace exits 1 (rc $rc)" test $rc -eq 1
  check "plan $opt says why" grep -q "$trace is one of this command's inputs" "$tmp/err"
  check "plan $opt leaves the trace intact" test "$(md5sum <"$tmp/run/$trace")" = "$sum"
done

# ---- plan outputs on a full device: exit 1 and a message, never a silent failure
for opt in --json --csv; do
  "$stepscope" plan --gpus 8 --global-batch 64 --model gpt2-124m $opt /dev/full \
    >/dev/null 2>"$tmp/err"; rc=$?
  check "plan $opt /dev/full exits 1 (rc $rc)" test $rc -eq 1
  check "plan $opt /dev/full says so" grep -q "stepscope plan: write error on /dev/full" "$tmp/err"
done

# ---- plan outputs whole or not at all (written beside, renamed when complete)
plan=(plan --global-batch 512 --model gpt2-350m)
for opt in --json --csv; do
  "$stepscope" "${plan[@]}" --gpus 64 $opt "$tmp/out" >/dev/null || fail=1
  good=$(md5sum <"$tmp/out")
  (trap '' XFSZ; ulimit -f 1; "$stepscope" "${plan[@]}" --gpus 128 $opt "$tmp/out" \
    >/dev/null 2>"$tmp/err"); rc=$?
  check "plan $opt that cannot be written whole exits 1 (rc $rc)" test $rc -eq 1
  check "plan $opt keeps the earlier file whole" test "$(md5sum <"$tmp/out")" = "$good"
  check "plan $opt leaves no temporary file" bash -c '! ls -A "$1" | grep -q "\.tmp-"' _ "$tmp"
done
exit $fail
