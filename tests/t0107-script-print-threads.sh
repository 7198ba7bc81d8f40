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
# and filters; and where --jobs leaves a CPU for it, each queue decoded
# ahead by a thread of its own (one vCPU: --jobs 2, the default on two CPUs;
# VMTRACE_CPUS=16, so that --jobs counts beyond the CPUs this machine has
# and the paths run on any machine); --jobs counts up to the CPUs there are.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
# threads_most OUT CMD...: the most threads CMD ran at once (/proc/PID/status,
# sampled every 2 ms until it ends) into OUT
threads_most() {
	out=$1
	shift
	"$PYTHON3" - "$@" >"$out" <<'PY'
import subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
most = 0
while p.poll() is None:
    try:
        for l in open('/proc/%d/status' % p.pid):
            if l.startswith('Threads:'):
                most = max(most, int(l.split()[1]))
    except OSError:
        pass
    time.sleep(0.002)
print(most)
PY
}
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
	# --jobs for twice the queues: each queue decoded ahead by a thread of
	# its own, formatted in another (decode_ahead) - the same text
	export VMTRACE_CPUS=16
	for mode in "--itrace=bep" --call-trace; do
		# shellcheck disable=SC2086
		threads_vs_serial "bad $mode --jobs 16 (decoded ahead)" "$TMP/bad.data" $G $mode --jobs 16
	done
	unset VMTRACE_CPUS
fi
# decoded ahead: 4 queues with --jobs 16, one queue (a single vCPU) with
# --jobs 2 (the default on 2 CPUs or more); --jobs 1 never
export VMTRACE_CPUS=16
for mode in "--itrace=bep" --insn-trace --call-trace; do
	# shellcheck disable=SC2086
	[ ! -e "$TMP/thread-4vcpu.data" ] ||
		threads_vs_serial "thread-4vcpu $mode --jobs 16 (decoded ahead)" "$TMP/thread-4vcpu.data" $G $mode --jobs 16
done
if code_recording one 64K --vcpus 1 --seed 21 --psb-period 0; then
	for mode in "--itrace=bep" --call-ret-trace --insn-trace; do
		# shellcheck disable=SC2086
		threads_vs_serial "one vCPU $mode --jobs 2 (decoded ahead)" "$TMP/one.data" $G $mode --jobs 2
	done
	# formers at any size (VMTRACE_FORMAT_JOB; by default a queue of 256 KiB
	# or more), jobs of 3 events: the text printed in the main thread
	export VMTRACE_FORMAT_JOB=3
	# shellcheck disable=SC2086
	threads_vs_serial "one vCPU --insn-trace --jobs 2, formers (jobs of 3)" "$TMP/one.data" $G --insn-trace --jobs 2
	# shellcheck disable=SC2086
	VMTRACE_RANGES_STATS=1 "$VMTRACE" script "$TMP/one.data" $G --insn-trace --jobs 2 2>"$TMP/formers.err" >/dev/null
	check "... formers ran there (jobs formatted apart by 2 threads)" \
		grep -q '^vmtrace script: [1-9][0-9]* jobs formatted apart, by at most 2 threads a queue' "$TMP/formers.err"
	unset VMTRACE_FORMAT_JOB
	# the threads that run at most while it prints (/proc/PID/status, sampled):
	# main + the queue's thread + its two decoding ones (ranges of the queue:
	# t0145; ranges of 4 KiB, so that both have ranges to decode while it is
	# sampled) + its two formatting ones (t0147; at 64 KiB only with
	# VMTRACE_FORMAT_JOB), four fewer with --jobs 1
	# (the normal build only: LeakSanitizer's thread at exit)
	for j in 1 2; do
		! asan_build || break
		# shellcheck disable=SC2086
		threads_most "$TMP/threads.$j" env VMTRACE_SEGMENT=4096 VMTRACE_FORMAT_JOB=1024 "$VMTRACE" script "$TMP/one.data" $G --insn-trace \
			--jobs $j
	done
	asan_build ||
		check "one vCPU: --jobs 2 runs two decoding and two formatting threads more than --jobs 1 ($(cat "$TMP/threads.1") -> $(cat "$TMP/threads.2") threads)" \
			test "$(cat "$TMP/threads.2")" -eq "$(($(cat "$TMP/threads.1") + 4))"
	# --jobs counts up to the CPUs there are (VMTRACE_CPUS=2: two, on any
	# machine): --jobs 8 decodes the queue ahead in two threads, as --jobs 2
	# (VMTRACE_RANGES_STATS says how many did; without the cap: 8)
	for j in 2 8; do
		# shellcheck disable=SC2086
		VMTRACE_CPUS=2 VMTRACE_RANGES_STATS=1 "$VMTRACE" script "$TMP/one.data" $G --call-trace --jobs $j \
			2>&1 >/dev/null | sed -n 's/.*ranges decoded apart, by at most \([0-9]*\) threads a queue$/\1/p' >"$TMP/ahead.$j"
	done
	check "one vCPU, 2 CPUs: --jobs 8 decodes ahead in $(cat "$TMP/ahead.8") threads, --jobs 2 in $(cat "$TMP/ahead.2")" \
		sh -c "test \"\$(cat '$TMP/ahead.2')\" = 2 && test \"\$(cat '$TMP/ahead.8')\" = 2"
	# the machine's own CPUs (VMTRACE_CPUS unset; a bad value is ignored):
	# --jobs 4 times them decodes ahead in no more threads than there are
	cpus=$(getconf _NPROCESSORS_ONLN)
	for v in unset x; do
		e="VMTRACE_CPUS=$v"
		[ $v = x ] || e="-u VMTRACE_CPUS"
		# shellcheck disable=SC2086
		env $e VMTRACE_RANGES_STATS=1 "$VMTRACE" script "$TMP/one.data" $G --call-trace --jobs $((cpus * 4)) 2>&1 \
			>/dev/null | sed -n 's/.*ranges decoded apart, by at most \([0-9]*\) threads a queue$/\1/p' >"$TMP/ahead.$v"
	done
	check "one vCPU, this machine's $cpus CPUs: --jobs $((cpus * 4)) decodes ahead in $(cat "$TMP/ahead.unset") threads (VMTRACE_CPUS=x: $(cat "$TMP/ahead.x"))" \
		sh -c "test -s '$TMP/ahead.unset' && test \"\$(cat '$TMP/ahead.unset')\" -le $cpus &&
			cmp -s '$TMP/ahead.unset' '$TMP/ahead.x'"
	# --insn-trace: one thread decodes each queue ahead, no ranges (its
	# formatting is the work; VMTRACE_SEGMENT set lifts that: t0145)
	# shellcheck disable=SC2086
	VMTRACE_RANGES_STATS=1 "$VMTRACE" script "$TMP/one.data" $G --insn-trace --jobs 8 2>&1 >/dev/null |
		grep '^vmtrace script: .* ranges decoded apart' >"$TMP/insn.stats"
	check "one vCPU, --insn-trace --jobs 8: one thread ahead, no ranges ($(cat "$TMP/insn.stats"))" \
		grep -qx 'vmtrace script: 0 ranges decoded apart, by at most 1 threads a queue' "$TMP/insn.stats"
	# the reader gone after a line: both threads stop, exit at once
	# shellcheck disable=SC2086
	(timeout 60 "$VMTRACE" script "$TMP/one.data" $G --insn-trace --jobs 2; echo "rc $?" >"$TMP/one.rc") 2>/dev/null |
		head -1 >/dev/null
	check "one vCPU, decoded ahead, the reader gone: it ends (not killed by timeout: $(cat "$TMP/one.rc"))" \
		sh -c "! grep -q 'rc 124' '$TMP/one.rc'"
fi
unset VMTRACE_CPUS
finish
