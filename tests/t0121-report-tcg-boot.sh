#!/bin/sh
# vmtrace report on a real boot recorded with record --source tcg: QEMU
# (TCG) boots the test guest's kernel from its first instruction
# (--kernel-only) with an initramfs whose /init is not an executable, so
# the kernel runs it, fails and panics ("No working init found").  The
# guest's own symbols (Debian's System.map is a placeholder) come from a
# plugin-free boot, run alongside, whose busybox /init writes
# /proc/kallsyms to a second serial port; they replace REC/guest/kallsyms.
# The report's first-call timeline lists the late-boot milestones that are
# reached by a call - free_initmem -> run_init_process ->
# try_to_run_init_process -> panic, each a function of this kernel - in
# that order with increasing times and call indices; the top functions are
# non-empty with self <= inclusive and the sum of self instructions <= the
# vCPU's guest instructions.  Decode errors from the kernel's self-patching
# (no TEXT_POKE yet) are allowed: exit 22, the errors in the health section.
# Not checked: start_kernel, rest_init, kernel_init, kernel_init_freeable -
# see README (vmtrace report) for why they are missing.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python
command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86 (apt-get install qemu-system-x86)"
command -v cpio >/dev/null || skip "needs cpio"
bb=$(command -v busybox) || skip "needs busybox (static)"
file -L "$bb" 2>/dev/null | grep -q 'statically linked' || skip "needs a static busybox (busybox-static)"
: "${VMTRACE_TCG_PLUGIN:?run through make check (VMTRACE_TCG_PLUGIN)}"

"$top_srcdir/tests/guest-image.sh" --vmlinux "$TMP/img" 2>"$TMP/image.err" ||
	skip "cannot get the guest kernel: $(tail -1 "$TMP/image.err")"
mkdir -p "$TMP/root/bin" "$TMP/root/proc" "$TMP/root/dev" "$TMP/bad"
cp "$bb" "$TMP/root/bin/busybox"
cat >"$TMP/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs dev /dev
/bin/busybox cat /proc/kallsyms >/dev/ttyS1
/bin/busybox poweroff -f
INIT
echo "not an executable" >"$TMP/bad/init"
chmod 755 "$TMP/root/init" "$TMP/bad/init"
(cd "$TMP/root" && find . | cpio -o -H newc 2>/dev/null) >"$TMP/kallsyms.cpio"
(cd "$TMP/bad" && find . | cpio -o -H newc 2>/dev/null) >"$TMP/bad.cpio"
QEMU="qemu-system-x86_64 -accel tcg -m 256 -smp 1 -nodefaults -no-user-config -display none -no-reboot"
# shellcheck disable=SC2086
timeout 600 $QEMU -serial "file:$TMP/ks.console" -serial "file:$TMP/kallsyms.raw" -kernel "$TMP/img/vmlinux" \
	-initrd "$TMP/kallsyms.cpio" -append "console=ttyS0 panic=-1 quiet" &
ks=$!
# shellcheck disable=SC2086
timeout 600 "$VMTRACE" record --source tcg --kernel-only -o "$TMP/rec" --json -- $QEMU -serial "file:$TMP/console" \
	-kernel "$TMP/img/vmlinux" -initrd "$TMP/bad.cpio" -append "console=ttyS0 panic=-1 quiet" >"$TMP/rec.json" 2>"$TMP/rec.err"
check "record --source tcg from the first kernel instruction: exit 0" test $? = 0 || sed 's/^/# /' "$TMP/rec.err"
grep -E 'instructions traced|MiB of trace' "$TMP/rec.err" | sed 's/^ */# /'
check "the guest ran /init and panicked" grep -q 'No working init found' "$TMP/console"
wait $ks
tr -d '\r' <"$TMP/kallsyms.raw" >"$TMP/rec/guest/kallsyms"
missing=
MILESTONES="free_initmem run_init_process try_to_run_init_process panic"
for m in $MILESTONES; do
	grep -q " [tTwW] $m\$" "$TMP/rec/guest/kallsyms" || missing="$missing $m"
done
check "the milestones are functions of this kernel (its /proc/kallsyms)" test -z "$missing" || echo "# missing:$missing"

timeout 600 "$VMTRACE" report "$TMP/rec" --guest "$TMP/rec/guest" --json --top 30 >"$TMP/rep.json" 2>"$TMP/rep.err"
rc=$?
sed 's/^/# /' "$TMP/rep.err"
check "report: exit 0, or 22 with the errors counted in its health section" \
	json_check "$TMP/rep.json" "$rc == 0 and j['health']['errors'] == 0 or $rc == 22 and j['health']['errors'] > 0" ||
	sed 's/^/# /' "$TMP/rep.err"
check "one vCPU (the TCG stream), guest instructions only, no VM exits" \
	json_check "$TMP/rep.json" "[(v['vcpu'], v['exits'], v['host_insns']) for v in j['vcpus']] == [(0, 0, 0)] and \
		j['vcpus'][0]['guest_insns'] > 10**9"
check "first calls: $MILESTONES in that order, times and indices increasing" \
	json_check "$TMP/rep.json" "(lambda m: [f['sym'] for f in m] == '$MILESTONES'.split() and \
		all(a['time'] < b['time'] and a['index'] < b['index'] for a, b in zip(m, m[1:]))) \
		([f for f in j['first_calls'] if f['guest'] and f['sym'] in '$MILESTONES'.split()])"
check "top guest functions: non-empty, self <= inclusive, sum of self <= the vCPU's instructions" \
	json_check "$TMP/rep.json" "(lambda fs: len(fs) > 0 and all(f['self'] <= f['inclusive'] and f['self_insns'] <= f['insns'] for f in fs) and \
		sum(f['self_insns'] for f in fs) <= j['vcpus'][0]['guest_insns'])([f for f in j['functions'] if f['guest'] and f['vcpu'] == 0])"
finish
