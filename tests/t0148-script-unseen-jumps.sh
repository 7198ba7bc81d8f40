#!/bin/sh
# Modes whose letters show no plain jump (flags jmp or jcc) - --itrace=e,
# c, r and their mixes, with or without b (b with c or r shows only calls
# and returns) - have the decoders drop the jumps and join the blocks
# between them, as per-thread call traces do (the real boot's --itrace=e
# took more CPU than its call trace before: every jump was handed to a
# formatter that printed nothing), and the branches no line shows are
# neither named nor formatted.  What they print must not change:
#  - VMTRACE_RANGES_STATS names the modes that drop them; b alone,
#    instructions, -F ipc and power events keep them (they read every
#    branch), and so do per-CPU call traces (a thread's stack is cut where
#    its branches come from another queue, jumps too);
#  - --itrace=cre prints what --itrace=be prints less its jumps, error
#    lines included (corrupt AUX: the errors and resyncs are the same),
#    and --itrace=e its error lines - timed and timeless, per thread and
#    per CPU (guest time not corrected: times that go back), in text with
#    ns times and instruction bytes, in JSON (AUX offsets, VMCS), printed
#    in the decoding threads and from the main thread;
#  - errors not printed are counted in the summary still;
#  - --itrace=cr equals perf's, thread by thread (ties of one microsecond
#    between threads are ordered differently), where perf is installed.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs
G="--guestkallsyms $GUEST_CODE/kallsyms"

code_recording clean 256K --vcpus 2 --seed 3 || finish
code_recording tl 256K --vcpus 2 --timeless --seed 4 || finish
# (guest time not corrected: synth's small per-CPU recordings have VMCSs
# without a guest TSC packet, undetermined for correlate - t0130)
config_recording raw-percpu 256K --vcpus 3 --per-cpu --cpus 2 --seed 2 || finish
for name in clean tl; do
	cp -r "$TMP/$name.data" "$TMP/bad-$name.data"
	"$PYTHON3" "$top_srcdir/tests/aux-corrupt.py" "$TMP/bad-$name.data/data"
done

# drops REC MODE...: "dropped" or "made", as VMTRACE_RANGES_STATS says
drops() {
	dr_rec=$1
	shift
	# shellcheck disable=SC2086
	VMTRACE_RANGES_STATS=1 timeout 300 "$VMTRACE" script "$TMP/$dr_rec.data" $G "$@" 2>&1 >/dev/null |
		sed -n 's/^vmtrace script: plain jumps \([a-z]*\).*/\1/p'
}
for mode in "--itrace=e" "--itrace=c" "--itrace=r" "--itrace=cr" "--itrace=bc" "--itrace=bre" "--itrace=ce --json" \
	"--call-trace" "--call-ret-trace"; do
	# shellcheck disable=SC2086
	d=$(drops clean $mode)
	check "$mode: the decoders drop plain jumps" test "$d" = dropped || echo "# $d"
done
for mode in "--itrace=b" "--itrace=be" "--insn-trace" "--itrace=ce -F +ipc" "--itrace=cep" "--itrace=bi0ns"; do
	# shellcheck disable=SC2086
	d=$(drops clean $mode)
	check "$mode: the decoders make plain jumps" test "$d" = made || echo "# $d"
done
d=$(drops raw-percpu --call-trace)
check "per CPU --call-trace: the decoders make plain jumps" test "$d" = made || echo "# $d"
d=$(drops raw-percpu --itrace=cr)
check "per CPU --itrace=cr: the decoders drop plain jumps" test "$d" = dropped || echo "# $d"

JUMP='^ *-?[0-9]+ +(\[[0-9]+\] +)?([0-9.]+: +)?(jmp|jcc) '   # (tid, cpu, time if timed, flags)
# compare NAME REC ENV...: --itrace=cre = --itrace=be less its jumps and
# --itrace=e = be's error lines, with ENV
compare() {
	cp_name=$1 cp_rec=$2
	shift 2
	for m in be cre e; do
		# shellcheck disable=SC2086
		env "$@" "$VMTRACE" script "$TMP/$cp_rec.data" $G --itrace=$m $F >"$TMP/$cp_name.$m" 2>/dev/null
	done
	grep -v -E "$JUMP" "$TMP/$cp_name.be" >"$TMP/$cp_name.be-jumps"
	grep 'instruction trace error' "$TMP/$cp_name.be" >"$TMP/$cp_name.be-errors"
	check "$cp_name: --itrace=be has jumps to drop" grep -q -E "$JUMP" "$TMP/$cp_name.be"
	check "$cp_name: --itrace=cre = --itrace=be less its jumps ($(wc -l <"$TMP/$cp_name.cre") lines)" \
		test_cmp "$TMP/$cp_name.be-jumps" "$TMP/$cp_name.cre"
	check "$cp_name: --itrace=e = --itrace=be's error lines ($(wc -l <"$TMP/$cp_name.e"))" \
		test_cmp "$TMP/$cp_name.be-errors" "$TMP/$cp_name.e"
}
F="-F tid,time,flags,ip,sym,symoff,dso,addr"
for rec in clean bad-clean tl bad-tl raw-percpu; do
	compare "$rec" "$rec"
done
F="--ns -F tid,cpu,time,flags,ip,sym,symoff,dso,addr,insn"
compare raw-percpu-ns raw-percpu
F="-F tid,time,flags,ip,sym,symoff,dso,addr"
compare bad-clean-serial bad-clean VMTRACE_SCRIPT_SERIAL=1
check "bad-clean, bad-tl: errors to compare" sh -c "test -s '$TMP/bad-clean.e' && test -s '$TMP/bad-tl.e'"
# errors not printed (--itrace=c: dropped before formatting) are counted
# still: the summary on stderr and exit status 3, in the decoding threads
# and from the main thread
for serial in 0 1; do
	for m in be c; do
		# shellcheck disable=SC2086
		VMTRACE_SCRIPT_SERIAL=$serial timeout 300 "$VMTRACE" script "$TMP/bad-clean.data" $G --itrace=$m \
			2>"$TMP/sum.$m.err" >/dev/null
		echo "exit $?" >"$TMP/sum.$m"
		grep 'decode errors' "$TMP/sum.$m.err" >>"$TMP/sum.$m"
	done
	check "bad-clean, serial $serial: --itrace=c counts the errors it does not print ($(tr '\n' ' ' <"$TMP/sum.c"))" \
		sh -c "grep -q '^exit 3' '$TMP/sum.be' && grep -q 'decode errors' '$TMP/sum.be' && cmp -s '$TMP/sum.be' '$TMP/sum.c'"
done
check "clean: no error" test ! -s "$TMP/clean.e"

# shellcheck disable=SC2086
"$VMTRACE" script "$TMP/bad-clean.data" $G --itrace=be --json 2>/dev/null |
	"$PYTHON3" -c 'import json, sys
sys.stdout.writelines(l for l in sys.stdin if json.loads(l).get("kind") != "jump")' >"$TMP/be.json"
# shellcheck disable=SC2086
"$VMTRACE" script "$TMP/bad-clean.data" $G --itrace=cre --json >"$TMP/cre.json" 2>/dev/null
check "bad-clean: --itrace=cre --json = --itrace=be --json less its jumps ($(wc -l <"$TMP/cre.json") objects)" \
	test_cmp "$TMP/be.json" "$TMP/cre.json"
check "bad-clean: JSON errors to compare" grep -q '"kind": "error"' "$TMP/cre.json"

if [ -n "$PERF" ] && "$PERF" version >/dev/null 2>&1; then
	F=tid,time,flags,ip,sym,symoff,dso,addr
	# shellcheck disable=SC2086
	"$VMTRACE" script "$TMP/clean.data" $G --itrace=cr -F $F 2>/dev/null | sort -s -k1,1 >"$TMP/vt.cr"
	# shellcheck disable=SC2086
	"$PERF" script -i "$TMP/clean.data" $G --itrace=cr -F $F 2>/dev/null | sort -s -k1,1 >"$TMP/perf.cr"
	check "clean: perf prints calls and returns" test "$(wc -l <"$TMP/perf.cr")" -gt 1000
	check "clean: --itrace=cr = perf's, thread by thread" test_cmp "$TMP/perf.cr" "$TMP/vt.cr"
else
	echo "# perf not installed: --itrace=cr not compared with perf's"
fi
finish
