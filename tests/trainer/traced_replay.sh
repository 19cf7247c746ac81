#!/bin/sh
# traced_replay.sh — `stepscope replay` on a traced run of the CPU trainer (issue 32 §3).
#
# usage: traced_replay.sh TRAINER STEPSCOPE PYTHON CHECK [TRAINER ARGS...]
# CHECK is
#   fidelity            the plain replay: per-step |error| median <= 3 %, worst <= 5 % over the
#                       steps in the medians, no dependency cycle
#   delay RANK MS NEW   (a run with --debug-delay RANK:PHASE:MS once a step) the plain replay's
#                       fidelity, and the what-if 'rank=RANK:delay=NEW' predicts the median
#                       step shorter than the plain replay's by MS - NEW within 20 %, no step
#                       longer: the delay held the whole job (its peers waited for it in the
#                       collective or the pipeline), which the replay sees only when a member
#                       waits for the others' replayed arrival. (The host-side synchronisation
#                       that comes with the delay stays, so host and device stay coupled as
#                       traced; a step whose host ran ahead may keep part of it: the median.)
set -u
trainer=$1 stepscope=$2 python=$3 check=$4
shift 4
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-replay.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
# shellcheck disable=SC2086 # CHECK is words
case "$(echo $check | cut -d' ' -f1)" in
  fidelity) edit="" ;;
  delay) edit="rank=$(echo $check | cut -d' ' -f2):delay=$(echo $check | cut -d' ' -f4)" ;;
  *) echo "FAIL: unknown check $check"; exit 1 ;;
esac
# One traced run, replayed and checked; 0 when the check holds.
attempt() {
rm -rf "$dir/run"
"$trainer" --backend cpu --quiet --trace "$dir/run" "$@" >"$dir/train.out" 2>&1 ||
    { echo "FAIL: training failed"; cat "$dir/train.out"; exit 1; }
if [ -n "$edit" ]; then
  "$stepscope" replay "$dir/run" --what-if "$edit" --json "$dir/replay.json" >"$dir/replay.txt" 2>&1
else
  "$stepscope" replay "$dir/run" --json "$dir/replay.json" >"$dir/replay.txt" 2>&1
fi || { echo "FAIL: stepscope replay failed"; cat "$dir/replay.txt"; exit 1; }
cat "$dir/replay.txt"
# shellcheck disable=SC2086
"$python" - "$dir/replay.json" $check <<'PY'
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
if check[0] == "delay":
    ms = (float(check[2]) - float(check[3])) * 1e6
    if rep["what_if"]["delay_gaps"] == 0:
        bad.append("the delay edit changed no host gap")
    saved = sorted(s["replayed_ns"] - s["predicted_ns"] for s in rep["steps"] if s["in_medians"])
    if saved and saved[0] < -0.01 * ms:
        bad.append(f"a step is longer with less delay (by {-saved[0] / 1e6:.1f} ms)")
    median = saved[(len(saved) - 1) // 2] if saved else 0
    if abs(median - ms) > 0.2 * ms:
        bad.append(f"the edit saves {median / 1e6:.1f} ms in the median step, not {ms / 1e6:.0f} ms")
if bad:
    print("FAIL: " + "; ".join(bad))
    sys.exit(1)
print("ok")
PY
}
if attempt "$@"; then exit 0; fi
# A run is trained once more when its check fails; a replay that fails twice fails the test.
# - A changed delay saves its difference in most steps of most runs; in about one run of 14
#   (dp2, a loaded machine) the host ran ahead of the device in most steps and the windows
#   kept the time.
# - The plain replay's worst step: over 20 quiet runs of each layout (2 cores, load ~1) the
#   per-run worst |error| was 0.3-5.4 %, above 5 % once (pp2, a step the machine slowed that
#   the graph cannot know of), and more often while other tests run beside it. An edge the
#   graph lacks is off in every run, so it still fails.
echo "the check failed on this run: trained once more"
attempt "$@"
