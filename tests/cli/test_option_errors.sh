#!/usr/bin/env bash
# Option parsing says what is wrong, before any work (issue 34 defect 11 and its rough
# edges): an unknown option last on the line is unknown (not "needs a value"); dump --kind,
# --step-range and --steps values are checked; an option with one value given twice is
# refused; view --bind is checked before the run is read; export says -o is required, and
# the name's .pftrace/.json decides the format (gzip when .gz follows), --format may not
# contradict it; --help says what the commands read and write and how they exit.
# usage: test_option_errors.sh STEPSCOPE SAMPLE_RUN
set -u
stepscope=$1 sample=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; else echo "ok: $what"; fi
}
run() { out=$(timeout 120 "$stepscope" "$@" 2>&1); rc=$?; } # sets out, rc
says() { grep -qF -- "$1" <<<"$out"; }
trace="$sample/rank-00000.trace.zst"

# ---- an unknown option as the last word is unknown, on every command
for cmd in "analyze $sample" "export $sample -o $tmp/e.json" "diff $sample $sample" \
           "info $sample" "dump $trace" "view $sample" "plan"; do
  run $cmd --bogus
  check "${cmd%% *} ... --bogus: exit 2 (rc $rc)" test $rc -eq 2
  check "${cmd%% *} ... --bogus: an unknown option" says "unknown option"
  check "${cmd%% *} ... --bogus: not \"needs a value\"" bash -c '! grep -q "needs a value" <<<"$1"' _ "$out"
done

# ---- values that were taken in silence
run dump "$trace" --kind bogus
check "dump --kind bogus: exit 2 (rc $rc)" test $rc -eq 2
check "dump --kind bogus: says so and lists the kinds" says "unknown --kind 'bogus'; the kinds are header"
run dump "$trace" --kind host_op
check "dump --kind host_op still works (rc $rc)" test $rc -eq 0
run analyze "$sample" --step-range bogus
check "analyze --step-range bogus fails (rc $rc)" test $rc -eq 1
check "analyze --step-range bogus: says no range has that name" says "--step-range 'bogus' names no range"
for steps in 1:99999999999999999999 -1:5 +1:5 " 1:2" 3:1; do
  run analyze "$sample" --steps "$steps"
  check "analyze --steps '$steps': exit 2 (rc $rc)" test $rc -eq 2
  check "analyze --steps '$steps': says it is bad" says "bad --steps"
done
run diff "$sample" "$sample" --steps-b -1:5
check "diff --steps-b -1:5: exit 2 (rc $rc)" test $rc -eq 2
run analyze "$sample" --steps 1:2
check "analyze --steps 1:2 still works (rc $rc)" test $rc -eq 0

# ---- one value per option: a second one is refused, not taken over the first
run export "$sample" -o "$tmp/a.json" -o "$tmp/b.json"
check "export -o a -o b: exit 2 (rc $rc)" test $rc -eq 2
check "export -o a -o b: says -o is given twice" says "-o is given more than once"
check "export -o a -o b: writes neither" test ! -e "$tmp/a.json" -a ! -e "$tmp/b.json"
run analyze "$sample" --steps 1:2 --steps 3:4
check "analyze --steps twice: exit 2 (rc $rc)" test $rc -eq 2
run plan --gpus 8 --gpus 16 --global-batch 8 --model tiny
check "plan --gpus twice: exit 2 (rc $rc)" test $rc -eq 2
run analyze "$sample" --comm-kernel foo --comm-kernel bar
check "--comm-kernel stays repeatable (rc $rc)" test $rc -eq 0

# ---- view --bind is checked before the run is read (the run has only rank traces here:
# view would export and analyse it first)
mkdir "$tmp/ranks"
cp "$sample"/rank-*.trace.zst "$tmp/ranks/"
start=$(date +%s%N)
run view "$tmp/ranks" --bind 0.0.0.0.0
ms=$((($(date +%s%N) - start) / 1000000))
check "view --bind 0.0.0.0.0: exit 2 (rc $rc)" test $rc -eq 2
check "view --bind 0.0.0.0.0: says the address is bad" says "--bind 0.0.0.0.0:"
check "view --bind 0.0.0.0.0: nothing exported or analysed first" \
  bash -c '! grep -q "exporting\|analyzing" <<<"$1"' _ "$out"
echo "(view --bind 0.0.0.0.0 took $ms ms)"

# ---- export: -o required, the name decides the format
run export "$sample"
check "export without -o: exit 2 (rc $rc)" test $rc -eq 2
check "export without -o: says -o is required" says "-o FILE is required"
run export "$sample" -o "$tmp/t.pftrace.gz"
check "export -o t.pftrace.gz works (rc $rc)" test $rc -eq 0
check "t.pftrace.gz is a gzip-compressed Perfetto trace, not JSON" python3 -c '
import gzip, sys
d = gzip.open(sys.argv[1]).read()
sys.exit(0 if d[:1] == b"\n" and not d.lstrip().startswith(b"{") else 1)' "$tmp/t.pftrace.gz"
run export "$sample" -o "$tmp/t.json.gz"
check "t.json.gz is gzip-compressed JSON" python3 -c '
import gzip, json, sys
json.load(gzip.open(sys.argv[1]))' "$tmp/t.json.gz"
run export "$sample" -o "$tmp/u.json" --format perfetto
check "export -o u.json --format perfetto: exit 2 (rc $rc)" test $rc -eq 2
check "and says the name and --format disagree" says "--format perfetto does not match the name"
check "and writes nothing" test ! -e "$tmp/u.json"
run export "$sample" -o "$tmp/u.bin" --format perfetto
check "--format decides for a name that does not (rc $rc)" test $rc -eq 0

# ---- export and view share --ranks and --max-size: one declaration, the same errors (exit 2,
# before the run is read: a run that is not there is not named) and the same --help rows
for cmd in "export /nonexistent-run -o $tmp/r.json" "view /nonexistent-run --html $tmp/r.html"; do
  name=${cmd%% *}
  run $cmd --ranks 3-1
  check "$name --ranks 3-1: exit 2 (rc $rc)" test $rc -eq 2
  check "$name --ranks 3-1: says why" says "stepscope $name: bad --ranks '3-1' (want rank numbers and ranges like 0-7,12, or auto)"
  run $cmd --max-size 12Q
  check "$name --max-size 12Q: exit 2 (rc $rc)" test $rc -eq 2
  check "$name --max-size 12Q: says why" says "stepscope $name: bad --max-size '12Q' (want bytes, e.g. 500M or 4G; 0: no limit)"
  check "$name: neither reads the run first" bash -c '! grep -q nonexistent-run <<<"$1"' _ "$out"
done
limit_rows() { # the 5 lines of the --ranks and --max-size rows of a command's --help, blanks
  # squeezed (the commands indent their help texts to different columns)
  "$stepscope" "$1" --help | sed -n '/^  --ranks /,$p' | head -5 | tr -s ' '
}
check "export and view --help: the same --ranks and --max-size rows" \
  test "$(limit_rows export)" = "$(limit_rows view)"
check "... which are there" bash -c 'grep -q -- "--ranks LIST" <<<"$1" && grep -q -- "--max-size SIZE" <<<"$1"' _ "$(limit_rows view)"

# ---- --help tells the truth
run --help
check "stepscope --help: export writes Perfetto protobuf too" says "Chrome-trace JSON or a Perfetto protobuf"
check "stepscope --help: RUN may be a Kineto trace of any name" says "of any name whose"
run analyze --help
check "analyze --help names Kineto input" says "PyTorch profiler (Kineto) traces"
check "analyze --help gives the exit codes" says "Exit status: 0 done; 1"
exit $fail
