#!/bin/sh
# vmtrace script on an injected recording (vmtrace inject): guest branches
# carry the guest thread running on their vCPU, as perf script prints them
# (-F ...,machine_pid,vcpu: "VM: 4000 VCPU:001 comm tid"), and as the guest's
# switch records say.
#
# Host: a synth recording of real kernel code (tests/code-lib.sh; per CPU,
# 2 vCPUs on 2 CPUs, ~2.4 ms).  Guest: a real `perf record -a` file of this
# host (its attrs, ids, ID_INDEX; TIME_CONV made a no-kvmclock guest's, its
# kernel MMAP moved to the guest code's _text by tests/perf-edit.py) whose
# task sideband is replaced by the fixed records below (perf-edit.py
# sideband), at fixed TSCs from the host trace's start: what the test sees
# does not depend on when this host happened to switch tasks while it
# recorded.  The guest directory's kcore_dir is the guest code - so the
# injected recording has kcore_dir__4000, from which perf takes the guest
# machine's kernel.
#
#   vCPU 0: gshell (100) from before the trace, forks 101 (gshell, then
#           exec gworker mid-trace) and thread 102, idle task 0 (perf names
#           it swapper)
#   vCPU 1: its first switch-in (tid 300, no COMM: ":300") 0.5 ms into the
#           trace - perf 6.1 loses the guest code before it (thread -1,
#           "Failed to get instruction"), vmtrace decodes it as thread -1
#   b.data: the same without vCPU 1's records (a vCPU with no guest records)
# Guest kernel DSO names: perf names the guest machine's kernel after the
# first kernel entry of that machine in the build id table - v.data's guest
# file has "[kernel.kallsyms]" (a guest's perf record whose samples hit the
# kernel), b.data's none: "[guest.kernel.kallsyms.4000]"; m.data's has
# two modules and a user file before its first kernel file.  (The stand-in's
# own table depended on where this host's samples fell: t0102 failed in CI
# when none hit the kernel and vmtrace always said [kernel.kallsyms].)
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_perf
need_python
[ "$(nproc)" -ge 2 ] || skip "needs 2 CPUs for a 2-vCPU stand-in guest file"
"$PERF" record -q -N -e cpu-clock -F 2000 -a -C 0-1 --sample-identifier --switch-events -o "$TMP/g0.data" -- \
	sh -c 'sleep 0.01' >/dev/null 2>&1 ||
	skip "perf record -a does not work here (perf_event_paranoid? not root?)"
make_code_dirs
OFF=0x123456789
# TSC ticks from the host trace's start (synth: TSC 0x100000000000, 3 ticks
# a ns), guest CPU, record (perf-edit.py sideband)
cat >"$TMP/sideband" <<'SB'
-3000000 0 comm 100 100 gshell
-2900000 0 fork 101 100 101 100
-2800000 0 fork 100 100 102 100
-2000000 0 out 0 0 100 100
-2000000 0 in 100 100 0 0
1000000 0 out 100 100 101 101
1000000 0 in 101 101 100 100
1500000 1 in 300 300 0 0
2000000 0 out 101 101 0 0
2000000 0 in 0 0 101 101
3000000 0 comm 101 101 gworker exec
3500000 1 out 300 300 100 100
3500000 1 in 100 100 300 300
4000000 0 out 0 0 100 102
4000000 0 in 100 102 0 0
5000000 0 out 100 102 101 101
5000000 0 in 101 101 100 102
6000000 1 out 100 100 0 0
6000000 1 in 0 0 100 100
SB
awk '$2 == 0' "$TMP/sideband" >"$TMP/sideband0"
guest_data_dir gd "$TMP/sideband" kernel-build-id
guest_data_dir gd0 "$TMP/sideband0"

"$VMTRACE" synth -o "$TMP/h.data" --size 256K --seed 2 --per-cpu --vcpus 2 --cpus 2 --host-code "$HOST_CODE" \
	--guest-code "$GUEST_CODE" --offset "$OFF" 2>/dev/null
for x in v:gd b:gd0; do
	"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/${x#*:}" -o "$TMP/${x%:*}.data" --offset "$OFF" >/dev/null 2>&1 &&
		"$VMTRACE" correlate --in-place "$TMP/${x%:*}.data" >/dev/null 2>&1
done
check "vmtrace inject: the guest's kcore_dir as kcore_dir__4000" test -f "$TMP/v.data/kcore_dir__4000/kcore"

F=comm,tid,cpu,time,ip,sym,symoff,dso,addr,machine_pid,vcpu
# compare NAME: perf script and vmtrace script of NAME.data, checked
compare() {
	timeout 300 "$PERF" script -i "$TMP/$1.data" --itrace=be -F $F >"$TMP/$1.perf" 2>/dev/null
	check "$1: perf script -F ...,machine_pid,vcpu: exit 0" test $? -eq 0
	"$VMTRACE" script "$TMP/$1.data" -F $F >"$TMP/$1.vt" 2>"$TMP/$1.vt.err"
	check "$1: vmtrace script -F ...,machine_pid,vcpu: exit 0" test $? -eq 0
	"$PERF" script -i "$TMP/$1.data" --show-switch-events --itrace= --ns -F +machine_pid,+vcpu 2>/dev/null \
		>"$TMP/$1.switches"
	"$PYTHON3" "$top_srcdir/tests/guest-threads-check.py" "$TMP/$1.perf" "$TMP/$1.vt" "$TMP/$1.switches" 2 \
		>"$TMP/$1.cmp" 2>&1
	check "$1: vmtrace = perf line for line (guest thread aside at switches, perf's quirk before a vCPU's first switch-in), both = the guest switch records" \
		test $? -eq 0
	sed 's/^/# /' "$TMP/$1.cmp"
	# (since session 26 each branch has perf's time, so perf's guest thread:
	# until then 1-3 lines within 3 us of a guest switch had the other one)
	check "$1: no line differs in the guest thread at a switch" \
		grep -q '^# 0 lines differ in the guest thread only' "$TMP/$1.cmp"
}
compare v
# guest_dso NAME DSO: NAME's guest kernel lines (perf's and vmtrace's) name DSO
guest_dso() {
	gd_n=$(grep -c "^VM: 4000 .*=> *[0-9a-f]* [^ ]* (\\[$2\\])$" "$TMP/$1.perf")
	check "$1: perf and vmtrace name the guest kernel [$2] ($gd_n lines of perf's)" \
		sh -c "test $gd_n -ge 1000 && test \$(grep -c '^VM: 4000 .*(\\[$2\\])\$' '$TMP/$1.vt') -ge $gd_n"
}
guest_dso v kernel.kallsyms
"$VMTRACE" script "$TMP/v.data" --guest "$TMP/v.data/kcore_dir__4000" -F $F >"$TMP/vt2" 2>/dev/null
check "--guest REC/kcore_dir__4000: the same output as without (the default)" cmp -s "$TMP/v.vt" "$TMP/vt2"
# names: every guest thread as the scenario says, at least 1000 lines each
names() { grep "^VM: 4000 VCPU:00$1 *$2 *$3 " "$TMP/v.vt" | wc -l; }
for want in "0 gshell 100" "0 gshell 101" "0 gworker 101" "0 gshell 102" "0 swapper 0" "1 :300 300" "1 gshell 100" \
	"1 swapper 0"; do
	check "guest thread VCPU $want: $(names $want) lines" test "$(names $want)" -ge 1000
done
nlost=$(grep -c 'instruction trace error .* pid -1 tid -1 .*Failed to get instruction' "$TMP/v.perf")
check "perf loses vCPU 1's guest code before its first switch-in: errors 'Failed to get instruction' with tid -1 ($nlost)" \
	test "$nlost" -ge 1
check "vmtrace decodes it as thread -1, no decode error" \
	sh -c "grep -q '^ *:-1  *-1 ' '$TMP/v.vt' && ! grep -q 'instruction trace error' '$TMP/v.vt'"

# --tid: perf selects a guest branch by its guest thread, a host one by the
# host thread (the two halves of a VM entry or exit each by its own)
timeout 300 "$PERF" script -i "$TMP/v.data" --itrace=be -F $F --tid 101 2>/dev/null |
	grep -v 'instruction trace error' | sed -E 's/ [0-9]+\.[0-9]+: / T: /' >"$TMP/tid.perf"
"$VMTRACE" script "$TMP/v.data" -F $F --tid 101 >"$TMP/tid.vt" 2>/dev/null
grep ' 101 \[' "$TMP/v.vt" >"$TMP/tid.want"
check "--tid 101 (a guest thread): the lines of guest thread 101 ($(wc -l <"$TMP/tid.want"))" \
	sh -c "test -s '$TMP/tid.want' && cmp -s '$TMP/tid.want' '$TMP/tid.vt'"
ndiff=$(sed -E 's/ [0-9]+\.[0-9]+: / T: /' "$TMP/tid.vt" | diff - "$TMP/tid.perf" | grep -c '^[<>]')
check "--tid 101: perf --tid 101's lines, time aside ($ndiff differ; until session 26 up to 4 at a guest switch)" \
	test "$ndiff" -eq 0
"$VMTRACE" script "$TMP/v.data" -F $F --tid 4010 >"$TMP/tid2.vt" 2>/dev/null
check "--tid 4010 (vCPU 0's QEMU thread): its host lines only, as many as perf prints ($(grep -c ' 4010 \[' "$TMP/v.perf"))" \
	sh -c "! grep -q '^VM:' '$TMP/tid2.vt' && test \$(wc -l <'$TMP/tid2.vt') -eq \$(grep -c ' 4010 \[' '$TMP/v.perf')"

compare b
guest_dso b guest.kernel.kallsyms.4000

check "b: a vCPU with no guest records - no VM: 4000 VCPU:001 line, its guest code as thread -1" \
	sh -c "! grep -q '^VM: 4000 VCPU:001' '$TMP/b.vt' && grep -q '^ *:-1  *-1 ' '$TMP/b.vt'"

# bid_variant X "MODE FILE"...: X.data, b.data's host trace with a guest file
# whose build id table has these entries (cpumode MODE: 1 kernel, 2 user),
# in order; X.perf and X.vt: the DSOs of the first 2000 guest lines
bid_variant() {
	bv=$1
	shift
	guest_data_dir "g$bv" "$TMP/sideband0"
	for e in "$@"; do
		mv "$TMP/g$bv/data" "$TMP/g$bv.5" &&
			"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g$bv.5" "$TMP/g$bv/data" build-id "${e%% *}" -1 \
				00112233445566778899aabbccddeeff00112233 "${e#* }"
	done
	"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g$bv" -o "$TMP/$bv.data" --offset "$OFF" >/dev/null 2>&1 &&
		"$VMTRACE" correlate --in-place "$TMP/$bv.data" >/dev/null 2>&1
	"$PERF" script -i "$TMP/$bv.data" --itrace=b -F $F 2>/dev/null | grep '^VM: 4000' | head -2000 |
		grep -o '([^)]*)$' | sort -u >"$TMP/$bv.perf"
	"$VMTRACE" script "$TMP/$bv.data" -F $F 2>/dev/null | grep '^VM: 4000' | head -2000 | grep -o '([^)]*)$' |
		sort -u >"$TMP/$bv.vt"
}

# m: build ids of two modules (a .ko file, a "[NAME]") and a user file
# before the kernel's entries: the first kernel entry names the guest
# kernel, here a name longer than --call-trace's DSO column
LONG=guest.kernel.kallsyms-named-longer-than-the-call-trace-column-of-fifty
bid_variant m "1 /lib/modules/6.1.0-13-amd64/kernel/arch/x86/kvm/kvm.ko.xz" "1 [kvm_intel]" "2 /usr/bin/gshell" \
	"1 [$LONG]" "1 [kernel.kallsyms]"
check "m: perf names the guest kernel after the first kernel file in the build ids: $(tr '\n' ' ' <"$TMP/m.perf")" \
	grep -qx "(\[$LONG\])" "$TMP/m.perf"
check "m: vmtrace names the guest kernel as perf" cmp -s "$TMP/m.perf" "$TMP/m.vt" || diff "$TMP/m.perf" "$TMP/m.vt"
# z: a .ko.zst file is no module to perf 6.1 (it reads .gz and .xz ones):
# its entry, first, names the guest kernel
bid_variant z "1 /lib/modules/6.1.0/kernel/fs/foo.ko.zst" "1 [kernel.kallsyms]"
check "z: a .ko.zst entry first names the guest kernel, in perf's lines and vmtrace's: $(tr '\n' ' ' <"$TMP/z.vt")" \
	sh -c "grep -q 'foo.ko.zst' '$TMP/z.perf' && cmp -s '$TMP/z.perf' '$TMP/z.vt'"

# call lines of the long name (perf's: cut to 49 columns in --call-trace),
# spacing after the name aside (perf's column depends on the lines before,
# and perf loses thread -1's)
for o in call-trace call-ret-trace; do
	"$PERF" script -i "$TMP/m.data" --$o 2>/dev/null | grep -F kallsyms-named-longer | grep -v '^ *:-1 ' | head -2000 |
		sed 's/ *$//' >"$TMP/m.$o.perf"
	"$VMTRACE" script "$TMP/m.data" --$o 2>/dev/null | grep -F kallsyms-named-longer | grep -v '^ *:-1 ' | head -2000 |
		sed 's/ *$//' >"$TMP/m.$o.vt"
	check "m: --$o: the first 2000 lines of the long name's = perf's" \
		sh -c "test \$(wc -l <'$TMP/m.$o.perf') -eq 2000 && cmp -s '$TMP/m.$o.perf' '$TMP/m.$o.vt'" ||
		diff "$TMP/m.$o.perf" "$TMP/m.$o.vt" | head
done

"$VMTRACE" script "$TMP/v.data" --json --guest-only >"$TMP/json" 2>/dev/null
check "--json: guest_pid/guest_tid/guest_comm on the switch records' thread, machine_pid 4000; none before vCPU 1's first switch-in" \
	"$PYTHON3" -c "
import collections, json
first1 = float('$(awk '/VCPU:001 .* IN /{print $7; exit}' "$TMP/v.switches")'.rstrip(':'))
seen = collections.Counter()
for line in open('$TMP/json'):
    j = json.loads(line)
    if j.get('kind') == 'error':
        raise SystemExit('decode error %s' % j)
    t = j['time'] / 1e9 if isinstance(j['time'], int) else float(j['time'])
    if 'machine_pid' not in j:
        assert j['vcpu'] == 1 and t <= first1 + 1e-6, j
        seen['early'] += 1
        continue
    assert j['machine_pid'] == 4000 and j['vcpu'] in (0, 1), j
    seen[(j['vcpu'], j['guest_pid'], j['guest_tid'], j['guest_comm'])] += 1
print(sorted(seen.items(), key=str))
assert seen['early'] > 1000 and seen[(0, 100, 102, 'gshell')] > 1000 and seen[(0, 101, 101, 'gworker')] > 1000 and seen[(0, 0, 0, 'swapper')] > 1000 and seen[(1, 300, 300, None)] > 1000, seen
"

# -F machine_pid,vcpu on a recording without a guest sideband: perf prints
# nothing for them; so does vmtrace
"$VMTRACE" correlate --in-place "$TMP/h.data" >/dev/null 2>&1
"$VMTRACE" script "$TMP/h.data" --guest "$GUEST_CODE" -F $F >"$TMP/h1" 2>&1
"$VMTRACE" script "$TMP/h.data" --guest "$GUEST_CODE" >"$TMP/h2" 2>&1
check "no guest sideband: -F ...,machine_pid,vcpu prints what -F without them does (perf: the same)" \
	sh -c "test -s '$TMP/h1' && cmp -s '$TMP/h1' '$TMP/h2'"
finish
