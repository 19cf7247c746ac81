#!/bin/sh
# traced_run.sh — runs stepscope-train with --trace and checks the run directory.
#
# usage: traced_run.sh TRAINER CHECKER WORLD STEPS P2P [TRAINER ARGS...]
# P2P is "--p2p" when the run has pipeline transfers, "none" otherwise.
set -u
trainer=$1 checker=$2 world=$3 steps=$4 p2p=$5
shift 5
[ "$p2p" = none ] && p2p=
dir=$(mktemp -d "${TMPDIR:-/tmp}/ss-trace.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$trainer" --backend cpu --world "$world" --steps "$steps" --quiet --trace "$dir/run" "$@" || { echo "FAIL: training failed"; exit 1; }
# shellcheck disable=SC2086
"$checker" "$dir/run" "$world" "$steps" $p2p
