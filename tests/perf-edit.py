#!/usr/bin/env python3
"""perf-edit.py - rewrite a PERFILE2 perf.data for the inject tests.

    perf-edit.py IN OUT OP [ARGS]...

Operations (one per run):
  time-conv SHIFT MULT ZERO CAP   insert a TIME_CONV record (extended layout,
                                  cap_user_time_zero = CAP) at the start of
                                  the data section, replacing any there was
  drop TYPE                       remove every record of TYPE (e.g. 69 ID_INDEX)
  id-index-cpu CPU                set the cpu of every ID_INDEX entry
  no-ids                          empty every attr's ids array
  no-sample-id-all                clear sample_id_all in every attr
  kernel-mmap START LEN           the kernel's MMAP ([kernel.kallsyms]_text):
                                  another start (= pgoff) and length - the
                                  kernel of a kcore_dir standing in for the
                                  guest's
  build-id MODE PID HEX NAME [nosize]
                                  add a HEADER_BUILD_ID entry (the feature
                                  made if missing): cpumode MODE (1 kernel,
                                  4 guest kernel), pid, build id (at most 20
                                  bytes), file name (e.g.
                                  "[guest.kernel.kallsyms]"); nosize: without
                                  MISC_BUILD_ID_SIZE (perf before it: 20
                                  bytes, zero-padded)
  aux-untruncate                  clear PERF_AUX_FLAG_TRUNCATED in every
                                  PERF_RECORD_AUX (the same data, no loss
                                  said)
  no-build-ids                    remove the HEADER_BUILD_ID feature (a
                                  real perf record has the kernel's entry
                                  only when a sample hit the kernel)
  sideband SCRIPT BASE            the guest's task sideband (COMM, FORK,
                                  EXIT, SWITCH, MMAP2) and samples replaced
                                  by SCRIPT's records, in its order: lines
                                  "TICKS CPU comm PID TID NAME [exec]",
                                  "TICKS CPU fork PID PPID TID PTID",
                                  "TICKS CPU in|out PID TID OTHER_PID OTHER_TID",
                                  "TICKS CPU mmap2 PID TID START LEN PGOFF PATH [BUILDID]"
                                  (an executable user mapping, with the
                                  file's build id in the record if given),
                                  "TICKS CPU lost ID|id COUNT" (id: the
                                  CPU's sample id),
                                  "TICKS CPU ksymbol ADDR LEN TYPE NAME"
                                  (TYPE 1 BPF, 2 OOL),
                                  "TICKS CPU text_poke ADDR OLDHEX NEWHEX"
                                  (CPU-wide switches: in names the task
                                  switched in, out the one switched out);
                                  a record's time is the file's TIME_CONV of
                                  the TSC BASE + TICKS, its sample id that of
                                  a switch record of CPU in the file

A stand-in for what a guest's perf would write: this host's kernel exports
no TSC conversion (cap_user_time_zero 0 in a VM), so the tests give a real
host recording the TIME_CONV a no-kvmclock guest would have.
"""
import struct
import sys

HDR = struct.Struct("<8sQQQQQQQQ32s")


def parse(buf):
    (magic, size, attr_size, a_off, a_size, d_off, d_size,
     t_off, t_size, feat) = HDR.unpack_from(buf, 0)
    assert magic == b"PERFILE2", "not a PERFILE2 file"
    recs = []
    pos = d_off
    while pos < d_off + d_size:
        typ, misc, rsize = struct.unpack_from("<IHH", buf, pos)
        assert rsize >= 8
        extra = 0
        if typ == 71:    # AUXTRACE: payload follows
            extra = struct.unpack_from("<Q", buf, pos + 8)[0]
        recs.append(bytearray(buf[pos:pos + rsize + extra]))
        pos += rsize + extra
    bits = int.from_bytes(feat, "little")
    table = d_off + d_size
    feats = []
    n = 0
    for bit in range(256):
        if bits >> bit & 1:
            off, sz = struct.unpack_from("<QQ", buf, table + 16 * n)
            feats.append((bit, buf[off:off + sz]))
            n += 1
    return dict(head=bytearray(buf[:d_off]), attr_size=attr_size,
                a_off=a_off, a_size=a_size, d_off=d_off, t=(t_off, t_size),
                feat=feat, recs=recs, feats=feats)


def auxtrace_index(p):
    """HEADER_AUXTRACE: the AUXTRACE records' offsets where they are now."""
    pos, offs = p["d_off"], []
    for r in p["recs"]:
        if struct.unpack_from("<I", r)[0] == 71:
            offs.append(pos)
        pos += len(r)
    for i, (bit, f) in enumerate(p["feats"]):
        if bit == 18:
            f = bytearray(f)
            nr = struct.unpack_from("<Q", f)[0]
            assert nr == len(offs), "AUXTRACE index does not match the records"
            for k, off in enumerate(offs):
                struct.pack_into("<Q", f, 8 + 16 * k, off)
            p["feats"][i] = (bit, bytes(f))


def write(p, path):
    auxtrace_index(p)
    data = b"".join(p["recs"])
    d_off = p["d_off"]
    out = bytearray(p["head"])
    out += data
    table = len(out)
    out += b"\0" * (16 * len(p["feats"]))
    for i, (_, f) in enumerate(p["feats"]):
        struct.pack_into("<QQ", out, table + 16 * i, len(out), len(f))
        out += f
    HDR.pack_into(out, 0, b"PERFILE2", 104, p["attr_size"], p["a_off"],
                  p["a_size"], d_off, len(data), p["t"][0], p["t"][1],
                  p["feat"])
    with open(path, "wb") as f:
        f.write(out)


def attrs(p):
    n = p["a_size"] // p["attr_size"]
    return [p["a_off"] + i * p["attr_size"] for i in range(n)]


def sample_types(p):
    """identifier -> the sample_type of its attr"""
    out = {}
    for a in attrs(p):
        st = struct.unpack_from("<Q", p["head"], a + 24)[0]
        off, size = struct.unpack_from("<QQ", p["head"], a + p["attr_size"] - 16)
        for k in range(size // 8):
            out[struct.unpack_from("<Q", p["head"], off + 8 * k)[0]] = st
    return out


def tsc_to_time(p, tsc):
    tc = [r for r in p["recs"] if struct.unpack_from("<I", r)[0] == 79]
    assert tc, "sideband: no TIME_CONV (time-conv first)"
    shift, mult, zero = struct.unpack_from("<QQQ", tc[0], 8)
    return (tsc >> shift) * mult + (((tsc & ((1 << shift) - 1)) * mult) >> shift) + zero


TID, TIME, CPU, IDENTIFIER = 1 << 1, 1 << 2, 1 << 7, 1 << 16


def trailer(st, ident, pid, tid, time, cpu):
    """the sample id of a non-sample record (--sample-identifier files)"""
    assert st & IDENTIFIER and not st & ~(TID | TIME | CPU | IDENTIFIER | 1 | 1 << 8), hex(st)
    t = b""
    if st & TID:
        t += struct.pack("<ii", pid, tid)
    if st & TIME:
        t += struct.pack("<Q", time)
    if st & CPU:
        t += struct.pack("<II", cpu, 0)
    return t + struct.pack("<Q", ident)


def sideband(p, path, base):
    types = sample_types(p)
    ident = {}
    for r in p["recs"]:
        if struct.unpack_from("<I", r)[0] == 15:
            i = struct.unpack_from("<Q", r, len(r) - 8)[0]
            ident.setdefault(struct.unpack_from("<I", r, len(r) - 16)[0], i)
    p["recs"] = [r for r in p["recs"] if struct.unpack_from("<I", r)[0] not in (3, 4, 7, 9, 10, 14, 15)]
    for line in open(path):
        w = line.split()
        if not w or w[0].startswith("#"):
            continue
        time, cpu, kind = tsc_to_time(p, base + int(w[0], 0)), int(w[1]), w[2]
        i = ident[cpu]
        if kind == "comm":
            pid, tid = int(w[3]), int(w[4])
            name = w[5].encode() + b"\0"
            name += b"\0" * (-len(name) % 8)
            body, typ, misc, who = struct.pack("<ii", pid, tid) + name, 3, 0x2000 if w[6:] == ["exec"] else 0, (pid, tid)
        elif kind == "fork":
            pid, ppid, tid, ptid = (int(x) for x in w[3:7])
            body, typ, misc, who = struct.pack("<iiiiQ", pid, ppid, tid, ptid, time), 7, 0, (pid, tid)
        elif kind in ("in", "out"):
            pid, tid, opid, otid = (int(x) for x in w[3:7])
            body, typ, misc, who = struct.pack("<ii", opid, otid), 15, 0 if kind == "in" else 0x2000, (pid, tid)
        elif kind == "mmap2":
            pid, tid, start, length, pgoff = (int(x, 0) for x in w[3:8])
            name = w[8].encode() + b"\0"
            name += b"\0" * (-len(name) % 8)
            if w[9:]:      # with the file's build id (PERF_RECORD_MISC_MMAP_BUILD_ID)
                bid = bytes.fromhex(w[9])
                body = struct.pack("<iiQQQBxH20sII", pid, tid, start, length, pgoff, len(bid), 0, bid, 5, 2) + name
                misc = 2 | 0x4000
            else:
                body = struct.pack("<iiQQQIIQQII", pid, tid, start, length, pgoff, 8, 1, 4242, 0, 5, 2) + name
                misc = 2
            typ, who = 10, (pid, tid)
        elif kind == "lost":
            lid = i if w[3] == "id" else int(w[3], 0)     # "id": CPU's sample id
            body, typ, misc, who = struct.pack("<QQ", lid, int(w[4], 0)), 2, 0, (0, 0)
        elif kind == "ksymbol":
            name = w[6].encode() + b"\0"
            name += b"\0" * (-len(name) % 8)
            body = struct.pack("<QIHH", int(w[3], 0), int(w[4], 0), int(w[5], 0), 0) + name
            typ, misc, who = 17, 0, (0, 0)
        elif kind == "text_poke":
            old, new = bytes.fromhex(w[4]), bytes.fromhex(w[5])
            body = struct.pack("<QHH", int(w[3], 0), len(old), len(new)) + old + new
            body += b"\0" * (-len(body) % 8)
            typ, misc, who = 20, 0, (0, 0)
        else:
            sys.exit("perf-edit.py: sideband: unknown record " + kind)
        body += trailer(types[i], i, who[0], who[1], time, cpu)
        p["recs"].append(bytearray(struct.pack("<IHH", typ, misc if kind == "mmap2" else misc | 1, 8 + len(body)) + body))


def main():
    src, dst, op, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    p = parse(open(src, "rb").read())
    if op == "time-conv":
        shift, mult, zero, cap = (int(x, 0) for x in args)
        rec = struct.pack("<IHHQQQQQBB6x", 79, 0, 56, shift, mult, zero,
                          0, 0, cap, 0)
        p["recs"] = [rec] + [r for r in p["recs"] if r[:4] != b"O\0\0\0"]
    elif op == "drop":
        t = int(args[0])
        p["recs"] = [r for r in p["recs"]
                     if struct.unpack_from("<I", r)[0] != t]
    elif op == "id-index-cpu":
        cpu = int(args[0]) & (2**64 - 1)
        for r in p["recs"]:
            if struct.unpack_from("<I", r)[0] == 69:
                nr = struct.unpack_from("<Q", r, 8)[0]
                for i in range(nr):
                    struct.pack_into("<Q", r, 16 + 32 * i + 16, cpu)
    elif op == "no-ids":
        for a in attrs(p):
            struct.pack_into("<Q", p["head"], a + p["attr_size"] - 8, 0)
    elif op == "no-sample-id-all":
        for a in attrs(p):
            flags = struct.unpack_from("<Q", p["head"], a + 40)[0]
            struct.pack_into("<Q", p["head"], a + 40, flags & ~(1 << 18))
    elif op == "kernel-mmap":
        start, length = (int(x, 0) for x in args)
        for r in p["recs"]:
            if struct.unpack_from("<I", r)[0] == 1 and b"[kernel.kallsyms]_text" in r[40:]:
                struct.pack_into("<QQQ", r, 16, start, length, start)
    elif op == "build-id":
        mode, pid, hexid, name = int(args[0]), int(args[1]), bytes.fromhex(args[2]), args[3].encode() + b"\0"
        sized = args[4:] != ["nosize"]
        assert len(hexid) <= 20, "build-id: at most 20 bytes"
        name += b"\0" * (-(36 + len(name)) % 8)
        entry = struct.pack("<IHHi", 0, mode | (1 << 15 if sized else 0), 36 + len(name), pid)
        entry += hexid.ljust(20, b"\0") + struct.pack("<BBH", len(hexid) if sized else 0, 0, 0) + name
        feats = dict(p["feats"])
        feats[2] = bytes(feats.get(2, b"")) + entry
        p["feats"] = sorted(feats.items())
        bits = int.from_bytes(p["feat"], "little") | 1 << 2
        p["feat"] = bits.to_bytes(32, "little")
    elif op == "aux-untruncate":
        for r in p["recs"]:
            if struct.unpack_from("<I", r)[0] == 11:
                flags = struct.unpack_from("<Q", r, 24)[0]
                struct.pack_into("<Q", r, 24, flags & ~1)
    elif op == "no-build-ids":
        p["feats"] = [(bit, f) for bit, f in p["feats"] if bit != 2]
        bits = int.from_bytes(p["feat"], "little") & ~(1 << 2)
        p["feat"] = bits.to_bytes(32, "little")
    elif op == "sideband":
        sideband(p, args[0], int(args[1], 0))
    else:
        sys.exit("perf-edit.py: unknown operation " + op)
    write(p, dst)


if __name__ == "__main__":
    main()
