#!/usr/bin/env bash
# Decompression bombs (issue 34 defect 6): a compressed input may inflate to at
# most max(100 x its size, 64 MiB), and 32 GiB in all (stepscope.h,
# "Decompression limits"); past that every command stops reading it at once,
# with an error naming the file, the limit and the variable that raises it.
#   - a stepscope trace (a real rank file) followed by 16 zstd frames of 63 MiB
#     of zeros (1 GiB from 50 KB): info and dump fail in under 2 s of CPU (20 s in the sanitizer builds), analyze
#     and view keep the records before the bomb and warn
#   - a PyTorch profiler .json.gz holding 128 MiB of events (300 times its
#     size; a second gzip member makes the trailer's ISIZE say a few bytes):
#     info and analyze fail in under 2 s of CPU, whichever way the gzip is read
#     (STEPSCOPE_KINETO_GZIP whole, pipe, stream; the split)
#   - an export trace.json.gz of 200 MiB of blanks: discovery does not read it
#     to its end, view regenerates the export instead of inflating it
#   - the limits are overridable: STEPSCOPE_INFLATE_RATIO lets a 300x file
#     through, STEPSCOPE_INFLATE_MAX lowers the ceiling; a bad value is warned
#     about; the real sample run (an export .json.gz among its files) is read
#     as before
# usage: test_inflate_limits.sh STEPSCOPE SAMPLE_RUN
set -u
stepscope=$1 sample=$2
# CPU time a refused bomb may take (CLI_CPU_LIMIT_MS; the sanitizer builds are 10-30x slower,
# CMake gives them 20 s: the unbounded reader took 13.5 s of CPU in the optimised build)
cpu_limit_ms=${CLI_CPU_LIMIT_MS:-2000}
cpu_limit_s=$((cpu_limit_ms / 1000))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; else echo "ok: $what"; fi
}
# run CMD...: its output in $out, exit status in $rc, and the CPU time (user + system, all
# its processes and threads) in $ms, milliseconds: what a bomb costs, whatever the load of
# the machine running the test.
run() {
  local TIMEFORMAT='%3U %3S' u s
  { time {
    out=$(timeout 120 "$@" 2>&1)
    rc=$?
  }; } 2>"$tmp/cpu"
  read -r u s <"$tmp/cpu"
  ms=$(python3 -c "print(round(($u + $s) * 1000))")
}
lacks() { ! grep -q "$1" <<<"$out"; }
bomb_message() { # FILE: the error names the file, the ratio and how to raise it
  grep -q "$1: decompresses to more than .* (100 times its size, at least 64 MiB): a decompression bomb? .*STEPSCOPE_INFLATE_RATIO=N" <<<"$out"
}

# ---- a trace followed by zstd frames of zeros
mkdir "$tmp/zbomb"
head -c 63M /dev/zero >"$tmp/zeros"
zstd -q -1 --check "$tmp/zeros" -o "$tmp/zeros.zst" || { echo "FAIL: zstd"; exit 1; }
cp "$sample/rank-00000.trace.zst" "$tmp/zbomb/"
for i in $(seq 16); do cat "$tmp/zeros.zst" >>"$tmp/zbomb/rank-00000.trace.zst"; done
zfile=$tmp/zbomb/rank-00000.trace.zst
for cmd in info dump; do
  run "$stepscope" $cmd "$zfile"
  check "$cmd of the zstd bomb fails (rc $rc)" test $rc -eq 1
  check "$cmd names the file, the ratio and STEPSCOPE_INFLATE_RATIO" bomb_message "$zfile"
  check "$cmd stops within $cpu_limit_s s of CPU ($ms ms)" test $ms -lt $cpu_limit_ms
done
run "$stepscope" analyze "$tmp/zbomb"
check "analyze keeps the records before the bomb (rc $rc)" test $rc -eq 0
check "and warns with the limit's message" bomb_message "$zfile"
check "in under $cpu_limit_s s of CPU ($ms ms)" test $ms -lt $cpu_limit_ms
run "$stepscope" view "$tmp/zbomb" --html "$tmp/zbomb.html"
check "view --html on the zstd bomb is done in under $cpu_limit_s s of CPU ($ms ms, rc $rc)" test $ms -lt $cpu_limit_ms -a $rc -eq 0

# ---- a Kineto .json.gz of repeated events
python3 - "$tmp" <<'PY' || { echo "FAIL: writing the gzip bombs"; exit 1; }
import os, sys, zlib
tmp = sys.argv[1]
ev = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1},'
per_mib = (1 << 20) // len(ev)
def bomb(path, mib, fill=ev * per_mib):
    """The events (or blanks) in one gzip member, the end of the document in a second
    one: the trailer's ISIZE then says a few bytes, as a bomb's may."""
    with open(path, "wb") as f:
        for parts in ([b'{"traceEvents":['] + [fill] * mib, [ev[:-1] + b"]}"]):
            c = zlib.compressobj(9, zlib.DEFLATED, 31)
            f.write(b"".join(c.compress(p) for p in parts) + c.flush())
    return (mib * per_mib if fill.startswith(ev) else 0) + 1
os.makedirs(tmp + "/gbomb")
bomb(tmp + "/gbomb/rank-0.json.gz", 128)        # 128 MiB from ~450 KB
n = bomb(tmp + "/small.json.gz", 80)             # 80 MiB from ~270 KB: past the 64 MiB floor
with open(tmp + "/small.count", "w") as f:
    f.write(str(n))
os.makedirs(tmp + "/xbomb")
bomb(tmp + "/xbomb/trace.json.gz", 200, fill=b" " * (1 << 20))  # no export marker at its start
PY
gfile=$tmp/gbomb/rank-0.json.gz
for way in whole pipe stream split; do
  if [ $way = split ]; then env=(STEPSCOPE_KINETO_SPLIT=on); else env=(STEPSCOPE_KINETO_GZIP=$way); fi
  run env "${env[@]}" "$stepscope" info "$gfile"
  check "info of the gzip bomb ($way) fails (rc $rc)" test $rc -eq 1
  check "info ($way) names the file, the ratio and STEPSCOPE_INFLATE_RATIO" bomb_message "$gfile"
  check "info ($way) stops within $cpu_limit_s s of CPU ($ms ms)" test $ms -lt $cpu_limit_ms
done
run "$stepscope" analyze "$tmp/gbomb"
check "analyze of the gzip bomb fails (rc $rc) with the message" test $rc -eq 1
check "analyze names the file and the limit" bomb_message "$gfile"
check "in under $cpu_limit_s s of CPU ($ms ms)" test $ms -lt $cpu_limit_ms

# ---- an export that is a bomb: discovery and view do not inflate it to its end
cp "$sample"/rank-*.trace.zst "$tmp/xbomb/"
run "$stepscope" info "$tmp/xbomb"
check "info lists the bomb export as not read to its end" \
  grep -q "trace.json.gz: .*inflates past its decompression limit" <<<"$out"
run "$stepscope" view "$tmp/xbomb" --html "$tmp/xbomb.html"
check "view regenerates the export instead of inflating the bomb (rc $rc)" \
  grep -q "export trace.json (generated)" <<<"$out"
check "in under $cpu_limit_s s of CPU ($ms ms)" test $ms -lt $cpu_limit_ms

# ---- the limits are overridable
run "$stepscope" info "$tmp/small.json.gz"
check "an 80 MiB text from 270 KB is refused by default (rc $rc)" test $rc -eq 1
run env STEPSCOPE_INFLATE_RATIO=1000 "$stepscope" info "$tmp/small.json.gz"
check "STEPSCOPE_INFLATE_RATIO=1000 lets it through (rc $rc)" test $rc -eq 0
check "and all of its $(cat "$tmp/small.count") events are read" grep -qE "kernel +$(cat "$tmp/small.count")\$" <<<"$out"
run env STEPSCOPE_INFLATE_RATIO=0 "$stepscope" info "$tmp/small.json.gz"
check "STEPSCOPE_INFLATE_RATIO=0 lifts the ratio (rc $rc)" test $rc -eq 0
run env STEPSCOPE_INFLATE_MAX=16K "$stepscope" info "$sample/rank-00000.trace.zst"
check "STEPSCOPE_INFLATE_MAX=16K refuses a real trace of 37 KB (rc $rc)" test $rc -eq 1
check "naming the ceiling and STEPSCOPE_INFLATE_MAX" \
  grep -q "decompresses to more than 16.0 KiB .*the ceiling for any compressed input.*STEPSCOPE_INFLATE_MAX=BYTES" <<<"$out"
run env STEPSCOPE_INFLATE_RATIO=lots "$stepscope" info "$sample/rank-00000.trace.zst"
check "a value that is not a number is warned about, the default used (rc $rc)" \
  grep -q "warning: STEPSCOPE_INFLATE_RATIO=lots is not a number; the default is used" <<<"$out"

# ---- real inputs are read as before
for cmd in info analyze; do
  run "$stepscope" $cmd "$sample"
  check "$cmd of the sample run (with its trace.json.gz export) succeeds (rc $rc)" test $rc -eq 0
  check "$cmd says nothing of limits" lacks "decompress\|inflates past"
done

exit $fail
