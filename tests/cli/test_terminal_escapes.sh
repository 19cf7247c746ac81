#!/usr/bin/env bash
# Nothing a user or a trace hands to stepscope reaches the terminal raw (issue 34 defect
# 10): arguments echoed in error messages by every command, the run directory's name that
# `view` prints, paths in `record`'s summary, and the JSON lines of `dump` and `info --json`
# carry no control character (C0 but tab and newline, DEL, C1 U+0080..U+009F): they are
# escaped. `dump` writes null for a NaN or infinite counter, never "-nan" (not JSON).
# The trainer's argument errors too (common/text_escape.c, shared with the analyzer).
# usage: test_terminal_escapes.sh STEPSCOPE WRITE_HOSTILE_RUN SAMPLE_RUN [STEPSCOPE_TRAIN]
set -u
stepscope=$1 hostile=$2 sample=$3 train=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; else echo "ok: $what"; fi
}
# no control character but tab and newline: C0, DEL, C1 as UTF-8 or as a lone byte
clean() {
  python3 -c 'import sys
t = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
bad = [c for c in t if (ord(c) < 32 and c not in "\t\n") or 0x7f <= ord(c) < 0xa0
       or 0xdc80 <= ord(c) < 0xdca0]
sys.exit(1 if bad else 0)'
}
esc=$'\e]0;pwned\a\e[2J\rFAKE'   # C0: set the title, clear the screen, rewrite the line
c1=$'\xc2\x9b2J\xc2\x9d0;pwned'  # C1 as UTF-8: CSI, OSC
"$hostile" c1nan "$tmp/c1nan" || { echo "FAIL: write_hostile_run c1nan"; exit 1; }
run="$tmp/run"
cp -r "$sample" "$run"

# ---- every command, bad arguments: the message says what was wrong, escaped
try() { # what the command echoes, args...
  local what=$1; shift
  out=$(timeout 60 "$stepscope" "$@" 2>&1 </dev/null); rc=$?
  check "$what: exit status $rc is an error" test $rc -ne 0 -a $rc -ne 124
  check "$what: nothing raw on the terminal" clean <<<"$out"
  check "$what: the argument is shown escaped ($shown)" grep -qF "$shown" <<<"$out"
}
for bad in "$esc" "$c1"; do
  if [ "$bad" = "$esc" ]; then shown='\x1b]0;pwned\x07'; else shown='\x9b2J\x9d0;pwned'; fi
  try "unknown command" "x$bad"
  try "info, a missing run" info "$tmp/x$bad"
  try "info, an unknown option" info "--x$bad"
  try "analyze, a missing run" analyze "$tmp/x$bad"
  try "analyze --top" analyze "$run" --top "$bad"
  try "analyze --steps" analyze "$run" --steps "$bad"
  try "analyze --rank" analyze "$run" --rank "$bad"
  try "analyze --comm-kernel" analyze "$run" --comm-kernel "($bad"
  try "export --format" export "$run" -o "$tmp/o.json" --format "$bad"
  try "export -o into a missing directory" export "$run" -o "$tmp/no$bad/o.json"
  try "diff --fail-on" diff "$run" "$run" --fail-on "$bad"
  try "diff, a missing run" diff "$run" "$tmp/x$bad"
  try "dump, a missing file" dump "$tmp/x$bad"
  try "view, a missing run" view "$tmp/x$bad"
  try "view --port" view "$run" --port "$bad"
  try "plan --gpus" plan --gpus "$bad"
  try "plan --model" plan --model "$bad" --gpus 8 --global-batch 8
  try "record --inject-lib" record --inject-lib "$tmp/x$bad" -o "$tmp/rec" -- true
done

# ---- the run directory's name, as view prints it (--html and the server's first lines)
named="$tmp/run$esc"
cp -r "$sample" "$named"
out=$(timeout 120 "$stepscope" view "$named" --html "$tmp/page.html" 2>&1); rc=$?
check "view --html of a run named with escapes works (rc $rc)" test $rc -eq 0
check "view --html prints nothing raw" clean <<<"$out"
python3 - "$stepscope" "$named" >"$tmp/served" 2>&1 <<'PY'
import subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "view", sys.argv[2], "--port", "0"], stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT)
try:
    out = b""
    deadline = time.time() + 120
    while b"Ctrl+C" not in out and time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        out += line
    sys.stdout.buffer.write(out)
finally:
    p.terminate()
    p.wait(10)
PY
check "view serves a run named with escapes" grep -q "serving" "$tmp/served"
check "view's start-up lines print nothing raw" clean <"$tmp/served"
check "and name the run escaped" grep -qF 'run\x1b]0;pwned\x07' "$tmp/served"

# ---- record's summary names the run directory (`true` writes no trace: "no trace was written")
: >"$tmp/inject.so"
out=$(timeout 60 "$stepscope" record -o "$tmp/rec$esc" --inject-lib "$tmp/inject.so" -- true 2>&1)
check "record says where no trace was written" grep -q "no trace was written to" <<<"$out"
check "record's summary prints nothing raw" clean <<<"$out"

# ---- trace text in JSON lines: C1 controls and DEL escaped, NaN and infinity as null
"$stepscope" dump "$tmp/c1nan/rank-00000.trace.zst" >"$tmp/dump" 2>&1
check "dump prints no raw C1 control or DEL" clean <"$tmp/dump"
check "dump escapes U+009B as \\u009b" grep -qF 'gemm\u009b2J\u007f\u009b31m' "$tmp/dump"
check "dump writes null for NaN and -inf, never -nan" bash -c \
  '! grep -q "nan\|inf" "$1" && test "$(grep -c "\"value\":null" "$1")" -eq 2' _ "$tmp/dump"
check "every dump line is JSON" python3 -c 'import json,sys
[json.loads(l) for l in open(sys.argv[1])]' "$tmp/dump"
"$stepscope" info "$tmp/c1nan" --json >"$tmp/info.json" 2>&1
check "info --json prints no raw C1 control" clean <"$tmp/info.json"

# ---- the trainer echoes bad arguments terminal-safe (issue 34 rough edges: it wrote them raw)
if [ -n "$train" ]; then
  n=0
  for args in "--world|$esc" "--bogus$esc|" "--schedule|$c1" "--lr|x$esc" "$esc|"; do
    opt=${args%%|*} val=${args#*|}
    if [ -n "$val" ]; then "$train" "$opt" "$val" >"$tmp/train.out" 2>&1; rc=$?
    else "$train" "$opt" >"$tmp/train.out" 2>&1; rc=$?; fi
    n=$((n + 1))
    check "stepscope-train, bad argument $n: usage error 2 (rc $rc)" test $rc -eq 2
    check "stepscope-train, bad argument $n: no control character reaches the terminal" clean <"$tmp/train.out"
    check "stepscope-train, bad argument $n: the argument is shown escaped" grep -q 'x1b\|x9b' "$tmp/train.out"
  done
  RANK=0 WORLD_SIZE="2$esc" "$train" --world 1 >"$tmp/train.out" 2>&1
  check "stepscope-train: WORLD_SIZE from the environment is shown escaped too" clean <"$tmp/train.out"
else
  echo "skip: no stepscope-train"
fi
exit $fail
