#!/bin/sh
# vmtrace timeline -o OUT.perfetto-trace on synth recordings of real kernel
# code: protoc decodes the file with src/timeline/perfetto.proto (Perfetto's
# own field numbers), and tests/timeline-check.py checks the sequence and
# interning rules, that every track is declared before use, that slices are
# balanced and in time order per track, and against synth's ground truth:
# per vCPU thread one function slice per call, one VM exit slice per exit
# (the first one named after the first host function it called), the
# exits/ms counter summing to the exits, the vCPU's first guest call drawn
# on its guest lane.  (trace_processor and the Perfetto UI cannot run here:
# see README, "vmtrace timeline".)
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
[ -n "${PROTOC:-}" ] || skip "protoc not installed (apt-get install protobuf-compiler)"
make_code_dirs

while read -r name opts; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	code_recording "$name" 64K $opts || continue
	out=$TMP/$name.perfetto-trace
	"$VMTRACE" timeline "$TMP/$name.data" --guest "$GUEST_CODE" -o "$out" 2>"$TMP/$name.err"
	ck_rc=$?
	check "$name: vmtrace timeline exit 0 ($(tail -1 "$TMP/$name.err"))" test $ck_rc -eq 0
	check "$name: the trace is 0600 (it holds kernel addresses)" test "$(stat -c %a "$out")" = 600
	"$PROTOC" --decode=perfetto.protos.Trace --proto_path="$top_srcdir" src/timeline/perfetto.proto \
		<"$out" >"$TMP/$name.txt" 2>"$TMP/$name.protoc"
	ck_rc=$?
	check "$name: protoc --decode reads it ($(head -c 200 "$TMP/$name.protoc"))" test $ck_rc -eq 0
	"$PYTHON3" "$top_srcdir/tests/timeline-check.py" perfetto "$TMP/$name.txt" "$TMP/$name.branches" \
		"$HOST_CODE/kallsyms" "$GUEST_CODE/kallsyms" >"$TMP/$name.check" 2>&1
	check "$name: tracks, slices, VM exits and counters = ground truth ($(tail -1 "$TMP/$name.check"))" \
		grep -qx ok "$TMP/$name.check" || sed 's/^/#   /' "$TMP/$name.check"
	unit='VM exits/ms'
	case $opts in *--timeless*) unit='VM exits/1000 instructions' ;; esac
	check "$name: the counter track is \"$unit\"" grep -q "name: \"$unit\"" "$TMP/$name.txt"
done <<'CONFIGS'
thread-2vcpu-timed      --vcpus 2 --psb-period 1 --seed 5
cpu-2vcpu-2cpu-timed    --vcpus 2 --per-cpu --cpus 2 --psb-period 0
thread-1vcpu-timeless   --vcpus 1 --timeless
CONFIGS

# the trace is streamed: a recording 16 times larger (1 MiB of AUX data
# against 64 KiB) needs no more memory for its timeline (within 32 MiB: the
# larger one covers more kernel code, and libipt's section cache of 32 MiB
# per image fills with it) - nothing is kept per branch or per slice.  (Decoding alone, vmtrace script
# printing nothing, is shown beside: the code images' pages touched by the
# analysis's instruction counts come on top of it, bounded by the images.)
rss() { /usr/bin/time -f %M -o "$TMP/rss" "$@" >/dev/null 2>&1 && cat "$TMP/rss"; }
code_recording small 64K --vcpus 2 --psb-period 1 --seed 5 &&
	code_recording big 1M --vcpus 2 --psb-period 1 --seed 5 &&
	tl_small=$(rss "$VMTRACE" timeline "$TMP/small.data" --guest "$GUEST_CODE" -o "$TMP/small.perfetto-trace") &&
	tl=$(rss "$VMTRACE" timeline "$TMP/big.data" --guest "$GUEST_CODE" -o "$TMP/big.perfetto-trace") &&
	dec=$(rss "$VMTRACE" script "$TMP/big.data" --guest "$GUEST_CODE" --tid 1)
check "memory flat: timeline of 1 MiB of AUX data $tl KiB <= of 64 KiB $tl_small KiB + 32 MiB (decoding alone: $dec KiB)" \
	test "${tl:-999999999}" -le $((${tl_small:-0} + 32768))
finish
