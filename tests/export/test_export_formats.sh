#!/usr/bin/env bash
# test_export_formats.sh — both export formats of every test run: the
# committed sample run, the committed Kineto runs and runs generated with
# stepscope-gen and make_kineto.py (overlapping slices on one stream,
# pipelines, copies, syncs, CUDA graphs, CPU backend, missing members,
# overlapping steps), each exported as JSON and as .pftrace and analysed:
#   check_json_nesting.py   every JSON thread track nests (extra lanes named)
#   check_pftrace.py        the .pftrace decoded with Perfetto's compiled proto
#                           (perfetto_trace_pb2) and compared with the JSON
#                           and the report
# plus the intern-table reset path (a tiny table limit), --rank, --format,
# and a usage error.
#
# Also the hostile runs of the hardening tests (terminal escapes, damaged
# frames, a huge world size, times near 2^63 ns, memory records) and a run
# with names that are not UTF-8 (both formats write U+FFFD for them).
#
# usage: test_export_formats.sh STEPSCOPE STEPSCOPE_GEN PYTHON3 SOURCE_DIR VENV_DIR
#                               WRITE_HOSTILE_RUN TEST_ANALYZER_UTF8
# Perfetto's proto comes from PyPI (tests/export/requirements.txt) into
# VENV_DIR; the test exits 77 (skipped) only when PyPI cannot be reached.
set -euo pipefail
stepscope=$1 gen=$2 py=$3 src=$4 venv=$5 hostile=$6 utf8=$7
here=$src/tests/export

# A rank whose trace names no host is "rank 0 (GPU 0)" in both formats, not "rank 0 (, GPU 0)"
# (issue 30 §5); needs no Perfetto proto, so it runs before the virtual environment.
nohost=$(mktemp -d)
printf '%s' '{"schemaVersion":1,"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"stream":7,"device":0}}]}' >"$nohost/trace.json"
"$stepscope" export "$nohost/trace.json" -o "$nohost/t.json" >/dev/null
"$stepscope" export "$nohost/trace.json" -o "$nohost/t.pftrace" >/dev/null
"$py" - "$nohost/t.json" <<'PY'
import json, sys
names = [e["args"]["name"] for e in json.load(open(sys.argv[1]))["traceEvents"]
         if e.get("ph") == "M" and e.get("name") == "process_name"]
assert names == ["rank 0 (GPU 0)"], names
PY
grep -q "rank 0 (GPU 0)" "$nohost/t.pftrace" && ! grep -q "rank 0 (, " "$nohost/t.pftrace" ||
  { echo "FAIL: .pftrace process name without a host" >&2; exit 1; }
rm -rf "$nohost"

if ! "$venv/bin/python" -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' 2>/dev/null; then
  rm -rf "$venv"
  "$py" -m venv "$venv" || { echo "FAIL: cannot create a virtual environment (python3-venv, scripts/install-deps.sh)" >&2; exit 1; }
  if ! "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"; then
    if ! "$py" -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/perfetto/", timeout=10)' 2>/dev/null; then
      echo "SKIP: PyPI is unreachable, so Perfetto's compiled proto (tests/export/requirements.txt) cannot be installed"
      exit 77
    fi
    echo "FAIL: PyPI is reachable but installing tests/export/requirements.txt failed" >&2
    exit 1
  fi
fi
vpy=$venv/bin/python

d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT

# check RUN NAME [MIN_EXTRA_LANES [EXPORT OPTIONS...]]
check() {
  local run=$1 name=$2 min_extra=${3:-0}
  shift 3 || shift $#
  echo "== $name"
  "$stepscope" export "$run" -o "$d/$name.json" "$@"
  "$stepscope" export "$run" -o "$d/$name.pftrace" "$@"
  "$stepscope" analyze "$run" --json "$d/$name.report.json" "$@" >/dev/null
  "$py" "$here/check_json_nesting.py" "$d/$name.json" "$min_extra"
  "$vpy" "$here/check_pftrace.py" "$d/$name.pftrace" "$d/$name.json" "$d/$name.report.json"
}

# committed runs
check "$src/samples/cpu-dp2pp2-1f1b" sample
check "$src/tests/kineto/traces/cpu_ddp" kineto_cpu_ddp
for f in "$src"/tests/kineto/traces/*.json; do
  n=$(basename "$f" .json)
  check "$f" "kineto_$n"
done
# a launch call and kernels that overlap without nesting: extra lanes, and
# the call's flow starts on its lane
check "$src/tests/export/traces/overlapping_calls" overlapping_calls 2
# communication families (DeepEP kernels: "comm,all_to_all"; symmetric
# memory, gloo on the host, user rules' trace) and the trainer's MoE phases
# (host ranges moe.dispatch*, moe.combine*: "host,moe_dispatch"...): the
# same second categories in both formats
for f in "$src"/tests/kineto/traces/comm/*.json; do
  check "$f" "kineto_comm_$(basename "$f" .json)"
done
check "$src/tests/export/traces/moe_phases" moe_phases
# generated runs
"$gen" "$d/g1" --ranks 3 --lanes 3 --pipeline --copies --syncs >/dev/null
check "$d/g1" gen_pipeline
"$gen" "$d/g2" --ranks 2 --lanes 2 --overlap --copies >/dev/null
check "$d/g2" gen_overlap 1                       # same-stream overlaps: extra lanes needed
"$gen" "$d/g3" --ranks 2 --overlap-steps 2 >/dev/null
check "$d/g3" gen_overlap_steps
"$gen" "$d/g4" --ranks 2 --cpu --missing-member >/dev/null
check "$d/g4" gen_cpu_missing_member
"$gen" "$d/g5" --iter --ranks 2 --graphs --iter-comm --prefetch >/dev/null
check "$d/g5" gen_iter_graphs
"$py" "$src/tests/kineto/make_kineto.py" "$d/k1" --ranks 2 --steps 3 --graphs --gzip >/dev/null
check "$d/k1" kineto_graphs
# hostile and odd runs
for mode in escape frames world bigtime memory; do
  "$hostile" $mode "$d/h_$mode" >/dev/null
  check "$d/h_$mode" hostile_$mode
done
"$utf8" --write-run "$d/u8" >/dev/null
check "$d/u8" utf8_names
# selection options are honoured by both formats alike
check "$src/samples/cpu-dp2pp2-1f1b" sample_rank1 0 --rank 1 --steps 1:2

# export --replay: the replay processes' slices are the same in both formats (derived slices)
"$stepscope" export "$src/samples/cpu-dp2pp2-1f1b" -o "$d/replay.json" --what-if 'kind=comm:scale=2'
"$stepscope" export "$src/samples/cpu-dp2pp2-1f1b" -o "$d/replay.pftrace" --what-if 'kind=comm:scale=2'
"$py" "$here/check_json_nesting.py" "$d/replay.json" 0
"$vpy" "$here/check_pftrace.py" "$d/replay.pftrace" "$d/replay.json" "$d/sample.report.json"

# the intern tables start over (SEQ_INCREMENTAL_STATE_CLEARED) when full
STEPSCOPE_PFTRACE_INTERN_LIMIT=32 "$stepscope" export "$src/samples/cpu-dp2pp2-1f1b" -o "$d/reset.pftrace"
"$vpy" "$here/check_pftrace.py" "$d/reset.pftrace" "$d/sample.json" "$d/sample.report.json" --min-resets 10

# --format wins over the name; a bad format is a usage error
"$stepscope" export "$d/g1" -o "$d/g1.bin" --format perfetto
"$vpy" "$here/check_pftrace.py" "$d/g1.bin" "$d/gen_pipeline.json" "$d/gen_pipeline.report.json"
set +e
"$stepscope" export "$d/g1" -o "$d/x" --format xml 2>"$d/err"
rc=$?
set -e
test $rc -eq 2 || { echo "FAIL: --format xml exited $rc, not 2" >&2; exit 1; }
grep -q -- "--format must be json or perfetto" "$d/err"
echo "all export format checks passed"
