#!/bin/bash
# window_dry_run.sh BUILD — `window.sh --dry-run`: the GPU window rehearsed without a GPU (CI,
# test gpu_window.dry_run). BUILD is a CUDA-enabled build of this tree. A kit is made from
# BUILD's binaries (COMMIT, the scripts, prebuilt.tar: uncompressed, read by the same
# Python tarfile code as the real kit's .tar.xz), then the one call runs in scenarios, at
# the same time, each with every command checked instead of run (STEPSCOPE_DRY_RUN=1:
# programs and scripts exist, trainer configurations pass --check-config, stepscope options
# are in its --help):
#   clean     `window.sh run`: every step PASS, exit 0, summary.txt/evidence.tgz/traces.tgz
#             in OUT, the summary printed last
#   hostile   no nvidia-smi, nvcc, compute-sanitizer, ncu, torchrun, zstd or xz on PATH; the
#             prebuilt binaries' libzstd.so.1 hidden from ldd; step 3 made to fail and step 2
#             to hang: setup names the missing tools and library, the fallback build runs,
#             step 2 is stopped at its limit, step 3 fails, the steps after them still run,
#             the three files come back, exit 1
#   bound     ONE_LIMIT=12 with setup hanging: setup is cut at the call's deadline (8 s), the
#             rest SKIP for want of time, the three files come back, exit 1, within the bound
#   deferred  `window.sh deferred`: every step PASS
# and the standalone scripts of later windows (trainer_vs_cpu.sh, trainer_multirank.sh,
# trainer_bench.sh) are dry-run too. Exit 0 when every expectation holds; the failures are
# printed otherwise.
set -u
gpu=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$gpu/../.." && pwd)
BUILD=${1:-$repo/build}
[ -d "$BUILD" ] && BUILD=$(cd "$BUILD" && pwd)
[ -x "$BUILD/analyzer/stepscope" ] && [ -x "$BUILD/trainer/stepscope-train" ] ||
  { echo "dry run: no build in $BUILD (stepscope, stepscope-train)"; exit 1; }
rc=0
fail() { echo "dry run: FAILED: $*"; rc=1; }
for f in "$gpu"/*.sh; do bash -n "$f" || fail "syntax error in $f"; done
for f in "$gpu"/*.py; do   # (parsed, not compiled: nothing is written into the tree)
  python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" || fail "syntax error in $f"
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/window-dry.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# --- the kit of this build
kit=$tmp/kit
mkdir -p "$kit/gpu"
cp "$gpu"/*.sh "$gpu"/*.py "$kit/gpu/"
printf '%s dry-run\npacked %s on %s (window.sh --dry-run)\n' \
  "$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "$(hostname)" > "$kit/COMMIT"
source "$gpu/window_steps.sh"   # WINDOW_BINARIES
python3 - "$BUILD" "$kit/prebuilt.tar" $WINDOW_BINARIES <<'PY' || fail "cannot make the dry run's kit"
import os, sys, tarfile
build, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
with tarfile.open(out, "w") as tar:
    for f in files:
        tar.add(os.path.join(build, f), arcname="prebuilt/" + f)
    for name in sorted(os.listdir(os.path.join(build, "tracer"))):
        if name.startswith("libstepscope.so"):
            tar.add(os.path.join(build, "tracer", name), arcname="prebuilt/tracer/" + name)
PY

# --- a PATH without the GPU machine's tools and without zstd/xz
hidden="nvidia-smi nvcc compute-sanitizer ncu torchrun zstd xz"
shadow=$tmp/path
mkdir -p "$shadow"
IFS=: read -r -a path_dirs <<<"$PATH"
declare -A seen=()
links=()
for d in "${path_dirs[@]}"; do
  for f in "$d"/*; do
    n=${f##*/}
    [ -x "$f" ] && [ -z "${seen[$n]:-}" ] && [[ " $hidden " != *" $n "* ]] && { seen[$n]=1; links+=("$f"); }
  done
done 2> /dev/null
ln -s -t "$shadow" "${links[@]}"

# scenario NAME CALL ENV...: window.sh CALL in the dry run, OUT and work files of its own
scenario() {
  local name=$1 call=$2 t0; shift 2
  mkdir -p "$tmp/$name"
  t0=$(date +%s)
  env "$@" STEPSCOPE_DRY_RUN=1 KIT="$kit" DRY_BUILD="$BUILD" WINDOW_EV="$tmp/$name/ev" \
    RET="$tmp/$name/out" bash "$gpu/window.sh" "$call" > "$tmp/$name/stdout" 2>&1
  echo $? > "$tmp/$name/rc"
  echo $(($(date +%s) - t0)) > "$tmp/$name/seconds"
}
scenario clean run &
scenario hostile run PATH="$shadow" WINDOW_HIDE_LIBS=libzstd.so.1 \
  WINDOW_SIMULATE=hang:2_cupti_nvtx,fail:3_trainer WINDOW_SIM_HANG_S=3 &
scenario bound run ONE_LIMIT=12 WINDOW_RESERVE_S=4 WINDOW_SIMULATE=hang:0_setup WINDOW_SIM_HANG_S=100 &
scenario deferred deferred &
for s in trainer_vs_cpu trainer_multirank trainer_bench; do
  ( mkdir -p "$tmp/$s"
    STEPSCOPE_DRY_RUN=1 BUILD="$BUILD" OUT="$tmp/$s/out" bash "$gpu/$s.sh" > "$tmp/$s/stdout" 2>&1 ) &
done
wait

# --- expectations
summary_of() { cat "$tmp/$1/out/summary.txt" 2>/dev/null; }
expect_line() { # expect_line SCENARIO REGEX WHAT
  grep -Eq "$2" "$tmp/$1/out/summary.txt" 2>/dev/null || fail "$1: $3 (no line matching '$2')"
}
expect_common() { # expect_common SCENARIO RC: exit status, the three files, the summary last
  local s=$1 want=$2 got
  got=$(cat "$tmp/$s/rc")
  [ "$got" = "$want" ] || fail "$s: exit $got, expected $want"
  for f in summary.txt evidence.tgz traces.tgz; do
    [ -s "$tmp/$s/out/$f" ] || fail "$s: no $f in OUT"
  done
  local n
  n=$(wc -l < "$tmp/$s/out/summary.txt")
  [ "$n" -gt 2 ] && tail -n "$n" "$tmp/$s/stdout" | cmp -s - "$tmp/$s/out/summary.txt" ||
    fail "$s: the summary is not the last thing printed"
  python3 - "$tmp/$s/out/evidence.tgz" <<'PY' || fail "$s: evidence.tgz lacks the window's files"
import sys, tarfile
names = tarfile.open(sys.argv[1]).getnames()
need = ("summary.txt", "PROVENANCE.md", "0_setup.log")
sys.exit(0 if all(any(n.endswith("-window/" + f) or n.endswith("-deferred/" + f) for n in names) for f in need) else 1)
PY
  echo "dry run: $s: exit $got in $(cat "$tmp/$s/seconds") s; $(tail -1 "$tmp/$s/out/summary.txt")"
}
expect_common clean 0
for st in 0_setup 1_gpu_ops 2_cupti_nvtx 3_trainer 4_vs_cpu 5_two_ranks 6_torch_profiler 7_mfu 8_overhead; do
  expect_line clean "^PASS $st " "step $st checked"
done
grep -q '^\(FAIL\|SKIP\)' "$tmp/clean/out/summary.txt" && fail "clean: a step did not pass"
expect_line clean "^PASS 0_setup .*tools missing" "setup lists the tools"
expect_line clean "^PASS 0_setup .*binaries: [0-9]+ binaries checked, 0 libraries missing" "setup's ldd check"

expect_common hostile 1
expect_line hostile "^PASS 0_setup .*tools missing: nvidia-smi nvcc compute-sanitizer ncu torchrun" "setup names the missing tools"
expect_line hostile "^PASS 0_setup .*libzstd.so.1: hidden.* -> build on this machine" "setup names the missing library"
expect_line hostile "^PASS build " "the fallback build"
expect_line hostile "^FAIL 2_cupti_nvtx .*stopped at its limit of 3 s" "the hanging step is stopped"
expect_line hostile "^FAIL 3_trainer .*simulated failure" "the failing step fails"
for st in 4_vs_cpu 5_two_ranks 6_torch_profiler 7_mfu 8_overhead; do
  expect_line hostile "^PASS $st " "step $st runs after the failures"
done
[ "$(cat "$tmp/hostile/seconds")" -le 60 ] || fail "hostile: took $(cat "$tmp/hostile/seconds") s"

expect_common bound 1
expect_line bound "^FAIL 0_setup .*stopped at its limit of [0-8] s" "the hanging step is cut at the deadline"
# (the later steps SKIP for want of time; on a loaded machine the call's own bound may stop
# the call first, which it must then say)
expect_line bound "^SKIP 8_overhead .*no time left|^FAIL window \(rc 124\): stopped at the call's bound" "the last step is skipped"
# bounded: 12 s and the last packing (seconds on a loaded machine), not the hang's 100 s
[ "$(cat "$tmp/bound/seconds")" -le 25 ] || fail "bound: took $(cat "$tmp/bound/seconds") s, bound 12 s"

expect_common deferred 0
for st in d0_attention d1_four_ranks d2_moe_ep d3_torchrun_ddp d4_memcheck d5_zero; do
  expect_line deferred "^PASS $st " "deferred step $st checked"
done

for s in trainer_vs_cpu trainer_multirank trainer_bench; do
  if grep -q '^FAIL' "$tmp/$s/out/summary.txt" 2>/dev/null || ! grep -q '^PASS' "$tmp/$s/out/summary.txt" 2>/dev/null; then
    fail "$s.sh: $(grep -c '^FAIL' "$tmp/$s/out/summary.txt" 2>/dev/null) steps failed"
    grep -h "dry run:" "$tmp/$s"/out/*.log 2>/dev/null | grep -v "not checked" | head -5
  else
    echo "dry run: $s.sh: $(grep -c '^PASS' "$tmp/$s/out/summary.txt") steps checked"
  fi
done

if [ $rc != 0 ]; then
  for s in clean hostile bound deferred; do
    echo "---- $s (exit $(cat "$tmp/$s/rc")): summary"; summary_of "$s"
    grep -h "dry run:" "$tmp/$s"/ev/call-*/samples/*/*.log 2>/dev/null | grep -v "not checked" | head -10
  done
fi
exit $rc
