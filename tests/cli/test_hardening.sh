#!/usr/bin/env bash
# Hostile and damaged inputs, and outputs that must neither destroy inputs
# nor lie (issue 17), as a user meets them on the command line:
#   - a rank file that is a FIFO is refused at once (trace and Kineto), no hang
#   - trace strings with terminal escapes are printed escaped by analyze/info
#   - bytes that are not UTF-8 in trace strings give valid JSON everywhere
#   - absurd trainer metadata numbers are dropped with a warning, never cast (no crash)
#   - no command writes over one of its inputs (same inode), exit 1
#   - outputs appear whole or not at all (temporary file + rename): a failed
#     write leaves the earlier file and no temporary behind
#   - text written to a full device (/dev/full) exits 1
#   - info warns about two files of the same rank instead of listing both
#   - one damaged frame costs only its own records: reading resumes at the
#     next frame, lost strings read as ?<id>, the loss is said first; a false
#     frame start running to the end of the file does not hide the frames after it
#   - a header declaring world size 2^31-1 is analysed at once
#   - times near 2^63 are clamped with a warning
#   - the report's memory section comes from the ranks that carry it
#   - diff's layout_note names what differs, never a JSON text cut midway
#   - view does not serve a cut export or an empty report found in a run: it
#     regenerates them from the rank traces
# usage: test_hardening.sh STEPSCOPE WRITE_HOSTILE_RUN SAMPLE_RUN
set -u
stepscope=$1 hostile=$2 sample=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; else echo "ok: $what"; fi
}
not_grep() { ! grep -q "$@"; }
for mode in escape badutf8 metadata stages100 frames world bigtime memory layout1 layout2; do
  "$hostile" "$mode" "$tmp/$mode" || { echo "FAIL: write_hostile_run $mode"; exit 1; }
done

# ---- FIFOs: refused, never waited on
mkdir "$tmp/fifo" "$tmp/fifok"
cp "$tmp/escape/rank-00000.trace.zst" "$tmp/fifo/"
mkfifo "$tmp/fifo/rank-00001.trace.zst" "$tmp/fifok/rank-0.json"
for cmd in info analyze export; do
  args=("$tmp/fifo"); [ $cmd = export ] && args+=(-o "$tmp/fifo.json")
  out=$(timeout 20 "$stepscope" $cmd "${args[@]}" 2>&1); rc=$?
  check "$cmd does not hang on a FIFO rank file (rc $rc)" test $rc -ne 124
  check "$cmd says the FIFO is not a regular file" grep -q "rank-00001.trace.zst: is not a regular file" <<<"$out"
done
out=$(timeout 20 "$stepscope" dump "$tmp/fifo/rank-00001.trace.zst" 2>&1); rc=$?
check "dump refuses a FIFO (rc $rc)" test $rc -eq 1
out=$(timeout 20 "$stepscope" analyze "$tmp/fifok" 2>&1); rc=$?
check "analyze does not hang on a Kineto FIFO (rc $rc)" test $rc -eq 1
check "the Kineto FIFO is named" grep -q "rank-0.json: is not a regular file" <<<"$out"
for order in ab ba; do # diff first asks whether B is a plan prediction: no blocking open
  if [ $order = ab ]; then args=("$tmp/escape" "$tmp/fifok/rank-0.json"); else args=("$tmp/fifok/rank-0.json" "$tmp/escape"); fi
  out=$(timeout 20 "$stepscope" diff "${args[@]}" 2>&1); rc=$?
  check "diff with a FIFO ($order) does not hang (rc $rc)" test $rc -ne 124 -a $rc -ne 0
done

# ---- terminal escapes in trace strings
out=$("$stepscope" analyze "$tmp/escape")
check "analyze prints ESC escaped" grep -qF 'gemm\x1b]0;pwned\x07\x1b[2J\nFAKE LINE\r\x7f\x9b31m' <<<"$out"
check "analyze prints no raw control character" \
  python3 -c 'import sys; s=sys.stdin.buffer.read(); sys.exit(any(b<32 and b not in (9,10) or b==127 or 0x80<=b<0xa0 for b in s))' <<<"$out"
check "no faked line" bash -c '! grep -q "^FAKE LINE" <<<"$1"' _ "$out"
out=$("$stepscope" info "$tmp/escape")
check "info prints the hostname escaped" grep -qF 'node\x1b]0;titl' <<<"$out"
out2=$("$stepscope" diff "$tmp/escape" "$tmp/memory" 2>&1)
check "diff prints kernel names escaped" grep -qF 'gemm\x1b]0;pwned' <<<"$out2"
check "diff prints no raw ESC" bash -c '! grep -q $'"'"'\x1b'"'"' <<<"$1"' _ "$out2"
check "info prints no raw ESC" bash -c '! grep -q $'"'"'\x1b'"'"' <<<"$1"' _ "$out"

# ---- bytes that are not UTF-8 (host name 0xff 0xfe, a cut sequence in a kernel name): every
# JSON output is valid UTF-8 and valid JSON, the bad bytes read as U+FFFD
json_ok() { # file: one JSON document, or JSON lines with --lines
  python3 -c 'import json,sys
t=open(sys.argv[1],"rb").read().decode("utf-8")
docs=t.splitlines() if len(sys.argv)>2 else [t]
v=[json.loads(d) for d in docs if d.strip()]
sys.exit(0 if "\ufffd" in t else 1)' "$@"
}
"$stepscope" info "$tmp/badutf8" --json >"$tmp/bad_info.json"
check "info --json on a host name that is not UTF-8 is valid JSON" json_ok "$tmp/bad_info.json"
"$stepscope" analyze "$tmp/badutf8" --json "$tmp/bad_report.json" >/dev/null
check "analyze --json on names that are not UTF-8 is valid JSON" json_ok "$tmp/bad_report.json"
"$stepscope" export "$tmp/badutf8" -o "$tmp/bad_export.json" >/dev/null 2>&1
check "export on names that are not UTF-8 is valid JSON" json_ok "$tmp/bad_export.json"
"$stepscope" dump "$tmp/badutf8/rank-00000.trace.zst" >"$tmp/bad_dump.jsonl"
check "dump on names that are not UTF-8 is valid JSON lines" json_ok "$tmp/bad_dump.jsonl" --lines

# ---- absurd trainer metadata (2^31 - 1 stages, 1e12 micro-batches and world, inf): no crash,
# no int cast of them; each dropped number is named in a warning
for cmd in analyze export; do
  args=("$tmp/metadata"); [ $cmd = export ] && args+=(-o "$tmp/metadata.json")
  out=$("$stepscope" $cmd "${args[@]}" 2>&1); rc=$?
  check "$cmd survives absurd metadata (rc $rc)" test $rc -eq 0
done
out=$("$stepscope" analyze "$tmp/metadata" 2>&1)
for field in schedule.stages schedule.microbatches schedule.virtual_stages \
             schedule.bubble_theory layout.world flops.world; do
  check "the warning names $field" grep -q "metadata $field = .* is outside" <<<"$out"
done
# its FLOPs (1e9 a step of 100 us on one 1e12 FLOP/s device) make an MFU of 1000 %: warned
# about, not printed
check "an MFU above 100 % is warned about" grep -q "MFU/HFU of 1000 % exceeds 100 %" <<<"$out"
check "an MFU above 100 % is not printed" not_grep "MFU [0-9.]* %" <<<"$out"
"$stepscope" analyze "$tmp/metadata" --json "$tmp/metadata_report.json" >/dev/null 2>&1
check "an MFU above 100 % is null in the JSON" python3 -c "
import json, sys; r = json.load(open(sys.argv[1])); sys.exit(r['mfu']['mfu'] is not None)
" "$tmp/metadata_report.json"
out=$("$stepscope" diff "$tmp/metadata" "$tmp/metadata" 2>&1); rc=$?
check "diff survives absurd metadata (rc $rc)" test $rc -eq 0
out=$("$stepscope" analyze "$tmp/stages100" 2>&1); rc=$?
check "analyze takes a 100-stage schedule (rc $rc; ASan: no read past the 64-stage arrays)" \
  test $rc -eq 0

# ---- never write over an input (each case on a fresh copy of the run)
fresh_own() { rm -rf "$tmp/own"; cp -r "$tmp/escape" "$tmp/own"; }
fresh_own
sum=$(md5sum <"$tmp/own/rank-00000.trace.zst")
"$stepscope" export "$tmp/own" -o "$tmp/own/rank-00000.trace.zst" 2>"$tmp/err"; rc=$?
check "export -o INPUT exits 1" test $rc -eq 1
check "export -o INPUT says why" grep -q "one of this command's inputs" "$tmp/err"
check "export -o INPUT leaves the input intact" test "$(md5sum <"$tmp/own/rank-00000.trace.zst")" = "$sum"
fresh_own
ln "$tmp/own/rank-00000.trace.zst" "$tmp/own/link.json"
"$stepscope" analyze "$tmp/own" --json "$tmp/own/link.json" >/dev/null 2>&1; rc=$?
check "analyze --json onto a hard link of an input exits 1" test $rc -eq 1
check "and the link still is the input" test "$(md5sum <"$tmp/own/link.json")" = "$sum"
fresh_own
ln -s rank-00000.trace.zst "$tmp/own/sym.json"
"$stepscope" diff "$tmp/own" "$tmp/escape" --json "$tmp/own/sym.json" >/dev/null 2>&1; rc=$?
check "diff --json onto a symlink to an input exits 1" test $rc -eq 1
check "the input is still intact" test "$(md5sum <"$tmp/own/rank-00000.trace.zst")" = "$sum"
check "and the symlink is still a symlink" test -L "$tmp/own/sym.json"

fresh_own
"$stepscope" export "$tmp/own" -o "$tmp/own/trace.json" 2>/dev/null
tsum=$(md5sum <"$tmp/own/trace.json")
"$stepscope" view "$tmp/own" --html "$tmp/own/trace.json" 2>"$tmp/err"; rc=$?
check "view --html onto the run's own export exits 1" test $rc -eq 1
check "and leaves the export intact" test "$(md5sum <"$tmp/own/trace.json")" = "$tsum"

# ---- outputs: whole or not at all
"$stepscope" export "$tmp/escape" -o "$tmp/out.json" || fail=1
good=$(md5sum <"$tmp/out.json")
(trap '' XFSZ; ulimit -f 1; "$stepscope" export "$tmp/frames" -o "$tmp/out.json" 2>"$tmp/err"); rc=$?
check "an export that cannot be written exits 1" test $rc -eq 1
check "the earlier export is kept whole" test "$(md5sum <"$tmp/out.json")" = "$good"
check "no temporary file is left behind" bash -c '! ls -A "$1" | grep -q "\.tmp-"' _ "$tmp"
(trap '' XFSZ; ulimit -f 1; "$stepscope" analyze "$tmp/frames" --json "$tmp/rep.json" >/dev/null 2>&1); rc=$?
check "a report that cannot be written exits 1 and leaves no file" \
  bash -c 'test $1 -eq 1 && test ! -e "$2"' _ $rc "$tmp/rep.json"
"$stepscope" export "$tmp/escape" -o /dev/null; rc=$?
check "export -o /dev/null still works" test $rc -eq 0
"$stepscope" analyze "$tmp/escape" --json - --quiet | python3 -c 'import json,sys; json.load(sys.stdin)'
check "analyze --json - still writes to stdout" test $? -eq 0

# ---- write errors on text output
for cmd in "info $tmp/escape" "analyze $tmp/escape" "dump $tmp/escape/rank-00000.trace.zst" \
           "diff $tmp/escape $tmp/escape"; do
  $stepscope $cmd >/dev/full 2>/dev/null; rc=$?
  check "'${cmd%% *}' > /dev/full exits 1 (rc $rc)" test $rc -eq 1
done

# ---- duplicate ranks in info
mkdir "$tmp/dup"
cp "$tmp/escape/rank-00000.trace.zst" "$tmp/dup/rank-00000.trace.zst"
cp "$tmp/escape/rank-00000.trace.zst" "$tmp/dup/rank-00001.trace.zst"
out=$("$stepscope" info "$tmp/dup")
check "info warns about a rank in two files" grep -q "rank 0 again (also in .*rank-00000.trace.zst)" <<<"$out"
check "info lists the rank once" test "$(grep -c '^0  ' <<<"$out")" -eq 1
"$stepscope" info "$tmp/dup" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["ranks"][1]["duplicate_of"].endswith("rank-00000.trace.zst"), d["ranks"][1]
assert d["totals"]["records"] == d["ranks"][0]["records"], d["totals"]'
check "info --json marks the duplicate and leaves it out of the totals" test $? -eq 0

# ---- one damaged frame in the middle
python3 - "$tmp/frames/rank-00000.trace.zst" <<'PY'
import sys
p = sys.argv[1]
d = bytearray(open(p, "rb").read())
magic = b"\x28\xb5\x2f\xfd"
offs = [i for i in range(len(d) - 3) if d[i:i + 4] == magic]
assert len(offs) in (11, 12), offs        # header frame + 10 frames of 20 kernels (+ the END frame)
a, b = offs[3], offs[4]                   # frame 3: kernels 40..59
d[(a + b) // 2] ^= 0x10                   # one bit flipped
open(p, "wb").write(d)
PY
out=$("$stepscope" analyze "$tmp/frames" --top 300 2>&1); rc=$?
check "analyze reads past the damaged frame (rc $rc)" test $rc -eq 0
check "the loss is said at the top" bash -c 'sed -n 3p <<<"$1" | grep -q "^DATA LOST: rank 0: 1 damaged part"' _ "$out"
check "kernels after the damage are kept" grep -q "kernel_199" <<<"$out"
check "kernels of the damaged frame are gone" bash -c '! grep -q "kernel_045" <<<"$1"' _ "$out"
check "a string lost with the frame reads as ?<id>" grep -Eq "  \?[0-9]+$" <<<"$out"
"$stepscope" analyze "$tmp/frames" --json - --quiet | python3 -c '
import json, sys
d = json.load(sys.stdin)
w = " ".join(d["warnings"])
assert "damaged data" in w and "records are lost" in w, d["warnings"]
n = sum(k["count"] for k in d["kernels"]["rows"])
assert n == 180, n   # 200 written, the 20 of the damaged frame lost
'
check "the JSON report counts 180 of 200 kernels and warns" test $? -eq 0
out=$("$stepscope" info "$tmp/frames")
check "info says the loss near the top" bash -c 'sed -n 2p <<<"$1" | grep -q "^DATA LOST:"' _ "$out"
check "info counts 180 kernels" grep -Eq "kernel +180" <<<"$out"
"$stepscope" export "$tmp/frames" -o "$tmp/frames.json" 2>"$tmp/err"; rc=$?
check "export succeeds on the damaged run" test $rc -eq 0
check "export is not silent about the loss" grep -q "DATA LOST: rank 0" "$tmp/err"
"$stepscope" dump "$tmp/frames/rank-00000.trace.zst" >"$tmp/dump" 2>"$tmp/err"
check "dump resumes after the damage" test "$(grep -c '"kind":"kernel"' "$tmp/dump")" -eq 180
check "dump warns about the damage" grep -q "damaged data" "$tmp/err"
both=$("$stepscope" dump "$tmp/frames/rank-00000.trace.zst" 2>&1)
w=$(grep -n "damaged data" <<<"$both" | head -1 | cut -d: -f1)
k=$(grep -n '"kind":"kernel"' <<<"$both" | tail -1 | cut -d: -f1)
check "dump says it when it happens, not after the last record ($w < $k)" test "${w:-0}" -gt 0 -a "${w:-0}" -lt "${k:-0}"
"$stepscope" diff "$tmp/frames" "$tmp/escape" >/dev/null 2>"$tmp/err"
check "diff is not silent about the loss" grep -q "DATA LOST: rank 0" "$tmp/err"
"$stepscope" view "$tmp/frames" --html "$tmp/frames.html" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "view --html writes the page of the damaged run (rc $rc)" test $rc -eq 0
check "view --html is not silent about the loss (issue 34 defect 11)" \
  grep -q "^stepscope view: frames: DATA LOST: rank 0" "$tmp/err"
check "and says it once" test "$(grep -c "DATA LOST" "$tmp/err")" -eq 1
check "the page does not carry where the run lies, only its name" not_grep -F "$tmp/" "$tmp/frames.html"
check "the page names the run's files by the run's name" grep -q '"path":"frames/rank-00000.trace.zst"' "$tmp/frames.html"

# ---- a false frame start: a frame header whose raw block runs past the end of the file
# swallowed the 7 frames after it ("truncated", 124 of 397 records, issue 34 defect 11);
# a frame magic follows its start, so it is damage and reading resumes there
"$hostile" frames "$tmp/fakestart" || { echo "FAIL: write_hostile_run frames"; exit 1; }
python3 - "$tmp/fakestart/rank-00000.trace.zst" <<'PY'
import sys
p = sys.argv[1]
d = bytearray(open(p, "rb").read())
magic = b"\x28\xb5\x2f\xfd"
offs = [i for i in range(len(d) - 3) if d[i:i + 4] == magic]
a = offs[4]                                # before frame 4 (kernels 60..79)
size = min(len(d) - a + 1000, 131071)      # one raw block, not the last, longer than the rest
d[a:a] = magic + bytes([0x04, 0x58]) + (size << 3).to_bytes(3, "little")
open(p, "wb").write(d)
PY
out=$("$stepscope" info "$tmp/fakestart" 2>&1)
check "info reads every record after a false frame start" grep -q "397 records" <<<"$out"
check "and says the false start's bytes were damage" grep -q "^DATA LOST:.*1 damaged part skipped (9 of" <<<"$out"
"$stepscope" dump "$tmp/fakestart/rank-00000.trace.zst" >"$tmp/dump" 2>"$tmp/err"
check "dump gives all 200 kernels after a false frame start" test "$(grep -c '"kind":"kernel"' "$tmp/dump")" -eq 200
check "dump names it" grep -q "runs to the end of the file" "$tmp/err"

# a skippable frame after the header whose size covers most of the file jumped over the
# frames in it (0 of 397 records, reported as 1243 bytes damaged: the hostile pass of
# issue 34); the writer writes none, so it is damage and the frames inside are read
"$hostile" frames "$tmp/skipframe" || { echo "FAIL: write_hostile_run frames"; exit 1; }
python3 - "$tmp/skipframe/rank-00000.trace.zst" <<'PY'
import struct, sys
p = sys.argv[1]
d = bytearray(open(p, "rb").read())
magic = b"\x28\xb5\x2f\xfd"
offs = [i for i in range(len(d) - 3) if d[i:i + 4] == magic]
a = offs[1]                                # right after the header frame
d[a:a] = struct.pack("<II", 0x184D2A50, len(d) - a - 400)
open(p, "wb").write(d)
PY
out=$("$stepscope" info "$tmp/skipframe" 2>&1)
check "info reads every record after a skippable frame" grep -q "397 records" <<<"$out"
check "and says its 8 bytes were damage" grep -q "^DATA LOST:.*1 damaged part skipped (8 of" <<<"$out"

# ---- world size 2^31-1 in a header
out=$(timeout 2 "$stepscope" analyze "$tmp/world" 2>&1); rc=$?  # the loop over the world took 6 s
check "analyze of a world-2^31-1 header finishes within 2 s (rc $rc)" test $rc -eq 0
check "the missing ranks are counted, the list cut" \
  grep -q "2147483646 of 2147483647 ranks have no trace file (missing: 1, 2, 3, .*, \.\.\.)" <<<"$out"

# ---- times near 2^63
out=$("$stepscope" analyze "$tmp/bigtime" 2>&1); rc=$?
check "analyze of times near 2^63 succeeds (rc $rc)" test $rc -eq 0
check "the clamped times are warned about" grep -q "beyond +-2^62 ns" <<<"$out"

# ---- memory section when rank 0 carries nothing
"$stepscope" analyze "$tmp/memory" --json - --quiet | python3 -c '
import json, sys
m = json.load(sys.stdin)["memory"]
assert m and m["predicted"]["total"] == 8000 and m["measured_peak_bytes"] == 9000, m'
check "memory comes from rank 1 when rank 0 is empty" test $? -eq 0

# ---- view and damaged outputs in the run directory
cp -r "$tmp/escape" "$tmp/viewrun"
"$stepscope" export "$tmp/viewrun" -o "$tmp/viewrun/trace.json" 2>/dev/null
head -c 100 "$tmp/viewrun/trace.json" >"$tmp/cut" && mv "$tmp/cut" "$tmp/viewrun/trace.json"
: >"$tmp/viewrun/report.json"
python3 - "$stepscope" "$tmp/viewrun" <<'PY'
import http.cookiejar, json, re, subprocess, sys, urllib.request
exe, run = sys.argv[1], sys.argv[2]
p = subprocess.Popen([exe, "view", run, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    line = p.stdout.readline()
    url = re.search(r"(http://\S+)", line).group(1)
    base = url.split("?")[0]
    op = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    op.open(url).read()                                   # token -> cookie
    runs = json.loads(op.open(base + "api/runs").read())["runs"][0]
    notes = " ".join(runs["notes"])
    assert "trace.json in the run directory does not end where a trace export ends" in notes, notes
    assert "report.json in the run directory is empty" in notes, notes
    assert "generated by `stepscope export`" in notes and "generated by `stepscope analyze`" in notes, notes
    trace = json.loads(op.open(base + runs["trace"]).read())  # whole, from the regenerated file
    assert trace["traceEvents"], "no events"
    report = json.loads(op.open(base + runs["report"]).read())
    assert "schema_version" in report
finally:
    p.terminate()
    p.wait(5)
PY
check "view regenerates a cut trace.json and an empty report.json instead of serving them" test $? -eq 0

# ---- diff's layout note
"$stepscope" diff "$tmp/layout1" "$tmp/layout2" --json - --quiet | python3 -c '
import json, sys
n = json.load(sys.stdin)["layout_note"]
assert n == "parallel layout differs (rank 0: tp 2 vs 1, pp 2 vs 4): compared on aggregates only", n'
check "diff names the layout members that differ" test $? -eq 0

exit $fail
