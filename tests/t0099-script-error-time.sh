#!/bin/sh
# Decode errors carry the time and the thread where the decoder stood, as
# perf's error lines do: on a corrected, timed recording with corrupt AUX
# data, every error line of `vmtrace script --itrace=e` has the tid perf
# prints for the error at the same ip and a time within 10 us of perf's
# (before: time 0, pid -1, tid 0 - the error's time was never set, so it
# sorted before every switch record).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
need_perf
make_code_dirs

# --seed 4: where corruption sends the flow to an unmapped address, perf's
# error line names that address and vmtrace's the last IP it decoded (a
# difference of its own, not of time): s10H's synth changes gave seeds 1-3
# such a first error in one thread; seed 4's first errors are at code both
# decoders name alike
code_recording err 256K --vcpus 2 --seed 4 || finish
python3 "$top_srcdir/tests/aux-corrupt.py" "$TMP/err.data/data"
"$VMTRACE" script "$TMP/err.data" --guestkallsyms "$GUEST_CODE/kallsyms" --itrace=e >"$TMP/vt" 2>/dev/null
"$PERF" script -i "$TMP/err.data" --guestkallsyms "$GUEST_CODE/kallsyms" --itrace=e >"$TMP/perf" 2>/dev/null
# each thread's first error (before corruption sends perf's clock astray:
# its later error times jump by seconds) against perf's errors at the same
# ip and tid: the closest one's time
python3 - "$TMP/vt" "$TMP/perf" >"$TMP/cmp" <<'PY'
import re, sys
pat = re.compile(r'time (\S+) cpu (-?\d+) pid (-?\d+) tid (-?\d+) ip (0x[0-9a-f]+)')
def errs(p):
    return [m.groups() for m in map(pat.search, open(p)) if m]
vt, perf = errs(sys.argv[1]), errs(sys.argv[2])
firsts = {}
for e in vt:
    firsts.setdefault(e[3], e)
near = 0
for t, c, p, tid, ip in firsts.values():
    d = [abs(float(pt) - float(t)) for pt, pc, pp, ptid, pip in perf if pip == ip and ptid == tid]
    near += bool(d) and min(d) < 10e-6
print(len(vt), sum(float(e[0]) == 0 for e in vt), sum(e[3] in ('0', '-1') for e in vt), len(firsts), near)
PY
read -r nerr zero notid threads near <"$TMP/cmp"
check "corrupt AUX: vmtrace prints decode errors ($nerr)" test "$nerr" -gt 0
check "no error line has time 0 ($zero of $nerr)" test "$zero" -eq 0
check "every error line names its vCPU thread ($notid of $nerr without)" test "$notid" -eq 0
check "each thread's first error is one perf prints (ip, tid) within 10 us ($near of $threads)" test "$near" -eq "$threads"
finish
