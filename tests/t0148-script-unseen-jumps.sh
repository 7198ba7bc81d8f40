#!/bin/sh
# Modes that print no plain jump (flags jmp or jcc) - --itrace=e, c, r
# and their mixes without b - have the decoders drop the jumps and join
# the blocks between them, as call traces do (the real boot's --itrace=e
# took more CPU than its call trace before: every jump was handed to a
# formatter that printed nothing).  What they print must not change:
#  - VMTRACE_RANGES_STATS names the modes that drop them, and b,
#    instructions, -F ipc and power events keep them (they read every
#    branch);
#  - --itrace=cre prints what --itrace=be prints less its jumps, error
#    lines included (corrupt AUX: the errors and resyncs are the same),
#    and --itrace=e its error lines - timed and timeless;
#  - --itrace=cr equals perf's, thread by thread (ties of one microsecond
#    between threads are ordered differently).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
code_vs_perf

code_recording clean 256K --vcpus 2 --seed 3 || finish
code_recording tl 256K --vcpus 2 --timeless --seed 4 || finish
cp -r "$TMP/clean.data" "$TMP/bad.data"
"$PYTHON3" "$top_srcdir/tests/aux-corrupt.py" "$TMP/bad.data/data"

# drops MODE...: "dropped" or "made" on $rec, as VMTRACE_RANGES_STATS says
drops() {
	# shellcheck disable=SC2086
	VMTRACE_RANGES_STATS=1 timeout 300 "$VMTRACE" script "$TMP/$rec.data" $G "$@" 2>&1 >/dev/null |
		sed -n 's/^vmtrace script: plain jumps \([a-z]*\).*/\1/p'
}
rec=clean
for mode in "--itrace=e" "--itrace=c" "--itrace=r" "--itrace=cr" "--itrace=ce --json" "--call-trace" \
	"--call-ret-trace"; do
	# shellcheck disable=SC2086
	d=$(drops $mode)
	check "$mode: the decoders drop plain jumps" test "$d" = dropped || echo "# $d"
done
for mode in "--itrace=b" "--itrace=be" "--insn-trace" "--itrace=ce -F +ipc" "--itrace=cep" "--itrace=bi0ns"; do
	# shellcheck disable=SC2086
	d=$(drops $mode)
	check "$mode: the decoders make plain jumps" test "$d" = made || echo "# $d"
done
# per CPU: a call trace's thread stack is cut where the thread's branches
# come from another queue, jumps too - they stay; --itrace=cr drops them
# (guest time not corrected: synth's small per-CPU recordings have VMCSs
# without a guest TSC packet, undetermined for correlate - t0130)
config_recording raw-percpu 256K --vcpus 3 --per-cpu --cpus 2 --seed 2 || finish
rec=raw-percpu
d=$(drops --call-trace)
check "per CPU --call-trace: the decoders make plain jumps" test "$d" = made || echo "# $d"
d=$(drops --itrace=cr)
check "per CPU --itrace=cr: the decoders drop plain jumps" test "$d" = dropped || echo "# $d"

F=tid,time,flags,ip,sym,symoff,dso,addr
JUMP='^ *[0-9]+ +([0-9.]+: +)?(jmp|jcc) '   # (timeless: no time)
for name in clean bad tl raw-percpu; do
	"$VMTRACE" script "$TMP/$name.data" $G --itrace=be -F $F >"$TMP/$name.be" 2>/dev/null
	"$VMTRACE" script "$TMP/$name.data" $G --itrace=cre -F $F >"$TMP/$name.cre" 2>/dev/null
	"$VMTRACE" script "$TMP/$name.data" $G --itrace=e -F $F >"$TMP/$name.e" 2>/dev/null
	grep -v -E "$JUMP" "$TMP/$name.be" >"$TMP/$name.be-jumps"
	grep 'instruction trace error' "$TMP/$name.be" >"$TMP/$name.be-errors"
	check "$name: --itrace=be has jumps to drop" grep -q -E "$JUMP" "$TMP/$name.be"
	check "$name: --itrace=cre = --itrace=be less its jumps ($(wc -l <"$TMP/$name.cre") lines)" \
		test_cmp "$TMP/$name.be-jumps" "$TMP/$name.cre"
	check "$name: --itrace=e = --itrace=be's error lines ($(wc -l <"$TMP/$name.e"))" \
		test_cmp "$TMP/$name.be-errors" "$TMP/$name.e"
done
check "bad: errors to compare" test -s "$TMP/bad.e"
check "clean: no error" test ! -s "$TMP/clean.e"

"$VMTRACE" script "$TMP/clean.data" $G --itrace=cr -F $F 2>/dev/null | sort -s -k1,1 >"$TMP/vt.cr"
"$PERF" script -i "$TMP/clean.data" $G --itrace=cr -F $F 2>/dev/null | sort -s -k1,1 >"$TMP/perf.cr"
check "clean: perf prints calls and returns" test "$(wc -l <"$TMP/perf.cr")" -gt 1000
check "clean: --itrace=cr = perf's, thread by thread" test_cmp "$TMP/perf.cr" "$TMP/vt.cr"
finish
