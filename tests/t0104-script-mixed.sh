#!/bin/sh
# vmtrace script with instructions and branches in one --itrace (bi0ns,
# i0nsb, cri0ns, bei0ns with -F flags and addr): the same lines in the same
# order as perf script - every instruction, the branch's own instruction
# with its flags and target (a conditional jump not taken: its flags),
# then the branch (a VM entry or exit as two lines; c and r keep only
# calls and returns, the instructions all); per thread (per CPU and
# thread), time aside, on recordings of real kernel code timed (per thread
# and per CPU) and timeless; byte for byte on the timeless one.  The
# sanitizer build runs every mix on one recording and bi0ns on the others
# (perf and the comparison take the time).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
code_vs_perf
while read -r name opts; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	code_recording "$name" 32K $opts || continue
	f=$TMP/$name.data pc= t=time,
	case $opts in *--per-cpu*) pc=--per-cpu ;; esac
	case $opts in *--timeless*) t= ;; esac
	while read -r it fl; do
		[ -n "$it" ] || continue
		[ "$it" = bi0ns ] || [ "$name" = thread-2vcpu-timed ] || ! asan_build || continue
		fl=$(echo "$fl" | sed "s/TIME,/$t/")
		timeout 300 "$PERF" script -i "$f" $G --itrace="$it" -F "$fl" >"$TMP/perf.out" 2>"$TMP/perf.err"
		"$VMTRACE" script "$f" $G --itrace="$it" -F "$fl" >"$TMP/vt.out" 2>"$TMP/vt.err"
		check "$name --itrace=$it -F $fl: vmtrace exit 0" test $? -eq 0
		# shellcheck disable=SC2086
		"$PYTHON3" "$top_srcdir/tests/script-compare.py" --time --lines "$TMP/perf.out" "$TMP/vt.out" $pc >"$TMP/cmp" 2>&1
		ck_rc=$?
		check "$name --itrace=$it: vmtrace = perf ($(head -1 "$TMP/cmp"))" test $ck_rc -eq 0 ||
			sed 's/^/#   /' "$TMP/cmp"
		case $opts in *--timeless*)
			check "$name --itrace=$it: byte for byte" test_cmp "$TMP/perf.out" "$TMP/vt.out" ;;
		esac
	done <<'MIXES'
bi0ns   comm,tid,cpu,TIME,event,flags,ip,sym,symoff,dso,addr,insn
i0nsb   comm,tid,cpu,TIME,ip,sym,symoff,dso,addr
cri0ns  comm,tid,cpu,TIME,event,flags,ip,sym,symoff,dso,addr
bei0ns  comm,tid,cpu,TIME,period,event,ip,sym,dso,insn
MIXES
done <<'CONFIGS'
thread-1vcpu-timeless   --vcpus 1 --timeless
thread-2vcpu-timed      --vcpus 2 --psb-period 1 --seed 5
cpu-4vcpu-2cpu-timed    --vcpus 4 --per-cpu --cpus 2 --psb-period 0 --size 128K
thread-2vcpu-cyc        --vcpus 2 --cyc --psb-period 0 --seed 9
CONFIGS

# the instructions of a mix are --itrace=i0ns's, its branches --itrace=b's
f=$TMP/thread-2vcpu-timed.data
"$VMTRACE" script "$f" $G --itrace=bi0ns -F tid,ip,addr >"$TMP/mix" 2>&1
"$VMTRACE" script "$f" $G --itrace=i0ns -F tid,ip,addr >"$TMP/insns" 2>&1
"$VMTRACE" script "$f" $G --itrace=b -F tid,ip,addr >"$TMP/branches" 2>&1
check "bi0ns: i0ns's instructions and b's branches ($(wc -l <"$TMP/mix") lines)" sh -c \
	"grep -v ' => ' '$TMP/mix' | cmp -s - '$TMP/insns' && grep ' => ' '$TMP/mix' | cmp -s - '$TMP/branches'"
finish
