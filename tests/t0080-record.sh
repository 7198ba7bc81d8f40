#!/bin/sh
# vmtrace record: option errors, libvirt lookups (test driver), the
# no-Intel-PT error, the intel_pt config built from a prepared sysfs tree,
# and the full pipeline on a real QEMU process with the synthetic trace
# source: real vCPU threads, real sideband (comm, context switches), real
# KVM debugfs metadata and kvm_write_tsc_offset events -> perf.data
# directory -> vmtrace correlate == perf inject -> perf script reads it.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
cd "$TMP" || exit 1

rec() { "$VMTRACE" record "$@"; }
# started FILE: wait until a background record says it is recording
started() { for _ in $(seq 300); do grep -q "Ctrl-C stops" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
code() { "$@" >"$TMP/out" 2>&1; echo $?; }

# --- usage errors: exit 2, nothing written
check "no --domain/--pid: exit 2" test "$(code rec -o u1)" = 2
check "--domain and --pid: exit 2" test "$(code rec --domain a --pid 1 -o u1)" = 2
check "--timeless --per-cpu: exit 2, says why" sh -c "[ $(code rec --pid 1 --timeless --per-cpu -o u1) = 2 ] && grep -q 'per-thread' '$TMP/out'"
check "--aux-size not a power of two: exit 2" test "$(code rec --pid 1 --aux-size 3M -o u1)" = 2
check "--mtc-period 16: exit 2" test "$(code rec --pid 1 --mtc-period 16 -o u1)" = 2
check "--snapshot=junk: exit 2" test "$(code rec --pid 1 --snapshot=junk -o u1)" = 2
check "--snapshot=1 (less than a page): exit 2" test "$(code rec --pid 1 --snapshot=1 -o u1)" = 2
check "--timeless --cyc: exit 2, says why" sh -c "[ $(code rec --pid 1 --timeless --cyc -o u1) = 2 ] && grep -q 'drop --cyc' '$TMP/out'"
check "--duration nan: exit 2" test "$(code rec --pid 1 --duration nan -o u1)" = 2
check "--pid 0: exit 2, not a process id" sh -c "[ $(code rec --pid 0 -o u1) = 2 ] && grep -q 'not a process id' '$TMP/out'"
check "--synth-size without --source synth: exit 2" test "$(code rec --pid 1 --synth-size 1M -o u1)" = 2
check "--synth-size 1K (synth's range): exit 2, names the source" sh -c "[ $(code rec --pid 1 --source synth --synth-size 1K -o u1) = 2 ] && grep -q 'source synth: --size' '$TMP/out'"
check "-o '': exit 2" test "$(code rec --pid 1 -o '')" = 2
check "-o ..: exit 2" test "$(code rec --pid 1 -o ..)" = 2
# what -o would replace must be a recording: OUT (moved to OUT.old) and OUT.old (deleted)
mkdir -p mine.old/src && echo keep >mine.old/src/file && mkdir mine
check "-o whose .old holds other files: exit 1, refused up front" sh -c "[ $(code rec --pid 1 -o mine) = 1 ] && grep -q 'refusing to delete mine.old.*mine.old/src is not part of one' '$TMP/out'"
check "... and nothing of it is touched" test -d mine -a "$(cat mine.old/src/file)" = keep
echo text >notes.txt
check "-o onto a file that is no perf.data: exit 1" sh -c "[ $(code rec --pid 1 -o notes.txt) = 1 ] && grep -q 'not a perf.data file' '$TMP/out' && test \"\$(cat notes.txt)\" = text"
ln -s "$TMP" link.data
check "-o onto a symbolic link: exit 1" test "$(code rec --pid 1 -o link.data)" = 1
rm -rf mine mine.old notes.txt link.data
check "--snapshot over 1G: exit 2 (no endless buffer sizing)" sh -c "[ \$(timeout 10 '$VMTRACE' record --pid 1 --snapshot=9223372036854775809 -o u1 >/dev/null 2>&1; echo \$?) = 2 ]"
check "--source bogus: exit 2" test "$(code rec --pid 1 --source bogus -o u1)" = 2
check "usage errors wrote nothing" test ! -e u1
# under --json every error is one JSON object on stdout, with the exit status
rec --json -o u1 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "usage error under --json: exit 2, nothing on stderr" sh -c "[ $rc = 2 ] && test ! -s '$TMP/err'"
check "... the error as a JSON object on stdout, with the exit status" json_check "$TMP/out" \
	"j == {'error': 'vmtrace record: give either --domain NAME or --pid PID (see vmtrace record --help)', 'exit_status': 2}"
rec --domain nosuch --json -o u1 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "record --domain nosuch --json: fails ($rc), nothing on stderr" sh -c "[ $rc != 0 ] && test ! -s '$TMP/err'"
check "... one JSON error object whose exit_status is the exit status ($rc)" json_check "$TMP/out" \
	"set(j) == {'error', 'exit_status'} and j['exit_status'] == $rc and j['error'].startswith('vmtrace record: ')"
echo text >"$(printf 'notes\377.txt')"
rec --pid 1 -o "$(printf 'notes\377.txt')" --json >"$TMP/out" 2>"$TMP/err"
rc=$?
check "-o onto a file named with a byte 0xff, --json: exit 1, nothing on stderr" sh -c "[ $rc = 1 ] && test ! -s '$TMP/err'"
check "... the error in strict UTF-8 JSON, the name with U+FFFD" json_check "$TMP/out" \
	"j['exit_status'] == 1 and j['error'].startswith('vmtrace record: refusing to move aside notes\\ufffd.txt, it is not a recording')"
rm -f "$(printf 'notes\377.txt')"
check "--help teaches: examples, exit codes, synthetic source" sh -c '"$VMTRACE" record --help-all | grep -q "kill -USR2" && "$VMTRACE" record --help-all | grep -q "14 this machine cannot trace" && "$VMTRACE" record --help-all | grep -q -- "--source"'

# --- libvirt lookups on the test driver (the synthetic source: the intel_pt
# one would stop first, at "no Intel PT", on machines without it)
check "unknown domain: exit 1, names it" sh -c "[ $(code rec --source synth --domain nosuch --connect test:///default -o u2) = 1 ] && grep -q \"no domain named 'nosuch'\" '$TMP/out'"
stopped_domain_xml "$TMP/node.xml"
check "inactive domain: exit 1, how to start it" sh -c "[ $(code rec --source synth --domain stopped --connect test://$TMP/node.xml -o u2) = 1 ] && grep -q 'is not running (shut off); start it' '$TMP/out'"
check "test driver domain: no QEMU process -> exit 1" test "$(code rec --source synth --domain test --connect test:///default -o u2)" = 1
check "lookup errors wrote nothing" test ! -e u2

command -v qemu-system-x86_64 >/dev/null || { echo "# no QEMU: skipping the process tests"; finish; }
[ "$(id -u)" = 0 ] || { echo "# not root: perf events on other processes need root; skipping the rest"; finish; }

# A QEMU with 2 vCPUs idling in the BIOS; KVM when usable (debugfs, tsc
# writes), else TCG.  A monitor socket lets the test reset it.
accel=tcg
if [ -w /dev/kvm ]; then
	accel=kvm
	need_debugfs
fi
tmounted=
[ -d /sys/kernel/tracing/events ] || { mount -t tracefs none /sys/kernel/tracing 2>/dev/null && tmounted=1; }
cpu=; [ $accel = kvm ] && cpu="-cpu qemu64"
# shellcheck disable=SC2086
qemu-system-x86_64 -name "vt-rec,debug-threads=on" -accel $accel $cpu -smp 2 -m 64 -nodefaults -no-user-config \
	-display none -monitor "unix:$TMP/mon,server,nowait" >"$TMP/qemu.log" 2>&1 &
qpid=$!
cleanup() {
	kill $qpid ${spid:-} 2>/dev/null; wait $qpid 2>/dev/null
	[ -n "$tmounted" ] && umount /sys/kernel/tracing 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
for _ in $(seq 100); do
	[ "$(grep -l "CPU [01]/" /proc/$qpid/task/*/comm 2>/dev/null | wc -l)" = 2 ] &&
		{ [ $accel = tcg ] || ! grep -qx 0 /sys/kernel/debug/kvm/$qpid-*/vcpu*/pid 2>/dev/null; } && break
	sleep 0.1
done
if grep -q "failed to initialize kvm\|Could not access KVM" "$TMP/qemu.log"; then
	echo "# KVM unusable: $(head -1 "$TMP/qemu.log")"; finish
fi
tids=$(for t in /proc/$qpid/task/*; do case $(cat $t/comm 2>/dev/null) in "CPU "*) echo ${t##*/};; esac; done | sort -n | paste -sd' ')
echo "# QEMU ($accel) pid $qpid, vCPU threads: $tids"
check "--pid of a vCPU thread: exit 1, names the process" \
	sh -c "[ $(code rec --source synth --pid ${tids%% *} -o u3) = 1 ] && grep -q 'is a thread of process $qpid: give the process id' '$TMP/out'"
sleep 60 & sp=$!
check "--pid of a process without vCPU threads: exit 1, how threads are found" \
	sh -c "[ $(code rec --source synth --pid $sp -o u3) = 1 ] && grep -q 'debug-threads=on' '$TMP/out'"
kill $sp

# --- no Intel PT here: a clear error, exit 14, nothing left behind
if [ ! -d /sys/bus/event_source/devices/intel_pt ]; then
	mkdir noPT && cd noPT || exit 1
	check "no intel_pt: exit 14" test "$(code rec --pid $qpid -o out)" = 14
	check "no intel_pt: says so and points at vmtrace check" grep -q "no Intel PT.*vmtrace check" "$TMP/out"
	check "no intel_pt: said before any lookup (no mapping printed)" sh -c "! grep -q 'vCPU 0 = tid' '$TMP/out'"
	check "no intel_pt: also as a user who may not open perf events" \
		sh -c "[ \$(setpriv --reuid=65534 --regid=65534 --clear-groups '$VMTRACE' record --pid $qpid -o out >'$TMP/out' 2>&1; echo \$?) = 14 ]"
	check "no intel_pt: nothing left behind" test -z "$(ls -A)"
	cd "$TMP" || exit 1
fi

# --- the intel_pt config from a prepared sysfs tree (VMTRACE_SYSROOT):
# everything but the PMU is the real machine
root=$TMP/root
pmu=$root/sys/bus/event_source/devices/intel_pt
mkdir -p "$pmu/format" "$pmu/caps" "$root/sys/kernel" "$root/sys/devices"
ln -s /proc "$root/proc"; ln -s /sys/kernel/debug "$root/sys/kernel/debug"; ln -s /sys/devices/system "$root/sys/devices/system"
echo 4242 >"$pmu/type"
for f in pt:config:0 cyc:config:1 mtc:config:9 tsc:config:10 noretcomp:config:11 branch:config:13 mtc_period:config:14-17 psb_period:config:24-27; do
	echo "${f#*:}" >"$pmu/format/${f%%:*}"
done
echo 1 >"$pmu/caps/mtc"; echo 249 >"$pmu/caps/mtc_periods"; echo 0 >"$pmu/caps/psb_cyc"
mkdir cfg && cd cfg || exit 1
VMTRACE_SYSROOT=$root rec --pid $qpid -o out --cyc >"$TMP/out" 2>&1; rc=$?
check "prepared PMU without psb_cyc: --cyc refused (exit 14)" sh -c "[ $rc = 14 ] && grep -q 'no cycle-accurate mode' '$TMP/out'"
VMTRACE_SYSROOT=$root rec --pid $qpid -o out --mtc-period 1 >"$TMP/out" 2>&1; rc=$?
check "mtc_periods 0xf9 lacks period 1: refused (exit 14)" sh -c "[ $rc = 14 ] && grep -q 'mtc-period 1: not supported' '$TMP/out'"
echo 1 >"$pmu/caps/psb_cyc"
VMTRACE_SYSROOT=$root rec --pid $qpid -o out --cyc --mtc-period 6 >"$TMP/out" 2>&1; rc=$?
check "config from format/: the kernel is asked for intel_pt/tsc=1,mtc=1,mtc_period=6,cyc=1/k" \
	sh -c "[ $rc = 1 ] && grep -q 'perf_event_open (intel_pt/tsc=1,mtc=1,mtc_period=6,cyc=1/k on thread [0-9]*)' '$TMP/out'"
VMTRACE_SYSROOT=$root rec --pid $qpid -o out --timeless >"$TMP/out" 2>&1
check "timeless: intel_pt//k without tsc and mtc" grep -q 'perf_event_open (intel_pt//k on thread' "$TMP/out"
check "failed opens left nothing behind" test -z "$(ls -A)"
cd "$TMP" || exit 1

# --- the pipeline with the synthetic source
OFF=0x00fedcba98765432
OFF7=fedcba98765432   # the 8th byte is perf's sign extension (see vmtrace-correlate(1))
rec --pid $qpid --source synth --synth-size 6M --synth-rate 4M --synth-offset $OFF -o pt.data --json >pt.json 2>pt.err
check "per-thread record: exit 0" test $? = 0
check "perf.data directory: data and vmtrace-kvm.ini" test -s pt.data/data -a -s pt.data/vmtrace-kvm.ini
check "no temporary directory left" test -z "$(ls -A | grep vmtrace-)"
check "the vCPU mapping was printed" grep -q "QEMU pid $qpid, 2 vCPUs: vCPU 0 = tid" pt.err
check "--json: the vCPU threads are this QEMU's" sh -c "$PYTHON3 -c 'import json,sys; j=json.load(open(\"pt.json\")); print(\" \".join(str(v[\"tid\"]) for v in j[\"vcpus\"]))' | grep -qx '$tids'"
check "perf reads the header, with the event's timing fields" sh -c "timeout 60 '$PERF' report -i pt.data --header-only 2>&1 | grep -q 'intel_pt/tsc=1,mtc=1,mtc_period=3/k'"
timeout 120 "$PERF" inject -i pt.data --vm-time-correlation=dry-run 2>&1 | grep "^VMCS:" >perf.out
"$VMTRACE" correlate --dry-run --format=perf pt.data >vt.out 2>vt.err
check "correlate --format=perf == perf inject dry run (VMCS lines)" sh -c "test -s perf.out && cmp -s perf.out vt.out"
check "both find the synthetic offset $OFF (7 bytes)" sh -c "[ \$(grep -c 'TSC Offset 0x[0-9a-f]*$OFF7' vt.out) = 2 ]"
timeout 120 "$PERF" script -i pt.data --show-task-events --show-switch-events --itrace=e >script.out 2>&1
for t in $tids; do
	check "perf script: COMM of vCPU thread $t from the recorder" grep -q "PERF_RECORD_COMM: CPU [01]/[A-Z]*:$qpid/$t" script.out
done
# (the recording lasts 1.5 s: an idle vCPU in the BIOS wakes on its timer 18 times a second)
check "perf script: real context switches of the vCPU threads (sideband)" sh -c "grep 'PERF_RECORD_SWITCH' script.out | grep -qE ' ($(echo $tids | tr ' ' '|')) '"
check "perf script: ITRACE_START and decoded PT (psb) events" sh -c "timeout 60 '$PERF' script -i pt.data --itrace=p 2>/dev/null | grep -q 'psb:'"
for t in $tids; do
	check "metadata: vCPU thread $t" grep -qx "tid=$t" pt.data/vmtrace-kvm.ini
done
if [ $accel = kvm ] && [ -d /sys/kernel/debug/kvm ]; then
	v0=$(cat /sys/kernel/debug/kvm/$qpid-*/vcpu0/tsc-offset)
	check "metadata: start and end tsc-offset of vCPU 0 = debugfs ($v0)" sh -c "grep -A3 '^\[vcpu0\]' pt.data/vmtrace-kvm.ini | grep -qx 'start.tsc_offset=$v0' && grep -A3 '^\[vcpu0\]' pt.data/vmtrace-kvm.ini | grep -qx 'end.tsc_offset=$v0'"
	check "correlate shows KVM's tsc-offset beside the trace's" grep -q "KVM reported" vt.err
fi

# -o whose name is not UTF-8 (a byte 0xff): the recording is there, and the
# JSON summary stays valid UTF-8 with U+FFFD for the byte
rec --pid $qpid --source synth --synth-size 1M -o "$(printf 'u8\377.data')" --json -q >u8.json 2>"$TMP/err"
check "-o with a byte 0xff: exit 0, the recording under that name" sh -c "[ $? = 0 ] && test -s \"\$(printf 'u8\\377.data')/data\""
check "-o with a byte 0xff: JSON in strict UTF-8, the name with U+FFFD" json_check u8.json \
	"j['output'] == 'u8\\ufffd.data' and j['qemu_pid'] == $qpid and len(j['vcpus']) == 2"
rm -rf "$(printf 'u8\377.data')" u8.json

# kernel and module MMAPs, as perf synthesizes them, from a prepared /proc
# (this kernel has no modules): the rest of the root is the real machine
r2=$TMP/root2
mkdir -p "$r2/proc" "$r2/sys/kernel" "$r2/sys/devices" "$r2/lib/modules/$(uname -r)"
ln -s /proc/$qpid "$r2/proc/$qpid"
for d in debug tracing; do ln -s /sys/kernel/$d "$r2/sys/kernel/$d"; done
ln -s /sys/devices/system "$r2/sys/devices/system"
printf 'ffffffff81000000 T _text\nffffffff81000000 T _stext\nffffffff81e00000 T _etext\n' >"$r2/proc/kallsyms"
printf 'kvm_intel 372736 0 - Live 0xffffffffc0c00000\nkvm 1142784 1 kvm_intel, Live 0xffffffffc0a00000\n' >"$r2/proc/modules"
echo "kernel/arch/x86/kvm/kvm-intel.ko.xz: kernel/arch/x86/kvm/kvm.ko.xz" >"$r2/lib/modules/$(uname -r)/modules.dep"
VMTRACE_SYSROOT=$r2 rec --pid $qpid --source synth --synth-size 1M -o mm.data -q
timeout 60 "$PERF" script -i mm.data --show-mmap-events --itrace=e >mm.out 2>&1
check "MMAP of the kernel text from kallsyms (_text.._etext)" grep -q "PERF_RECORD_MMAP -1/0: \[0xffffffff81000000(0xe00000) @ 0xffffffff81000000\]: x \[kernel.kallsyms\]_text" mm.out
check "MMAP of kvm_intel, named by modules.dep" grep -q "PERF_RECORD_MMAP -1/0: \[0xffffffffc0c00000(0x5b000) @ 0\]: x /lib/modules/$(uname -r)/kernel/arch/x86/kvm/kvm-intel.ko.xz" mm.out
check "MMAP of kvm (not in modules.dep: [kvm])" grep -q "\[0xffffffffc0a00000(0x117000) @ 0\]: x \[kvm\]" mm.out
check "HEADER_CPUID and the command line in the header" sh -c "timeout 60 '$PERF' report -i mm.data --header-only | grep -q 'cpuid : GenuineIntel' && timeout 60 '$PERF' report -i mm.data --header-only | grep -q 'cmdline : vmtrace record --pid'"

# --kcore: the kernel text and module area of /proc/kcore into
# DIR/kcore_dir, as perf record --kcore (a prepared kernel tree: this
# kernel has no /proc/kcore)
r3=$TMP/root3
"$PYTHON3" "$top_srcdir/tests/fake-kernel-tree.py" "$r3"
ln -s /proc/$qpid "$r3/proc/$qpid"
mkdir -p "$r3/sys/kernel" && for d in debug tracing; do ln -s /sys/kernel/$d "$r3/sys/kernel/$d"; done
ln -s /sys/devices/system/cpu "$r3/sys/devices/system/cpu"
VMTRACE_SYSROOT=$r3 rec --pid $qpid --source synth --synth-size 1M --kcore -o kc.data 2>kc.err
check "--kcore: exit 0, says how much it copied" sh -c "[ $? = 0 ] && grep -q 'copied 2.2 MiB of kernel memory to kc.data/kcore_dir' kc.err"
check "--kcore: kcore, kallsyms, modules, all 0600" test "$(stat -c '%n %a' kc.data/kcore_dir/* | sed 's#.*/##' | paste -sd,)" = "kallsyms 600,kcore 600,modules 600"
check "--kcore: kallsyms and modules as the kernel gave them" sh -c "cmp -s kc.data/kcore_dir/kallsyms '$r3/proc/kallsyms' && cmp -s kc.data/kcore_dir/modules '$r3/proc/modules'"
TEST_GUESTFS=$(dirname "$VMTRACE")/tests/test-guestfs
check "--kcore: libelf reads the copy; bytes at do_syscall_64 equal /proc/kcore's" \
	test "$("$TEST_GUESTFS" --peek kc.data/kcore_dir/kcore 0xffffffff81001000 64)" = \
	"$(od -An -tx1 -v -j $((0x10000 + 0x1000)) -N 64 "$r3/proc/kcore" | tr -d ' \n')"
check "--kcore: the direct map is not copied" test "$(stat -c %s kc.data/kcore_dir/kcore)" -lt $((0x300000))
check "--kcore: perf reads the directory" sh -c "timeout 60 '$PERF' report -i kc.data --header-only >/dev/null 2>&1"
if [ ! -e /proc/kcore ]; then
	rec --pid $qpid --source synth --synth-size 1M --kcore -o nokc.data >"$TMP/out" 2>&1
	check "--kcore without /proc/kcore: exit 1, says so, nothing written" sh -c "[ $? = 1 ] && grep -q 'kcore' '$TMP/out' && test ! -e nokc.data"
fi

# per-CPU, cyc, MTC period 0
rec --pid $qpid --source synth --synth-size 4M --synth-offset $OFF --per-cpu --cyc --mtc-period 0 -o pc.data -q
check "per-CPU --cyc record: exit 0" test $? = 0
timeout 120 "$PERF" inject -i pc.data --vm-time-correlation=dry-run 2>&1 | grep "^VMCS:" >perf.out
"$VMTRACE" correlate --dry-run --format=perf pc.data >vt.out 2>/dev/null
check "per-CPU: correlate == perf, offset $OFF" sh -c "cmp -s perf.out vt.out && grep -q 'TSC Offset 0x[0-9a-f]*$OFF7' vt.out"
timeout 120 "$PERF" script -i pc.data --itrace=p --show-switch-events >pc.out 2>&1
check "per-CPU: perf decodes it to the end (no errors)" sh -c "grep -q 'psb:' pc.out && ! grep -qi 'failed to process\|Invalid argument\|Expecting' pc.out"
check "per-CPU: CPU-wide context switches for the per-CPU buffers" grep -q "PERF_RECORD_SWITCH_CPU_WIDE" pc.out
check "per-CPU: AUXTRACE_INFO says per-CPU mmaps, cyc in the config" sh -c "timeout 60 '$PERF' report -i pc.data -D 2>/dev/null | grep -q 'Per-cpu maps *1' && timeout 60 '$PERF' report -i pc.data --header-only | grep 'intel_pt' | grep -q 'config = 0x.*'"

# timeless: correlate refuses with its exit code, perf decodes it
rec --pid $qpid --source synth --synth-size 2M --timeless -o tl.data -q
"$VMTRACE" correlate --dry-run tl.data >/dev/null 2>&1
check "timeless record: correlate exit 4 (no time information)" test $? = 4
check "timeless: perf decodes it" sh -c "timeout 60 '$PERF' script -i tl.data --itrace=p 2>/dev/null | grep -q 'psb:'"

# an existing output becomes .old; Ctrl-C stops cleanly; SIGUSR2 snapshots
rec --pid $qpid --source synth --synth-size 2M -o pt.data -q
check "existing output moved to pt.data.old" test -s pt.data.old/data -a -s pt.data/data
cp pt.data/data pt.second
rec --pid $qpid --source synth --synth-size 2M --synth-seed 7 -o pt.data/ -q
check "-o DIR/: a recording .old is replaced, trailing slash dropped" sh -c "cmp -s pt.data.old/data pt.second && test -s pt.data/data && ! cmp -s pt.data/data pt.second"
mkdir big big.tmp && cd big || exit 1
TMPDIR=$TMP/big.tmp "$VMTRACE" record --pid $qpid --source synth --synth-size 8G -o big.data >"$TMP/big.err" 2>&1 &
rp=$!
sleep 1; t0=$(date +%s%N); kill -INT $rp; wait $rp; rc=$?
check "SIGINT while the synthetic trace is generated: exit 1 within 3 s" \
	sh -c "[ $rc = 1 ] && [ $(( ($(date +%s%N) - t0) / 1000000 )) -lt 3000 ] && grep -q interrupted '$TMP/big.err'"
check "... leaving nothing behind (here or in the temporary directory)" \
	sh -c "test -z \"\$(ls -A)\" && test -z \"\$(ls -A '$TMP/big.tmp')\""
cd "$TMP" || exit 1
"$VMTRACE" record --pid $qpid --source synth --synth-size 16M --synth-rate 2M -t 60 -o int.data --json >int.json 2>int.err &
rp=$!
started int.err; sleep 0.5; t0=$(date +%s%N); kill -INT $rp; wait $rp
check "SIGINT: exit 0" test $? = 0
check "SIGINT: stops within 3 s" test $(( ($(date +%s%N) - t0) / 1000000 )) -lt 3000
check "SIGINT: a complete recording perf reads" sh -c "timeout 60 '$PERF' report -i int.data --header-only >/dev/null 2>&1 && '$VMTRACE' correlate --dry-run int.data >/dev/null 2>&1"
"$VMTRACE" record --pid $qpid --source synth --synth-size 16M --synth-rate 1M --snapshot=64K --aux-size 64K -t 60 -o snap.data --json >snap.json 2>snap.err &
rp=$!
started snap.err; sleep 0.5; kill -USR2 $rp; sleep 0.7; kill -USR2 $rp; sleep 0.7; kill -TERM $rp; wait $rp
check "snapshot mode: SIGTERM exit 0" test $? = 0
check "snapshot mode: 2 SIGUSR2 snapshots + 1 at the end" grep -q '"snapshots": 3' snap.json
timeout 120 "$PERF" inject -i snap.data --vm-time-correlation=dry-run 2>&1 | grep "^VMCS:" >perf.out
"$VMTRACE" correlate --dry-run --format=perf snap.data >vt.out 2>/dev/null
check "snapshot recording: correlate == perf" sh -c "test -s perf.out && cmp -s perf.out vt.out"

# under sudo the output belongs to the invoking user
SUDO_UID=65534 SUDO_GID=65534 rec --pid $qpid --source synth --synth-size 1M -o sudo.data -q
check "under sudo: output owned by SUDO_UID:SUDO_GID" test "$(find sudo.data ! -user 65534 | wc -l)" = 0

# kvm_write_tsc_offset: a system_reset makes KVM write every vCPU's TSC offset
if [ $accel = kvm ] && [ -e /sys/kernel/tracing/events/kvm/kvm_write_tsc_offset ]; then
	rec --pid $qpid --source synth --synth-size 8M --synth-rate 1M -t 3 -o tsc.data 2>tsc.err &
	rp=$!
	started tsc.err    # (not a fixed sleep: under load the reset came before the recording)
	"$PYTHON3" -c 'import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); time.sleep(0.2); s.sendall(b"system_reset\n"); time.sleep(0.5)' "$TMP/mon"
	wait $rp
	check "kvm_write_tsc_offset: writes of this QEMU recorded in the metadata" sh -c "grep -A1 '^\[tsc-offset-writes\]' tsc.data/vmtrace-kvm.ini | grep -q 'count=[1-9]'"
else
	echo "# no KVM tracepoint here: skipping the tsc-offset write test"
fi

# the sideband ring for real: a stand-in process whose "vCPU" threads rename
# themselves (PR_SET_NAME) and sleep - COMM records and context switches that
# happen during the recording must come through the recorder's dummy event
fake_qemu rename
spid=$FAKE_QEMU
stids=$(ls /proc/$spid/task | sort -n | tail -2 | paste -sd' ')
rec --pid $spid --source synth --synth-size 4M --synth-rate 4M -t 1.5 -o sb.data -q
timeout 120 "$PERF" script -i sb.data --show-task-events --show-switch-events --itrace=e >sb.out 2>&1
check "sideband: COMM records of renames during the recording ($stids)" sh -c "grep 'PERF_RECORD_COMM: vcpu-' sb.out | grep -qE ':$spid/($(echo $stids | tr ' ' '|'))\$'"
check "sideband: context switches of those threads" sh -c "grep 'PERF_RECORD_SWITCH' sb.out | grep -qE ' ($(echo $stids | tr ' ' '|')) '"
# the perf clock (TIME_CONV from the kernel, or - as here - measured by
# vmtrace): each buffer's TSC falls between the kernel-timed sideband records
# read before and after it (tests/perf-clock-check.py); a conversion a few ms
# off fails
timeout 60 "$PERF" report -D -i sb.data >sb.dump 2>/dev/null
check "TIME_CONV agrees with the kernel's perf clock" "$PYTHON3" "$top_srcdir/tests/perf-clock-check.py" sb.dump
kill $spid 2>/dev/null

# QEMU exits: the recording ends by itself, complete
"$VMTRACE" record --pid $qpid --source synth --synth-size 16M --synth-rate 1M -t 60 -o exit.data 2>exit.err &
rp=$!
started exit.err; sleep 0.5; kill $qpid; wait $qpid 2>/dev/null
wait $rp
check "QEMU exited: record exit 0 with a complete file" sh -c "[ $? = 0 ] && timeout 60 '$PERF' report -i exit.data --header-only >/dev/null 2>&1"
finish
