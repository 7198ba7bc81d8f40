#!/bin/sh
# vmtrace synth --call-depth N keeps the call traces of real-code walks
# shallow: without it the walk calls into functions that never return
# (panic(), __stack_chk_fail()) and recurses without end, so perf's thread
# stack - and both tools' --call-trace indentation - grows to thousands of
# frames (the calls rows of scripts/bench-script.sh measured the pipe).
# With it the deepest call is a small fraction of that, and perf, vmtrace
# and synth's ground truth still agree on the calls (64 KiB, timeless).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
code_vs_perf
# the deepest --call-trace line of vmtrace (perf's thread stack depth)
max_depth() {
	# shellcheck disable=SC2086
	"$VMTRACE" script "$1" $G --call-trace --json 2>/dev/null |
		"$PYTHON3" -c 'import sys, json; print(max(json.loads(l).get("depth", 0) for l in sys.stdin))'
}
code_recording free 64K --vcpus 2 --timeless --seed 3 || finish
code_recording bounded 64K --vcpus 2 --timeless --seed 3 --call-depth 16 || finish
free=$(max_depth "$TMP/free.data") bounded=$(max_depth "$TMP/bounded.data")
check "without --call-depth the walk's calls pile up (deepest $free frames)" test "$free" -gt 500
check "--call-depth 16: deepest $bounded frames, under 1/8 of $free" test $((bounded * 8)) -lt "$free"
# the guest keeps its stack across injected events (their handlers return
# to the code they interrupted): a guest that dropped it at each one left
# perf's stack its frames for good, 427..942 deep in 256 KiB of one vCPU
# (seeds 1..5, a dense mix as the bench's; vmtrace's --json depth), 67..206
# where it keeps it
code_recording long 256K --vcpus 1 --host-steps 2000 --seed 4 --call-depth 16 || finish
long=$(max_depth "$TMP/long.data")
check "--call-depth 16, 256 KiB of one vCPU: deepest $long frames at any point of the trace, under 300" \
	test "$long" -lt 300
# shellcheck disable=SC2086
timeout 300 "$PERF" script -i "$TMP/bounded.data" $G --call-trace >"$TMP/perf.out" 2>/dev/null
check "perf script --call-trace exit 0" test $? -eq 0
# shellcheck disable=SC2086
"$VMTRACE" script "$TMP/bounded.data" $G --call-trace >"$TMP/vt.out" 2>/dev/null
check "vmtrace script --call-trace exit 0" test $? -eq 0
"$PYTHON3" "$top_srcdir/tests/script-compare.py" --time --calls=call "$TMP/perf.out" "$TMP/vt.out" \
	"$TMP/bounded.branches" >"$TMP/cmp" 2>&1
ck_rc=$?
check "--call-depth recording: vmtrace = perf = ground truth ($(head -1 "$TMP/cmp"))" test $ck_rc -eq 0 ||
	sed 's/^/#   /' "$TMP/cmp"
"$VMTRACE" synth -o "$TMP/x.data" --size 64K --call-depth 4 >/dev/null 2>&1
check "--call-depth without real code: usage error (exit 2)" test $? -eq 2
check "... nothing written" test ! -e "$TMP/x.data"
finish
