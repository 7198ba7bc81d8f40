#!/usr/bin/env python3
"""guest-threads-check.py - guest threads of vmtrace script against perf script
and the guest's switch records (tests/t0102).

    guest-threads-check.py PERF_OUT VMTRACE_OUT SWITCHES

PERF_OUT, VMTRACE_OUT: `perf script` / `vmtrace script` of an injected
per-CPU recording, --itrace=be -F comm,tid,cpu,time,ip,sym,symoff,dso,addr,
machine_pid,vcpu; SWITCHES: `perf script --show-switch-events --itrace= --ns
-F+machine_pid,+vcpu` of it (the guest's switch records, in host time).

1. Per host CPU the lines are the same, time aside, except lines whose
   guest thread differs because the two decoders estimate a branch's time
   differently: such a line must lie within SLACK us of a guest switch-in
   on its vCPU (and the rest of the line be the same).
2. Each tool's guest lines name the guest thread that the switch records
   put on that vCPU at the line's own time (lines within 1 us of a switch
   aside: times are printed in us), "VM: 4000 VCPU:N" included.
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
            errors.append(re.search(r' ip (0x[0-9a-f]+)', raw)[1])
            continue
        m = LINE.match(raw)
        if not m:
            raise SystemExit('%s: unexpected line: %s' % (path, raw))
        per_cpu[int(m['cpu'])].append(m)
    return per_cpu, errors


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    perf, perr = load(sys.argv[1])
    vt, verr = load(sys.argv[2])
    sw = collections.defaultdict(list)          # vcpu -> [(time, comm, tid, vm)]
    for raw in open(sys.argv[3]):
        m = SWITCH.match(raw)
        if m:
            sw[int(m[2])].append((float(m[5]), m[3].strip(), int(m[4]), int(m[1])))
    times = {v: [x[0] for x in s] for v, s in sw.items()}
    ok = perr == verr
    print('# perf: %d lines, errors at %s; vmtrace: %d lines, errors at %s; %d guest switch-ins' % (
        sum(map(len, perf.values())), perr, sum(map(len, vt.values())), verr, sum(map(len, sw.values()))))

    def near_switch(vcpu, t, slack):
        ts = times.get(vcpu, [])
        i = bisect.bisect_left(ts, t - slack)
        return i < len(ts) and ts[i] <= t + slack

    boundary = guest = 0
    for cpu in sorted(set(perf) | set(vt)):
        a, b = perf[cpu], vt[cpu]
        if len(a) != len(b):
            print('cpu %d: perf %d lines, vmtrace %d' % (cpu, len(a), len(b)))
            ok = False
            continue
        for x, y in zip(a, b):
            same_rest = x['rest'] == y['rest']
            if same_rest and x.group('vm', 'vcpu', 'comm', 'tid') == y.group('vm', 'vcpu', 'comm', 'tid'):
                continue
            if same_rest and x['vcpu'] and x['vcpu'] == y['vcpu'] and near_switch(int(x['vcpu']), float(x['time']), SLACK):
                boundary += 1
                continue
            print('cpu %d differs:\n  perf:    %s\n  vmtrace: %s' % (cpu, x.string, y.string))
            ok = False
            break
    print('# %d lines differ in the guest thread only, each within %g us of a guest switch' % (boundary, SLACK * 1e6))
    for name, out in (('perf', perf), ('vmtrace', vt)):
        n = bad = 0
        for lines in out.values():
            for m in lines:
                if not m['vcpu']:
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
        print('# %s: %d guest lines checked against the switch records, %d wrong' % (name, n, bad))
        guest += n
        ok = ok and bad == 0 and n > 0
    print('agree' if ok else 'DIFFER')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
