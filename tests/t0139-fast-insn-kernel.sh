#!/bin/sh
# The 64-bit length decoder the walk and the disassembly share
# (src/decode/fastinsn.h) on the Debian kernel's real code: test-decode's
# fast-insn-kernel sweeps every function of the guest code directory from
# its start and compares each answer of the fast decoder (length, relative
# operands, displacement) with Zydis's, and every 8th function's text from
# the disassembly table (texts by bytes included) with Zydis's formatting
# at its address; then vmtrace script --insn-trace on a recording of that
# code with VMTRACE_WALK_CHECK=1 (every fast decode of the walk and of the
# disassembly compared with Zydis, abort on a difference) exits 0 and
# prints the same bytes as without the check.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
TEST_DECODE=$(dirname "$VMTRACE")/tests/test-decode
[ -x "$TEST_DECODE" ] || skip "$TEST_DECODE not built (make check builds it)"
make_code_dirs

VT_TEST_CODE=$GUEST_CODE "$TEST_DECODE" -p /decode/fast-insn-kernel >"$TMP/unit" 2>&1
check "test-decode fast-insn-kernel on the kernel's code: fast decodes and texts = Zydis's ($(sed -n \
	's/^# \([0-9]* instructions.*\)/\1/p' "$TMP/unit"))" grep -qx 'ok 1 /decode/fast-insn-kernel' "$TMP/unit" ||
	tail -5 "$TMP/unit" | sed 's/^/#   /'

code_recording rec 128K --vcpus 2 --psb-period 1
G="--guestkallsyms $GUEST_CODE/kallsyms"
# shellcheck disable=SC2086
"$VMTRACE" script "$TMP/rec.data" $G --insn-trace >"$TMP/plain" 2>"$TMP/plain.err"
r_plain=$?
# shellcheck disable=SC2086
VMTRACE_WALK_CHECK=1 "$VMTRACE" script "$TMP/rec.data" $G --insn-trace >"$TMP/check" 2>"$TMP/check.err"
r_check=$?
check "script --insn-trace: exit $r_plain, $(wc -l <"$TMP/plain") lines" \
	sh -c "test $r_plain -eq 0 && test $(wc -l <"$TMP/plain") -gt 10000"
check "the same with VMTRACE_WALK_CHECK=1 (no fast decode differs from Zydis's): exit $r_check, same bytes" \
	sh -c "test $r_check -eq 0 && cmp -s '$TMP/plain' '$TMP/check'" || head -3 "$TMP/check.err" | sed 's/^/#   /'
finish
