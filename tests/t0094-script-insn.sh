#!/bin/sh
# vmtrace script --insn-trace prints every instruction perf script
# --insn-trace prints - address, symbol+offset, DSO, guest marking and the
# instruction bytes - line for line per thread (time aside; vmtrace adds the
# AT&T disassembly after the bytes), and its flow jumps only where synth's
# ground truth branches.  Byte for byte perf's lines on a timeless
# recording once the disassembly is cut.  The same with each queue's
# instructions formatted by several threads (formers, jobs of one event).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
code_vs_perf
while read -r name opts; do
	[ -n "$name" ] || continue
	f=$TMP/$name.data
	# shellcheck disable=SC2086
	code_recording "$name" 32K $opts || continue
	pc=
	case $opts in *--per-cpu*) pc=--per-cpu ;; esac
	# shellcheck disable=SC2086
	timeout 300 "$PERF" script -i "$f" $G --insn-trace >"$TMP/$name.perf" 2>"$TMP/$name.perf.err"
	check "$name: perf script --insn-trace exit 0" test $? -eq 0
	# shellcheck disable=SC2086
	"$VMTRACE" script "$f" $G --insn-trace >"$TMP/$name.vt" 2>"$TMP/$name.vt.err"
	check "$name: vmtrace script --insn-trace exit 0" test $? -eq 0
	# shellcheck disable=SC2086
	"$PYTHON3" "$top_srcdir/tests/script-compare.py" --insns "$TMP/$name.perf" "$TMP/$name.vt" \
		"$TMP/$name.branches" $pc >"$TMP/$name.cmp" 2>&1
	ck_rc=$?
	check "$name: vmtrace = perf = ground truth ($(head -1 "$TMP/$name.cmp"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/$name.cmp"
	# formatted by several threads a queue (t0147; 16 CPUs counted on any
	# machine, jobs of one event: a replayed seed before each) - the same
	# against perf and the ground truth
	# shellcheck disable=SC2086
	VMTRACE_CPUS=16 VMTRACE_FORMAT_JOB=1 VMTRACE_RANGES_STATS=1 "$VMTRACE" script --jobs 16 "$f" $G --insn-trace \
		>"$TMP/$name.vtf" 2>"$TMP/$name.vtf.err"
	vf_rc=$?
	check "$name: formers: exit $vf_rc, $(grep -o '[0-9]* jobs formatted apart' "$TMP/$name.vtf.err")" \
		sh -c "test $vf_rc -eq 0 && ! grep -q '^vmtrace script: 0 jobs' '$TMP/$name.vtf.err'"
	# shellcheck disable=SC2086
	"$PYTHON3" "$top_srcdir/tests/script-compare.py" --insns "$TMP/$name.perf" "$TMP/$name.vtf" \
		"$TMP/$name.branches" $pc >"$TMP/$name.cmpf" 2>&1
	ck_rc=$?
	check "$name: formers: vmtrace = perf = ground truth ($(head -1 "$TMP/$name.cmpf"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/$name.cmpf"
done <<'CONFIGS'
thread-1vcpu-timeless   --vcpus 1 --timeless
thread-2vcpu-timed      --vcpus 2 --psb-period 1 --seed 5
cpu-2vcpu-2cpu-timed    --vcpus 2 --per-cpu --cpus 2 --psb-period 0 --size 64K
CONFIGS

v=$TMP/thread-1vcpu-timeless.vt
sed 's/\t\t.*//' "$v" >"$TMP/bytes.vt"
check "timeless, one vCPU: byte for byte perf's lines, disassembly cut" test_cmp "$TMP/thread-1vcpu-timeless.perf" "$TMP/bytes.vt"
# the disassembly: AT&T, direct calls and jumps name their target
"$PYTHON3" - "$v" >"$TMP/disasm.check" 2>&1 <<'PY'
import re, struct, sys
n = calls = 0
for line in open(sys.argv[1]):
    m = re.search(r' ([0-9a-f]{16}) .* insn: ([0-9a-f ]+)\t\t(.*)$', line.rstrip('\n'))
    ip, code, text = int(m[1], 16), bytes.fromhex(m[2]), m[3]
    assert text and '(bad)' not in text and '(unmapped)' not in text, line
    if code[0] == 0xe8:
        target = (ip + 5 + struct.unpack('<i', code[1:5])[0]) & (1 << 64) - 1
        assert text == 'call 0x%x' % target, line
        calls += 1
    if code == b'\xc3':
        assert text == 'ret', line
    if len(code) == 3 and code[0] == 0x48 and code[1] == 0x89 and code[2] >= 0xc0:
        assert re.match(r'mov %r\w+, %r\w+$', text), line    # AT&T: source first
    n += 1
assert calls > 100
print('ok', n, calls)
PY
check "disassembly: AT&T, every instruction decoded, call targets ($(tail -1 "$TMP/disasm.check"))" grep -q '^ok' "$TMP/disasm.check"
f=$TMP/thread-2vcpu-timed.data
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --insn-trace --call-trace >"$TMP/out" 2>&1
check "--insn-trace with --call-trace: usage error" test $? -eq 2
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --insn-trace --guest-only >"$TMP/guest.out"
check "--insn-trace --guest-only: only guest instructions" sh -c "test -s '$TMP/guest.out' && ! grep -v '^ *:[0-9]* .*guest.kernel.kallsyms' '$TMP/guest.out'"
finish
