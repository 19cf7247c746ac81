#!/bin/bash
# trainer_lib.sh — shared helpers of the CUDA trainer's GPU scripts (trainer_*.sh); sourced,
# not run. Sets: repo, OUT, build, trainer, stepscope; defines step(), provenance(),
# build_gpu(), pick_nccl(), run_logged().
#
# On the GPU machine (GPU.md): one H100/H200, CUDA 13.0, cmake, ninja, PyTorch, ncu,
# compute-sanitizer; maybe no libzstd-dev and an NCCL older than 2.30. Bring them along
# from a development machine with scripts/gpu/trainer_prepare.sh (fills .deps/ and .nccl/,
# both git-ignored through .git/info/exclude).
set -u
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$PWD/gpu-evidence}
build=${BUILD:-$repo/build-gpu-trainer}
trainer=$build/trainer/stepscope-train
stepscope=$build/analyzer/stepscope
mkdir -p "$OUT"
summary=$OUT/summary.txt
touch "$summary"

# step NAME COMMAND...: runs COMMAND with its output in $OUT/NAME.log, PASS/FAIL in summary.
# Each step has a time limit (STEP_TIMEOUT seconds, default 300; the build 900) so that a
# hang cannot eat the GPU session: the step runs in its own process group (set -m), which
# is killed as a whole (rank processes included) when the limit passes; it is then marked
# FAIL with rc 124 and the next step runs.
step() {
  local name=$1 t0 pid watchdog rc limit=${STEP_TIMEOUT:-300}; shift
  [ "$1" = build_gpu ] && limit=${BUILD_TIMEOUT:-900}
  echo "== $name: $* (limit $limit s)" | tee -a "$OUT/$name.log"
  t0=$(date +%s)
  set -m
  ( "$@" ) >> "$OUT/$name.log" 2>&1 &
  pid=$!
  set +m
  ( sleep "$limit"; echo "== $name: time limit of $limit s reached, killed" >> "$OUT/$name.log"
    kill -TERM -- "-$pid" 2>/dev/null; sleep 10; kill -KILL -- "-$pid" 2>/dev/null ) &
  watchdog=$!
  wait "$pid"; rc=$?
  kill "$watchdog" 2>/dev/null; wait "$watchdog" 2>/dev/null
  [ $rc -ge 128 ] && grep -q "time limit of $limit s reached" "$OUT/$name.log" && rc=124
  if [ $rc -eq 0 ]; then
    echo "PASS $name ($(( $(date +%s) - t0 )) s)" | tee -a "$summary"
  else
    echo "FAIL $name (rc $rc, $(( $(date +%s) - t0 )) s, see $name.log)" | tee -a "$summary"
  fi
  return 0
}

# Echoes a command into $OUT/commands.txt (for PROVENANCE.md), then runs it.
run_logged() {
  printf '%q ' "$@" >> "$OUT/commands.txt"; echo >> "$OUT/commands.txt"
  "$@"
}

# The NCCL library to run with: $NCCL_LIB_DIR, else the first of .nccl (the PyPI wheel),
# PyTorch's bundled NCCL and the toolkit's whose version is >= 2.30 (needed for several
# ranks on one GPU); else the toolkit's. Sets NCCL_PICKED_DIR and NCCL_PICKED_VERSION (call
# it directly, not in $(...): a subshell's variables would be lost, and under `set -u` a
# later use of NCCL_PICKED_VERSION would abort the script).
NCCL_PICKED_DIR=""
NCCL_PICKED_VERSION=""
# The version of a libnccl.so.2 as "2.28.9", asked from the library itself (ncclGetVersion
# needs no GPU): the PyPI wheel and the CUDA 13 toolkit ship only libnccl.so.2, with no
# version in the file name.
nccl_version_of() {
  python3 -c 'import ctypes, sys
v = ctypes.c_int()
ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v))
print("%d.%d.%d" % (v.value // 10000, v.value // 100 % 100, v.value % 100))' "$1" 2>/dev/null
}
# Unpacks the carried, sm_90-only NCCL (trainer_prepare.sh) into .nccl once.
unpack_carried_nccl() {
  if [ -f "$repo/.deps/nccl/libnccl.so.2.xz" ] && [ ! -e "$repo/.nccl/nvidia/nccl/lib/libnccl.so.2" ]; then
    python3 "$repo/scripts/gpu/nccl_slim.py" unpack "$repo/.deps/nccl/libnccl.so.2.xz" \
      "$repo/.nccl/nvidia/nccl/lib" >&2 || rm -f "$repo/.nccl/nvidia/nccl/lib/libnccl.so.2"
  fi
}
pick_nccl() {
  local dirs=() d v minor
  unpack_carried_nccl
  [ -n "${NCCL_LIB_DIR:-}" ] && dirs+=("$NCCL_LIB_DIR")
  dirs+=("$repo/.nccl/nvidia/nccl/lib")
  d=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null) && dirs+=("$d")
  dirs+=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu)
  NCCL_PICKED_DIR=""
  NCCL_PICKED_VERSION=""
  for d in "${dirs[@]}"; do
    [ -e "$d/libnccl.so.2" ] || continue
    v=$(nccl_version_of "$d/libnccl.so.2") || continue
    if [ -z "$NCCL_PICKED_DIR" ]; then NCCL_PICKED_DIR=$d; NCCL_PICKED_VERSION=$v; fi
    minor=$(echo "$v" | cut -d. -f2)
    if [ "${minor:-0}" -ge 30 ]; then NCCL_PICKED_DIR=$d; NCCL_PICKED_VERSION=$v; return 0; fi
  done
}

# Puts the picked NCCL first on LD_LIBRARY_PATH (if one was found).
use_picked_nccl() {
  pick_nccl
  if [ -n "$NCCL_PICKED_DIR" ]; then
    export LD_LIBRARY_PATH="$NCCL_PICKED_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
}

provenance_header() {
  pick_nccl
  {
    echo "# Provenance"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- git commit: $(git -C "$repo" rev-parse HEAD 2>/dev/null) $(git -C "$repo" status --porcelain 2>/dev/null | grep -q . && echo '(working tree has changes)')"
    echo "- host: $(hostname), $(nproc) cores"
    echo
    echo '```'
    nvidia-smi 2>&1
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
    nvcc --version 2>&1 | tail -2
    ls /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64 2>/dev/null | grep -E 'cupti|nccl|cublas' | sort -u
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())' 2>&1
    echo "NCCL used by the trainer: ${NCCL_PICKED_DIR:-none found} (NCCL ${NCCL_PICKED_VERSION:-?})"
    echo "STEPSCOPE_PRECISION=${STEPSCOPE_PRECISION:-} STEPSCOPE_CUDA_ATTENTION=${STEPSCOPE_CUDA_ATTENTION:-} (per run below if set there)"
    echo '```'
  } > "$OUT/PROVENANCE.md"
}

# Appends the commands that ran and the step summary to PROVENANCE.md.
provenance_footer() {
  {
    echo
    echo "## Commands"
    echo '```'
    cat "$OUT/commands.txt" 2>/dev/null
    echo '```'
    echo
    echo "## Steps"
    echo '```'
    cat "$summary"
    echo '```'
  } >> "$OUT/PROVENANCE.md"
}

# Configures and builds everything for sm_90 (once per build directory).
build_gpu() {
  local extra=()
  if ! pkg-config --exists libzstd 2>/dev/null && [ -d "$repo/.deps/zstd" ]; then
    # Debian's libzstd-dev unpacked by trainer_prepare.sh (its .pc prefix rewritten)
    export PKG_CONFIG_PATH="$repo/.deps/zstd/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export LD_LIBRARY_PATH="$repo/.deps/zstd/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  if [ ! -e /usr/local/cuda/include/nccl.h ] && [ -e "$repo/.nccl/nvidia/nccl/include/nccl.h" ]; then
    # no NCCL in the toolkit: build against the PyPI wheel (it ships only libnccl.so.2)
    local w=$repo/.nccl/nvidia/nccl
    [ -e "$w/lib/libnccl.so" ] || ln -sf libnccl.so.2 "$w/lib/libnccl.so"
    export NCCL_HOME=$w
  fi
  run_logged cmake -S "$repo" -B "$build" -G Ninja -DSTEPSCOPE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release "${extra[@]}" &&
  run_logged cmake --build "$build" -j "$(nproc)"
}
