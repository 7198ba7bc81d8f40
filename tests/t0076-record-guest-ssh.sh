#!/bin/sh
# vmtrace record --guest-ssh end to end: QEMU (TCG, 2 vCPUs) runs the test
# guest with sshd and perf (tests/guest-image.sh --perf); the host side is
# the synth capture source on the real QEMU process (--source synth: real
# vCPU threads, real comm/switch sideband, synthetic trace).  perf record
# runs in the guest over SSH while the host records, its file and the
# guest's kernel snapshot are copied back and injected: ONE directory.
#
# Under TCG QEMU names its vCPU threads "CPU n/TCG"; perf inject --guest-data
# and vmtrace inject find vCPU threads by "CPU n/KVM" only, and another
# process cannot rename a thread (/proc/PID/task/TID/comm: EINVAL), so the
# injection is refused (exit 19, checked first); then QEMU runs with
# tests/tcg-as-kvm.c preloaded, which names its threads as KVM's.
#
# Refusals: no perf in the guest (20), the guest's perf fails (21), the SSH
# server gone mid-way (16 in the runs seen: no answer for --timeout; any
# failure passes); Ctrl-C stops both
# recordings cleanly.  None
# leaves an output or a temporary behind.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/guest-lib.sh"
need_perf
need_ssh
command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86 (apt-get install qemu-system-x86)"
command -v busybox >/dev/null || skip "needs busybox-static"
command -v cpio >/dev/null || skip "needs cpio"
CC=${CC:-cc}
command -v "$CC" >/dev/null || skip "needs a C compiler for tests/tcg-as-kvm.c"

K=$TMP/keys
ssh_keys "$K"
"$top_srcdir/tests/guest-image.sh" --perf "$TMP/img" "$K/id_ed25519.pub" "$K/host_ed25519" 2>"$TMP/image.err" ||
	skip "cannot build the guest image with perf: $(tail -1 "$TMP/image.err")"
"$CC" -shared -fPIC -o "$TMP/tcg-as-kvm.so" "$top_srcdir/tests/tcg-as-kvm.c" -ldl || skip "cannot build tests/tcg-as-kvm.c"
printf '#include <stdio.h>\n#include <x86intrin.h>\nint main(void) { printf("%%llu\\n", __rdtsc()); return 0; }\n' \
	>"$TMP/rdtsc.c"
"$CC" -o "$TMP/rdtsc" "$TMP/rdtsc.c" || skip "cannot build a program that reads the TSC"

# boot [PRELOAD]: start the 2-vCPU guest, wait for its sshd (120 s at most)
boot() {
	BOOT_PRELOAD=${1:-} boot_guest 2 600 clocksource=tsc tsc=reliable no-kvmclock || return 1
	G="--guest-ssh root@127.0.0.1:$port --identity $K/id_ed25519 --known-hosts $K/known_hosts --batch"
}
halt() {
	kill $qemu 2>/dev/null
	wait $qemu 2>/dev/null
}
guest_ssh() {
	ssh -p "$port" -i "$K/id_ed25519" -o BatchMode=yes -o StrictHostKeyChecking=yes -o LogLevel=ERROR \
		-o UserKnownHostsFile="$K/known_hosts" -o GlobalKnownHostsFile=/dev/null root@127.0.0.1 "$@"
}
rec() { "$VMTRACE" record --pid $qemu --source synth --synth-size 2M "$@"; }
# guest_clean: no perf directory in the guest's /tmp (and the guest answers:
# an unreachable guest does not pass)
guest_clean() { test "$(guest_ssh 'ls -d /tmp/vmtrace-perf.* 2>/dev/null; echo end')" = end; }
# nothing_left OUT: no OUT, no temporary next to it, no perf directory in the guest
nothing_left() {
	! test -e "$1" && test -z "$(find "$TMP" -maxdepth 1 -name ".*vmtrace-tmp*")" &&
		guest_clean
}
# refused_rec RC WANT OUT [FILE WORDS]: exit WANT, FILE has WORDS, nothing left
# (one command, so that check can fail on any part)
refused_rec() {
	test "$1" -eq "$2" && { [ $# -lt 5 ] || grep -q -- "$5" "$4"; } && nothing_left "$3"
}
# events FILE: the event names of a perf.data, sorted, one line
events() { "$PERF" evlist -i "$1" 2>/dev/null | sed 's/:.*//' | sort | tr '\n' ' '; }
S="--show-task-events --show-mmap-events --show-switch-events --ns --itrace="
# tcg_offset: the guest's TSC minus the host's, as the synth source's
# --synth-offset: under TCG the guest's TSC is the host's less its value
# when the VM started.  The guest's printk time (local_clock, TSC-based
# with tsc=reliable) of a line written between two host TSC readings, made
# a guest TSC with its perf TIME_CONV; the fastest of three round trips
# (each an SSH login: about 1 s under TCG) - prints "OFFSET ERROR-TICKS"
tcg_offset() {
	guest_ssh 'perf record -q -e dummy -o /tmp/c.data true >/dev/null 2>&1; cat /tmp/c.data; rm -f /tmp/c.data' \
		>"$TMP/c.data"
	for _ in 1 2 3; do
		h1=$("$TMP/rdtsc")
		mark=$(guest_ssh 'echo vmtrace-mark >/dev/kmsg; dmesg | grep vmtrace-mark | tail -1')
		echo "$h1 $("$TMP/rdtsc") $mark"
	done | "$PYTHON3" -c '
import re, subprocess, sys
out = subprocess.run([sys.argv[1], "script", "-i", sys.argv[2], "-D"], capture_output=True, text=True).stdout
g = lambda k: int(re.search(k + r"\s*:?\s*(\d+)", out).group(1))
s, m, z = g("Time Shift"), g("Time Muliplier"), g(r"\.\.\. Time Zero")
h1, h2, sec, us = min(((int(a), int(b), c, d) for a, b, c, d in
                       re.findall(r"^(\d+) (\d+) \[\s*(\d+)\.(\d+)\]", sys.stdin.read(), re.M)),
                      key=lambda x: x[1] - x[0])
t = (int(sec) * 10**9 + int(us) * 1000 - z) % 2**64
tsc = ((t // m) << s) + ((t % m) << s) // m
print(hex((tsc - (h1 + h2) // 2) % 2**64), (h2 - h1) // 2)' "$PERF" "$TMP/c.data"
}

# --- TCG's own thread names: the injection is refused ------------------------
boot || skip "the guest did not come up: $(tail -3 "$TMP/console" "$TMP/qemu.log" 2>/dev/null | tr '\n' ' ')"
rec -t 1 $G -o "$TMP/t0" >"$TMP/t0.err" 2>&1
rc=$?
check "TCG's \"CPU n/TCG\" threads: exit 19, names CPU n/KVM" \
	sh -c "test $rc -eq 19 && grep -q 'CPU n/KVM' '$TMP/t0.err'"
check "... the host recording is kept with guest.data (not merged), the retry command said, no temporaries" \
	sh -c "test -s '$TMP/t0/data' && test -s '$TMP/t0/guest.data' && test -s '$TMP/t0/vmtrace-kvm.ini' &&
		grep -q 'vmtrace inject $TMP/t0 --guest-data $TMP/t0/guest.data' '$TMP/t0.err' &&
		test -z \"\$(find '$TMP' -maxdepth 1 -name '.*vmtrace-tmp*')\""
# the snapshot cannot be taken again either: kept where a merge puts it, so
# the retry (inject copies REC's files) has it as a one-step run has
check "... and the guest's kernel snapshot: kcore_dir__$qemu (kcore, kallsyms, modules; 0600), said" \
	sh -c "test -s '$TMP/t0/kcore_dir__$qemu/kcore' && test -s '$TMP/t0/kcore_dir__$qemu/kallsyms' &&
		test -s '$TMP/t0/kcore_dir__$qemu/modules' &&
		test -z \"\$(find '$TMP/t0/kcore_dir__$qemu' -type f ! -perm 0600)\" &&
		grep -q 'kernel snapshot ($TMP/t0/kcore_dir__$qemu)' '$TMP/t0.err'"
check "... perf reads the kept host recording" sh -c "'$PERF' script -i '$TMP/t0' --itrace= --show-task-events 2>/dev/null | grep -q COMM"
check "... nothing left in the guest's /tmp" guest_clean
halt

# --- the whole pipeline -------------------------------------------------------
boot "$TMP/tcg-as-kvm.so" || fail "the guest did not come up with tcg-as-kvm.so"
check "QEMU's vCPU threads are named CPU 0/KVM, CPU 1/KVM" \
	test "$(cat /proc/$qemu/task/*/comm | grep -c '^CPU [01]/KVM$')" = 2
guest_ssh 'sh -c "while :; do ls / >/dev/null; cat /proc/version >/dev/null; sleep 0.2; done" >/dev/null 2>&1 &'
set -- $(tcg_offset)
TOFF=${1:-} TERR=${2:-}
check "the guest's TSC offset from the host's (TCG): $TOFF, within $TERR ticks" test -n "$TOFF"
rec -t 2 $G --synth-offset "${TOFF:-0}" --json -o "$TMP/r1" >"$TMP/r1.json" 2>"$TMP/r1.err"
rc=$?
check "record --guest-ssh: exit 0" test $rc -eq 0
[ $rc -eq 0 ] || sed 's/^/# /' "$TMP/r1.err"
# the synth source's trace starts at the host's TSC: with the guest's own
# offset in it, the guest's records are where they happened
check "... injected with that offset, found in the host trace: the guest's records fall within the host recording (no warning)" \
	sh -c "grep -q 'guest records injected' '$TMP/r1.err' && grep -q 'vCPU 1: TSC offset $TOFF' '$TMP/r1.err' &&
	       ! grep -q 'none of the' '$TMP/r1.err'"
check "... one directory: data, guest.data, kcore_dir__$qemu (kcore, kallsyms, modules), vmtrace-kvm.ini" \
	test -s "$TMP/r1/data" -a -s "$TMP/r1/guest.data" -a -s "$TMP/r1/kcore_dir__$qemu/kcore" \
	-a -s "$TMP/r1/kcore_dir__$qemu/kallsyms" -a -s "$TMP/r1/kcore_dir__$qemu/modules" -a -s "$TMP/r1/vmtrace-kvm.ini"
check "... stdout is record's JSON only" "$PYTHON3" -c "import json; j = json.load(open('$TMP/r1.json')); assert j['qemu_pid'] == $qemu"
"$PERF" script -i "$TMP/r1/guest.data" $S 2>/dev/null | grep -c PERF_RECORD_ >"$TMP/n.g"
"$PERF" script -i "$TMP/r1" $S -F+machine_pid,+vcpu 2>/dev/null >"$TMP/r1.txt"
check "perf script reads it: the guest's $(cat "$TMP/n.g") sideband records as VM: $qemu on both vCPUs" \
	sh -c "test \$(grep -c '^VM: *$qemu VCPU:00[01]' '$TMP/r1.txt') -eq $(cat "$TMP/n.g") &&
	       grep -q '^VM: *$qemu VCPU:000' '$TMP/r1.txt' && grep -q '^VM: *$qemu VCPU:001' '$TMP/r1.txt'"
check "... the guest's commands are there (ls, cat)" \
	sh -c "grep '^VM: *$qemu' '$TMP/r1.txt' | grep -q 'PERF_RECORD_COMM.*: ls:' &&
	       grep '^VM: *$qemu' '$TMP/r1.txt' | grep -q 'PERF_RECORD_COMM.*: cat:'"
check "... the guest recorded sideband only (events: $(events "$TMP/r1/guest.data")), nothing left out of the injection" \
	sh -c "test '$(events "$TMP/r1/guest.data")' = 'dummy ' && grep -q 'injected (0 not injected' '$TMP/r1.err'"
guest_ssh cat /proc/kallsyms >"$TMP/kallsyms"
check "the snapshot's kallsyms is the running guest's" cmp -s "$TMP/kallsyms" "$TMP/r1/kcore_dir__$qemu/kallsyms"

# --- Ctrl-C: both stop, the guest file is complete -----------------------------
# (with --guest-events: samples are recorded in the guest when asked, and not injected)
rec $G --guest-events cpu-clock,dummy --progress --synth-rate 64K -o "$TMP/r2" >/dev/null 2>"$TMP/r2.err" &
rp=$!
# Ctrl-C once the recorder has read a sideband record of the vCPU threads:
# their context switches are the kernel's (the synth source writes none),
# and inject needs one with a CPU (else exit 19).  Their other sideband
# (comm, fork/exit, exec mmaps) does not happen in this guest's idle QEMU.
# A fixed sleep (1 s, then 3 s) was flaky under load; so was a source that
# gave its 2 MiB at once: the recording ended by itself at 0.0 s, before
# any switch (session 19, a suite run beside other work) - at 64 KiB/s it
# lasts up to 32 s.
for _ in $(seq 1200); do
	tr '\r' '\n' <"$TMP/r2.err" 2>/dev/null | grep -q ' [1-9][0-9]* sideband records' && break
	sleep 0.1
done
kill -INT $rp
wait $rp
rc=$?
echo "# Ctrl-C run: exit $rc"; sed 's/^/# r2.err: /' "$TMP/r2.err"
check "Ctrl-C: exit 0, the recording and the guest's records are in place" \
	sh -c "test $rc -eq 0 && test -s '$TMP/r2/guest.data' && \"\$PERF\" script -i '$TMP/r2' --show-task-events --itrace= \
	       -F+machine_pid 2>/dev/null | grep -q '^VM: *$qemu'"
"$PERF" script -i "$TMP/r2/guest.data" --show-task-events >/dev/null 2>"$TMP/r2.perf"
sed 's/^/# perf: /' "$TMP/r2.perf"
# (but perf's "N out of order events recorded": the guest's perf wrote
# its CPUs' events with times out of order - the guest's clock under TCG,
# the guest perf's own file, as complete as otherwise; seen once in a
# suite run, session 20)
check "... the guest's perf.data is complete: perf reads it without a warning, data size in its header" \
	sh -c "awk 'w && !/out of order events recorded/ { bad = 1 } { w = 0 } /^Warning:\$/ { w = 1; next }
		   tolower(\$0) ~ /warn|trunc|error/ { bad = 1 } END { if (w) bad = 1; exit bad }' '$TMP/r2.perf' &&
	       \"\$PERF\" report --header-only -i '$TMP/r2/guest.data' 2>/dev/null | grep -q '^# data size *: [1-9]'"
check "... nothing left in the guest's /tmp" guest_clean
check "--guest-events cpu-clock,dummy: the guest recorded those ($(events "$TMP/r2/guest.data")), its samples not injected" \
	sh -c "echo '$(events "$TMP/r2/guest.data")' | grep -qw cpu-clock &&
	       grep -q 'injected ([1-9][0-9]* not injected: samples' '$TMP/r2.err'"

# --- refusals -----------------------------------------------------------------
rec -t 1 $G --guest-events no-such-event -o "$TMP/r3" >/dev/null 2>"$TMP/r3.err"
rc=$?
check "the guest's perf fails (--guest-events no-such-event): exit 21, perf's message, nothing left" \
	refused_rec $rc 21 "$TMP/r3" "$TMP/r3.err" 'perf record in the guest failed.*event syntax error'
sed 's/^/# /' "$TMP/r3.err"
rec -t 1 $G --guest-events 'cpu-clock;reboot' -o "$TMP/r4" >/dev/null 2>"$TMP/r4.err"
check "--guest-events with shell characters: exit 2" test $? -eq 2
guest_ssh 'mv /usr/bin/perf /usr/bin/perf.off'
rec -t 1 $G -o "$TMP/r5" >/dev/null 2>"$TMP/r5.err"
rc=$?
check "no perf in the guest: exit 20, says install linux-perf, nothing left" \
	refused_rec $rc 20 "$TMP/r5" "$TMP/r5.err" 'no perf in the guest'
guest_ssh 'mv /usr/bin/perf.off /usr/bin/perf'
# the host-key rules of guest fetch (issue #13: the same connection code):
# a guest not in known_hosts, and one whose key differs from known_hosts
: >"$TMP/hosts.empty"
rec -t 1 $(echo "$G" | sed "s|--known-hosts [^ ]*|--known-hosts $TMP/hosts.empty|") -o "$TMP/r7" >/dev/null 2>"$TMP/r7.err"
rc=$?
check "a guest host key not in known_hosts: exit 9 (refused), nothing left" refused_rec $rc 9 "$TMP/r7"
sed 's/^/# /' "$TMP/r7.err"
ssh-keygen -q -t ed25519 -N '' -f "$TMP/other" >/dev/null
awk -v k="$(cut -d' ' -f2 "$TMP/other.pub")" '{ $2 = "ssh-ed25519"; $3 = k; print }' "$K/known_hosts" >"$TMP/hosts.changed"
rec -t 1 $(echo "$G" | sed "s|--known-hosts [^ ]*|--known-hosts $TMP/hosts.changed|") -o "$TMP/r8" >/dev/null 2>"$TMP/r8.err"
rc=$?
check "a guest host key that differs from known_hosts: exit 10 (refused), nothing left" refused_rec $rc 10 "$TMP/r8"
sed 's/^/# /' "$TMP/r8.err"
# the guest's sshd (listener and sessions) killed while the host records
rec -t 4 $G --timeout 5 -o "$TMP/r6" >/dev/null 2>"$TMP/r6.err" &
rp=$!
for _ in $(seq 600); do grep -q "Ctrl-C stops" "$TMP/r6.err" 2>/dev/null && break; sleep 0.1; done
guest_ssh 'killall sshd' 2>/dev/null
wait $rp
rc=$?
check "the SSH server gone mid-way: exit $rc (not 0), says so, no output, no temporary" \
	sh -c "test $rc -ne 0 && grep -qi 'guest\|ssh' '$TMP/r6.err' && ! test -e '$TMP/r6' &&
	       test -z \"\$(find '$TMP' -maxdepth 1 -name '.*vmtrace-tmp*')\""
sed 's/^/# /' "$TMP/r6.err" | tail -2
halt
finish
