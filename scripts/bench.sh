#!/bin/bash
# Benchmark (not a test): vmtrace vs perf over a matrix of packet mixes.
# For each mix, generates a trace of SIZE (default 256M) with `vmtrace synth`
# and runs, alternately, RUNS times each (default 3), timing each run with
# wait4's resource usage (microseconds; the kernel's user/system split
# comes from 4 ms ticks, scaled to the exact CPU time, so it is an
# estimate that sums well over runs - better than /usr/bin/time's 10 ms):
#   dry run:    vmtrace correlate --dry-run   vs  perf inject --vm-time-correlation=dry-run
#   correction: vmtrace correlate --in-place  vs  perf inject --vm-time-correlation=<offsets> --force
#               (vmtrace discovers and rewrites in one step, crash-safely; perf is
#               given the offsets, and rewrites in place without a journal or fsync)
# and prints per mix: the median wall time of each, the trace's MB/s through
# vmtrace, the perf/vmtrace ratio, the dry run's median user and system CPU
# time and system time as a share of user time (summed over the runs), its
# median minor page faults (mapping the AUX data; how many depends on the
# page cache's folio sizes, so on how the file was written), peak
# RSS of both, the correction's time in fsync (strace, reported separately:
# bounded by the disk), and whether vmtrace's offsets are perf's.
# Goals (issue #10): dry run >= 10x perf and correction (without fsync) >= 5x
# on every mix; vmtrace's peak RSS <= 64 MiB on every mix; the dry run's
# system time < 10% of its user time.
# VMTRACE_AUX_PREAD=1 in the environment makes correlate read its AUX data
# with pread instead of mapping it (run both to compare; vmtrace(1)).
#   scripts/bench.sh [--size 256M] [--runs 3] [--dir DIR] [--keep] [--mix NAME]...
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/bench-lib.sh"   # RUSAGE_PY
VMTRACE=${VMTRACE:-$top/vmtrace}
PERF=${PERF:-perf}
size=256M runs=3 dir= keep= only=
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--mix) only="$only $2"; shift 2 ;;
	*) echo "usage: $0 [--size 256M] [--runs N] [--dir DIR] [--keep] [--mix NAME]..." >&2; exit 2 ;;
	esac
done
[ -x "$VMTRACE" ] || { echo "build vmtrace first (scripts/setup-and-demo.sh --no-demo)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "needs python3 (apt-get install python3)" >&2; exit 1; }
have_strace=; command -v strace >/dev/null && have_strace=1
dir=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/vmtrace-bench.XXXXXX")}
mkdir -p "$dir"
[ -n "$keep" ] || trap 'rm -rf "$dir"' EXIT

# The matrix: NAME:SYNTH OPTIONS.  They differ in what real recordings differ
# in: TNT/TIP density, MTC period, CYC, VM-exit rate, exits to user space
# (TIP.PGD/PGE), per-thread or per-CPU, vCPU count, buffer size.
MIXES=(
	"default:--vcpus 4"
	"idle-pgd:--vcpus 4 --user-exit-percent 60 --host-steps 30 --mtc-period 2"
	"percpu-cyc:--per-cpu --vcpus 6 --cyc --mtc-period 0"
	"tip-dense:--vcpus 4 --tip-percent 90"
	"exit-heavy:--vcpus 4 --host-steps 6"
	"mtc-dense:--vcpus 2 --mtc-period 0 --tip-percent 5"
	"many-vcpus:--per-cpu --vcpus 16 --cpus 2 --buffer-size 16K"
	"two-vms:--vms 2 --vcpus 8 --psb-period 0 --guest-percent 90"
)

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
maxof() { sort -n | tail -1; }
# measure NAME CMD...: appends "seconds maxrss_kb user_s sys_s minflt" to NAME.times
measure() {
	local out=$1; shift
	python3 -c "$RUSAGE_PY" "$dir/t" "$@" >"$dir/stdout" 2>"$dir/stderr" || {
		echo "command failed: $*" >&2; cat "$dir/stderr" >&2; exit 1; }
	cat "$dir/t" >>"$dir/$out.times"
}
# seconds spent in fsync/fdatasync by CMD (strace -T), on a fresh copy
fsync_time() {
	[ -n "$have_strace" ] || { echo 0; return; }
	strace -f -qq -T -e trace=fsync,fdatasync -o "$dir/strace" "$@" >/dev/null 2>&1 || true
	sed -n 's/.*<\([0-9.]*\)>$/\1/p' "$dir/strace" | awk '{s += $1} END {printf "%.3f", s}'
}
col() { cut -d' ' -f"$1" "$dir/$2.times"; }

printf '%-11s | %8s %8s %7s %8s %6s | %7s %7s %5s %6s | %8s %8s %8s %7s %7s | %8s %8s | %s\n' \
	mix vt_dry_s perf_s ratio MB/s same usr_s sys_s sys% faults vt_fix_s fsync_s perf_s ratio ratio_fs vt_rss perf_rss "packets (vmtrace synth options)"
mib=$(numfmt --from=iec "$size")
for m in "${MIXES[@]}"; do
	name=${m%%:*}; opts=${m#*:}
	if [ -n "$only" ] && ! echo " $only " | grep -q " $name "; then continue; fi
	f="$dir/$name.data"
	# shellcheck disable=SC2086
	"$VMTRACE" synth -o "$f" --size "$size" $opts 2>/dev/null
	rm -f "$dir"/*.times
	cat "$f" >/dev/null    # both tools start from a warm page cache
	for _ in $(seq "$runs"); do
		measure vt "$VMTRACE" correlate --dry-run --format=perf "$f"
		cp "$dir/stdout" "$dir/vt.out"
		measure perf timeout 600 "$PERF" inject -i "$f" --vm-time-correlation=dry-run
		grep '^VMCS' "$dir/stderr" >"$dir/perf.out" || true     # perf prints them on stderr
	done
	same=no; cmp -s "$dir/vt.out" "$dir/perf.out" && same=yes
	offs=$(awk '{print $5 ":" $2}' "$dir/vt.out" | tr '\n' ' ')
	for _ in $(seq "$runs"); do
		cp "$f" "$dir/copy.data"; sync
		measure vtfix "$VMTRACE" correlate --in-place "$dir/copy.data"
		cp "$f" "$dir/copy.data"; sync
		measure perffix timeout 600 "$PERF" inject -i "$dir/copy.data" --vm-time-correlation="$offs" --force
	done
	# fsync's time: the median of as many separate runs (one was noisy
	# enough to exceed the whole correction's median)
	fs=$(for _ in $(seq "$runs"); do
		cp "$f" "$dir/copy.data"; sync
		fsync_time "$VMTRACE" correlate --in-place "$dir/copy.data"; echo
	done | median)
	rm -f "$dir/copy.data" "$f"
	vt=$(col 1 vt | median); pf=$(col 1 perf | median)
	usr=$(col 3 vt | median); sys=$(col 4 vt | median); flt=$(col 5 vt | median)
	sysp=$(awk '{u += $3; s += $4} END {printf "%.1f", (u > 0 ? 100 * s / u : 0)}' "$dir/vt.times")
	vtfix=$(col 1 vtfix | median); pffix=$(col 1 perffix | median)
	rss=$( (col 2 vt; col 2 vtfix) | maxof); prss=$( (col 2 perf; col 2 perffix) | maxof)
	awk -v n="$name" -v a="$vt" -v b="$pf" -v s="$same" -v c="$vtfix" -v fs="$fs" -v d="$pffix" \
		-v x="$rss" -v y="$prss" -v mib="$mib" -v o="$opts" -v us="$usr" -v sy="$sys" -v sp="$sysp" -v fl="$flt" 'BEGIN {
		nofs = (c - fs > 0 ? sprintf("%6.1fx", d / (c - fs)) : "    n/a")
		printf "%-11s | %8.3f %8.2f %6.1fx %8.0f %6s | %7.3f %7.4f %4.1f%% %6d | %8.2f %8.3f %8.2f %7s %6.1fx | %4.0f MiB %4.0f MiB | %s\n",
			n, a, b, (a > 0 ? b / a : 0), (a > 0 ? mib / 1048576 / a : 0), s,
			us, sy, sp, fl, c, fs, d, nofs, (c > 0 ? d / c : 0), x / 1024, y / 1024, o }'
done
echo "(trace size $size per mix, $runs runs each, median wall time; peak RSS is the maximum over both"
echo " operations and all runs, an upper bound: it counts python's ~13 MiB at exec; $(nproc) CPUs;"
echo " ratio = perf / vmtrace, for the correction vmtrace's time"
echo " without fsync (fsync_s, measured in a separate run with strace, so it is noisy), ratio_fs with"
echo " it (perf does not sync); same = vmtrace --format=perf prints exactly perf's VMCS lines;"
echo " usr_s/sys_s = the dry run's median CPU times (all threads; wait4, microseconds, the user/system"
echo " split estimated by the kernel from 4 ms ticks: sum over more --runs for a finer sys%),"
echo " sys% = its system time as a share of its user time over all runs, faults = its median minor"
echo " page faults: synth writes in 2 MiB-aligned blocks, so its fresh files are in large folios)"
