#!/usr/bin/env python3
"""aux-repeat.py [--seamless] SRC OUT N [UNIT]: a perf.data whose every AUX
queue holds its data N times over (N a count, or a total AUX size such as
512M: as many copies as reach it), built from SRC, a synth recording (synth
takes minutes per 16 MiB of real-code AUX): SRC's other records, then
AUXTRACE records of up to 4 MiB that carry each queue's copies, and the
HEADER_AUXTRACE index to match.  Big recordings in seconds.

Without --seamless (the memory tests, timeless per-thread recordings): each
copy is the queue's whole stream (it starts with synth's PSB+), followed by
PAD packets up to UNIT bytes if given (cheap to decode); where a copy's end
meets the next copy's PSB+ the decoders report an error.

--seamless (benchmarks, timed or timeless per-thread recordings): each copy
is the queue's stream from its first PSB+ up to its last one, which restates
the IP the walk is at (synth flushes its TNT bits before every PSB+); the
copy ends with tracing stopped there and started again where the first
PSB+ is (FUP with that IP, TIP.PGD, TIP.PGE with the first PSB+'s IP), so
the next copy's first PSB+ finds the decoder where it says (perf and libipt
take a PSB+'s FUP after a TIP.PGD differently).  Every TSC packet of copy K
is K * SPAN later, SPAN the longest queue's time from its first to its last
PSB+ plus about 1 us (SRC must be corrected, guest TSCs in host time:
vmtrace correlate), so time goes on from copy to copy in every queue (TMA
and MTC are relative to the TSC of their PSB+ and stay as they are).  perf and vmtrace decode the
result without errors.  Only the AUX data repeats: SRC's sideband (comm,
mmap, itrace_start; per-CPU context switches) is not copied, so per-CPU
recordings are refused.  Prints "COPIES SEGMENT_BYTES SPAN_TSC" on stdout.
"""
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
PSB = b"\x02\x82" * 8
SEVEN = (1 << 56) - 1
TSC_PER_US = 3000                       # a margin between copies, roughly 1 us


def size_or_count(s, unit_bytes):
    """N copies, or as many copies of unit_bytes as reach a size like 512M"""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s[-1:].upper() in mult:
        want = int(s[:-1]) * mult[s[-1:].upper()]
        return max(1, -(-want // max(1, unit_bytes)))
    return int(s)


def fup_len(b):
    return 1 + (0, 2, 4, 6, 6, 0, 8, 0)[b >> 5]


def psb_header(buf, at):
    """The PSB+ at `at`: (end offset, TSC payload offset or None, PIP.NR or
    None, the FUP packet's bytes or None)"""
    pos, tsc, nr, fup = at + len(PSB), None, None, None
    while pos < len(buf):
        b = buf[pos]
        if b == 0x00:                           # PAD
            pos += 1
        elif b == 0x19:                         # TSC
            tsc = pos + 1
            pos += 8
        elif b == 0x59 or b == 0x99:            # MTC, MODE
            pos += 2
        elif b & 3 == 3:                        # CYC
            pos += 1
            if b & 4:
                while buf[pos] & 1:
                    pos += 1
                pos += 1
        elif b & 0x1f == 0x1d:                  # FUP
            fup = bytes(buf[pos:pos + fup_len(b)])
            pos += len(fup)
        elif b == 0x02:
            ext = buf[pos + 1]
            if ext == 0x23:                     # PSBEND
                return pos + 2, tsc, nr, fup
            if ext == 0x73 or ext == 0xc8:      # TMA, VMCS
                pos += 7
            elif ext == 0x03:                   # CBR
                pos += 4
            elif ext == 0x43:                   # PIP
                nr = buf[pos + 2] & 1
                pos += 8
            else:
                raise ValueError("packet 02 %02x in the PSB+ at %d" % (ext, at))
        else:
            raise ValueError("packet %02x in the PSB+ at %d" % (b, at))
    raise ValueError("PSB+ at %d has no PSBEND" % at)


def seamless_segment(stream):
    """(segment bytes, TSC payload offsets in it, TSC span, TSCs as
    (offset, value)); guest TSCs must be host time (a corrected recording)"""
    psbs, at = [], stream.find(PSB)
    while at >= 0:
        while stream[at + len(PSB):at + len(PSB) + 2] == PSB[:2]:
            at += 2                 # a packet ending in 02 82 just before the PSB
        psbs.append(at)
        at = stream.find(PSB, at + len(PSB))
    if len(psbs) < 2:
        raise ValueError("a queue with fewer than two PSB+: too short to repeat")
    first, last = psbs[0], psbs[-1]
    heads = [psb_header(stream, at) for at in psbs]
    fup = heads[-1][3]
    if fup is None or heads[0][3] is None:
        raise ValueError("the first and the last PSB+ must hold a FUP (tracing on)")
    # FUP, TIP.PGD (IP suppressed), TIP.PGE at the IP the first PSB+ restates
    pge = bytes([(heads[0][3][0] & 0xe0) | 0x11]) + heads[0][3][1:]
    seg = bytearray(stream[first:last]) + fup + b"\x01" + pge
    tscs = [h[1] - first for h in heads[:-1] if h[1] is not None]
    times = [(h[1] - first, int.from_bytes(stream[h[1]:h[1] + 7], "little"), h[2] == 1)
             for h in heads if h[1] is not None]
    host = [v for _, v, guest in times if not guest]
    if host and any(abs(v - host[-1]) > 2 * (max(host) - min(host)) + (1 << 32) for _, v, _ in times):
        raise ValueError("guest TSCs far from the host's: correct the recording first (vmtrace correlate)")
    span = max(v for _, v, _ in times) - min(v for _, v, _ in times) if times else 0
    return seg, tscs, span, [(o, v) for o, v, _ in times]


def reference(q, end, delta):
    """an AUXTRACE record's reference: the TSC when perf record copied the
    data (perf orders the queues by it; 0 and perf decodes nothing): the
    last TSC before the chunk's end, plus 1000"""
    last = [v for o, v in q["host"] if o < end] or [v for _, v in q["host"][:1]] or [0]
    return (last[-1] + 1000 + delta) & SEVEN if last[-1] else 0


def shifted(seg, tscs, delta):
    if not delta:
        return bytes(seg)
    out = bytearray(seg)
    for o in tscs:
        v = (int.from_bytes(out[o:o + 7], "little") + delta) & SEVEN
        out[o:o + 7] = v.to_bytes(7, "little")
    return bytes(out)


def main():
    args = sys.argv[1:]
    seamless = "--seamless" in args
    args = [a for a in args if a != "--seamless"]
    src, out, times = args[0], args[1], args[2]
    unit = int(args[3]) if len(args) > 3 else 0
    p = pe.parse(open(src, "rb").read())
    other, queues = [], {}
    for r in p["recs"]:
        if struct.unpack_from("<I", r)[0] != 71:
            other.append(r)
            continue
        f = AUX.unpack_from(r, 0)
        q = queues.setdefault(f[6], {"tid": f[7], "cpu": f[8], "bytes": bytearray()})
        q["bytes"] += r[AUX.size:]
    if seamless:
        if any(q["cpu"] != 0xffffffff for q in queues.values()):
            sys.exit("aux-repeat.py --seamless: per-thread recordings only (per CPU the context switches would have to repeat too)")
        span = 0
        for q in queues.values():
            q["seg"], q["tscs"], s, q["host"] = seamless_segment(bytes(q["bytes"]))
            span = max(span, s)
        span += TSC_PER_US
    else:
        for q in queues.values():
            q["seg"], q["tscs"], q["host"] = bytes(q["bytes"]) + bytes(max(0, unit - len(q["bytes"]))), [], []   # PAD is 0x00
        span = 0
    n = size_or_count(times, sum(len(q["seg"]) for q in queues.values()))
    write(p, other, queues, n, span, out)
    print(n, sum(len(q["seg"]) for q in queues.values()), span)


def write(p, other, queues, n, span, path):
    """SRC's records, then copy after copy, each queue's chunks in turn;
    written as it goes (a 512 MiB file is not built in memory)"""
    offs, data_len, other = [], 0, list(other)
    aux_off = {idx: 0 for idx in queues}
    with open(path + ".tmp", "wb") as f:
        f.write(p["head"])
        tail = []
        while other and struct.unpack_from("<I", other[-1])[0] == 68:      # FINISHED_ROUND stays last
            tail.insert(0, other.pop())
        for r in other:
            f.write(r)
            data_len += len(r)
        for k in range(n):
            copies = {idx: shifted(q["seg"], q["tscs"], k * span) for idx, q in queues.items()}
            for at in range(0, max(len(c) for c in copies.values()), CHUNK):
                for idx, q in sorted(queues.items()):
                    piece = copies[idx][at:at + CHUNK]
                    if not piece:
                        continue
                    piece += bytes(-len(piece) % 8)          # PAD to 8 bytes, as perf record does
                    offs.append(p["d_off"] + data_len)
                    rec = AUX.pack(71, 0, AUX.size, len(piece), aux_off[idx], reference(q, at + CHUNK, k * span),
                                   idx, q["tid"], q["cpu"], 0)
                    f.write(rec)
                    f.write(piece)
                    data_len += len(rec) + len(piece)
                    aux_off[idx] += len(piece)
        for r in tail:
            f.write(r)
            data_len += len(r)
        table = p["d_off"] + data_len
        feats = [(bit, struct.pack("<Q", len(offs)) +
                  b"".join(struct.pack("<QQ", o, AUX.size) for o in offs) if bit == 18 else bytes(fe))
                 for bit, fe in p["feats"]]
        pos = table + 16 * len(feats)
        for _, fe in feats:
            f.write(struct.pack("<QQ", pos, len(fe)))
            pos += len(fe)
        for _, fe in feats:
            f.write(fe)
        f.seek(0)
        f.write(pe.HDR.pack(b"PERFILE2", 104, p["attr_size"], p["a_off"], p["a_size"], p["d_off"], data_len,
                            p["t"][0], p["t"][1], p["feat"]))
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    try:
        main()
    except ValueError as e:
        sys.exit("aux-repeat.py: %s" % e)
