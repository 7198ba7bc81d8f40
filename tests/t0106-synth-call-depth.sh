#!/bin/sh
# vmtrace synth --call-depth N keeps the call traces of real-code walks
# shallow: without it the walk calls into functions that never return
# (panic(), __stack_chk_fail()) and recurses, so perf's thread stack - and
# both tools' --call-trace indentation - grows deep between VM exits (to
# thousands of frames before session 33, when exits still left frames on
# it: the calls rows of scripts/bench-script.sh measured the pipe).  With
# it the deepest call is a fraction of that, and perf, vmtrace and
# synth's ground truth still agree on the calls (64 KiB, timeless; and on
# the exit-heavy recording below, 256 KiB, timed).
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
check "without --call-depth the walk's calls pile up (deepest $free frames)" test "$free" -gt 50
check "--call-depth 16: deepest $bounded frames, under half of $free" test $((bounded * 2)) -lt "$free"
# the guest keeps its stack across injected events (their handlers return
# to the code they interrupted): a guest that dropped it at each one left
# perf's stack its frames for good, 427..942 deep in 256 KiB of one vCPU
# (seeds 1..5, a dense mix as the bench's; vmtrace's --json depth), 67..206
# where it keeps it
code_recording long 256K --vcpus 1 --host-steps 2000 --seed 4 --call-depth 16 || finish
long=$(max_depth "$TMP/long.data")
check "--call-depth 16, 256 KiB of one vCPU: deepest $long frames at any point of the trace, under 300" \
	test "$long" -lt 300
# calls_agree NAME WHAT: NAME's --call-trace by perf and vmtrace (exit 0
# each), equal to each other and to synth's ground truth
calls_agree() {
	# shellcheck disable=SC2086
	timeout 300 "$PERF" script -i "$TMP/$1.data" $G --call-trace >"$TMP/$1.perf" 2>/dev/null
	check "$2: perf script --call-trace exit 0" test $? -eq 0
	# shellcheck disable=SC2086
	"$VMTRACE" script "$TMP/$1.data" $G --call-trace >"$TMP/$1.vt" 2>/dev/null
	check "$2: vmtrace script --call-trace exit 0" test $? -eq 0
	"$PYTHON3" "$top_srcdir/tests/script-compare.py" --time --calls=call "$TMP/$1.perf" "$TMP/$1.vt" \
		"$TMP/$1.branches" >"$TMP/cmp" 2>&1
	ck_rc=$?
	check "$2: vmtrace = perf = ground truth ($(head -1 "$TMP/cmp"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/cmp"
}
calls_agree bounded "--call-depth recording"
# VM exits: the host code's KVM stub is shaped as Linux 6.1's (kernel-code.py
# --kvm-stub: vmx_vcpu_run calls the exit handler, then __vmx_vcpu_run,
# whose VMRESUME exits to vmx_vmexit, a `ret` to vmx_vcpu_run), and synth
# gives the host back the call stack it had at the VM entry, so that return
# pops the entry, the guest's frames and the exit off perf's stack - as
# the real __vmx_vcpu_run's does.  With the old stub (vmx_vmexit: the
# handler's call, then VMRESUME) every exit whose guest had returned past
# its trace's first level left two frames for good: 272..313 deep on
# 256 KiB of one exit-heavy vCPU (seeds 1..3), 17..20 now.  A host walk
# that lost its way restarts (TIP.PGE) where the handler returns to, and a
# decoder's stack pops to it there (restarting at the handler's call left
# the lost walk's frames: 393..467 deep; the old synth - the host's stack
# emptied at exits, restarts at vmx_vmexit - with the new stub 2,075..2,220).
code_recording exits 256K --vcpus 1 --host-steps 6 --seed 1 --call-depth 16 || finish
exits=$(max_depth "$TMP/exits.data")
check "exit-heavy, 256 KiB of one vCPU: deepest $exits frames, under 60" test "$exits" -lt 60
# the truth: after each VM exit the host returns from vmx_vmexit to
# vmx_vcpu_run+7; each restart begins at vmx_vcpu_run+2; there are some
"$PYTHON3" - "$TMP/exits.branches" >"$TMP/shape" 2>&1 <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith('#')]
exits = returns = begins = bad = 0
for i, r in enumerate(rows):
    if r[2] == 'vmexit':
        exits += 1
        nxt = rows[i + 1] if i + 1 < len(rows) else None
        if nxt and nxt[2] == 'return' and int(nxt[3], 16) == 0xffffffffc0a0000f and int(nxt[4], 16) == 0xffffffffc0a00007:
            returns += 1
        elif nxt:
            bad += 1
    elif r[2] == 'trace-begin':
        begins += 1
        bad += int(r[4], 16) != 0xffffffffc0a00002
print(exits, returns, begins, bad)
sys.exit(not (exits > 100 and returns >= exits - 1 and begins > 0 and not bad))
PY
shape_rc=$?
check "synth's exits return from vmx_vmexit, restarts begin at vmx_vcpu_run+2 (exits, returns, restarts, other: $(cat "$TMP/shape"))" \
	test $shape_rc -eq 0
calls_agree exits "exit-heavy recording"
# the stub's functions are never a random target: kernel code called into
# vmx_vcpu_run (a nested run loop that never returned) or __vmx_vcpu_run
# before synth left them out (2 such branches in this recording then)
"$VMTRACE" synth -o "$TMP/picks.data" --size 256K --vcpus 2 --seed 2 --host-code "$HOST_CODE" \
	--guest-code "$GUEST_CODE" --branches "$TMP/picks.branches" >/dev/null 2>&1
"$PYTHON3" - "$TMP/picks.branches" >"$TMP/picks" 2>&1 <<'PY'
import sys
stub = (0xffffffffc0a00000, 0xffffffffc0a0000a, 0xffffffffc0a0000f)
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith('#')]
into = sum(r[2] in ('call', 'jump', 'return') and int(r[4], 16) in stub and
           not 0xffffffffc0a00000 <= int(r[3], 16) < 0xffffffffc0a01000 for r in rows)
print(len(rows), into)
sys.exit(not (len(rows) > 1000 and into == 0))
PY
picks_rc=$?
check "no branch from outside the stub into its functions (branches, such: $(cat "$TMP/picks"))" test $picks_rc -eq 0
# host code without vmx_vcpu_run (an older stub's symbols): the walk
# starts at vmx_vmexit, and - no call there - restarts there too
mkdir "$TMP/nostart" && cp "$HOST_CODE"/* "$TMP/nostart/" &&
	grep -v ' vmx_vcpu_run\|__vmx_vcpu_run' "$HOST_CODE/kallsyms" >"$TMP/nostart/kallsyms"
"$VMTRACE" synth -o "$TMP/nostart.data" --size 64K --vcpus 1 --host-code "$TMP/nostart" \
	--guest-code "$GUEST_CODE" --branches "$TMP/nostart.branches" >/dev/null 2>&1
check "without vmx_vcpu_run: synth exit 0" test $? -eq 0
"$PYTHON3" - "$TMP/nostart.branches" >"$TMP/nostart.out" 2>&1 <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith('#')]
first = int(rows[0][3], 16) if rows else None
begins = [int(r[4], 16) for r in rows if r[2] == 'trace-begin']
print('%#x' % first if first else '-', len(begins), len(set(begins)))
sys.exit(not (first == 0xffffffffc0a0000f and begins and set(begins) == {0xffffffffc0a0000f}))
PY
nostart_rc=$?
check "... the walk starts and restarts at vmx_vmexit (first branch's source, restarts, their targets: $(cat "$TMP/nostart.out"))" \
	test $nostart_rc -eq 0
"$VMTRACE" synth -o "$TMP/x.data" --size 64K --call-depth 4 >/dev/null 2>&1
check "--call-depth without real code: usage error (exit 2)" test $? -eq 2
check "... nothing written" test ! -e "$TMP/x.data"
finish
