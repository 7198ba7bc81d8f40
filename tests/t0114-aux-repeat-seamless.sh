#!/bin/sh
# tests/aux-repeat.py --seamless, the benchmarks' large recordings of real
# kernel code in seconds: a timed per-thread synth recording's AUX data
# repeated 1 and 4 times (each copy from the first PSB+ to the last one,
# joined by FUP TIP.PGD TIP.PGE, TSCs shifted per copy) decodes without an
# error in perf and in vmtrace, and 4 copies give exactly 4 times the 1
# copy's perf lines of every kind (flags and target) and vmtrace's exits and
# instructions per vCPU, over 4 times the wall time (time goes on).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
need_perf
make_code_dirs

# a packet whose last bytes are 02 82 just before a PSB (a TIP's IP): the
# PSB is the last 16 bytes of the 02 82 run (the 16M walk of make bench
# had one)
"$PYTHON3" - "$top_srcdir/tests/aux-repeat.py" >"$TMP/psb" 2>&1 <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("ar", sys.argv[1])
ar = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ar)
def psb_plus(tsc, ip):
    return ar.PSB + b"\x19" + tsc.to_bytes(7, "little") + b"\x7d" + ip.to_bytes(6, "little") + b"\x02\x23"
tip = bytes([0x71, 0x10, 0x20, 0x30, 0x40, 0x02, 0x82])
s = psb_plus(1000, 0xc0a00000) + tip + psb_plus(2000, 0x40028230) + psb_plus(3000, 0xc0a00000)
seg, tscs, span, times = ar.seamless_segment(s)
print(times)
sys.exit(0 if [v for _, v in times] == [1000, 2000, 3000] and span == 2000 else 1)
PY
rc=$?
check "the PSB after a packet ending in 02 82 is found ($(tail -1 "$TMP/psb"))" test $rc -eq 0

G="--guestkallsyms $GUEST_CODE/kallsyms"
code_recording base 256K --vcpus 2 --seed 7 || finish
for k in 1 4; do
	cp -r "$TMP/base.data" "$TMP/x$k.data" &&
		"$PYTHON3" "$top_srcdir/tests/aux-repeat.py" --seamless "$TMP/base.data/data" "$TMP/x$k.data/data" $k \
			>"$TMP/x$k.out" || fail "aux-repeat --seamless $k"
	# shellcheck disable=SC2086
	"$PERF" script -i "$TMP/x$k.data" $G --itrace=be -F tid,flags,addr >"$TMP/x$k.perf" 2>&1
	check "perf decodes $k copies without an error" test "$(grep -c 'trace error' "$TMP/x$k.perf")" -eq 0
	# shellcheck disable=SC2086
	"$VMTRACE" report "$TMP/x$k.data" $G --json >"$TMP/x$k.report" 2>"$TMP/x$k.err"
	check "vmtrace report decodes $k copies without an error (exit 0)" test $? -eq 0
done
read -r copies _ <"$TMP/x4.out"
check "4 copies made ($copies)" test "$copies" = 4
# perf's lines by kind: flags and target, the time and tid left out
kinds() { sed 's/^ *[0-9]* *//' "$1" | sort | uniq -c | sort -k2; }
kinds "$TMP/x1.perf" | awk '{ $1 = 4 * $1; print }' >"$TMP/x1.kinds4"
kinds "$TMP/x4.perf" | awk '{ $1 = $1; print }' >"$TMP/x4.kinds"
check "perf: 4 copies give 4 times every kind of line ($(wc -l <"$TMP/x1.perf") -> $(wc -l <"$TMP/x4.perf") lines)" \
	cmp -s "$TMP/x1.kinds4" "$TMP/x4.kinds"
"$PYTHON3" - "$TMP/x1.report" "$TMP/x4.report" >"$TMP/scale" 2>&1 <<'PY'
import json, sys
a, b = (json.load(open(p))["vcpus"] for p in sys.argv[1:3])
ok = len(a) == len(b) == 2
for x, y in zip(a, b):
    print("vCPU %d: exits %d -> %d, instructions %d -> %d, wall %d -> %d" % (
        x["vcpu"], x["exits"], y["exits"], x["guest_insns"] + x["host_insns"], y["guest_insns"] + y["host_insns"],
        x["wall"], y["wall"]))
    ok = ok and x["exits"] > 0 and y["exits"] == 4 * x["exits"]
    # exactly: the instructions after a copy's last branch that only its
    # trailing TNT bits prove count at the end of the data (flow end) as
    # they do inside the flow of 4 copies
    ok = ok and y["guest_insns"] + y["host_insns"] == 4 * (x["guest_insns"] + x["host_insns"])
    ok = ok and y["wall"] >= 4 * x["wall"]
sys.exit(0 if ok else 1)
PY
rc=$?
check "report: 4 times the exits and instructions per vCPU, over 4 times the wall time" test $rc -eq 0
sed 's/^/#   /' "$TMP/scale"
finish
