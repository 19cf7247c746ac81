#!/bin/bash
# trainer_tests.sh — the CUDA trainer's correctness checks on a GPU machine (issue 6):
#   build        Release build for sm_90 (STEPSCOPE_CUDA=ON)
#   ctest_gpu    ctest -L gpu: every CUDA kernel against its CPU reference (fp32/tf32/bf16
#                tolerances in tests/gpu/test_cuda_kernels.c), the CUDA device, others' GPU tests
#   ctest_cpu    the CUDA backend's CPU-side tests and the trainer's tests, on this build
#   memcheck     compute-sanitizer memcheck on the kernel tests and on a 2-step tiny run
#   racecheck    compute-sanitizer racecheck on the kernel tests (shared-memory reductions)
#   initcheck    compute-sanitizer initcheck on a 2-step tiny run (reads of unwritten memory)
# Evidence in $OUT: one log per step, summary.txt, PROVENANCE.md.
#   OUT=/path scripts/gpu/trainer_tests.sh
source "$(dirname "$0")/trainer_lib.sh"
provenance_header
use_picked_nccl

ctest_gpu() { run_logged ctest --test-dir "$build" -L gpu --output-on-failure --timeout 300; }
ctest_cpu() { run_logged ctest --test-dir "$build" -R '^(gpu\.cpu_side|trainer)' --output-on-failure -j 8; }
tiny_run() { # tiny_run EXTRA...: 2 steps of the tiny model on the GPU
  "$@" "$trainer" --backend cuda --model tiny --steps 2 --batch 4 --quiet
}
memcheck() {
  run_logged compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
    "$build/tests/gpu/test_gpu_kernels" &&
  run_logged compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
    "$build/tests/gpu/test_gpu_attention_block" &&
  run_logged compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$trainer" --backend cuda --model tiny --steps 2 --batch 4
}
racecheck() {
  run_logged compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/gpu/test_gpu_kernels" &&
  run_logged compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/gpu/test_gpu_attention_block"
}
initcheck() {
  run_logged compute-sanitizer --tool initcheck --error-exitcode 9 \
    "$trainer" --backend cuda --model tiny --steps 2 --batch 4
}

step build build_gpu
step ctest_gpu ctest_gpu
step ctest_cpu ctest_cpu
step memcheck memcheck
step racecheck racecheck
step initcheck initcheck
provenance_footer
cat "$summary"
