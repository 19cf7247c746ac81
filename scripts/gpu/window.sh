#!/bin/bash
# window.sh — the one entry point of a GPU window (docs/gpu-session-plan.md).
#
#   window.sh CALL                 on the GPU machine, from the kit or the repository:
#                                    .gpukit/window.sh smoke   (carry: [".gpukit"])
#   window.sh --dry-run [BUILD]    anywhere without a GPU (CI): every call's steps checked,
#                                  nothing run (BUILD: a build of this tree [build])
#
# CALL is one of
#   smoke        (<= 6 min; everything after depends on it) probe the machine, build (or
#                fall back to the kit's prebuilt binaries), ctest -L gpu, a 1-rank tiny bf16
#                run, then 2- and 4-rank NCCL runs under `stepscope record` with collectives
#                asserted
#   correctness  CUDA vs CPU losses (1 rank; multi-rank only if smoke's 4-rank run passed),
#                the MoE operations vs the CPU reference (test_gpu_moe), the tracer's checks
#                (kernels, collectives matched to NCCL kernels, named streams), tracer
#                overhead, a rank SIGKILLed mid-run, memcheck on the kernel tests and the MoE test
#   numbers      GPT-2 124M and 350M tokens/s and MFU beside PyTorch eager (compiled if time
#                remains), one traced 350M sample
#   multirank    MoE expert parallelism on NCCL first: dp2 x ep2 against one rank (moe_ep);
#                then dp4, dp2 x pp2 1F1B, tp2 x dp2, cp2 x dp2, 5 steps each, traced and analyzed
#
# Every call: bounded by `timeout -k 10 $WINDOW_LIMIT` (330/360/300/390 s, under the device
# tool's 600 s, 23 minutes for the four);
# leftover GPU processes killed at its start and end; its evidence (logs, summary.txt,
# PROVENANCE.md with the kit's commit, traces, reports) packed into $OUT/<call>.tgz after
# EVERY step (<= 15 MiB: traces are left out of the archive if it would be larger), so a
# call stopped at its limit still brings back all it did. Work files live in
# $WINDOW_EV (/tmp/stepscope-window), reused by later calls while the machine stays warm.
set -u
self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
here=$(dirname "$self")
export WINDOW_EV=${WINDOW_EV:-/tmp/stepscope-window}
# Each call's bound (WINDOW_LIMIT overrides): 330 + 360 + 300 + 390 s = 23 min, with one or
# two machine starts within the 25 minutes the plan allows of the session's 30.
declare -A CALL_LIMIT=([smoke]=330 [correctness]=360 [numbers]=300 [multirank]=390)
CALLS="smoke correctness numbers multirank"

usage() { sed -n 2,29p "$self" | sed 's/^# \{0,1\}//'; }

# --- where things are: a kit (window.sh next to COMMIT and src.tar.zst) or a repository
if [ -f "$here/COMMIT" ] && [ -f "$here/src.tar.zst" ]; then
  export KIT=$here
  commit=$(head -1 "$KIT/COMMIT" | cut -d' ' -f1)
  export repo=$WINDOW_EV/src-$commit
  if [ ! -f "$repo/.unpacked" ]; then
    rm -rf "$repo"; mkdir -p "$repo"
    zstd -dc "$KIT/src.tar.zst" | tar -x -C "$repo" --strip-components=1 && touch "$repo/.unpacked"
  fi
else
  export repo=${repo:-$(cd "$here/../.." && pwd)}
  export KIT=${STEPSCOPE_KIT:-$repo/.gpukit}
fi
gpu=$repo/scripts/gpu

# --- arguments
DRY=0
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --dry-run) DRY=1; shift
             BUILD=${1:-$repo/build}; [ -d "$BUILD" ] && BUILD=$(cd "$BUILD" && pwd)
             export BUILD STEPSCOPE_DRY_RUN=1 ;;
  --pack) shift ;;
esac
if [ "$DRY" = 1 ]; then
  # Every call, each step checked instead of run (trainer_lib.sh: dry_check).
  rc=0
  for f in "$gpu"/*.sh; do bash -n "$f" || { echo "dry run: syntax error in $f"; rc=1; }; done
  for f in "$gpu"/*.py; do python3 -m py_compile "$f" || { echo "dry run: syntax error in $f"; rc=1; }; done
  [ -x "$BUILD/analyzer/stepscope" ] && [ -x "$BUILD/trainer/stepscope-train" ] ||
    { echo "dry run: no build in $BUILD (stepscope, stepscope-train)"; exit 1; }
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  for c in $CALLS; do
    WINDOW_EV=$tmp/ev OUT=$tmp/out-$c WINDOW_INNER=1 bash "$self" "$c" > "$tmp/$c.log" 2>&1
    n_fail=$(grep -c '^FAIL' "$tmp/ev/$c/summary.txt" 2>/dev/null); n_fail=${n_fail:-0}
    n_pass=$(grep -c '^PASS' "$tmp/ev/$c/summary.txt" 2>/dev/null); n_pass=${n_pass:-0}
    echo "dry run: $c: $n_pass steps checked, $n_fail failed"
    if [ "$n_fail" != 0 ] || [ "$n_pass" = 0 ]; then
      rc=1
      grep -rh "dry run:" "$tmp/ev/$c" --include="*.log" 2>/dev/null | grep -v "not checked" | head -20
      grep '^FAIL' "$tmp/ev/$c/summary.txt" 2>/dev/null
    fi
  done
  if [ -d "$KIT" ] && [ -f "$KIT/COMMIT" ]; then
    echo "dry run: kit $KIT: $(du -sm "$KIT" | cut -f1) MiB (limit 60)"
    [ "$(du -sk "$KIT" | cut -f1)" -le $((60 * 1024)) ] || rc=1
  else
    echo "dry run: no kit at $KIT (scripts/gpu/pack.sh builds it; not needed here)"
  fi
  exit $rc
fi

CALL=${1:-}
case " $CALLS " in *" $CALL "*) ;; *) usage >&2; echo "window.sh: unknown call '$CALL'" >&2; exit 2 ;; esac
export WINDOW_LIMIT=${WINDOW_LIMIT:-${CALL_LIMIT[$CALL]}}
export RET=${RET:-${OUT:-$PWD/window-out}}  # the device tool's $OUT: what comes back
mkdir -p "$RET" "$WINDOW_EV/$CALL"

# Packs $WINDOW_EV/$CALL into $RET/$CALL.tgz (<= 15 MiB: without traces if it would be more).
window_pack() {
  local d=$WINDOW_EV c=$WINDOW_CALL f=$RET/$WINDOW_CALL.tgz
  tar -czf "$f.tmp" -C "$d" --exclude='*/build*' "$c" 2>/dev/null
  if [ "$(stat -c %s "$f.tmp" 2>/dev/null || echo 0)" -gt $((15 * 1024 * 1024)) ]; then
    echo "traces left out: the archive with them was over 15 MiB" > "$d/$c/PACKING.txt"
    tar -czf "$f.tmp" -C "$d" --exclude='*/build*' --exclude='*.trace.zst' --exclude='*.json.gz' "$c"
  fi
  mv -f "$f.tmp" "$f"
}
export WINDOW_CALL=$CALL
export -f window_pack

# Kills what an earlier call left on the GPU (torchrun workers run in their own session).
kill_leftovers() { # (WINDOW_NO_KILL=1: a rehearsal on a shared development machine)
  local p
  [ "${WINDOW_NO_KILL:-0}" = 1 ] && return 0
  for p in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); do
    [ "$p" != $$ ] && kill -KILL "$p" 2>/dev/null && echo "killed leftover GPU process $p"
  done
  pkill -KILL -f 'stepscope-train|torchrun|ddp_train.py|trainer_torch_gpt2.py' 2>/dev/null || true
}

# --- the outer process: bounds the call, cleans up, packs once more
if [ -z "${WINDOW_INNER:-}" ]; then
  echo "== window $CALL: kit $KIT ($(head -1 "$KIT/COMMIT" 2>/dev/null || echo 'no kit')), limit $WINDOW_LIMIT s"
  kill_leftovers
  timeout -k 10 "$WINDOW_LIMIT" env WINDOW_INNER=1 bash "$self" "$CALL"
  rc=$?
  [ $rc = 124 ] || [ $rc = 137 ] && echo "FAIL window $CALL: stopped at its limit of $WINDOW_LIMIT s" |
    tee -a "$WINDOW_EV/$CALL/summary.txt"
  kill_leftovers
  window_pack
  echo "== window $CALL: rc $rc; evidence $RET/$CALL.tgz ($(du -h "$RET/$CALL.tgz" | cut -f1))"
  cat "$WINDOW_EV/$CALL/summary.txt" 2>/dev/null
  exit $rc
fi

# --- the inner process: the call's steps
export OUT=$WINDOW_EV/$CALL
export WINDOW_PACK=window_pack
export BUILD=${BUILD:-$WINDOW_EV/build}
STEP_TIMEOUT=${STEP_TIMEOUT:-240}
source "$gpu/trainer_lib.sh"
cd "$OUT"

# The binaries this window runs: $BUILD when it holds them, else the kit's prebuilt ones.
use_binaries() {
  if [ "$DRY" != 1 ] && { [ ! -x "$build/analyzer/stepscope" ] || [ ! -x "$build/trainer/stepscope-train" ]; } &&
     [ -f "$KIT/prebuilt.tar.xz" ]; then
    [ -x "$WINDOW_EV/prebuilt/trainer/stepscope-train" ] ||
      xz -dc "$KIT/prebuilt.tar.xz" | tar -x -C "$WINDOW_EV"
    build=$WINDOW_EV/prebuilt
    export WINDOW_BINARIES="prebuilt in the kit ($(cat "$build/COMMIT" 2>/dev/null))"
    export LD_LIBRARY_PATH="$build/tracer:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  export BUILD=$build
  trainer=$build/trainer/stepscope-train
  stepscope=$build/analyzer/stepscope
  kit_env
  echo "binaries: ${WINDOW_BINARIES:-built in $build}" | tee -a "$summary"
}
ensure_built() { # builds unless this machine already did (a warm machine keeps $BUILD)
  if [ "$DRY" = 1 ] || [ ! -x "$build/trainer/stepscope-train" ]; then
    BUILD_TIMEOUT=${BUILD_TIMEOUT:-150} step build build_gpu   # slower: the prebuilt binaries
  fi
  use_binaries
}
probe() {
  nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvcc --version; cc --version; cmake --version; ninja --version
  ls /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64 2>/dev/null | grep -E 'cupti|nccl|cublas'
  ls -la /usr/local/cuda/include/nccl.h 2>&1
  pkg-config --modversion libzstd zlib 2>&1
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), torch.cuda.get_device_name())'
  python3 -c 'import nvidia.nccl, os; print("torch loads NCCL from", list(nvidia.nccl.__path__)[0])'
  command -v compute-sanitizer ncu torchrun
  df -h /tmp; nproc; cat "$KIT/COMMIT"
  return 0
}
gpu_tests() {
  if [ "$build" = "$WINDOW_EV/prebuilt" ]; then  # no CTest tree: the same programs directly
    run_logged "$build/tests/gpu/test_gpu_kernels" && run_logged "$build/tests/gpu/test_gpu_attention_block" &&
    run_logged "$build/tests/gpu/test_gpu_device" && run_logged "$build/tests/gpu/test_gpu_moe" &&
    run_logged "$repo/tests/gpu_tracer/cuda_record.sh" "$stepscope" "$build/tests/gpu_tracer/gpu_tracer_cuda_app"
  else
    # a GPU test that skips (exit 77: no usable device) is a failure here. gpu.trainer_moe_ep
    # (training runs, two ranks on the GPU) is left to multirank's moe_ep step.
    run_logged ctest --test-dir "$build" -L gpu -E '^gpu[.]trainer_moe_ep$' --output-on-failure --timeout 100 | tee "$OUT/ctest-gpu.txt"
    [ "${PIPESTATUS[0]}" = 0 ] && { [ "$DRY" = 1 ] || ! grep -q 'Skipped\|Not Run' "$OUT/ctest-gpu.txt"; }
  fi
}
tiny_1rank() {
  rm -rf "$OUT/tiny-1rank"
  run_logged env STEPSCOPE_PRECISION=bf16 "$trainer" --backend cuda --model tiny --steps 3 --batch 4 \
    --trace "$OUT/tiny-1rank" --log "$OUT/tiny-1rank.train.jsonl" &&
  run_logged "$stepscope" analyze "$OUT/tiny-1rank" --json "$OUT/tiny-1rank.report.json" &&
  run_logged python3 "$gpu/check_run.py" "$stepscope" "$OUT/tiny-1rank" --ranks 1 --kernels --named-streams
}
nccl_run() { # nccl_run N: N ranks of the tiny model, data parallel, under stepscope record
  local n=$1 d=$OUT/dp$1
  rm -rf "$d" "$OUT"/nccl-dp"$n".*.log
  use_picked_nccl
  run_logged env NCCL_DEBUG=WARN NCCL_DEBUG_FILE="$OUT/nccl-dp$n.%h.%p.log" NCCL_MAX_CTAS=4 \
    NCCL_MULTI_RANK_GPU_ENABLE=1 "$stepscope" record -o "$d" -- "$trainer" --backend cuda \
    --model tiny --world "$n" --dp "$n" --steps 3 --batch 8 --watchdog-s 40 --log "$d.train.jsonl" &&
  run_logged "$stepscope" analyze "$d" --json "$d.report.json" &&
  run_logged python3 "$gpu/check_run.py" "$stepscope" "$d" --ranks "$n" --kernels --collectives --named-streams
}
multirank_ok() { # did smoke's 4-rank run pass (SMOKE_MULTIRANK=1/0 overrides, e.g. after a cold start)
  case "${SMOKE_MULTIRANK:-auto}" in
    1) return 0 ;; 0) return 1 ;;
    *) grep -q '^PASS dp4_nccl' "$WINDOW_EV/smoke/summary.txt" 2>/dev/null ;;
  esac
}
tracer_one_rank() {
  local d=$OUT/trace-1rank; rm -rf "$d"
  run_logged "$stepscope" record -o "$d" -- "$trainer" --backend cuda --model tiny --world 1 --steps 10 &&
  run_logged "$stepscope" info "$d" &&
  run_logged python3 "$gpu/check_run.py" "$stepscope" "$d" --ranks 1 --kernels --named-streams
}
torchrun_ddp() {
  local d=$OUT/torchrun-ddp; rm -rf "$d"
  torch_nccl_env
  run_logged "$stepscope" record -o "$d" -- torchrun --nproc-per-node 2 "$repo/samples/pytorch/ddp_train.py" --steps 20 &&
  run_logged "$stepscope" analyze "$d" --json "$d.report.json" &&
  run_logged python3 "$gpu/check_run.py" "$stepscope" "$d" --ranks 2 --kernels --collectives
}
memcheck_kernels() {
  run_logged compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/gpu/test_gpu_kernels" &&
  run_logged compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/gpu/test_gpu_attention_block"
}
moe_kernels() { # the MoE operations (router, plan, permutations, grouped GEMM) vs the CPU reference
  run_logged "$build/tests/gpu/test_gpu_moe"
}
memcheck_moe() {
  run_logged compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/gpu/test_gpu_moe"
}
moe_ep() { # expert parallelism on NCCL (the all-to-all of comm_nccl.c): dp2 x ep2 vs 1 rank
  use_picked_nccl
  local t=$repo/tests/gpu/trainer_moe_ep.sh
  echo "sh $t $trainer $OUT/moe-ep" >> "$OUT/commands.txt"
  if [ "$DRY" = 1 ]; then  # its trainer configurations, each with --check-config
    sh -n "$t" && STEPSCOPE_DRY_RUN=1 sh "$t" "$trainer"; return
  fi
  sh "$t" "$trainer" "$OUT/moe-ep"  # exit 77 (no GPU, NCCL < 2.30) is a failure here
}
sub() { # sub NAME SCRIPT: a script of scripts/gpu with its own steps, evidence in $OUT/NAME
  local name=$1 script=$2; shift 2
  echo "bash $gpu/$script $*  (OUT=$OUT/$name)" >> "$OUT/commands.txt"
  OUT=$OUT/$name STEP_TIMEOUT=${SUB_STEP_TIMEOUT:-150} bash "$gpu/$script" "$@"
  ! grep -q '^FAIL' "$OUT/$name/summary.txt"
}

provenance_header
case $CALL in
  smoke)
    STEP_TIMEOUT=30 step probe probe
    ensure_built
    STEP_TIMEOUT=60 step gpu_tests gpu_tests
    STEP_TIMEOUT=45 step tiny_1rank tiny_1rank
    STEP_TIMEOUT=60 step dp2_nccl nccl_run 2
    STEP_TIMEOUT=60 step dp4_nccl nccl_run 4
    ;;
  correctness)
    ensure_built
    export SKIP_MULTIRANK=1; multirank_ok && SKIP_MULTIRANK=0
    echo "multi-rank pairs: $([ $SKIP_MULTIRANK = 0 ] && echo run || echo skipped: the smoke call dp4 did not pass)" | tee -a "$summary"
    SUB_STEP_TIMEOUT=60 STEP_TIMEOUT=150 step vs_cpu sub vs_cpu trainer_vs_cpu.sh
    STEP_TIMEOUT=30 step moe_kernels moe_kernels
    STEP_TIMEOUT=60 step trace_1rank tracer_one_rank
    [ "$SKIP_MULTIRANK" = 0 ] && STEP_TIMEOUT=90 step torchrun_ddp torchrun_ddp
    STEP_TIMEOUT=90 step overhead run_logged bash "$gpu/overhead.sh" "$build" "$OUT"
    STEP_TIMEOUT=60 step kill run_logged bash "$gpu/kill_mid_run.sh" "$build" "$OUT"
    STEP_TIMEOUT=90 step memcheck memcheck_kernels
    STEP_TIMEOUT=60 step memcheck_moe memcheck_moe
    ;;
  numbers)
    ensure_built
    STEP_TIMEOUT=290 step bench sub bench trainer_bench.sh
    ;;
  multirank)
    ensure_built
    STEP_TIMEOUT=90 step moe_ep moe_ep
    STEP_TIMEOUT=300 step layouts sub layouts trainer_multirank.sh
    ;;
esac
provenance_footer
exit 0
