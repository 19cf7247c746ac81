#!/bin/bash
# kit_fails.sh STEPSCOPE SAMPLE_RUN — the window's kit handling can fail, and says what failed:
#   kit_setup.py unpack   extracts with Python's tarfile (no zstd/xz tool), reuses what a warm
#                         machine unpacked, and refuses a member that would land outside
#                         its folder;
#   kit_setup.py libs     passes a binary whose libraries resolve, and fails naming the
#                         library and the binary when one is missing (--hide, as the dry run
#                         simulates it) or when there is no binary at all;
#   pack_evidence.py      keeps traces out of evidence.tgz, and packs into traces.tgz only
#                         what fits its limit, naming the rest in PACKING.txt.
set -u
stepscope=$1; sample=$2
source "$(dirname "$0")/expect.sh"
gpu=$(dirname "$0")/../../scripts/gpu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp" <<'PY'
import io, os, sys, tarfile
t = sys.argv[1]
def add(tar, name, data=b"x"):
    info = tarfile.TarInfo(name); info.size = len(data); tar.addfile(info, io.BytesIO(data))
with tarfile.open(os.path.join(t, "good.tar.xz"), "w:xz") as tar:
    add(tar, "prebuilt/bin/tool", b"tool")
with tarfile.open(os.path.join(t, "evil.tar.gz"), "w:gz") as tar:
    add(tar, "prebuilt/ok")
    add(tar, "../outside")
PY
expect 0 python3 "$gpu/kit_setup.py" unpack "$tmp/good.tar.xz" "$tmp/un"
[ "$(cat "$tmp/un/prebuilt/bin/tool" 2>/dev/null)" = tool ] || { echo "FAILED: not unpacked"; fail=1; }
expect 0 python3 "$gpu/kit_setup.py" unpack "$tmp/good.tar.xz" "$tmp/un"
expect_output "already unpacked"
expect 1 python3 "$gpu/kit_setup.py" unpack "$tmp/evil.tar.gz" "$tmp/evil"
expect_output "lands outside"
[ -e "$tmp/outside" ] && { echo "FAILED: a member was written outside"; fail=1; }
expect 0 python3 "$gpu/kit_setup.py" libs "$stepscope"
expect_output "^1 binaries checked, 0 libraries missing"
lib=$(ldd "$stepscope" | awk '/=> \// { print $1; exit }')
expect 1 python3 "$gpu/kit_setup.py" libs "$stepscope" --hide "$lib"
expect_output "^missing $lib: hidden \(simulated\) \(needed by stepscope\)"
expect 1 python3 "$gpu/kit_setup.py" libs "$tmp/no-such-binary"
mkdir -p "$tmp/ev/samples/gpu-x-window" "$tmp/ev/samples/gpu-x-a/run" "$tmp/ev/samples/gpu-x-b/run"
echo "PASS 0_setup" > "$tmp/ev/samples/gpu-x-window/summary.txt"
cp "$sample/rank-00000.trace.zst" "$tmp/ev/samples/gpu-x-a/run/"
head -c 3000000 /dev/urandom > "$tmp/ev/samples/gpu-x-b/run/rank-00000.trace.zst"
expect 0 python3 "$gpu/pack_evidence.py" evidence "$tmp/ev" "$tmp/evidence.tgz"
python3 -c 'import sys, tarfile; n = tarfile.open(sys.argv[1]).getnames(); sys.exit(0 if "samples/gpu-x-window/summary.txt" in n and not any(x.endswith(".trace.zst") for x in n) else 1)' "$tmp/evidence.tgz" ||
  { echo "FAILED: evidence.tgz holds traces or lacks the summary"; fail=1; }
expect 0 python3 "$gpu/pack_evidence.py" traces "$tmp/ev" "$tmp/traces.tgz" --max-mib 2
expect_output "1 traces, .* 1 left out \(PACKING.txt\)"
grep -q "samples/gpu-x-b/run/rank-00000.trace.zst" "$tmp/ev/PACKING.txt" 2>/dev/null ||
  { echo "FAILED: PACKING.txt does not name the trace left out"; fail=1; }
exit $fail
