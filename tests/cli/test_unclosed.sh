#!/usr/bin/env bash
# A rank whose trace was not closed (crash or kill) is named by `info`,
# `analyze` (text and JSON) and `export`, with how long before the run's last
# record its trace ends; a rank closed on SIGTERM gets a note; traces of
# format 1.0 (written before END records existed: the committed sample run)
# get neither.
set -u
stepscope=$1 writer=$2 sample=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; fi
}
"$writer" "$tmp/run" || { echo "FAIL: could not write the run"; exit 1; }
msg="rank 1's trace was not closed (crash or kill?); it ends 0.98 s before the run's last record"
note="rank 2 was stopped by SIGTERM (signal 15); its trace was flushed and closed"

out=$("$stepscope" info "$tmp/run"); rc=$?
echo "$out"
check "info exits 0" test $rc -eq 0
check "info names the unclosed rank" grep -qF "warning: $msg" <<<"$out"
check "info notes the rank closed on SIGTERM" grep -qF "warning: $note" <<<"$out"
check "info says nothing of rank 0" bash -c '! grep -q "rank 0" <<<"$1"' _ "$out"

"$stepscope" info --json "$tmp/run" >"$tmp/info.json"
check "info --json: closed states and warnings" python3 - "$tmp/info.json" "$msg" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r0, r1, r2 = d["ranks"]
assert (r0["closed"], r1["closed"], r2["closed"]) == ("closed", "not_closed", "closed_on_signal"), d
assert r0["warnings"] == [] and r1["warnings"] == [sys.argv[2]], r1["warnings"]
PY

out=$("$stepscope" analyze "$tmp/run"); rc=$?
echo "$out" | sed -n '/== warnings/,$p'
check "analyze exits 0" test $rc -eq 0
check "analyze names the unclosed rank" grep -qF -- "- $msg" <<<"$out"
check "analyze notes the rank closed on SIGTERM" grep -qF -- "- $note" <<<"$out"
"$stepscope" analyze "$tmp/run" --json "$tmp/report.json" --quiet
check "analyze --json carries the warning" python3 - "$tmp/report.json" "$msg" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert sys.argv[2] in d["warnings"], d["warnings"]
PY

err=$("$stepscope" export "$tmp/run" -o "$tmp/trace.json" 2>&1 >/dev/null); rc=$?
echo "$err"
check "export exits 0" test $rc -eq 0
check "export warns about the unclosed rank" grep -qF "warning: $msg" <<<"$err"

out=$("$stepscope" analyze "$sample" 2>&1)
check "format 1.0 traces: no close warnings" bash -c '! grep -q "not closed\|was stopped by" <<<"$1"' _ "$out"
out=$("$stepscope" info "$sample" 2>&1)
check "format 1.0 traces: info says nothing either" bash -c '! grep -q "not closed\|was stopped by" <<<"$1"' _ "$out"

exit $fail
