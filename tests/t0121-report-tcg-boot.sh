#!/bin/sh
# vmtrace report on a real boot recorded with record --source tcg: QEMU
# (TCG) boots the test guest's kernel from its first instruction
# (--kernel-only) with an initramfs whose /init is not an executable, so
# the kernel runs it, fails and panics ("No working init found").  The
# guest's own symbols (Debian's System.map is a placeholder) come from a
# plugin-free boot, run alongside, whose busybox /init writes
# /proc/kallsyms to a second serial port; they replace REC/guest/kallsyms.
# The kernel command line leaves out what costs most instructions and is
# no milestone (QEMU's instruction counts, guest profile by symbol):
# cryptomgr.notests (the crypto self-tests: 60% of a default boot, RSA's
# mpihelp_*), rodata=off (the W+X page-table walk after free_initmem, 22%
# of the rest), the blake2s self-test and the trace eval-map update
# (initcall_blacklist), no_timer_check (the IO-APIC timer check can fail
# on a loaded host under TCG): ~0.41 G instructions instead of 1.46 G.
# mitigations=off: with Spectre v2 retpolines (QEMU's default CPU) every
# indirect call is `call __x86_indirect_thunk_REG` and the thunk enters the
# callee by a `ret` - kernel_init and every initcall would be missing from
# the first calls; without them the kernel patches the call sites to
# `call *%REG`.
# The report's first-call timeline lists the boot milestones -
# start_kernel (entered by a tail call, jmp, from
# x86_64_start_reservations) -> rest_init -> kernel_init (entered from
# ret_from_fork by an indirect call) -> kernel_init_freeable ->
# free_initmem -> run_init_process -> try_to_run_init_process -> panic,
# each a function of this kernel - in that order with increasing call
# indices and times that do not decrease (kernel_init and
# kernel_init_freeable share a timestamp: the trace's timing packets are
# coarser than one call), and the decode has no error (TEXT_POKE); the top
# functions are non-empty with self <= inclusive and the sum of self
# instructions <= the vCPU's guest instructions.
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
APPEND="console=ttyS0 panic=-1 quiet no_timer_check mitigations=off cryptomgr.notests rodata=off initcall_blacklist=blake2s_mod_init,trace_eval_init"
QEMU="qemu-system-x86_64 -accel tcg -m 256 -smp 1 -nodefaults -no-user-config -display none -no-reboot"
# shellcheck disable=SC2086
timeout 600 $QEMU -serial "file:$TMP/ks.console" -serial "file:$TMP/kallsyms.raw" -kernel "$TMP/img/vmlinux" \
	-initrd "$TMP/kallsyms.cpio" -append "$APPEND" &
ks=$!
# shellcheck disable=SC2086
timeout 600 "$VMTRACE" record --source tcg --kernel-only -o "$TMP/rec" --json -- $QEMU -serial "file:$TMP/console" \
	-kernel "$TMP/img/vmlinux" -initrd "$TMP/bad.cpio" -append "$APPEND" >"$TMP/rec.json" 2>"$TMP/rec.err"
check "record --source tcg from the first kernel instruction: exit 0" test $? = 0 || sed 's/^/# /' "$TMP/rec.err"
grep -E 'instructions traced|MiB of trace' "$TMP/rec.err" | sed 's/^ */# /'
check "the guest ran /init and panicked" grep -q 'No working init found' "$TMP/console"
wait $ks
tr -d '\r' <"$TMP/kallsyms.raw" >"$TMP/rec/guest/kallsyms"
missing=
MILESTONES="start_kernel rest_init kernel_init kernel_init_freeable free_initmem run_init_process try_to_run_init_process panic"
for m in $MILESTONES; do
	grep -q " [tTwW] $m\$" "$TMP/rec/guest/kallsyms" || missing="$missing $m"
done
check "the milestones are functions of this kernel (its /proc/kallsyms)" test -z "$missing" || echo "# missing:$missing"

timeout 600 "$VMTRACE" report "$TMP/rec" --guest "$TMP/rec/guest" --json --top 30 >"$TMP/rep.json" 2>"$TMP/rep.err"
rc=$?
sed 's/^/# /' "$TMP/rep.err"
check "report: exit 0, no decode error" json_check "$TMP/rep.json" "$rc == 0 and j['health']['errors'] == 0" ||
	sed 's/^/# /' "$TMP/rep.err"
"$PYTHON3" - "$TMP/rep.json" "$MILESTONES" <<'PY' | sed 's/^/# /'
import json, sys
j = json.load(open(sys.argv[1]))
for f in j['first_calls']:
    if f['guest'] and f['sym'] in sys.argv[2].split():
        print('%6d %.9f %s' % (f['index'], f['time'] / 1e9, f['sym']))
for f in [f for f in j['functions'] if f['guest'] and f['vcpu'] == 0][:5]:
    print('top: %s self %d insns %d' % (f['sym'], f['self'], f['self_insns']))
PY
check "one vCPU (the TCG stream), guest instructions only, no VM exits" \
	json_check "$TMP/rep.json" "[(v['vcpu'], v['exits'], v['host_insns']) for v in j['vcpus']] == [(0, 0, 0)] and \
		j['vcpus'][0]['guest_insns'] > 10**8"
check "first calls: $MILESTONES in that order, indices increasing, times not decreasing" \
	json_check "$TMP/rep.json" "(lambda m: [f['sym'] for f in m] == '$MILESTONES'.split() and \
		all(a['time'] <= b['time'] and a['index'] < b['index'] for a, b in zip(m, m[1:]))) \
		([f for f in j['first_calls'] if f['guest'] and f['sym'] in '$MILESTONES'.split()])"
check "top guest functions: non-empty, self <= inclusive, sum of self <= the vCPU's instructions" \
	json_check "$TMP/rep.json" "(lambda fs: len(fs) > 0 and all(f['self'] <= f['inclusive'] and f['self_insns'] <= f['insns'] for f in fs) and \
		sum(f['self_insns'] for f in fs) <= j['vcpus'][0]['guest_insns'])([f for f in j['functions'] if f['guest'] and f['vcpu'] == 0])"
finish
