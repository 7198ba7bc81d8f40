#!/bin/sh
# vmtrace inject against perf inject --guest-data, on the same inputs.
#
# The host recording comes from `vmtrace synth` ("CPU n/KVM" threads of QEMU
# pid 4000, per-CPU switch records, TIME_CONV, a VMX TSC offset in the guest
# TSC packets).  The guest file is a REAL `perf record` file - but recorded
# on THIS host, standing in for a guest's: no guest here runs perf, and there
# is no hardware PMU, so it is system-wide software events (cpu-clock samples,
# which are not injected, and comm/fork/exit/mmap/switch records) of a few
# commands.  This machine's
# kernel exports no TSC conversion (a VM: cap_user_time_zero 0), so
# tests/perf-edit.py gives the file the TIME_CONV a no-kvmclock guest writes
# (shift 10, mult 341: a 3 GHz TSC, like synth's host).  The offset puts the
# guest's records inside the host recording.
#
# Both outputs give the same `perf script` lines, apart from the host CPU of
# guest records (perf 6.1 keys its vCPU map on the *previous* task of IN
# switch records); with a host TSC >= 2^53 perf's times are off by rounding
# through a double and vmtrace's are exact.  Each difference is checked
# against its rule, record by record, and counted.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python

NV=$(nproc); [ "$NV" -gt 2 ] && NV=2
"$PERF" record -q -N -e cpu-clock -F 2000 -a -C "0-$((NV - 1))" --sample-identifier --switch-events -o "$TMP/g0.data" -- \
	sh -c 'sleep 0.02; ls / >/dev/null; cat /proc/version >/dev/null; sleep 0.02' >/dev/null 2>&1 ||
	skip "perf record -a does not work here (perf_event_paranoid? not root?)"
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g0.data" "$TMP/g.data" time-conv 10 341 0 1

# the offset that puts the guest's first timed record 200000 ticks after the host's start
# (with TSC scaling RATIO/2^48: guest = (host * RATIO >> 48) + offset)
offset_for() { "$PYTHON3" "$top_srcdir/tests/guest-offset.py" "$PERF" "$TMP/g.data" "$@"; }
S="--show-task-events --show-mmap-events --show-switch-events --ns --itrace="
script() { "$PERF" script -i "$1" $S -F+machine_pid,+vcpu 2>/dev/null | grep -v "instruction trace error" >"$2"; }
"$PERF" script -i "$TMP/g.data" $S 2>/dev/null | grep PERF_RECORD_ >"$TMP/g.txt"    # samples are not injected

OFF=$(offset_for 0x100000000000)
"$VMTRACE" synth -o "$TMP/h.data" --per-cpu --vcpus "$NV" --cpus "$NV" --size 32M --offset "$OFF" 2>/dev/null
"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/v.data" >"$TMP/v.out" 2>&1
check "vmtrace inject, offsets discovered in the host trace: exit 0" test $? -eq 0
check "it used the offset synth put into the trace ($OFF)" grep -q "TSC offset $OFF" "$TMP/v.out"
timeout 300 "$PERF" inject -i "$TMP/h.data" -o "$TMP/p.data" --guest-data="$TMP/g.data,4000,$OFF" >/dev/null 2>&1
check "perf inject --guest-data=GUEST,4000,$OFF: exit 0" test $? -eq 0
script "$TMP/p.data" "$TMP/p.txt"
script "$TMP/v.data" "$TMP/v.txt"
check "perf script shows guest records (VM: 4000 VCPU:...)" grep -q "^VM: 4000 VCPU:00" "$TMP/v.txt"
sed -E 's/ \[[0-9]+\] / [CPU] /' "$TMP/p.txt" >"$TMP/p.nocpu"
sed -E 's/ \[[0-9]+\] / [CPU] /' "$TMP/v.txt" >"$TMP/v.nocpu"
check "perf script: the same lines as perf inject's output, host CPU aside" test_cmp "$TMP/p.nocpu" "$TMP/v.nocpu"
"$PERF" script -i "$TMP/h.data" $S 2>/dev/null | grep -v "instruction trace error" >"$TMP/h.txt"
"$PYTHON3" "$top_srcdir/tests/inject-check.py" cpus "$TMP/h.txt" "$TMP/p.txt" "$TMP/v.txt" 4000 >"$TMP/cpus" 2>&1
check "host CPUs: vmtrace's = the vCPU thread's switch-in CPU, perf's = its quirk (previous task of IN records)" test $? -eq 0
cat "$TMP/cpus"
check "... and the quirk shows: some guest records are on another CPU in perf's output" \
	grep -q "^# [1-9][0-9]* of [0-9]* guest records are on another host CPU" "$TMP/cpus"
"$PYTHON3" "$top_srcdir/tests/inject-check.py" times "$TMP/g.txt" "$TMP/p.txt" "$TMP/v.txt" "$OFF" 10 341 10 341 >"$TMP/times" 2>&1
check "host TSC < 2^53: every guest time is the exact conversion, in both" grep -q "^# 0 of [1-9]" "$TMP/times"

"$PYTHON3" "$top_srcdir/tests/inject-check.py" raw "$TMP/p.data" "$TMP/v.data" >"$TMP/raw" 2>&1
check "the guest records, byte for byte as perf writes them (ids, misc, trailers), their CPU aside" test $? -eq 0
cat "$TMP/raw"
"$PERF" script -i "$TMP/p.data" -D --no-itrace 2>/dev/null | grep "^ \.\.\. id:.*machine_pid" >"$TMP/p.idx"
"$PERF" script -i "$TMP/v.data" -D --no-itrace 2>/dev/null | grep "^ \.\.\. id:.*machine_pid" >"$TMP/v.idx"
check "perf script -D: the guest ids' ID_INDEX entries (id, cpu -1, vCPU thread, machine_pid, vcpu) as perf's" \
	test_cmp "$TMP/p.idx" "$TMP/v.idx"
check "... one per guest event and CPU (cpu-clock, dummy)" test "$(wc -l <"$TMP/v.idx")" -eq $((2 * NV))
"$PERF" evlist -v -i "$TMP/p.data" >"$TMP/p.evl" 2>&1
"$PERF" evlist -v -i "$TMP/v.data" >"$TMP/v.evl" 2>&1
check "perf evlist -v: the same events (host's, and the guest's as cpu-clock:G and dummy:G, + IDENTIFIER, exclude_host)" \
	test_cmp "$TMP/p.evl" "$TMP/v.evl"
"$PERF" buildid-list -i "$TMP/p.data" >"$TMP/p.bid" 2>&1
"$PERF" buildid-list -i "$TMP/v.data" >"$TMP/v.bid" 2>&1
check "perf buildid-list: the guest's build ids, as in perf's output" test_cmp "$TMP/p.bid" "$TMP/v.bid"
check "... there are some" test -s "$TMP/v.bid"
"$PERF" report --header-only -i "$TMP/p.data" 2>&1 | grep -v "^# \(captured on\|data offset\|feat offset\)" >"$TMP/p.hdr"
"$PERF" report --header-only -i "$TMP/v.data" 2>&1 | grep -v "^# \(captured on\|data offset\|feat offset\)" >"$TMP/v.hdr"
check "perf report --header-only: the same header (event descriptions with the guest's cpu-clock:G, dummy:G)" \
	test_cmp "$TMP/p.hdr" "$TMP/v.hdr"
check "... the guest's samples were not injected (vmtrace says how many)" \
	grep -q "injected ([1-9][0-9]* not injected: samples" "$TMP/v.out"

# A host up for 139 days at 3 GHz: TSC 2^55.  perf converts through a double.
OFF2=$(offset_for 0x80000000000000)
"$VMTRACE" synth -o "$TMP/h2.data" --per-cpu --vcpus "$NV" --cpus "$NV" --size 4M --tsc-start 0x80000000000000 \
	--offset "$OFF2" 2>/dev/null
"$VMTRACE" inject "$TMP/h2.data" --guest-data "$TMP/g.data" -o "$TMP/v2.data" >/dev/null 2>&1
check "host TSC 2^55: vmtrace inject exit 0" test $? -eq 0
timeout 300 "$PERF" inject -i "$TMP/h2.data" -o "$TMP/p2.data" --guest-data="$TMP/g.data,4000,$OFF2" >/dev/null 2>&1
script "$TMP/p2.data" "$TMP/p2.txt"
script "$TMP/v2.data" "$TMP/v2.txt"
"$PYTHON3" "$top_srcdir/tests/inject-check.py" times "$TMP/g.txt" "$TMP/p2.txt" "$TMP/v2.txt" "$OFF2" 10 341 10 341 \
	>"$TMP/times2" 2>&1
check "host TSC 2^55: vmtrace's times are exact, perf's rounded through a double, record by record" test $? -eq 0
cat "$TMP/times2"
check "... and perf's differ for some records" grep -q "^# [1-9][0-9]* of [0-9]* guest records: perf" "$TMP/times2"

# VMX TSC scaling 1.5 (guest TSC = host TSC * 1.5 + offset): perf's fourth
# field is a double it divides by, vmtrace undoes the scaling exactly
R=0x1800000000000
OFF3=$(offset_for 0x100000000000 $R)
"$VMTRACE" synth -o "$TMP/h3.data" --per-cpu --vcpus "$NV" --cpus "$NV" --size 4M --offset "$OFF3" --tsc-scale $R \
	2>/dev/null
"$VMTRACE" inject "$TMP/h3.data" --guest-data "$TMP/g.data" -o "$TMP/v3.data" --tsc-scale $R >"$TMP/v3.out" 2>&1
check "TSC scaling: vmtrace inject --tsc-scale $R, offset discovered on that basis: exit 0" \
	grep -q "TSC offset $OFF3, TSC scaling $(printf %d $R)/2^48" "$TMP/v3.out"
timeout 300 "$PERF" inject -i "$TMP/h3.data" -o "$TMP/p3.data" --guest-data="$TMP/g.data,4000,$OFF3,1.5" >/dev/null 2>&1
script "$TMP/p3.data" "$TMP/p3.txt"
script "$TMP/v3.data" "$TMP/v3.txt"
"$PYTHON3" "$top_srcdir/tests/inject-check.py" times "$TMP/g.txt" "$TMP/p3.txt" "$TMP/v3.txt" "$OFF3" 10 341 10 341 \
	$R 48 >"$TMP/times3" 2>&1
check "TSC scaling: vmtrace's times exact (the smallest host TSC that scales to the guest's), perf's truncated" \
	test $? -eq 0
cat "$TMP/times3"

# perf.data directories: REC's other files (kcore_dir, ...) come along, and a
# GUEST directory's kcore_dir becomes kcore_dir__PID, as perf puts it
"$VMTRACE" synth -o "$TMP/hd" --dir --per-cpu --vcpus "$NV" --cpus "$NV" --size 1M 2>/dev/null
mkdir -p "$TMP/hd/kcore_dir" "$TMP/gd/kcore_dir"
echo host >"$TMP/hd/kcore_dir/kallsyms"
echo guest >"$TMP/gd/kcore_dir/kallsyms"
cp "$TMP/g.data" "$TMP/gd/data"
"$VMTRACE" inject "$TMP/hd" --guest-data "$TMP/gd" -o "$TMP/od" >/dev/null 2>&1
check "directories: exit 0, OUT/data, REC's kcore_dir, GUEST's as kcore_dir__4000" \
	test $? -eq 0 -a -f "$TMP/od/data" -a "$(cat "$TMP/od/kcore_dir/kallsyms")" = host \
	-a "$(cat "$TMP/od/kcore_dir__4000/kallsyms")" = guest
"$PERF" script -i "$TMP/od" --show-task-events -F+machine_pid,+vcpu --itrace= 2>/dev/null | grep -c "^VM: 4000" >"$TMP/n"
check "... perf script reads the directory's guest records" test "$(cat "$TMP/n")" -gt 0
finish
