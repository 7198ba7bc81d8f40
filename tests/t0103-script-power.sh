#!/bin/sh
# vmtrace script --itrace=p prints perf's power events - a psb line at every
# PSB+ (its offset in the queue's AUX data, the IP its FUP gives) and a cbr
# line where the core:bus ratio first shows and changes (the MHz perf
# derives from the recording's TSC conversion, the percentage of the
# maximum non-turbo ratio) - in perf script's shape: the same lines as
# perf per thread (time aside: each decoder estimates its own), with its
# default fields and with -F including synth, flags, addr and insn; alone
# and among branches (bpe, -F).  Recordings of real kernel code: timeless,
# timed per thread with CYC and a ratio that changes (synth --cbr-vary),
# timed per CPU with threads switching, small AUX buffers (offsets count
# over a queue's buffers), and decode windows of 4 KiB print what one
# window prints.  A PSB+ right before a VM exit, a disable or the end of
# the trace: its lines where perf puts them.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
code_vs_perf
ALL=comm,tid,cpu,time,event,flags,synth,ip,sym,symoff,dso,addr,insn
while read -r name opts; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	code_recording "$name" 64K $opts || continue
	f=$TMP/$name.data pc= all=$ALL
	case $opts in *--per-cpu*) pc=--per-cpu ;; esac
	case $opts in *--timeless*) all=comm,tid,cpu,event,flags,synth,ip,sym,symoff,dso,addr,insn ;; esac
	for it in pe bpe; do
		# (with branches only -F: vmtrace's default branch fields are not perf's default)
		for fl in "" "-F $all"; do
			[ "$it$fl" = bpe ] && continue
			# shellcheck disable=SC2086
			timeout 300 "$PERF" script -i "$f" $G --itrace=$it $fl >"$TMP/perf.out" 2>"$TMP/perf.err"
			# shellcheck disable=SC2086
			"$VMTRACE" script "$f" $G --itrace=$it $fl >"$TMP/vt.out" 2>"$TMP/vt.err"
			check "$name --itrace=$it ${fl:-(default fields)}: vmtrace exit 0" test $? -eq 0
			# (--time but with CYC and changing ratios: libipt converts
			# cycles to time a nanosecond apart from perf, now and then)
			tm=--time
			case $name in *cbr*) tm= ;; esac
			# shellcheck disable=SC2086
			"$PYTHON3" "$top_srcdir/tests/script-compare.py" $tm --lines "$TMP/perf.out" "$TMP/vt.out" $pc \
				>"$TMP/cmp" 2>&1
			ck_rc=$?
			check "$name --itrace=$it ${fl:-(default fields)}: vmtrace = perf ($(head -1 "$TMP/cmp"))" \
				test $ck_rc -eq 0 || sed 's/^/#   /' "$TMP/cmp"
		done
	done
	check "$name: psb and cbr lines" sh -c "grep -q ' psb offs: ' '$TMP/vt.out' && grep -q ' cbr: ' '$TMP/vt.out'"
done <<'CONFIGS'
thread-1vcpu-timeless   --vcpus 1 --timeless
thread-2vcpu-cyc-cbr    --vcpus 2 --psb-period 0 --cyc --cbr-vary
cpu-4vcpu-2cpu-timed    --vcpus 4 --per-cpu --cpus 2 --psb-period 0 --size 128K
thread-2vcpu-bufs       --vcpus 2 --psb-period 0 --buffer-size 4K --cbr-vary
CONFIGS

f=$TMP/thread-2vcpu-cyc-cbr.data
# shellcheck disable=SC2086
n=$("$VMTRACE" script "$f" $G --itrace=p | grep -c ' cbr: ')
check "--cbr-vary: the ratio changes, perf and vmtrace see the changes ($n cbr lines)" test "$n" -gt 4
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --itrace=bei0nsp -F "$ALL" >"$TMP/one.out" 2>&1
# shellcheck disable=SC2086
VMTRACE_DECODE_WINDOW=4096 "$VMTRACE" script "$f" $G --itrace=bei0nsp -F "$ALL" >"$TMP/win.out" 2>&1
check "4 KiB decode windows: the same power events and instructions" cmp -s "$TMP/one.out" "$TMP/win.out"
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --itrace=p --json >"$TMP/p.json"
check "--itrace=p --json: psb and cbr objects" "$PYTHON3" -c 'import json, sys
k = [json.loads(l)["kind"] for l in open(sys.argv[1])]
assert k and set(k) == {"psb", "cbr"}, set(k)' "$TMP/p.json"

# a PSB+ with no instruction before the next event that moves the flow:
# its psb and cbr lines at the PSB+'s IP, in the machine the PSB+ names,
# as perf prints them - before a VM exit (vmtrace said the host's
# vmx_vmexit), before a TIP.PGD (IP 0), at a queue's very end (left out):
# exit-heavy recordings with a PSB every 2 KiB (each recording checked to
# hold its case: perf -D's packets; seeds 11, 71 and 32 since session 33's
# KVM stub - 3, 9 and 12 before)
psb_case() {
	"$PERF" script -i "$1" -D 2>/dev/null | "$PYTHON3" -c 'import re, sys
want, seq, tid = sys.argv[1], {}, None
for l in sys.stdin:
    m = re.search(r"PERF_RECORD_AUXTRACE .*tid: (\d+)", l)
    if m:
        tid = m.group(1)
        continue
    if "raw event" in l:
        tid = None
    m = re.match(r"\.\s+[0-9a-f]{8}:\s+(?:[0-9a-f]{2} )+\s*(\S.*)$", l)
    if m and tid and not m.group(1).startswith("PAD"):
        seq.setdefault(tid, []).append(m.group(1))
def case(d, i):
    if d[i] != "PSBEND":
        return None
    if i + 1 == len(d):
        return "end"
    if i + 2 < len(d) and d[i + 1].startswith("FUP"):
        if d[i + 2].startswith("TIP.PGD"):
            return "pgd"
        if d[i + 2].startswith("PIP") and "NR=0" in d[i + 2]:
            return "exit"
    return None
sys.exit(0 if any(case(d, i) == want for d in seq.values() for i in range(len(d))) else 1)' "$2"
}
for sc in 11:exit 71:pgd 32:end; do
	s=${sc%:*} c=${sc#*:}
	code_recording "psb-$s" 128K --vcpus 2 --host-steps 6 --psb-period 0 --call-depth 16 --seed "$s" || continue
	psb_case "$TMP/psb-$s.data" "$c"
	check "psb-$s: a PSB+ right before a VM exit, a TIP.PGD or the end ($c) is there" test $? -eq 0
	# shellcheck disable=SC2086
	timeout 300 "$PERF" script -i "$TMP/psb-$s.data" $G --itrace=pe >"$TMP/perf.out" 2>/dev/null
	check "psb-$s: perf script exit 0" test $? -eq 0
	# shellcheck disable=SC2086
	"$VMTRACE" script "$TMP/psb-$s.data" $G --itrace=pe >"$TMP/vt.out" 2>/dev/null
	check "psb-$s: vmtrace script exit 0" test $? -eq 0
	"$PYTHON3" "$top_srcdir/tests/script-compare.py" --time --lines "$TMP/perf.out" "$TMP/vt.out" >"$TMP/cmp" 2>&1
	ck_rc=$?
	check "psb-$s (PSB+ right before an event) --itrace=pe: vmtrace = perf ($(head -1 "$TMP/cmp"))" \
		test $ck_rc -eq 0 || sed 's/^/#   /' "$TMP/cmp"
done
finish
