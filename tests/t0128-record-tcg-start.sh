#!/bin/sh
# Where record --source tcg starts, and why (issue #15 asks for the reset
# vector; not done yet, this documents the state): QEMU starts the guest in
# SeaBIOS at 0xfffffff0 (16-bit real mode), then 32-bit code (SeaBIOS, the
# PVH entry of the test kernel), then the kernel's 64-bit startup at
# identity-mapped low addresses.  The plugin sees those instructions
# (QEMU's own inline count includes them) but traces from the first
# instruction in the kernel half of the address space: every packet says
# 64-bit (MODE.Exec CS.L=1) and API v1 exposes no CS.D/CS.L.  Checked:
# the first decoded instruction is the TIP.PGE's, a kernel-half address;
# the instructions before it are counted (before_trace) and agree with an
# independent inline counter; the first translated block QEMU ran is the
# reset vector (the counter plugin logs its address); even without
# --kernel-only no firmware address is decoded: the lower addresses after
# the start are the kernel's identity-mapped 64-bit startup code, which the
# first kernel-half function returns to (privilege comes from the address,
# so that CPL-0 code counts as user).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86 (apt-get install qemu-system-x86)"
: "${VMTRACE_TCG_PLUGIN:?run through make check (VMTRACE_TCG_PLUGIN)}"
: "${TCG_COUNT:?run through make check (TCG_COUNT)}"

"$top_srcdir/tests/guest-image.sh" --vmlinux "$TMP/img" 2>"$TMP/image.err" ||
	skip "cannot get the guest kernel: $(tail -1 "$TMP/image.err")"
timeout 900 "$VMTRACE" record --source tcg --tcg-limit 200000 -o "$TMP/rec" --json \
	-- qemu-system-x86_64 -accel tcg -m 256 -smp 1 -nodefaults -no-user-config -display none \
	-serial "file:$TMP/console" -no-reboot -kernel "$TMP/img/vmlinux" -append "console=ttyS0 panic=-1 quiet" \
	-plugin "$TCG_COUNT,out=$TMP/count" >"$TMP/rec.json" 2>"$TMP/rec.err"
check "record --source tcg --tcg-limit 200000: exit 0" test $? = 0 || sed 's/^/# /' "$TMP/rec.err"
started=$(sed -n 's/^insns //p' "$TMP/count")
check "QEMU's own count ($started) = the plugin's started count" json_check "$TMP/rec.json" "j['started'] == int('${started:-0}')"
check "millions of instructions ran before tracing began (firmware, PVH entry, 64-bit startup)" \
	json_check "$TMP/rec.json" "j['before_trace'] > 1000000 and not j['kernel_only']"
first_tb=$(sed -n 's/^first_tb //p' "$TMP/count")
check "the first block QEMU ran is the reset vector (${first_tb:-none})" test "$first_tb" = 0xfffffff0
"$VMTRACE" script "$TMP/rec" --guest "$TMP/rec/guest" --insn-trace -F ip >"$TMP/insn" 2>"$TMP/insn.err"
check "vmtrace script --insn-trace: exit 0" test $? = 0
first=$(awk 'NF {print $1; exit}' "$TMP/insn")
check "the first decoded instruction ($first) is in the kernel half" sh -c "case '$first' in ffff*) true;; *) false;; esac"
"$PYTHON3" -c "
import sys
low = [int(l.split()[0], 16) for l in open('$TMP/insn') if l.split() and not l.split()[0].startswith('ffff')]
print(len(low), min(low, default=0), max(low, default=0))" >"$TMP/low"
check "no firmware decoded: lower addresses after the start are the kernel's identity-mapped 64-bit startup at its 16 MiB load address (CPL 0, labelled user by the address rule) ($(cat "$TMP/low"))" \
	"$PYTHON3" -c "n, lo, hi = map(int, open('$TMP/low').read().split()); assert n == 0 or (lo >= 0x1000000 and hi < 0x4000000)"
pge=$(timeout 300 "$PERF" script -i "$TMP/rec" --guestkallsyms "$TMP/rec/guest/kallsyms" --itrace=b -F ip,addr 2>/dev/null |
	awk '$1 == "0" {print $3; exit}')
check "it is where the trace begins (perf's first 'tr strt' goes to $pge)" test "$pge" = "$first"
finish
