#!/bin/bash
# pack.sh — builds the GPU kit on a DEVELOPMENT machine (network to Debian and PyPI): one
# folder that a GPU window needs and nothing else, so that the first call on a bare GPU
# machine can build, or fall back to binaries built here, and say which commit it ran.
#
#   scripts/gpu/pack.sh [KIT_DIR]        (default: .gpukit at the repository root, git-ignored)
#
# The kit (at most 60 MiB; the size is printed and checked):
#   COMMIT                 `git rev-parse HEAD` (+ "dirty" when the tree had changes), the date
#   src.tar.zst            the source tree of that commit (git archive, plus uncommitted changes
#                          when dirty): the kit builds without the repository
#   window.sh, gpu/        the entry point and the scripts it runs (copies of scripts/gpu)
#   deps/root/             Debian's libzstd-dev, zlib1g-dev, libdeflate-dev, libisal-dev, pkgconf
#                          (+ their runtime libraries: the prebuilt stepscope links libdeflate
#                          and libisal, which the GPU machine may lack)
#                          unpacked with dpkg -x (never into /), .pc files made relocatable
#   deps/nccl/include/     nccl.h of NCCL 2.32 (the GPU machine's toolkit may have no nccl.h)
#   deps/nccl/libnccl.so.2.xz  NCCL 2.32 from PyPI, device code for sm_90 only (nccl_slim.py)
#   prebuilt.tar.xz        prebuilt/: stepscope, stepscope-train, libstepscope*.so, the GPU
#                          test programs and tests/gpu_tracer's CUDA app, built here for sm_90
#                          (Release, stripped), in the build tree's layout; window.sh unpacks
#                          and uses them when the on-device build fails
#
# Run it from anywhere; the kit runs from anywhere too (window.sh finds its own folder), so a
# copy can travel in any repository's ignored folder. Carry it with the device tool:
# `carry: [".gpukit"]`.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kit=${1:-$repo/.gpukit}
max_mib=${KIT_MAX_MIB:-60}
jobs=${STEPSCOPE_JOBS:-$(nproc)}
mkdir -p "$kit"
kit=$(cd "$kit" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
say() { echo "pack: $*" >&2; }

# --- what the kit is of
cd "$repo"
commit=$(git rev-parse HEAD)
dirty=$(git status --porcelain --untracked-files=no | grep -q . && echo dirty || true)
printf '%s %s\npacked %s on %s\n' "$commit" "$dirty" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "$(hostname)" > "$kit/COMMIT"
say "commit $commit $dirty"

# --- sources (the committed tree, with uncommitted changes of tracked files on top)
git archive --format=tar --prefix=src/ HEAD > "$tmp/src.tar"
if [ -n "$dirty" ]; then
  git diff --name-only HEAD | while read -r f; do [ -f "$f" ] && echo "$f"; done > "$tmp/changed"
  tar -rf "$tmp/src.tar" --transform 's,^,src/,' -T "$tmp/changed"
fi
zstd -q -19 -T"$jobs" -f "$tmp/src.tar" -o "$kit/src.tar.zst"

# --- the scripts
rm -rf "$kit/gpu"
mkdir -p "$kit/gpu"
cp "$repo"/scripts/gpu/*.sh "$repo"/scripts/gpu/*.py "$kit/gpu/"
cp "$repo/scripts/gpu/window.sh" "$kit/window.sh"

# --- Debian build dependencies, unpacked (the GPU machine may lack them)
if [ ! -f "$kit/deps/root/.complete" ]; then
  rm -rf "$kit/deps/root"
  mkdir -p "$kit/deps/root" "$tmp/debs"
  (cd "$tmp/debs" && apt-get download -q libzstd-dev libzstd1 zlib1g-dev zlib1g \
     libdeflate-dev libdeflate0 libisal-dev libisal2 pkgconf pkgconf-bin libpkgconf3 >/dev/null)
  for deb in "$tmp"/debs/*.deb; do dpkg -x "$deb" "$kit/deps/root"; done
  # .pc files relative to themselves: prefix AND libdir/includedir follow the unpacked tree
  for pc in "$kit"/deps/root/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc \
            "$kit"/deps/root/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] || continue
    sed -i -e 's|^prefix=.*|prefix=${pcfiledir}/../../..|' \
           -e 's|^libdir=/usr/lib/x86_64-linux-gnu|libdir=${prefix}/lib/x86_64-linux-gnu|' \
           -e 's|^includedir=/usr/include|includedir=${prefix}/include|' "$pc"
  done
  # unversioned .so links that point at absolute paths would escape the kit
  for l in "$kit"/deps/root/usr/lib/x86_64-linux-gnu/*.so; do
    [ -L "$l" ] || continue
    t=$(readlink "$l"); ln -sf "$(basename "$t")" "$l"
  done
  touch "$kit/deps/root/.complete"
fi

# --- NCCL 2.32 (several ranks on one GPU need >= 2.30): header and slimmed library
if [ "${SKIP_NCCL:-0}" != 1 ] && [ ! -f "$kit/deps/nccl/libnccl.so.2.xz" ]; then
  mkdir -p "$kit/deps/nccl/include" "$tmp/whl"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_18_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$tmp/whl" nvidia-nccl-cu13==2.32.3
  unzip -o -q "$tmp"/whl/nvidia_nccl_cu13-*.whl 'nvidia/nccl/lib/libnccl.so.2' \
    'nvidia/nccl/include/*' -d "$tmp/whl/x"
  cp "$tmp"/whl/x/nvidia/nccl/include/*.h "$kit/deps/nccl/include/"
  python3 "$repo/scripts/gpu/nccl_slim.py" pack "$tmp/whl/x/nvidia/nccl/lib/libnccl.so.2" \
    "$kit/deps/nccl/libnccl.so.2.xz" --sm 90
fi
[ -f "$kit/deps/nccl/include/nccl.h" ] || say "warning: no nccl.h in the kit (SKIP_NCCL=1?)"

# --- fallback binaries, built here for sm_90 (Release, no -Werror, stripped)
if [ "${SKIP_PREBUILT:-0}" != 1 ]; then
  b=${KIT_BUILD_DIR:-$repo/build-gpukit}
  say "building the fallback binaries in $b"
  cmake -S "$repo" -B "$b" -G Ninja -DSTEPSCOPE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release -DSTEPSCOPE_WERROR=OFF > "$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log" >&2; exit 1; }
  cmake --build "$b" -j "$jobs" --target stepscope stepscope-train stepscope_inject \
    test_gpu_kernels test_gpu_attention_block test_gpu_device test_gpu_moe gpu_tracer_cuda_app > "$tmp/build.log" 2>&1 ||
    { tail -40 "$tmp/build.log" >&2; exit 1; }
  rm -rf "$kit/prebuilt" "$kit/prebuilt.tar.xz" "$tmp/prebuilt"
  # the build tree's layout, so that every script runs with BUILD=<unpacked prebuilt> and
  # `stepscope record` finds ../tracer/gpu/libstepscope_inject.so next to itself
  p=$tmp/prebuilt
  for f in analyzer/stepscope trainer/stepscope-train tests/gpu/test_gpu_kernels \
           tests/gpu/test_gpu_attention_block tests/gpu/test_gpu_device tests/gpu/test_gpu_moe \
           tests/gpu_tracer/gpu_tracer_cuda_app tracer/gpu/libstepscope_inject.so; do
    mkdir -p "$p/$(dirname "$f")"
    cp "$b/$f" "$p/$f"
    strip --strip-unneeded "$p/$f"
  done
  cp -P "$b"/tracer/libstepscope.so* "$p/tracer/"
  strip --strip-unneeded "$p"/tracer/libstepscope.so.*.* 2>/dev/null || true
  echo "$commit $dirty" > "$p/COMMIT"
  # xz: the binaries are mostly device code and compress about 4x (the kit must stay small)
  tar -C "$tmp" -cf - prebuilt | xz -9 -T"$jobs" > "$kit/prebuilt.tar.xz"
fi

# --- size
size_kib=$(du -sk "$kit" | cut -f1)
say "kit $kit: $((size_kib / 1024)) MiB ($size_kib KiB; limit $max_mib MiB)"
du -sk "$kit"/* | sort -n | awk '{printf "  %6d KiB  %s\n", $1, $2}' >&2
if [ "$size_kib" -gt $((max_mib * 1024)) ]; then
  say "ERROR: the kit is larger than $max_mib MiB: it cannot travel with the device tool"
  exit 1
fi
