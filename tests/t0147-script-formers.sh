#!/bin/sh
# Where --jobs leaves a queue two CPUs or more, vmtrace script --insn-trace
# formats the queue's instructions in several threads ("formers",
# src/decode/recording.c): job k of the queue's events to former k % n,
# each former first replaying the job's seed - the last branch or error
# before it and the events within the flow after it - for where the
# instruction walk goes on.  With jobs of 1 and 3 events
# (VMTRACE_FORMAT_JOB: a seed at every event) the text and the exit status
# are exactly those of one thread per queue (VMTRACE_CPUS=1) - timed and
# timeless, per thread and per CPU, cyc, VM-exit heavy, two VMs, filters
# (--vcpu, --guest-only, --host-only, --time, --tid: lines not shown, the
# walk going on; a job without text holds no text: peak RSS flat),
# corrupt AUX (errors in the seeds); VMTRACE_RANGES_STATS=1 says the jobs
# were formatted apart.  Modes with state beyond the walk (call traces,
# -F ipc, power events) stay in one thread a queue: no jobs.  By default
# only queues of 256 KiB of AUX or more have formers (VMTRACE_FORMAT_JOB:
# any).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
# same NAME JOB ARGS...: jobs of JOB events in formers (--jobs 16 as 16
# CPUs on any machine) print what one thread a queue prints; they ran
same() {
	sn=$1 sj=$2
	shift 2
	same_text "$sn" VMTRACE_CPUS=1 "VMTRACE_CPUS=16 VMTRACE_RANGES_STATS=1 VMTRACE_FORMAT_JOB=$sj" \
		"the same from formers, jobs of $sj" --jobs 16 "$@"
	nj=$(sed -n 's/^vmtrace script: \([0-9]*\) jobs formatted apart, by at most \([0-9]*\) threads.*/\1 \2/p' \
		"$TMP/$sn.b.err")
	set -- $nj
	check "$sn: ${1:-no} jobs formatted apart by ${2:-no} threads a queue (2 to 8)" \
		sh -c "test ${1:-0} -ge 4 && test ${2:-0} -ge 2 && test ${2:-0} -le 8"
}
while read -r name size opts; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	config_recording "$name" "$size" $opts || continue
	f=$TMP/$name.data
	# (the sanitizer suite: three recordings - the same code paths)
	if asan_build; then case $name in thread-timeless-2 | thread-timed | cpu-timed) ;; *) continue ;; esac; fi
	same "$name-1" 1 "$f" $G --insn-trace
	# jobs of 3 on two (the suite's time; the sanitizer suite: none)
	asan_build && continue
	case $name in thread-timed | cpu-timed) same "$name-3" 3 "$f" $G --insn-trace ;; esac
done <<'CONFIGS'
thread-timeless     64K  --vcpus 1 --timeless
thread-timeless-2   64K  --vcpus 2 --timeless
thread-timed        64K  --vcpus 1
cpu-timed           128K --vcpus 4 --per-cpu --cpus 2 --psb-period 0
thread-cyc          64K  --vcpus 1 --cyc
exit-heavy          64K  --vcpus 1 --host-steps 6
two-vms             64K  --vcpus 2 --vms 2 --timeless
CONFIGS

same vcpu 2 "$TMP/thread-timeless-2.data" $G --insn-trace --vcpu 1
f=$TMP/thread-timed.data
same guest-only 1 "$f" $G --insn-trace --guest-only
same host-only 1 "$f" $G --insn-trace --host-only
same fields 2 "$f" $G --insn-trace -F +flags,+addr,+cpu
# --time: a window of the trace (times of its 20,000th and 60,000th lines)
t1=$(grep -o ' [0-9]*\.[0-9]\{9\}:' "$TMP/thread-timed-1.a" | sed -n 20000p | tr -d ' :')
t2=$(grep -o ' [0-9]*\.[0-9]\{9\}:' "$TMP/thread-timed-1.a" | sed -n 60000p | tr -d ' :')
same time 1 "$f" $G --insn-trace --time "$t1,$t2"
# --tid: one vCPU thread of a per-CPU recording (the first line's)
tid=$(awk '{ print $3; exit }' "$TMP/cpu-timed-1.a")
same tid 1 "$TMP/cpu-timed.data" $G --insn-trace --tid "$tid"

# jobs without text (vCPU 0's queue filtered out) hold no chunks of text,
# and jobs of a few lines hold at most 16: peak RSS flat (each held one:
# 456 MB on such a recording, 102 MB now)
if ! asan_build; then
	rss=$(VMTRACE_CPUS=16 VMTRACE_FORMAT_JOB=1 peak_rss "$VMTRACE" script --jobs 16 "$TMP/thread-timeless-2.data" \
		$G --insn-trace --vcpu 1)
	check "--vcpu 1, jobs of one event: peak RSS $rss KiB, at most 128 MiB" \
		sh -c "test $rss -gt 0 && test $rss -le 131072"
fi

# corrupt AUX: the same error lines, resyncs and exit status
cp -r "$TMP/thread-timed.data" "$TMP/bad.data"
"$PYTHON3" "$top_srcdir/tests/aux-corrupt.py" "$TMP/bad.data/data"
same corrupt 1 "$TMP/bad.data" $G --itrace=i0nse
check "corrupt: decode errors printed" grep -q 'instruction trace error' "$TMP/corrupt.a"

# state beyond the walk: each queue in one thread (VMTRACE_FORMAT_JOB: at
# any size, as below)
for m in "--call-trace" "--insn-trace -F +ipc" "--itrace=i0nsp"; do
	# shellcheck disable=SC2086
	VMTRACE_CPUS=16 VMTRACE_FORMAT_JOB=1024 VMTRACE_RANGES_STATS=1 "$VMTRACE" script --jobs 16 "$TMP/thread-cyc.data" \
		$G $m >/dev/null 2>"$TMP/one.err"
	check "$m: no jobs formatted apart" \
		grep -q '^vmtrace script: 0 jobs formatted apart, by at most 0 threads a queue' "$TMP/one.err"
done

# without VMTRACE_FORMAT_JOB only a queue of 256 KiB of AUX or more has
# formers (on less they cost more than they won): not thread-timed's 64
# KiB, but its stream from PSB+ to PSB+ seven times over (aux-repeat.py
# --seamless: ~340 KiB) - the text the same as from one thread
# (not in the sanitizer suite: 2 x 2.5 M lines; formers ran above)
if ! asan_build; then
	cp -r "$TMP/thread-timed.data" "$TMP/x7.data" &&
		"$PYTHON3" "$top_srcdir/tests/aux-repeat.py" --seamless "$TMP/thread-timed.data/data" "$TMP/x7.data/data" 7 \
			>/dev/null || fail "aux-repeat"
	for r in thread-timed x7; do
		VMTRACE_CPUS=16 VMTRACE_RANGES_STATS=1 "$VMTRACE" script --jobs 16 "$TMP/$r.data" $G --insn-trace \
			>"$TMP/$r.def" 2>"$TMP/$r.def.err"
		echo $? >"$TMP/$r.rc"
		sed -n 's/^vmtrace script: \([0-9]*\) jobs formatted apart, by at most \([0-9]*\) threads.*/\1 \2/p' \
			"$TMP/$r.def.err" >"$TMP/$r.jobs"
	done
	check "64 KiB a queue: no formers by default ($(cat "$TMP/thread-timed.jobs"))" \
		test "$(cat "$TMP/thread-timed.jobs")" = "0 0"
	read -r nj nf <"$TMP/x7.jobs"
	check "~340 KiB a queue: $nj jobs formatted apart by $nf threads by default" sh -c "test ${nj:-0} -ge 4 && test ${nf:-0} -ge 2"
	VMTRACE_CPUS=1 "$VMTRACE" script --jobs 16 "$TMP/x7.data" $G --insn-trace >"$TMP/x7.one" 2>/dev/null
	x7rc=$?
	check "~340 KiB a queue: exit 0 both ways, the same text as from one thread ($(wc -l <"$TMP/x7.one") lines)" \
		sh -c "test $x7rc -eq 0 && test \"\$(cat '$TMP/x7.rc')\" -eq 0 && test -s '$TMP/x7.one' &&
		       cmp -s '$TMP/x7.one' '$TMP/x7.def'"
fi
# VMTRACE_FORMAT_JOB that is not a number from 1 to 65536: as unset (64
# KiB a queue: no formers)
for v in 0 65537 abc; do
	VMTRACE_CPUS=16 VMTRACE_FORMAT_JOB=$v VMTRACE_RANGES_STATS=1 "$VMTRACE" script --jobs 16 "$TMP/thread-timed.data" \
		$G --insn-trace >/dev/null 2>"$TMP/inv.err"
	inv_rc=$?
	check "VMTRACE_FORMAT_JOB=$v: counts as unset (exit $inv_rc, no jobs formatted apart)" sh -c "test $inv_rc -eq 0 &&
		grep -q '^vmtrace script: 0 jobs formatted apart, by at most 0 threads a queue' '$TMP/inv.err'"
done
finish
