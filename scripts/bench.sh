#!/bin/bash
# Benchmark (not a test): vmtrace vs perf on large synthetic traces.
# For each configuration, generates a trace of SIZE (default 512M), then runs
# `vmtrace correlate --dry-run` and `perf inject --vm-time-correlation=dry-run`
# alternately RUNS times each (default 3) under /usr/bin/time -v, and prints
# median wall time, the perf/vmtrace ratio and both peak RSS values.
# Goals (issue 2): >= 10x faster than perf, <= 64 MiB peak RSS.
#   scripts/bench.sh [--size 512M] [--runs 3] [--dir DIR] [--keep]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
VMTRACE=${VMTRACE:-$top/vmtrace}
PERF=${PERF:-perf}
size=512M runs=3 dir= keep=
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "usage: $0 [--size 512M] [--runs N] [--dir DIR] [--keep]" >&2; exit 2 ;;
	esac
done
[ -x "$VMTRACE" ] || { echo "build vmtrace first (scripts/setup-and-demo.sh --no-demo)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
dir=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/vmtrace-bench.XXXXXX")}
mkdir -p "$dir"
[ -n "$keep" ] || trap 'rm -rf "$dir"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# measure OUTPREFIX CMD...: appends "seconds maxrss_kb" to OUTPREFIX.times
measure() {
	local out=$1; shift
	/usr/bin/time -f "%e %M" -o "$dir/t" "$@" >/dev/null 2>"$dir/stderr" || {
		echo "command failed: $*" >&2; cat "$dir/stderr" >&2; exit 1; }
	cat "$dir/t" >>"$out.times"
}

printf '%-10s %10s %10s %8s %12s %12s\n' config vmtrace_s perf_s ratio vmtrace_rss perf_rss
for cfg in "default:" "cyc:--cyc"; do
	name=${cfg%%:*}; opts=${cfg#*:}
	f="$dir/$name.data"
	# shellcheck disable=SC2086
	"$VMTRACE" synth -o "$f" --size "$size" $opts 2>/dev/null
	rm -f "$dir/vt.times" "$dir/perf.times"
	cat "$f" >/dev/null    # both tools start from a warm page cache
	for _ in $(seq "$runs"); do
		measure "$dir/vt" "$VMTRACE" correlate --dry-run "$f"
		measure "$dir/perf" timeout 600 "$PERF" inject -i "$f" --vm-time-correlation=dry-run
	done
	vt_s=$(cut -d' ' -f1 "$dir/vt.times" | median); perf_s=$(cut -d' ' -f1 "$dir/perf.times" | median)
	vt_rss=$(cut -d' ' -f2 "$dir/vt.times" | sort -n | tail -1); perf_rss=$(cut -d' ' -f2 "$dir/perf.times" | sort -n | tail -1)
	ratio=$(awk -v a="$perf_s" -v b="$vt_s" 'BEGIN { printf "%.1fx", (b > 0 ? a / b : 0) }')
	awk -v n="$name" -v a="$vt_s" -v b="$perf_s" -v r="$ratio" -v x="$vt_rss" -v y="$perf_rss" \
		'BEGIN { printf "%-10s %10s %10s %8s %9.1f MiB %9.1f MiB\n", n, a, b, r, x / 1024, y / 1024 }'
	rm -f "$f"
done
echo "(trace size $size, $runs runs each, median wall time; peak RSS is the maximum over runs; $(nproc) CPUs)"
