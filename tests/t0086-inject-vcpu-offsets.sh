#!/bin/sh
# vmtrace inject: TSC offsets DISCOVERED per vCPU where the vCPUs of one VM
# have different offsets (issue #13: "offset and scale default to what
# correlate discovers ... per vCPU where they differ").  VMX keeps the
# offset in each vCPU's VMCS; synth --vcpu-offset gives vCPU 1 its own.
#
# Guest file: a real `perf record -a` of this host standing in for the
# guest's (see t0100), given a no-kvmclock guest's TIME_CONV.  Every guest
# record's host time must be the exact conversion with ITS vCPU's offset
# (from synth's truth).  The same inject with one offset for all vCPUs must
# fail that check (the test can fail), and so does perf inject --guest-data,
# which takes one offset per VM: its records of vCPU 1 are off by the
# difference of the offsets.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
need_guest_standin "$TMP/g0.data" sh -c 'sleep 0.02; ls / >/dev/null; sleep 0.02'
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g0.data" "$TMP/g.data" time-conv 10 341 0 1
S="--show-task-events --show-mmap-events --show-switch-events --ns --itrace="
"$PERF" script -i "$TMP/g.data" $S 2>/dev/null | grep PERF_RECORD_ >"$TMP/g.txt"
script() { "$PERF" script -i "$1" $S -F+machine_pid,+vcpu 2>/dev/null | grep "^VM:" >"$2"; }

# vCPU 1's offset 3000000 ticks (1 ms at synth's 3 GHz) above vCPU 0's
OFF=$("$PYTHON3" "$top_srcdir/tests/guest-offset.py" "$PERF" "$TMP/g.data" 0x100000000000)
OFF1=$(u64 "$OFF + 3000000")
"$VMTRACE" synth -o "$TMP/h.data" --per-cpu --vcpus 2 --cpus 2 --size 4M --offset "$OFF" --vcpu-offset "$OFF1:1" \
	--truth "$TMP/h.json" 2>/dev/null
check "synth --vcpu-offset $OFF1:1: the truth gives vCPU 0 $OFF, vCPU 1 $OFF1" \
	json_check "$TMP/h.json" "[(v['vcpu'], v['tsc_offset']) for v in j['vcpus']] == [(0, '$OFF'), (1, '$OFF1')]"
TRUTH=$("$PYTHON3" -c 'import json, sys; print(",".join(v["tsc_offset"] for v in json.load(open(sys.argv[1]))["vcpus"]))' \
	"$TMP/h.json")

"$VMTRACE" correlate --dry-run --json "$TMP/h.data" >"$TMP/dry.json" 2>/dev/null
check "correlate --dry-run: each VMCS its vCPU's offset, status ok" \
	json_check "$TMP/dry.json" "(sorted((m['vcpu'], m['tsc_offset'], m['status']) for m in j['vmcs']) ==
		[(0, '$OFF', 'ok'), (1, '$OFF1', 'ok')])"
perf_dry_run "$TMP/h.data" | sort >"$TMP/perf.dry"
check "perf's dry run keys by VMCS too: $(tr '\n' ';' <"$TMP/perf.dry")" \
	sh -c "grep -qx 'VMCS: 0x12340  TSC Offset $OFF' '$TMP/perf.dry' &&
	       grep -qx 'VMCS: 0x12451  TSC Offset $OFF1' '$TMP/perf.dry' && test \$(wc -l <'$TMP/perf.dry') -eq 2"

"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/v.data" --json >"$TMP/v.json" 2>"$TMP/v.err"
check "vmtrace inject, offsets discovered: exit 0, vCPU 0 $OFF, vCPU 1 $OFF1" \
	json_check "$TMP/v.json" "(sorted((c['vcpu'], c['tsc_offset']) for c in j['clocks']) == [(0, '$OFF'), (1, '$OFF1')]
		and j['offsets_from'] == 'discovered in the host trace')"
script "$TMP/v.data" "$TMP/v.txt"
vcpu_times() { "$PYTHON3" "$top_srcdir/tests/inject-check.py" vcpu-times "$TMP/g.txt" "$1" "$TRUTH" 10 341 10 341; }
vcpu_times "$TMP/v.txt" >"$TMP/v.times" 2>&1
check "... every guest record of both vCPUs at the exact time with its vCPU's offset (the truth's)" \
	sh -c "test $? -eq 0 && grep -q '^# vCPU 0 .* 0..0 ns' '$TMP/v.times' && grep -q '^# vCPU 1 .* 0..0 ns' '$TMP/v.times'"
cat "$TMP/v.times"

# one offset for all vCPUs: the same check must fail, on vCPU 1 only, by
# 3000000 ticks in host time (TIME_CONV mult 341, shift 10: 999023 ns, or
# 999024 where the split conversion rounds the other way), the records later
D=$((3000000 * 341 >> 10))
DD="$D\\.\\.$D\\|$D\\.\\.$((D + 1))\\|$((D + 1))\\.\\.$((D + 1))"
# vcpu1_off NAME DESCRIPTION: NAME.data's guest records fail the exact-time
# check on vCPU 1 only, every one of them off by D ns
vcpu1_off() {
	script "$TMP/$1.data" "$TMP/$1.txt"
	vcpu_times "$TMP/$1.txt" >"$TMP/$1.times" 2>&1
	check "$2" sh -c "test $? -ne 0 && grep -q '^# vCPU 0 .*: \([0-9]*\) of \1 guest.* 0..0 ns' '$TMP/$1.times' &&
		grep -q '^# vCPU 1 .*: 0 of [1-9][0-9]* guest records .* \($DD\) ns' '$TMP/$1.times'"
	cat "$TMP/$1.times"
}
"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/one.data" --offset "$OFF" >/dev/null 2>&1
vcpu1_off one "--offset $OFF for every vCPU: the check fails - vCPU 0 exact, vCPU 1 off by 3000000 ticks ($D ns)"

# perf inject --guest-data takes one offset per VM (GUEST,PID,OFFSET)
timeout 300 "$PERF" inject -i "$TMP/h.data" -o "$TMP/p.data" --guest-data="$TMP/g.data,4000,$OFF" >/dev/null 2>&1
check "perf inject --guest-data=GUEST,4000,$OFF: exit 0" test $? -eq 0
vcpu1_off p "perf's output: vCPU 0's records exact, vCPU 1's all off by $D ns (its offset is not vCPU 0's)"
finish
