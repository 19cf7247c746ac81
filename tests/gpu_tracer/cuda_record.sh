#!/bin/sh
# cuda_record.sh — GPU check (label gpu): traces cuda_app under `stepscope
# record` and checks with `stepscope dump` that kernels, copies, memsets,
# synchronizations, launch API calls and NVTX ranges reached the trace, and that
# the app's two cudaMalloc'd buffers (4 MiB each) and their cudaFree are MEMORY
# records of device 0 (CUPTI's MEMORY2) that `stepscope ops --memory` reads.
# Exits 77 (SKIP) when the app finds no CUDA device.
# Usage: cuda_record.sh STEPSCOPE CUDA_APP
set -u
stepscope=$1
app=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stepscope-cuda-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$app" > /dev/null 2>&1
[ $? -eq 77 ] && { echo "no CUDA device: SKIP"; exit 77; }
"$stepscope" record -o "$tmp/run" -- "$app" || exit 1
[ -f "$tmp/run/rank-00000.trace.zst" ] || { echo "no trace written"; exit 1; }
fail=0
for kind in kernel memcpy memset sync api range; do
  n=$("$stepscope" dump "$tmp/run/rank-00000.trace.zst" --kind $kind | wc -l)
  echo "$kind records: $n"
  [ "$n" -gt 0 ] || fail=1
done
"$stepscope" dump "$tmp/run/rank-00000.trace.zst" --kind memory > "$tmp/memory.jsonl"
"$stepscope" ops "$tmp/run" --memory --json "$tmp/mem.json" > /dev/null 2>&1 || fail=1
python3 - "$tmp/memory.jsonl" "$tmp/mem.json" <<'PY' || fail=1
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
mb4 = 4 << 20
allocs = [r["address"] for r in recs if r["memory_kind"] == 1 and r["device"] == 0 and r["bytes"] == mb4]
frees = [r["address"] for r in recs if r["memory_kind"] == 2 and r["device"] == 0 and r["bytes"] == mb4]
mem = {d["device"]: d for d in json.load(open(sys.argv[2]))["devices"]}
print("memory records: %d (4 MiB allocations %d, frees %d)" % (len(recs), len(allocs), len(frees)))
ok = len(allocs) >= 2 and sorted(set(allocs) & set(frees)) == sorted(set(allocs))
ok = ok and "cuda:0" in mem and mem["cuda:0"]["peak_allocated_bytes"] >= 2 * mb4
sys.exit(0 if ok else 1)
PY
exit $fail
