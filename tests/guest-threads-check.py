#!/usr/bin/env python3
"""guest-threads-check.py - guest threads of vmtrace script against perf script
and the guest's switch records (tests/t0102).

    guest-threads-check.py PERF_OUT VMTRACE_OUT SWITCHES NVCPUS

PERF_OUT, VMTRACE_OUT: `perf script` / `vmtrace script` of an injected
per-CPU recording, --itrace=be -F comm,tid,cpu,time,ip,sym,symoff,dso,addr,
machine_pid,vcpu; SWITCHES: `perf script --show-switch-events --itrace= --ns
-F+machine_pid,+vcpu` of it (the guest's switch records, in host time);
NVCPUS: the guest's vCPUs (one without switch records has no guest thread).

1. Per host CPU the lines are the same, except lines whose guest thread
   differs because the two decoders estimate a branch's time differently:
   such a line must lie within SLACK us of a guest switch-in on its vCPU
   (and the rest of the line be the same).  And except perf 6.1's quirk on
   a vCPU before its first guest switch-in: perf prints the VM entry's
   guest side as thread -1 without symbols ("0 [unknown] => ADDR
   [unknown]"), then "Failed to get instruction" (no guest thread, no guest
   maps) and loses every line up to its next sync point; vmtrace prints
   the same entry line (thread -1, ADDR's symbol) and decodes on, guest
   lines as thread -1 - the lines perf lost are counted.
2. Each tool's guest lines name the guest thread that the switch records
   put on that vCPU at the line's own time (lines within 1 us of a switch
   aside: times are printed in us), "VM: 4000 VCPU:N" included; guest
   lines of thread -1 (no "VM:") lie before a vCPU's first switch-in.
Prints counts; exit 0 when all holds.
"""
import bisect
import collections
import re
import sys

SLACK = 3e-6
LINE = re.compile(r'^(?:VM: *(?P<vm>\d+) VCPU:(?P<vcpu>\d+) )?(?P<comm>.{16}) +(?P<tid>-?\d+) \[(?P<cpu>\d+)\] +'
                  r'(?P<time>\d+\.\d+): (?P<rest>.*)$')
SWITCH = re.compile(r'^VM: *(\d+) VCPU:(\d+) +(.{16}) +(-?\d+) \[\d+\] +(\d+\.\d+): PERF_RECORD_SWITCH\S* IN ')


def load(path):
    per_cpu, errors = collections.defaultdict(list), []
    for raw in open(path, errors='replace'):
        raw = raw.rstrip('\n')
        if 'instruction trace error' in raw:
            m = re.search(r' time (\S+) .* tid (-?\d+) ip (0x[0-9a-f]+)', raw)
            errors.append((m[3], m[2], float(m[1]) if m[1] != '0' else 0.0))
            continue
        m = LINE.match(raw)
        if not m:
            raise SystemExit('%s: unexpected line: %s' % (path, raw))
        per_cpu[int(m['cpu'])].append(m)
    return per_cpu, errors


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    perf, perr = load(sys.argv[1])
    vt, verr = load(sys.argv[2])
    sw = collections.defaultdict(list)          # vcpu -> [(time, comm, tid, vm)]
    for raw in open(sys.argv[3]):
        m = SWITCH.match(raw)
        if m:
            sw[int(m[2])].append((float(m[5]), m[3].strip(), int(m[4]), int(m[1])))
    times = {v: [x[0] for x in s] for v, s in sw.items()}
    print('# perf: %d lines, errors at %s; vmtrace: %d lines, errors at %s; %d guest switch-ins' % (
        sum(map(len, perf.values())), [e[0] for e in perr], sum(map(len, vt.values())), [e[0] for e in verr], sum(map(len, sw.values()))))

    def near_switch(vcpu, t, slack):
        ts = times.get(vcpu, [])
        i = bisect.bisect_left(ts, t - slack)
        return i < len(ts) and ts[i] <= t + slack

    ok = True
    first_in = max((s[0][0] for s in sw.values()), default=0.0)
    if len(sw) < int(sys.argv[4]):
        first_in = float('inf')
    boundary = guest = quirks = lost = lost_guest = 0
    for cpu in sorted(set(perf) | set(vt)):
        a, b = perf[cpu], vt[cpu]
        i = j = 0
        while i < len(a) and j < len(b):
            x, y = a[i], b[j]
            i, j = i + 1, j + 1
            same_rest = x['rest'] == y['rest']
            if same_rest and x.group('vm', 'vcpu', 'comm', 'tid') == y.group('vm', 'vcpu', 'comm', 'tid'):
                continue
            if same_rest and x['vcpu'] and x['vcpu'] == y['vcpu'] and near_switch(int(x['vcpu']), float(x['time']), SLACK):
                boundary += 1
                continue
            if x['tid'] == y['tid'] == '-1' and x['time'] == y['time'] and float(x['time']) <= first_in and \
                    x['rest'].lstrip().startswith('0 [unknown] ([unknown]) => ') and x['rest'].split()[4] == y['rest'].split()[4]:
                # perf's quirk: vmtrace decodes on where perf stopped
                k = j
                while k < len(b) and (i == len(a) or b[k].string != a[i].string):
                    k += 1
                quirks += 1
                lost += k - j
                lost_guest += sum(1 for m in b[j:k] if m['tid'] == '-1')
                j = k
                continue
            print('cpu %d differs:\n  perf:    %s\n  vmtrace: %s' % (cpu, x.string, y.string))
            ok = False
            break
        if ok and (i, j) != (len(a), len(b)):
            print('cpu %d: perf %d lines, vmtrace %d, the same up to %d/%d' % (cpu, len(a), len(b), i, j))
            ok = False
    print('# %d lines differ in the guest thread only, each within %g us of a guest switch' % (boundary, SLACK * 1e6))
    print('# perf quirk: %d VM entries before a vCPU\'s first switch-in decoded as thread -1 and errors %s; '
          'perf lost %d lines there (%d in guest code) that vmtrace decodes' % (quirks, [e[0] for e in perr], lost, lost_guest))
    # every perf error lies in such a stretch (thread -1, before the first
    # switch-in; one stretch may hold more than one), each stretch has one
    stray = [e for e in perr if e[1] != '-1' or e[2] > first_in + 1e-6]
    if stray:
        print('perf errors outside its quirk: %s' % stray)
    ok = ok and not stray and (0 < quirks <= len(perr) if perr else quirks == 0) and not verr
    for name, out in (('perf', perf), ('vmtrace', vt)):
        n = bad = 0
        early = 0
        for lines in out.values():
            for m in lines:
                if not m['vcpu']:
                    if m['tid'] == '-1':
                        early += 1
                        bad += float(m['time']) > first_in + 1e-6
                    continue
                v, t = int(m['vcpu']), float(m['time'])
                if near_switch(v, t, 1e-6):
                    continue
                n += 1
                i = bisect.bisect_right(times.get(v, []), t)
                want = sw[v][i - 1] if i else None
                got = (m['comm'].strip(), int(m['tid']), int(m['vm']))
                if not want or got != want[1:]:
                    if not bad:
                        print('%s: %s\n  but the switch records say %s' % (name, m.string, want))
                    bad += 1
        print('# %s: %d guest lines checked against the switch records, %d of thread -1 before the '
              'first switch-in, %d wrong' % (name, n, early, bad))
        guest += n
        ok = ok and bad == 0 and n > 0
    print('agree' if ok else 'DIFFER')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
