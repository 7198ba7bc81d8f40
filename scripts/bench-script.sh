#!/bin/bash
# Benchmark (not a test): vmtrace script vs perf script on recordings of
# real kernel code, three packet mixes:
#   tnt-dense   long runs of code between VM exits (--host-steps 2000):
#               mostly TNT, a VM exit every ~3,400 branches
#   exit-heavy  short exit handlers and guest stretches (--host-steps 6,
#               4 vCPUs): a VM exit every ~55 branches - TIP, PIP, VMCS,
#               FUP (before session 18 --host-steps shaped synth's random
#               flow only, and this mix walked like tnt-dense)
#   cyc         CYC packets and MTC every CTC tick (timing-dense)
# made with `vmtrace synth --host-code --guest-code --call-depth 16` (the
# Debian kernel, as the tests build it: tests/guest-image.sh,
# kernel-code.py, trim-kcore; a shallow call stack as a real kernel's -
# without it the walk's calls pile up and the calls rows measured kilobytes
# of indentation per line through the pipe, not decoding) and corrected; for each mix and mode - branches (--itrace=b), calls
# (--call-trace), instructions (--insn-trace) - both run RUNS times
# (default 1) in the same run, timed by wait4's resource usage (RUSAGE_PY
# in bench-lib.sh: milliseconds, where /usr/bin/time gives 10 ms - a cyc
# run takes 0.07 s), output counted by wc -l (the same pipe for both;
# vmtrace gives a pipe its text by vmsplice, textbuf.c, where perf
# write()s), and it prints the median wall time and CPU
# time (user + system) of each, perf/vmtrace of both (on a shared machine
# the CPU times are the repeatable ones), M instructions/s and MB of AUX
# data/s through vmtrace's CPU time, and the peak RSS of both.  PIPE-S is
# the pipe's floor: vmtrace's text (written to a file once) spliced from the
# page cache into the same kind of pipe and counted by wc -l, RUNS times
# (PIPE_FLOOR_PY in bench-lib.sh) - what moving and counting the text costs
# with no producer work; MAX-X is perf's wall time over it, the highest
# wall ratio any tool could show through this pipe (the text is ~570 MB
# per MiB of AUX for a call trace: --no-floor leaves both out, and so
# does a text file that cannot be written - "-").  The machine's load
# average is printed first.
# Goal (issue #12): >= 10x perf on every mix and mode, peak RSS flat.
#   scripts/bench-script.sh [--size 1M] [--runs N] [--dir DIR] [--keep] [--no-floor] [--mix NAME]...
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
VMTRACE=${VMTRACE:-$top/vmtrace}
TRIM_KCORE=${TRIM_KCORE:-$top/tests/trim-kcore}
PERF=${PERF:-perf}
size=1M runs=1 dir='' keep='' only='' floor=1
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--no-floor) floor=''; shift ;;
	--mix) only="$only $2"; shift 2 ;;
	*) echo "usage: $0 [--size 1M] [--runs N] [--dir DIR] [--keep] [--no-floor] [--mix NAME]..." >&2; exit 2 ;;
	esac
done
[ -x "$VMTRACE" ] || { echo "build vmtrace first" >&2; exit 1; }
[ -x "$TRIM_KCORE" ] || { echo "build $TRIM_KCORE first (make tests/trim-kcore)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "needs python3" >&2; exit 1; }
dir=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/vmtrace-bench-script.XXXXXX")}
mkdir -p "$dir"
[ -n "$keep" ] || trap 'rm -rf "$dir"' EXIT

. "$top/scripts/bench-lib.sh"
bench_code_dirs

MIXES=(
	"tnt-dense:--vcpus 2 --host-steps 2000"
	"exit-heavy:--vcpus 4 --host-steps 6"
	"cyc:--vcpus 4 --cyc --mtc-period 0"
)
MODES=("insns:--insn-trace" "b:--itrace=b" "calls:--call-trace")   # insns first: its line count is the instructions

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# measure NAME CMD...: appends "seconds maxrss_kb cpu_seconds" to NAME.times, the line count to NAME.lines
measure() {
	local out=$1; shift
	# shellcheck disable=SC2016
	python3 -c "$RUSAGE_PY" "$dir/t" sh -c '"$@" 2>/dev/null | wc -l >"$0"' "$dir/$out.lines" "$@" || {
		echo "command failed: $*" >&2; exit 1; }
	awk '{printf "%.3f %s %.3f\n", $1, $2, $3 + $4}' "$dir/t" >>"$dir/$out.times"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; AUX size $size per mix"
printf '%-11s %-6s %8s %8s %6s %8s %8s %6s %8s %7s %8s %8s %7s %6s\n' MIX MODE VT-S PERF-S RATIO VT-CPU PERF-CPU \
	RATIO M-INSN/S MB/S VT-RSS PERF-RSS PIPE-S MAX-X
for m in "${MIXES[@]}"; do
	name=${m%%:*} opts=${m#*:}
	[ -z "$only" ] || [[ " $only " == *" $name "* ]] || continue
	rec=$dir/$name-$size.data
	if [ ! -e "$rec" ]; then
		echo "generating $name ($size of real kernel code; slow: synth walks the code)" >&2
		# shellcheck disable=SC2086
		"$VMTRACE" synth -o "$rec" --size "$size" $opts --call-depth 16 --host-code "$dir/host-code" \
			--guest-code "$dir/guest-code" 2>/dev/null
		"$VMTRACE" correlate --in-place "$rec" >/dev/null
	fi
	aux=$(stat -c %s "$rec/data")
	insns=
	for mode in "${MODES[@]}"; do
		mname=${mode%%:*} mopt=${mode#*:}
		rm -f "$dir"/vt.times "$dir"/perf.times
		for _ in $(seq "$runs"); do
			# shellcheck disable=SC2086
			measure vt "$VMTRACE" script "$rec" $G $mopt
			# shellcheck disable=SC2086
			measure perf "$PERF" script -i "$rec" $G $mopt
		done
		[ "$mname" != insns ] || insns=$(cat "$dir/vt.lines")
		vt=$(cut -d' ' -f1 "$dir/vt.times" | median)
		pf=$(cut -d' ' -f1 "$dir/perf.times" | median)
		vc=$(cut -d' ' -f3 "$dir/vt.times" | median)
		pc=$(cut -d' ' -f3 "$dir/perf.times" | median)
		vrss=$(($(cut -d' ' -f2 "$dir/vt.times" | sort -n | tail -1) / 1024))
		prss=$(($(cut -d' ' -f2 "$dir/perf.times" | sort -n | tail -1) / 1024))
		fl=- maxx=-
		# shellcheck disable=SC2086
		if [ -n "$floor" ] && "$VMTRACE" script "$rec" $G $mopt >"$dir/text" 2>/dev/null; then
			rm -f "$dir/floor.times"
			for _ in $(seq "$runs"); do
				python3 -c "$PIPE_FLOOR_PY" "$dir/t" "$dir/text"
				cat "$dir/t" >>"$dir/floor.times"
			done
			fl=$(cut -d' ' -f1 "$dir/floor.times" | median | xargs printf '%.3f')
			maxx=$(echo "$pf / $fl" | bc -l | xargs printf '%.1fx')
		fi
		rm -f "$dir/text"
		printf '%-11s %-6s %8s %8s %5.1fx %8s %8s %5.1fx %8s %7.2f %6sMB %6sMB %7s %6s\n' "$name" "$mname" \
			"$vt" "$pf" "$(echo "$pf / $vt" | bc -l)" "$vc" "$pc" "$(echo "$pc / $vc" | bc -l)" \
			"${insns:+$(echo "$insns / $vc / 1000000" | bc -l | xargs printf '%.2f')}" \
			"$(echo "$aux / $vc / 1048576" | bc -l)" "$vrss" "$prss" "$fl" "$maxx"
	done
done
