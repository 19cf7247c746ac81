#!/usr/bin/env bash
# exports.sh LIBSTEPSCOPE_SO — libstepscope.so exports the tracer's API (stepscope_*, the
# functions of stepscope.h) and nothing else: its internals (codec, interning, writer, the
# common library) must not reach the programs it is linked or injected into (issue 28).
set -u
lib=$1
defined=$(nm -D --defined-only "$lib" | awk 'NF == 3 {print $3}')
other=$(grep -v '^stepscope_' <<<"$defined")
if [ -n "$other" ]; then
  echo "FAIL: $lib exports symbols outside stepscope_*:"; echo "$other"; exit 1
fi
# every function declared in stepscope.h is exported (a lost STEPSCOPE_EXPORT fails here)
header=$(dirname "$0")/../../tracer/include/stepscope.h
missing=0
for f in $(sed -n 's/^STEPSCOPE_EXPORT .*\bstepscope_\([a-z_0-9]*\)(.*/stepscope_\1/p' "$header"); do
  grep -qx "$f" <<<"$defined" || { echo "FAIL: $f is declared but not exported"; missing=1; }
done
n=$(grep -c . <<<"$defined")
[ "$missing" = 0 ] && [ "$n" -ge 40 ] || { echo "FAIL: $n stepscope_* exports"; exit 1; }
echo "ok: $n symbols, all stepscope_*"
