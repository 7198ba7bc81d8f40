#!/usr/bin/env python3
"""script-compare.py - vmtrace script against perf script and the ground truth.

    tests/script-compare.py PERF_OUT VMTRACE_OUT BRANCHES [--per-cpu]

PERF_OUT: `perf script --itrace=be -F comm,tid,cpu[,time],ip,sym,symoff,dso,addr
--guestkallsyms ...`; VMTRACE_OUT: `vmtrace script` on the same file;
BRANCHES: `vmtrace synth --branches` (QUEUE TID KIND FROM TO WHERE VCPU).

1. vmtrace = perf: per thread (per CPU and thread with --per-cpu) the lines
   are the same - comm, tid, cpu, from/to address, symbol+offset, dso, guest
   marking - time aside (each decoder estimates it in its own way); a
   unified diff of the first thread that differs otherwise.
2. each = the ground truth: per thread the (from, to) of every branch, a VM
   entry or exit (perf's two lines "X => 0", "0 => Y") taken as one X => Y.
Decode errors count as differences.  Exit 0 when all agree.
"""
import collections
import difflib
import re
import sys

LINE = re.compile(r'^(?P<comm>.{16}) +(?P<tid>-?\d+) \[\s*(?P<cpu>-?\d+)\] (?: *\d+\.\d+:)? +'
                  r'(?P<from>[0-9a-f]+) .*? => +(?P<to>[0-9a-f]+) ')


def load(path, per_cpu):
    lines, pairs, errors = collections.defaultdict(list), collections.defaultdict(list), 0
    for raw in open(path, errors='replace'):
        raw = raw.rstrip('\n')
        if 'instruction trace error' in raw:
            errors += 1
            continue
        m = LINE.match(raw)
        if not m:
            raise SystemExit('%s: unexpected line: %s' % (path, raw))
        key = (int(m['cpu']) if per_cpu else -1, int(m['tid']))
        lines[key].append(re.sub(r'^(.{16} +-?\d+ \[[-\d]+\]) +\d+\.\d+:', r'\1', raw))
        pairs[key].append((int(m['from'], 16), int(m['to'], 16)))
    return lines, pairs, errors


def load_truth(path, per_cpu):
    pairs = collections.defaultdict(list)
    for raw in open(path):
        if raw.startswith('#'):
            continue
        f = raw.split()
        pairs[(int(f[0]) if per_cpu else -1, int(f[1]))].append((int(f[3], 16), int(f[4], 16)))
    return pairs


def joined(seq):
    """X => 0, 0 => Y (a VM entry/exit, trace end + start) as X => Y."""
    out, i = [], 0
    while i < len(seq):
        if seq[i][1] == 0 and i + 1 < len(seq) and seq[i + 1][0] == 0:
            out.append((seq[i][0], seq[i + 1][1]))
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    per_cpu = '--per-cpu' in sys.argv
    if len(args) != 3:
        raise SystemExit(__doc__)
    plines, ppairs, perr = load(args[0], per_cpu)
    vlines, vpairs, verr = load(args[1], per_cpu)
    truth = load_truth(args[2], per_cpu)
    ok = perr == 0 and verr == 0
    print('perf: %d lines, %d errors; vmtrace: %d lines, %d errors; truth: %d branches' %
          (sum(map(len, plines.values())), perr, sum(map(len, vlines.values())), verr,
           sum(map(len, truth.values()))))
    for key in sorted(set(plines) | set(vlines)):
        if plines[key] != vlines[key]:
            ok = False
            print('vmtrace differs from perf for cpu/tid %s:' % (key,))
            diff = difflib.unified_diff(plines[key], vlines[key], 'perf', 'vmtrace', lineterm='', n=2)
            for n, d in enumerate(diff):
                if n > 40:
                    print('...')
                    break
                print(d)
            break
    for name, pairs in (('perf', ppairs), ('vmtrace', vpairs)):
        for key in sorted(set(pairs) | set(truth)):
            got, want = joined(pairs[key]), joined(truth[key])
            if got != want:
                ok = False
                i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                print('%s differs from the ground truth for cpu/tid %s at branch %d of %d/%d' %
                      (name, key, i, len(got), len(want)))
                break
    print('agree' if ok else 'DIFFER')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
