#!/bin/sh
# expect_failure.sh — runs a command that must fail in a specific way.
#
# usage: expect_failure.sh EXIT_CODE REGEX COMMAND [ARGS...]
# Passes when the command exits with EXIT_CODE and its stderr matches the
# extended regular expression REGEX (e.g. the name of the offending option or
# the rank that died). A 120-second limit guards against hangs.
set -u
want=$1 regex=$2
shift 2
err=$(mktemp "${TMPDIR:-/tmp}/ss-fail.XXXXXX") || exit 1
trap 'rm -f "$err"' EXIT
timeout 120 "$@" >/dev/null 2>"$err"
got=$?
cat "$err"
[ "$got" -eq "$want" ] || { echo "FAIL: exit status $got, expected $want"; exit 1; }
grep -Eq -- "$regex" "$err" || { echo "FAIL: stderr does not match /$regex/"; exit 1; }
echo "OK: exit $got, stderr matches /$regex/"
