#!/bin/bash
# trainer_lib.sh — shared helpers of the GPU window's scripts (window.sh and its steps,
# trainer_vs_cpu.sh, trainer_multirank.sh); sourced, not run. Sets: repo, KIT, OUT, build,
# trainer, stepscope, summary; defines step() and its parts (part, note, reason),
# run_logged(), the NCCL choice (pick_nccl, use_picked_nccl, torch_nccl_env), the loss
# comparison pair(), provenance_header/footer(), build_gpu() and kit_env().
#
# The GPU machine (docs/gpu-session-plan.md): one H200 (or H100), CUDA 13.0, cmake, ninja,
# Python 3.12 with PyTorch; maybe no zstd/xz tools, no -dev packages, and an NCCL older
# than 2.30. The kit (scripts/gpu/pack.sh, carried as .gpukit) brings what is missing.
#
# STEPSCOPE_DRY_RUN=1 (window.sh --dry-run, in CI without a GPU): run_logged does not run
# commands; it checks them instead — the trainer's configuration with --check-config,
# stepscope's subcommand options against its --help, that scripts and programs exist.
set -u
: "${repo:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
# The kit: $STEPSCOPE_KIT, else .gpukit at the repository root (window.sh sets KIT).
: "${KIT:=${STEPSCOPE_KIT:-$repo/.gpukit}}"
OUT=${OUT:-$PWD/gpu-evidence}
build=${BUILD:-$repo/build-gpu}
trainer=$build/trainer/stepscope-train
stepscope=$build/analyzer/stepscope
DRY=${STEPSCOPE_DRY_RUN:-0}
mkdir -p "$OUT"
summary=$OUT/summary.txt
touch "$summary"
# Per-step notes (the numbers of the summary line), reasons and part results.
NOTES=${NOTES:-$OUT/.notes}
mkdir -p "$NOTES"
source "$repo/scripts/gpu/window_evidence.sh"   # evidence_commit, device_short_name
# The device's short name, for sample folders (samples/gpu-<dev>-<what>/): h200, h100, none.
: "${DEV:=$(device_short_name "$(timeout 15 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)")}"

# The seconds left before the call's deadline (WINDOW_DEADLINE, epoch seconds; a large number
# outside a window).
time_left() {
  if [ -n "${WINDOW_DEADLINE:-}" ]; then echo $((WINDOW_DEADLINE - $(date +%s))); else echo 100000; fi
}

# note TEXT: a number or fact for the running step's summary line ("loss 5.41 -> 4.98").
note() { # (empty notes, and lists of empty items, are left out)
  local t
  t=$(echo "$*" | sed 's/^[ ,;]*//; s/[ ,;]*$//')
  [ -n "$t" ] && echo "$t" >> "$NOTES/${STEP_NAME:-global}.notes"
  return 0
}
# reason TEXT: why the running step failed or was skipped (else the log's last line is shown).
reason() { echo "$*" > "$NOTES/${STEP_NAME:-global}.reason"; }

# part LABEL COMMAND...: one check inside a step. Runs COMMAND (run_logged), notes
# "LABEL ok", "LABEL SKIP" (exit 77: no usable device) or "LABEL FAIL (rc N)", and marks the
# step failed on a failure; returns COMMAND's status. A failed part does not stop the step:
# the next part runs (a part that needs an earlier part's output fails on its own). The first
# part that does not pass gives the step's reason: the first error line of its output (a
# Python traceback's exception line too), when that output goes to a file.
part() {
  local label=$1 rc out size=0 me=$BASHPID; shift
  out=$(readlink "/proc/$me/fd/1" 2>/dev/null)   # (not $BASHPID inside $(...): that is the capture)
  [ -f "$out" ] && size=$(stat -c %s "$out")
  echo "-- $label: $*"
  run_logged "$@"; rc=$?
  case $rc in
    0) echo "$label ok" >> "$NOTES/$STEP_NAME.parts"; touch "$NOTES/$STEP_NAME.passed" ;;
    77) echo "$label SKIP" >> "$NOTES/$STEP_NAME.parts"; touch "$NOTES/$STEP_NAME.skipped" ;;
    *) echo "$label FAIL (rc $rc)" >> "$NOTES/$STEP_NAME.parts"; touch "$NOTES/$STEP_NAME.failed" ;;
  esac
  if [ "$rc" != 0 ] && [ ! -s "$NOTES/$STEP_NAME.reason" ] && [ -f "$out" ]; then
    local text why
    text=$(tail -c +"$((size + 1))" "$out" | grep -v '^-- ' | grep -v '^[[:space:]]*$')
    why=$(grep -m1 -iE 'error|FAIL|not found|no such|refuse|no usable|SKIP|cannot' <<<"$text")
    [ -n "$why" ] || why=$(tail -1 <<<"$text")
    [ -n "$why" ] && echo "$label: $why" > "$NOTES/$STEP_NAME.reason"
  fi
  return $rc
}
# part_verdict: a step function's last command: 1 if a part failed, 77 if every part was
# skipped, else 0.
part_verdict() {
  [ -e "$NOTES/$STEP_NAME.failed" ] && return 1
  [ -e "$NOTES/$STEP_NAME.skipped" ] && [ ! -e "$NOTES/$STEP_NAME.passed" ] && return 77
  return 0
}

# The process group of the running step (its pid), for window.sh's clean-up by pid.
PGIDS=${PGIDS:-$OUT/.pgids}

# step NAME COMMAND...: runs COMMAND with its output in $OUT/NAME.log and writes one line to
# the summary, "PASS|FAIL|SKIP NAME (N s): notes [- reason]", then packs the evidence
# ($WINDOW_PACK, set by window.sh: a step that ends is never lost). Exit 0 is PASS, 77 SKIP,
# anything else FAIL. Its limit is STEP_TIMEOUT seconds (default 300; the build
# BUILD_TIMEOUT), cut to the time left before the call's deadline; with under STEP_MIN_S
# (5) seconds left it is skipped. The step runs in its own process group (set -m), killed
# as a whole (rank processes included) when the limit passes (then FAIL, rc 124) and
# again when it ends (nothing it started outlives it); the next step runs either way.
# WINDOW_SIMULATE (window.sh --dry-run's scenarios): "fail:NAME" makes step NAME fail,
# "hang:NAME" makes it hang (its limit is then WINDOW_SIM_HANG_S, default 3 s).
step() {
  local name=$1 t0 pid watchdog rc status limit=${STEP_TIMEOUT:-300} left line why
  shift
  [ "$1" = build_gpu ] && limit=${BUILD_TIMEOUT:-900}
  case ",${WINDOW_SIMULATE:-}," in
    *",fail:$name,"*) set -- sh -c 'echo "simulated failure (WINDOW_SIMULATE)"; exit 1' ;;
    *",hang:$name,"*) set -- sleep 100000; limit=${WINDOW_SIM_HANG_S:-3} ;;
  esac
  left=$(time_left)
  [ "$left" -lt "$limit" ] && limit=$left
  rm -f "$NOTES/$name".*
  t0=$(date +%s)
  if [ "$left" -lt "${STEP_MIN_S:-5}" ]; then
    echo "SKIP $name (0 s): no time left ($left s before the call's bound)" | tee -a "$summary"
    return 0   # (nothing new to pack: the call's last packing follows)
  fi
  echo "== $name: $* (limit $limit s)" | tee -a "$OUT/$name.log"
  set -m
  ( export STEP_NAME=$name; "$@" ) >> "$OUT/$name.log" 2>&1 < /dev/null &
  pid=$!
  set +m
  echo "$pid" > "$PGIDS"
  STEP_PGID=$pid
  # The watchdog must not outlive the step: its sleep is killed with it (an orphaned sleep
  # would hold the caller's stdout open, and the device tool waits for that), and it never
  # writes to stdout.
  ( trap 'kill "$sp" 2>/dev/null; exit 0' TERM
    sleep "$limit" & sp=$!
    wait "$sp" || exit 0
    echo "== $name: time limit of $limit s reached, killed" >> "$OUT/$name.log"
    kill -TERM -- "-$pid" 2>/dev/null
    sleep 5 & sp=$!
    wait "$sp" || exit 0
    kill -KILL -- "-$pid" 2>/dev/null ) > /dev/null 2>&1 &
  watchdog=$!
  wait "$pid"; rc=$?
  kill "$watchdog" 2>/dev/null; wait "$watchdog" 2>/dev/null
  kill -KILL -- "-$pid" 2>/dev/null   # whatever the step left running in its group
  : > "$PGIDS"
  STEP_PGID=""
  grep -q "time limit of $limit s reached" "$OUT/$name.log" && rc=124
  case $rc in 0) status=PASS ;; 77) status=SKIP ;; *) status=FAIL ;; esac
  line="$status $name ($(($(date +%s) - t0)) s"
  [ "$status" = FAIL ] && line="$line, rc $rc"
  line="$line)"
  local notes=""
  [ -s "$NOTES/$name.parts" ] && notes=$(paste -sd'\t' "$NOTES/$name.parts" | sed 's/\t/, /g')
  [ -s "$NOTES/$name.notes" ] && notes="${notes:+$notes; }$(paste -sd'\t' "$NOTES/$name.notes" | sed 's/\t/; /g')"
  [ -n "$notes" ] && line="$line: $notes"
  if [ "$status" != PASS ]; then
    if [ $rc = 124 ]; then why="stopped at its limit of $limit s"
    elif [ -s "$NOTES/$name.reason" ]; then why=$(head -1 "$NOTES/$name.reason")
    else why=$(grep -v '^\(==\|--\) ' "$OUT/$name.log" | grep -v '^[[:space:]]*$' | tail -1)
    fi
    line="$line - ${why:0:200}"
  fi
  echo "$line" | tee -a "$summary"
  if [ -n "${WINDOW_PACK:-}" ]; then "$WINDOW_PACK" > /dev/null 2>&1 || true; fi
  return 0
}

# In a dry run: checks a command instead of running it (see the file comment).
dry_check() {
  local a=("$@") i=0 prog sub opt help
  while [ $i -lt ${#a[@]} ]; do   # skip `env VAR=... ` and `timeout ...` prefixes
    case "${a[i]}" in
      env) i=$((i + 1)); while [[ ${a[i]:-} == *=* ]]; do i=$((i + 1)); done ;;
      timeout) i=$((i + 1))   # its options (-k N, -s SIG, --foreground), then the duration
               while [[ ${a[i]:-} == -* ]]; do
                 case "${a[i]}" in -k|-s|--kill-after|--signal) i=$((i + 2)) ;; *) i=$((i + 1)) ;; esac
               done
               i=$((i + 1)) ;;
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
        { echo "dry run: missing script ${a[i + 1]:-}"; return 1; } ;;  # (its syntax: window_dry_run.sh)
    bash|sh)   # a script: its syntax; a command after its `--`, checked as well
      [ -f "${a[i + 1]:-}" ] || { echo "dry run: missing script ${a[i + 1]:-}"; return 1; }
      bash -n "${a[i + 1]}" || return 1
      local k=$((i + 2))
      while [ $k -lt ${#a[@]} ] && [ "${a[k]}" != -- ]; do k=$((k + 1)); done
      if [ $k -lt ${#a[@]} ]; then dry_check "${a[@]:k+1}" || return 1; fi ;;
    compute-sanitizer|nvidia-smi|torchrun|ncu|nvcc)
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
# PyPI wheel slimmed to sm_90, unpacked by window.sh's setup into KIT_NCCL_DIR), PyTorch's
# bundled NCCL and the toolkit's whose version is >= 2.30 (needed for several ranks on one
# GPU); else the first found. Sets NCCL_PICKED_DIR and NCCL_PICKED_VERSION (call it
# directly, not in $(...)).
NCCL_PICKED_DIR=""
NCCL_PICKED_VERSION=""
nccl_version_of() { # "2.28.9" for a libnccl.so.2 (ncclGetVersion needs no GPU)
  python3 -c 'import ctypes, sys
v = ctypes.c_int()
ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v))
print("%d.%d.%d" % (v.value // 10000, v.value // 100 % 100, v.value % 100))' "$1" 2>/dev/null
}
: "${KIT_NCCL_DIR:=${WINDOW_EV:-/tmp/stepscope-window}/nccl/lib}"
unpack_kit_nccl() { # the kit's NCCL, once per machine (while it stays warm)
  if [ -f "$KIT/deps/nccl/libnccl.so.2.xz" ] && [ ! -e "$KIT_NCCL_DIR/libnccl.so.2" ]; then
    python3 "$repo/scripts/gpu/nccl_slim.py" unpack "$KIT/deps/nccl/libnccl.so.2.xz" \
      "$KIT_NCCL_DIR" >&2 || rm -f "$KIT_NCCL_DIR/libnccl.so.2"
  fi
}
pick_nccl() {
  local dirs=() d v minor
  unpack_kit_nccl
  [ -n "${NCCL_LIB_DIR:-}" ] && dirs+=("$NCCL_LIB_DIR")
  dirs+=("$KIT_NCCL_DIR")
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
  if [ "${minor:-0}" -lt 30 ] && [ -e "$KIT_NCCL_DIR/libnccl.so.2" ]; then
    export LD_PRELOAD="$KIT_NCCL_DIR/libnccl.so.2${LD_PRELOAD:+:$LD_PRELOAD}"
    echo "torch NCCL ${v:-?} < 2.30: LD_PRELOAD=$KIT_NCCL_DIR/libnccl.so.2"
  else
    echo "torch NCCL ${v:-?}: used as it is"
  fi
  export NCCL_MULTI_RANK_GPU_ENABLE=1
}

# pair NAME TOL LAYOUT...: the CUDA backend's per-step losses against the CPU backend's on
# the same configuration (same seed, data, batch, steps), compared by
# trainer_compare_losses.py within TOL (relative, every step). PREC: GEMM precision (bf16),
# ACT: activation storage (bf16 with bf16 GEMMs, else fp32); PAIR_COMMON: the shared
# options. Notes the worst difference.
pair() {
  local name=$1 tol=$2; shift 2
  if [ "${SKIP_MULTIRANK:-0}" = 1 ] && [ "$2" != 1 ]; then  # "$1 $2" is "--world N"
    echo "skipped: several ranks on the GPU did not work"; return 0
  fi
  local prec=${PREC:-bf16} act=${ACT:-} common
  read -r -a common <<<"${PAIR_COMMON:---model tiny --steps 30 --batch 8 --seed 1337}"
  [ -n "$act" ] || { [ "$prec" = bf16 ] && act=bf16 || act=fp32; }
  local cpu=$OUT/$name.cpu-$act.jsonl cuda=$OUT/$name.cuda-$prec-$act.jsonl
  rm -f "$cpu" "$cuda"
  run_logged "$trainer" --backend cpu "${common[@]}" "$@" --activations "$act" --log "$cpu"
  run_logged env STEPSCOPE_PRECISION="$prec" "$trainer" --backend cuda "${common[@]}" "$@" \
    --activations "$act" --log "$cuda"
  run_logged python3 "$repo/scripts/gpu/trainer_compare_losses.py" "$cpu" "$cuda" "$tol" |
    tee "$OUT/$name.$prec-$act.compare.txt"
  local rc=${PIPESTATUS[0]}
  if [ -n "${STEP_NAME:-}" ] && grep -q '^worst' "$OUT/$name.$prec-$act.compare.txt" 2>/dev/null; then
    note "$name $prec/$act: $(grep '^worst' "$OUT/$name.$prec-$act.compare.txt" | sed 's/relative difference //')"
  fi
  return "$rc"
}

# PROVENANCE.md of a standalone script's evidence (window.sh writes its own, from what its
# setup step found): versions, then the commands and steps (provenance_footer).
provenance_header() {
  pick_nccl
  {
    echo "# Provenance"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- git commit: $(evidence_commit)"
    echo "- kit: $KIT ($(sed -n 2p "$KIT/COMMIT" 2>/dev/null))"
    echo "- binaries: $build"
    echo "- host: $(hostname), $(nproc) cores"
    echo
    echo '```'
    nvidia-smi 2>&1
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
    nvcc --version 2>&1 | tail -2
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())' 2>&1
    echo "NCCL used by the trainer: ${NCCL_PICKED_DIR:-none found} (NCCL ${NCCL_PICKED_VERSION:-?})"
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

# What a build needs from the kit, when the machine lacks it: zstd/zlib/libdeflate/isa-l
# headers and libraries and pkgconf unpacked from Debian's packages, and nccl.h.
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
    local home
    home=$(dirname "$KIT_NCCL_DIR")
    mkdir -p "$home/include"
    cp -f "$KIT"/deps/nccl/include/*.h "$home/include/"
    [ -e "$KIT_NCCL_DIR/libnccl.so" ] || ln -sf libnccl.so.2 "$KIT_NCCL_DIR/libnccl.so"
    export NCCL_HOME=$home
  fi
}

# Configures and builds for sm_90 (once per build directory): the targets the window runs
# (BUILD_TARGETS), or everything. -Werror is off: the GPU machine's compiler is not the one
# CI checks warnings with.
build_gpu() {
  kit_env
  local pkgconf=() targets=()
  [ -n "${PKG_CONFIG:-}" ] && pkgconf=(-DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG")
  for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done
  run_logged cmake -S "$repo" -B "$build" -G Ninja -DSTEPSCOPE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DSTEPSCOPE_WERROR=OFF \
    "${pkgconf[@]}" &&
  run_logged cmake --build "$build" -j "$(nproc)" "${targets[@]}"
}
