#!/bin/sh
# vmtrace inject: a vCPU's TSC offset defaults to what the trace shows, or
# else to KVM's own in REC's metadata (issue #13: "offset and scale default
# to what correlate discovers in the recording (or its KVM metadata)").
# vmtrace record writes DIR/vmtrace-kvm.ini with each vCPU's debugfs
# tsc-offset at the start and the end (and the kvm_write_tsc_offset events
# when it can): an offset that is the same at both ends, with no write
# recorded, is KVM's offset for the whole recording.  Before, only the
# scaling was taken from there and a trace without timing packets needed
# --offset (exit 5).
# Guest file: a real `perf record -a` file of this host standing in for a
# guest's (see t0100); host recordings from vmtrace synth (QEMU pid 4000,
# vCPU threads 4010, 4011).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
need_guest_standin "$TMP/g0.data"
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g0.data" "$TMP/g.data" time-conv 10 341 0 1

A=0xffffff0000000000 B=0xfffffe0000000000
# meta DIR PID OFF0 OFF1 [END1 [WRITE]]: vmtrace-kvm.ini as vmtrace record writes it
meta() {
	printf '[vmtrace-kvm]\nversion=1\ndomain=synth\nqemu_pid=%s\n' "$2" >"$1/vmtrace-kvm.ini"
	printf '\n[vcpu0]\ntid=4010\nstart.tsc_offset=%d\nend.tsc_offset=%d\n' $(s64 $3) $(s64 $3) >>"$1/vmtrace-kvm.ini"
	printf '\n[vcpu1]\ntid=4011\nstart.tsc_offset=%d\nend.tsc_offset=%d\n' $(s64 $4) $(s64 ${5:-$4}) >>"$1/vmtrace-kvm.ini"
	[ -z "${6:-}" ] || printf '\n[tsc-offset-writes]\ncount=1\nw0=%s\n' "$6" >>"$1/vmtrace-kvm.ini"
}
S="--show-task-events --show-mmap-events --show-switch-events --ns --itrace="
script() { "$PERF" script -i "$1" $S -F+machine_pid,+vcpu 2>/dev/null | grep "^VM:" >"$2"; }
# inject_json REC OUT [OPTIONS...]: exit status; the report in OUT.json, stderr in OUT.err
inject_json() {
	r=$1 o=$2
	shift 2
	"$VMTRACE" inject "$r" --guest-data "$TMP/g.data" -o "$o" --json "$@" >"$o.json" 2>"$o.err"
}

"$VMTRACE" synth -o "$TMP/ht" --dir --per-cpu --vcpus 2 --cpus 2 --size 1M --timeless 2>/dev/null
meta "$TMP/ht" 4000 $A $B
inject_json "$TMP/ht" "$TMP/m"
check "a trace without timing packets, KVM's offsets in its metadata: exit 0, each vCPU KVM's offset" \
	json_check "$TMP/m.json" '(sorted((c["vcpu"], c["tsc_offset"]) for c in j["clocks"]) == [(0, "'$A'"), (1, "'$B'")]
		and j["offsets_from"] == "KVM'"'"'s, from REC'"'"'s metadata (vmtrace-kvm.ini)")'
inject_json "$TMP/ht" "$TMP/g" --offset $A:0 --offset $B:1
script "$TMP/m" "$TMP/m.txt"
script "$TMP/g" "$TMP/g.txt"
check "... the same guest records and times as with --offset $A:0 --offset $B:1 ($(wc -l <"$TMP/m.txt") lines)" \
	sh -c "test -s '$TMP/m.txt' && cmp -s '$TMP/m.txt' '$TMP/g.txt'"

# not KVM's offset for the whole recording: not taken
meta "$TMP/ht" 4000 $A $B $A
rm -rf "$TMP/out"
inject_refused "$TMP/g.data" "$TMP/ht" 5 "give it with --offset OFF:1" \
	"vCPU 1's offset different at the start and the end: not taken"
meta "$TMP/ht" 4000 $A $B "" "1000;4011;1;$(s64 $B);$(s64 $A)"
inject_refused "$TMP/g.data" "$TMP/ht" 5 "give it with --offset OFF:1" \
	"a kvm_write_tsc_offset of vCPU 1 recorded: not taken"
meta "$TMP/ht" 4100 $A $B
inject_refused "$TMP/g.data" "$TMP/ht" 5 "give them with --offset" "the metadata of another QEMU process: not taken"

# the trace's offsets come first
"$VMTRACE" synth -o "$TMP/hd" --dir --per-cpu --vcpus 2 --cpus 2 --size 1M --offset $A 2>/dev/null
meta "$TMP/hd" 4000 $B $B
inject_json "$TMP/hd" "$TMP/d"
check "a trace with timing packets: the offset it shows ($A), not the metadata's" \
	json_check "$TMP/d.json" '([c["tsc_offset"] for c in j["clocks"]] == ["'$A'", "'$A'"]
		and j["offsets_from"] == "discovered in the host trace")'
finish
