#!/bin/sh
# slurm_analyze.sh — analyse a large run on a Slurm allocation, one merge at the end (issue 35
# item 3a, docs/scale.md "Partials", "A second map round"). Copy it next to your job script.
#
#   # map: every task analyses its block of the run's rank files into a partial
#   srun --ntasks=16 slurm_analyze.sh map /shared/run /shared/parts [analyze options]
#   # a run with pipelines (optional, saves the merge reading every pipeline rank's file):
#   slurm_analyze.sh cross /shared/parts [merge options]
#   srun --ntasks=16 slurm_analyze.sh map2 /shared/run /shared/parts [analyze options]
#   # reduce: once srun has returned, one merge of every part
#   slurm_analyze.sh merge /shared/parts --json report.json [merge options]
#
# map: task $SLURM_PROCID of $SLURM_NTASKS runs `stepscope analyze RUN --part K/N --partial
# PARTS/part-K-of-N.ssp` (written under a temporary name and renamed when complete, so a
# part that exists is whole). The blocks are the run's rank files in name order, cut into N
# contiguous blocks: give each node the ranks it holds by running one task per node with
# the files laid out by rank. Give the analysis options (--comm-kernel ...) to every step.
# cross: one process, after the map: `stepscope merge PARTS... --cross-out PARTS/cross`, the
# cross-rank inputs of each part's pipeline ranks (reads no rank file; removes an older
# PARTS/round2). map2: the second map round, with the same tasks: `stepscope analyze RUN --part
# K/N --partial PARTS/round2/part-K-of-N.ssp --cross PARTS/cross/cross-K-of-N.ssx`.
# merge: checks that PARTS/round2 (when it exists and no partial in PARTS is newer: a map step
# run again makes it stale, and the merge then says so and takes PARTS; else PARTS) holds every
# part of one cut (part-0-of-N .. part-(N-1)-of-N, one N), then runs `stepscope merge [options]
# PARTS...`: the report of `stepscope analyze RUN`, byte for byte. The merge reads some rank
# files again (docs/scale.md "What the merge still reads": every pipeline rank's without the
# second round), so RUN must be on storage the merging node sees at the same path.
# $STEPSCOPE names the stepscope binary (default: stepscope on PATH).
# Exit status: stepscope's, or 2 for a usage error (no Slurm task, a part missing).
set -eu
stepscope=${STEPSCOPE:-stepscope}
usage() {
  echo "usage: $0 map RUN PARTS_DIR [analyze options]  (under srun)" >&2
  echo "       $0 cross PARTS_DIR [merge options]" >&2
  echo "       $0 map2 RUN PARTS_DIR [analyze options]  (under srun, after cross)" >&2
  echo "       $0 merge PARTS_DIR [merge options]" >&2
  exit 2
}

# The task's part of the run into OUT_DIR/part-K-of-N.ssp; the rest is given to analyze.
map_part() {
  run=$1 out=$2
  shift 2
  if [ -z "${SLURM_PROCID:-}" ] || [ -z "${SLURM_NTASKS:-}" ]; then
    echo "$0: map runs as a Slurm task (srun): SLURM_PROCID and SLURM_NTASKS are not set" >&2
    exit 2
  fi
  mkdir -p "$out"
  exec "$stepscope" analyze "$run" --part "$SLURM_PROCID/$SLURM_NTASKS" \
    --partial "$out/part-$SLURM_PROCID-of-$SLURM_NTASKS.ssp" "$@"
}

# The number of parts N of the one cut in directory $1 (part-K-of-N.ssp, every K there): in n.
parts_of_cut() {
  n=
  for f in "$1"/part-*-of-*.ssp; do
    [ -e "$f" ] || break
    this=${f##*-of-}
    this=${this%.ssp}
    if [ -n "$n" ] && [ "$this" != "$n" ]; then
      echo "$0: $1 holds parts of cuts into $n and $this parts: remove the old ones" >&2
      exit 2
    fi
    n=$this
  done
  if [ -z "$n" ]; then
    echo "$0: no part-K-of-N.ssp in $1 (did the map step run?)" >&2
    exit 2
  fi
  k=0
  while [ "$k" -lt "$n" ]; do
    if [ ! -e "$1/part-$k-of-$n.ssp" ]; then
      echo "$0: $1/part-$k-of-$n.ssp is missing: task $k of the map step failed or has not finished" >&2
      exit 2
    fi
    k=$((k + 1))
  done
}

[ $# -ge 2 ] || usage
step=$1
shift
case $step in
map)
  [ $# -ge 2 ] || usage
  map_part "$@"
  ;;
map2)
  [ $# -ge 2 ] || usage
  run=$1 parts=$2
  shift 2
  cross="$parts/cross/cross-${SLURM_PROCID:-}-of-${SLURM_NTASKS:-}.ssx"
  if [ -n "${SLURM_PROCID:-}" ] && [ ! -e "$cross" ]; then
    echo "$0: $cross is missing: run '$0 cross $parts' after the map step" >&2
    exit 2
  fi
  map_part "$run" "$parts/round2" --cross "$cross" "$@"
  ;;
cross | merge)
  parts=$1
  shift
  if [ "$step" = merge ] && [ -d "$parts/round2" ]; then
    # a map step run after map2 (a partial newer than round2's last one) makes round2 stale
    if [ -n "$(find "$parts"/part-*-of-*.ssp -newer "$parts/round2" 2>/dev/null)" ]; then
      echo "$0: $parts/round2 is older than the map step's partials (the map step ran again):" \
        "merging $parts; run cross and map2 again for the second round" >&2
    else
      parts="$parts/round2"
    fi
  fi
  parts_of_cut "$parts"
  set -- "$@" --
  k=0
  while [ "$k" -lt "$n" ]; do
    set -- "$@" "$parts/part-$k-of-$n.ssp"
    k=$((k + 1))
  done
  if [ "$step" = cross ]; then
    rm -rf "$parts/round2"
    # the options given, "--cross-out DIR", "--", then the partials
    exec "$stepscope" merge --cross-out "$parts/cross" "$@"
  fi
  # the options given, "--", then the partials
  exec "$stepscope" merge "$@"
  ;;
*) usage ;;
esac
