#!/usr/bin/env bash
# The main job (README "Quick start"): installs what is missing, builds, then
#   1. trains a tiny GPT on 4 CPU ranks (DP2 x PP2, 1F1B schedule) with tracing on,
#   2. shows what the trace holds (stepscope info),
#   3. analyzes it (stepscope analyze: text report + report.json),
#   4. exports it for Perfetto (trace.json) and writes the offline viewer (view.html).
# Output goes to out/demo-run/ (or the directory given as $1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

run=${1:-out/demo-run}
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs" --target stepscope stepscope-train

rm -rf "$run"
mkdir -p "$run"
echo "== 1. train: 4 ranks, DP2 x PP2, 1F1B, traced into $run"
build/trainer/stepscope-train --world 4 --dp 2 --pp 2 --schedule 1f1b --microbatches 4 \
  --batch 8 --steps 12 --trace "$run" --log "$run/train.jsonl"

echo
echo "== 2. stepscope info $run"
build/analyzer/stepscope info "$run"

echo
echo "== 3. stepscope analyze $run"
build/analyzer/stepscope analyze "$run" --json "$run/report.json"

echo
echo "== 4. stepscope export / view"
build/analyzer/stepscope export "$run" -o "$run/trace.json"
build/analyzer/stepscope view "$run" --html "$run/view.html"
echo
echo "Open $run/trace.json in https://ui.perfetto.dev, $run/view.html in a browser,"
echo "or serve the viewer with: build/analyzer/stepscope view $run"
