#!/usr/bin/env python3
"""make_seeds.py — writes the seed gzip files of fuzz_inflate_pipe into this
folder: one and several members, header fields (FEXTRA, FNAME, FCOMMENT,
FHCRC), stored, fixed and dynamic blocks, an empty member, trailing bytes,
a cut file and a bad CRC. Deterministic (mtime 0)."""
import os
import struct
import zlib

here = os.path.dirname(os.path.abspath(__file__))
text = b"".join(b'{"ph":"X","cat":"kernel","ts":%d.%03d,"name":"k%d"},' % (i, i % 1000, i % 7)
                for i in range(300))


def member(data, flags=0, level=6, strategy=zlib.Z_DEFAULT_STRATEGY):
    head = bytes([0x1F, 0x8B, 8, flags, 0, 0, 0, 0, 0, 3])
    if flags & 4:
        head += struct.pack("<H", 4) + b"ab\x02\x00"
    if flags & 8:
        head += b"trace.json\x00"
    if flags & 16:
        head += b"comment\x00"
    if flags & 2:
        head += struct.pack("<H", zlib.crc32(head) & 0xFFFF)
    c = zlib.compressobj(level, zlib.DEFLATED, -15, 8, strategy)
    body = c.compress(data) + c.flush()
    return head + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


seeds = {
    "one.gz": member(text),
    "stored.gz": member(text[:2000], level=0),
    "fixed.gz": member(text[:3000], strategy=zlib.Z_FIXED),
    "fields.gz": member(text[:5000], flags=2 | 4 | 8 | 16),
    "members.gz": member(text[:4000], flags=8) + member(b"") + member(text[4000:9000], flags=2),
    "trailing.gz": member(text[:1000]) + b"\x00\x00junk",
    "cut.gz": member(text)[:-20],
    "bad_crc.gz": (lambda m: m[:-8] + bytes([m[-8] ^ 1]) + m[-7:])(member(text[:6000])),
}
for name, data in seeds.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)
