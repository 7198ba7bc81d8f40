#!/bin/sh
# vmtrace synth --host-steps N shapes real-code walks too (the exit-heavy
# mix of scripts/bench-script.sh): each VM exit's handler is a function
# that can return within a few instructions per step, it heads back to
# VMRESUME without calls once past its budget of ~N decisions, and the
# guest runs in proportion - so a VM exit every few dozen branches where
# the default walk makes one every few hundred.  Counted in synth's ground
# truth and, independently, in perf's decoding of the file; and on the
# exit-heavy recordings (per thread, 2 vCPUs; per CPU, 4 vCPUs on 2 CPUs)
# vmtrace = perf = ground truth: branches, calls and instructions.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
code_vs_perf
code_recording base 128K --vcpus 2 --call-depth 16 --psb-period 0 --seed 9 || finish
code_recording exits 128K --vcpus 2 --call-depth 16 --psb-period 0 --seed 9 --host-steps 6 || finish
truth() { awk -v k="$2" '!/^#/ && $3 == k {n++} END {print n + 0}' "$TMP/$1.branches"; }
all() { awk '!/^#/ {n++} END {print n + 0}' "$TMP/$1.branches"; }
# perf's count of VM entries in its own decoding of the file (the host's
# half of each: perf prints the guest's on a line of its own)
perf_entries() {
	# shellcheck disable=SC2086
	timeout 300 "$PERF" script -i "$TMP/$1.data" $G --itrace=b -F comm,flags 2>/dev/null |
		awk '$1 !~ /^:/ && / vmentry / {n++} END {print n + 0}'
}
b=$(truth base vmentry) e=$(truth exits vmentry)
check "ground truth: --host-steps 6 makes $e VM entries, over 4x the default's $b" test "$e" -gt $((4 * b))
bp=$(perf_entries base) ep=$(perf_entries exits)
check "perf decodes them: $ep VM entries, over 4x the default's $bp" test "$ep" -gt $((4 * bp))
check "... and the truth's count, within 1% ($ep, $e)" test $((ep * 100)) -ge $((e * 99)) -a $((ep * 100)) -le $((e * 101))
per_b=$(($(all base) / (b + 1))) per_e=$(($(all exits) / (e + 1)))
check "branches per VM entry: $per_e, under a quarter of the default's $per_b" test $((per_e * 4)) -lt "$per_b"
# vmtrace = perf = ground truth on it and on a per-CPU one with 4 vCPUs
# (tests/script-compare.py: branches per thread or CPU, calls and
# instructions times aside)
code_recording cpus 128K --vcpus 4 --per-cpu --cpus 2 --call-depth 16 --psb-period 0 --seed 4 --host-steps 6 ||
	finish
F=comm,tid,cpu,time,ip,sym,symoff,dso,addr
for name in exits cpus; do
	pc='' nd=''
	[ $name = cpus ] && pc=--per-cpu nd=--no-depth
	# shellcheck disable=SC2086
	timeout 300 "$PERF" script -i "$TMP/$name.data" $G --itrace=be -F $F >"$TMP/$name.b.perf" 2>/dev/null
	check "$name: perf script exit 0" test $? -eq 0
	# shellcheck disable=SC2086
	"$VMTRACE" script "$TMP/$name.data" $G >"$TMP/$name.b.vt" 2>"$TMP/$name.b.err"
	check "$name: vmtrace script exit 0" test $? -eq 0
	# shellcheck disable=SC2086
	"$PYTHON3" "$top_srcdir/tests/script-compare.py" --time "$TMP/$name.b.perf" "$TMP/$name.b.vt" "$TMP/$name.branches" \
		$pc >"$TMP/$name.b.cmp" 2>&1
	ck_rc=$?
	check "$name branches: vmtrace = perf = ground truth ($(head -1 "$TMP/$name.b.cmp"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/$name.b.cmp"
	for mode in call-trace insn-trace; do
		# shellcheck disable=SC2086
		timeout 300 "$PERF" script -i "$TMP/$name.data" $G --$mode >"$TMP/$name.$mode.perf" 2>/dev/null
		# shellcheck disable=SC2086
		"$VMTRACE" script "$TMP/$name.data" $G --$mode >"$TMP/$name.$mode.vt" 2>/dev/null
		case $mode in call-trace) how="--time --calls=call $nd" ;; *) how=--insns ;; esac
		# shellcheck disable=SC2086
		"$PYTHON3" "$top_srcdir/tests/script-compare.py" $how "$TMP/$name.$mode.perf" "$TMP/$name.$mode.vt" \
			"$TMP/$name.branches" $pc >"$TMP/$name.$mode.cmp" 2>&1
		ck_rc=$?
		check "$name --$mode: vmtrace = perf = ground truth ($(head -1 "$TMP/$name.$mode.cmp"))" test $ck_rc -eq 0 ||
			sed 's/^/#   /' "$TMP/$name.$mode.cmp"
	done
done
finish
