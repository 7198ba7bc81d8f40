#!/usr/bin/env python3
"""aux-repeat.py SRC OUT N [UNIT]: a perf.data whose every AUX queue holds
its data N times over, built from SRC (a timeless per-thread synth
recording; synth takes minutes per 64 MiB of real-code AUX): SRC's other
records, then per queue AUXTRACE records of up to 4 MiB that carry the
queue's bytes N times in a row (each copy starts with synth's PSB+), each
copy followed by PAD packets up to UNIT bytes if given (cheap to decode),
and the HEADER_AUXTRACE index to match (perf-edit.py writes the file).
Big recordings in seconds for the memory tests."""
import importlib.util
import os
import struct
import sys

spec = importlib.util.spec_from_file_location(
    "perf_edit", os.path.join(os.path.dirname(os.path.abspath(__file__)), "perf-edit.py"))
pe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pe)

AUX = struct.Struct("<IHHQQQIIII")      # header, size, offset, reference, idx, tid, cpu, reserved
CHUNK = 4 << 20


def main():
    src, out, times = sys.argv[1], sys.argv[2], int(sys.argv[3])
    unit = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    p = pe.parse(open(src, "rb").read())
    other, queues = [], {}
    for r in p["recs"]:
        if struct.unpack_from("<I", r)[0] != 71:
            other.append(r)
            continue
        f = AUX.unpack_from(r, 0)
        q = queues.setdefault(f[6], {"tid": f[7], "cpu": f[8], "bytes": bytearray()})
        q["bytes"] += r[AUX.size:]
    recs = list(other)
    for idx, q in sorted(queues.items()):
        stream, off = bytes(q["bytes"]), 0
        stream += bytes(max(0, unit - len(stream)))       # PAD is 0x00
        for _ in range(times):
            for at in range(0, len(stream), CHUNK):
                piece = stream[at:at + CHUNK]
                recs.append(AUX.pack(71, 0, AUX.size, len(piece), off, 0, idx, q["tid"], q["cpu"], 0) + piece)
                off += len(piece)
    p["recs"] = recs
    n = sum(1 for r in recs if struct.unpack_from("<I", r)[0] == 71)
    p["feats"] = [(bit, struct.pack("<Q", n) + bytes(16 * n) if bit == 18 else f) for bit, f in p["feats"]]
    pe.write(p, out)


main()
