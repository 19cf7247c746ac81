#!/bin/bash
# trainer_lib.sh — shared helpers of the GPU window's scripts (window.sh, trainer_vs_cpu.sh,
# trainer_bench.sh, trainer_multirank.sh); sourced, not run. Sets: repo, KIT, OUT, build,
# trainer, stepscope; defines step(), run_logged(), pick_nccl(), use_picked_nccl(),
# torch_nccl_env(), provenance_header/footer(), build_gpu(), kit_env().
#
# The GPU machine (shared/GPU.md): one H100/H200, CUDA 13.0, cmake, ninja, PyTorch; maybe no
# C compiler, no zstd/zlib/pkg-config -dev packages and an NCCL older than 2.30. The kit
# (scripts/gpu/pack.sh, carried as .gpukit) brings them, plus binaries built elsewhere.
#
# STEPSCOPE_DRY_RUN=1 (window.sh --dry-run, in CI without a GPU): run_logged does not run
# commands; it checks them instead — the trainer's configuration with --check-config,
# stepscope's subcommand options against its --help, that scripts and programs exist.
set -u
: "${repo:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
# The kit: $STEPSCOPE_KIT, else the folder holding window.sh when run from a kit, else
# .gpukit at the repository root.
: "${KIT:=${STEPSCOPE_KIT:-$repo/.gpukit}}"
OUT=${OUT:-$PWD/gpu-evidence}
build=${BUILD:-$repo/build-gpu}
trainer=$build/trainer/stepscope-train
stepscope=$build/analyzer/stepscope
DRY=${STEPSCOPE_DRY_RUN:-0}
mkdir -p "$OUT"
summary=$OUT/summary.txt
touch "$summary"

# step NAME COMMAND...: runs COMMAND with its output in $OUT/NAME.log, PASS/FAIL in summary,
# then packs the evidence ($WINDOW_PACK, set by window.sh: a step that ends is never lost).
# Each step has a time limit (STEP_TIMEOUT seconds, default 300; the build BUILD_TIMEOUT):
# the step runs in its own process group (set -m), killed as a whole (rank processes
# included) when the limit passes; it is then marked FAIL with rc 124 and the next runs.
step() {
  local name=$1 t0 pid watchdog rc limit=${STEP_TIMEOUT:-300}; shift
  [ "$1" = build_gpu ] && limit=${BUILD_TIMEOUT:-900}
  echo "== $name: $* (limit $limit s)" | tee -a "$OUT/$name.log"
  t0=$(date +%s)
  set -m
  ( "$@" ) >> "$OUT/$name.log" 2>&1 &
  pid=$!
  set +m
  # The watchdog must not outlive the step: its sleep is killed with it (an orphaned sleep
  # would hold the caller's stdout open, and the device tool waits for that), and it never
  # writes to stdout.
  ( trap 'kill "$sp" 2>/dev/null; exit 0' TERM
    sleep "$limit" & sp=$!
    wait "$sp" || exit 0
    echo "== $name: time limit of $limit s reached, killed" >> "$OUT/$name.log"
    kill -TERM -- "-$pid" 2>/dev/null
    sleep 10 & sp=$!
    wait "$sp" || exit 0
    kill -KILL -- "-$pid" 2>/dev/null ) > /dev/null 2>&1 &
  watchdog=$!
  wait "$pid"; rc=$?
  kill "$watchdog" 2>/dev/null; wait "$watchdog" 2>/dev/null
  [ $rc -ge 128 ] && grep -q "time limit of $limit s reached" "$OUT/$name.log" && rc=124
  if [ $rc -eq 0 ]; then
    echo "PASS $name ($(( $(date +%s) - t0 )) s)" | tee -a "$summary"
  else
    echo "FAIL $name (rc $rc, $(( $(date +%s) - t0 )) s, see $name.log)" | tee -a "$summary"
  fi
  if [ -n "${WINDOW_PACK:-}" ]; then "$WINDOW_PACK" > /dev/null 2>&1 || true; fi
  return 0
}

# In a dry run: checks a command instead of running it (see the file comment).
dry_check() {
  local a=("$@") i=0 prog sub opt help
  while [ $i -lt ${#a[@]} ]; do   # skip `env VAR=... ` and `timeout ...` prefixes
    case "${a[i]}" in
      env) i=$((i + 1)); while [[ ${a[i]:-} == *=* ]]; do i=$((i + 1)); done ;;
      timeout) i=$((i + 1)); while [[ ${a[i]:-} == -* ]]; do i=$((i + 1)); done; i=$((i + 1)) ;;
      *) break ;;
    esac
  done
  prog=${a[i]:-}
  case "$prog" in
    */stepscope-train)
      "${a[@]:i}" --check-config > /dev/null || { echo "dry run: invalid configuration: ${a[*]:i}"; return 1; } ;;
    */stepscope)
      sub=${a[i + 1]:-}
      help=$("$prog" "$sub" --help 2>&1) || { echo "dry run: stepscope $sub --help failed"; return 1; }
      local j=$((i + 2))
      while [ $j -lt ${#a[@]} ] && [ "${a[j]}" != -- ]; do
        opt=${a[j]}
        if [[ $opt == --* ]] && ! grep -q -- "${opt%%=*}" <<<"$help"; then
          echo "dry run: stepscope $sub has no option $opt"; return 1
        fi
        j=$((j + 1))
      done
      if [ "${a[j]:-}" = -- ]; then dry_check "${a[@]:j+1}" || return 1; fi ;;
    python3|python)
      [ -f "${a[i + 1]:-}" ] || [ "${a[i + 1]:-}" = -c ] || [ "${a[i + 1]:-}" = - ] ||
        { echo "dry run: missing script ${a[i + 1]:-}"; return 1; } ;;
    compute-sanitizer|nvidia-smi|torchrun|ncu)
      echo "dry run: $prog runs only on the GPU machine (not checked)" ;;
    */*) [ -e "$prog" ] || { echo "dry run: missing $prog"; return 1; }
         case "$prog" in *.sh) bash -n "$prog" || return 1 ;; esac ;;
    *) command -v "$prog" > /dev/null || { echo "dry run: command not found: $prog"; return 1; } ;;
  esac
}

# Echoes a command into $OUT/commands.txt (for PROVENANCE.md), then runs it (checks it in
# a dry run).
run_logged() {
  printf '%q ' "$@" >> "$OUT/commands.txt"; echo >> "$OUT/commands.txt"
  if [ "$DRY" = 1 ]; then dry_check "$@"; return; fi
  "$@"
}

# The NCCL library to run with: $NCCL_LIB_DIR, else the first of the kit's (NCCL 2.32, the
# PyPI wheel slimmed to sm_90), PyTorch's bundled NCCL and the toolkit's whose version is
# >= 2.30 (needed for several ranks on one GPU); else the toolkit's. Sets NCCL_PICKED_DIR
# and NCCL_PICKED_VERSION (call it directly, not in $(...)).
NCCL_PICKED_DIR=""
NCCL_PICKED_VERSION=""
nccl_version_of() { # "2.28.9" for a libnccl.so.2 (ncclGetVersion needs no GPU)
  python3 -c 'import ctypes, sys
v = ctypes.c_int()
ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v))
print("%d.%d.%d" % (v.value // 10000, v.value // 100 % 100, v.value % 100))' "$1" 2>/dev/null
}
kit_nccl_dir=${WINDOW_EV:-/tmp/stepscope-window}/nccl/lib
unpack_kit_nccl() { # the kit's NCCL, once per machine (while it stays warm)
  if [ -f "$KIT/deps/nccl/libnccl.so.2.xz" ] && [ ! -e "$kit_nccl_dir/libnccl.so.2" ]; then
    python3 "$repo/scripts/gpu/nccl_slim.py" unpack "$KIT/deps/nccl/libnccl.so.2.xz" \
      "$kit_nccl_dir" >&2 || rm -f "$kit_nccl_dir/libnccl.so.2"
  fi
}
pick_nccl() {
  local dirs=() d v minor
  unpack_kit_nccl
  [ -n "${NCCL_LIB_DIR:-}" ] && dirs+=("$NCCL_LIB_DIR")
  dirs+=("$kit_nccl_dir")
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

# For PyTorch with several ranks on one GPU: PyTorch loads its own NCCL by RPATH, so when
# that one is older than 2.30, LD_PRELOAD the kit's. Echoes what it did.
torch_nccl_env() {
  local v minor
  v=$(python3 -c 'import torch; print(".".join(map(str, torch.cuda.nccl.version())))' 2>/dev/null) || v=""
  minor=$(echo "$v" | cut -d. -f2)
  unpack_kit_nccl
  if [ "${minor:-0}" -lt 30 ] && [ -e "$kit_nccl_dir/libnccl.so.2" ]; then
    export LD_PRELOAD="$kit_nccl_dir/libnccl.so.2${LD_PRELOAD:+:$LD_PRELOAD}"
    echo "torch NCCL ${v:-?} < 2.30: LD_PRELOAD=$kit_nccl_dir/libnccl.so.2"
  else
    echo "torch NCCL ${v:-?}: used as it is"
  fi
  export NCCL_MULTI_RANK_GPU_ENABLE=1
}

# The commit this evidence is of: the kit's COMMIT file (the tree sent to the GPU machine
# has no .git), else git.
evidence_commit() {
  if [ -n "${STEPSCOPE_COMMIT:-}" ]; then echo "$STEPSCOPE_COMMIT"
  elif [ -f "$KIT/COMMIT" ]; then head -1 "$KIT/COMMIT"
  else git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown; fi
}

provenance_header() {
  pick_nccl
  {
    echo "# Provenance"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- git commit: $(evidence_commit)"
    echo "- kit: $KIT ($(sed -n 2p "$KIT/COMMIT" 2>/dev/null))"
    echo "- binaries: ${WINDOW_BINARIES:-built in $build}"
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

# What a build or a run needs from the kit, when the machine lacks it: zstd/zlib/pkgconf
# unpacked from Debian's packages, and nccl.h. Idempotent.
kit_env() {
  local root=$KIT/deps/root
  local lib=$root/usr/lib/x86_64-linux-gnu
  if [ -d "$root" ]; then
    export PKG_CONFIG_PATH="$lib/pkgconfig:$root/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$lib"   # last: the machine's first
    export CMAKE_PREFIX_PATH="$root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    if ! command -v pkg-config > /dev/null && [ -x "$root/usr/bin/pkgconf" ]; then
      export PKG_CONFIG="$root/usr/bin/pkgconf"
    fi
  fi
  if [ ! -e /usr/local/cuda/include/nccl.h ] && [ -e "$KIT/deps/nccl/include/nccl.h" ]; then
    # build against the kit's nccl.h and the unpacked NCCL 2.32
    unpack_kit_nccl
    mkdir -p "${WINDOW_EV:-/tmp/stepscope-window}/nccl/include"
    cp -f "$KIT"/deps/nccl/include/*.h "${WINDOW_EV:-/tmp/stepscope-window}/nccl/include/"
    [ -e "$kit_nccl_dir/libnccl.so" ] || ln -sf libnccl.so.2 "$kit_nccl_dir/libnccl.so"
    export NCCL_HOME=${WINDOW_EV:-/tmp/stepscope-window}/nccl
  fi
}

# Configures and builds everything for sm_90 (once per build directory). -Werror is off:
# the GPU machine's compiler is not the one CI checks warnings with.
build_gpu() {
  kit_env
  local pkgconf=()
  [ -n "${PKG_CONFIG:-}" ] && pkgconf=(-DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG")
  run_logged cmake -S "$repo" -B "$build" -G Ninja -DSTEPSCOPE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DSTEPSCOPE_WERROR=OFF \
    "${pkgconf[@]}" &&
  run_logged cmake --build "$build" -j "$(nproc)"
}
