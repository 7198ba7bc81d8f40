#!/usr/bin/env python3
"""tcg-pokes.py - the 4 KiB pages that a perf.data's TEXT_POKE records patch.

    tcg-pokes.py PERF.DATA        one page address a line (hex, 0x...)

For t0120: perf 6.1 applies only host-kernel pokes, so where a TCG
recording's guest-kernel code changed perf decodes stale bytes.
"""
import struct
import sys


def main():
    buf = open(sys.argv[1], "rb").read()
    assert buf[:8] == b"PERFILE2", "not a PERFILE2 file"
    d_off, d_size = struct.unpack_from("<QQ", buf, 40)
    pages = set()
    pos = d_off
    while pos < d_off + d_size:
        typ, _misc, size = struct.unpack_from("<IHH", buf, pos)
        assert size >= 8, "bad record"
        extra = struct.unpack_from("<Q", buf, pos + 8)[0] if typ == 71 else 0
        if typ == 20:                    # PERF_RECORD_TEXT_POKE
            addr, _old, new = struct.unpack_from("<QHH", buf, pos + 8)
            for page in range(addr >> 12, ((addr + max(new, 1) - 1) >> 12) + 1):
                pages.add(page << 12)
        pos += size + extra
    for page in sorted(pages):
        print(hex(page))


main()
