#!/bin/bash
# pack.sh — builds the GPU kit on a DEVELOPMENT machine (network to Debian and PyPI): one
# folder that a GPU window needs beside the working tree, so that the one call on a bare GPU
# machine runs binaries of the commit it names without building (docs/gpu-session-plan.md).
#
#   scripts/gpu/pack.sh [KIT_DIR]        (default: .gpukit at the repository root, git-ignored)
#
# The kit (the size is measured and checked: the kit <= KIT_MAX_MIB, 45, and the tree that
# travels plus the kit <= TREE_KIT_MAX_MIB, 50, so that it also fits beside another checkout
# of <= 14 MiB in the device tool's 64 MiB):
#   COMMIT                 `git rev-parse HEAD` (+ "dirty" when tracked files had changes),
#                          the date and host of the packing
#   prebuilt.tar.xz        prebuilt/: stepscope, stepscope-train, libstepscope*.so, the
#                          injection library, the GPU test programs and tests/gpu_tracer's CUDA
#                          app, built here for sm_90 (Release, stripped) in the build tree's
#                          layout; window.sh unpacks it with Python's tarfile and checks every
#                          binary with ldd
#   deps/nccl/libnccl.so.2.xz  NCCL 2.32 from PyPI (several ranks on one GPU need >= 2.30),
#                          debug sections stripped and device code for sm_90 only (nccl_slim.py)
#   deps/nccl/include/     its nccl.h (for the fallback build)
#   deps/root/             Debian's libzstd, zlib, libdeflate, isa-l (headers, .so, runtime
#                          libraries: the prebuilt stepscope needs libdeflate and libisal, which
#                          the GPU machine may lack) and pkgconf, unpacked with dpkg -x (never
#                          into /); .pc files relocatable; static libraries left out and every
#                          link checked to resolve inside the kit (a dangling libz.so made
#                          CMake link libz.a into a shared library, which fails)
#   src.tar.xz, gpu/, window.sh  the commit's sources and scripts: the kit also runs when
#                          carried beside another checkout (`.gpukit/window.sh run`)
# Env: NCCL_WHEEL=FILE (a downloaded nvidia-nccl-cu13 2.32.3 wheel), SKIP_NCCL=1,
# SKIP_PREBUILT=1, KIT_BUILD_DIR (build-gpukit), STEPSCOPE_JOBS. Prints the sizes and the time
# it took. Carry it with the device tool: `carry: [".gpukit"]`.
set -euo pipefail
t_start=$(date +%s)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kit=${1:-$repo/.gpukit}
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
printf '%s\npacked %s on %s\n' "$commit${dirty:+ $dirty}" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "$(hostname)" > "$kit/COMMIT"
say "commit $commit $dirty"

# --- sources (the committed tree, with uncommitted changes of tracked files on top) and scripts
git archive --format=tar --prefix=src/ HEAD > "$tmp/src.tar"
if [ -n "$dirty" ]; then
  git diff --name-only HEAD | while read -r f; do [ -f "$f" ] && echo "$f"; done > "$tmp/changed"
  tar -rf "$tmp/src.tar" --transform 's,^,src/,' -T "$tmp/changed"
fi
xz -6 -T"$jobs" -c "$tmp/src.tar" > "$kit/src.tar.xz"
rm -f "$kit/src.tar.zst"   # an older kit's
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
  root=$kit/deps/root
  rm -rf "$root/usr/share/doc" "$root/usr/share/man"
  # static libraries: never wanted (a shared library cannot link them), and large
  find "$root" -name '*.a' -delete
  # .pc files relative to themselves: prefix AND libdir/includedir follow the unpacked tree
  for pc in "$root"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$root"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] || continue
    sed -i -e 's|^prefix=.*|prefix=${pcfiledir}/../../..|' \
           -e 's|^libdir=/usr/lib/x86_64-linux-gnu|libdir=${prefix}/lib/x86_64-linux-gnu|' \
           -e 's|^includedir=/usr/include|includedir=${prefix}/include|' "$pc"
  done
  # Links with absolute targets (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13) would
  # escape the kit: each points at its target inside the kit instead, by a relative path; a
  # runtime library that Debian keeps in /lib also gets a link in usr/lib (one folder for
  # the library path).
  if [ -d "$root/lib/x86_64-linux-gnu" ]; then
    for f in "$root"/lib/x86_64-linux-gnu/*; do
      [ -e "$root/usr/lib/x86_64-linux-gnu/$(basename "$f")" ] ||
        ln -s "../../../lib/x86_64-linux-gnu/$(basename "$f")" "$root/usr/lib/x86_64-linux-gnu/"
    done
  fi
  find "$root" -type l | while read -r l; do
    t=$(readlink "$l")
    case "$t" in
      /*) ln -sfn "$(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' \
                     "$root$t" "$(dirname "$l")")" "$l" ;;
    esac
  done
  dangling=$(find "$root" -xtype l)
  if [ -n "$dangling" ]; then
    say "ERROR: links in the kit that point at nothing:"; echo "$dangling" >&2; exit 1
  fi
  touch "$root/.complete"
fi

# --- NCCL 2.32 (several ranks on one GPU need >= 2.30): header and slimmed library
if [ "${SKIP_NCCL:-0}" != 1 ] && [ ! -f "$kit/deps/nccl/libnccl.so.2.xz" ]; then
  mkdir -p "$kit/deps/nccl/include" "$tmp/whl"
  whl=${NCCL_WHEEL:-}
  if [ -z "$whl" ]; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_18_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
      -d "$tmp/whl" nvidia-nccl-cu13==2.32.3
    whl=$(ls "$tmp"/whl/nvidia_nccl_cu13-*.whl)
  fi
  unzip -o -q "$whl" 'nvidia/nccl/lib/libnccl.so.2' 'nvidia/nccl/include/*' -d "$tmp/whl/x"
  cp "$tmp"/whl/x/nvidia/nccl/include/*.h "$kit/deps/nccl/include/"
  # debug sections (70 MB) are not needed to run; the loaded sections stay as they are
  strip --strip-debug -o "$tmp/libnccl.so.2" "$tmp/whl/x/nvidia/nccl/lib/libnccl.so.2"
  python3 "$repo/scripts/gpu/nccl_slim.py" pack "$tmp/libnccl.so.2" "$kit/deps/nccl/libnccl.so.2.xz" --sm 90
fi
[ -f "$kit/deps/nccl/include/nccl.h" ] || say "warning: no nccl.h in the kit (SKIP_NCCL=1?)"

# --- the binaries the window runs, built here for sm_90 (Release, no -Werror, stripped)
if [ "${SKIP_PREBUILT:-0}" != 1 ]; then
  source "$repo/scripts/gpu/window_steps.sh"   # WINDOW_BINARIES, WINDOW_TARGETS
  b=${KIT_BUILD_DIR:-$repo/build-gpukit}
  say "building the binaries in $b"
  cmake -S "$repo" -B "$b" -G Ninja -DSTEPSCOPE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release -DSTEPSCOPE_WERROR=OFF > "$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log" >&2; exit 1; }
  # shellcheck disable=SC2046
  cmake --build "$b" -j "$jobs" $(for t in $WINDOW_TARGETS; do echo --target "$t"; done) > "$tmp/build.log" 2>&1 ||
    { tail -40 "$tmp/build.log" >&2; exit 1; }
  rm -rf "$kit/prebuilt" "$kit/prebuilt.tar.xz" "$tmp/prebuilt"
  # the build tree's layout, so that `stepscope record` finds ../tracer/gpu/libstepscope_inject.so
  # next to itself and the injection library its ../libstepscope.so.0
  p=$tmp/prebuilt
  for f in $WINDOW_BINARIES; do
    mkdir -p "$p/$(dirname "$f")"
    cp "$b/$f" "$p/$f"
    strip --strip-unneeded "$p/$f"
  done
  cp -P "$b"/tracer/libstepscope.so* "$p/tracer/"
  strip --strip-unneeded "$p"/tracer/libstepscope.so.*.* 2>/dev/null || true
  echo "$commit${dirty:+ $dirty}" > "$p/COMMIT"
  # xz: the binaries are mostly device code and compress about 4x
  tar -C "$tmp" -cf - prebuilt | xz -9 -T"$jobs" > "$kit/prebuilt.tar.xz"
fi

# --- sizes: the kit, and the working tree that travels with it (tracked and untracked files
# that git does not ignore)
kit_kib=$(du -sk "$kit" | cut -f1)
tree_kib=$( (git ls-files -z --cached --others --exclude-standard | xargs -0 du -sk -- 2>/dev/null || true) |
  awk '{s += $1} END {print s + 0}')
say "kit $kit: $((kit_kib / 1024)) MiB ($kit_kib KiB; limit ${KIT_MAX_MIB:-45} MiB)"
du -sk "$kit"/* "$kit"/deps/* | sort -n | awk '{printf "  %6d KiB  %s\n", $1, $2}' >&2
say "working tree $((tree_kib / 1024)) MiB + kit = $(((tree_kib + kit_kib) / 1024)) MiB (limit ${TREE_KIT_MAX_MIB:-50} MiB)"
say "packed in $(($(date +%s) - t_start)) s"
if [ "$kit_kib" -gt $((${KIT_MAX_MIB:-45} * 1024)) ] ||
   [ $((tree_kib + kit_kib)) -gt $((${TREE_KIT_MAX_MIB:-50} * 1024)) ]; then
  say "ERROR: too large to travel with the device tool beside another checkout"
  exit 1
fi
