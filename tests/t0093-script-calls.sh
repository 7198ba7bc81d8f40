#!/bin/sh
# vmtrace script --call-trace and --call-ret-trace print what perf script
# prints with the same options, line for line per thread, the call depth
# (perf's thread stack: host and guest calls on the vCPU thread's stack,
# guest lines without one) and the padding included; time aside, and
# perf's power-event lines (psb, cbr) left out.  Both equal synth's ground
# truth (the kinds of the lines in order).  Per CPU the depth is set aside
# (see tests/script-compare.py).  The sanitizer build runs --call-trace
# on the timeless recording only (perf and the comparison take
# the time; --call-ret-trace's lines are a superset).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
code_vs_perf
while read -r name opts; do
	[ -n "$name" ] || continue
	f=$TMP/$name.data
	# shellcheck disable=SC2086
	code_recording "$name" 64K $opts || continue
	pc= nd=
	case $opts in *--per-cpu*) pc=--per-cpu nd=--no-depth ;; esac
	for mode in call ret; do
		[ $mode = ret ] || [ "$name" = thread-1vcpu-timeless ] || ! asan_build || continue
		opt=--call-trace
		[ $mode = ret ] && opt=--call-ret-trace
		# shellcheck disable=SC2086
		timeout 300 "$PERF" script -i "$f" $G $opt >"$TMP/$name.$mode.perf" 2>"$TMP/$name.$mode.perf.err"
		check "$name $opt: perf script exit 0" test $? -eq 0
		# shellcheck disable=SC2086
		"$VMTRACE" script "$f" $G $opt >"$TMP/$name.$mode.vt" 2>"$TMP/$name.$mode.vt.err"
		check "$name $opt: vmtrace script exit 0" test $? -eq 0
		# shellcheck disable=SC2086
		"$PYTHON3" "$top_srcdir/tests/script-compare.py" --time --calls=$mode $nd "$TMP/$name.$mode.perf" \
			"$TMP/$name.$mode.vt" "$TMP/$name.branches" $pc >"$TMP/$name.$mode.cmp" 2>&1
		ck_rc=$?
		check "$name $opt: vmtrace = perf = ground truth ($(head -1 "$TMP/$name.$mode.cmp"))" test $ck_rc -eq 0 ||
			sed 's/^/#   /' "$TMP/$name.$mode.cmp"
	done
done <<'CONFIGS'
thread-1vcpu-timeless   --vcpus 1 --timeless
thread-2vcpu-timed      --vcpus 2 --psb-period 1 --seed 5
thread-2vm-cyc          --vcpus 2 --vms 2 --cyc --psb-period 0
cpu-2vcpu-2cpu-timed    --vcpus 2 --per-cpu --cpus 2 --psb-period 0
CONFIGS

# a timeless single-queue recording is printed in perf's order: the whole
# output is byte for byte perf's (padding and all), power events aside
grep -v 'psb offs: \|cbr: ' "$TMP/thread-1vcpu-timeless.ret.perf" >"$TMP/ret.perf"
check "--call-ret-trace, one vCPU, timeless: byte for byte perf's output" \
	test_cmp "$TMP/ret.perf" "$TMP/thread-1vcpu-timeless.ret.vt"
grep -v 'psb offs: \|cbr: ' "$TMP/thread-1vcpu-timeless.call.perf" >"$TMP/call.perf"
check "--call-trace, one vCPU, timeless: byte for byte perf's output" \
	test_cmp "$TMP/call.perf" "$TMP/thread-1vcpu-timeless.call.vt"

f=$TMP/thread-2vcpu-timed.data
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --call-trace --call-ret-trace >"$TMP/out" 2>&1
check "--call-trace with --call-ret-trace: usage error" test $? -eq 2
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --call-ret-trace --json >"$TMP/calls.json"
"$PYTHON3" - "$TMP/calls.json" "$TMP/thread-2vcpu-timed.ret.vt" >"$TMP/json.check" 2>&1 <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
lines = sum(1 for _ in open(sys.argv[2]))
split = sum(1 for e in ev if e['kind'] in ('vmentry', 'vmexit'))
assert {e['kind'] for e in ev} <= {'call', 'return', 'vmentry', 'vmexit', 'trace-begin', 'trace-end', 'async',
                                   'syscall', 'sysret', 'iret', 'int'}, 'jumps shown'
assert len(ev) + split == lines, (len(ev), split, lines)
assert all(isinstance(e['depth'], int) for e in ev) and max(e['depth'] for e in ev) > 2
print('ok', len(ev))
PY
check "--call-ret-trace --json: the same branches, each with its depth ($(tail -1 "$TMP/json.check"))" \
	grep -q '^ok' "$TMP/json.check"
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --call-trace --host-only >"$TMP/host.out"
check "--call-trace --host-only: no guest line" sh -c "test -s '$TMP/host.out' && ! grep -q 'guest.kernel' '$TMP/host.out'"
finish
