#!/bin/bash
# Benchmark (not a test): vmtrace report vs perf script --call-trace, the
# lower bound of the perf pipeline that would answer the same questions
# (perf script's output piped into scripts that rebuild call stacks).
# Generates recordings of real kernel code of each SIZE (default 512M) with
# `vmtrace synth --host-code --guest-code` (the Debian kernel, as the tests
# build it: tests/guest-image.sh, kernel-code.py, trim-kcore), corrects
# them, then runs each RUNS times (default 1) under /usr/bin/time and prints
# the median wall and user time, peak RSS and the perf/vmtrace ratio.  perf
# runs at most LIMIT seconds (default 1200; --perf-limit): when it is
# stopped, the ratio is printed as ">= LIMIT/report" and with it how far
# perf got (the perf time of the last line it printed, as a share of the
# recording's time span: perf decodes in time order).
# Goal (issue #14): report >= 5x faster than perf script --call-trace, memory
# flat (peak RSS independent of SIZE).
# synth writes real-code recordings at 25-50 KB/s: 64 MiB takes about half an
# hour, 512 MiB hours (--dir DIR --keep keeps them for the next run).
#   scripts/bench-report.sh [--size 512M | --sizes "4M 16M 64M"] [--runs N]
#                           [--perf-limit SECONDS] [--dir DIR] [--keep]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
VMTRACE=${VMTRACE:-$top/vmtrace}
TRIM_KCORE=${TRIM_KCORE:-$top/tests/trim-kcore}
PERF=${PERF:-perf}
sizes=512M runs=1 dir='' keep='' limit=1200
while [ $# -gt 0 ]; do
	case $1 in
	--size|--sizes) sizes=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--perf-limit) limit=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "usage: $0 [--sizes \"4M 16M 512M\"] [--runs N] [--perf-limit SECONDS] [--dir DIR] [--keep]" >&2; exit 2 ;;
	esac
done
[ -x "$VMTRACE" ] || { echo "build vmtrace first" >&2; exit 1; }
[ -x "$TRIM_KCORE" ] || { echo "build $TRIM_KCORE first (make tests/trim-kcore)" >&2; exit 1; }
dir=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/vmtrace-bench-report.XXXXXX")}
mkdir -p "$dir"
[ -n "$keep" ] || trap 'rm -rf "$dir"' EXIT

. "$top/scripts/bench-lib.sh"
bench_code_dirs

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# measure NAME CMD...: appends "wall user maxrss_kb" to NAME.times
measure() {
	local out=$1; shift
	/usr/bin/time -f "%e %U %M" -o "$dir/t" "$@" >/dev/null 2>"$dir/stderr" || {
		echo "command failed: $*" >&2; cat "$dir/stderr" >&2; exit 1; }
	cat "$dir/t" >>"$dir/$out.times"
}
# measure_perf REC: perf script --call-trace for at most $limit s; appends
# "wall user maxrss_kb" to perf.times, and to perf.stopped the perf time
# of its last line when the limit stopped it
measure_perf() {
	# shellcheck disable=SC2086
	/usr/bin/time -f "%e %U %M" -o "$dir/t" timeout "$limit" "$PERF" script -i "$1" $G --call-trace \
		2>"$dir/stderr" | tail -1 >"$dir/perf.last" || true
	[ -s "$dir/t" ] && tail -1 "$dir/t" >>"$dir/perf.times"
	grep -q 'status 124' "$dir/t" 2>/dev/null &&
		awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) {sub(":", "", $i); print $i; exit}}' \
			"$dir/perf.last" >>"$dir/perf.stopped"
	return 0
}
# span REC: the recording's perf time span "first last" in seconds (vmtrace
# report --json: each vCPU's first branch and wall time)
span() {
	# shellcheck disable=SC2086
	"$VMTRACE" report "$1" $G --json 2>/dev/null | python3 -c 'import json, sys
v = json.load(sys.stdin)["vcpus"]
print(min(x["first"] for x in v) / 1e9, max(x["first"] + x["wall"] for x in v) / 1e9)'
}
col() { cut -d' ' -f"$1" "$2" | median; }

printf '%-6s %9s %9s %10s %9s %9s %10s %8s  %s\n' SIZE REPORT-S REPORT-US REPORT-RSS PERF-S PERF-US PERF-RSS RATIO NOTE
for size in $sizes; do
	rec=$dir/rec-$size.data
	if [ ! -e "$rec" ]; then
		echo "generating a $size recording of real kernel code (4 vCPUs; slow: synth walks the code)" >&2
		"$VMTRACE" synth -o "$rec" --size "$size" --vcpus 4 --host-code "$dir/host-code" \
			--guest-code "$dir/guest-code" 2>/dev/null
		"$VMTRACE" correlate --in-place "$rec" >/dev/null
	fi
	rm -f "$dir"/*.times "$dir/perf.stopped"
	for _ in $(seq "$runs"); do
		# shellcheck disable=SC2086
		measure report "$VMTRACE" report "$rec" $G
		measure_perf "$rec"
	done
	vt=$(col 1 "$dir/report.times") pf=$(col 1 "$dir/perf.times")
	ratio=$(printf '%.1fx' "$(echo "$pf / $vt" | bc -l)") note=
	if [ -s "$dir/perf.stopped" ]; then
		read -r t0 t1 <<<"$(span "$rec")"
		at=$(sort -n "$dir/perf.stopped" | tail -1)
		ratio=">=$ratio"
		note=$(printf 'perf stopped after %s s at %.0f%% of the recording (%s of %s s of perf time)' "$limit" \
			"$(echo "100 * ($at - $t0) / ($t1 - $t0)" | bc -l)" "$(echo "$at - $t0" | bc -l)" "$(echo "$t1 - $t0" | bc -l)")
	fi
	printf '%-6s %9s %9s %8sMB %9s %9s %8sMB %8s  %s\n' "$size" "$vt" "$(col 2 "$dir/report.times")" \
		"$(($(cut -d' ' -f3 "$dir/report.times" | sort -n | tail -1) / 1024))" "$pf" "$(col 2 "$dir/perf.times")" \
		"$(($(cut -d' ' -f3 "$dir/perf.times" | sort -n | tail -1) / 1024))" "$ratio" "$note"
done
