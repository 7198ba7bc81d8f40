#!/bin/sh
# vmtrace script prints in the decoding threads: each AUX queue's thread
# formats its own lines, the main thread only merges their text in time
# order and writes it.  Checks: the main thread's share of the user CPU time
# (/proc/PID/task/PID/stat, sampled until the end, against the whole
# process's) is small with --insn-trace - before, it formatted every line
# (72% on 2 queues); and the text is byte for byte what the main thread
# alone prints (VMTRACE_SCRIPT_SERIAL=1) on recordings per thread (timed,
# 4 vCPUs; timeless) and per CPU, for branches, errors and power events,
# instructions and -F variations; and call traces, which per thread are
# made in the decoding threads too (the main thread pads each line to the
# column that follows all queues' lines), with errors (corrupt AUX, OVF)
# and filters.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
# (the CPU share in the normal build only: ASan's shadow work is not the code's)
if ! asan_build && code_recording share 256K --vcpus 2 --seed 5; then
# shellcheck disable=SC2086
set -- $("$PYTHON3" "$top_srcdir/tests/main-thread-share.py" "$VMTRACE" script "$TMP/share.data" $G --insn-trace)
check "--insn-trace: exit 0" test "$1" -eq 0
check "--insn-trace: the main thread's share of the user CPU (of $3 CPU s) is $2%, under 35%" test "$2" -lt 35
fi
while read -r name size opts; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	code_recording "$name" "$size" $opts || continue
	for mode in "--itrace=bep" "--insn-trace" "--itrace=bi0ns -F +flags,+addr" "--itrace=cr -F ip,sym,addr,dso,insn" \
		"--itrace=b --host-only" "--itrace=b --guest-only --vcpu 1" --call-trace --call-ret-trace \
		"--call-trace --vcpu 2" "--call-ret-trace --guest-only"; do
		# the other recordings: the two main modes and call traces (light)
		[ "$name" = thread-4vcpu ] || [ "$mode" = --itrace=bep ] || [ "$mode" = --insn-trace ] ||
			[ "$mode" = --call-trace ] || [ "$mode" = --call-ret-trace ] || continue
		# shellcheck disable=SC2086
		threads_vs_serial "$name $mode" "$TMP/$name.data" $G $mode
	done
done <<EOF2
thread-4vcpu 32K --vcpus 4 --seed 11 --psb-period 0
timeless 32K --vcpus 2 --timeless --seed 12
percpu 64K --per-cpu --vcpus 2 --cpus 2 --mtc-period 0 --psb-period 0 --seed 3 --cbr-vary
ovf 64K --vcpus 2 --seed 9 --psb-period 0 --ovf-every 500
EOF2
# corrupt AUX (errors and resyncs in every queue) - call traces
if code_recording bad 64K --vcpus 3 --seed 7 --psb-period 0 && "$PYTHON3" "$top_srcdir/tests/aux-corrupt.py" "$TMP/bad.data/data"; then
	for mode in "--itrace=bep" --call-trace --call-ret-trace; do
		# shellcheck disable=SC2086
		threads_vs_serial "bad $mode" "$TMP/bad.data" $G $mode
	done
	check "bad: its call-ret trace has decode errors" grep -q "instruction trace error" "$TMP/threads.out"
fi
finish
