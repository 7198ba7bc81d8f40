#!/bin/sh
# vmtrace inject: what the offsets and the TSC scaling default to (issue
# #13: "offset and scale default to what correlate discovers in the
# recording (or its KVM metadata), per vCPU where they differ").
#
# Guest file: a real `perf record -a` file of this host standing in for the
# guest's (see t0100), given a no-kvmclock guest's TIME_CONV.  Host: synth
# with VMX TSC scaling 1.5; its KVM metadata (DIR/vmtrace-kvm.ini, as
# vmtrace record writes it) gives the scaling ratio: inject without
# --tsc-scale must then give what --tsc-scale gives.  Per vCPU: --offset
# OFF:0 --offset OFF2:1 converts each vCPU's records with its own offset.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
need_guest_standin "$TMP/g0.data" sh -c 'sleep 0.02; ls / >/dev/null; sleep 0.02'
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g0.data" "$TMP/g.data" time-conv 10 341 0 1

# the offset that puts the guest's first timed record 200000 ticks after the
# host's start, with scaling RATIO/2^48 (as t0100)
offset_for() { "$PYTHON3" "$top_srcdir/tests/guest-offset.py" "$PERF" "$TMP/g.data" "$@"; }
S="--show-task-events --show-mmap-events --show-switch-events --ns --itrace="
script() { "$PERF" script -i "$1" $S -F+machine_pid,+vcpu 2>/dev/null | grep "^VM:" >"$2"; }

R=0x1800000000000
OFF=$(offset_for 0x100000000000 $R)
"$VMTRACE" synth -o "$TMP/h" --dir --per-cpu --vcpus 2 --cpus 2 --size 4M --offset "$OFF" --tsc-scale $R 2>/dev/null
"$VMTRACE" inject "$TMP/h" --guest-data "$TMP/g.data" -o "$TMP/given" --tsc-scale $R >"$TMP/given.out" 2>&1
check "--tsc-scale $R: exit 0, offset $OFF discovered on that basis" \
	grep -q "TSC offset $OFF, TSC scaling $(printf %d $R)/2^48" "$TMP/given.out"
"$VMTRACE" inject "$TMP/h" --guest-data "$TMP/g.data" -o "$TMP/none" >"$TMP/none.out" 2>&1
rc=$?
check "no --tsc-scale, no metadata: the scaled trace's offsets are not found as they are (exit $rc)" \
	sh -c "test $rc -ne 0 || ! grep -q 'TSC offset $OFF, TSC scaling' '$TMP/none.out'"
# the metadata vmtrace record writes (vmcorr/kvmmeta.c), with the scaling
{
	printf '[vmtrace-kvm]\nversion=1\ndomain=synth\nqemu_pid=4000\n'
	for v in 0 1; do
		printf '\n[vcpu%d]\ntid=%d\nstart.tsc_offset=0\nend.tsc_offset=0\n' $v $((4010 + v))
		printf 'tsc_scaling_ratio=%d\ntsc_scaling_frac_bits=48\n' $R
	done
} >"$TMP/h/vmtrace-kvm.ini"
"$VMTRACE" inject "$TMP/h" --guest-data "$TMP/g.data" -o "$TMP/meta" --json >"$TMP/meta.json" 2>"$TMP/meta.err"
check "KVM metadata with the scaling, no --tsc-scale: exit 0, JSON says ratio $(printf %d $R)/2^48 and the offset" \
	json_check "$TMP/meta.json" "all(c['tsc_scaling_ratio'] == $(printf %d $R) and c['tsc_scaling_frac'] == 48 and
		c['tsc_offset'] == '$OFF' for c in j['clocks']) and len(j['clocks']) == 2"
script "$TMP/given" "$TMP/given.txt"
script "$TMP/meta" "$TMP/meta.txt"
check "... the same guest records and times as with --tsc-scale ($(wc -l <"$TMP/meta.txt") lines)" \
	sh -c "test -s '$TMP/meta.txt' && cmp -s '$TMP/given.txt' '$TMP/meta.txt'"

# per vCPU: vCPU 1's offset 3000 ticks (1000 ns at synth's 3 GHz) higher:
# its records 1000 ns earlier, vCPU 0's as they were
OFF2=$(u64 "$OFF + 3000")
"$VMTRACE" inject "$TMP/h" --guest-data "$TMP/g.data" -o "$TMP/pv" --tsc-scale $R --offset "$OFF:0" --offset "$OFF2:1" \
	--json >"$TMP/pv.json" 2>&1
check "--offset $OFF:0 --offset $OFF2:1: exit 0, each vCPU its offset" \
	json_check "$TMP/pv.json" "sorted((c['vcpu'], c['tsc_offset']) for c in j['clocks']) == [(0, '$OFF'), (1, '$OFF2')]"
script "$TMP/pv" "$TMP/pv.txt"
"$PYTHON3" - "$TMP/given.txt" "$TMP/pv.txt" >"$TMP/pv.check" 2>&1 <<'PY'
import re, sys
def recs(path):
    out = []
    for line in open(path):
        m = re.match(r"VM: +\d+ VCPU:(\d+) .*? (\d+)\.(\d{9}): (.*)", line)
        out.append((int(m.group(1)), int(m.group(2)) * 10**9 + int(m.group(3)), m.group(4)))
    return sorted(out, key=lambda r: (r[0], r[2], r[1]))
a, b = recs(sys.argv[1]), recs(sys.argv[2])
assert len(a) == len(b) and a, (len(a), len(b))
n = [0, 0]
for x, y in zip(a, b):
    assert x[0] == y[0] and x[2] == y[2], (x, y)
    # 3000 guest ticks undone by the 1.5 scaling: 2000 host ticks, 666-667 ns
    want = range(0, 1) if x[0] == 0 else range(666, 668)
    assert x[1] - y[1] in want, (x, y)
    n[x[0]] += 1
print("# vCPU 0: %d records at the same time; vCPU 1: %d records 666-667 ns earlier" % tuple(n))
PY
check "vCPU 1's records earlier by 3000 guest ticks (2000 host ticks at scaling 1.5), vCPU 0's unchanged" test $? -eq 0
cat "$TMP/pv.check"
finish
