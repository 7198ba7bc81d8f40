#!/bin/sh
# Where --jobs leaves threads to spare for a queue (one vCPU on two CPUs:
# the default), vmtrace script cuts the queue's AUX data into ranges from
# PSB to PSB and decodes them in several threads at once; each range's
# decoder first decodes the PSB segment before it, muted, for the state a
# decoder from the queue's start has there (src/decode/queue.c "Ranges",
# recording.c decode ahead).  (1) Ranges of 4 KiB (VMTRACE_SEGMENT=4096, the
# least: two PSB segments each here) print exactly what one decoder of the
# whole queue prints (VMTRACE_SEGMENT=0)
# - branches, calls, returns, instructions, power events - timed and
# timeless, per thread and per CPU, cyc, guest time not corrected (times
# that go back: the latest of the ranges before carries over), two VMs,
# VM-exit heavy, corrupt AUX (errors and resyncs), and where the threads
# find it cut (VMTRACE_RANGES_STATS=1 says how many ranges); --json, report
# and timeline too (the main thread reads the ranges' named branches);
# (2) peak RSS stays at most 128 MiB on 256 MiB of AUX decoded in ranges.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
# --jobs 16 counts as 16 CPUs on any machine (else up to the CPUs there are)
export VMTRACE_CPUS=16
# same NAME ARGS...: the text in ranges of 4 KiB equals the text of one
# decoder per queue; the ranges were cut
same() {
	sn=$1
	shift
	same_text "$sn" VMTRACE_SEGMENT=0 "VMTRACE_RANGES_STATS=1 VMTRACE_SEGMENT=4096" "the same in ranges of 4 KiB" \
		--jobs 16 "$@"
	nr=$(sed -n 's/^vmtrace script: \([0-9]*\) ranges decoded apart.*/\1/p' "$TMP/$sn.b.err")
	check "$sn: cut, ${nr:-no} ranges" test "${nr:-0}" -gt 4
}
while read -r name opts; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	config_recording "$name" 128K $opts || continue
	f=$TMP/$name.data
	# shellcheck disable=SC2086
	same "$name-branches" "$f" $G --itrace=bep
	# (JSON: printed by the main thread from the queues' named branches)
	# shellcheck disable=SC2086
	same "$name-json" "$f" $G --itrace=bep --json
	# the sanitizer suite: calls, returns and instructions of two rows (the
	# same code paths; the time is in the amount of text)
	case $name in thread-cyc | cpu-cyc-thresh) ;; *) asan_build && continue ;; esac
	# shellcheck disable=SC2086
	same "$name-calls" "$f" $G --call-trace
	# returns too on three rows (--call-trace's code path, more text)
	case $name in thread-cyc | cpu-cyc-thresh | two-vms)
		# shellcheck disable=SC2086
		same "$name-returns" "$f" $G --call-ret-trace ;;
	esac
	# shellcheck disable=SC2086
	same "$name-insns" "$f" $G --insn-trace
done <<'CONFIGS'
thread-timeless     --vcpus 1 --timeless --psb-period 0
thread-timed        --vcpus 2 --psb-period 0
cpu-timed           --vcpus 4 --per-cpu --cpus 2 --psb-period 0
thread-cyc          --vcpus 2 --cyc --psb-period 0
cpu-cyc-thresh      --vcpus 2 --per-cpu --cpus 2 --cyc --cyc-thresh 6 --psb-period 0 --seed 4
two-vms             --vcpus 2 --vms 2 --psb-period 0
exit-heavy          --vcpus 1 --host-steps 6 --psb-period 0
raw-thread-cyc      --vcpus 2 --cyc --mtc-period 0 --psb-period 0
CONFIGS

# corrupt AUX: the same error lines and resyncs
cp -r "$TMP/thread-timed.data" "$TMP/bad.data"
"$PYTHON3" "$top_srcdir/tests/aux-corrupt.py" "$TMP/bad.data/data"
# shellcheck disable=SC2086
same corrupt "$TMP/bad.data" $G --itrace=be
check "corrupt: decode errors printed" grep -q 'instruction trace error' "$TMP/corrupt.a"

# report and timeline read the same branches
for name in thread-timed cpu-timed; do
	# shellcheck disable=SC2086
	VMTRACE_SEGMENT=0 "$VMTRACE" report --jobs 16 "$TMP/$name.data" $G --top 50 >"$TMP/$name.report0" 2>&1
	# shellcheck disable=SC2086
	VMTRACE_SEGMENT=4096 "$VMTRACE" report --jobs 16 "$TMP/$name.data" $G --top 50 >"$TMP/$name.report1" 2>&1
	check "$name: report, the same in ranges ($(wc -l <"$TMP/$name.report0") lines)" \
		sh -c "grep -q . '$TMP/$name.report0' && cmp -s '$TMP/$name.report0' '$TMP/$name.report1'"
	# shellcheck disable=SC2086
	VMTRACE_SEGMENT=0 "$VMTRACE" timeline --jobs 16 "$TMP/$name.data" $G -o "$TMP/$name.0.perfetto-trace" >/dev/null 2>&1
	# shellcheck disable=SC2086
	VMTRACE_SEGMENT=4096 "$VMTRACE" timeline --jobs 16 "$TMP/$name.data" $G -o "$TMP/$name.1.perfetto-trace" >/dev/null 2>&1
	check "$name: timeline, the same in ranges" \
		sh -c "test -s '$TMP/$name.0.perfetto-trace' && cmp -s '$TMP/$name.0.perfetto-trace' '$TMP/$name.1.perfetto-trace'"
done

# IPC (-F +ipc) reads CYC packets from the queue's start (cycles.c): no
# ranges, the same text
# shellcheck disable=SC2086
VMTRACE_RANGES_STATS=1 VMTRACE_SEGMENT=4096 "$VMTRACE" script --jobs 16 "$TMP/thread-cyc.data" $G --call-trace \
	-F +ipc >"$TMP/ipc.ranges" 2>"$TMP/ipc.err"
# shellcheck disable=SC2086
VMTRACE_SEGMENT=0 "$VMTRACE" script --jobs 16 "$TMP/thread-cyc.data" $G --call-trace -F +ipc >"$TMP/ipc.whole" 2>&1
check "-F +ipc: not cut, the same text" sh -c "grep -q '^vmtrace script: 0 ranges' '$TMP/ipc.err' &&
	grep -q IPC: '$TMP/ipc.whole' && cmp -s '$TMP/ipc.whole' '$TMP/ipc.ranges'"

# --- peak RSS on a big recording decoded in ranges ----------------------
# one queue of 128 KiB of real code, each copy padded to 4 MiB
cp -r "$TMP/thread-timeless.data" "$TMP/256M.data"
"$PYTHON3" "$top_srcdir/tests/aux-repeat.py" "$TMP/thread-timeless.data/data" "$TMP/256M.data/data" 64 4194304 ||
	fail "aux-repeat"
for mode in --itrace=b --call-trace; do
	asan_build && continue
	# shellcheck disable=SC2086
	rss=$(peak_rss "$VMTRACE" script "$TMP/256M.data" $G $mode)
	echo "# 256M: vmtrace script $mode peak RSS $rss KiB"
	check "256 MiB of AUX, $mode in ranges: peak RSS $rss KiB <= 128 MiB" test "$rss" -gt 0 -a "$rss" -le 131072
done
rm -rf "$TMP/256M.data"
finish
