#!/bin/sh
# Inputs vmtrace inject must refuse rather than merge wrongly.
#
# 1. inject into a recording that already holds that VM's guest
# records (injected before: by vmtrace inject, record --guest-ssh or perf
# inject --guest-data) is refused - exit 19, one line, nothing written -
# instead of adding every guest record a second time under new ids.  A
# recording with the guest records of ANOTHER VM (QEMU pid) still takes
# this one's: two VMs are merged one after the other.
# 2. A perf.data directory of several data files (perf record --threads:
# data.0, data.1 beside data), as the guest file or as REC: inject reads
# DIR/data only, and most records are in the others - refused (exit 3, one
# line, nothing written) instead of injecting a part of the guest's
# records (or of the host's) without a word.
#
# 3. A guest file none of whose timed records falls within the host
# recording's time span (another run's file, another machine's, a wrong
# --offset): injected, but with a warning line and in_host_span 0 in the
# JSON - before, nothing said that the guest's records all lie outside the
# trace.
#
# The guest file's own "CPU 0/KVM" thread (a nested QEMU) is no vCPU
# thread of the host: an injected guest COMM or switch record is not the
# host's.
# Guest file: a real `perf record` file of this host standing in for a
# guest's (see t0100); host recordings from vmtrace synth.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python

NV=$(nproc); [ "$NV" -gt 2 ] && NV=2
"$PERF" record -q -N -e dummy -a -C "0-$((NV - 1))" --sample-identifier --switch-events -o "$TMP/g0.data" -- \
	sh -c 'ls / >/dev/null; sh -c "printf \"CPU 0/KVM\" >/proc/self/comm; sleep 0.01"; sleep 0.02' >/dev/null 2>&1 ||
	skip "perf record -a does not work here (perf_event_paranoid? not root?)"
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g0.data" "$TMP/g.data" time-conv 10 341 0 1
"$VMTRACE" synth -o "$TMP/h.data" --per-cpu --vcpus "$NV" --cpus "$NV" --size 1M 2>/dev/null
# guest_lines FILE PID: the guest records of QEMU pid PID perf script shows
guest_lines() {
	"$PERF" script -i "$1" --show-task-events --show-mmap-events --show-switch-events -F+machine_pid --itrace= \
		2>/dev/null | grep -c "^VM: *$2 "
}

# refused REC DESCRIPTION [OPTIONS...]: exit 19, one line naming pid 4000 as injected already, no OUT, no temporary
refused() {
	r=$1 d=$2
	shift 2
	inject_refused "$TMP/g.data" "$r" 19 "already holds guest records of QEMU process 4000" "$d" "$@"
}

"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/a.data" >/dev/null 2>&1
check "the first injection: exit 0" test $? -eq 0
N=$(guest_lines "$TMP/a.data" 4000)
check "... $N guest records of VM 4000" test "$N" -gt 0
check "... among them the COMM of the guest's own \"CPU 0/KVM\" thread" \
	sh -c "'$PERF' script -i '$TMP/a.data' --show-task-events -F+machine_pid --itrace= 2>/dev/null | grep -q '^VM: *4000 .*COMM.*CPU 0/KVM'"
refused "$TMP/a.data" "vmtrace inject's output injected again"
refused "$TMP/a.data" "... also with --pid and --offset given" --pid 4000 --offset 0
OFF=$("$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/j.data" --json 2>/dev/null | "$PYTHON3" -c \
	'import json, sys; print(json.load(sys.stdin)["clocks"][0]["tsc_offset"])')
timeout 300 "$PERF" inject -i "$TMP/h.data" -o "$TMP/p.data" --guest-data="$TMP/g.data,4000,$OFF" >/dev/null 2>&1
ck_rc=$?
check "perf inject --guest-data=GUEST,4000,$OFF: exit 0, $(guest_lines "$TMP/p.data" 4000) guest records" \
	test $ck_rc -eq 0 -a "$(guest_lines "$TMP/p.data" 4000)" -gt 0
refused "$TMP/p.data" "perf inject's output injected again"

# two VMs: the second VM's guest file goes into the first one's result
"$VMTRACE" synth -o "$TMP/h2.data" --per-cpu --vcpus 4 --vms 2 --cpus 2 --size 1M --offset 0xffffff0000000000:0 \
	--offset 0xfffffe0000000000:1 2>/dev/null
"$VMTRACE" inject "$TMP/h2.data" --guest-data "$TMP/g.data" -o "$TMP/b.data" --pid 4000 >/dev/null 2>&1
check "two VMs: VM 4000's guest file injected (exit 0)" test $? -eq 0
"$VMTRACE" inject "$TMP/b.data" --guest-data "$TMP/g.data" -o "$TMP/c.data" --pid 4100 >/dev/null 2>"$TMP/e"
check "... then VM 4100's into that: exit 0" test $? -eq 0
N1=$(guest_lines "$TMP/b.data" 4000)
check "... the result has VM 4000's $N1 guest records once and VM 4100's as many" \
	test "$N1" -gt 0 -a "$(guest_lines "$TMP/c.data" 4000)" -eq "$N1" -a "$(guest_lines "$TMP/c.data" 4100)" -eq "$N1"
rm -rf "$TMP/out"
refused "$TMP/c.data" "... and VM 4000's again is refused" --pid 4000

# --- a guest file outside the host recording's time span --------------------------
# h.data's offset (synth's default) puts this host's recent perf.data hours away from synth's trace
rm -rf "$TMP/out"
"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/out" --json >"$TMP/o" 2>"$TMP/e"
check "guest records all outside the host trace: exit 0, JSON in_host_span 0, one warning line saying so" \
	sh -c "test $? -eq 0 && '$PYTHON3' -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j[\"in_host_span\"] == 0 and j[\"injected\"] > 0' '$TMP/o' &&
	       test \$(wc -l <'$TMP/e') -eq 1 && grep -q 'none of the [1-9][0-9]* timed guest records falls within the host recording' '$TMP/e'"
sed 's/^/# /' "$TMP/e"
OFF2=$("$PYTHON3" "$top_srcdir/tests/guest-offset.py" "$PERF" "$TMP/g.data" 0x100000000000)
"$VMTRACE" synth -o "$TMP/h3.data" --per-cpu --vcpus "$NV" --cpus "$NV" --size 4M --offset "$OFF2" 2>/dev/null
rm -rf "$TMP/out"
"$VMTRACE" inject "$TMP/h3.data" --guest-data "$TMP/g.data" -o "$TMP/out" --json >"$TMP/o" 2>"$TMP/e"
check "guest records inside it (offset $OFF2): exit 0, in_host_span > 0, no warning" \
	sh -c "test $? -eq 0 && '$PYTHON3' -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j[\"in_host_span\"] > 0, j' '$TMP/o' &&
	       ! test -s '$TMP/e'"

# --- perf record --threads directories -----------------------------------------
# refused3 GUEST REC WORDS DESCRIPTION: exit 3, one line with WORDS, no OUT, no temporary
refused3() {
	rm -rf "$TMP/out"
	"$VMTRACE" inject "$2" --guest-data "$1" -o "$TMP/out" >"$TMP/o" 2>"$TMP/e"
	rc=$?
	if [ "$rc" -eq 3 ] && [ "$(wc -l <"$TMP/e")" -eq 1 ] && grep -q -- "$3" "$TMP/e" && [ ! -e "$TMP/out" ] &&
	   ! ls -a "$TMP" | grep -q vmtrace-tmp; then
		ok "$4: exit 3, one line ($(cut -c1-160 "$TMP/e"))"
	else
		fail "$4: want exit 3 and one line with '$3', got exit $rc:"
		sed 's/^/#   /' "$TMP/e"
	fi
}
if "$PERF" record -q -N --threads -e dummy -a -C "0-$((NV - 1))" --sample-identifier --switch-events -o "$TMP/gt0" -- \
	sh -c 'ls / >/dev/null; sleep 0.02' >/dev/null 2>&1 && ls "$TMP/gt0" | grep -q '^data\.[0-9]'; then
	mkdir "$TMP/gt"
	"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/gt0/data" "$TMP/gt/data" time-conv 10 341 0 1
	cp "$TMP"/gt0/data.[0-9]* "$TMP/gt/"
	nrec=$("$PERF" script -i "$TMP/gt" --show-task-events --show-switch-events 2>/dev/null | grep -c PERF_RECORD_)
	check "perf record --threads (real): a directory $(ls "$TMP/gt" | tr '\n' ' '), perf reads $nrec task/switch records" test "$nrec" -gt 0
	refused3 "$TMP/gt" "$TMP/h.data" "perf record --threads" "the guest's perf.data a --threads directory"
	refused3 "$TMP/g.data" "$TMP/gt0" "several files (data\.[0-9]* beside data" "REC a --threads directory"
else
	echo "# perf record --threads does not work here: its checks are left out"
fi
finish
