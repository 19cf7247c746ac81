#!/bin/bash
# mfu_table_fails.sh — the MFU table (scripts/gpu/mfu_table.py, window step 7) reads MFU against
# the datasheet peak and the measured GEMM ceiling, and fails when a run it expects left no
# numbers: a folder with both runs of a model and the ceiling passes (MFU of the ceiling =
# MFU x peak / ceiling); without the ceiling, without PyTorch's run, or empty, it fails. The
# datasheet peaks of H100 and H200 are the trainer's.
set -u
source "$(dirname "$0")/expect.sh"
table=$(dirname "$0")/../../scripts/gpu/mfu_table.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect 0 python3 "$table" --datasheet-peak "NVIDIA H200"
expect_output "^989$"
expect 0 python3 "$table" --datasheet-peak "NVIDIA H100 PCIe"
expect_output "^756$"
mkdir -p "$tmp/ok" "$tmp/empty"
for i in 0 1 2 3 4 5; do
  echo "{\"step\":$i,\"loss\":5.0,\"step_ms\":100.0,\"tokens_per_s\":80000,\"mfu\":0.40}" >> "$tmp/ok/gpt2-124m.stepscope.jsonl"
done
echo '{"framework": "pytorch 2", "compile": false, "median_step_ms": 110.0, "tokens_per_s": 74000, "mfu": 0.36}' > "$tmp/ok/gpt2-124m.torch-eager.json"
echo '{"tflops": 791.2}' > "$tmp/ok/gemm.json"
expect 0 python3 "$table" "$tmp/ok" --peak 989 --expect gpt2-124m
expect_output "\| gpt2-124m \| stepscope-train \| 100\.0 \| 80000 \| 40\.0 % \| 50\.0 % \|"
expect_output "^headline: MFU 124m 40\.0% \(50\.0% of ceiling\), torch 36\.0%; ceiling 791"
expect 1 python3 "$table" "$tmp/ok" --peak 989 --expect gpt2-124m,gpt2-350m
expect_output "MISSING: gpt2-350m stepscope-train, gpt2-350m pytorch eager"
rm "$tmp/ok/gemm.json"
expect 1 python3 "$table" "$tmp/ok" --peak 989 --expect gpt2-124m
expect_output "MISSING: gemm ceiling"
expect 1 python3 "$table" "$tmp/empty" --peak 989 --expect gpt2-124m
exit $fail
