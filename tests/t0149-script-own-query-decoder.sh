#!/bin/sh
# Our query decoder (src/decode/qry.c) against libipt's (pt_qry_*) under
# the walker: VMTRACE_QRY_CHECK=1 runs both side by side and aborts on the
# first answer that differs (status, branch, event, time, offset), and
# its output must be the bytes VMTRACE_DECODER=qry (libipt's alone)
# prints, exit status included - on a matrix of recordings of real kernel
# code: per thread and per CPU, timed and timeless, CYC and MTC period 0,
# 1-8 vCPUs, 2 VMs, VM exits handled in user space (disable and enable),
# overflows, lost AUX data, changing core:bus ratios, 4 KiB windows and
# corrupt AUX data.  (tests/test-qry compares the two decoders on random
# packet streams of every kind; this test, the walker's use of them on
# real code.)
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

# same NAME REC SCRIPT-OPTS...: lock-step run clean, output = libipt's
same() {
	s_name=$1 s_rec=$2
	shift 2
	for s_mode in --itrace=bep --call-ret-trace; do
		VMTRACE_DECODER=qry "$VMTRACE" script "$s_rec" "$@" $s_mode >"$TMP/lib" 2>"$TMP/lib.err"
		s_rl=$?
		VMTRACE_QRY_CHECK=1 "$VMTRACE" script "$s_rec" "$@" $s_mode >"$TMP/own" 2>"$TMP/own.err"
		s_ro=$?
		check "$s_name $s_mode: ours = libipt's ($(wc -l <"$TMP/lib") lines, exit $s_ro = $s_rl)" \
			sh -c "cmp -s '$TMP/lib' '$TMP/own' && cmp -s '$TMP/lib.err' '$TMP/own.err' && test $s_rl -eq $s_ro" ||
			{ diff "$TMP/lib" "$TMP/own" | head -6; diff "$TMP/lib.err" "$TMP/own.err" | head -6; } |
			sed 's/^/#   /'
	done
}

while read -r name size opts; do
	[ -n "$name" ] || continue
	asan_skip "$name" thread-4vcpu-timed cpu-2vcpu-mtc0 thread-2vm-cyc thread-2vcpu-ovf cpu-2vcpu-ovf && continue
	# shellcheck disable=SC2086
	row_recording "$name" "$size" "$GUEST_CODE" $opts || continue
	same "$name" "$TMP/$name.data" --guestkallsyms "$GUEST_CODE/kallsyms"
	rm -rf "$TMP/$name.data"
done <<'CONFIGS'
thread-1vcpu-timeless   96K  --vcpus 1 --timeless
thread-4vcpu-timed      96K  --vcpus 4 --psb-period 1
cpu-4vcpu-2cpu-timed    96K  --vcpus 4 --per-cpu --cpus 2 --psb-period 0
thread-2vm-cyc          96K  --vcpus 2 --vms 2 --cyc --psb-period 0
cpu-2vcpu-mtc0          96K  --vcpus 2 --per-cpu --cpus 2 --mtc-period 0 --psb-period 0 --seed 3
thread-8vcpu-timed      128K --vcpus 8 --psb-period 1
thread-4vcpu-timeless-cyc 96K --vcpus 4 --timeless --cyc
thread-2vcpu-user-exits 96K  --vcpus 2 --user-exit-percent 50 --seed 9
exit-heavy              96K  --vcpus 4 --host-steps 6
thread-2vcpu-ovf        96K  --vcpus 2 --ovf-every 50 --timeless --seed 21
cpu-2vcpu-ovf           96K  --vcpus 2 --ovf-every 7 --per-cpu --cpus 2 --seed 21
thread-2vcpu-aux-lost   96K  --vcpus 2 --aux-truncated-every 3 --seed 21
thread-2vcpu-cbr        96K  --vcpus 2 --cbr-vary --cyc --seed 21
CONFIGS

same_in_windows

# corrupt AUX data: decode errors, resynchronisation (and they happen)
if code_recording err 256K --vcpus 2 --seed 4 && "$PYTHON3" "$top_srcdir/tests/aux-corrupt.py" "$TMP/err.data/data"; then
	same "corrupt AUX" "$TMP/err.data" --guestkallsyms "$GUEST_CODE/kallsyms"
	check "...with decode errors ($(grep -c 'instruction trace error' "$TMP/own") of them)" \
		grep -q 'instruction trace error' "$TMP/own"
fi

# the own decoder is the default: libipt's prints the same, but ours is what runs
# (a decoder that always handed over to libipt's would pass all the above)
if code_recording own 96K --vcpus 2 --seed 6; then
	VMTRACE_RANGES_STATS=1 "$VMTRACE" script "$TMP/own.data" --guestkallsyms "$GUEST_CODE/kallsyms" \
		--itrace=b >/dev/null 2>"$TMP/stats"
	check "the query decoder in use is ours ($(grep 'query decoder' "$TMP/stats"))" \
		grep -q 'query decoder: ours' "$TMP/stats"
	VMTRACE_DECODER=qry VMTRACE_RANGES_STATS=1 "$VMTRACE" script "$TMP/own.data" \
		--guestkallsyms "$GUEST_CODE/kallsyms" --itrace=b >/dev/null 2>"$TMP/stats"
	check "...and libipt's with VMTRACE_DECODER=qry ($(grep 'query decoder' "$TMP/stats"))" \
		grep -q "query decoder: libipt's" "$TMP/stats"
fi
finish
