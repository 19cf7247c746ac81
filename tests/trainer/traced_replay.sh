#!/bin/sh
# traced_replay.sh — `stepscope replay` on a traced run of the CPU trainer (issue 32 §3).
#
# usage: traced_replay.sh TRAINER STEPSCOPE PYTHON CHECK [TRAINER ARGS...]
# CHECK is
#   fidelity            the plain replay: per-step |error| median <= 3 %, worst <= 5 % over the
#                       steps in the medians, no dependency cycle
#   no_delay RANK MS    (a run with --debug-delay RANK:PHASE:MS once a step) the plain replay's
#                       fidelity, and the what-if 'rank=RANK:no-delay' predicts every steady
#                       step shorter than the plain replay, by MS within 20 % in the median
#                       step (the first step's window may hold only part of it): the delay held
#                       the whole job (its peers waited in the collective), so removing it
#                       shortens the step on every rank, which the replay sees only when a
#                       collective member waits for the others' replayed arrival
set -u
trainer=$1 stepscope=$2 python=$3 check=$4
shift 4
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-replay.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$trainer" --backend cpu --quiet --trace "$dir/run" "$@" >"$dir/train.out" 2>&1 ||
    { echo "FAIL: training failed"; cat "$dir/train.out"; exit 1; }
set -- $check
case "$1" in
  fidelity) edit="" ;;
  no_delay) edit="rank=$2:no-delay" ;;
  *) echo "FAIL: unknown check $check"; exit 1 ;;
esac
if [ -n "$edit" ]; then
  "$stepscope" replay "$dir/run" --what-if "$edit" --json "$dir/replay.json" >"$dir/replay.txt" 2>&1
else
  "$stepscope" replay "$dir/run" --json "$dir/replay.json" >"$dir/replay.txt" 2>&1
fi || { echo "FAIL: stepscope replay failed"; cat "$dir/replay.txt"; exit 1; }
cat "$dir/replay.txt"
"$python" - "$dir/replay.json" "$@" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
check = sys.argv[2:]
plain = rep["replay"]
bad = []
if plain["steady_steps"] < 2:
    bad.append(f"only {plain['steady_steps']} steady steps")
if plain["median_error"] > 0.03:
    bad.append(f"median error {plain['median_error']:.4f} > 3 %")
if plain["worst_error"] > 0.05:
    bad.append(f"worst error {plain['worst_error']:.4f} > 5 %")
if plain["cycles"]:
    bad.append(f"{plain['cycles']} dependency cycles")
if check[0] == "no_delay":
    ms = float(check[2]) * 1e6
    if rep["what_if"]["delay_gaps"] == 0:
        bad.append("the delay edit changed no host gap")
    saved = sorted(s["replayed_ns"] - s["predicted_ns"] for s in rep["steps"] if s["in_medians"])
    if saved and saved[0] <= 0:
        bad.append(f"a step is not shorter without the delay (saves {saved[0] / 1e6:.1f} ms)")
    median = saved[(len(saved) - 1) // 2] if saved else 0
    if abs(median - ms) > 0.2 * ms:
        bad.append(f"no-delay saves {median / 1e6:.1f} ms in the median step, not {ms / 1e6:.0f} ms")
if bad:
    print("FAIL: " + "; ".join(bad))
    sys.exit(1)
print("ok")
PY
