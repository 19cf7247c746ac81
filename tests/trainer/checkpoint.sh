#!/bin/sh
# checkpoint.sh — checkpoint and resume tests of stepscope-train (CPU backend).
#
# usage: checkpoint.sh TRAINER MODE "GRID ARGS" [MODE ARGS...]
#
#   resume     a run preempted after step 3 (its rank 0 killed at the start of
#              step 3, after the checkpoint of 3 steps) and resumed must log the
#              same loss and gradient norm for steps 3..5, to the last printed
#              digit, as an uninterrupted run; and both runs' shards of steps 3
#              and 6 must be byte-identical (bitwise equal parameters and AdamW
#              state).
#   die POINT RANK
#              RANK is SIGKILLed while writing the checkpoint of step 4 (POINT:
#              shard = halfway through its shard, manifest = before rank 0
#              renames the manifest into place). The run must fail, step 4 must
#              be incomplete, step 2 complete and intact; resuming continues from
#              step 2 with the uninterrupted run's losses and final shards.
#              POINT prune (RANK 0, --checkpoint-keep 1): rank 0 dies removing step
#              2 once step 4 is complete: step 2 must have lost its manifest first,
#              and resuming continues from step 4.
#   corrupt    a flipped byte in a shard, a truncated shard and a damaged manifest
#              are each rejected with a message naming the file.
#   incompatible
#              --resume with a different --tp, --zero, --hidden or --seed (and,
#              under --zero 2/3, --bucket-mb; interleaved, --virtual-stages) is
#              rejected (exit 2) naming the option; --resume without a complete
#              checkpoint and a fresh run into a directory holding checkpoints
#              are rejected too.
#   unwritable a rank that cannot write its shard stops every rank, naming the file.
#   keep       --checkpoint-every 1 --checkpoint-keep 2 leaves only the newest two.
set -u
trainer=$1 mode=$2 grid=$3
shift 3
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-ckpt.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
common="--backend cpu --model tiny --layers 4 --hidden 32 --heads 4 --seq 16 --batch 8 --steps 6 --seed 7 --quiet --watchdog-s 30"

fail() { echo "FAIL: $*"; exit 1; }

# run NAME ARGS...: runs the trainer with the common options and the grid; output in $dir/NAME.out.
# (A trainer killed by SIGKILL leaves no shared segment: it has no name, trainer/launcher.c.)
run() {
  name=$1
  shift
  # shellcheck disable=SC2086
  "$trainer" $common $grid "$@" >"$dir/$name.out" 2>&1
}

# "step loss grad_norm" per logged step, as printed
curve() { sed -n 's/.*"step":\([0-9]*\),"loss":\([^,]*\),.*"grad_norm":\([^,]*\),.*/\1 \2 \3/p' "$1"; }

complete() { [ -f "$1/manifest.json" ]; }

# same_shards A B: every shard of step directory A equals B's, byte for byte
same_shards() {
  n=0
  for f in "$1"/rank-*.ckpt; do
    [ -f "$f" ] || fail "no shards in $1"
    cmp -s "$f" "$2/$(basename "$f")" || fail "$f differs from $2/$(basename "$f")"
    n=$((n + 1))
  done
  echo "  $n shard(s) of $(basename "$1") byte-identical"
}

# compare_from FIRST REF.jsonl CAND.jsonl: steps FIRST.. of REF equal CAND exactly
compare_from() {
  curve "$2" | awk -v f="$1" '$1 >= f' >"$dir/ref.curve"
  curve "$3" >"$dir/cand.curve"
  [ -s "$dir/cand.curve" ] || fail "the resumed run logged nothing"
  head -1 "$dir/cand.curve" | grep -q "^$1 " || fail "the resumed run did not start at step $1"
  paste "$dir/ref.curve" "$dir/cand.curve"
  cmp -s "$dir/ref.curve" "$dir/cand.curve" || fail "resumed losses differ from the uninterrupted run"
}

# reference: an uninterrupted run with checkpoints every $1 steps
reference() {
  run ref --checkpoint-dir "$dir/ref" --checkpoint-every "$1" --checkpoint-keep 10 --log "$dir/ref.jsonl" ||
    { cat "$dir/ref.out"; fail "reference run failed"; }
}

case $mode in
resume)
  reference 3
  run cut --checkpoint-dir "$dir/cut" --checkpoint-every 3 --debug-die-rank 0 --debug-die-step 3 &&
    fail "the preempted run did not fail"
  complete "$dir/cut/step-00000003" || fail "no complete checkpoint of step 3 before the preemption"
  [ -d "$dir/cut/step-00000006" ] && fail "the preempted run got to step 6"
  run resumed --checkpoint-dir "$dir/cut" --checkpoint-every 3 --resume --log "$dir/resumed.jsonl" ||
    { cat "$dir/resumed.out"; fail "resumed run failed"; }
  compare_from 3 "$dir/ref.jsonl" "$dir/resumed.jsonl"
  same_shards "$dir/ref/step-00000003" "$dir/cut/step-00000003"
  same_shards "$dir/ref/step-00000006" "$dir/cut/step-00000006"
  ;;
die)
  point=$1 rank=$2
  reference 2
  if [ "$point" = prune ]; then
    # keep 1: the checkpoint of step 4 is complete, then rank 0 dies removing step 2's
    run cut --checkpoint-dir "$dir/cut" --checkpoint-every 2 --checkpoint-keep 1 \
      --debug-die-in-checkpoint "4:0:prune" && fail "the run killed while pruning did not fail"
    complete "$dir/cut/step-00000004" || fail "the new checkpoint (step 4) is not complete"
    complete "$dir/cut/step-00000002" && fail "step 2's manifest was not removed first"
    ls "$dir/cut/step-00000002" | sed 's/^/  left in step-00000002: /'
    same_shards "$dir/ref/step-00000004" "$dir/cut/step-00000004"
    run resumed --checkpoint-dir "$dir/cut" --checkpoint-every 2 --checkpoint-keep 1 --resume \
      --log "$dir/resumed.jsonl" || { cat "$dir/resumed.out"; fail "resuming after the crash failed"; }
    compare_from 4 "$dir/ref.jsonl" "$dir/resumed.jsonl"
    same_shards "$dir/ref/step-00000006" "$dir/cut/step-00000006"
    left=$(ls "$dir/cut" | tr '\n' ' ')
    [ "$left" = "step-00000006 " ] || fail "left after pruning: $left"
    echo "OK: checkpoint die prune [$grid]"
    exit 0
  fi
  run cut --checkpoint-dir "$dir/cut" --checkpoint-every 2 --debug-die-in-checkpoint "4:$rank:$point" &&
    fail "the run killed in its checkpoint did not fail"
  case " $grid " in
  *" --world "*) # the built-in launcher names the rank
    grep -q "rank $rank .*killed by signal 9" "$dir/cut.out" || { cat "$dir/cut.out"; fail "rank $rank was not reported killed"; } ;;
  esac
  complete "$dir/cut/step-00000002" || fail "the previous checkpoint (step 2) is not complete"
  complete "$dir/cut/step-00000004" && fail "the interrupted checkpoint (step 4) looks complete"
  ls "$dir/cut/step-00000004" | sed 's/^/  left in step-00000004: /'
  same_shards "$dir/ref/step-00000002" "$dir/cut/step-00000002"
  run resumed --checkpoint-dir "$dir/cut" --checkpoint-every 2 --resume --log "$dir/resumed.jsonl" ||
    { cat "$dir/resumed.out"; fail "resuming after the crash failed"; }
  compare_from 2 "$dir/ref.jsonl" "$dir/resumed.jsonl"
  same_shards "$dir/ref/step-00000006" "$dir/cut/step-00000006"
  [ -e "$dir/cut/step-00000002" ] && fail "step 2 was not pruned (keep 2: steps 4 and 6)"
  complete "$dir/cut/step-00000004" || fail "the rewritten checkpoint of step 4 is incomplete"
  ;;
corrupt)
  reference 3
  last=$dir/ref/step-00000006
  victim=$(ls "$last"/rank-*.ckpt | tail -1)
  vname=$(basename "$victim")
  cp "$victim" "$dir/saved.ckpt"
  # flip one byte in the middle of the data
  size=$(wc -c <"$victim")
  off=$((size / 2))
  byte=$(od -An -tu1 -j "$off" -N1 "$victim" | tr -d ' ')
  printf "$(printf '\\%03o' $(((byte + 1) % 256)))" | dd of="$victim" bs=1 seek="$off" conv=notrunc 2>/dev/null
  cmp -s "$victim" "$dir/saved.ckpt" && fail "the byte was not flipped"
  run flipped --checkpoint-dir "$dir/ref" --resume && fail "a corrupted shard was accepted"
  cat "$dir/flipped.out"
  grep -q "$vname is corrupted" "$dir/flipped.out" || fail "the message does not name $vname as corrupted"
  # truncated
  head -c $((size - 4)) "$dir/saved.ckpt" >"$victim"
  run truncated --checkpoint-dir "$dir/ref" --resume && fail "a truncated shard was accepted"
  cat "$dir/truncated.out"
  grep -q "$vname is $((size - 4)) bytes, but the manifest says $size" "$dir/truncated.out" ||
    fail "the message does not name the truncated $vname"
  # intact again: resuming at step 6 of 6 works (nothing left to do)
  cp "$dir/saved.ckpt" "$victim"
  run intact --checkpoint-dir "$dir/ref" --resume || { cat "$dir/intact.out"; fail "the repaired checkpoint was rejected"; }
  # damaged manifest: configuration error naming it
  sed 's/"world":\([0-9]*\)/"world":x/' "$last/manifest.json" >"$dir/m.json" && cp "$dir/m.json" "$last/manifest.json"
  run manifest --checkpoint-dir "$dir/ref" --resume
  st=$?
  cat "$dir/manifest.out"
  [ "$st" -eq 2 ] || fail "a damaged manifest gave exit status $st, expected 2"
  grep -q "step-00000006/manifest.json: malformed" "$dir/manifest.out" || fail "the message does not name the manifest"
  ;;
incompatible)
  # the saved run: DP2 with ZeRO-1 (the grid argument is ignored)
  common="$common --world 2"
  grid="--dp 2 --zero 1"
  run saved --checkpoint-dir "$dir/c" --checkpoint-every 3 || { cat "$dir/saved.out"; fail "saving run failed"; }
  expect() { # expect REGEX ARGS...: exit 2 with REGEX on stderr
    regex=$1
    shift
    # shellcheck disable=SC2086
    timeout 120 "$trainer" $common "$@" >"$dir/x.out" 2>&1
    st=$?
    cat "$dir/x.out"
    [ "$st" -eq 2 ] || fail "exit status $st, expected 2, for: $*"
    grep -Eq -- "$regex" "$dir/x.out" || fail "stderr does not match /$regex/ for: $*"
  }
  expect "--tp 2 differs from the checkpoint's 1" --tp 2 --checkpoint-dir "$dir/c" --resume
  expect "--zero 0 differs from the checkpoint's 1" --dp 2 --zero 0 --checkpoint-dir "$dir/c" --resume
  expect "--hidden 64 differs from the checkpoint's 32" --dp 2 --zero 1 --hidden 64 --checkpoint-dir "$dir/c" --resume
  expect "--seed 8 differs from the checkpoint's 7" --dp 2 --zero 1 --seed 8 --checkpoint-dir "$dir/c" --resume
  expect "--resume: no complete checkpoint" --dp 2 --zero 1 --checkpoint-dir "$dir/empty" --resume
  expect "already holds checkpoints \(latest: step 6\)" --dp 2 --zero 1 --checkpoint-dir "$dir/c"
  expect "--resume and --checkpoint-every need --checkpoint-dir" --dp 2 --resume
  expect "--experts 4 differs from the checkpoint's 0" --dp 2 --zero 1 --experts 4 --checkpoint-dir "$dir/c" --resume
  # --vocab is known only once the data is read: checked when loading (exit 1, naming it)
  timeout 120 "$trainer" $common --dp 2 --zero 1 --vocab 300 --checkpoint-dir "$dir/c" --resume >"$dir/v.out" 2>&1
  st=$?
  cat "$dir/v.out"
  [ "$st" -eq 2 ] || [ "$st" -eq 1 ] || fail "--vocab 300: exit status $st"
  grep -q -- "--vocab 300 differs from the checkpoint's 256" "$dir/v.out" || fail "--vocab not named"
  # ZeRO-2/3 shards are cut bucket by bucket: a different --bucket-mb is refused (ZeRO-1 allows it)
  run saved2 --dp 2 --zero 2 --bucket-mb 0.01 --checkpoint-dir "$dir/z2" --checkpoint-every 3 ||
    { cat "$dir/saved2.out"; fail "saving ZeRO-2 run failed"; }
  expect "--bucket-mb 0.02 differs from the checkpoint's 0.01" --dp 2 --zero 2 --bucket-mb 0.02 --checkpoint-dir "$dir/z2" --resume
  expect "--zero 3 differs from the checkpoint's 2" --dp 2 --zero 3 --bucket-mb 0.01 --checkpoint-dir "$dir/z2" --resume
  # an interleaved rank's shard holds V model chunks: a different --virtual-stages is refused
  grid=""
  run saved3 --pp 2 --schedule interleaved --microbatches 4 --checkpoint-dir "$dir/v2" --checkpoint-every 3 ||
    { cat "$dir/saved3.out"; fail "saving the interleaved run failed"; }
  expect "--virtual-stages 1 differs from the checkpoint's 2" --pp 2 --schedule 1f1b --microbatches 4 --checkpoint-dir "$dir/v2" --resume
  ;;
unwritable)
  # rank 1 cannot create its shard (a directory is in the way): every rank stops, the
  # message names the file, and the checkpoint of step 2 never becomes complete
  mkdir -p "$dir/u/step-00000002/rank-00001.ckpt.tmp"
  run unwritable --checkpoint-dir "$dir/u" --checkpoint-every 2 --log "$dir/u.jsonl" && fail "a failed checkpoint write did not stop the run"
  cat "$dir/unwritable.out"
  grep -q "cannot create .*step-00000002/rank-00001.ckpt.tmp" "$dir/unwritable.out" || fail "the message does not name the shard"
  complete "$dir/u/step-00000002" && fail "the failed checkpoint is marked complete"
  [ "$(curve "$dir/u.jsonl" | wc -l)" -eq 2 ] || fail "training went on after the failed checkpoint of step 2"
  ;;
keep)
  run keep --checkpoint-dir "$dir/k" --checkpoint-every 1 --checkpoint-keep 2 || { cat "$dir/keep.out"; fail "run failed"; }
  left=$(ls "$dir/k" | tr '\n' ' ')
  [ "$left" = "step-00000005 step-00000006 " ] || fail "left: $left (expected steps 5 and 6)"
  complete "$dir/k/step-00000005" && complete "$dir/k/step-00000006" || fail "kept checkpoints incomplete"
  ls "$dir/k/step-00000006" | grep -q '\.tmp$' && fail "a .tmp file was left behind"
  echo "  left: $left"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
echo "OK: checkpoint $mode [$grid]"
