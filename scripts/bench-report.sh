#!/bin/bash
# Benchmark (not a test): vmtrace report vs perf script --call-trace, the
# lower bound of the perf pipeline that would answer the same questions
# (perf script's output piped into scripts that rebuild call stacks).
# Generates a recording of real kernel code of SIZE (default 512M) with
# `vmtrace synth --host-code --guest-code` (the Debian kernel, as the tests
# build it: tests/guest-image.sh, kernel-code.py, trim-kcore), corrects it,
# then runs each RUNS times (default 1) under /usr/bin/time and prints the
# median wall time, peak RSS and the perf/vmtrace ratio.
# Goal (issue #14): report >= 5x faster than perf script --call-trace, memory
# flat (peak RSS independent of SIZE).
#   scripts/bench-report.sh [--size 512M] [--runs N] [--dir DIR] [--keep]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
VMTRACE=${VMTRACE:-$top/vmtrace}
TRIM_KCORE=${TRIM_KCORE:-$top/tests/trim-kcore}
PERF=${PERF:-perf}
size=512M runs=1 dir= keep=
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "usage: $0 [--size 512M] [--runs N] [--dir DIR] [--keep]" >&2; exit 2 ;;
	esac
done
[ -x "$VMTRACE" ] || { echo "build vmtrace first" >&2; exit 1; }
[ -x "$TRIM_KCORE" ] || { echo "build $TRIM_KCORE first (make tests/trim-kcore)" >&2; exit 1; }
dir=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/vmtrace-bench-report.XXXXXX")}
mkdir -p "$dir"
[ -n "$keep" ] || trap 'rm -rf "$dir"' EXIT

if [ ! -f "$dir/guest-code/kcore" ]; then
	sh "$top/tests/guest-image.sh" --vmlinux "$dir/kernel" >"$dir/kernel.log" 2>&1 ||
		{ echo "no Debian kernel package: $(tail -1 "$dir/kernel.log")" >&2; exit 1; }
	mkdir -p "$dir/host-code" "$dir/guest-code"
	python3 "$top/tests/kernel-code.py" "$dir/kernel/vmlinux" 0xe00000 "$dir/host-code" --kvm-stub
	python3 "$top/tests/kernel-code.py" "$dir/kernel/vmlinux" 0x2000000 "$dir/guest-code"
	"$TRIM_KCORE" "$dir/host-code" && "$TRIM_KCORE" "$dir/guest-code"
fi
rec=$dir/rec-$size.data
if [ ! -e "$rec" ]; then
	echo "generating a $size recording of real kernel code (4 vCPUs; slow: synth walks the code)" >&2
	"$VMTRACE" synth -o "$rec" --size "$size" --vcpus 4 --host-code "$dir/host-code" \
		--guest-code "$dir/guest-code" 2>/dev/null
	"$VMTRACE" correlate --in-place "$rec" >/dev/null
fi
G="--guestkallsyms $dir/guest-code/kallsyms"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# measure NAME CMD...: appends "seconds maxrss_kb" to NAME.times
measure() {
	local out=$1; shift
	/usr/bin/time -f "%e %M" -o "$dir/t" "$@" >/dev/null 2>"$dir/stderr" || {
		echo "command failed: $*" >&2; cat "$dir/stderr" >&2; exit 1; }
	cat "$dir/t" >>"$dir/$out.times"
}
rm -f "$dir"/*.times
for _ in $(seq "$runs"); do
	# shellcheck disable=SC2086
	measure report "$VMTRACE" report "$rec" $G
	# shellcheck disable=SC2086
	measure perf "$PERF" script -i "$rec" $G --call-trace
done
vt=$(cut -d' ' -f1 "$dir/report.times" | median)
pf=$(cut -d' ' -f1 "$dir/perf.times" | median)
printf '%-8s %10s %12s %14s %12s %8s\n' SIZE REPORT-S REPORT-RSS PERF-CALL-S PERF-RSS RATIO
printf '%-8s %10s %10sMB %14s %10sMB %7.1fx\n' "$size" "$vt" "$(($(cut -d' ' -f2 "$dir/report.times" | sort -n | tail -1) / 1024))" \
	"$pf" "$(($(cut -d' ' -f2 "$dir/perf.times" | sort -n | tail -1) / 1024))" "$(echo "$pf / $vt" | bc -l)"
