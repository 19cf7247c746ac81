#!/bin/sh
# slurm_analyze.sh — analyse a large run on a Slurm allocation, one merge at the end (issue 35
# item 3a, docs/scale.md "Partials"). Copy it next to your job script.
#
#   # map: every task analyses its block of the run's rank files into a partial
#   srun --ntasks=16 slurm_analyze.sh map /shared/run /shared/parts [analyze options]
#   # reduce: once srun has returned, one merge of every part
#   slurm_analyze.sh merge /shared/parts --json report.json [merge options]
#
# map: task $SLURM_PROCID of $SLURM_NTASKS runs `stepscope analyze RUN --part K/N --partial
# PARTS/part-K-of-N.ssp` (written under a temporary name and renamed when complete, so a
# part that exists is whole). The blocks are the run's rank files in name order, cut into N
# contiguous blocks: give each node the ranks it holds by running one task per node with
# the files laid out by rank. Give the analysis options (--comm-kernel ...) to both steps.
# merge: checks that PARTS holds every part of one cut (part-0-of-N .. part-(N-1)-of-N, one
# N), then runs `stepscope merge [options] PARTS...`: the report of `stepscope analyze RUN
# --low-memory`, byte for byte. The merge reads the rank files again (its per-rank passes),
# so RUN must be on storage the merging node sees at the same path.
# $STEPSCOPE names the stepscope binary (default: stepscope on PATH).
# Exit status: stepscope's, or 2 for a usage error (no Slurm task, a part missing).
set -eu
stepscope=${STEPSCOPE:-stepscope}
usage() {
  echo "usage: $0 map RUN PARTS_DIR [analyze options]  (under srun)" >&2
  echo "       $0 merge PARTS_DIR [merge options]" >&2
  exit 2
}
[ $# -ge 2 ] || usage
step=$1
shift
case $step in
map)
  [ $# -ge 2 ] || usage
  run=$1 parts=$2
  shift 2
  if [ -z "${SLURM_PROCID:-}" ] || [ -z "${SLURM_NTASKS:-}" ]; then
    echo "$0: map runs as a Slurm task (srun): SLURM_PROCID and SLURM_NTASKS are not set" >&2
    exit 2
  fi
  mkdir -p "$parts"
  exec "$stepscope" analyze "$run" --part "$SLURM_PROCID/$SLURM_NTASKS" \
    --partial "$parts/part-$SLURM_PROCID-of-$SLURM_NTASKS.ssp" "$@"
  ;;
merge)
  parts=$1
  shift
  n=
  for f in "$parts"/part-*-of-*.ssp; do
    [ -e "$f" ] || break
    this=${f##*-of-}
    this=${this%.ssp}
    if [ -n "$n" ] && [ "$this" != "$n" ]; then
      echo "$0: $parts holds parts of cuts into $n and $this parts: remove the old ones" >&2
      exit 2
    fi
    n=$this
  done
  if [ -z "$n" ]; then
    echo "$0: no part-K-of-N.ssp in $parts (did the map step run?)" >&2
    exit 2
  fi
  set -- "$@" --
  k=0
  while [ "$k" -lt "$n" ]; do
    f="$parts/part-$k-of-$n.ssp"
    if [ ! -e "$f" ]; then
      echo "$0: $f is missing: task $k of the map step failed or has not finished" >&2
      exit 2
    fi
    set -- "$@" "$f"
    k=$((k + 1))
  done
  # the options given, "--", then the partials
  exec "$stepscope" merge "$@"
  ;;
*) usage ;;
esac
