#!/bin/sh
# vmtrace script with a real guest's snapshot: QEMU (TCG) boots the Debian
# kernel (tests/guest-image.sh), `vmtrace guest fetch` copies its kallsyms,
# modules and trimmed kcore - the guest's code as it runs (alternatives and
# static calls patched, e1000 loaded in the module area).  synth walks that
# code as the guest (the host: the same kernel 10 MiB higher, so that host and
# guest code overlap; tests/kernel-code.py),
# and perf script --guestkallsyms SNAPSHOT/kallsyms, vmtrace script --guest
# SNAPSHOT and the ground truth agree, module code included.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/guest-lib.sh"
need_ssh
need_perf
command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86 (apt-get install qemu-system-x86)"
command -v busybox >/dev/null || skip "needs busybox-static"
command -v cpio >/dev/null || skip "needs cpio"
TRIM_KCORE=${TRIM_KCORE:-$(dirname "$VMTRACE")/tests/trim-kcore}
[ -x "$TRIM_KCORE" ] || skip "$TRIM_KCORE not built (make check builds it)"

K=$TMP/keys
ssh_keys "$K"
"$top_srcdir/tests/guest-image.sh" "$TMP/img" "$K/id_ed25519.pub" "$K/host_ed25519" 2>"$TMP/image.err" ||
	skip "cannot build the guest image: $(tail -1 "$TMP/image.err")"
port=$(free_port)
qemu-system-x86_64 -name vmtrace-test,debug-threads=on -accel tcg -m 512 -smp 1 -nodefaults -no-user-config \
	-display none -serial "file:$TMP/console" -no-reboot -kernel "$TMP/img/vmlinux" -initrd "$TMP/img/initrd.gz" \
	-append "console=ttyS0 panic=-1 quiet clocksource=tsc tsc=reliable" \
	-netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" -device e1000,netdev=n0 >"$TMP/qemu.log" 2>&1 &
qemu=$!
GUEST_PIDS="$GUEST_PIDS $qemu"
for _ in $(seq 450); do
	grep -q VMTRACE-GUEST-READY "$TMP/console" 2>/dev/null && break
	kill -0 $qemu 2>/dev/null || break
	sleep 0.2
done
grep -q VMTRACE-GUEST-READY "$TMP/console" 2>/dev/null && wait_port "$port" 10 ||
	skip "the guest did not come up: $(tail -3 "$TMP/console" "$TMP/qemu.log" 2>/dev/null | tr '\n' ' ')"
known_hosts_for "$K" "$port" >"$K/known_hosts"
timeout 120 "$VMTRACE" guest fetch --ssh "root@127.0.0.1:$port" -i "$K/id_ed25519" --known-hosts "$K/known_hosts" \
	--batch -o "$TMP/cache" --json >"$TMP/fetch.json" 2>"$TMP/fetch.err"
check "guest fetch: exit 0" test $? -eq 0
kill $qemu 2>/dev/null
snap=$("$PYTHON3" -c "import json,sys; print(json.load(open(sys.argv[1]))['dir'])" "$TMP/fetch.json" 2>/dev/null)
[ -n "$snap" ] && [ -s "$snap/kcore" ] || { fail "no snapshot with a kcore"; finish; }
check "the snapshot has module code (e1000)" grep -q '	\[e1000\]' "$snap/kallsyms"

mkdir -p "$TMP/host"
"$PYTHON3" "$top_srcdir/tests/kernel-code.py" "$TMP/img/vmlinux" 0xa00000 "$TMP/host" --kvm-stub &&
	"$TRIM_KCORE" "$TMP/host" || { fail "host code"; finish; }

# module code must be walked: a longer trace, several seeds
for seed in 1 2; do
	f=$TMP/rec$seed.data
	"$VMTRACE" synth -o "$f" --vcpus 2 --size 256K --seed $seed --timeless --host-code "$TMP/host" \
		--guest-code "$snap" --branches "$TMP/rec$seed.branches" 2>/dev/null
	check "seed $seed: synth with the guest snapshot as guest code" test $? -eq 0
	timeout 300 "$PERF" script -i "$f" --guestkallsyms "$snap/kallsyms" --itrace=be \
		-F comm,tid,cpu,ip,sym,symoff,dso,addr >"$TMP/rec$seed.perf" 2>"$TMP/rec$seed.perf.err"
	"$VMTRACE" script "$f" --guest "$snap" >"$TMP/rec$seed.vt" 2>"$TMP/rec$seed.vt.err"
	check "seed $seed: vmtrace script --guest SNAPSHOT: exit 0" test $? -eq 0
	"$PYTHON3" "$top_srcdir/tests/script-compare.py" --time "$TMP/rec$seed.perf" "$TMP/rec$seed.vt" "$TMP/rec$seed.branches" \
		>"$TMP/rec$seed.cmp" 2>&1
	ck_rc=$?
	check "seed $seed: vmtrace = perf = ground truth ($(head -1 "$TMP/rec$seed.cmp"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/rec$seed.cmp"
done
modlines=$(cat "$TMP"/rec*.vt | grep 'guest\.kernel' | grep -c ' ffffffffc0')
check "guest module code was decoded ($modlines lines in the module area)" test "$modlines" -gt 0
finish
