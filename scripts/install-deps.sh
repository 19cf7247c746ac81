#!/usr/bin/env bash
# Installs the Debian packages stepscope needs to build and test, when missing.
# Needs root (or sudo) only if something is missing. The CUDA toolkit is
# optional and never installed here: without it the CUDA parts are skipped.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config   # build
  libzstd-dev zlib1g-dev zstd                    # trace compression, .json.gz export, zstd CLI
  libdeflate-dev                                 # fast whole-file gzip inflate of Kineto traces
  libisal-dev                                    # fast streaming gzip inflate of Kineto traces (pipe thread)
  libcmocka-dev                                  # unit tests
  clang libclang-rt-14-dev                       # sanitizer build and libFuzzer
  clang-format                                   # the format check (scripts/check-format.sh; Debian 12: version 14)
  python3                                        # test helpers (JSON checks)
  chromium chromium-driver python3-selenium      # viewer tests in a real browser
  python3-venv                                   # build/pyenv for the Python package tests; export.formats' venv
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "stepscope: installing missing packages: ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null; then
  sudo=(sudo)
else
  echo "stepscope: need root to install: ${missing[*]} (run as root or install them)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
