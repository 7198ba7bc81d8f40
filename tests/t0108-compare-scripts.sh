#!/bin/sh
# The comparison scripts the script tests stand on (tests/script-compare.py,
# tests/time-check.py) catch what they are there to catch: on a real
# vmtrace/perf pair of one small recording they agree, and each kind of
# difference - a branch's address, a missing line, a line the ground truth
# does not have, a time out of bounds, a line they cannot read - makes them
# fail; a time that differs alone does not - unless --time asks for equal
# times (branches: vmtrace's are perf's since session 26).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
code_vs_perf

# (a PSB every 2 KiB: each vCPU needs a guest TSC packet for correlate -
# every 4 KiB left one without since session 33's synth)
code_recording r 32K --vcpus 2 --psb-period 0 || finish
F=comm,tid,cpu,time,ip,sym,symoff,dso,addr
timeout 120 "$PERF" script -i "$TMP/r.data" $G --itrace=be -F $F >"$TMP/p" 2>/dev/null
"$VMTRACE" script "$TMP/r.data" $G >"$TMP/v" 2>/dev/null
SC="$top_srcdir/tests/script-compare.py"
cmp_rc() { "$PYTHON3" "$SC" "$@" >"$TMP/out" 2>&1; echo $?; }

check "branches: vmtrace = perf = truth ($(wc -l <"$TMP/p") lines)" test "$(cmp_rc "$TMP/p" "$TMP/v" "$TMP/r.branches")" = 0
# the 100th line's target address off by one in vmtrace's output
"$PYTHON3" -c 'import re, sys
l = open(sys.argv[1]).read().split("\n")
l[99] = re.sub(r"=> +([0-9a-f]+)", lambda m: "=> %16x" % (int(m[1], 16) + 1), l[99])
sys.stdout.write("\n".join(l))' "$TMP/v" >"$TMP/v.addr"
check "...a target address changed: vmtrace differs from perf (exit 1)" \
	sh -c "[ $(cmp_rc "$TMP/p" "$TMP/v.addr" "$TMP/r.branches") = 1 ] && grep -q 'vmtrace differs from perf' '$TMP/out'"
check "...and from the ground truth" grep -q "vmtrace differs from the ground truth" "$TMP/out"
sed 200d "$TMP/v" >"$TMP/v.gone"
check "...a line missing: exit 1" test "$(cmp_rc "$TMP/p" "$TMP/v.gone" "$TMP/r.branches")" = 1
# both tools wrong the same way: only the truth tells
check "...perf and vmtrace wrong alike: both differ from the truth" \
	sh -c "[ $(cmp_rc "$TMP/v.addr" "$TMP/v.addr" "$TMP/r.branches") = 1 ] &&
	       grep -q 'and perf: the same lines) differs from the ground truth' '$TMP/out'"
# every time another, nothing else
sed -E 's/ [0-9]+\.[0-9]+: / 1.000000001: /' "$TMP/v" >"$TMP/v.time"
check "...times differing alone: still agree" sh -c "! cmp -s '$TMP/v' '$TMP/v.time' &&
	[ $(cmp_rc "$TMP/p" "$TMP/v.time" "$TMP/r.branches") = 0 ]"
# --time (since session 26 vmtrace times branches as perf does): the times
# are compared too - equal here; one line's time 1 us later differs
check "--time: vmtrace's times = perf's" test "$(cmp_rc --time "$TMP/p" "$TMP/v" "$TMP/r.branches")" = 0
"$PYTHON3" -c 'import re, sys
l = open(sys.argv[1]).read().split("\n")
l[99] = re.sub(r" (\d+)\.(\d{6}): ", lambda m: " %s.%06d: " % (m[1], int(m[2]) + 1), l[99], count=1)
sys.stdout.write("\n".join(l))' "$TMP/v" >"$TMP/v.late"
check "--time: one branch 1 us later: exit 1" sh -c "! cmp -s '$TMP/v' '$TMP/v.late' &&
	[ $(cmp_rc --time "$TMP/p" "$TMP/v.late" "$TMP/r.branches") = 1 ] &&
	[ $(cmp_rc "$TMP/p" "$TMP/v.late" "$TMP/r.branches") = 0 ]"
# --ns: nine decimals on branch lines, as perf script --ns prints them
timeout 120 "$PERF" script -i "$TMP/r.data" $G --itrace=be --ns -F $F >"$TMP/p.ns" 2>/dev/null
"$VMTRACE" script "$TMP/r.data" $G --ns >"$TMP/v.ns" 2>/dev/null
check "--ns: vmtrace's lines = perf script --ns's, nanoseconds included" sh -c "
	grep -q ' [0-9]*\.[0-9]\{9\}: ' '$TMP/v.ns' && [ $(cmp_rc --lines --time "$TMP/p.ns" "$TMP/v.ns") = 0 ]"
check "--lines --time: equal, and the later one differs" sh -c "[ $(cmp_rc --lines --time "$TMP/p" "$TMP/v") = 0 ] &&
	[ $(cmp_rc --lines --time "$TMP/p" "$TMP/v.late") = 1 ]"
{ head -5 "$TMP/v"; echo "not a line of either tool"; } >"$TMP/v.bad"
check "...an unreadable line: refused, named" sh -c "[ $(cmp_rc "$TMP/p" "$TMP/v.bad" "$TMP/r.branches") != 0 ] &&
	grep -q 'unexpected line: not a line' '$TMP/out'"

# --lines (any -F): the same per thread, time aside
check "--lines: agree" test "$(cmp_rc --lines "$TMP/p" "$TMP/v")" = 0
check "--lines: times differing alone agree" test "$(cmp_rc --lines "$TMP/p" "$TMP/v.time")" = 0
check "--lines: a changed address differs (exit 1)" test "$(cmp_rc --lines "$TMP/p" "$TMP/v.addr")" = 1
check "--lines: a missing line differs" test "$(cmp_rc --lines "$TMP/p" "$TMP/v.gone")" = 1

# time-check.py: vmtrace's JSON times and perf's against the truth
"$VMTRACE" script "$TMP/r.data" $G --itrace=b --json >"$TMP/j" 2>/dev/null
timeout 120 "$PERF" script -i "$TMP/r.data" $G --itrace=be --ns -F tid,cpu,time,ip,addr >"$TMP/t" 2>/dev/null
TC="$top_srcdir/tests/time-check.py"
"$PYTHON3" "$TC" "$TMP/r.branches" "$TMP/j" "$TMP/t" >"$TMP/tc" 2>&1
ck_rc=$?
check "time-check: vmtrace and perf within bounds of the truth ($(grep -c '^ok' "$TMP/tc") checks)" test $ck_rc -eq 0
# perf's 50th time 1 ms later: out of bounds
"$PYTHON3" -c 'import re, sys
l = open(sys.argv[1]).read().split("\n")
def late(m):
    t = int(m[1]) * 10**9 + int(m[2]) + 10**6
    return "%d.%09d:" % (t // 10**9, t % 10**9)
l[49] = re.sub(r"(\d+)\.(\d{9}):", late, l[49], count=1)
sys.stdout.write("\n".join(l))' "$TMP/t" >"$TMP/t.late"
"$PYTHON3" "$TC" "$TMP/r.branches" "$TMP/j" "$TMP/t.late" >"$TMP/tc" 2>&1
check "time-check: one perf time 1 ms late fails it" sh -c "[ $? -ne 0 ] && grep -q '^FAIL: perf - truth' '$TMP/tc'"
{ head -3 "$TMP/t"; echo "garbage"; } >"$TMP/t.bad"
"$PYTHON3" "$TC" "$TMP/r.branches" "$TMP/j" "$TMP/t.bad" >"$TMP/tc" 2>&1
check "time-check: an unreadable perf line is refused" sh -c "[ $? -ne 0 ] && grep -q 'unexpected line: garbage' '$TMP/tc'"
finish
