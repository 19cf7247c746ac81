#!/usr/bin/env bash
# `stepscope info` and `stepscope dump` as a user runs them, on a run with
# known contents (write_sample_run): text and JSON output, warnings for the
# truncated rank, dropped records, exit codes, errors for bad input, and that
# the plain `zstd` tool decompresses a trace file.
set -u
stepscope=$1 writer=$2 make_kineto=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; fi
}

"$writer" "$tmp/run" || { echo "FAIL: could not write the sample run"; exit 1; }

out=$("$stepscope" info "$tmp/run"); rc=$?
echo "$out"
check "info exits 0 on a run with only warnings" test $rc -eq 0
check "info counts the files and world" grep -q "3 trace files, world size 3" <<<"$out"
check "info reports dropped records" grep -q "dropped records: 5" <<<"$out"
check "info warns about the truncated rank" grep -q "warning: .*rank-00002.trace.zst: offset [0-9]*: truncated" <<<"$out"
check "info lists metadata keys" grep -q "metadata: layout" <<<"$out"
check "info shows kernels of the complete ranks" grep -Eq "kernel +[0-9]+" <<<"$out"

"$stepscope" info "$tmp/run" --json >"$tmp/info.json"
check "info --json is valid JSON with the right numbers" python3 - "$tmp/info.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["files"] == 3 and len(d["ranks"]) == 3, d
r0, r1, r2 = d["ranks"]
assert r0["rank"] == 0 and r0["counts"]["kernel"] == 100 and r0["counts"]["api"] == 100
assert r0["counts"]["collective"] == 4 and r0["counts"]["range"] == 2, r0["counts"]
assert r1["dropped"] == 5 and d["totals"]["dropped"] == 5
assert r0["header"]["hostname"] == "node-a" and r0["header"]["world_size"] == 3
assert r0["warnings"] == [] and r0["error"] is None
# the cut lost the last frame and its END record: not closed
assert len(r2["warnings"]) == 2 and "truncated" in r2["warnings"][0], r2["warnings"]
assert "rank 2's trace was not closed" in r2["warnings"][1], r2["warnings"]
assert r0["closed"] == "closed" and r2["closed"] == "not_closed"
assert r2["counts"]["kernel"] < 100  # the lost frame held kernels
assert r0["first_ns"] == 10000, r0["first_ns"]
PY

"$stepscope" dump "$tmp/run/rank-00000.trace.zst" >"$tmp/dump.jsonl"; rc=$?
check "dump exits 0" test $rc -eq 0
check "dump prints valid JSON lines with resolved strings" python3 - "$tmp/dump.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines[0]["kind"] == "header" and lines[0]["rank"] == 0
kernels = [l for l in lines if l["kind"] == "kernel"]
assert len(kernels) == 100 and kernels[0]["name"] == 'gemm "tn"', kernels[0]
assert kernels[0]["start_ns"] == 10500 and kernels[0]["end_ns"] == 11500
assert kernels[0]["grid_x"] == 0 and kernels[0]["correlation_id"] == 1
meta = [l for l in lines if l["kind"] == "metadata"]
assert meta and meta[0]["key"] == "layout"
PY
n=$("$stepscope" dump "$tmp/run/rank-00000.trace.zst" --kind collective | wc -l)
check "dump --kind filters" test "$n" -eq 4

check "zstd -d decompresses a trace file" zstd -q -d -c "$tmp/run/rank-00000.trace.zst" -o /dev/null
"$stepscope" dump "$tmp/run/rank-00002.trace.zst" >/dev/null 2>"$tmp/err"; rc=$?
check "dump of a truncated file exits 0 and warns" test $rc -eq 0
check "the warning names the file" grep -q "rank-00002.trace.zst: offset" "$tmp/err"

"$stepscope" info "$tmp/nope" 2>"$tmp/err"; rc=$?
check "info on a missing path exits 1" test $rc -eq 1
check "and says so" grep -q "no such file" "$tmp/err"
mkdir "$tmp/empty"
"$stepscope" info "$tmp/empty" 2>"$tmp/err"; rc=$?
check "info on an empty directory exits 1" test $rc -eq 1
check "and says what is missing" grep -q "no rank files (stepscope rank-\*.trace.zst, or PyTorch" "$tmp/err"
printf 'garbage that is not zstd' >"$tmp/run/rank-00009.trace.zst"
"$stepscope" info "$tmp/run" >"$tmp/out"; rc=$?
check "info with a corrupt file exits 1" test $rc -eq 1
check "and names the file and offset" grep -q "error: .*rank-00009.trace.zst: offset 0" "$tmp/out"
"$stepscope" info --bogus 2>/dev/null; rc=$?
check "unknown option exits 2" test $rc -eq 2
"$stepscope" info --help | grep -q "usage: stepscope info"; check "info --help" test $? -eq 0
"$stepscope" dump --help | grep -q "usage: stepscope dump"; check "dump --help" test $? -eq 0
"$stepscope" --help | grep -q "commands:"; check "stepscope --help" test $? -eq 0
"$stepscope" frobnicate 2>/dev/null; rc=$?
check "unknown command exits 2" test $rc -eq 2

# PyTorch profiler traces are a run too
python3 "$make_kineto" --ranks 2 --gzip "$tmp/kineto" >/dev/null
out=$("$stepscope" info "$tmp/kineto"); rc=$?
check "info on a Kineto run exits 0" test $rc -eq 0
check "info names the Kineto producer" grep -q "PyTorch profiler" <<<"$out"
"$stepscope" info "$tmp/kineto" --json >"$tmp/kineto.json"
check "info --json counts Kineto kernels and collectives" python3 - "$tmp/kineto.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["files"] == 2 and [r["rank"] for r in d["ranks"]] == [0, 1], d
for r in d["ranks"]:
    assert r["counts"]["kernel"] > 0 and r["counts"]["collective"] > 0 and r["error"] is None, r
PY
# a trace that does not say its world size (Kineto without distributedInfo): "unknown", not 0
mkdir "$tmp/noworld"
printf '%s' '{"schemaVersion":1,"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"stream":7,"device":0}}]}' >"$tmp/noworld/trace.json"
out=$("$stepscope" info "$tmp/noworld/trace.json" 2>&1); rc=$?
check "info on a trace without a world size exits 0" test $rc -eq 0
check "info says the world size is unknown" grep -q "1 trace file, world size unknown," <<<"$out"
check "info does not say world size 0" bash -c '! grep -q "world size 0" <<<"$1"' _ "$out"
exit $fail
