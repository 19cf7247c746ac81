#!/bin/bash
# window_steps.sh — the steps of a GPU window (window.sh run, window.sh deferred); sourced by
# window.sh's inner process after trainer_lib.sh. Each step is a function run by step()
# (trainer_lib.sh: own process group, time limit, PASS/FAIL/SKIP line with its notes), made of
# parts (part(): one check each, a failed part never stops the next). The order of
# run_steps is the priority: a call that runs out of time loses the last steps, not the first.
#
# A command bounded on its own inside a step runs under `timeout --foreground`: plain
# `timeout` would move it into a process group of its own, out of reach of the step's kill.
#
# Where things go: $OUT is the call's window folder (samples/gpu-<dev>-window/: logs,
# window.env, versions.txt); sample_dir WHAT makes samples/gpu-<dev>-WHAT/ beside it for a
# traced run. Setup writes window.env (the binaries, the library path, versions), which the
# later steps read (load_env).

# The binaries the window runs (the build tree's layout; pack.sh puts them in the kit) and
# the targets that make them.
WINDOW_BINARIES="analyzer/stepscope trainer/stepscope-train tracer/gpu/libstepscope_inject.so
  tests/gpu/test_gpu_kernels tests/gpu/test_gpu_attention_block tests/gpu/test_gpu_device
  tests/gpu/test_gpu_moe tests/gpu_tracer/gpu_tracer_cuda_app"
WINDOW_TARGETS="stepscope stepscope-train stepscope_inject test_gpu_kernels test_gpu_attention_block
  test_gpu_device test_gpu_moe gpu_tracer_cuda_app"
# Tools: those the call uses, those only some steps use, and those it must not rely on.
TOOLS_NEEDED="python3 ldd timeout"
TOOLS_GPU="nvidia-smi nvcc compute-sanitizer ncu cmake ninja cc torchrun"
TOOLS_NOT_RELIED_ON="zstd xz"

sample_dir() { # sample_dir WHAT: samples/gpu-<dev>-WHAT/ of this call, made
  local d=$EVROOT/samples/gpu-$DEV-$1
  mkdir -p "$d" && echo "$d"
}

# The environment setup chose (window.env), and the names the steps use.
load_env() {
  if [ -f "$OUT/window.env" ]; then source "$OUT/window.env"; fi
  BIN=${BIN:-$build}
  trainer=$BIN/trainer/stepscope-train
  stepscope=$BIN/analyzer/stepscope
  # PyTorch runs with its own NCCL: the kit's left off its library path
  TORCH_LD=$(echo "${LD_LIBRARY_PATH:-}" | tr ':' '\n' | grep -vxF "${KIT_NCCL_DIR:-/none}" | paste -sd:)
}

# jsonl_numbers FILE: "N steps, loss A -> B, M ms/step (median after the first 3)" of a
# stepscope-train --log file.
jsonl_numbers() {
  python3 - "$1" <<'PY' 2>/dev/null
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
if recs:
    ms = sorted(r["step_ms"] for r in (recs[3:] or recs))
    print("%d steps, loss %.4f -> %.4f, %.1f ms/step" % (len(recs), recs[0]["loss"], recs[-1]["loss"],
                                                        ms[len(ms) // 2]))
PY
}

# --- 0 setup -------------------------------------------------------------------------------
versions() {
  local c
  for c in "nvidia-smi" \
    "nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,compute_cap --format=csv" \
    "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv" \
    "nvcc --version" "cmake --version" "ninja --version" "cc --version" "uname -a" "nproc" "df -h /tmp"; do
    echo "\$ $c"; timeout --foreground 20 $c 2>&1 | head -40; echo
  done
  echo "\$ python3: torch, its CUDA and NCCL, the device"
  timeout --foreground 60 python3 -c 'import sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)
print("TORCH_NCCL=" + ".".join(map(str, torch.cuda.nccl.version())))
print("device", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")' 2>&1 | tail -5
  echo "\$ libraries of the toolkit"
  ls /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/extras/CUPTI/lib64 2>/dev/null |
    grep -E 'cupti|nccl|cublas|cudart' | sort -u
  echo "\$ kit"; cat "$KIT/COMMIT" 2>/dev/null || echo "no kit at $KIT"
}

setup_machine() {
  local envf=$OUT/window.env bin="" desc need_build=0 t missing="" gpus driver tree ld libs_rc
  # versions (informational, bounded)
  if [ "$DRY" = 1 ]; then echo "dry run: versions not probed" > "$OUT/versions.txt"
  else versions > "$OUT/versions.txt" 2>&1; fi
  cat "$OUT/versions.txt"
  # tools
  for t in $TOOLS_NEEDED $TOOLS_GPU; do command -v "$t" > /dev/null || missing="$missing $t"; done
  note "tools missing:${missing:- none}"
  for t in $TOOLS_NOT_RELIED_ON; do command -v "$t" > /dev/null || echo "($t absent: not needed)"; done
  for t in $TOOLS_NEEDED; do
    command -v "$t" > /dev/null || { reason "the call needs $t"; echo "no $t"; return 1; }
  done
  # the GPU
  gpus=$(timeout --foreground 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  driver=$(timeout --foreground 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
  note "${gpus:-0} GPU(s): ${DEVICE_NAME:-none}${driver:+, driver $driver}"
  # the binaries: a given build, else the kit's prebuilt ones, else a build on this machine
  if [ -n "${WINDOW_BUILD:-}" ]; then
    bin=$WINDOW_BUILD; desc="the build given to window.sh ($WINDOW_BUILD)"
  elif ls "$KIT"/prebuilt.tar* > /dev/null 2>&1; then
    local arch kc
    arch=$(ls "$KIT"/prebuilt.tar* | head -1)
    kc=$(head -1 "$KIT/COMMIT" | cut -d' ' -f1 | cut -c1-12)
    python3 "$repo/scripts/gpu/kit_setup.py" unpack "$arch" "$WINDOW_EV/prebuilt-$kc" || return 1
    bin=$WINDOW_EV/prebuilt-$kc/prebuilt
    desc="prebuilt in the kit (commit $(cat "$bin/COMMIT" 2>/dev/null), $(sed -n 2p "$KIT/COMMIT"))"
  else
    need_build=1; desc="none in the kit: built on this machine"
  fi
  # the kit's NCCL (several ranks on one GPU need >= 2.30), first on the library path
  unpack_kit_nccl
  local nccl_v=""
  [ -e "$KIT_NCCL_DIR/libnccl.so.2" ] && nccl_v=$(nccl_version_of "$KIT_NCCL_DIR/libnccl.so.2")
  note "kit NCCL ${nccl_v:-absent}"
  ld=$KIT_NCCL_DIR
  [ -n "$bin" ] && ld="$ld:$bin/tracer"
  ld="$ld:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -d "$KIT/deps/root/usr/lib/x86_64-linux-gnu" ] && ld="$ld:$KIT/deps/root/usr/lib/x86_64-linux-gnu"
  # ldd of every binary; missing libraries looked for where the machine keeps them
  if [ -n "$bin" ]; then
    local files=()
    for b in $WINDOW_BINARIES; do files+=("$bin/$b"); done
    LD_LIBRARY_PATH=$ld python3 "$repo/scripts/gpu/kit_setup.py" libs "${files[@]}" \
      --search /usr/local/cuda/lib64 --search /usr/local/cuda/lib \
      --search /usr/local/cuda/extras/CUPTI/lib64 --search /usr/local/cuda/targets/x86_64-linux/lib \
      --search "$KIT/deps/root/usr/lib/x86_64-linux-gnu" --search /usr/lib/x86_64-linux-gnu \
      ${WINDOW_HIDE_LIBS:+--hide "$WINDOW_HIDE_LIBS"} > "$OUT/ldd.txt" 2>&1
    libs_rc=$?
    cat "$OUT/ldd.txt"
    ld=$(sed -n 's/^LD_LIBRARY_PATH=//p' "$OUT/ldd.txt" | tail -1)
    for b in $WINDOW_BINARIES; do [ -e "$bin/$b" ] || { echo "missing $bin/$b"; libs_rc=1; }; done
    if [ "$libs_rc" != 0 ]; then
      need_build=1
      note "prebuilt binaries: $(grep '^missing' "$OUT/ldd.txt" | sed 's/ (needed by.*//; s/^missing //' | paste -sd, | cut -c1-160) -> build on this machine"
    else
      note "binaries: $(grep 'binaries checked' "$OUT/ldd.txt")"
    fi
  fi
  # the tree's scripts against the kit's copy (the tree sent has no .git)
  if [ -d "$KIT/gpu" ]; then
    if diff -rq -x __pycache__ "$KIT/gpu" "$repo/scripts/gpu" > /dev/null 2>&1; then tree="same as the kit's ($(head -1 "$KIT/COMMIT" | cut -c1-12))"
    else tree="DIFFER from the kit's ($(head -1 "$KIT/COMMIT" | cut -c1-12)): $(diff -rq -x __pycache__ "$KIT/gpu" "$repo/scripts/gpu" 2>&1 | head -3 | paste -sd';')"; fi
  fi
  {
    printf 'export %s=%q\n' BIN "$bin" BINARIES_DESC "$desc" NEED_BUILD "$need_build" \
      LD_LIBRARY_PATH "$ld" KIT_NCCL_DIR "$KIT_NCCL_DIR" KIT_NCCL_VERSION "$nccl_v" \
      GPU_COUNT "${gpus:-0}" DRIVER "$driver" TREE_SCRIPTS "${tree:-no kit to compare with}" \
      TORCH_NCCL "$(sed -n 's/^TORCH_NCCL=//p' "$OUT/versions.txt" | head -1)"
  } > "$envf"
  cat "$envf"
  if [ "$DRY" != 1 ] && [ "${gpus:-0}" -lt 1 ]; then
    reason "no GPU: $(command -v nvidia-smi > /dev/null && echo 'nvidia-smi lists none' || echo 'no nvidia-smi')"
    return 1
  fi
  return 0
}

# --- build (only when a prebuilt binary fails ldd, or the kit has none) ----------------------
build_on_device() {
  build=$WINDOW_EV/build
  # a dry run checks the build's commands; its binaries are then the build it was given
  [ "$DRY" = 1 ] && build=${DRY_BUILD:-$build}
  BUILD_TARGETS=$WINDOW_TARGETS build_gpu 2>&1 | tee "$OUT/build.log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { reason "the build failed: $(grep -m1 -i 'error' "$OUT/build.log" | cut -c1-160)"; return 1; }
  # the build's own tracer folder first (its LD_LIBRARY_PATH is setup's, from window.env)
  printf 'export %s=%q\n' BIN "$build" NEED_BUILD 0 LD_LIBRARY_PATH "$build/tracer:$LD_LIBRARY_PATH" \
    BINARIES_DESC "built on this machine ($(evidence_commit | cut -c1-12)): build.log" >> "$OUT/window.env"
  note "built $(echo $WINDOW_TARGETS | wc -w) targets"
}

# --- 1 GPU ops against the CPU reference ------------------------------------------------------
gpu_ops() {
  local t
  for t in test_gpu_kernels test_gpu_attention_block test_gpu_device test_gpu_moe; do
    part "$t" timeout --foreground -k 5 "${GPU_TEST_TIMEOUT:-60}" "$BIN/tests/gpu/$t" > "$OUT/$t.txt" 2>&1
    grep -q '^\(ok\|FAIL\)' "$OUT/$t.txt" 2>/dev/null && note "$t: $(grep -c '^ok' "$OUT/$t.txt") ok, $(grep -c '^FAIL' "$OUT/$t.txt") FAIL"
    tail -3 "$OUT/$t.txt" 2>/dev/null
  done
  part_verdict
}

# --- 2 CUPTI + NVTX injected into a plain CUDA program ----------------------------------------
cupti_nvtx() {
  local s
  s=$(sample_dir cuda-app)
  rm -rf "$s/run"
  part record "$stepscope" record -o "$s/run" -- "$BIN/tests/gpu_tracer/gpu_tracer_cuda_app"
  part records python3 "$repo/scripts/gpu/check_run.py" "$stepscope" "$s/run" --ranks 1 \
    --kinds kernel,memcpy,memset,sync,api,range | tee "$s/check.txt"
  note "$(grep -o '[0-9]* [a-z]* records' "$s/check.txt" 2>/dev/null | paste -sd, | sed 's/ records//g')"
  part_verdict
}

# --- 3 the trainer with the tracer linked -----------------------------------------------------
trainer_traced() {
  local s
  s=$(sample_dir tiny-bf16)
  rm -rf "$s/run"
  part train env STEPSCOPE_PRECISION=bf16 "$trainer" --backend cuda --model tiny --steps 3 --batch 4 \
    --trace "$s/run" --log "$s/train.jsonl"
  part analyze "$stepscope" analyze "$s/run" --json "$s/report.json"
  part export "$stepscope" export "$s/run" -o "$s/trace.json.gz"
  part check python3 "$repo/scripts/gpu/check_run.py" "$stepscope" "$s/run" --ranks 1 --kernels --named-streams
  note "$(jsonl_numbers "$s/train.jsonl")"
  part_verdict
}

# --- 4 CUDA vs CPU losses ---------------------------------------------------------------------
vs_cpu() {
  note "tolerances: fp32 1e-3, bf16 3e-2 relative at every step (trainer_compare_losses.py)"
  PREC=fp32 part fp32 pair one_rank 1e-3 --world 1
  PREC=bf16 part bf16 pair one_rank 3e-2 --world 1
  part_verdict
}

# --- 5 two ranks on the one GPU with the kit's NCCL --------------------------------------------
two_ranks() {
  local s nccl_env
  s=$(sample_dir dp2-nccl)
  rm -rf "$s/run" "$s"/nccl.*.log
  nccl_env=(NCCL_DEBUG=WARN "NCCL_DEBUG_FILE=$s/nccl.%h.%p.log" NCCL_MAX_CTAS=4 NCCL_MULTI_RANK_GPU_ENABLE=1)
  note "NCCL ${KIT_NCCL_VERSION:-of the machine} (${KIT_NCCL_VERSION:+from the kit, }>= 2.30 needed)"
  part record env "${nccl_env[@]}" "$stepscope" record -o "$s/run" -- "$trainer" --backend cuda \
    --model tiny --world 2 --dp 2 --steps 3 --batch 8 --watchdog-s 40 --log "$s/train.jsonl" > "$s/record.txt" 2>&1
  cat "$s/record.txt"
  if grep -q 'refuses that\|set NCCL_MULTI_RANK_GPU_ENABLE=1' "$s/record.txt"; then
    note "2 ranks refused: $(grep -m1 -o 'NCCL [0-9.]* refuses that\|set NCCL_MULTI_RANK_GPU_ENABLE=1' "$s/record.txt")"
    reason "NCCL refused two ranks on one GPU; the 1-rank NCCL communicator fallback ran instead"
    one_rank_communicator
  else
    part analyze "$stepscope" analyze "$s/run" --json "$s/report.json"
    part collectives python3 "$repo/scripts/gpu/check_run.py" "$stepscope" "$s/run" --ranks 2 --kernels \
      --collectives | tee "$s/check.txt"
    note "$(grep -o '[0-9]* collective records' "$s/check.txt" 2>/dev/null | head -1), $(grep -o '[0-9]* of [0-9]* NCCL kernels matched' "$s/check.txt" 2>/dev/null | head -1)"
  fi
  part_verdict
}

# The fallback: one PyTorch process with a 1-rank NCCL communicator (its own NCCL) under
# record, its all-reduces checked as collectives.
one_rank_communicator() {
  local s
  s=$(sample_dir nccl-1rank)
  rm -rf "$s/run"
  part fallback_1rank env LD_LIBRARY_PATH="$TORCH_LD" "$stepscope" record -o "$s/run" -- \
    python3 "$repo/scripts/gpu/torch_steps.py" --steps 3 --warmup 1
  part fallback_collectives python3 "$repo/scripts/gpu/check_run.py" "$stepscope" "$s/run" --ranks 1 \
    --kernels --collectives
}

# --- 6 a torch program under record and under torch.profiler -----------------------------------
torch_profiler() {
  local s steps=${TORCH_STEPS:-8}
  s=$(sample_dir torch-profiler)
  rm -rf "$s/record" "$s"/profiler.pt.trace.json*
  part record env LD_LIBRARY_PATH="$TORCH_LD" "$stepscope" record -o "$s/record" -- \
    python3 "$repo/scripts/gpu/torch_steps.py" --steps "$steps" --warmup 3
  part profiler env LD_LIBRARY_PATH="$TORCH_LD" python3 "$repo/scripts/gpu/torch_steps.py" \
    --steps "$steps" --warmup 3 --profile "$s/profiler.pt.trace.json.gz"
  part analyze_record "$stepscope" analyze "$s/record" --step-range step --json "$s/record.report.json"
  part analyze_profiler "$stepscope" analyze "$s/profiler.pt.trace.json.gz" --step-range step \
    --json "$s/profiler.report.json"
  part diff "$stepscope" diff "$s/record" "$s/profiler.pt.trace.json.gz" --step-range step \
    --json "$s/diff.json" --markdown "$s/diff.md"
  part compare python3 "$repo/scripts/gpu/compare_profilers.py" "$s/diff.json" "$s/record.report.json" \
    "$s/profiler.report.json" | tee "$s/compare.txt"
  note "$(grep -h '^\(PASS\|FAIL\)' "$s/compare.txt" 2>/dev/null | cut -c6- | paste -sd';' | sed 's/;/; /g')"
  part collectives python3 "$repo/scripts/gpu/check_run.py" "$stepscope" "$s/record" --ranks 1 \
    --kernels --collectives
  part_verdict
}

# --- 7 MFU beside PyTorch, against the datasheet peak and a measured GEMM ceiling ---------------
mfu() {
  local s m peak
  s=$(sample_dir mfu)
  peak=$(python3 "$repo/scripts/gpu/mfu_table.py" --datasheet-peak "${DEVICE_NAME:-}")
  note "datasheet peak $peak TFLOP/s (${DEVICE_NAME:-no device})"
  part gemm env LD_LIBRARY_PATH="$TORCH_LD" python3 "$repo/scripts/gpu/gemm_ceiling.py" --json "$s/gemm.json" \
    --shapes-trace "$s/gemm_shapes.pt.trace.json"
  # the planner's GEMM ceiling measured in that profile, and each shape's rate (docs/plan.md
  # "A measured GEMM ceiling")
  part gemm_ops "$stepscope" ops "$s/gemm_shapes.pt.trace.json" --json "$s/gemm_ops.json"
  part gemm_plan "$stepscope" plan --model llama3-8b --gpus 8 --global-batch 64 --top 5 \
    --ceilings-from "$s/gemm_shapes.pt.trace.json" --json "$s/gemm_plan.json"
  for m in gpt2-124m gpt2-350m; do
    rm -f "$s/$m.stepscope.jsonl"
    part "$m" env STEPSCOPE_PRECISION=bf16 "$trainer" --backend cuda --model "$m" --seq 1024 \
      --batch "${MFU_BATCH:-8}" --steps 12 --peak-tflops "$peak" --log "$s/$m.stepscope.jsonl"
    part "$m.torch" env LD_LIBRARY_PATH="$TORCH_LD" python3 "$repo/scripts/gpu/trainer_torch_gpt2.py" \
      --model "$m" --batch "${MFU_BATCH:-8}" --steps 12 --peak-tflops "$peak" --json "$s/$m.torch-eager.json"
  done
  part table python3 "$repo/scripts/gpu/mfu_table.py" "$s" --peak "$peak" --expect gpt2-124m,gpt2-350m |
    tee "$s/mfu.md"
  note "$(grep '^headline:' "$s/mfu.md" 2>/dev/null | sed 's/^headline: //')"
  # last, in what the step's cap leaves (issue 31): a fine-grained mixture's expert GEMMs at the
  # published runs' shapes, grouped and one by one (attention by length: the deferred call)
  part experts env LD_LIBRARY_PATH="$TORCH_LD" python3 "$repo/scripts/gpu/expert_gemms.py" \
    --budget-s 8 --json "$s/expert_gemms.json"
  part_verdict
}

# --- 8 tracer overhead --------------------------------------------------------------------------
overhead() {
  local s
  s=$(sample_dir overhead)
  part overhead bash "$repo/scripts/gpu/overhead.sh" "$stepscope" "$s" -- "$trainer" --backend cuda \
    --model gpt2-124m --seq 1024 --batch 8 --steps 12
  note "$(grep -h '^overhead_ratio:' "$s/overhead.txt" 2>/dev/null | cut -c17-)"
  part_verdict
}

# --- the deferred call ---------------------------------------------------------------------------
attention_rates() { # issue 31: fused attention's rate by length, 512 to 128K, FA2 and cuDNN
  local s
  s=$(sample_dir mfu)
  part attention env LD_LIBRARY_PATH="$TORCH_LD" python3 "$repo/scripts/gpu/attention_rates.py" \
    --budget-s 40 --json "$s/attention_rates.json"
  note "$(grep -h 'points measured' "$OUT/$STEP_NAME.log" 2>/dev/null | tail -1 | sed 's/^attention_rates: //')"
  part_verdict
}
four_ranks() {
  local s
  s=$(sample_dir dp4-nccl)
  rm -rf "$s/run"
  part record env NCCL_DEBUG=WARN "NCCL_DEBUG_FILE=$s/nccl.%h.%p.log" NCCL_MAX_CTAS=2 NCCL_MULTI_RANK_GPU_ENABLE=1 \
    "$stepscope" record -o "$s/run" -- "$trainer" --backend cuda --model tiny --world 4 --dp 4 \
    --steps 3 --batch 8 --watchdog-s 40 --log "$s/train.jsonl"
  part analyze "$stepscope" analyze "$s/run" --json "$s/report.json"
  part collectives python3 "$repo/scripts/gpu/check_run.py" "$stepscope" "$s/run" --ranks 4 --kernels --collectives
  part_verdict
}
moe_ep() { # expert parallelism on NCCL (comm_nccl.c's all-to-all): dp2 x ep2 against one rank
  local t=$repo/tests/gpu/trainer_moe_ep.sh s
  s=$(sample_dir moe-ep)
  echo "sh $t $trainer $s" >> "$OUT/commands.txt"
  if [ "$DRY" = 1 ]; then sh -n "$t" && STEPSCOPE_DRY_RUN=1 sh "$t" "$trainer"; return; fi
  sh "$t" "$trainer" "$s"   # exit 77 (no GPU, NCCL < 2.30) is a SKIP line with its reason
}
zero_vs_plain() { # ZeRO-1/2 on NCCL against --zero 0, the device peak against the memory model
  local t=$repo/tests/gpu/trainer_zero.sh s
  s=$(sample_dir zero-dp2)
  echo "sh $t $trainer $stepscope $s" >> "$OUT/commands.txt"
  if [ "$DRY" = 1 ]; then sh -n "$t" && STEPSCOPE_DRY_RUN=1 sh "$t" "$trainer" "$stepscope"; return; fi
  sh "$t" "$trainer" "$stepscope" "$s" # exit 77 (no GPU, NCCL < 2.30) is a SKIP line
}
torchrun_ddp() {
  local s
  s=$(sample_dir torchrun-ddp2)
  rm -rf "$s/run"
  torch_nccl_env
  part record env LD_LIBRARY_PATH="$TORCH_LD" "$stepscope" record -o "$s/run" -- torchrun --nproc-per-node 2 \
    "$repo/samples/pytorch/ddp_train.py" --steps 10
  part analyze "$stepscope" analyze "$s/run" --step-range step --json "$s/report.json"
  part collectives python3 "$repo/scripts/gpu/check_run.py" "$stepscope" "$s/run" --ranks 2 --kernels --collectives
  part_verdict
}
memcheck() {
  local t
  for t in test_gpu_kernels test_gpu_attention_block test_gpu_moe; do
    part "$t" timeout --foreground -k 5 "${MEMCHECK_TIMEOUT:-90}" compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$BIN/tests/gpu/$t" > "$OUT/memcheck.$t.txt" 2>&1
    tail -3 "$OUT/memcheck.$t.txt" 2>/dev/null
  done
  part_verdict
}

# --- the calls -----------------------------------------------------------------------------------
# Each step's cap (seconds; the time left before the call's deadline cuts it further).
setup_and_binaries() {
  STEP_TIMEOUT=60 step 0_setup setup_machine
  load_env
  if [ "${NEED_BUILD:-0}" = 1 ]; then
    STEP_TIMEOUT=${BUILD_TIMEOUT:-200} step build build_on_device
    load_env
  fi
}
run_steps() {
  setup_and_binaries
  STEP_TIMEOUT=75 step 1_gpu_ops gpu_ops
  STEP_TIMEOUT=30 step 2_cupti_nvtx cupti_nvtx
  STEP_TIMEOUT=45 step 3_trainer trainer_traced
  STEP_TIMEOUT=45 step 4_vs_cpu vs_cpu
  STEP_TIMEOUT=60 step 5_two_ranks two_ranks
  STEP_TIMEOUT=80 step 6_torch_profiler torch_profiler
  STEP_TIMEOUT=120 step 7_mfu mfu
  STEP_TIMEOUT=75 step 8_overhead overhead
}
deferred_steps() {
  setup_and_binaries
  STEP_TIMEOUT=55 step d0_attention attention_rates
  STEP_TIMEOUT=60 step d1_four_ranks four_ranks
  STEP_TIMEOUT=60 step d2_moe_ep moe_ep
  STEP_TIMEOUT=60 step d3_torchrun_ddp torchrun_ddp
  STEP_TIMEOUT=90 step d4_memcheck memcheck
  STEP_TIMEOUT=60 step d5_zero zero_vs_plain # last: in what the call's bound leaves
}
