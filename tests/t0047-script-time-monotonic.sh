#!/bin/sh
# vmtrace script's time never goes backwards within a queue (a thread; a
# CPU) even where libipt's own estimate does - perf's rule: a sample
# earlier than its queue's last one gets the last one's time.
# 1. A CYC threshold (synth --cyc-thresh: a CYC only after 2^(N-1) cycles):
#    CYCs span MTCs and libipt estimates their share of each MTC period from
#    its calibration; it runs ahead and the next MTC sets it back (blind
#    query decoding of a --cyc-thresh 8 queue: ~1100 backward steps of up
#    to ~130 ticks).  vmtrace: none, and still within 800 ticks of the
#    truth and of perf (tests/time-check.py; with a threshold not perf's to
#    the nanosecond, as CYC without one is, t0046: libipt and perf then
#    estimate from cycles their own ways).
# 2. A timed recording not corrected (vmtrace correlate not run): the guest
#    TSC in a PSB+ is the guest's, far below host time; libipt takes it, so
#    vmtrace stepped back by ~650 s (perf: "Suppressing bad timestamp").
#    Now the time holds until it is host time again: no backward step, as
#    in perf.
# 3. Trace ends and starts (TIP.PGD, TIP.PGE) carry their event's time, not
#    the time libipt read ahead to (the next packet's: ~500 ticks late):
#    their times are those of the truth's within 100 ticks.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_perf
need_python
make_code_dirs


time_rows <<'CONFIGS'
thread-cyc-thresh8    --vcpus 2 --cyc --cyc-thresh 8 --mtc-period 0 --psb-period 0
cpu-cyc-thresh5       --vcpus 4 --per-cpu --cpus 2 --cyc --cyc-thresh 5 --mtc-period 3 --psb-period 0 --seed 4
CONFIGS

# 2. not corrected: guest TSCs as the guest read them
"$VMTRACE" synth -o "$TMP/raw.data" --size 128K --vcpus 4 --cyc --mtc-period 0 --host-code "$HOST_CODE" \
	--guest-code "$GUEST_CODE" --branches "$TMP/raw.branches" >/dev/null 2>&1 || fail "raw: synth"
check "raw: guest TSC packets in the recording" sh -c "'$VMTRACE' correlate --dry-run '$TMP/raw.data' --json | grep -q '\"guest_tsc_packets\": [1-9]'"
time_decode raw
"$PYTHON3" "$top_srcdir/tests/time-check.py" "$TMP/raw.branches" "$TMP/raw.json" "$TMP/raw.perf" --order-only \
	>"$TMP/raw.time" 2>&1
check "raw: no backward step within a thread (vmtrace, perf)" test $? -eq 0
sed 's/^/#   /' "$TMP/raw.time"

# 3. trace end and start (synth's host restarts: FUP+TIP.PGD, 500 ticks, TIP.PGE)
"$PYTHON3" - "$TMP/thread-cyc-thresh8.branches" "$TMP/thread-cyc-thresh8.json" >"$TMP/trace" 2>&1 <<'PY'
import collections, json, sys
want = collections.defaultdict(list)
for l in open(sys.argv[1]):
    f = l.split()
    if not l.startswith('#') and f[2] in ('trace-end', 'trace-begin'):
        want[int(f[1])].append((f[2], (int(f[9]) >> 10) * 341 + (((int(f[9]) & 1023) * 341) >> 10)))
got = collections.defaultdict(list)
for l in open(sys.argv[2]):
    e = json.loads(l)
    if e['kind'] in ('trace-end', 'trace-begin'):
        got[e['tid']].append((e['kind'], e['time']))
assert want and got.keys() == want.keys(), (want.keys(), got.keys())
worst = 0
for tid in want:
    assert [k for k, _ in got[tid]] == [k for k, _ in want[tid]], tid
    worst = max([worst] + [abs(a[1] - b[1]) * 1024 / 341 for a, b in zip(got[tid], want[tid])])
assert worst <= 100, worst
print('ok: %d trace ends and starts, largest difference %.0f ticks' % (sum(map(len, want.values())), worst))
PY
check "trace end/start times = the truth's within 100 ticks ($(tail -1 "$TMP/trace"))" grep -q '^ok' "$TMP/trace"
finish
