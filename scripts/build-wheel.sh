#!/usr/bin/env bash
# build-wheel.sh — builds the Python package's wheel (python/) with the C library
# libstepscope_analyzer.so inside it, into dist/ (or $1):
#
#   scripts/build-wheel.sh [OUT_DIR]        then: pip install OUT_DIR/stepscope-*.whl
#
# Builds the library first (build/, CUDA parts not needed), then runs `pip wheel` on a
# copy of python/ in a temporary directory (so the source tree stays clean), with
# STEPSCOPE_LIB pointing at the library, in a virtual environment under build/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-dist}")
if [ ! -f build/build.ninja ] && [ ! -f build/Makefile ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTEPSCOPE_CUDA=OFF
fi
cmake --build build --target stepscope_analyzer
lib=$(realpath build/analyzer/libstepscope_analyzer.so)
[ -d build/wheelenv ] || python3 -m venv build/wheelenv
build/wheelenv/bin/pip install -q --upgrade pip setuptools wheel
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r python "$tmp/src"
rm -f "$tmp/src/stepscope/libstepscope_analyzer.so"
mkdir -p "$out"
STEPSCOPE_LIB="$lib" build/wheelenv/bin/pip wheel -q --no-deps --no-build-isolation \
  -w "$out" "$tmp/src"
ls "$out"/stepscope-*.whl
