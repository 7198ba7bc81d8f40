#!/bin/sh
# vmtrace script reads each AUX queue a window at a time (pread, split at
# PSBs; src/decode/queue.c): (1) windows of one PSB segment each print
# exactly what one window of the whole queue prints - branches, calls and
# instructions, timed and timeless, per thread and per CPU, cyc, and
# corrupt AUX (errors and resyncs) - so no seam adds, drops or changes a
# line; (2) peak RSS stays at most 128 MiB on recordings of 64 and 512 MiB
# of AUX (a 4 MiB synth recording repeated by tests/aux-repeat.py; before,
# each queue's AUX data was read whole: the 512 MiB file needed > 512 MiB;
# and libipt's block caches, one per 15 MiB kernel text, grew to 2 x 60 MiB
# on traces that visit all the kernel: t0096's recordings show that part).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
# same NAME ARGS...: the output with windows of one PSB segment equals the
# output with the whole queue in one window
same() {
	sn=$1
	shift
	same_text "$sn" VMTRACE_DECODE_WINDOW=0 VMTRACE_DECODE_WINDOW=1 "the same with a window per PSB segment" "$@"
}
while read -r name opts; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	code_recording "$name" 128K $opts || continue
	f=$TMP/$name.data
	# shellcheck disable=SC2086
	same "$name-branches" "$f" $G --itrace=be
	# shellcheck disable=SC2086
	same "$name-calls" "$f" $G --call-ret-trace
	# shellcheck disable=SC2086
	same "$name-insns" "$f" $G --insn-trace
done <<'CONFIGS'
thread-timeless   --vcpus 2 --timeless --psb-period 0
thread-timed      --vcpus 4 --psb-period 1
cpu-timed         --vcpus 4 --per-cpu --cpus 2 --psb-period 0
thread-cyc        --vcpus 2 --cyc --psb-period 0
cpu-cyc-mtc0      --vcpus 2 --per-cpu --cpus 2 --cyc --mtc-period 0 --psb-period 0
CONFIGS

# corrupt AUX: the same error lines and resyncs
cp -r "$TMP/thread-timeless.data" "$TMP/bad.data"
"$PYTHON3" "$top_srcdir/tests/aux-corrupt.py" "$TMP/bad.data/data"
# shellcheck disable=SC2086
same corrupt "$TMP/bad.data" $G --itrace=be
check "corrupt: decode errors printed" grep -q 'instruction trace error' "$TMP/corrupt.a"

# --- peak RSS on big recordings ------------------------------------------
cp -r "$TMP/thread-timeless.data" "$TMP/64M.data" && cp -r "$TMP/thread-timeless.data" "$TMP/512M.data"
# two queues of 128 KiB of real code, each copy padded to 4 MiB (PAD
# packets are cheap to decode: the test takes seconds, not an hour)
"$PYTHON3" "$top_srcdir/tests/aux-repeat.py" "$TMP/thread-timeless.data/data" "$TMP/64M.data/data" 8 4194304 &&
	"$PYTHON3" "$top_srcdir/tests/aux-repeat.py" "$TMP/thread-timeless.data/data" "$TMP/512M.data/data" 64 4194304 ||
	fail "aux-repeat"
for size in 64M 512M; do
	# shellcheck disable=SC2086
	rss=$(peak_rss "$VMTRACE" script "$TMP/$size.data" $G --itrace=e)
	echo "# $size: vmtrace script --itrace=e peak RSS $rss KiB"
	if asan_build; then
		continue
	fi
	check "$size of AUX: peak RSS $rss KiB <= 128 MiB" test "$rss" -gt 0 -a "$rss" -le 131072
done
rm -rf "$TMP/512M.data"
finish
