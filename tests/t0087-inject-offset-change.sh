#!/bin/sh
# vmtrace inject on a recording in which the TSC offset CHANGES (synth
# --offset-change: the guest wrote its TSC).  Each guest record must be
# converted with the offset in force at its host time: the dry run gives
# every VMCS's epochs (offset, first and last host TSC seen with it), and a
# record takes the one epoch whose host time for it lies between the
# epoch's neighbours' last and first estimates.  Where that cannot be
# decided - the guest's TSC went back, so its times repeat, or a time that
# the forward jump skipped - inject refuses, exit 28, writing nothing.
#
# Guest file: a real `perf record -a` of this host (see t0100) whose task
# records tests/perf-edit.py sideband replaces by COMM records placed at
# chosen guest TSCs: on each vCPU, one in the middle of each epoch and one
# at each edge of the change, their names saying which.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
need_guest_standin "$TMP/g0.data"
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g0.data" "$TMP/g1.data" time-conv 10 341 0 1

T0=0x100000000000
OFF=0x123456789
D=0x40000000                     # the guest's TSC jumps 2^30 ticks (0.36 s) ahead
NEW=$(printf '0x%x' $((OFF + D)))
"$VMTRACE" synth -o "$TMP/h.data" --per-cpu --vcpus 2 --cpus 2 --size 4M --offset $OFF --offset-change "$NEW@0.5" \
	--truth "$TMP/h.json" 2>/dev/null
"$VMTRACE" correlate --dry-run --json "$TMP/h.data" >"$TMP/dry.json" 2>/dev/null
check "correlate --dry-run: both VMCS change from $OFF to $NEW (two epochs each)" \
	json_check "$TMP/dry.json" "all(m['status'] == 'changes' and [e['tsc_offset'] for e in m['epochs']] ==
		['$OFF', '$NEW'] for m in j['vmcs']) and len(j['vmcs']) == 2"

# guest.py DRY.json OFF0 OFF1 [SKIPPED]: the sideband script (stdout) and,
# in EXPECT, each record's name, the host TSC it was placed at and the
# offset in force there.  Names:
# vCPU, b(efore)/a(fter), m(iddle of the epoch)/e(dge: 30 ticks inside
# the epoch's last or first estimate).  SKIPPED: one more record (vCPU 0) at a guest time the
# forward jump skipped: no epoch's host time for it lies in its range.
cat >"$TMP/guest.py" <<'PY'
import json, sys
dry, off0, off1 = json.load(open(sys.argv[1])), int(sys.argv[2], 0), int(sys.argv[3], 0)
t0, base, pid = 0x100000000000, 0x100000000000 + off0, 600
out, exp = [], open(sys.argv[4], "w")
def rec(cpu, name, h, off):
    global pid
    pid += 1
    out.append((h + off - base, "%d %d comm %d %d %s" % (h + off - base, cpu, pid, pid, name)))
    exp.write("%s %d %d\n" % (name, h, off))
for m in dry["vmcs"]:
    v, (e1, e2) = m["vcpu"], m["epochs"]
    f1, l1, f2, l2 = (int(e[k], 16) for e in (e1, e2) for k in ("first_tsc", "last_tsc"))
    rec(v, "v%dbm" % v, (f1 + l1) // 2, off0)
    rec(v, "v%dbe" % v, l1 - 30, off0)     # 30 ticks (10 ns) inside: a guest
    rec(v, "v%dae" % v, f2 + 30, off1)     # time is a TSC to 3 ticks
    rec(v, "v%dam" % v, (f2 + l2) // 2, off1)
if len(sys.argv) > 5:
    rec(0, "skipped", (int(dry["vmcs"][0]["epochs"][1]["first_tsc"], 16) + (off1 - off0) // 2), off0)
for _, line in sorted(out, key=lambda x: x[0]):
    print(line)
PY
"$PYTHON3" "$TMP/guest.py" "$TMP/dry.json" $OFF "$NEW" "$TMP/expect" >"$TMP/sb"
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g1.data" "$TMP/g.data" sideband "$TMP/sb" $((T0 + OFF))

# host times of the guest's COMMs in an injected recording, checked against
# the host TSC each was placed at: its guest time is the guest TIME_CONV's
# of guest TSC h + off (shift 10, mult 341: nanoseconds, truncated), back
# to the guest TSC, minus the offset in force, by the host TIME_CONV (the same)
cat >"$TMP/times.py" <<'PY'
import re, sys
def to_time(tsc):
    return (tsc >> 10) * 341 + (((tsc & 1023) * 341) >> 10)
def to_tsc(ns):
    return ((ns // 341) << 10) + ((ns % 341) << 10) // 341
want = {}
for l in open(sys.argv[1]):
    name, h, off = l.split()
    want[name] = (int(h), to_time(to_tsc(to_time(int(h) + int(off))) - int(off)))
got = {}
for l in open(sys.argv[2]):
    m = re.search(r"^VM: +\d+ VCPU:(\d+) .*? (\d+)\.(\d{9}): PERF_RECORD_COMM: (\w+):", l)
    if m:
        got[m.group(4)] = int(m.group(2)) * 10**9 + int(m.group(3))
bad = 0
for name in sorted(want):
    d = got.get(name, 0) - want[name][1]
    bad += d != 0
    print("# %s: host TSC %#x, %s" % (name, want[name][0], "exact" if d == 0 else "off by %d ns" % d))
sys.exit(1 if bad or len(got) != len(want) else 0)
PY
S="--show-task-events --ns --itrace="
"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/v.data" --json >"$TMP/v.json" 2>"$TMP/v.err"
check "vmtrace inject, offsets discovered: exit 0, two epochs per vCPU" \
	json_check "$TMP/v.json" "(sorted((c['vcpu'], c['tsc_offset'], c.get('host_tsc_to', '-') is None) for c in j['clocks'])
		== [(0, '$OFF', False), (0, '$NEW', True), (1, '$OFF', False), (1, '$NEW', True)])"
cat "$TMP/v.err"
"$PERF" script -i "$TMP/v.data" $S -F+machine_pid,+vcpu 2>/dev/null | grep "^VM:" >"$TMP/v.txt"
"$PYTHON3" "$TMP/times.py" "$TMP/expect" "$TMP/v.txt" >"$TMP/v.times" 2>&1
check "each guest record at the exact host time of the offset in force then: before the change and after" test $? -eq 0
cat "$TMP/v.times"

# one offset for all time (what perf inject --guest-data takes): the
# records after the change are off by the jump, the check above fails
"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/one.data" --offset $OFF >/dev/null 2>&1
"$PERF" script -i "$TMP/one.data" $S -F+machine_pid,+vcpu 2>/dev/null | grep "^VM:" >"$TMP/one.txt"
J=$(($D * 341 >> 10))
"$PYTHON3" "$TMP/times.py" "$TMP/expect" "$TMP/one.txt" >"$TMP/one.times" 2>&1
check "--offset $OFF for all time: the records before are exact, those after off by the jump ($J ns)" \
	sh -c "test $? -ne 0 && test \$(grep -c 'b[me]: .* exact' '$TMP/one.times') -eq 4 &&
	       test \$(grep -c 'a[me]: .* off by \($J\|$((J + 1))\) ns' '$TMP/one.times') -eq 4"
cat "$TMP/one.times"
timeout 300 "$PERF" inject -i "$TMP/h.data" -o "$TMP/p.data" --guest-data="$TMP/g.data,4000,$OFF" >/dev/null 2>&1
"$PERF" script -i "$TMP/p.data" $S -F+machine_pid,+vcpu 2>/dev/null | grep "^VM:" >"$TMP/p.txt"
"$PYTHON3" "$TMP/times.py" "$TMP/expect" "$TMP/p.txt" >"$TMP/p.times" 2>&1
check "perf inject --guest-data=GUEST,4000,$OFF (one offset per VM): the same 4 records off by $J ns" \
	sh -c "test \$(grep -c 'a[me]: .* off by \($J\|$((J + 1))\) ns' '$TMP/p.times') -eq 4"
cat "$TMP/p.times"

# a guest time the jump skipped: neither epoch's host time for it is in range
"$PYTHON3" "$TMP/guest.py" "$TMP/dry.json" $OFF "$NEW" "$TMP/expect2" skipped >"$TMP/sb2"
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g1.data" "$TMP/g2.data" sideband "$TMP/sb2" $((T0 + OFF))
"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g2.data" -o "$TMP/s.data" >"$TMP/s.out" 2>"$TMP/s.err"
rc=$?
check "a record at a guest time the forward jump skipped: exit 28, one line, nothing written ($(cat "$TMP/s.err"))" \
	sh -c "test $rc -eq 28 && test \$(wc -l <'$TMP/s.err') -eq 1 && grep -q 'fits no epoch' '$TMP/s.err' &&
	       test ! -e '$TMP/s.data' && test -z \"\$(ls -A '$TMP' | grep '^\.s\.data')\""

# an offset 100000 ticks LOWER after the change (as after save/restore: the
# host's TSC went on further than the guest's), less than the gap between
# the epochs' estimates: the guest's TSC went forward from the last
# estimate before to the first after, so the guest TSCs of those estimates
# bound the epochs too - the edge records, each in both epochs' host
# ranges, are decided by their guest TSC (before this, refused)
SMALL=$(printf '0x%x' $((OFF - 100000)))
"$VMTRACE" synth -o "$TMP/r.data" --per-cpu --vcpus 2 --cpus 2 --size 4M --offset $OFF --offset-change "$SMALL@0.5" \
	2>/dev/null
"$VMTRACE" correlate --dry-run --json "$TMP/r.data" >"$TMP/rdry.json" 2>/dev/null
"$PYTHON3" "$TMP/guest.py" "$TMP/rdry.json" $OFF "$SMALL" "$TMP/rexpect" >"$TMP/rsb"
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g1.data" "$TMP/rg.data" sideband "$TMP/rsb" $((T0 + OFF))
check "the gap between the epochs' estimates exceeds 100000 ticks: the guest's TSC went forward across it" \
	json_check "$TMP/rdry.json" "all(int(m['epochs'][1]['first_tsc'], 16) - int(m['epochs'][0]['last_tsc'], 16) > 100000
		and [e['tsc_offset'] for e in m['epochs']] == ['$OFF', '$SMALL'] for m in j['vmcs'])"
"$VMTRACE" inject "$TMP/r.data" --guest-data "$TMP/rg.data" -o "$TMP/rv.data" >"$TMP/rv.out" 2>&1
check "vmtrace inject: exit 0 (the edge records are in both epochs' host ranges: their guest TSC decides)" test $? -eq 0
cat "$TMP/rv.out"
"$PERF" script -i "$TMP/rv.data" $S -F+machine_pid,+vcpu 2>/dev/null | grep "^VM:" >"$TMP/rv.txt"
"$PYTHON3" "$TMP/times.py" "$TMP/rexpect" "$TMP/rv.txt" >"$TMP/rv.times" 2>&1
check "... every record exact, the edges on both sides included" test $? -eq 0
cat "$TMP/rv.times"

# the guest's TSC goes BACK by 2^30 ticks: every time repeats
OLD=$(printf '0x%x' $((OFF - D)))
"$VMTRACE" synth -o "$TMP/b.data" --per-cpu --vcpus 2 --cpus 2 --size 4M --offset $OFF --offset-change "$OLD@0.5" \
	2>/dev/null
"$VMTRACE" inject "$TMP/b.data" --guest-data "$TMP/g.data" -o "$TMP/bv.data" >"$TMP/b.out" 2>"$TMP/b.err"
rc=$?
check "offset change back by $D (guest times repeat): exit 28, names both host times ($(cat "$TMP/b.err"))" \
	sh -c "test $rc -eq 28 && test \$(wc -l <'$TMP/b.err') -eq 1 && grep -q 'fits two epochs.*went back' '$TMP/b.err' &&
	       test ! -e '$TMP/bv.data'"
"$VMTRACE" inject "$TMP/b.data" --guest-data "$TMP/g.data" -o "$TMP/bo.data" --offset $OFF >/dev/null 2>&1
check "... --offset OFF decides it: exit 0" test $? -eq 0
finish
