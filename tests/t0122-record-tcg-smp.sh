#!/bin/sh
# record --source tcg of an SMP guest (issue #15): QEMU boots the test
# kernel with -smp 2 and a plain "-accel tcg" (QEMU's default for x86_64
# is a thread per vCPU, MTTCG: vmtrace adds thread=single, so the vCPUs
# take turns in one thread and every count is exact).  The window (--tcg-skip
# 155 M, --tcg-limit 30 M) holds Linux bringing up the AP, wherever it
# falls: INIT/SIPI came at 161-169 M instructions in runs (the boot's
# delays are host time, so where depends on QEMU's speed: the load, the
# plugin); the checks take the AP's start from the recording (its first
# instruction's time: the instruction clock counts instructions) and perf
# decodes from there.  vCPU 0 is traced from its first kernel
# instruction after the skip, vCPU 1 from its first instruction after the
# SIPI - the real-mode trampoline at 0x99000 - through 32-bit to the
# kernel half.  Checked: one AUX stream and thread per vCPU; each vCPU's
# started count = QEMU's own for that vCPU (tests/tcg-count.so percpu=1:
# a callback per instruction with the vCPU's index); vmtrace script decodes
# exactly each vCPU's traced instructions with zero errors; the AP's first
# decoded instructions are the trampoline's, in 16-bit, then 32-bit, then
# 64-bit code; vmtrace report's per-vCPU section has both; perf script on
# the AP (numbers printed: perf 6.1 decodes guest code as 64-bit).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_perf
need_python
need_tcg

tcg_image
tcg_boot_record 2 ,percpu=1 --tcg-skip 155000000 --tcg-limit 30000000
check "record --source tcg -smp 2: exit 0" test $? = 0 || sed 's/^/# /' "$TMP/rec.err"
echo "# QEMU's count: $(tr '\n' ' ' <"$TMP/count")"
echo "# record: $(grep vCPU "$TMP/rec.err" | tr '\n' ' ')"
check "one TCG thread (vmtrace added thread=single): not MTTCG" json_check "$TMP/rec.json" "not j['mttcg']"
check "both vCPUs traced, each its own AUX stream and thread" \
	json_check "$TMP/rec.json" "j['vcpus'] == 2 and [v['vcpu'] for v in j['per_vcpu']] == [0, 1] and \
		j['per_vcpu'][0]['tid'] != j['per_vcpu'][1]['tid'] and min(v['instructions'] for v in j['per_vcpu']) > 1000"
"$PYTHON3" - "$TMP/count" "$TMP/rec.json" >"$TMP/percpu" <<'EOF'
import json, sys
qemu = {int(l.split()[1]): int(l.split()[3]) for l in open(sys.argv[1]) if l.startswith("vcpu ")}
j = json.load(open(sys.argv[2]))
print("ok" if qemu and qemu == {v["vcpu"]: v["started"] for v in j["per_vcpu"]} and sum(qemu.values()) == j["started"]
      else "differ: QEMU %s plugin %s" % (qemu, j["per_vcpu"]))
EOF
check "each vCPU's started count = QEMU's own for that vCPU ($(cat "$TMP/percpu"))" test "$(cat "$TMP/percpu")" = ok
check "the AP's 16 -> 32 -> 64-bit startup: MODE.Exec at TIPs, none guessed wrong" \
	json_check "$TMP/rec.json" "j['mode_changes'] >= 2 and j['mode_resyncs'] == 0"
AP=$("$PYTHON3" -c "import json; print(json.load(open('$TMP/rec.json'))['per_vcpu'][1]['tid'])")
BSP=$("$PYTHON3" -c "import json; print(json.load(open('$TMP/rec.json'))['per_vcpu'][0]['tid'])")

# every traced instruction's thread, and the errors, in one pass
"$VMTRACE" script "$TMP/rec" --guest "$TMP/rec/guest" --itrace=i0nse -F tid 2>"$TMP/i.err" | awk -v ap="$AP" -v bsp="$BSP" '
	/error/ { err++; next }
	$1 == bsp { b++ } $1 == ap { a++ }
	END { print b + 0, a + 0, err + 0 }' >"$TMP/i.sum"
read -r nbsp nap nerr <"$TMP/i.sum"
check "vmtrace script: zero decode errors on both vCPUs" sh -c "[ '$nerr' = 0 ] && [ ! -s '$TMP/i.err' ]"
# exact also where code the boot patched in the window runs right after a
# PSB+ (script walks it as of that PSB+: tests/test-tcg /tcg/poke-after-psb)
check "it decodes each vCPU's traced instructions ($nbsp, $nap)" \
	json_check "$TMP/rec.json" "[v['instructions'] for v in j['per_vcpu']] == [int('$nbsp'), int('$nap')]"

# the AP from its first instruction to its first kernel-half one
"$VMTRACE" script "$TMP/rec" --guest "$TMP/rec/guest" --insn-trace -F time,ip,insn,disasm --tid "$AP" 2>/dev/null | awk '
	{ print }
	$2 ~ /^ffff/ { exit }' >"$TMP/ap.txt"
# its start: perf time = the instruction clock's TSC (one tick an instruction from VT_TCG_T0)
ap_time=$(awk 'NR == 1 { sub(":", "", $1); print $1 }' "$TMP/ap.txt")
ap_at=$(awk -v t="${ap_time:-0}" 'BEGIN { printf "%.0f", t * 1e9 - 268435456 }')
echo "# the AP: $(wc -l <"$TMP/ap.txt") instructions from $(head -1 "$TMP/ap.txt" | awk '{print $2}') to the kernel half;" \
	"it started at time $ap_time (instruction $ap_at; the window: 155-185 M)"
check "the window holds the AP's start, before its last 1 M instructions" \
	sh -c "[ '$ap_at' -gt 155000000 ] && [ '$ap_at' -lt 184000000 ]"
check "the AP's first instruction is the trampoline's at 0x99000 (cli)" sh -c "head -1 '$TMP/ap.txt' | grep -q ' 99000 insn: fa[[:space:]]*cli'"
check "the AP runs 16-bit (ljmp seg:off), 32-bit (%e.., ljmp to a selector) and reaches the kernel half" sh -c "
	grep -q 'ljmp 0x9800:' '$TMP/ap.txt' && grep -q '%e[abcds][xip]' '$TMP/ap.txt' &&
	tail -1 '$TMP/ap.txt' | grep -q ': *ffff'"

"$VMTRACE" report "$TMP/rec" --guest "$TMP/rec/guest" --json >"$TMP/report.json" 2>"$TMP/report.err"
rc=$?
"$PYTHON3" -c "
import json, sys
v = json.load(open(sys.argv[1])).get('vcpus', [])
print(len(v), ' '.join('vcpu %s tid %s guest %s' % (x.get('vcpu'), x.get('tid'), x.get('guest')) for x in v))" \
	"$TMP/report.json" >"$TMP/report.sum" 2>&1
check "vmtrace report: exit 0, its per-vCPU section has both vCPUs ($(cat "$TMP/report.sum"))" \
	sh -c "[ $rc = 0 ] && grep -q '^2 vcpu 0 .*vcpu 1 ' '$TMP/report.sum'"

# perf 6.1 ignores guest TEXT_POKEs (errors on code the kernel patched) and
# decodes guest code as 64-bit; --tid drops guest samples: all, then the
# AP's; from the AP's start for 5 M instructions (5 ms of perf time)
ap_end=$(awk -v t="${ap_time:-0}" 'BEGIN { printf "%.9f", t + 0.005 }')
timeout 600 "$PERF" script -i "$TMP/rec" --guestkallsyms "$TMP/rec/guest/kallsyms" --guest-code --itrace=be -F tid,ip,addr \
	--time "$ap_time,$ap_end" >"$TMP/perf.out" 2>"$TMP/perf.err"
check "perf script: exit 0" test $? = 0
"$PYTHON3" - "$TMP/perf.out" "$AP" <<'EOF' >"$TMP/perf.sum"
import re, sys
ap = sys.argv[2]
br = re.compile(r"^\s*(\d+)\s+([0-9a-f]+) =>")
er = re.compile(r"instruction trace error .* tid (\d+) ip (0x[0-9a-f]+)")
mine = []
for l in open(sys.argv[1]):
    m, e = br.match(l), er.search(l)
    if (m and m.group(1) == ap) or (e and e.group(1) == ap):
        mine.append((int(m.group(2), 16) if m else None, bool(e)))
k = next((i for i, (ip, e) in enumerate(mine) if ip and ip >> 63), len(mine))
print("before its first kernel-half branch: %d errors, %d branches; from there: %d errors, %d branches"
      % (sum(e for _, e in mine[:k]), sum(not e for _, e in mine[:k]), sum(e for _, e in mine[k:]), sum(not e for _, e in mine[k:])))
EOF
echo "# perf script on the AP: $(cat "$TMP/perf.sum")"
finish
