#!/usr/bin/env python3
"""many-queues.py SRC OUT N: a perf.data with N AUX queues of one tiny
buffer each (a PSB), built from SRC (a synth recording): SRC's header,
attrs and every non-AUXTRACE record, then N AUXTRACE records with queue
indexes 0..N-1 (issue #11 item 19: memory must not grow with the number
of queues by more than a little per queue)."""
import struct
import sys

PSB = bytes([0x02, 0x82] * 8)


def records(data, off, end):
    while off < end:
        typ, misc, size = struct.unpack_from("<IHH", data, off)
        n = size
        if typ == 71:  # AUXTRACE: payload follows
            n += struct.unpack_from("<Q", data, off + 8)[0]
        yield off, typ, data[off:off + size]
        off += n


def main():
    src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    data = open(src, "rb").read()
    magic, hsize, attr_size = struct.unpack_from("<8sQQ", data, 0)
    if magic != b"PERFILE2" or hsize != 104:
        sys.exit("many-queues.py: %s: not a PERFILE2 file" % src)
    doff, dsize = struct.unpack_from("<QQ", data, 40)
    keep, first = [], None
    for off, typ, rec in records(data, doff, doff + dsize):
        if typ == 71:
            first = first or rec
        else:
            keep.append(rec)
    if not first:
        sys.exit("many-queues.py: %s: no AUXTRACE record" % src)
    # AUXTRACE: header, size, offset, reference, idx, tid, cpu, reserved
    _, _, _, _, _, reference, _, tid, cpu, _ = struct.unpack_from("<IHHQQQIIII", first, 0)
    with open(out, "wb") as f:
        f.write(data[:doff])
        for rec in keep:
            f.write(rec)
        for i in range(n):
            f.write(struct.pack("<IHHQQQIIII", 71, 0, 48, len(PSB), 0, reference, i, tid, cpu, 0))
            f.write(PSB)
        end = f.tell()
        # data section size; no feature sections (their offsets would be stale)
        f.seek(48)
        f.write(struct.pack("<Q", end - doff))
        f.seek(72)
        f.write(b"\0" * 32)


if __name__ == "__main__":
    main()
