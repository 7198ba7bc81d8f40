#!/bin/sh
# vmtrace script -F +ipc: perf's "IPC: x.yy (insns/cycles)" from CYC
# packets, on the same lines as perf script -F +ipc prints it, with the
# same counts - branches (--itrace=b), --call-trace and --call-ret-trace,
# per thread and per CPU, one and two VMs (VM entries and exits, return
# thunks, conditional jumps whose first TNT bit is not taken), with a CYC
# threshold (perf keeps cycles only from a CYC right before), timeless,
# with overflows (the trace begin where tracing resumes takes the FUP's
# cycles and the instructions before the OVF), small AUX buffers (a VM
# entry right after a PSB+ whose FUP is the VMRESUME's IP: that FUP
# decides nothing; the entry's TIP does).  Lines
# compared per thread without their times (tests/t0093: those differ
# near guest switches on their own).  Traces without CYC: perf estimates
# cycles from MTC and prints an IPC; vmtrace prints none (README).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
code_vs_perf

# per_thread FILE: the lines of FILE by thread (tid), times and padding
# dropped, perf's power events and "Overflow packet" error lines left out
# (README: vmtrace prints no error line for an OVF)
per_thread() {
	"$PYTHON3" - "$1" <<'PY'
import re, sys
seq = {}
head = re.compile(rb"\s*(.*?)\s+(\d+)\s+(\[-?\d+\]\s+)?(\d+\.\d+:)?")
skip = re.compile(rb"psb offs:|cbr:|Overflow packet")
with open(sys.argv[1], "rb") as f:     # bytes: call traces are 100s of MB of indentation
    for line in f:
        if skip.search(line):
            continue
        m = head.match(line)
        if m:
            seq.setdefault(m.group(2), []).append(b" ".join(line[m.end():].split()))
out = sys.stdout.buffer
for tid in sorted(seq):
    for rest in seq[tid]:
        out.write(tid + b" " + rest + b"\n")
PY
}

while read -r name size opts; do
	[ -n "$name" ] || continue
	f=$TMP/$name.data
	# shellcheck disable=SC2086
	code_recording "$name" "$size" $opts || continue
	for mode in b call ret; do
		# the sanitizer suite: the call traces of one row (the time is
		# perf's and the comparison's, the code paths the same)
		[ $mode = b ] || [ "$name" = thread-2vcpu-cyc ] || ! asan_build || continue
		case $mode in
		b) opt="--itrace=b -F comm,tid,ip,sym,symoff,addr,ipc" ;;
		call) opt="--call-trace -F +ipc" ;;
		ret) opt="--call-ret-trace -F +ipc" ;;
		esac
		# shellcheck disable=SC2086
		timeout 300 "$PERF" script -i "$f" $G $opt >"$TMP/$name.$mode.perf" 2>"$TMP/$name.$mode.perf.err"
		check "$name $opt: perf script exit 0" test $? -eq 0
		# shellcheck disable=SC2086
		"$VMTRACE" script "$f" $G $opt >"$TMP/$name.$mode.vt" 2>"$TMP/$name.$mode.vt.err"
		check "$name $opt: vmtrace script exit 0" test $? -eq 0
		per_thread "$TMP/$name.$mode.perf" >"$TMP/$name.$mode.perf.t"
		per_thread "$TMP/$name.$mode.vt" >"$TMP/$name.$mode.vt.t"
		nipc=$(grep -c 'IPC: ' "$TMP/$name.$mode.vt.t")
		case $name in
		*-mtc)
			check "$name $opt: no IPC without CYC (perf's: $(grep -c 'IPC: ' "$TMP/$name.$mode.perf.t"))" \
				test "$nipc" -eq 0
			;;
		*)
			check "$name $opt: IPC on $nipc lines" test "$nipc" -gt 20
			check "$name $opt: the lines and their IPC = perf's, thread by thread" \
				test_cmp "$TMP/$name.$mode.perf.t" "$TMP/$name.$mode.vt.t"
			;;
		esac
	done
done <<'CONFIGS'
thread-2vcpu-cyc        48K  --vcpus 2 --cyc --psb-period 0 --seed 3
thread-2vm-cyc          48K  --vcpus 2 --vms 2 --cyc --psb-period 0 --seed 4
cpu-2vcpu-cyc           48K  --vcpus 2 --per-cpu --cpus 2 --cyc --psb-period 0 --seed 5
thread-2vcpu-thresh     48K  --vcpus 2 --cyc --cyc-thresh 3 --psb-period 0 --seed 7
thread-1vcpu-timeless   48K  --vcpus 1 --cyc --timeless --seed 8
thread-2vcpu-ovf        48K  --vcpus 2 --cyc --timeless --ovf-every 6000 --seed 9
thread-1vcpu-mtc        48K  --vcpus 1 --seed 6
thread-2vcpu-smallbuf   256K --vcpus 2 --cyc --buffer-size 8K --seed 12
CONFIGS

# after an overflow: the branch before it whose packet came first (its
# target: where tracing resumed) and the trace begin there are synth's
# truth, not only perf's lines
"$PYTHON3" - "$TMP/thread-2vcpu-ovf.b.vt" "$TMP/thread-2vcpu-ovf.branches" >"$TMP/ovf.check" 2>&1 <<'PY'
import re, sys
truth = set()
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) >= 5 and not line.startswith("#"):
        truth.add((f[1], int(f[3], 16), int(f[4], 16)))
last, begins, before = {}, 0, 0
for line in open(sys.argv[1]):
    m = re.match(r"\s*(.*?)\s+(\d+)\s+([0-9a-f]+) .*=>\s+([0-9a-f]+) ", line)
    if not m:
        continue
    tid, frm, to = m.group(2), int(m.group(3), 16), int(m.group(4), 16)
    if frm == 0 and tid in last:
        begins += 1
        pf, pt = last[tid]
        if pt == to:                 # the branch printed before the resume
            assert (tid, pf, pt) in truth, ("not in the truth", tid, hex(pf), hex(pt))
            before += 1
    last[tid] = (frm, to)
assert begins > 0 and before > 0, (begins, before)
print(begins, "trace begins,", before, "branches before them in the truth")
PY
ck_rc=$?
check "overflows: the branch before each and its trace begin = synth's truth ($(cat "$TMP/ovf.check"))" test $ck_rc -eq 0

# --time: perf makes no sample outside the range - the lines with an IPC
# count from the last one inside it; but perf also starts decoding at a
# PSB shortly before the range, so each thread's first IPC in it counts
# from there (vmtrace's from the trace's start): that one is set aside
f=$TMP/thread-2vcpu-cyc.data
mid=$("$PYTHON3" - "$TMP/thread-2vcpu-cyc.call.perf" <<'PY'
import re, sys
times = []
for line in open(sys.argv[1]):
    m = re.search(r"\s(\d+\.\d+):", line)
    if m:
        times.append(m.group(1))
print(times[len(times) // 2] + ",")
PY
)
# shellcheck disable=SC2086
"$PERF" script -i "$f" $G --call-trace -F +ipc --time "$mid" >"$TMP/time.perf" 2>/dev/null
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --call-trace -F +ipc --time "$mid" >"$TMP/time.vt" 2>/dev/null
for w in perf vt; do
	per_thread "$TMP/time.$w" | awk '/IPC: / && !seen[$1]++ { sub(/IPC: .*/, "IPC: first") } { print }' \
		>"$TMP/time.$w.t"
done
nipc=$(grep -c 'IPC: ' "$TMP/time.vt.t")
check "--call-trace --time $mid: IPC on $nipc lines" test "$nipc" -gt 5
check "--call-trace --time $mid: the lines and their IPC = perf's (the first aside)" \
	test_cmp "$TMP/time.perf.t" "$TMP/time.vt.t"

# one IPC sample by hand: the counts on a line are the instructions and
# cycles since the thread's previous line with an IPC (its first line's:
# since the trace began), and x.yy their ratio cut to two decimals
"$PYTHON3" - "$TMP/thread-2vcpu-cyc.b.vt" >"$TMP/ratio.check" 2>&1 <<'PY'
import re, sys
n = 0
for line in open(sys.argv[1]):
    m = re.search(r"IPC: (\d+)\.(\d\d) \((\d+)/(\d+)\) $", line.rstrip("\n"))
    if m:
        whole, frac, insns, cycles = map(int, m.groups())
        assert whole * 100 + frac == insns * 100 // cycles, line
        n += 1
assert n > 20, n
print(n, "ratios")
PY
ck_rc=$?
check "IPC's x.yy is insns*100/cycles cut, as perf's ($(cat "$TMP/ratio.check"))" test $ck_rc -eq 0

"$VMTRACE" script "$TMP/thread-2vcpu-cyc.data" $G --call-trace -F +sym >"$TMP/out" 2>&1
check "--call-trace -F +sym: usage error (only +ipc goes with call traces)" test $? -eq 2

finish
