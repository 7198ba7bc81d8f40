#!/bin/sh
# vmtrace correlate --dry-run --format=perf agrees with perf inject
# --vm-time-correlation=dry-run on a matrix of synthetic recordings, and both
# agree with synth's ground truth.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python

# name | synth options
cat >"$TMP/matrix" <<'M'
thread-1vcpu         --vcpus 1
thread-4vcpu         --vcpus 4
thread-16vcpu        --vcpus 16 --size 4M
cpu-4vcpu            --per-cpu --vcpus 4
cpu-16vcpu-migrate   --per-cpu --vcpus 16 --cpus 4 --size 4M
cpu-8vcpu-2cpus      --per-cpu --vcpus 8 --cpus 2
thread-cyc           --vcpus 4 --cyc
cpu-cyc              --per-cpu --vcpus 4 --cyc
mtc0                 --vcpus 2 --mtc-period 0
mtc6                 --vcpus 2 --mtc-period 6
mtc6-cpu-cyc         --per-cpu --vcpus 4 --mtc-period 6 --cyc
psb0                 --vcpus 2 --psb-period 0
psb5                 --vcpus 2 --psb-period 5 --size 4M
ratio100             --vcpus 4 --tsc-ctc-ratio 100/1
ratio100-cpu         --per-cpu --vcpus 4 --tsc-ctc-ratio 100/1 --mtc-period 0
two-vms-thread       --vms 2 --vcpus 4 --offset 0xffffff8000000000:0 --offset 0x0000000123456789:1
two-vms-cpu          --per-cpu --vms 2 --vcpus 6 --cpus 3 --offset 0xfffffe0000001000:0 --offset 0xffffffffff000000:1
top-byte             --vcpus 2 --offset 0x0123456789abcdef
top-byte-neg         --per-cpu --vcpus 2 --offset 0xfe80000000000001
seed7-buffers        --vcpus 3 --seed 7 --buffer-size 16K --cyc
M

while read -r name opts; do
	[ -n "$name" ] || continue
	f="$TMP/$name.data"
	# shellcheck disable=SC2086
	if ! "$VMTRACE" synth -o "$f" --truth "$TMP/$name.json" --size 2M $opts 2>"$TMP/synth.err"; then
		fail "$name: synth failed: $(cat "$TMP/synth.err")"
		continue
	fi
	"$VMTRACE" correlate --dry-run --format=perf "$f" >"$TMP/$name.vt" 2>"$TMP/$name.vterr"
	rc=$?
	perf_dry_run "$f" >"$TMP/$name.perf"
	prc=$?
	if [ $rc -ne 0 ]; then
		fail "$name: vmtrace exit $rc: $(cat "$TMP/$name.vterr")"
	elif [ $prc -ne 0 ]; then
		fail "$name: perf exit $prc"
	elif "$PYTHON3" "$top_srcdir/tests/check-matrix.py" "$TMP/$name.json" "$TMP/$name.vt" "$TMP/$name.perf" >"$TMP/cmp" 2>&1; then
		ok "$name: $(wc -l <"$TMP/$name.vt") VMCS, same as perf and ground truth"
	else
		fail "$name: mismatch"; cat "$TMP/cmp"
	fi
done <"$TMP/matrix"
finish
