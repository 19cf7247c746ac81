#!/bin/bash
# window.sh — a GPU window in one call (docs/gpu-session-plan.md): from the repository root
# on the GPU machine, with the kit carried beside it (`carry: [".gpukit"]`):
#
#   scripts/gpu/window.sh run        THE call: steps 0-8 below, bounded by ONE_LIMIT seconds
#                                    (default 390: one device-tool command of <= 6.5 min)
#   scripts/gpu/window.sh deferred   a second call while the machine is warm (DEFERRED_LIMIT,
#                                    default 250 s): attention rates by length, 4 ranks under
#                                    record, expert parallelism on NCCL, torchrun with 2 ranks,
#                                    compute-sanitizer memcheck,
#                                    then in what is left ZeRO-1/2 against ZeRO-0 (dp2)
#   scripts/gpu/window.sh --dry-run [BUILD]
#                                    anywhere without a GPU (CI): the call rehearsed with every
#                                    command checked instead of run, in scenarios (a missing
#                                    GPU tool, no zstd/xz, a failing step, a step past its
#                                    time, the call's bound); BUILD: a build of this tree
#
# The steps of `run`, in priority order (scripts/gpu/window_steps.sh), each one line in the
# summary, PASS/FAIL/SKIP with its numbers and, unless PASS, the reason:
#   0 setup         versions (nvidia-smi, nvcc, torch and its NCCL, the kit's NCCL), tools
#                   present, the binaries: the kit's prebuilt ones unpacked with Python's
#                   tarfile and `ldd`-checked (a missing library is named; folders that hold
#                   it are added to the library path), the kit's NCCL first on that path
#   0b build        only when a prebuilt binary fails ldd (or the kit has none): the build
#                   on the GPU machine, its log in build.log
#   1 gpu_ops       the GPU op tests against the CPU reference, one by one
#   2 cupti_nvtx    CUPTI + NVTX injected into a plain CUDA program (`record --`)
#   3 trainer       the trainer with the tracer linked: tiny bf16, 3 steps, analyse, export,
#                   check_run.py
#   4 vs_cpu        CUDA vs CPU losses, fp32 (1e-3) and bf16 (3e-2)
#   5 two_ranks     two ranks on the one GPU with the kit's NCCL under record (a 1-rank NCCL
#                   communicator when NCCL refuses)
#   6 torch_profiler a torch program under record and under torch.profiler, compared
#   7 mfu           GPT-2 124M/350M MFU beside PyTorch, against the datasheet peak and a bf16
#                   GEMM ceiling measured here
#   8 overhead      tracer overhead: median step-time ratio traced/plain, FAIL above 1.03
#
# What comes back, flat in $OUT (the device tool's; ./window-out elsewhere):
#   summary.txt    one line per step and the headline numbers; printed last
#   evidence.tgz   logs, build log, reports, PROVENANCE.md, NCCL debug files: every sample
#                  folder (samples/gpu-<device>-<what>/) without its traces; repacked after
#                  every step, so a call stopped at its bound still brings back what it did
#   traces.tgz     the traces (<= 15 MiB), packed once at the end
# Exit status: 0 when no step failed; 1 when one did (or the call hit its bound).
#
# Every step is bounded by the time left before the call's deadline; a failing step never
# hides the next; the processes a step starts run in their own process group, killed by
# pid when the step ends or the call is stopped (never by name). Work files stay in
# WINDOW_EV (/tmp/stepscope-window) while the machine is warm: the unpacked binaries and
# NCCL are reused by a second call.
set -u
self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
here=$(dirname "$self")
export WINDOW_EV=${WINDOW_EV:-/tmp/stepscope-window}

usage() { sed -n 2,50p "$self" | sed 's/^# \{0,1\}//'; }

# --- where things are: the repository this script is in, else (window.sh copied into a kit
# carried beside another checkout) the kit's sources, unpacked with Python's tarfile
if [ -f "$here/COMMIT" ] && [ ! -f "$here/trainer_lib.sh" ]; then
  export KIT=$here
  if [ -f "$KIT/../scripts/gpu/window_steps.sh" ]; then
    export repo=$(cd "$KIT/.." && pwd)
  else
    commit=$(head -1 "$KIT/COMMIT" | cut -d' ' -f1)
    export repo=$WINDOW_EV/src-$commit
    # the scripts as packed (gpu/) over the commit's sources
    python3 "$KIT/gpu/kit_setup.py" unpack "$KIT/src.tar.xz" "$WINDOW_EV/src-tar-$commit" > /dev/null &&
      cp -f "$KIT"/gpu/* "$WINDOW_EV/src-tar-$commit/src/scripts/gpu/" &&
      rm -rf "$repo" && ln -sfn "$WINDOW_EV/src-tar-$commit/src" "$repo" ||
      { echo "window.sh: cannot unpack the kit's sources $KIT/src.tar.xz"; exit 1; }
  fi
else
  export repo=${repo:-$(cd "$here/../.." && pwd)}
  export KIT=${KIT:-${STEPSCOPE_KIT:-$repo/.gpukit}}
fi
gpu=$repo/scripts/gpu

case "${1:-}" in
  -h|--help|"") usage; exit 0 ;;
  --dry-run) shift; exec bash "$gpu/window_dry_run.sh" "$@" ;;
  run) CALL=run; LIMIT=${ONE_LIMIT:-390} ;;
  deferred) CALL=deferred; LIMIT=${DEFERRED_LIMIT:-250} ;;
  __inner) CALL=$2 ;;
  *) usage >&2; echo "window.sh: unknown call '$1'" >&2; exit 2 ;;
esac

source "$gpu/window_evidence.sh"

# --- the outer process: bounds the call, stops what is left, packs, prints the summary
if [ "$1" != __inner ]; then
  start=$(date +%s)
  export RET=${RET:-${OUT:-$PWD/window-out}}   # the device tool's $OUT: what comes back
  mkdir -p "$RET"
  reserve=${WINDOW_RESERVE_S:-15}               # for the last packing, after the deadline
  export WINDOW_DEADLINE=$((start + LIMIT - reserve))
  export WINDOW_START=$start WINDOW_LIMIT=$LIMIT WINDOW_CALL=$CALL
  # the device names the evidence folders (samples/gpu-h200-window/): asked once, bounded
  export DEVICE_NAME
  DEVICE_NAME=$(timeout 15 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  export DEV
  DEV=$(device_short_name "$DEVICE_NAME")
  export EVROOT=$WINDOW_EV/call-$CALL-$start
  export WIN=$EVROOT/samples/gpu-$DEV-$([ "$CALL" = run ] && echo window || echo "$CALL")
  mkdir -p "$WIN"
  export PGIDS=$WIN/.pgids
  echo "== window $CALL: ${DEVICE_NAME:-no GPU found} -> $WIN; kit $KIT ($(head -1 "$KIT/COMMIT" 2>/dev/null || echo 'no kit')); limit $LIMIT s"
  # the steps end by the deadline; this bound (half the reserve later) only catches a runaway
  timeout -k 2 $((LIMIT - reserve / 2)) bash "$self" __inner "$CALL"
  rc=$?
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    echo "FAIL window (rc $rc): stopped at the call's bound of $LIMIT s" | tee -a "$WIN/summary.txt"
  elif [ $rc != 0 ]; then
    echo "FAIL window (rc $rc): the steps stopped early (see above)" | tee -a "$WIN/summary.txt"
  fi
  grep -q '^\(PASS\|FAIL\|SKIP\) [0-9]' "$WIN/summary.txt" ||
    echo "FAIL window: no step ran" | tee -a "$WIN/summary.txt"
  # the step that was running when the bound stopped the call: its process group, by pid
  while read -r pg; do kill -KILL -- "-$pg" 2>/dev/null; done < "$PGIDS" 2> /dev/null
  window_final_pack
  grep -q '^FAIL' "$WIN/summary.txt" && rc=1 || rc=0
  window_result_line "$rc" "$(($(date +%s) - start))" | tee -a "$WIN/summary.txt"
  cp "$WIN/summary.txt" "$RET/summary.txt"
  window_pack
  echo "== window $CALL: evidence in $RET: $(cd "$RET" && ls -s --block-size=K summary.txt evidence.tgz traces.tgz 2>&1 | paste -sd' ')"
  echo "== summary ($RET/summary.txt)"
  cat "$RET/summary.txt"
  exit $rc
fi

# --- the inner process: the call's steps
export OUT=$WIN
export WINDOW_PACK=window_pack
export -f window_pack write_provenance
source "$gpu/trainer_lib.sh" || exit 3
source "$gpu/window_steps.sh" || exit 3
on_term() { # the outer's timeout: stop the running step's process group, then leave
  [ -n "${STEP_PGID:-}" ] && kill -KILL -- "-$STEP_PGID" 2>/dev/null
  exit 124
}
trap on_term TERM
cd "$OUT" || exit 1
window_header
case $CALL in
  run) run_steps ;;
  deferred) deferred_steps ;;
esac
exit 0
