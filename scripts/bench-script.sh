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
#   tcg-boot    not synthetic: the test guest's kernel booting under QEMU
#               TCG, recorded by vmtrace's plugin (record --source tcg
#               --kernel-only, the first TCG_LIMIT = 60 M instructions:
#               real code, real locality, one vCPU - one queue - and the
#               kernel's own code patching as TEXT_POKE records; its
#               symbols from /proc/kallsyms of a second boot, as t0121).
#               perf 6.1 ignores guest-kernel TEXT_POKE: it errs where the
#               boot patched code and skips to the next PSB each time, so
#               it decodes less than vmtrace (ERRS: perf's decode errors) -
#               little less: 41,572,853 instructions to vmtrace's
#               41,586,667 (--itrace=i0ns -F ip, session 33).
#               Needs qemu-system-x86_64, cpio and a static busybox;
#               --no-tcg leaves it out.
# made with `vmtrace synth --host-code --guest-code --call-depth 16` (the
# Debian kernel, as the tests build it: tests/guest-image.sh,
# kernel-code.py, trim-kcore; a shallow call stack as a real kernel's -
# before session 33 the walk's calls piled up without it and the calls
# rows measured kilobytes of indentation per line through the pipe, not
# decoding; since session 33 a KVM stub after Linux 6.1's __vmx_vcpu_run,
# whose vmx_vmexit returns to its caller as the real one does, so that
# perf's call stack drops the guest's frames at every exit - before it,
# exits left them there for good and exit-heavy 4 MiB printed 1.3 KB a
# call-trace line) and corrected; for each mix and mode - branches (--itrace=b), calls
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
# Sizes (--size, a comma-separated list, default 1M,4M): each synthetic mix
# at each, as a matrix - a 1 MiB recording weighs vmtrace's start (loading
# the images, first touches of code and of new memory: ~40 ms warm here,
# ~75 ms after an idle 2 s, extrapolated from 64 KiB and 256 KiB runs)
# against perf's; at 4 MiB the ratio is nearer what longer traces get.
# tcg-boot is one size (TCG_LIMIT), run at the first size only.
#   scripts/bench-script.sh [--size 1M,4M] [--runs N] [--dir DIR] [--keep] [--no-floor] [--no-tcg] [--mix NAME]...
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
VMTRACE=${VMTRACE:-$top/vmtrace}
TRIM_KCORE=${TRIM_KCORE:-$top/tests/trim-kcore}
PERF=${PERF:-perf}
sizes=1M,4M runs=1 dir='' keep='' only='' floor=1 tcg=1
while [ $# -gt 0 ]; do
	case $1 in
	--size) sizes=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--no-floor) floor=''; shift ;;
	--no-tcg) tcg=''; shift ;;
	--mix) only="$only $2"; shift 2 ;;
	*) echo "usage: $0 [--size 1M,4M] [--runs N] [--dir DIR] [--keep] [--no-floor] [--no-tcg] [--mix NAME]..." >&2; exit 2 ;;
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
[ -z "$tcg" ] || MIXES+=("tcg-boot:")
TCG_LIMIT=${TCG_LIMIT:-60000000}

# tcg_boot REC: the real boot recorded into REC (see above); FALSE (and why
# on stderr) where it cannot be made here.
tcg_boot() {
	local rec=$1 t=$dir/tcg bb
	command -v qemu-system-x86_64 >/dev/null || { echo "tcg-boot: no qemu-system-x86_64" >&2; return 1; }
	command -v cpio >/dev/null || { echo "tcg-boot: no cpio" >&2; return 1; }
	bb=$(command -v busybox) || { echo "tcg-boot: no busybox (busybox-static)" >&2; return 1; }
	file -L "$bb" 2>/dev/null | grep -q 'statically linked' ||
		{ echo "tcg-boot: $bb is not static (busybox-static)" >&2; return 1; }
	[ -x "${VMTRACE_TCG_PLUGIN:-$top/vmtrace-tcg.so}" ] || [ -x "$top/vmtrace-tcg.so" ] ||
		{ echo "tcg-boot: build vmtrace-tcg.so first (make)" >&2; return 1; }
	[ -e "$dir/kernel/vmlinux" ] || sh "$top/tests/guest-image.sh" --vmlinux "$dir/kernel" >"$dir/kernel.log" 2>&1 ||
		{ echo "tcg-boot: no guest kernel: $(tail -1 "$dir/kernel.log")" >&2; return 1; }
	rm -rf "$t" && mkdir -p "$t/root/bin" "$t/root/proc" "$t/root/dev" "$t/bad"
	cp "$bb" "$t/root/bin/busybox"
	printf '#!/bin/busybox sh\n/bin/busybox mount -t proc proc /proc\n/bin/busybox mount -t devtmpfs dev /dev\n/bin/busybox cat /proc/kallsyms >/dev/ttyS1\n/bin/busybox poweroff -f\n' \
		>"$t/root/init"
	echo "not an executable" >"$t/bad/init"
	chmod 755 "$t/root/init" "$t/bad/init"
	(cd "$t/root" && find . | cpio -o -H newc 2>/dev/null) >"$t/kallsyms.cpio"
	(cd "$t/bad" && find . | cpio -o -H newc 2>/dev/null) >"$t/bad.cpio"
	local append="console=ttyS0 panic=-1 quiet no_timer_check mitigations=off cryptomgr.notests rodata=off"
	append="$append initcall_blacklist=blake2s_mod_init,trace_eval_init"
	local qemu=(qemu-system-x86_64 -accel tcg -m 256 -smp 1 -nodefaults -no-user-config -display none -no-reboot)
	timeout 600 "${qemu[@]}" -serial "file:$t/ks.console" -serial "file:$t/kallsyms.raw" -kernel "$dir/kernel/vmlinux" \
		-initrd "$t/kallsyms.cpio" -append "$append" || { echo "tcg-boot: the kallsyms boot failed" >&2; return 1; }
	VMTRACE_TCG_PLUGIN=${VMTRACE_TCG_PLUGIN:-$top/vmtrace-tcg.so} timeout 600 "$VMTRACE" record --source tcg \
		--kernel-only --tcg-limit "$TCG_LIMIT" -o "$rec" -- "${qemu[@]}" -serial "file:$t/console" \
		-kernel "$dir/kernel/vmlinux" -initrd "$t/bad.cpio" -append "$append" >/dev/null 2>"$t/rec.err" ||
		{ echo "tcg-boot: record failed: $(tail -1 "$t/rec.err")" >&2; return 1; }
	tr -d '\r' <"$t/kallsyms.raw" >"$rec/guest/kallsyms"   # (kcore_dir/kallsyms: the same file)
	[ -s "$rec/guest/kallsyms" ] || { echo "tcg-boot: the kallsyms boot wrote no /proc/kallsyms" >&2; return 1; }
}
MODES=("insns:--insn-trace" "b:--itrace=b" "calls:--call-trace")   # insns first: its line count is the instructions

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# measure NAME CMD...: appends "seconds maxrss_kb cpu_seconds" to NAME.times, the line count to NAME.lines
measure() {
	local out=$1; shift
	# shellcheck disable=SC2016
	python3 -c "$RUSAGE_PY" "$dir/t" sh -c '"$@" 2>"$0.err" | wc -l >"$0"' "$dir/$out.lines" "$@" || {
		echo "command failed: $*" >&2; exit 1; }
	awk '{printf "%.3f %s %.3f\n", $1, $2, $3 + $4}' "$dir/t" >>"$dir/$out.times"
}
IFS=, read -r -a SIZES <<<"$sizes"
[ ${#SIZES[@]} -gt 0 ] || { echo "--size: no size given (e.g. 1M,4M)" >&2; exit 2; }
for size in "${SIZES[@]}"; do
	[[ "$size" =~ ^[0-9]+[KMG]?$ ]] || { echo "--size: not a size list: $sizes (e.g. 1M,4M)" >&2; exit 2; }
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; AUX sizes ${SIZES[*]} per mix"
printf '%-11s %-5s %-6s %8s %8s %6s %8s %8s %6s %8s %7s %8s %8s %7s %6s %s\n' MIX SIZE MODE VT-S PERF-S RATIO VT-CPU \
	PERF-CPU RATIO M-INSN/S MB/S VT-RSS PERF-RSS PIPE-S MAX-X ERRS
for size in "${SIZES[@]}"; do   # (the loops over mixes and modes inside keep their indentation)
for m in "${MIXES[@]}"; do
	name=${m%%:*} opts=${m#*:}
	[ -z "$only" ] || [[ " $only " == *" $name "* ]] || continue
	rec=$dir/$name-$size.data
	g=$G
	if [ "$name" = tcg-boot ]; then
		[ "$size" = "${SIZES[0]}" ] || continue   # (one size: TCG_LIMIT)
		rec=$dir/tcg-boot.data
		if [ ! -e "$rec/data" ] && ! tcg_boot "$rec"; then
			echo "tcg-boot: left out" >&2
			continue
		fi
		g="--guestkallsyms $rec/guest/kallsyms"
	elif [ ! -e "$rec" ]; then
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
			measure vt "$VMTRACE" script "$rec" $g $mopt
			# shellcheck disable=SC2086
			measure perf "$PERF" script -i "$rec" $g $mopt
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
		if [ -n "$floor" ] && "$VMTRACE" script "$rec" $g $mopt >"$dir/text" 2>/dev/null; then
			rm -f "$dir/floor.times"
			for _ in $(seq "$runs"); do
				python3 -c "$PIPE_FLOOR_PY" "$dir/t" "$dir/text"
				cat "$dir/t" >>"$dir/floor.times"
			done
			fl=$(cut -d' ' -f1 "$dir/floor.times" | median | xargs printf '%.3f')
			maxx=$(echo "$pf / $fl" | bc -l | xargs printf '%.1fx')
		fi
		rm -f "$dir/text"
		# decode errors (the last run's): vmtrace's / perf's
		ve=$(sed -n 's/.*: \([0-9]*\) decode errors.*/\1/p' "$dir/vt.lines.err" | tail -1)
		pe=$(sed -n 's/^ *\([0-9]*\) instruction trace errors.*/\1/p' "$dir/perf.lines.err" | tail -1)
		rsize=$size
		[ "$name" != tcg-boot ] || rsize=-
		printf '%-11s %-5s %-6s %8s %8s %5.1fx %8s %8s %5.1fx %8s %7.2f %6sMB %6sMB %7s %6s %s\n' "$name" "$rsize" "$mname" \
			"$vt" "$pf" "$(echo "$pf / $vt" | bc -l)" "$vc" "$pc" "$(echo "$pc / $vc" | bc -l)" \
			"${insns:+$(echo "$insns / $vc / 1000000" | bc -l | xargs printf '%.2f')}" \
			"$(echo "$aux / $vc / 1048576" | bc -l)" "$vrss" "$prss" "$fl" "$maxx" "${ve:-0}/${pe:-0}"
	done
done
done
