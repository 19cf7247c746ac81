#!/bin/bash
# window_evidence.sh — what window.sh brings back and how it is named; sourced by window.sh.
# Defines evidence_commit, device_short_name (the folder name of a device: "NVIDIA H200" -> h200),
# window_header, write_provenance (PROVENANCE.md of the call, from what setup found),
# window_pack (summary.txt and evidence.tgz into $RET, after every step), window_final_pack
# (traces.tgz, once; PROVENANCE.md into every sample folder) and window_result_line.
#
# Layout of a call's evidence ($EVROOT, archived relative to it, so that unpacking
# evidence.tgz and traces.tgz at the repository's root puts the folders in place):
#   samples/gpu-<dev>-window/    summary.txt, PROVENANCE.md, one log per step, window.env,
#                                versions.txt, commands.txt, build.log (if built), the runs'
#                                per-step logs
#   samples/gpu-<dev>-<what>/    one folder per traced sample (cuda-app, tiny-bf16, dp2-nccl,
#                                torch-profiler, overhead...): traces, train.jsonl, reports

# The commit this evidence is of: the kit's COMMIT file (the tree sent to the GPU machine
# has no .git), else git.
evidence_commit() {
  if [ -n "${STEPSCOPE_COMMIT:-}" ]; then echo "$STEPSCOPE_COMMIT"
  elif [ -f "$KIT/COMMIT" ]; then head -1 "$KIT/COMMIT"
  else git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown; fi
}

# device_short_name NAME: "NVIDIA H200" -> h200, "NVIDIA H100 80GB HBM3" -> h100; "none"
# without a device name (no nvidia-smi, no GPU).
device_short_name() {
  local w
  for w in ${1#NVIDIA }; do
    case "$w" in
      *[0-9]*) echo "$w" | tr 'A-Z' 'a-z' | tr -cd 'a-z0-9'; return ;;
    esac
  done
  echo none
}

# The summary's first line: what ran where.
window_header() {
  {
    echo "stepscope GPU window '$WINDOW_CALL': commit $(evidence_commit | cut -c1-12)," \
      "device ${DEVICE_NAME:-none}, started $(date -u -d "@$WINDOW_START" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null)," \
      "bound $WINDOW_LIMIT s$([ "${STEPSCOPE_DRY_RUN:-0}" = 1 ] && echo ' (dry run: commands checked, not run)')"
  } | tee -a "$WIN/summary.txt"
}

# PROVENANCE.md of the call (rewritten at every pack): the commit, the kit, the machine,
# the binaries and NCCL that setup chose, the exact command, the steps and their commands.
write_provenance() {
  (
    [ -f "$WIN/window.env" ] && source "$WIN/window.env"
    echo "# Provenance: GPU window '$WINDOW_CALL'"
    echo
    echo "- commit: $(evidence_commit)"
    echo "- kit: ${KIT} ($(sed -n 2p "$KIT/COMMIT" 2>/dev/null || echo 'no kit'))"
    echo "- tree's scripts/gpu: ${TREE_SCRIPTS:-not compared}"
    echo "- device: ${DEVICE_NAME:-none}; driver ${DRIVER:-?}; host $(hostname), $(nproc) cores"
    echo "- binaries: ${BINARIES_DESC:-not chosen (setup did not finish)}"
    echo "- NCCL: trainer ${KIT_NCCL_VERSION:+$KIT_NCCL_VERSION from }${KIT_NCCL_DIR:-?}; torch ${TORCH_NCCL:-?} (its own)"
    echo "- command: \`scripts/gpu/window.sh $WINDOW_CALL\` (bound $WINDOW_LIMIT s), started" \
      "$(date -u -d "@$WINDOW_START" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null)"
    echo
    echo "## Steps"
    echo '```'
    cat "$WIN/summary.txt" 2>/dev/null
    echo '```'
    echo
    echo "## Versions (setup)"
    echo '```'
    cat "$WIN/versions.txt" 2>/dev/null || echo "(setup did not record them)"
    echo '```'
    echo
    echo "## Commands"
    echo '```'
    cat "$WIN/commands.txt" 2>/dev/null
    echo '```'
  ) > "$WIN/PROVENANCE.md.tmp" && mv -f "$WIN/PROVENANCE.md.tmp" "$WIN/PROVENANCE.md"
}

# After every step: PROVENANCE.md, summary.txt and evidence.tgz into $RET.
window_pack() {
  write_provenance
  cp -f "$WIN/summary.txt" "$RET/summary.txt.tmp" && mv -f "$RET/summary.txt.tmp" "$RET/summary.txt"
  python3 "$repo/scripts/gpu/pack_evidence.py" evidence "$EVROOT" "$RET/evidence.tgz" > /dev/null
}

# Once, at the end: PROVENANCE.md into every sample folder, then traces.tgz (<= 15 MiB;
# what is left out is named in PACKING.txt, which evidence.tgz carries).
window_final_pack() {
  local d
  write_provenance
  for d in "$EVROOT"/samples/*/; do
    [ "${d%/}" = "$WIN" ] || cp -f "$WIN/PROVENANCE.md" "$d/PROVENANCE.md"
  done
  python3 "$repo/scripts/gpu/pack_evidence.py" traces "$EVROOT" "$RET/traces.tgz" \
    --max-mib "${TRACES_MAX_MIB:-15}" | tee -a "$WIN/packing.log"
}

# window_result_line RC SECONDS: the summary's last line.
window_result_line() {
  local s=$WIN/summary.txt
  echo "RESULT: $(grep -c '^PASS' "$s") PASS, $(grep -c '^FAIL' "$s") FAIL," \
    "$(grep -c '^SKIP' "$s") SKIP in $2 s of $WINDOW_LIMIT (exit $1)"
}
