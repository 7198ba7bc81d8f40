#!/bin/sh
# vmtrace script prints call traces (--call-trace, --call-ret-trace) in the
# decoding threads when no host thread is in two queues (a recording per
# thread): each queue's thread keeps its threads' call stacks and formats
# its lines, leaving only the padding after the called function to the
# main thread - its column follows the lines before, of every queue.
# Checks: the main thread's share of the CPU time (/proc/PID/task/PID/stat,
# sampled until the end) is small with --call-trace - before, it printed
# every line (about half of the whole on 2 queues); and the text is byte
# for byte what the main thread alone prints (VMTRACE_SCRIPT_SERIAL=1):
# timed with 4 vCPUs, timeless, per CPU (printed in the main thread: a
# thread moves between CPUs), host or guest only; the CPU share on a walk
# with a real kernel's call depth (synth --call-depth 16), as the benchmark's.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
# (the CPU share in the normal build only: ASan's shadow work is not the code's)
if ! asan_build && code_recording share 256K --vcpus 2 --seed 5 --call-depth 16; then
# shellcheck disable=SC2086
set -- $("$PYTHON3" "$top_srcdir/tests/main-thread-share.py" "$VMTRACE" script "$TMP/share.data" $G --call-trace)
check "--call-trace: exit 0" test "$1" -eq 0
check "--call-trace: the main thread's share of $3 CPU s is $2%, under 35%" test "$2" -lt 35
fi
while read -r name size opts; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	code_recording "$name" "$size" $opts || continue
	for mode in "--call-trace" "--call-ret-trace" "--call-ret-trace --host-only" \
		"--call-trace --guest-only --vcpu 1"; do
		[ "$name" = thread-4vcpu ] || [ "$mode" = --call-trace ] || [ "$mode" = --call-ret-trace ] || continue
		# shellcheck disable=SC2086
		threads_vs_serial "$name $mode" "$TMP/$name.data" $G $mode
	done
done <<EOF2
thread-4vcpu 32K --vcpus 4 --seed 11 --psb-period 0
timeless 32K --vcpus 2 --timeless --seed 12
percpu 64K --per-cpu --vcpus 2 --cpus 2 --mtc-period 0 --psb-period 0 --seed 3
EOF2
finish
