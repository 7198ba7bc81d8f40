#!/bin/bash
# Benchmark (not a test): vmtrace report vs perf script --call-trace, the
# lower bound of the perf pipeline that would answer the same questions
# (perf script's output piped into scripts that rebuild call stacks).
# Generates recordings of real kernel code of each SIZE (default 512M) with
# `vmtrace synth --host-code --guest-code` (the Debian kernel, as the tests
# build it: tests/guest-image.sh, kernel-code.py, trim-kcore), corrects
# them, then runs each RUNS times (default 1) under /usr/bin/time (report
# with --json, whose vCPU times give the span below; the output is a few MB
# at most: bounded by the code the trace visits) and prints the median wall
# time and CPU time (user + system), the CPU seconds per MiB of the
# recording's data file (AUX data and sideband), peak RSS and the
# perf/vmtrace ratios of wall time and of CPU per MiB.  perf
# runs at most LIMIT seconds (default 1200; --perf-limit): when it is
# stopped, the output says so, the wall ratio is printed as ">= LIMIT/report"
# and with it how far perf got (the perf time of the last line it printed,
# as a share of the recording's time span: perf decodes in time order);
# perf's CPU per MiB is then its pace until it was stopped (CPU time / the
# share of the MiB it decoded) - a lower bound for the whole recording, as
# its pace only drops (its memory grows with the code it walked), and the
# CPU ratio is that pace over report's (">=").
# Goal (issue #14): report >= 5x faster than perf script --call-trace, memory
# flat (peak RSS independent of SIZE).
# synth writes real-code recordings at 25-300 KB/s (64 MiB would take up to
# half an hour, 512 MiB hours), so sizes above --walk (default 16M) are
# made of one WALK-sized synth recording repeated (tests/aux-repeat.py
# --seamless: each vCPU queue's AUX data from its first to its last PSB+,
# copy after copy, times shifted so they go on; perf and vmtrace decode it
# without errors, tests/t0114): the same code paths over and over, as in a
# real workload's steady state; the NOTE column says which recordings are.
# --dir DIR --keep keeps the recordings for the next run.
#   scripts/bench-report.sh [--size 512M | --sizes "4M 16M 64M"] [--runs N]
#                           [--perf-limit SECONDS] [--walk SIZE] [--dir DIR] [--keep]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
VMTRACE=${VMTRACE:-$top/vmtrace}
TRIM_KCORE=${TRIM_KCORE:-$top/tests/trim-kcore}
PERF=${PERF:-perf}
sizes=512M runs=1 dir='' keep='' limit=1200 walk=16M
while [ $# -gt 0 ]; do
	case $1 in
	--size|--sizes) sizes=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--perf-limit) limit=$2; shift 2 ;;
	--walk) walk=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "usage: $0 [--sizes \"4M 16M 512M\"] [--runs N] [--perf-limit SECONDS] [--walk SIZE] [--dir DIR] [--keep]" >&2; exit 2 ;;
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
# measure NAME CMD...: appends "wall user sys maxrss_kb" to NAME.times,
# CMD's stdout in NAME.out
measure() {
	local out=$1; shift
	/usr/bin/time -f "%e %U %S %M" -o "$dir/t" "$@" >"$dir/$out.out" 2>"$dir/stderr" || {
		echo "command failed: $*" >&2; cat "$dir/stderr" >&2; exit 1; }
	cat "$dir/t" >>"$dir/$out.times"
}
# measure_perf REC: perf script --call-trace for at most $limit s; appends
# "wall user sys maxrss_kb" to perf.times, and to perf.stopped the perf
# time of its last line when the limit stopped it
measure_perf() {
	# shellcheck disable=SC2086
	/usr/bin/time -f "%e %U %S %M" -o "$dir/t" timeout "$limit" "$PERF" script -i "$1" $G --call-trace \
		2>"$dir/stderr" | tail -1 >"$dir/perf.last" || true
	[ -s "$dir/t" ] && tail -1 "$dir/t" >>"$dir/perf.times"
	grep -q 'status 124' "$dir/t" 2>/dev/null &&
		awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) {sub(":", "", $i); print $i; exit}}' \
			"$dir/perf.last" >>"$dir/perf.stopped"
	return 0
}
# span: the recording's perf time span "first last" in seconds, from the
# measured report's --json (each vCPU's first branch and wall time)
span() {
	python3 -c 'import json, sys
v = json.load(sys.stdin)["vcpus"]
print(min(x["first"] for x in v) / 1e9, max(x["first"] + x["wall"] for x in v) / 1e9)' <"$dir/report.out"
}
col() { cut -d' ' -f"$1" "$2" | median; }
# cpu NAME: the median of user + system seconds of NAME.times
cpu() { awk '{print $2 + $3}' "$dir/$1.times" | median; }
# rss NAME: the largest peak RSS of NAME.times, in MB
rss() { echo $(($(cut -d' ' -f4 "$dir/$1.times" | sort -n | tail -1) / 1024)); }
calc() { printf "%.${1}f" "$(echo "$2" | bc -l)"; }
bytes() { numfmt --from=iec "$1"; }
# synth_rec REC SIZE: a corrected SIZE recording of real kernel code, 4 vCPUs
synth_rec() {
	[ -e "$1" ] && return 0
	echo "generating a $2 recording of real kernel code (4 vCPUs; slow: synth walks the code)" >&2
	"$VMTRACE" synth -o "$1.tmp" --size "$2" --vcpus 4 --host-code "$dir/host-code" \
		--guest-code "$dir/guest-code" 2>/dev/null
	"$VMTRACE" correlate --in-place "$1.tmp" >/dev/null
	mv "$1.tmp" "$1"
}

echo "# perf script --call-trace runs at most $limit s; when stopped, its CPU/MIB is its pace until then (a lower bound)"
printf '%-6s %8s %9s %9s %8s %10s %9s %9s %8s %10s %8s %9s  %s\n' SIZE DATA-MIB REPORT-S REPORT-CPU CPU/MIB REPORT-RSS \
	PERF-S PERF-CPU CPU/MIB PERF-RSS RATIO CPU-RATIO NOTE
for size in $sizes; do
	rec=$dir/rec-$size.data made=
	if [ "$(bytes "$size")" -gt "$(bytes "$walk")" ]; then
		synth_rec "$dir/walk-$walk.data" "$walk"
		if [ ! -e "$rec" ]; then
			echo "repeating the $walk walk to $size (tests/aux-repeat.py --seamless)" >&2
			rm -rf "$rec.tmp" && cp -r "$dir/walk-$walk.data" "$rec.tmp" &&
				python3 "$top/tests/aux-repeat.py" --seamless "$dir/walk-$walk.data/data" "$rec.tmp/data" \
					"$size" >"$rec.copies" && mv "$rec.tmp" "$rec"
		fi
		made="$walk walk x$(cut -d' ' -f1 "$rec.copies") copies"
	else
		synth_rec "$rec" "$size"
	fi
	mib=$(calc 2 "$(stat -c %s "$rec/data") / 1048576")
	rm -f "$dir"/*.times "$dir/perf.stopped"
	for _ in $(seq "$runs"); do
		# shellcheck disable=SC2086
		measure report "$VMTRACE" report "$rec" $G --json
		measure_perf "$rec"
	done
	vt=$(col 1 "$dir/report.times") pf=$(col 1 "$dir/perf.times") vc=$(cpu report) pc=$(cpu perf)
	share=1 ge='' note=$made
	if [ -s "$dir/perf.stopped" ]; then
		read -r t0 t1 <<<"$(span)"
		at=$(sort -n "$dir/perf.stopped" | tail -1)
		share=$(echo "($at - $t0) / ($t1 - $t0)" | bc -l) ge=">="
		# perf's pace only drops as it goes (its memory grows with the
		# guest code it walked, README), so at its pace until then it
		# would need at least PERF-S / share for the whole recording (its
		# start-up, a few seconds, counts too: use a long --perf-limit);
		# the same in CPU time, which load does not stretch
		note=${note:+$note; }$(printf 'perf stopped after %s s at %.1f%% of the recording (%s of %s s of perf time); at that pace >= %.0f s, %.1fx' \
			"$limit" "$(echo "100 * $share" | bc -l)" "$(echo "$at - $t0" | bc -l)" "$(echo "$t1 - $t0" | bc -l)" \
			"$(echo "$pf / $share" | bc -l)" "$(echo "$pf / $share / $vt" | bc -l)")
	fi
	vmib=$(calc 3 "$vc / $mib") pmib=$(calc 3 "$pc / $share / $mib")
	printf '%-6s %8s %9s %9s %8s %8sMB %9s %9s %8s %8sMB %8s %9s  %s\n' "$size" "$mib" "$vt" "$vc" "$vmib" "$(rss report)" \
		"$pf" "$pc" "$ge$pmib" "$(rss perf)" "$ge$(calc 1 "$pf / $vt")x" "$ge$(calc 1 "$pmib / $vmib")x" "$note"
done
