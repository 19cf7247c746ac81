#!/usr/bin/env bash
# The classification options --comm-kernel / --compute-kernel and the
# environment variables STEPSCOPE_COMM_KERNELS / STEPSCOPE_COMPUTE_KERNELS
# (analyzer/src/metrics/analysis_options.c, docs/kineto-import.md "Communication
# families") on every command that analyses: a bad regex is exit 2 naming
# the pattern (analyze, export, diff, view; command line and environment);
# the rules change what is communication in analyze's JSON (with per-rule
# counts), in export's categories, in diff's numbers and in what view
# generates; the built-in families show in the JSON per rank.
# Traces: tests/kineto/traces/comm (numbers worked out in
# tests/kineto/test_comm_families.c).
set -u
stepscope=$1 traces=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
rules=$traces/rules.json

expect_usage_error() { # command, expected message fragment, args...
  local cmd=$1 msg=$2; shift 2
  "$stepscope" "$cmd" "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc -ne 2 ]; then echo "FAIL: $cmd $*: exit $rc, want 2"; fail=1; return; fi
  if ! grep -qF "stepscope $cmd: $msg" "$tmp/err"; then
    echo "FAIL: $cmd $*: message was: $(cat "$tmp/err")"; fail=1
  fi
}
mkdir -p "$tmp/run" && cp "$rules" "$tmp/run/rank-0.json"
for cmd in analyze export diff view; do
  case $cmd in
    analyze) args=("$rules") ;;
    export) args=("$rules" -o "$tmp/t.json") ;;
    diff) args=("$rules" "$rules") ;;
    view) args=("$tmp/run" --html "$tmp/v.html") ;;
  esac
  expect_usage_error $cmd "bad --comm-kernel 'dispatch(('" "${args[@]}" --comm-kernel 'dispatch(('
  expect_usage_error $cmd "bad --compute-kernel '[nccl'" "${args[@]}" --compute-kernel '[nccl'
  expect_usage_error $cmd "bad --comm-kernel ''" "${args[@]}" --comm-kernel ''
  expect_usage_error $cmd "--comm-kernel needs a value" "${args[@]}" --comm-kernel
  STEPSCOPE_COMM_KERNELS='fine;a((' expect_usage_error $cmd "bad pattern 'a((' in STEPSCOPE_COMM_KERNELS" "${args[@]}"
  STEPSCOPE_COMPUTE_KERNELS='+x' expect_usage_error $cmd "bad pattern '+x' in STEPSCOPE_COMPUTE_KERNELS" "${args[@]}"
done
expect_usage_error view "--comm-kernel 'a;b': view passes rules on in STEPSCOPE_COMM_KERNELS" "$tmp/run" --html "$tmp/v.html" \
  --comm-kernel 'a;b'
for cmd in analyze export diff view; do
  "$stepscope" $cmd --help | grep -q -- "--comm-kernel RE" || { echo "FAIL: $cmd --help lacks --comm-kernel"; fail=1; }
done

# analyze --json: built-in families, user rules, the environment
"$stepscope" analyze "$traces/deepep_like.json" --quiet --json "$tmp/deepep.json" &&
  "$stepscope" analyze "$traces/gloo_cpu.json" --quiet --json "$tmp/gloo.json" &&
  "$stepscope" analyze "$rules" --quiet --json "$tmp/plain.json" &&
  "$stepscope" analyze "$rules" --quiet --json "$tmp/cli.json" --comm-kernel my_custom \
    --compute-kernel ncclDevKernel &&
  STEPSCOPE_COMM_KERNELS='my_custom;;nothing_matches' "$stepscope" analyze "$rules" --quiet \
    --json "$tmp/env.json" &&
  STEPSCOPE_COMPUTE_KERNELS=AllGather "$stepscope" analyze "$rules" --quiet --json "$tmp/both.json" \
    --comm-kernel ncclDev ||
  { echo "FAIL: analyze --json"; fail=1; }
"$stepscope" analyze "$traces/deepep_like.json" > "$tmp/deepep.txt" &&
  grep -q "built-in family deepep *4 *640.0 us" "$tmp/deepep.txt" &&
  grep -q "all_to_all_dispatch 2 (220.0 us), all_to_all_combine 2 (420.0 us)" "$tmp/deepep.txt" ||
  { echo "FAIL: analyze text lacks the per-rule counts: $(cat "$tmp/deepep.txt")"; fail=1; }
"$stepscope" analyze "$rules" --comm-kernel my_custom > "$tmp/rules.txt" &&
  grep -q -- "--comm-kernel 'my_custom' *1 *100.0 us" "$tmp/rules.txt" ||
  { echo "FAIL: analyze text lacks the user rule: $(cat "$tmp/rules.txt")"; fail=1; }
python3 - "$tmp" <<'PY' || { echo "FAIL: analyze --json classification"; fail=1; }
import json, sys
tmp = sys.argv[1]
def rank0(name):
    return json.load(open(f"{tmp}/{name}.json"))["ranks"][0]
def ops(lst, key, val):
    return [(e["ops"], e["time_ns"]) for e in lst if e[key] == val]

r = rank0("deepep")
c = r["classification"]
assert ops(c["families"], "family", "deepep") == [(4, 640000)], c
assert ops(c["comm_op_kinds"], "op", "all_to_all_dispatch") == [(2, 220000)], c
assert ops(c["comm_op_kinds"], "op", "all_to_all_combine") == [(2, 420000)], c
assert r["comm_kernels_by_name"] == 4
t = r["totals"]
assert (t["comm_ns"], t["overlap_ns"], t["exposed_comm_ns"]) == (640000, 620000, 20000), t

r = rank0("gloo")
c = r["classification"]
assert r["host_timeline"] is True
assert ops(c["families"], "family", "gloo") == [(1, 290000)], c
assert ops(c["families"], "family", "c10d") == [(1, 20000)], c
assert ops(c["comm_op_kinds"], "op", "all_reduce") == [(2, 310000)], c
assert r["totals"]["exposed_comm_ns"] == 100000

r = rank0("plain")
c = r["classification"]
assert c["evidence"] == {"ops": 1, "time_ns": 50000}, c
assert ops(c["families"], "family", "nccl") == [(1, 100000)], c
assert c["user_rules"] == [], c
assert r["totals"]["comm_ns"] == 150000

r = rank0("cli")
c = r["classification"]
assert [(u["option"], u["class"], u["pattern"], u["origin"], u["ops"], u["time_ns"]) for u in c["user_rules"]] == [
    ("--comm-kernel", "comm", "my_custom", "command line", 1, 100000),
    ("--compute-kernel", "compute", "ncclDevKernel", "command line", 2, 150000)], c
assert c["evidence"]["ops"] == 0 and c["families"] == [], c
assert (r["totals"]["comm_ns"], r["totals"]["compute_ns"]) == (100000, 300000), r["totals"]

r = rank0("env")
c = r["classification"]
assert [(u["pattern"], u["origin"], u["ops"]) for u in c["user_rules"]] == [
    ("my_custom", "STEPSCOPE_COMM_KERNELS", 1), ("nothing_matches", "STEPSCOPE_COMM_KERNELS", 0)], c
assert r["totals"]["comm_ns"] == 250000

r = rank0("both")  # --compute-kernel (from the environment) wins over --comm-kernel
c = r["classification"]
assert [(u["option"], u["origin"], u["ops"]) for u in c["user_rules"]] == [
    ("--comm-kernel", "command line", 1), ("--compute-kernel", "STEPSCOPE_COMPUTE_KERNELS", 1)], c
assert (r["totals"]["comm_ns"], r["totals"]["compute_ns"]) == (100000, 250000), r["totals"]
print("analyze --json: classification as worked out")
PY

# export: the NCCL kernels forced to compute are exported as compute
"$stepscope" export "$rules" -o "$tmp/e0.json" && "$stepscope" export "$rules" -o "$tmp/e1.json" \
  --compute-kernel ncclDevKernel --comm-kernel my_custom || { echo "FAIL: export"; fail=1; }
python3 - "$tmp" <<'PY' || { echo "FAIL: export categories"; fail=1; }
import json, sys
tmp = sys.argv[1]
def cats(name):
    d = json.load(open(f"{tmp}/{name}.json"))
    return {e["name"][:18]: e.get("cat") for e in d["traceEvents"]
            if e.get("ph") == "X" and ("nccl" in e.get("name", "") or "my_custom" in e.get("name", ""))}
c0, c1 = cats("e0"), cats("e1")
assert c0 == {"my_custom_alltoall": "compute", "ncclDevKernel_AllR": "comm", "ncclDevKernel_AllG": "comm"}, c0
# a communication kernel named all-to-all is tagged as one (the viewer colours it)
assert c1 == {"my_custom_alltoall": "comm,all_to_all", "ncclDevKernel_AllR": "compute", "ncclDevKernel_AllG": "compute"}, c1
PY
# DeepEP's dispatch/combine/notify kernels are all-to-alls in the export; its layout kernel
# (local computation) stays compute
"$stepscope" export "$traces/deepep_like.json" -o "$tmp/deepep.json" || { echo "FAIL: export deepep"; fail=1; }
python3 - "$tmp/deepep.json" <<'PY' || { echo "FAIL: DeepEP kernels tagged all_to_all"; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
cats = {}
for e in d["traceEvents"]:
    # the kernels' own slices: the critical path's track repeats their names as derived slices
    if e.get("ph") == "X" and "deep_ep" in e.get("name", "") and e.get("cat") != "derived":
        fn = e["name"].split("(")[0].split("<")[0].split("::")[-1]
        cats.setdefault(fn, set()).add(e.get("cat"))
want = {"dispatch": {"comm,all_to_all"}, "combine": {"comm,all_to_all"},
        "notify_dispatch": {"comm,all_to_all"}, "cached_notify_combine": {"comm,all_to_all"},
        "get_dispatch_layout": {"compute"}}
assert cats == want, cats
PY

# diff: both runs analysed with the rules (exposed comm 70 us without, 0 with)
"$stepscope" diff "$rules" "$rules" --quiet --json "$tmp/d0.json" &&
  "$stepscope" diff "$rules" "$rules" --quiet --json "$tmp/d1.json" --compute-kernel ncclDevKernel ||
  { echo "FAIL: diff"; fail=1; }
python3 - "$tmp" <<'PY' || { echo "FAIL: diff with rules"; fail=1; }
import json, sys
tmp = sys.argv[1]
x = [json.load(open(f"{tmp}/d{i}.json"))["headline"]["exposed_comm"] for i in (0, 1)]
assert (x[0]["a"]["median"], x[0]["b"]["median"]) == (70000, 70000), x[0]
assert (x[1]["a"]["median"], x[1]["b"]["median"]) == (0, 0), x[1]
PY

# view: the rules reach the report and export it generates
"$stepscope" view "$tmp/run" --html "$tmp/v.html" --comm-kernel my_custom --compute-kernel ncclDevKernel \
  >/dev/null 2>"$tmp/view.err" || { echo "FAIL: view: $(cat "$tmp/view.err")"; fail=1; }
grep -q '"pattern":"my_custom","origin":"STEPSCOPE_COMM_KERNELS","ops":1' "$tmp/v.html" &&
  grep -q '"pattern":"ncclDevKernel","origin":"STEPSCOPE_COMPUTE_KERNELS","ops":2' "$tmp/v.html" ||
  { echo "FAIL: view's generated report lacks the rules"; fail=1; }
# the documented table names every family of the code's table
root=$traces/../../../..
for id in $(sed -n 's/^    {"\([a-z_0-9]*\)",.*/\1/p' "$root/analyzer/src/model/comm_families.c"); do
  grep -q "(\`$id\`)" "$root/docs/kineto-import.md" || { echo "FAIL: family $id not in docs/kineto-import.md"; fail=1; }
done
[ "$(sed -n 's/^    {"\([a-z_0-9]*\)",.*/\1/p' "$root/analyzer/src/model/comm_families.c" | wc -l)" -ge 12 ] ||
  { echo "FAIL: could not read the family ids from comm_families.c"; fail=1; }
exit $fail
