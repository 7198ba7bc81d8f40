#!/bin/sh
# vmtrace script ends without freeing what it holds (script.c free_at_exit:
# the kernel takes the memory back whole; the frees were 6-7 ms of a
# 150-250 ms bench run), once its decoding threads are joined
# (vt_decode_result_join) - and nothing of its output or its messages is
# lost: the text (into a file and into a pipe), the exit status and stderr
# are what the run that frees everything (VMTRACE_FREE_AT_EXIT=1) gives, on
# a clean recording and on one with decode errors (exit 3 and its
# message), for branches, call traces and instructions.  With strace (where
# it can trace), the run that frees makes many more munmap calls after its
# last write than the default one (the ASan build always frees:
# LeakSanitizer checks them there).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs
G="--guestkallsyms $GUEST_CODE/kallsyms"

# run OUT ENV... -- ARGS: vmtrace script into OUT.txt (a file) and OUT.pipe
# (through cat), stderr into OUT.err, the status into OUT.rc
run() {
	r_out=$1
	shift
	r_env=
	while [ "$1" != -- ]; do r_env="$r_env $1"; shift; done
	shift
	# shellcheck disable=SC2086
	env $r_env "$VMTRACE" script "$@" >"$r_out.txt" 2>"$r_out.err"
	echo $? >"$r_out.rc"
	# shellcheck disable=SC2086
	env $r_env "$VMTRACE" script "$@" 2>/dev/null | cat >"$r_out.pipe"
}

code_recording clean 128K --vcpus 3 --seed 4 --psb-period 0
code_recording bad 64K --vcpus 2 --seed 7 --psb-period 0 &&
	"$PYTHON3" "$top_srcdir/tests/aux-corrupt.py" "$TMP/bad.data/data"
for rec in clean bad; do
	[ -e "$TMP/$rec.data" ] || continue
	for mode in --itrace=be --call-trace --insn-trace; do
		# shellcheck disable=SC2086
		run "$TMP/fast" -- "$TMP/$rec.data" $G $mode
		# shellcheck disable=SC2086
		run "$TMP/free" VMTRACE_FREE_AT_EXIT=1 -- "$TMP/$rec.data" $G $mode
		lines=$(wc -l <"$TMP/free.txt")
		check "$rec $mode: $lines lines, the same into a file as with the frees" cmp -s "$TMP/fast.txt" "$TMP/free.txt"
		check "$rec $mode: the same through a pipe" cmp -s "$TMP/fast.pipe" "$TMP/free.txt"
		want=0
		[ "$rec" = clean ] || want=3
		check "$rec $mode: exit $want, stderr as with the frees" \
			sh -c "grep -qx $want '$TMP/fast.rc' && cmp -s '$TMP/fast.rc' '$TMP/free.rc' && cmp -s '$TMP/fast.err' '$TMP/free.err'"
		[ "$lines" -gt 100 ] || fail "$rec $mode: only $lines lines"
	done
done
check "bad: its decode errors counted on stderr" grep -q 'decode errors' "$TMP/fast.err"

# the frees themselves: munmap calls after the last write to stdout
if command -v strace >/dev/null && strace -o /dev/null true 2>/dev/null && ! asan_build; then
	# unmaps OUT ENV...: munmap calls after the last write/writev/vmsplice of a call trace into a pipe
	unmaps() {
		u_out=$1
		shift
		# shellcheck disable=SC2086
		env "$@" strace -f -o "$u_out" -e trace=munmap,write,writev,vmsplice "$VMTRACE" script "$TMP/clean.data" $G \
			--call-trace 2>/dev/null | cat >/dev/null
		awk '/(write|writev|vmsplice)\(1,/ { n = 0 } /munmap\(/ { n++ } END { print n + 0 }' "$u_out"
	}
	fast=$(unmaps "$TMP/st.fast" VMTRACE_X=1)
	free=$(unmaps "$TMP/st.free" VMTRACE_FREE_AT_EXIT=1)
	check "munmap calls after the last write: $fast by default, $free with VMTRACE_FREE_AT_EXIT=1" \
		test "$free" -gt $((fast + 10))
else
	echo "# no strace that can trace here (or the ASan build): the munmap count is not checked"
fi
finish
