#!/bin/sh
# vmtrace inject = perf inject --guest-data on the guest record kinds that a
# short `perf record -a` seldom has: LOST, KSYMBOL (out-of-line code
# injected, BPF programs left out, as perf) and TEXT_POKE (issue #13's list:
# "mmap, mmap2, comm, fork, exit, lost, context switch, OOL ksymbol,
# text_poke").  The guest file is a real `perf record -a` of this host
# standing in for the guest's (see t0100); tests/perf-edit.py sideband
# writes those records into it (with the sample ids of the file's own
# events), among task and switch records.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
need_guest_standin "$TMP/g0.data"     # (under load it may have LOST records of its own)
OFF=0x123456789
cat >"$TMP/sb" <<SB
-3000000 0 comm 500 500 gtask
-2950000 0 mmap2 500 500 0x401000 0x1000 0x1000 /opt/gbin/gtask
-2000000 0 in 500 500 0 0
-2000000 1 in 0 0 0 0
300000 0 lost id 7
400000 1 ksymbol 0xffffffffc0201000 4096 2 ftrace_trampoline
500000 1 ksymbol 0xffffffffc0300000 512 1 bpf_prog_6deef7357e7b4530_sd_fw_egress
600000 0 text_poke 0xffffffff81001234 0f1f440000 e9a0b0c0d0
700000 1 text_poke 0xffffffff81005678 e9a0b0c0d0 0f1f440000
800000 0 fork 501 500 501 500
SB
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g0.data" "$TMP/g.1" time-conv 10 341 0 1 &&
	"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g.1" "$TMP/g.data" sideband "$TMP/sb" $((0x100000000000 + OFF)) ||
	{ echo "cannot edit the guest file"; exit 1; }
"$PERF" script -i "$TMP/g.data" -D 2>/dev/null | grep -o 'PERF_RECORD_[A-Z_0-9]*' | sort | uniq -c >"$TMP/g.kinds"
check "the guest file has them: $(grep -E 'LOST|KSYMBOL|TEXT_POKE' "$TMP/g.kinds" | tr -s ' \n' ' ')" \
	sh -c "awk '\$2 == \"PERF_RECORD_LOST\" && \$1 >= 1 { ok = 1 } END { exit !ok }' '$TMP/g.kinds' &&
	       grep -q ' 2 PERF_RECORD_KSYMBOL$' '$TMP/g.kinds' &&
	       grep -q ' 2 PERF_RECORD_TEXT_POKE$' '$TMP/g.kinds'"

"$VMTRACE" synth -o "$TMP/h.data" --per-cpu --vcpus 2 --cpus 2 --size 4M --offset "$OFF" 2>/dev/null
"$VMTRACE" inject "$TMP/h.data" --guest-data "$TMP/g.data" -o "$TMP/v.data" --offset "$OFF" >"$TMP/v.out" 2>&1
check "vmtrace inject: exit 0" test $? -eq 0
timeout 300 "$PERF" inject -i "$TMP/h.data" -o "$TMP/p.data" --guest-data="$TMP/g.data,4000,$OFF" >/dev/null 2>&1
check "perf inject --guest-data: exit 0" test $? -eq 0
"$PYTHON3" "$top_srcdir/tests/inject-check.py" raw "$TMP/p.data" "$TMP/v.data" >"$TMP/raw" 2>&1
check "the guest records, byte for byte as perf writes them, their CPU aside" test $? -eq 0
cat "$TMP/raw"
# kinds: perf script -D of both outputs, guest records only (machine_pid)
kinds() {
	"$PERF" script -i "$1" -D --no-itrace 2>/dev/null | grep -E '^[0-9]+ [0-9]+ 0x[0-9a-f]+ \[0x[0-9a-f]+\]: PERF_RECORD_' |
		grep -o 'PERF_RECORD_[A-Z_0-9]*' | sort | uniq -c
}
"$PERF" script -i "$TMP/p.data" --show-task-events --show-mmap-events --show-switch-events --show-lost-events \
	-F+machine_pid,+vcpu --ns --itrace= 2>/dev/null | grep '^VM:' >"$TMP/p.txt"
"$PERF" script -i "$TMP/v.data" --show-task-events --show-mmap-events --show-switch-events --show-lost-events \
	-F+machine_pid,+vcpu --ns --itrace= 2>/dev/null | grep '^VM:' >"$TMP/v.txt"
sed -E 's/ \[[0-9]+\] / [CPU] /' "$TMP/p.txt" >"$TMP/p.nocpu"
sed -E 's/ \[[0-9]+\] / [CPU] /' "$TMP/v.txt" >"$TMP/v.nocpu"
check "perf script: the same guest lines, host CPU aside ($(wc -l <"$TMP/v.txt"), LOST among them)" \
	sh -c "cmp -s '$TMP/p.nocpu' '$TMP/v.nocpu' && grep -q PERF_RECORD_LOST '$TMP/v.txt'"
kinds "$TMP/v.data" >"$TMP/v.kinds"
kinds "$TMP/p.data" >"$TMP/p.kinds"
check "perf script -D: the same record kinds and counts as perf's output" cmp -s "$TMP/p.kinds" "$TMP/v.kinds"
"$PERF" script -i "$TMP/v.data" -D --no-itrace 2>/dev/null | grep -A1 'PERF_RECORD_KSYMBOL\|PERF_RECORD_TEXT_POKE' >"$TMP/v.D"
check "OOL ksymbol (ftrace_trampoline) and both TEXT_POKEs injected, the BPF program's ksymbol left out" \
	sh -c "grep -q 'ksymbol.*ftrace_trampoline\|KSYMBOL.*ftrace_trampoline' '$TMP/v.D' &&
	       ! grep -q 'sd_fw_egress' '$TMP/v.D' && test \$(grep -c 'PERF_RECORD_TEXT_POKE' '$TMP/v.D') -eq 2"
finish
