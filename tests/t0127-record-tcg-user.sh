#!/bin/sh
# record --source tcg traces user space too (unless --kernel-only): QEMU
# (TCG) boots the test kernel with a busybox initramfs whose /init hashes
# the busybox binary (user code: sha256) and powers off; tracing starts
# after the kernel's boot (--tcg-skip 1.4 G of ~1.6 G instructions) so
# the busybox processes that ran before it are in the recording's code
# image too (their translations were made before tracing began).
# vmtrace script decodes it with zero errors; perf script (--guest-code:
# the recording maps the image's user segments into the host thread perf
# takes guest user code from) gives the same user-space branches - its
# kernel-side errors are the guest-kernel TEXT_POKEs perf 6.1 ignores.  The
# trace is over 4 MiB: perf reads it across AUXTRACE records without
# splitting a packet.  With --kernel-only no user-space branch is decoded
# and the user instructions count as filtered.
# All processes share one image: PIP carries no CR3 under API v1, so
# norandmaps keeps busybox (static, non-PIE) and the vDSO at one address.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86 (apt-get install qemu-system-x86)"
command -v cpio >/dev/null || skip "needs cpio"
bb=$(command -v busybox) || skip "needs busybox (static)"
file -L "$bb" 2>/dev/null | grep -q 'statically linked' || skip "needs a static busybox (busybox-static)"
: "${VMTRACE_TCG_PLUGIN:?run through make check (VMTRACE_TCG_PLUGIN)}"

"$top_srcdir/tests/guest-image.sh" --vmlinux "$TMP/img" 2>"$TMP/image.err" ||
	skip "cannot get the guest kernel: $(tail -1 "$TMP/image.err")"
mkdir -p "$TMP/root/bin" "$TMP/root/proc"
cp "$bb" "$TMP/root/bin/busybox"
cat >"$TMP/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox sha256sum /bin/busybox
/bin/busybox poweroff -f
INIT
chmod 755 "$TMP/root/init"
(cd "$TMP/root" && find . | cpio -o -H newc 2>/dev/null) >"$TMP/initrd.cpio"
# record NAME [OPTIONS]: the boot recorded into $TMP/NAME
record() {
	name=$1; shift
	timeout 900 "$VMTRACE" record --source tcg --tcg-skip 1400000000 "$@" -o "$TMP/$name" --json \
		-- qemu-system-x86_64 -accel tcg -m 256 -smp 1 -nodefaults -no-user-config -display none -no-reboot \
		-serial "file:$TMP/$name.console" -kernel "$TMP/img/vmlinux" -initrd "$TMP/initrd.cpio" \
		-append "console=ttyS0 panic=-1 quiet norandmaps" >"$TMP/$name.json" 2>"$TMP/$name.err"
}
# user LINES: the branches from and to user space (tid ip addr)
user() { awk '!/error/ && $2 !~ /^f/ && $4 !~ /^f/ && $2 != "0" && $4 != "0" {print $1, $2, $4}' "$1"; }

record all
check "record (kernel and user): exit 0, the guest ran its /init to poweroff" \
	sh -c "[ $? = 0 ] && grep -q 'Power down' '$TMP/all.console'" || sed 's/^/# /' "$TMP/all.err"
check "--json: not kernel-only, over 4 MiB of trace" json_check "$TMP/all.json" "not j['kernel_only'] and j['aux_bytes'] > 4 << 20"
timeout 900 "$VMTRACE" script "$TMP/all" --guest "$TMP/all/guest" -F tid,ip,addr >"$TMP/vt.out" 2>"$TMP/vt.err"
check "vmtrace script: exit 0, zero decode errors (user code translated before tracing began is in the image)" \
	sh -c "[ $? = 0 ] && ! grep -q 'error' '$TMP/vt.out' '$TMP/vt.err'"
user "$TMP/vt.out" >"$TMP/vt.user"
text=$(readelf -lW "$bb" | "$PYTHON3" -c "import sys
for l in sys.stdin:
    f = l.split()
    if f[:1] == ['LOAD'] and 'E' in f[7:-1]: print(int(f[2], 16), int(f[2], 16) + int(f[5], 16))")
check "user-space branches decoded ($(wc -l <"$TMP/vt.user")), from busybox's code ($text)" "$PYTHON3" -c "
lo, hi = map(int, '$text'.split())
ips = [int(l.split()[1], 16) for l in open('$TMP/vt.user')]
inside = sum(lo <= a < hi for a in ips)
assert len(ips) > 100000 and inside >= 0.99 * len(ips), (len(ips), inside)"
timeout 900 "$PERF" script -i "$TMP/all" --guestkallsyms "$TMP/all/guest/kallsyms" --guest-code --itrace=be -F tid,ip,addr \
	>"$TMP/perf.out" 2>"$TMP/perf.err"
check "perf script --guest-code: exit 0" test $? = 0
check "perf: no decode error in user space, no bad packet" \
	sh -c "! grep 'trace error' '$TMP/perf.out' | grep -v ' ip 0xffff' | grep -q . && ! grep -q 'Bad packet' '$TMP/perf.out'"
user "$TMP/perf.out" >"$TMP/perf.user"
check "vmtrace script = perf script on user-space branches ($(wc -l <"$TMP/perf.user"))" test_cmp "$TMP/perf.user" "$TMP/vt.user"

record kernel --kernel-only
check "record --kernel-only: exit 0" test $? = 0 || sed 's/^/# /' "$TMP/kernel.err"
check "--kernel-only: the user instructions are filtered" \
	json_check "$TMP/kernel.json" "j['kernel_only'] and j['filtered'] > 1000000"
timeout 900 "$VMTRACE" script "$TMP/kernel" --guest "$TMP/kernel/guest" -F tid,ip,addr >"$TMP/k.out" 2>"$TMP/k.err"
check "--kernel-only: vmtrace script exit 0, zero errors, no user-space branch" \
	sh -c "[ $? = 0 ] && ! grep -q error '$TMP/k.out' '$TMP/k.err' && [ \$(grep -c . '$TMP/k.out') -gt 100000 ]"
user "$TMP/k.out" >"$TMP/k.user"
check "--kernel-only: no user-space branch decoded" test ! -s "$TMP/k.user"
finish
