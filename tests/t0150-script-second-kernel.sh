#!/bin/sh
# vmtrace script equals perf script and the ground truth when host and
# guest run different kernels: the Debian 6.1 kernel's code and Debian 12's
# 6.12 (cloud flavour; another version: other code, other functions at
# other addresses, kallsyms tables laid out anew - tests/kernel-code.py
# reads both), each relocated as tests/code-lib.sh does (host +0xe00000 with
# the KVM stand-in, guest +0x2000000: the two overlap).  Rows: a 6.1 host
# with a 6.12 guest (per thread timed and timeless, per CPU timed, CYC with
# two VMs), and the other way round; each compared as t0090 (--itrace=be, time
# included on the timed rows), t0049 (--call-ret-trace) and --insn-trace
# do, against perf and the branches synth took.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_perf
need_python
make_code_dirs
make_k2_dirs

# compare NAME MODE OPTION COMPARE-OPTIONS...: perf and vmtrace script of
# $TMP/NAME.data with OPTION against each other and the ground truth
compare() {
	cn=$1 cm=$2 copt=$3
	shift 3
	# shellcheck disable=SC2086
	timeout 300 "$PERF" script -i "$TMP/$cn.data" --guestkallsyms "$gc/kallsyms" $copt \
		>"$TMP/$cn.$cm.perf" 2>"$TMP/$cn.$cm.perf.err"
	check "$cn $copt: perf script exit 0" test $? -eq 0
	# shellcheck disable=SC2086
	"$VMTRACE" script "$TMP/$cn.data" --guestkallsyms "$gc/kallsyms" $copt >"$TMP/$cn.$cm.vt" \
		2>"$TMP/$cn.$cm.vt.err"
	check "$cn $copt: vmtrace script exit 0" test $? -eq 0
	"$PYTHON3" "$top_srcdir/tests/script-compare.py" "$@" "$TMP/$cn.$cm.perf" "$TMP/$cn.$cm.vt" \
		"$TMP/$cn.branches" >"$TMP/$cn.$cm.cmp" 2>&1
	ck_rc=$?
	check "$cn $copt: vmtrace = perf = ground truth ($(head -1 "$TMP/$cn.$cm.cmp"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/$cn.$cm.cmp"
}

while read -r name opts; do
	[ -n "$name" ] || continue
	asan_skip "$name" k2-cpu-4vcpu-2cpu-timed k2r-thread-2vcpu-timed && continue
	case $name in
	k2-*) hc=$HOST_CODE gc=$GUEST_CODE_K2 ;;     # a 6.1 host, a 6.12 guest
	*) hc=$HOST_CODE_K2 gc=$GUEST_CODE ;;        # a 6.12 host, a 6.1 guest
	esac
	# shellcheck disable=SC2086
	"$VMTRACE" synth -o "$TMP/$name.data" --size 128K --host-code "$hc" --guest-code "$gc" \
		--branches "$TMP/$name.branches" $opts 2>/dev/null || { fail "$name: synth"; continue; }
	fields=comm,tid,cpu,time,ip,sym,symoff,dso,addr tm=--time pc="" nd=""
	case $opts in
	*--timeless*) fields=comm,tid,cpu,ip,sym,symoff,dso,addr tm="" ;;   # perf refuses time there
	*) "$VMTRACE" correlate --in-place "$TMP/$name.data" >/dev/null 2>&1
	   check "$name: vmtrace correlate --in-place" test $? -eq 0 ;;
	esac
	case $opts in *--per-cpu*) pc=--per-cpu nd=--no-depth ;; esac
	# shellcheck disable=SC2086
	compare "$name" b "--itrace=be -F $fields" $tm $pc
	check "$name: guest code decoded and named ($(grep -c 'guest.kernel.kallsyms' "$TMP/$name.b.vt") lines)" \
		test "$(grep -c '\[guest.kernel.kallsyms\]' "$TMP/$name.b.vt")" -ge 1000
	# shellcheck disable=SC2086
	compare "$name" ret --call-ret-trace --time $pc --calls=ret $nd
	# shellcheck disable=SC2086
	compare "$name" insn --insn-trace --time $pc --insns
done <<'CONFIGS'
k2-thread-2vcpu-timed        --vcpus 2 --psb-period 1
k2-cpu-4vcpu-2cpu-timed      --vcpus 4 --per-cpu --cpus 2 --psb-period 0 --seed 5
k2-thread-2vcpu-timeless     --vcpus 2 --timeless --seed 7
k2-thread-2vm-cyc            --vcpus 2 --vms 2 --cyc --psb-period 0
k2r-thread-2vcpu-timed       --vcpus 2 --psb-period 1 --seed 9
CONFIGS

# the 6.12 guest's lines name functions the 6.1 kernel does not have
check "6.12 guest code: functions 6.1 lacks among its lines' symbols" "$PYTHON3" -c "
import re, sys
old = {l.split()[2] for l in open('$GUEST_CODE/kallsyms')}
new = {l.split()[2] for l in open('$GUEST_CODE_K2/kallsyms')}
seen = set(re.findall(r'=> +[0-9a-f]+ ([^ +]+)\+0x[0-9a-f]+ \(\[guest.kernel.kallsyms\]\)', open('$TMP/k2-thread-2vcpu-timed.b.vt').read()))
only = sorted(seen & new - old)
print('#', len(seen), 'guest functions entered,', len(only), 'only in 6.12, e.g.', only[:3])
sys.exit(0 if len(only) >= 10 else 1)"

# the two kernels are not one: a 6.12 guest decoded with the 6.1 guest
# image gives errors (the image is wrong), with its own none
"$VMTRACE" script "$TMP/k2-thread-2vcpu-timed.data" --guestkallsyms "$GUEST_CODE/kallsyms" >"$TMP/wrong.vt" \
	2>"$TMP/wrong.err"
rc=$?
check "the 6.12 guest with the 6.1 guest image: exit 3, decode errors ($(grep -c 'instruction trace error' "$TMP/wrong.vt"))" \
	sh -c "test $rc -eq 3 && grep -q 'instruction trace error' '$TMP/wrong.vt' && ! grep -q 'instruction trace error' '$TMP/k2-thread-2vcpu-timed.b.vt'"
finish
