#!/bin/sh
# vmtrace guest fetch/check against a real Linux guest: QEMU (TCG) boots the
# Debian kernel with a busybox initramfs running sshd (tests/guest-image.sh).
# The trimmed kcore's bytes at _stext and in a module's text must equal the
# bytes read straight from the guest's /proc/kcore; the same through an sshfs
# -o direct_io mount with --root; check reports the real clocksource (booted
# with clocksource=tsc: OK; with clocksource=hpet: WARN).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/guest-lib.sh"
need_ssh
command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86 (apt-get install qemu-system-x86)"
command -v busybox >/dev/null || skip "needs busybox-static"
command -v cpio >/dev/null || skip "needs cpio"

K=$TMP/keys
ssh_keys "$K"
"$top_srcdir/tests/guest-image.sh" "$TMP/img" "$K/id_ed25519.pub" "$K/host_ed25519" 2>"$TMP/image.err" ||
	skip "cannot build the guest image: $(tail -1 "$TMP/image.err")"

# boot APPEND...: start the guest, wait for its sshd (90 s at most)
boot() {
	boot_guest 1 450 "$@" || return 1
	ssh_args="--ssh root@127.0.0.1:$port -i $K/id_ed25519 --known-hosts $K/known_hosts --batch"
}
halt() {
	kill $qemu 2>/dev/null
	wait $qemu 2>/dev/null
}
guest_ssh() {
	ssh -p "$port" -i "$K/id_ed25519" -o BatchMode=yes -o StrictHostKeyChecking=yes -o LogLevel=ERROR \
		-o UserKnownHostsFile="$K/known_hosts" -o GlobalKnownHostsFile=/dev/null root@127.0.0.1 "$@"
}
# guest_kcore VADDR LEN: hex bytes read straight from the guest's /proc/kcore
guest_kcore() {
	off=$("$TEST_GUESTFS" --offset "$TMP/kcore.hdr" "$1") || return 1
	guest_ssh "dd if=/proc/kcore bs=4096 skip=$((off / 4096)) count=2 2>/dev/null" |
		od -An -tx1 -v -j $((off % 4096)) -N "$2" | tr -d ' \n'
}
# same_bytes SNAPSHOT VADDR: trimmed kcore (libelf-validated) == guest's kcore, 256 bytes
same_bytes() {
	a=$("$TEST_GUESTFS" --peek "$1/kcore" "$2" 256) && b=$(guest_kcore "$2" 256) && [ ${#a} -eq 512 ] && [ "$a" = "$b" ]
}

boot clocksource=tsc tsc=reliable || skip "the guest did not come up: $(tail -3 "$TMP/console" "$TMP/qemu.log" 2>/dev/null | tr '\n' ' ')"
guest_ssh 'dd if=/proc/kcore bs=4096 count=1 2>/dev/null' > "$TMP/kcore.hdr"
release=$(guest_ssh 'uname -r')

timeout 120 "$VMTRACE" guest fetch $ssh_args -o "$TMP/c1" --json >"$TMP/json" 2>"$TMP/err"
check "fetch over SSH from the guest: exit 0" test $? -eq 0
snap=$("$PYTHON3" -c "import json; print(json.load(open('$TMP/json'))['dir'])" 2>/dev/null)
check "the snapshot has kallsyms, modules, kcore" test -s "$snap/kallsyms" -a -s "$snap/modules" -a -s "$snap/kcore"
check "osrelease is the guest's ($release)" grep -q "\"osrelease\": \"$release\"" "$TMP/json"
# Ctrl-C in the middle of the kcore copy: exit 1, the temporary snapshot removed
"$VMTRACE" guest fetch $ssh_args -o "$TMP/c3" >/dev/null 2>"$TMP/int.err" &
fp=$! t0=$(date +%s%N)
for _ in $(seq 600); do
	[ -n "$(find "$TMP/c3" -path '*/.snapshot.vmtrace-tmp.*/kcore' -size +0 2>/dev/null)" ] && break
	sleep 0.02
done
echo "# kcore copy seen after $(( ($(date +%s%N) - t0) / 1000000 )) ms: SIGINT"
kill -INT $fp; wait $fp; rc=$?
if grep -q "pass to perf" "$TMP/int.err"; then
	echo "# the copy had ended before SIGINT came: interruption not exercised this time"
else
	check "SIGINT during the kcore copy: exit 1, says interrupted" sh -c "[ $rc = 1 ] && grep -q 'interrupted while \(copying\|reading\) ' '$TMP/int.err'"
	[ $rc = 1 ] && grep -q "interrupted while" "$TMP/int.err" || sed "s/^/# /" "$TMP/int.err"
	check "SIGINT during the kcore copy: no snapshot, no temporary directory" \
		test -z "$(find "$TMP/c3" -mindepth 3 2>/dev/null)"
fi
stext=$(awk '$3 == "_stext" {print $1}' "$snap/kallsyms")
modsym=$(awk '$2 ~ /^[tT]$/ && $4 == "[e1000]" {print $1; exit}' "$snap/kallsyms")
# (per-CPU symbols legitimately sit at small offsets from 0)
check "kallsyms addresses are real: _stext 0x$stext, kernel-half addresses" \
	sh -c "test -n '$stext' && test '$stext' != 0000000000000000 &&
	       test \$(grep -c '^ffff' '$snap/kallsyms') -gt \$((\$(wc -l < '$snap/kallsyms') * 9 / 10))"
check "modules lists e1000 at its kallsyms address 0x$modsym" grep -q "^e1000 .*0xffffffffc" "$snap/modules"
check "kcore bytes at _stext equal the guest's /proc/kcore" same_bytes "$snap" "0x$stext"
check "kcore bytes in e1000's text equal the guest's /proc/kcore" same_bytes "$snap" "0x$modsym"
check "the trimmed kcore is small (kernel text + modules, not memory)" test "$(stat -c %s "$snap/kcore")" -lt $((64 << 20))
guest_ssh 'cat /proc/kallsyms' > "$TMP/guest.kallsyms"
check "kallsyms equals the guest's /proc/kallsyms now" cmp -s "$snap/kallsyms" "$TMP/guest.kallsyms"

timeout 120 "$VMTRACE" guest check $ssh_args >"$TMP/chk" 2>&1
rc=$?
check "check (clocksource=tsc): exit 0, no FAIL" sh -c "test $rc -eq 0 && ! grep -q '^FAIL' '$TMP/chk'"
check "check reports the guest's clocksource tsc as OK" grep -q '^OK   clocksource .*clocksource tsc' "$TMP/chk"
check "check: root login, kcore readable, kallsyms OK" \
	sh -c "grep -q '^OK   login' '$TMP/chk' && grep -q '^OK   kcore' '$TMP/chk' && grep -q '^OK   kallsyms' '$TMP/chk'"

# --- the same through sshfs -o direct_io and --root --------------------------
if command -v sshfs >/dev/null && [ -c /dev/fuse ]; then
	mkdir "$TMP/mnt"
	if sshfs -p "$port" -o "IdentityFile=$K/id_ed25519,UserKnownHostsFile=$K/known_hosts,StrictHostKeyChecking=yes" \
		-o BatchMode=yes,direct_io root@127.0.0.1:/ "$TMP/mnt" 2>"$TMP/sshfs.err"; then
		GUEST_MOUNTS="$TMP/mnt"
		timeout 120 "$VMTRACE" guest fetch --root "$TMP/mnt" -o "$TMP/c2" --json >"$TMP/json2" 2>"$TMP/err2"
		check "fetch --root over sshfs -o direct_io: exit 0" test $? -eq 0
		snap2=$("$PYTHON3" -c "import json; print(json.load(open('$TMP/json2'))['dir'])" 2>/dev/null)
		check "sshfs: kcore bytes at _stext equal the guest's" same_bytes "$snap2" "0x$stext"
		check "sshfs: kcore bytes in e1000's text equal the guest's" same_bytes "$snap2" "0x$modsym"
		check "sshfs: same kallsyms and modules as over SSH" \
			sh -c "cmp -s '$snap/kallsyms' '$snap2/kallsyms' && cmp -s '$snap/modules' '$snap2/modules'"
		if [ -n "$PERF" ] && "$PERF" version >/dev/null 2>&1; then
			# perf's own kcore cache accepts vmtrace's snapshot as its own
			timeout 120 "$PERF" --buildid-dir "$TMP/c2" buildid-cache -v --kcore "$TMP/mnt/proc/kcore" >"$TMP/perf.out" 2>&1
			check "perf buildid-cache --kcore finds vmtrace's snapshot: same kcore" \
				grep -qF "same kcore found in $snap2" "$TMP/perf.out"
		fi
		timeout 120 "$VMTRACE" guest check --root "$TMP/mnt" >"$TMP/chk2" 2>&1
		check "check --root over sshfs: clocksource tsc OK" grep -q '^OK   clocksource .*clocksource tsc' "$TMP/chk2"
		fusermount3 -u "$TMP/mnt" 2>/dev/null || fusermount -u "$TMP/mnt"
		GUEST_MOUNTS=
	else
		fail "sshfs mount failed: $(cat "$TMP/sshfs.err")"
	fi
else
	echo "# sshfs or /dev/fuse missing: sshfs part skipped"
fi
halt

# --- another clocksource: WARN ---------------------------------------------
if boot clocksource=hpet; then
	timeout 120 "$VMTRACE" guest check $ssh_args --json >"$TMP/chk3" 2>&1
	check "check (clocksource=hpet): WARN naming hpet, fix clocksource=tsc" "$PYTHON3" -c "
import json
j = json.load(open('$TMP/chk3'))
c = [x for x in j['checks'] if x['name'] == 'clocksource'][0]
assert c['status'] == 'WARN' and 'clocksource hpet' in c['what'] and 'clocksource=tsc' in c['fix'], c
"
	halt
else
	fail "the guest did not come up with clocksource=hpet"
fi
finish
