#!/bin/bash
# Benchmark (not a test): vmtrace vs perf on large synthetic traces.
# For each configuration, generates a trace of SIZE (default 512M), then runs
# `vmtrace correlate --dry-run` and `perf inject --vm-time-correlation=dry-run`
# alternately RUNS times each (default 3) under /usr/bin/time -v, and prints
# median wall time, the perf/vmtrace ratio and both peak RSS values.
# Then, on the default trace, the correction itself: `vmtrace correlate
# --in-place` (discovery + rewrite in one step) against perf's in-place
# rewrite `perf inject --vm-time-correlation=<offsets> --force` (given the
# offsets), each on a fresh copy.
# Goals: dry run >= 10x faster than perf, correction >= 5x, <= 64 MiB peak RSS.
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
	if [ "$name" = default ]; then
		offs=$("$VMTRACE" correlate --dry-run --format=perf "$f" | awk '{print $5 ":" $2}' | tr '\n' ' ')
		rm -f "$dir/vt.times" "$dir/perf.times"
		for _ in $(seq "$runs"); do
			cp "$f" "$dir/copy.data"; sync
			measure "$dir/vt" "$VMTRACE" correlate --in-place "$dir/copy.data"
			cp "$f" "$dir/copy.data"; sync
			measure "$dir/perf" timeout 600 "$PERF" inject -i "$dir/copy.data" --vm-time-correlation="$offs" --force
		done
		rm -f "$dir/copy.data"
		vt_a=$(cut -d' ' -f1 "$dir/vt.times" | median); perf_a=$(cut -d' ' -f1 "$dir/perf.times" | median)
		vt_arss=$(cut -d' ' -f2 "$dir/vt.times" | sort -n | tail -1); perf_arss=$(cut -d' ' -f2 "$dir/perf.times" | sort -n | tail -1)
		apply_line=$(awk -v a="$vt_a" -v b="$perf_a" -v x="$vt_arss" -v y="$perf_arss" \
			'BEGIN { printf "%-10s %10s %10s %7.1fx %9.1f MiB %9.1f MiB", "apply", a, b, (a > 0 ? b / a : 0), x / 1024, y / 1024 }')
	fi
	rm -f "$f"
done
[ -n "${apply_line:-}" ] && echo "$apply_line"
echo "(trace size $size, $runs runs each, median wall time; peak RSS is the maximum over runs; $(nproc) CPUs;"
echo " dry run = vmtrace correlate --dry-run vs perf inject --vm-time-correlation=dry-run;"
echo " apply = vmtrace correlate --in-place (discovers + rewrites) vs perf's in-place rewrite given the offsets)"
