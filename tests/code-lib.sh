# tests/code-lib.sh - real kernel code for the decoding tests (sourced after
# lib.sh).  make_code_dirs sets HOST_CODE and GUEST_CODE: kcore_dir-style
# directories (kcore, kallsyms, modules) with the Debian kernel's code
# relocated twice (host at +0xe00000 plus a 16-byte stand-in for KVM's
# run loop and VM-entry code, guest at +0x2000000: the two kernels overlap, so a decoder
# that walks guest code with the host's image fails), built with
# tests/guest-image.sh --vmlinux (the kernel package, cached),
# tests/kernel-code.py (symbols from the kernel's own kallsyms tables) and
# tests/trim-kcore (guestfs's trimmed-kcore writer).  Skips when the kernel
# package cannot be had.
TRIM_KCORE=${TRIM_KCORE:-$(dirname "$VMTRACE")/tests/trim-kcore}

# code_vs_perf: the setup of a test that compares vmtrace script with perf
# script on real-code recordings - perf and python3 (else skip), the code
# directories (make_code_dirs), G the guest image option both take
code_vs_perf() {
	need_perf
	need_python
	make_code_dirs
	G="--guestkallsyms $GUEST_CODE/kallsyms"
}

make_code_dirs() {
	[ -x "$TRIM_KCORE" ] || skip "$TRIM_KCORE not built (make check builds it)"
	sh "$top_srcdir/tests/guest-image.sh" --vmlinux "$TMP/kernel" >"$TMP/kernel.log" 2>&1 ||
		skip "no Debian kernel package: $(tail -1 "$TMP/kernel.log")"
	# built once per kernel, kernel-code.py and trim-kcore in the build
	# tree's tests/code-cache (14 tests, twice in CI, each spent 3 s of CPU
	# on it); each test gets its own copy
	cc_dir=$(dirname "$VMTRACE")/tests/code-cache/$(cat "$TMP/kernel/vmlinux" "$top_srcdir/tests/kernel-code.py" \
		"$TRIM_KCORE" | cksum | tr ' ' -)
	code_cached "$cc_dir/main" "$TMP/kernel/vmlinux" || { echo "cannot build the code directories"; exit 1; }
	HOST_CODE=$TMP/host-code GUEST_CODE=$TMP/guest-code
	cp -r "$cc_dir/main/host-code" "$HOST_CODE" && cp -r "$cc_dir/main/guest-code" "$GUEST_CODE" || exit 1
	# make_code_dirs --alt: also GUEST_CODE2, the guest kernel at another
	# load address (+0x3400000)
	if [ "${1:-}" = --alt ]; then
		code_cached "$cc_dir/alt" "$TMP/kernel/vmlinux" --alt || { echo "cannot build the second guest directory"; exit 1; }
		GUEST_CODE2=$TMP/guest-code2
		cp -r "$cc_dir/alt/guest-code2" "$GUEST_CODE2" || exit 1
	fi
	# make_code_dirs --alt --vmlinux: also VMLINUX, the kernel as a vmlinux
	# with symbols at its link address (kernel-code.py --vmlinux; the code
	# directories' kernels are it relocated), and VMLINUX_GUEST, the same
	# linked where GUEST_CODE's runs (+0x2000000), read in place
	if [ "${2:-}" = --vmlinux ]; then
		code_cached "$cc_dir/vmlinux" "$TMP/kernel/vmlinux" --vmlinux || { echo "cannot build the vmlinux"; exit 1; }
		VMLINUX=$cc_dir/vmlinux/vmlinux VMLINUX_GUEST=$cc_dir/vmlinux/vmlinux.guest
		# and GUEST_INIT: the guest kernel with its init code (kernel-code.py
		# --init; untrimmed: guest fetch would cut the init code away)
		code_cached "$cc_dir/init" "$TMP/kernel/vmlinux" --init || { echo "cannot build the init code directory"; exit 1; }
		GUEST_INIT=$TMP/guest-init
		cp -r "$cc_dir/init/guest-init" "$GUEST_INIT" || exit 1
	fi
	rm -f "$TMP/kernel/vmlinux"
}

# make_k2_dirs (after make_code_dirs): HOST_CODE_K2 and GUEST_CODE_K2, the
# same directories of a second kernel - Debian 12's 6.12 (guest-image.sh
# --vmlinux2), another version's code at the same slides (host +0xe00000
# with the KVM stand-in, guest +0x2000000).  Skips when it cannot be had.
make_k2_dirs() {
	sh "$top_srcdir/tests/guest-image.sh" --vmlinux2 "$TMP/kernel2" >"$TMP/kernel2.log" 2>&1 ||
		skip "no second Debian kernel package (6.12): $(tail -1 "$TMP/kernel2.log")"
	k2_dir=$(dirname "$VMTRACE")/tests/code-cache/$(cat "$TMP/kernel2/vmlinux" "$top_srcdir/tests/kernel-code.py" \
		"$TRIM_KCORE" | cksum | tr ' ' -)
	code_cached "$k2_dir/main" "$TMP/kernel2/vmlinux" || { echo "cannot build the second kernel's directories"; exit 1; }
	HOST_CODE_K2=$TMP/host-code-k2 GUEST_CODE_K2=$TMP/guest-code-k2
	cp -r "$k2_dir/main/host-code" "$HOST_CODE_K2" && cp -r "$k2_dir/main/guest-code" "$GUEST_CODE_K2" || exit 1
	rm -f "$TMP/kernel2/vmlinux"
}

# code_cached DIR VMLINUX [--alt|--vmlinux|--init]: DIR holds host-code and
# guest-code (with --alt guest-code2, with --vmlinux the vmlinux, with
# --init guest-init) unless it exists already; built aside and renamed into
# place, so tests running at once never see half of it.
code_cached() {
	[ -d "$1" ] && return 0
	mkdir -p "$(dirname "$1")"
	cc_w=$(mktemp -d "$1.tmp.XXXXXX") || return 1
	if [ "${3:-}" = --vmlinux ]; then
		"$PYTHON3" "$top_srcdir/tests/kernel-code.py" --vmlinux "$2" "$cc_w/vmlinux" &&
			"$PYTHON3" "$top_srcdir/tests/kernel-code.py" --vmlinux "$2" "$cc_w/vmlinux.guest" 0x2000000
	elif [ "${3:-}" = --init ]; then
		mkdir "$cc_w/guest-init" &&
			"$PYTHON3" "$top_srcdir/tests/kernel-code.py" "$2" 0x2000000 "$cc_w/guest-init" --init &&
			mv "$cc_w/guest-init/full.core" "$cc_w/guest-init/kcore" && chmod 600 "$cc_w/guest-init/kcore"
	elif [ "${3:-}" = --alt ]; then
		mkdir "$cc_w/guest-code2" &&
			"$PYTHON3" "$top_srcdir/tests/kernel-code.py" "$2" 0x3400000 "$cc_w/guest-code2" &&
			"$TRIM_KCORE" "$cc_w/guest-code2"
	else
		mkdir "$cc_w/host-code" "$cc_w/guest-code" &&
			"$PYTHON3" "$top_srcdir/tests/kernel-code.py" "$2" 0xe00000 "$cc_w/host-code" --kvm-stub &&
			"$PYTHON3" "$top_srcdir/tests/kernel-code.py" "$2" 0x2000000 "$cc_w/guest-code" &&
			"$TRIM_KCORE" "$cc_w/host-code" && "$TRIM_KCORE" "$cc_w/guest-code"
	fi || { rm -rf "$cc_w"; return 1; }
	mv -T "$cc_w" "$1" 2>/dev/null || rm -rf "$cc_w"     # another test was first: its copy is the same
	[ -d "$1" ]
}

# code_recording NAME SIZE OPTS...: $TMP/NAME.data, a synth recording of the
# real code of make_code_dirs (ground truth in $TMP/NAME.branches), corrected
# by vmtrace correlate unless timeless (perf needs host time too).  Fails
# (a check) and returns 1 when either step does.
code_recording() {
	cr_name=$1 cr_size=$2
	shift 2
	"$VMTRACE" synth -o "$TMP/$cr_name.data" --size "$cr_size" --host-code "$HOST_CODE" --guest-code "$GUEST_CODE" \
		--branches "$TMP/$cr_name.branches" "$@" 2>/dev/null || { fail "$cr_name: synth"; return 1; }
	case " $* " in
	*" --timeless "*) ;;
	*) "$VMTRACE" correlate --in-place "$TMP/$cr_name.data" >/dev/null 2>&1 ||
		{ fail "$cr_name: vmtrace correlate"; return 1; } ;;
	esac
}

# row_recording NAME SIZE GUESTCODE OPTS...: $TMP/NAME.data of real code
# (the guest's from GUESTCODE) as the decoder comparisons make it (t0105,
# t0149): corrected unless timeless, a VMCS left unresolved no matter
# (both sides read the same file)
row_recording() {
	rr_name=$1 rr_size=$2 rr_gc=$3
	shift 3
	"$VMTRACE" synth -o "$TMP/$rr_name.data" --size "$rr_size" --host-code "$HOST_CODE" --guest-code "$rr_gc" \
		"$@" 2>/dev/null || { fail "$rr_name: synth"; return 1; }
	case " $* " in
	*" --timeless "*) ;;
	*) "$VMTRACE" correlate --in-place "$TMP/$rr_name.data" >/dev/null 2>&1 ;;
	esac
	return 0
}

# same_in_windows: the decoder comparisons' row of 4 KiB windows (t0105,
# t0149): a fresh decoder at every seam, warmed up on the segment before -
# the test's own `same NAME REC ARGS...` on a recording made for it
same_in_windows() {
	code_recording win 128K --vcpus 2 --seed 11 || return 0
	VMTRACE_DECODE_WINDOW=4096
	export VMTRACE_DECODE_WINDOW
	same "4 KiB windows" "$TMP/win.data" --guestkallsyms "$GUEST_CODE/kallsyms"
	unset VMTRACE_DECODE_WINDOW
}

# config_recording NAME SIZE OPTS...: $TMP/NAME.data as code_recording
# makes it, but for names raw-*: straight from synth, guest time not
# corrected (times that go back)
config_recording() {
	case $1 in
	raw-*) crn=$1 crs=$2
	       shift 2
	       "$VMTRACE" synth -o "$TMP/$crn.data" --size "$crs" --host-code "$HOST_CODE" --guest-code "$GUEST_CODE" \
		       "$@" >/dev/null 2>&1 || { fail "$crn: synth"; return 1; } ;;
	*)     code_recording "$@" ;;
	esac
}

# peak_rss CMD ARGS...: CMD's peak RSS in KiB, its output dropped (-1 if
# it crashed: an exit status but 0 and 3, decode errors)
peak_rss() {
	"$PYTHON3" - "$@" <<'PY'
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if p.returncode in (0, 3) else -1)
PY
}

# need_user_standin OUT: the prerequisites of the guest-user-space tests
# (2 CPUs, a C compiler) and a real system-wide perf record of CPUs 0-1 in
# OUT, the stand-in for the guest's own perf.data; skips without them.
need_user_standin() {
	[ "$(nproc)" -ge 2 ] || skip "needs 2 CPUs for a 2-vCPU stand-in guest file"
	command -v "${CC:-cc}" >/dev/null 2>&1 || skip "no C compiler"
	"$PERF" record -q -N -e cpu-clock -F 2000 -a -C 0-1 --sample-identifier --switch-events -o "$1" -- \
		sh -c 'sleep 0.01' >/dev/null 2>&1 ||
		skip "perf record -a does not work here (perf_event_paranoid? not root?)"
}

# guest_data_dir NAME SIDEBAND [kernel-build-id]: $TMP/NAME, a guest's
# perf.data directory for vmtrace inject: $TMP/g0.data (need_user_standin's
# stand-in) with synth's time conversion, the records of the perf-edit.py
# sideband file SIDEBAND at guest time 0x100000000000 + $OFF, the guest
# kernel's MMAP (_text of $GUEST_CODE) and $GUEST_CODE as its kcore_dir.
# Its build id table is emptied - perf record writes the kernel's entry
# only when a sample hit the kernel, and the entry decides how perf names
# the guest kernel (t0102 failed in CI when none did) - or, with
# kernel-build-id, has only a "[kernel.kallsyms]" entry, as a guest's perf
# record with kernel samples writes it.  Exits when it cannot be built.
guest_data_dir() {
	gd_text=0x$(awk '$3 == "_text" {print $1; exit}' "$GUEST_CODE/kallsyms")
	mkdir -p "$TMP/$1" &&
		"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/g0.data" "$TMP/$1.1" time-conv 10 341 0 1 &&
		"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/$1.1" "$TMP/$1.2" sideband "$2" \
			$((0x100000000000 + OFF)) &&
		"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/$1.2" "$TMP/$1.3" kernel-mmap "$gd_text" 0x7cffffff &&
		"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/$1.3" "$TMP/$1/data" no-build-ids &&
		cp -r "$GUEST_CODE" "$TMP/$1/kcore_dir" || { echo "cannot build the guest directory"; exit 1; }
	[ "${3:-}" = kernel-build-id ] || return 0
	mv "$TMP/$1/data" "$TMP/$1.4" &&
		"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$TMP/$1.4" "$TMP/$1/data" build-id 1 -1 \
			00112233445566778899aabbccddeeff00112233 "[kernel.kallsyms]" ||
		{ echo "cannot give the guest directory a build id"; exit 1; }
}

# time_decode NAME [GUESTDIR]: time_check's inputs - vmtrace script
# --itrace=b --json ($TMP/NAME.json) and perf script's --ns lines
# ($TMP/NAME.perf) of $TMP/NAME.data with GUESTDIR's guest kernel
# (default $GUEST_CODE), each checked for exit 0.
time_decode() {
	td_g=${2:-$GUEST_CODE}/kallsyms
	"$VMTRACE" script "$TMP/$1.data" --guestkallsyms "$td_g" --itrace=b --json >"$TMP/$1.json" 2>"$TMP/$1.err"
	check "$1: vmtrace script --itrace=b --json (for its times) exit 0" test $? -eq 0
	timeout 300 "$PERF" script -i "$TMP/$1.data" --guestkallsyms "$td_g" --itrace=be --ns -F tid,cpu,time,ip,addr \
		>"$TMP/$1.perf" 2>"$TMP/$1.perf.err"
	check "$1: perf script --ns (for its times) exit 0" test $? -eq 0
}

# time_rows: for each line "NAME OPTS..." of stdin, code_recording NAME
# 128K OPTS, decoded (time_decode) and its times checked (time_check)
time_rows() {
	while read -r tr_name tr_opts; do
		[ -n "$tr_name" ] || continue
		# shellcheck disable=SC2086
		code_recording "$tr_name" 128K $tr_opts || continue
		time_decode "$tr_name"
		time_check "$tr_name" "$tr_opts"
	done
}

# time_check NAME OPTS: tests/time-check.py on NAME's ground truth, vmtrace's
# JSON and perf's lines ($TMP/NAME.{branches,json,perf}; OPTS are synth's,
# --per-cpu among them compares per CPU): time never goes back, stays
# within 800 ticks of the truth and is perf's, to the nanosecond (since
# session 26; with CYC and changing core:bus ratios, --cbr-vary, or a CYC
# threshold, --cyc-thresh, within 800 ticks of perf's: libipt and perf
# estimate time from cycles their own ways).
time_check() {
	tc_pc= tc_perf=0 tc_what="equal to perf's"
	case $2 in *--per-cpu*) tc_pc=--per-cpu ;; esac
	case $2 in *--cbr-vary* | *--cyc-thresh*) tc_perf=800 tc_what="within 800 ticks of perf's" ;; esac
	"$PYTHON3" "$top_srcdir/tests/time-check.py" "$TMP/$1.branches" "$TMP/$1.json" "$TMP/$1.perf" $tc_pc \
		--truth-ticks 800 --perf-ticks $tc_perf >"$TMP/$1.time" 2>&1
	check "$1: time never goes back, within 800 ticks of the truth, $tc_what" test $? -eq 0
	sed 's/^/#   /' "$TMP/$1.time"
}

# The guest user code of two processes at one address (t0083's recording;
# t0088 and t0105 build on it).  guest_user_progs: $TMP/gA and $TMP/gB,
# tests/guest-user-prog.c built static and non-PIE with -O1 and -O0 - both
# link their code at 0x401000, different instructions and symbols there.
# Returns 1 when the compiler cannot.
guest_user_progs() {
	for gu_p in "A -O1" "B -O0"; do
		# shellcheck disable=SC2086
		set -- $gu_p
		"${CC:-cc}" "$2" -static -nostdlib -no-pie -fno-pic -fno-stack-protector -o "$TMP/g$1" \
			"$top_srcdir/tests/guest-user-prog.c" || return 1
	done
}

# need_guest_user: what t0083's recording needs (perf, Python,
# need_user_standin's $TMP/g0.data) and guest_user_progs's gA and gB, or
# skip.
need_guest_user() {
	need_perf
	need_python
	need_user_standin "$TMP/g0.data"
	guest_user_progs || skip "cannot build a static program"
}

# guest_user_synth: OFF and $TMP/h.data, synth --guest-user gA --guest-user
# gB (vCPU 0 runs gA, vCPU 1 gB, each its own guest CR3, on 2 host CPUs, per
# CPU, ~2.4 ms) of make_code_dirs's code, truth in $TMP/truth, stderr in
# $TMP/synth.err; returns synth's status.
guest_user_synth() {
	OFF=0x123456789
	"$VMTRACE" synth -o "$TMP/h.data" --size 256K --seed 5 --per-cpu --vcpus 2 --cpus 2 --host-code "$HOST_CODE" \
		--guest-code "$GUEST_CODE" --offset "$OFF" --guest-user "$TMP/gA" --guest-user "$TMP/gB" \
		--branches "$TMP/truth" 2>"$TMP/synth.err"
}

# guest_user_maps: START LEN PGOFF, the programs' mapping (synth's truth),
# and BIDA BIDB, their build ids; returns 1 when the compiler wrote none.
guest_user_maps() {
	# shellcheck disable=SC2046
	set -- $(grep '^# guest-user ' "$TMP/truth" | head -1)
	START=$4 LEN=$5 PGOFF=$6
	BIDA=$(readelf -n "$TMP/gA" 2>/dev/null | awk '/Build ID/ {print $3}')
	BIDB=$(readelf -n "$TMP/gB" 2>/dev/null | awk '/Build ID/ {print $3}')
	[ -n "$BIDA" ] && [ -n "$BIDB" ]
}

# guest_user_fork_sideband FILE: t0083's guest sideband (perf-edit.py
# sideband; MMAP2s with the files' build ids, as perf record --buildid-mmap
# writes them: how perf 6.1 finds guest user files): process gA (500) on
# vCPU 0, gB (600) on vCPU 1, each with its own MMAP2 of its file at the
# same address; at 0.2 ms each forks a child (502, 601) that inherits the
# mapping and runs on the vCPU from 1 ms on.
guest_user_fork_sideband() {
	cat >"$1" <<SB
-3000000 0 comm 500 500 gA
-2950000 0 mmap2 500 500 $START $LEN $PGOFF /opt/gbin/gA $BIDA
-2900000 1 comm 600 600 gB
-2850000 1 mmap2 600 600 $START $LEN $PGOFF /opt/gbin/gB $BIDB
-2000000 0 in 500 500 0 0
-2000000 1 in 600 600 0 0
600000 0 fork 502 500 502 500
600000 1 fork 601 600 601 600
3000000 0 out 500 500 502 502
3000000 0 in 502 502 500 500
3000000 1 out 600 600 601 601
3000000 1 in 601 601 600 600
SB
}

# guest_user_inject: $TMP/i.data, $TMP/h.data with its guest TSC packets
# turned to host time first (vmtrace correlate, as perf inject
# --vm-time-correlation: perf's decoder has no other way to the host time
# of guest code, and so none to the guest switch that a branch follows) and
# the guest directory $TMP/g injected (vmtrace inject; output in
# $TMP/correlate.out and $TMP/inject.out); the programs in the guest mount
# $TMP/gm (machine 4000's /opt/gbin) and an empty $TMP/empty for HOME.
# Returns 1 when a step fails.
guest_user_inject() {
	"$VMTRACE" correlate "$TMP/h.data" -o "$TMP/hc.data" >"$TMP/correlate.out" 2>&1 &&
		"$VMTRACE" inject "$TMP/hc.data" --guest-data "$TMP/g" -o "$TMP/i.data" --offset "$OFF" \
			>"$TMP/inject.out" 2>&1 &&
		mkdir -p "$TMP/gm/4000/opt/gbin" "$TMP/empty" && cp "$TMP/gA" "$TMP/gB" "$TMP/gm/4000/opt/gbin/"
}

# report_truth NAME: vmtrace script --json and vmtrace report --json --top
# 1000000 of $TMP/NAME.data with the guest kernel's symbols ($TMP/NAME.script,
# $TMP/NAME.report; each checked for exit 0), and the report checked against
# synth's ground truth $TMP/NAME.branches by tests/report-truth.py (its
# output in $TMP/NAME.cmp).
report_truth() {
	rt_g="--guestkallsyms $GUEST_CODE/kallsyms"
	# shellcheck disable=SC2086
	"$VMTRACE" script "$TMP/$1.data" $rt_g --json >"$TMP/$1.script" 2>"$TMP/$1.script.err"
	check "$1: vmtrace script --json exit 0" test $? -eq 0
	# shellcheck disable=SC2086
	"$VMTRACE" report "$TMP/$1.data" $rt_g --json --top 1000000 >"$TMP/$1.report" 2>"$TMP/$1.report.err"
	check "$1: vmtrace report --json exit 0" test $? -eq 0 || sed 's/^/#   /' "$TMP/$1.report.err"
	"$PYTHON3" "$top_srcdir/tests/report-truth.py" "$TMP/$1.branches" "$HOST_CODE/kallsyms" \
		"$GUEST_CODE/kallsyms" "$TMP/$1.script" "$TMP/$1.report" >"$TMP/$1.cmp" 2>&1
	ck_rc=$?
	check "$1: report = ground truth ($(head -1 "$TMP/$1.cmp"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/$1.cmp" | cut -c1-300
}

# same_text NAME ENV-A ENV-B WHAT SCRIPT-ARGS...: vmtrace script prints the
# same text on stdout and on stderr (VMTRACE_RANGES_STATS's lines aside) and
# exits the same (st_r1, st_r2) with the environment ENV-A as with ENV-B
# (each a word list for env; the output in $TMP/NAME.a and NAME.b, stderr
# in NAME.a.err and NAME.b.err), and prints some; WHAT ends the check's
# name; the first lines that differ on failure - t0048, t0097, t0145
same_text() {
	st_name=$1 st_a=$2 st_b=$3 st_what=$4
	shift 4
	# shellcheck disable=SC2086
	env $st_a "$VMTRACE" script "$@" >"$TMP/$st_name.a" 2>"$TMP/$st_name.a.err"
	st_r1=$?
	# shellcheck disable=SC2086
	env $st_b "$VMTRACE" script "$@" >"$TMP/$st_name.b" 2>"$TMP/$st_name.b.err"
	st_r2=$?
	for st_e in a b; do
		grep -v '^vmtrace script: \([0-9]* \(ranges decoded\|jobs formatted\) apart\|plain jumps \|query decoder: \)' \
			"$TMP/$st_name.$st_e.err" >"$TMP/$st_name.$st_e.err2"
	done
	check "$st_name: $(wc -l <"$TMP/$st_name.a") lines, exit $st_r1, $st_what" \
		sh -c "test $st_r1 -eq $st_r2 && test -s '$TMP/$st_name.a' && cmp -s '$TMP/$st_name.a' '$TMP/$st_name.b' &&
		       cmp -s '$TMP/$st_name.a.err2' '$TMP/$st_name.b.err2'" ||
		diff "$TMP/$st_name.a" "$TMP/$st_name.b" | head -10 | sed 's/^/#   /'
	cmp -s "$TMP/$st_name.a.err2" "$TMP/$st_name.b.err2" ||
		diff "$TMP/$st_name.a.err2" "$TMP/$st_name.b.err2" | head -6 | sed 's/^/#   stderr: /'
}

# threads_vs_serial NAME REC SCRIPT-ARGS...: vmtrace script prints the same
# text and exit status with its lines printed in the decoding threads as
# with VMTRACE_SCRIPT_SERIAL=1 (all in the main thread) - t0107
threads_vs_serial() {
	tv_name=$1 tv_rec=$2
	shift 2
	"$VMTRACE" script "$tv_rec" "$@" >"$TMP/threads.out" 2>&1
	tv_r1=$?
	VMTRACE_SCRIPT_SERIAL=1 "$VMTRACE" script "$tv_rec" "$@" >"$TMP/serial.out" 2>&1
	tv_r2=$?
	check "$tv_name: the same text and exit ($tv_r1) as printed in the main thread ($(wc -l <"$TMP/serial.out") lines)" \
		sh -c "test $tv_r1 -eq $tv_r2 -a -s '$TMP/serial.out' && cmp -s '$TMP/threads.out' '$TMP/serial.out'"
}
