#!/bin/sh
# vmtrace inject refuses what cannot be injected - each with one line that
# says why (and what to do) and a documented exit status - and leaves
# nothing behind: OUT does not appear, no temporary stays.
# Guest files: a real `perf record` file of this host standing in for a
# guest's (see t0100), edited by tests/perf-edit.py where a real recording
# cannot lack something; host recordings from vmtrace synth.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
edit() { "$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$@"; }

NV=$(nproc); [ "$NV" -gt 2 ] && NV=2
"$PERF" record -q -N -e dummy -a -C "0-$((NV - 1))" --sample-identifier -o "$TMP/g0.data" -- sleep 0.01 >/dev/null 2>&1 ||
	skip "perf record -a does not work here (perf_event_paranoid? not root?)"
edit "$TMP/g0.data" "$TMP/g.data" time-conv 10 341 0 1
"$VMTRACE" synth -o "$TMP/h.data" --per-cpu --vcpus "$NV" --cpus "$NV" --size 1M 2>/dev/null

refused() { inject_refused "$@"; }

"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/ok.data" >/dev/null 2>&1
check "the unedited inputs are injected (exit 0)" test $? -eq 0

# the guest file
edit "$TMP/g.data" "$TMP/g-noids.data" no-ids
refused "$TMP/g-noids.data" "$TMP/h.data" 17 "no sample ids" "guest file without sample ids"
edit "$TMP/g.data" "$TMP/g-noall.data" no-sample-id-all
refused "$TMP/g-noall.data" "$TMP/h.data" 17 "no sample_id_all" "guest events without sample_id_all"
edit "$TMP/g.data" "$TMP/g-noidx.data" drop 69
refused "$TMP/g-noidx.data" "$TMP/h.data" 17 "no ID_INDEX" "guest file without ID_INDEX"
"$PERF" record -q -N -e dummy --per-thread --sample-identifier -o "$TMP/t0.data" -- sleep 0.01 >/dev/null 2>&1
edit "$TMP/t0.data" "$TMP/g-thread.data" time-conv 10 341 0 1
refused "$TMP/g-thread.data" "$TMP/h.data" 17 "has CPU -1" "guest recorded --per-thread (a real perf record file: its id has CPU -1)"
edit "$TMP/g.data" "$TMP/g-cpu.data" id-index-cpu -1
refused "$TMP/g-cpu.data" "$TMP/h.data" 17 "has CPU -1" "guest ID_INDEX with CPU -1 everywhere"
refused "$TMP/g0.data" "$TMP/h.data" 18 "no-kvmclock" "guest file without TIME_CONV (this host's real perf record file)"
edit "$TMP/g.data" "$TMP/g-kvmclock.data" time-conv 10 341 0 0
refused "$TMP/g-kvmclock.data" "$TMP/h.data" 18 "boot the guest with no-kvmclock" \
	"guest TIME_CONV without cap_user_time_zero (kvm-clock)"
printf 'not a perf.data file at all, just text\n' >"$TMP/g-text.data"
refused "$TMP/g-text.data" "$TMP/h.data" 3 "g-text.data" "guest file that is not a perf.data" --offset 0
if [ "$NV" -gt 1 ]; then
	"$VMTRACE" synth -o "$TMP/h1.data" --per-cpu --vcpus 1 --cpus 1 --size 1M 2>/dev/null
	refused "$TMP/g.data" "$TMP/h1.data" 17 "guest CPU 1 has no vCPU thread" "a guest CPU the host has no vCPU thread for"
fi

# the host recording
edit "$TMP/h.data" "$TMP/h-nocomm.data" drop 3
refused "$TMP/g.data" "$TMP/h-nocomm.data" 19 "CPU n/KVM" "host recording without \"CPU n/KVM\" COMMs"
refused "$TMP/g.data" "$TMP/h.data" 19 "process 1234" "--pid of a process without vCPU threads" --pid 1234 --offset 0
"$VMTRACE" synth -o "$TMP/h-thread.data" --per-thread --vcpus "$NV" --size 1M 2>/dev/null
refused "$TMP/g.data" "$TMP/h-thread.data" 19 "no context-switch records" "host recording without context switches"
edit "$TMP/h.data" "$TMP/h-notc.data" drop 79
refused "$TMP/g.data" "$TMP/h-notc.data" 19 "no TIME_CONV" "host recording without TIME_CONV" --offset 0
"$VMTRACE" synth -o "$TMP/h-2vm.data" --per-cpu --vcpus 4 --vms 2 --cpus 2 --size 1M --offset 0xffffff0000000000:0 \
	--offset 0xfffffe0000000000:1 2>/dev/null
refused "$TMP/g.data" "$TMP/h-2vm.data" 19 "say which with --pid" "two QEMU processes and no --pid"
refused "$TMP/g.data" "$TMP/h-2vm.data" 19 "say which with --pid" "two QEMU processes and no --pid (offsets given)" --offset 0
rm -rf "$TMP/out"
"$VMTRACE" inject "$TMP/h-2vm.data" --guest-data "$TMP/g.data" -o "$TMP/out" --pid 4100 --json >"$TMP/o" 2>"$TMP/e"
check "... --pid 4100 picks the second VM, with its own offset for each of its vCPUs" json_check "$TMP/o" \
	'j["machine_pid"] == 4100 and sorted((c["vcpu"], c["tsc_offset"]) for c in j["clocks"]) == [(0, "0xfffffe0000000000"), (1, "0xfffffe0000000000")]'
refused "$TMP/g.data" "$TMP/missing.data" 3 "missing.data" "a REC that does not exist"

# the offsets
"$VMTRACE" synth -o "$TMP/h-timeless.data" --per-cpu --vcpus "$NV" --cpus "$NV" --size 1M --timeless 2>/dev/null
refused "$TMP/g.data" "$TMP/h-timeless.data" 5 "give them with --offset" "a timeless host trace: no offset to discover"
refused "$TMP/g0.data" "$TMP/h-timeless.data" 18 "no-kvmclock" "the guest file is checked before the offsets are looked for"
rm -rf "$TMP/out"
"$VMTRACE" inject "$TMP/h-timeless.data" --guest-data "$TMP/g.data" -o "$TMP/out" --offset 0x1234 --json >"$TMP/o" 2>"$TMP/e"
check "... --offset 0x1234 for every vCPU: exit 0, JSON says so" \
	json_check "$TMP/o" 'j["clocks"] == [{"vcpu": None, "tsc_offset": "0x1234", "tsc_scaling_ratio": 0, "tsc_scaling_frac": 0}] and j["offsets_from"] == "given with --offset"'
if [ "$NV" -gt 1 ]; then
	refused "$TMP/g.data" "$TMP/h.data" 5 "give it with --offset OFF:1" "--offset for vCPU 0 only" --offset 0x10:0
fi

# the command line and OUT
refused "$TMP/g.data" "$TMP/h.data" 2 "--offset 'zz'" "a bad --offset" --offset zz
refused "$TMP/g.data" "$TMP/h.data" 2 "--tsc-scale '0'" "a bad --tsc-scale" --tsc-scale 0
"$VMTRACE" inject "$TMP/h.data" -o "$TMP/out" >/dev/null 2>"$TMP/e"
check "no --guest-data: usage error (exit 2)" test $? -eq 2
"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "" >/dev/null 2>"$TMP/e"
check "-o \"\": usage error (exit 2), says so" sh -c "test $? -eq 2 && grep -q 'empty path' '$TMP/e'"
refused "$TMP/g.data" "$TMP/h.data" 2 "vCPU 7" "--offset for a vCPU the recording does not have" --offset 0x10:7
refused "$TMP/g.data" "$TMP/h.data" 2 "vCPU 0 given twice" "--offset for the same vCPU twice" --offset 0x10:0 --offset 0x20:0
refused "$TMP/g.data" "$TMP/h.data" 2 "vCPU 0 given twice" "--offset OFF:0,0" --offset 0x10:0,0
refused "$TMP/g.data" "$TMP/h.data" 2 "every vCPU (OFF without :VCPU) given twice" "--offset OFF twice" --offset 0x10 --offset 0x20
mkdir "$TMP/exists"
"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/exists" >/dev/null 2>"$TMP/e"
check "an existing OUT is refused (exit 1), untouched" test $? -eq 1 -a -z "$(ls -A "$TMP/exists")"
finish
