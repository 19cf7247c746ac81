#!/bin/sh
# test_export_replay.sh — `stepscope export --replay [--what-if EDIT]` (issue 32): the replayed
# ops as a process per rank beside the measured ones, in both formats.
#   - JSON, plain replay: a "replay (rank R)" process per rank, the measured ops lane by lane
#     with their measured durations (compute), none moved by more than 5 % of the rank's span
#     (check_replay_tracks.py);
#   - JSON, --what-if 'kind=compute:scale=0.5': "replay: kind=compute:scale=0.5 (rank R)",
#     every compute op half as long, no rank's last op later;
#   - .pftrace: the same processes are described, and the file has one slice more per op and
#     rank than without --replay (export.formats decodes it against the JSON with Perfetto's
#     proto when PyPI is reachable);
#   - a bad edit is a usage error (exit 2).
#
# usage: test_export_replay.sh STEPSCOPE PYTHON3 RUN
set -u
stepscope=$1 py=$2 run=$3
here=$(dirname "$0")
d=$(mktemp -d "${TMPDIR:-/tmp}/ss-export-replay.XXXXXX") || exit 1
trap 'rm -rf "$d"' EXIT
edit='kind=compute:scale=0.5'
"$stepscope" export "$run" -o "$d/plain.json" --replay >/dev/null 2>&1 &&
  "$stepscope" export "$run" -o "$d/edit.json" --what-if "$edit" >/dev/null 2>&1 ||
  { echo "FAIL: export --replay"; exit 1; }
"$py" "$here/check_replay_tracks.py" "$d/plain.json" replay 1 || exit 1
"$py" "$here/check_replay_tracks.py" "$d/edit.json" "replay: $edit" 0.5 || exit 1
# .pftrace: the processes are there, and the slices: as many more as the run has ops
"$stepscope" export "$run" -o "$d/none.pftrace" >"$d/none.txt" 2>&1 &&
  "$stepscope" export "$run" -o "$d/edit.pftrace" --what-if "$edit" >"$d/edit.txt" 2>&1 ||
  { echo "FAIL: export .pftrace"; exit 1; }
grep -q "replay: $edit (rank 0)" "$d/edit.pftrace" ||
  { echo "FAIL: no 'replay: $edit (rank 0)' process in the .pftrace"; exit 1; }
"$py" - "$d/none.pftrace" "$d/edit.pftrace" "$d/edit.json" <<'PY' || exit 1
import json, sys

def slice_begins(path):  # TracePacket(1) > TrackEvent(11) > type(9) = 1, counted by hand
    raw, i, n = open(path, "rb").read(), 0, 0
    def varint(b, i):
        v = s = 0
        while True:
            c = b[i]; i += 1; v |= (c & 0x7F) << s; s += 7
            if not c & 0x80:
                return v, i
    def fields(b):
        i = 0
        while i < len(b):
            k, i = varint(b, i)
            wt = k & 7
            if wt == 0:
                v, i = varint(b, i)
            elif wt == 2:
                ln, i = varint(b, i); v = b[i:i + ln]; i += ln
            elif wt == 1:
                v = b[i:i + 8]; i += 8
            elif wt == 5:
                v = b[i:i + 4]; i += 4
            else:
                raise SystemExit(f"FAIL: wire type {wt} in {path}")
            yield k >> 3, v
    for f, pkt in fields(raw):
        for g, te in fields(pkt):
            if g == 11 and any(h == 9 and v == 1 for h, v in fields(te)):
                n += 1
    return n

ev = json.load(open(sys.argv[3]))["traceEvents"]
replay_pids = {e["pid"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"
               and e["args"]["name"].startswith("replay")}
ops = sum(1 for e in ev if e["ph"] == "X" and e["pid"] in replay_pids)
base, with_replay = slice_begins(sys.argv[1]), slice_begins(sys.argv[2])
if with_replay - base != ops:
    print(f"FAIL: the .pftrace has {with_replay - base} slices more with the replay, the JSON "
          f"{ops} replayed ops")
    sys.exit(1)
print(f"ok: .pftrace {ops} replayed slices, as the JSON")
PY
"$stepscope" export "$run" -o "$d/bad.json" --what-if 'kind=gpu:drop' >/dev/null 2>"$d/err"
rc=$?
[ $rc -eq 2 ] && grep -q "expected compute, comm, copy or host" "$d/err" ||
  { echo "FAIL: a bad --what-if: exit $rc, $(cat "$d/err")"; exit 1; }
echo ok
