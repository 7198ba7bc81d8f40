#!/bin/sh
# vmtrace script --itrace=OPTS, -F FIELDS and --time as perf script takes
# them: on a timeless recording of real kernel code (one queue, so the
# same order as perf) every combination below prints perf's output byte for
# byte; +/- field forms change vmtrace's default; --time keeps exactly the
# events in the range; bad values are usage errors.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
code_vs_perf
f=$TMP/rec.data
"$VMTRACE" synth -o "$f" --size 24K --vcpus 1 --timeless --host-code "$HOST_CODE" --guest-code "$GUEST_CODE" \
	2>/dev/null || { fail "synth"; finish; }
same() {   # same ITRACE FIELDS [VMTRACE_FIELDS]: perf's and vmtrace's outputs are equal
	# shellcheck disable=SC2086
	timeout 300 "$PERF" script -i "$f" $G --itrace="$1" -F "$2" >"$TMP/perf.out" 2>&1 &&
		"$VMTRACE" script "$f" $G --itrace="$1" -F "${3:-$2}" >"$TMP/vt.out" 2>&1 &&
		test_cmp "$TMP/perf.out" "$TMP/vt.out"
}
F=comm,tid,flags,ip,sym,symoff,dso,addr
for it in be b ce cre re; do
	check "--itrace=$it -F $F: perf's output" same "$it" "$F"
done
for fl in tid,ip,addr comm,tid,ip,sym,dso comm,tid,period,event,ip,sym tid,ip,sym,symoff,addr,insn \
	comm,tid,cpu,ip,sym,symoff,dso,addr tid,flags,ip,dso,addr; do
	check "--itrace=be -F $fl: perf's output" same be "$fl"
done
for fl in comm,tid,ip,sym,symoff,dso,insn tid,ip,insn comm,tid,period,event,ip,sym; do
	check "--itrace=i0ns -F $fl: perf's output" same i0ns "$fl"
done
check "-F -dso,-cpu: vmtrace's default without them" same be comm,tid,ip,sym,symoff,addr -dso,-cpu
check "-F +flags: vmtrace's default with them" same be comm,tid,cpu,flags,ip,sym,symoff,dso,addr +flags
"$VMTRACE" script "$f" $G --insn-trace -F -disasm >"$TMP/vt.out" 2>&1
timeout 300 "$PERF" script -i "$f" $G --insn-trace >"$TMP/perf.out" 2>&1
check "--insn-trace -F -disasm: perf --insn-trace's output" test_cmp "$TMP/perf.out" "$TMP/vt.out"

# --- --time on a timed recording -----------------------------------------
t=$TMP/timed.data
"$VMTRACE" synth -o "$t" --size 64K --vcpus 2 --psb-period 1 --seed 5 --host-code "$HOST_CODE" \
	--guest-code "$GUEST_CODE" 2>/dev/null && "$VMTRACE" correlate --in-place "$t" >/dev/null 2>&1 ||
	fail "timed recording"
# JSON carries the times in nanoseconds
"$VMTRACE" script "$t" $G --json >"$TMP/all.json" 2>&1
read -r a b <<EOT
$("$PYTHON3" -c 'import json, sys
t = [json.loads(l)["time"] for l in open(sys.argv[1])]
f = lambda ns: "%d.%09d" % divmod(ns, 10**9)
print(f(t[len(t) // 3] + 1), f(t[2 * len(t) // 3]))' "$TMP/all.json")
EOT
"$VMTRACE" script "$t" $G --json --time "$a,$b" >"$TMP/range.json" 2>&1
check "--time $a,$b: exit 0" test $? -eq 0
"$PYTHON3" - "$TMP/all.json" "$TMP/range.json" "$a" "$b" >"$TMP/range.check" 2>&1 <<'PY'
import json, sys
# every field, aux_offset too (t0045: the same on every run)
allv = [json.loads(l) for l in open(sys.argv[1])]
rng = [json.loads(l) for l in open(sys.argv[2])]
a, b = (int(x.replace('.', '')) for x in sys.argv[3:5])
want = [e for e in allv if a <= e['time'] <= b]
assert want and rng == want and len(want) < len(allv), (len(rng), len(want))
print('ok', len(rng), 'of', len(allv))
PY
check "--time: exactly the events of the range, to the nanosecond ($(tail -1 "$TMP/range.check"))" grep -q '^ok' "$TMP/range.check"
"$VMTRACE" script "$t" $G --json --time "$b," >"$TMP/open.json" 2>&1
check "--time START,: from START to the end" test "$(tail -1 "$TMP/open.json")" = "$(tail -1 "$TMP/all.json")"
"$VMTRACE" script "$t" $G -F tid,time,ip,addr --time ",$a" >"$TMP/head.out" 2>&1
check "--time ,END: from the start" test "$(head -1 "$TMP/head.out")" = "$("$VMTRACE" script "$t" $G -F tid,time,ip,addr | head -1)"

# --- usage errors --------------------------------------------------------
for bad in "--itrace=x" "--itrace=i" "--itrace=iz" "-F tid,bogus" "-F sym" "--time 5" "--time 2,1" "--time x,"; do
	# shellcheck disable=SC2086
	"$VMTRACE" script "$t" $G $bad >"$TMP/out" 2>&1
	check "$bad: usage error" test $? -eq 2
done
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --time 1,2 >"$TMP/out" 2>&1
check "--time on a timeless recording: usage error that says so" sh -c "test $? -eq 2 && grep -q timeless '$TMP/out'"
finish
