#!/usr/bin/env python3
"""perf-clock-check.py DUMP: check a recording's TIME_CONV against the
kernel's perf clock, from `perf report -D` output.

Each PERF_RECORD_AUXTRACE's reference is the TSC when vmtrace wrote it.
vmtrace drains, each round, the trace rings (writing AUXTRACE records), then
the sideband rings, then FINISHED_ROUND.  So sideband records of earlier
rounds were made by the kernel before the reference was taken, and those of
later rounds after it.  Converted with the recording's TIME_CONV, every
reference must fall between them (5 ms slack)."""
import re, sys
d = open(sys.argv[1]).read()
shift = int(re.search(r'\.\.\. Time Shift +(\d+)', d).group(1))
mult = int(re.search(r'\.\.\. Time Muliplier +(\d+)', d).group(1))
zero = int(re.search(r'\.\.\. Time Zero +(\d+)', d).group(1))


def conv(t):
    return (zero + (t >> shift) * mult + (((t & ((1 << shift) - 1)) * mult) >> shift)) % 2**64


ev = {}
for m in re.finditer(r'^\d+ (\d+) (0x[0-9a-f]+) \[0x[0-9a-f]+\]: PERF_RECORD_(SWITCH|COMM)', d, re.M):
    if int(m.group(1)):
        ev[int(m.group(2), 16)] = ('sb', int(m.group(1)))
for m in re.finditer(r'(0x[0-9a-f]+) \[0x[0-9a-f]+\]: PERF_RECORD_AUXTRACE .* ref: (0x[0-9a-f]+)', d):
    ev[int(m.group(1), 16)] = ('aux', conv(int(m.group(2), 16)))
for m in re.finditer(r'(0x[0-9a-f]+) \[0x8\]: PERF_RECORD_FINISHED_ROUND', d):
    ev[int(m.group(1), 16)] = ('round', 0)
rnd, aux, sb = 0, [], []
for off in sorted(ev):
    k, t = ev[off]
    if k == 'round':
        rnd += 1
    elif k == 'aux':
        aux.append((rnd, t))
    else:
        sb.append((rnd, t))
worst, pairs = 0, 0
for r, t in aux:
    before = [s for q, s in sb if q < r]
    after = [s for q, s in sb if q > r]
    if before:
        worst, pairs = max(worst, max(before) - t), pairs + 1
    if after:
        worst, pairs = max(worst, t - min(after)), pairs + 1
assert pairs >= 4, ('too few bracketed buffers', len(aux), len(sb))
assert worst < 5e6, ('a buffer reference converts %.1f ms outside its sideband bracket' % (worst / 1e6))
