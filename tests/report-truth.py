#!/usr/bin/env python3
"""report-truth.py - vmtrace report --json against synth's ground truth.

    tests/report-truth.py BRANCHES HOST_KALLSYMS GUEST_KALLSYMS SCRIPT_JSON REPORT_JSON

BRANCHES: `vmtrace synth --branches` (QUEUE TID KIND FROM TO WHERE VCPU INSNS
RET: every branch taken, the instructions each queue ran, a call's return
address; per CPU, QUEUE is the CPU).  SCRIPT_JSON: `vmtrace script --json` of the same recording - used
for two things only: the order in which the decoder delivers the branches
(time order over all queues; timeless: queue by queue) and their times (each
decoder estimates times its own way; t0090 checks the branches).  Every
branch of it must be the truth's next one of its thread.  REPORT_JSON:
`vmtrace report --json --top 1000000` of the same recording.

From the truth alone (symbols by perf's kallsyms rules, written here
independently of src/analyze) this computes what vmtrace-report(1) defines -
per vCPU: guest/host time, VM exits, exit-to-entry latencies (count, p50,
p90, p99, max; nearest rank), the longest exits; per (handler, first host
call): counts and max; per function: calls, self and inclusive time and
instructions; the guest's first calls (a call, or a jump to a function's
first instruction from outside it) in order; syscalls - and compares:
all exact.  Timeless recordings: the clock is the instructions each thread
ran (the truth's INSNS; those before a PSB+ and a queue's end, `# psb` and
`# end`, are the previous branch's thread's: the decoder's flow ends).  Prints one summary line; exit 1 on a difference.
"""
import bisect
import collections
import json
import operator
import sys

ASYNC = {'vmexit', 'trace-end', 'async'}   # bound to a FUP: the IP does not run
FLOW = {}                                  # (queue, branches before) -> instructions run by a PSB+ or the end
BRANCHES = collections.Counter()           # queue -> branches
MAX_DEPTH = 1024                           # frames a call stack holds (analyze.h)
RET = operator.itemgetter('ret')           # a frame's return address


def load_symbols(path):
    keep = {}
    for n, line in enumerate(open(path)):
        f = line.rstrip('\n').split(' ', 2)
        if len(f) < 3 or f[1].upper() not in 'TWDB':
            continue
        addr = int(f[0], 16)
        if addr:
            keep[addr] = (n, f[2].split('\t')[0])    # the last in the file wins
    addrs = sorted(keep)
    return addrs, [keep[a][1] for a in addrs]


def symbol(syms, addr):
    """(name, start) of the symbol containing addr (None, addr) if none."""
    addrs, names = syms
    i = bisect.bisect_right(addrs, addr) - 1
    if not addr or i < 0:
        return None, addr
    return names[i], addrs[i]


def thunk_name(s):
    return (s.startswith('__x86_indirect_') and 'thunk' in s) or (
        s.startswith(('__x86_', 'srso_', 'retbleed_', 'its_', 'call_depth_', 'zen_', 'entry_')) and
        (s.endswith(('_return_thunk', '_safe_ret', '_untrain_ret')) or s == '__x86_return_skl'))


def load_thunks(path):
    """retpoline and return thunk code (vmtrace-report(1)): [__indirect_thunk_start,
    __indirect_thunk_end) and the text symbols named like thunks up to the next
    one, at most 64 bytes; sorted, merged ranges"""
    names, first = {}, {}
    for line in open(path):
        f = line.rstrip('\n').split(' ', 2)
        if len(f) < 3 or f[1] not in 'Tt':
            continue
        addr, name = int(f[0], 16), f[2].split('\t')[0]
        if addr:
            names[addr] = name
            first.setdefault(name, addr)
    addrs = sorted(names)
    ranges = [(a, min(addrs[i + 1] if i + 1 < len(addrs) else a + 64, a + 64)) for i, a in enumerate(addrs)
              if thunk_name(names[a])]
    lo, hi = first.get('__indirect_thunk_start', 0), first.get('__indirect_thunk_end', 0)
    if lo and hi > lo:
        ranges.append((lo, hi))
    merged = []
    for a, b in sorted(ranges):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [a for a, _ in merged], [b for _, b in merged]


def in_ranges(r, addr):
    i = bisect.bisect_right(r[0], addr) - 1
    return i >= 0 and addr < r[1][i]


def load_truth(path, per_cpu):
    """per thread (per CPU and thread in per-CPU recordings) the branches in order"""
    per_tid = collections.defaultdict(collections.deque)
    for line in open(path):
        if line.startswith(('# end ', '# psb ')):   # a queue's instructions at a PSB+, at its end
            _, _, q, insns = line.split()
            FLOW[(int(q), BRANCHES[int(q)])] = int(insns)
        if line.startswith('#'):
            continue
        q, tid, kind, frm, to, where, vcpu, insns, ret = line.split()[:9]
        BRANCHES[int(q)] += 1
        guest = where == 'guest'
        per_tid[(int(q) if per_cpu else -1, int(tid))].append(dict(queue=int(q), kind=kind, frm=int(frm, 16), to=int(to, 16),
                                      from_guest=guest, to_guest=guest if kind not in ('vmentry', 'vmexit')
                                      else kind == 'vmentry', vcpu=int(vcpu), insns=int(insns),
                                      ret=int(ret, 16)))
    return per_tid


class Ctx:
    def __init__(self):
        self.started = False
        self.guest = False
        self.now = self.insns = self.mode_start = self.mode_insns = 0
        self.stack = {False: [], True: []}
        self.exit = None
        self.sys = None
        self.vcpu = -1


class Model:
    def __init__(self, host, guest, timed, thunks=None):
        self.syms = {False: host, True: guest}
        self.thunks = thunks or {False: ([], []), True: ([], [])}
        self.timed = timed
        self.vcpus = collections.defaultdict(lambda: dict(guest=0, host=0, exits=0, lat=[], first=None, last=0))
        self.groups = collections.Counter()
        self.group_max = collections.defaultdict(int)
        self.funcs = collections.defaultdict(lambda: [0, 0, 0, 0, 0])   # calls self incl self_insns insns
        self.first = {False: [], True: []}
        self.first_seen = {False: set(), True: set()}
        self.syscalls = collections.Counter()
        self.unmatched = 0
        names = [a for a, n in zip(*guest) if n == 'entry_SYSCALL_64']
        self.sys_entry = min(names) if names else None
        self.ctx = collections.defaultdict(Ctx)
        self.queue_insns = {}
        self.seen = collections.Counter()
        self.tail = None

    # -- frames
    def close(self, c, guest, complete):
        f = c.stack[guest].pop()
        incl, insns = c.now - f['start'], c.insns - f['insn0']
        self_t = incl - min(incl, f['child'] + f['other'])
        self_i = insns - min(insns, f['child_i'] + f['other_i'])
        if c.stack[guest]:
            p = c.stack[guest][-1]
            p['child'] += incl
            p['child_i'] += insns
        if f['syscall']:
            self.syscalls[c.sys_name] += 1
        for v in (c.vcpu, -1):
            e = self.funcs[(v, guest, f['func'])]
            e[0] += 1
            e[1] += self_t
            e[2] += incl
            e[3] += self_i
            e[4] += insns

    def close_all(self, c, guest):
        while c.stack[guest]:
            self.close(c, guest, False)

    def sys_unnamed(self, c):
        if c.sys is not None:
            self.syscalls[None] += 1
        c.sys = None

    def mode_end(self, c):
        v = self.vcpus[c.vcpu]
        v['guest' if c.guest else 'host'] += c.now - c.mode_start
        v['first'] = c.mode_start if v['first'] is None else min(v['first'], c.mode_start)
        v['last'] = max(v['last'], c.now)
        waiting = c.stack[not c.guest]
        if waiting:
            waiting[-1]['other'] += c.now - c.mode_start
            waiting[-1]['other_i'] += c.insns - c.mode_insns
        c.mode_start, c.mode_insns = c.now, c.insns

    def exit_end(self, c, reentered):
        if c.exit is None:
            return
        x, c.exit = c.exit, None
        v = self.vcpus[c.vcpu]
        v['exits'] += 1
        if reentered:
            lat = c.now - x['time']
            v['lat'].append((lat, x['time'], x['ip']))
            for vv in (c.vcpu, -1):
                k = (vv, x['handler'], x['first_call'])
                self.groups[k] += 1
                self.group_max[k] = max(self.group_max[k], lat)

    # -- events
    def insns_of(self, t):
        """instructions the queue ran up to this branch since the previous one
        (the first: since the walk began, where synth's first PSB+ is)"""
        prev = self.queue_insns.get(t['queue'], 0)
        self.queue_insns[t['queue']] = t['insns']
        return t['insns'] - prev

    def event(self, t, time, vcpu):
        c = self.ctx[t['tid']]
        c.vcpu = vcpu
        n = self.insns_of(t)
        q = t['queue']
        self.seen[q] += 1
        if FLOW.get((q, self.seen[q]), 0) > t['insns']:
            self.tail = (c, FLOW[(q, self.seen[q])] - t['insns'])
            self.queue_insns[q] = FLOW[(q, self.seen[q])]
        c.insns += n
        c.now = max(time, c.now) if self.timed else c.insns
        if not c.started:                       # the instructions up to the first branch ran in its mode
            c.started = True
            c.mode_start, c.mode_insns = c.now if self.timed else c.now - n, c.insns - n
            c.guest = (t['from_guest'] if t['frm'] else t['to_guest']) and t['kind'] != 'vmentry'
        k = t['kind']
        if k in ('call', 'return', 'jump') and t['from_guest'] == t['to_guest'] and self.thunk_flow(c, t):
            pass
        elif k == 'call' and t['from_guest'] == t['to_guest']:
            self.call(c, t)
        elif k == 'jump' and t['from_guest'] == t['to_guest']:
            self.tail_call(c, t)
        elif k == 'return' and t['from_guest'] == t['to_guest']:
            self.ret(c, t)
        elif k == 'vmexit':
            self.exit_end(c, False)
            if c.guest:
                self.mode_end(c)
            c.guest = False
            c.exit = dict(time=c.now, ip=t['frm'], handler=symbol(self.syms[False], t['to'])[0], first_call=None,
                          seen=False)
        elif k == 'vmentry':
            if not c.guest:
                self.mode_end(c)
            c.guest = True
            self.exit_end(c, True)
        elif k == 'trace-end':
            self.close_all(c, t['from_guest'])
            if t['from_guest']:
                self.sys_unnamed(c)
        if t['to_guest'] and t['to'] and t['to'] == self.sys_entry:
            self.sys_unnamed(c)
            c.sys = c.now

    def flow_tail(self):
        """after a branch: the instructions that ran before a PSB+ (the thread may
        change there) or the queue's end (its last TNT bits prove them): the
        branch's thread's, at its time (timeless: they move the clock)"""
        if self.tail:
            c, n = self.tail
            self.tail = None
            c.insns += n
            if not self.timed:
                c.now = c.insns

    def ret(self, c, t):
        st = c.stack[t['from_guest']]
        i = len(st)
        while i and st[i - 1]['ret'] != t['to']:
            i -= 1
        if not i:
            self.unmatched += 1
        while len(st) >= i and i:
            self.close(c, t['from_guest'], True)

    def thunk_flow(self, c, t):
        """a call through a retpoline (call thunk ... ret/jmp to the callee) is a
        call of the callee; returns through return thunks are returns"""
        g = t['from_guest']
        frm, to = in_ranges(self.thunks[g], t['frm']), in_ranges(self.thunks[g], t['to'])
        if frm == to:
            return frm
        if t['kind'] == 'call':
            return False
        if to:
            return t['kind'] == 'jump'
        st = c.stack[g]
        top = st[-1] if st else None
        if top is not None and top['pending']:
            self.named(c, g, top, top['func'] if top['ret'] == t['to'] else t['to'])
            if top['ret'] == t['to']:
                self.close(c, g, True)
        elif t['to'] in map(RET, st):   # (C's loop, not a generator's: frames are many)
            self.ret(c, t)
        else:
            self.tail_call(c, t)
        return True

    def named(self, c, g, f, addr):
        """frame f (on top) calls the function at addr"""
        name, start = symbol(self.syms[g], addr)
        f['func'], f['pending'] = start, False
        if not g and c.exit is not None and not c.exit['seen']:
            c.exit['first_call'], c.exit['seen'] = name, True
        if g and c.sys is not None and name and name.startswith(('__x64_sys_', '__ia32_sys_', '__do_sys_')):
            c.sys, c.sys_name, f['syscall'] = None, name, True
        self.first_entry(g, name, start, c)

    def call(self, c, t):
        g = t['to_guest']
        if in_ranges(self.thunks[g], t['to']):      # the callee is known when the thunk leaves
            if len(c.stack[g]) == MAX_DEPTH:
                keep = c.stack[g][MAX_DEPTH // 2:]
                del c.stack[g][MAX_DEPTH // 2:]
                while c.stack[g]:
                    self.close(c, g, False)
                c.stack[g].extend(keep)
            c.stack[g].append(dict(func=symbol(self.syms[g], t['to'])[1], ret=t['ret'], start=c.now, insn0=c.insns,
                                   child=0, child_i=0, other=0, other_i=0, syscall=False, pending=True))
            return
        name, start = symbol(self.syms[g], t['to'])
        if not g and c.exit is not None and not c.exit['seen']:
            c.exit['first_call'], c.exit['seen'] = name, True
        is_sys = False
        if g and c.sys is not None and name and name.startswith(('__x64_sys_', '__ia32_sys_', '__do_sys_')):
            c.sys, c.sys_name, is_sys = None, name, True
        if len(c.stack[g]) == MAX_DEPTH:        # full: the outer half ends now
            keep = c.stack[g][MAX_DEPTH // 2:]
            del c.stack[g][MAX_DEPTH // 2:]
            while c.stack[g]:
                self.close(c, g, False)
            c.stack[g].extend(keep)
        c.stack[g].append(dict(func=start, ret=t['ret'], start=c.now, insn0=c.insns, child=0, child_i=0,
                               other=0, other_i=0, syscall=is_sys, pending=False))
        self.first_entry(g, name, start, c)

    def first_entry(self, g, name, start, c):
        if start not in self.first_seen[g]:
            self.first_seen[g].add(start)
            self.first[g].append((name, c.now, c.vcpu))

    def tail_call(self, c, t):
        """a jump to a function's first instruction from outside it: an entry"""
        g = t['to_guest']
        name, start = symbol(self.syms[g], t['to'])
        if name is not None and start == t['to'] and symbol(self.syms[g], t['frm'])[1] != start:
            self.first_entry(g, name, start, c)

    def finish(self):
        for c in self.ctx.values():
            if not c.started:
                continue
            self.close_all(c, True)
            self.close_all(c, False)
            self.sys_unnamed(c)
            self.exit_end(c, False)
            self.mode_end(c)


def rank(vals, pct):
    if not vals:
        return 0
    r = max((len(vals) * pct + 99) // 100, 1)
    return vals[r - 1]


def compare(m, rep):
    bad = []

    def eq(what, want, got):
        if want != got:
            bad.append('%s: truth %r, report %r' % (what, want, got))

    got_v = {v['vcpu']: v for v in rep['vcpus']}
    eq('vCPUs', sorted(m.vcpus), sorted(got_v))
    for n, v in m.vcpus.items():
        g = got_v.get(n)
        if not g:
            continue
        lat = sorted(x[0] for x in v['lat'])
        eq('vCPU %d guest' % n, v['guest'], g['guest'])
        eq('vCPU %d host' % n, v['host'], g['host'])
        eq('vCPU %d wall' % n, v['last'] - v['first'], g['wall'])
        eq('vCPU %d exits' % n, v['exits'], g['exits'])
        want = dict(count=len(lat), total=sum(lat), min=lat[0] if lat else 0, p50=rank(lat, 50), p90=rank(lat, 90),
                    p99=rank(lat, 99), max=lat[-1] if lat else 0)
        eq('vCPU %d latency' % n, want, g['latency'])
        longest = sorted(v['lat'], key=lambda x: (-x[0], x[1]))[:len(g['longest'])]
        eq('vCPU %d longest exits' % n, [(x[0], x[1], x[2]) for x in longest],
           [(x['latency'], x['exit_time'], int(x['exit_ip'], 16)) for x in g['longest']])
    got_g = {(-1 if x['vcpu'] is None else x['vcpu'], x['handler'], x['first_call']): x for x in rep['exit_handlers']}
    eq('exit groups', sorted(m.groups, key=str), sorted(got_g, key=str))
    for k, n in m.groups.items():
        if k in got_g:
            eq('exit group %r count' % (k,), n, got_g[k]['latency']['count'])
            eq('exit group %r max' % (k,), m.group_max[k], got_g[k]['latency']['max'])
    got_f = {(-1 if f['vcpu'] is None else f['vcpu'], f['guest'], int(f['func'], 16)):
             [f['calls'], f['self'], f['inclusive'], f['self_insns'], f['insns']] for f in rep['functions']}
    eq('functions', len(m.funcs), len(got_f))
    diff = [k for k in m.funcs if got_f.get(k) != m.funcs[k]]
    if diff:
        k = diff[0]
        bad.append('%d functions differ, e.g. %r: truth %r, report %r' % (len(diff), k, m.funcs[k], got_f.get(k)))
    first = [(f['sym'], f['time'], f['vcpu']) for f in rep['first_calls'] if f['guest']]
    eq('guest first calls (%d)' % len(m.first[True]), m.first[True], first)
    eq('host first calls', len(m.first[False]), sum(1 for f in rep['first_calls'] if not f['guest']))
    eq('syscalls', dict(m.syscalls), {s['name']: s['count'] for s in rep['syscalls']})
    eq('unmatched returns', m.unmatched, rep['health']['unmatched_returns'])
    return bad


def main():
    if len(sys.argv) != 6:
        raise SystemExit(__doc__)
    branches, hk, gk, script, report = sys.argv[1:]
    rep = json.load(open(report))
    truth = load_truth(branches, rep['per_cpu'])
    m = Model(load_symbols(hk), load_symbols(gk), rep['timed'], {False: load_thunks(hk), True: load_thunks(gk)})
    n = 0
    for line in open(script):
        e = json.loads(line)
        if e['kind'] == 'error':
            raise SystemExit('decode error in the script output: %s' % line)
        q = truth[(e['cpu'] if rep['per_cpu'] else -1, e['tid'])]
        if not q:
            raise SystemExit('thread %d: more branches than the truth has' % e['tid'])
        t = q.popleft()
        t['tid'] = e['tid']
        if (t['kind'], t['frm'], t['to']) != (e['kind'], int(e['from']['ip'], 16), int(e['to']['ip'], 16)):
            raise SystemExit('thread %d, branch %d: truth %s %#x => %#x, decoded %s' % (
                e['tid'], n, t['kind'], t['frm'], t['to'], line))
        m.event(t, e.get('time', 0), e.get('vcpu', -1))
        m.flow_tail()
        n += 1
    left = sum(len(q) for q in truth.values())
    if left:
        raise SystemExit('%d branches of the truth not decoded' % left)
    m.finish()
    bad = compare(m, rep)
    exits = sum(v['exits'] for v in m.vcpus.values())
    if bad:
        print('%d differences (%d branches, %d exits)' % (len(bad), n, exits))
        print('\n'.join(bad[:20]))
        sys.exit(1)
    print('%d branches, %d vCPUs, %d exits, %d functions, %d first calls, %d syscalls: all equal' % (
        n, len([v for v in m.vcpus if v >= 0]), exits, len(m.funcs), len(m.first[True]),
        sum(m.syscalls.values())))


if __name__ == '__main__':
    main()
