#!/usr/bin/env python3
"""inject-check.py - check `perf script` outputs of injected recordings.

    inject-check.py cpus HOST.txt PERF.txt VMTRACE.txt QEMU_PID
        HOST.txt: perf script --show-task-events --show-switch-events --ns
        of the host recording; PERF.txt, VMTRACE.txt: perf script
        --show-task-events --show-mmap-events --show-switch-events
        -F+machine_pid,+vcpu --ns of perf inject's and vmtrace inject's
        outputs.  Every guest line's [CPU] must be the host CPU of its vCPU
        by each tool's rule:
          vmtrace: the CPU of the vCPU thread's last IN switch record at or
                   before the event (before its first IN: where its first
                   OUT takes it off);
          perf:    the CPU of the last IN record *whose previous task* is
                   the vCPU thread, before the event (0 before any) - perf
                   6.1's quirk; an IN record at the event's very time may
                   count or not (perf orders equal times by its queues).
        Prints how many guest records the two rules place differently.

    inject-check.py times GUEST.txt PERF.txt VMTRACE.txt OFFSET GSHIFT GMULT HSHIFT HMULT [RATIO FRAC]
        GUEST.txt: perf script --show-task-events ... --ns of the guest file.
        Every guest record's host time in VMTRACE.txt must be the exact
        integer conversion, in PERF.txt perf's: the host TSC through a
        double.  GMULT may be MULT@ZERO: the guest's TIME_CONV time_zero
        (a real guest's; perf-edit.py's files have 0).  Prints how many differ, and the largest difference.
        With TSC scaling (guest = (host * RATIO >> FRAC) + OFFSET) the exact
        host TSC is the smallest that scales to the guest's; perf divides
        by the double RATIO / 2^FRAC and truncates.

    inject-check.py vcpu-times GUEST.txt OUT.txt OFF0,OFF1,... GSHIFT GMULT HSHIFT HMULT
        Per vCPU offsets (vCPU v: the v-th, as synth's truth lists them):
        every guest record of OUT.txt (either tool's output) must be at the
        exact integer conversion with its vCPU's offset.  Prints, per vCPU,
        how many records are exact and the largest difference in ns (and
        in host TSC ticks); exit 1 when any record is not exact.

    inject-check.py raw PERF.data VMTRACE.data
        The guest records of both outputs (cpumode GUEST_KERNEL/USER), byte
        for byte, as multisets, the CPU of their sample-id trailer aside
        (sample_type TID|TIME|CPU|IDENTIFIER: the CPU is 16 bytes from the
        end).  Prints how many.
"""
import collections
import os
import re
import struct
import sys

LINE = re.compile(r"^(?:VM: (\d+) VCPU:(\d+)\s+)?(.*?)\s+(\d+) \[(\d+)\]\s+(\d+)\.(\d+): (.*)$")
SWITCH = re.compile(r"PERF_RECORD_SWITCH_CPU_WIDE (IN|OUT)\s.*pid/tid:\s*(\d+)/(\d+)")
COMM = re.compile(r"PERF_RECORD_COMM: CPU (\d+)/KVM:(\d+)/(\d+)")
M64 = 2**64 - 1


def lines(path):
    out = []
    for l in open(path, errors="replace"):
        m = LINE.match(l.rstrip("\n"))
        if m:
            vm, vcpu, comm, tid, cpu, s, ns, rest = m.groups()
            out.append(dict(guest=vm is not None, vcpu=int(vcpu or -1), comm=comm.strip(), tid=int(tid),
                            cpu=int(cpu), time=int(s) * 10**9 + int(ns), rest=rest.rstrip()))
    return out


def host_switches(path, pid):
    vcpu_tid, sw = {}, []
    for e in lines(path):
        c = COMM.search(e["rest"])
        if c and int(c.group(2)) == pid:
            vcpu_tid[int(c.group(1))] = int(c.group(3))
        s = SWITCH.search(e["rest"])
        if s:
            sw.append((e["time"], s.group(1) == "OUT", e["tid"], e["cpu"], int(s.group(2)), int(s.group(3))))
    sw.sort()
    return vcpu_tid, sw


def rule_vmtrace(sw, tid, t):
    ins = [s for s in sw if not s[1] and s[2] == tid]
    outs = [s for s in sw if s[1] and s[2] == tid]
    before = [s for s in ins if s[0] <= t]
    if before:
        return before[-1][3]
    if outs:
        return outs[0][3]
    return ins[0][3] if ins else 0


def rule_perf(sw, pid, tid, t, at=False):
    """perf's CPU at t; at=True: with an IN record AT t counted (perf's
    order of records with equal times is its queue's, not the time's)."""
    cpu = 0
    for s in sw:
        if s[0] > t or (s[0] == t and not at):
            break
        if not s[1] and s[4] == pid and s[5] == tid:
            cpu = s[3]
    return cpu


def perf_cpus(sw, pid, tid, t):
    return {rule_perf(sw, pid, tid, t), rule_perf(sw, pid, tid, t, True)}


def cpus(host, perf, ours, pid):
    pid = int(pid)
    vcpu_tid, sw = host_switches(host, pid)
    bad = 0
    differ = total = 0
    example = None
    for name, path, rule in (("perf", perf, lambda v, t: perf_cpus(sw, pid, vcpu_tid[v], t)),
                             ("vmtrace", ours, lambda v, t: {rule_vmtrace(sw, vcpu_tid[v], t)})):
        for e in lines(path):
            if not e["guest"]:
                continue
            want = rule(e["vcpu"], e["time"])
            if e["cpu"] not in want:
                bad += 1
                if bad <= 5:
                    print("# %s: vCPU %d at %d ns shows CPU %d, its rule says %s: %s"
                          % (name, e["vcpu"], e["time"], e["cpu"], " or ".join(map(str, sorted(want))),
                             e["rest"][:60]))
            if name == "vmtrace":
                total += 1
                p = rule_perf(sw, pid, vcpu_tid[e["vcpu"]], e["time"])
                if e["cpu"] not in perf_cpus(sw, pid, vcpu_tid[e["vcpu"]], e["time"]):
                    differ += 1
                    example = example or (e, p)
    print("# %d of %d guest records are on another host CPU in perf's output than in vmtrace's" % (differ, total))
    if example:
        e, p = example
        print("# e.g. vCPU %d at %d ns (%s): vmtrace CPU %d, perf CPU %d"
              % (e["vcpu"], e["time"], e["rest"][:40], e["cpu"], p))
    sys.exit(1 if bad or not total else 0)


def to_tsc(ns, shift, mult, zero=0):
    ns = (ns - zero) & M64
    return ((ns // mult) << shift) + ((ns % mult) << shift) // mult


def to_time(tsc, shift, mult):
    return (tsc >> shift) * mult + (((tsc & ((1 << shift) - 1)) * mult) >> shift)


def keyed(path, guest_only):
    out = []
    for e in lines(path):
        if guest_only and not e["guest"]:
            continue
        out.append(((e["comm"], e["tid"], e["rest"]), e["time"]))
    out.sort()
    return out


def times(guest, perf, ours, off, gs, gm, hs, hm, ratio="0", frac="48"):
    gm, _, gz = gm.partition("@")
    off, gs, gm, gz, hs, hm = int(off, 0), int(gs), int(gm), int(gz or "0"), int(hs), int(hm)
    ratio, frac = int(ratio, 0), int(frac)
    g, p, v = keyed(guest, False), keyed(perf, True), keyed(ours, True)
    if not (len(g) == len(p) == len(v)) or [k for k, _ in g] != [k for k, _ in v] or \
            [k for k, _ in g] != [k for k, _ in p]:
        print("# the outputs do not hold the guest's records (%d, %d, %d)" % (len(g), len(p), len(v)))
        sys.exit(1)
    bad = differ = worst = 0
    example = None
    for (k, gt), (_, pt), (_, vt) in zip(g, p, v):
        if gt == 0:
            exact = rounded = htsc = 0
        else:
            d = (to_tsc(gt, gs, gm, gz) - off) & M64
            if ratio:
                htsc = -(-(d << frac) // ratio)
                ptsc = int(float(d) / (ratio / 2.0**frac))
            else:
                htsc, ptsc = d, int(float(d))
            exact = to_time(htsc, hs, hm)
            rounded = to_time(ptsc, hs, hm)
        if vt != exact or pt != rounded:
            bad += 1
            if bad <= 5:
                print("# guest %d ns: vmtrace %d (exact %d), perf %d (through a double %d)" % (gt, vt, exact, pt, rounded))
        if pt != vt:
            differ += 1
            worst = max(worst, abs(pt - vt))
            if not example:
                example = (gt, htsc, vt, pt)
    print("# %d of %d guest records: perf's host time differs from the exact one, by up to %d ns" % (differ, len(g), worst))
    if example:
        print("# e.g. guest time %d ns = host TSC %#x: exact host time %d ns, perf %d ns" % example)
    sys.exit(1 if bad else 0)


def vcpu_times(guest, out, offs, gs, gm, hs, hm):
    offs = [int(o, 0) for o in offs.split(",")]
    gs, gm, hs, hm = int(gs), int(gm), int(hs), int(hm)
    # keyed by vCPU (the guest record's CPU), tid and record, not comm: perf
    # names a thread by the COMMs before each record, and where the vCPUs'
    # offsets differ the injected order is not the guest file's (a thread's
    # records on two vCPUs cross); within one vCPU the order is kept, so
    # equal records pair up in time order on both sides
    g = sorted(((e["cpu"], e["tid"], e["rest"]), e["time"]) for e in lines(guest))
    o = sorted(((e["vcpu"], e["tid"], e["rest"]), e["time"], e["vcpu"]) for e in lines(out) if e["guest"])
    if [k for k, _ in g] != [k for k, _, _ in o]:
        print("# the output does not hold the guest's records (%d, %d)" % (len(g), len(o)))
        sys.exit(1)
    stat = {}
    for (k, gt), (_, t, v) in zip(g, o):
        exact = to_time((to_tsc(gt, gs, gm) - offs[v]) & M64, hs, hm) if gt else 0
        n, ok, diffs = stat.get(v, (0, 0, set()))
        stat[v] = (n + 1, ok + (t == exact), diffs | {t - exact})
    bad = 0
    for v in sorted(stat):
        n, ok, diffs = stat[v]
        bad += n - ok
        print("# vCPU %d (offset %#x): %d of %d guest records at the exact time, differences %d..%d ns"
              % (v, offs[v], ok, n, min(diffs), max(diffs)))
    sys.exit(1 if bad or not stat else 0)


def guest_records(path):
    if os.path.isdir(path):
        path = os.path.join(path, "data")
    buf = open(path, "rb").read()
    d_off, d_size = struct.unpack_from("<QQ", buf, 40)
    pos, out = d_off, collections.Counter()
    while pos < d_off + d_size:
        typ, misc, size = struct.unpack_from("<IHH", buf, pos)
        rec = bytearray(buf[pos:pos + size])
        pos += size + (struct.unpack_from("<Q", buf, pos + 8)[0] if typ == 71 else 0)
        if typ < 64 and misc & 7 in (4, 5):
            rec[size - 16:size - 12] = b"CPU?"
            out[bytes(rec)] += 1
    return out


def raw(perf, ours):
    a, b = guest_records(perf), guest_records(ours)
    print("# %d guest records in perf's output, %d in vmtrace's, %d differ (CPU aside)"
          % (sum(a.values()), sum(b.values()), sum(((a - b) + (b - a)).values())))
    sys.exit(0 if a == b and a else 1)


if __name__ == "__main__":
    if sys.argv[1] == "cpus":
        cpus(*sys.argv[2:])
    elif sys.argv[1] == "times":
        times(*sys.argv[2:])
    elif sys.argv[1] == "vcpu-times":
        vcpu_times(*sys.argv[2:])
    elif sys.argv[1] == "raw":
        raw(*sys.argv[2:])
    else:
        sys.exit(__doc__)
