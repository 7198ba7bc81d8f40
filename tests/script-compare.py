#!/usr/bin/env python3
"""script-compare.py - vmtrace script against perf script and the ground truth.

    tests/script-compare.py PERF_OUT VMTRACE_OUT BRANCHES [--per-cpu]
    tests/script-compare.py --calls[=ret] [--no-depth] PERF_OUT VMTRACE_OUT BRANCHES [--per-cpu]

PERF_OUT: `perf script --itrace=be -F comm,tid,cpu[,time],ip,sym,symoff,dso,addr
--guestkallsyms ...`; VMTRACE_OUT: `vmtrace script` on the same file;
BRANCHES: `vmtrace synth --branches` (QUEUE TID KIND FROM TO WHERE VCPU).

1. vmtrace = perf: per thread (per CPU and thread with --per-cpu) the lines
   are the same - comm, tid, cpu, from/to address, symbol+offset, dso, guest
   marking - time aside (each decoder estimates it in its own way); a
   unified diff of the first thread that differs otherwise.
2. each = the ground truth: per thread the (from, to) of every branch, a VM
   entry or exit (perf's two lines "X => 0", "0 => Y") taken as one X => Y
   (perf's read only where its lines differ from vmtrace's; else they are
   vmtrace's, and a difference names both).
Decode errors count as differences.  Exit 0 when all agree.

--time (not with --insns, where it does nothing): the time is compared too - each branch, call, return and power
event line's time the same as perf's, to the digit it prints (since
session 26 vmtrace times every branch as perf does); instruction lines
(--insns, and --lines' lines without " => ") and error lines keep their
time aside (vmtrace gives a block's instructions its branch's time, perf
the ones before the branch the time before the branch's packet; errors:
each decoder's own).

--calls (perf script --call-trace), --calls=ret (--call-ret-trace):
1. the same per thread, time and the trailing padding aside (perf pads to
   a column that follows the lines of all threads in print order), and
   perf's power-event lines (psb, cbr: --itrace=p) left out; --no-depth
   also sets the call depth aside (per-CPU recordings: perf's stack of a
   thread that moves between CPUs depends on how the two decoders' times
   interleave the CPUs' queues).
2. = the ground truth: per thread, the line kinds (call-ret: the flags in
   order, a VM entry or exit two lines; call: the number of lines).

--lines (any --itrace mix, e.g. bi0ns, cri0ns, p; -F with comm,tid first
and cpu with --per-cpu): the same lines per thread (per CPU and thread
with --per-cpu), time aside, instructions, branches, power events and
errors alike; no ground truth.

--insns (perf script --insn-trace): the same per thread, time aside, and
vmtrace's disassembly after the bytes set aside (perf prints bytes only);
every discontinuity of vmtrace's instruction flow per thread (per CPU
with --per-cpu, whichever thread runs; an instruction not
followed by the next one in memory) is the ground truth's next branch from
it (or, for a VM exit or interrupt, from the instruction after it or
from where a branch from it went), in the truth's order.
"""
import collections
import difflib
import re
import sys

sys.dont_write_bytecode = True   # no tests/__pycache__ in the source tree
from branch_lists import joined, load_truth  # noqa: E402

HEAD = re.compile(r'^.{16} +(-?\d+) \[\s*(-?\d+)\]$')
KEEP_TIME = '--time' in sys.argv


def load(path, per_cpu, with_pairs=True):
    """Per thread (per CPU and thread with per_cpu): the lines, time aside,
    and with_pairs the (from, to) of each.  (String methods, not regular
    expressions, on each line: the files have a million lines; a line's
    "comm tid [cpu]" head is parsed once per distinct head.)"""
    lines, pairs, errors, heads = collections.defaultdict(list), collections.defaultdict(list), 0, {}
    for raw in open(path, errors='replace'):
        raw = raw.rstrip('\n')
        if 'instruction trace error' in raw:
            errors += 1
            continue
        i = raw.find(']', 16) + 1
        head = raw[:i]
        key = heads.get(head)
        if key is None:
            m = HEAD.match(head)
            if not m:
                raise SystemExit('%s: unexpected line: %s' % (path, raw))
            key = heads[head] = (int(m[2]) if per_cpu else -1, int(m[1]))
        rest = raw[i:]
        j = rest.find(':')
        if j > 0 and rest[:j].strip().replace('.', '', 1).isdigit():
            head += rest[:j + 1] if KEEP_TIME else ''
            rest = rest[j + 1:]   # the time set aside (--time: kept in the line)
        lines[key].append(head + rest)
        if with_pairs:
            a, sep, b = rest.partition(' => ')
            try:
                pairs[key].append((int(a.split(None, 1)[0], 16), int(b.split(None, 1)[0], 16)))
            except (IndexError, ValueError):
                raise SystemExit('%s: unexpected line: %s' % (path, raw))
    return lines, pairs, errors


CALL_LINE = re.compile(r'^(?P<comm>.{16}) +(?P<tid>-?\d+) (?:\[\s*(?P<cpu>-?\d+)\] )?(?P<time> *\d+\.\d+: )?(?P<rest>.*)$')
SHOWN = {'call': {'call': ['call'], 'vmentry': ['vmentry'] * 2, 'vmexit': ['bcyh'] * 2, 'trace-end': ['tr end  async'],
                  'syscall': ['syscall'], 'async': ['hw int'], 'int': ['int']}}
SHOWN['ret'] = dict(SHOWN['call'], **{'return': ['return'], 'trace-begin': ['tr strt'], 'sysret': ['sysret'],
                                       'iret': ['iret']})


PAD = re.compile(r'\t +')


def load_calls(path, per_cpu, depth):
    lines, flags, errors = collections.defaultdict(list), collections.defaultdict(list), 0
    for raw in open(path, errors='replace'):
        raw = raw.rstrip()
        if 'instruction trace error' in raw:
            errors += 1
            continue
        m = CALL_LINE.match(raw)
        if not m or ('\t' not in raw and ('psb offs:' in raw or 'cbr:' in raw)):
            if m:
                continue
            raise SystemExit('%s: unexpected line: %s' % (path, raw))
        key = (int(m['cpu']) if per_cpu else -1, int(m['tid']))
        rest = m['rest'] if depth else PAD.sub('\t', m['rest'])
        lines[key].append(m['comm'] + ' ' + (m['time'] or '' if KEEP_TIME else '') + rest)
        flags[key].append(m['rest'].split('(')[0].strip())
    return lines, flags, errors


def calls_main(args, per_cpu, mode, depth):
    plines, _, perr = load_calls(args[0], per_cpu, depth)
    vlines, vflags, verr = load_calls(args[1], per_cpu, depth)
    want = collections.defaultdict(list)
    for raw in open(args[2]):
        if not raw.startswith('#'):
            f = raw.split()
            want[(int(f[0]) if per_cpu else -1, int(f[1]))] += SHOWN[mode].get(f[2], [])
    ok = perr == 0 and verr == 0
    print('perf: %d lines, %d errors; vmtrace: %d lines, %d errors; truth: %d lines' %
          (sum(map(len, plines.values())), perr, sum(map(len, vlines.values())), verr,
           sum(map(len, want.values()))))
    for key in sorted(set(plines) | set(vlines)):
        if plines[key] != vlines[key]:
            ok = False
            print('vmtrace differs from perf for cpu/tid %s:' % (key,))
            for n, d in enumerate(difflib.unified_diff(plines[key], vlines[key], 'perf', 'vmtrace', lineterm='', n=2)):
                if n > 40:
                    print('...')
                    break
                print(d)
            break
    for key in sorted(set(vflags) | set(want)):
        got = vflags[key] if mode == 'ret' else len(vflags[key])
        exp = want[key] if mode == 'ret' else len(want[key])
        if got != exp:
            ok = False
            print('vmtrace differs from the ground truth for cpu/tid %s (%s)' % (key, mode))
            break
    print('agree' if ok else 'DIFFER')
    return 0 if ok else 1


INSN_LINE = re.compile(r'^(?P<comm>.{16}) +(?P<tid>-?\d+) (?:\[\s*(?P<cpu>-?\d+)\] )?(?: *\d+\.\d+: )?'
                       r'(?P<rest> +(?P<ip>[0-9a-f]+) .* insn:(?P<bytes>( [0-9a-f]{2})*))(\t\t.*)?$')


def load_insns(path, per_cpu):
    lines, flow, errors = collections.defaultdict(list), collections.defaultdict(list), 0
    for raw in open(path, errors='replace'):
        raw = raw.rstrip('\n')
        if 'instruction trace error' in raw:
            errors += 1
            continue
        m = INSN_LINE.match(raw)
        if not m:
            raise SystemExit('%s: unexpected line: %s' % (path, raw))
        key = (int(m['cpu']) if per_cpu else -1, int(m['tid']))
        lines[key].append(m['comm'] + m['rest'])
        # the flow of a queue: per CPU whichever thread runs
        flow[key[0] if per_cpu else key].append((int(m['ip'], 16), len(m['bytes']) // 3))
    return lines, flow, errors


def insns_main(args, per_cpu):
    plines, _, perr = load_insns(args[0], per_cpu)
    vlines, vflow, verr = load_insns(args[1], per_cpu)
    truth = load_truth(args[2], per_cpu)
    if per_cpu:
        by_cpu = collections.defaultdict(list)
        for raw in open(args[2]):
            if not raw.startswith('#'):
                f = raw.split()
                by_cpu[int(f[0])].append((int(f[3], 16), int(f[4], 16)))
        truth = by_cpu
    ok = perr == 0 and verr == 0
    print('perf: %d instructions, %d errors; vmtrace: %d instructions, %d errors; truth: %d branches' %
          (sum(map(len, plines.values())), perr, sum(map(len, vlines.values())), verr,
           sum(map(len, truth.values()))))
    for key in sorted(set(plines) | set(vlines)):
        if plines[key] != vlines[key]:
            ok = False
            print('vmtrace differs from perf for cpu/tid %s:' % (key,))
            for n, d in enumerate(difflib.unified_diff(plines[key], vlines[key], 'perf', 'vmtrace', lineterm='', n=2)):
                if n > 40:
                    print('...')
                    break
                print(d)
            break
    for key in sorted(vflow):
        branches = [b for b in joined(truth[key]) if b[0] and b[1]]
        seq, k, bad = vflow[key], 0, None
        for (ip, n), (nip, _) in zip(seq, seq[1:]):
            if nip == ip + n:
                continue
            # the branch from ip (or, asynchronous, from the next one), or
            # one from the target of a branch from ip (a jump straight to
            # where a VM exit or interrupt then happens)
            while k < len(branches) and not (branches[k][1] == nip and (
                    branches[k][0] in (ip, ip + n) or
                    (k and branches[k - 1][1] == branches[k][0] and branches[k - 1][0] == ip))):
                k += 1
            if k == len(branches):
                bad = (ip, nip)
                break
            k += 1
        if bad:
            ok = False
            print('vmtrace: %#x => %#x of %s is no branch of the ground truth' % (bad + (key,)))
            break
    print('agree' if ok else 'DIFFER')
    return 0 if ok else 1


THREAD = re.compile(r'^\s*(?:.*?)\s+(?P<tid>-?\d+)\s+(?:\[\s*(?P<cpu>-?\d+)\])?')
ERROR = re.compile(r' instruction trace error .* cpu (?P<cpu>-?\d+) pid -?\d+ tid (?P<tid>-?\d+) ')
TIME_FIELD = re.compile(r' time \d+\.\d+ ')
TIME_COLUMN = re.compile(r' \d+\.\d+: ')


def time_aside(raw):
    """raw with its first " S.NS: " as " T: " (TIME_COLUMN.sub(' T: ', raw,
    count=1), with string methods where it ends at the first ": ")."""
    j = raw.find(': ')
    before = raw[:j] if j > 0 else ''
    ns = before.rstrip('0123456789')
    if len(ns) < len(before) and ns.endswith('.'):
        sec = ns[:-1].rstrip('0123456789')
        if len(sec) < len(ns) - 1 and sec.endswith(' '):
            return sec[:-1] + ' T: ' + raw[j + 2:]
    return TIME_COLUMN.sub(' T: ', raw, count=1)


def load_lines(path, per_cpu):
    lines, heads = collections.defaultdict(list), {}
    for raw in open(path, errors='replace'):
        raw = raw.rstrip('\n')
        # (the substring tests first: the searches are slow, a million lines
        # a file; a "comm tid [cpu]" head is parsed once per distinct head)
        if 'instruction trace error' in raw:
            m = ERROR.search(raw) or THREAD.match(raw)
            key = m and (int(m['cpu'] or -1) if per_cpu else -1, int(m['tid']))
        else:
            i = raw.find(']') + 1
            key = heads.get(raw[:i]) if i else None
            if key is None:
                m = THREAD.match(raw)
                key = m and (int(m['cpu'] or -1) if per_cpu else -1, int(m['tid']))
                if i and m and m.end() == i:
                    heads[raw[:i]] = key
        if not key:
            raise SystemExit('%s: unexpected line: %s' % (path, raw))
        if ' time ' in raw:
            raw = TIME_FIELD.sub(' time T ', raw)
        keep = KEEP_TIME and 'instruction trace error' not in raw and (
            ' => ' in raw or 'psb offs:' in raw or 'cbr:' in raw)
        lines[key].append(raw if keep else time_aside(raw))
    return lines


def lines_main(args, per_cpu):
    p, v = load_lines(args[0], per_cpu), load_lines(args[1], per_cpu)
    ok = True
    print('perf: %d lines; vmtrace: %d lines; %d threads' %
          (sum(map(len, p.values())), sum(map(len, v.values())), len(p)))
    for key in sorted(set(p) | set(v)):
        if p[key] != v[key]:
            ok = False
            print('vmtrace differs from perf for cpu/tid %s:' % (key,))
            for n, d in enumerate(difflib.unified_diff(p[key], v[key], 'perf', 'vmtrace', lineterm='', n=2)):
                if n > 40:
                    print('...')
                    break
                print(d)
            break
    print('agree' if ok and p else 'DIFFER')
    return 0 if ok and p else 1


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    if '--lines' in sys.argv and len(args) == 2:
        return lines_main(args, '--per-cpu' in sys.argv)
    if '--insns' in sys.argv and len(args) == 3:
        return insns_main(args, '--per-cpu' in sys.argv)
    per_cpu = '--per-cpu' in sys.argv
    calls = [a.split('=')[1] if '=' in a else 'call' for a in sys.argv[1:] if a.startswith('--calls')]
    if calls and len(args) == 3:
        return calls_main(args, per_cpu, calls[0], '--no-depth' not in sys.argv)
    if len(args) != 3:
        raise SystemExit(__doc__)
    # perf's branches are checked against the truth only where its lines
    # differ from vmtrace's (else they are vmtrace's)
    plines, ppairs, perr = load(args[0], per_cpu, with_pairs=False)
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
    checks = [('vmtrace', vpairs)]
    if not ok:
        checks.insert(0, ('perf', load(args[0], per_cpu)[1]))
    else:
        checks = [('vmtrace (and perf: the same lines)', vpairs)]
    for name, pairs in checks:
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
