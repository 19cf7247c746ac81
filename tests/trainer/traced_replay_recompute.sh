#!/bin/sh
# traced_replay_recompute.sh — the what-if `range=^recompute$:drop` (recomputation off) selects
# exactly the ops and host calls the CPU trainer's activation recomputation added (issue 32 §3).
#
# usage: traced_replay_recompute.sh TRAINER STEPSCOPE PYTHON KIND [TRAINER ARGS...]
# Trains the same job twice, with --recompute KIND (full or selective) and with --recompute
# none. The trainer issues the recomputed forward work inside ranges named "recompute", and
# otherwise the same ops, so the two runs' op and call counts (stepscope info) differ by exactly
# the recomputed ones: the edit must select that many on the recomputing run, at least one,
# and nothing on the run without recomputation; and the predicted steps must not be longer.
set -u
trainer=$1 stepscope=$2 python=$3 kind=$4
shift 4
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-replay-rc.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
edit='range=^recompute$:drop'
for rc in "$kind" none; do
  "$trainer" --backend cpu --quiet --trace "$dir/$rc" --recompute "$rc" "$@" >"$dir/train.out" 2>&1 ||
    { echo "FAIL: training --recompute $rc failed"; cat "$dir/train.out"; exit 1; }
  "$stepscope" info "$dir/$rc" >"$dir/$rc.info" 2>&1 ||
    { echo "FAIL: stepscope info failed"; cat "$dir/$rc.info"; exit 1; }
  "$stepscope" replay "$dir/$rc" --what-if "$edit" --json "$dir/$rc.json" >"$dir/$rc.txt" 2>&1 ||
    { echo "FAIL: stepscope replay failed"; cat "$dir/$rc.txt"; exit 1; }
  head -2 "$dir/$rc.txt"
done
"$python" - "$dir" "$kind" <<'PY'
import json, re, sys
d, kind = sys.argv[1], sys.argv[2]

def counts(rc):
    text = open(f"{d}/{rc}.info").read()
    got = {k: int(n) for k, n in re.findall(r"^\s+(host_op|api)\s+(\d+)$", text, re.M)}
    return got["host_op"], got["api"]

def selected(rc):
    rep = json.load(open(f"{d}/{rc}.json"))
    return rep["what_if"]["selected"][0], rep

ops_k, calls_k = counts(kind)
ops_n, calls_n = counts("none")
sel, rep = selected(kind)
sel_none, _ = selected("none")
bad = []
if ops_k - ops_n <= 0:
    bad.append(f"--recompute {kind} adds no op ({ops_k} against {ops_n})")
if sel["ops"] != ops_k - ops_n:
    bad.append(f"the edit selects {sel['ops']} ops, the recomputation added {ops_k - ops_n}")
if sel["calls"] != calls_k - calls_n:
    bad.append(f"the edit selects {sel['calls']} calls, the recomputation added {calls_k - calls_n}")
if sel_none["ops"] or sel_none["calls"]:
    bad.append(f"on the run without recomputation the edit selects {sel_none}")
longer = [s["step"] for s in rep["steps"]
          if s["predicted_ns"] is not None and s["predicted_ns"] > 1.001 * s["replayed_ns"]]
if longer:
    bad.append(f"steps {longer} predicted longer without their recomputation")
if bad:
    print("FAIL: " + "; ".join(bad))
    sys.exit(1)
print(f"ok: {sel['ops']} ops and {sel['calls']} calls selected, as the recomputation added")
PY
