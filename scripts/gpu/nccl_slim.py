#!/usr/bin/env python3
"""nccl_slim.py — makes NCCL 2.32 small enough to carry to the GPU machine.

    nccl_slim.py pack   LIBNCCL_SO OUT.xz [--sm 90]   (development machine)
    nccl_slim.py unpack IN.xz DIR                     (GPU machine: writes DIR/libnccl.so.2)

Why: several ranks on one GPU need NCCL >= 2.30, the GPU machine's may be older, and
the device tool carries at most 64 MiB, while PyPI's libnccl.so.2 (nvidia-nccl-cu13
2.32.3) is 344 MB, 270 MB even after zstd -19: almost all of it is device code for
eight GPU architectures. No well-kept tool prunes a shared library's fatbinaries
(nvprune takes static libraries and objects only), hence this script.

How: the library's device code sits in two ELF sections, `.nv_fatbin` and
`__nv_relfatbin`, each a run of fat binaries: a 16-byte header (magic 0xBA55ED50,
u16 version, u16 header size, u64 size of the entries) followed by entries, each
with its own header (u16 kind: 1 PTX, 2 ELF; u16 version; u32 header size; u64
payload size; ...; u32 SM architecture at byte 28). We keep every header and the
payloads of the one architecture we run on (sm_90 for H100/H200), and overwrite the
other payloads with zeros: offsets, sizes and the host code stay exactly as they
were, the driver picks the sm_90 entry as before, and the zeros compress to
nothing (xz: 44 MB). The pack step refuses to write anything if a header does not
parse exactly (entries must tile each fat binary), and prints what it kept.
Honest limits: an architecture other than --sm cannot run with the result; the
scheme relies on the driver reading only the entry it selects — checked on the GPU
by the multi-rank runs themselves, which fail loudly otherwise.
"""
import lzma
import os
import struct
import subprocess
import sys

FATBIN_MAGIC = 0xBA55ED50
SECTIONS = ('.nv_fatbin', '__nv_relfatbin')


def fatbin_sections(path):
    out = subprocess.run(['readelf', '-S', '-W', path], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.replace('[ ', '[').split()
        if len(parts) > 6 and parts[1] in SECTIONS:
            found.append((parts[1], int(parts[4], 16), int(parts[5], 16)))
    return found


def slim(data, sections, keep_sm):
    kept = zeroed = entries = 0
    for name, off, size in sections:
        p, end = off, off + size
        while p + 16 <= end:
            magic, _ver, header_size, fat_size = struct.unpack_from('<IHHQ', data, p)
            if magic != FATBIN_MAGIC:
                p += 8  # fat binaries are 8-byte aligned; padding between them
                continue
            q, q_end = p + header_size, p + header_size + fat_size
            if q_end > end:
                raise ValueError('%s: fat binary at %#x runs past its section' % (name, p))
            while q < q_end:
                _kind, _ev, entry_header, payload = struct.unpack_from('<HHIQ', data, q)
                sm = struct.unpack_from('<I', data, q + 28)[0]
                if entry_header < 32 or q + entry_header + payload > q_end:
                    raise ValueError('%s: entry at %#x does not parse' % (name, q))
                if sm == keep_sm:
                    kept += payload
                else:
                    data[q + entry_header:q + entry_header + payload] = bytes(payload)
                    zeroed += payload
                entries += 1
                q += entry_header + payload
            if q != q_end:
                raise ValueError('%s: entries do not tile the fat binary at %#x' % (name, p))
            p = q_end
    return kept, zeroed, entries


def main(argv):
    if len(argv) >= 4 and argv[1] == 'pack':
        src, dst = argv[2], argv[3]
        keep = int(argv[argv.index('--sm') + 1]) if '--sm' in argv else 90
        data = bytearray(open(src, 'rb').read())
        sections = fatbin_sections(src)
        if not sections:
            sys.exit('nccl_slim: %s has no fatbin sections' % src)
        kept, zeroed, entries = slim(data, sections, keep)
        if kept == 0:
            sys.exit('nccl_slim: no sm_%d device code in %s' % (keep, src))
        with lzma.open(dst + '.tmp', 'wb', preset=6) as f:
            f.write(data)
        os.replace(dst + '.tmp', dst)
        print('nccl_slim: %d entries; kept %.1f MB of sm_%d code, zeroed %.1f MB; %s is %.1f MB'
              % (entries, kept / 1e6, keep, zeroed / 1e6, dst, os.path.getsize(dst) / 1e6))
        return 0
    if len(argv) == 4 and argv[1] == 'unpack':
        src, outdir = argv[2], argv[3]
        os.makedirs(outdir, exist_ok=True)
        dst = os.path.join(outdir, 'libnccl.so.2')
        with lzma.open(src, 'rb') as f, open(dst + '.tmp', 'wb') as g:
            while True:
                block = f.read(1 << 24)
                if not block:
                    break
                g.write(block)
        os.replace(dst + '.tmp', dst)
        print('nccl_slim: wrote %s (%.1f MB)' % (dst, os.path.getsize(dst) / 1e6))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
