#!/usr/bin/env bash
# `stepscope record` right after the README's quick start (issue 34 rough edges):
# scripts/demo.sh builds only the targets stepscope and stepscope-train, and record
# then could not find libstepscope_inject.so.
#   - building `stepscope` builds the injection library (a dependency in the build
#     graph; checked with Ninja's query where the build tree is Ninja's)
#   - without it beside the executable, record's error names the CMake target
#     that builds it
# usage: test_record_inject.sh STEPSCOPE BUILD_DIR HAVE_INJECT_TARGET(0|1)
set -u
stepscope=$1 build=$2 have_inject=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, command...
  local what=$1; shift
  if ! "$@"; then echo "FAIL: $what"; fail=1; else echo "ok: $what"; fi
}

if [ "$have_inject" = 1 ] && [ -f "$build/build.ninja" ] && command -v ninja >/dev/null; then
  rel=$(realpath --relative-to="$build" "$stepscope")
  check "building $rel builds libstepscope_inject.so first" \
    grep -q "libstepscope_inject.so" <(ninja -C "$build" -t query "$rel")
else
  echo "skip: the build-graph check (no injection library target, or not a Ninja build)"
fi

cp "$stepscope" "$tmp/stepscope" # alone: no library beside it
"$tmp/stepscope" record -o "$tmp/run" -- true >"$tmp/out" 2>&1; rc=$?
check "record without the library: exit 1 (rc $rc)" test $rc -eq 1
check "the error names the target that builds it ($(cat "$tmp/out"))" \
  grep -q -- "--target stepscope_inject" "$tmp/out"
check "and --inject-lib" grep -q -- "--inject-lib" "$tmp/out"
exit $fail
