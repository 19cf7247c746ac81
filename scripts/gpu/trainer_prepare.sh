#!/bin/bash
# trainer_prepare.sh — run on a DEVELOPMENT machine (network to Debian and PyPI) before a
# GPU session: unpacks Debian's libzstd-dev/libzstd1 into .deps/zstd (the GPU machine may
# lack them) and packs NCCL 2.32 from PyPI (several ranks on one GPU need >= 2.30) into
# .deps/nccl/libnccl.so.2.xz: the wheel's 344 MB library with every device-code payload but
# sm_90's zeroed (scripts/gpu/nccl_slim.py), 44 MB, so that `.deps` fits the device tool's
# 64 MiB carry. On the GPU machine trainer_lib.sh / trace_check.sh unpack it into
# .nccl/nvidia/nccl/lib. Both folders are git-ignored via .git/info/exclude; pass `.deps`
# as the one `carry` path. Nothing is installed into /.
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
  unzip -o -q "$whl"/nvidia_nccl_cu13-*.whl 'nvidia/nccl/lib/libnccl.so.2' -d "$whl/x"
  mkdir -p .deps/nccl
  python3 scripts/gpu/nccl_slim.py pack "$whl/x/nvidia/nccl/lib/libnccl.so.2" .deps/nccl/libnccl.so.2.xz --sm 90
  rm -rf "$whl"
fi
rm -rf "$tmp"
du -sh .deps 2>/dev/null
echo "carry: .deps (the device tool carries at most 64 MiB with the working tree)"
