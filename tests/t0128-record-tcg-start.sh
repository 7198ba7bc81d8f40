#!/bin/sh
# record --source tcg traces from the reset vector (issue #15): QEMU starts
# the guest in SeaBIOS at 0xfffffff0 (16-bit real mode), then 32-bit code
# (SeaBIOS, relocated to the top of RAM; the option ROM; the kernel's PVH
# entry), the kernel's 64-bit startup at identity-mapped addresses and the
# kernel half.  The plugin finds each block's mode (16/32/64-bit) and
# writes MODE.Exec where it changes.  Checked on the first 6 M
# instructions: nothing runs before tracing (before_trace 0), QEMU's own
# count (an independent inline counter) = the plugin's, split into traced +
# rep iterations + restarted + last block + after; the first decoded
# instruction is the reset vector's ljmp; vmtrace script decodes firmware
# and kernel with zero errors, exactly the traced instructions (a wrong
# mode would give wrong lengths), with 16-, 32- and 64-bit registers.
# perf script (6.1) on the same recording decodes all guest code as 64-bit
# (the machine's bitness): it errs in the 16/32-bit part (numbers printed),
# all before its first kernel-half branch; from there on its branches are
# vmtrace's (time aside).  --kernel-only keeps the old start: the first
# kernel-half instruction (t0120, t0121).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
need_tcg

tcg_image
tcg_boot_record 1 "" --tcg-limit 6000000
check "record --source tcg --tcg-limit 6000000: exit 0" test $? = 0 || sed 's/^/# /' "$TMP/rec.err"
started=$(sed -n 's/^insns //p' "$TMP/count")
check "QEMU's own count ($started) = the plugin's started count" json_check "$TMP/rec.json" "j['started'] == int('${started:-0}')"
check "nothing ran before tracing began (before_trace 0), not kernel-only" \
	json_check "$TMP/rec.json" "j['before_trace'] == 0 and not j['kernel_only']"
check "started = traced + rep iterations + restarted + filtered + last block + after" \
	json_check "$TMP/rec.json" "j['started'] == j['instructions'] + j['rep_iterations'] + j['restarted'] + \
		j['filtered'] + j['last_block'] + j['after_trace']"
check "the mode changes (16 -> 32 -> 64-bit), every change at a TIP: none guessed wrong" \
	json_check "$TMP/rec.json" "j['mode_changes'] >= 2 and j['mode_resyncs'] == 0"
first_tb=$(sed -n 's/^first_tb //p' "$TMP/count")
check "the first block QEMU ran is the reset vector (${first_tb:-none})" test "$first_tb" = 0xfffffff0

# every traced instruction, streamed (5-6 M lines)
"$VMTRACE" script "$TMP/rec" --guest "$TMP/rec/guest" --insn-trace -F ip,insn,disasm 2>"$TMP/insn.err" | awk '
	NR == 1 { print "first " $0 > "/dev/stderr" }
	/\(bad\)|\(unmapped\)/ { bad++ }
	/%rsp|%rbp|%rip/ { r64++ }
	/%esp|%ebp/ && !/%r/ { r32++ }
	/%sp[^a-z]|%sp$|%bp[^a-z]|%bp$|%si\)|%di\)/ { r16++ }
	$1 ~ /^ffff/ { kernel++ }
	END { print NR, bad + 0, r16 + 0, r32 + 0, r64 + 0, kernel + 0 }' >"$TMP/insn.sum" 2>"$TMP/insn.first"
read -r ninsn bad r16 r32 r64 kernel <"$TMP/insn.sum"
echo "# --insn-trace: $ninsn instructions, $bad undecodable, 16-bit registers in $r16, 32-bit in $r32, 64-bit in $r64, $kernel in the kernel half"
check "vmtrace script --insn-trace: no error, every instruction decodable" sh -c "[ ! -s '$TMP/insn.err' ] && [ '$bad' = 0 ]"
check "the first decoded instruction is the reset vector's far jump ($(cat "$TMP/insn.first"))" \
	grep -q 'first *fffffff0 insn: ea .*ljmp 0xf000:0xe05b' "$TMP/insn.first"
check "it decodes exactly the instructions the plugin traced ($ninsn)" json_check "$TMP/rec.json" "j['instructions'] == int('$ninsn')"
check "16-, 32- and 64-bit code decoded in its mode, up to the kernel half" \
	sh -c "[ '$r16' -gt 0 ] && [ '$r32' -gt 1000 ] && [ '$r64' -gt 0 ] && [ '$kernel' -gt 1000 ]"

F=cpu,time,ip,addr
"$VMTRACE" script "$TMP/rec" --guest "$TMP/rec/guest" --itrace=be -F $F >"$TMP/vt.out" 2>"$TMP/vt.err"
check "vmtrace script --itrace=be: exit 0, zero decode errors" sh -c "[ $? = 0 ] && ! grep -q error '$TMP/vt.out' '$TMP/vt.err'"
timeout 600 "$PERF" script -i "$TMP/rec" --guestkallsyms "$TMP/rec/guest/kallsyms" --guest-code --itrace=be -F $F \
	>"$TMP/perf.out" 2>"$TMP/perf.err"
check "perf script --guest-code: exit 0" test $? = 0
"$PYTHON3" - "$TMP/perf.out" "$TMP/vt.out" >"$TMP/cmp.json" <<'EOF'
import json, re, sys
ERR = re.compile(r"instruction trace error .* ip (0x[0-9a-f]+) code [0-9]+: (.*)")
BR = re.compile(r"\]\s+[0-9.]+:\s+([0-9a-f]+) ")
TIME = re.compile(r" +[0-9]+\.[0-9]+: ")
def split(path):
    lines = open(path).read().splitlines()
    k = next((i for i, l in enumerate(lines) if BR.search(l) and int(BR.search(l).group(1), 16) >> 63), len(lines))
    return lines[:k], [TIME.sub(" ", l) for l in lines[k:]]
pb, pk = split(sys.argv[1])
vb, vk = split(sys.argv[2])
kinds = {}
for l in pb:
    m = ERR.search(l)
    if m:
        kinds[m.group(2)] = kinds.get(m.group(2), 0) + 1
print(json.dumps({"perf_errors_before": sum(kinds.values()), "perf_error_kinds": kinds,
                  "perf_errors_after": sum(1 for l in pk if ERR.search(l)),
                  "perf_branches_before": sum(1 for l in pb if BR.search(l)),
                  "vmtrace_branches_before": sum(1 for l in vb if BR.search(l)),
                  "kernel_lines": len(vk), "kernel_equal": pk == vk}))
EOF
echo "# perf vs vmtrace: $(cat "$TMP/cmp.json")"
check "perf errs in the 16/32-bit boot (it decodes it as 64-bit), all before its first kernel-half branch" \
	json_check "$TMP/cmp.json" "j['perf_errors_before'] > 0 and j['perf_errors_after'] == 0"
check "from the first kernel-half branch on, perf's branches are vmtrace's (time aside)" \
	json_check "$TMP/cmp.json" "j['kernel_equal'] and j['kernel_lines'] > 1000"
finish
