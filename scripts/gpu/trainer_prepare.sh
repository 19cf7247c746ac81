#!/bin/bash
# trainer_prepare.sh — run on a DEVELOPMENT machine (network to Debian and PyPI) before a
# GPU session: unpacks Debian's libzstd-dev/libzstd1 into .deps/zstd (the GPU machine may
# lack them) and NCCL 2.32 from PyPI into .nccl (several ranks on one GPU need >= 2.30),
# both git-ignored via .git/info/exclude. Pass `.deps` and `.nccl` as `carry` paths.
# Nothing is installed into /.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
grep -qx '/.deps/' .git/info/exclude 2>/dev/null || echo /.deps/ >> .git/info/exclude
grep -qx '/.nccl/' .git/info/exclude 2>/dev/null || echo /.nccl/ >> .git/info/exclude
tmp=$(mktemp -d)
(cd "$tmp" && apt-get download libzstd-dev libzstd1)
mkdir -p .deps/zstd
for deb in "$tmp"/*.deb; do dpkg -x "$deb" .deps/zstd; done
pc=.deps/zstd/usr/lib/x86_64-linux-gnu/pkgconfig/libzstd.pc
# point the .pc file at the unpacked tree
sed -i 's|^prefix=.*|prefix=${pcfiledir}/../../..|' "$pc"
if [ "${SKIP_NCCL:-0}" != 1 ]; then
  whl=$(mktemp -d)
  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_18_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$whl" nvidia-nccl-cu13==2.32.3
  mkdir -p .nccl && unzip -o -q "$whl"/nvidia_nccl_cu13-*.whl -d .nccl
fi
du -sh .deps .nccl 2>/dev/null
echo "carry: .deps .nccl (the device tool carries at most 64 MiB in all; if .nccl is larger,"
echo "check first whether the GPU machine's own NCCL (or PyTorch's) is already >= 2.30)"
