#!/usr/bin/env bash
# check-format.sh [--fix] — every C and CUDA C file of the repository follows .clang-format
# (clang-format 14, docs/contributing.md). Without --fix: lists the files that do not and
# exits 1 (scripts/test.sh runs it); with --fix: reformats them in place.
set -euo pipefail
cd "$(dirname "$0")/.."
cf=clang-format; command -v clang-format-14 >/dev/null && cf=clang-format-14
command -v $cf >/dev/null || { echo "check-format: clang-format not found (apt-get install clang-format)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = --fix ]; then
  $cf -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  $cf --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files do not follow .clang-format (scripts/check-format.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files follow .clang-format"
