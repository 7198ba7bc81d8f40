#!/usr/bin/env python3
"""time-check.py - branch times of vmtrace script and perf script against synth's truth.

    tests/time-check.py BRANCHES VMTRACE_JSON [PERF_OUT] [--per-cpu] [--truth-ticks N] [--perf-ticks N]
                        [--order-only]

BRANCHES: `vmtrace synth --branches` (its last column: the host TSC when the
branch was taken); VMTRACE_JSON: `vmtrace script --itrace=b --json` on the
same (corrected) recording; PERF_OUT: `perf script --itrace=be --ns -F
tid,cpu,time,ip,addr` on it.  Per thread (per CPU and thread with --per-cpu):
1. time never goes backwards, in vmtrace's output and in perf's;
2. vmtrace's time of every branch is within N TSC ticks of the truth
   (--truth-ticks, default 1000), perf's too;
3. vmtrace's time of every branch is within N ticks of perf's (--perf-ticks,
   default 1000).
--order-only: only 1. (a recording whose guest time is not corrected).
Branches are matched by position per thread after joining a "X => 0" with
a following "0 => Y" (perf's two lines of a VM entry or exit; trace end and
start) in each list alike; the counts must agree.  Times compare in perf
time (ns): synth's TIME_CONV is time_mult 341, time_shift 10 (a 3 GHz TSC),
so a tick is 1024/341 ns.  Prints one summary line per check; exit 1 when a
check fails.
"""
import collections
import json
import operator
import re
import sys

sys.dont_write_bytecode = True   # no tests/__pycache__ in the source tree
from branch_lists import joined, load_truth  # noqa: E402

MULT, SHIFT = 341, 10
PERF = re.compile(r'^\s*(?P<tid>-?\d+)\s+\[\s*(?P<cpu>-?\d+)\]\s+(?P<s>\d+)\.(?P<ns>\d{9}):\s+'
                  r'(?P<from>[0-9a-f]+)\s+=>\s+(?P<to>[0-9a-f]+)')


def perf_time(tsc):
    return (tsc >> SHIFT) * MULT + (((tsc & ((1 << SHIFT) - 1)) * MULT) >> SHIFT)


def ticks(ns):
    return ns * (1 << SHIFT) / MULT


def load_json(path, per_cpu):
    per = collections.defaultdict(list)
    decode = json.JSONDecoder().raw_decode   # (json.loads's checks cost a third more, a million lines)
    for raw in open(path):
        e = decode(raw)[0]
        if e['kind'] == 'error':
            raise SystemExit('%s: a decode error: %s' % (path, raw.strip()))
        per[(e['cpu'] if per_cpu else -1, e['tid'])].append((int(e['from']['ip'], 16), int(e['to']['ip'], 16),
                                                           e['time']))
    return per


def load_perf(path, per_cpu):
    per = collections.defaultdict(list)
    for raw in open(path, errors='replace'):
        if 'instruction trace error' in raw:
            raise SystemExit('%s: a decode error: %s' % (path, raw.strip()))
        # TID [CPU] S.NS: FROM => TO (split, not PERF.match: a million lines)
        f = raw.replace('[', ' ').replace(']', ' ').split()
        if len(f) != 6 or f[4] != '=>' or not f[2].endswith(':'):
            m = PERF.match(raw)
            if not m:
                raise SystemExit('%s: unexpected line: %s' % (path, raw.strip()))
            f = [m['tid'], m['cpu'], m['s'] + '.' + m['ns'] + ':', m['from'], '=>', m['to']]
        s, _, ns = f[2][:-1].partition('.')
        try:
            if len(ns) != 9:
                raise ValueError(ns)
            per[(int(f[1]) if per_cpu else -1, int(f[0]))].append((int(f[3], 16), int(f[5], 16),
                                                                   int(s) * 10**9 + int(ns)))
        except ValueError:
            raise SystemExit('%s: unexpected line: %s' % (path, raw.strip()))
    return per


def backwards(name, per):
    """the number of backward steps and the largest (ticks)"""
    n, worst = 0, 0
    for seq in per.values():
        for a, b in zip(seq, seq[1:]):
            if b[2] < a[2]:
                n, worst = n + 1, max(worst, a[2] - b[2])
    ok = n == 0
    print('%s: %s: %d backward steps within a thread (largest %.0f ticks)' % ('ok' if ok else 'FAIL', name, n,
                                                                              ticks(worst)))
    return ok


def split(per):
    """per thread: the joined branches' (from, to) and their times, apart
    (each list joined once, compared twice)"""
    out = {}
    for key, seq in per.items():
        j = joined(seq)
        out[key] = ([x[:2] for x in j], [x[2] for x in j])
    return out


def against(name, per, ref, limit):
    """the same branches as ref per thread (split's); their times within
    limit ticks (the differences taken in ns, turned to ticks once)"""
    diffs, ok = [], True
    none = ([], [])
    for key in sorted(set(per) | set(ref)):
        (a, at), (b, bt) = per.get(key, none), ref.get(key, none)
        if a != b:
            print('FAIL: %s: thread %s: other branches (%d, %d)' % (name, key, len(a), len(b)))
            ok = False
            continue
        diffs += map(operator.sub, at, bt)
    if not diffs:
        print('FAIL: %s: no branches' % name)
        return False
    hi, lo = max(diffs), min(diffs)
    if hi != -lo:
        worst = ticks(hi if hi > -lo else lo)
    else:   # the first of the two, as max(diffs, key=abs)
        worst = ticks(hi if diffs.index(hi) < diffs.index(lo) else lo)
    mean = ticks(sum(map(abs, diffs)) / len(diffs))
    within = abs(worst) <= limit
    print('%s: %s: %d branches, |difference| mean %.1f, largest %.0f ticks (limit %d)' % (
        'ok' if ok and within else 'FAIL', name, len(diffs), mean, worst, limit))
    return ok and within


def main(argv):
    per_cpu = '--per-cpu' in argv
    order_only = '--order-only' in argv
    opts = {'--truth-ticks': 1000, '--perf-ticks': 1000}
    args = []
    i = 0
    while i < len(argv):
        if argv[i] in opts:
            opts[argv[i]] = int(argv[i + 1])
            i += 2
            continue
        if argv[i] not in ('--per-cpu', '--order-only'):
            args.append(argv[i])
        i += 1
    truth = split(load_truth(args[0], per_cpu, lambda f: perf_time(int(f[9]))))
    vt = load_json(args[1], per_cpu)
    ok = backwards('vmtrace', vt)
    vt = split(vt)
    if not order_only:
        ok = against('vmtrace - truth', vt, truth, opts['--truth-ticks']) and ok
    if len(args) > 2:
        pf = load_perf(args[2], per_cpu)
        ok = backwards('perf', pf) and ok
        pf = split(pf)
    if len(args) > 2 and not order_only:
        ok = against('perf - truth', pf, truth, opts['--truth-ticks']) and ok
        ok = against('vmtrace - perf', vt, pf, opts['--perf-ticks']) and ok
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
