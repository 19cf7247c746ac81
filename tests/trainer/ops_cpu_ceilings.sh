#!/bin/sh
# ops_cpu_ceilings.sh — CPU ceilings for `stepscope ops` on a trainer run (docs/ops.md "CPU
# ceilings").
#
# usage: ops_cpu_ceilings.sh TRAINER STEPSCOPE BENCH_CPU_PEAKS
# Measures this machine with bench_cpu_peaks (short runs: the numbers are checked for form
# and sign, not value), traces a 2-step trainer run, then checks that `stepscope ops`
#   - without --peak names no ceiling for the CPU and says how to measure one;
#   - with the one-thread --peak spec the benchmark printed: the ceilings are "given", every
#     modelled row has a % of peak and a bound that follow from its intensity against the
#     ridge fp32 / bw, and the MFU from op FLOPs is given.
set -u
trainer=$1 stepscope=$2 bench=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-ops-cpu.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$bench" --seconds 0.02 --reps 1 --mib 16 >"$dir/peaks.txt" 2>&1 ||
    { echo "FAIL: bench_cpu_peaks failed"; cat "$dir/peaks.txt"; exit 1; }
spec=$(sed -n 's/^--peak \([^ ]*\) .*one thread.*/\1/p' "$dir/peaks.txt")
case "$spec" in
fp32=*G,bw=*G) ;;
*) echo "FAIL: no one-thread --peak spec in:"; cat "$dir/peaks.txt"; exit 1 ;;
esac
"$trainer" --backend cpu --steps 2 --quiet --trace "$dir/run" >"$dir/train.out" 2>&1 ||
    { echo "FAIL: training failed"; cat "$dir/train.out"; exit 1; }
"$stepscope" ops "$dir/run" >"$dir/plain.txt" 2>&1 || { echo "FAIL: ops"; cat "$dir/plain.txt"; exit 1; }
grep -q "a CPU's are not known (measure them with bench_cpu_peaks" "$dir/plain.txt" ||
    { echo "FAIL: no CPU ceiling hint:"; head -5 "$dir/plain.txt"; exit 1; }
"$stepscope" ops "$dir/run" --peak "$spec" --json "$dir/ops.json" >"$dir/peak.txt" 2>&1 ||
    { echo "FAIL: ops --peak $spec"; cat "$dir/peak.txt"; exit 1; }
python3 - "$dir/ops.json" "$spec" <<'PY' || exit 1
import json, sys
ops, spec = json.load(open(sys.argv[1])), sys.argv[2]
given = dict(kv.split("=") for kv in spec.split(","))
# "49.6G" is 49.6e9 (float("49.6e9")), not 49.6 * 1e9, which is 16600000000.000002 for 16.6:
# compare within a relative 1e-12, as the measured spec changes from run to run
fp32, bw = float(given["fp32"][:-1] + "e9"), float(given["bw"][:-1] + "e9")
near = lambda x, y: x is not None and abs(x - y) <= 1e-12 * abs(y)
bad = []
c = ops["ceilings"]
if c["source"] != "given" or not near(c["fp32_flops_per_s"], fp32) or not near(c["bytes_per_s"], bw):
    bad.append("ceilings %r, given %s" % (c, spec))
if fp32 <= 0 or bw <= 0: bad.append("a ceiling is not positive: %s" % spec)
rows = [r for r in ops["rows"] if r["family"] and r["dtype"] == "fp32" and r["time_ns"] > 0]
if not rows: bad.append("no modelled fp32 row")
for r in rows:
    want = "memory" if r["intensity"] < fp32 / bw else "compute"
    pct = 100 * (r["gb_per_s"] * 1e9 / bw if want == "memory" else r["tflops_per_s"] * 1e12 / fp32)
    if r["bound"] != want or r["pct_of_peak"] is None or abs(r["pct_of_peak"] - pct) > 1e-6 * max(pct, 1e-9) + 1e-6:
        bad.append("%s %s: bound %s %s%%, want %s %.6g%%" % (r["op"], r["shapes"], r["bound"], r["pct_of_peak"], want, pct))
if ops["mfu_from_op_flops"] is None or not ops["mfu_from_op_flops"] > 0:
    bad.append("no MFU from op FLOPs: %r" % ops["mfu_from_op_flops"])
if bad:
    print("FAIL:\n  " + "\n  ".join(bad)); sys.exit(1)
print("ok: %d fp32 rows against %s; MFU from op FLOPs %.4f" % (len(rows), spec, ops["mfu_from_op_flops"]))
PY
