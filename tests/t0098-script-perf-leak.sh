#!/bin/sh
# perf 6.1 leaks memory decoding guest code of recordings whose vCPU
# threads carry the QEMU pid, as real recordings' do and synth's do
# (perf-decode.md 13: intel_pt_get_guest() never finds the guest machine
# and adds a thread for every guest code walk): on 4 MiB of real-code AUX
# perf script's peak RSS grows to more than 1 GB (~0.35 GB per MiB here,
# from < 0.1 GB on 128 KiB), while vmtrace script's stays <= 128 MiB on the
# same files.  perf runs under ulimit -v 8 GiB and a time limit; skipped
# when the machine has less than 4 GiB available.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_perf
need_python
avail=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
[ "${avail:-0}" -ge 4194304 ] || skip "perf needs GBs here: only $((avail / 1024)) MiB available"
make_code_dirs

G="--guestkallsyms $GUEST_CODE/kallsyms"
# peak ARGS...: the command's peak RSS in KiB (-1 if it failed or was killed)
peak() {
	"$PYTHON3" - "$@" <<'PY'
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if p.returncode in (0, 3) else -1)
PY
}
for size in 128K 4M; do
	"$VMTRACE" synth -o "$TMP/$size.data" --size $size --vcpus 2 --timeless --host-code "$HOST_CODE" \
		--guest-code "$GUEST_CODE" 2>/dev/null || { fail "synth $size"; continue; }
	# the vCPU threads carry the QEMU pid (the COMM records perf reads)
	[ $size = 4M ] || check "$size: vCPU threads of the QEMU process (pid 4000)" sh -c \
		"'$PERF' script -i '$TMP/$size.data' --show-task-events --itrace=e 2>/dev/null | grep -q 'PERF_RECORD_COMM: CPU 0/KVM:4000/'"
	# shellcheck disable=SC2086
	perf_rss=$(ulimit -v 8388608; peak timeout 900 "$PERF" script -i "$TMP/$size.data" $G --itrace=e)
	# shellcheck disable=SC2086
	vt_rss=$(peak "$VMTRACE" script "$TMP/$size.data" $G --itrace=e)
	echo "# $size of AUX: peak RSS perf script $((perf_rss / 1024)) MiB, vmtrace script $((vt_rss / 1024)) MiB"
	eval "perf_$size=\$perf_rss vt_$size=\$vt_rss"
	asan_build || check "$size: vmtrace script peak RSS $vt_rss KiB <= 128 MiB" test "$vt_rss" -gt 0 -a "$vt_rss" -le 131072
done
# shellcheck disable=SC2154
check "perf script: peak RSS grows to GBs (128 KiB: $perf_128K KiB, 4 MiB: $perf_4M KiB)" \
	test "$perf_128K" -gt 0 -a "$perf_4M" -gt 1048576
finish
